"""The administrator's part of notebook 00: the least-privilege documents written beside the config,
the AWS CLI lines an administrator runs once per account to attach them, and, in local mode, those
lines run against the emulator as an administrator would.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import name_rules
from ..aws import admin, managed_policies, policies
from ..config import WorkshopConfig
from ..display import row
from ..local import permissions
from ..local.modes import CALL_LOG, LocalMode
from .context import Shown, Text, Workshop

# What IAM's refusal looks like in each protocol (permissions.access_denied gives the same locally).
ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
OPERATOR_POLICY_FILE = "operator-policy.json"


def policy_folder(workshop: Workshop) -> Path:
    """Where notebook 00 writes the policy documents: ``policies/`` beside the config file."""
    return workshop.path.parent / "policies"


@dataclass(repr=False)
class PolicyFiles(Shown):
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
            lines.append(
                row(f"{statement.get('Sid', '')}: ", ", ".join([actions] if isinstance(actions, str) else actions))
            )
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
    role = role_name(config.sagemaker_role_arn) if config.sagemaker_role_arn else "<your-studio-role>"
    return admin.commands(folder.resolve(), role, config.region, account)


def attach_instruction(config: WorkshopConfig, folder: Path, account: str | None = None) -> str:
    """What an administrator runs to create (and later update) the documents in ``folder`` as policies."""
    account = account or name_rules.role_account(config.sagemaker_role_arn or "") or "<account-id>"
    lines = "\n".join("  " + admin.shell(argv) for argv in administrator_commands(config, folder, account))
    update = "\n".join(
        "  " + admin.shell(argv)
        for argv in admin.update_commands(
            folder.resolve(), config.region, account, [admin.BOUNDARY_FILE, *admin.operator_files()]
        )
    )
    return (
        f"an administrator runs, once per account (IAM and AWS STS quotas: managed policies of 6,144 characters "
        f"each, at most 10 per role):\n{lines}\nand, when notebook 00 wrote new versions of existing policies "
        f"(IAM keeps five versions: delete the oldest with aws iam delete-policy-version first):\n{update}\n"
    )


def apply_locally(workshop: Workshop, config: WorkshopConfig, folder: Path, account: str) -> list[str]:
    """Local mode: run the administrator's printed lines against the emulator, AWS's rules enforced, as the
    administrator would: all of them the first time, a new version of each changed document afterwards."""
    iam = workshop.clients.get("iam")
    with workshop.clients.acting_as(None):
        existing = {
            p["PolicyName"]: p for p in iam.list_policies(Scope="Local", PathPrefix=admin.POLICY_PATH)["Policies"]
        }
    commands = administrator_commands(config, folder, account)
    if existing:
        changed = [
            name
            for name in [admin.BOUNDARY_FILE, *admin.operator_files()]
            if admin.policy_name(name) in existing
            and not _same_version(iam, existing[admin.policy_name(name)], folder / name, workshop)
        ]
        commands = (
            [argv for argv in commands if argv[2] == "create-policy" and argv[4] not in existing]
            + admin.update_commands(folder.resolve(), config.region, account, changed)
            + [argv for argv in commands if argv[2] == "attach-role-policy"]
        )
    assert isinstance(workshop.mode, LocalMode)  # called in local mode only
    return workshop.mode.run_as_administrator(commands, config.region)


def _same_version(iam: Any, policy: Mapping[str, Any], path: Path, workshop: Workshop) -> bool:
    with workshop.clients.acting_as(None):
        version = iam.get_policy_version(PolicyArn=policy["Arn"], VersionId=policy["DefaultVersionId"])["PolicyVersion"]
        if same_document(version["Document"], json.loads(path.read_text())):
            return True
        versions = iam.list_policy_versions(PolicyArn=policy["Arn"])["Versions"]
        if len(versions) >= 5:  # IAM keeps five: the oldest non-default goes first, as the printed advice says
            oldest = min((v for v in versions if not v["IsDefaultVersion"]), key=lambda v: v["CreateDate"])
            iam.delete_policy_version(PolicyArn=policy["Arn"], VersionId=oldest["VersionId"])
    return False


def write_policies(workshop: Workshop, config: WorkshopConfig | None = None, account: str | None = None) -> PolicyFiles:
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
            how = (
                "local rehearsal as an administrator (WORKSHOP_PERSONA): every call is allowed; notebook 08's "
                "audit still holds each one to these documents"
            )
        else:
            how = (
                f"local rehearsal as a Studio participant: the rehearsal attached {names_} to the Studio role "
                f"{config.sagemaker_role_arn}, beside {managed_policies.sagemaker_full_access()}; from here a "
                "call goes through only if one of them allows it; the administrator's lines below ran against "
                f"the emulator first, as on AWS {attach_instruction(config, folder, account)}"
            )
    else:
        how = (
            f"if your role has only AmazonSageMakerFullAccess (Studio's usual): "
            f"{attach_instruction(config, folder, account)}"
            "; without them the bucket gets no tags and the CodeBuild role cell says what is missing"
        )
    return PolicyFiles(folder, files, how)


def role_name(arn: str) -> str:
    """The role's name, the last part of its ARN."""
    return arn.rsplit("/", 1)[-1]


def same_document(found: Any, wanted: dict[str, Any]) -> bool:
    """Whether a policy document IAM returned (a dict, or URL-encoded JSON) is ``wanted``."""
    if isinstance(found, str):
        found = json.loads(urllib.parse.unquote(found))
    return json.dumps(found, sort_keys=True) == json.dumps(wanted, sort_keys=True)
