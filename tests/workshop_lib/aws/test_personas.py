"""Rehearsing as the participant: the vendored AmazonSageMakerFullAccess, the operator's calls refused
as they are made (with the message AWS gives), notebook 00's policies and CodeBuild role, and the
notebooks' flow as the Studio participant.

The refusals are made by real boto3 clients (against moto in this process, or the rehearsal's moto
server), so every request is still validated by botocore; IAM itself is the project's evaluator
(iam.evaluate) on the vendored and generated documents.
"""

from __future__ import annotations

import json
import re

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.support import recorded_groups
from workshop_lib import name_rules, steps
from workshop_lib.aws import (
    arns,
    build_projects,
    endpoints,
    hygiene,
    iam,
    managed_policies,
    operator_policies,
    policies,
    policy_scope,
    service_roles,
    statements,
)
from workshop_lib.config import ENV_VARS, LOCAL_ROLE_ARN, WorkshopConfig
from workshop_lib.errors import InvalidInput
from workshop_lib.examples import SUPPORT_ROUTE
from workshop_lib.local import iam_needs, modes, permissions, rehearsal
from workshop_lib.steps.policy_files import PolicyFiles, policy_folder
from workshop_lib.steps.setup import tag_bucket

REGION, ACCOUNT = "us-east-1", "123456789012"
STUDIO_ROLE = f"arn:aws:iam::{ACCOUNT}:role/service-role/AmazonSageMaker-ExecutionRole-20260101T000000"
CONFIG = WorkshopConfig(
    mode="aws",
    region=REGION,
    bucket=f"sagemaker-decision-workshop-{ACCOUNT}-{REGION}",
    prefix="decision-workshop",
    sagemaker_role_arn=STUDIO_ROLE,
)
SELF_DENIED = re.compile(
    r"User: (\S+) is not authorized to perform: (\S+) on resource: (\S+) because no "
    r"identity-based policy allows the \2 action"
)

MANAGED = managed_policies.sagemaker_full_access()


def managed_allows(action, resource, **context):
    return iam.allows(MANAGED.document, action, resource, context)


# ---- the vendored managed policy -----------------------------------------------------------------


def test_the_managed_policy_is_vendored_with_its_version_date_and_source():
    assert MANAGED.name == "AmazonSageMakerFullAccess" and MANAGED.arn.endswith(":policy/AmazonSageMakerFullAccess")
    assert re.fullmatch(r"v\d+", MANAGED.version_id) and re.fullmatch(r"\d{4}-\d\d-\d\dT.*", MANAGED.created)
    assert MANAGED.source["published"].startswith("https://docs.aws.amazon.com/aws-managed-policy/")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", MANAGED.source["read_on"]) and MANAGED.source["text_from"]
    statements = MANAGED.document["Statement"]
    assert MANAGED.document["Version"] == iam.VERSION and len(statements) > 20
    assert all(
        s["Effect"] == "Allow" and ("Action" in s) != ("NotAction" in s) and ("Resource" in s) != ("NotResource" in s)
        for s in statements
    )
    assert MANAGED.version_id in str(MANAGED)


@pytest.mark.parametrize(
    "action, resource, context, allowed",
    [
        # What AmazonSageMakerFullAccess allows a Studio role (AWS managed policy reference,
        # docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSageMakerFullAccess.html), held against
        # the vendored document.
        ("s3:CreateBucket", "arn:aws:s3:::decision-workshop-local", {}, True),
        ("s3:PutBucketTagging", "arn:aws:s3:::sagemaker-decision-workshop-1-us-east-1", {}, False),
        ("s3:PutObject", "arn:aws:s3:::sagemaker-decision-workshop-1-us-east-1/decision-workshop/k", {}, True),
        ("s3:PutObject", "arn:aws:s3:::decision-workshop-local/decision-workshop/k", {}, False),
        ("codebuild:CreateProject", f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/sagemaker-x", {}, False),
        ("codebuild:StartBuild", f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/sagemaker-x", {}, True),
        ("codebuild:StartBuild", f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/decision-workshop-x", {}, False),
        ("iam:PassRole", STUDIO_ROLE, {"iam:PassedToService": "sagemaker.amazonaws.com"}, True),
        ("iam:PassRole", STUDIO_ROLE, {"iam:PassedToService": "codebuild.amazonaws.com"}, False),
        ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/{service_roles.CODEBUILD_ROLE_NAME}", {}, False),
        ("ecr:TagResource", f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/sagemaker-decision-workshop", {}, False),
        ("logs:GetLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/codebuild/p:log-stream:s", {}, True),
        ("logs:FilterLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/e", {}, False),
        ("servicequotas:ListServiceQuotas", "*", {}, False),
    ],
)
def test_what_the_studio_role_may_do_on_its_own(action, resource, context, allowed):
    assert managed_allows(action, resource, **context) is allowed


# ---- the operator policy notebook 00 writes ----------------------------------------------------------


def test_pass_role_for_the_codebuild_role_is_there_before_the_role_exists():
    document = operator_policies.operator_policy(CONFIG, ACCOUNT)  # no CodeBuild role ARN anywhere in the config
    known = arns.role_arn(REGION, ACCOUNT, service_roles.CODEBUILD_ROLE_NAME)
    statements = {s["Sid"]: s for s in document["Statement"]}
    assert statements["PassCodeBuildRole"]["Resource"] == [known]
    assert statements["PassCodeBuildRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "codebuild.amazonaws.com"}
    }
    assert statements["PassSageMakerRole"]["Resource"] == [STUDIO_ROLE]
    assert iam.allows(document, "iam:PassRole", known, {"iam:PassedToService": "codebuild.amazonaws.com"})
    assert not iam.allows(document, "iam:PassRole", known, {"iam:PassedToService": "ec2.amazonaws.com"})
    assert not iam.allows(document, "iam:PassRole", known)  # a pass without the service is not this grant
    given = f"arn:aws:iam::{ACCOUNT}:role/admin-made-codebuild"
    named = operator_policies.operator_policy(CONFIG.replace(codebuild_role_arn=given), ACCOUNT)
    assert {s["Sid"]: s for s in named["Statement"]}["PassCodeBuildRole"]["Resource"] == [given]


def test_the_operator_policy_grants_the_reads_the_code_makes():
    document = operator_policies.operator_policy(CONFIG, ACCOUNT)
    stream = arns.log_stream_arn(REGION, ACCOUNT, f"/aws/codebuild/{build_projects.MODEL_PACKAGE_PROJECT}", "x/1")
    assert iam.allows(document, "logs:GetLogEvents", stream)
    assert not iam.allows(
        document, "logs:GetLogEvents", arns.log_stream_arn(REGION, ACCOUNT, "/aws/codebuild/other", "x/1")
    )
    assert iam.allows(document, "servicequotas:ListServiceQuotas", "*")
    bucket = arns.s3_bucket_arn(CONFIG.bucket)
    assert iam.allows(document, "s3:PutBucketTagging", bucket, {"s3:ResourceAccount": ACCOUNT})
    # a bucket of the workshop's name that another account created first is never touched
    assert not iam.allows(document, "s3:PutBucketTagging", bucket, {"s3:ResourceAccount": "210987654321"})
    # no trust rewrite: it would let the operator make a role trust anyone
    role = arns.role_arn(REGION, ACCOUNT, service_roles.CODEBUILD_ROLE_NAME)
    assert not iam.allows(operator_policies.operator_documents(CONFIG, ACCOUNT), "iam:UpdateAssumeRolePolicy", role)
    # the calls those grants are for, as the call log records them
    log_call = {
        "service": "logs",
        "operation": "GetLogEvents",
        "params": {"logGroupName": f"/aws/codebuild/{build_projects.MODEL_PACKAGE_PROJECT}", "logStreamName": "x/1"},
    }
    assert iam_needs.needed(log_call, REGION, ACCOUNT) == [("logs:GetLogEvents", stream, {})]
    quota_call = {"service": "servicequotas", "operation": "ListServiceQuotas", "params": {"ServiceCode": "sagemaker"}}
    assert iam_needs.needed(quota_call, REGION, ACCOUNT) == [("servicequotas:ListServiceQuotas", "*", {})]


def test_every_statement_the_rehearsal_cannot_exercise_exists_and_says_why():
    scope = policy_scope.scope(CONFIG.replace(codebuild_role_arn=arns.role_arn(REGION, ACCOUNT, "cb")), ACCOUNT)
    documents = {
        permissions.OPERATOR: operator_policies.operator_policy(scope),
        permissions.CODEBUILD: service_roles.codebuild_service_role_policy(scope),
        permissions.SAGEMAKER: service_roles.sagemaker_execution_role_policy(scope),
    }
    for principal, reasons in permissions.NOT_EXERCISED_LOCALLY.items():
        sids = {s["Sid"] for s in documents[principal]["Statement"]}
        assert set(reasons) <= sids, f"{principal}: {set(reasons) - sids} named but not in its policy"
        assert all(len(why.split()) >= 5 for why in reasons.values())


# ---- refused as the call is made ---------------------------------------------------------------------


@pytest.fixture
def studio(tmp_path, monkeypatch, fake_credentials):
    """boto3 clients (moto in this process) whose operator calls go through a call log as the Studio persona."""
    monkeypatch.setenv(permissions.PERSONA_ENV, permissions.STUDIO_DEFAULT)
    log = permissions.CallLog(tmp_path / "local" / "aws-calls.jsonl")
    with mock_aws():

        def client(service):
            made = boto3.client(service, region_name=REGION)
            log.attach(made)
            return made

        yield log, client


def test_a_refused_call_raises_what_aws_returns_and_is_never_sent(studio):
    log, client = studio
    codebuild = client("codebuild")
    request = {
        "name": "decision-workshop-x",
        "source": {"type": "S3", "location": "decision-workshop-local/src.zip"},
        "artifacts": {"type": "NO_ARTIFACTS"},
        "serviceRole": arns.role_arn(REGION, ACCOUNT, service_roles.CODEBUILD_ROLE_NAME),
        "environment": {
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:7.0",
            "computeType": "BUILD_GENERAL1_SMALL",
        },
    }
    with pytest.raises(ClientError) as refused:
        codebuild.create_project(**request)
    error = refused.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert error["Message"] == (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/decision-workshop-local/SageMaker is not authorized to "
        f"perform: codebuild:CreateProject on resource: arn:aws:codebuild:{REGION}:{ACCOUNT}:project/"
        "decision-workshop-x because no identity-based policy allows the codebuild:CreateProject action"
    )
    assert "\n" not in str(refused.value)
    assert boto3.client("codebuild", region_name=REGION).list_projects()["projects"] == []  # never sent
    (entry,) = log.calls()
    assert entry["operation"] == "CreateProject" and entry["refused"] == error["Message"]

    # The operator policy attached: the same call goes through.
    log.attached.attach(
        "operator-policy.json",
        operator_policies.operator_policy(
            CONFIG.replace(bucket="decision-workshop-local", sagemaker_role_arn=LOCAL_ROLE_ARN),
            ACCOUNT,
            codebuild_projects=("decision-workshop-x",),
        ),
    )
    codebuild.create_project(**request)
    assert boto3.client("codebuild", region_name=REGION).list_projects()["projects"] == ["decision-workshop-x"]


def test_query_and_xml_services_refuse_with_access_denied(studio):
    _, client = studio
    s3 = client("s3")
    s3.create_bucket(Bucket="decision-workshop-local")  # the managed policy's s3:CreateBucket on any bucket
    with pytest.raises(ClientError) as refused:
        s3.put_bucket_tagging(Bucket="decision-workshop-local", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert SELF_DENIED.fullmatch(refused.value.response["Error"]["Message"]).groups()[1:] == (
        "s3:PutBucketTagging",
        "arn:aws:s3:::decision-workshop-local",
    )
    with pytest.raises(ClientError) as refused:
        client("iam").create_role(
            **policies.create_role_request(
                service_roles.CODEBUILD_ROLE_NAME, service_roles.codebuild_trust_policy(CONFIG, ACCOUNT)
            )
        )
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert "iam:CreateRole" in refused.value.response["Error"]["Message"]


def test_the_administrator_persona_may_do_anything(studio, monkeypatch):
    log, client = studio
    monkeypatch.setenv(permissions.PERSONA_ENV, permissions.ADMINISTRATOR)
    client("s3").create_bucket(Bucket="decision-workshop-local")
    client("s3").put_bucket_tagging(Bucket="decision-workshop-local", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert not any(c.get("refused") for c in log.calls()) and len(log.calls()) == 2
    monkeypatch.setenv(permissions.PERSONA_ENV, "root")
    with pytest.raises(InvalidInput, match="studio-default, administrator"):
        permissions.persona()


def test_a_refused_bucket_tagging_becomes_a_note(studio, tmp_path):
    _, client = studio
    s3 = client("s3")
    s3.create_bucket(Bucket="decision-workshop-local")
    written = PolicyFiles(
        tmp_path,
        policies.write_policies(CONFIG.replace(bucket="decision-workshop-local"), tmp_path / "policies", ACCOUNT),
        "",
    )
    note = tag_bucket(s3, "decision-workshop-local", written)
    assert "s3:PutBucketTagging was refused (AccessDenied)" in note and "operator-policy.json" in note
    unrecorded = boto3.client("s3", region_name=REGION)
    with pytest.raises(ClientError):  # the bucket is there, without tags
        unrecorded.get_bucket_tagging(Bucket="decision-workshop-local")


def test_the_audit_lists_a_refused_call_apart_and_fails(studio):
    log, client = studio
    with pytest.raises(ClientError):
        client("ecr").create_repository(
            repositoryName="sagemaker-decision-workshop", tags=[{"Key": "workshop", "Value": "decision-workshop"}]
        )
    documents = {permissions.OPERATOR: operator_policies.operator_policy(CONFIG, ACCOUNT)}
    audit = permissions.audit(log.calls(), documents, REGION, ACCOUNT, not_exercised={})
    assert not audit.ok and audit.denied == []
    ((principal, operation, message),) = audit.refused
    assert (principal, operation) == (permissions.OPERATOR, "ecr:CreateRepository") and "ecr:TagResource" in message
    assert "REFUSED as it was made" in str(audit)


# ---- notebook 00 in the rehearsal -------------------------------------------------------------------


@pytest.fixture
def local_workshop(tmp_path, monkeypatch):
    """Local mode with its own config and processes, setup done (emulator running); everything stopped after."""
    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(permissions.PERSONA_ENV, raising=False)  # the default: studio-default
    monkeypatch.setenv("WORKSHOP_MODE", "local")
    monkeypatch.setenv("WORKSHOP_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("WORKSHOP_LOCAL_DIR", str(tmp_path / "local"))
    ws = steps.Workshop.load()
    try:
        yield ws
    finally:
        ws.rehearsal.stop_all()
        rehearsal.default().stop_all()


def _iam(ws):
    """An IAM client on the rehearsal's emulator that is nobody's (not recorded, not refused)."""
    return modes.emulator_client("iam", ws.config.region, ws.rehearsal.emulator_url())


@pytest.mark.slow  # starts the rehearsal's emulator
def test_setup_writes_and_attaches_the_policies_before_the_bucket(local_workshop):
    ws = local_workshop
    saved = steps.setup(ws, reset=True)
    folder = policy_folder(ws)
    assert saved.policies.folder == folder and (folder / "operator-policy.json").exists()
    attached = permissions.AttachedPolicies(ws.rehearsal.home / permissions.ATTACHED_FILE).attached()
    assert attached["operator-policy.json"] == json.loads((folder / "operator-policy.json").read_text())
    calls = permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls()
    tagging = [c for c in calls if c["operation"] == "PutBucketTagging"]
    assert tagging and not tagging[0].get("refused")  # allowed: the operator policy was attached first
    s3 = modes.emulator_client("s3", ws.config.region, ws.rehearsal.emulator_url())
    tags = s3.get_bucket_tagging(Bucket=ws.config.bucket)["TagSet"]
    assert name_rules.tag_list(name_rules.WORKSHOP_TAGS) == tags
    assert "PassCodeBuildRole" in saved.policies.statements() and "attached" in saved.policies.attached


@pytest.mark.slow  # starts the rehearsal's emulator
def test_a_role_is_ok_only_while_it_exists(local_workshop):
    ws = local_workshop
    steps.setup(ws, reset=True)
    made = steps.ensure_codebuild_role(ws)
    arn = ws.config.codebuild_role_arn
    assert arn.endswith(f":role/{service_roles.CODEBUILD_ROLE_NAME}") and made.ok and "created" in made.notes[0]
    assert _iam(ws).get_role(RoleName=service_roles.CODEBUILD_ROLE_NAME)["Role"]["Arn"] == arn

    assert "deleted" in str(steps.delete_codebuild_role(ws))  # what notebook 08 does
    again = steps.ensure_codebuild_role(ws)  # the config still names the deleted role
    assert "no longer existed" in again.notes[0] and ws.config.codebuild_role_arn == arn
    assert _iam(ws).get_role(RoleName=service_roles.CODEBUILD_ROLE_NAME)["Role"]["Arn"] == arn
    checked = [
        c for c in permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls() if c["operation"] == "GetRole"
    ]
    assert len(checked) == 2 and not any(c.get("refused") for c in checked)


@pytest.mark.slow  # starts the rehearsal's emulator
def test_a_role_given_by_arn_must_exist(local_workshop):
    ws = local_workshop
    steps.setup(ws, reset=True)
    missing = f"arn:aws:iam::{ACCOUNT}:role/admin-made-codebuild"
    with pytest.raises(steps.StepError, match="admin-made-codebuild .*does not exist"):
        steps.ensure_codebuild_role(ws, missing)
    operator = json.loads((policy_folder(ws) / "operator-policy.json").read_text())
    assert {s["Sid"]: s for s in operator["Statement"]}["PassCodeBuildRole"]["Resource"] == [missing]
    trust = service_roles.codebuild_trust_policy(ws.config, ACCOUNT)
    _iam(ws).create_role(RoleName="admin-made-codebuild", AssumeRolePolicyDocument=iam.minified(trust))
    taken = steps.ensure_codebuild_role(ws, missing)
    assert ws.config.codebuild_role_arn == missing and "it exists" in taken.notes[0]
    assert _iam(ws).list_role_policies(RoleName="admin-made-codebuild")["PolicyNames"] == []  # left as it was


def test_the_codebuild_trust_holds_in_every_region():
    here = service_roles.codebuild_trust_policy(CONFIG, ACCOUNT)
    assert here == service_roles.codebuild_trust_policy(CONFIG.replace(region="eu-west-1"), ACCOUNT)
    arns = here["Statement"][0]["Condition"]["ArnLike"]["aws:SourceArn"]
    project = f"arn:aws:codebuild:ap-southeast-2:{ACCOUNT}:project/{build_projects.IMAGE_BUILD_PROJECT}"
    assert iam.conditions_hold(
        here["Statement"][0]["Condition"], {"aws:SourceArn": project, "aws:SourceAccount": ACCOUNT}
    )
    assert not iam.conditions_hold(
        here["Statement"][0]["Condition"],
        {"aws:SourceArn": project.replace(ACCOUNT, "210987654321"), "aws:SourceAccount": ACCOUNT},
    )
    assert len(arns) == 2


@pytest.mark.slow  # starts the rehearsal's emulator
def test_an_old_trust_policy_is_left_to_the_administrator(local_workshop):
    ws = local_workshop
    steps.setup(ws, reset=True)
    steps.ensure_codebuild_role(ws)
    client = _iam(ws)
    old = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "codebuild.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    client.update_assume_role_policy(RoleName=service_roles.CODEBUILD_ROLE_NAME, PolicyDocument=iam.minified(old))
    noted = steps.ensure_codebuild_role(ws)
    assert any("aws iam update-assume-role-policy --role-name decision-workshop-codebuild" in n for n in noted.notes)
    assert client.get_role(RoleName=service_roles.CODEBUILD_ROLE_NAME)["Role"]["AssumeRolePolicyDocument"] == old
    sent = [
        c
        for c in permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls()
        if c["operation"] == "UpdateAssumeRolePolicy"
    ]
    assert sent == []


@pytest.mark.slow  # starts the rehearsal's emulator
def test_refused_role_creation_points_to_the_written_documents(local_workshop, monkeypatch):
    ws = local_workshop
    steps.setup(ws, reset=True)
    permissions.AttachedPolicies(ws.rehearsal.home / permissions.ATTACHED_FILE).clear()  # not attached yet
    with pytest.raises(steps.StepError) as stopped:
        steps.ensure_codebuild_role(ws)
    message = str(stopped.value)
    folder = policy_folder(ws)
    assert "iam:GetRole" in message and "because no identity-based policy allows" in message
    assert str(folder / "operator-policy.json") in message and str(folder / "codebuild-trust-policy.json") in message
    assert (
        "aws iam attach-role-policy --role-name decision-workshop-local" in message and "run this cell again" in message
    )
    assert (
        f"--path /decision-workshop/ --policy-document file://{folder.resolve() / 'role-boundary-policy.json'}"
        in message
    )


# ---- the notebooks' flow, as each persona ---------------------------------------------------------------


def notebook_flow(ws) -> permissions.Audit:
    """Notebooks 00-08's steps in order, as ``rehearse_all`` runs them; 06's benchmark is left out (it makes
    no AWS call: it invokes the local endpoint over HTTP, as 05 does here once). On the way it checks what
    each step leaves in the emulator and the rehearsal's process registry, and that all of it is stopped."""
    assert steps.check_environment(ws).ok
    config = steps.setup(ws, "decision-cpu", reset=True).config
    assert WorkshopConfig.load().bucket == config.bucket  # saved where the next notebook reads it
    config = steps.ensure_codebuild_role(ws).config
    assert config.codebuild_role_arn.endswith(":role/decision-workshop-codebuild")
    assert "exists" in str(steps.ensure_codebuild_role(ws))  # re-run safe
    package = steps.package_model(ws, progress=False)
    assert "by CodeBuild" in package.where and "Not exercised locally" in package.notes[-1]
    with ws.clients.acting_as(None):  # the test's own look at the emulator, not a participant's call
        [project] = ws.clients.codebuild.batch_get_projects(names=[build_projects.MODEL_PACKAGE_PROJECT])["projects"]
        assert project["serviceRole"] == config.codebuild_role_arn
        bucket, key = project["source"]["location"].split("/", 1)
        assert ws.clients.s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0
        ids = ws.clients.codebuild.list_builds_for_project(projectName=build_projects.MODEL_PACKAGE_PROJECT)["ids"]
        assert [b["buildStatus"] for b in ws.clients.codebuild.batch_get_builds(ids=ids)["builds"]] == ["SUCCEEDED"]
        # the build's log group, made ahead of CodeBuild with a retention; the administrator's lifecycle on the bucket
        (group,) = ws.clients.logs.describe_log_groups(
            logGroupNamePrefix=f"/aws/codebuild/{build_projects.MODEL_PACKAGE_PROJECT}"
        )["logGroups"]
        assert group["retentionInDays"] == hygiene.LOG_RETENTION_DAYS
        rules = ws.clients.s3.get_bucket_lifecycle_configuration(Bucket=config.bucket)["Rules"]
        assert {r["ID"] for r in rules} == {"expire-captured-requests", "abort-incomplete-uploads"}
    steps.verify_package(ws)
    steps.deploy_standard(ws, progress=False)
    image = steps.build_decision_image(ws, "cpu", progress=False)
    assert "@sha256:" in image.image_uri and any("docker build" in n for n in image.notes)
    steps.build_decision_image(ws, "gpu", progress=False)
    assert "refused" in steps.refuse_mutable_tag(ws, "cpu")
    c = ws.config
    cpu = steps.deploy_decision_cpu(ws, progress=False)
    assert cpu.status == "InService"
    entry = json.loads(ws.rehearsal.registry_path().read_text())["endpoints"][c.cpu_endpoint_name]
    # THREADS as planned for the instance (its vCPUs) on AWS, 2 here; no GPU layers here.
    assert cpu.plan.model["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_THREADS"] == "32"
    assert (
        entry["environment"]["SM_LLAMA_CPP_THREADS"] == "2" and entry["environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "0"
    )
    gpu = steps.deploy_decision_gpu(ws, progress=False)
    assert gpu.status == "InService" and "Not exercised locally" in gpu.notes[-1]
    kept = json.loads((ws.rehearsal.home / f"{c.gpu_endpoint_name}.requests.json").read_text())
    assert [p["InstanceType"] for p in kept["CreateEndpointConfig"]["ProductionVariants"][0]["InstancePools"]] == list(
        endpoints.DEFAULT_GPU_POOLS
    )
    assert steps.placement(ws, c.gpu_endpoint_name).offloaded.startswith("0/")
    made = steps.client(ws, steps.decision_endpoint(ws)).decide(SUPPORT_ROUTE)
    assert (
        made.option_ids == tuple(o["id"] for o in SUPPORT_ROUTE["options"]) and abs(sum(made.probabilities) - 1) < 1e-6
    )
    # 05 also asks through SageMaker's OpenAI-compatible route: the rehearsal's route checks the token and the grant
    routed = steps.route_client(ws, steps.decision_endpoint(ws), max_retries=0)
    hello = [{"role": "user", "content": "Hello"}]
    assert routed.chat.completions.create(model="local", messages=hello, max_tokens=2).choices
    assert steps.put_alarms(ws).ok and steps.update_endpoint(ws, progress=False).ok  # notebook 07
    scaled = steps.autoscale(ws, invocations_per_instance=12)
    assert scaled.ok and "1 to 2 instances, tracking 12 a minute per instance" in scaled
    assert [r.operation for r in scaled.requests if r.service == "application-autoscaling"][:2] == [
        "RegisterScalableTarget",
        "PutScalingPolicy",
    ]
    batch = steps.run_transform(ws, progress=False)  # the local adapter answers each line read from S3
    assert batch.ok and list(batch.answers) == [d["id"] for d in steps.scale.TRANSFORM_DECISIONS], batch
    assert batch.output_uri.endswith("/batch-output/decisions.jsonl.out")
    received = [(c["operation"], c["params"]) for c in permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls()]
    shown = [r for r in (*scaled.requests, *batch.requests) if "Body" not in r.params]  # bodies: by size, differently
    assert len(shown) > 6 and all((r.operation, r.params) in received for r in shown)  # as the emulator got them
    groups = recorded_groups(ws.rehearsal.registry_path())
    assert len(groups) == 4 and all(rehearsal.group_alive(g) for g in groups)  # the emulator and three endpoints
    deleted = steps.delete_endpoints(ws, (c.standard_endpoint_name, c.cpu_endpoint_name, c.gpu_endpoint_name))
    assert deleted.ok and "local endpoint process: stopped" in deleted
    again = steps.delete_endpoints(ws, [c.cpu_endpoint_name])  # 08 run twice: nothing to delete, and it says so
    assert again.ok and "nothing was there to delete" in again
    steps.delete_alarms(ws)
    removed = steps.remove_autoscaling(ws)
    # deleting the scaled endpoint deregistered its scaling, as SageMaker does (the rehearsal's strict rules)
    assert f"{c.cpu_endpoint_name}: scaling policy already gone, scalable target already gone" in removed
    assert "1 object(s) deleted" in steps.delete_transform_output(ws)
    steps.delete_build_resources(
        ws, [build_projects.MODEL_PACKAGE_PROJECT, build_projects.IMAGE_BUILD_PROJECT], c.ecr_repository
    )
    steps.delete_codebuild_role(ws)
    steps.delete_artifacts(ws, c.s3_uri())
    assert steps.running_endpoints(ws) == "no workshop endpoints found"
    audit = steps.audit_permissions(ws)
    assert audit.checked["sagemaker-execution-role"] > 0 and audit.checked["codebuild-service-role"] > 0
    stopped = steps.stop_local(ws)
    assert stopped.ok and stopped.endswith("no local rehearsal processes are running")
    assert not any(rehearsal.group_alive(g) for g in groups)
    return audit


# As the Studio participant only: the administrator persona makes the same calls with the refusal check
# skipped (permissions.CallLog._refusal), which test_the_administrator_persona_may_do_anything covers, and the
# audit holds both to the same documents.
@pytest.mark.slow
def test_the_notebooks_flow_passes_as_the_studio_participant(local_workshop, monkeypatch):
    monkeypatch.setenv(permissions.PERSONA_ENV, permissions.STUDIO_DEFAULT)
    audit = notebook_flow(local_workshop)
    assert audit.ok and audit.denied == [] and audit.refused == []
    assert audit.unused == [], audit  # the policies grant the calls made and nothing else
    # but for what only the scale-to-zero command uses, which no notebook runs (its own test uses each)
    assert set(audit.command_only) == {(p, s) for p, sids in permissions.SCALE_TO_ZERO_ONLY.items() for s in sids}
    skipped = {(p, sid) for p, sid, _ in audit.not_exercised}
    assert skipped == {(p, sid) for p, reasons in permissions.NOT_EXERCISED_LOCALLY.items() for sid in reasons}
    assert audit.checked[permissions.OPERATOR] > 50


@pytest.mark.slow
def test_a_missing_statement_stops_the_studio_participant_once_with_the_aws_message(local_workshop):
    ws = local_workshop
    steps.setup(ws, "decision-cpu", reset=True)
    steps.ensure_codebuild_role(ws)
    attached = permissions.AttachedPolicies(ws.rehearsal.home / permissions.ATTACHED_FILE)
    operator = attached.attached()["operator-policy.json"]
    operator["Statement"] = [s for s in operator["Statement"] if s["Sid"] != "CodeBuildProjects"]
    attached.attach("operator-policy.json", operator)  # what an administrator attached, one statement short
    with pytest.raises(ClientError) as refused:
        steps.package_model(ws, progress=False)
    project = f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/{build_projects.MODEL_PACKAGE_PROJECT}"
    assert str(refused.value) == (
        "An error occurred (AccessDeniedException) when calling the CreateProject operation: User: "
        f"arn:aws:sts::{ACCOUNT}:assumed-role/decision-workshop-local/SageMaker is not authorized to perform: "
        f"codebuild:CreateProject on resource: {project} because no identity-based policy allows the "
        "codebuild:CreateProject action"
    )
    calls = permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls()
    assert [c["operation"] for c in calls if c.get("refused")] == ["CreateProject"]  # once: not retried
    assert not any(
        c["service"] == "codebuild" for c in calls[calls.index(next(c for c in calls if c.get("refused"))) + 1 :]
    )  # nothing of the build after it


@pytest.mark.slow  # starts the rehearsal's emulator
def test_notebook_00_writes_the_policies_before_the_cells_that_need_them(local_workshop, capsys):
    """Notebook 00's code cells, run in order in this process (its first cell, %run studio_setup.py, only
    installs the project, which is installed here)."""
    import nbformat

    from workshop_lib.config import repo_root

    notebook = nbformat.read(repo_root() / "notebooks" / "00_setup.ipynb", as_version=4)
    cells = [c.source for c in notebook.cells if c.cell_type == "code"]
    setup_at = next(i for i, c in enumerate(cells) if "steps.setup(" in c)
    shown_at = next(i for i, c in enumerate(cells) if "saved.policies" in c)
    role_at = next(i for i, c in enumerate(cells) if "ensure_codebuild_role(" in c)
    assert setup_at < shown_at < role_at
    namespace: dict = {}
    for source in cells:
        if not source.startswith("%"):
            exec(compile(source, "00_setup.ipynb", "exec"), namespace)
    assert namespace["policy_files"].ok and namespace["role"].ok
    shown = capsys.readouterr().out
    assert "PassCodeBuildRole: iam:PassRole" in shown and "operator-policy.json" in shown
    arn = namespace["config"].codebuild_role_arn
    assert _iam(local_workshop).get_role(RoleName=arn.rsplit("/", 1)[-1])["Role"]["Arn"] == arn


# ---- notebook 07's auto scaling and Batch Transform, as each persona ---------------------------------


@pytest.mark.parametrize("persona", [permissions.STUDIO_DEFAULT, permissions.ADMINISTRATOR])
def test_autoscale_and_transform_pass_as_each_persona_and_the_operator_documents_cover_them(
    studio, monkeypatch, persona
):
    from workshop_lib.aws import hosting, scaling, transform
    from workshop_lib.aws.images import parse_image_uri

    from .values import DECISION_PINNED

    log, client = studio
    monkeypatch.setenv(permissions.PERSONA_ENV, persona)
    name = CONFIG.cpu_endpoint_name
    plan = endpoints.decision_cpu_plan(
        name,
        image=parse_image_uri(DECISION_PINNED),
        role_arn=STUDIO_ROLE,
        model_data_url=CONFIG.model_data_url,
        instance_type="ml.c5.2xlarge",
    )
    setup = boto3.client("sagemaker", region_name=REGION)  # nobody's: not recorded
    hosting.create_model(setup, plan.model)
    setup.create_endpoint_config(**plan.endpoint_config)
    setup.create_endpoint(**plan.endpoint)
    autoscaling, sm = client("application-autoscaling"), client("sagemaker")
    scaling.enable_autoscaling(autoscaling, name, invocations_per_instance=20)
    assert scaling.scaling_of(autoscaling, name)["Policies"][0]["PolicyName"] == scaling.scaling_policy_name(name)
    job = transform.transform_job_request(
        f"{name}-batch-1",
        model_name=name,
        input_s3_uri=CONFIG.s3_uri("batch-input") + "/",
        output_s3_uri=CONFIG.s3_uri(policy_scope.BATCH_OUTPUT_FOLDER) + "/",
        instance_type="ml.c5.2xlarge",
    )
    assert transform.run_transform_job(sm, job, poll_s=0, progress=False)["TransformJobStatus"] == "Completed"
    assert scaling.disable_autoscaling(autoscaling, name) == {"policy": "deleted", "target": "deleted"}
    calls = log.calls()
    assert not any(c.get("refused") for c in calls)  # the managed policy (Studio) or anything (administrator)
    assert {c["operation"] for c in calls} >= {
        "RegisterScalableTarget",
        "PutScalingPolicy",
        "CreateTransformJob",
        "DescribeTransformJob",
        "DeleteScalingPolicy",
        "DeregisterScalableTarget",
    }
    # What a participant outside Studio is given: the operator documents alone allow every one of these calls.
    documents = {permissions.OPERATOR: operator_policies.operator_documents(CONFIG, ACCOUNT)}
    audit = permissions.audit(calls, documents, REGION, ACCOUNT, not_exercised={})
    assert audit.ok and audit.denied == [], audit
    needs = [n for c in calls for n in iam_needs.needed(c, REGION, ACCOUNT)]
    assert (
        "iam:CreateServiceLinkedRole",
        arns.role_arn(REGION, ACCOUNT, statements.AUTOSCALING_ROLE_PATH),
        {"iam:AWSServiceName": statements.AUTOSCALING_SERVICE},
    ) in needs
    assert ("sagemaker:CreateTransformJob", arns.transform_job_arn(REGION, ACCOUNT, f"{name}-batch-1"), {}) in needs


def test_the_operator_documents_scale_and_transform_only_the_workshops_endpoints():
    documents = operator_policies.operator_documents(CONFIG, ACCOUNT)
    other = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/someone-elses"
    ours = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{CONFIG.cpu_endpoint_name}"
    assert iam.allows(documents, "sagemaker:UpdateEndpointWeightsAndCapacities", ours)
    assert not iam.allows(documents, "sagemaker:UpdateEndpointWeightsAndCapacities", other)
    assert not iam.allows(
        documents, "sagemaker:CreateTransformJob", arns.transform_job_arn(REGION, ACCOUNT, "someone-elses-job")
    )
    assert not iam.allows(
        documents, "cloudwatch:DeleteAlarms", arns.autoscaling_alarm_arn(REGION, ACCOUNT, "someone-elses")
    )
    role = arns.role_arn(REGION, ACCOUNT, statements.AUTOSCALING_ROLE_PATH)
    assert not iam.allows(
        documents,
        "iam:CreateServiceLinkedRole",
        role,
        {"iam:AWSServiceName": "ec2.application-autoscaling.amazonaws.com"},
    )


@pytest.mark.slow  # starts the rehearsal's emulator
def test_a_deadline_firing_deletes_a_scaled_endpoint_as_the_account_holds_its_role(local_workshop):
    """The administrator's commands, the deadline role under its boundary, 07's scaling and the deadline firing,
    all against the strict rehearsal: the endpoint and its scaling are gone. With the role as it was before
    (DeleteEndpoint alone), AWS refuses the deletion, and so does the rehearsal."""
    from workshop_lib.aws import scaling, spend_guard
    from workshop_lib.aws.images import parse_image_uri

    from .values import DECISION_PINNED

    ws = local_workshop
    steps.setup(ws, reset=True)  # runs the administrator's printed commands against the emulator
    config, c = ws.config, ws.clients
    name = config.cpu_endpoint_name
    plan = endpoints.decision_cpu_plan(
        name,
        image=parse_image_uri(DECISION_PINNED),
        role_arn=config.sagemaker_role_arn,
        model_data_url=config.model_data_url,
        instance_type="ml.c5.2xlarge",
    )
    with c.acting_as(None):  # the endpoint as 04 leaves it, tagged
        c.sm.create_model(**plan.model)
        c.sm.create_endpoint_config(**plan.endpoint_config)
        c.sm.create_endpoint(**plan.endpoint)
    assert name_rules.WORKSHOP_TAGS.items() <= {t["Key"]: t["Value"] for t in plan.endpoint["Tags"]}.items()
    account = c.sts.get_caller_identity()["Account"]
    role, _ = spend_guard.ensure_role(c.get("iam"), config, account)
    spend_guard.set_deadline(
        c.get("scheduler"), name, role_arn=role, when=spend_guard.deadline_after(1), region=config.region
    )
    autoscaling = c.get("application-autoscaling")
    scaling.enable_autoscaling(autoscaling, name, invocations_per_instance=20)

    iam_client = _iam(ws)
    old = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "sagemaker:DeleteEndpoint",
                "Resource": f"arn:aws:sagemaker:*:{account}:endpoint/{name}",
            }
        ],
    }
    with c.acting_as(None):
        iam_client.put_role_policy(
            RoleName=spend_guard.SCHEDULER_ROLE_NAME,
            PolicyName=spend_guard.SCHEDULER_ROLE_NAME,
            PolicyDocument=json.dumps(old),
        )
    with pytest.raises(ClientError) as refused:
        ws.mode.fire_deadline(name, config.region)
    assert "application-autoscaling:DeregisterScalableTarget" in str(refused.value)
    assert c.sm.describe_endpoint(EndpointName=name)["EndpointName"] == name  # still billing: what AWS does too

    spend_guard.ensure_role(c.get("iam"), config, account)  # the current documents
    ws.mode.fire_deadline(name, config.region)
    with pytest.raises(ClientError):
        c.sm.describe_endpoint(EndpointName=name)
    assert scaling.scaling_of(autoscaling, name) is None  # SageMaker deregistered it with the deletion
    fired = [
        e
        for e in permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls()
        if e["principal"] == spend_guard.PRINCIPAL
    ]
    assert [bool(e.get("refused")) for e in fired] == [True, False]
    assert fired[1]["facts"]["scaled_variants"] == [f"endpoint/{name}/variant/AllTraffic"]


@pytest.mark.slow  # starts the rehearsal's emulator
def test_the_printed_administrator_commands_run_against_the_strict_rehearsal(local_workshop):
    """Inline, the four operator documents exceed IAM's 10,240 characters per role (the commands notebook 00 used to
    print fail on the fourth); as managed policies each is within 6,144 and the role holds five of ten."""
    from workshop_lib.aws import admin
    from workshop_lib.steps.policy_files import administrator_commands, policy_folder

    ws = local_workshop
    written = steps.setup(ws, reset=True)
    folder, role = policy_folder(ws), ws.config.sagemaker_role_arn.rsplit("/", 1)[1]
    printed = written.policies.attached  # what notebook 00 prints for the administrator
    commands = administrator_commands(ws.config, folder, "123456789012")
    assert all(admin.shell(argv) in printed for argv in commands)
    client = _iam(ws)
    attached = client.list_attached_role_policies(RoleName=role)["AttachedPolicies"]
    assert len(attached) == 1 + len(admin.operator_files())  # AmazonSageMakerFullAccess and the operator's
    old = [
        [
            "aws",
            "iam",
            "put-role-policy",
            "--role-name",
            role,
            "--policy-name",
            f"decision-workshop-operator-{i}",
            "--policy-document",
            f"file://{folder / name}",
        ]
        for i, name in enumerate(admin.operator_files())
    ]
    with pytest.raises(ClientError) as refused:
        ws.mode.run_as_administrator(old, ws.config.region)
    assert refused.value.response["Error"]["Code"] == "LimitExceeded"
    assert len(client.list_role_policies(RoleName=role)["PolicyNames"]) < len(old)


@pytest.mark.slow  # starts the rehearsal's emulator
def test_cleanup_finds_and_deletes_an_endpoint_deployed_under_another_name(local_workshop):
    """An endpoint deployed with the sample's --name is the workshop's by its tag: 08 finds it and, as the Studio
    participant, deletes it; an endpoint without the tag is neither listed nor touched."""
    from workshop_lib.aws.images import parse_image_uri

    from .values import DECISION_PINNED

    ws = local_workshop
    steps.setup(ws, reset=True)
    c = ws.clients
    for name, tagged in (("sample-flags-endpoint", True), ("someone-elses", False)):
        plan = endpoints.decision_cpu_plan(
            name,
            image=parse_image_uri(DECISION_PINNED),
            role_arn=ws.config.sagemaker_role_arn,
            model_data_url=ws.config.model_data_url,
            instance_type="ml.c5.2xlarge",
        )
        with c.acting_as(None):
            for request, create in (
                (plan.model, c.sm.create_model),
                (plan.endpoint_config, c.sm.create_endpoint_config),
                (plan.endpoint, c.sm.create_endpoint),
            ):
                create(**(request if tagged else {k: v for k, v in request.items() if k != "Tags"}))
    found = steps.tagged_endpoints(ws)
    assert "sample-flags-endpoint" in found and "someone-elses" not in found
    assert "sample-flags-endpoint" in steps.running_endpoints(ws)
    deleted = steps.delete_endpoints(ws, found)
    assert deleted.ok, deleted
    assert steps.running_endpoints(ws) == "no workshop endpoints found"
    assert c.sm.describe_endpoint(EndpointName="someone-elses")["EndpointName"] == "someone-elses"
    # only its log group is refused (a grant on every endpoint's logs would reach beyond the workshop); it costs
    # next to nothing, and the result says so
    refused = [e for e in permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls() if e.get("refused")]
    assert [(e["operation"], e["params"]["logGroupName"]) for e in refused] == [
        ("DeleteLogGroup", "/aws/sagemaker/Endpoints/sample-flags-endpoint")
    ]
    assert "log group /aws/sagemaker/Endpoints/sample-flags-endpoint: not deleted (AccessDenied" in deleted


@pytest.mark.slow  # starts the rehearsal's emulator
def test_a_bucket_another_account_created_first_is_refused_and_nothing_is_written(local_workshop):
    """Bucket names are global: another account may create the workshop's name first. Every S3 call states the
    expected owner, so notebook 00 stops there instead of writing the model and the build source into it."""
    from workshop_lib.config import LOCAL_BUCKET
    from workshop_lib.errors import InvalidInput

    ws = local_workshop
    url, _ = ws.mode.start_fresh()
    sts = modes.emulator_client("sts", REGION, url)
    other = sts.assume_role(RoleArn="arn:aws:iam::210987654321:role/sniper", RoleSessionName="sniper")["Credentials"]
    sniper = boto3.client(
        "s3",
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=other["AccessKeyId"],
        aws_secret_access_key=other["SecretAccessKey"],
        aws_session_token=other["SessionToken"],
    )
    sniper.create_bucket(Bucket=LOCAL_BUCKET)
    with pytest.raises(InvalidInput, match="does not own it"):
        steps.setup(ws)
    sent = [
        (e["operation"], e["params"])
        for e in permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG).calls()
        if e["service"] == "s3"
    ]
    assert sent and all(params.get("ExpectedBucketOwner") == "123456789012" for _, params in sent)
    assert not any(operation.startswith("Put") for operation, _ in sent)


@pytest.mark.slow  # starts the rehearsal's emulator
def test_an_organisations_key_encrypts_the_bucket_and_each_principal_needs_it(local_workshop, monkeypatch):
    """With WORKSHOP_KMS_KEY_ARN the administrator's lines give the bucket that key as its default encryption;
    every write then needs kms:GenerateDataKey (S3 asks KMS as the caller), which the workshop's documents grant
    each principal, and nothing else does."""
    ws = local_workshop
    url, _ = ws.mode.start_fresh()
    key = modes.emulator_client("kms", REGION, url).create_key(Description="the organisation's")["KeyMetadata"]["Arn"]
    monkeypatch.setenv("WORKSHOP_KMS_KEY_ARN", key)
    ws = steps.Workshop.load()
    config = steps.setup(ws).config
    assert config.kms_key_arn == key
    with ws.clients.acting_as(None):
        rule = ws.clients.s3.get_bucket_encryption(Bucket=config.bucket)["ServerSideEncryptionConfiguration"]["Rules"][
            0
        ]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}
    steps.ensure_codebuild_role(ws)
    steps.package_model(ws, progress=False)  # the operator uploads the source, CodeBuild's role the model
    log = permissions.CallLog(ws.rehearsal.home / steps.CALL_LOG)
    writes = [
        e for e in log.calls() if e["service"] == "s3" and e["operation"] in ("PutObject", "CreateMultipartUpload")
    ]
    assert {e["principal"] for e in writes} >= {permissions.OPERATOR, permissions.CODEBUILD}
    assert all(e["facts"]["bucket_key"] == key and not e.get("refused") for e in writes)
    # the operator's documents without the key's statements: the same upload is refused, as on AWS
    attached = log.attached
    for name, document in attached.attached().items():
        kept = [s for s in document["Statement"] if not s["Sid"].startswith("OrganisationKey")]
        attached.attach(name, {**document, "Statement": kept})
    with pytest.raises(ClientError, match="kms:GenerateDataKey"):
        steps.package_model(ws, progress=False)


@pytest.mark.slow  # starts the rehearsal's emulator
def test_a_request_the_rehearsal_refuses_is_among_those_the_step_shows(local_workshop):
    """On AWS a refused request was sent, and a learner needs to read it: the rehearsal refuses where AWS
    would, after the request is built, so the failed step's requests include it."""
    ws = local_workshop
    steps.setup(ws, reset=True)
    permissions.AttachedPolicies(ws.rehearsal.home / permissions.ATTACHED_FILE).clear()  # not attached yet
    with pytest.raises(steps.StepError) as stopped:
        steps.ensure_codebuild_role(ws)
    shown = [(r.service, r.operation) for r in stopped.value.requests]
    assert ("iam", "GetRole") in shown
    assert "iam GetRole" in stopped.value.requests_note
