"""The OpenAPI document is generated from the dialects' models, and the client's builders keep to it.

``python -m decision_adapter.openapi`` writes container/decision_adapter/openapi.json; the app
serves that file. Here: the committed file and the served bytes equal a fresh generation, and
every body the client's request builders make, and the workshop's example bodies (workshop_lib,
imported by this test only: the client never imports the server), is valid under the document and
accepted by the app's parser.
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from decision_adapter import openapi
from decision_adapter.apis import decisions, invocations
from decision_adapter.settings import load_settings
from workshop_lib import client, examples
from workshop_lib.client import jev as systemone

OPTIONS = {"refunds": "Refunds", "shipping": "Shipping"}
STATE = {"ticket": "The parcel never arrived.", "customer": "c-1"}


def test_the_committed_document_is_a_fresh_generation():
    committed = resources.files("decision_adapter").joinpath("openapi.json").read_bytes()
    assert committed == openapi.render(), "openapi.json is stale: run python -m decision_adapter.openapi"
    assert openapi.main(["--check"]) == 0


def test_the_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    stale = tmp_path / "openapi.json"
    stale.write_bytes(openapi.render().replace(b"Decision adapter", b"Decision adaptor", 1))
    monkeypatch.setattr(openapi, "FILE", stale)
    assert openapi.main(["--check"]) == 1
    assert openapi.main([]) == 0 and stale.read_bytes() == openapi.render()


def test_the_served_document_is_a_fresh_generation(monkeypatch):
    from decision_adapter import app as app_module

    monkeypatch.setattr(app_module._Holder, "load", lambda self: None)
    answer = app_module.create_app(load_settings({}), load="now").test_client().get("/openapi.json")
    assert answer.status_code == 200 and answer.get_data() == openapi.render()


def test_every_model_schema_is_in_the_document():
    schemas = openapi.document()["components"]["schemas"]
    for model in openapi.MODELS:
        assert model.__name__ in schemas, model


# -- the client's builders against the document ---------------------------------------------------------


class _Capture:
    """A transport that keeps the body the client sends and answers nothing useful."""

    name = "capture"
    timeout_s = None

    def __init__(self):
        self.sent: list[dict] = []

    def invoke(self, body: bytes, *, deadline=None) -> bytes:
        self.sent.append(json.loads(body))
        return b"{}"


def _sent(call) -> dict:
    capture = _Capture()
    try:
        call(client.EndpointClient(capture, retries=0))
    except client.InvalidResponse:
        pass  # the canned reply is empty: only the request matters here
    (body,) = capture.sent
    return body


def _bodies() -> dict[str, tuple[str, dict]]:
    questions = [
        client.question("team", "Which team?", OPTIONS),
        client.question("tone", "Which tone?", [("calm", "Calm"), ("angry", "Angry")], temperature=0.5),
    ]
    sample = [
        {
            "id": "a",
            "state": "s",
            "question": "Which?",
            "options": [{"id": "x", "description": "X"}, {"id": "y", "description": ""}],
        },
        {"id": "b", "state": "s", "question": "Other?", "options": ["p", "q"]},
    ]
    jev = {
        "refund": systemone.noul("Does the customer want money back?"),
        "team": systemone.choice("Which team?", {"Billing": "Payments", "Shipping": None}),
        "anger": systemone.score("How angry?", ["calm", "annoyed", "furious"]),
    }
    return {
        "decision": ("/invocations", client.decision("t-1", STATE, "Which team?", OPTIONS, temperature=0.7)),
        "decide": ("/invocations", _sent(lambda c: c.decide(client.decision("t-2", "text", "Which?", ["a", "b"])))),
        "decide_batch": ("/invocations", _sent(lambda c: c.decide_batch("b-1", STATE, questions))),
        "decide_shared": ("/invocations", _sent(lambda c: c.decide_shared(sample))),
        "decide_sample_one": ("/invocations", _sent(lambda c: c.decide({"decision": sample[0]}))),
        "chat": ("/invocations", _sent(lambda c: c.chat("Say hi", max_tokens=4))),
        "chat_messages": (
            "/invocations",
            _sent(lambda c: c.chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])),
        ),
        "systemone_request": ("/v1/systemone", systemone.request(STATE, jev)),
        "systemone_invocation": ("/invocations", systemone.request("plain text", jev, model=None)),
        "systemone_call": ("/invocations", _sent(lambda c: c.systemone(STATE, jev))),
        **{
            f"examples.{name}": ("/invocations", getattr(examples, name))
            for name in ("SUPPORT_ROUTE", "SHARED_STATE", "CHAT", "SAMPLE_DECISION", "SAMPLE_SHARED", "SAMPLE_CHAT")
        },
    }


BODIES = _bodies()
DOCUMENT = openapi.document()


def _validator(path: str) -> jsonschema.Draft202012Validator:
    schema = DOCUMENT["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": DOCUMENT["components"]})


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_clients_bodies_are_valid_under_the_document(name):
    path, body = BODIES[name]
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(path).iter_errors(body)]
    assert not errors, (name, body, errors)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_app_accepts_the_clients_bodies(name):
    path, body = BODIES[name]
    settings = load_settings({})
    if path == "/invocations":
        assert invocations.parse(body, settings) is not None
    else:
        from decision_adapter.apis import systemone as dialect

        assert dialect.parse(body, settings).questions


def test_a_misspelt_field_is_invalid_under_the_document_and_refused_by_the_app():
    from decision_adapter.caller_errors import InvalidValue

    body = dict(client.decision("t-1", "s", "Which?", OPTIONS), temperture=0.5)
    assert list(_validator("/invocations").iter_errors(body))
    with pytest.raises(InvalidValue) as refused:
        invocations.parse(body, load_settings({}))
    assert refused.value.field == "temperture" and "temperture" in refused.value.message


def test_a_decisions_body_is_valid_under_the_document_and_parsed():
    body = {
        "model": "jev-latest",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "questions": [
            {"type": "predicate", "name": "p", "instructions": "Is it a greeting?"},
            {"type": "choice", "instructions": "Which?", "choices": [{"value": "a"}, {"value": True}]},
            {"type": "score", "instructions": "How?", "levels": [{"label": "lo"}, {"label": "hi"}]},
        ],
    }
    assert not list(_validator("/v1/decisions").iter_errors(body))
    assert len(decisions.parse(body, load_settings({})).questions) == 3
