"""The request's token budget (DECISION_ADAPTER_MAX_REQUEST_TOKENS): a request whose prompts pass it is refused
before anything is evaluated, naming the question that passes it; one within it is answered as before."""

from __future__ import annotations

import dataclasses

import pytest

from decision_adapter.apis import decisions
from decision_adapter.caller_errors import PromptTooLong

STATE = "Order 1182 arrived with a cracked screen; the customer wants a refund or a replacement."


def request(n: int):
    return decisions.parse_decisions(
        {
            "input": STATE,
            "questions": [
                {"type": "predicate", "name": f"q{i}", "instructions": f"Check {i}: the customer asks for money back."}
                for i in range(n)
            ],
        }
    )


def test_a_request_over_its_budget_is_refused_before_any_evaluation_naming_the_question(engine, monkeypatch):
    answered, timing = decisions.score(engine, request(3))
    budget = timing["input_tokens"]  # what three questions read: the prefix once, then each question's own tokens
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, max_request_tokens=budget))
    again, _ = decisions.score(engine, request(3))
    assert [r.probabilities for r in again] == [r.probabilities for r in answered]

    def evaluated(*args, **kwargs):
        raise AssertionError("a request over its budget was evaluated")

    monkeypatch.setattr(engine, "_evaluate", evaluated)
    with pytest.raises(PromptTooLong) as caught:
        decisions.score(engine, request(400))
    body, status = decisions.error_body(caught.value)
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
    assert body["error"]["param"] == "questions[3]", body  # the fourth question passes three questions' budget
    assert "DECISION_ADAPTER_MAX_REQUEST_TOKENS" in body["error"]["message"]
