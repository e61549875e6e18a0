"""Hostile callers, one bound each: every request below was a way to make the adapter do or say
more than it should; each is sent over real HTTP to the real adapter and must now be refused
quickly, answered small, or keep other callers' business to itself.
"""

from __future__ import annotations

import json
import time

import pytest

from decision_adapter.apis import own
from tests.support.http_client import call

pytestmark = pytest.mark.slow

DECISION = {
    "id": "d-1",
    "state": "The parcel never arrived.",
    "question": "Which team?",
    "options": [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}],
}
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


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"max_tokens": 100_000}, "max_tokens"),  # above DECISION_ADAPTER_CHAT_MAX_TOKENS: refused, not queued
        ({"max_completion_tokens": 257}, "max_completion_tokens"),
        ({"stop": ["a"] * 5}, "stop"),
        ({"stop": ["x" * 65]}, "stop"),
    ],
)
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
    from decision_adapter.apis.chat import parse_chat

    engine.chat(parse_chat({"messages": CHAT, "seed": 7, "temperature": 1.0, "max_tokens": 2}, 256))
    assert engine.llm._seed == 7  # llama-cpp-python keeps the seed it was given ...
    engine.chat(parse_chat({"messages": CHAT, "temperature": 1.0, "max_tokens": 2}, 256))
    assert engine.llm._seed != 7  # ... so every request brings its own


# -- in-process: work bounded before the model runs, and a clean context after any failure --------


def _counting_tokenizer(engine, monkeypatch) -> list[int]:
    """Record the length of every text the engine tokenizes."""
    lengths = []
    real = engine.model.prompt_tokens

    def counted(prompt, end=None):
        lengths.append(len(prompt.text if end is None else prompt.text[:end]))
        return real(prompt, end)

    monkeypatch.setattr(engine.model, "prompt_tokens", counted)
    return lengths


def test_a_state_too_long_for_any_context_is_refused_untokenized(engine, monkeypatch):
    from decision_adapter.apis.own import parse_decision
    from decision_adapter.caller_errors import PromptTooLong

    lengths = _counting_tokenizer(engine, monkeypatch)
    chars = engine.llm.n_ctx() * engine.model.max_token_chars + 1
    with pytest.raises(PromptTooLong, match="more than a .*-token context can hold"):
        own.answered(engine, parse_decision(dict(DECISION, state="x" * chars)))
    assert lengths == []


def test_a_shared_request_stops_at_its_first_prompt_that_does_not_fit(engine, monkeypatch):
    from decision_adapter.apis.own import parse_decision
    from decision_adapter.caller_errors import PromptTooLong

    lengths = _counting_tokenizer(engine, monkeypatch)
    state = " ".join(f"word{i}" for i in range(engine.llm.n_ctx()))  # more tokens than the context holds
    questions = [{"id": f"q{i}", "question": "Which team?", "options": ["a", "b"]} for i in range(64)]
    with pytest.raises(PromptTooLong):
        own.answered(engine, parse_decision({"id": "b", "state": state, "questions": questions}))
    assert len(lengths) == 1  # not 64 tokenizations of the same long state before the first check


def test_a_prompt_whose_tail_merged_is_checked_on_its_last_characters_only(engine, monkeypatch):
    from decision_adapter.apis.own import parse_decision

    monkeypatch.setattr(engine.model, "tail", (-1,))  # as if the request's text merged with the template's tail
    lengths = _counting_tokenizer(engine, monkeypatch)
    state = "The parcel never arrived. " * 200
    (result,), _ = own.answered(engine, parse_decision(dict(DECISION, state=state)))
    assert abs(sum(result["probabilities"]) - 1) < 1e-9
    long_ones = [n for n in lengths if n > 300]
    assert len(long_ones) <= 2 and len(lengths) > 16  # the full prompt (and its prefix) once; 16 short checks


def test_any_failure_inside_the_model_leaves_a_clean_context(engine, monkeypatch):
    """An exception halfway through an evaluation must not leave a half-written cache for the next request."""
    from decision_adapter.apis.own import parse_decision

    body = dict(DECISION, state="The customer wrote three times about the same parcel. " * 10)
    (before,), _ = own.answered(engine, parse_decision(body))
    real_eval = engine.llm.eval

    def fails_halfway(tokens):
        real_eval(tokens[: len(tokens) // 2])
        raise RuntimeError("llama_decode returned -1")

    monkeypatch.setattr(engine.llm, "eval", fails_halfway)
    with pytest.raises(RuntimeError):
        own.answered(engine, parse_decision(dict(body, id="other", state=body["state"] + " Again.")))
    assert engine.context.prefix is None and engine.llm.n_tokens == 0
    monkeypatch.setattr(engine.llm, "eval", real_eval)
    (after,), _ = own.answered(engine, parse_decision(body))
    assert after["probabilities"] == pytest.approx(before["probabilities"], abs=1e-6)
