"""The workshop's IAM documents as files: each one by name (``POLICY_FILES``), written as JSON an
administrator can paste into the IAM console or pass to ``aws iam create-policy`` (``write_policies``),
and the IAM requests that create them.

What each document holds lives beside it: the services' roles in ``service_roles``, the operator's
documents in ``operator_policies``, the roles' permissions boundary in ``role_boundary``; they are made
of ``statements`` (with ``SERVICE_REQUIRED_WILDCARDS``, the only unscoped grants, each with its reason)
over a ``policy_scope.Scope`` and the ARNs of ``arns``. Every document is checked against IAM's grammar
(``iam``) before it is written or sent; ``iam.evaluate`` answers "would this role be allowed to do X on Y?"
offline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import WorkshopConfig
from ..errors import InvalidInput
from . import calls
from .arns import role_arn
from .iam import check_policy_document, minified
from .operator_policies import (
    operator_deadlines_policy,
    operator_documents,
    operator_operations_policy,
    operator_policy,
)
from .policy_scope import MODEL_FOLDER, Scope, as_scope, scope
from .role_boundary import (
    BOUNDARY_POLICY_NAME,
    BOUNDARY_POLICY_PATH,
    boundary_policy_arn,
    operator_roles_policy,
    role_boundary_policy,
)
from .service_roles import (
    CODEBUILD_ROLE_NAME,
    codebuild_role_of,
    codebuild_service_role_policy,
    codebuild_trust_policy,
    sagemaker_execution_role_policy,
    sagemaker_trust_policy,
    scheduler_role_policy,
    scheduler_trust_policy,
)

# The principals the documents are for, as the local rehearsal's call log and audit label them.
OPERATOR, CODEBUILD, SAGEMAKER = "operator", "codebuild-service-role", "sagemaker-execution-role"
DEADLINES = "endpoint-deadline-role"

# File name -> (builder, what it is for).
POLICY_FILES = {
    "codebuild-service-role-policy.json": (codebuild_service_role_policy, "permissions of the CodeBuild service role"),
    "codebuild-trust-policy.json": (codebuild_trust_policy, "trust policy of the CodeBuild service role"),
    "sagemaker-execution-role-policy.json": (
        sagemaker_execution_role_policy,
        "permissions of the SageMaker execution role",
    ),
    "sagemaker-trust-policy.json": (sagemaker_trust_policy, "trust policy of the SageMaker execution role"),
    "operator-policy.json": (operator_policy, "permissions of whoever runs the notebooks (e.g. the Studio role)"),
    "operator-operations-policy.json": (
        operator_operations_policy,
        "permissions of whoever runs the notebooks, for alarms and safe updates",
    ),
    "operator-deadlines-policy.json": (
        operator_deadlines_policy,
        "permissions of whoever runs the notebooks, for the endpoint deadlines, "
        "the endpoints deployed under any name and an organisation's KMS key",
    ),
    "operator-roles-policy.json": (
        operator_roles_policy,
        "permissions of whoever runs the notebooks, on the roles the workshop creates",
    ),
    "role-boundary-policy.json": (
        role_boundary_policy,
        "permissions boundary of the roles the workshop creates "
        f"(an administrator creates it as the managed policy {BOUNDARY_POLICY_PATH}"
        f"{BOUNDARY_POLICY_NAME})",
    ),
    "scheduler-role-policy.json": (scheduler_role_policy, "permissions of the role the endpoint deadlines run as"),
    "scheduler-trust-policy.json": (scheduler_trust_policy, "trust policy of the endpoint deadlines' role"),
}


def policies(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, dict[str, Any]]:
    """Every document, by file name."""
    s = as_scope(config, account_id, **options)
    return {name: builder(s) for name, (builder, _) in POLICY_FILES.items()}


def write_policies(
    config: WorkshopConfig | Scope, out_dir: str | Path, account_id: str | None = None, **options: Any
) -> dict[str, Path]:
    """Write the four documents as JSON under ``out_dir`` (checked first); returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, document in policies(config, account_id, **options).items():
        check_policy_document(document, trust=name.endswith("-trust-policy.json"))
        path = out / name
        path.write_text(json.dumps(document, indent=2) + "\n")
        written[name] = path
    return written


def create_policy_request(
    name: str, document: Mapping[str, Any], *, description: str = "", path: str = "/decision-workshop/"
) -> dict[str, Any]:
    """IAM CreatePolicy for a permissions document, checked by botocore and by IAM's own rules."""
    check_policy_document(document)
    if not re.fullmatch(r"[\w+=,.@-]{1,128}", name):
        raise InvalidInput(f"policy name {name!r} is not valid: 1-128 letters, digits and +=,.@_-")
    text = minified(document)
    request = {
        "PolicyName": name,
        "Path": path,
        "PolicyDocument": text,
        "Description": description or f"decision workshop: {name}",
    }
    return calls.validate("iam", "CreatePolicy", request)


def create_role_request(
    name: str,
    trust: Mapping[str, Any],
    *,
    description: str = "",
    path: str = "/decision-workshop/",
    boundary: str | None = None,
) -> dict[str, Any]:
    """IAM CreateRole; ``boundary`` (the roles the operator creates: ``boundary_policy_arn``) sets the
    permissions boundary in the same request, as the operator's documents require."""
    check_policy_document(trust, trust=True)
    if not re.fullmatch(r"[\w+=,.@-]{1,64}", name):
        raise InvalidInput(f"role name {name!r} is not valid: 1-64 letters, digits and +=,.@_-")
    request = {
        "RoleName": name,
        "Path": path,
        "AssumeRolePolicyDocument": minified(trust),
        "Description": description or f"decision workshop: {name}",
    }
    if boundary:
        request["PermissionsBoundary"] = boundary
    return calls.validate("iam", "CreateRole", request)


# What the notebooks' steps reach through this module, beside its own names.
__all__ = [
    "CODEBUILD",
    "CODEBUILD_ROLE_NAME",
    "DEADLINES",
    "MODEL_FOLDER",
    "OPERATOR",
    "POLICY_FILES",
    "SAGEMAKER",
    "boundary_policy_arn",
    "codebuild_role_of",
    "codebuild_service_role_policy",
    "codebuild_trust_policy",
    "create_policy_request",
    "create_role_request",
    "operator_documents",
    "operator_policy",
    "policies",
    "role_arn",
    "role_boundary_policy",
    "sagemaker_execution_role_policy",
    "scheduler_role_policy",
    "scope",
    "write_policies",
]
