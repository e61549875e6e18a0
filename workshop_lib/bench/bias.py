"""Position bias: does the answer change when only the order of the options changes?

Small models prefer a position (often the first option). Two measurements:

* the **order test**: the same tasks with the options presented in another order
  (``reversed`` by default, or ``rotated``); the **flip rate** is the share of tasks
  whose top choice changes. A model that reads the options has a flip rate near 0.
* the **order-debiased readout** (opt-in): each task is asked k times, the options
  cyclically rotated each time, and the probabilities are averaged per option id.
  All k rotations go in ONE shared-state request (``decide_batch``), so the state is
  evaluated once and each rotation costs only its question and options. Its own
  flip rate compares the debiased answer for the original order with the debiased
  answer for the reversed order (the rotations of a reversed list are different
  presentations, so this is not zero by construction).

``flip_stats``, ``rotation_shifts`` and ``average_probabilities`` are pure; the
``run_*`` functions call the endpoint.
"""

from __future__ import annotations

import time
from typing import Iterable, Mapping, Sequence

from ..client import EndpointError
from .runner import Run, TaskResult, _now, _endpoint_name, execute, failed_result, model_summary, score_response
from .tasks import Task, permutation, rotation


def rotation_shifts(n_options: int, k: int | None = None) -> list[int]:
    """Shifts of k cyclic rotations spread over n options (all n when k is None or >= n)."""
    if n_options < 1:
        raise ValueError("no options")
    if k is None or k >= n_options:
        return list(range(n_options))
    if k < 1:
        raise ValueError("rotations must be at least 1")
    return sorted({round(i * n_options / k) % n_options for i in range(k)})


def average_probabilities(answers: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean probability of each option id over several answers (ids in the first answer's order)."""
    if not answers:
        raise ValueError("no answers to average")
    ids = list(answers[0])
    for answer in answers[1:]:
        if set(answer) != set(ids):
            raise ValueError(f"answers cover different options: {sorted(answer)} vs {sorted(ids)}")
    return {oid: sum(a[oid] for a in answers) / len(answers) for oid in ids}


def flip_stats(base: Iterable[TaskResult], other: Iterable[TaskResult]) -> dict:
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
    return {"compared": compared, "flips": flips, "rate": flips / compared if compared else None,
            "not_comparable": not_comparable, "flipped_tasks": flipped}


def debiased_result(task: Task, decisions: Sequence, *, order: str, presented: Sequence[str]) -> TaskResult:
    """Average the rotations' probabilities per option id and score the average (pure)."""
    averaged = average_probabilities([d.as_dict() for d in decisions])
    first = decisions[0]
    timing = dict(first.timing)
    shared = timing.get("shared_prefix_tokens") or 0
    tokens = [d.raw.get("input_tokens") for d in decisions]
    evaluated = (shared + sum(t - shared for t in tokens)) if all(isinstance(t, int) for t in tokens) else None
    result = score_response(
        task, list(averaged), list(averaged.values()), order=order, presented=presented,
        client_latency_ms=first.client_latency_ms, server_ms=timing.get("total_ms"), timing=timing,
        input_tokens=tokens[0], attempts=first.attempts)
    result.extra = {"rotations": len(decisions), "evaluated_tokens": evaluated,
                    "rotation_tops": [d.top for d in decisions]}
    return result


def run_order_test(client, tasks: Sequence[Task], *, order: str = "reversed", progress: bool = True,
                   label: str = "decision") -> Run:
    """The plain readout with the options presented in ``order`` (compare with the original run)."""
    from .runner import run_decisions

    return run_decisions(client, tasks, order=order, progress=progress, label=label)


def run_debiased(client, tasks: Sequence[Task], *, order: str = "original", rotations: int | None = None,
                 progress: bool = True, label: str = "debiased") -> Run:
    """The order-debiased readout: k cyclic rotations per task in one shared-state request each."""
    model: dict = {}

    def attempt(task: Task) -> TaskResult:
        base = permutation(order, len(task.options))
        presented = [task.options[i][0] for i in base]
        questions = [task.question_body(f"rot{shift}", rotation(base, shift))
                     for shift in rotation_shifts(len(base), rotations)]
        t0 = time.perf_counter()
        try:
            decisions = client.decide_batch(f"{task.id}@debiased-{order}", task.state, questions)
        except EndpointError as exc:
            return failed_result(task, exc, order=order, presented=presented,
                                 client_latency_ms=(time.perf_counter() - t0) * 1000.0)
        if not model and decisions[0].model:
            model.update(model_summary(decisions[0].model))
        return debiased_result(task, decisions, order=order, presented=presented)

    started_at = _now()
    results, wall = execute(tasks, attempt, progress=progress, desc=f"{label} ({order})")
    return Run(label=label, kind="debiased", results=results, endpoint=_endpoint_name(client), wall_s=wall,
               started_at=started_at, model=model, settings={"order": order, "rotations": rotations})


__all__ = ["average_probabilities", "debiased_result", "flip_stats", "rotation_shifts", "run_debiased",
           "run_order_test"]
