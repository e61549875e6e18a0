"""The tasks against an endpoint in one of the adapter's order modes, and ``calibrate`` on top of that.

``run_mode`` sends each task as one decision with ``order`` (``as_given``, ``prior``, ``rotations``)
and the task's ``question_type``, so the adapter reads it the way it will serve it; ``temperature``
1 by default, so the answers are the order mode's own probabilities before any served calibration.
``calibrate`` turns such a run (made here, or read from a saved run) into ``calibration.json``
(``profiles.calibration_document``), fitted by default for the readout the endpoint serves
(``served_readout``): the adapter applies a file to answers of its own readout only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from decision_contract import wire
from decision_contract.calibration import DEFAULT_ALPHA

from ..client import EndpointClient
from .profiles import LETTERS, READOUTS, CalibrationFileError, calibration_document, write_document
from .runner import Run, run_decisions
from .tasks import Task, resolve_tasks


def served_fields(
    mode: str, *, min_answer_mass: float | None = None, readout: str = LETTERS
) -> Callable[[Task], dict[str, object]]:
    """The request fields of one task in order mode ``mode`` with ``readout`` (a function of the task, for
    ``run_decisions``). The readout is always named, so a server whose default is the other one answers the same;
    a mode the readout cannot take is refused as the adapter refuses it (``wire.order_problem``)."""
    problem = wire.order_problem(readout, mode)
    if problem:
        raise ValueError(problem)

    def fields(task: Task) -> dict[str, object]:
        out: dict[str, object] = {"order": mode, "readout": readout, "question_type": task.type}
        if min_answer_mass is not None:
            out["min_answer_mass"] = min_answer_mass
        return out

    return fields


def run_mode(
    client: EndpointClient,
    tasks: Sequence[Task],
    mode: str,
    *,
    order: str = "original",
    temperature: float | None = 1.0,
    min_answer_mass: float | None = None,
    progress: bool = True,
    label: str | None = None,
    readout: str = LETTERS,
) -> Run:
    """Every task once in order mode ``mode``, the options presented in ``order`` (``original``,
    ``reversed``, ``rotated``); ``temperature=None`` leaves it to the server (its calibration applies)."""
    run = run_decisions(
        client,
        tasks,
        order=order,
        temperature=temperature,
        progress=progress,
        label=label or mode,
        fields=served_fields(mode, min_answer_mass=min_answer_mass, readout=readout),
    )
    run.settings["order_mode"], run.settings["readout"] = mode, readout
    return run


def served_readout(client: EndpointClient, tasks: Sequence[Task] = ()) -> str:
    """The readout ``client``'s requests are answered with when they name none: the client's own readout where it
    sets one, else the server's default, which every answer reports in its ``model`` block (one decision asks,
    the first of ``tasks`` or a packaged one), or where that block lacks it the readout the answer was read with."""
    own: str | None = getattr(client, "readout", None)
    if own:
        return own
    task = tasks[0] if tasks else resolve_tasks(None, 1)[0][0]
    answer = client.decide(task.request(request_id=f"{task.id}@served-readout"))
    readout = answer.model.get("readout") or answer.readout  # the wire's reading: one that names none read letters
    if readout not in READOUTS:
        raise CalibrationFileError(
            f"the endpoint reports the readout {readout!r}, which this client does not know "
            f"({', '.join(READOUTS)}): pass the readout to fit for"
        )
    return readout


def _saved_run(path: str | Path) -> Run:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    runs = data.get("runs") if isinstance(data, Mapping) else None
    if isinstance(runs, list):  # a study or report holding several runs: the first one
        data = runs[0]
    if not isinstance(data, Mapping) or "results" not in data:
        raise CalibrationFileError(f"{path} holds no saved run (a JSON object with 'results', as Run.to_dict writes)")
    return Run.from_dict(data)


def calibrate(
    client: EndpointClient | None = None,
    tasks: str | Path | Iterable[Task] | None = None,
    *,
    order: str = "as_given",
    limit: int | None = None,
    run: Run | str | Path | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    alpha: float = DEFAULT_ALPHA,
    readout: str | None = None,
) -> dict[str, Any]:
    """``calibration.json`` for the endpoint behind ``client``, fitted for ``readout`` in order mode ``order``, with
    prediction sets covering the labelled answer in at least ``1 - alpha`` of held-out tasks. ``readout`` None:
    the one the endpoint serves (``served_readout``), or for a saved run the one it was read with.

    The tasks (JevBench format; default the packaged set) are sent at temperature 1, or ``run`` (a
    ``Run``, or the path of one saved with ``Run.to_dict``) is read instead. With ``out`` the
    document is also written there (a folder gets ``calibration.json``).
    """
    if run is None:
        if client is None:
            raise ValueError("pass a client to run the tasks against, or run= a saved run")
        task_list, name = resolve_tasks(tasks, limit)
        readout = readout or served_readout(client, task_list)
        try:
            served_fields(order, readout=readout)
        except ValueError as exc:
            raise CalibrationFileError(str(exc)) from None
        run = run_mode(
            client, task_list, order, progress=progress, label=f"calibrate ({readout}, {order})", readout=readout
        )
    else:
        name = str(tasks) if tasks is not None else (str(run) if isinstance(run, (str, Path)) else "saved run")
        run = run if isinstance(run, Run) else _saved_run(run)
        mode = run.settings.get("order_mode") or (run.settings.get("fields") or {}).get("order")
        if mode and mode != order:
            raise CalibrationFileError(
                f"the saved run was made in order mode {mode!r}, not {order!r}; "
                f"calibrate with order={mode!r} or run the tasks again"
            )
        made_with = run.settings.get("readout") or LETTERS  # runs saved before it was recorded read letters
        readout = readout or made_with
        if made_with != readout:
            raise CalibrationFileError(
                f"the saved run was read with the {made_with!r} readout, not {readout!r}; "
                f"calibrate with readout={made_with!r} or run the tasks again"
            )
        served = {float((r.extra.get("calibration") or {}).get("temperature", 1.0)) for r in run.results if r.valid}
        if run.settings.get("temperature") not in (None, 1, 1.0) or served - {1.0}:
            shown = run.settings.get("temperature") or sorted(served - {1.0})
            raise CalibrationFileError(
                f"the saved run was answered at temperature {shown}; a fit needs the "
                "temperature-1 probabilities: run the tasks again with temperature 1"
            )
    doc = calibration_document(run.results, order=order, tasks=name, alpha=alpha, readout=readout)
    if out is not None:
        write_document(doc, out)
    return doc


__all__ = ["calibrate", "run_mode", "served_fields", "served_readout"]
