"""POST /v1/decisions (the OpenAI Decisions API) on a real adapter process: answers and their order,
the same answer for the same request, agreement with System One on the same prompt, errors, API key."""

from __future__ import annotations

import math

import pytest

from tests.support.adapters import JEV_API_KEY, JEV_ENV
from tests.support.http_client import call as _call

pytestmark = pytest.mark.slow

TICKET = (
    "I was charged twice for my March invoice and the refund I was promised has not arrived. "
    "Fix it today or I will dispute the charge with my bank."
)
PREDICATE = {"type": "predicate", "name": "refund", "instructions": "The customer asks for money back."}
CHOICE = {
    "type": "choice",
    "name": "team",
    "instructions": "Which team should handle this ticket?",
    "choices": [
        {"value": "billing", "description": "Payments, invoices, refunds"},
        {"value": "technical"},
        {"value": True, "description": "Someone else"},
    ],
}
SCORE = {
    "type": "score",
    "instructions": "How frustrated is the customer?",
    "levels": [
        {"label": "calm"},
        {"label": "frustrated", "description": "Unhappy, still polite"},
        {"label": "very angry"},
    ],
}


def call(url, body=None, **kw):
    kw.setdefault("timeout", 300.0)
    return _call(url, body, **kw)


@pytest.fixture(scope="module")
def server(adapters):
    return adapters.shared(**JEV_ENV)  # the process the System One tests use


def decide(server, questions, input=TICKET, **extra):
    status, headers, reply = call(server.url + "/v1/decisions", {"input": input, "questions": questions, **extra})
    assert status == 200, reply
    assert headers["Content-Type"].startswith("application/json")
    return reply


def probabilities(answer: dict) -> list[float]:
    if answer["type"] == "predicate":
        return [answer["probability"]]
    return [p["probability"] for p in answer["probabilities"]]


def test_three_question_types_answer_in_question_order(server):
    reply = decide(server, [PREDICATE, CHOICE, SCORE], model="jev-latest")
    assert reply["model"] == "SmolLM2-135M-Instruct.Q4_1"
    predicate, choice, score = reply["answers"]
    assert [a["type"] for a in reply["answers"]] == ["predicate", "choice", "score"]
    assert [a["name"] for a in reply["answers"]] == ["refund", "team", None]  # echoed; null when not given

    assert 0.0 <= predicate["probability"] <= 1.0

    p = [item["probability"] for item in choice["probabilities"]]
    assert [item["value"] for item in choice["probabilities"]] == ["billing", "technical", True]
    assert math.isclose(sum(p), 1.0, abs_tol=1e-9) and all(0.0 <= v <= 1.0 for v in p)
    assert choice["choice"] == choice["probabilities"][p.index(max(p))]["value"]
    assert math.isclose(choice["confidence"], (max(p) - 1 / 3) / (1 - 1 / 3), abs_tol=1e-9)

    levels = score["probabilities"]
    assert [(item["value"], item["label"]) for item in levels] == [(0, "calm"), (1, "frustrated"), (2, "very angry")]
    q = [item["probability"] for item in levels]
    assert math.isclose(sum(q), 1.0, abs_tol=1e-9)
    assert math.isclose(score["score"], sum(i * v for i, v in enumerate(q)), abs_tol=1e-9)
    assert 0.0 <= score["confidence"] <= 1.0

    usage = reply["usage"]
    assert usage["output_tokens"] == 0 and usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert usage["total_tokens"] == usage["input_tokens"] > 0
    details = usage["input_tokens_details"]
    # three prompts open with the same state: the second and third read it from the first's evaluation
    assert 0 < details["cached_tokens"] < usage["input_tokens"] and details["cache_write_tokens"] == 0


def test_the_same_request_gets_the_same_answer(server):
    first = decide(server, [PREDICATE, CHOICE])
    decide(server, [SCORE], input="Another customer, another state in the cache.")
    again = decide(server, [PREDICATE, CHOICE])
    assert first.pop("request_id") != again.pop("request_id") and again == first  # each request has its own id


def test_each_answer_depends_on_its_own_question_only(server):
    together = decide(server, [PREDICATE, CHOICE, SCORE])["answers"]
    reordered = decide(server, [dict(SCORE, name="renamed"), PREDICATE, dict(CHOICE, name="other")])["answers"]
    assert [a["name"] for a in reordered] == ["renamed", "refund", "other"]
    for a, b in zip(together, [reordered[1], reordered[2], reordered[0]]):
        assert a["type"] == b["type"]
        assert all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(probabilities(a), probabilities(b)))
    alone = decide(server, [CHOICE])
    assert all(
        math.isclose(x, y, abs_tol=1e-6) for x, y in zip(probabilities(alone["answers"][0]), probabilities(together[1]))
    )
    assert alone["usage"]["input_tokens_details"]["cached_tokens"] == 0


def test_a_message_input_is_the_same_state_as_its_text(server):
    as_text = decide(server, [PREDICATE])
    as_messages = decide(
        server, [PREDICATE], input=[{"role": "user", "content": [{"type": "input_text", "text": TICKET}]}]
    )
    assert as_messages["answers"] == as_text["answers"] and as_messages["usage"] == as_text["usage"]


def test_the_same_question_as_system_one_gets_the_same_probabilities(server):
    """Both dialects render a question the same way over the same readout: a predicate is a noul
    without described outcomes, a choice a choice whose criteria are the descriptions."""
    reply = decide(server, [PREDICATE, dict(CHOICE, choices=CHOICE["choices"][:2])])["answers"]
    status, _, jev = call(
        server.url + "/v1/systemone",
        {
            "state": TICKET,
            "questions": {
                "n": {"type": "noul", "instructions": PREDICATE["instructions"]},
                "c": {
                    "type": "choice",
                    "instructions": CHOICE["instructions"],
                    "criteria": {"billing": "Payments, invoices, refunds", "technical": None},
                },
            },
        },
    )
    assert status == 200, jev
    assert math.isclose(reply[0]["probability"], jev["answers"]["n"]["noul"], abs_tol=1e-6)
    assert all(
        math.isclose(x, y, abs_tol=1e-6)
        for x, y in zip(probabilities(reply[1]), jev["answers"]["c"]["probabilities"].values())
    )


@pytest.mark.parametrize(
    "body, param, code",
    [
        ({"input": TICKET}, "questions", "missing_required_parameter"),
        ({"input": TICKET, "questions": []}, "questions", "invalid_value"),
        ({"input": TICKET, "questions": [PREDICATE], "temperture": 1}, "temperture", "unknown_parameter"),
        ({"input": 7, "questions": [PREDICATE]}, "input", "invalid_type"),
        ({"input": " ", "questions": [PREDICATE]}, "input", "invalid_value"),
        ({"input": TICKET, "questions": [dict(PREDICATE, type="box")]}, "questions[0].type", "invalid_value"),
        (
            {"input": TICKET, "questions": [{"name": "x", "instructions": "?"}]},
            "questions[0].type",
            "missing_required_parameter",
        ),
        (
            {"input": TICKET, "questions": [dict(CHOICE, choices=[{"value": "a"}])]},
            "questions[0].choices",
            "invalid_value",
        ),
        (
            {"input": TICKET, "questions": [dict(CHOICE, choices=[{"value": "a"}, {"value": "a"}])]},
            "questions[0].choices",
            "invalid_value",
        ),
        ({"input": TICKET, "questions": [PREDICATE, PREDICATE]}, "questions[1].name", "invalid_value"),
        (
            {"input": TICKET, "questions": [dict(SCORE, levels=[{"label": str(i)} for i in range(11)])]},
            "questions[0].levels",
            "invalid_value",
        ),
        (
            {"input": TICKET, "questions": [dict(SCORE, levels=[{"label": "a", "colour": "red"}, {"label": "b"}])]},
            "questions[0].levels[0].colour",
            "unknown_parameter",
        ),
        (
            {
                "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}],
                "questions": [PREDICATE],
            },
            "input[0].content[0].type",
            "unsupported_content",
        ),
        ({"input": [{"role": "tool", "content": "hi"}], "questions": [PREDICATE]}, "input[0].role", "invalid_value"),
        (
            {"input": [{"type": "function_call_output", "call_id": "c9", "output": "42"}], "questions": [PREDICATE]},
            "input[0].call_id",
            "invalid_value",
        ),
        ({"input": TICKET, "questions": [PREDICATE] * 401}, "questions", "invalid_value"),
    ],
)
def test_bad_bodies_are_400s_naming_the_field(server, body, param, code):
    status, _, reply = call(server.url + "/v1/decisions", body)
    assert status == 400, reply
    error = reply["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code), error
    assert error["message"]


def test_other_refusals_in_openais_shape(server):
    # Another model's name is answered by the served model (404 only with strict names: tests/adapter/clients).
    status, _, reply = call(server.url + "/v1/decisions", raw=b"{not json")
    assert (
        status == 400 and reply["error"]["code"] == "invalid_type" and reply["error"]["type"] == "invalid_request_error"
    )
    status, _, reply = call(
        server.url + "/v1/decisions", {"input": TICKET, "questions": [PREDICATE]}, content_type="text/plain"
    )
    assert status == 415 and reply["error"]["code"] == "unsupported_media_type"
    status, _, reply = call(server.url + "/v1/decisions", method="GET")
    assert status == 405 and reply["error"]["code"] == "method_not_allowed"


def test_the_api_key_guards_it_like_every_v1_route(adapters):
    keyed = adapters.shared(**JEV_ENV, DECISION_ADAPTER_API_KEY=JEV_API_KEY)
    body = {"input": TICKET, "questions": [PREDICATE]}
    for headers in ({}, {"Authorization": "Bearer not-the-key"}):
        status, answer_headers, reply = call(keyed.url + "/v1/decisions", body, headers=headers)
        assert status == 401 and answer_headers.get("WWW-Authenticate") == "Bearer"
        assert reply["error"]["code"] == "invalid_api_key" and reply["error"]["type"] == "invalid_request_error"
    status, _, reply = call(keyed.url + "/v1/decisions", body, headers={"Authorization": f"Bearer {JEV_API_KEY}"})
    assert status == 200 and len(reply["answers"]) == 1
