"""Temperature scaling and how calibrated answers are: is a top probability of 0.8 right 80 % of the
time? Pure numpy.

* ``fit_temperature`` finds the temperature T that minimises the negative
  log-likelihood of the expected labels under ``softmax(logits / T)`` on labelled
  tasks held out for fitting. The NLL is convex in 1/T, so a golden-section search
  on 1/T finds the minimum. T > 1 softens over-confident answers, T < 1 sharpens.
* ``expected_calibration_error``: tasks binned by top probability (equal-width
  bins); the gap between mean top probability and observed accuracy in each bin,
  weighted by the bin's share of tasks.
* ``brier_score``: mean over tasks of the squared distance between the probability
  vector and the one-hot expected label (0 is perfect, 2 the worst).

``calibrate_results`` puts them together on benchmark results: fit on the tasks whose
split is a fitting split (``dev``, ``train``, ``calibration``, ...), report before/after
on the others. Temperature scaling never changes the argmax, so accuracy stays put.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

FIT_SPLITS = frozenset({"dev", "train", "calibration", "calib", "validation", "val"})
BETA_RANGE = (1e-3, 100.0)  # 1/T searched in this range (T from 0.01 to 1000)
DEFAULT_BINS = 10
# Fewer tasks than this on either side (fit, report) and a fitted temperature, ECE or Brier score is
# noise: with 10 bins, a handful of tasks leave most bins empty and each task moves ECE by 1/n.
MIN_TASKS = 20


def softmax(logits: Sequence[float], temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(logits, dtype=float) / temperature
    z = z - z.max()
    e = np.exp(z)
    probabilities: np.ndarray = e / e.sum()
    return probabilities


def nll(logit_rows: Sequence[Sequence[float]], targets: Sequence[int], temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of the target indices under softmax(logits / T)."""
    if not logit_rows:
        raise ValueError("no rows")
    total = 0.0
    for row, target in zip(logit_rows, targets):
        z = np.asarray(row, dtype=float) / temperature
        peak = z.max()
        total += peak + math.log(float(np.exp(z - peak).sum())) - z[target]
    return total / len(logit_rows)


def fit_temperature(
    logit_rows: Sequence[Sequence[float]],
    targets: Sequence[int],
    *,
    beta_range: tuple[float, float] = BETA_RANGE,
    tolerance: float = 1e-7,
) -> float:
    """The temperature minimising the NLL of ``targets`` (golden-section search on 1/T)."""
    if not logit_rows:
        raise ValueError("need at least one labelled row to fit a temperature")

    def loss(beta: float) -> float:
        return nll(logit_rows, targets, 1.0 / beta)

    lo, hi = beta_range
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    while b - a > tolerance * max(1.0, a):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    beta = (a + b) / 2.0
    return 1.0 / beta


def reliability_bins(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = DEFAULT_BINS
) -> list[dict[str, Any]]:
    """Equal-width bins over [0, 1] of the top probability: count, mean confidence, accuracy.

    A confidence of exactly 1.0 falls in the last bin; empty bins are kept (n = 0).
    """
    conf = np.asarray(confidences, dtype=float)
    hits = np.asarray(correct, dtype=float)
    index = np.minimum((conf * bins).astype(int), bins - 1) if len(conf) else np.array([], dtype=int)
    out = []
    for b in range(bins):
        mask = index == b
        n = int(mask.sum())
        out.append(
            {
                "lo": b / bins,
                "hi": (b + 1) / bins,
                "n": n,
                "confidence": float(conf[mask].mean()) if n else None,
                "accuracy": float(hits[mask].mean()) if n else None,
            }
        )
    return out


def expected_calibration_error(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = DEFAULT_BINS
) -> float:
    total = len(confidences)
    if not total:
        raise ValueError("no tasks")
    ece: float = sum(
        b["n"] / total * abs(b["accuracy"] - b["confidence"])
        for b in reliability_bins(confidences, correct, bins)
        if b["n"]
    )
    return ece


def brier_score(probability_rows: Sequence[Sequence[float] | np.ndarray], targets: Sequence[int]) -> float:
    if not probability_rows:
        raise ValueError("no rows")
    total = 0.0
    for row, target in zip(probability_rows, targets):
        p = np.asarray(row, dtype=float)
        onehot = np.zeros_like(p)
        onehot[target] = 1.0
        total += float(((p - onehot) ** 2).sum())
    return total / len(probability_rows)


def metrics(
    logit_rows: Sequence[Sequence[float]], targets: Sequence[int], temperature: float = 1.0, bins: int = DEFAULT_BINS
) -> dict[str, Any]:
    """NLL, ECE, Brier, accuracy and the reliability bins of softmax(logits / T)."""
    probs = [softmax(row, temperature) for row in logit_rows]
    top = [float(p.max()) for p in probs]
    # Rows are in sorted label order (see _rows), so argmax's first index on a tie is the
    # lexicographically smallest label: the benchmark's own tie rule.
    correct = [int(np.argmax(p)) == t for p, t in zip(probs, targets)]
    return {
        "n": len(probs),
        "temperature": temperature,
        "nll": nll(logit_rows, targets, temperature),
        "ece": expected_calibration_error(top, correct, bins),
        "brier": brier_score(probs, targets),
        "accuracy": sum(correct) / len(correct),
        "bins": reliability_bins(top, correct, bins),
    }


def _in_fit_half(key: str) -> bool:
    return hashlib.sha256(key.encode("utf-8")).digest()[0] % 2 == 0


def split_for_calibration(results: Iterable[Any]) -> tuple[list[Any], list[Any], str]:
    """(fit results, report results, how): by split name, else a stable hash of group or task id."""
    results = list(results)
    fit = [r for r in results if str(r.split).lower() in FIT_SPLITS]
    if fit and len(fit) < len(results):
        return (
            fit,
            [r for r in results if str(r.split).lower() not in FIT_SPLITS],
            "split field (fit on " + ", ".join(sorted({str(r.split) for r in fit})) + ")",
        )
    fit = [r for r in results if _in_fit_half(r.task_id)]
    return fit, [r for r in results if not _in_fit_half(r.task_id)], "stable hash of the task id (about half)"


def _rows(results: Iterable[Any]) -> tuple[list[list[float]], list[int]]:
    rows, targets = [], []
    for r in results:
        if not r.valid or not r.probabilities:
            continue
        labels = sorted(r.probabilities)  # a fixed order per task; which one does not matter
        if r.option_logits:
            row = [r.option_logits[label] for label in labels]
        else:  # log-probabilities are logits up to a constant
            row = [math.log(max(r.probabilities[label], 1e-300)) for label in labels]
        rows.append(row)
        targets.append(labels.index(r.expected))
    return rows, targets


def calibrate_results(results: Iterable[Any], bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """Fit a temperature on the fitting tasks, report before/after on the others (valid answers only)."""
    fit, held_out, how = split_for_calibration(results)
    fit_rows, fit_targets = _rows(fit)
    rows, targets = _rows(held_out)
    out: dict[str, Any] = {
        "split": how,
        "fit_tasks": len(fit_rows),
        "report_tasks": len(rows),
        "invalid_skipped": len(fit) + len(held_out) - len(fit_rows) - len(rows),
        "too_few": min(len(fit_rows), len(rows)) < MIN_TASKS,
    }
    if not fit_rows or not rows:
        out["error"] = "not enough valid labelled answers to fit on one part and report on the other"
        return out
    temperature = fit_temperature(fit_rows, fit_targets)
    lo, hi = BETA_RANGE
    out["temperature"] = temperature
    beta = 1.0 / temperature
    # At the upper end of T the fitted answers are no better than uniform ones; at the lower
    # end they are all right with a margin. Either way the fitted scale says little.
    out["at_search_bound"] = "flatten" if beta <= lo * 1.001 else "sharpen" if beta >= hi * 0.999 else None
    out["before"] = metrics(rows, targets, 1.0, bins)
    out["after"] = metrics(rows, targets, temperature, bins)
    return out


__all__ = [
    "FIT_SPLITS",
    "MIN_TASKS",
    "brier_score",
    "calibrate_results",
    "expected_calibration_error",
    "fit_temperature",
    "metrics",
    "nll",
    "reliability_bins",
    "softmax",
    "split_for_calibration",
]
