"""Logs that expire, captured requests that expire, a bucket that refuses plain HTTP: built, checked by botocore
and IAM's evaluator, and applied the way the workshop applies them."""

from __future__ import annotations

import json

import pytest
from botocore.stub import Stubber

from workshop_lib.aws import admin, hygiene, iam, policies

from .values import REGION

BUCKET = "decision-workshop-hygiene"


def test_the_bucket_policy_refuses_plain_http_and_grants_nothing():
    policy = hygiene.tls_only_policy(BUCKET, REGION)
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*"
    anything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    inside = {"Version": "2012-10-17", "Statement": [{k: v for k, v in statement.items() if k != "Principal"}]}
    key = f"arn:aws:s3:::{BUCKET}/decision-workshop/model/model.tar.gz"
    assert not iam.allows([anything, inside], "s3:GetObject", key, {"aws:SecureTransport": "false"})
    assert iam.allows([anything, inside], "s3:GetObject", key, {"aws:SecureTransport": "true"})


def test_captured_requests_expire_and_nothing_else_does():
    rules = {r["ID"]: r for r in hygiene.lifecycle("decision-workshop")["Rules"]}
    assert rules["expire-captured-requests"]["Filter"] == {"Prefix": f"decision-workshop/{policies.CAPTURE_FOLDER}/"}
    assert rules["expire-captured-requests"]["Expiration"] == {"Days": hygiene.CAPTURE_EXPIRY_DAYS}
    assert "Expiration" not in rules["abort-incomplete-uploads"]  # the model and sources are kept


def test_the_administrators_bucket_lines_are_the_calls_they_name(tmp_path):
    written = hygiene.write_bucket_documents(tmp_path, BUCKET, "decision-workshop", REGION)
    calls = [admin.call_of(argv) for argv in hygiene.bucket_commands(tmp_path, BUCKET, "123456789012")]
    assert [(service, operation) for service, operation, _ in calls] == [
        ("s3", "PutBucketPolicy"), ("s3", "PutBucketLifecycleConfiguration")]
    assert json.loads(calls[0][2]["Policy"]) == json.loads(written[hygiene.BUCKET_POLICY_FILE].read_text())
    assert calls[1][2]["LifecycleConfiguration"] == hygiene.lifecycle("decision-workshop")
    assert all(params["ExpectedBucketOwner"] == "123456789012" for _, _, params in calls)


def test_the_operator_may_not_change_the_bucket_policy_or_its_lifecycle():
    from workshop_lib.config import WorkshopConfig

    config = WorkshopConfig(region=REGION, bucket=BUCKET, sagemaker_role_arn="arn:aws:iam::123456789012:role/studio")
    operator = policies.operator_documents(config, "123456789012")
    bucket = policies.s3_bucket_arn(BUCKET)
    own = {"s3:ResourceAccount": "123456789012"}
    for action in ("s3:PutBucketPolicy", "s3:PutLifecycleConfiguration", "s3:DeleteBucketPolicy"):
        assert not iam.allows(operator, action, bucket, own)


def test_log_groups_are_made_with_a_retention(clients):
    group = "/aws/sagemaker/Endpoints/decision-workshop-cpu"
    assert hygiene.keep_logs(clients.logs, group) == ""
    assert hygiene.keep_logs(clients.logs, group) == ""  # again: the group exists, the retention is set again
    (found,) = clients.logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    assert found["retentionInDays"] == hygiene.LOG_RETENTION_DAYS


def test_a_refused_retention_is_a_note_not_a_stop(fake_credentials):
    import boto3

    logs = boto3.client("logs", region_name=REGION)
    with Stubber(logs) as stub:
        stub.add_client_error("create_log_group", "AccessDeniedException", "not authorized", 400)
        note = hygiene.keep_logs(logs, "/aws/codebuild/x")
    assert note.startswith("log group /aws/codebuild/x keeps its events without a retention (AccessDeniedException")
    with Stubber(logs) as stub:
        stub.add_client_error("create_log_group", "ServiceUnavailableException", "down", 503)
        with pytest.raises(Exception, match="ServiceUnavailable"):
            hygiene.keep_logs(logs, "/aws/codebuild/x")
