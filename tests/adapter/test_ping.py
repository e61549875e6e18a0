"""What /ping and /status tell whom.

/ping is SageMaker's health check and stays open: ``{"status": "ready"}`` or 503 ``{"status":
"loading"}``, nothing else, to anyone without the API key (with no key configured, to everyone).
Whether the model is busy would help a caller time its probes of another caller's requests, so the
details (model file, extra buffer types, start-up proof, busy, waiting) go to key holders on /ping
and on /status, which needs the key like every route but /ping and /openapi.json.
"""

from __future__ import annotations

import pytest

from tests.support.http_client import call

KEY = "k-" + "5" * 24
DETAILS = {
    "status",
    "model",
    "extra_buffer_types",
    "startup_probe",
    "busy",
    "waiting",
    "in_flight",
    "lanes",
    "order",
    "order_priors",
    "order_priors_jev",
    "calibration",
}


def app_without_model(monkeypatch, **env):
    """The real app whose model never finishes loading."""
    from decision_adapter import app as app_module
    from decision_adapter.settings import load_settings

    monkeypatch.setattr(app_module._Holder, "load", lambda self: None)
    return app_module.create_app(load_settings(env), load="now")


@pytest.mark.parametrize("env", [{}, {"DECISION_ADAPTER_API_KEY": KEY}], ids=["no-key", "key"])
def test_while_loading_ping_says_loading_and_nothing_else(monkeypatch, env):
    client = app_without_model(monkeypatch, **env).test_client()
    for headers in ({}, {"Authorization": f"Bearer {KEY}"}):
        answer = client.get("/ping", headers=headers)
        assert answer.status_code == 503 and answer.get_json() == {"status": "loading"}
    answer = client.get("/status", headers={"Authorization": f"Bearer {KEY}"})
    assert answer.status_code == 503 and answer.get_json()["error"]["code"] == "not_ready"


def test_status_needs_the_key_when_one_is_configured(monkeypatch):
    client = app_without_model(monkeypatch, DECISION_ADAPTER_API_KEY=KEY).test_client()
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = client.get("/status", headers=headers)
        assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"


def test_without_a_key_configured_ping_gives_status_only(adapter):
    for headers in ({}, {"Authorization": "Bearer anything"}):
        status, _, body = call(adapter.url + "/ping", headers=headers)
        assert status == 200 and body == {"status": "ready"}
    status, _, body = call(adapter.url + "/status")
    assert status == 200 and set(body) == DETAILS and body["model"].endswith(".gguf")


def test_with_a_key_only_its_holder_learns_more_than_ready(model_dir, start_adapter):
    server = start_adapter(model_dir, DECISION_ADAPTER_API_KEY=KEY)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):  # the last: no scheme
        status, _, body = call(server.url + "/ping", headers=headers)
        assert status == 200 and body == {"status": "ready"}
        status, _, _ = call(server.url + "/status", headers=headers)
        assert status == 401
    keyed = {"Authorization": f"Bearer {KEY}"}
    for route in ("/ping", "/status"):
        status, _, body = call(server.url + route, headers=keyed)
        assert status == 200 and set(body) == DETAILS
        assert body["busy"] is False and body["waiting"] == 0 and body["startup_probe"]["input_tokens"] > 0
