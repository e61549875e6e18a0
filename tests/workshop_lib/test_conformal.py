"""Split-conformal prediction sets (evaluation/conformal.py, profiles.fit_threshold): the threshold's coverage on
synthetic labelled answers drawn from a known distribution, judged on a fresh half; the minimum held-out count;
the file entry it makes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workshop_lib.evaluation import conformal
from workshop_lib.evaluation.profiles import Labelled, fit_profile
from workshop_lib.evaluation.temperature import softmax

K = 4


def synthetic(rng, n: int, *, honest: bool):
    """n answers over K options: probabilities from a Dirichlet, the label drawn from them (``honest``) or from
    a flatter version of them (an over-confident model)."""
    rows = rng.dirichlet(np.full(K, 0.6), size=n)
    truth = rows if honest else (rows**0.3) / (rows**0.3).sum(axis=1, keepdims=True)
    targets = [int(rng.choice(K, p=t)) for t in truth]
    return rows, targets


@pytest.mark.parametrize("alpha", [0.1, 0.2])
@pytest.mark.parametrize("honest", [True, False], ids=["calibrated", "over-confident"])
def test_the_threshold_covers_at_least_one_minus_alpha_of_fresh_answers(alpha, honest):
    covered = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        rows, targets = synthetic(rng, 2000, honest=honest)
        q = conformal.threshold(conformal.nonconformity(rows[:1000], targets[:1000]), alpha)
        share, size = conformal.coverage(rows[1000:], targets[1000:], q)
        # One draw's coverage has a standard deviation of about 0.015 here: 0.05 is over three of them.
        assert share >= 1 - alpha - 0.05
        assert 1.0 <= size < K  # informative: not every option every time
        covered.append(share)
    # On average at least 1 - alpha, and at most 1 - alpha + 1/(n + 1) for continuous scores (the mean of 20
    # draws varies by about 0.004).
    assert 1 - alpha - 0.015 <= np.mean(covered) <= 1 - alpha + 1 / 1001 + 0.015


def test_the_threshold_is_the_finite_sample_quantile_of_the_scores():
    scores = np.arange(1, 20) / 20  # 19 scores: rank ceil(20 * 0.9) = 18
    assert conformal.rank(19, 0.1) == 18
    assert conformal.threshold(scores[::-1], 0.1) == pytest.approx(18 / 20)
    assert conformal.rank(9, 0.1) == 9  # (9 + 1) * 0.9 is 9, not 10, despite float rounding


@pytest.mark.parametrize("alpha", [0.1, 0.05, 0.2, 0.3])
def test_too_few_held_out_answers_give_no_threshold(alpha):
    need = conformal.min_heldout(alpha)
    assert need == math.ceil(1 / alpha) - 1
    assert conformal.threshold(np.linspace(0, 1, need - 1), alpha) is None
    assert conformal.threshold(np.linspace(0, 1, need), alpha) is not None
    assert conformal.threshold([], alpha) is None


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, True, "0.1"])
def test_alpha_outside_zero_to_one_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="alpha"):
        conformal.check_alpha(bad)


def _labelled(rows, targets, profile="choice/3-4"):
    return [Labelled(f"t{i}", profile, tuple(np.log(r)), t) for i, (r, t) in enumerate(zip(rows, targets))]


def test_a_profile_with_enough_held_out_answers_keeps_a_threshold_fitted_at_its_served_temperature():
    rng = np.random.default_rng(5)
    rows, targets = synthetic(rng, 400, honest=False)
    fit, held = _labelled(rows[:200], targets[:200]), _labelled(rows[200:], targets[200:])
    entry = fit_profile(fit, held, alpha=0.1)
    sets = entry["conformal"]
    assert sets["kept"] and sets["reason"] is None and sets["heldout_n"] == 200
    served = entry["temperature"] if entry["kept"] else 1.0
    assert sets["temperature"] == served
    probs = [softmax(r.log_probs, served) for r in held]
    assert sets["threshold"] == conformal.threshold(conformal.nonconformity(probs, [r.target for r in held]), 0.1)
    assert 0.8 <= sets["fit_coverage"] <= 1.0 and 1.0 <= sets["fit_set_size"] <= K


def test_a_profile_with_too_few_held_out_answers_says_why_no_set_is_kept():
    rng = np.random.default_rng(6)
    rows, targets = synthetic(rng, 38, honest=True)
    entry = fit_profile(_labelled(rows[:30], targets[:30]), _labelled(rows[30:], targets[30:]), alpha=0.1)
    sets = entry["conformal"]
    assert not sets["kept"] and sets["threshold"] is None and sets["heldout_n"] == 8
    assert "8 held-out answers" in sets["reason"] and "at least 9" in sets["reason"]


def test_resampled_coverage_reads_each_split_on_the_half_it_was_not_fitted_on():
    rng = np.random.default_rng(11)
    rows, targets = synthetic(rng, 400, honest=True)
    ragged = [r[:3] / r[:3].sum() for r in rows[:40]]  # a group of 3-option answers beside the 4-option one
    found = conformal.resampled_coverage(
        [(list(rows), targets), (ragged, [min(t, 2) for t in targets[:40]])], 0.1, rounds=50
    )
    assert found["groups"] == 2 and found["answers"] == 440 and found["rounds"] == 50
    assert abs(found["coverage"] - 0.9) <= 0.03 and 1.0 <= found["set_size"] < K
    again = conformal.resampled_coverage([(list(rows), targets)], 0.1, rounds=50)
    assert again == conformal.resampled_coverage([(list(rows), targets)], 0.1, rounds=50)  # seeded: repeatable
    # An over-confident model's sets still cover 1 - alpha: the threshold widens them.
    over_rows, over_targets = synthetic(rng, 400, honest=False)
    over = conformal.resampled_coverage([(list(over_rows), over_targets)], 0.1, rounds=50)
    assert over["coverage"] >= 0.87 and over["set_size"] > again["set_size"]
    # A group whose half holds fewer answers than a threshold needs is left out; with none left, nothing.
    need = conformal.min_heldout(0.1)
    assert conformal.resampled_coverage([(list(rows[: 2 * need - 1]), targets[: 2 * need - 1])], 0.1) is None
