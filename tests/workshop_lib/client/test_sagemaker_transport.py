"""The SageMaker transport. SageMaker itself cannot run here: a botocore Stubber on a real
``sagemaker-runtime`` client checks each request exactly and plays SageMaker's answers; one
test feeds botocore a fake HTTP response to check where its parser puts ModelError fields."""

from __future__ import annotations

import http.server
import io
import json
import time

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from urllib3.response import HTTPResponse

from decision_contract import wire
from tests.support.stand_in import serving
from workshop_lib.client import (
    READ_TIMEOUT_S,
    EndpointBusy,
    EndpointClient,
    EndpointNotFound,
    EndpointServerError,
    EndpointTimeout,
    InvalidDecision,
    InvalidResponse,
    ResponseTooLarge,
    UnprocessableRequest,
    WireVersionMismatch,
    decision,
)

REGION = "us-east-1"
ENDPOINT = "semif-decision-workflows"
LOG_STREAM = (
    f"arn:aws:logs:{REGION}:123456789012:log-group:/aws/sagemaker/Endpoints/{ENDPOINT}:log-stream:AllTraffic/i-0"
)
DECISION = decision("t-1", "The parcel never arrived.", "Which team?", {"refunds": "Refunds", "shipping": "Shipping"})
RESULT = {
    "result": {
        "id": "t-1",
        "option_ids": ["refunds", "shipping"],
        "probabilities": [0.3, 0.7],
        "timing": {"total_ms": 80.0},
        "model": {"file": "model.gguf"},
    }
}
BUSY = {
    "error": {
        "code": "busy",
        "message": "the model is busy and 0 request(s) are already waiting; retry after 1 s or add instances",
        "field": None,
    }
}


class JsonBytes:
    """Matches a request Body: bytes that decode to the given JSON value."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, bytes) and json.loads(other) == self.value

    def __repr__(self):
        return f"JsonBytes({self.value!r})"


def expected_request(payload) -> dict:
    return {
        "EndpointName": ENDPOINT,
        "Body": JsonBytes(payload),
        "ContentType": "application/json",
        "Accept": "application/json",
        "InferenceId": ANY,
    }


def reply(payload) -> dict:
    raw = json.dumps(payload).encode()
    return {
        "Body": StreamingBody(io.BytesIO(raw), len(raw)),
        "ContentType": "application/json",
        "InvokedProductionVariant": "AllTraffic",
    }


def model_error(stubber, status: int, body, payload=DECISION):
    text = body if isinstance(body, str) else json.dumps(body)
    stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ModelError",
        http_status_code=424,
        service_message=f'Received server error ({status}) from primary with message "{text}". See the logs.',
        modeled_fields={"OriginalStatusCode": status, "OriginalMessage": text, "LogStreamArn": LOG_STREAM},
        expected_params=expected_request(payload),
    )


@pytest.fixture
def runtime(monkeypatch):
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("sagemaker-runtime", region_name=REGION)
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def make_client(runtime_client, **options):
    sleeps: list[float] = []
    client = EndpointClient.sagemaker(ENDPOINT, REGION, runtime_client, sleep=sleeps.append, **options)
    return client, sleeps


def test_stubber_decide_sends_the_exact_request(runtime):
    sm, stubber = runtime
    stubber.add_response("invoke_endpoint", reply(RESULT), expected_request(DECISION))
    client, sleeps = make_client(sm)
    made = client.decide(DECISION)
    assert made.id == "t-1" and made.as_dict() == {"refunds": 0.3, "shipping": 0.7}
    assert made.top == "shipping" and made.server_ms == 80.0 and made.attempts == 1 and not sleeps


def test_stubber_model_error_503_then_success(runtime):
    sm, stubber = runtime
    model_error(stubber, 503, BUSY)
    stubber.add_response("invoke_endpoint", reply(RESULT), expected_request(DECISION))
    client, sleeps = make_client(sm, retries=3)
    made = client.decide(DECISION)
    assert made.attempts == 2 and made.top == "shipping"
    # SageMaker drops the container's Retry-After header, so the client's default applies.
    assert len(sleeps) == 1 and 1.0 <= sleeps[0] <= 1.25


def test_stubber_service_unavailable_is_retried_too(runtime):
    sm, stubber = runtime
    stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ServiceUnavailable",
        http_status_code=503,
        service_message="Service Unavailable",
        expected_params=expected_request(DECISION),
    )
    stubber.add_response("invoke_endpoint", reply(RESULT), expected_request(DECISION))
    client, sleeps = make_client(sm, default_retry_after_s=2.0)
    assert client.decide(DECISION).attempts == 2 and 2.0 <= sleeps[0] <= 2.5


def test_stubber_busy_after_the_last_retry_raises(runtime):
    sm, stubber = runtime
    for _ in range(3):
        model_error(stubber, 503, BUSY)
    client, sleeps = make_client(sm, retries=2, max_retry_sleep_s=0.5)
    with pytest.raises(EndpointBusy) as caught:
        client.decide(DECISION)
    exc = caught.value
    assert exc.attempts == 3 and exc.status == 503 and exc.code == "busy" and exc.retry_after is None
    assert sleeps == [0.5, 0.5]  # capped
    assert "gave up after 3 attempts" in str(exc) and LOG_STREAM in str(exc)


def test_stubber_model_error_422_carries_the_adapters_field(runtime):
    sm, stubber = runtime
    bad = decision("t-2", "s", "q?", ["same", "same"])
    error = {
        "error": {
            "code": "invalid_value",
            "message": "options[1].id 'same' is used twice; option ids must be unique",
            "field": "options[1].id",
        }
    }
    model_error(stubber, 422, error, payload=bad)
    client, sleeps = make_client(sm)
    with pytest.raises(UnprocessableRequest) as caught:
        client.decide(bad)
    exc = caught.value
    assert (exc.status, exc.code, exc.field) == (422, "invalid_value", "options[1].id")
    assert "used twice" in exc.message and exc.log_stream_arn == LOG_STREAM and not sleeps


def test_stubber_model_error_with_a_non_json_body(runtime):
    sm, stubber = runtime
    model_error(stubber, 500, "<html>Internal Server Error</html>")
    client, _ = make_client(sm)
    with pytest.raises(EndpointServerError) as caught:
        client.decide(DECISION)
    assert caught.value.status == 500 and "Internal Server Error" in caught.value.message


def test_stubber_unknown_endpoint(runtime):
    sm, stubber = runtime
    stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ValidationError",
        http_status_code=400,
        service_message=f"Endpoint {ENDPOINT} of account 123456789012 not found.",
    )
    client, _ = make_client(sm)
    with pytest.raises(EndpointNotFound, match="Check the endpoint name and region"):
        client.decide(DECISION)


def test_stubber_an_answer_to_another_request_is_refused(runtime):
    sm, stubber = runtime
    other = {"result": dict(RESULT["result"], id="someone-else")}
    stubber.add_response("invoke_endpoint", reply(other), expected_request(DECISION))
    client, _ = make_client(sm)
    with pytest.raises(InvalidResponse, match="someone-else"):
        client.decide(DECISION)


def test_stubber_chat_and_batch(runtime):
    sm, stubber = runtime
    # thinking off by default: a reasoning model (Qwen3.5 on the standard DLC) answers in content
    chat_body = {
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": 8,
    }
    completion = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    stubber.add_response("invoke_endpoint", reply(completion), expected_request(chat_body))
    questions = [
        {"id": "q1", "question": "A?", "options": ["yes", "no"]},
        {"id": "q2", "question": "B?", "options": ["x", "y", "z"]},
    ]
    batch_body = {"id": "b", "state": "s", "questions": questions}
    batch_reply = {
        "id": "b",
        "timing": {"total_ms": 9.0},
        "model": {"file": "m.gguf"},
        "results": [
            {"id": "q1", "option_ids": ["yes", "no"], "probabilities": [0.9, 0.1], "question_eval_ms": 3.0},
            {"id": "q2", "option_ids": ["x", "y", "z"], "probabilities": [0.2, 0.3, 0.5], "question_eval_ms": 4.0},
        ],
    }
    stubber.add_response("invoke_endpoint", reply(batch_reply), expected_request(batch_body))
    client, _ = make_client(sm)
    chat = client.chat("hi", max_tokens=8)
    assert chat.content == "Hello." and chat.finish_reason == "stop" and chat.usage["completion_tokens"] == 2
    first, second = client.decide_batch("b", "s", questions)
    assert (first.id, first.top, second.id, second.top) == ("q1", "yes", "q2", "z")
    assert second.server_ms == 9.0 and second.timing["question_eval_ms"] == 4.0 and second.model["file"] == "m.gguf"


def test_stubber_ping_is_not_offered_by_sagemaker(runtime):
    client, _ = make_client(runtime[0])
    with pytest.raises(NotImplementedError, match="DescribeEndpoint"):
        client.ping()


def test_sagemaker_client_timeouts_and_retry_mode(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = EndpointClient.sagemaker(ENDPOINT, REGION)
    config = client.transport.runtime.meta.config
    assert config.read_timeout == READ_TIMEOUT_S > 60 and config.connect_timeout == 10
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}  # the client counts every retry
    assert client.transport.runtime.meta.region_name == REGION


class _SageMakerRuntime(http.server.BaseHTTPRequestHandler):
    """A local stand-in for the SageMaker runtime API: answers InvokeEndpoint from a script of replies."""

    script: list = []
    seen: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((self.path, json.loads(body)))
        status, headers, payload = type(self).script.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def runtime_api(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    _SageMakerRuntime.script, _SageMakerRuntime.seen = [], []
    with serving(_SageMakerRuntime) as url:
        yield _SageMakerRuntime, url


def _answer(decision):
    return {
        "result": {
            "id": decision["id"],
            "option_ids": [o if isinstance(o, str) else o["id"] for o in decision["options"]],
            "probabilities": [0.5] * len(decision["options"]),
        }
    }


@pytest.mark.parametrize(
    "busy",
    [
        (503, {}, {"message": "Service Unavailable"}),  # SageMaker itself, briefly unavailable
        (400, {"x-amzn-ErrorType": "ThrottlingException"}, {"message": "Rate exceeded"}),
        (
            424,
            {"x-amzn-ErrorType": "ModelError"},
            {  # the container's own 503: the model was busy
                "Message": 'Received server error (503) from primary with message "busy".',
                "OriginalStatusCode": 503,
                "OriginalMessage": json.dumps({"error": "model is busy; retry the request", "retryable": True}),
            },
        ),
    ],
    ids=["service-unavailable", "throttling", "container-busy"],
)
def test_retries_through_botocore_are_counted_once_and_truly(runtime_api, busy):
    """Real botocore (serialisation, its retry handler, parsing) against a local HTTP stand-in."""
    api, url = runtime_api
    api.script = [busy, busy, (200, {}, _answer(DECISION))]
    client = EndpointClient.sagemaker(ENDPOINT, REGION, endpoint_url=url, retries=3, sleep=lambda s: None)
    decision = client.decide(DECISION)
    assert len(api.seen) == 3 == decision.attempts  # no hidden botocore retries under the client's
    assert all(path.endswith(f"/endpoints/{ENDPOINT}/invocations") for path, _ in api.seen)


def test_when_retries_run_out_the_error_says_how_many_attempts_were_made(runtime_api):
    api, url = runtime_api
    api.script = [(503, {}, {"message": "Service Unavailable"})] * 3
    client = EndpointClient.sagemaker(ENDPOINT, REGION, endpoint_url=url, retries=2, sleep=lambda s: None)
    with pytest.raises(EndpointBusy) as caught:
        client.decide(DECISION)
    assert len(api.seen) == 3 == caught.value.attempts
    assert "gave up after 3 attempts" in str(caught.value)


def test_fake_http_model_error_is_parsed_where_the_client_looks(monkeypatch):
    """No Stubber: botocore's own parser reads a ModelError response shaped like SageMaker's."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    sm = boto3.client("sagemaker-runtime", region_name=REGION, config=Config(retries={"max_attempts": 0}))
    original = json.dumps({"error": {"code": "invalid_value", "message": "state must not be empty", "field": "state"}})
    wire = json.dumps(
        {
            "LogStreamArn": LOG_STREAM,
            "Message": f'Received client error (422) from primary with message "{original}".',
            "OriginalMessage": original,
            "OriginalStatusCode": 422,
        }
    ).encode()
    sent = []

    def fake_sagemaker(request, **kwargs):
        sent.append(request)
        raw = HTTPResponse(body=io.BytesIO(wire), status=424, preload_content=False)
        return AWSResponse(
            request.url, 424, {"x-amzn-ErrorType": "ModelError", "Content-Type": "application/json"}, raw
        )

    sm.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", fake_sagemaker)
    client = EndpointClient.sagemaker(ENDPOINT, REGION, sm)
    with pytest.raises(UnprocessableRequest) as caught:
        client.decide(DECISION)
    assert (caught.value.status, caught.value.field) == (422, "state")
    request = sent[0]
    assert request.url.endswith(f"/endpoints/{ENDPOINT}/invocations")
    assert request.headers["Content-Type"] in ("application/json", b"application/json")
    assert request.headers["Accept"] in ("application/json", b"application/json")
    assert json.loads(request.body) == DECISION


# -- the client's limits on what SageMaker hands back ------------------------------------------------


class _Trickle(io.RawIOBase):
    """A body arriving a byte at a time, each after ``every_s`` (what botocore's per-read timeout lets by)."""

    def __init__(self, data: bytes, every_s: float):
        self.data, self.every_s, self.reads = data, every_s, 0

    def readable(self):
        return True

    def read(self, amt=-1):
        time.sleep(self.every_s)
        self.reads += 1
        chunk, self.data = self.data[:1], self.data[1:]
        return chunk


def test_stubber_a_trickling_body_is_stopped_at_the_call_deadline(runtime):
    sm, stubber = runtime
    raw = json.dumps(RESULT).encode()
    slow = _Trickle(raw, every_s=0.25)
    stubber.add_response(
        "invoke_endpoint",
        {"Body": StreamingBody(slow, len(raw)), "ContentType": "application/json"},
        expected_request(DECISION),
    )
    client, _ = make_client(sm, timeout_s=1.0, retries=0)
    started = time.monotonic()
    with pytest.raises(EndpointTimeout, match="within 1 s"):
        client.decide(DECISION)
    # checked between chunks: the call ends within one chunk's read of its deadline
    assert time.monotonic() - started < 1.0 + 0.25 + 0.5
    assert slow.reads < len(raw)


def test_stubber_a_body_over_the_cap_is_refused(runtime):
    sm, stubber = runtime
    big = json.dumps({"result": dict(RESULT["result"], padding="x" * 5000)}).encode()
    stubber.add_response(
        "invoke_endpoint",
        {"Body": StreamingBody(io.BytesIO(big), len(big)), "ContentType": "application/json"},
        expected_request(DECISION),
    )
    client, _ = make_client(sm, max_response_bytes=4096)
    with pytest.raises(ResponseTooLarge, match="longer than 4096 bytes"):
        client.decide(DECISION)


def test_an_announced_body_over_the_cap_is_refused_through_botocore(runtime_api):
    api, url = runtime_api
    api.script = [(200, {}, {"result": dict(RESULT["result"], padding="x" * 5000)})]
    client = EndpointClient.sagemaker(ENDPOINT, REGION, endpoint_url=url, max_response_bytes=4096, retries=0)
    with pytest.raises(ResponseTooLarge, match="announces 5.* bytes.*max_response_bytes=4096"):
        client.decide(DECISION)


def test_stubber_an_unnormalised_answer_is_refused(runtime):
    sm, stubber = runtime
    stubber.add_response(
        "invoke_endpoint",
        reply({"result": dict(RESULT["result"], probabilities=[0.3, 0.3])}),
        expected_request(DECISION),
    )
    client, _ = make_client(sm)
    with pytest.raises(InvalidDecision, match="sum to 0.6"):
        client.decide(DECISION)


@pytest.mark.parametrize(
    "attributes, refused",
    [(None, False), (wire.WIRE_VERSION, False), ("decision-wire/999", True)],
    ids=["absent", "same", "other"],
)
def test_the_adapters_wire_version_comes_back_through_invoke_endpoint(runtime_api, attributes, refused):
    """SageMaker hands back the container's wire.VERSION_HEADER as InvokeEndpoint's CustomAttributes: real
    botocore parses it from the runtime API's answer, and the client judges it as it does a local adapter's."""
    api, url = runtime_api
    api.script = [(200, {wire.VERSION_HEADER: attributes} if attributes else {}, _answer(DECISION))]
    client = EndpointClient.sagemaker(ENDPOINT, REGION, endpoint_url=url, retries=0)
    if not refused:
        assert client.decide(DECISION).id == DECISION["id"]
        return
    with pytest.raises(WireVersionMismatch, match=f"speaks {attributes}, this client {wire.WIRE_VERSION}"):
        client.decide(DECISION)
