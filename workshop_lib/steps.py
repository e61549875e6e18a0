"""The workshop's steps, as the notebooks call them, in ``aws`` or ``local`` mode.

Each step is a few lines around the library (config, packaging, builds, images,
endpoints, client, cleanup) and returns a small result whose text is what the
notebook shows. The mode comes from the config (``WorkshopConfig.mode``):

* ``aws``: boto3 clients for the configured region; real CodeBuild, ECR and SageMaker.
* ``local``: the same calls against the local AWS emulator (``rehearsal``), and each
  endpoint served by a real adapter process. Where the emulator cannot do what AWS
  does (docker build, instance pools), the request is still built and validated and
  the result says, in one sentence, what was not exercised.

Values a later notebook needs (the model's S3 URL, the pinned image digests) are
kept next to the config file in ``outputs.json``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from . import aws, builds, cleanup, endpoints, images, permissions, rehearsal
from .config import (LOCAL_BUCKET, BucketNotFound, WorkshopConfig, check_bucket_region, default_path,
                     in_sagemaker_studio, repo_root)
from .errors import WorkshopError
from .display import DecisionView, outcome_line
from .models import EMBEDDED_MODEL, PINNED_MODEL, ModelSpec, embedded_gguf_path

BOTO3_FLOOR = (1, 43, 1)  # first boto3 whose SageMaker model knows InstancePools
# The emulator's instance-type list predates these families; it receives the nearest type it knows.
EMULATOR_INSTANCE_TYPES = {"ml.c6i.2xlarge": "ml.c5.2xlarge", "ml.c6i.8xlarge": "ml.c5.9xlarge"}
_EMULATOR_FAMILIES = ("c4", "c5", "c5d", "m4", "m5", "m5d", "r5", "r5d", "t2", "p2", "p3", "g4dn", "inf1")

# What each step that creates something creates, spelled as notebook 07 names it.
# tests/notebooks checks that 07 mentions every name of every creating step 00-06 call.
CREATES: dict[str, tuple[str, ...]] = {
    "setup": ("config.bucket", "steps.stop_local("),
    "package_model": ("config.s3_uri()", "builds.MODEL_PACKAGE_PROJECT"),
    "deploy_standard": ("config.standard_endpoint_name",),
    "build_decision_image": ("config.ecr_repository", "builds.IMAGE_BUILD_PROJECT", "config.s3_uri()"),
    "deploy_decision_cpu": ("config.cpu_endpoint_name",),
    "deploy_decision_gpu": ("config.gpu_endpoint_name",),
    "ensure_codebuild_role": ("steps.delete_codebuild_role(",),
}
# Steps that only read, invoke or print (resolve_dlc also seeds the emulated DLC registry, locally).
READ_ONLY = frozenset({
    "show_config", "check_environment", "verify_package", "resolve_dlc", "llama_settings", "client",
    "decision_image", "refuse_mutable_tag", "placement", "decision_endpoint", "show_decision",
    "show_outcome", "parse_options", "audit_permissions", "show_decisions", "check_outcome", "short_errors",
})


class StepError(WorkshopError, RuntimeError):
    """A step cannot run yet; the message says which notebook or setting comes first."""


class Text(str):
    """A step's message: a plain string that a notebook shows without quotes.

    ``problem`` is set when the step ran but did not reach its outcome (``check_outcome`` reports it).
    """

    def __new__(cls, text: str = "", *, problem: str = ""):
        made = super().__new__(cls, text)
        made.problem = problem
        return made

    @property
    def ok(self) -> bool:
        return not self.problem

    def __repr__(self) -> str:
        return str(self)


class _Shown:
    """Results display as their short text in a notebook (and in print); ``ok`` says whether the
    step reached its outcome (``check_outcome`` reads it)."""

    def lines(self) -> list[str]:
        raise NotImplementedError

    @property
    def ok(self) -> bool:
        return True

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__


# ---- clients and saved outputs -------------------------------------------------------------


CALL_LOG = "aws-calls.jsonl"  # in the local rehearsal's folder, across the notebooks' kernels


class Clients:
    """boto3 clients for the config's mode: the real region, or the local emulator."""

    def __init__(self, config: WorkshopConfig, endpoint_url: str | None = None):
        self.config = config
        self._made: dict[str, object] = {}
        self.endpoint_url = endpoint_url
        # Local mode records every call, so the rehearsal can check the IAM policies against them.
        self.calls = permissions.CallLog(rehearsal.local_dir() / CALL_LOG) if endpoint_url else None

    def acting_as(self, principal: str | None):
        """Record the block's calls as another principal's (local mode; a no-op on AWS)."""
        return self.calls.acting_as(principal) if self.calls else contextlib.nullcontext()

    def get(self, service: str):
        if service not in self._made:
            if self.endpoint_url:
                self._made[service] = rehearsal.client(service, self.config.region, self.endpoint_url)
                self.calls.attach(self._made[service])
            else:
                self._made[service] = aws.client(service, self.config.region)
        return self._made[service]

    sm = property(lambda self: self.get("sagemaker"))
    s3 = property(lambda self: self.get("s3"))
    ecr = property(lambda self: self.get("ecr"))
    codebuild = property(lambda self: self.get("codebuild"))
    logs = property(lambda self: self.get("logs"))
    sts = property(lambda self: self.get("sts"))


_CLIENTS: dict[tuple, Clients] = {}


def clients(config: WorkshopConfig) -> Clients:
    """The clients for ``config``; in local mode, for the running emulator (notebook 00 starts it)."""
    url = None
    if config.mode == "local":
        url = rehearsal.emulator_url()
        if not url:
            raise StepError("the local AWS emulator is not running (07_cleanup stops it, and it ends by itself "
                            f"after {rehearsal.KEEP_ALIVE_S // 3600} h): run 00_setup again, then the notebooks "
                            "in order")
    key = (config.mode, config.region, url)
    if key not in _CLIENTS:
        _CLIENTS[key] = Clients(config, url)
    return _CLIENTS[key]


def _outputs_file() -> Path:
    return default_path().parent / "outputs.json"


def _outputs() -> dict:
    try:
        return json.loads(_outputs_file().read_text())
    except (OSError, ValueError):
        return {}


def _remember(**values) -> None:
    data = _outputs()
    data.update(values)
    path = _outputs_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _recall(key: str, first: str):
    value = _outputs().get(key)
    if not value:
        raise StepError(f"no {key.replace('_', ' ')} recorded yet: run {first} first")
    return value


def model_spec(config: WorkshopConfig) -> ModelSpec:
    return EMBEDDED_MODEL if config.mode == "local" else PINNED_MODEL


def _on_path(config: WorkshopConfig, kind: str) -> bool:
    """Local rehearsal runs every path; on AWS only what the chosen deploy path needs (and pays for)."""
    return config.mode == "local" or config.deploy_path == kind


def _short(uri: str) -> str:
    return re.sub(r"(sha256:[0-9a-f]{12})[0-9a-f]{52}", r"\1…", uri)


# ---- 00 setup ------------------------------------------------------------------------------


def show_config(config: WorkshopConfig) -> Text:
    """The loaded config, one setting a line (what every notebook starts by showing)."""
    rows = [("mode", config.mode), ("deploy path", config.deploy_path), ("region", config.region),
            ("bucket", config.bucket or "(not set yet: notebook 00)"),
            ("SageMaker role", config.sagemaker_role_arn or "(not set yet: notebook 00)"),
            ("endpoints", f"{config.standard_endpoint_name}, {config.cpu_endpoint_name}, {config.gpu_endpoint_name}")]
    text = "\n".join(f"{k:<15} {v}" for k, v in rows)
    if config.mode == "local":
        text += "\nlocal rehearsal: AWS is emulated on this machine; endpoints are local adapter processes"
    return Text(text)


@dataclass(repr=False)
class Checks(_Shown):
    rows: list[tuple[str, bool | None, str]]  # (check, passed / None = skipped, detail)

    @property
    def ok(self) -> bool:
        return all(passed is not False for _, passed, _ in self.rows)

    @property
    def summary(self) -> str:
        failed = [name for name, passed, _ in self.rows if passed is False]
        skipped = sum(passed is None for _, passed, _ in self.rows)
        return (f"failed: {', '.join(failed)}" if failed else
                f"{len(self.rows) - skipped} checks passed" + (f", {skipped} skipped" if skipped else ""))

    def lines(self) -> list[str]:
        mark = {True: "ok  ", False: "FAIL", None: "skip"}
        return [f"{mark[passed]} {name:<14} {detail}" for name, passed, detail in self.rows]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _instance_types_for(config: WorkshopConfig) -> list[str]:
    types = [endpoints.STANDARD_CPU_INSTANCE]
    if config.deploy_path == "decision-cpu":
        types.append(endpoints.DECISION_CPU_INSTANCE)
    if config.deploy_path == "decision-gpu":
        types.extend(endpoints.DEFAULT_GPU_POOLS)
    return types


def _endpoint_quotas(config: WorkshopConfig, wanted: Sequence[str]) -> tuple[bool | None, str]:
    names = {f"{t} for endpoint usage": t for t in wanted}
    found: dict[str, float] = {}
    try:
        quotas = clients(config).get("service-quotas")
        for page in quotas.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker"):
            for quota in page["Quotas"]:
                if quota["QuotaName"] in names:
                    found[names[quota["QuotaName"]]] = quota["Value"]
    except Exception as exc:  # noqa: BLE001 - unreadable quotas are reported, never fatal
        return None, (f"could not read Service Quotas ({type(exc).__name__}); check 'Amazon SageMaker' quotas "
                      f"for {', '.join(wanted)} 'for endpoint usage' in the console")
    zero = [t for t in wanted if found.get(t, 0) < 1]
    detail = ", ".join(f"{t}: {found[t]:g}" if t in found else f"{t}: unknown" for t in wanted)
    if zero and config.deploy_path == "decision-gpu" and any(t not in zero for t in endpoints.DEFAULT_GPU_POOLS):
        return True, detail + " (pools with quota 0 are skipped at placement)"
    if zero:
        return False, detail + " - request an increase in Service Quotas (Amazon SageMaker) before deploying"
    return True, detail


def check_environment(config: WorkshopConfig) -> Checks:
    """Python, boto3 (instance-pool floor), config, credentials, region and quotas."""
    import boto3

    rows: list[tuple[str, bool | None, str]] = []
    rows.append(("python", sys.version_info >= (3, 10), f"{platform.python_version()} (3.10 or newer)"))
    floor = ".".join(map(str, BOTO3_FLOOR))
    pools_known = "InstancePools" in (aws.operation_model("sagemaker", "CreateEndpointConfig")
                                      .input_shape.members["ProductionVariants"].member.members)
    rows.append(("boto3", _version(boto3.__version__) >= BOTO3_FLOOR and pools_known,
                 f"{boto3.__version__} (>= {floor}: its SageMaker model knows InstancePools)"))
    problems = config.problems()
    rows.append(("config", not problems, "; ".join(str(p) for p in problems) or "names, region and ARNs are valid"))
    if config.mode == "local":
        rows.append(("credentials", None, "local mode: the emulator gets fake credentials, no AWS account is used"))
        rows.append(("region", True, f"{config.region} (emulated)"))
        rows.append(("quotas", None, "local mode: no instance quotas to read; on AWS endpoint quotas are often 0"))
        rows.append(("studio", None, "not needed: nothing runs in SageMaker"))
        return Checks(rows)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        identity = clients(config).sts.get_caller_identity()
        rows.append(("credentials", True, f"account {identity['Account']} as {identity['Arn']}"))
    except (ClientError, BotoCoreError) as exc:
        rows.append(("credentials", False, f"{exc}; configure AWS credentials (or set WORKSHOP_MODE=local)"))
    rows.append(("region", bool(config.region), config.region or "not set: set WORKSHOP_REGION or AWS_REGION"))
    passed, detail = _endpoint_quotas(config, _instance_types_for(config))
    rows.append(("quotas", passed, detail))
    rows.append(("studio", None, "running in SageMaker Studio" if in_sagemaker_studio() else
                 "not in SageMaker Studio: set WORKSHOP_ROLE_ARN to a SageMaker execution role"))
    return Checks(rows)


@dataclass(repr=False)
class SetupResult(_Shown):
    config: WorkshopConfig
    saved_to: Path
    notes: list[str]

    @property
    def ok(self) -> bool:
        running = self.config.mode != "local" or bool(rehearsal.emulator_url())
        return self.saved_to.exists() and running

    @property
    def summary(self) -> str:
        return f"config saved to {self.saved_to}" + (", emulator running" if self.config.mode == "local" else "")

    def lines(self) -> list[str]:
        c = self.config
        return [f"deploy path: {c.deploy_path}", f"region: {c.region}", f"bucket: {c.bucket}",
                f"SageMaker role: {c.sagemaker_role_arn}",
                f"CodeBuild role: {c.codebuild_role_arn or '(not set: needed by notebooks 01 and 03)'}",
                *self.notes, f"saved to {self.saved_to}"]


def setup(config: WorkshopConfig, deploy_path: str | None = None, *, reset: bool = False) -> SetupResult:
    """Resolve role and bucket, prepare the bucket, save the shared config file.

    In local mode a running rehearsal (emulator and local endpoints) is kept, so running this
    notebook again loses nothing; ``reset`` stops it and starts a fresh emulator instead.
    """
    config = config.replace(deploy_path=deploy_path or config.deploy_path)
    notes: list[str] = []
    if config.mode == "local":
        running = rehearsal.emulator_url()
        if running and not reset:
            endpoints_up = [p.what for p in rehearsal.status() if p.running and p.what.startswith("local endpoint")]
            notes.append(f"kept the running rehearsal: AWS emulator at {running}"
                         + (f" and {len(endpoints_up)} local endpoint(s)" if endpoints_up else "")
                         + "; what notebooks 01-06 made is still there (tick the reset box to start over)")
        else:
            leftovers = rehearsal.stop_all()
            url = rehearsal.ensure_emulator()
            permissions.CallLog(rehearsal.local_dir() / CALL_LOG).clear()  # a fresh emulator: a fresh record
            notes.append(f"started a fresh rehearsal: AWS emulator (moto server) at {url}, keep-alive "
                         f"{rehearsal.KEEP_ALIVE_S // 3600} h"
                         + (f"; stopped the previous one ({', '.join(leftovers)})" if leftovers else ""))
        config = config.replace(bucket=config.bucket or LOCAL_BUCKET)
    else:
        config.require("region", "sagemaker_role_arn")
    account = clients(config).sts.get_caller_identity()["Account"]
    if not config.bucket:
        # "sagemaker" in the name: AmazonSageMakerFullAccess (Studio's usual role) may create and use it.
        config = config.replace(bucket=f"sagemaker-decision-workshop-{account}-{config.region}")
    config.check()
    s3 = clients(config).s3
    try:
        check_bucket_region(s3, config.bucket, config.region)
        notes.append(f"bucket s3://{config.bucket} exists in {config.region}")
    except BucketNotFound:
        s3.create_bucket(**_create_bucket_request(config))
        s3.put_bucket_tagging(Bucket=config.bucket, Tagging={"TagSet": [
            {"Key": "workshop", "Value": "decision-workshop"}, {"Key": "created-by", "Value": "workshop_lib"}]})
        notes.append(f"created bucket s3://{config.bucket} in {config.region} (07_cleanup can delete it)")
    saved = config.save()
    return SetupResult(config, saved, notes)


def ensure_codebuild_role(config: WorkshopConfig, role_arn: str | None = None) -> SetupResult:
    """The CodeBuild service role notebooks 01 and 03 need: the one given, the one configured, or
    a new one made from the least-privilege documents (``policies``), saved in the config.

    Creating it needs iam:CreateRole and iam:PutRolePolicy (the operator policy grants them for this
    one role); without them this stops here, saying what to ask an administrator for, rather than in
    notebook 01.
    """
    from botocore.exceptions import ClientError

    from . import policies

    notes = []
    if role_arn:
        config = config.replace(codebuild_role_arn=role_arn.strip())
        notes.append("CodeBuild role: the ARN given above")
    elif config.codebuild_role_arn:
        notes.append("CodeBuild role: from the config (or WORKSHOP_CODEBUILD_ROLE_ARN)")
    else:
        c = clients(config)
        iam = c.get("iam")
        account = c.sts.get_caller_identity()["Account"]
        name = policies.CODEBUILD_ROLE_NAME
        try:
            try:
                created = iam.create_role(**policies.create_role_request(
                    name, policies.codebuild_trust_policy(config, account), path="/"))["Role"]
                notes.append(f"created the IAM role {name} (trusted by CodeBuild for the workshop's two projects)")
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "EntityAlreadyExists":
                    raise
                created = iam.get_role(RoleName=name)["Role"]
                notes.append(f"the IAM role {name} exists; its permissions were brought up to date")
            iam.put_role_policy(RoleName=name, PolicyName=name, PolicyDocument=policies.minified(
                policies.codebuild_service_role_policy(config, account)))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise StepError(
                f"could not create the CodeBuild service role ({error.get('Code')}: {error.get('Message')}). Ask an "
                "administrator to create it from .workshop/policies/codebuild-trust-policy.json and "
                "codebuild-service-role-policy.json (written below), then paste its ARN into the box above and run "
                "this cell again, or set WORKSHOP_CODEBUILD_ROLE_ARN") from None
        config = config.replace(codebuild_role_arn=created["Arn"])
    config.check()
    return SetupResult(config, config.save(), notes)


def _create_bucket_request(config: WorkshopConfig) -> dict:
    request = {"Bucket": config.bucket}
    if config.region != "us-east-1":
        request["CreateBucketConfiguration"] = {"LocationConstraint": config.region}
    return aws.validate("s3", "CreateBucket", request)


# ---- 01 package the model -------------------------------------------------------------------


@dataclass(repr=False)
class PackageResult(_Shown):
    model_data_url: str
    manifest: dict
    where: str
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.model_data_url and self.manifest.get("files"))

    def lines(self) -> list[str]:
        out = [f"{self.manifest['model']['name']} packaged {self.where} in {self.seconds:.1f} s",
               f"ModelDataUrl: {self.model_data_url}"]
        for f in self.manifest["files"]:
            out.append(f"  {f['path']}: {f['size']:,} bytes, sha256 {f['sha256'][:16]}…, "
                       f"from {f['repo']}@{f['revision'][:12]}")
        return out + self.notes


def package_model(config: WorkshopConfig, *, progress: bool = True) -> PackageResult:
    """aws: CodeBuild downloads, verifies and packages the pinned model; local: the embedded model."""
    from .packaging import package_local

    started = time.perf_counter()
    c = clients(config)
    model_s3_uri = config.s3_uri("model")
    source_prefix = f"{config.prefix}/{builds.SOURCE_PREFIX}"
    if config.mode == "aws":
        config.require("codebuild_role_arn", "bucket")
        packaged = builds.package_model_in_codebuild(
            c.codebuild, c.s3, c.logs, model_s3_uri=model_s3_uri, service_role_arn=config.codebuild_role_arn,
            source_bucket=config.bucket, source_prefix=source_prefix, progress=progress)
        _remember(model_data_url=packaged.model_data_url)
        return PackageResult(packaged.model_data_url, packaged.manifest, f"by CodeBuild (build {packaged.build_id})",
                             time.perf_counter() - started)
    spec = EMBEDDED_MODEL
    package = package_local(spec, {spec.gguf.path: embedded_gguf_path()}, rehearsal.local_dir() / "package")
    with c.acting_as(permissions.CODEBUILD):  # the upload CodeBuild's packaging build makes on AWS
        url = builds.upload_package(c.s3, package, model_s3_uri)
    manifest = builds.check_manifest(builds.read_manifest(c.s3, model_s3_uri), spec)
    # The CodeBuild job for the pinned model: built and validated by botocore, not sent.
    upload = builds.source_upload_request(config.bucket, repo_root(), source_prefix)
    builds.project_request(builds.MODEL_PACKAGE_PROJECT, buildspec=builds.MODEL_PACKAGE_BUILDSPEC,
                           source_location=f"{upload['Bucket']}/{upload['Key']}",
                           service_role_arn=config.codebuild_role_arn)
    builds.start_build_request(builds.MODEL_PACKAGE_PROJECT, builds.model_package_env(PINNED_MODEL, model_s3_uri))
    _remember(model_data_url=url)
    return PackageResult(url, manifest, "on this machine and uploaded to emulated S3", time.perf_counter() - started,
                         [f"Not exercised locally: the CodeBuild job that downloads and packages {PINNED_MODEL.name} "
                          "(its requests were built and validated, not run); the embedded model stands in."])


def verify_package(config: WorkshopConfig) -> Text:
    """Re-read the manifest from S3, check it against the pins, and check the tarball is there."""
    c = clients(config)
    url = _recall("model_data_url", "01_package_model")
    manifest = builds.check_manifest(builds.read_manifest(c.s3, url), model_spec(config))
    bucket, key = builds.parse_s3_uri(url)
    size = c.s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
    gguf = manifest["model"]["file"]
    text = (f"verified: {url} ({size:,} bytes) holds {gguf}; the manifest's sha256 and revision match the pin "
            f"in workshop_lib/models.py. The adapter re-checks every listed file before it serves.")
    return Text(text)


# ---- images -----------------------------------------------------------------------------------


def resolve_dlc(config: WorkshopConfig, variant: str = "cpu", *, follow_tag: bool = False) -> str:
    """The llama.cpp DLC for the config's region: the digest pinned with its matching bindings
    (``images.DLC_PINS``), checked to be in the region's registry; ``follow_tag`` takes the floating tag."""
    c = clients(config)
    if config.mode == "local":
        with c.acting_as(None):  # AWS's own registry content, not anyone's call
            rehearsal.seed_dlc(c.ecr, config.region)  # the emulated DLC registry holds stand-in manifests
    pinned = images.resolve_dlc(c.ecr, config.region, variant, follow_tag=follow_tag)
    _remember(**{f"dlc_{variant}": pinned})
    pin = images.dlc_pin(variant)
    note = " (a stand-in manifest in the emulated registry)" if config.mode == "local" else ""
    how = f"following {images.SAGEMAKER_TAGS[variant]}" if follow_tag else f"pinned with bindings {pin.bindings}"
    print(f"{images.dlc_image_uri(config.region, variant)} ({how})\n  -> {pinned}{note}")
    return pinned


def _image_tag_of(pinned: str, config: WorkshopConfig, ecr) -> str | None:
    ref = images.parse_image_uri(pinned)
    details = ecr.describe_images(repositoryName=ref.repository, imageIds=[{"imageDigest": ref.digest}],
                                  **({"registryId": ref.account} if ref.account else {}))["imageDetails"]
    tags = details[0].get("imageTags") or [] if details else []
    return tags[0] if tags else None


@dataclass(repr=False)
class ImageResult(_Shown):
    variant: str
    image_uri: str | None
    base_image: str | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:  # built and pinned, or skipped on purpose (another deploy path)
        return self.image_uri is None or "@sha256:" in self.image_uri

    def lines(self) -> list[str]:
        if not self.image_uri:
            return self.notes
        return [f"decision image ({self.variant}): {self.image_uri}", f"  FROM {self.base_image}",
                f"  in {self.seconds:.1f} s", *self.notes]


def build_decision_image(config: WorkshopConfig, variant: str = "cpu", *, progress: bool = True) -> ImageResult:
    """CodeBuild builds container/Dockerfile (cpu) or Dockerfile.gpu FROM the pinned DLC; returns the digest."""
    kind = {"cpu": "decision-cpu", "gpu": "decision-gpu"}[variant]
    if not _on_path(config, kind):
        return ImageResult(variant, None, None, 0.0, [f"skipped the {variant} image: the deploy path is "
                                                      f"{config.deploy_path!r} (notebook 00)"])
    started = time.perf_counter()
    c = clients(config)
    base = resolve_dlc(config, "cuda" if variant == "gpu" else "cpu")
    dockerfile = "Dockerfile.gpu" if variant == "gpu" else "Dockerfile"
    source_prefix = f"{config.prefix}/{builds.SOURCE_PREFIX}"
    config.require("codebuild_role_arn", "bucket")
    if config.mode == "aws":
        pinned = builds.build_decision_image(
            c.codebuild, c.ecr, c.s3, c.logs, base_image=base, service_role_arn=config.codebuild_role_arn,
            source_bucket=config.bucket, dockerfile=dockerfile, repository_name=config.ecr_repository,
            source_prefix=source_prefix, progress=progress)
        _remember(**{f"decision_image_{variant}": pinned})
        return ImageResult(variant, pinned, base, time.perf_counter() - started)
    # Local: the same requests, sent to the emulator; CodeBuild there runs no docker.
    builds.check_base_image(base, config.region)
    tag = builds.default_image_tag(dockerfile)
    upload = builds.source_upload_request(config.bucket, repo_root(), source_prefix)
    location = f"{upload['Bucket']}/{upload['Key']}"
    project = builds.project_request(builds.IMAGE_BUILD_PROJECT, buildspec=builds.IMAGE_BUILD_BUILDSPEC,
                                     source_location=location, service_role_arn=config.codebuild_role_arn,
                                     privileged=True)
    repository_uri = builds.ensure_ecr_repository(c.ecr, builds.ecr_repository_request(config.ecr_repository))
    env = builds.image_build_env(base, repository_uri, tag, dockerfile)
    c.s3.put_object(**upload)
    _replace_project_in_emulator(c.codebuild, project)
    build_id = builds.start_build(c.codebuild, builds.start_build_request(builds.IMAGE_BUILD_PROJECT, env,
                                                                          source_location=location))
    builds.wait_for_build(c.codebuild, build_id, c.logs, progress=progress, poll_s=0.2, timeout_s=60)
    content = hashlib.sha256(upload["Body"] + dockerfile.encode() + base.encode()).hexdigest()
    with c.acting_as(permissions.CODEBUILD):  # what the build's docker push does with its role
        rehearsal.push_stand_in(c.ecr, config.ecr_repository, tag, f"local stand-in for container/{dockerfile} "
                                f"FROM {base}", content)
    pinned = builds.image_digest(c.ecr, repository_uri, tag)
    _remember(**{f"decision_image_{variant}": pinned})
    return ImageResult(variant, pinned, base, time.perf_counter() - started, [
        f"  CodeBuild build {build_id} ran in the emulator with BASE_IMAGE, REPOSITORY_URI, IMAGE_TAG={tag}",
        "Not exercised locally: docker build and push (the emulator's CodeBuild runs no Docker); a manifest "
        "pushed to emulated ECR stands in for the image."])


def _replace_project_in_emulator(codebuild, request: dict) -> None:
    # The emulator has CreateProject but not UpdateProject: replace instead of update.
    codebuild.delete_project(name=request["name"])
    builds.ensure_project(codebuild, request)


def decision_image(config: WorkshopConfig, variant: str = "cpu") -> str:
    """The pinned decision image notebook 03 built, checked to be in ECR still."""
    from botocore.exceptions import ClientError

    pinned = _recall(f"decision_image_{variant}", f"03_build_decision_image ({variant})")
    try:
        _image_tag_of(pinned, config, clients(config).ecr)
    except ClientError as exc:
        raise StepError(f"{pinned} is no longer in ECR ({exc.response['Error']['Code']}); run notebook 03 "
                        "again") from None
    return pinned


def refuse_mutable_tag(config: WorkshopConfig, variant: str | None = None) -> Text:
    """Show the deploy code refusing the same image named by its tag instead of its digest."""
    if config.mode == "aws" and config.deploy_path == "standard":
        return Text("skipped: the standard path builds no image (notebook 00)")
    variant = variant or ("gpu" if config.deploy_path == "decision-gpu" else "cpu")
    pinned = decision_image(config, variant)
    tag = _image_tag_of(pinned, config, clients(config).ecr) or "latest"
    ref = images.parse_image_uri(pinned)
    tagged = f"{ref.registry}/{ref.repository}:{tag}"
    try:
        endpoints.decision_cpu_plan(config.cpu_endpoint_name, image_uri=tagged, role_arn=config.sagemaker_role_arn,
                                    model_data_url=config.model_data_url)
    except images.MutableImageReference as exc:
        return Text(f"refused {tagged}:\n  {exc}")
    raise AssertionError(f"{tagged} was accepted; the deploy code must refuse tags")  # never expected


# ---- deploying ----------------------------------------------------------------------------------


def llama_settings(environment: Mapping[str, str]) -> list[str]:
    """What each SM_LLAMA_CPP_* variable becomes: the DLC's llama-server flag (the adapter reads the same)."""
    out = []
    for key, value in sorted(environment.items()):
        if not key.startswith(endpoints.LLAMA_PREFIX):
            out.append(f"{key}={value}  (adapter setting)")
            continue
        name = key[len(endpoints.LLAMA_PREFIX):]
        flag = "--" + name.lower().replace("_", "-")
        if name == "PORT":
            became = "not passed on (nginx listens on 8080)"
        elif value.lower() == "false":
            became = "dropped"
        elif value.lower() in ("true", ""):
            became = flag
        else:
            became = f"{flag} {value}"
        out.append(f"{key}={value}  ->  llama-server {became}")
    return out


@dataclass(repr=False)
class EndpointResult(_Shown):
    name: str
    plan: endpoints.DeployPlan | None
    status: str
    where: str
    seconds: float = 0.0
    url: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:  # serving (locally: a stand-in for the pools), or skipped on purpose
        if self.plan is None:
            return self.status == "skipped"
        return self.status in ("InService", "stand-in") and (self.where == "SageMaker" or bool(self.url))

    def lines(self) -> list[str]:
        if self.plan is None:
            return self.notes
        variant = self.plan.endpoint_config["ProductionVariants"][0]
        placement = (" > ".join(p["InstanceType"] for p in variant["InstancePools"]) + " (ordered pools)"
                     if "InstancePools" in variant else variant["InstanceType"])
        return [f"endpoint {self.name}: {self.status} after {self.seconds:.1f} s ({self.where})",
                f"  image {_short(self.plan.image_uri)}", f"  instances: {placement}",
                *("  " + s for s in llama_settings(self.plan.model["PrimaryContainer"].get("Environment", {}))),
                *self.notes]


def _for_emulator(plan: endpoints.DeployPlan) -> tuple[endpoints.DeployPlan, list[str]]:
    """The plan with instance types the emulator's (older) list knows."""
    variant = dict(plan.endpoint_config["ProductionVariants"][0])
    wanted = variant.get("InstanceType")
    if not wanted or wanted.split(".")[1] in _EMULATOR_FAMILIES:
        return plan, []
    sent = EMULATOR_INSTANCE_TYPES.get(wanted, "ml.g4dn.2xlarge" if endpoints.is_gpu_instance(wanted)
                                       else "ml.c5.2xlarge")
    variant["InstanceType"] = sent
    config = {**plan.endpoint_config, "ProductionVariants": [variant]}
    return (endpoints.DeployPlan(plan.model, aws.validate("sagemaker", "CreateEndpointConfig", config), plan.endpoint),
            [f"  the emulator's instance-type list predates {wanted}, so it was sent {sent} (validated for {wanted})"])


def _deploy(config: WorkshopConfig, plan: endpoints.DeployPlan, *, progress: bool) -> EndpointResult:
    started = time.perf_counter()
    c = clients(config)
    if config.mode == "aws":
        described = endpoints.deploy(c.sm, plan, logs_client=c.logs, s3_client=c.s3, progress=progress)
        return EndpointResult(plan.name, plan, described["EndpointStatus"], "SageMaker",
                              time.perf_counter() - started)
    sent, notes = _for_emulator(plan)
    described = endpoints.deploy(c.sm, sent, s3_client=c.s3, progress=False, poll_s=0.2, timeout_s=60)
    local = rehearsal.start_local_endpoint(plan.name, c.sm, c.s3, calls=c.calls)
    notes.append(f"  local endpoint: {local.url} ({local.changes_text()})")
    return EndpointResult(plan.name, plan, described["EndpointStatus"], "emulator + local adapter",
                          time.perf_counter() - started, local.url, notes)


def _model_data_url(config: WorkshopConfig) -> str:
    return _recall("model_data_url", "01_package_model")


def deploy_standard(config: WorkshopConfig, image_uri: str | None = None, *,
                    instance_type: str = endpoints.STANDARD_CPU_INSTANCE, progress: bool = True) -> EndpointResult:
    """The published DLC (pinned by digest) serving the packaged model: OpenAI chat on /invocations.

    Locally the adapter stands in for the DLC's llama-server: it answers the same chat schema.
    """
    image_uri = image_uri or resolve_dlc(config, "cpu")
    plan = endpoints.standard_plan(config.standard_endpoint_name, image_uri=image_uri,
                                   role_arn=config.sagemaker_role_arn, model_data_url=_model_data_url(config),
                                   instance_type=instance_type)
    result = _deploy(config, plan, progress=progress)
    if config.mode == "local":
        result.notes.append("Not exercised locally: the DLC's llama-server; the decision adapter stands in for it "
                            "and answers the same OpenAI chat schema on /invocations.")
    return result


def deploy_decision_cpu(config: WorkshopConfig, image_uri: str | None = None, *,
                        instance_type: str = endpoints.DECISION_CPU_INSTANCE, threads: int | None = None,
                        progress: bool = True) -> EndpointResult:
    """The decision image on a fixed CPU instance; llama.cpp threads = the instance's vCPUs by default."""
    if not _on_path(config, "decision-cpu"):
        return EndpointResult(config.cpu_endpoint_name, None, "skipped", "", notes=[
            f"skipped the CPU endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"])
    plan = endpoints.decision_cpu_plan(config.cpu_endpoint_name, image_uri=image_uri or decision_image(config, "cpu"),
                                       role_arn=config.sagemaker_role_arn, model_data_url=_model_data_url(config),
                                       instance_type=instance_type, threads=threads)
    return _deploy(config, plan, progress=progress)


def deploy_decision_gpu(config: WorkshopConfig, image_uri: str | None = None, *,
                        pools: Sequence[str] = endpoints.DEFAULT_GPU_POOLS, progress: bool = True) -> EndpointResult:
    """The decision image on ordered GPU instance pools with every layer offloaded."""
    if not _on_path(config, "decision-gpu"):
        return EndpointResult(config.gpu_endpoint_name, None, "skipped", "", notes=[
            f"skipped the GPU endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"])
    plan = endpoints.decision_gpu_plan(config.gpu_endpoint_name, image_uri=image_uri or decision_image(config, "gpu"),
                                       role_arn=config.sagemaker_role_arn, model_data_url=_model_data_url(config),
                                       instance_pools=pools)
    if config.mode == "aws":
        return _deploy(config, plan, progress=progress)
    started = time.perf_counter()
    c = clients(config)
    images.check_deployable(plan.image_uri, config.region)
    endpoints.create_model(c.sm, plan.model)
    kept = rehearsal.local_dir() / f"{plan.name}.requests.json"
    kept.write_text(plan.to_json() + "\n")
    try:
        endpoints.create_endpoint_config(c.sm, plan.endpoint_config)
        endpoints.create_endpoint(c.sm, plan.endpoint)
        status = "InService"  # an emulator that learnt instance pools
        local = rehearsal.start_local_endpoint(plan.name, c.sm, c.s3, calls=c.calls)
        emulator_note = "the emulator accepted the InstancePools request"
    except endpoints.DeployError as exc:
        status = "stand-in"
        local = rehearsal.start_local_endpoint(plan.name, c.sm, c.s3, model_name=plan.model["ModelName"],
                                               calls=c.calls)
        code = re.search(r"failed: (\w+):", str(exc))
        emulator_note = f"the emulator rejected InstancePools ({code[1] if code else 'an error'}: it predates them)"
    return EndpointResult(plan.name, plan, status, "local CPU stand-in", time.perf_counter() - started, local.url, [
        f"  CreateEndpointConfig with InstancePools built and validated by botocore; {emulator_note}; "
        f"the validated requests are kept in {kept}",
        f"  local endpoint: {local.url} ({local.changes_text()})",
        "Not exercised locally: GPU placement from the ordered pools and full GPU offload; a CPU adapter "
        "serving the same model and settings stands in."])


@dataclass(repr=False)
class Placement(_Shown):
    name: str
    placed: dict[str, int]
    offload_line: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def offloaded(self) -> str | None:
        """"N/M layers" from the offload line."""
        found = _OFFLOAD.search(self.offload_line or "")
        return found[1] if found else None

    def lines(self) -> list[str]:
        placed = ", ".join(f"{t} x{n}" for t, n in self.placed.items()) or "no pool placement reported"
        return [f"endpoint {self.name}: {placed}", f"  offload: {self.offload_line or '(no offload line yet)'}",
                *self.notes]


_OFFLOAD = re.compile(r"offloaded (\d+/\d+ layers) to GPU")


def placement(config: WorkshopConfig, name: str | None = None) -> Placement | Text:
    """Which instance pool SageMaker placed the endpoint on, and llama.cpp's offload log line."""
    name = name or config.gpu_endpoint_name
    if config.mode == "aws" and name == config.gpu_endpoint_name and config.deploy_path != "decision-gpu":
        return Text(f"skipped: no GPU endpoint on the {config.deploy_path!r} path (notebook 00)")
    if config.mode == "aws":
        c = clients(config)
        placed = endpoints.placed_instance_types(c.sm.describe_endpoint(EndpointName=name))
        lines = endpoints.offload_log_lines(c.logs, name)
        return Placement(name, placed, lines[-1].message if lines else None)
    log = rehearsal.endpoint_log(name)
    found = [line.strip() for line in log.read_text(errors="replace").splitlines() if _OFFLOAD.search(line)]
    return Placement(name, {}, found[-1] if found else None, [
        f"  read from the local adapter's log {log}; locally nothing is placed from the pools (no GPU here, "
        "so 0 layers are offloaded)"])


# ---- invoking -------------------------------------------------------------------------------------


def client(config: WorkshopConfig, name: str):
    """An EndpointClient for endpoint ``name``: SageMaker runtime on AWS, the local adapter's URL locally."""
    from .client import EndpointClient

    if config.mode == "local":
        return EndpointClient.local(rehearsal.endpoint_url(name))
    return EndpointClient.sagemaker(name, config.region)


def decision_endpoint(config: WorkshopConfig) -> str:
    """The decision endpoint notebooks 05 and 06 use: GPU on the GPU path, else CPU."""
    if config.deploy_path == "decision-gpu":
        return config.gpu_endpoint_name
    if config.mode == "aws" and config.deploy_path == "standard":
        raise StepError("the deploy path is 'standard' (notebook 00), which has no decision endpoint: go on to "
                        "07_cleanup, or choose decision-cpu or decision-gpu in 00 and run 03 and 04")
    return config.cpu_endpoint_name


def show_decision(decision, *, latency: bool = True, policy=None) -> DecisionView:
    """A client.Decision's probabilities as a bar chart (text in logs), most probable first, then its
    latency; with ``policy`` (a ``decisions.Policy``) also its threshold and what the application does."""
    return DecisionView([decision], policy=policy, latency=latency)


def show_decisions(answers) -> DecisionView:
    """The answers of one shared-state request: a chart each, and the request's time once."""
    return DecisionView(answers, shared=True)


def show_outcome(outcome) -> Text:
    """A decisions.Outcome in one line: what the application does, and why."""
    return Text(outcome_line(outcome))


def parse_options(text: str) -> list[dict]:
    """Options from widget text, one per line: ``id: description`` (or just ``id``)."""
    options = []
    for line in text.splitlines():
        if line.strip():
            oid, _, description = line.partition(":")
            options.append({"id": oid.strip(), "text": description.strip() or oid.strip()})
    return options


# ---- 07 cleanup ---------------------------------------------------------------------------------------


def _gone(call, *codes, **kwargs) -> str:
    """Delete something that costs nothing while it stays: "deleted", "already gone", or why not.

    A refusal (AccessDenied, say, when the role may not delete log groups) becomes a note in the
    result instead of an exception, so it never stops the deletions that stop the billing.
    """
    from botocore.exceptions import ClientError

    try:
        call(**kwargs)
        return cleanup.DELETED
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in codes:
            return cleanup.ALREADY_GONE
        return (f"not deleted ({error.get('Code')}: {error.get('Message')}); it costs little or nothing, "
                "delete it in the console or ask an administrator")


def delete_endpoint(config: WorkshopConfig, name: str) -> Text:
    """Delete endpoint, endpoint config and model ``name`` and its log group; locally stop its process."""
    return delete_endpoints(config, [name])


def delete_endpoints(config: WorkshopConfig, names: Sequence[str]) -> Text:
    """Every named endpoint (with its config and model) first, since they bill; then their log groups.

    An endpoint that cannot be deleted does not stop the others: each failure is reported and the
    step raises only after all were tried.
    """
    c = clients(config)
    lines, failed, deleted = [], [], []
    for name in names:
        try:
            result = cleanup.delete_endpoint_resources(c.sm, name, poll_s=15 if config.mode == "aws" else 0.2)
            lines.append(str(result))
            if result.deleted_anything:
                deleted.append(name)
        except Exception as exc:  # noqa: BLE001 - reported below, after the other endpoints were tried
            failed.append(name)
            lines.append(f"endpoint {name}: NOT deleted: {exc}")
        if config.mode == "local":
            lines.append(f"local endpoint process: {'stopped' if rehearsal.stop_endpoint(name) else 'not running'}")
    for name in names:
        group = endpoints.log_group(name)
        lines.append(f"log group {group}: "
                     f"{_gone(c.logs.delete_log_group, 'ResourceNotFoundException', logGroupName=group)}")
    if failed:
        raise StepError("\n".join(lines) + f"\n{', '.join(failed)} may still be billing: delete them in the "
                        "SageMaker console (Inference > Endpoints) or run this cell again")
    return Text("\n".join(lines), problem="" if deleted else "no endpoint was there to delete")


def _delete_project(codebuild):
    """DeleteProject succeeds for a project that does not exist; ask first so the result says so."""
    from botocore.exceptions import ClientError

    def delete(name: str) -> None:
        if not codebuild.batch_get_projects(names=[name]).get("projects"):
            raise ClientError({"Error": {"Code": "ResourceNotFound", "Message": name}}, "BatchGetProjects")
        codebuild.delete_project(name=name)
    return delete


def delete_build_resources(config: WorkshopConfig, projects: Sequence[str], repository: str) -> Text:
    """Delete the named CodeBuild projects (and their log groups) and the ECR repository with its images."""
    c = clients(config)
    lines = []
    for project in projects:
        lines.append(f"CodeBuild project {project}: {_gone(_delete_project(c.codebuild), 'ResourceNotFound', name=project)}")
        group = f"/aws/codebuild/{project}"
        lines.append(f"log group {group}: "
                     f"{_gone(c.logs.delete_log_group, 'ResourceNotFoundException', logGroupName=group)}")
    state = _gone(c.ecr.delete_repository, "RepositoryNotFoundException", repositoryName=repository, force=True)
    lines.append(f"ECR repository {repository} (and its images): {state}")
    return Text("\n".join(lines))


def delete_codebuild_role(config: WorkshopConfig) -> Text:
    """Delete the CodeBuild service role notebook 00 created (by its fixed name); a role someone else
    made and gave by ARN is left alone. It costs nothing, so a refusal is a note, not a stop."""
    from . import policies

    name = policies.CODEBUILD_ROLE_NAME
    if not (config.codebuild_role_arn or "").endswith(f":role/{name}"):
        return Text(f"CodeBuild role {config.codebuild_role_arn or '(none)'}: not created by the workshop, left alone")
    iam = clients(config).get("iam")
    policy = _gone(iam.delete_role_policy, "NoSuchEntity", RoleName=name, PolicyName=name)
    role = _gone(iam.delete_role, "NoSuchEntity", RoleName=name)
    return Text(f"IAM role {name}: {role} (its inline policy: {policy})")


def delete_artifacts(config: WorkshopConfig, s3_uri: str, *, delete_bucket: bool = False) -> Text:
    """Delete the objects under the workshop's S3 prefix (model, build sources); the bucket only if asked."""
    from botocore.exceptions import ClientError

    c = clients(config)
    bucket, prefix = builds.parse_s3_uri(s3_uri)
    if not prefix:
        raise StepError(f"{s3_uri} names a whole bucket; pass the workshop's prefix (config.s3_uri())")
    keys = []
    try:
        for page in c.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
            keys += [o["Key"] for o in page.get("Contents", [])]
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchBucket":
            raise
        return Text(f"bucket {bucket}: already gone")
    for i in range(0, len(keys), 1000):
        c.s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})
    lines = [f"s3://{bucket}/{prefix}/: {len(keys)} objects deleted"]
    if delete_bucket:
        left = c.s3.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount", 0)
        if left:
            lines.append(f"bucket {bucket} kept: it holds objects outside the workshop's prefix")
        else:
            c.s3.delete_bucket(Bucket=bucket)
            lines.append(f"bucket {bucket}: {cleanup.DELETED}")
    else:
        lines.append(f"bucket {bucket} kept (tick the box above to delete it too)")
    return Text("\n".join(lines))


def audit_permissions(config: WorkshopConfig) -> permissions.Audit:
    """Local mode: every AWS call the rehearsal recorded, held against the policy of whoever made it.

    The operator's calls (these notebooks) against ``policies.operator_policy``, the image push and
    model upload the stand-ins made for CodeBuild against its service role's policy, and the model
    download a local endpoint made for SageMaker against the execution role's. A denied call means a
    participant with exactly these policies would be stopped there.
    """
    from . import policies

    if config.mode != "local":
        return Text("the permission audit checks the calls the local rehearsal recorded (WORKSHOP_MODE=local); "
                    "on AWS, IAM itself is the check")
    log = permissions.CallLog(rehearsal.local_dir() / CALL_LOG)
    scope = policies.scope(config)
    documents = {permissions.OPERATOR: policies.operator_policy(scope),
                 permissions.CODEBUILD: policies.codebuild_service_role_policy(scope),
                 permissions.SAGEMAKER: policies.sagemaker_execution_role_policy(scope)}
    audit = permissions.audit(log.calls(), documents, config.region, scope.account)
    if not audit.ok:
        raise StepError(f"the generated policies deny calls the rehearsal made:\n{audit}")
    return audit


def running_endpoints(config: WorkshopConfig) -> Text:
    """Workshop-tagged endpoints still running in the account (or the emulator); should be none."""
    running = cleanup.running_workshop_endpoints(clients(config).sm)
    return Text(cleanup.format_running(running), problem=f"{len(running)} workshop endpoint(s) still there"
                if running else "")


def stop_local(config: WorkshopConfig) -> Text:
    """Local mode: stop every local endpoint and the emulator, then show that nothing runs."""
    if config.mode != "local":
        return Text("aws mode: no local processes were started")
    stopped = rehearsal.stop_all()
    _CLIENTS.clear()
    left = [p.what for p in rehearsal.status() if p.running]
    return Text(f"stopped: {', '.join(stopped) or 'nothing was running'}\n{rehearsal.format_status()}",
                problem=f"still running: {', '.join(left)}" if left else "")


# ---- each notebook's outcome -----------------------------------------------------------------------


def short_errors() -> None:
    """In a notebook: expected mistakes (a missing earlier step, bad input, no quota, a refused
    request) print one line saying what to do; real bugs keep their traceback (``display``)."""
    from .display import install_error_handler

    install_error_handler()


def _reached(value) -> tuple[bool, str]:
    """Whether one result shows the step got where the participant needs to be, and what was checked."""
    from .client import ChatResult, Decision

    if isinstance(value, Decision):
        p = value.probabilities
        total = sum(p)
        valid = bool(p) and len(p) == len(value.option_ids) and all(0.0 <= x <= 1.0 for x in p) \
            and abs(total - 1.0) < 1e-3
        return valid, (f"{len(p)} probabilities summing to {total:.3f}, top {value.top}" if valid
                       else f"not a probability vector over its options: {dict(zip(value.option_ids, p))}")
    if isinstance(value, ChatResult):
        words = len(value.content.split())
        return bool(words), f"an answer of {words} words" if words else "the chat answer is empty"
    if isinstance(value, (list, tuple)):
        found = [_reached(v) for v in value]
        bad = [detail for ok, detail in found if not ok]
        return bool(found) and not bad, ("; ".join(bad) or f"{len(found)} answers, each valid") if found else "none"
    if hasattr(value, "runs") and hasattr(value, "summary"):  # a bench.BenchReport
        failed = {key: sum(not r.answered for r in run.results) for key, run in value.runs.items()}
        failed = {key: n for key, n in failed.items() if n}
        head = value.summary
        valid = head["tasks"] > 0 and head["valid"] == head["tasks"] and not failed
        detail = f"{head['valid']}/{head['tasks']} decisions valid"
        if failed:
            detail += "; requests failed in " + ", ".join(f"{key} ({n})" for key, n in failed.items())
        return valid, detail
    if hasattr(value, "ok"):
        problem = getattr(value, "problem", "") or ("" if value.ok else "did not succeed")
        return value.ok, problem or getattr(value, "summary", "") or str(value).splitlines()[0][:100]
    raise TypeError(f"check_outcome does not know how to check a {type(value).__name__}")


def check_outcome(config: WorkshopConfig, notebook: str, **results) -> Checks:
    """A notebook's closing check: one row per named result (valid probabilities, an answer with
    content, something deleted, nothing left running). In local mode (CI, the rehearsal) a failed row
    stops the notebook with the reason, so a run a participant would be stuck after never passes."""
    checks = Checks([(name, *_reached(value)) for name, value in results.items()])
    if config.mode == "local" and not checks.ok:
        raise StepError(f"notebook {notebook} did not get where it should:\n{checks}")
    return checks


# ---- the whole local path, headless ----------------------------------------------------------------


def rehearse_all(work_dir: str | Path | None = None, out=print) -> int:
    """Run the notebooks' local path (00-07) in this process and print a short summary.

    Uses its own directory (default ``.workshop/rehearsal``) for the config, outputs and
    processes, so it neither reads nor overwrites the notebooks' saved config. Returns 0
    when every step passed; everything it started is stopped before it returns.
    """
    import contextlib

    from .bench import run_notebook_benchmark
    from .bench.report import fmt_s
    from .client import decision as make_decision
    from .decisions import Policy
    from .examples import CHAT, SHARED_STATE, SUPPORT_ROUTE

    work = Path(work_dir or repo_root() / ".workshop" / "rehearsal").resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").unlink(missing_ok=True)  # a rehearsal starts as a new participant does
    saved_env = {k: os.environ.get(k) for k in ("WORKSHOP_CONFIG", "WORKSHOP_LOCAL_DIR", "WORKSHOP_MODE")}
    os.environ.update(WORKSHOP_CONFIG=str(work / "config.json"), WORKSHOP_LOCAL_DIR=str(work / "local"),
                      WORKSHOP_MODE="local")
    log_path = work / "steps.log"
    summary: list[tuple[str, str, float]] = []
    failed = None
    started = time.perf_counter()
    out("Local rehearsal of notebooks 00-07: AWS emulated by moto, endpoints served by the real adapter")
    try:
        with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            def step(label, fn):
                t = time.perf_counter()
                text = fn()
                summary.append((label, text, time.perf_counter() - t))
                print(f"== {label}\n{text}\n", file=log, flush=True)

            config = WorkshopConfig.load()
            box: dict = {}

            def s00():
                checks = check_environment(config)
                if not checks.ok:
                    raise StepError(str(checks))
                role = ensure_codebuild_role(setup(config, "decision-cpu", reset=True).config)
                box["config"] = role.config
                return (f"checks passed; emulator {rehearsal.emulator_url()}, bucket s3://{box['config'].bucket}; "
                        f"{role.notes[0].split(' (')[0]}")

            def s01():
                c = box["config"]
                p = package_model(c, progress=False)
                f = p.manifest["files"][0]
                verify_package(c)
                return f"{f['path']} {f['size']:,} bytes, sha256 {f['sha256'][:12]}… in emulated S3; verified"

            def s02():
                c = box["config"]
                r = deploy_standard(c, progress=False)
                reply = client(c, c.standard_endpoint_name).chat(CHAT["messages"], max_tokens=24)
                return (f"DLC pinned {_short(r.plan.image_uri)}; {r.name} {r.status}; chat: "
                        f"{reply.content.strip()[:60]!r}")

            def s03():
                c = box["config"]
                cpu = build_decision_image(c, "cpu", progress=False)
                gpu = build_decision_image(c, "gpu", progress=False)
                refused = "refused" in refuse_mutable_tag(c, "cpu")
                return (f"cpu {_short(cpu.image_uri)}, gpu {_short(gpu.image_uri)}; tag refused: {refused}; "
                        "docker build not exercised")

            def s04():
                c = box["config"]
                cpu = deploy_decision_cpu(c, progress=False)
                gpu = deploy_decision_gpu(c, progress=False)
                offloaded = placement(c, c.gpu_endpoint_name).offloaded
                return (f"{cpu.name} {cpu.status}; {gpu.name}: pools request validated, CPU stand-in "
                        f"({offloaded} offloaded)")

            def s05():
                c = box["config"]
                ep = client(c, decision_endpoint(c))
                d = ep.decide(SUPPORT_ROUTE)
                batch = ep.decide_batch(SHARED_STATE["id"], SHARED_STATE["state"], SHARED_STATE["questions"])
                outcome = Policy(threshold=0.6, fallback="needs_review").apply(d)
                built = ep.decide(make_decision("builder-1", SUPPORT_ROUTE["state"], "Is this about money?",
                                                {"yes": "Yes", "no": "No"}))
                return (f"{d.id}: top {d.top} {d.top_probability:.2f} -> {outcome.option_id}; "
                        f"shared state: {len(batch)} answers; builder: {built.top}")

            def s06():
                c = box["config"]
                name = decision_endpoint(c)
                # notebook 06's defaults: 6 tasks, every study on the first 2
                report = run_notebook_benchmark(client(c, name), limit=6, study_limit=2, label=name, progress=False)
                saved = report.save(work / "bench")
                head = report.summary
                latency = head["client_latency_ms"]
                return (f"{head['valid']}/{head['tasks']} valid, {head['correct']}/{head['tasks']} correct, client p50 "
                        f"{fmt_s(latency['p50'])}, p95 {fmt_s(latency['p95'])}; report {saved['markdown']}")

            def s07():
                c = box["config"]
                delete_endpoints(c, (c.standard_endpoint_name, c.cpu_endpoint_name, c.gpu_endpoint_name))
                delete_build_resources(c, [builds.MODEL_PACKAGE_PROJECT, builds.IMAGE_BUILD_PROJECT],
                                       c.ecr_repository)
                delete_codebuild_role(c)
                delete_artifacts(c, c.s3_uri())
                left = running_endpoints(c)
                audit = audit_permissions(c)
                (work / "permission-audit.txt").write_text(str(audit) + "\n")
                stop_local(c)
                checked = sum(audit.checked.values())
                return (f"{left}; {rehearsal.format_status()}; {checked} recorded AWS permissions allowed by the "
                        f"three policies ({len(audit.unused)} statements unused locally, see permission-audit.txt)")

            for label, fn in (("00 setup", s00), ("01 package model", s01), ("02 standard endpoint", s02),
                              ("03 decision images", s03), ("04 decision endpoints", s04),
                              ("05 invoke decisions", s05), ("06 benchmark", s06), ("07 cleanup", s07)):
                try:
                    step(label, fn)
                except Exception as exc:  # noqa: BLE001 - reported in the summary, details in the log
                    failed = (label, exc)
                    import traceback

                    traceback.print_exc(file=log)
                    break
    finally:
        rehearsal.stop_all()
        _CLIENTS.clear()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    for label, text, seconds in summary:
        out(f"  {label:<22} {seconds:5.1f} s  {text}")
    if failed:
        out(f"  {failed[0]:<22} FAILED: {failed[1]}")
        out(f"  details: {log_path}")
    out("Not exercised locally: the CodeBuild model download, docker build/push, the DLC's llama-server, "
        "GPU pool placement and offload.")
    out(f"Everything started was stopped. Total {time.perf_counter() - started:.1f} s (log: {log_path}).")
    return 1 if failed else 0


__all__ = [
    "CREATES", "READ_ONLY", "Checks", "Clients", "EndpointResult", "ImageResult", "PackageResult", "Placement",
    "SetupResult", "StepError", "build_decision_image", "check_environment", "client", "clients",
    "audit_permissions", "decision_endpoint", "decision_image", "delete_artifacts", "delete_build_resources",
    "delete_codebuild_role", "ensure_codebuild_role",
    "delete_endpoint", "delete_endpoints",
    "deploy_decision_cpu", "deploy_decision_gpu", "deploy_standard", "llama_settings", "model_spec",
    "package_model", "parse_options", "placement", "refuse_mutable_tag", "rehearse_all", "resolve_dlc",
    "running_endpoints", "setup", "show_config", "show_decision", "show_decisions", "show_outcome", "stop_local",
    "Text", "check_outcome", "short_errors",
    "verify_package",
]
