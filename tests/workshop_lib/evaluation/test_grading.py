"""Scoring rules on fixed inputs: valid vectors, argmax ties, invalid and failed responses."""

import math

import pytest

from decision_contract import wire
from workshop_lib.client import Decision, EndpointBusy, InvalidResponse
from workshop_lib.evaluation.grading import invalid_reason, predicted_label
from workshop_lib.evaluation.runner import decision_result, failed_result, score_response
from workshop_lib.evaluation.tasks import Task

TASK = Task("t1", "routing", "choice", "state", "Which?", (("b", "B"), ("a", "A"), ("c", "C")), "a")


def test_a_proper_vector_is_valid():
    assert invalid_reason(["a", "b", "c"], ["b", "a", "c"], [0.2, 0.5, 0.3]) is None  # the labels in any order
    assert invalid_reason(["a", "b"], ["a", "b"], [0.3, 0.7000004]) is None  # within the tolerance


def test_the_benchmark_holds_answers_to_the_wires_one_tolerance():
    off = 1.5 * wire.SUM_TOLERANCE  # what a looser tolerance of the benchmark's own would have let through
    assert "not 1" in invalid_reason(["a", "b"], ["a", "b"], [0.3, 0.7 + off])
    assert invalid_reason(["a", "b"], ["a", "b"], [0.3, 0.7 + 0.5 * wire.SUM_TOLERANCE]) is None


@pytest.mark.parametrize(
    "ids, probs, reason",
    [
        (["a", "b"], [0.5, 0.5], "lacks the options ['c']"),
        (["a", "b", "c", "d"], [0.25] * 4, "has ['d'], which were not sent"),
        (["a", "a", "c"], [0.3, 0.3, 0.4], "more than once"),
        (["a", "b", "c"], [0.5, 0.5], "2 probabilities for 3 option ids"),
        (["a", "b", "c"], [0.5, math.nan, 0.5], "not a finite number"),
        (["a", "b", "c"], [1.2, -0.2, 0.0], "outside [0, 1]"),
        (["a", "b", "c"], [0.2, 0.2, 0.2], "sum to 0.6"),
        (["a", "b", "c"], [0.5, "0.5", 0.0], "not a number"),
    ],
)
def test_improper_vectors_are_invalid(ids, probs, reason):
    assert reason in invalid_reason(["a", "b", "c"], ids, probs)


def test_argmax_and_ties_go_to_the_smallest_label_not_the_first_shown():
    assert predicted_label(["b", "a", "c"], [0.2, 0.7, 0.1]) == "a"
    assert predicted_label(["c", "b", "a"], [0.4, 0.4, 0.2]) == "b"
    assert predicted_label(["yes", "no"], [0.5, 0.5]) == "no"
    assert predicted_label(["10", "9"], [0.5, 0.5]) == "10"  # lexicographic, not numeric


def test_score_response_correct_and_wrong():
    right = score_response(
        TASK, ["b", "a", "c"], [0.1, 0.8, 0.1], option_logits=[1.0, 3.0, 1.0], client_latency_ms=12.0
    )
    assert right.valid and right.correct and right.predicted == "a" and right.top_probability == 0.8
    assert right.option_logits == {"b": 1.0, "a": 3.0, "c": 1.0} and right.predicted_position == 1
    wrong = score_response(TASK, ["b", "a", "c"], [0.6, 0.3, 0.1])
    assert wrong.valid and not wrong.correct and wrong.predicted == "b" and wrong.predicted_position == 0


def test_an_invalid_response_counts_as_wrong_even_if_its_argmax_is_right():
    result = score_response(TASK, ["b", "a"], [0.1, 0.9])
    assert not result.valid and not result.correct and result.predicted is None
    assert result.answered and "lacks the options ['c']" in result.error


def test_a_failed_request_is_invalid_and_a_503_is_counted():
    busy = EndpointBusy("model busy", status=503)
    busy.attempts = 4
    result = failed_result(TASK, busy, client_latency_ms=3000.0)
    assert not result.valid and not result.correct and not result.answered
    assert result.busy and result.attempts == 4 and "model busy" in result.error
    other = failed_result(TASK, InvalidResponse("not JSON"))
    assert not other.busy and other.attempts == 1


def test_decision_result_reads_the_adapters_fields():
    raw = {
        "id": "t1",
        "option_ids": ["b", "a", "c"],
        "probabilities": [0.2, 0.5, 0.3],
        "option_logits": [0.1, 1.0, 0.5],
        "input_tokens": 123,
    }
    decision = Decision.from_result(
        raw, timing={"total_ms": 80.0, "evaluate_ms": 70.0}, client_latency_ms=95.0, attempts=2
    )
    result = decision_result(TASK, decision)
    assert result.correct and result.input_tokens == 123 and result.server_ms == 80.0
    assert result.client_latency_ms == 95.0 and result.attempts == 2 and result.timing["evaluate_ms"] == 70.0
    assert result.presented == ["b", "a", "c"]
