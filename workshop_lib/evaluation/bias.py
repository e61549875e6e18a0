"""Position bias: does the answer change when only the order of the options changes?

Small models prefer a position (often the first option). The **order test** sends the same tasks
with the options presented in another order (``reversed`` by default, or ``rotated``); the **flip
rate** is the share of tasks whose top choice changes. A model that reads the options has a flip
rate near 0. The order-debiased readout is the adapter's own ``rotations`` mode
(``served.run_mode``): the benchmark sends it for the options as declared and reordered.

``flip_stats`` is pure; ``run_order_test`` calls the endpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..client import EndpointClient
from .runner import Run, TaskResult, run_decisions
from .tasks import Task


def flip_stats(base: Iterable[TaskResult], other: Iterable[TaskResult]) -> dict[str, Any]:
    """How often the top choice differs between two runs over the same tasks (valid pairs only)."""
    other_by_id = {r.task_id: r for r in other}
    compared = flips = not_comparable = 0
    flipped = []
    for r in base:
        o = other_by_id.get(r.task_id)
        if o is None:
            continue
        if not (r.valid and o.valid):
            not_comparable += 1
            continue
        compared += 1
        if r.predicted != o.predicted:
            flips += 1
            flipped.append(r.task_id)
    return {
        "compared": compared,
        "flips": flips,
        "rate": flips / compared if compared else None,
        "not_comparable": not_comparable,
        "flipped_tasks": flipped,
    }


def run_order_test(
    client: EndpointClient,
    tasks: Sequence[Task],
    *,
    order: str = "reversed",
    progress: bool = True,
    label: str = "decision",
) -> Run:
    """The plain readout with the options presented in ``order`` (compare with the original run)."""
    return run_decisions(client, tasks, order=order, progress=progress, label=label)


__all__ = ["flip_stats", "run_order_test"]
