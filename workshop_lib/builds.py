"""CodeBuild and ECR: package the pinned model and build the decision image in the cloud.

SageMaker Studio has no Docker, and a 3 GB download is best done next to S3, so
both jobs run in CodeBuild from the buildspecs in ``buildspec/``. A project's
source is a zip of ``buildspec/`` and ``container/`` that this module builds from
the repository and uploads to S3 under a content-addressed key: the image build
needs ``container/`` as its Docker build context, which an inline buildspec
(``NO_SOURCE``) could not provide.

Pure builders return request dicts checked by botocore (``aws.validate``) plus
the rules botocore does not check (name patterns, pinned inputs). The senders
below them take boto3 clients and do one thing each; ``package_model_in_codebuild``
and ``build_decision_image`` chain them into the two flows the notebooks run.

The flows run the same way against AWS and against the local emulator. The one thing the
emulator cannot do, run a build, is a parameter (``runner``): ``CodeBuildRunner`` waits for
CodeBuild; the local rehearsal passes ``rehearsal.EmulatedCodeBuild``, which does the build's
effect itself (the packaged model in S3, a stand-in image in ECR), so every other request of a
flow reaches the emulator and an edit here is rehearsed.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import re
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping

from botocore.exceptions import ClientError

from . import aws, names
from .images import (DLC_PINS, ImageRef, InvalidImageUri, dlc_account, dlc_pin, parse_image_uri, pinned_dlc_uri,
                     require_pinned)
from .errors import WorkshopError
from .models import PINNED_MODEL, ModelSpec
from .packaging import (MANIFEST_NAME, SAMPLE_SHAPE, WORKSHOP_SHAPE, LocalPackage, ManifestInvalid,
                        parse_manifest)

CODEBUILD_IMAGE = "aws/codebuild/amazonlinux-x86_64-standard:5.0"
COMPUTE_TYPE = "BUILD_GENERAL1_MEDIUM"
MODEL_PACKAGE_BUILDSPEC = "buildspec/model-package.yml"
IMAGE_BUILD_BUILDSPEC = "buildspec/image-build.yml"
# "sagemaker*": the projects AmazonSageMakerFullAccess lets a Studio role start and read builds of.
MODEL_PACKAGE_PROJECT = "sagemaker-decision-workshop-model-package"
IMAGE_BUILD_PROJECT = "sagemaker-decision-workshop-image-build"
ECR_REPOSITORY = "sagemaker-decision-workshop"
SOURCE_PREFIX = "codebuild-source"
TARBALL_NAME = "model.tar.gz"
DOCKERFILES = ("Dockerfile", "Dockerfile.gpu")

# What the two buildspecs need from the repository, and what never belongs in the zip.
SOURCE_PATHS = ("buildspec", "container")
REQUIRED_SOURCE_FILES = (
    MODEL_PACKAGE_BUILDSPEC, IMAGE_BUILD_BUILDSPEC, "buildspec/scripts/package_model.sh",
    "container/Dockerfile", "container/Dockerfile.gpu", "container/pyproject.toml",
    "container/decision_adapter/__init__.py",
)
_EXCLUDED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", "model-package"}
_EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info")

# CodeBuild's phases in order; the progress bar advances through them.
PHASES = ("SUBMITTED", "QUEUED", "PROVISIONING", "DOWNLOAD_SOURCE", "INSTALL", "PRE_BUILD", "BUILD",
          "POST_BUILD", "UPLOAD_ARTIFACTS", "FINALIZING", "COMPLETED")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HUB_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_PATTERN = re.compile(r"[A-Za-z0-9_.*?-]+")


class BuildError(WorkshopError, RuntimeError):
    """A CodeBuild or ECR step did not end as the workshop needs."""


class BuildSpecError(WorkshopError, ValueError):
    """Inputs for a build that CodeBuild, ECR or the buildspec would reject."""


class SourceMissing(BuildError):
    pass


class BuildFailed(BuildError):
    def __init__(self, message: str, *, build_id: str, status: str, phase: str | None, log_tail: list[str]):
        super().__init__(message)
        self.build_id, self.status, self.phase, self.log_tail = build_id, status, phase, log_tail


class BuildStillRunning(BuildError):
    pass


class MutableRepository(BuildError):
    pass


class ImageNotPushed(BuildError):
    pass


class DigestMismatch(BuildError):
    pass


class ManifestMismatch(BuildError):
    pass


# ---------------------------------------------------------------- pure builders

def check_project_name(name: str) -> str:
    if not names.is_codebuild_project(name):
        raise BuildSpecError(
            f"CodeBuild project name {name!r} is not valid: 2-150 letters, digits, '-' or '_', "
            "starting with a letter or digit")
    return name


def check_repository_name(name: str) -> str:
    if not names.is_ecr_repository(name):
        raise BuildSpecError(
            f"ECR repository name {name!r} is not valid: lowercase letters, digits and . _ - / "
            f"(e.g. {ECR_REPOSITORY!r})")
    return name


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); the key may be empty."""
    parts = names.split_s3_uri(uri)
    if parts is None:
        raise BuildSpecError(f"{uri!r} is not an S3 URI like 's3://my-bucket/models/qwen/'")
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
            raise BuildSpecError(
                f"{uri!r} names the file {name!r}; give the folder instead (e.g. "
                f"s3://{bucket}/{PurePosixPath(key).parent}/), model.tar.gz and {MANIFEST_NAME} go in it")
        parent = str(PurePosixPath(key).parent)
        key = "" if parent == "." else parent
    return f"s3://{bucket}/{key}".rstrip("/")


def _tag_list(tags: Mapping[str, str] | None, key: str = "key", value: str = "value") -> list[dict]:
    return names.tag_list(dict(names.WORKSHOP_TAGS if tags is None else tags), key, value)


def source_zip(repo_root: str | Path, paths: tuple[str, ...] = SOURCE_PATHS) -> bytes:
    """The build source: ``paths`` of the repository as zip bytes, byte-identical for identical files."""
    root = Path(repo_root)
    missing = [f for f in REQUIRED_SOURCE_FILES if not (root / f).is_file()]
    if missing:
        raise SourceMissing(
            f"{root} lacks {', '.join(missing)}; the CodeBuild jobs need a checkout of the workshop "
            "repository (install it with `pip install -e .` and call from there, or pass repo_root)")
    files = sorted(
        p for base in paths for p in (root / base).rglob("*")
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


def source_upload_request(bucket: str, repo_root: str | Path, prefix: str = SOURCE_PREFIX) -> dict:
    """PutObject for the source zip; CodeBuild's location for it is ``Bucket/Key``."""
    body = source_zip(repo_root)
    return aws.validate("s3", "PutObject", {"Bucket": bucket, "Key": source_key(body, prefix), "Body": body})


def project_request(name: str, *, buildspec: str, source_location: str, service_role_arn: str,
                    privileged: bool = False, compute_type: str = COMPUTE_TYPE, timeout_minutes: int = 60,
                    log_group: str | None = None, log_stream: str = "build", description: str = "",
                    tags: Mapping[str, str] | None = None) -> dict:
    """CreateProject: S3 zip source, the AL2023 standard image, logs to CloudWatch, no artifacts."""
    check_project_name(name)
    if not names.is_role_arn(service_role_arn):
        raise BuildSpecError(
            f"CodeBuild service role {service_role_arn!r} is not an IAM role ARN "
            "(arn:aws:iam::<account>:role/<name>); pass the role CodeBuild should assume")
    if not 5 <= timeout_minutes <= 2160:
        raise BuildSpecError(f"timeout_minutes={timeout_minutes}: CodeBuild allows 5-2160 minutes")
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
        "logsConfig": {"cloudWatchLogs": {"status": "ENABLED", "groupName": log_group or f"/aws/codebuild/{name}",
                                          "streamName": log_stream}},
        "tags": _tag_list(tags),
    }
    return aws.validate("codebuild", "CreateProject", request)


def update_project_request(create_request: dict) -> dict:
    """UpdateProject with everything CreateProject set (UpdateProject takes the same members)."""
    return aws.validate("codebuild", "UpdateProject", dict(create_request))


def start_build_request(project_name: str, env: Mapping[str, str], *, source_location: str | None = None) -> dict:
    request = {
        "projectName": check_project_name(project_name),
        "environmentVariablesOverride": [{"name": k, "value": str(v), "type": "PLAINTEXT"} for k, v in env.items()],
    }
    if source_location:
        request["sourceLocationOverride"] = source_location
    return aws.validate("codebuild", "StartBuild", request)


def model_package_env(spec: ModelSpec, model_s3_uri: str,
                      dlc_images: Mapping[str, str] | None = None) -> dict[str, str]:
    """The buildspec variables that make buildspec/model-package.yml package ``spec``.

    ``dlc_images`` (variant -> pinned DLC URI) is recorded in the manifest: the images the package
    is prepared for.
    """
    gguf = spec.gguf
    if gguf.size is None or not gguf.sha256:
        raise BuildSpecError(
            f"{spec.name}: the GGUF has no pinned size and sha256; CodeBuild packaging downloads from the hub "
            "and must verify both (pin them in workshop_lib/models.py)")
    not_hub = sorted({f.repo for f in spec.files if not _HUB_REPO.fullmatch(f.repo)})
    if not_hub:
        raise BuildSpecError(
            f"{spec.name}: {', '.join(not_hub)} is not a Hugging Face repo (owner/name), so CodeBuild cannot "
            "download it; package it locally with workshop_lib.packaging.package_local and upload_package")
    names = [f.path for f in spec.files]
    bad = [n for n in names if not _FILE_NAME.fullmatch(n)]
    if bad:
        raise BuildSpecError(f"{spec.name}: file names {bad} must be plain names (no folders or spaces)")
    if spec.extra_files:
        raise BuildSpecError(
            f"{spec.name}: CodeBuild takes tokenizer files by pattern at a pinned revision (ModelSpec.tokenizer), "
            "not by name; package named files locally with packaging.package_local")
    tokenizer = spec.tokenizer
    if tokenizer and not _HUB_REPO.fullmatch(tokenizer.repo):
        raise BuildSpecError(f"{spec.name}: {tokenizer.repo} is not a Hugging Face repo (owner/name)")
    if tokenizer and not all(_PATTERN.fullmatch(p) for p in tokenizer.patterns):
        raise BuildSpecError(f"{spec.name}: tokenizer patterns {tokenizer.patterns} must be shell globs of "
                             "plain names (letters, digits, . _ - * ?)")
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
    }


def dockerfile_name(dockerfile: str) -> str:
    name = dockerfile.removeprefix("container/")
    if name not in DOCKERFILES:
        raise BuildSpecError(f"dockerfile {dockerfile!r} is not one of {', '.join(DOCKERFILES)} (in container/)")
    return name


def default_image_tag(dockerfile: str = "Dockerfile", now: datetime.datetime | None = None) -> str:
    """A new tag per build, e.g. ``gpu-20250101-120000`` (the repository refuses to reuse tags)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    kind = "gpu" if dockerfile_name(dockerfile).endswith(".gpu") else "cpu"
    return f"{kind}-{now:%Y%m%d-%H%M%S}"


def check_base_image(base_image: str, region: str | None = None) -> ImageRef:
    """The base must be a digest-pinned image in a private ECR registry (the DLC) of ``region``."""
    require_pinned(base_image)
    base = parse_image_uri(base_image)
    if not base.is_private_ecr:
        raise BuildSpecError(
            f"base image {base_image!r} is not in a private regional ECR registry; use the DLC of the build's "
            f"region (workshop_lib.images.dlc_image_uri({region or '<region>'!r}), then resolve_digest)")
    if region and base.region != region:
        raise BuildSpecError(
            f"base image is in {base.region} but the build and its repository are in {region}; use the DLC "
            f"of {region} so one ECR login covers both")
    return base


def check_image_tag(image_tag: str) -> str:
    if not names.is_image_tag(image_tag):
        raise BuildSpecError(f"image tag {image_tag!r} is not valid (letters, digits, _ . -; up to 128)")
    return image_tag


def image_build_env(base_image: str, repository_uri: str, image_tag: str,
                    dockerfile: str = "Dockerfile") -> dict[str, str]:
    """The buildspec variables for buildspec/image-build.yml; the base must be a pinned regional DLC."""
    try:
        target = parse_image_uri(repository_uri)
    except InvalidImageUri:
        target = None
    if target is None or not target.is_private_ecr or target.tag or target.digest:
        raise BuildSpecError(
            f"repository URI {repository_uri!r} is not an ECR repository "
            "(<account>.dkr.ecr.<region>.amazonaws.com/<name>, without tag or digest)")
    base = check_base_image(base_image, target.region)
    if base.account != dlc_account(target.region):
        raise BuildSpecError(
            f"base image {base_image!r} is not in {target.region}'s DLC registry ({dlc_account(target.region)}); "
            "the build logs in to that registry only (use images.resolve_dlc)")
    dockerfile = dockerfile_name(dockerfile)
    pin = dlc_pin("cuda" if dockerfile.endswith(".gpu") else "cpu", target.region)
    return {
        "BASE_IMAGE": base_image,
        "REPOSITORY_URI": repository_uri,
        "IMAGE_TAG": check_image_tag(image_tag),
        "DOCKERFILE": dockerfile,
        "LLAMA_CPP_PYTHON": pin.bindings,
        "DROP_BINDINGS": " ".join(pin.drop_bindings),
    }


def ecr_repository_request(name: str = ECR_REPOSITORY, tags: Mapping[str, str] | None = None) -> dict:
    """CreateRepository with immutable tags (a pushed tag never moves) and scan on push."""
    request = {
        "repositoryName": check_repository_name(name),
        "imageTagMutability": "IMMUTABLE",
        "imageScanningConfiguration": {"scanOnPush": True},
        "tags": _tag_list(tags, "Key", "Value"),
    }
    return aws.validate("ecr", "CreateRepository", request)


def failure_summary(build: dict) -> tuple[str | None, str]:
    """(failed phase, CodeBuild's reason) from a BatchGetBuilds build."""
    for phase in build.get("phases", []):
        if phase.get("phaseStatus") not in (None, "SUCCEEDED"):
            reasons = "; ".join(c.get("message", "") for c in phase.get("contexts", []) if c.get("message"))
            return phase.get("phaseType"), reasons or phase.get("phaseStatus", "")
    return build.get("currentPhase"), build.get("buildStatus", "")


# ---------------------------------------------------------------- senders

def _error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def upload_source(s3, bucket: str, repo_root: str | Path, prefix: str = SOURCE_PREFIX) -> str:
    """Upload the source zip; return its CodeBuild location, ``bucket/key``."""
    request = source_upload_request(bucket, repo_root, prefix)
    s3.put_object(**request)
    return f"{bucket}/{request['Key']}"


def ensure_project(codebuild, request: dict) -> str:
    """Create the project, or update it to ``request`` if it exists; return its ARN."""
    try:
        try:
            return codebuild.create_project(**request)["project"]["arn"]
        except ClientError as exc:
            if _error_code(exc) != "ResourceAlreadyExistsException":
                raise
        return codebuild.update_project(**update_project_request(request))["project"]["arn"]
    except ClientError as exc:
        if _error_code(exc) == "InvalidInputException":
            raise BuildSpecError(
                f"CodeBuild rejected project {request['name']!r}: {exc.response['Error'].get('Message')}. "
                f"Check that {request['serviceRole']} exists and trusts codebuild.amazonaws.com") from None
        raise


def start_build(codebuild, request: dict) -> str:
    return codebuild.start_build(**request)["build"]["id"]


def _get_build(codebuild, build_id: str) -> dict:
    response = codebuild.batch_get_builds(ids=[build_id])
    if not response.get("builds"):
        raise BuildError(f"CodeBuild does not know build {build_id!r}")
    return response["builds"][0]


def log_tail(logs_client, build: dict, lines: int = 40) -> list[str]:
    """The last ``lines`` lines of the build's CloudWatch log (or why there are none)."""
    logs = build.get("logs") or {}
    group, stream = logs.get("groupName"), logs.get("streamName")
    if not group or not stream:
        return ["(the build has no CloudWatch log stream yet)"]
    request = aws.validate("logs", "GetLogEvents", {"logGroupName": group, "logStreamName": stream,
                                                    "limit": lines, "startFromHead": False})
    try:
        events = logs_client.get_log_events(**request)["events"]
    except ClientError as exc:
        return [f"(could not read log {group}/{stream}: {_error_code(exc)})"]
    return [e["message"].rstrip("\n") for e in events]


def exported_variables(build: dict) -> dict[str, str]:
    return {v["name"]: v.get("value", "") for v in build.get("exportedEnvironmentVariables", [])}


def wait_for_build(codebuild, build_id: str, logs_client, progress: bool = True, *, poll_s: float = 10.0,
                   timeout_s: float | None = None, tail_lines: int = 40,
                   sleep: Callable[[float], None] = time.sleep) -> dict:
    """Poll until the build ends; return it if it succeeded, else raise BuildFailed with the log tail."""
    from tqdm.auto import tqdm

    started = time.monotonic()
    bar = tqdm(total=len(PHASES) - 1, desc=f"CodeBuild {build_id.split(':')[0]}", unit="phase",
               disable=not progress, bar_format="{desc}: {n}/{total} phases {postfix} [{elapsed}]")
    try:
        while True:
            build = _get_build(codebuild, build_id)
            phase = build.get("currentPhase", "SUBMITTED")
            if phase in PHASES and PHASES.index(phase) > bar.n:
                bar.update(PHASES.index(phase) - bar.n)
            bar.set_postfix_str(phase.lower())
            if build.get("buildStatus") != "IN_PROGRESS":
                break
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise BuildStillRunning(
                    f"build {build_id} is still in {phase} after {timeout_s:.0f} s; it keeps running. "
                    f"Wait again with wait_for_build(codebuild, {build_id!r}, logs) or follow "
                    f"{(build.get('logs') or {}).get('deepLink', 'the CodeBuild console')}")
            sleep(poll_s)
    finally:
        bar.close()
    status = build["buildStatus"]
    if status == "SUCCEEDED":
        return build
    phase, reason = failure_summary(build)
    tail = log_tail(logs_client, build, tail_lines)
    link = (build.get("logs") or {}).get("deepLink")
    raise BuildFailed(
        f"CodeBuild build {build_id} ended {status} in phase {phase}: {reason}\n"
        f"--- last {len(tail)} log lines ---\n" + "\n".join(tail)
        + (f"\n--- full log: {link}" if link else ""),
        build_id=build_id, status=status, phase=phase, log_tail=tail)


def ensure_ecr_repository(ecr, request: dict) -> str:
    """Create the repository (or find it, if its tags are immutable); return its URI."""
    name = request["repositoryName"]
    try:
        return ecr.create_repository(**request)["repository"]["repositoryUri"]
    except ClientError as exc:
        if _error_code(exc) != "RepositoryAlreadyExistsException":
            raise
    repository = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    if repository.get("imageTagMutability") != "IMMUTABLE":
        raise MutableRepository(
            f"ECR repository {name!r} exists with mutable tags, so a tag could later name another image. "
            f"Run `aws ecr put-image-tag-mutability --repository-name {name} --image-tag-mutability IMMUTABLE` "
            "or choose another repository name")
    return repository["repositoryUri"]


def image_digest(ecr, repository: str, tag: str) -> str:
    """Ask ECR which image ``tag`` names; return ``repository_uri@sha256:...``.

    ``repository`` is a repository name in the client's account or a repository URI.
    """
    if "/" in repository and ".dkr.ecr." in repository.split("/", 1)[0]:
        ref = parse_image_uri(repository)
        uri, name, registry = f"{ref.registry}/{ref.repository}", ref.repository, {"registryId": ref.account}
    else:
        name, registry = repository, {}
        uri = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]["repositoryUri"]
    try:
        details = ecr.describe_images(repositoryName=name, imageIds=[{"imageTag": tag}], **registry)["imageDetails"]
    except ClientError as exc:
        if _error_code(exc) in ("ImageNotFoundException", "RepositoryNotFoundException"):
            raise ImageNotPushed(
                f"ECR has no image {name}:{tag}; the build did not push it (check the build log)") from None
        raise
    return f"{uri}@{details[0]['imageDigest']}"


def upload_package(s3, local_package: LocalPackage, s3_uri: str) -> str:
    """Upload model.tar.gz and its manifest under ``s3_uri``; return the ModelDataUrl."""
    bucket, prefix = parse_s3_uri(model_s3_prefix(s3_uri))
    keys = {}
    for path, name in ((local_package.tarball, TARBALL_NAME), (local_package.manifest_path, MANIFEST_NAME)):
        key = f"{prefix}/{name}" if prefix else name
        aws.validate("s3", "PutObject", {"Bucket": bucket, "Key": key})
        s3.upload_file(str(path), bucket, key)
        keys[name] = key
    return f"s3://{bucket}/{keys[TARBALL_NAME]}"


def read_manifest(s3, s3_uri: str) -> dict:
    bucket, prefix = parse_s3_uri(model_s3_prefix(s3_uri))
    key = f"{prefix}/{MANIFEST_NAME}" if prefix else MANIFEST_NAME
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if _error_code(exc) in ("NoSuchKey", "404", "NoSuchBucket"):
            raise BuildError(f"s3://{bucket}/{key} does not exist; the packaging build did not upload it") from None
        raise
    return json.loads(body)


def check_manifest(manifest: dict, spec: ModelSpec) -> dict:
    """The uploaded manifest must follow the manifest rules and describe ``spec``'s GGUF as pinned.

    Either shape is read (packaging.parse_manifest): the workshop's, whose GGUF entry must match the
    pinned repo, revision, size and sha256; or the published sample's, whose ``gguf`` must match the
    pinned file, repo, revision and sha256 (it records no size). ``describe_manifest`` says which.
    """
    try:
        view = parse_manifest(manifest)
    except ManifestInvalid as exc:
        raise ManifestMismatch(f"the uploaded manifest is refused: {exc}; package the model again") from None
    pin = spec.gguf
    listed = next((f for f in view.files if f.path == pin.path), None)
    wrong = [] if listed else [f"no entry for {pin.path} (it lists {[f.path for f in view.files]})"]
    if listed:
        checks = [("repo", listed.repo, pin.repo), ("revision", listed.revision, pin.revision),
                  ("sha256", listed.sha256, pin.sha256 and pin.sha256.lower())]
        if listed.size is not None:  # the sample's shape records no size
            checks.append(("size", listed.size, pin.size))
        wrong += [f"{what} {got!r}, pinned {want!r}" for what, got, want in checks
                  if want is not None and got != want]  # a pin without a value checks nothing
        if view.shape == WORKSHOP_SHAPE and view.gguf.path != pin.path:
            wrong.append(f"its model is {view.gguf.path}, not {pin.path}")
    others = [f.path for f in view.files if f.path.endswith(".gguf") and f.path != pin.path]
    if others:
        wrong.append(f"it also lists {others} (the adapter serves the first GGUF in name order)")
    if spec.tokenizer is not None:
        pinned = (spec.tokenizer.repo, spec.tokenizer.revision)
        if view.shape == SAMPLE_SHAPE and view.tokenizer is not None:
            sources = {(view.tokenizer.get("repo"), view.tokenizer.get("revision"))}
        else:
            sources = {(f.repo, f.revision) for f in view.files if f.role == "tokenizer"}
        wrong += [f"tokenizer from {repo}@{revision}, pinned {pinned[0]}@{pinned[1]}"
                  for repo, revision in sorted(sources - {pinned}, key=str)]
    if wrong:
        raise ManifestMismatch(
            f"the uploaded manifest ({view.shape} shape) does not describe {pin.repo}@{pin.revision} {pin.path} "
            f"with sha256 {pin.sha256}: {'; '.join(wrong)}. Another build may have written the same S3 prefix: "
            "package again or choose a new prefix")
    return manifest


def describe_manifest(manifest: dict) -> str:
    """Which shape a manifest that passed ``check_manifest`` was read in, and what it records."""
    return parse_manifest(manifest).describe()


@dataclass(frozen=True)
class PackagedModel:
    model_data_url: str
    manifest_url: str
    manifest: dict
    build_id: str


REPO_VARIABLE = "WORKSHOP_REPO"


def _default_repo_root() -> Path:
    """The workshop's checkout, whose buildspec/ and container/ the builds upload: ``$WORKSHOP_REPO``, else
    the checkout this package runs from. An installed copy (a wheel) has neither: SourceMissing says so."""
    import os

    given = os.environ.get(REPO_VARIABLE, "").strip()
    root = Path(given).expanduser() if given else Path(__file__).resolve().parent.parent
    if all((root / part).is_dir() for part in SOURCE_PATHS):
        return root
    where = f"{REPO_VARIABLE}={given}" if given else f"{root} (where workshop_lib is installed)"
    raise SourceMissing(f"this needs the workshop's checkout (buildspec/, container/), and {where} has none: "
                        f"clone the workshop's repository and set {REPO_VARIABLE} to its folder")


class CodeBuildRunner:
    """How a flow's build runs: on AWS, CodeBuild does the work and the flow waits for it."""

    def __init__(self, *, poll_s: float = 10.0, timeout_s: float | None = None):
        self.poll_s, self.timeout_s = poll_s, timeout_s

    def ensure_project(self, codebuild, request: dict) -> str:
        return ensure_project(codebuild, request)

    def run(self, codebuild, logs_client, build_id: str, request: dict, *, progress: bool) -> dict:
        """Wait for build ``build_id`` (started with ``request``); return it once it succeeded."""
        return wait_for_build(codebuild, build_id, logs_client, progress=progress, poll_s=self.poll_s,
                              timeout_s=self.timeout_s)

    def packaged(self, spec: ModelSpec) -> ModelSpec:
        """The model a packaging build of ``spec`` leaves in S3: ``spec`` itself, on AWS."""
        return spec

    def not_exercised(self, project_name: str) -> str:
        """What this runner does not really do for ``project_name`` (nothing, on AWS)."""
        return ""


def package_model_in_codebuild(codebuild, s3, logs_client, *, model_s3_uri: str, service_role_arn: str,
                               source_bucket: str, spec: ModelSpec = PINNED_MODEL,
                               project_name: str = MODEL_PACKAGE_PROJECT, source_prefix: str = SOURCE_PREFIX,
                               repo_root: str | Path | None = None, tags: Mapping[str, str] | None = None,
                               progress: bool = True, poll_s: float = 10.0,
                               runner: CodeBuildRunner | None = None) -> PackagedModel:
    """Package ``spec`` in CodeBuild, upload it under ``model_s3_uri``, check the uploaded manifest."""
    runner = runner or CodeBuildRunner(poll_s=poll_s)
    region = codebuild.meta.region_name
    env = model_package_env(spec, model_s3_uri, {v: pinned_dlc_uri(region, v) for v in DLC_PINS})
    upload = source_upload_request(source_bucket, repo_root or _default_repo_root(), source_prefix)
    location = f"{upload['Bucket']}/{upload['Key']}"
    project = project_request(project_name, buildspec=MODEL_PACKAGE_BUILDSPEC, source_location=location,
                              service_role_arn=service_role_arn, tags=tags)
    s3.put_object(**upload)
    runner.ensure_project(codebuild, project)
    request = start_build_request(project_name, env, source_location=location)
    build_id = start_build(codebuild, request)
    runner.run(codebuild, logs_client, build_id, request, progress=progress)
    prefix = model_s3_prefix(model_s3_uri)
    manifest = check_manifest(read_manifest(s3, prefix), runner.packaged(spec))
    return PackagedModel(f"{prefix}/{TARBALL_NAME}", f"{prefix}/{MANIFEST_NAME}", manifest, build_id)


def build_decision_image(codebuild, ecr, s3, logs_client, *, base_image: str, service_role_arn: str,
                         source_bucket: str, dockerfile: str = "Dockerfile", image_tag: str | None = None,
                         repository_name: str = ECR_REPOSITORY, project_name: str = IMAGE_BUILD_PROJECT,
                         source_prefix: str = SOURCE_PREFIX, repo_root: str | Path | None = None,
                         tags: Mapping[str, str] | None = None, progress: bool = True,
                         poll_s: float = 10.0, runner: CodeBuildRunner | None = None) -> str:
    """Build container/<dockerfile> FROM ``base_image`` in CodeBuild; return ``repo_uri@sha256:...``."""
    runner = runner or CodeBuildRunner(poll_s=poll_s)
    # Everything checkable is checked before the first resource is created.
    check_base_image(base_image, ecr.meta.region_name)
    dockerfile = dockerfile_name(dockerfile)
    image_tag = check_image_tag(image_tag or default_image_tag(dockerfile))
    upload = source_upload_request(source_bucket, repo_root or _default_repo_root(), source_prefix)
    location = f"{upload['Bucket']}/{upload['Key']}"
    project = project_request(project_name, buildspec=IMAGE_BUILD_BUILDSPEC, source_location=location,
                              service_role_arn=service_role_arn, privileged=True, tags=tags)
    repository_uri = ensure_ecr_repository(ecr, ecr_repository_request(repository_name, tags))
    env = image_build_env(base_image, repository_uri, image_tag, dockerfile)
    s3.put_object(**upload)
    runner.ensure_project(codebuild, project)
    request = start_build_request(project_name, env, source_location=location)
    build_id = start_build(codebuild, request)
    build = runner.run(codebuild, logs_client, build_id, request, progress=progress)
    pinned = image_digest(ecr, repository_uri, image_tag)
    exported = exported_variables(build).get("IMAGE_DIGEST")
    if exported and not pinned.endswith("@" + exported):
        raise DigestMismatch(
            f"the build exported {exported} for {repository_uri}:{image_tag}, but ECR now says {pinned}; "
            "someone pushed to this repository meanwhile: inspect it before deploying")
    return pinned
