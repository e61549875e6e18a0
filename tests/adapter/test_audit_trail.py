"""The adapter's audit trail: a request id on every API answer, and one EMF metric line per request.

The id's precedence (SageMaker's inference id, the caller's X-Request-Id, one the adapter makes) is
checked in-process on the real app with its model held back (every answer is then a 503, which
must carry the id too); the metric lines and the access log line are read from the log file of the
session's shared adapter process after real decisions.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from decision_adapter import metrics
from decision_adapter.apis.common import choose_request_id, usable_id
from tests.support.answer_records import record
from tests.support.http_client import call

OPTIONS = [
    {"id": "refunds", "text": "Refunds"},
    {"id": "shipping", "text": "Shipping"},
    {"id": "billing", "text": "Billing"},
]
DECISION = {"id": "a-1", "state": "The parcel never arrived.", "question": "Which team?", "options": OPTIONS}
SAMPLE = {
    "decision": {
        "id": "s-1",
        "state": "Charged twice.",
        "question": "Which team?",
        "options": [{"id": "billing", "description": "Billing"}, {"id": "shipping", "description": "Shipping"}],
    }
}


def app_without_model(monkeypatch):
    from decision_adapter import app as app_module
    from decision_adapter.settings import load_settings

    monkeypatch.setattr(app_module._Holder, "load", lambda self: None)
    return app_module.create_app(load_settings({}), load="now")


def emf_lines(text: str) -> list[dict]:
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"_aws"' in line:
            found.append(json.loads(line))
    return found


def check_emf(line: dict) -> None:
    """What CloudWatch needs to read a line as metrics: every declared metric present, units known."""
    declared = line["_aws"]["CloudWatchMetrics"]
    assert isinstance(line["_aws"]["Timestamp"], int)
    assert [d["Namespace"] for d in declared] == [metrics.NAMESPACE]
    assert declared[0]["Dimensions"] == [["endpoint", "api"]]
    assert line["endpoint"] and line["api"] in (*metrics.API_NAMES.values(), "unknown")
    for metric in declared[0]["Metrics"]:
        assert metric["Unit"] == metrics.METRICS[metric["Name"]][0]
        assert isinstance(line[metric["Name"]], (int, float)) and not isinstance(line[metric["Name"]], bool)
    for name in set(metrics.METRICS) - {m["Name"] for m in declared[0]["Metrics"]}:
        assert name not in line  # a value never appears undeclared


def test_request_id_precedence():
    made = iter(["made-1", "made-2"])
    both = {"X-Amzn-SageMaker-Inference-Id": "sm-42", "X-Request-Id": "caller-7"}
    assert choose_request_id(both, lambda: next(made)) == "sm-42"
    assert choose_request_id({"X-Request-Id": "caller-7"}, lambda: next(made)) == "caller-7"
    assert choose_request_id({}, lambda: next(made)) == "made-1"
    # Unsafe or oversized ids are not echoed into headers and logs: the next source is used.
    assert choose_request_id({"X-Amzn-SageMaker-Inference-Id": 'a "quoted" id', "X-Request-Id": "ok-1"}) == "ok-1"
    assert usable_id("x" * 128) and not usable_id("x" * 129) and not usable_id("a\nb") and not usable_id("")
    uuid.UUID(choose_request_id({"X-Request-Id": "bad id"}))  # made: a uuid4


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"X-Amzn-SageMaker-Inference-Id": "inf-1", "X-Request-Id": "mine-1"}, "inf-1"),
        ({"X-Request-Id": "mine-2"}, "mine-2"),
        ({}, None),
    ],
    ids=["inference-id", "caller-id", "made"],
)
def test_every_api_answer_carries_the_id_errors_too(monkeypatch, capsys, headers, expected):
    client = app_without_model(monkeypatch).test_client()
    seen = []
    paths = ("/invocations", "/v1/systemone", "/v1/decisions", "/v1/chat/completions")
    for path in paths:
        answer = client.post(path, json=DECISION, headers=headers)
        assert answer.status_code == 503  # the model is still loading: an error answer
        body = answer.get_json()
        field = "x_request_id" if path == "/v1/systemone" else "request_id"  # Jev's spec: extra fields are x_
        other = "request_id" if field == "x_request_id" else "x_request_id"
        assert body[field] == answer.headers["X-Request-Id"] and other not in body
        if expected:
            assert body[field] == expected
        else:
            uuid.UUID(body[field])
        seen.append(body[field])
    if not expected:
        assert len(set(seen)) == len(paths)  # a fresh id per request
    ping = client.get("/ping", headers=headers)
    assert "request_id" not in ping.get_json() and "X-Request-Id" not in ping.headers  # health: unchanged
    lines = emf_lines(capsys.readouterr().out)
    assert [line["request_id"] for line in lines] == seen
    for line in lines:
        check_emf(line)
        assert line["status"] == 503 and line["Busy"] == 0 and line["TimeLimitStops"] == 0
        assert "QueueWait" not in line  # never reached the gate
    assert [line["api"] for line in lines] == ["unknown", "systemone", "openai_decisions", "chat"]


def test_emf_line_declares_only_what_the_request_produced():
    facts = metrics.RequestFacts("r-1", api="own")
    facts.read_work(
        ([record([0.5, 0.5]), record([0.2, 0.3, 0.5], abstained=True, order="rotations")], {"input_tokens": 99})
    )
    facts.queue_wait_ms = 1.5
    facts.finish(200)
    line = metrics.emf_line(facts, endpoint="ep", timestamp_ms=123)
    check_emf(line)
    assert line["Options"] == 5 and line["InputTokens"] == 99 and line["Abstained"] == 1
    assert line["order"] == "as_given" and line["endpoint"] == "ep" and line["_aws"]["Timestamp"] == 123
    counted = metrics.RequestFacts("r-1b", api="own")
    counted.read_work(([record([0.5, 0.5], input_tokens=7), record([0.5, 0.5], input_tokens=5)], {}))
    assert counted.input_tokens == 12  # no count from the engine: the questions' prompts summed
    chat = metrics.RequestFacts("r-1c", api="chat")
    chat.read_work(({"choices": []}, {"input_tokens": 31}))
    assert chat.input_tokens == 31 and chat.options is None and chat.readout is None
    bare = metrics.RequestFacts("r-2")
    bare.finish(400)
    names = {m["Name"] for m in metrics.emf_line(bare, endpoint="ep")["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {"Latency", "Busy", "TimeLimitStops"}
    from decision_adapter.settings import load_settings

    assert load_settings({}).endpoint_name == "local"
    assert load_settings({"DECISION_ADAPTER_ENDPOINT_NAME": "ep-9"}).endpoint_name == "ep-9"


def test_the_metric_line_names_the_readout():
    facts = metrics.RequestFacts("r-3", api="own")
    facts.read_work(([record([0.5, 0.5], readout="cloze")], {"input_tokens": 9}))
    assert metrics.emf_line(facts, endpoint="ep")["readout"] == "cloze"
    mixed = metrics.RequestFacts("r-4", api="own")
    mixed.read_work(([record([0.5, 0.5], readout="cloze"), record([0.5, 0.5])], {}))
    assert metrics.emf_line(mixed, endpoint="ep")["readout"] == "mixed"
    assert "readout" not in metrics.emf_line(metrics.RequestFacts("r-5"), endpoint="ep")


def test_decisions_leave_a_metric_line_and_an_access_line_with_their_id(adapter):
    ids = {"own": f"own-{uuid.uuid4().hex[:8]}", "sample": f"sample-{uuid.uuid4().hex[:8]}"}
    for api, body in (("own", DECISION), ("sample", SAMPLE)):
        status, headers, answer = call(adapter.url + "/invocations", body, headers={"X-Request-Id": ids[api]})
        assert status == 200 and answer["request_id"] == headers["X-Request-Id"] == ids[api]
    # gunicorn writes a request's access line after its answer has gone out: wait for both (at most 10 s)
    access = {
        rid: re.compile(r'"POST /invocations HTTP/1\.[01]" 200 \d+ \d+ms ' + re.escape(rid) + r"$", re.MULTILINE)
        for rid in ids.values()
    }
    deadline = time.monotonic() + 10
    while True:
        log = adapter.log_path.read_text(errors="replace")
        if all(p.search(log) for p in access.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    lines = {line["request_id"]: line for line in emf_lines(log) if line["request_id"] in ids.values()}
    assert set(lines) == set(ids.values())
    for api, request_id in ids.items():
        line = lines[request_id]
        check_emf(line)
        assert line["api"] == api and line["status"] == 200 and line["endpoint"] == "local"
        assert line["Latency"] > 0 and line["QueueWait"] >= 0 and line["InputTokens"] > 0
        assert line["Options"] == (3 if api == "own" else 2) and line["Busy"] == 0
        # the access log's line for the same request ends with its id
        assert access[request_id].search(log), request_id


def test_the_clients_inference_id_comes_back_as_the_request_id(adapter):
    """The client's transport sends an invocation's id as SageMaker passes InferenceId; the adapter answers
    with it (through nginx when nginx fronts the adapter), so a capture record and the answer share it."""
    from workshop_lib.client.transport import LocalTransport, new_inference_id

    inference_id = new_inference_id()
    answer = json.loads(LocalTransport(adapter.url).invoke(json.dumps(DECISION).encode(), inference_id=inference_id))
    assert answer["request_id"] == inference_id
    assert json.loads(LocalTransport(adapter.url).invoke(json.dumps(DECISION).encode()))["request_id"] != inference_id
