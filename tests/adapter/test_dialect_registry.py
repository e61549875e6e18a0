"""The APIs are one registry that everyone iterates (apis/registry.py).

A stand-in API, declared here and nowhere else (a record with a route, a sniffer and an error shape),
is picked up by the app's routing, ``/invocations``' sniffing, the metric line, nginx's configuration
and the OpenAPI document once it is in the registry handed to them. The stand-in's work runs on the real
engine; only the API is made up.
"""

from __future__ import annotations

import json

import pytest
from flask import Blueprint

from decision_adapter import metrics, nginx, openapi
from decision_adapter.apis.api import Api, Scope
from decision_adapter.apis.dialect import Dialect, post
from decision_adapter.apis.invocations import request_kind
from decision_adapter.apis.registry import DIALECTS, Registry
from decision_adapter.caller_errors import AdapterError, InvalidValue
from decision_adapter.settings import load_settings


def _parse(body, settings):
    if not isinstance(body, dict) or not isinstance(body.get("echo"), str):
        raise InvalidValue("'echo' must be a string", "echo")
    return body["echo"]


def _error(exc: AdapterError) -> tuple[dict, int]:
    return {"stand_in_error": exc.message}, exc.status


ECHO = Dialect(
    "echo",
    _parse,
    lambda engine, text: ((text, engine.info["file"]), {}),
    lambda text, scored, timing, model: {"echoed": scored[0], "model": scored[1]},
    _error,
)
ECHO_ROUTES = Blueprint("echo", __name__)
post(ECHO_ROUTES, "/echo/v2/say", ECHO)
ECHO_API = Api(
    "echo",
    "echo_api",
    body=ECHO,
    sniff=lambda body: "echo" in body,
    routes=("POST /echo/v2/say",),
    blueprint=ECHO_ROUTES,
    scope=Scope("/echo/"),
    errors=ECHO,
    shape="echo",
    openapi=lambda: {"/echo/v2/say": {"post": {"operationId": "echo", "responses": {}}}},
)
WITH_ECHO = Registry((*DIALECTS.apis, ECHO_API))


def emf_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"_aws"' in line]


@pytest.fixture
def client(engine, monkeypatch):
    from decision_adapter import app as app_module

    monkeypatch.setattr(app_module._Holder, "load", lambda holder: holder.serve(engine))
    return app_module.create_app(engine.settings, load="now", dialects=WITH_ECHO).test_client()


def test_the_stand_in_is_routed_sniffed_and_metered(client, engine, capsys):
    said = client.post("/echo/v2/say", json={"echo": "hello"})
    assert said.status_code == 200 and said.get_json()["echoed"] == "hello"
    assert said.get_json()["model"] == engine.info["file"] and said.get_json()["request_id"]
    invoked = client.post("/invocations", json={"echo": "again"})
    assert invoked.status_code == 200 and invoked.get_json()["echoed"] == "again"
    refused = client.post("/echo/v2/say", json={"echo": 1})
    assert refused.status_code == 422 and refused.get_json()["stand_in_error"] == "'echo' must be a string"
    unmatched = client.get("/echo/v2/nothing")  # a path of its scope that no route matches: its shape
    assert unmatched.status_code == 404 and "POST /echo/v2/say" in unmatched.get_json()["stand_in_error"]
    lines = emf_lines(capsys.readouterr().out)
    assert [(line["api"], line["status"]) for line in lines] == [
        ("echo_api", 200),
        ("echo_api", 200),
        ("echo_api", 422),
    ]


def test_the_other_apis_keep_their_routes_beside_the_stand_in(client):
    assert client.post("/v1/decisions", json={}).get_json()["error"]["type"] == "invalid_request_error"
    assert "detail" in client.get("/v1/nothing").get_json()  # Jev's shape elsewhere under /v1/
    assert client.post("/invocations", json={"state": "only"}).get_json()["error"]["code"] == "invalid_value"


def test_sniffing_asks_the_registry_given():
    assert request_kind({"echo": "x"}, WITH_ECHO) == "echo"
    with pytest.raises(AdapterError):
        request_kind({"echo": "x"})  # not registered by default
    assert request_kind({"echo": "x", "messages": []}, WITH_ECHO) == "chat"  # the registry's order decides


def test_nginx_names_the_stand_ins_route_and_answers_in_its_shape(tmp_path):
    text = nginx.render_config(
        load_settings({}),
        host="127.0.0.1",
        port=8080,
        socket_path=tmp_path / "g.sock",
        prefix=tmp_path,
        upstream_timeout_s=120,
        shutdown_s=27,
        dialects=WITH_ECHO,
    )
    assert '"~^([A-Z]{1,20}) /echo/v2/say(?:[? ]|$)" "$1 /echo/v2/say";' in text
    assert "        ~^/echo/ echo;\n" in text
    assert "location = /_adapter/errors/echo/404 {" in text and "POST /echo/v2/say" in text
    assert "/echo/" not in nginx.render_config(
        load_settings({}),
        host="127.0.0.1",
        port=8080,
        socket_path=tmp_path / "g.sock",
        prefix=tmp_path,
        upstream_timeout_s=120,
        shutdown_s=27,
    )


def test_the_openapi_document_describes_the_stand_ins_path_among_the_others():
    paths = list(openapi.document(WITH_ECHO)["paths"])
    assert paths == [
        "/ping",
        "/status",
        "/invocations",
        "/v1/systemone",
        "/v1/decisions",
        "/v1/chat/completions",
        "/echo/v2/say",
        "/v1/models",
        "/openapi.json",
    ]  # POSTs first, each kind from z to a
    assert "/echo/v2/say" not in openapi.document()["paths"]


def test_a_registry_refuses_a_route_declared_twice():
    with pytest.raises(ValueError, match="/v1/decisions"):
        Registry((*DIALECTS.apis, Api("again", "again", routes=("POST /v1/decisions",), blueprint=ECHO_ROUTES)))


def test_narrower_scopes_answer_first():
    shapes = {
        path: DIALECTS.scoped(path)
        for path in (
            "/v1/decisions",
            "/v1/decisions/x",
            "/v1/decisionsx",
            "/v1/chat/completions",
            "/v1/chat",
            "/v1/",
            "/v1",
            "/x",
        )
    }
    assert {path: dialect and dialect.name for path, dialect in shapes.items()} == {
        "/v1/decisions": "decisions",
        "/v1/decisions/x": "decisions",
        "/v1/decisionsx": "systemone",
        "/v1/chat/completions": "chat_completions",
        "/v1/chat": "systemone",
        "/v1/": "systemone",
        "/v1": None,
        "/x": None,
    }


def test_the_metric_names_are_those_the_workshops_alarms_know():
    assert {api.name: api.metric for api in DIALECTS.apis} == metrics.API_NAMES
