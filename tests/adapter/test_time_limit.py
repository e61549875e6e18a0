"""The request time limit: a request that holds the model too long is stopped, and the
context it leaves behind is clean (the next answer equals a fresh server's)."""

import time

import pytest

from decision_adapter.apis import own
from decision_adapter.apis.chat import parse_chat
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import TimedOut
from decision_adapter.deadline import Deadline
from tests.support.http_client import call

SHORT = {
    "id": "short",
    "state": "The parcel arrived with a cracked screen.",
    "question": "Which team should handle this?",
    "options": ["refunds", "shipping", "sales"],
}
CHAT = {
    "messages": [{"role": "user", "content": "Count from one to one hundred in words."}],
    "max_tokens": 400,
    "temperature": 0.0,
    "seed": 7,
}


def long_state(tokens: int) -> str:
    """A state of about ``tokens`` tokens (some 17 per line): far too long to read in milliseconds."""
    return " ".join(f"line {i}: the customer wrote again about order {i * 7}." for i in range(tokens // 17))


def long_decision(tokens: int) -> dict:
    return dict(SHORT, id="long", state=long_state(tokens))


# ---- the flag --------------------------------------------------------------------------------------


def test_a_limit_trips_the_flag_only_after_its_time():
    deadline = Deadline()
    with deadline.limit(0.2):
        assert not deadline.expired
        time.sleep(0.6)
        assert deadline.expired
    assert not deadline.expired  # leaving the block clears it for the next request


def test_no_limit_never_trips():
    deadline = Deadline()
    for seconds in (None, 0):
        with deadline.limit(seconds):
            time.sleep(0.05)
            assert not deadline.expired


def test_a_limit_left_over_from_an_earlier_request_does_not_trip_a_later_one():
    deadline = Deadline()
    with deadline.limit(0.1):
        pass  # the earlier request ended well within its limit
    with deadline.limit(60):
        time.sleep(0.4)  # past the earlier request's limit
        assert not deadline.expired
    with deadline.limit(0.1):  # the one watcher keeps serving later requests
        time.sleep(0.5)
        assert deadline.expired


def test_a_shorter_limit_after_a_longer_one_trips_on_time():
    deadline = Deadline()
    with deadline.limit(60):
        pass
    with deadline.limit(0.1):  # the watcher was waiting for the 60 s limit: it must wake for this one
        time.sleep(0.5)
        assert deadline.expired


# ---- the engine, in-process ------------------------------------------------------------------------


def test_a_decision_over_the_limit_is_stopped_and_the_next_answer_is_unchanged(engine):
    (reference,), _ = own.decide(engine, parse_decision(SHORT))
    with engine.time_limit(0.05), pytest.raises(TimedOut) as caught:
        own.decide(engine, parse_decision(long_decision(1500)))
    assert caught.value.status == 504 and "DECISION_ADAPTER_REQUEST_TIMEOUT" in caught.value.message
    assert engine.context.prefix is None and engine.llm.n_tokens == 0  # nothing of the stopped request is kept
    (after,), _ = own.decide(engine, parse_decision(SHORT))
    assert after.probabilities == reference.probabilities
    assert after.option_logits == reference.option_logits


def test_a_decision_within_the_limit_is_answered_as_without_one(engine):
    (free,), _ = own.decide(engine, parse_decision(SHORT))
    with engine.time_limit(120):
        (limited,), _ = own.decide(engine, parse_decision(SHORT))
    assert limited.probabilities == free.probabilities


def test_a_chat_over_the_limit_is_stopped_and_the_next_chat_is_unchanged(engine):
    request = parse_chat(dict(CHAT, max_tokens=24), 256)
    reference = engine.chat(request)["choices"][0]["message"]["content"]
    with engine.time_limit(0.05), pytest.raises(TimedOut):
        engine.chat(parse_chat(CHAT, 512))
    assert engine.chat(request)["choices"][0]["message"]["content"] == reference


# ---- a live adapter --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_adapter_answers_504_and_then_as_a_fresh_server(model_dir, start_adapter):
    # Without prefix reuse each of the 16 questions reads the whole 7,000-token state again:
    # minutes of work on any CPU, against a limit of 10 s that the short request needs a fraction of.
    # (112,000 tokens in all: past the default request budget, so the budget is raised here.)
    settings = {
        "SM_LLAMA_CPP_CTX_SIZE": 8192,
        "DECISION_ADAPTER_PREFIX_REUSE": "off",
        "DECISION_ADAPTER_MAX_REQUEST_TOKENS": 200_000,
    }
    limited = start_adapter(model_dir, DECISION_ADAPTER_REQUEST_TIMEOUT=10, **settings)
    fresh = start_adapter(model_dir, DECISION_ADAPTER_REQUEST_TIMEOUT=0, **settings)
    slow = {
        "id": "slow",
        "state": long_state(7000),
        "questions": [{"id": f"q{i}", "question": f"Is order {i} late?", "options": ["no", "yes"]} for i in range(16)],
    }

    started = time.monotonic()
    status, headers, body = call(limited.url + "/invocations", slow)
    assert status == 504, body
    assert time.monotonic() - started < 60  # stopped near its limit, not run to the end
    assert headers["Content-Type"].startswith("application/json")
    assert body["error"]["code"] == "deadline_exceeded"
    assert "DECISION_ADAPTER_REQUEST_TIMEOUT" in body["error"]["message"]

    status, _, after = call(limited.url + "/invocations", SHORT)
    assert status == 200, after
    status, _, expected = call(fresh.url + "/invocations", SHORT)
    assert status == 200, expected
    assert after["result"]["option_ids"] == ["refunds", "shipping", "sales"]
    assert after["result"]["probabilities"] == pytest.approx(expected["result"]["probabilities"], abs=1e-6)

    status, _, ping = call(limited.url + "/status")
    assert status == 200 and ping["busy"] is False
