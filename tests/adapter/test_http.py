"""The adapter as SageMaker runs it: a real gunicorn process, the real model, real HTTP."""

from __future__ import annotations

import math
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.http_client import call

OPTIONS = [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}]
DECISION = {"id": "d-1", "state": "The parcel never arrived.", "question": "Which team?", "options": OPTIONS}
# About 700 tokens: long enough to keep the model busy for a few seconds here.
LONG_STATE = " ".join(f"Line {i}: the customer called again about order {1000 + i}." for i in range(50))


def invoke(adapter, body=None, **kw):
    return call(adapter.url + "/invocations", body, **kw)


def test_ping_says_only_ready_and_status_names_the_model(adapter):
    status, _, body = call(adapter.url + "/ping")
    assert status == 200 and body == {"status": "ready"}  # no key configured: nothing but health
    status, _, body = call(adapter.url + "/status")
    assert status == 200 and body["status"] == "ready" and body["model"].endswith(".gguf")
    assert body["busy"] is False and body["waiting"] == 0 and body["startup_probe"]["options"] == 16


def test_decision_round_trip(adapter):
    status, headers, body = invoke(adapter, DECISION)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    result = body["result"]
    assert result["id"] == "d-1" and result["option_ids"] == ["refunds", "shipping"]
    assert math.isclose(sum(result["probabilities"]), 1.0, abs_tol=1e-9)
    timing = result["timing"]
    assert set(timing) >= {"queue_wait_ms", "tokenize_ms", "evaluate_ms", "total_ms"}
    assert timing["total_ms"] >= timing["evaluate_ms"] > 0
    model = result["model"]
    assert model["manifest_verified"] and len(model["sha256"]) == 64 and model["size_bytes"] > 0


def test_same_request_twice_same_probabilities(adapter):
    _, _, first = invoke(adapter, DECISION)
    invoke(adapter, dict(DECISION, state="Something unrelated happened."))
    _, _, second = invoke(adapter, DECISION)
    assert first["result"]["probabilities"] == second["result"]["probabilities"]


def test_shared_state_batch_over_http(adapter):
    body = {
        "id": "b-1",
        "state": "The parcel never arrived.",
        "questions": [
            {"id": "route", "question": "Which team?", "options": OPTIONS},
            {"id": "lost", "question": "Is the parcel lost?", "options": ["no", "yes"]},
        ],
    }
    status, _, reply = invoke(adapter, body)
    assert status == 200 and reply["id"] == "b-1"
    assert [r["id"] for r in reply["results"]] == ["route", "lost"]
    assert reply["timing"]["shared_prefix_tokens"] > 0
    _, _, alone = invoke(adapter, dict(DECISION, id="route"))
    assert reply["results"][0]["probabilities"] == pytest.approx(alone["result"]["probabilities"], abs=1e-4)


def test_chat_on_the_same_route(adapter):
    status, _, body = invoke(adapter, {"messages": [{"role": "user", "content": "Say yes."}], "max_tokens": 4})
    assert status == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"


BAD_REQUESTS = [
    # (description, kwargs for invoke, status, error code, field)
    ("not JSON", dict(raw=b"{nope"), 400, "invalid_type", None),
    ("not UTF-8", dict(raw=b'{"id": "\xff"}'), 400, "invalid_type", None),
    (
        "NaN",
        dict(raw=b'{"id": "x", "state": "s", "question": "q", "options": ["a", "b"], "temperature": NaN}'),
        400,
        "invalid_type",
        None,
    ),
    ("duplicate key", dict(raw=b'{"id": "x", "id": "y"}'), 400, "invalid_type", "id"),
    ("array body", dict(body=[1, 2]), 400, "invalid_type", None),
    ("unknown shape", dict(body={"hello": "world"}), 422, "invalid_value", None),
    (
        "wrong content type",
        dict(body=DECISION, content_type="text/plain"),
        415,
        "unsupported_media_type",
        "Content-Type",
    ),
    ("missing id", dict(body={k: v for k, v in DECISION.items() if k != "id"}), 422, "invalid_value", "id"),
    ("state wrong type", dict(body=dict(DECISION, state=42)), 400, "invalid_type", "state"),
    ("empty state", dict(body=dict(DECISION, state=" ")), 422, "invalid_value", "state"),
    ("empty question", dict(body=dict(DECISION, question="")), 422, "invalid_value", "question"),
    ("one option", dict(body=dict(DECISION, options=["a"])), 422, "invalid_value", "options"),
    ("17 options", dict(body=dict(DECISION, options=[str(i) for i in range(17)])), 422, "invalid_value", "options"),
    ("duplicate option ids", dict(body=dict(DECISION, options=["a", "a"])), 422, "invalid_value", "options[1].id"),
    ("prompt over the context", dict(body=dict(DECISION, state="word " * 3000)), 422, "prompt_too_long", "state"),
    (
        "stream",
        dict(body={"messages": [{"role": "user", "content": "hi"}], "stream": True}),
        400,
        "invalid_type",
        "stream",
    ),
    (
        "bad role",
        dict(body={"messages": [{"role": "root", "content": "hi"}]}),
        422,
        "invalid_value",
        "messages[0].role",
    ),
]


@pytest.mark.parametrize("kwargs, status, code, field", [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS])
def test_bad_input_gets_a_clear_json_error(adapter, kwargs, status, code, field):
    got_status, headers, body = invoke(adapter, **kwargs)
    assert got_status == status
    assert headers["Content-Type"].startswith("application/json")
    error = body["error"]
    assert error["code"] == code and error["field"] == field and error["message"]
    assert "Traceback" not in error["message"] and "/work/" not in error["message"]


def test_body_over_the_limit_is_413(adapter):
    status, _, body = invoke(adapter, raw=b'{"state": "' + b"x" * 1_100_000 + b'"}')
    assert status == 413 and body["error"]["code"] == "request_entity_too_large"


@pytest.mark.parametrize("method, path, status", [("GET", "/nowhere", 404), ("GET", "/invocations", 405)])
def test_unknown_routes_answer_json(adapter, method, path, status):
    got, _, body = call(adapter.url + path, method=method)
    assert got == status and body["error"]["message"]


def _wait_until_busy(server, timeout_s=30.0) -> bool:
    """Poll /status until the model is working on a request."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, _, body = call(server.url + "/status", timeout=5)
        if status == 200 and body["busy"]:
            return True
        time.sleep(0.02)
    return False


def test_ping_answers_while_a_decision_runs(adapter):
    done = threading.Event()
    outcome = {}

    def slow():
        outcome["status"], _, _ = invoke(adapter, dict(DECISION, id="slow", state=LONG_STATE))
        done.set()

    worker = threading.Thread(target=slow)
    worker.start()
    saw_busy = _wait_until_busy(adapter)
    status, _, body = call(adapter.url + "/ping", timeout=5)
    answered_while_busy = not done.is_set()
    worker.join(60)
    assert saw_busy and status == 200 and answered_while_busy and outcome["status"] == 200
    assert body == {"status": "ready"}  # busy or not, /ping does not tell


def _distinct_request(i: int) -> dict:
    return {
        "id": f"req-{i}",
        "state": f"Customer {i} writes about invoice {7000 + i}.",
        "question": "Which team?",
        "options": [
            {"id": f"billing-{i}", "text": "Billing"},
            {"id": f"shipping-{i}", "text": "Shipping"},
            {"id": f"sales-{i}", "text": "Sales"},
        ],
    }


def _invoke_with_retry(adapter, body, attempts=50):
    for _ in range(attempts):
        status, headers, reply = invoke(adapter, body)
        if status != 503:
            return status, reply
        time.sleep(float(headers.get("Retry-After", "1")) / 4)
    return status, reply


def test_concurrent_requests_never_receive_each_others_answers(adapters):
    adapter = adapters.shared(SM_LLAMA_CPP_PARALLEL="2")  # two evaluated at once, the rest in line
    requests = [_distinct_request(i) for i in range(10)]
    expected = {}
    for body in requests:  # the answers each request gets on its own
        status, _, reply = invoke(adapter, body)
        assert status == 200
        expected[body["id"]] = reply["result"]["probabilities"]
    with ThreadPoolExecutor(max_workers=10) as pool:
        replies = list(pool.map(lambda b: _invoke_with_retry(adapter, b), requests))
    for body, (status, reply) in zip(requests, replies):
        assert status == 200
        result = reply["result"]
        assert result["id"] == body["id"]
        assert result["option_ids"] == [o["id"] for o in body["options"]]
        assert result["probabilities"] == expected[body["id"]]


def test_overload_gets_503_with_retry_after(model_dir, start_adapter):
    server = start_adapter(model_dir, DECISION_ADAPTER_MAX_QUEUE=1, DECISION_ADAPTER_RETRY_AFTER=2)
    bodies = [dict(DECISION, id=f"o-{i}", state=LONG_STATE[: 2000 + i]) for i in range(6)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda b: invoke(server, b), bodies))
    statuses = sorted(status for status, _, _ in replies)
    assert 200 in statuses and 503 in statuses and set(statuses) <= {200, 503}
    for (status, headers, body), sent in zip(replies, bodies):
        if status == 503:
            assert headers["Retry-After"] == "2" and body["error"]["code"] == "busy"
        else:
            assert body["result"]["id"] == sent["id"]
    assert call(server.url + "/ping")[0] == 200


def test_sigterm_lets_the_request_in_flight_finish(model_dir, start_adapter):
    server = start_adapter(model_dir)
    outcome = {}

    def slow():
        outcome["reply"] = invoke(server, dict(DECISION, id="inflight", state=LONG_STATE[: len(LONG_STATE) // 2]))

    worker = threading.Thread(target=slow)
    worker.start()
    assert _wait_until_busy(server)
    stopped_at = time.monotonic()
    server.process.send_signal(signal.SIGTERM)  # as `docker stop` does: to the entrypoint only
    worker.join(40)
    server.process.wait(30)
    exited_after = time.monotonic() - stopped_at
    status, _, body = outcome["reply"]
    assert status == 200 and body["result"]["id"] == "inflight"
    assert exited_after < 30
    assert server.ping() is None  # nothing listens any more
