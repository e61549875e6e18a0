"""workshop_lib.aws.codebuild against moto (S3, ECR, CodeBuild, CloudWatch Logs).

moto's CodeBuild stores projects and builds but never runs a buildspec, and every
build it reports has SUCCEEDED; it has no UpdateProject. So:
- where a flow needs what the build would have written (the manifest in S3, the pushed
  tag in ECR), the test writes it itself, and says so;
- failing builds, updates and exported variables use botocore's Stubber for CodeBuild
  ("stubber" in the test name), with moto still serving S3, ECR and Logs.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import zipfile

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from moto import mock_aws

from tests.support.buildspec import REPO_ROOT
from workshop_lib.aws import build_projects
from workshop_lib.aws import codebuild as builds
from workshop_lib.aws.images import DLC_PINS, parse_image_uri
from workshop_lib.errors import AwsFailure, InvalidInput
from workshop_lib.models import PINNED_MODEL, ModelFile, ModelSpec
from workshop_lib.packaging import build_manifest, package_local

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/decision-workshop-codebuild"  # moto's default account
BUCKET = "decision-workshop-artifacts"
BASE = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/llama-cpp@sha256:" + "12" * 32


@pytest.fixture
def clients(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        yield {name: boto3.client(name, region_name=REGION) for name in ("codebuild", "ecr", "logs")} | {"s3": s3}


def capture(client, operation: str) -> list[dict]:
    """Record the parameters of every `operation` call the client sends."""
    sent: list[dict] = []
    client.meta.events.register(
        f"provide-client-params.{client.meta.service_model.service_name}.{operation}",
        lambda params, **_: sent.append(dict(params)),
    )
    return sent


def push_image(ecr, repository: str, tag: str) -> str:
    """What `docker push` in the build would do; returns the digest ECR assigns."""
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"digest": "sha256:" + "cd" * 32, "size": 1, "mediaType": "x"},
            "layers": [],
        }
    )
    return ecr.put_image(repositoryName=repository, imageManifest=manifest, imageTag=tag)["image"]["imageId"][
        "imageDigest"
    ]


# ---------------------------------------------------------------- ECR


def test_ensure_ecr_repository_creates_an_immutable_scanned_repository(clients):
    ecr = clients["ecr"]
    uri = builds.ensure_ecr_repository(ecr, build_projects.ecr_repository_request("semif-llamacpp-dlc"))
    assert uri == f"123456789012.dkr.ecr.{REGION}.amazonaws.com/semif-llamacpp-dlc"
    repo = ecr.describe_repositories(repositoryNames=["semif-llamacpp-dlc"])["repositories"][0]
    assert repo["imageTagMutability"] == "IMMUTABLE"
    assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
    assert builds.ensure_ecr_repository(ecr, build_projects.ecr_repository_request("semif-llamacpp-dlc")) == uri


def test_ensure_ecr_repository_refuses_an_existing_mutable_one(clients):
    clients["ecr"].create_repository(repositoryName="shared-repo", imageTagMutability="MUTABLE")
    with pytest.raises(AwsFailure, match="put-image-tag-mutability"):
        builds.ensure_ecr_repository(clients["ecr"], build_projects.ecr_repository_request("shared-repo"))


def test_image_digest_pins_the_pushed_tag_of_a_repository(clients):
    ecr = clients["ecr"]
    uri = builds.ensure_ecr_repository(ecr, build_projects.ecr_repository_request("semif-llamacpp-dlc"))
    digest = push_image(ecr, "semif-llamacpp-dlc", "cpu-1")
    repository = parse_image_uri(uri)
    assert builds.image_digest(ecr, repository, "cpu-1").uri == f"{uri}@{digest}"
    with pytest.raises(AwsFailure, match="cpu-2"):
        builds.image_digest(ecr, repository, "cpu-2")


# ---------------------------------------------------------------- S3


def small_spec() -> ModelSpec:
    return ModelSpec(
        name="tiny",
        gguf=ModelFile(
            path="tiny.gguf",
            repo="acme/tiny",
            revision="1" * 40,
            role="gguf",
            size=8,
            sha256=hashlib.sha256(b"GGUFdata").hexdigest(),
        ),
    )


def test_upload_package(clients, tmp_path):
    (tmp_path / "tiny.gguf").write_bytes(b"GGUFdata")
    package = package_local(small_spec(), {"tiny.gguf": tmp_path / "tiny.gguf"}, tmp_path / "out")
    url = builds.upload_package(clients["s3"], package, f"s3://{BUCKET}/models/tiny/")
    assert url == f"s3://{BUCKET}/models/tiny/model.tar.gz"
    body = clients["s3"].get_object(Bucket=BUCKET, Key="models/tiny/model.tar.gz")["Body"].read()
    assert body == package.tarball.read_bytes()
    assert builds.read_manifest(clients["s3"], f"s3://{BUCKET}/models/tiny") == package.manifest


def test_upload_source(clients):
    location = builds.upload_source(clients["s3"], BUCKET, REPO_ROOT)
    bucket, key = location.split("/", 1)
    assert bucket == BUCKET and key.startswith("codebuild-source/source-") and key.endswith(".zip")
    data = clients["s3"].get_object(Bucket=bucket, Key=key)["Body"].read()
    assert "buildspec/image-build.yml" in zipfile.ZipFile(io.BytesIO(data)).namelist()


# ---------------------------------------------------------------- CodeBuild (moto)


def test_create_project_start_and_wait_moto(clients):
    codebuild = clients["codebuild"]
    request = build_projects.project_request(
        "decision-workshop-image-build",
        buildspec=build_projects.IMAGE_BUILD_BUILDSPEC,
        source_location=f"{BUCKET}/src.zip",
        service_role_arn=ROLE,
        privileged=True,
    )
    arn = builds.ensure_project(codebuild, request)
    assert arn.endswith(":project/decision-workshop-image-build")
    project = codebuild.batch_get_projects(names=["decision-workshop-image-build"])["projects"][0]
    assert project["environment"]["privilegedMode"] is True
    sent = capture(codebuild, "StartBuild")
    build_id = builds.start_build(
        codebuild,
        build_projects.start_build_request(
            "decision-workshop-image-build", {"IMAGE_TAG": "cpu-1"}, source_location=f"{BUCKET}/src.zip"
        ),
    )
    assert sent[0]["environmentVariablesOverride"] == [{"name": "IMAGE_TAG", "value": "cpu-1", "type": "PLAINTEXT"}]
    build = builds.wait_for_build(codebuild, build_id, clients["logs"], progress=False, sleep=lambda s: None)
    assert build["buildStatus"] == "SUCCEEDED"


def test_package_model_in_codebuild_moto_with_manifest_written_by_the_test(clients):
    s3, codebuild = clients["s3"], clients["codebuild"]
    measured = {f.path: (f.size or 100, f.sha256 or "0" * 64) for f in PINNED_MODEL.files}
    # moto does not run the buildspec: upload what its build phase would have uploaded.
    manifest = build_manifest(PINNED_MODEL, measured, build_id="b:1", where="codebuild")
    s3.put_object(Bucket=BUCKET, Key="semif-llamacpp/model-manifest.json", Body=json.dumps(manifest).encode())
    sent = capture(codebuild, "StartBuild")

    packaged = builds.package_model_in_codebuild(
        codebuild,
        s3,
        clients["logs"],
        model_s3_uri=f"s3://{BUCKET}/semif-llamacpp/model.tar.gz",
        service_role_arn=ROLE,
        source_bucket=BUCKET,
        progress=False,
        poll_s=0,
        region=REGION,
    )

    assert packaged.model_data_url == f"s3://{BUCKET}/semif-llamacpp/model.tar.gz"
    assert packaged.manifest == manifest
    overrides = {v["name"]: v["value"] for v in sent[0]["environmentVariablesOverride"]}
    assert overrides["MODEL_S3_URI"] == f"s3://{BUCKET}/semif-llamacpp/"
    assert overrides["GGUF_SHA256"] == PINNED_MODEL.gguf.sha256
    assert sent[0]["sourceLocationOverride"].startswith(f"{BUCKET}/codebuild-source/source-")
    project = codebuild.batch_get_projects(names=[build_projects.MODEL_PACKAGE_PROJECT])["projects"][0]
    assert project["source"]["buildspec"] == "buildspec/model-package.yml"


def test_package_model_in_codebuild_moto_refuses_a_foreign_manifest(clients):
    measured = {f.path: (1, "f" * 64) for f in PINNED_MODEL.files}
    manifest = build_manifest(PINNED_MODEL, measured, build_id="b:1", where="codebuild")
    clients["s3"].put_object(Bucket=BUCKET, Key="m/model-manifest.json", Body=json.dumps(manifest).encode())
    with pytest.raises(AwsFailure, match=PINNED_MODEL.gguf.sha256):
        builds.package_model_in_codebuild(
            clients["codebuild"],
            clients["s3"],
            clients["logs"],
            model_s3_uri=f"s3://{BUCKET}/m/",
            service_role_arn=ROLE,
            source_bucket=BUCKET,
            progress=False,
            poll_s=0,
            region=REGION,
        )


def test_package_model_in_codebuild_moto_without_upload(clients):
    with pytest.raises(AwsFailure, match="did not upload"):
        builds.package_model_in_codebuild(
            clients["codebuild"],
            clients["s3"],
            clients["logs"],
            model_s3_uri=f"s3://{BUCKET}/empty/",
            service_role_arn=ROLE,
            source_bucket=BUCKET,
            progress=False,
            poll_s=0,
            region=REGION,
        )


def test_build_decision_image_moto_reads_the_digest_of_the_pushed_tag(clients):
    ecr, codebuild = clients["ecr"], clients["codebuild"]
    uri = builds.ensure_ecr_repository(ecr, build_projects.ecr_repository_request())
    # moto does not run the buildspec: push the tag its build phase would have pushed.
    digest = push_image(ecr, build_projects.ECR_REPOSITORY, "gpu-1")
    sent = capture(codebuild, "StartBuild")

    pinned = builds.build_decision_image(
        codebuild,
        ecr,
        clients["s3"],
        clients["logs"],
        base_image=parse_image_uri(BASE),
        region=REGION,
        service_role_arn=ROLE,
        source_bucket=BUCKET,
        dockerfile="Dockerfile.gpu",
        image_tag="gpu-1",
        progress=False,
        poll_s=0,
    )
    assert pinned.uri == f"{uri}@{digest}"
    overrides = {v["name"]: v["value"] for v in sent[0]["environmentVariablesOverride"]}
    assert overrides == {
        "BASE_IMAGE": BASE,
        "REPOSITORY_URI": uri,
        "IMAGE_TAG": "gpu-1",
        "DOCKERFILE": "Dockerfile.gpu",
        "LLAMA_CPP_PYTHON": DLC_PINS["cuda"].bindings,
        "DROP_BINDINGS": "llama_adapter_lora_init_from_file_ptr",
    }


@pytest.mark.parametrize(
    "base, kwargs, message",
    [
        (BASE.split("@")[0] + ":server-sagemaker-cpu-v1", {}, "Pin it by digest"),
        (BASE.replace(REGION, "eu-west-1").replace("763104351884", "123456789012"), {}, "use the DLC of us-east-1"),
        (BASE, {"image_tag": "no spaces allowed"}, "image tag"),
        (BASE, {"dockerfile": "Dockerfile.arm64"}, "Dockerfile.gpu"),
        (BASE, {"dockerfile": "Dockerfile.arm64", "image_tag": "cpu-1"}, "Dockerfile.gpu"),
        (BASE, {"service_role_arn": "codebuild-role"}, "not an IAM role ARN"),
    ],
    ids=["tagged-base", "base-in-other-region", "bad-tag", "bad-dockerfile", "bad-dockerfile-with-tag", "bad-role"],
)
def test_build_decision_image_refuses_bad_inputs_before_any_call(clients, base, kwargs, message):
    sent = capture(clients["codebuild"], "StartBuild")
    kwargs = {"service_role_arn": ROLE, **kwargs}
    with pytest.raises(ValueError, match=message):
        builds.build_decision_image(
            clients["codebuild"],
            clients["ecr"],
            clients["s3"],
            clients["logs"],
            base_image=parse_image_uri(base),
            region=REGION,
            source_bucket=BUCKET,
            progress=False,
            **kwargs,
        )
    assert sent == []
    assert clients["ecr"].describe_repositories()["repositories"] == []
    assert clients["s3"].list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


# ---------------------------------------------------------------- CodeBuild (Stubber)


def build_record(status: str, phase: str, **extra) -> dict:
    return {"id": "decision-workshop-image-build:1234", "buildStatus": status, "currentPhase": phase, **extra}


def test_ensure_project_updates_an_existing_project_stubber():
    codebuild = boto3.client("codebuild", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    request = build_projects.project_request(
        "decision-workshop-image-build",
        buildspec=build_projects.IMAGE_BUILD_BUILDSPEC,
        source_location=f"{BUCKET}/new.zip",
        service_role_arn=ROLE,
        privileged=True,
    )
    with Stubber(codebuild) as stub:
        stub.add_client_error("create_project", "ResourceAlreadyExistsException", expected_params=request)
        stub.add_response(
            "update_project", {"project": {"arn": "arn:aws:codebuild:us-east-1:1:project/p"}}, expected_params=request
        )
        assert builds.ensure_project(codebuild, request) == "arn:aws:codebuild:us-east-1:1:project/p"
        stub.assert_no_pending_responses()


def test_ensure_project_explains_a_role_problem_stubber():
    codebuild = boto3.client("codebuild", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    request = build_projects.project_request("p1", buildspec="b.yml", source_location="b/k.zip", service_role_arn=ROLE)
    with Stubber(codebuild) as stub:
        stub.add_client_error(
            "create_project", "InvalidInputException", "CodeBuild is not authorized to perform: sts:AssumeRole"
        )
        with pytest.raises(InvalidInput, match="trusts codebuild.amazonaws.com"):
            builds.ensure_project(codebuild, request)


def test_wait_for_build_failure_shows_the_log_tail_stubber(clients):
    logs = clients["logs"]
    logs.create_log_group(logGroupName="/aws/codebuild/decision-workshop-image-build")
    logs.create_log_stream(logGroupName="/aws/codebuild/decision-workshop-image-build", logStreamName="build/1234")
    now = int(datetime.datetime.now().timestamp() * 1000)
    lines = [f"line {i}" for i in range(60)] + ["ERROR: fake-1b.gguf has sha256 00..., but the pin is 13c1..."]
    logs.put_log_events(
        logGroupName="/aws/codebuild/decision-workshop-image-build",
        logStreamName="build/1234",
        logEvents=[{"timestamp": now + i, "message": m + "\n"} for i, m in enumerate(lines)],
    )
    codebuild = boto3.client("codebuild", region_name=REGION)
    failed = build_record(
        "FAILED",
        "COMPLETED",
        phases=[
            {"phaseType": "PRE_BUILD", "phaseStatus": "SUCCEEDED"},
            {
                "phaseType": "BUILD",
                "phaseStatus": "FAILED",
                "contexts": [
                    {
                        "statusCode": "COMMAND_EXECUTION_ERROR",
                        "message": "Error while executing command: bash buildspec/scripts/package_model.sh. Reason: exit status 1",
                    }
                ],
            },
        ],
        logs={
            "groupName": "/aws/codebuild/decision-workshop-image-build",
            "streamName": "build/1234",
            "deepLink": "https://console.aws.amazon.com/cloudwatch/fake",
        },
    )
    naps = []
    with Stubber(codebuild) as stub:
        for record in (build_record("IN_PROGRESS", "PROVISIONING"), build_record("IN_PROGRESS", "BUILD"), failed):
            stub.add_response("batch_get_builds", {"builds": [record]}, {"ids": ["decision-workshop-image-build:1234"]})
        with pytest.raises(AwsFailure) as caught:
            builds.wait_for_build(
                codebuild,
                "decision-workshop-image-build:1234",
                logs,
                progress=True,
                poll_s=7,
                tail_lines=20,
                sleep=naps.append,
            )
    error = caught.value
    assert naps == [7, 7]
    message = str(error)
    assert "CodeBuild build decision-workshop-image-build:1234 ended FAILED in phase BUILD" in message
    tail = message.split("--- last 20 log lines ---\n")[1].split("\n--- full log:")[0].splitlines()
    assert len(tail) == 20 and tail[-1].startswith("ERROR: fake-1b.gguf has sha256")
    assert "ended FAILED in phase BUILD" in message and "exit status 1" in message
    assert "line 59" in message and "line 40" not in message
    assert "https://console.aws.amazon.com/cloudwatch/fake" in message


def test_wait_for_build_without_a_log_stream_stubber(clients):
    codebuild = boto3.client("codebuild", region_name=REGION)
    record = build_record("FAULT", "PROVISIONING", logs={"groupName": "/aws/codebuild/x", "streamName": "gone"})
    with Stubber(codebuild) as stub:
        stub.add_response("batch_get_builds", {"builds": [record]}, {"ids": [ANY]})
        with pytest.raises(AwsFailure, match="could not read log /aws/codebuild/x/gone"):
            builds.wait_for_build(codebuild, record["id"], clients["logs"], progress=False)


def test_wait_for_build_gives_up_waiting_stubber(clients, monkeypatch):
    codebuild = boto3.client("codebuild", region_name=REGION)
    ticks = iter(range(0, 1000, 100))
    monkeypatch.setattr(builds.time, "monotonic", lambda: next(ticks))
    with Stubber(codebuild) as stub:
        for _ in range(3):
            stub.add_response("batch_get_builds", {"builds": [build_record("IN_PROGRESS", "BUILD")]}, {"ids": [ANY]})
        with pytest.raises(AwsFailure, match="still in BUILD"):
            builds.wait_for_build(
                codebuild,
                "decision-workshop-image-build:1234",
                clients["logs"],
                progress=False,
                timeout_s=150,
                sleep=lambda s: None,
            )


def test_build_decision_image_digest_mismatch_stubber(clients):
    ecr = clients["ecr"]
    builds.ensure_ecr_repository(ecr, build_projects.ecr_repository_request())
    push_image(ecr, build_projects.ECR_REPOSITORY, "cpu-7")
    codebuild = boto3.client("codebuild", region_name=REGION)
    exported = [{"name": "IMAGE_DIGEST", "value": "sha256:" + "99" * 32}]
    with Stubber(codebuild) as stub:
        stub.add_client_error("create_project", "ResourceAlreadyExistsException")
        stub.add_response("update_project", {"project": {"arn": "arn:p"}})
        stub.add_response("start_build", {"build": {"id": "decision-workshop-image-build:1"}})
        stub.add_response(
            "batch_get_builds",
            {"builds": [build_record("SUCCEEDED", "COMPLETED", exportedEnvironmentVariables=exported)]},
        )
        with pytest.raises(AwsFailure, match="sha256:" + "99" * 32):
            builds.build_decision_image(
                codebuild,
                ecr,
                clients["s3"],
                clients["logs"],
                base_image=parse_image_uri(BASE),
                region=REGION,
                service_role_arn=ROLE,
                source_bucket=BUCKET,
                image_tag="cpu-7",
                progress=False,
                poll_s=0,
            )


def test_a_new_accounts_build_limit_is_one_line_naming_the_cause_and_the_fix_stubber(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    codebuild = boto3.client("codebuild", region_name=REGION)
    request = build_projects.start_build_request(build_projects.IMAGE_BUILD_PROJECT, {"X": "1"})
    with Stubber(codebuild) as stubber:
        stubber.add_client_error(
            "start_build",
            "AccountLimitExceededException",
            "Cannot have more than 0 builds in queue for the account",
            expected_params=request,
        )
        with pytest.raises(AwsFailure) as raised:
            builds.start_build(codebuild, request)
    text = str(raised.value)
    assert "\n" not in text and "Cannot have more than 0 builds in queue" in text
    assert "new AWS accounts" in text and "Service Quotas" in text and "retry later" in text
    with Stubber(codebuild) as stubber:  # any other refusal is not rewritten
        stubber.add_client_error("start_build", "AccessDeniedException", "no", expected_params=request)
        with pytest.raises(ClientError):
            builds.start_build(codebuild, request)
