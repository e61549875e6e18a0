"""What IAM checks for each AWS call the workshop makes: ``needed`` turns a recorded call into its
permissions (action, resource ARN, request context), as IAM's service authorization reference lists them;
``cli_needed`` does the same for a command a buildspec runs with the CodeBuild role. The call log
(``permissions``) evaluates them as each call is made, and its audit afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .. import name_rules
from ..aws import arns, kms_statements, role_boundary, statements
from ..aws.images import parse_image_uri

Need = tuple[str, str, dict[str, Any]]  # (action, resource ARN, request context)


def _pass_role(role_arn: str | None, service: str) -> list[Need]:
    return [("iam:PassRole", role_arn, {"iam:PassedToService": service})] if role_arn else []


def _s3(call: str, params: Mapping[str, Any], region: str, owner: str | None, key: str | None = None) -> list[Need]:
    """``owner``: the bucket's account as IAM sees it (s3:ResourceAccount); None for another account's bucket,
    whose account the emulator does not name (no grant conditioned on the caller's account matches it).
    ``key``: the KMS key of the bucket's default encryption, which S3 uses as the caller."""
    needs = _s3_alone(call, params, region, owner)
    # A new object's data key, or an object's own key decrypted (a HEAD reads no data, an upload's parts reuse
    # the key its start made).
    kms = {
        "PutObject": "kms:GenerateDataKey",
        "CreateMultipartUpload": "kms:GenerateDataKey",
        "GetObject": "kms:Decrypt",
    }
    if key and call in kms:
        needs.append((kms[call], key, {"kms:ViaService": kms_statements.s3_service(region)}))
    return needs


def _s3_alone(call: str, params: Mapping[str, Any], region: str, owner: str | None) -> list[Need]:
    bucket = params.get("Bucket", "")
    bucket_arn = arns.s3_bucket_arn(bucket, region)
    key = params.get("Key", "")
    owned = {"s3:ResourceAccount": owner} if owner else {}
    if call in ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        return [("s3:PutObject", arns.s3_object_arn(bucket, key, region), owned)]
    if call == "AbortMultipartUpload":
        return [("s3:AbortMultipartUpload", arns.s3_object_arn(bucket, key, region), owned)]
    if call in ("GetObject", "HeadObject"):
        return [("s3:GetObject", arns.s3_object_arn(bucket, key, region), owned)]
    if call == "DeleteObject":
        return [("s3:DeleteObject", arns.s3_object_arn(bucket, key, region), owned)]
    if call == "DeleteObjects":
        return [
            ("s3:DeleteObject", arns.s3_object_arn(bucket, o["Key"], region), owned)
            for o in params.get("Delete", {}).get("Objects", [])
        ]
    if call in ("ListObjectsV2", "ListObjects", "HeadBucket"):
        return [("s3:ListBucket", bucket_arn, {"s3:prefix": params.get("Prefix", ""), **owned})]
    if call == "ListBuckets":
        return [("s3:ListAllMyBuckets", "*", {})]
    if call in ("PutBucketLifecycleConfiguration", "GetBucketLifecycleConfiguration"):
        call = call.replace("BucketLifecycleConfiguration", "LifecycleConfiguration")
    return [(f"s3:{call}", bucket_arn, owned)]  # CreateBucket, PutBucketTagging, GetBucketLocation, DeleteBucket


def _codebuild(call: str, params: Mapping[str, Any], region: str, account: str) -> list[Need]:
    def project(name: str) -> str:
        return arns.codebuild_project_arn(region, account, name)

    if call in ("CreateProject", "UpdateProject"):
        return [
            (f"codebuild:{call}", project(params["name"]), {}),
            *_pass_role(params.get("serviceRole"), "codebuild.amazonaws.com"),
        ]
    if call in ("StartBuild",):
        return [("codebuild:StartBuild", project(params["projectName"]), {})]
    if call == "BatchGetBuilds":  # a build id is "<project>:<uuid>"
        return [("codebuild:BatchGetBuilds", project(i.split(":")[0]), {}) for i in params.get("ids", [])]
    if call == "BatchGetProjects":
        return [("codebuild:BatchGetProjects", project(n), {}) for n in params.get("names", [])]
    return [(f"codebuild:{call}", project(params.get("name", "")), {})]  # DeleteProject


def _ecr(call: str, params: Mapping[str, Any], region: str, account: str) -> list[Need]:
    registry = params.get("registryId") or account
    names = params.get("repositoryNames") or [params.get("repositoryName", "")]
    needs: list[Need] = [(f"ecr:{call}", arns.ecr_repository_arn(region, registry, n), {}) for n in names]
    if call == "CreateRepository" and params.get("tags"):
        needs.append(("ecr:TagResource", needs[0][1], {}))
    if call == "GetAuthorizationToken":
        return [("ecr:GetAuthorizationToken", "*", {})]
    if call == "ListTagsForResource":
        return [("ecr:ListTagsForResource", params.get("resourceArn", ""), {})]
    return needs


_SAGEMAKER_KINDS = {
    "Model": "model",
    "EndpointConfig": "endpoint-config",
    "Endpoint": "endpoint",
    "TransformJob": "transform-job",
    "InferenceComponent": "inference-component",
}


def _sagemaker(call: str, params: Mapping[str, Any], region: str, account: str, facts: Mapping[str, Any]) -> list[Need]:
    if call in ("ListEndpoints", "ListInferenceComponents"):
        return [(f"sagemaker:{call}", "*", {})]  # list actions take no resource
    if call == "CallWithBearerToken":  # the route's bearer token names no resource; AWS scopes it by account
        return [
            ("sagemaker:CallWithBearerToken", "*", {"aws:ResourceAccount": account, "aws:PrincipalAccount": account})
        ]
    if call in ("ListTags", "AddTags"):
        kind_and_name = params["ResourceArn"].split(":", 5)
        kind_and_name[-1] = kind_and_name[-1].lower()  # as SageMaker presents its ARNs to IAM
        return [(f"sagemaker:{call}", ":".join(kind_and_name), {})]
    parsed = re.fullmatch(r"(Create|Describe|Delete|Update|Invoke)(\w+)", call)
    if parsed is None:
        raise ValueError(f"no IAM mapping for sagemaker:{call}; add it to iam_needs.needed")
    verb, kind = parsed.groups()
    if call == "InvokeEndpoint":
        verb, kind = "Invoke", "Endpoint"
    if call == "UpdateInferenceComponentRuntimeConfig":  # checked on the component it changes
        kind = "InferenceComponent"
    name = params.get(f"{kind}Name", "")
    arn = arns.sagemaker_arn(region, account, _SAGEMAKER_KINDS.get(kind, kind.lower()), name)
    tags = {f"aws:ResourceTag/{k}": v for k, v in (facts.get("resource_tags") or {}).items()}
    needs = [(f"sagemaker:{call}", arn, tags)]
    if call == "DeleteEndpoint" and facts.get("scaled_variants"):  # SageMaker deregisters them as the caller
        needs += [
            ("application-autoscaling:DeregisterScalableTarget", "*", _scaling_context("sagemaker"))
            for _ in facts["scaled_variants"]
        ]
    if verb == "Create" and params.get("Tags"):
        needs.append(("sagemaker:AddTags", arn, {}))
    if call == "CreateModel":
        needs += _pass_role(params.get("ExecutionRoleArn"), "sagemaker.amazonaws.com")
    if call == "UpdateEndpoint":  # IAM checks the endpoint and the endpoint config it moves to
        needs.append(
            (
                "sagemaker:UpdateEndpoint",
                arns.sagemaker_arn(region, account, "endpoint-config", params.get("EndpointConfigName", "")),
                {},
            )
        )
    return needs


def _logs(call: str, params: Mapping[str, Any], region: str, account: str) -> list[Need]:
    group = params.get("logGroupName", "")
    if params.get("logStreamName"):  # GetLogEvents reads one stream
        return [(f"logs:{call}", arns.log_stream_arn(region, account, group, params["logStreamName"]), {})]
    return [(f"logs:{call}", arns.log_group_arn(region, account, group), {})]


def _scheduler(call: str, params: Mapping[str, Any], region: str, account: str) -> list[Need]:
    if call in ("ListSchedules", "ListScheduleGroups"):
        return [(f"scheduler:{call}", "*", {})]  # list actions take no resource
    group = params.get("GroupName") or "default"
    arn = f"arn:{arns.partition(region)}:scheduler:{region}:{account}:schedule/{group}/{params.get('Name', '')}"
    needs: list[Need] = [(f"scheduler:{call}", arn, {})]
    if call in ("CreateSchedule", "UpdateSchedule"):
        needs += _pass_role((params.get("Target") or {}).get("RoleArn"), "scheduler.amazonaws.com")
    return needs


def _cloudwatch(call: str, params: Mapping[str, Any], region: str, account: str) -> list[Need]:
    if call in ("PutDashboard", "GetDashboard", "DeleteDashboards"):  # dashboards are global: no region
        dashboards = params.get("DashboardNames") or [params.get("DashboardName", "")]
        return [(f"cloudwatch:{call}", arns.cloudwatch_dashboard_arn(region, account, d), {}) for d in dashboards]
    if call == "PutMetricData":
        return [("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": params.get("Namespace", "")})]
    alarms = params.get("AlarmNames") or [params.get("AlarmName", "")]
    needs: list[Need] = [(f"cloudwatch:{call}", arns.cloudwatch_alarm_arn(region, account, a), {}) for a in alarms]
    if call == "PutMetricAlarm" and params.get("Tags"):
        needs.append(("cloudwatch:TagResource", needs[0][1], {}))
    return needs


def _autoscaling(call: str, params: Mapping[str, Any], region: str, account: str) -> list[Need]:
    """Application Auto Scaling names no resource IAM can know beforehand ("*"); registering a SageMaker variant
    also needs the endpoint read and its capacity changed and, on first use, the service-linked role; target
    tracking makes and deletes its alarms with the caller's permission."""
    action = f"application-autoscaling:{call}"
    context = (
        _scaling_context(params.get("ServiceNamespace", ""), params.get("ScalableDimension", ""))
        if action in statements.AUTOSCALING_WRITES
        else {}
    )
    needs = [(action, "*", context)]
    resource = params.get("ResourceId") or ""
    if resource.startswith("inference-component/") and params.get("PolicyType") != "StepScaling":
        # target tracking on a component's copies: its alarms, TargetTracking-inference-component/<name>-...
        alarm = arns.cloudwatch_alarm_arn(region, account, f"TargetTracking-{resource}-AlarmHigh-0")
        if call == "PutScalingPolicy":
            needs += [("cloudwatch:PutMetricAlarm", alarm, {}), ("cloudwatch:DescribeAlarms", alarm, {})]
        if call == "DeleteScalingPolicy":
            needs += [("cloudwatch:DeleteAlarms", alarm, {})]
        return needs
    match = re.fullmatch(r"endpoint/([^/]+)/variant/[^/]+", resource)
    if not match:
        return needs
    endpoint = match[1]
    if call == "RegisterScalableTarget":
        arn = arns.sagemaker_arn(region, account, "endpoint", endpoint)
        needs += [
            ("sagemaker:DescribeEndpoint", arn, {}),
            ("sagemaker:DescribeEndpointConfig", arn, {}),
            ("sagemaker:UpdateEndpointWeightsAndCapacities", arn, {}),
            (
                "iam:CreateServiceLinkedRole",
                arns.role_arn(region, account, statements.AUTOSCALING_ROLE_PATH),
                {"iam:AWSServiceName": statements.AUTOSCALING_SERVICE},
            ),
        ]
    alarm = arns.autoscaling_alarm_arn(region, account, endpoint, resource.split("/", 2)[2] + "-AlarmHigh-0")
    if call == "PutScalingPolicy":
        needs += [("cloudwatch:PutMetricAlarm", alarm, {}), ("cloudwatch:DescribeAlarms", alarm, {})]
    if call == "DeleteScalingPolicy":
        needs += [("cloudwatch:DeleteAlarms", alarm, {})]
    return needs


def _scaling_context(namespace: str, dimension: str = statements.SCALED_DIMENSION) -> dict[str, Any]:
    """The condition keys Application Auto Scaling's writes carry."""
    return {
        "application-autoscaling:service-namespace": namespace,
        "application-autoscaling:scalable-dimension": dimension,
    }


def _iam(call: str, params: Mapping[str, Any], region: str, account: str, boundaries: Mapping[str, str]) -> list[Need]:
    role = params.get("RoleName", "")
    action = f"iam:{call}"
    context = {}
    if action in role_boundary.BOUNDED_ROLE_ACTIONS:
        # The boundary the request sets, or (changing a role's permissions) the one the role has.
        given = (
            params.get("PermissionsBoundary")
            if call in ("CreateRole", "PutRolePermissionsBoundary")
            else boundaries.get(role)
        )
        if given:
            context["iam:PermissionsBoundary"] = given
    arn = f"arn:{arns.partition(region)}:iam::{account}:role/{role}"
    needs = [(action, arn, context)]
    if call == "CreateRole" and params.get("Tags"):
        needs.append(("iam:TagRole", arn, {}))
    return needs


def role_boundaries(calls: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each role's permissions boundary as the recorded calls (those not refused) left it."""
    found: dict[str, str] = {}
    for call in calls:
        if call.get("service") != "iam" or call.get("refused"):
            continue
        params = call.get("params") or {}
        role = params.get("RoleName", "")
        if call["operation"] in ("CreateRole", "PutRolePermissionsBoundary") and params.get("PermissionsBoundary"):
            found[role] = params["PermissionsBoundary"]
        elif call["operation"] in ("DeleteRolePermissionsBoundary", "DeleteRole"):
            found.pop(role, None)
    return found


def needed(
    call: Mapping[str, Any], region: str, account: str, boundaries: Mapping[str, str] | None = None
) -> list[Need]:
    """What IAM checks for one recorded call; [] for calls IAM always allows (sts:GetCallerIdentity).
    ``boundaries`` (role name -> boundary ARN, ``role_boundaries``) gives the roles' boundaries so far."""
    service, operation, params = call["service"], call["operation"], call.get("params") or {}
    facts = call.get("facts") or {}
    if service == "sts" and operation == "GetCallerIdentity":
        return []
    if service == "s3":
        return _s3(operation, params, region, facts.get("bucket_owner", account), facts.get("bucket_key"))
    if service == "codebuild":
        return _codebuild(operation, params, region, account)
    if service == "ecr":
        return _ecr(operation, params, region, account)
    if service == "sagemaker":
        return _sagemaker(operation, params, region, account, facts)
    if service == "logs":
        return _logs(operation, params, region, account)
    if service == "scheduler":
        return _scheduler(operation, params, region, account)
    if service == "monitoring":  # CloudWatch signs as "monitoring"
        return _cloudwatch(operation, params, region, account)
    if service == "application-autoscaling":
        return _autoscaling(operation, params, region, account)
    if service == "servicequotas" and operation in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
        return [(f"servicequotas:{operation}", "*", {})]  # no resource type to name
    if service == "servicequotas":
        return [
            (
                f"servicequotas:{operation}",
                f"arn:{arns.partition(region)}:servicequotas:{region}:"
                f"{account}:{params.get('ServiceCode', '')}/{params.get('QuotaCode', '')}",
                {},
            )
        ]
    if service == "iam":
        return _iam(operation, params, region, account, boundaries or {})
    raise ValueError(f"no IAM mapping for {service}:{operation}; add it to iam_needs.needed")


def cli_needed(argv: list[str], region: str, account: str) -> list[Need]:
    """What IAM checks for a command a buildspec runs with the CodeBuild role (``aws`` and ``docker``)."""

    def option(name: str) -> str:
        return argv[argv.index(name) + 1] if name in argv else ""

    plain = [a for a in argv if not a.startswith("--only-show-errors")]
    if plain[:3] == ["aws", "s3", "cp"]:
        bucket, key = name_rules.split_s3_uri(plain[4]) or ("", "")  # the build's own bucket: its account owns it
        return [("s3:PutObject", arns.s3_object_arn(bucket, key, region), {"s3:ResourceAccount": account})]
    if plain[:3] == ["aws", "ecr", "get-login-password"]:
        return [("ecr:GetAuthorizationToken", "*", {})]
    if plain[:3] == ["aws", "ecr", "describe-images"]:
        return [
            (
                "ecr:DescribeImages",
                arns.ecr_repository_arn(region, option("--registry-id") or account, option("--repository-name")),
                {},
            )
        ]
    if plain[:2] == ["docker", "build"]:  # pulls FROM the base image
        base = next(
            a.split("=", 1)[1]
            for i, a in enumerate(plain)
            if plain[i - 1] == "--build-arg" and a.startswith("BASE_IMAGE=")
        )
        ref = parse_image_uri(base)
        pulled = arns.ecr_repository_arn(region, ref.account or "", ref.repository)
        return [(a, pulled, {}) for a in statements.ECR_PULL]
    if plain[:2] == ["docker", "push"]:
        ref = parse_image_uri(plain[2])
        arn = arns.ecr_repository_arn(region, ref.account or "", ref.repository)
        return [(a, arn, {}) for a in ("ecr:BatchCheckLayerAvailability", *statements.ECR_PUSH)]
    if plain[:2] == ["docker", "login"]:
        return []  # the token from get-login-password is the permission
    raise ValueError(f"no IAM mapping for the build command {' '.join(argv[:3])}; add it to iam_needs.cli_needed")
