"""Data capture: the DataCaptureConfig of decision endpoints (botocore-validated), SageMaker's record
layout written by the local stand-in and read back by the same reader that reads a fixture in the
documented layout, captured decisions as tasks to label, and the SageMaker role's one capture write."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re

import pytest

from workshop_lib.aws import (
    arns,
    calls,
    capture,
    model_requests,
    operator_policies,
    policy_scope,
    service_roles,
    variants,
)
from workshop_lib.aws.deploy_spec import ENDPOINT_NAME_ENV, DeploySpec, plan_for
from workshop_lib.aws.iam import evaluate
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.config import WorkshopConfig
from workshop_lib.errors import InvalidInput
from workshop_lib.evaluation.tasks import task_from_record
from workshop_lib.local import capture_stand_in, permissions

from .values import DECISION_PINNED, DLC_PINNED, MODEL_DATA, REGION, ROLE

ACCOUNT = "123456789012"
CONFIG = WorkshopConfig(
    region=REGION, bucket="decision-workshop-test", prefix="decision-workshop", sagemaker_role_arn=ROLE
)
DESTINATION = capture.destination_uri(CONFIG)
DECISION = {
    "id": "t-1",
    "state": "Charged twice this month.",
    "question": "Which team?",
    "options": [{"id": "billing", "text": "Billing"}, {"id": "tech", "text": "Technical support"}],
}
ANSWER = {
    "result": {"id": "t-1", "option_ids": ["billing", "tech"], "probabilities": [0.7, 0.3]},
    "request_id": "req-9",
}
WHEN = dt.datetime(2026, 12, 1, 15, 4, 5, 678000, tzinfo=dt.timezone.utc)

# Two records as SageMaker documents them: the answer as JSON text (the content type is listed under
# JsonContentTypes), and the request base64-encoded (SageMaker's default), with the caller's inference id.
FIXTURE = (
    "\n".join(
        json.dumps(r)
        for r in [
            {
                "captureData": {
                    "endpointInput": {
                        "observedContentType": "application/json",
                        "mode": "INPUT",
                        "data": json.dumps(DECISION),
                        "encoding": "JSON",
                    },
                    "endpointOutput": {
                        "observedContentType": "application/json",
                        "mode": "OUTPUT",
                        "data": json.dumps(ANSWER),
                        "encoding": "JSON",
                    },
                },
                "eventMetadata": {
                    "eventId": "a1b2c3d4-0000-4000-8000-000000000001",
                    "inferenceTime": "2026-12-01T15:04:05Z",
                },
                "eventVersion": "0",
            },
            {
                "captureData": {
                    "endpointInput": {
                        "observedContentType": "application/json",
                        "mode": "INPUT",
                        "data": base64.b64encode(
                            json.dumps(
                                {
                                    "questions": [DECISION, {**DECISION, "id": "t-2"}],
                                    "state": "Charged twice.",
                                    "id": "b-1",
                                }
                            ).encode()
                        ).decode(),
                        "encoding": "BASE64",
                    },
                    "endpointOutput": {
                        "observedContentType": "application/json",
                        "mode": "OUTPUT",
                        "data": base64.b64encode(b'{"results": []}').decode(),
                        "encoding": "BASE64",
                    },
                },
                "eventMetadata": {
                    "eventId": "a1b2c3d4-0000-4000-8000-000000000002",
                    "inferenceId": "caller-42",
                    "inferenceTime": "2026-12-01T15:04:06Z",
                },
                "eventVersion": "0",
            },
        ]
    )
    + "\n"
)


def test_decision_plans_capture_request_and_answer_and_botocore_accepts_them():
    config = capture.data_capture_config(DESTINATION, 25)
    assert config["InitialSamplingPercentage"] == 25 and config["DestinationS3Uri"].endswith(
        "/decision-workshop/capture"
    )
    assert {o["CaptureMode"] for o in config["CaptureOptions"]} == {"Input", "Output"}
    for spec in (DeploySpec("decision-cpu"), DeploySpec("decision-gpu")):
        plan = plan_for(
            spec,
            name=f"e-{spec.path}",
            role_arn=ROLE,
            region=REGION,
            image=parse_image_uri(DECISION_PINNED),
            model_data_url=MODEL_DATA,
            data_capture=config,
        )
        calls.validate("sagemaker", "CreateEndpointConfig", plan.endpoint_config)
        assert plan.endpoint_config["DataCaptureConfig"] == config
        assert plan.model["PrimaryContainer"]["Environment"][ENDPOINT_NAME_ENV] == f"e-{spec.path}"
    standard = plan_for(
        DeploySpec("standard"),
        name="s",
        role_arn=ROLE,
        region=REGION,
        image=parse_image_uri(DLC_PINNED),
        model_data_url=MODEL_DATA,
        data_capture=config,
    )
    assert "DataCaptureConfig" not in standard.endpoint_config  # the DLC's chat endpoint: not a decision one
    assert ENDPOINT_NAME_ENV not in standard.model["PrimaryContainer"].get("Environment", {})
    assert capture.data_capture_config(DESTINATION, 0) is None  # 0 %: no capture at all
    variant = plan.endpoint_config["ProductionVariants"][0]
    missing = {k: v for k, v in config.items() if k != "CaptureOptions"}
    for bad in (missing, dict(config, InitialSamplingPercentage="25")):  # botocore's model: required, types
        with pytest.raises(InvalidInput, match="CaptureOptions|InitialSamplingPercentage"):
            variants.endpoint_config_request("x", variant, data_capture=bad)


@pytest.mark.parametrize("value", ["101", "-1", "half", "2.5"])
def test_the_sampling_percentage_is_checked_naming_its_variable(value):
    with pytest.raises(InvalidInput, match="WORKSHOP_CAPTURE_PERCENT"):
        capture.data_capture_config(DESTINATION, value)
    assert any("capture_percent" in str(p) for p in CONFIG.replace(capture_percent=value).problems())


def test_the_documented_layout_is_read():
    first, second = capture.parse_file(FIXTURE, "k.jsonl")
    assert first.request_json() == DECISION and first.response_json() == ANSWER
    assert first.request_id == "req-9" and first.inference_id is None  # the adapter's id, from the answer
    assert second.request_json()["id"] == "b-1" and second.inference_id == "caller-42"
    assert second.request_id == "caller-42"  # no id in the answer: SageMaker's inference id
    with pytest.raises(InvalidInput, match="not a SageMaker capture record"):
        capture.parse_file('{"something": "else"}\n', "k.jsonl")


def test_records_follow_sagemakers_encoding_rule():
    record = capture.capture_record(
        b'{"a": 1}',
        b"\x00\x01",
        when=WHEN,
        event_id="e-1",
        inference_id="i-1",
        response_type="application/octet-stream",
    )
    assert record["eventVersion"] == "0"
    assert record["eventMetadata"] == {"eventId": "e-1", "inferenceId": "i-1", "inferenceTime": "2026-12-01T15:04:05Z"}
    assert record["captureData"]["endpointInput"] == {
        "observedContentType": "application/json",
        "mode": "INPUT",
        "data": '{"a": 1}',
        "encoding": "JSON",
    }
    output = record["captureData"]["endpointOutput"]
    assert output["mode"] == "OUTPUT" and output["encoding"] == "BASE64" and capture.decode(output) == b"\x00\x01"
    unlisted = capture.capture_record(b"{}", b"{}", when=WHEN, event_id="e", json_types=())
    assert unlisted["captureData"]["endpointInput"]["encoding"] == "BASE64"  # SageMaker's default


def test_the_stand_in_writes_what_the_reader_reads(clients):
    clients.s3.create_bucket(Bucket=CONFIG.bucket)
    config = capture.data_capture_config(DESTINATION, 100)
    times = iter([WHEN, WHEN + dt.timedelta(hours=1)])
    writer = capture_stand_in.CaptureWriter(
        clients.s3, config, "decision-workshop-cpu", "AllTraffic", clock=lambda: next(times)
    )

    class Answers:  # a transport standing in for the local adapter
        name, timeout_s = "fake", 5.0

        def invoke(self, body, *, deadline=None, inference_id=None):
            sent.append(inference_id)  # the adapter would answer with it as its request_id
            return json.dumps({**ANSWER, "request_id": f"req-{json.loads(body)['id']}"}).encode()

    sent = []

    transport = capture_stand_in.CapturingTransport(Answers(), writer)
    for n in (1, 2):
        transport.invoke(json.dumps({**DECISION, "id": f"t-{n}"}).encode())
    assert transport.name == "fake"  # the wrapped transport's attributes are its own
    keys = [o["Key"] for o in clients.s3.list_objects_v2(Bucket=CONFIG.bucket)["Contents"]]
    pattern = (
        r"decision-workshop/capture/decision-workshop-cpu/AllTraffic/2026/12/01/(15|16)/04-05-678-[0-9a-f-]{36}\.jsonl"
    )
    assert len(keys) == 2 and all(re.fullmatch(pattern, k) for k in keys), keys
    # the fixture in SageMaker's layout sits beside them, under another variant
    clients.s3.put_object(
        Bucket=CONFIG.bucket,
        Key="decision-workshop/capture/decision-workshop-cpu/Other/2026/12/01/14/00-00-000-x.jsonl",
        Body=FIXTURE.encode(),
    )
    events = capture.read_captured(clients.s3, DESTINATION, "decision-workshop-cpu")
    assert [e.request_json()["id"] for e in events] == ["t-1", "t-2", "t-1", "b-1"]  # by key: AllTraffic, Other
    assert [e.request_id for e in events[:2]] == ["req-t-1", "req-t-2"]
    # each invocation's id went to the adapter (as SageMaker's header) and into its own record, one id per call
    assert [e.inference_id for e in events[:2]] == sent and len(set(sent)) == 2 and None not in sent
    assert len(capture.read_captured(clients.s3, DESTINATION, "decision-workshop-cpu", "AllTraffic")) == 2
    assert capture.read_captured(clients.s3, DESTINATION, "decision-workshop-gpu") == []
    for key in clients.s3.list_objects_v2(Bucket=CONFIG.bucket)["Contents"]:
        clients.s3.delete_object(Bucket=CONFIG.bucket, Key=key["Key"])
    clients.s3.delete_bucket(Bucket=CONFIG.bucket)  # a capture that fails does not fail the decision
    times = iter([WHEN])  # the writer's clock reads this name when it runs
    assert json.loads(transport.invoke(json.dumps({**DECISION, "id": "t-3"}).encode()))["request_id"] == "req-t-3"
    assert transport.failures == 1


def test_sampling_and_a_disabled_config_write_nothing(clients):
    config = capture.data_capture_config(DESTINATION, 30)
    draws = iter([0.29, 0.30, 0.99])
    writer = capture_stand_in.CaptureWriter(clients.s3, config, "e", "AllTraffic", sample=lambda: next(draws))
    clients.s3.create_bucket(Bucket=CONFIG.bucket)
    written = [writer.capture(b"{}", b"{}") for _ in range(3)]
    assert written[0] is not None and written[1:] == [None, None]
    off = capture_stand_in.CaptureWriter(
        clients.s3, dict(config, EnableCapture=False), "e", "AllTraffic", sample=lambda: 0
    )
    assert off.capture(b"{}", b"{}") is None


def test_the_endpoint_config_says_whether_and_where_an_endpoint_captures(clients):
    model = model_requests.decision_model_request(
        "m", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA
    )
    clients.sm.create_model(**model)
    variant = variants.fixed_instance_variant("m", "ml.c5.2xlarge")
    config = capture.data_capture_config(DESTINATION, 50)
    for name, data_capture in (("with", config), ("without", None)):
        clients.sm.create_endpoint_config(**variants.endpoint_config_request(name, variant, data_capture=data_capture))
        clients.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    found, variant_name = capture.endpoint_capture(clients.sm, "with")
    assert found["DestinationS3Uri"] == DESTINATION and found["InitialSamplingPercentage"] == 50
    assert variant_name == variants.VARIANT_NAME
    assert capture.endpoint_capture(clients.sm, "without") is None


def test_captured_decisions_become_tasks_to_label():
    tasks = capture.captured_tasks(capture.parse_file(FIXTURE))
    assert [t["id"] for t in tasks] == ["t-1", "b-1/t-1", "b-1/t-2"]
    assert all(t["expected"] is None for t in tasks)
    first = tasks[0]
    assert first["question"] == {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"billing": "Billing", "tech": "Technical support"},
    }
    assert first["labels"] == ["billing", "tech"] and first["provenance"]["capture"]["request_id"] == "req-9"
    with pytest.raises(Exception, match="expected"):
        task_from_record(first)  # not labelled yet: the benchmark refuses it
    labelled = task_from_record({**first, "expected": "billing"})  # a person's label makes it a task
    assert labelled.expected == "billing" and labelled.labels == ("billing", "tech")
    assert labelled.state == DECISION["state"]


def test_the_sagemaker_role_may_write_captures_and_nothing_else_new():
    document = service_roles.sagemaker_execution_role_policy(CONFIG, ACCOUNT)
    bucket, key = capture.capture_key(DESTINATION, CONFIG.cpu_endpoint_name, "AllTraffic", WHEN, "f")
    own = {"s3:ResourceAccount": ACCOUNT}
    captured = arns.s3_object_arn(bucket, key, REGION)
    assert evaluate(document, "s3:PutObject", captured, own).matched == ("WriteCaptures",)
    # a bucket of that name in another account (created first by someone else) receives nothing
    assert not evaluate(
        document, "s3:PutObject", arns.s3_object_arn(bucket, key, REGION), {"s3:ResourceAccount": "210987654321"}
    ).allowed
    for elsewhere in ("decision-workshop/model/model.tar.gz", "decision-workshop/other/x.jsonl", "capture/x.jsonl"):
        assert not evaluate(document, "s3:PutObject", arns.s3_object_arn(bucket, elsewhere, REGION), own).allowed
    assert capture.CAPTURE_FOLDER == policy_scope.CAPTURE_FOLDER


def test_the_permission_audit_covers_the_capture_write_and_the_reading():
    bucket, key = capture.capture_key(DESTINATION, CONFIG.cpu_endpoint_name, "AllTraffic", WHEN, "f")
    prefix = capture.capture_folder(DESTINATION, CONFIG.cpu_endpoint_name)[1]
    made = [
        {
            "principal": permissions.SAGEMAKER,
            "service": "s3",
            "operation": "PutObject",
            "params": {"Bucket": bucket, "Key": key},
        },
        {
            "principal": permissions.OPERATOR,
            "service": "sagemaker",
            "operation": "DescribeEndpoint",
            "params": {"EndpointName": CONFIG.cpu_endpoint_name},
        },  # workshop captured: where the captures are
        {
            "principal": permissions.OPERATOR,
            "service": "sagemaker",
            "operation": "DescribeEndpointConfig",
            "params": {"EndpointConfigName": CONFIG.cpu_endpoint_name},
        },
        {
            "principal": permissions.OPERATOR,
            "service": "s3",
            "operation": "ListObjectsV2",
            "params": {"Bucket": bucket, "Prefix": prefix},
        },
        {
            "principal": permissions.OPERATOR,
            "service": "s3",
            "operation": "GetObject",
            "params": {"Bucket": bucket, "Key": key},
        },
    ]
    documents = {
        permissions.SAGEMAKER: service_roles.sagemaker_execution_role_policy(CONFIG, ACCOUNT),
        permissions.OPERATOR: operator_policies.operator_policy(CONFIG, ACCOUNT),
    }
    audit = permissions.audit(made, documents, REGION, ACCOUNT)
    assert audit.ok and audit.denied == [], str(audit)
    assert (permissions.SAGEMAKER, "WriteCaptures") not in audit.unused
    stray = [dict(made[0], params={"Bucket": bucket, "Key": "decision-workshop/model/model.tar.gz"})]
    assert not permissions.audit(stray, documents, REGION, ACCOUNT).ok


def test_a_local_client_captures_only_for_an_endpoint_whose_config_asks(clients):
    class Client:
        transport = object()

    model = model_requests.decision_model_request(
        "m", image=parse_image_uri(DECISION_PINNED), role_arn=ROLE, model_data_url=MODEL_DATA
    )
    clients.sm.create_model(**model)
    variant = variants.fixed_instance_variant("m", "ml.c5.2xlarge")
    clients.sm.create_endpoint_config(
        **variants.endpoint_config_request("with", variant, data_capture=capture.data_capture_config(DESTINATION, 100))
    )
    clients.sm.create_endpoint(EndpointName="with", EndpointConfigName="with")
    made = capture_stand_in.capture_locally(Client(), clients.sm, clients.s3, "with")
    assert isinstance(made.transport, capture_stand_in.CapturingTransport)
    assert made.transport.writer.variant == "AllTraffic"
    plain = Client()
    unknown = capture_stand_in.capture_locally(plain, clients.sm, clients.s3, "gone")
    assert unknown.transport is Client.transport


def test_a_system_one_answer_gives_its_x_request_id():
    def event(answer):
        return capture.CapturedEvent(
            "e-1", "caller-7", "2026-12-01T15:04:05Z", b"{}", json.dumps(answer).encode(), "systemone"
        )

    assert event({"answers": {}, "x_request_id": "req-jev-1"}).request_id == "req-jev-1"
    assert event({"answers": {}}).request_id == "caller-7"
