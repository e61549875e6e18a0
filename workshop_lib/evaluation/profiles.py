"""Served calibration: one temperature per ``<question_type>/<band>`` profile, and ``calibration.json``.

The adapter applies a profile's temperature T to the probabilities its order mode serves at
temperature 1: ``softmax(log p / T)``. So the fit here runs on the log of the served
temperature-1 probabilities (``temperature.fit_temperature``, the same NLL, ECE and Brier score as
the benchmark's report), per profile:

* the profile is the question type (``choice``, ``noul``, ``score``) and a band of option counts
  (``2``, ``3-4``, ``5-8``, ``9-16``, ``17+``): a yes/no question and a five-way routing question
  are wrong in different ways;
* the temperature is fitted on the profile's fitting tasks and judged on its held-out ones (with fewer than
  ``MIN_PROFILE_FIT`` fitting tasks, fitted on every profile's together and judged on every held-out one:
  ``temperature_from`` says which); it is kept only
  when at least ``MIN_HELDOUT`` answers are held out and their NLL improves (otherwise the file says
  ``kept: false`` with a ``reason``, and the adapter serves temperature 1 for that profile);
* the prediction-set threshold is split conformal (``conformal.py``) on the held-out answers' served
  probabilities (at the temperature the adapter will serve for the profile), kept only with at least
  ``conformal.min_heldout(alpha)`` of them; its coverage and mean set size on the fitting answers are
  reported beside it;
* the file names the GGUF (sha256), the prompt version and the readout it was fitted for, and the
  order mode: the adapter refuses a file fitted for another model or prompt, and applies a profile only
  to answers of the same readout and order mode.

Everything here is pure: rows from benchmark results in, a JSON document out (and back).
``workshop_lib.evaluation.served`` runs the tasks against an endpoint.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_contract import calibration as contract
from decision_contract.calibration import (
    DEFAULT_ALPHA,
    FILE_NAME,
    FORMAT,
    HELDOUT_KEYS,
    TEMPERATURE_RANGE,
    profile_name,
)
from decision_contract.names import LETTERS, ORDER_MODES, READOUTS

from ..errors import WorkshopError
from . import conformal
from .temperature import MIN_TASKS, fit_temperature, metrics, softmax, split_for_calibration

# The temperatures the adapter accepts (the contract's range): the fit searches 1/T inside it; at 100 an
# answer is all but uniform, which is where a model that reads positions, not content, ends up once it
# is judged on labels.
BETA_RANGE = (1.0 / TEMPERATURE_RANGE[1], 0.999 / TEMPERATURE_RANGE[0])
# A profile is kept only when at least this many held-out answers judged it: below that, a lower
# held-out NLL is the luck of one or two answers (a profile fitted on one task and judged on one
# would otherwise be served), so the file says so and the adapter serves temperature 1 there.
MIN_HELDOUT = 5
# A temperature fitted on fewer answers than this follows their noise (temperature.MIN_TASKS); such a profile
# takes the temperature fitted on every profile's fitting answers together (docs/benchmarks.md, 2026-12-05).
MIN_PROFILE_FIT = MIN_TASKS
OWN, POOLED = "profile", "all profiles"
# A probability of exactly 0 has no logarithm; this floor keeps the row finite and the answer wrong.
_FLOOR = 1e-300


class CalibrationFileError(WorkshopError, ValueError):
    """A calibration file (or the answers it would be fitted on) breaks the format; the message names the field."""


@dataclass(frozen=True)
class Labelled:
    """One labelled answer as the fit sees it: log p per option (task label order) and the expected index."""

    task_id: str
    profile: str
    log_probs: tuple[float, ...]
    target: int


def labelled(result: Any) -> Labelled | None:
    """A benchmark ``TaskResult`` as a fitting row; None for an invalid answer (it has nothing to fit)."""
    if not result.valid or not result.probabilities:
        return None
    labels = list(result.labels)
    row = tuple(math.log(max(float(result.probabilities[label]), _FLOOR)) for label in labels)
    return Labelled(result.task_id, profile_name(result.type, len(labels)), row, labels.index(result.expected))


def _rows(rows: Sequence[Labelled]) -> tuple[list[list[float]], list[int]]:
    return [list(r.log_probs) for r in rows], [r.target for r in rows]


@dataclass(frozen=True)
class Pooled:
    """The temperature fitted on every profile's fitting answers together, and every held-out answer to judge it
    on: what a profile with too few fitting answers of its own takes (``fit_profiles``)."""

    temperature: float
    fit_n: int
    heldout: tuple[Labelled, ...]


def fit_profile(
    fit: Sequence[Labelled], heldout: Sequence[Labelled], alpha: float = DEFAULT_ALPHA, pooled: Pooled | None = None
) -> dict[str, object]:
    """One profile's entry: the temperature fitted on ``fit``, kept only if at least ``MIN_HELDOUT`` answers
    are held out and their NLL improves (with ``pooled``, its temperature judged on all its held-out answers,
    ``heldout_n`` and ``heldout`` counting those); ``reason`` says why a profile is not kept; and the
    prediction-set threshold at level ``alpha`` on the profile's own held-out answers (``conformal``).

    With no held-out answer there is nothing to judge the fit on (``heldout`` null); with fewer than
    ``MIN_HELDOUT`` the figures are reported but the profile is not kept.
    """
    if not fit:
        raise ValueError("a profile needs at least one fitting answer")
    judged: Sequence[Labelled]
    if pooled:
        temperature, fitted_on, judged = pooled.temperature, pooled.fit_n, pooled.heldout
    else:
        temperature, fitted_on, judged = fit_temperature(*_rows(fit), beta_range=BETA_RANGE), len(fit), heldout
    entry: dict[str, object] = {
        "temperature": float(temperature),
        "kept": False,
        "fit_n": len(fit),
        "heldout_n": len(judged),
        "temperature_from": POOLED if pooled else OWN,
        "temperature_fit_n": fitted_on,
        "heldout": None,
        "reason": "no held-out answer to judge it on",
    }
    if judged:
        rows, targets = _rows(judged)
        before, after = metrics(rows, targets, 1.0), metrics(rows, targets, temperature)
        entry["heldout"] = {
            f"{key}_{when}": float(figures[key])
            for key in ("nll", "ece", "brier")
            for when, figures in (("before", before), ("after", after))
        }
        if len(judged) < MIN_HELDOUT:
            entry["reason"] = (
                f"only {len(judged)} held-out answer{'s' if len(judged) > 1 else ''}; a profile is "
                f"kept on at least {MIN_HELDOUT}"
            )
        elif after["nll"] < before["nll"]:
            entry.update(kept=True, reason=None)
        else:
            entry["reason"] = f"held-out NLL does not improve ({before['nll']:.4f} -> {after['nll']:.4f})"
    entry["conformal"] = fit_threshold(fit, heldout, float(temperature) if entry["kept"] else 1.0, alpha)
    return entry


def fit_threshold(
    fit: Sequence[Labelled], heldout: Sequence[Labelled], temperature: float, alpha: float
) -> dict[str, object]:
    """A profile's ``conformal`` entry: the split-conformal threshold on the held-out answers' probabilities
    at ``temperature`` (the one the adapter serves for the profile), kept with enough held-out answers."""
    need = conformal.min_heldout(alpha)
    entry: dict[str, object] = {
        "threshold": None,
        "kept": False,
        "reason": None,
        "heldout_n": len(heldout),
        "temperature": float(temperature),
        "fit_coverage": None,
        "fit_set_size": None,
    }
    q = None
    if heldout:
        probs = [softmax(r.log_probs, temperature) for r in heldout]
        q = conformal.threshold(conformal.nonconformity(probs, [r.target for r in heldout]), alpha)
    if q is None:
        entry["reason"] = (
            f"{len(heldout)} held-out answer{'' if len(heldout) == 1 else 's'}; a set covering "
            f"1 - alpha = {1 - alpha:g} needs at least {need}"
        )
        return entry
    coverage, size = conformal.coverage([softmax(r.log_probs, temperature) for r in fit], [r.target for r in fit], q)
    entry.update(threshold=q, kept=True, fit_coverage=coverage, fit_set_size=size)
    return entry


def fit_profiles(
    fit: Iterable[Labelled], heldout: Iterable[Labelled], alpha: float = DEFAULT_ALPHA
) -> dict[str, dict[str, object]]:
    """Every profile with at least one fitting answer, by name (sorted). A profile with fewer than
    ``MIN_PROFILE_FIT`` fitting answers takes the temperature fitted on all of them, every profile's together,
    judged on every held-out answer: what is fitted on all is judged on all."""
    fit, heldout = list(fit), list(heldout)
    by_fit: dict[str, list[Labelled]] = {}
    by_heldout: dict[str, list[Labelled]] = {}
    for row in fit:
        by_fit.setdefault(row.profile, []).append(row)
    for row in heldout:
        by_heldout.setdefault(row.profile, []).append(row)
    pooled = None
    if any(len(rows) < MIN_PROFILE_FIT for rows in by_fit.values()):
        pooled = Pooled(fit_temperature(*_rows(fit), beta_range=BETA_RANGE), len(fit), tuple(heldout))
    return {
        name: fit_profile(rows, by_heldout.get(name, []), alpha, pooled if len(rows) < MIN_PROFILE_FIT else None)
        for name, rows in sorted(by_fit.items())
    }


def fit_for(results: Iterable[Any]) -> dict[str, str]:
    """The GGUF sha256 and prompt version every answer reports (``model.sha256``, ``prompt_version``)."""
    digests, versions = set(), set()
    for r in results:
        if not r.valid:
            continue
        digests.add(r.extra.get("model_sha256"))
        versions.add(r.extra.get("prompt_version"))
    for name, found in (("model.sha256", digests), ("prompt_version", versions)):
        if len(found) != 1 or None in found:
            shown = sorted(str(v) for v in found) or ["no valid answer"]
            raise CalibrationFileError(
                f"the answers must all report one {name} to tie the calibration to, but they report "
                f"{', '.join(shown)}; run the tasks against one endpoint serving one model"
            )
    return {"gguf_sha256": str(digests.pop()).lower(), "prompt_version": str(versions.pop())}


def calibration_document(
    results: Sequence[Any],
    *,
    order: str,
    tasks: str,
    alpha: float = DEFAULT_ALPHA,
    readout: str = LETTERS,
    now: datetime.datetime | None = None,
) -> dict[str, Any]:
    """``calibration.json`` from one temperature-1 run in ``order`` mode with ``readout`` (results in any
    task order); prediction sets at level ``alpha``.

    The split: the tasks' own ``split`` field when it names fitting tasks (``dev``, ...), else a
    stable hash of each task id (``temperature.split_for_calibration``).
    """
    if order not in ORDER_MODES:
        raise CalibrationFileError(f"order must be one of {', '.join(ORDER_MODES)}, not {order!r}")
    if readout not in READOUTS:
        raise CalibrationFileError(f"readout must be one of {', '.join(READOUTS)}, not {readout!r}")
    try:
        alpha = conformal.check_alpha(alpha)
    except ValueError as exc:
        raise CalibrationFileError(f"--alpha: {exc}") from None
    results = list(results)
    fit, heldout, _ = split_for_calibration(results)
    fit_rows = [row for row in map(labelled, fit) if row is not None]
    heldout_rows = [row for row in map(labelled, heldout) if row is not None]
    if not fit_rows:
        raise CalibrationFileError("no valid answer among the fitting tasks: nothing to fit a temperature on")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return {
        "format": FORMAT,
        "fit_for": fit_for(results),
        "order": order,
        "readout": readout,
        "alpha": alpha,
        "profiles": fit_profiles(fit_rows, heldout_rows, alpha),
        "data": {"tasks": tasks, "fit_n": len(fit_rows), "heldout_n": len(heldout_rows)},
        "created": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def check_document(doc: Any) -> dict[str, Any]:
    """The document, checked field by field against the contract's rules (returned unchanged)."""
    try:
        contract.parse(dict(doc) if isinstance(doc, Mapping) else doc, FILE_NAME)
    except contract.CalibrationError as exc:
        raise CalibrationFileError(str(exc)) from None
    return dict(doc)


def write_document(doc: Mapping[str, Any], path: str | Path) -> Path:
    """Check and write ``doc``; a folder gets ``calibration.json`` inside it."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    path.write_text(json.dumps(check_document(doc), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_document(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CalibrationFileError(f"{path} is not JSON ({exc})") from None
    return check_document(doc)


def describe(doc: Mapping[str, Any]) -> str:
    """The file in a few lines: what it was fitted for, and per profile the temperature and held-out figures."""
    target = doc["fit_for"]
    data = doc["data"]
    alpha = doc.get("alpha")
    lines = [
        f"calibration for GGUF {target['gguf_sha256'][:16]}…, prompt {target['prompt_version']}, "
        f"readout {doc.get('readout', LETTERS)}, order {doc['order']}"
        + (f", prediction sets at alpha {alpha:g}" if alpha is not None else "")
        + f"; {data['fit_n']} fitting and {data['heldout_n']} held-out answers ({data['tasks']})"
    ]
    for name, entry in doc["profiles"].items():
        line = (
            f"  {name:<10} T={entry['temperature']:8.3f}  {'kept   ' if entry['kept'] else 'not kept'}  "
            f"fit {entry['fit_n']:>3}, held out {entry['heldout_n']:>3}"
        )
        if entry.get("temperature_from") == POOLED:
            line += (
                f"  (T fitted on all {entry['temperature_fit_n']} fitting answers, judged on all held-out ones: "
                "too few of its own)"
            )
        if entry["heldout"]:
            h = entry["heldout"]
            line += (
                f"  NLL {h['nll_before']:.3f} -> {h['nll_after']:.3f}, ECE {h['ece_before']:.3f} -> "
                f"{h['ece_after']:.3f}, Brier {h['brier_before']:.3f} -> {h['brier_after']:.3f}"
            )
        if entry.get("reason"):
            line += f"  ({entry['reason']})"
        lines.append(line)
        sets = entry.get("conformal")
        if sets and sets["kept"]:
            lines.append(
                f"  {'':<10} prediction set: p >= {1 - sets['threshold']:.3f} (q={sets['threshold']:.3f}); "
                f"on the fitting answers coverage {sets['fit_coverage']:.2f}, mean size "
                f"{sets['fit_set_size']:.2f}"
            )
        elif sets:
            lines.append(f"  {'':<10} prediction set: not kept ({sets['reason']})")
    return "\n".join(lines)


__all__ = [
    "DEFAULT_ALPHA",
    "FILE_NAME",
    "FORMAT",
    "HELDOUT_KEYS",
    "LETTERS",
    "MIN_HELDOUT",
    "ORDER_MODES",
    "READOUTS",
    "TEMPERATURE_RANGE",
    "CalibrationFileError",
    "Labelled",
    "calibration_document",
    "check_document",
    "describe",
    "fit_for",
    "fit_profile",
    "fit_profiles",
    "fit_threshold",
    "labelled",
    "profile_name",
    "read_document",
    "write_document",
]
