"""The roles the operator creates (the CodeBuild service role, the deadlines' role) and their permissions
boundary: the operator may create them and change their permissions only with the workshop's boundary on
them, and the boundary caps whatever their own policies grant.
"""

from __future__ import annotations

from typing import Any

from ..config import WorkshopConfig
from .arns import partition, role_arn
from .images import DEFAULT_DLC_ACCOUNT, DLC_ACCOUNTS
from .policy_scope import Scope, as_scope
from .service_roles import CODEBUILD_ROLE_NAME, scheduler_role_arn, scheduler_role_policy
from .statements import ECR_PULL, ECR_PUSH, LOG_WRITE, allow, allow_unscoped, in_account, policy_document

BOUNDARY_POLICY_NAME = "decision-workshop-role-boundary"
BOUNDARY_POLICY_PATH = "/decision-workshop/"
# The IAM actions that carry the iam:PermissionsBoundary condition key for a role (IAM's service
# authorization reference); on any other action the key is absent, so a condition on it never holds there.
BOUNDED_ROLE_ACTIONS = (
    "iam:CreateRole",
    "iam:PutRolePolicy",
    "iam:DeleteRolePolicy",
    "iam:AttachRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePermissionsBoundary",
)


def boundary_policy_arn(region: str, account: str) -> str:
    """The managed policy an administrator creates from role-boundary-policy.json (IAM ARNs name no region)."""
    return f"arn:{partition(region)}:iam::{account}:policy{BOUNDARY_POLICY_PATH}{BOUNDARY_POLICY_NAME}"


def workshop_role_arns(s: Scope) -> list[str]:
    """The roles the operator may create: the CodeBuild service role (by its known name) and the deadlines' role."""
    return [role_arn(s.region, s.account, CODEBUILD_ROLE_NAME), scheduler_role_arn(s.region, s.account)]


def role_boundary_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """The permissions boundary of the roles the operator creates: what their own policies may ever grant,
    written from patterns (any region, any bucket of this account, endpoints by the workshop's tag), so the one
    boundary an administrator creates per account still holds after a change of region, bucket or endpoint
    names. Whatever the operator writes into either role, it can never do more than this."""
    s = as_scope(config, account_id, **options)
    p, account = s.partition, s.account
    groups = [
        f"arn:{p}:logs:*:{account}:log-group:/aws/codebuild/{project}{tail}"
        for project in s.codebuild_projects
        for tail in ("", ":*")
    ]
    dlc_accounts = sorted({DEFAULT_DLC_ACCOUNT, *DLC_ACCOUNTS.values()})
    deadlines = scheduler_role_policy(s)["Statement"]
    return policy_document(
        [
            allow("CodeBuildLogs", LOG_WRITE, groups),
            allow(
                "CodeBuildBucket",
                [
                    "s3:GetObject",
                    "s3:GetObjectVersion",
                    "s3:GetBucketAcl",
                    "s3:GetBucketLocation",
                    "s3:PutObject",
                    "s3:AbortMultipartUpload",
                ],
                f"arn:{p}:s3:::*",
                in_account(s),
            ),
            allow_unscoped("CodeBuildEcrLogin", "ecr:GetAuthorizationToken"),
            allow(
                "CodeBuildPullDlc",
                ECR_PULL,
                [
                    f"arn:{p}:ecr:*:{dlc}:repository/{repository}"
                    for dlc in dlc_accounts
                    for repository in s.build_base_repositories
                ],
            ),
            allow(
                "CodeBuildPushImage",
                (*ECR_PULL, *ECR_PUSH, "ecr:DescribeImages"),
                [f"arn:{p}:ecr:*:{account}:repository/{s.ecr_repository}"],
            ),
            # An organisation's key, should one be configured later: only as S3 uses it, for this account's keys.
            allow(
                "CodeBuildBucketKey",
                ["kms:Decrypt", "kms:GenerateDataKey"],
                f"arn:{p}:kms:*:{account}:key/*",
                {"StringLike": {"kms:ViaService": "s3.*"}},
            ),
            *({**statement, "Sid": "Deadlines" + statement["Sid"]} for statement in deadlines),
        ]
    )


def operator_role_statements(s: Scope) -> list[dict[str, Any]]:
    """What the operator may do with the workshop's roles: create them and change their permissions only
    with the workshop's boundary on them, never remove or replace that boundary; read, tag and delete them
    (actions IAM gives no boundary key, and which add no permission to a role)."""
    roles = workshop_role_arns(s)
    boundary = boundary_policy_arn(s.region, s.account)
    return [
        allow(
            "ManageRolesWithinBoundary",
            BOUNDED_ROLE_ACTIONS,
            roles,
            {"ArnEquals": {"iam:PermissionsBoundary": boundary}},
        ),
        # No iam:UpdateAssumeRolePolicy: it would let the operator make either role trust any principal, and
        # the trust policies hold in every region, so nothing needs rewriting after a change of region.
        allow("ReadAndRetireRoles", ["iam:GetRole", "iam:TagRole", "iam:ListRoleTags", "iam:DeleteRole"], roles),
        {
            "Sid": "KeepRoleBoundary",
            "Effect": "Deny",
            "Action": ["iam:DeleteRolePermissionsBoundary"],
            "Resource": roles,
        },
        {
            "Sid": "NoOtherBoundary",
            "Effect": "Deny",
            "Action": ["iam:PutRolePermissionsBoundary"],
            "Resource": roles,
            "Condition": {"ArnNotEquals": {"iam:PermissionsBoundary": boundary}},
        },
    ]


def operator_roles_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """The operator's permissions on the workshop's roles, attached beside operator-policy.json."""
    return policy_document(operator_role_statements(as_scope(config, account_id, **options)))
