"""Least privilege: the two roles' policies allow the workshop's own calls and nothing broad.

The calls each role makes are derived from the library's own builders (the same
functions the notebooks' steps call), so a change in a bucket key, a log group or a
repository shows up here as a denied call. Policies are evaluated with the small
evaluator in ``workshop_lib.aws.policies``; the evaluator itself is checked first against
IAM's documented matching rules.
"""

from __future__ import annotations

import json
import re

import pytest

from workshop_lib.aws import (
    arns,
    build_projects,
    endpoints,
    hosting,
    iam,
    images,
    operator_policies,
    policies,
    policy_scope,
    service_roles,
    statements,
    transform,
    variants,
)
from workshop_lib.aws.arns import ecr_repository_arn, log_group_arn, log_stream_arn, s3_bucket_arn, s3_object_arn
from workshop_lib.aws.iam import allows, evaluate
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.config import WorkshopConfig, repo_root
from workshop_lib.errors import InvalidInput
from workshop_lib.models import PINNED_MODEL
from workshop_lib.packaging import MANIFEST_NAME

ACCOUNT = "111122223333"
OWN = {"s3:ResourceAccount": ACCOUNT}  # the bucket's owner, as IAM sees it
REGION = "eu-west-1"
DIGEST = "sha256:" + "cd" * 32
CONFIG = WorkshopConfig(
    region=REGION,
    bucket="acme-decision-workshop",
    prefix="decision-workshop",
    sagemaker_role_arn=f"arn:aws:iam::{ACCOUNT}:role/WorkshopSageMaker",
    codebuild_role_arn=f"arn:aws:iam::{ACCOUNT}:role/WorkshopCodeBuild",
)
BUILD_ID = "sagemaker-decision-workshop-model-package:0b7e1c0a-1111-2222-3333-444455556666"


def codebuild_policy(config=CONFIG):
    return service_roles.codebuild_service_role_policy(config)


def sagemaker_policy(config=CONFIG, **options):
    return service_roles.sagemaker_execution_role_policy(config, **options)


# ---- the evaluator follows IAM's rules ------------------------------------------------------

TOY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "Objects", "Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::bkt/data/*"},
        {"Sid": "OneChar", "Effect": "Allow", "Action": "ecr:PutImage", "Resource": "arn:aws:ecr:*:1:repository/r?"},
        {"Sid": "NoSecrets", "Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::bkt/data/secret/*"},
        {
            "Sid": "Tagged",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": "arn:aws:s3:::bkt",
            "Condition": {"StringLike": {"s3:prefix": ["data", "data/*"]}},
        },
        {"Sid": "AllButLogs", "Effect": "Allow", "NotAction": "logs:*", "Resource": "arn:aws:sns:*:1:topic"},
    ],
}


@pytest.mark.parametrize(
    "action, resource, context, expected",
    [
        ("s3:GetObject", "arn:aws:s3:::bkt/data/a/b.txt", None, True),  # * spans "/"
        ("S3:getobject", "arn:aws:s3:::bkt/data/x", None, True),  # actions are case-insensitive
        ("s3:GetObject", "arn:aws:s3:::BKT/data/x", None, False),  # resources are not
        ("s3:PutObject", "arn:aws:s3:::bkt/data/x", None, False),  # implicit deny
        ("s3:GetObject", "arn:aws:s3:::bkt/other/x", None, False),
        ("s3:GetObject", "arn:aws:s3:::bkt/data/secret/k", None, False),  # an explicit deny wins
        ("ecr:PutImage", "arn:aws:ecr:eu-west-1:1:repository/r1", None, True),  # ? is one character
        ("ecr:PutImage", "arn:aws:ecr:eu-west-1:1:repository/r12", None, False),
        ("ecr:PutImage", "arn:aws:ecr:eu-west-1:1:repository/r", None, False),
        ("s3:ListBucket", "arn:aws:s3:::bkt", {"s3:prefix": "data/2024/"}, True),
        ("s3:ListBucket", "arn:aws:s3:::bkt", {"s3:prefix": "private/"}, False),
        ("s3:ListBucket", "arn:aws:s3:::bkt", {}, False),  # a missing key fails a positive operator
        ("sns:Publish", "arn:aws:sns:eu-west-1:1:topic", None, True),
        ("logs:PutLogEvents", "arn:aws:sns:eu-west-1:1:topic", None, False),
    ],
)
def test_evaluator_matches_like_iam(action, resource, context, expected):
    assert allows(TOY, action, resource, context) is expected


def test_evaluator_says_which_statement_decided():
    assert evaluate(TOY, "s3:GetObject", "arn:aws:s3:::bkt/data/secret/k").reason == "denied by NoSecrets"
    assert evaluate(TOY, "s3:GetObject", "arn:aws:s3:::bkt/data/k").matched == ("Objects",)
    assert evaluate(TOY, "iam:PassRole", "arn:aws:iam::1:role/x").reason == "no statement allows it"


# ---- the calls the workshop makes, derived from the library -----------------------------------


def _s3(uri: str) -> tuple[str, str]:
    return build_projects.parse_s3_uri(uri)


def _pinned(uri_with_tag: str) -> str:
    return uri_with_tag.rsplit(":", 1)[0] + "@" + DIGEST


def codebuild_calls(config: WorkshopConfig = CONFIG) -> list[tuple[str, str, dict]]:
    """(action, resource ARN, request context) for each call the two buildspecs make."""
    region, calls = config.region, []
    # Source: steps.package_model / steps.build_decision_image upload the zip here; CodeBuild reads it.
    source_prefix = f"{config.prefix}/{build_projects.SOURCE_PREFIX}"
    upload = build_projects.source_upload_request(config.bucket, repo_root(), source_prefix)
    calls += [
        ("s3:GetObject", s3_object_arn(upload["Bucket"], upload["Key"], region), OWN),
        ("s3:GetObjectVersion", s3_object_arn(upload["Bucket"], upload["Key"], region), OWN),
        ("s3:GetBucketLocation", s3_bucket_arn(upload["Bucket"], region), OWN),
    ]
    # model-package.yml: aws s3 cp of model.tar.gz (multipart) and the manifest to MODEL_S3_URI.
    env = build_projects.model_package_env(PINNED_MODEL, config.s3_uri("model"))
    bucket, prefix = _s3(env["MODEL_S3_URI"])
    for name in (build_projects.TARBALL_NAME, MANIFEST_NAME):
        calls.append(("s3:PutObject", s3_object_arn(bucket, prefix.rstrip("/") + "/" + name, region), OWN))
    calls.append(
        (
            "s3:AbortMultipartUpload",
            s3_object_arn(bucket, f"{prefix.rstrip('/')}/{build_projects.TARBALL_NAME}", region),
            OWN,
        )
    )
    # Both projects log to the group and stream their CreateProject request names.
    for project, spec in (
        (build_projects.MODEL_PACKAGE_PROJECT, build_projects.MODEL_PACKAGE_BUILDSPEC),
        (build_projects.IMAGE_BUILD_PROJECT, build_projects.IMAGE_BUILD_BUILDSPEC),
    ):
        request = build_projects.project_request(
            project,
            buildspec=spec,
            source_location=f"{bucket}/{upload['Key']}",
            service_role_arn=config.codebuild_role_arn,
        )
        logs = request["logsConfig"]["cloudWatchLogs"]
        stream = f"{logs['streamName']}/{BUILD_ID.split(':')[1]}"
        calls += [
            ("logs:CreateLogGroup", log_group_arn(region, ACCOUNT, logs["groupName"]), {}),
            ("logs:CreateLogStream", log_group_arn(region, ACCOUNT, logs["groupName"]), {}),
            ("logs:PutLogEvents", log_stream_arn(region, ACCOUNT, logs["groupName"], stream), {}),
        ]
    # image-build.yml: log in, pull the pinned DLC (cpu and cuda), push, describe the pushed image.
    calls.append(("ecr:GetAuthorizationToken", "*", {}))
    repository_uri = f"{images.ecr_host(ACCOUNT, region)}/{config.ecr_repository}"
    for variant in ("cpu", "cuda"):
        build_env = build_projects.image_build_env(
            parse_image_uri(_pinned(images.dlc_image_uri(region, variant))),
            parse_image_uri(repository_uri),
            "cpu-20250101-120000",
        )
        base = images.parse_image_uri(build_env["BASE_IMAGE"])
        assert base.account == images.dlc_account(region)
        for action in statements.ECR_PULL:
            calls.append((action, ecr_repository_arn(region, base.account, base.repository), {}))
    target = images.parse_image_uri(repository_uri)
    for action in (*statements.ECR_PULL, *statements.ECR_PUSH, "ecr:DescribeImages"):
        calls.append((action, ecr_repository_arn(region, target.account, target.repository), {}))
    return calls


def sagemaker_calls(config: WorkshopConfig = CONFIG, *, batch_transform: bool = False) -> list[tuple[str, str, dict]]:
    """(action, resource ARN, context) for what SageMaker does with the execution role per endpoint."""
    region, calls = config.region, []
    dlc = _pinned(images.dlc_image_uri(region, "cpu"))
    decision_image = f"{images.ecr_host(ACCOUNT, region)}/{config.ecr_repository}@{DIGEST}"
    plans = [
        endpoints.standard_plan(
            config.standard_endpoint_name,
            image=parse_image_uri(dlc),
            role_arn=config.sagemaker_role_arn,
            model_data_url=config.model_data_url,
        ),
        endpoints.decision_cpu_plan(
            config.cpu_endpoint_name,
            image=parse_image_uri(decision_image),
            role_arn=config.sagemaker_role_arn,
            model_data_url=config.model_data_url,
        ),
        endpoints.decision_gpu_plan(
            config.gpu_endpoint_name,
            image=parse_image_uri(decision_image),
            role_arn=config.sagemaker_role_arn,
            model_data_url=config.model_data_url,
        ),
    ]
    calls.append(("ecr:GetAuthorizationToken", "*", {}))
    for plan in plans:
        container = plan.model["PrimaryContainer"]
        bucket, key = _s3(container["ModelDataUrl"])
        calls.append(("s3:GetObject", s3_object_arn(bucket, key, region), OWN))
        image = images.parse_image_uri(container["Image"])
        for action in statements.ECR_PULL:
            calls.append((action, ecr_repository_arn(region, image.account, image.repository), {}))
        group = hosting.log_group(plan.name)
        stream = f"{variants.VARIANT_NAME}/i-0123456789abcdef0"
        calls += [
            ("logs:CreateLogGroup", log_group_arn(region, ACCOUNT, group), {}),
            ("logs:CreateLogStream", log_group_arn(region, ACCOUNT, group), {}),
            ("logs:DescribeLogStreams", log_group_arn(region, ACCOUNT, group), {}),
            ("logs:PutLogEvents", log_stream_arn(region, ACCOUNT, group, stream), {}),
        ]
    calls.append(("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}))
    if batch_transform:
        input_uri = config.s3_uri("batch-input")
        output_uri = config.s3_uri(policy_scope.BATCH_OUTPUT_FOLDER)
        job = transform.transform_job_request(
            "decision-workshop-batch",
            model_name=config.cpu_endpoint_name,
            input_s3_uri=input_uri,
            output_s3_uri=output_uri,
        )
        in_bucket, in_prefix = _s3(job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"])
        calls.append(("s3:ListBucket", s3_bucket_arn(in_bucket, region), {"s3:prefix": in_prefix + "/", **OWN}))
        calls.append(("s3:GetObject", s3_object_arn(in_bucket, f"{in_prefix}/decisions.jsonl", region), OWN))
        out_bucket, out_key = _s3(
            transform.transform_output_uri(f"{input_uri}/decisions.jsonl", job["TransformOutput"]["S3OutputPath"])
        )
        calls.append(("s3:PutObject", s3_object_arn(out_bucket, out_key, region), OWN))
        group = "/aws/sagemaker/TransformJobs"
        calls += [
            ("logs:CreateLogStream", log_group_arn(region, ACCOUNT, group), {}),
            ("logs:PutLogEvents", log_stream_arn(region, ACCOUNT, group, "decision-workshop-batch/i-0a"), {}),
        ]
    return calls


def _denied(document, calls):
    """The calls ``document`` refuses, and (every S3 call made on another account's bucket) those it allows."""
    foreign = [(a, r, {**c, "s3:ResourceAccount": "210987654321"}) for a, r, c in calls if a.startswith("s3:")]
    assert foreign and not any(allows(document, *call) for call in foreign)
    return [(a, r, evaluate(document, a, r, c).reason) for a, r, c in calls if not allows(document, a, r, c)]


def test_codebuild_role_allows_every_call_the_buildspecs_make():
    calls = codebuild_calls()
    assert len(calls) > 20
    assert _denied(codebuild_policy(), calls) == []


def test_sagemaker_role_allows_every_call_an_endpoint_makes():
    assert _denied(sagemaker_policy(), sagemaker_calls()) == []


def test_sagemaker_role_with_batch_transform_allows_the_job():
    document = sagemaker_policy(batch_transform=True)
    assert _denied(document, sagemaker_calls(batch_transform=True)) == []
    # Without the option, the role can read the prefix (the input) but not list it, write output or log.
    transform_only = [
        c for c in sagemaker_calls(batch_transform=True) if c not in sagemaker_calls() and c[0] != "s3:GetObject"
    ]
    assert len(transform_only) == 4
    assert all(not allows(sagemaker_policy(batch_transform=False), *c) for c in transform_only)
    assert document == sagemaker_policy()  # notebook 07 runs a transform job: the default includes it


OTHER = "444455556666"


@pytest.mark.parametrize(
    "action, resource, context",
    [
        ("s3:PutObject", s3_object_arn("someone-elses-bucket", "decision-workshop/model/model.tar.gz"), {}),
        ("s3:PutObject", s3_object_arn(CONFIG.bucket, "other-team/model.tar.gz"), {}),
        ("s3:GetObject", s3_object_arn(CONFIG.bucket, "other-team/secrets.txt"), {}),
        ("s3:GetObject", s3_object_arn(CONFIG.bucket, "decision-workshop/model/model.tar.gz"), {}),  # only the source
        ("s3:DeleteObject", s3_object_arn(CONFIG.bucket, "decision-workshop/model/model.tar.gz"), {}),
        ("s3:PutObject", s3_object_arn(CONFIG.bucket, "decision-workshop/codebuild-source/source-x.zip"), {}),
        ("s3:ListBucket", s3_bucket_arn(CONFIG.bucket), {"s3:prefix": ""}),
        ("s3:DeleteBucket", s3_bucket_arn(CONFIG.bucket), {}),
        ("ecr:PutImage", ecr_repository_arn(REGION, "763104351884", "llama-cpp"), {}),  # never push to the DLC
        ("ecr:BatchGetImage", ecr_repository_arn(REGION, "763104351884", "llama-cpp-arm64"), {}),  # amd64 builds only
        ("ecr:PutImage", ecr_repository_arn(REGION, ACCOUNT, "another-repository"), {}),
        ("ecr:BatchGetImage", ecr_repository_arn(REGION, OTHER, "llama-cpp"), {}),
        ("ecr:DeleteRepository", ecr_repository_arn(REGION, ACCOUNT, CONFIG.ecr_repository), {}),
        ("logs:PutLogEvents", log_stream_arn(REGION, ACCOUNT, "/aws/codebuild/another-project", "build/1"), {}),
        (
            "logs:DeleteLogGroup",
            log_group_arn(REGION, ACCOUNT, "/aws/codebuild/sagemaker-decision-workshop-image-build"),
            {},
        ),
        ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/WorkshopSageMaker", {}),
        (
            "codebuild:StartBuild",
            f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/sagemaker-decision-workshop-image-build",
            {},
        ),
        ("sagemaker:CreateEndpoint", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/x", {}),
    ],
)
def test_codebuild_role_denies_what_the_builds_do_not_do(action, resource, context):
    assert not allows(codebuild_policy(), action, resource, context)


@pytest.mark.parametrize(
    "action, resource, context",
    [
        ("s3:PutObject", s3_object_arn("someone-elses-bucket", "x"), {}),
        ("s3:PutObject", s3_object_arn(CONFIG.bucket, "decision-workshop/model/model.tar.gz"), {}),  # no overwrite
        ("s3:GetObject", s3_object_arn(CONFIG.bucket, "other-team/data.csv"), {}),
        ("s3:GetObject", s3_object_arn("someone-elses-bucket", "decision-workshop/model/model.tar.gz"), {}),
        ("ecr:PutImage", ecr_repository_arn(REGION, ACCOUNT, CONFIG.ecr_repository), {}),  # pull only
        ("ecr:BatchGetImage", ecr_repository_arn(REGION, ACCOUNT, "another-repository"), {}),
        (
            "logs:PutLogEvents",
            log_stream_arn(REGION, ACCOUNT, "/aws/sagemaker/Endpoints/not-ours", "AllTraffic/i-1"),
            {},
        ),
        ("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": "Billing"}),
        ("cloudwatch:PutMetricData", "*", {}),
        ("sagemaker:CreateEndpoint", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/x", {}),
        ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/WorkshopCodeBuild", {}),
    ],
)
def test_sagemaker_role_denies_what_an_endpoint_does_not_do(action, resource, context):
    assert not allows(sagemaker_policy(batch_transform=True), action, resource, context)


# ---- shape: no "*" action, no unscoped resource beyond the documented ones ------------------------

ALL = [
    ("codebuild", codebuild_policy()),
    ("sagemaker", sagemaker_policy()),
    ("sagemaker+transform", sagemaker_policy(batch_transform=True)),
    ("operator", operator_policies.operator_policy(CONFIG)),
]


def _statements(document):
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        yield statement, actions, resources


@pytest.mark.parametrize("name, document", ALL, ids=[n for n, _ in ALL])
def test_no_action_wildcards_anywhere(name, document):
    for statement, actions, _ in _statements(document):
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        for action in actions:
            assert "*" not in action and "?" not in action, (name, statement["Sid"], action)


@pytest.mark.parametrize("name, document", ALL, ids=[n for n, _ in ALL])
def test_only_documented_actions_get_an_unscoped_resource(name, document):
    documented = {w.action: w for w in statements.SERVICE_REQUIRED_WILDCARDS}
    for sid, action in iam.wildcard_grants(document):
        assert action in documented, f"{name}: {sid} grants {action} on '*' but it is not a documented exception"
        statement = next(s for s in document["Statement"] if s["Sid"] == sid)
        assert statement["Action"] == [action]  # alone in its statement: nothing rides along on "*"
        assert statement.get("Condition") == documented[action].condition
    for exception in statements.SERVICE_REQUIRED_WILDCARDS:
        assert len(exception.reason) > 40


_SCOPED_ARN = re.compile(
    r"arn:aws:(?:"
    r"s3:::(?P<bucket>[a-z0-9.-]+)(?:/(?P<key>[^*?]+/)\*)?"  # a named bucket, or a named folder in it
    r"|ecr:(?P<ecr_region>[a-z0-9-]+):(?P<ecr_account>\d{12}):repository/(?P<repo>[a-z0-9._/-]+)"
    r"|logs:(?P<logs_region>[a-z0-9-]+):(?P<logs_account>\d{12}):log-group:(?P<group>/aws/[A-Za-z0-9/._-]+)(?::\*)?"
    r"|sagemaker:(?P<sm_region>[a-z0-9-]+):(?P<sm_account>\d{12}):(?:model|endpoint-config|endpoint)/(?P<sm_name>[a-z0-9-]+)"
    r"|codebuild:(?P<cb_region>[a-z0-9-]+):(?P<cb_account>\d{12}):project/(?P<project>[A-Za-z0-9_-]+)"
    r"|servicequotas:(?P<sq_region>[a-z0-9-]+):(?P<sq_account>\d{12}):sagemaker/\*"
    r"|iam::(?P<iam_account>\d{12}):role/(?P<role>[A-Za-z0-9+=,.@_/-]+)"
    r"|cloudwatch:(?P<cw_region>[a-z0-9-]+):(?P<cw_account>\d{12}):alarm:(?P<alarm_endpoint>[a-z0-9-]+)/\*"
    r")"
)


@pytest.mark.parametrize("name, document", ALL, ids=[n for n, _ in ALL])
def test_every_other_resource_names_a_workshop_resource(name, document):
    dlc_account = images.dlc_account(REGION)
    groups = {f"/aws/codebuild/{p}" for p in (build_projects.MODEL_PACKAGE_PROJECT, build_projects.IMAGE_BUILD_PROJECT)}
    groups |= {
        hosting.log_group(n)
        for n in (CONFIG.standard_endpoint_name, CONFIG.cpu_endpoint_name, CONFIG.gpu_endpoint_name)
    }
    groups.add("/aws/sagemaker/TransformJobs")
    for statement, _, resources in _statements(document):
        for resource in resources:
            if resource == "*":
                continue
            match = _SCOPED_ARN.fullmatch(resource)
            assert match, f"{name}: {statement['Sid']} has a resource that is not scoped: {resource}"
            if match["bucket"]:
                assert match["bucket"] == CONFIG.bucket
                assert match["key"] is None or match["key"].startswith(CONFIG.prefix + "/")
            if match["repo"]:
                assert match["ecr_region"] == REGION
                assert (match["ecr_account"], match["repo"]) in {
                    (ACCOUNT, CONFIG.ecr_repository),
                    (dlc_account, images.DLC_REPOSITORY),
                    (dlc_account, images.DLC_ARM64_REPOSITORY),
                }
            if match["group"]:
                assert (match["logs_region"], match["logs_account"]) == (REGION, ACCOUNT)
                assert match["group"] in groups
            if match["sm_name"]:
                assert (match["sm_region"], match["sm_account"]) == (REGION, ACCOUNT)
                assert match["sm_name"] in (
                    CONFIG.standard_endpoint_name,
                    CONFIG.cpu_endpoint_name,
                    CONFIG.gpu_endpoint_name,
                )
            if match["alarm_endpoint"]:  # an endpoint's own alarms
                assert (match["cw_region"], match["cw_account"]) == (REGION, ACCOUNT)
                assert match["alarm_endpoint"] in (
                    CONFIG.standard_endpoint_name,
                    CONFIG.cpu_endpoint_name,
                    CONFIG.gpu_endpoint_name,
                )
            if match["project"]:
                assert match["project"] in (build_projects.MODEL_PACKAGE_PROJECT, build_projects.IMAGE_BUILD_PROJECT)
            if match["role"]:
                assert f"arn:aws:iam::{match['iam_account']}:role/{match['role']}" in (
                    CONFIG.codebuild_role_arn,
                    CONFIG.sagemaker_role_arn,
                    arns.role_arn(REGION, ACCOUNT, service_roles.CODEBUILD_ROLE_NAME),
                )


def test_the_dlc_account_follows_the_region():
    config = CONFIG.replace(region="af-south-1")
    resources = json.dumps(service_roles.codebuild_service_role_policy(config))
    assert f"arn:aws:ecr:af-south-1:{images.dlc_account('af-south-1')}:repository/llama-cpp" in resources
    assert "763104351884" not in resources
    china = service_roles.sagemaker_execution_role_policy(CONFIG.replace(region="cn-north-1"))
    assert all(r == "*" or r.startswith("arn:aws-cn:") for _, _, rs in _statements(china) for r in rs)


def test_trust_policies_name_one_service_and_this_account():
    codebuild = service_roles.codebuild_trust_policy(CONFIG)
    sagemaker = service_roles.sagemaker_trust_policy(CONFIG)
    (cb,) = codebuild["Statement"]
    (sm,) = sagemaker["Statement"]
    assert cb["Principal"] == {"Service": "codebuild.amazonaws.com"} and cb["Action"] == "sts:AssumeRole"
    assert sm["Principal"] == {"Service": "sagemaker.amazonaws.com"} and sm["Action"] == "sts:AssumeRole"
    assert cb["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    assert sm["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    project = f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/{build_projects.IMAGE_BUILD_PROJECT}"
    assert iam.conditions_hold(cb["Condition"], {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": project})
    assert not iam.conditions_hold(cb["Condition"], {"aws:SourceAccount": OTHER, "aws:SourceArn": project})
    assert not iam.conditions_hold(
        cb["Condition"], {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": project.replace("image-build", "other")}
    )


# ---- valid IAM --------------------------------------------------------------------------------


@pytest.mark.parametrize("file_name", list(policies.POLICY_FILES))
def test_documents_follow_the_iam_grammar(file_name):
    document = policies.policies(CONFIG)[file_name]
    trust = file_name.endswith("-trust-policy.json")
    assert iam.policy_problems(document, trust=trust) == []
    assert document["Version"] == "2012-10-17" and isinstance(document["Statement"], list)
    for statement in document["Statement"]:
        assert re.fullmatch(r"[A-Za-z0-9]+", statement["Sid"])
        assert statement["Effect"] in ("Allow", "Deny") and statement["Action"]
        assert ("Principal" in statement) is trust and ("Resource" in statement) is not trust
    if not trust:
        assert len(iam.minified(document)) <= iam.MANAGED_POLICY_MAX_CHARS


@pytest.mark.parametrize(
    "broken, problem",
    [
        ({"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}, "Version"),
        (
            {"Version": "2008-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]},
            "Version",
        ),
        ({"Version": "2012-10-17", "Statement": []}, "non-empty"),
        (
            {"Version": "2012-10-17", "Statement": [{"Effect": "allow", "Action": "s3:GetObject", "Resource": "*"}]},
            "Effect",
        ),
        (
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "GetObject", "Resource": "*"}]},
            "action",
        ),
        ({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject"}]}, "Resource"),
        (
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "s3://bucket/key"}],
            },
            "not an ARN",
        ),
        (
            {
                "Version": "2012-10-17",
                "Statement": [{"Sid": "a-b", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
            },
            "Sid",
        ),
        (
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": {"Equals": {"a": "b"}}}
                ],
            },
            "Condition",
        ),
    ],
)
def test_the_grammar_check_catches_what_iam_rejects(broken, problem):
    problems = iam.policy_problems(broken)
    assert problems and any(problem in p for p in problems), problems


@pytest.mark.parametrize("file_name", [n for n in policies.POLICY_FILES if not n.endswith("-trust-policy.json")])
def test_create_policy_requests_pass_botocore_validation(file_name):
    document = policies.policies(CONFIG)[file_name]
    request = policies.create_policy_request(file_name.removesuffix(".json"), document)
    assert json.loads(request["PolicyDocument"]) == document
    assert re.fullmatch(r"[\u0009\u000A\u000D\u0020-\u00FF]+", request["PolicyDocument"])  # botocore's pattern


@pytest.mark.parametrize("file_name", [n for n in policies.POLICY_FILES if n.endswith("-trust-policy.json")])
def test_create_role_requests_pass_botocore_validation(file_name):
    request = policies.create_role_request(
        file_name.removesuffix("-trust-policy.json"), policies.policies(CONFIG)[file_name]
    )
    assert json.loads(request["AssumeRolePolicyDocument"])["Statement"][0]["Action"] == "sts:AssumeRole"


def test_iam_in_the_emulator_accepts_the_roles_and_policies(monkeypatch):
    """moto checks policy documents with its copy of IAM's validator; a stand-in for IAM itself."""
    moto = pytest.importorskip("moto")
    import boto3

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    documents = policies.policies(CONFIG, batch_transform=True)
    with moto.mock_aws():
        client = boto3.client("iam", region_name="us-east-1")
        for role, trust_file, policy_file in (
            ("WorkshopCodeBuild", "codebuild-trust-policy.json", "codebuild-service-role-policy.json"),
            ("WorkshopSageMaker", "sagemaker-trust-policy.json", "sagemaker-execution-role-policy.json"),
        ):
            client.create_role(**policies.create_role_request(role, documents[trust_file]))
            arn = client.create_policy(**policies.create_policy_request(role + "Policy", documents[policy_file]))
            client.attach_role_policy(RoleName=role, PolicyArn=arn["Policy"]["Arn"])
            attached = client.list_attached_role_policies(RoleName=role)["AttachedPolicies"]
            assert [p["PolicyName"] for p in attached] == [role + "Policy"]


def test_write_policies_writes_json_for_administrators(tmp_path):
    written = policies.write_policies(CONFIG, tmp_path / "iam")
    assert sorted(written) == sorted(policies.policies(CONFIG)) and set(policies.POLICY_FILES) <= set(written)
    for name, path in written.items():
        assert json.loads(path.read_text()) == policies.policies(CONFIG)[name]


def test_account_comes_from_the_role_arns_or_must_be_given():
    local = WorkshopConfig(region=REGION, bucket="acme-decision-workshop")
    with pytest.raises(InvalidInput, match="account_id"):
        service_roles.codebuild_service_role_policy(local)
    document = service_roles.codebuild_service_role_policy(local, account_id=OTHER)
    assert f":{OTHER}:repository/{local.ecr_repository}" in json.dumps(document)
    with pytest.raises(InvalidInput, match="account"):
        policy_scope.scope(local, account_id="12345")


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"prefix": "*"}, "prefix"),
        ({"prefix": "decision-workshop/*"}, "prefix"),
        ({"prefix": "a?b"}, "prefix"),
        ({"prefix": "${aws:username}"}, "prefix"),
        ({"prefix": "../other"}, "prefix"),
        ({"ecr_repository": "semif-*"}, "ECR repository"),
        ({"cpu_endpoint_name": "semif-*"}, "endpoint name"),
    ],
)
def test_names_that_would_widen_an_iam_grant_are_refused(change, needle):
    """A prefix of '*' used to widen every statement scoped to the prefix to the whole bucket."""
    config = CONFIG.replace(**change)
    with pytest.raises(ValueError, match=needle):
        policy_scope.scope(config)
    with pytest.raises(InvalidInput, match=needle):
        config.check()


def test_null_conditions_ask_whether_the_key_is_there():
    # AmazonSageMakerFullAccess uses Null (e.g. sagemaker:OwnerUserProfileArn), so the evaluator reads it.
    absent = {"Null": {"sagemaker:OwnerUserProfileArn": "true"}}
    present = {"Null": {"sagemaker:OwnerUserProfileArn": "false"}}
    owner = {"sagemaker:OwnerUserProfileArn": "arn:aws:sagemaker:us-east-1:1:user-profile/d/u"}
    assert iam.conditions_hold(absent, {}) and not iam.conditions_hold(absent, owner)
    assert iam.conditions_hold(present, owner) and not iam.conditions_hold(present, {})


def test_endpoint_names_with_capitals_are_granted_in_the_lower_case_iam_checks():
    from workshop_lib.local import iam_needs

    config = CONFIG.replace(cpu_endpoint_name="Decision-CPU")
    documents = operator_policies.operator_documents(config, ACCOUNT)
    for operation, params in (
        ("CreateEndpoint", {"EndpointName": "Decision-CPU", "EndpointConfigName": "Decision-CPU"}),
        ("CreateEndpointConfig", {"EndpointConfigName": "Decision-CPU-20261201T000000Z"}),
        ("UpdateEndpoint", {"EndpointName": "Decision-CPU", "EndpointConfigName": "Decision-CPU-20261201T000000Z"}),
        ("ListTags", {"ResourceArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/Decision-CPU"}),
    ):
        call = {"service": "sagemaker", "operation": operation, "params": params}
        for action, resource, context in iam_needs.needed(call, REGION, ACCOUNT):
            assert resource == resource.lower() and iam.allows(documents, action, resource, context), (action, resource)
    # the log group keeps the name's case (CloudWatch Logs names are case-sensitive)
    assert "/aws/sagemaker/Endpoints/Decision-CPU" in json.dumps(operator_policies.operator_policy(config, ACCOUNT))
