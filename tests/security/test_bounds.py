"""Hostile callers, one bound each: every request below was a way to make the adapter do or say
more than it should; each is sent over real HTTP to the real adapter and must now be refused
quickly, answered small, or keep other callers' business to itself.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.http_client import call

pytestmark = pytest.mark.slow

DECISION = {"id": "d-1", "state": "The parcel never arrived.", "question": "Which team?",
            "options": [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}]}
CHAT = [{"role": "user", "content": "Say hi."}]


def invoke(server, body, **kw):
    return call(server.url + "/invocations", body, **kw)


def test_the_jev_route_wants_a_json_content_type_like_invocations(adapter):
    """A browser page may post text/plain to a keyless local adapter without a preflight, not JSON."""
    body = json.dumps({"state": "x", "questions": {"q": {"type": "noul", "instructions": "Yes?"}}}).encode()
    for content_type in ("text/plain", ""):
        status, _, reply = call(adapter.url + "/v1/systemone", raw=body, content_type=content_type)
        assert status == 415 and reply["detail"]["error_type"] == "invalid_request_error"


def test_a_small_body_with_thousands_of_faults_gets_a_small_answer(adapter):
    questions = {f"q{i:02d}": {"type": "choice", "criteria": {f"o{j}": 7 for j in range(255)}} for i in range(64)}
    raw = json.dumps({"state": "s", "questions": questions}).encode()  # 16,320 faulty descriptions
    assert len(raw) < 200_000
    started = time.monotonic()
    status, _, reply = call(adapter.url + "/v1/systemone", raw=raw)
    size = len(json.dumps(reply))
    assert status == 422 and size < 20_000, size  # it was 19 MB for a 208 KB body
    assert "more problem(s) not listed" in json.dumps(reply)
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("extra, field", [
    ({"max_tokens": 100_000}, "max_tokens"),  # above DECISION_ADAPTER_CHAT_MAX_TOKENS: refused, not queued
    ({"max_completion_tokens": 257}, "max_completion_tokens"),
    ({"stop": ["a"] * 5}, "stop"),
    ({"stop": ["x" * 65]}, "stop"),
])
def test_chat_limits_are_limits(adapter, extra, field):
    status, _, reply = invoke(adapter, {"messages": CHAT, **extra})
    assert status == 422 and reply["error"]["field"] == field


def test_too_many_chat_messages_are_refused_before_any_work(adapter):
    messages = [{"role": "user", "content": "a"}] * 30_000  # ~0.9 MB: minutes of span location before
    started = time.monotonic()
    status, _, reply = invoke(adapter, {"messages": messages})
    assert status == 422 and reply["error"]["field"] == "messages"
    assert time.monotonic() - started < 10


def test_answers_do_not_say_whether_the_previous_caller_sent_the_same_state(adapter):
    first = invoke(adapter, DECISION)[2]["result"]["timing"]
    second = invoke(adapter, dict(DECISION, id="d-2"))[2]["result"]["timing"]
    assert "prefix_reused_from_cache" not in first and "prefix_reused_from_cache" not in second
    assert first["shared_prefix_tokens"] == second["shared_prefix_tokens"]  # this request's own prompts


def test_ping_names_the_model_only_to_a_caller_holding_the_key(model_dir, start_adapter):
    server = start_adapter(model_dir, DECISION_ADAPTER_API_KEY="k-" + "7" * 20)
    status, _, anonymous = call(server.url + "/ping")
    assert status == 200 and anonymous["status"] == "ready" and "model" not in anonymous
    assert "startup_probe" not in anonymous
    status, _, keyed = call(server.url + "/ping", headers={"Authorization": "Bearer k-" + "7" * 20})
    assert status == 200 and keyed["model"].endswith(".gguf")
    status, _, wrong = call(server.url + "/ping", headers={"Authorization": "Bearer nope"})
    assert status == 200 and "model" not in wrong  # /ping stays open for SageMaker's health check


def test_an_unseeded_chat_never_samples_with_the_previous_callers_seed(engine):
    from decision_adapter.schema import parse_chat

    engine.chat(parse_chat({"messages": CHAT, "seed": 7, "temperature": 1.0, "max_tokens": 2}, 256))
    assert engine.llm._seed == 7  # llama-cpp-python keeps the seed it was given ...
    engine.chat(parse_chat({"messages": CHAT, "temperature": 1.0, "max_tokens": 2}, 256))
    assert engine.llm._seed != 7  # ... so every request brings its own
