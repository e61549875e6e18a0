"""Split-conformal prediction sets: from held-out labelled answers, the threshold q on the nonconformity
``1 - p(labelled answer)`` such that the set ``{options with p >= 1 - q}`` covers the labelled answer in at
least ``1 - alpha`` of new questions drawn like them (exchangeable). Pure numpy.

The threshold is the ``ceil((n + 1)(1 - alpha))``-th smallest of the n held-out scores (the finite-sample
quantile); it exists only when that rank is at most n, i.e. with at least ``ceil(1/alpha) - 1`` held-out
answers. The set rule itself is the contract's (``decision_contract.calibration.prediction_set``), so the
adapter serves exactly the sets measured here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from decision_contract.calibration import prediction_set


def check_alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise ValueError(
            f"alpha must be a number between 0 and 1 (exclusive), e.g. 0.1 for 90 % coverage; got {alpha!r}"
        )
    return float(alpha)


def rank(n: int, alpha: float) -> int:
    """The rank (1-based) of the held-out score that is the threshold: ceil((n + 1)(1 - alpha))."""
    # The small offset keeps (n + 1)(1 - alpha) that is a whole number in exact arithmetic from rounding up.
    return math.ceil((n + 1) * (1.0 - check_alpha(alpha)) - 1e-9)


def min_heldout(alpha: float) -> int:
    """The fewest held-out answers that give a threshold below "every option" at level ``alpha``."""
    return math.ceil(1.0 / check_alpha(alpha) - 1e-9) - 1


def nonconformity(probability_rows: Sequence[Sequence[float] | np.ndarray], targets: Sequence[int]) -> np.ndarray:
    """``1 - p`` of each row's labelled answer."""
    return np.array([1.0 - float(row[t]) for row, t in zip(probability_rows, targets)], dtype=float)


def threshold(scores: Sequence[float] | np.ndarray, alpha: float) -> float | None:
    """The split-conformal threshold of held-out ``scores`` at level ``alpha``; None with too few of them."""
    ordered = np.sort(np.asarray(scores, dtype=float))
    k = rank(len(ordered), alpha)
    if k > len(ordered) or not len(ordered):
        return None
    return float(ordered[k - 1])


def sets(probability_rows: Sequence[Sequence[float] | np.ndarray], q: float) -> list[list[int]]:
    return [prediction_set(row, q) for row in probability_rows]


def coverage(
    probability_rows: Sequence[Sequence[float] | np.ndarray], targets: Sequence[int], q: float
) -> tuple[float, float]:
    """(share of rows whose set holds the labelled answer, mean set size) at threshold ``q``."""
    if not len(probability_rows):
        raise ValueError("no rows")
    members = sets(probability_rows, q)
    hits = [t in m for m, t in zip(members, targets)]
    return float(np.mean(hits)), float(np.mean([len(m) for m in members]))


def resampled_coverage(
    groups: Sequence[tuple[Sequence[Sequence[float] | np.ndarray], Sequence[int]]],
    alpha: float,
    *,
    rounds: int = 200,
    seed: int = 0,
) -> dict[str, float | int] | None:
    """The sets' coverage on answers their threshold was not fitted on, over many random splits: in each round
    every group's answers (a profile's probability rows and labelled answers) are shuffled and halved, the
    threshold fitted on one half (where it holds enough answers) and the sets read on the other. Returns the
    share of read answers covered and the mean set size over all rounds, or None when no group has enough."""
    rng = np.random.default_rng(seed)
    need = min_heldout(alpha)
    usable = [
        (list(rows), list(targets)) for rows, targets in groups if len(rows) // 2 >= need
    ]  # rows may differ in length
    if not usable:
        return None
    hits, sizes = [], []
    for _ in range(rounds):
        for rows, targets in usable:
            order = rng.permutation(len(rows))
            fit, read = order[: len(rows) // 2], order[len(rows) // 2 :]
            q = threshold(nonconformity([rows[i] for i in fit], [targets[i] for i in fit]), alpha)
            assert q is not None  # each half holds at least min_heldout(alpha) answers
            members = sets([rows[i] for i in read], q)
            hits += [targets[i] in m for m, i in zip(members, read)]
            sizes += [len(m) for m in members]
    return {
        "coverage": float(np.mean(hits)),
        "set_size": float(np.mean(sizes)),
        "rounds": rounds,
        "groups": len(usable),
        "answers": sum(len(rows) for rows, _ in usable),
    }


__all__ = ["check_alpha", "coverage", "min_heldout", "nonconformity", "rank", "resampled_coverage", "sets", "threshold"]
