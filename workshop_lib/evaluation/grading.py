"""Scoring one answer against one task: validity, predicted label, correctness. Pure functions.

The rules (JevBench's: docs/glossary.md#jevbench):

* a response is **valid** when it is a proper probability vector over exactly the
  task's labels: every label once, nothing else, each value a finite number in
  [0, 1], summing to 1: the wire's one rule (``decision_contract.wire.answer_problem``,
  its one tolerance ``SUM_TOLERANCE``), with the labels in any order, since a benchmark
  presents them reversed or rotated;
* the **predicted label** is the argmax; equal probabilities go to the
  lexicographically smallest label (not to the first option shown, so a tie
  cannot favour a position);
* a task is **correct** when the predicted label equals the expected one; an
  invalid or failed response counts as wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from decision_contract import wire
from decision_contract.wire import SUM_TOLERANCE


def invalid_reason(labels: Sequence[str], option_ids: Sequence[str], probabilities: Sequence[float]) -> str | None:
    """Why a response is not a proper probability vector over ``labels`` (in any order); ``None`` if it is one."""
    return wire.answer_problem(list(labels), list(option_ids), list(probabilities), ordered=False)


def predicted_label(option_ids: Sequence[str], probabilities: Sequence[float]) -> str:
    """The label with the highest probability; ties go to the lexicographically smallest label."""
    if not option_ids:
        raise ValueError("no options")
    best = max(probabilities)
    return min(oid for oid, p in zip(option_ids, probabilities) if p == best)


def is_correct(predicted: str | None, expected: str, valid: bool = True) -> bool:
    return bool(valid) and predicted is not None and predicted == str(expected)


__all__ = ["SUM_TOLERANCE", "invalid_reason", "is_correct", "predicted_label"]
