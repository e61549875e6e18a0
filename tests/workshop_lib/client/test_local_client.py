"""EndpointClient.local against the real adapter process (gunicorn + llama.cpp + the embedded model)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from workshop_lib.client import (
    BadRequest,
    EndpointBusy,
    EndpointClient,
    EndpointUnreachable,
    UnprocessableRequest,
    decision,
    question,
)
from workshop_lib.local import free_port

STATE = "Order 4411: the parcel never arrived and the tracking page has not changed for ten days."
TEAMS = {"refunds": "Refunds and charges", "shipping": "Shipping and delivery"}
URGENCY = [("low", "Low"), ("normal", "Normal"), ("high", "High")]
# About 300 tokens: holds the model for a second or more, long enough to be seen busy.
LONG_STATE = " ".join(f"Line {i}: the customer called again about order {1000 + i}." for i in range(20))


@pytest.fixture(scope="module")
def client(adapter):
    return EndpointClient.local(adapter.url)


def test_ping_says_ready_and_status_names_the_model(client):
    assert client.ping() == {"status": "ready"}
    status = client.status()
    assert status["model"].endswith(".gguf") and status["busy"] is False and status["waiting"] == 0


def test_decide(client):
    made = client.decide(decision("c-1", STATE, "Which team should handle this?", TEAMS))
    assert made.id == "c-1" and made.option_ids == ("refunds", "shipping")
    assert sum(made.probabilities) == pytest.approx(1.0)
    assert made.top in TEAMS and made.top_probability == max(made.probabilities)
    assert made.as_dict()[made.top] == made.top_probability
    assert made.model["file"].endswith(".gguf") and made.attempts == 1
    assert 0 < made.server_ms <= made.client_latency_ms


def test_batch_keeps_order_and_matches_single_decisions(client):
    questions = [
        question("urgency", "How urgent is this?", URGENCY),
        question("team", "Which team should handle this?", TEAMS),
    ]
    batch = client.decide_batch("c-batch", STATE, questions)
    assert [d.id for d in batch] == ["urgency", "team"]
    assert [d.option_ids for d in batch] == [("low", "normal", "high"), ("refunds", "shipping")]
    assert batch[0].timing["shared_prefix_tokens"] > 0
    for asked, answered in zip(questions, batch):
        alone = client.decide(decision(asked["id"], STATE, asked["question"], asked["options"]))
        assert answered.option_ids == alone.option_ids
        assert answered.probabilities == pytest.approx(alone.probabilities, abs=1e-4)


def test_openai_decisions_through_invocations_equal_the_v1_route(client, adapter):
    import json
    import urllib.request

    from workshop_lib.client import openai_decisions as od

    questions = [
        od.predicate("The parcel is lost.", name="lost"),
        od.choice("Which team?", list(TEAMS), name="team"),
        od.score("How urgent?", [label for _, label in URGENCY], name="urgency"),
    ]
    result = client.openai_decisions(STATE, questions)
    assert [a.name for a in result.answers] == ["lost", "team", "urgency"]
    for answer in result.answers:
        assert sum(answer.probabilities.values()) == pytest.approx(1.0)
        assert answer.readout in ("letters", "cloze") and answer.readout == answer.raw["x_readout"]
        assert answer.prediction_set is None  # the embedded model's package keeps no conformal threshold
    assert result.usage["input_tokens"] > 0 and result.usage["output_tokens"] == 0
    direct = urllib.request.Request(
        adapter.url + "/v1/decisions",
        json.dumps(od.request(STATE, questions)).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(direct, timeout=120) as response:
        same = od.parse_response(json.loads(response.read()), od.request(STATE, questions))
    assert [a.probabilities for a in same.answers] == [a.probabilities for a in result.answers]
    with pytest.raises(BadRequest, match="questions"):
        client.invoke({"input": STATE, "questions": [{"type": "predicate", "name": "x"}]})


def test_systemone_through_invocations(client):
    from workshop_lib.client import jev

    result = client.systemone(
        STATE,
        {
            "lost": jev.noul("Is the parcel lost?"),
            "team": jev.choice("Which team should handle this?", TEAMS),
            "urgency": jev.score("How urgent is this?", [text for _, text in URGENCY]),
        },
    )
    assert set(result.answers) == {"lost", "team", "urgency"}
    assert result.model.endswith("SmolLM2-135M-Instruct.Q4_1")  # the real model, not the alias
    assert result.usage["input_tokens"] > 0 and result.usage["output_tokens"] == 0
    assert set(result["team"].probabilities) == set(TEAMS)
    assert sum(result["team"].probabilities.values()) == pytest.approx(1.0, abs=1e-3)
    assert set(result["lost"].probabilities) == {"no", "yes"}
    assert set(result["urgency"].probabilities) == {"0", "1", "2"}


def test_chat(client):
    reply = client.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert reply.content.strip() and reply.finish_reason in ("stop", "length")
    assert reply.usage["completion_tokens"] <= 8 and reply.raw["choices"][0]["message"]["role"] == "assistant"


def test_unusable_values_are_422_with_the_field(client):
    with pytest.raises(UnprocessableRequest) as caught:
        client.decide(decision("c-bad", STATE, "Which team?", [("a", "A"), ("a", "again")]))
    exc = caught.value
    assert (exc.status, exc.code, exc.field) == (422, "invalid_value", "options[1].id")
    assert "used twice" in str(exc) and "options[1].id" in str(exc)


def test_wrong_types_are_400_with_the_field(client):
    with pytest.raises(BadRequest) as caught:
        client.decide({"id": "c-bad", "state": STATE, "question": "Which team?", "options": "refunds"})
    assert (caught.value.status, caught.value.code, caught.value.field) == (400, "invalid_type", "options")
    with pytest.raises(BadRequest) as caught:
        client.chat("hello", stream=True)
    assert caught.value.field == "stream"


def test_nothing_listening_is_unreachable():
    with pytest.raises(EndpointUnreachable, match="cannot connect"):
        EndpointClient.local(f"http://127.0.0.1:{free_port()}").decide(decision("x", "s", "q?", ["a", "b"]))


def _own_request(i: int) -> dict:
    return decision(
        f"busy-{i}",
        f"Ticket {i}: {STATE}",
        "Which team should handle this?",
        {f"team-{i}-a": "Refunds", f"team-{i}-b": "Shipping"},
    )


def test_busy_server_retries_until_every_request_gets_its_own_answer(model_dir, start_adapter):
    server = start_adapter(model_dir, DECISION_ADAPTER_MAX_QUEUE=0, DECISION_ADAPTER_RETRY_AFTER=1)
    requests = [_own_request(i) for i in range(3)]
    start = threading.Barrier(len(requests))

    def send(body):
        client = EndpointClient.local(server.url, retries=20)  # generous: this machine may be loaded
        start.wait()
        return client.decide(body)

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = list(pool.map(send, requests))
    for body, made in zip(requests, answers):
        assert made.id == body["id"]
        assert list(made.option_ids) == [o["id"] for o in body["options"]]
    assert max(made.attempts for made in answers) > 1  # the line was full at least once


def test_busy_server_without_retries_raises_busy_with_retry_after(model_dir, start_adapter):
    server = start_adapter(
        model_dir, SM_LLAMA_CPP_PARALLEL=1, DECISION_ADAPTER_MAX_QUEUE=0, DECISION_ADAPTER_RETRY_AFTER=1
    )
    client = EndpointClient.local(server.url, retries=0)
    with ThreadPoolExecutor(max_workers=1) as pool:
        long_one = pool.submit(
            EndpointClient.local(server.url).decide, decision("long", LONG_STATE, "Which team?", TEAMS)
        )
        deadline = time.monotonic() + 30
        while not client.status()["busy"]:
            assert time.monotonic() < deadline and not long_one.done(), "the long request never held the model"
            time.sleep(0.02)
        with pytest.raises(EndpointBusy) as caught:
            client.decide(decision("short", STATE, "Which team?", TEAMS))
        assert long_one.result().id == "long"
    exc = caught.value
    assert (exc.status, exc.code, exc.retry_after, exc.attempts) == (503, "busy", 1.0, 1)
    assert "add instances" in str(exc)
