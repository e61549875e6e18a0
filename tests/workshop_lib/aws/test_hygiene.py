"""Logs that expire, captured requests that expire, a bucket that refuses plain HTTP: built, checked by botocore
and IAM's evaluator, and applied the way the workshop applies them."""

from __future__ import annotations

import json

import pytest
from botocore.stub import Stubber

from workshop_lib.aws import (
    admin,
    arns,
    hygiene,
    iam,
    operator_policies,
    policies,
    policy_scope,
    role_boundary,
    service_roles,
)

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
    captured = f"decision-workshop/{policy_scope.CAPTURE_FOLDER}/"
    assert rules["expire-captured-requests"]["Filter"] == {"Prefix": captured}
    assert rules["expire-captured-requests"]["Expiration"] == {"Days": hygiene.CAPTURE_EXPIRY_DAYS}
    assert "Expiration" not in rules["abort-incomplete-uploads"]  # the model and sources are kept


def test_the_administrators_bucket_lines_are_the_calls_they_name(tmp_path):
    written = hygiene.write_bucket_documents(tmp_path, BUCKET, "decision-workshop", REGION)
    calls = [admin.call_of(argv) for argv in hygiene.bucket_commands(tmp_path, BUCKET, "123456789012")]
    assert [(service, operation) for service, operation, _ in calls] == [
        ("s3", "PutBucketPolicy"),
        ("s3", "PutBucketLifecycleConfiguration"),
    ]
    assert json.loads(calls[0][2]["Policy"]) == json.loads(written[hygiene.BUCKET_POLICY_FILE].read_text())
    assert calls[1][2]["LifecycleConfiguration"] == hygiene.lifecycle("decision-workshop")
    assert all(params["ExpectedBucketOwner"] == "123456789012" for _, _, params in calls)


def test_the_operator_may_not_change_the_bucket_policy_or_its_lifecycle():
    from workshop_lib.config import WorkshopConfig

    config = WorkshopConfig(region=REGION, bucket=BUCKET, sagemaker_role_arn="arn:aws:iam::123456789012:role/studio")
    operator = operator_policies.operator_documents(config, "123456789012")
    bucket = arns.s3_bucket_arn(BUCKET)
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


# ---- an organisation's KMS key ------------------------------------------------------------------------

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_the_key_encrypts_a_cpu_volume_but_not_the_local_storage_of_the_gpu_pools():
    from workshop_lib.aws import encryption, endpoints
    from workshop_lib.aws.images import parse_image_uri

    from .values import DECISION_PINNED

    capture = {
        "EnableCapture": True,
        "InitialSamplingPercentage": 100,
        "DestinationS3Uri": "s3://b/p/capture",
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    }
    kwargs = dict(
        image=parse_image_uri(DECISION_PINNED),
        role_arn="arn:aws:iam::123456789012:role/r",
        model_data_url=f"s3://{BUCKET}/decision-workshop/model/model.tar.gz",
        data_capture=capture,
    )
    cpu = encryption.encrypted_plan(endpoints.decision_cpu_plan("c", instance_type="ml.c5.2xlarge", **kwargs), KEY)
    assert cpu.endpoint_config["KmsKeyId"] == KEY and cpu.endpoint_config["DataCaptureConfig"]["KmsKeyId"] == KEY
    gpu = encryption.encrypted_plan(endpoints.decision_gpu_plan("g", **kwargs), KEY)
    assert "KmsKeyId" not in gpu.endpoint_config  # SageMaker refuses a key on local NVMe storage
    assert gpu.endpoint_config["DataCaptureConfig"]["KmsKeyId"] == KEY and "local NVMe" in gpu.notes[-1]
    assert [
        encryption.has_local_storage(t)
        for t in (
            "ml.g4dn.xlarge",
            "ml.g6e.2xlarge",
            "ml.c5d.xlarge",
            "ml.m6id.large",
            "ml.c5.2xlarge",
            "ml.c7i.4xlarge",
        )
    ] == [True, True, True, True, False, False]


def test_each_principal_may_use_the_key_only_as_the_workshop_does():
    from workshop_lib.config import WorkshopConfig

    config = WorkshopConfig(
        region=REGION, bucket=BUCKET, sagemaker_role_arn="arn:aws:iam::123456789012:role/studio", kms_key_arn=KEY
    )
    via_s3 = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    build = service_roles.codebuild_service_role_policy(config, "123456789012")
    assert iam.allows(build, "kms:GenerateDataKey", KEY, via_s3)
    assert not iam.allows(build, "kms:GenerateDataKey", KEY)  # only as S3 uses it
    assert not iam.allows(build, "kms:Decrypt", KEY.replace("1234abcd", "9999abcd"), via_s3)  # another key
    role = service_roles.sagemaker_execution_role_policy(config, "123456789012")
    assert iam.allows(role, "kms:CreateGrant", KEY, {"kms:GrantIsForAWSResource": "true"})
    assert not iam.allows(role, "kms:CreateGrant", KEY, {"kms:GrantIsForAWSResource": "false"})
    boundary = role_boundary.role_boundary_policy(config.replace(kms_key_arn=""), "123456789012")  # written before
    assert iam.allows(build, "kms:GenerateDataKey", KEY, via_s3, boundary=boundary)
    plain = WorkshopConfig(region=REGION, bucket=BUCKET, sagemaker_role_arn="arn:aws:iam::123456789012:role/studio")
    granted = {
        a
        for name, d in policies.policies(plain, "123456789012").items()
        if name != "role-boundary-policy.json"
        for st in d["Statement"]
        for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    }
    assert granted and not any(a.startswith("kms:") for a in granted)  # no key configured: no KMS grant


def test_a_key_alias_is_refused_naming_the_setting():
    from workshop_lib.config import WorkshopConfig
    from workshop_lib.errors import InvalidInput

    with pytest.raises(InvalidInput, match="WORKSHOP_KMS_KEY_ARN"):
        WorkshopConfig(region=REGION, kms_key_arn="alias/my-key").check()
