"""The adapter's OpenAPI description (container/decision_adapter/openapi.json, served at
GET /openapi.json): a valid document that describes every route, and an adapter that keeps to it.

In-process (no model loaded): the app's routes are exactly the described ones, and the errors
it sends before the model is needed (401, 404, 405, 503) have the described bodies and headers.

Live: schemathesis generates requests from the description, bodies that fit the schemas and
bodies that break them, and sends them over real HTTP to a real adapter process. Every answer
must be a described status code with a JSON body of the described shape, never a 5xx. A body
that breaks the schema must be refused. Afterwards the adapter must still answer a valid
decision correctly.

Model time is the budget: a valid decision costs one to two seconds on two busy cores, a chat
answer about that per few tokens. So each operation gets a few dozen random examples, the
coverage phase (one request per schema boundary) sends only schema-breaking bodies, which are
refused before the model runs, and two test-side bounds keep the accepted bodies cheap: a
size filter, and chat bodies capped at a few generated tokens. The description itself is
not narrowed: it allows what the adapter allows.
"""

from __future__ import annotations

import json
import math
import urllib.request
from importlib import resources

import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from tests.support.http_client import call

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
MAX_EXAMPLES = 30  # per operation, in the fuzzing phase
CHAT_TOKENS = 8  # generated tokens per accepted chat body
MAX_BODY_CHARS = 1500  # serialised JSON of the bodies sent
MAX_QUESTIONS_SENT = 4
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]
DECISION = {
    "id": "openapi-1",
    "state": "The parcel never arrived and the customer wants a refund.",
    "question": "Which team should handle this?",
    "options": [
        {"id": "refunds", "text": "Refunds"},
        {"id": "shipping", "text": "Shipping"},
        {"id": "sales", "text": "Sales"},
    ],
}
SYSTEMONE = {"state": "The parcel never arrived.", "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}}
DECISIONS = {"input": "The parcel never arrived.", "questions": [{"type": "predicate", "instructions": "Refund?"}]}
CHAT = {"messages": [{"role": "user", "content": "Refund?"}], "stream": True}


def description_bytes() -> bytes:
    return resources.files("decision_adapter").joinpath("openapi.json").read_bytes()


def description() -> dict:
    return json.loads(description_bytes())


def _walk(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def _resolve(doc: dict, ref: str):
    target = doc
    for part in ref.removeprefix("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(target, dict) and part in target, f"{ref} does not resolve"
        target = target[part]
    return target


def described_response(doc: dict, path: str, method: str, status: int) -> dict:
    response = doc["paths"][path][method]["responses"][str(status)]
    return _resolve(doc, response["$ref"]) if "$ref" in response else response


def assert_conforms(doc: dict, response: dict, answer) -> None:
    """A test-client answer against a described response: JSON, body schema, required headers."""
    assert answer.mimetype == "application/json"
    schema = {**response["content"]["application/json"]["schema"], "components": doc["components"]}
    body = answer.get_json()
    errors = [str(e) for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(body)]
    assert not errors, f"{answer.status_code} {body}: {errors}"
    for name, header in response.get("headers", {}).items():
        if header.get("required"):
            assert name in answer.headers, f"{answer.status_code} lacks {name}"
            if header["schema"].get("type") == "integer":
                assert answer.headers[name].isdigit()


def app_without_model(monkeypatch, **env):
    """The real app with the model never loaded: every route the model serves answers 503."""
    from decision_adapter import app as app_module
    from decision_adapter.settings import load_settings

    monkeypatch.setattr(app_module._Holder, "load", lambda self: None)
    return app_module.create_app(load_settings(env), load="now")


# -- the document -----------------------------------------------------------------------------


def test_the_description_is_valid_openapi():
    doc = description()
    assert doc["openapi"].startswith("3.1.")
    schemathesis.openapi.from_dict(doc).validate()  # against the OpenAPI 3.1 meta-schema
    # That meta-schema leaves the JSON Schemas inside open: check each one, and every $ref.
    for where, node in _walk(doc):
        in_schema_slot = where[-2:-1] == ("schemas",) or where[-1:] == ("schema",)
        if in_schema_slot and isinstance(node, dict):
            try:
                jsonschema_rs.meta.validate(node)
            except jsonschema_rs.ValidationError as exc:
                pytest.fail(f"{'/'.join(map(str, where))} is not a valid JSON Schema: {exc}")
        if where[-1:] == ("$ref",):
            _resolve(doc, node)


def test_every_route_of_the_app_is_described(monkeypatch):
    app = app_without_model(monkeypatch)
    served = {
        (method, rule.rule.replace("<", "{").replace(">", "}"))
        for rule in app.url_map.iter_rules()
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    described = {
        (method.upper(), path)
        for path, item in description()["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }
    assert served == described


def test_every_operation_describes_its_errors():
    for path, item in description()["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert {"200", "500"} <= codes, f"{method.upper()} {path}"
            if operation.get("security") != []:  # behind the API key when one is configured
                assert {"401", "503"} <= codes, f"{method.upper()} {path}"
            if "requestBody" in operation:
                assert {"413", "415", "503", "504"} <= codes, f"{method.upper()} {path}"
                assert codes & {"400", "422"}, f"{method.upper()} {path} describes no refusal of a bad body"


# -- errors the app sends before the model is needed (in-process, no model) ------------------------


def test_answers_while_the_model_loads_are_described(monkeypatch):
    doc = description()
    client = app_without_model(monkeypatch).test_client()
    for method, path, body in [
        ("get", "/ping", None),
        ("post", "/invocations", DECISION),
        ("post", "/invocations", SYSTEMONE),
        ("post", "/v1/systemone", SYSTEMONE),
        ("post", "/v1/decisions", DECISIONS),
        ("post", "/v1/chat/completions", CHAT),
        ("get", "/v1/models", None),
    ]:
        answer = client.open(path, method=method.upper(), json=body)
        assert answer.status_code == 503, (method, path)
        assert_conforms(doc, described_response(doc, path, method, 503), answer)
    answer = client.get("/openapi.json")
    assert answer.status_code == 200 and answer.get_data() == description_bytes()


def test_answers_without_the_api_key_are_described(monkeypatch):
    doc = description()
    client = app_without_model(monkeypatch, DECISION_ADAPTER_API_KEY="openapi-test-key").test_client()
    for method, path, body in [
        ("post", "/invocations", DECISION),
        ("post", "/v1/systemone", SYSTEMONE),
        ("post", "/v1/decisions", DECISIONS),
        ("post", "/v1/chat/completions", CHAT),
        ("get", "/v1/models", None),
    ]:
        for headers in ({}, {"Authorization": "Bearer another-key"}):
            answer = client.open(path, method=method.upper(), json=body, headers=headers)
            assert answer.status_code == 401, (method, path, headers)
            assert_conforms(doc, described_response(doc, path, method, 401), answer)
    # The two open routes: /ping answers (503 while loading), /openapi.json serves the file.
    assert client.get("/ping").status_code == 503
    answer = client.get("/openapi.json")
    assert answer.status_code == 200 and answer.get_data() == description_bytes()
    assert client.get("/v1/models", headers={"Authorization": "Bearer openapi-test-key"}).status_code == 503


def test_unknown_routes_and_methods_are_described(monkeypatch):
    doc = description()
    client = app_without_model(monkeypatch).test_client()
    responses = doc["components"]["responses"]
    for method, path, status, name in [
        ("GET", "/nope", 404, "NotFound"),
        ("POST", "/v1/nope", 404, "NotFound"),
        ("GET", "/invocations", 405, "MethodNotAllowed"),
        ("DELETE", "/ping", 405, "MethodNotAllowed"),
        ("GET", "/v1/systemone", 405, "MethodNotAllowed"),
        ("GET", "/v1/decisions", 405, "MethodNotAllowed"),
        ("GET", "/v1/chat/completions", 405, "MethodNotAllowed"),
        ("POST", "/v1/decisions/x", 404, "NotFound"),
        ("POST", "/openapi.json", 405, "MethodNotAllowed"),
    ]:
        answer = client.open(path, method=method)
        assert answer.status_code == status, (method, path)
        assert_conforms(doc, responses[name], answer)


# -- a live adapter ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_live_adapter_serves_the_file_byte_for_byte(adapter):
    with urllib.request.urlopen(adapter.url + "/openapi.json", timeout=30) as response:
        assert response.status == 200
        assert response.headers.get_content_type() == "application/json"
        assert response.read() == description_bytes()


# Loaded from the package file when the module is collected: the test above shows the live
# adapter serves exactly these bytes. (schemathesis.pytest.from_fixture would fetch it from the
# adapter instead, but schemathesis 4.32 sets a node attribute that pytest 9.2 no longer has.)
described = schemathesis.openapi.from_dict(
    description(),
    config=schemathesis.Config.from_dict(
        {
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
            "phases": {"coverage": {"generation": {"mode": "negative"}}},
        }
    ),
)


@described.hook
def filter_body(context, body) -> bool:
    """Keep to bodies whose answer costs a few seconds of model time at most.

    Each part of a body lands in a prompt about once (the state is evaluated once for all
    questions), plus a template's worth of tokens per question: the serialised size and the
    number of questions bound the work. Larger bodies fit the description just as well; the
    hostile-input tests send those.
    """
    if not isinstance(body, dict):
        return True  # refused before the model runs
    questions = body.get("questions")
    count = len(questions) if isinstance(questions, (list, dict)) else 1
    return count <= MAX_QUESTIONS_SENT and len(json.dumps(body)) <= MAX_BODY_CHARS


def keep_chat_short(case) -> None:
    """Cap an acceptable chat body's generation at CHAT_TOKENS; a body the adapter must refuse stays refused.

    The adapter generates max_tokens tokens, else max_completion_tokens, else its default
    (256). Only valid larger limits, or no limit at all, are rewritten, to a smaller valid one.
    """
    body = case.body
    if not (isinstance(body, dict) and "messages" in body):
        return
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if type(value) is int and CHAT_TOKENS < value <= 8192:
            body[key] = CHAT_TOKENS
    if body.get("max_tokens") is None and body.get("max_completion_tokens") is None:
        body["max_tokens"] = CHAT_TOKENS


@pytest.mark.slow
@described.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_schemathesis_against_a_live_adapter(case, adapter):
    keep_chat_short(case)
    case.call_and_validate(base_url=adapter.url, checks=CHECKS, timeout=70)


@pytest.mark.slow
def test_the_adapter_still_answers_correctly_afterwards(adapter):
    status, _, body = call(adapter.url + "/invocations", DECISION)
    assert status == 200, body
    result = body["result"]
    assert result["id"] == DECISION["id"]
    assert result["option_ids"] == [o["id"] for o in DECISION["options"]]
    assert math.isclose(sum(result["probabilities"]), 1.0, abs_tol=1e-6)
    assert all(0.0 <= p <= 1.0 for p in result["probabilities"])
