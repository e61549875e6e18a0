"""workshop_lib.client.jev: pure builders and readers of System One bodies (no server)."""

from __future__ import annotations

import pytest

from workshop_lib.client import policy
from workshop_lib.client.jev import (
    SystemOneFormatError,
    choice,
    error_fields,
    noul,
    parse_response,
    request,
    score,
    task_probabilities,
    task_request,
)

TICKET = "Charged twice; refund me."


def body():
    return request(
        TICKET,
        {
            "refund": noul("Money back?"),
            "team": choice("Which team?", {"Billing": "Payments", "Technical": None}),
            "anger": score("How angry?", ["Calm", "Angry", "Furious"]),
        },
    )


def reply():
    return {
        "model": "SmolLM2-135M-Instruct.Q4_1",
        "usage": {"input_tokens": 210, "output_tokens": 0},
        "answers": {
            "refund": {"type": "noul", "noul": 0.9},
            "team": {
                "type": "choice",
                "choice": "Billing",
                "confidence": 0.5,
                "probabilities": {"Billing": 0.75, "Technical": 0.25},
            },
            "anger": {
                "type": "score",
                "score": 0.5,
                "confidence": 0.4,
                "legend": {"0": "Calm", "1": "Angry", "2": "Furious"},
                "probabilities": {"0": 0.6, "1": 0.3, "2": 0.1},
            },
        },
        "x_timing": {"total_ms": 812.0},
    }


def test_builders_make_the_wire_format():
    sent = body()
    assert sent["model"] == "jev-latest" and sent["state"] == TICKET
    assert sent["questions"]["refund"] == {"type": "noul", "instructions": "Money back?"}
    assert sent["questions"]["team"]["criteria"] == {"Billing": "Payments", "Technical": None}
    assert sent["questions"]["anger"] == {
        "type": "score",
        "instructions": "How angry?",
        "criteria": ["Calm", "Angry", "Furious"],
    }
    assert noul(true="Wants a refund") == {"type": "noul", "criteria": {"true": "Wants a refund"}}
    assert choice(None, ["a", "b"]) == {"type": "choice", "criteria": {"a": None, "b": None}}
    assert "model" not in request(TICKET, {"q": noul("x?")}, model=None)


@pytest.mark.parametrize(
    "build",
    [
        lambda: noul(),
        lambda: choice("x", ["only"]),
        lambda: choice("x", [str(i) for i in range(256)]),
        lambda: choice("x", ["a", "a"]),
        lambda: score("x", ["one"]),
        lambda: score("x", ["a", None]),
        lambda: request(None, {"q": noul("x?")}),
        lambda: request(TICKET, {}),
        lambda: request(TICKET, {"": noul("x?")}),
        lambda: request(TICKET, {"q": {"type": "box"}}),
    ],
)
def test_builders_refuse_what_the_server_would_refuse(build):
    with pytest.raises(ValueError):
        build()


def test_parse_response_reads_every_type():
    result = parse_response(reply(), body(), client_latency_ms=900.0)
    assert result.model == "SmolLM2-135M-Instruct.Q4_1" and result.usage == {"input_tokens": 210, "output_tokens": 0}
    assert result["refund"].value == 0.9 and result["refund"].probabilities == {"no": pytest.approx(0.1), "yes": 0.9}
    assert result["team"].value == "Billing" and result["team"].top == "Billing"
    assert result["anger"].value == 0.5 and list(result["anger"].probabilities) == ["0", "1", "2"]
    assert result.server_ms == 812.0 and result.client_latency_ms == 900.0
    # answers plug into the same policies as decisions
    assert policy.accept_or_fallback(result["team"].probabilities, 0.7, "needs_review") == "Billing"
    assert policy.accept_or_fallback(result["team"].probabilities, 0.8, "needs_review") == "needs_review"


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: r["answers"].pop("team"),
        lambda r: r["answers"].update(extra={"type": "noul", "noul": 0.1}),
        lambda r: r["answers"]["team"]["probabilities"].pop("Technical"),
        lambda r: r["answers"]["team"]["probabilities"].update(Billing=0.9),
        lambda r: r["answers"]["team"].update(choice="Sales"),
        lambda r: r["answers"]["refund"].update(noul=1.5),
        lambda r: r["answers"]["anger"].update(type="choice"),
        lambda r: r["answers"]["anger"].update(score=float("nan")),
        lambda r: r.pop("answers"),
    ],
)
def test_parse_response_refuses_answers_to_another_request(damage):
    damaged = reply()
    damage(damaged)
    with pytest.raises(SystemOneFormatError):
        parse_response(damaged, body())


def test_error_fields_read_both_jev_error_shapes():
    validation = {
        "detail": [{"loc": ["body", "questions", "q", "criteria"], "msg": "has 1 options", "type": "too_short"}]
    }
    assert error_fields(validation) == ("too_short", "has 1 options", "questions.q.criteria")
    other = {"detail": {"error_type": "authentication_error", "message": "the API key is not valid"}}
    assert error_fields(other) == ("authentication_error", "the API key is not valid", None)
    assert error_fields({"error": {"code": "busy", "message": "m"}}) is None


def test_jevbench_tasks_travel_through_the_jev_schema():
    task = {
        "id": "t-7",
        "family": "support",
        "state": TICKET,
        "labels": ["no", "yes"],
        "expected": "yes",
        "question": {"type": "noul", "instructions": "Money back?", "criteria": None},
    }
    sent = task_request(task)
    assert sent["questions"] == {"t-7": task["question"]}
    result = parse_response({"model": "m", "answers": {"t-7": {"type": "noul", "noul": 0.8}}, "usage": {}}, sent)
    assert task_probabilities(task, result["t-7"]) == {"no": pytest.approx(0.2), "yes": 0.8}
    scored = {**task, "labels": ["0", "1"], "question": {"type": "score", "criteria": ["low", "high"]}}
    answer = parse_response(
        {
            "model": "m",
            "usage": {},
            "answers": {"t-7": {"type": "score", "score": 0.3, "probabilities": {"0": 0.7, "1": 0.3}}},
        },
        task_request(scored),
    )["t-7"]
    assert task_probabilities(scored, answer) == {"0": 0.7, "1": 0.3}


def test_the_packaged_benchmark_tasks_all_make_valid_jev_requests():
    from decision_adapter.apis.systemone import parse_systemone
    from workshop_lib.evaluation.tasks import load_tasks

    for task in load_tasks():
        record = task.to_record()
        sent = task_request(record)
        (question,) = parse_systemone(sent).questions  # the adapter's own validation accepts it
        labels = [str(label) for label in record["labels"]]
        if question.type == "noul":
            assert labels == ["no", "yes"]
        else:
            assert list(question.names) == labels


def test_an_answer_to_a_question_of_no_known_type_is_refused():
    sent, answered = body(), reply()
    sent["questions"]["anger"]["type"] = answered["answers"]["anger"]["type"] = "rank"
    with pytest.raises(SystemOneFormatError, match=r"answers\['anger'\]: the question's type 'rank' is none of"):
        parse_response(answered, sent)
