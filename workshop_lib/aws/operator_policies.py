"""What whoever runs the notebooks (the operator: a Studio execution role, a laptop's user) may do, in the
documents an administrator attaches: operator-policy.json, and beside it (IAM allows 6,144 characters per
managed policy) the operations', the deadlines' and the roles' documents.
"""

from __future__ import annotations

from typing import Any

from ..config import WorkshopConfig
from .alarms import DASHBOARD
from .arns import (
    SCHEDULE_GROUP,
    SCHEDULE_SUFFIX,
    autoscaling_alarm_arn,
    cloudwatch_alarm_arn,
    cloudwatch_dashboard_arn,
    codebuild_project_arn,
    ecr_repository_arn,
    role_arn,
    s3_bucket_arn,
    s3_object_arn,
    transform_job_arn,
)
from .inference_components import ZERO_ENDPOINT, alarm_name, component_name
from .kms_statements import key_statements
from .policy_scope import Scope, as_scope
from .role_boundary import operator_role_statements
from .service_roles import SCHEDULER_SERVICE, codebuild_role_of, scheduler_role_arn, workshop_tagged
from .statements import (
    AUTOSCALING_ACTIONS,
    AUTOSCALING_ROLE_PATH,
    AUTOSCALING_SERVICE,
    allow,
    allow_unscoped,
    in_account,
    log_group_resources,
    policy_document,
)

SAGEMAKER_RESOURCE_KINDS = ("model", "endpoint-config", "endpoint")
OPERATOR_SAGEMAKER_ACTIONS = (
    "sagemaker:CreateModel",
    "sagemaker:DescribeModel",
    "sagemaker:DeleteModel",
    "sagemaker:CreateEndpointConfig",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:DeleteEndpointConfig",
    "sagemaker:CreateEndpoint",
    "sagemaker:DescribeEndpoint",
    "sagemaker:DeleteEndpoint",
    "sagemaker:InvokeEndpoint",
    "sagemaker:AddTags",
    "sagemaker:ListTags",
)


def operator_policy(config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any) -> dict[str, Any]:
    """What whoever runs the notebooks (a Studio execution role, a laptop's user) does, and nothing else.

    Every call the notebooks make, held against this document in the local rehearsal
    (permissions.audit): the workshop bucket and prefix, the two CodeBuild projects and the roles
    they and the endpoints run with (PassRole only to the service that uses each), the ECR
    repository and the DLC registry's digests, the three endpoints with their configs and models,
    their and the builds' log groups, and the instance quotas notebook 00 reads.

    It always lets the operator pass the CodeBuild role (the configured one, or
    ``CODEBUILD_ROLE_NAME`` before it exists) and the SageMaker role, each only to its service.
    """
    s = as_scope(config, account_id, **options)
    region, account = s.region, s.account
    bucket = s3_bucket_arn(s.bucket, region)
    codebuild_role = codebuild_role_of(s)
    # SageMaker presents its ARNs to IAM in lower case, whatever case a name was given in.
    sagemaker = [
        f"arn:{s.partition}:sagemaker:{region}:{account}:{kind}/{name.lower()}"
        for name in s.endpoint_names
        for kind in SAGEMAKER_RESOURCE_KINDS
    ]
    groups = [f"/aws/sagemaker/Endpoints/{n}" for n in s.endpoint_names]
    groups += [f"/aws/codebuild/{p}" for p in s.codebuild_projects]
    statements = [
        allow(
            "WorkshopBucket",
            ["s3:CreateBucket", "s3:PutBucketTagging", "s3:GetBucketLocation", "s3:ListBucket", "s3:DeleteBucket"],
            [bucket],
            in_account(s),
        ),
        allow(
            "WorkshopObjects",
            ["s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            [s3_object_arn(s.bucket, s.key_pattern(), region)],
            in_account(s),
        ),
        allow(
            "CodeBuildProjects",
            [
                "codebuild:CreateProject",
                "codebuild:UpdateProject",
                "codebuild:DeleteProject",
                "codebuild:StartBuild",
                "codebuild:BatchGetBuilds",
                "codebuild:BatchGetProjects",
            ],
            [codebuild_project_arn(region, account, p) for p in s.codebuild_projects],
        ),
        # ListTagsForResource: notebook 08 deletes the repository only if it carries the workshop's tag.
        allow(
            "WorkshopRepository",
            [
                "ecr:CreateRepository",
                "ecr:TagResource",
                "ecr:DescribeRepositories",
                "ecr:DescribeImages",
                "ecr:BatchGetImage",
                "ecr:DeleteRepository",
                "ecr:ListTagsForResource",
            ],
            [ecr_repository_arn(region, account, s.ecr_repository)],
        ),
        allow(
            "ResolveDlcDigests",
            ["ecr:DescribeImages", "ecr:BatchGetImage"],
            [ecr_repository_arn(region, s.dlc_account, r) for r in s.dlc_repositories],
        ),
        allow("WorkshopEndpoints", OPERATOR_SAGEMAKER_ACTIONS, sagemaker),
        allow_unscoped("ListEndpoints", "sagemaker:ListEndpoints"),
        # Notebook 05's decision through SageMaker's OpenAI-compatible route (client/openai_route.py): its bearer
        # token; the call it carries is checked as InvokeEndpoint on the endpoint (WorkshopEndpoints).
        allow_unscoped("OpenAiRouteToken", "sagemaker:CallWithBearerToken"),
        # CreateLogGroup and PutRetentionPolicy: the groups made ahead of SageMaker and CodeBuild, with a retention.
        allow(
            "WorkshopLogs",
            ["logs:FilterLogEvents", "logs:DeleteLogGroup", "logs:CreateLogGroup", "logs:PutRetentionPolicy"],
            log_group_resources(s, groups),
        ),
        # A failed build shows the tail of its log (builds.log_tail).
        allow(
            "ReadBuildLogTails",
            ["logs:GetLogEvents"],
            log_group_resources(s, (f"/aws/codebuild/{p}" for p in s.codebuild_projects)),
        ),
        allow_unscoped("ListInstanceQuotas", "servicequotas:ListServiceQuotas"),
        allow_unscoped("ListDefaultInstanceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"),
        # Notebooks 00, 01 and 03 check that the role still exists before they use it.
        allow("CheckCodeBuildRole", ["iam:GetRole"], [codebuild_role]),
    ]
    # PassRole is there from the first document on, for the role's known name when no other ARN is
    # configured: the file an administrator attaches before the role exists must already let it be passed.
    for sid, role, service in (
        ("PassCodeBuildRole", codebuild_role, "codebuild.amazonaws.com"),
        ("PassSageMakerRole", s.sagemaker_role_arn, "sagemaker.amazonaws.com"),
    ):
        if role:
            statements.append(allow(sid, ["iam:PassRole"], [role], {"StringEquals": {"iam:PassedToService": service}}))
    return policy_document(statements)


def operator_operations_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """The operator's permissions for notebook 07 (operate): the endpoints' alarms (``<endpoint>/*``) and
    the workshop's dashboard, and the safe updates (``updates``): UpdateEndpoint on the workshop's
    endpoints, and the versions' models and configs, named ``<endpoint>-<version>``. A document of its own
    beside operator-policy.json (IAM's 6,144 characters per policy); whoever attaches one attaches all."""
    s = as_scope(config, account_id, **options)
    region, account = s.region, s.account
    versions = [
        f"arn:{s.partition}:sagemaker:{region}:{account}:{kind}/{name.lower()}-*"
        for name in s.endpoint_names
        for kind in ("model", "endpoint-config")
    ]
    return policy_document(
        [
            allow(
                "EndpointAlarms",
                [
                    "cloudwatch:PutMetricAlarm",
                    "cloudwatch:DescribeAlarms",
                    "cloudwatch:DeleteAlarms",
                    "cloudwatch:TagResource",
                ],
                [cloudwatch_alarm_arn(region, account, f"{name}/*") for name in s.endpoint_names],
            ),
            allow(
                "WorkshopDashboard",
                ["cloudwatch:PutDashboard", "cloudwatch:DeleteDashboards"],
                [cloudwatch_dashboard_arn(region, account, DASHBOARD)],
            ),
            # IAM checks UpdateEndpoint against the endpoint and against the endpoint config it moves to.
            allow(
                "UpdateEndpoints",
                ["sagemaker:UpdateEndpoint"],
                [
                    f"arn:{s.partition}:sagemaker:{region}:{account}:{kind}/{name.lower()}{suffix}"
                    for name in s.endpoint_names
                    for kind, suffix in (("endpoint", ""), ("endpoint-config", "-*"))
                ],
            ),
            allow(
                "EndpointVersions",
                OPERATOR_SAGEMAKER_ACTIONS[:6] + ("sagemaker:AddTags", "sagemaker:ListTags"),
                versions,
            ),
            *autoscaling_statements(s),
            allow(
                "TransformJobs",
                ["sagemaker:CreateTransformJob", "sagemaker:DescribeTransformJob", "sagemaker:AddTags"],
                [transform_job_arn(region, account, f"{name}-*") for name in s.endpoint_names],
            ),
        ]
    )


def autoscaling_statements(s: Scope) -> list[dict[str, Any]]:
    """Registering the decision endpoints' variants with Application Auto Scaling and tracking invocations per
    instance (notebook 07), and removing both (08): what the caller needs beside Application Auto Scaling's own
    actions: the endpoint read and its capacity changed, the alarms target tracking makes, and the service-
    linked role created on first use."""
    region, account = s.region, s.account
    return [
        *(allow_unscoped("AutoScaling" + action.split(":")[1], action) for action in AUTOSCALING_ACTIONS),
        allow(
            "ScaledEndpoints",
            ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpointWeightsAndCapacities"],
            [f"arn:{s.partition}:sagemaker:{region}:{account}:endpoint/{name.lower()}" for name in s.endpoint_names],
        ),
        # IAM checks DescribeEndpointConfig on the config's ARN: the endpoint's first config, or an update's version.
        allow(
            "ScaledEndpointConfigs",
            ["sagemaker:DescribeEndpointConfig"],
            [
                f"arn:{s.partition}:sagemaker:{region}:{account}:endpoint-config/{name.lower()}{suffix}"
                for name in s.endpoint_names
                for suffix in ("", "-*")
            ],
        ),
        allow(
            "TargetTrackingAlarms",
            ["cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms", "cloudwatch:DeleteAlarms"],
            [autoscaling_alarm_arn(region, account, name) for name in s.endpoint_names],
        ),
        allow(
            "AutoScalingServiceRole",
            ["iam:CreateServiceLinkedRole"],
            [role_arn(region, account, AUTOSCALING_ROLE_PATH)],
            {"StringEquals": {"iam:AWSServiceName": AUTOSCALING_SERVICE}},
        ),
    ]


def operator_documents(config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any) -> dict[str, Any]:
    """Every operator document as one (IAM unites the attached policies the same way), for evaluating
    calls offline: operator-policy.json, the deadlines', the operations' and the roles' statements."""
    s = as_scope(config, account_id, **options)
    return policy_document(
        operator_policy(s)["Statement"]
        + operator_deadline_statements(s)
        + operator_operations_policy(s)["Statement"]
        + operator_role_statements(s)
    )


# ---- the endpoint deadlines (spend_guard) and the endpoints deployed under any name --------------------------


def operator_deadline_statements(s: Scope) -> list[dict[str, Any]]:
    """What the operator needs for the deadlines: the workshop's schedules in any region (notebook 08 looks
    for those a region used earlier still holds), and passing their role to the scheduler only. The role
    itself is managed under ``operator_role_statements``. ``operator_deadlines_policy`` holds them."""
    role = scheduler_role_arn(s.region, s.account)
    # Any endpoint's deadline, by the name pattern: an endpoint deployed under another name gets one too, and
    # what the schedule may do is only what its role may (delete endpoints carrying the workshop's tag).
    schedules = [f"arn:{s.partition}:scheduler:*:{s.account}:schedule/{SCHEDULE_GROUP}/*{SCHEDULE_SUFFIX}"]
    return [
        allow(
            "EndpointDeadlines",
            [
                "scheduler:CreateSchedule",
                "scheduler:UpdateSchedule",
                "scheduler:GetSchedule",
                "scheduler:DeleteSchedule",
            ],
            schedules,
        ),
        allow(
            "PassSchedulerRole", ["iam:PassRole"], [role], {"StringEquals": {"iam:PassedToService": SCHEDULER_SERVICE}}
        ),
        *tagged_endpoint_statements(s),
        *scale_to_zero_statements(s),
        # The organisation's key (operator-policy.json is near IAM's 6,144 characters): the workshop's objects
        # written and read through S3, and the grant SageMaker makes for an endpoint's volume.
        *key_statements(
            s,
            "OrganisationKey",
            via_s3=("kms:Decrypt", "kms:GenerateDataKey"),
            direct=("kms:DescribeKey", "kms:CreateGrant"),
        ),
    ]


def tagged_endpoint_statements(s: Scope) -> list[dict[str, Any]]:
    """Endpoints deployed under any name (the sample's ``--name``, say) are the workshop's by its tag: notebook 08
    and ``workshop cleanup`` find them by their tags and delete them, with their configs and models."""
    arns = [f"arn:{s.partition}:sagemaker:{s.region}:{s.account}:{kind}/*" for kind in SAGEMAKER_RESOURCE_KINDS]
    return [
        allow("FindWorkshopEndpoints", ["sagemaker:ListTags"], arns),
        allow(
            "DeleteTaggedEndpoints",
            [
                "sagemaker:DescribeEndpoint",
                "sagemaker:DeleteEndpoint",
                "sagemaker:DescribeEndpointConfig",
                "sagemaker:DeleteEndpointConfig",
                "sagemaker:DescribeModel",
                "sagemaker:DeleteModel",
            ],
            arns,
            workshop_tagged(),
        ),
    ]


def scale_to_zero_statements(s: Scope) -> list[dict[str, Any]]:
    """The scale-to-zero endpoint (``inference_components``): its model, config and endpoint (and the log group
    notebook 08 deletes), its one inference component, and the alarms that scale the component's copies."""
    name = ZERO_ENDPOINT

    def arn(kind: str, resource: str) -> str:
        return f"arn:{s.partition}:sagemaker:{s.region}:{s.account}:{kind}/{resource}"

    return [
        allow(
            "ScaleToZeroEndpoint", OPERATOR_SAGEMAKER_ACTIONS, [arn(kind, name) for kind in SAGEMAKER_RESOURCE_KINDS]
        ),
        # IAM checks CreateInferenceComponent on the component and on the endpoint and model it names.
        allow(
            "CreateScaleToZeroComponent",
            ["sagemaker:CreateInferenceComponent"],
            [arn("inference-component", component_name(name)), arn("endpoint", name), arn("model", name)],
        ),
        allow(
            "ScaleToZeroComponent",
            [
                "sagemaker:DescribeInferenceComponent",
                "sagemaker:UpdateInferenceComponentRuntimeConfig",
                "sagemaker:DeleteInferenceComponent",
                "sagemaker:AddTags",
            ],
            [arn("inference-component", component_name(name))],
        ),
        allow(
            "ScaleToZeroLogs",
            ["logs:DeleteLogGroup"],
            log_group_resources(s, [f"/aws/sagemaker/Endpoints/{name}"]),
        ),
        # The step policy's alarm, and those target tracking makes (and deletes) with the caller's permission.
        allow(
            "ScaleToZeroAlarms",
            ["cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms", "cloudwatch:DeleteAlarms"],
            [
                cloudwatch_alarm_arn(s.region, s.account, alarm_name(name)),
                cloudwatch_alarm_arn(
                    s.region, s.account, f"TargetTracking-inference-component/{component_name(name)}-*"
                ),
            ],
        ),
    ]


def operator_deadlines_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """The operator's permissions for the endpoint deadlines and the endpoints deployed under any name, attached
    beside operator-policy.json.

    A document of its own because IAM allows 6,144 characters per managed policy, and operator-policy.json
    comes close to that with the longer regions' ARNs; whoever attaches the one attaches both.
    """
    return policy_document(operator_deadline_statements(as_scope(config, account_id, **options)))
