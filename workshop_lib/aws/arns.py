"""The ARNs and names the workshop's IAM documents grant on, built from a region, an account and a name.

Pure functions: the partition comes from the region (``aws-cn``, ``aws-us-gov``, else ``aws``), and a
SageMaker resource's ARN (``sagemaker_arn``) is written in lower case, as IAM evaluates it.
"""

from __future__ import annotations

import hashlib

from .. import name_rules
from ..config import check_resource_name
from ..errors import InvalidInput


def partition(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def s3_bucket_arn(bucket: str, region: str = "us-east-1") -> str:
    return f"arn:{partition(region)}:s3:::{bucket}"


def s3_object_arn(bucket: str, key: str, region: str = "us-east-1") -> str:
    return f"arn:{partition(region)}:s3:::{bucket}/{key}"


def ecr_repository_arn(region: str, account: str, repository: str) -> str:
    return f"arn:{partition(region)}:ecr:{region}:{account}:repository/{repository}"


def log_group_arn(region: str, account: str, group: str) -> str:
    return f"arn:{partition(region)}:logs:{region}:{account}:log-group:{group}"


def log_stream_arn(region: str, account: str, group: str, stream: str) -> str:
    return f"{log_group_arn(region, account, group)}:log-stream:{stream}"


def codebuild_project_arn(region: str, account: str, project: str) -> str:
    return f"arn:{partition(region)}:codebuild:{region}:{account}:project/{project}"


def role_arn(region: str, account: str, name: str) -> str:
    return f"arn:{partition(region)}:iam::{account}:role/{name}"


def sagemaker_arn(region: str, account: str, kind: str, name: str) -> str:
    """A SageMaker resource's ARN (``kind``: model, endpoint-config, endpoint, transform-job, ...)."""
    return f"arn:{partition(region)}:sagemaker:{region}:{account}:{kind}/{name.lower()}"


def endpoint_arn(region: str, account: str, endpoint_name: str) -> str:
    return sagemaker_arn(region, account, "endpoint", endpoint_name)


def transform_job_arn(region: str, account: str, job: str) -> str:
    return f"arn:{partition(region)}:sagemaker:{region}:{account}:transform-job/{job}"


def cloudwatch_alarm_arn(region: str, account: str, alarm: str) -> str:
    return f"arn:{partition(region)}:cloudwatch:{region}:{account}:alarm:{alarm}"


def cloudwatch_dashboard_arn(region: str, account: str, dashboard: str) -> str:
    return f"arn:{partition(region)}:cloudwatch::{account}:dashboard/{dashboard}"  # dashboards are global


def autoscaling_alarm_arn(region: str, account: str, endpoint_name: str, rest: str = "*") -> str:
    """The alarms target tracking makes for an endpoint's variant: ``TargetTracking-endpoint/<name>/...``."""
    return cloudwatch_alarm_arn(region, account, f"TargetTracking-endpoint/{endpoint_name}/{rest}")


# ---- the endpoints' scheduled deletions (spend_guard) -------------------------------------------------

SCHEDULE_GROUP = "default"
SCHEDULE_SUFFIX = "-deadline"


def schedule_name(endpoint_name: str) -> str:
    """``<endpoint>-deadline``; a name too long for the scheduler (64) keeps a hash of the endpoint's."""
    check_resource_name(endpoint_name, "endpoint")
    name = endpoint_name + SCHEDULE_SUFFIX
    if len(name) > 64:
        digest = hashlib.sha256(endpoint_name.encode()).hexdigest()[:8]
        name = f"{endpoint_name[: 64 - len(SCHEDULE_SUFFIX) - 9]}-{digest}{SCHEDULE_SUFFIX}"
    pattern, max_len = name_rules.service_rule("scheduler", "CreateSchedule", "Name")
    if not pattern.fullmatch(name) or len(name) > (max_len or 64):  # endpoint names are letters, digits, -
        raise InvalidInput(f"no schedule name can be made from endpoint name {endpoint_name!r}")
    return name


def schedule_arn(region: str, account: str, endpoint_name: str) -> str:
    return (
        f"arn:{partition(region)}:scheduler:{region}:{account}:schedule/{SCHEDULE_GROUP}/{schedule_name(endpoint_name)}"
    )


def delete_endpoint_target(region: str) -> str:
    """The universal target that calls SageMaker's DeleteEndpoint (global: no region, no account)."""
    return f"arn:{partition(region)}:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
