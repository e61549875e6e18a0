"""The roles the workshop's AWS services assume, and what each may do:

* the **CodeBuild service role** (``WorkshopConfig.codebuild_role_arn``): what the two buildspecs do while
  they run: read the source zip, write the model package, pull the DLC, push the decision image, write the
  build logs;
* the **SageMaker execution role** (``WorkshopConfig.sagemaker_role_arn``): what an endpoint needs to start:
  read ``model.tar.gz``, pull its image, write its logs and captures (plus, opt-in, what a Batch Transform
  job needs);
* the **deadlines' role**, which EventBridge Scheduler assumes to delete an endpoint at its deadline
  (``spend_guard``).

Each builder is pure: it takes the config (and the account id, when no role ARN in the config carries it)
or a ``Scope``, and returns a policy document as a dict.
"""

from __future__ import annotations

from typing import Any

from .. import name_rules
from ..config import WorkshopConfig
from .arns import cloudwatch_alarm_arn, ecr_repository_arn, role_arn, s3_bucket_arn, s3_object_arn
from .inference_components import component_name
from .kms_statements import key_statements
from .policy_scope import BATCH_OUTPUT_FOLDER, CAPTURE_FOLDER, MODEL_FOLDER, Scope, as_scope
from .statements import (
    ECR_PULL,
    ECR_PUSH,
    LOG_WRITE,
    SAGEMAKER_SCALING,
    allow,
    allow_unscoped,
    in_account,
    log_group_resources,
    policy_document,
    service_trust,
)

# The CodeBuild service role notebook 00 creates when the operator may (steps.ensure_codebuild_role).
CODEBUILD_ROLE_NAME = "decision-workshop-codebuild"


def codebuild_role_of(s: Scope) -> str:
    """The CodeBuild role the projects run with: the configured ARN, else the one notebook 00 creates."""
    return s.codebuild_role_arn or role_arn(s.region, s.account, CODEBUILD_ROLE_NAME)


def codebuild_service_role_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """What the model-package and image-build projects do while they run, and nothing else."""
    s = as_scope(config, account_id, **options)
    bucket = s3_bucket_arn(s.bucket, s.region)
    own_repo = ecr_repository_arn(s.region, s.account, s.ecr_repository)
    dlc_repos = [ecr_repository_arn(s.region, s.dlc_account, r) for r in s.build_base_repositories]
    return policy_document(
        [
            allow(
                "BuildLogs", LOG_WRITE, log_group_resources(s, (f"/aws/codebuild/{p}" for p in s.codebuild_projects))
            ),
            allow(
                "ReadBuildSource",
                ["s3:GetObject", "s3:GetObjectVersion"],
                [s3_object_arn(s.bucket, s.source_key_pattern, s.region)],
                in_account(s),
            ),
            allow("SourceBucketLocation", ["s3:GetBucketAcl", "s3:GetBucketLocation"], [bucket], in_account(s)),
            # model-package.yml: `aws s3 cp` of model.tar.gz (multipart) and the manifest under the prefix.
            allow(
                "WriteModelPackage",
                ["s3:PutObject", "s3:AbortMultipartUpload"],
                [s3_object_arn(s.bucket, s.key_pattern(MODEL_FOLDER), s.region)],
                in_account(s),
            ),
            allow_unscoped("EcrLogin", "ecr:GetAuthorizationToken"),
            # image-build.yml: FROM the digest-pinned DLC in the region's DLC registry account.
            allow("PullDlcBaseImage", ECR_PULL, dlc_repos),
            # image-build.yml: docker push, then describe-images for the pushed digest.
            allow("PushDecisionImage", (*ECR_PULL, *ECR_PUSH, "ecr:DescribeImages"), [own_repo]),
            *key_statements(s, "OrganisationKey", via_s3=("kms:Decrypt", "kms:GenerateDataKey")),
        ]
    )


def sagemaker_execution_role_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """What an endpoint and notebook 07's transform job need to start and run (without the job's input listing,
    output and logs with ``batch_transform=False``)."""
    s = as_scope(config, account_id, **options)
    repos = [ecr_repository_arn(s.region, s.account, s.ecr_repository)]
    repos += [ecr_repository_arn(s.region, s.dlc_account, r) for r in s.dlc_repositories]
    groups = [f"/aws/sagemaker/Endpoints/{name}" for name in s.endpoint_names]
    if s.batch_transform:
        groups.append("/aws/sagemaker/TransformJobs")
    statements = [
        allow("ReadModelData", ["s3:GetObject"], [s3_object_arn(s.bucket, s.key_pattern(), s.region)], in_account(s)),
        # Data capture: SageMaker writes the decision endpoints' sampled requests and answers here.
        allow(
            "WriteCaptures",
            ["s3:PutObject"],
            [s3_object_arn(s.bucket, s.key_pattern(CAPTURE_FOLDER), s.region)],
            in_account(s),
        ),
        allow_unscoped("EcrLogin", "ecr:GetAuthorizationToken"),
        # The standard endpoint runs the DLC itself; the decision endpoints run the child image.
        allow("PullImages", ECR_PULL, repos),
        allow("ContainerLogs", (*LOG_WRITE, "logs:DescribeLogStreams"), log_group_resources(s, groups)),
        allow_unscoped("EndpointMetrics", "cloudwatch:PutMetricData"),
        # A blue/green update with auto-rollback: SageMaker reads the endpoint's alarms as this role.
        allow(
            "RollbackAlarms",
            ["cloudwatch:DescribeAlarms"],
            [cloudwatch_alarm_arn(s.region, s.account, f"{name}/*") for name in s.endpoint_names],
        ),
    ]
    # The organisation's key: the model read, captures and transform output written through S3, the volume's grant.
    statements += key_statements(
        s,
        "OrganisationKey",
        via_s3=("kms:Decrypt", "kms:GenerateDataKey"),
        direct=("kms:DescribeKey", "kms:CreateGrant"),
    )
    if s.batch_transform:
        listed = [s.prefix, s.key_pattern()] if s.prefix else ["*"]
        statements += [
            allow(
                "ListTransformInput",
                ["s3:ListBucket"],
                [s3_bucket_arn(s.bucket, s.region)],
                in_account(s, {"StringLike": {"s3:prefix": listed}}),
            ),
            allow(
                "WriteTransformOutput",
                ["s3:PutObject", "s3:AbortMultipartUpload"],
                [s3_object_arn(s.bucket, s.key_pattern(BATCH_OUTPUT_FOLDER), s.region)],
                in_account(s),
            ),
        ]
    return policy_document(statements)


def codebuild_trust_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """Only CodeBuild, and only for the workshop's projects in this account, may assume the role: in any region
    (IAM roles are global), so a change of region never needs the trust rewritten."""
    s = as_scope(config, account_id, **options)
    return service_trust(
        "codebuild.amazonaws.com",
        {
            "StringEquals": {"aws:SourceAccount": s.account},
            "ArnLike": {
                "aws:SourceArn": [
                    f"arn:{s.partition}:codebuild:*:{s.account}:project/{p}" for p in s.codebuild_projects
                ]
            },
        },
    )


def sagemaker_trust_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """Only SageMaker, acting for this account, may assume the role."""
    s = as_scope(config, account_id, **options)
    return service_trust("sagemaker.amazonaws.com", {"StringEquals": {"aws:SourceAccount": s.account}})


# ---- the deadlines' role -------------------------------------------------------------------------------

SCHEDULER_ROLE_NAME = "decision-workshop-scheduler"
SCHEDULER_SERVICE = "scheduler.amazonaws.com"


def scheduler_role_arn(region: str, account: str) -> str:
    return role_arn(region, account, SCHEDULER_ROLE_NAME)


def workshop_tagged() -> dict[str, Any]:
    """The condition that a resource carries the workshop's tag (``name_rules.WORKSHOP_TAGS``)."""
    return {
        "StringEquals": {
            f"aws:ResourceTag/{name_rules.TAG_WORKSHOP}": name_rules.WORKSHOP_TAGS[name_rules.TAG_WORKSHOP]
        }
    }


def scheduler_role_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """What the deadlines' role may do: delete endpoints that carry the workshop's tag, whatever their name and
    region (the role is one per account, so it never changes from one deploy to the next), and deregister a
    SageMaker variant's auto scaling, which deleting a scaled endpoint requires of the caller (SageMaker guide,
    "Delete endpoints configured for auto scaling"); and delete the decision model's inference component that a
    scale-to-zero endpoint hosts (its deadline's first schedule), by the component's name in any region.

    The component is scoped by name, not by tag: the local rehearsal cannot read an inference component's tags (its
    stand-in answers what the emulator lacks), and a grant it cannot audit would be one the rehearsal never checks."""
    s = as_scope(config, account_id, **options)
    components = "*" + component_name("e").removeprefix("e")  # every endpoint's: <endpoint>-decision
    return policy_document(
        [
            allow(
                "DeleteWorkshopEndpoints",
                ["sagemaker:DeleteEndpoint"],
                [f"arn:{s.partition}:sagemaker:*:{s.account}:endpoint/*"],
                workshop_tagged(),
            ),
            allow(
                "DeleteWorkshopComponents",
                ["sagemaker:DeleteInferenceComponent"],
                [f"arn:{s.partition}:sagemaker:*:{s.account}:inference-component/{components}"],
            ),
            allow(
                "DeregisterScaledVariants", ["application-autoscaling:DeregisterScalableTarget"], "*", SAGEMAKER_SCALING
            ),
        ]
    )


def scheduler_trust_policy(
    config: WorkshopConfig | Scope, account_id: str | None = None, **options: Any
) -> dict[str, Any]:
    """Only EventBridge Scheduler, acting for this account, may assume the deadlines' role."""
    s = as_scope(config, account_id, **options)
    return service_trust(SCHEDULER_SERVICE, {"StringEquals": {"aws:SourceAccount": s.account}})
