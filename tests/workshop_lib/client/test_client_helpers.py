"""The client's pure parts: request helpers, result types, error parsing."""

from __future__ import annotations

import json
from email.utils import formatdate

import pytest

from workshop_lib.client import (
    BadRequest,
    Decision,
    EndpointBusy,
    EndpointClient,
    EndpointError,
    EndpointNotFound,
    EndpointServerError,
    UnprocessableRequest,
    decision,
    option_list,
    question,
)
from workshop_lib.client.endpoint_errors import error_class, error_from_response, parse_error_body, parse_retry_after


def test_decision_helper_builds_the_readme_schema():
    body = decision("t-1", "charged twice", "Which team?", {"billing": "Billing", "sales": "Sales"}, temperature=0.7)
    assert body == {
        "id": "t-1",
        "state": "charged twice",
        "question": "Which team?",
        "options": [{"id": "billing", "text": "Billing"}, {"id": "sales", "text": "Sales"}],
        "temperature": 0.7,
    }
    assert "temperature" not in decision("t-1", {"k": 1}, "q?", ["yes", "no"])


def test_option_list_accepts_every_shape_the_schema_does():
    assert option_list([("a", "Alpha"), "b", {"id": "c", "text": "Gamma"}]) == [
        {"id": "a", "text": "Alpha"},
        "b",
        {"id": "c", "text": "Gamma"},
    ]


def test_question_helper():
    assert question("route", "Which team?", ["a", "b"]) == {
        "id": "route",
        "question": "Which team?",
        "options": ["a", "b"],
    }


def test_decision_result_type():
    made = Decision.from_result(
        {
            "id": "t-1",
            "option_ids": ["a", "b", "c"],
            "probabilities": [0.2, 0.5, 0.3],
            "timing": {"total_ms": 12.5},
            "model": {"file": "m.gguf"},
        },
        client_latency_ms=20.0,
    )
    assert made.top == "b" and made.top_probability == 0.5
    assert made.as_dict() == {"a": 0.2, "b": 0.5, "c": 0.3}
    assert made.server_ms == 12.5 and made.model["file"] == "m.gguf" and made.client_latency_ms == 20.0
    assert made == Decision("t-1", ("a", "b", "c"), (0.2, 0.5, 0.3))  # timings are not part of equality
    assert hash(made) == hash(Decision("t-1", ("a", "b", "c"), (0.2, 0.5, 0.3)))
    with pytest.raises(AttributeError):
        made.id = "other"


def test_top_on_a_tie_is_the_first_option():
    assert Decision("t", ("x", "y"), (0.5, 0.5)).top == "x"


def test_parse_error_body_reads_the_adapter_error():
    body = json.dumps(
        {"error": {"code": "invalid_value", "message": "options[1].id is used twice", "field": "options[1].id"}}
    )
    assert parse_error_body(body.encode()) == ("invalid_value", "options[1].id is used twice", "options[1].id")


def test_parse_error_body_reads_llama_server_and_plain_text():
    openai = json.dumps({"error": {"code": 400, "message": "bad", "type": "invalid_request_error"}})
    assert parse_error_body(openai) == ("invalid_request_error", "bad", None)
    assert parse_error_body(b"<html>502 Bad Gateway</html>") == (None, "<html>502 Bad Gateway</html>", None)
    assert parse_error_body(b"") == (None, "(empty body)", None)


def test_parse_retry_after():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 0 <= parse_retry_after(formatdate(usegmt=True)) <= 1.0


@pytest.mark.parametrize(
    "status, cls",
    [
        (400, BadRequest),
        (413, BadRequest),
        (415, BadRequest),
        (422, UnprocessableRequest),
        (404, EndpointNotFound),
        (503, EndpointBusy),
        (429, EndpointBusy),
        (500, EndpointServerError),
        (502, EndpointServerError),
    ],
)
def test_status_to_error_class(status, cls):
    assert error_class(status) is cls and issubclass(cls, EndpointError)


def test_error_message_is_actionable():
    body = json.dumps({"error": {"code": "invalid_value", "message": "options has 17 options", "field": "options"}})
    exc = error_from_response(422, body, endpoint="http://127.0.0.1:1")
    assert isinstance(exc, UnprocessableRequest)
    assert (exc.status, exc.code, exc.field, exc.message) == (422, "invalid_value", "options", "options has 17 options")
    text = str(exc)
    assert "http://127.0.0.1:1" in text and "422 invalid_value" in text and "(field: options)" in text
    assert "Change the values" in text


def test_busy_error_carries_retry_after():
    exc = error_from_response(
        503, b'{"error": {"code": "busy", "message": "m", "field": null}}', endpoint="e", retry_after="3"
    )
    assert isinstance(exc, EndpointBusy) and exc.retry_after == 3.0


def test_decide_refuses_a_batch_body():
    client = EndpointClient.local("http://127.0.0.1:9")
    with pytest.raises(TypeError, match="decide_batch"):
        client.decide({"id": "b", "state": "s", "questions": []})


def test_negative_retries_are_refused():
    with pytest.raises(ValueError):
        EndpointClient.local("http://127.0.0.1:9", retries=-1)


def test_the_clients_readout_goes_with_own_and_system_one_bodies_only():
    sent = []

    class Recording:
        name, timeout_s = "recording", None

        def invoke(self, body, *, deadline=None):
            payload = json.loads(body)
            sent.append(payload)
            if "questions" in payload:
                return json.dumps(
                    {
                        "results": [
                            {"id": "q", "option_ids": ["a", "b"], "probabilities": [0.4, 0.6], "readout_name": "cloze"}
                        ]
                    }
                ).encode()
            return json.dumps({"result": {"id": "d", "option_ids": ["a", "b"], "probabilities": [0.5, 0.5]}}).encode()

    client = EndpointClient(Recording(), readout="cloze", normalize="sum")
    client.decide(decision("d", "s", "q?", ["a", "b"]))
    assert sent[-1]["readout"] == "cloze" and sent[-1]["normalize"] == "sum"
    client.decide(decision("d", "s", "q?", ["a", "b"]) | {"readout": "letters"})
    assert sent[-1]["readout"] == "letters"  # the body's own wins
    (made,) = client.decide_batch("b", "s", [question("q", "q?", ["a", "b"])])
    assert sent[-1]["readout"] == "cloze" and made.readout == "cloze"
    client.decide({"decision": {"id": "d", "state": "s", "question": "q?", "options": [{"id": "a"}, {"id": "b"}]}})
    assert "readout" not in sent[-1] and "readout" not in sent[-1]["decision"]
    with pytest.raises(ValueError, match="readout"):
        EndpointClient.local("http://127.0.0.1:9", readout="words")
    with pytest.raises(ValueError, match="normalize"):
        EndpointClient.local("http://127.0.0.1:9", normalize="softmax")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b'{"status": "ready"}', {"status": "ready"}),
        (b"  \n", {}),
        (b"pong", {"body": "pong"}),
        (b'["ready"]', {"body": '["ready"]'}),  # JSON, but not an object
    ],
)
def test_ping_and_status_give_the_json_object_else_the_text(reply, expected):
    class Answering:
        name = "answering"

        def ping(self):
            return reply

        def get(self, path):
            assert path == "/status"
            return reply

    client = EndpointClient(Answering())
    assert client.ping() == expected and client.status() == expected
