"""permissions.py: what IAM checks for each recorded call, the record itself, and the audit.

The record is made by real boto3 clients (against moto standing in for AWS); the audit uses the
project's IAM evaluator (iam.evaluate) on the generated policies.
"""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from workshop_lib.aws import iam, operator_policies, policy_scope, service_roles
from workshop_lib.config import WorkshopConfig
from workshop_lib.local import iam_needs, permissions

REGION, ACCOUNT = "us-east-1", "123456789012"
CONFIG = WorkshopConfig(
    mode="aws",
    region=REGION,
    bucket="decision-workshop-test",
    prefix="decision-workshop",
    sagemaker_role_arn=f"arn:aws:iam::{ACCOUNT}:role/sm",
    codebuild_role_arn=f"arn:aws:iam::{ACCOUNT}:role/cb",
)


def call(service, operation, principal=permissions.OPERATOR, **params):
    return {"principal": principal, "service": service, "operation": operation, "params": params}


@pytest.mark.parametrize(
    "recorded, expected",
    [
        (
            call("s3", "PutObject", Bucket="b", Key="p/model.tar.gz"),
            [("s3:PutObject", "arn:aws:s3:::b/p/model.tar.gz")],
        ),
        (call("s3", "UploadPart", Bucket="b", Key="p/k"), [("s3:PutObject", "arn:aws:s3:::b/p/k")]),
        (call("s3", "HeadObject", Bucket="b", Key="p/k"), [("s3:GetObject", "arn:aws:s3:::b/p/k")]),
        (
            call("s3", "DeleteObjects", Bucket="b", Delete={"Objects": [{"Key": "p/a"}, {"Key": "p/b"}]}),
            [("s3:DeleteObject", "arn:aws:s3:::b/p/a"), ("s3:DeleteObject", "arn:aws:s3:::b/p/b")],
        ),
        (call("s3", "HeadBucket", Bucket="b"), [("s3:ListBucket", "arn:aws:s3:::b")]),
        (
            call("codebuild", "BatchGetBuilds", ids=["proj-a:0000"]),
            [("codebuild:BatchGetBuilds", f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/proj-a")],
        ),
        (
            call("codebuild", "CreateProject", name="proj-a", serviceRole="arn:aws:iam::1:role/cb"),
            [
                ("codebuild:CreateProject", f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/proj-a"),
                ("iam:PassRole", "arn:aws:iam::1:role/cb"),
            ],
        ),
        (
            call("ecr", "DescribeImages", registryId="763104351884", repositoryName="llama-cpp"),
            [("ecr:DescribeImages", f"arn:aws:ecr:{REGION}:763104351884:repository/llama-cpp")],
        ),
        (
            call("ecr", "CreateRepository", repositoryName="r", tags=[{"Key": "k", "Value": "v"}]),
            [
                ("ecr:CreateRepository", f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/r"),
                ("ecr:TagResource", f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/r"),
            ],
        ),
        (
            call("sagemaker", "CreateModel", ModelName="M1", ExecutionRoleArn="arn:aws:iam::1:role/sm", Tags=[{}]),
            [
                ("sagemaker:CreateModel", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model/m1"),
                ("sagemaker:AddTags", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model/m1"),
                ("iam:PassRole", "arn:aws:iam::1:role/sm"),
            ],
        ),
        (
            call("sagemaker", "DeleteEndpointConfig", EndpointConfigName="e"),
            [("sagemaker:DeleteEndpointConfig", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint-config/e")],
        ),
        (
            call("logs", "DeleteLogGroup", logGroupName="/aws/x"),
            [("logs:DeleteLogGroup", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/x")],
        ),
        (call("sts", "GetCallerIdentity"), []),
    ],
)
def test_each_call_becomes_what_iam_checks(recorded, expected):
    assert [(a, r) for a, r, _ in iam_needs.needed(recorded, REGION, ACCOUNT)] == expected


def test_pass_role_carries_the_service_it_is_passed_to():
    ((_, _, ctx),) = [
        n
        for n in iam_needs.needed(
            call("sagemaker", "CreateModel", ModelName="m", ExecutionRoleArn="arn:aws:iam::1:role/sm"), REGION, ACCOUNT
        )
        if n[0] == "iam:PassRole"
    ]
    assert ctx == {"iam:PassedToService": "sagemaker.amazonaws.com"}


def test_an_unmapped_call_is_an_error_not_a_silent_pass():
    with pytest.raises(ValueError, match="no IAM mapping for kms:Decrypt"):
        iam_needs.needed(call("kms", "Decrypt"), REGION, ACCOUNT)


def test_the_log_records_real_client_calls_with_their_principal(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    log = permissions.CallLog(tmp_path / "calls.jsonl")
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        log.attach(s3)
        s3.create_bucket(Bucket="bkt-1")
        with log.acting_as(permissions.CODEBUILD):
            s3.put_object(Bucket="bkt-1", Key="p/k", Body=b"12345")
        with log.acting_as(None):
            s3.list_buckets()
    calls = log.calls()
    assert [(c["principal"], c["operation"]) for c in calls] == [
        ("operator", "CreateBucket"),
        ("codebuild-service-role", "PutObject"),
    ]
    assert calls[1]["params"]["Key"] == "p/k" and calls[1]["params"]["Body"].startswith("<")  # data, not content


def test_the_audit_names_denied_calls_and_unused_statements():
    scope = policy_scope.scope(CONFIG)
    documents = {permissions.OPERATOR: operator_policies.operator_policy(scope)}
    made = [
        call("sagemaker", "CreateEndpoint", EndpointName=CONFIG.standard_endpoint_name),
        call("sagemaker", "CreateEndpoint", EndpointName="someone-elses-endpoint"),
    ]
    audit = permissions.audit(made, documents, REGION, ACCOUNT)
    assert not audit.ok
    assert audit.denied == [
        (
            "operator",
            "sagemaker:CreateEndpoint",
            f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/someone-elses-endpoint",
            "no statement allows it",
        )
    ]
    assert ("operator", "WorkshopEndpoints") not in audit.unused
    assert ("operator", "WorkshopBucket") in audit.unused
    assert "DENIED operator: sagemaker:CreateEndpoint" in str(audit)


def test_pass_role_is_allowed_only_to_the_service_that_uses_the_role():
    document = operator_policies.operator_policy(policy_scope.scope(CONFIG))
    to_sagemaker = {"iam:PassedToService": "sagemaker.amazonaws.com"}
    assert iam.allows(document, "iam:PassRole", CONFIG.sagemaker_role_arn, to_sagemaker)
    assert not iam.allows(
        document, "iam:PassRole", CONFIG.sagemaker_role_arn, {"iam:PassedToService": "ec2.amazonaws.com"}
    )
    assert not iam.allows(document, "iam:PassRole", CONFIG.codebuild_role_arn, to_sagemaker)


def test_every_command_the_buildspecs_run_is_allowed_by_the_codebuild_role(tmp_path):
    """Both buildspecs run for real (fake `aws` and `docker` record each command), then every
    recorded command is held against the CodeBuild service role's policy."""
    import hashlib

    from tests.support.buildspec import REPO_ROOT, make_fake_hub, run_buildspec
    from workshop_lib.aws import build_projects, images
    from workshop_lib.models import ModelFile, ModelSpec, TokenizerSource

    gguf = b"GGUF" + bytes(200)
    spec = ModelSpec(
        name="Fake",
        gguf=ModelFile(
            path="fake.gguf",
            repo="acme/fake-GGUF",
            revision="a" * 40,
            role="gguf",
            size=len(gguf),
            sha256=hashlib.sha256(gguf).hexdigest(),
        ),
        tokenizer=TokenizerSource("acme/fake", "b" * 40),
    )
    hub = make_fake_hub(
        tmp_path / "hub",
        {("acme/fake-GGUF", "a" * 40, "fake.gguf"): gguf, ("acme/fake", "b" * 40, "tokenizer.json"): b"{}"},
    )
    package = run_buildspec(
        REPO_ROOT / build_projects.MODEL_PACKAGE_BUILDSPEC,
        {**build_projects.model_package_env(spec, CONFIG.s3_uri("model")), "HF_ENDPOINT": hub},
        tmp_path / "package",
    )
    repository = f"{images.ecr_host(ACCOUNT, REGION)}/{CONFIG.ecr_repository}"
    image = run_buildspec(
        REPO_ROOT / build_projects.IMAGE_BUILD_BUILDSPEC,
        build_projects.image_build_env(
            images.pinned_dlc(REGION, "cuda"), images.parse_image_uri(repository), "gpu-1", "Dockerfile.gpu"
        ),
        tmp_path / "image",
    )
    assert package.returncode == 0 and image.returncode == 0, package.stderr + image.stderr
    document = service_roles.codebuild_service_role_policy(policy_scope.scope(CONFIG))
    needs = [n for argv in package.calls + image.calls for n in iam_needs.cli_needed(argv, REGION, ACCOUNT)]
    assert len(needs) >= 12
    denied = [(a, r) for a, r, c in needs if not iam.allows(document, a, r, c)]
    assert denied == []
    # and the same commands for another bucket or repository would be refused
    assert not iam.allows(document, "s3:PutObject", "arn:aws:s3:::someone-else/decision-workshop/model/x")
