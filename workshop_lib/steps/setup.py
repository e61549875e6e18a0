"""Notebook 00: the configuration shown and checked, the bucket, the CodeBuild role, and in local
mode the rehearsal (emulator and stand-ins), kept running when the notebook is run again.
"""

from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .. import aws, endpoints, names, permissions, rehearsal
from ..config import BucketNotFound, LOCAL_BUCKET, WorkshopConfig, check_bucket_region, in_sagemaker_studio
from .context import BOTO3_FLOOR, CALL_LOG, StepError, Text, Workshop, _Shown


def show_config(workshop: Workshop) -> Text:
    """The loaded config, one setting a line (what every notebook starts by showing)."""
    config = workshop.config
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
        from ..display import row  # wrapped between words: a browser breaks long lines mid-word

        return [row(f"{mark[passed]} {name:<14} ", detail) for name, passed, detail in self.rows]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _instance_types_for(config: WorkshopConfig) -> list[str]:
    types = [endpoints.STANDARD_CPU_INSTANCE]
    if config.deploy_path == "decision-cpu":
        types.append(endpoints.DECISION_CPU_INSTANCE)
    if config.deploy_path == "decision-gpu":
        types.extend(endpoints.DEFAULT_GPU_POOLS)
    return types


def _endpoint_quotas(workshop: Workshop, wanted: Sequence[str]) -> tuple[bool | None, str]:
    config = workshop.config
    names = {f"{t} for endpoint usage": t for t in wanted}
    found: dict[str, float] = {}
    try:
        quotas = workshop.clients.get("service-quotas")
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


def check_environment(workshop: Workshop) -> Checks:
    """Python, boto3 (instance-pool floor), config, credentials, region and quotas."""
    import boto3

    config = workshop.config
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
        identity = workshop.clients.sts.get_caller_identity()
        rows.append(("credentials", True, f"account {identity['Account']} as {identity['Arn']}"))
    except (ClientError, BotoCoreError) as exc:
        rows.append(("credentials", False, f"{exc}; configure AWS credentials (or set WORKSHOP_MODE=local)"))
    rows.append(("region", bool(config.region), config.region or "not set: set WORKSHOP_REGION or AWS_REGION"))
    passed, detail = _endpoint_quotas(workshop, _instance_types_for(config))
    rows.append(("quotas", passed, detail))
    rows.append(("studio", None, "running in SageMaker Studio" if in_sagemaker_studio() else
                 "not in SageMaker Studio: set WORKSHOP_ROLE_ARN to a SageMaker execution role"))
    return Checks(rows)


@dataclass(repr=False)
class SetupResult(_Shown):
    config: WorkshopConfig
    saved_to: Path
    notes: list[str]
    rehearsal: rehearsal.Rehearsal | None = None  # local mode: whose emulator must be running

    @property
    def ok(self) -> bool:
        running = self.rehearsal is None or bool(self.rehearsal.emulator_url())
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


def setup(workshop: Workshop, deploy_path: str | None = None, *, reset: bool = False) -> SetupResult:
    """Resolve role and bucket, prepare the bucket, save the shared config file (``workshop.config``
    is the saved one afterwards).

    In local mode a running rehearsal (emulator and local endpoints) is kept, so running this
    notebook again loses nothing; ``reset`` stops it and starts a fresh emulator instead.
    """
    config = workshop.config
    config = config.replace(deploy_path=deploy_path or config.deploy_path)
    notes: list[str] = []
    if config.mode == "local":
        running = workshop.rehearsal.emulator_url()
        if running and not reset:
            endpoints_up = [p.what for p in workshop.rehearsal.status() if p.running and p.what.startswith("local endpoint")]
            notes.append(f"kept the running rehearsal: AWS emulator at {running}"
                         + (f" and {len(endpoints_up)} local endpoint(s)" if endpoints_up else "")
                         + "; what notebooks 01-06 made is still there (tick the reset box to start over)")
        else:
            leftovers = workshop.rehearsal.stop_all()
            url = workshop.rehearsal.ensure_emulator()
            permissions.CallLog(workshop.rehearsal.home / CALL_LOG).clear()  # a fresh emulator: a fresh record
            notes.append(f"started a fresh rehearsal: AWS emulator (moto server) at {url}, keep-alive "
                         f"{rehearsal.KEEP_ALIVE_S // 3600} h"
                         + (f"; stopped the previous one ({', '.join(leftovers)})" if leftovers else ""))
        config = config.replace(bucket=config.bucket or LOCAL_BUCKET)
    else:
        config.require("region", "sagemaker_role_arn")
    account = workshop.clients.sts.get_caller_identity()["Account"]
    if not config.bucket:
        # "sagemaker" in the name: AmazonSageMakerFullAccess (Studio's usual role) may create and use it.
        config = config.replace(bucket=f"sagemaker-decision-workshop-{account}-{config.region}")
    config.check()
    s3 = workshop.clients.s3
    try:
        check_bucket_region(s3, config.bucket, config.region)
        notes.append(f"bucket s3://{config.bucket} exists in {config.region}")
    except BucketNotFound:
        s3.create_bucket(**_create_bucket_request(config))
        s3.put_bucket_tagging(Bucket=config.bucket, Tagging={"TagSet": names.tag_list(names.WORKSHOP_TAGS)})
        notes.append(f"created bucket s3://{config.bucket} in {config.region} (07_cleanup can delete it)")
    return SetupResult(config, workshop.save(config), notes, _local(workshop))


def ensure_codebuild_role(workshop: Workshop, role_arn: str | None = None) -> SetupResult:
    """The CodeBuild service role notebooks 01 and 03 need: the one given, the one configured, or
    a new one made from the least-privilege documents (``policies``), saved in the config.

    Creating it needs iam:CreateRole and iam:PutRolePolicy (the operator policy grants them for this
    one role); without them this stops here, saying what to ask an administrator for, rather than in
    notebook 01.
    """
    from botocore.exceptions import ClientError

    from .. import policies

    config = workshop.config
    notes = []
    if role_arn:
        config = config.replace(codebuild_role_arn=role_arn.strip())
        notes.append("CodeBuild role: the ARN given above")
    elif config.codebuild_role_arn:
        notes.append("CodeBuild role: from the config (or WORKSHOP_CODEBUILD_ROLE_ARN)")
    else:
        c = workshop.clients
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
    return SetupResult(config, workshop.save(config), notes, _local(workshop))


def _local(workshop: Workshop) -> rehearsal.Rehearsal | None:
    return workshop.rehearsal if workshop.config.mode == "local" else None


def _create_bucket_request(config: WorkshopConfig) -> dict:
    request = {"Bucket": config.bucket}
    if config.region != "us-east-1":
        request["CreateBucketConfiguration"] = {"LocationConstraint": config.region}
    return aws.validate("s3", "CreateBucket", request)
