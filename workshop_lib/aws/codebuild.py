"""CodeBuild and ECR: package the pinned model and build the decision image in the cloud.

SageMaker Studio has no Docker, and a 3 GB download is best done next to S3, so
both jobs run in CodeBuild from the buildspecs in ``buildspec/``. A project's
source is a zip of ``buildspec/`` and ``container/`` that this module builds from
the repository and uploads to S3 under a content-addressed key: the image build
needs ``container/`` as its Docker build context, which an inline buildspec
(``NO_SOURCE``) could not provide.

The pure builders are in ``build_projects`` (request dicts checked by botocore plus the rules
botocore does not check), with the names callers read: the projects, the buildspecs, the source
prefix, the tarball. The senders here take boto3 clients and do one thing each;
``package_model_in_codebuild`` and ``build_decision_image`` chain them into the two flows the
notebooks run.

The flows run the same way against AWS and against the local emulator. The one thing the
emulator cannot do, run a build, is a parameter (``runner``): ``CodeBuildRunner`` waits for
CodeBuild; the local rehearsal passes ``stand_ins.EmulatedCodeBuild``, which does the build's
effect itself (the packaged model in S3, a stand-in image in ECR), so every other request of a
flow reaches the emulator and an edit here is rehearsed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from ..errors import AwsFailure, InvalidInput
from ..models import PINNED_MODEL, ModelSpec
from ..packaging import (
    MANIFEST_NAME,
    SAMPLE_SHAPE,
    WORKSHOP_SHAPE,
    LocalPackage,
    ManifestInvalid,
    check_calibration,
    parse_manifest,
)
from . import calls
from .build_projects import (
    ECR_REPOSITORY,
    IMAGE_BUILD_BUILDSPEC,
    IMAGE_BUILD_PROJECT,
    MODEL_PACKAGE_BUILDSPEC,
    MODEL_PACKAGE_PROJECT,
    PHASES,
    SOURCE_PATHS,
    SOURCE_PREFIX,
    TARBALL_NAME,
    check_base_image,
    check_image_tag,
    default_image_tag,
    dockerfile_name,
    ecr_repository_request,
    failure_summary,
    image_build_env,
    model_package_env,
    model_s3_prefix,
    parse_s3_uri,
    project_request,
    source_upload_request,
    start_build_request,
    update_project_request,
)
from .images import DLC_PINS, ImageRef, parse_image_uri, pinned_dlc_uri

# ---------------------------------------------------------------- senders


def _error_code(exc: ClientError) -> str:
    code: str = exc.response.get("Error", {}).get("Code", "")
    return code


def upload_source(s3: Any, bucket: str, repo_root: str | Path, prefix: str = SOURCE_PREFIX) -> str:
    """Upload the source zip; return its CodeBuild location, ``bucket/key``."""
    request = source_upload_request(bucket, repo_root, prefix)
    s3.put_object(**request)
    return f"{bucket}/{request['Key']}"


def ensure_project(codebuild: Any, request: dict[str, Any]) -> str:
    """Create the project, or update it to ``request`` if it exists; return its ARN."""
    try:
        try:
            arn: str = codebuild.create_project(**request)["project"]["arn"]
            return arn
        except ClientError as exc:
            if _error_code(exc) != "ResourceAlreadyExistsException":
                raise
        arn = codebuild.update_project(**update_project_request(request))["project"]["arn"]
        return arn
    except ClientError as exc:
        if _error_code(exc) == "InvalidInputException":
            raise InvalidInput(
                f"CodeBuild rejected project {request['name']!r}: {exc.response['Error'].get('Message')}. "
                f"Check that {request['serviceRole']} exists and trusts codebuild.amazonaws.com"
            ) from None
        raise


def start_build(codebuild: Any, request: dict[str, Any]) -> str:
    """StartBuild; a new account's build limit (its concurrent builds start at 0) becomes one line saying so."""
    try:
        build_id: str = codebuild.start_build(**request)["build"]["id"]
        return build_id
    except ClientError as exc:
        if _error_code(exc) != "AccountLimitExceededException":
            raise
        raise AwsFailure(
            f"CodeBuild refused to start {request['projectName']} (AccountLimitExceededException: "
            f"{exc.response['Error'].get('Message', '')}): new AWS accounts start with a CodeBuild concurrent "
            "build limit of 0. Request an increase of 'Concurrently running builds' for the build's compute type "
            "in Service Quotas (service CodeBuild), or retry later; the limit rises as the account is used"
        ) from None


def _get_build(codebuild: Any, build_id: str) -> dict[str, Any]:
    response = codebuild.batch_get_builds(ids=[build_id])
    if not response.get("builds"):
        raise AwsFailure(f"CodeBuild does not know build {build_id!r}")
    build: dict[str, Any] = response["builds"][0]
    return build


def log_tail(logs_client: Any, build: dict[str, Any], lines: int = 40) -> list[str]:
    """The last ``lines`` lines of the build's CloudWatch log (or why there are none)."""
    logs = build.get("logs") or {}
    group, stream = logs.get("groupName"), logs.get("streamName")
    if not group or not stream:
        return ["(the build has no CloudWatch log stream yet)"]
    request = calls.validate(
        "logs", "GetLogEvents", {"logGroupName": group, "logStreamName": stream, "limit": lines, "startFromHead": False}
    )
    try:
        events = logs_client.get_log_events(**request)["events"]
    except ClientError as exc:
        return [f"(could not read log {group}/{stream}: {_error_code(exc)})"]
    return [e["message"].rstrip("\n") for e in events]


def exported_variables(build: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v.get("value", "") for v in build.get("exportedEnvironmentVariables", [])}


def wait_for_build(
    codebuild: Any,
    build_id: str,
    logs_client: Any,
    progress: bool = True,
    *,
    poll_s: float = 10.0,
    timeout_s: float | None = None,
    tail_lines: int = 40,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll until the build ends; return it if it succeeded, else raise AwsFailure ending with the log tail."""
    from tqdm.auto import tqdm

    started = time.monotonic()
    bar = tqdm(
        total=len(PHASES) - 1,
        desc=f"CodeBuild {build_id.split(':')[0]}",
        unit="phase",
        disable=not progress,
        bar_format="{desc}: {n}/{total} phases {postfix} [{elapsed}]",
    )
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
                raise AwsFailure(
                    f"build {build_id} is still in {phase} after {timeout_s:.0f} s; it keeps running. "
                    f"Wait again with wait_for_build(codebuild, {build_id!r}, logs) or follow "
                    f"{(build.get('logs') or {}).get('deepLink', 'the CodeBuild console')}"
                )
            sleep(poll_s)
    finally:
        bar.close()
    status = build["buildStatus"]
    if status == "SUCCEEDED":
        return build
    phase, reason = failure_summary(build)
    tail = log_tail(logs_client, build, tail_lines)
    link = (build.get("logs") or {}).get("deepLink")
    raise AwsFailure(
        f"CodeBuild build {build_id} ended {status} in phase {phase}: {reason}\n"
        f"--- last {len(tail)} log lines ---\n" + "\n".join(tail) + (f"\n--- full log: {link}" if link else "")
    )


def ensure_ecr_repository(ecr: Any, request: dict[str, Any]) -> str:
    """Create the repository (or find it, if its tags are immutable); return its URI."""
    name = request["repositoryName"]
    try:
        uri: str = ecr.create_repository(**request)["repository"]["repositoryUri"]
        return uri
    except ClientError as exc:
        if _error_code(exc) != "RepositoryAlreadyExistsException":
            raise
    repository = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    if repository.get("imageTagMutability") != "IMMUTABLE":
        raise AwsFailure(
            f"ECR repository {name!r} exists with mutable tags, so a tag could later name another image. "
            f"Run `aws ecr put-image-tag-mutability --repository-name {name} --image-tag-mutability IMMUTABLE` "
            "or choose another repository name"
        )
    uri = repository["repositoryUri"]
    return uri


def image_digest(ecr: Any, repository: ImageRef, tag: str) -> ImageRef:
    """Ask ECR which image ``tag`` of ``repository`` (an ECR repository, no tag) names; return it pinned."""
    try:
        details = ecr.describe_images(
            repositoryName=repository.repository, imageIds=[{"imageTag": tag}], registryId=repository.account
        )["imageDetails"]
    except ClientError as exc:
        if _error_code(exc) in ("ImageNotFoundException", "RepositoryNotFoundException"):
            raise AwsFailure(
                f"ECR has no image {repository.repository}:{tag}; the build did not push it (check the build log)"
            ) from None
        raise
    return repository.at(details[0]["imageDigest"])


def upload_package(s3: Any, local_package: LocalPackage, s3_uri: str) -> str:
    """Upload model.tar.gz and its manifest under ``s3_uri``; return the ModelDataUrl."""
    bucket, prefix = parse_s3_uri(model_s3_prefix(s3_uri))
    keys = {}
    for path, name in ((local_package.tarball, TARBALL_NAME), (local_package.manifest_path, MANIFEST_NAME)):
        key = f"{prefix}/{name}" if prefix else name
        calls.validate("s3", "PutObject", {"Bucket": bucket, "Key": key})
        s3.upload_file(str(path), bucket, key)
        keys[name] = key
    return f"s3://{bucket}/{keys[TARBALL_NAME]}"


def read_manifest(s3: Any, s3_uri: str) -> dict[str, Any]:
    bucket, prefix = parse_s3_uri(model_s3_prefix(s3_uri))
    key = f"{prefix}/{MANIFEST_NAME}" if prefix else MANIFEST_NAME
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if _error_code(exc) in ("NoSuchKey", "404", "NoSuchBucket"):
            raise AwsFailure(f"s3://{bucket}/{key} does not exist; the packaging build did not upload it") from None
        raise
    manifest: dict[str, Any] = json.loads(body)
    return manifest


def check_manifest(manifest: dict[str, Any], spec: ModelSpec) -> dict[str, Any]:
    """The uploaded manifest must follow the manifest rules and describe ``spec``'s GGUF as pinned.

    Either shape is read (packaging.parse_manifest): the workshop's, whose GGUF entry must match the
    pinned repo, revision, size and sha256; or the published sample's, whose ``gguf`` must match the
    pinned file, repo, revision and sha256 (it records no size). ``describe_manifest`` says which.
    """
    try:
        view = parse_manifest(manifest)
    except ManifestInvalid as exc:
        raise AwsFailure(f"the uploaded manifest is refused: {exc}; package the model again") from None
    pin = spec.gguf
    listed = next((f for f in view.files if f.path == pin.path), None)
    wrong = [] if listed else [f"no entry for {pin.path} (it lists {[f.path for f in view.files]})"]
    if listed:
        checks: list[tuple[str, object, object]] = [
            ("repo", listed.repo, pin.repo),
            ("revision", listed.revision, pin.revision),
            ("sha256", listed.sha256, pin.sha256 and pin.sha256.lower()),
        ]
        if listed.size is not None:  # the sample's shape records no size
            checks.append(("size", listed.size, pin.size))
        wrong += [
            f"{what} {got!r}, pinned {want!r}" for what, got, want in checks if want is not None and got != want
        ]  # a pin without a value checks nothing
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
        wrong += [
            f"tokenizer from {repo}@{revision}, pinned {pinned[0]}@{pinned[1]}"
            for repo, revision in sorted(sources - {pinned}, key=str)
        ]
    if wrong:
        raise AwsFailure(
            f"the uploaded manifest ({view.shape} shape) does not describe {pin.repo}@{pin.revision} {pin.path} "
            f"with sha256 {pin.sha256}: {'; '.join(wrong)}. Another build may have written the same S3 prefix: "
            "package again or choose a new prefix"
        )
    return manifest


def describe_manifest(manifest: dict[str, Any]) -> str:
    """Which shape a manifest that passed ``check_manifest`` was read in, and what it records."""
    return parse_manifest(manifest).describe()


@dataclass(frozen=True)
class PackagedModel:
    model_data_url: str
    manifest_url: str
    manifest: dict[str, Any]
    build_id: str


REPO_VARIABLE = "WORKSHOP_REPO"


def default_repo_root() -> Path:
    """The workshop's checkout, whose buildspec/ and container/ the builds upload: ``$WORKSHOP_REPO``, else
    the checkout this package runs from. An installed copy (a wheel) has neither: the error says so."""
    import os

    given = os.environ.get(REPO_VARIABLE, "").strip()
    root = Path(given).expanduser() if given else Path(__file__).resolve().parents[2]
    if all((root / part).is_dir() for part in SOURCE_PATHS):
        return root
    where = f"{REPO_VARIABLE}={given}" if given else f"{root} (where workshop_lib is installed)"
    raise AwsFailure(
        f"this needs the workshop's checkout (buildspec/, container/), and {where} has none: "
        f"clone the workshop's repository and set {REPO_VARIABLE} to its folder"
    )


class CodeBuildRunner:
    """How a flow's build runs: on AWS, CodeBuild does the work and the flow waits for it."""

    def __init__(self, *, poll_s: float = 10.0, timeout_s: float | None = None) -> None:
        self.poll_s, self.timeout_s = poll_s, timeout_s

    def ensure_project(self, codebuild: Any, request: dict[str, Any]) -> str:
        return ensure_project(codebuild, request)

    def run(
        self, codebuild: Any, logs_client: Any, build_id: str, request: dict[str, Any], *, progress: bool
    ) -> dict[str, Any]:
        """Wait for build ``build_id`` (started with ``request``); return it once it succeeded."""
        return wait_for_build(
            codebuild, build_id, logs_client, progress=progress, poll_s=self.poll_s, timeout_s=self.timeout_s
        )

    def packaged(self, spec: ModelSpec) -> ModelSpec:
        """The model a packaging build of ``spec`` leaves in S3: ``spec`` itself, on AWS."""
        return spec

    def not_exercised(self, project_name: str) -> str:
        """What this runner does not really do for ``project_name`` (nothing, on AWS)."""
        return ""


def package_model_in_codebuild(
    codebuild: Any,
    s3: Any,
    logs_client: Any,
    *,
    model_s3_uri: str,
    service_role_arn: str,
    source_bucket: str,
    spec: ModelSpec = PINNED_MODEL,
    project_name: str = MODEL_PACKAGE_PROJECT,
    source_prefix: str = SOURCE_PREFIX,
    repo_root: str | Path | None = None,
    tags: Mapping[str, str] | None = None,
    progress: bool = True,
    poll_s: float = 10.0,
    runner: CodeBuildRunner | None = None,
    calibration: str | Path | None = None,
    region: str | None = None,
) -> PackagedModel:
    """Package ``spec`` in CodeBuild, upload it under ``model_s3_uri``, check the uploaded manifest.

    ``calibration``: a calibration.json fitted for the packaged GGUF (refused here otherwise), uploaded
    beside the build source (which the build may read) and packaged next to the GGUF. ``region``: the
    clients' region (read from ``codebuild`` when not given), whose DLC registry the build reads the llama.cpp
    DLC from."""
    runner = runner or CodeBuildRunner(poll_s=poll_s)
    calibration_upload = None
    if calibration is not None:
        data = Path(calibration).read_bytes()
        check_calibration(data, runner.packaged(spec).gguf.sha256 or "", str(calibration))
        key = f"{source_prefix.strip('/')}/calibration-{hashlib.sha256(data).hexdigest()[:16]}.json"
        calibration_upload = calls.validate("s3", "PutObject", {"Bucket": source_bucket, "Key": key, "Body": data})
    region = region or calls.region_of(codebuild)
    env = model_package_env(
        spec,
        model_s3_uri,
        {v: pinned_dlc_uri(region, v) for v in DLC_PINS},
        f"s3://{source_bucket}/{calibration_upload['Key']}" if calibration_upload else None,
    )
    upload = source_upload_request(source_bucket, repo_root or default_repo_root(), source_prefix)
    location = f"{upload['Bucket']}/{upload['Key']}"
    project = project_request(
        project_name,
        buildspec=MODEL_PACKAGE_BUILDSPEC,
        source_location=location,
        service_role_arn=service_role_arn,
        tags=tags,
    )
    if calibration_upload:
        s3.put_object(**calibration_upload)
    s3.put_object(**upload)
    runner.ensure_project(codebuild, project)
    request = start_build_request(project_name, env, source_location=location)
    build_id = start_build(codebuild, request)
    runner.run(codebuild, logs_client, build_id, request, progress=progress)
    prefix = model_s3_prefix(model_s3_uri)
    manifest = check_manifest(read_manifest(s3, prefix), runner.packaged(spec))
    return PackagedModel(f"{prefix}/{TARBALL_NAME}", f"{prefix}/{MANIFEST_NAME}", manifest, build_id)


def build_decision_image(
    codebuild: Any,
    ecr: Any,
    s3: Any,
    logs_client: Any,
    *,
    base_image: ImageRef,
    service_role_arn: str,
    source_bucket: str,
    dockerfile: str = "Dockerfile",
    image_tag: str | None = None,
    repository_name: str = ECR_REPOSITORY,
    project_name: str = IMAGE_BUILD_PROJECT,
    source_prefix: str = SOURCE_PREFIX,
    repo_root: str | Path | None = None,
    tags: Mapping[str, str] | None = None,
    progress: bool = True,
    poll_s: float = 10.0,
    runner: CodeBuildRunner | None = None,
    region: str | None = None,
) -> ImageRef:
    """Build container/<dockerfile> FROM ``base_image`` in CodeBuild, in ``region`` (the clients', read from
    ``codebuild`` when not given); return the pushed image pinned by digest."""
    runner = runner or CodeBuildRunner(poll_s=poll_s)
    # Everything checkable is checked before the first resource is created.
    check_base_image(base_image, region or calls.region_of(codebuild))
    dockerfile = dockerfile_name(dockerfile)
    image_tag = check_image_tag(image_tag or default_image_tag(dockerfile))
    upload = source_upload_request(source_bucket, repo_root or default_repo_root(), source_prefix)
    location = f"{upload['Bucket']}/{upload['Key']}"
    project = project_request(
        project_name,
        buildspec=IMAGE_BUILD_BUILDSPEC,
        source_location=location,
        service_role_arn=service_role_arn,
        privileged=True,
        tags=tags,
    )
    # the build's output enters here: the repository URI ECR answers with
    repository = parse_image_uri(ensure_ecr_repository(ecr, ecr_repository_request(repository_name, tags)))
    env = image_build_env(base_image, repository, image_tag, dockerfile)
    s3.put_object(**upload)
    runner.ensure_project(codebuild, project)
    request = start_build_request(project_name, env, source_location=location)
    build_id = start_build(codebuild, request)
    build = runner.run(codebuild, logs_client, build_id, request, progress=progress)
    pinned = image_digest(ecr, repository, image_tag)
    exported = exported_variables(build).get("IMAGE_DIGEST")
    if exported and pinned.digest != exported:
        raise AwsFailure(
            f"the build exported {exported} for {repository.uri}:{image_tag}, but ECR now says {pinned.uri}; "
            "someone pushed to this repository meanwhile: inspect it before deploying"
        )
    return pinned
