"""`workshop captured`: an endpoint's captured decisions, read from S3 with the same reader as everywhere,
written as JevBench task records with an empty ``expected``; labelled, the benchmark's loader takes them."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from workshop_lib.aws import capture, model_requests, variants
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.cli import main
from workshop_lib.config import ENV_VARS
from workshop_lib.evaluation.tasks import load_tasks
from workshop_lib.local import capture_stand_in

BUCKET = "decision-workshop-cli"
ROLE = "arn:aws:iam::123456789012:role/workshop-sagemaker"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-decision-workshop@sha256:" + "ab" * 32
NAME = "decision-workshop-cpu"
DECISION = {
    "id": "ticket-1",
    "state": "Charged twice.",
    "question": "Which team?",
    "options": [{"id": "billing", "text": "Billing"}, {"id": "tech", "text": "Technical support"}],
}


@pytest.fixture
def aws_env(tmp_path, monkeypatch):
    from moto import mock_aws

    for name in [*ENV_VARS.values(), "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    with mock_aws():
        yield tmp_path


def test_captured_writes_tasks_to_label(aws_env, capsys):
    import boto3

    sm, s3 = boto3.client("sagemaker", region_name="us-east-1"), boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    destination = f"s3://{BUCKET}/decision-workshop/{capture.CAPTURE_FOLDER}"
    config = capture.data_capture_config(destination, 100)
    sm.create_model(
        **model_requests.decision_model_request(
            NAME,
            image=parse_image_uri(IMAGE),
            role_arn=ROLE,
            model_data_url=f"s3://{BUCKET}/decision-workshop/model/m.tar.gz",
        )
    )
    sm.create_endpoint_config(
        **variants.endpoint_config_request(
            NAME, variants.fixed_instance_variant(NAME, "ml.c5.2xlarge"), data_capture=config
        )
    )
    sm.create_endpoint(EndpointName=NAME, EndpointConfigName=NAME)
    when = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    writer = capture_stand_in.CaptureWriter(s3, config, NAME, variants.VARIANT_NAME, clock=lambda: when)
    for n in range(3):
        asked = {**DECISION, "id": f"ticket-{n}"}
        writer.capture(json.dumps(asked).encode(), json.dumps({"result": {}, "request_id": f"r-{n}"}).encode())
    out = aws_env / "to-label.jsonl"
    assert main(["captured", "--region", "us-east-1", "--bucket", BUCKET, "--name", NAME, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"3 captured invocations of {NAME}" in printed and str(out) in printed
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ["ticket-0", "ticket-1", "ticket-2"]
    assert all(r["expected"] is None for r in records)
    assert sorted(r["provenance"]["capture"]["request_id"] for r in records) == ["r-0", "r-1", "r-2"]
    labelled = aws_env / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({**r, "expected": "billing"}) + "\n" for r in records))
    tasks = load_tasks(labelled)
    assert len(tasks) == 3 and {t.expected for t in tasks} == {"billing"}
