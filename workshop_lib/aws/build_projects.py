"""What a CodeBuild job of the workshop is, as pure builders: the two projects, their source zip, the
start-build requests and their environment, the decision image's repository, and the names and inputs
those requests take (pinned, checked). Each request is checked by botocore (``calls.validate``) plus the
rules botocore does not check. ``codebuild`` sends them.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from .. import name_rules
from ..config import check_ecr_repository_name
from ..errors import AwsFailure, InvalidInput
from ..models import ModelSpec
from ..packaging import MANIFEST_NAME
from . import calls
from .images import ImageRef, dlc_account, dlc_pin, require_pinned

CODEBUILD_IMAGE = "aws/codebuild/amazonlinux-x86_64-standard:5.0"
COMPUTE_TYPE = "BUILD_GENERAL1_MEDIUM"
MODEL_PACKAGE_BUILDSPEC = "buildspec/model-package.yml"
IMAGE_BUILD_BUILDSPEC = "buildspec/image-build.yml"
# "sagemaker*": the projects AmazonSageMakerFullAccess lets a Studio role start and read builds of.
MODEL_PACKAGE_PROJECT = "sagemaker-decision-workshop-model-package"
IMAGE_BUILD_PROJECT = "sagemaker-decision-workshop-image-build"
BUILD_PROJECTS = (MODEL_PACKAGE_PROJECT, IMAGE_BUILD_PROJECT)  # what the cleanup deletes, the policies name
ECR_REPOSITORY = "sagemaker-decision-workshop"
SOURCE_PREFIX = "codebuild-source"
TARBALL_NAME = "model.tar.gz"
DOCKERFILES = ("Dockerfile", "Dockerfile.gpu")

# What the two buildspecs need from the repository, and what never belongs in the zip.
SOURCE_PATHS = ("buildspec", "container")
REQUIRED_SOURCE_FILES = (
    MODEL_PACKAGE_BUILDSPEC,
    IMAGE_BUILD_BUILDSPEC,
    "buildspec/scripts/package_model.sh",
    "container/Dockerfile",
    "container/Dockerfile.gpu",
    "container/pyproject.toml",
    "container/decision_adapter/__init__.py",
)
_EXCLUDED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", "model-package"}
_EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info")

# CodeBuild's phases in order; the progress bar advances through them.
PHASES = (
    "SUBMITTED",
    "QUEUED",
    "PROVISIONING",
    "DOWNLOAD_SOURCE",
    "INSTALL",
    "PRE_BUILD",
    "BUILD",
    "POST_BUILD",
    "UPLOAD_ARTIFACTS",
    "FINALIZING",
    "COMPLETED",
)
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HUB_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_PATTERN = re.compile(r"[A-Za-z0-9_.*?-]+")


def check_project_name(name: str) -> str:
    if not name_rules.is_codebuild_project(name):
        raise InvalidInput(
            f"CodeBuild project name {name!r} is not valid: 2-150 letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return name


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); the key may be empty."""
    parts = name_rules.split_s3_uri(uri)
    if parts is None:
        raise InvalidInput(f"{uri!r} is not an S3 URI like 's3://my-bucket/models/qwen/'")
    return parts


def model_s3_prefix(uri: str) -> str:
    """The folder that receives model.tar.gz and the manifest: ``s3://bucket/prefix`` (no trailing /).

    A URI ending in ``/model.tar.gz`` names the same folder; any other file name is refused,
    because the manifest is written next to the tarball under a fixed name.
    """
    bucket, key = parse_s3_uri(uri)
    key = key.rstrip("/")
    if key.endswith(".tar.gz") or key.endswith(".json"):
        name = PurePosixPath(key).name
        if name != TARBALL_NAME:
            raise InvalidInput(
                f"{uri!r} names the file {name!r}; give the folder instead (e.g. "
                f"s3://{bucket}/{PurePosixPath(key).parent}/), model.tar.gz and {MANIFEST_NAME} go in it"
            )
        parent = str(PurePosixPath(key).parent)
        key = "" if parent == "." else parent
    return f"s3://{bucket}/{key}".rstrip("/")


def _tag_list(tags: Mapping[str, str] | None, key: str = "key", value: str = "value") -> list[dict[str, Any]]:
    return name_rules.tag_list(dict(name_rules.WORKSHOP_TAGS if tags is None else tags), key, value)


def source_zip(repo_root: str | Path, paths: tuple[str, ...] = SOURCE_PATHS) -> bytes:
    """The build source: ``paths`` of the repository as zip bytes, byte-identical for identical files."""
    root = Path(repo_root)
    missing = [f for f in REQUIRED_SOURCE_FILES if not (root / f).is_file()]
    if missing:
        raise AwsFailure(
            f"{root} lacks {', '.join(missing)}; the CodeBuild jobs need a checkout of the workshop "
            "repository (install it with `pip install -e .` and call from there, or pass repo_root)"
        )
    files = sorted(
        p
        for base in paths
        for p in (root / base).rglob("*")
        if p.is_file()
        and not _EXCLUDED_PARTS.intersection(p.relative_to(root).parts)
        and not any(part.endswith(_EXCLUDED_SUFFIXES) for part in p.relative_to(root).parts)
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if path.stat().st_mode & 0o111 else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def source_key(zip_bytes: bytes, prefix: str = SOURCE_PREFIX) -> str:
    return f"{prefix.strip('/')}/source-{hashlib.sha256(zip_bytes).hexdigest()[:16]}.zip"


def source_upload_request(bucket: str, repo_root: str | Path, prefix: str = SOURCE_PREFIX) -> dict[str, Any]:
    """PutObject for the source zip; CodeBuild's location for it is ``Bucket/Key``."""
    body = source_zip(repo_root)
    return calls.validate("s3", "PutObject", {"Bucket": bucket, "Key": source_key(body, prefix), "Body": body})


def project_request(
    name: str,
    *,
    buildspec: str,
    source_location: str,
    service_role_arn: str,
    privileged: bool = False,
    compute_type: str = COMPUTE_TYPE,
    timeout_minutes: int = 60,
    log_group: str | None = None,
    log_stream: str = "build",
    description: str = "",
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """CreateProject: S3 zip source, the AL2023 standard image, logs to CloudWatch, no artifacts."""
    check_project_name(name)
    if not name_rules.is_role_arn(service_role_arn):
        raise InvalidInput(
            f"CodeBuild service role {service_role_arn!r} is not an IAM role ARN "
            "(arn:aws:iam::<account>:role/<name>); pass the role CodeBuild should assume"
        )
    if not 5 <= timeout_minutes <= 2160:
        raise InvalidInput(f"timeout_minutes={timeout_minutes}: CodeBuild allows 5-2160 minutes")
    request = {
        "name": name,
        "description": description or f"decision workshop: {buildspec}",
        "source": {"type": "S3", "location": source_location, "buildspec": buildspec},
        "artifacts": {"type": "NO_ARTIFACTS"},
        "environment": {
            "type": "LINUX_CONTAINER",
            "image": CODEBUILD_IMAGE,
            "computeType": compute_type,
            "privilegedMode": privileged,  # docker build needs the Docker daemon
            "imagePullCredentialsType": "CODEBUILD",
        },
        "serviceRole": service_role_arn,
        "timeoutInMinutes": timeout_minutes,
        "logsConfig": {
            "cloudWatchLogs": {
                "status": "ENABLED",
                "groupName": log_group or f"/aws/codebuild/{name}",
                "streamName": log_stream,
            }
        },
        "tags": _tag_list(tags),
    }
    return calls.validate("codebuild", "CreateProject", request)


def update_project_request(create_request: dict[str, Any]) -> dict[str, Any]:
    """UpdateProject with everything CreateProject set (UpdateProject takes the same members)."""
    return calls.validate("codebuild", "UpdateProject", dict(create_request))


def start_build_request(
    project_name: str, env: Mapping[str, str], *, source_location: str | None = None
) -> dict[str, Any]:
    request = {
        "projectName": check_project_name(project_name),
        "environmentVariablesOverride": [{"name": k, "value": str(v), "type": "PLAINTEXT"} for k, v in env.items()],
    }
    if source_location:
        request["sourceLocationOverride"] = source_location
    return calls.validate("codebuild", "StartBuild", request)


def model_package_env(
    spec: ModelSpec,
    model_s3_uri: str,
    dlc_images: Mapping[str, str] | None = None,
    calibration_s3_uri: str | None = None,
) -> dict[str, str]:
    """The buildspec variables that make buildspec/model-package.yml package ``spec``.

    ``dlc_images`` (variant -> pinned DLC URI) is recorded in the manifest: the images the package
    is prepared for. ``calibration_s3_uri``: a calibration.json the build packages next to the GGUF.
    """
    gguf = spec.gguf
    if gguf.size is None or not gguf.sha256:
        raise InvalidInput(
            f"{spec.name}: the GGUF has no pinned size and sha256; CodeBuild packaging downloads from the hub "
            "and must verify both (pin them in workshop_lib/models.py)"
        )
    not_hub = sorted({f.repo for f in spec.files if not _HUB_REPO.fullmatch(f.repo)})
    if not_hub:
        raise InvalidInput(
            f"{spec.name}: {', '.join(not_hub)} is not a Hugging Face repo (owner/name), so CodeBuild cannot "
            "download it; package it locally with workshop_lib.packaging.package_local and upload_package"
        )
    names = [f.path for f in spec.files]
    bad = [n for n in names if not _FILE_NAME.fullmatch(n)]
    if bad:
        raise InvalidInput(f"{spec.name}: file names {bad} must be plain names (no folders or spaces)")
    if spec.extra_files:
        raise InvalidInput(
            f"{spec.name}: CodeBuild takes tokenizer files by pattern at a pinned revision (ModelSpec.tokenizer), "
            "not by name; package named files locally with packaging.package_local"
        )
    tokenizer = spec.tokenizer
    if tokenizer and not _HUB_REPO.fullmatch(tokenizer.repo):
        raise InvalidInput(f"{spec.name}: {tokenizer.repo} is not a Hugging Face repo (owner/name)")
    if tokenizer and not all(_PATTERN.fullmatch(p) for p in tokenizer.patterns):
        raise InvalidInput(
            f"{spec.name}: tokenizer patterns {tokenizer.patterns} must be shell globs of "
            "plain names (letters, digits, . _ - * ?)"
        )
    return {
        "GGUF_REPO": gguf.repo,
        "GGUF_REVISION": gguf.revision,
        "GGUF_FILE": gguf.path,
        "GGUF_SIZE": str(gguf.size),
        "GGUF_SHA256": gguf.sha256.lower(),
        "TOKENIZER_REPO": tokenizer.repo if tokenizer else "",
        "TOKENIZER_REVISION": tokenizer.revision if tokenizer else "",
        "TOKENIZER_PATTERNS": " ".join(tokenizer.patterns) if tokenizer else "",
        "MODEL_NAME": spec.name,
        "MODEL_QUANTIZATION": spec.quantization,
        "MODEL_LICENSE": spec.license,
        "MODEL_S3_URI": model_s3_prefix(model_s3_uri) + "/",
        "LLAMA_CPP_DLC": json.dumps(dict(dlc_images or {}), sort_keys=True),
        **({"CALIBRATION_S3_URI": calibration_s3_uri} if calibration_s3_uri else {}),
    }


def dockerfile_name(dockerfile: str) -> str:
    name = dockerfile.removeprefix("container/")
    if name not in DOCKERFILES:
        raise InvalidInput(f"dockerfile {dockerfile!r} is not one of {', '.join(DOCKERFILES)} (in container/)")
    return name


def default_image_tag(dockerfile: str = "Dockerfile", now: datetime.datetime | None = None) -> str:
    """A new tag per build, e.g. ``gpu-20250101-120000`` (the repository refuses to reuse tags)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    kind = "gpu" if dockerfile_name(dockerfile).endswith(".gpu") else "cpu"
    return f"{kind}-{now:%Y%m%d-%H%M%S}"


def check_base_image(base: ImageRef, region: str) -> ImageRef:
    """The base must be a digest-pinned image in a private ECR registry (the DLC) of ``region``."""
    require_pinned(base)
    if not base.is_private_ecr:
        raise InvalidInput(
            f"base image {base.uri!r} is not in a private regional ECR registry; use the DLC of the build's "
            f"region (workshop_lib.aws.images.dlc_image_uri({region!r}), then resolve_digest)"
        )
    if base.region != region:
        raise InvalidInput(
            f"base image is in {base.region} but the build and its repository are in {region}; use the DLC "
            f"of {region} so one ECR login covers both"
        )
    return base


def check_image_tag(image_tag: str) -> str:
    if not name_rules.is_image_tag(image_tag):
        raise InvalidInput(f"image tag {image_tag!r} is not valid (letters, digits, _ . -; up to 128)")
    return image_tag


def image_build_env(
    base: ImageRef, repository: ImageRef, image_tag: str, dockerfile: str = "Dockerfile"
) -> dict[str, str]:
    """The buildspec variables for buildspec/image-build.yml; the base must be a pinned regional DLC."""
    if not repository.is_private_ecr or repository.region is None or repository.tag or repository.digest:
        raise InvalidInput(
            f"repository URI {repository.uri!r} is not an ECR repository "
            "(<account>.dkr.ecr.<region>.amazonaws.com/<name>, without tag or digest)"
        )
    check_base_image(base, repository.region)
    if base.account != dlc_account(repository.region):
        raise InvalidInput(
            f"base image {base.uri!r} is not in {repository.region}'s DLC registry "
            f"({dlc_account(repository.region)}); the build logs in to that registry only (use images.resolve_dlc)"
        )
    dockerfile = dockerfile_name(dockerfile)
    pin = dlc_pin("cuda" if dockerfile.endswith(".gpu") else "cpu", repository.region)
    return {
        "BASE_IMAGE": base.uri,
        "REPOSITORY_URI": repository.uri,
        "IMAGE_TAG": check_image_tag(image_tag),
        "DOCKERFILE": dockerfile,
        "LLAMA_CPP_PYTHON": pin.bindings,
        "DROP_BINDINGS": " ".join(pin.drop_bindings),
    }


def ecr_repository_request(name: str = ECR_REPOSITORY, tags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """CreateRepository with immutable tags (a pushed tag never moves) and scan on push."""
    request = {
        "repositoryName": check_ecr_repository_name(name),
        "imageTagMutability": "IMMUTABLE",
        "imageScanningConfiguration": {"scanOnPush": True},
        "tags": _tag_list(tags, "Key", "Value"),
    }
    return calls.validate("ecr", "CreateRepository", request)


def failure_summary(build: dict[str, Any]) -> tuple[str | None, str]:
    """(failed phase, CodeBuild's reason) from a BatchGetBuilds build."""
    for phase in build.get("phases", []):
        if phase.get("phaseStatus") not in (None, "SUCCEEDED"):
            reasons = "; ".join(c.get("message", "") for c in phase.get("contexts", []) if c.get("message"))
            return phase.get("phaseType"), reasons or phase.get("phaseStatus", "")
    return build.get("currentPhase"), build.get("buildStatus", "")
