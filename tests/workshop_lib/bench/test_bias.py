"""Order test and debiased readout: rotations, averaging and flip rates on fixed inputs."""

import pytest

from workshop_lib.bench.bias import average_probabilities, debiased_result, flip_stats, rotation_shifts
from workshop_lib.bench.runner import TaskResult
from workshop_lib.bench.tasks import Task
from workshop_lib.client import Decision

TASK = Task("t1", "routing", "choice", "s", "Which?", (("a", "A"), ("b", "B"), ("c", "C")), "b")


def test_rotation_shifts():
    assert rotation_shifts(4) == [0, 1, 2, 3]
    assert rotation_shifts(4, 2) == [0, 2]
    assert rotation_shifts(5, 10) == [0, 1, 2, 3, 4]
    assert rotation_shifts(16, 4) == [0, 4, 8, 12]


def test_averaging_removes_a_pure_position_preference():
    # A model that always gives 0.7 to whatever is shown first: over all rotations every option
    # is first once, so the average is uniform; the tie then goes to the smallest label.
    answers = [{"a": 0.7, "b": 0.2, "c": 0.1}, {"b": 0.7, "c": 0.2, "a": 0.1}, {"c": 0.7, "a": 0.2, "b": 0.1}]
    averaged = average_probabilities(answers)
    assert averaged == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    with pytest.raises(ValueError):
        average_probabilities([{"a": 1.0}, {"b": 1.0}])


def _decision(qid, ids, probs):
    return Decision.from_result({"id": qid, "option_ids": ids, "probabilities": probs, "input_tokens": 130},
                                timing={"total_ms": 300.0, "shared_prefix_tokens": 100}, client_latency_ms=320.0)


def test_debiased_result_scores_the_average():
    decisions = [_decision("rot0", ["a", "b", "c"], [0.5, 0.4, 0.1]),
                 _decision("rot1", ["b", "c", "a"], [0.6, 0.3, 0.1]),
                 _decision("rot2", ["c", "a", "b"], [0.5, 0.2, 0.3])]
    result = debiased_result(TASK, decisions, order="original", presented=["a", "b", "c"])
    assert result.probabilities == pytest.approx({"a": 0.8 / 3, "b": 1.3 / 3, "c": 0.9 / 3})
    assert result.valid and result.predicted == "b" and result.correct
    assert result.client_latency_ms == 320.0 and result.server_ms == 300.0
    # Shared prefix once (100) plus each question's own 30 tokens.
    assert result.extra == {"rotations": 3, "evaluated_tokens": 190, "rotation_tops": ["a", "b", "c"]}


def _tr(task_id, predicted, valid=True):
    return TaskResult(task_id=task_id, family="f", type="choice", expected="a", labels=["a", "b"], valid=valid,
                      predicted=predicted if valid else None)


def test_flip_stats_counts_changed_top_choices_on_valid_pairs():
    base = [_tr("1", "a"), _tr("2", "a"), _tr("3", "b"), _tr("4", "a"), _tr("5", "a")]
    other = [_tr("1", "a"), _tr("2", "b"), _tr("3", "a"), _tr("4", None, valid=False)]
    stats = flip_stats(base, other)
    assert stats == {"compared": 3, "flips": 2, "rate": pytest.approx(2 / 3), "not_comparable": 1,
                     "flipped_tasks": ["2", "3"]}
    assert flip_stats([], [])["rate"] is None
