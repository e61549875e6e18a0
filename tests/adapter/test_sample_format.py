"""Drop-in for the published SemIf sample: its request bodies, its answers, its errors.

The bodies are this project's examples in the sample's shapes (``workshop_lib.examples``:
``{"decision": ...}``, ``{"decisions": [...]}`` with options carrying ``description``, and
a standard chat request), sent over real HTTP to the real adapter with the embedded model.
"""

from __future__ import annotations

import copy
import json
import threading
import time

import pytest

from tests.support.http_client import call
from workshop_lib import examples
from workshop_lib.client import EndpointClient

pytestmark = pytest.mark.slow


def invoke(server, body, **kw):
    return call(server.url + "/invocations", body, **kw)


def test_the_sample_single_decision_gets_the_sample_result(adapter):
    status, _, reply = invoke(adapter, examples.SAMPLE_DECISION)
    asked = examples.SAMPLE_DECISION["decision"]
    assert status == 200 and set(reply) == {"result", "request_id"}
    result = reply["result"]
    assert result["id"] == asked["id"]
    assert result["option_ids"] == [o["id"] for o in asked["options"]]
    assert len(result["probabilities"]) == len(result["option_logits"]) == len(asked["options"])
    assert abs(sum(result["probabilities"]) - 1.0) < 1e-9


def test_the_sample_shared_request_equals_each_decision_sent_alone(adapter):
    status, _, reply = invoke(adapter, examples.SAMPLE_SHARED)
    assert status == 200 and set(reply) == {"results", "timing", "request_id"}
    timing = reply["timing"]
    assert list(timing)[:5] == [
        "batch_size",
        "prefix_tokens",
        "prefill_seconds",
        "suffix_forward_seconds",
        "total_seconds",
    ]
    assert timing["batch_size"] == 2 and timing["prefix_tokens"] > 0
    assert timing["total_seconds"] >= timing["prefill_seconds"] + timing["suffix_forward_seconds"] > 0
    for asked, result in zip(examples.SAMPLE_SHARED["decisions"], reply["results"]):
        assert result["id"] == asked["id"] and result["option_ids"] == [o["id"] for o in asked["options"]]
        alone = invoke(adapter, {"decision": asked})[2]["result"]
        assert result["probabilities"] == pytest.approx(alone["probabilities"], abs=1e-4)


def test_the_sample_standard_chat_request_gets_an_answer(adapter):
    status, _, reply = invoke(adapter, examples.SAMPLE_CHAT)
    assert status == 200 and reply["choices"][0]["message"]["content"].strip()


def test_states_that_differ_are_refused_at_the_first_differing_index(adapter):
    body = copy.deepcopy(examples.SAMPLE_SHARED)
    body["decisions"].append(dict(body["decisions"][0], id="third", state=body["decisions"][0]["state"] + " "))
    status, _, reply = invoke(adapter, body)
    assert status == 400 and isinstance(reply["error"], str)
    assert "decisions[2].state" in reply["error"] and "decisions[0].state" in reply["error"]


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda b: b.update(mode="fast"), "mode"),
        (lambda b: b.update(decisions=[]), "decisions"),
        (lambda b: b["decision"].pop("question"), "decision.question"),
        (lambda b: b["decision"]["options"].pop() and b["decision"]["options"].pop(), "decision.options"),
        (lambda b: b["decision"]["options"][1].update(id="account_access"), "options[1].id"),
    ],
)
def test_malformed_sample_bodies_get_400_with_a_string_error_naming_the_field(adapter, mutate, needle):
    body = copy.deepcopy(examples.SAMPLE_DECISION)
    mutate(body)
    status, _, reply = invoke(adapter, body)
    assert status == 400 and set(reply) == {"error", "request_id"} and needle in reply["error"]


def test_65_decisions_are_refused_by_default(adapter):
    base = examples.SAMPLE_SHARED["decisions"][1]
    status, _, reply = invoke(adapter, {"decisions": [dict(base, id=f"d{i}") for i in range(65)]})
    assert status == 400 and "at most 64" in reply["error"] and "decisions" in reply["error"]


def test_64_decisions_pass_validation():
    from decision_adapter.apis.sample import parse_sample

    base = examples.SAMPLE_SHARED["decisions"][1]
    batch = parse_sample({"decisions": [dict(base, id=f"d{i}") for i in range(64)]})
    assert [q.id for q in batch.questions] == [f"d{i}" for i in range(64)] and not batch.single


def test_a_non_json_content_type_gets_415(adapter):
    status, _, _ = call(
        adapter.url + "/invocations", raw=json.dumps(examples.SAMPLE_DECISION).encode(), content_type="text/plain"
    )
    assert status == 415


def test_busy_answers_are_retryable_503s_in_both_formats(model_dir, start_adapter):
    # The sample's own setting: one request in flight, nobody waits.
    server = start_adapter(model_dir, SEMIF_MAX_IN_FLIGHT=1, DECISION_ADAPTER_RETRY_AFTER=2)
    long_state = " ".join(f"Line {i}: the customer called again about order {1000 + i}." for i in range(60))
    slow = copy.deepcopy(examples.SAMPLE_DECISION)
    slow["decision"]["state"] = long_state
    done = threading.Event()
    threading.Thread(target=lambda: (invoke(server, slow), done.set()), daemon=True).start()
    client = EndpointClient.local(server.url, retries=0)
    while not client.status().get("busy"):
        assert not done.is_set(), "the slow request finished before the test could see the model busy"
        time.sleep(0.005)
    sample = invoke(server, examples.SAMPLE_DECISION)
    ours = invoke(server, examples.SUPPORT_ROUTE)
    assert not done.is_set(), "the model was free again before both requests were refused"
    status, headers, reply = sample
    assert status == 503 and headers["Retry-After"] == "2"
    assert reply["error"] == "model is busy; retry the request" and reply["retryable"] is True
    status, headers, reply = ours
    assert status == 503 and headers["Retry-After"] == "2"
    assert reply["error"]["code"] == "busy" and reply["retryable"] is True
    done.wait(120)


def test_the_client_sends_either_format_and_returns_the_same_results(adapter):
    client = EndpointClient.local(adapter.url)
    sample = client.decide(examples.SAMPLE_DECISION)
    asked = examples.SAMPLE_DECISION["decision"]
    ours = client.decide(
        {
            "id": asked["id"],
            "state": asked["state"],
            "question": asked["question"],
            "options": [{"id": o["id"], "text": o["description"]} for o in asked["options"]],
        }
    )
    assert sample == ours  # same id, option ids and probabilities
    shared = client.decide_any(examples.SAMPLE_SHARED)
    first = examples.SAMPLE_SHARED["decisions"][0]
    batch = client.decide_batch(
        "b",
        first["state"],
        [
            {"id": d["id"], "question": d["question"], "options": d["options"]}
            for d in examples.SAMPLE_SHARED["decisions"]
        ],
    )
    assert [d.id for d in shared] == [d.id for d in batch] == ["queue-choice", "urgency"]
    for a, b in zip(shared, batch):
        assert a.probabilities == pytest.approx(b.probabilities, abs=1e-4)
