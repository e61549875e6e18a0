"""What an administrator runs, once per account, so that the documents notebook 00 writes reach a real account.

The operator's permissions go to the participant's role as customer managed policies, one per document:
IAM allows 10,240 characters for all inline policies of a role together, which the operator documents
exceed, while each managed policy has 6,144 of its own and a role takes 10 of them (IAM and AWS STS quotas).
The permissions boundary of the roles the workshop creates is one more managed policy. ``commands`` are the
AWS CLI lines in the order an account accepts them; ``update_commands`` move an existing policy to a new
version. ``call_of`` reads such a line back into the API call it makes (botocore's model decides the
operation and the parameters), which is how the local rehearsal runs the very lines notebook 00 prints.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from botocore import xform_name

from ..errors import InvalidInput
from ..name_rules import service_model
from . import calls, policies
from .arns import partition
from .role_boundary import BOUNDARY_POLICY_PATH

POLICY_PATH = BOUNDARY_POLICY_PATH
BOUNDARY_FILE = "role-boundary-policy.json"
MANAGED_POLICIES_PER_ROLE = 10  # IAM's default quota


def operator_files() -> list[str]:
    """The operator's documents, operator-policy.json first."""
    found = [name for name in policies.POLICY_FILES if name.startswith("operator-")]
    return sorted(found, key=lambda name: (name != "operator-policy.json", name))


def policy_name(file_name: str) -> str:
    """``operator-policy.json`` -> ``decision-workshop-operator``; the boundary keeps its documented name."""
    return "decision-workshop-" + file_name.removesuffix(".json").removesuffix("-policy")


def policy_arn(region: str, account: str, file_name: str) -> str:
    return f"arn:{partition(region)}:iam::{account}:policy{POLICY_PATH}{policy_name(file_name)}"


def _create(folder: Path, file_name: str) -> list[str]:
    return [
        "aws",
        "iam",
        "create-policy",
        "--policy-name",
        policy_name(file_name),
        "--path",
        POLICY_PATH,
        "--policy-document",
        f"file://{Path(folder) / file_name}",
    ]


def commands(folder: str | Path, role_name: str, region: str, account: str) -> list[list[str]]:
    """Create the boundary and each operator policy, then attach the operator policies to ``role_name``."""
    files = operator_files()
    if len(files) + 1 > MANAGED_POLICIES_PER_ROLE:  # the role's own AWS managed policy counts too
        raise InvalidInput(
            f"{len(files)} operator policies and the role's own exceed IAM's "
            f"{MANAGED_POLICIES_PER_ROLE} managed policies per role"
        )
    return (
        [_create(Path(folder), BOUNDARY_FILE)]
        + [_create(Path(folder), name) for name in files]
        + [
            [
                "aws",
                "iam",
                "attach-role-policy",
                "--role-name",
                role_name,
                "--policy-arn",
                policy_arn(region, account, name),
            ]
            for name in files
        ]
    )


def update_commands(folder: str | Path, region: str, account: str, files: Iterable[str]) -> list[list[str]]:
    """A new default version of each existing policy (IAM keeps five: delete the oldest first when full)."""
    return [
        [
            "aws",
            "iam",
            "create-policy-version",
            "--policy-arn",
            policy_arn(region, account, name),
            "--policy-document",
            f"file://{Path(folder) / name}",
            "--set-as-default",
        ]
        for name in files
    ]


def shell(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def call_of(argv: Sequence[str]) -> tuple[str, str, dict[str, Any]]:
    """``aws <service> <command> --option value ...`` as (service, Operation, params), checked by botocore;
    ``file://`` values are read as the CLI reads them, flags without a value are True."""
    if len(argv) < 3 or argv[0] != "aws":
        raise InvalidInput(f"not an AWS CLI command: {shell(argv)}")
    service = {"s3api": "s3"}.get(argv[1], argv[1])
    model = service_model(service)
    operation = {xform_name(name, "-"): name for name in model.operation_names}.get(argv[2])
    if operation is None:
        raise InvalidInput(f"{service} has no command {argv[2]!r}")
    members = model.operation_model(operation).input_shape.members
    options = {xform_name(name, "-"): name for name in members}
    params: dict[str, Any] = {}
    rest = list(argv[3:])
    while rest:
        option = rest.pop(0)
        member = options.get(option.removeprefix("--"))
        if not option.startswith("--") or member is None:
            raise InvalidInput(f"{service} {argv[2]} has no option {option!r}")
        if members[member].type_name == "boolean":
            params[member] = True
            continue
        value = rest.pop(0)
        if value.startswith("file://"):
            value = Path(value.removeprefix("file://")).read_text()
        # a structure (a lifecycle configuration, say) is given as JSON, as the CLI takes it
        params[member] = json.loads(value) if members[member].type_name in ("structure", "list") else value
    return service, operation, calls.validate(service, operation, params)


__all__ = [
    "BOUNDARY_FILE",
    "POLICY_PATH",
    "call_of",
    "commands",
    "operator_files",
    "policy_arn",
    "policy_name",
    "shell",
    "update_commands",
]
