"""Notebook 00: the configuration shown and checked, the least-privilege policies written (and, in
local mode, the administrator's commands run against the emulator), the bucket, the CodeBuild
role, and in local mode the rehearsal (emulator and stand-ins), kept running when the notebook is run
again.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .. import name_rules
from ..aws import admin, calls, hygiene, policies, roles
from ..aws.buckets import check_bucket_region
from ..config import LOCAL_BUCKET, BucketNotFound, WorkshopConfig, in_sagemaker_studio
from ..errors import StepError
from ..local import rehearsal
from ..local.modes import LocalMode
from .context import BOTO3_FLOOR, Checks, Shown, Text, Workshop, shows_requests
from .policy_files import (
    ACCESS_DENIED,
    OPERATOR_POLICY_FILE,
    PolicyFiles,
    attach_instruction,
    policy_folder,
    role_name,
    same_document,
    write_policies,
)
from .quotas import endpoint_quotas


def show_config(workshop: Workshop) -> Text:
    """The loaded config, one setting a line (what every notebook starts by showing)."""
    config = workshop.config
    rows = [
        ("mode", config.mode),
        ("deploy path", config.deploy_path),
        ("region", config.region),
        ("bucket", config.bucket or "(not set yet: notebook 00)"),
        ("SageMaker role", config.sagemaker_role_arn or "(not set yet: notebook 00)"),
        ("endpoints", ", ".join(config.endpoint_names())),
    ]
    text = "\n".join(f"{k:<15} {v}" for k, v in rows)
    if config.mode == "local":
        text += "\nlocal rehearsal: AWS is emulated on this machine; endpoints are local adapter processes"
    return Text(text)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def check_environment(workshop: Workshop) -> Checks:
    """Python, boto3 (instance-pool floor), config, credentials, region and quotas."""
    import boto3

    config = workshop.config
    rows: list[tuple[str, bool | None, str]] = []
    rows.append(("python", sys.version_info >= (3, 10), f"{platform.python_version()} (3.10 or newer)"))
    floor = ".".join(map(str, BOTO3_FLOOR))
    pools_known = "InstancePools" in (
        calls.operation_model("sagemaker", "CreateEndpointConfig")
        .input_shape.members["ProductionVariants"]
        .member.members
    )
    rows.append(
        (
            "boto3",
            _version(boto3.__version__) >= BOTO3_FLOOR and pools_known,
            f"{boto3.__version__} (>= {floor}: its SageMaker model knows InstancePools)",
        )
    )
    problems = config.problems()
    rows.append(("config", not problems, "; ".join(str(p) for p in problems) or "names, region and ARNs are valid"))
    if config.mode == "local":
        rows.append(("credentials", None, "local mode: the emulator gets fake credentials, no AWS account is used"))
        rows.append(("region", True, f"{config.region} (emulated)"))
        rows.append(("quotas", None, "local mode: no instance quotas to read; on AWS endpoint quotas are often 0"))
        rows.append(("studio", None, "not needed: nothing runs in SageMaker"))
        return Checks(rows)

    try:
        identity = workshop.clients.sts.get_caller_identity()
        rows.append(("credentials", True, f"account {identity['Account']} as {identity['Arn']}"))
    except (ClientError, BotoCoreError) as exc:
        rows.append(("credentials", False, f"{exc}; configure AWS credentials (or set WORKSHOP_MODE=local)"))
    rows.append(("region", bool(config.region), config.region or "not set: set WORKSHOP_REGION or AWS_REGION"))
    passed, detail = endpoint_quotas(workshop)
    rows.append(("quotas", passed, detail))
    rows.append(
        (
            "studio",
            None,
            "running in SageMaker Studio"
            if in_sagemaker_studio()
            else "not in SageMaker Studio: set WORKSHOP_ROLE_ARN to a SageMaker execution role",
        )
    )
    return Checks(rows)


@dataclass(repr=False)
class SetupResult(Shown):
    config: WorkshopConfig
    saved_to: Path
    notes: list[str]
    rehearsal: rehearsal.Rehearsal | None = None  # local mode: whose emulator must be running
    policies: PolicyFiles | None = field(default=None)  # the documents written before anything needed them

    @property
    def ok(self) -> bool:
        running = self.rehearsal is None or bool(self.rehearsal.emulator_url())
        return self.saved_to.exists() and running

    @property
    def summary(self) -> str:
        return f"config saved to {self.saved_to}" + (", emulator running" if self.config.mode == "local" else "")

    def lines(self) -> list[str]:
        c = self.config
        return [
            f"deploy path: {c.deploy_path}",
            f"region: {c.region}",
            f"bucket: {c.bucket}",
            f"SageMaker role: {c.sagemaker_role_arn}",
            f"CodeBuild role: {c.codebuild_role_arn or '(not set: needed by notebooks 01 and 03)'}",
            *self.notes,
            f"saved to {self.saved_to}",
        ]


@shows_requests
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
        assert isinstance(workshop.mode, LocalMode)  # the config's mode chose it
        running = workshop.rehearsal.emulator_url()
        if running and not reset:
            endpoints_up = [
                p.what for p in workshop.rehearsal.status() if p.running and p.what.startswith("local endpoint")
            ]
            notes.append(
                f"kept the running rehearsal: AWS emulator at {running}"
                + (f" and {len(endpoints_up)} local endpoint(s)" if endpoints_up else "")
                + "; what notebooks 01-06 made is still there (tick the reset box to start over)"
            )
        else:
            workshop.forget_clients()
            url, leftovers = workshop.mode.start_fresh()
            notes.append(
                f"started a fresh rehearsal: AWS emulator (moto server) at {url}, keep-alive "
                f"{rehearsal.KEEP_ALIVE_S // 3600} h"
                + (f"; stopped the previous one ({', '.join(leftovers)})" if leftovers else "")
            )
        config = config.replace(bucket=config.bucket or LOCAL_BUCKET)
        workshop.mode.seed(config.region)
    else:
        config.require("region", "sagemaker_role_arn")
    account = workshop.clients.sts.get_caller_identity()["Account"]
    if not config.bucket:
        # "sagemaker" in the name: AmazonSageMakerFullAccess (Studio's usual role) may create and use it.
        config = config.replace(bucket=f"sagemaker-decision-workshop-{account}-{config.region}")
    config.check()
    # The documents first: the operator policy is what lets a Studio participant tag the bucket below.
    written = write_policies(workshop, config, account)
    notes.append(f"wrote the policy documents to {written.folder} (shown below)")
    s3 = workshop.clients.s3
    try:
        check_bucket_region(s3, config.bucket, config.region)
        notes.append(f"bucket s3://{config.bucket} exists in {config.region}")
    except BucketNotFound:
        s3.create_bucket(**_create_bucket_request(config))
        notes.append(f"created bucket s3://{config.bucket} in {config.region} (08_cleanup can delete it)")
        tagged = tag_bucket(s3, config.bucket, written)
        if tagged:
            notes.append(tagged)
        notes.append(_secure_bucket(workshop, config, written.folder, account))
    return SetupResult(config, workshop.save(config), notes, _local(workshop), written)


def _secure_bucket(workshop: Workshop, config: WorkshopConfig, folder: Path, account: str) -> str:
    """The bucket's TLS-only policy and lifecycle, written beside the IAM documents for the administrator (the
    operator may not change a bucket policy); in local mode the administrator's lines run against the emulator."""
    hygiene.write_bucket_documents(folder, config.bucket, config.prefix, config.region, config.kms_key_arn)
    commands = hygiene.bucket_commands(folder, config.bucket, account, encrypted=bool(config.kms_key_arn))
    what = (
        f"requests over TLS only, captured requests expiring after {hygiene.CAPTURE_EXPIRY_DAYS} days and "
        f"unfinished uploads after {hygiene.INCOMPLETE_UPLOAD_DAYS}"
        + (", every object encrypted with the configured KMS key" if config.kms_key_arn else "")
    )
    if config.mode == "local":  # the emulator answers plain HTTP, which the TLS-only policy would refuse
        lifecycle = [argv for argv in commands if argv[2] != "put-bucket-policy"]
        assert isinstance(workshop.mode, LocalMode)  # the config's mode chose it
        workshop.mode.run_as_administrator(lifecycle, config.region)
        return (
            f"the administrator's lines give the bucket {what}; the lifecycle's ran against the emulator:\n"
            + "\n".join("  " + admin.shell(argv) for argv in commands)
            + "\nNot exercised locally: the TLS-only bucket policy (the emulator answers plain HTTP)"
        )
    return f"an administrator gives the bucket {what}:\n" + "\n".join("  " + admin.shell(argv) for argv in commands)


def tag_bucket(s3: Any, bucket: str, written: PolicyFiles) -> str:
    """Tag a bucket just created; a refusal becomes a note (the tags only label it: nothing deletes by tag)."""
    try:
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": name_rules.tag_list(name_rules.WORKSHOP_TAGS)})
        return ""
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") not in ACCESS_DENIED:
            raise
        return (
            f"the bucket has no workshop tags: s3:PutBucketTagging was refused ({error.get('Code')}). "
            "AmazonSageMakerFullAccess does not grant it, "
            f"{written.files[OPERATOR_POLICY_FILE].name} does; the tags only label the bucket "
            "(08_cleanup deletes it by name), so nothing else depends on them"
        )


def _error(exc: ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _get_role(iam: Any, name: str, next_step: str) -> dict[str, Any] | None:
    """The role (GetRole), None if it does not exist; a refusal stops with what to do next."""
    try:
        role: dict[str, Any] = iam.get_role(RoleName=name)["Role"]
        return role
    except ClientError as exc:
        code, message = _error(exc)
        if code == "NoSuchEntity":
            return None
        if code in ACCESS_DENIED:
            raise StepError(
                f"could not check that the IAM role {name} exists ({code}: {message}). {next_step}"
            ) from None
        raise


@shows_requests
def ensure_codebuild_role(workshop: Workshop, role_arn: str | None = None) -> SetupResult:
    """The CodeBuild service role notebooks 01 and 03 need, saved in the config, and checked to exist
    (GetRole): a role given by ARN (or configured) is taken as it is; the workshop's own
    (``CODEBUILD_ROLE_NAME``) is created from the least-privilege documents when missing (08_cleanup
    deletes it), and an existing one gets the current trust policy and permissions.

    ``role_arn``: an ARN to use; ``""`` (the notebook's box emptied): the workshop's own role, whatever
    the config holds; None: the configured one, else the workshop's own. The operator policy passes the
    role chosen; when that changes, the documents are written again (and, locally, attached again).
    Creating the role needs the IAM actions the operator policy grants for this one role; refused,
    this stops here with the documents' paths and what to do next, rather than in notebook 01.
    """
    config = workshop.config
    c = workshop.clients
    iam = c.get("iam")
    account = c.sts.get_caller_identity()["Account"]
    name = policies.CODEBUILD_ROLE_NAME
    folder = policy_folder(workshop)
    trust, permissions_file = folder / "codebuild-trust-policy.json", folder / "codebuild-service-role-policy.json"
    given = (role_arn or "").strip()
    wanted = given if role_arn is not None else config.codebuild_role_arn
    origin = "the ARN given above" if given else "the config (or WORKSHOP_CODEBUILD_ROLE_ARN)"
    attach = f"Next: {attach_instruction(config, folder)}, then run this cell again"
    create_it = (
        f"Or an administrator creates the role from {trust} and {permissions_file} (aws iam create-role "
        f"--role-name {name} --assume-role-policy-document file://{trust}; aws iam put-role-policy "
        f"--role-name {name} --policy-name {name} --policy-document file://{permissions_file}); then paste "
        "its ARN into the box above and run this cell again, or set WORKSHOP_CODEBUILD_ROLE_ARN"
    )
    notes: list[str] = []
    if wanted and role_name(wanted) != name:
        # Someone else's role: the operator policy must name it (to check and pass it); never changed.
        config = config.replace(codebuild_role_arn=wanted)
        config.check()
        rewritten = _policies_name(workshop, config, account, notes)
        found = _get_role(iam, role_name(wanted), attach if not rewritten else f"{rewritten}. {attach}")
        if found is None:
            raise StepError(
                f"the CodeBuild role {wanted} (from {origin}) does not exist: paste the ARN of an "
                f"existing role, or empty the box to let this cell create {name}"
            )
        notes.insert(
            0,
            f"CodeBuild role: {found['Arn']} from {origin}; it exists (the workshop changes only the role it creates)",
        )
    else:
        config = config.replace(codebuild_role_arn=policies.role_arn(config.region, account, name))
        _policies_name(workshop, config, account, notes)
        found = _existing_own_role(iam, config, account, notes, wanted or "", attach, create_it, trust)
    config = config.replace(codebuild_role_arn=found["Arn"])
    config.check()
    return SetupResult(config, workshop.save(config), notes, _local(workshop))


def _policies_name(workshop: Workshop, config: WorkshopConfig, account: str, notes: list[str]) -> str:
    """Write the documents again when the operator policy on disk passes another CodeBuild role than
    ``config``'s (locally it is attached again); the note said, or "" when nothing changed."""
    operator = policy_folder(workshop) / OPERATOR_POLICY_FILE
    wanted = policies.codebuild_role_of(policies.scope(config, account))
    try:
        current = json.loads(operator.read_text())
        passes = [s for s in current["Statement"] if s.get("Sid") == "PassCodeBuildRole"]
        if passes and passes[0]["Resource"] == [wanted]:
            return ""
    except (OSError, ValueError, KeyError):
        pass
    written = write_policies(workshop, config, account)
    note = (
        f"wrote {written.files[OPERATOR_POLICY_FILE]} again: it now lets you check and pass {wanted} to CodeBuild"
        + ("" if config.mode == "local" else "; attach this version in place of the last one")
    )
    notes.append(note)
    return note


def _existing_own_role(
    iam: Any,
    config: WorkshopConfig,
    account: str,
    notes: list[str],
    wanted: str,
    attach: str,
    create_it: str,
    trust_file: Path,
) -> dict[str, Any]:
    """The workshop's CodeBuild role, made to exist with the current trust policy and permissions."""
    name = policies.CODEBUILD_ROLE_NAME
    trust = policies.codebuild_trust_policy(config, account)
    found = _get_role(iam, name, f"{attach}. {create_it}")
    created = found is None
    boundary = policies.boundary_policy_arn(config.region, account)
    try:
        if found is None:  # the same as created, said so the checker narrows found below
            found = roles.create(iam, name, trust, boundary)
            notes.append(
                (
                    f"the CodeBuild role {wanted} no longer existed (08_cleanup deletes it): created it again"
                    if wanted
                    else f"created the IAM role {name}"
                )
                + " (trusted by CodeBuild for the workshop's two projects)"
            )
        elif not same_document(found.get("AssumeRolePolicyDocument", {}), trust):
            # The operator may not rewrite a trust policy (it could make the role trust anyone): an administrator does.
            notes.append(
                f"the IAM role {name} exists, but its trust policy is not the current one (made by an "
                "earlier version of the workshop); an administrator replaces it: aws iam "
                f"update-assume-role-policy --role-name {name} --policy-document "
                f"file://{trust_file}"
            )
        else:
            notes.append(f"the IAM role {name} exists and trusts CodeBuild for the workshop's two projects")
        if not created and roles.keep_bounded(iam, found, boundary):
            notes.append(f"the IAM role {name} was given the workshop's permissions boundary {boundary}")
    except ClientError as exc:
        code, message = _error(exc)
        if code not in ACCESS_DENIED:
            raise
        verb = "create" if created else "update the trust policy of"
        raise StepError(
            f"could not {verb} the CodeBuild service role {name} ({code}: {message}). {attach}. {create_it}"
        ) from None
    try:
        roles.put_permissions(iam, name, policies.codebuild_service_role_policy(config, account))
    except ClientError as exc:
        code, message = _error(exc)
        if code not in ACCESS_DENIED:
            raise
        if created:
            raise StepError(
                f"created the CodeBuild service role {name}, but could not give it its permissions "
                f"({code}: {message}). {attach}"
            ) from None
        notes.append(
            f"could not bring the permissions of {name} up to date ({code}); the ones it has are kept "
            "(an administrator can apply codebuild-service-role-policy.json to it)"
        )
    return found


def _local(workshop: Workshop) -> rehearsal.Rehearsal | None:
    return workshop.rehearsal if workshop.config.mode == "local" else None


def _create_bucket_request(config: WorkshopConfig) -> dict[str, Any]:
    request: dict[str, Any] = {"Bucket": config.bucket}
    if config.region != "us-east-1":
        request["CreateBucketConfiguration"] = {"LocationConstraint": config.region}
    return calls.validate("s3", "CreateBucket", request)
