"""Scoring one answer against one task: validity, predicted label, correctness. Pure functions.

The rules (JevBench's: docs/glossary.md#jevbench):

* a response is **valid** when it is a proper probability vector over exactly the
  task's labels: every label once, nothing else, each value a finite number in
  [0, 1], summing to 1 (within ``SUM_TOLERANCE``);
* the **predicted label** is the argmax; equal probabilities go to the
  lexicographically smallest label (not to the first option shown, so a tie
  cannot favour a position);
* a task is **correct** when the predicted label equals the expected one; an
  invalid or failed response counts as wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SUM_TOLERANCE = 1e-3


def invalid_reason(
    labels: Sequence[str], option_ids: Sequence[str], probabilities: Sequence, tolerance: float = SUM_TOLERANCE
) -> str | None:
    """Why a response is not a proper probability vector over ``labels``; ``None`` if it is one."""
    ids = list(option_ids)
    if len(ids) != len(probabilities):
        return f"{len(ids)} option ids but {len(probabilities)} probabilities"
    if len(set(ids)) != len(ids):
        return f"duplicate option ids {ids}"
    if set(ids) != set(labels):
        missing, extra = sorted(set(labels) - set(ids)), sorted(set(ids) - set(labels))
        parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])
        return "option ids do not match the labels: " + ", ".join(parts)
    for oid, p in zip(ids, probabilities):
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
            return f"probability of {oid!r} is {p!r}, not a finite number"
        if not 0.0 <= p <= 1.0:
            return f"probability of {oid!r} is {p!r}, outside [0, 1]"
    total = math.fsum(probabilities)
    if abs(total - 1.0) > tolerance:
        return f"probabilities sum to {total:.6g}, not 1"
    return None


def predicted_label(option_ids: Sequence[str], probabilities: Sequence[float]) -> str:
    """The label with the highest probability; ties go to the lexicographically smallest label."""
    if not option_ids:
        raise ValueError("no options")
    best = max(probabilities)
    return min(oid for oid, p in zip(option_ids, probabilities) if p == best)


def is_correct(predicted: str | None, expected: str, valid: bool = True) -> bool:
    return bool(valid) and predicted is not None and predicted == str(expected)


__all__ = ["SUM_TOLERANCE", "invalid_reason", "is_correct", "predicted_label"]
