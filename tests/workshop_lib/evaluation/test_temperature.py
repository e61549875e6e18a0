"""Temperature fitting, ECE, Brier and reliability bins on inputs with known answers."""

import math

import pytest

from workshop_lib.evaluation.runner import TaskResult
from workshop_lib.evaluation.temperature import (
    brier_score,
    calibrate_results,
    expected_calibration_error,
    fit_temperature,
    nll,
    reliability_bins,
    softmax,
)


def test_fitted_temperature_matches_the_closed_form():
    # Logits (0, 2); the second option is right 3 times in 4. The NLL is minimal where
    # sigmoid(2 / T) = 3/4, i.e. T = 2 / ln 3.
    rows = [[0.0, 2.0]] * 4
    targets = [1, 1, 1, 0]
    assert fit_temperature(rows, targets) == pytest.approx(2 / math.log(3), rel=1e-5)
    assert nll(rows, targets, 2 / math.log(3)) < nll(rows, targets, 1.0)


def test_temperature_for_already_calibrated_logits_is_one():
    # sigmoid(ln 3) = 3/4 exactly: nothing to fix.
    assert fit_temperature([[0.0, math.log(3)]] * 4, [1, 1, 1, 0]) == pytest.approx(1.0, rel=1e-5)


def test_ece_and_brier_known_values():
    # Two tasks at confidence 0.9 (one right) and two at 0.6 (both right):
    # |0.5 - 0.9| * 2/4 + |1.0 - 0.6| * 2/4 = 0.4
    assert expected_calibration_error([0.9, 0.9, 0.6, 0.6], [True, False, True, True]) == pytest.approx(0.4)
    # (0.8-1)^2 + 0.2^2 = 0.08 ; (0.5-0)^2 + (0.5-1)^2 = 0.5 ; mean 0.29
    assert brier_score([[0.2, 0.8], [0.5, 0.5]], [1, 1]) == pytest.approx(0.29)
    assert brier_score([[0.0, 1.0]], [1]) == 0.0 and brier_score([[1.0, 0.0]], [1]) == 2.0


def test_reliability_bins_edges():
    bins = reliability_bins([0.05, 1.0, 0.95, 0.5], [False, True, False, True], bins=10)
    assert len(bins) == 10 and bins[0]["n"] == 1 and bins[5]["n"] == 1
    assert bins[9] == {"lo": 0.9, "hi": 1.0, "n": 2, "confidence": pytest.approx(0.975), "accuracy": 0.5}
    assert bins[3]["n"] == 0 and bins[3]["accuracy"] is None


def test_softmax_with_temperature():
    assert softmax([0.0, 0.0]).tolist() == [0.5, 0.5]
    assert softmax([0.0, 2.0], 2.0)[1] == pytest.approx(1 / (1 + math.exp(-1)))


def _result(task_id, split, logits, expected, correct=None):
    probs = softmax(list(logits.values()))
    p = dict(zip(logits, probs.tolist()))
    top = max(p, key=p.get)
    return TaskResult(
        task_id=task_id,
        family="f",
        type="choice",
        expected=expected,
        labels=list(logits),
        split=split,
        valid=True,
        predicted=top,
        correct=top == expected,
        probabilities=p,
        option_logits=dict(logits),
    )


def test_calibrate_results_fits_on_dev_and_reports_on_test():
    overconfident = {"a": 0.0, "b": 6.0}
    results = (
        [_result(f"d{i}", "dev", overconfident, "b") for i in range(3)]
        + [_result("d3", "dev", overconfident, "a")]
        + [_result(f"t{i}", "test", overconfident, "b") for i in range(3)]
        + [_result("t3", "test", overconfident, "a")]
        + [TaskResult(task_id="bad", family="f", type="choice", expected="a", labels=["a", "b"], split="test")]
    )
    cal = calibrate_results(results)
    assert cal["fit_tasks"] == 4 and cal["report_tasks"] == 4 and cal["invalid_skipped"] == 1
    assert cal["temperature"] == pytest.approx(6 / math.log(3), rel=1e-4)
    assert cal["after"]["ece"] < cal["before"]["ece"] and cal["after"]["brier"] < cal["before"]["brier"]
    assert cal["after"]["nll"] < cal["before"]["nll"]
    assert cal["after"]["accuracy"] == cal["before"]["accuracy"] == 0.75
    assert cal["at_search_bound"] is None


def test_calibrate_results_without_splits_halves_by_hash_and_flags_a_degenerate_fit():
    results = [_result(f"x{i}", "test", {"a": 0.0, "b": 3.0}, "a") for i in range(12)]
    cal = calibrate_results(results)
    assert cal["split"].startswith("stable hash") and cal["fit_tasks"] + cal["report_tasks"] == 12
    assert cal["at_search_bound"] == "flatten"  # always wrong: the best fit is a uniform guess
    assert calibrate_results(results[:1])["error"]
