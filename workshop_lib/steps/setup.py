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
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Mapping, Sequence

from botocore.exceptions import BotoCoreError, ClientError

from ..aws import admin, api, endpoints, hygiene, managed_policies, policies, regions, roles, transform
from ..aws.buckets import check_bucket_region
from ..aws.iam import minified
from ..config import BucketNotFound, LOCAL_BUCKET, WorkshopConfig, in_sagemaker_studio
from ..display import row
from ..local import permissions, rehearsal
from .context import BOTO3_FLOOR, CALL_LOG, StepError, Text, Workshop, _Shown, shows_requests
from .. import names


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

        return [row(f"{mark[passed]} {name:<14} ", detail) for name, passed, detail in self.rows]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _instance_types_for(config: WorkshopConfig) -> list[str]:
    """The types whose quotas decide the deploy path's endpoints: where instance pools are not offered the
    GPU endpoint runs on one fixed type, so only that one counts (the GPU plan's own choice)."""
    types = [endpoints.STANDARD_CPU_INSTANCE]
    if config.deploy_path == "decision-cpu":
        types.append(endpoints.DECISION_CPU_INSTANCE)
    if config.deploy_path == "decision-gpu":
        types.extend(endpoints.gpu_instance_types(config.region or ""))
    return types


def _transform_types_for(config: WorkshopConfig) -> list[str]:
    """The types notebook 07's Batch Transform job may run on: the decision endpoint's (steps.run_transform)."""
    if config.deploy_path == "standard":
        return []
    return list(dict.fromkeys(transform.transform_type(t) for t in _instance_types_for(config)[1:]))


ENDPOINT_USAGE, TRANSFORM_USAGE = "endpoint usage", "transform job usage"
QUOTAS_AGAIN = ("read again below, once the operator documents are attached (steps.check_quotas; Service Quotas "
                "needs servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas)")


def quota_name(instance_type: str, usage: str = ENDPOINT_USAGE) -> str:
    """Service Quotas' name of SageMaker's quota of ``instance_type`` for ``usage``."""
    return f"{instance_type} for {usage}"


def quota_verdict(config: WorkshopConfig, found: Mapping[str, float], transform_found: Mapping[str, float] | None = None,
                  defaults: Collection[str] = ()) -> tuple[bool, str]:
    """What the quotas ``found`` (type -> instances "for endpoint usage") mean for the deploy path: whether
    its endpoints can start, and whether notebook 07's blue/green update can (it starts a second fleet
    of the decision endpoint while the first still serves, so it needs twice the instance count) and its Batch
    Transform job (``transform_found``: type -> instances "for transform job usage"; None: not read).
    ``defaults``: the quota names whose value is AWS's default, the account having none applied. A type in
    neither map is unknown: Service Quotas lists no such quota in the region."""
    wanted = _instance_types_for(config)

    def shown(values: Mapping[str, float], types: Sequence[str], usage: str) -> str:
        return ", ".join(f"{t}: {values[t]:g}" + (" (AWS default)" if quota_name(t, usage) in defaults else "")
                         if t in values else f"{t}: unknown" for t in types)

    detail = shown(found, wanted, ENDPOINT_USAGE)
    standard_ok = found.get(endpoints.STANDARD_CPU_INSTANCE, 0) >= 1
    pooled = config.deploy_path == "decision-gpu" and regions.offers_instance_pools(config.region)
    if config.deploy_path == "standard":
        decision, update_room = [], 2
    elif config.deploy_path == "decision-cpu":
        decision = [endpoints.DECISION_CPU_INSTANCE]
        update_room = found.get(endpoints.DECISION_CPU_INSTANCE, 0)
    else:
        decision = list(wanted[1:])
        # With pools the new fleet may start on any pool type with room; a fixed type needs 2 of its own.
        update_room = sum(found.get(t, 0) for t in decision) if pooled else found.get(decision[0], 0)
    startable = not decision or any(found.get(t, 0) >= 1 for t in decision)
    if not (standard_ok and startable):
        missing = [t for t in wanted[:1] if not standard_ok] + ([] if startable else decision)
        zero = [t for t in missing if t in found]
        unknown = [t for t in missing if t not in found]
        reasons = []
        if zero:
            reasons.append(f"{', '.join(zero)} has no quota: request an increase in Service Quotas (Amazon SageMaker, "
                           f"'<type> for endpoint usage') before deploying")
        if unknown:
            reasons.append(f"Service Quotas lists no '{quota_name(unknown[0])}'"
                           + (f" (nor for {', '.join(unknown[1:])})" if unknown[1:] else "")
                           + f" in {config.region}, applied or default: SageMaker may not offer it there")
        return False, detail + " - " + "; ".join(reasons)
    if pooled and any(found.get(t, 0) < 1 for t in decision):
        detail += " (pools with quota 0 are skipped at placement)"
    if config.deploy_path == "decision-gpu" and not pooled:
        detail += (f" (instance pools are not offered in {config.region}: the GPU endpoint runs on "
                   f"{decision[0]} alone)")
    if update_room < 2:
        detail += (f"; note: notebook 07's blue/green update starts a second {' or '.join(decision)} instance "
                   "while the first still serves, so it needs a quota of 2: request it before 07, or skip 07's update")
    transform_types = _transform_types_for(config)
    if transform_found is not None and transform_types:
        detail += f"; {TRANSFORM_USAGE}: {shown(transform_found, transform_types, TRANSFORM_USAGE)}"
        short = [t for t in transform_types if transform_found.get(t, 0) < 1]
        if short:
            detail += (f"; note: notebook 07's Batch Transform job runs on the endpoint's type, whose quota "
                       f"'<type> for {TRANSFORM_USAGE}' is apart from the endpoint's: {', '.join(short)} has none, "
                       "so request it before 07, or skip 07's transform")
    if defaults:
        detail += ("; (AWS default): no value applied to this account, so Service Quotas' default is what holds "
                   "(ListAWSDefaultServiceQuotas)")
    return True, detail


def _quota_values(quotas, operation: str, names: Collection[str]) -> dict[str, float]:
    """Quota name -> value for the ``names`` SageMaker's quotas list under ``operation`` (a paginated listing)."""
    values: dict[str, float] = {}
    for page in quotas.get_paginator(operation).paginate(ServiceCode="sagemaker"):
        values.update((q["QuotaName"], q["Value"]) for q in page["Quotas"] if q["QuotaName"] in names)
    return values


def _endpoint_quotas(workshop: Workshop) -> tuple[bool | None, str]:
    """Notebook 00's quota row. A quota whose value was never applied to the account is absent from
    ListServiceQuotas (Service Quotas' documentation); AWS's default holds for it, read from
    ListAWSDefaultServiceQuotas, and the row says which values are defaults."""
    config = workshop.config
    wanted, transform_types = _instance_types_for(config), _transform_types_for(config)
    names = ({quota_name(t): t for t in wanted}, {quota_name(t, TRANSFORM_USAGE): t for t in transform_types})
    try:
        quotas = workshop.clients.get("service-quotas")
        values = _quota_values(quotas, "list_service_quotas", [*names[0], *names[1]])
        unset = [name for name in (*names[0], *names[1]) if name not in values]
        defaults = _quota_values(quotas, "list_aws_default_service_quotas", unset) if unset else {}
    except Exception as exc:  # noqa: BLE001 - unreadable quotas are reported, never fatal
        return None, (f"could not read Service Quotas ({type(exc).__name__}); {QUOTAS_AGAIN}, or check "
                      f"'Amazon SageMaker' quotas for {', '.join(wanted)} 'for endpoint usage' in the console")
    values.update(defaults)
    endpoint, transform_job = ({t: values[name] for name, t in usage.items() if name in values} for usage in names)
    return quota_verdict(config, endpoint, transform_job, defaults)


def check_quotas(workshop: Workshop, checks: Checks | None = None) -> Checks:
    """The quota row read again (after an administrator attached the operator documents, which grant the
    read): ``checks`` with its quotas row replaced, or a Checks of that row alone."""
    config = workshop.config
    if config.mode == "local":
        row = ("quotas", None, "local mode: no instance quotas to read; on AWS endpoint quotas are often 0")
    else:
        row = ("quotas", *_endpoint_quotas(workshop))
    if checks is None:
        return Checks([row])
    return Checks([row if name == "quotas" else (name, passed, detail) for name, passed, detail in checks.rows])


def check_environment(workshop: Workshop) -> Checks:
    """Python, boto3 (instance-pool floor), config, credentials, region and quotas."""
    import boto3

    config = workshop.config
    rows: list[tuple[str, bool | None, str]] = []
    rows.append(("python", sys.version_info >= (3, 10), f"{platform.python_version()} (3.10 or newer)"))
    floor = ".".join(map(str, BOTO3_FLOOR))
    pools_known = "InstancePools" in (api.operation_model("sagemaker", "CreateEndpointConfig")
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

    try:
        identity = workshop.clients.sts.get_caller_identity()
        rows.append(("credentials", True, f"account {identity['Account']} as {identity['Arn']}"))
    except (ClientError, BotoCoreError) as exc:
        rows.append(("credentials", False, f"{exc}; configure AWS credentials (or set WORKSHOP_MODE=local)"))
    rows.append(("region", bool(config.region), config.region or "not set: set WORKSHOP_REGION or AWS_REGION"))
    passed, detail = _endpoint_quotas(workshop)
    rows.append(("quotas", passed, detail))
    rows.append(("studio", None, "running in SageMaker Studio" if in_sagemaker_studio() else
                 "not in SageMaker Studio: set WORKSHOP_ROLE_ARN to a SageMaker execution role"))
    return Checks(rows)


# What IAM's refusal looks like in each protocol (permissions.access_denied gives the same locally).
ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
OPERATOR_POLICY_FILE = "operator-policy.json"


def policy_folder(workshop: Workshop) -> Path:
    """Where notebook 00 writes the policy documents: ``policies/`` beside the config file."""
    return workshop.path.parent / "policies"


@dataclass(repr=False)
class PolicyFiles(_Shown):
    """The documents notebook 00 wrote, and whether the operator policy is attached to the persona."""
    folder: Path
    files: dict[str, Path]
    attached: str  # how the operator policy reaches the participant's role

    @property
    def ok(self) -> bool:
        return bool(self.files) and all(path.exists() for path in self.files.values())

    @property
    def summary(self) -> str:
        return f"{len(self.files)} documents in {self.folder}"

    def lines(self) -> list[str]:
        return [f"{name:<38} {path}" for name, path in self.files.items()] + [row("", self.attached)]

    def text(self, name: str = OPERATOR_POLICY_FILE) -> Text:
        """One document as written (whole, for a reader to paste or hand on)."""
        return Text(self.files[name].read_text())

    def statements(self, name: str = OPERATOR_POLICY_FILE) -> Text:
        """One document's statements, one per paragraph: Sid, actions, resources (wrapped between words)."""
        lines = []
        for statement in json.loads(self.files[name].read_text())["Statement"]:
            actions = statement.get("Action", [])
            resources = statement.get("Resource", statement.get("NotResource", []))
            lines.append(row(f"{statement.get('Sid', '')}: ", ", ".join([actions] if isinstance(actions, str)
                                                                       else actions)))
            lines.append(row("    on ", ", ".join([resources] if isinstance(resources, str) else resources)))
            if statement.get("Condition"):
                lines.append(row("    if ", json.dumps(statement["Condition"])))
        return Text("\n".join(lines))


def operator_files(folder: Path) -> list[Path]:
    """The operator's documents in ``folder``: operator-policy.json first, then any other operator-*.json
    (IAM's size quota splits the operator's permissions; whoever attaches one attaches all)."""
    return sorted(folder.glob("operator-*.json"), key=lambda p: (p.name != OPERATOR_POLICY_FILE, p.name))


def administrator_commands(config: WorkshopConfig, folder: Path, account: str) -> list[list[str]]:
    """The AWS CLI lines an administrator runs once per account: the boundary and the operator documents as
    customer managed policies, the latter attached to the participant's role (``admin.commands``)."""
    role = _role_name(config.sagemaker_role_arn) if config.sagemaker_role_arn else "<your-studio-role>"
    return admin.commands(folder.resolve(), role, config.region, account)


def _attach_instruction(config: WorkshopConfig, folder: Path, account: str | None = None) -> str:
    account = account or names.role_account(config.sagemaker_role_arn or "") or "<account-id>"
    lines = "\n".join("  " + admin.shell(argv) for argv in administrator_commands(config, folder, account))
    update = "\n".join("  " + admin.shell(argv) for argv in admin.update_commands(
        folder.resolve(), config.region, account, [admin.BOUNDARY_FILE, *admin.operator_files()]))
    return (f"an administrator runs, once per account (IAM and AWS STS quotas: managed policies of 6,144 characters "
            f"each, at most 10 per role):\n{lines}\nand, when notebook 00 wrote new versions of existing policies "
            f"(IAM keeps five versions: delete the oldest with aws iam delete-policy-version first):\n{update}\n")


def apply_locally(workshop: Workshop, config: WorkshopConfig, folder: Path, account: str) -> list[str]:
    """Local mode: run the administrator's printed lines against the emulator, AWS's rules enforced, as the
    administrator would: all of them the first time, a new version of each changed document afterwards."""
    iam = workshop.clients.get("iam")
    with workshop.clients.acting_as(None):
        existing = {p["PolicyName"]: p for p in iam.list_policies(Scope="Local", PathPrefix=admin.POLICY_PATH)["Policies"]}
    commands = administrator_commands(config, folder, account)
    if existing:
        changed = [name for name in [admin.BOUNDARY_FILE, *admin.operator_files()]
                   if admin.policy_name(name) in existing and not _same_version(iam, existing[admin.policy_name(name)],
                                                                              folder / name, workshop)]
        commands = ([argv for argv in commands if argv[2] == "create-policy" and argv[4] not in existing]
                    + admin.update_commands(folder.resolve(), config.region, account, changed)
                    + [argv for argv in commands if argv[2] == "attach-role-policy"])
    return workshop.mode.run_as_administrator(commands, config.region)


def _same_version(iam, policy: Mapping, path: Path, workshop: Workshop) -> bool:
    with workshop.clients.acting_as(None):
        version = iam.get_policy_version(PolicyArn=policy["Arn"], VersionId=policy["DefaultVersionId"])["PolicyVersion"]
        if _same_document(version["Document"], json.loads(path.read_text())):
            return True
        versions = iam.list_policy_versions(PolicyArn=policy["Arn"])["Versions"]
        if len(versions) >= 5:  # IAM keeps five: the oldest non-default goes first, as the printed advice says
            oldest = min((v for v in versions if not v["IsDefaultVersion"]), key=lambda v: v["CreateDate"])
            iam.delete_policy_version(PolicyArn=policy["Arn"], VersionId=oldest["VersionId"])
    return False


def write_policies(workshop: Workshop, config: WorkshopConfig | None = None,
                   account: str | None = None) -> PolicyFiles:
    """Write the three principals' documents (and the two trust policies) under ``policy_folder``,
    before anything that needs them is called; in local mode run the administrator's commands against the
    emulator (``apply_locally``) and attach the operator documents to the rehearsal's Studio role (the
    persona, permissions.py), as an administrator would on AWS."""
    config = config or workshop.config
    account = account or workshop.clients.sts.get_caller_identity()["Account"]
    folder = policy_folder(workshop)
    files = policies.write_policies(config, folder, account)
    operator = [path for path in operator_files(folder) if path.name in files]
    names_ = ", ".join(path.name for path in operator)
    if config.mode == "local":
        apply_locally(workshop, config, folder, account)
        attached = permissions.CallLog(workshop.rehearsal.home / CALL_LOG).attached
        for path in operator:
            attached.attach(path.name, json.loads(path.read_text()), role_arn=config.sagemaker_role_arn)
        if permissions.persona() == permissions.ADMINISTRATOR:
            how = ("local rehearsal as an administrator (WORKSHOP_PERSONA): every call is allowed; notebook 08's "
                   "audit still holds each one to these documents")
        else:
            how = (f"local rehearsal as a Studio participant: the rehearsal attached {names_} to the Studio role "
                   f"{config.sagemaker_role_arn}, beside {managed_policies.sagemaker_full_access()}; from here a "
                   "call goes through only if one of them allows it; the administrator's lines below ran against "
                   f"the emulator first, as on AWS {_attach_instruction(config, folder, account)}")
    else:
        how = (f"if your role has only AmazonSageMakerFullAccess (Studio's usual): "
               f"{_attach_instruction(config, folder, account)}"
               "; without them the bucket gets no tags and the CodeBuild role cell says what is missing")
    return PolicyFiles(folder, files, how)


@dataclass(repr=False)
class SetupResult(_Shown):
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
        return [f"deploy path: {c.deploy_path}", f"region: {c.region}", f"bucket: {c.bucket}",
                f"SageMaker role: {c.sagemaker_role_arn}",
                f"CodeBuild role: {c.codebuild_role_arn or '(not set: needed by notebooks 01 and 03)'}",
                *self.notes, f"saved to {self.saved_to}"]


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
        running = workshop.rehearsal.emulator_url()
        if running and not reset:
            endpoints_up = [p.what for p in workshop.rehearsal.status() if p.running and p.what.startswith("local endpoint")]
            notes.append(f"kept the running rehearsal: AWS emulator at {running}"
                         + (f" and {len(endpoints_up)} local endpoint(s)" if endpoints_up else "")
                         + "; what notebooks 01-06 made is still there (tick the reset box to start over)")
        else:
            workshop.forget_clients()
            url, leftovers = workshop.mode.start_fresh()
            notes.append(f"started a fresh rehearsal: AWS emulator (moto server) at {url}, keep-alive "
                         f"{rehearsal.KEEP_ALIVE_S // 3600} h"
                         + (f"; stopped the previous one ({', '.join(leftovers)})" if leftovers else ""))
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
    what = (f"requests over TLS only, captured requests expiring after {hygiene.CAPTURE_EXPIRY_DAYS} days and "
            f"unfinished uploads after {hygiene.INCOMPLETE_UPLOAD_DAYS}"
            + (", every object encrypted with the configured KMS key" if config.kms_key_arn else ""))
    if config.mode == "local":  # the emulator answers plain HTTP, which the TLS-only policy would refuse
        lifecycle = [argv for argv in commands if argv[2] != "put-bucket-policy"]
        workshop.mode.run_as_administrator(lifecycle, config.region)
        return (f"the administrator's lines give the bucket {what}; the lifecycle's ran against the emulator:\n"
                + "\n".join("  " + admin.shell(argv) for argv in commands)
                + "\nNot exercised locally: the TLS-only bucket policy (the emulator answers plain HTTP)")
    return (f"an administrator gives the bucket {what}:\n" + "\n".join("  " + admin.shell(argv) for argv in commands))


def tag_bucket(s3, bucket: str, written: PolicyFiles) -> str:
    """Tag a bucket just created; a refusal becomes a note (the tags only label it: nothing deletes by tag)."""
    try:
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": names.tag_list(names.WORKSHOP_TAGS)})
        return ""
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") not in ACCESS_DENIED:
            raise
        return (f"the bucket has no workshop tags: s3:PutBucketTagging was refused ({error.get('Code')}). "
                "AmazonSageMakerFullAccess does not grant it, "
                f"{written.files[OPERATOR_POLICY_FILE].name} does; the tags only label the bucket "
                "(08_cleanup deletes it by name), so nothing else depends on them")


def _error(exc) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _role_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _same_document(found, wanted: dict) -> bool:
    """Whether a policy document IAM returned (a dict, or URL-encoded JSON) is ``wanted``."""
    if isinstance(found, str):
        found = json.loads(urllib.parse.unquote(found))
    return json.dumps(found, sort_keys=True) == json.dumps(wanted, sort_keys=True)


def _get_role(iam, name: str, next_step: str) -> dict | None:
    """The role (GetRole), None if it does not exist; a refusal stops with what to do next."""
    try:
        return iam.get_role(RoleName=name)["Role"]
    except ClientError as exc:
        code, message = _error(exc)
        if code == "NoSuchEntity":
            return None
        if code in ACCESS_DENIED:
            raise StepError(f"could not check that the IAM role {name} exists ({code}: {message}). "
                            f"{next_step}") from None
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
    attach = f"Next: {_attach_instruction(config, folder)}, then run this cell again"
    create_it = (f"Or an administrator creates the role from {trust} and {permissions_file} (aws iam create-role "
                 f"--role-name {name} --assume-role-policy-document file://{trust}; aws iam put-role-policy "
                 f"--role-name {name} --policy-name {name} --policy-document file://{permissions_file}); then paste "
                 "its ARN into the box above and run this cell again, or set WORKSHOP_CODEBUILD_ROLE_ARN")
    notes: list[str] = []
    if wanted and _role_name(wanted) != name:
        # Someone else's role: the operator policy must name it (to check and pass it); never changed.
        config = config.replace(codebuild_role_arn=wanted)
        config.check()
        rewritten = _policies_name(workshop, config, account, notes)
        found = _get_role(iam, _role_name(wanted), attach if not rewritten else
                          f"{rewritten}. {attach}")
        if found is None:
            raise StepError(f"the CodeBuild role {wanted} (from {origin}) does not exist: paste the ARN of an "
                            f"existing role, or empty the box to let this cell create {name}")
        notes.insert(0, f"CodeBuild role: {found['Arn']} from {origin}; it exists (the workshop changes only the "
                     "role it creates)")
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
    note = (f"wrote {written.files[OPERATOR_POLICY_FILE]} again: it now lets you check and pass {wanted} to CodeBuild"
            + ("" if config.mode == "local" else "; attach this version in place of the last one"))
    notes.append(note)
    return note


def _existing_own_role(iam, config: WorkshopConfig, account: str, notes: list[str], wanted: str,
                       attach: str, create_it: str, trust_file: Path) -> dict:
    """The workshop's CodeBuild role, made to exist with the current trust policy and permissions."""
    name = policies.CODEBUILD_ROLE_NAME
    trust = policies.codebuild_trust_policy(config, account)
    found = _get_role(iam, name, f"{attach}. {create_it}")
    created = found is None
    boundary = policies.boundary_policy_arn(config.region, account)
    try:
        if created:
            found = roles.create(iam, name, trust, boundary)
            notes.append((f"the CodeBuild role {wanted} no longer existed (08_cleanup deletes it): created it again"
                          if wanted else f"created the IAM role {name}")
                         + " (trusted by CodeBuild for the workshop's two projects)")
        elif not _same_document(found.get("AssumeRolePolicyDocument", {}), trust):
            # The operator may not rewrite a trust policy (it could make the role trust anyone): an administrator does.
            notes.append(f"the IAM role {name} exists, but its trust policy is not the current one (made by an "
                         "earlier version of the workshop); an administrator replaces it: aws iam "
                         f"update-assume-role-policy --role-name {name} --policy-document "
                         f"file://{trust_file}")
        else:
            notes.append(f"the IAM role {name} exists and trusts CodeBuild for the workshop's two projects")
        if not created and roles.keep_bounded(iam, found, boundary):
            notes.append(f"the IAM role {name} was given the workshop's permissions boundary {boundary}")
    except ClientError as exc:
        code, message = _error(exc)
        if code not in ACCESS_DENIED:
            raise
        verb = "create" if created else "update the trust policy of"
        raise StepError(f"could not {verb} the CodeBuild service role {name} ({code}: {message}). {attach}. "
                        f"{create_it}") from None
    try:
        roles.put_permissions(iam, name, policies.codebuild_service_role_policy(config, account))
    except ClientError as exc:
        code, message = _error(exc)
        if code not in ACCESS_DENIED:
            raise
        if created:
            raise StepError(f"created the CodeBuild service role {name}, but could not give it its permissions "
                            f"({code}: {message}). {attach}") from None
        notes.append(f"could not bring the permissions of {name} up to date ({code}); the ones it has are kept "
                     "(an administrator can apply codebuild-service-role-policy.json to it)")
    return found


def _local(workshop: Workshop) -> rehearsal.Rehearsal | None:
    return workshop.rehearsal if workshop.config.mode == "local" else None


def _create_bucket_request(config: WorkshopConfig) -> dict:
    request = {"Bucket": config.bucket}
    if config.region != "us-east-1":
        request["CreateBucketConfiguration"] = {"LocationConstraint": config.region}
    return api.validate("s3", "CreateBucket", request)
