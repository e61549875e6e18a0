"""workshop_lib.aws.codebuild: the pure builders (every request passes botocore's own validation)."""

from __future__ import annotations

import datetime
import io
import zipfile

import pytest

from tests.support.buildspec import REPO_ROOT
from workshop_lib.aws import build_projects, calls
from workshop_lib.aws.images import DLC_PINS, MutableImageReference, parse_image_uri
from workshop_lib.errors import AwsFailure, InvalidInput
from workshop_lib.models import EMBEDDED_MODEL, PINNED_MODEL, ModelFile, ModelSpec, TokenizerSource

ROLE = "arn:aws:iam::123456789012:role/decision-workshop-codebuild"
BASE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@sha256:" + "12" * 32
REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/semif-llamacpp-dlc"


def image_project(**kw):
    return build_projects.project_request(
        "decision-workshop-image-build",
        buildspec=build_projects.IMAGE_BUILD_BUILDSPEC,
        source_location="bucket/codebuild-source/source-x.zip",
        service_role_arn=ROLE,
        privileged=True,
        **kw,
    )


def test_project_request_shape():
    request = image_project()
    assert request["source"] == {
        "type": "S3",
        "location": "bucket/codebuild-source/source-x.zip",
        "buildspec": "buildspec/image-build.yml",
    }
    env = request["environment"]
    assert env["image"] == "aws/codebuild/amazonlinux-x86_64-standard:5.0"
    assert env["privilegedMode"] is True and env["type"] == "LINUX_CONTAINER"
    assert request["serviceRole"] == ROLE
    assert request["logsConfig"]["cloudWatchLogs"] == {
        "status": "ENABLED",
        "groupName": "/aws/codebuild/decision-workshop-image-build",
        "streamName": "build",
    }
    assert {"key": "workshop", "value": "decision-workshop"} in request["tags"]
    assert request["artifacts"] == {"type": "NO_ARTIFACTS"}


def test_model_project_is_not_privileged():
    request = build_projects.project_request(
        "decision-workshop-model-package",
        buildspec=build_projects.MODEL_PACKAGE_BUILDSPEC,
        source_location="b/k.zip",
        service_role_arn=ROLE,
        tags={"team": "ml"},
    )
    assert request["environment"]["privilegedMode"] is False
    assert request["tags"] == [{"key": "team", "value": "ml"}]


def test_update_request_validates_as_update_project():
    update = build_projects.update_project_request(image_project())
    assert calls.validate("codebuild", "UpdateProject", update) is update


def test_builder_output_is_checked_by_botocore():
    request = image_project()
    request["environment"]["privilegedMod"] = True  # what a typo would look like
    with pytest.raises(InvalidInput, match="privilegedMod"):
        build_projects.update_project_request(request)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "-bad name"}, "project name"),
        ({"service_role_arn": "decision-workshop-codebuild"}, "not an IAM role ARN"),
        ({"timeout_minutes": 3000}, "5-2160"),
    ],
)
def test_project_request_refuses(kwargs, message):
    args = {"name": "ok-name", "buildspec": "b.yml", "source_location": "b/k.zip", "service_role_arn": ROLE}
    args.update(kwargs)
    name = args.pop("name")
    with pytest.raises(InvalidInput, match=message):
        build_projects.project_request(name, **args)


def test_start_build_request_overrides_environment():
    request = build_projects.start_build_request(
        "decision-workshop-image-build", {"IMAGE_TAG": "cpu-1", "BASE_IMAGE": BASE}, source_location="b/k.zip"
    )
    assert request["environmentVariablesOverride"] == [
        {"name": "IMAGE_TAG", "value": "cpu-1", "type": "PLAINTEXT"},
        {"name": "BASE_IMAGE", "value": BASE, "type": "PLAINTEXT"},
    ]
    assert request["sourceLocationOverride"] == "b/k.zip"


def test_ecr_repository_request_is_immutable_and_scanned():
    request = build_projects.ecr_repository_request("semif-llamacpp-dlc")
    assert request["imageTagMutability"] == "IMMUTABLE"
    assert request["imageScanningConfiguration"] == {"scanOnPush": True}
    assert {"Key": "created-by", "Value": "workshop_lib"} in request["tags"]
    with pytest.raises(InvalidInput, match="repository name"):
        build_projects.ecr_repository_request("Semif_LlamaCpp")


# ---------------------------------------------------------------- model packaging inputs


def test_model_package_env_for_the_pinned_model():
    env = build_projects.model_package_env(PINNED_MODEL, "s3://bucket/semif-llamacpp/model.tar.gz")
    assert env["GGUF_SHA256"] == PINNED_MODEL.gguf.sha256
    assert env["GGUF_SIZE"] == "3013027808"
    # the tokenizer by pattern at its pinned revision, as the published sample takes it
    assert (env["TOKENIZER_REPO"], env["TOKENIZER_REVISION"]) == (
        "Qwen/Qwen3.5-4B",
        "851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a",
    )
    assert env["TOKENIZER_PATTERNS"] == "*.json *.jinja *.model *.txt"
    assert env["MODEL_S3_URI"] == "s3://bucket/semif-llamacpp/"
    calls.validate("codebuild", "StartBuild", build_projects.start_build_request("p1", env))


def test_model_package_env_refuses_unpinned_or_unsupported_specs():
    unpinned = ModelSpec(name="x", gguf=ModelFile(path="x.gguf", repo="r/x", revision="1", role="gguf"))
    with pytest.raises(InvalidInput, match="no pinned size and sha256"):
        build_projects.model_package_env(unpinned, "s3://bucket/p/")
    with pytest.raises(InvalidInput, match="package_local"):
        build_projects.model_package_env(EMBEDDED_MODEL, "s3://bucket/p/")
    named = ModelSpec(
        name="x",
        gguf=PINNED_MODEL.gguf,
        extra_files=(ModelFile(path="a.json", repo="r/one", revision="1", role="tokenizer"),),
    )
    with pytest.raises(InvalidInput, match="by pattern"):
        build_projects.model_package_env(named, "s3://bucket/p/")
    odd = ModelSpec(name="x", gguf=PINNED_MODEL.gguf, tokenizer=TokenizerSource("r/x", "1", ("../*.json",)))
    with pytest.raises(InvalidInput, match="globs of plain names"):
        build_projects.model_package_env(odd, "s3://bucket/p/")
    in_folder = ModelSpec(
        name="x", gguf=ModelFile(path="q4/x.gguf", repo="r/x", revision="1", role="gguf", size=1, sha256="0" * 64)
    )
    with pytest.raises(InvalidInput, match="plain names"):
        build_projects.model_package_env(in_folder, "s3://bucket/p/")


@pytest.mark.parametrize(
    "uri, prefix",
    [
        ("s3://bucket/models/qwen/", "s3://bucket/models/qwen"),
        ("s3://bucket/models/qwen", "s3://bucket/models/qwen"),
        ("s3://bucket/models/qwen/model.tar.gz", "s3://bucket/models/qwen"),
        ("s3://bucket/model.tar.gz", "s3://bucket"),
        ("s3://bucket", "s3://bucket"),
    ],
)
def test_model_s3_prefix(uri, prefix):
    assert build_projects.model_s3_prefix(uri) == prefix


@pytest.mark.parametrize(
    "uri", ["bucket/key", "s3://", "https://bucket.s3.amazonaws.com/k", "s3://bucket/other.tar.gz"]
)
def test_model_s3_prefix_refuses(uri):
    with pytest.raises(InvalidInput):
        build_projects.model_s3_prefix(uri)


# ---------------------------------------------------------------- image build inputs


def _build_env(base: str, repository: str, *args):
    return build_projects.image_build_env(parse_image_uri(base), parse_image_uri(repository), *args)


def test_image_build_env():
    env = _build_env(BASE, REPOSITORY, "gpu-20250101-120000", "container/Dockerfile.gpu")
    assert env == {
        "BASE_IMAGE": BASE,
        "REPOSITORY_URI": REPOSITORY,
        "IMAGE_TAG": "gpu-20250101-120000",
        "DOCKERFILE": "Dockerfile.gpu",
        # the CUDA DLC's matching bindings travel with the build, minus what its libllama lacks
        "LLAMA_CPP_PYTHON": DLC_PINS["cuda"].bindings,
        "DROP_BINDINGS": "llama_adapter_lora_init_from_file_ptr",
    }
    cpu = _build_env(BASE, REPOSITORY, "cpu-1", "Dockerfile")
    assert (cpu["LLAMA_CPP_PYTHON"], cpu["DROP_BINDINGS"]) == ("llama-cpp-python==0.3.35", "")


def test_image_build_env_wants_the_dlc_registry_of_the_region():
    base = "626614931356.dkr.ecr.af-south-1.amazonaws.com/llama-cpp@sha256:" + "34" * 32
    repo = "123456789012.dkr.ecr.af-south-1.amazonaws.com/semif-llamacpp-dlc"
    assert _build_env(base, repo, "cpu-1")["BASE_IMAGE"] == base
    with pytest.raises(InvalidInput, match="not in af-south-1's DLC registry"):
        _build_env(base.replace("626614931356", "763104351884"), repo, "cpu-1")


def test_image_build_env_refuses():
    with pytest.raises(MutableImageReference, match="Pin it by digest"):
        _build_env(BASE.split("@")[0] + ":server-sagemaker-cpu-v1", REPOSITORY, "cpu-1")
    with pytest.raises(InvalidInput, match="us-east-1 but the build and its repository are in eu-west-1"):
        _build_env(BASE, REPOSITORY.replace("us-east-1", "eu-west-1"), "cpu-1")
    with pytest.raises(InvalidInput, match="private regional ECR"):
        _build_env("public.ecr.aws/deep-learning-containers/llama-cpp@sha256:" + "12" * 32, REPOSITORY, "cpu-1")
    with pytest.raises(InvalidInput, match="not an ECR repository"):
        _build_env(BASE, REPOSITORY + ":latest", "cpu-1")
    with pytest.raises(InvalidInput, match="image tag"):
        _build_env(BASE, REPOSITORY, "-bad tag")
    with pytest.raises(InvalidInput, match="Dockerfile.gpu"):
        _build_env(BASE, REPOSITORY, "cpu-1", "Dockerfile.arm")


def test_default_image_tag():
    now = datetime.datetime(2025, 1, 2, 3, 4, 5)
    assert build_projects.default_image_tag("Dockerfile.gpu", now) == "gpu-20250102-030405"
    assert build_projects.default_image_tag("container/Dockerfile", now) == "cpu-20250102-030405"


def test_failure_summary():
    build = {
        "currentPhase": "COMPLETED",
        "buildStatus": "FAILED",
        "phases": [
            {"phaseType": "PRE_BUILD", "phaseStatus": "SUCCEEDED"},
            {
                "phaseType": "BUILD",
                "phaseStatus": "FAILED",
                "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR", "message": "exit status 1"}],
            },
        ],
    }
    assert build_projects.failure_summary(build) == ("BUILD", "exit status 1")


# ---------------------------------------------------------------- source zip


def zip_names(data: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.namelist()


def test_source_zip_holds_what_the_buildspecs_need():
    names = zip_names(build_projects.source_zip(REPO_ROOT))
    assert set(build_projects.REQUIRED_SOURCE_FILES) <= set(names)
    assert "container/.dockerignore" in names
    assert all(n.startswith(("buildspec/", "container/")) for n in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".egg-info" in n]


def test_source_zip_is_reproducible_and_content_addressed(tmp_path):
    first, second = build_projects.source_zip(REPO_ROOT), build_projects.source_zip(REPO_ROOT)
    assert first == second
    assert build_projects.source_key(first) == build_projects.source_key(second)
    assert build_projects.source_key(first, "work/src/").startswith("work/src/source-")


def test_source_zip_keeps_the_script_executable_bit():
    with zipfile.ZipFile(io.BytesIO(build_projects.source_zip(REPO_ROOT))) as archive:
        assert archive.getinfo("buildspec/scripts/package_model.sh").external_attr >> 16 == 0o755
        assert archive.getinfo("container/Dockerfile").external_attr >> 16 == 0o644


def test_source_zip_outside_a_checkout(tmp_path):
    with pytest.raises(AwsFailure, match="pip install -e"):
        build_projects.source_zip(tmp_path)
