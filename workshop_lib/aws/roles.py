"""The IAM roles the operator creates (the CodeBuild service role, the deadlines' role), always under the
workshop's permissions boundary (``role_boundary.role_boundary_policy``): the operator's documents allow
creating them and changing their permissions only with that boundary on them, so a role made before the
boundary existed is given it first. Thin senders around a boto3 IAM client; refusals are raised."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from ..errors import AwsFailure
from . import policies
from .iam import minified
from .role_boundary import BOUNDARY_POLICY_NAME, BOUNDARY_POLICY_PATH


def boundary_of(role: Mapping[str, Any]) -> str | None:
    """The permissions boundary's ARN of a GetRole/CreateRole ``Role``, or None."""
    return (role.get("PermissionsBoundary") or {}).get("PermissionsBoundaryArn")


def create(iam: Any, name: str, trust: Mapping[str, Any], boundary: str, *, description: str = "") -> dict[str, Any]:
    """CreateRole with the boundary in the same request; returns the new ``Role``. A boundary policy that
    does not exist yet (an administrator creates it once per account) is one line saying how."""
    try:
        role: dict[str, Any] = iam.create_role(
            **policies.create_role_request(name, trust, path="/", boundary=boundary, description=description)
        )["Role"]
        return role
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") not in ("NoSuchEntity", "InvalidInput") or boundary not in str(error.get("Message")):
            raise
        raise AwsFailure(
            f"IAM role {name} was not created: its permissions boundary {boundary} does not exist yet "
            f"({error.get('Code')}). An administrator creates it once per account from role-boundary-policy.json "
            f"(notebook 00 writes it): aws iam create-policy --policy-name {BOUNDARY_POLICY_NAME} "
            f"--path {BOUNDARY_POLICY_PATH} --policy-document file://role-boundary-policy.json"
        ) from None


def keep_bounded(iam: Any, role: Mapping[str, Any], boundary: str) -> bool:
    """Put ``boundary`` on an existing role that lacks it (made before the workshop used one); True if it did."""
    if boundary_of(role) == boundary:
        return False
    iam.put_role_permissions_boundary(RoleName=role["RoleName"], PermissionsBoundary=boundary)
    return True


def put_permissions(iam: Any, name: str, document: Mapping[str, Any]) -> None:
    """The role's one inline policy, named after it, replaced by ``document``."""
    iam.put_role_policy(RoleName=name, PolicyName=name, PolicyDocument=minified(document))


__all__ = ["boundary_of", "create", "keep_bounded", "put_permissions"]
