"""workshop_lib.client.openai_decisions: pure builders and readers of OpenAI Decisions bodies (no server)."""

import pytest

from workshop_lib.client import openai_decisions as od

QUESTIONS = [od.predicate("The customer asks for a refund.", name="refund"),
             od.choice("Which team?", {"billing": "Payments", "shipping": None}, name="team"),
             od.score("How frustrated?", ["calm", "annoyed", "furious"], name="anger")]


def reply(**changes):
    answers = [{"type": "predicate", "name": "refund", "probability": 0.7},
               {"type": "choice", "name": "team", "choice": "billing", "confidence": 0.4,
                "probabilities": [{"value": "billing", "probability": 0.6}, {"value": "shipping", "probability": 0.4}]},
               {"type": "score", "name": "anger", "score": 1.2, "confidence": 0.3,
                "probabilities": [{"value": 0, "label": "calm", "probability": 0.2},
                                  {"value": 1, "label": "annoyed", "probability": 0.4},
                                  {"value": 2, "label": "furious", "probability": 0.4}]}]
    for index, fields in changes.items():
        answers[int(index[1:])].update(fields)
    return {"model": "m", "answers": answers, "usage": {"input_tokens": 10}}


def test_the_request_keeps_the_questions_in_order_with_their_descriptions():
    body = od.request("text", QUESTIONS)
    assert body["model"] == "jev-latest" and body["input"] == "text"
    assert [q["type"] for q in body["questions"]] == ["predicate", "choice", "score"]
    assert body["questions"][1]["choices"] == [{"value": "billing", "description": "Payments"}, {"value": "shipping"}]
    assert "model" not in od.request("text", QUESTIONS, model=None)


@pytest.mark.parametrize("make, message", [
    (lambda: od.choice("Which?", ["only"]), "two values"),
    (lambda: od.score("How?", ["one"]), "two levels"),
    (lambda: od.predicate("  "), "instructions"),
    (lambda: od.request("t", []), "at least one"),
    (lambda: od.request("t", [od.predicate("a", name="x"), od.predicate("b", name="x")]), "unique"),
])
def test_bad_requests_are_refused_before_sending(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_fitting_reply_is_read_by_name_with_probabilities_keyed_by_option():
    result = od.parse_response(reply(), od.request("text", QUESTIONS))
    assert result["refund"].probabilities == pytest.approx({"yes": 0.7, "no": 0.3})
    assert result["team"].choice == "billing" and result["team"].top == "billing"
    assert result["anger"].score == 1.2 and list(result["anger"].probabilities) == ["calm", "annoyed", "furious"]
    assert [a.name for a in result.answers] == ["refund", "team", "anger"]


@pytest.mark.parametrize("changes, message", [
    ({"a0": {"name": "other"}}, "expected the predicate question"),
    ({"a0": {"probability": 1.5}}, "not a probability"),
    ({"a1": {"choice": "it"}}, "not one of the values"),
    ({"a1": {"probabilities": [{"value": "shipping", "probability": 0.4}, {"value": "billing", "probability": 0.6}]}},
     "expected value 'billing'"),
    ({"a2": {"score": 3}}, "level index"),
    ({"a2": {"probabilities": [{"value": 0, "label": "calm", "probability": 0.5},
                               {"value": 1, "label": "annoyed", "probability": 0.5},
                               {"value": 2, "label": "furious", "probability": 0.5}]}}, "sum to"),
])
def test_a_reply_that_does_not_answer_the_request_is_refused(changes, message):
    with pytest.raises(od.DecisionsFormatError, match=message):
        od.parse_response(reply(**changes), od.request("text", QUESTIONS))


def test_a_missing_answer_is_refused():
    short = reply()
    short["answers"].pop()
    with pytest.raises(od.DecisionsFormatError, match="expected 3 answers"):
        od.parse_response(short, od.request("text", QUESTIONS))
