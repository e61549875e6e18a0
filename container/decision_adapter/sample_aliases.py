"""The published SemIf sample's ``SEMIF_*`` names, read as this adapter's settings.

settings.py declares which of its settings each sample name stands for (``Setting.sample``) and which sample
names mean nothing here; this module reads an environment with them: a sample name read as ours (converted
where the sample's value means something else), a note per sample name for the start-up log, the names
nobody knows, and the sample's one count of requests in flight divided into contexts and the line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from .setting_spec import ADAPTER_PREFIX, LLAMA_PREFIX, SettingsError, parse_int

L, A = LLAMA_PREFIX, ADAPTER_PREFIX
IN_FLIGHT = "SEMIF_MAX_IN_FLIGHT"

Aliases = Mapping[str, tuple[str, Callable[[str], str]]]  # a sample name -> (ours, its value in our terms)


def in_flight(raw: str) -> str:
    """``SEMIF_MAX_IN_FLIGHT``'s value, checked (a whole number, at least 1)."""
    # The sample admits n requests at once and answers the rest 503; here one request per context is
    # evaluated and up to MAX_QUEUE wait, so n is the contexts and the line together (load_settings
    # divides it between them).
    return str(parse_int(raw, IN_FLIGHT, minimum=1))


def _meaning(value: str, name: str) -> str | int:
    """A value as it will be used, so that "-1" and "999" GPU layers (both "all") compare equal."""
    value = value.strip()
    try:
        number = int(value)
    except ValueError:
        return os.path.normpath(value)
    return "all" if name.endswith("N_GPU_LAYERS") and (number < 0 or number >= 999) else number


def read_as_ours(
    env: Mapping[str, str], aliases: Aliases, unused: Mapping[str, str]
) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """The environment with the sample's SEMIF_* names read as ours (``aliases``); a note per known SEMIF_*
    name (``unused``: those that change nothing here, and why), and the SEMIF_* names nobody knows."""
    merged = dict(env)
    notes: list[str] = []
    unknown: list[str] = []
    for name in sorted(n for n in env if n.startswith("SEMIF_")):
        raw = env[name]
        if name in unused:
            notes.append(f"{name} is the published sample's setting; not used here: {unused[name]}")
            continue
        if name not in aliases:
            unknown.append(name)
            continue
        ours, convert = aliases[name]
        value = convert(raw.strip())
        if name == IN_FLIGHT:
            continue  # contexts and line together: divided and checked by load_settings, which knows both
        if env.get(ours, "").strip() and _meaning(env[ours], ours) != _meaning(value, ours):
            raise SettingsError(
                f"{name}={raw} (the published sample's name) and {ours}={env[ours]} disagree; set one of them"
            )
        merged[ours] = value
        notes.append(f"{name}={raw} (the published sample's name) read as {ours}={value}")
    return merged, tuple(notes), tuple(unknown)


def divide_in_flight(given: Mapping[str, str], values: dict[str, Any]) -> str:
    """The sample's n requests in flight in all as contexts (evaluated) plus the line (waiting): the contexts
    are the default, at most n, unless set; the line is the rest unless set. A combination whose contexts and
    line do not add up to n stops the start, naming the settings and a fix. Returns the log's note."""
    n = int(given[IN_FLIGHT].strip())
    parallel_name, queue_name = L + "PARALLEL", A + "MAX_QUEUE"
    parallel_set, queue_set = ((given.get(name) or "").strip() != "" for name in (parallel_name, queue_name))
    if not parallel_set:
        values["parallel"] = min(values["parallel"], n)
    parallel = values["parallel"]
    queue = values["max_queue"] if queue_set else n - parallel
    said = f"{IN_FLIGHT}={n} (the published sample's name: requests in flight in all, evaluated and waiting)"
    contexts = f"{parallel_name}={parallel}" + ("" if parallel_set else " (its default)")
    if queue < 0:  # only a context count set above n leaves less than nothing to wait
        raise SettingsError(
            f"{said} is fewer than {contexts} evaluated at once; set {IN_FLIGHT} to at least "
            f"{parallel} or {parallel_name} to at most {n}, or unset one of them"
        )
    if parallel + queue != n:
        fixes = [f"{queue_name}={n - parallel}"] if n >= parallel else []
        if n > queue:
            fixes.append(f"{parallel_name}={n - queue}")
        raise SettingsError(
            f"{said} and {contexts} evaluated plus {queue_name}={queue} waiting "
            f"({parallel + queue} in all) disagree; set "
            + " or ".join(fixes + [f"{IN_FLIGHT}={parallel + queue}"])
            + f", or unset {IN_FLIGHT}"
        )
    values["max_queue"] = queue
    return (
        f"{IN_FLIGHT}={n} (the published sample's name) read as {parallel_name}={parallel} evaluated and "
        f"{queue_name}={queue} waiting"
    )
