"""The roles the operator creates sit under the workshop's permissions boundary, so the operator's rights on
them (create, write their policies, pass them to CodeBuild and the scheduler) cannot become more than the
workshop needs: held against the documents with the evaluator, and through the rehearsal's audit."""

from __future__ import annotations

import pytest

from workshop_lib import name_rules
from workshop_lib.aws import arns, iam, operator_policies, role_boundary, service_roles, spend_guard
from workshop_lib.config import WorkshopConfig
from workshop_lib.local import iam_needs, permissions

from .values import REGION, ROLE

ACCOUNT = "123456789012"
CONFIG = WorkshopConfig(mode="aws", region=REGION, bucket="sagemaker-decision-workshop-test", sagemaker_role_arn=ROLE)
BOUNDARY = role_boundary.boundary_policy_arn(REGION, ACCOUNT)
OPERATOR = operator_policies.operator_documents(CONFIG, ACCOUNT)
ROLES = [
    arns.role_arn(REGION, ACCOUNT, service_roles.CODEBUILD_ROLE_NAME),
    spend_guard.scheduler_role_arn(REGION, ACCOUNT),
]
EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def _own_grants(document) -> list[tuple[str, str, dict]]:
    """Each (action, resource, context) a document grants, its conditions met by the values they name."""
    out = []
    for statement in document["Statement"]:
        context = {k: v for values in (statement.get("Condition") or {}).values() for k, v in values.items()}
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        out += [(action, resource, context) for action in statement["Action"] for resource in resources]
    return out


# Another region, bucket and endpoint names than the boundary was written with.
ELSEWHERE = CONFIG.replace(
    region="ap-southeast-3", bucket="another-bucket-of-this-account", cpu_endpoint_name="renamed"
)


@pytest.mark.parametrize("config", [CONFIG, ELSEWHERE], ids=["as-written", "after-a-change-of-region"])
def test_the_one_boundary_covers_the_roles_own_policies_in_any_region_bucket_and_name(config):
    boundary = role_boundary.role_boundary_policy(CONFIG, ACCOUNT)
    iam.check_policy_document(boundary)
    grants = _own_grants(service_roles.codebuild_service_role_policy(config, ACCOUNT))
    grants += _own_grants(service_roles.scheduler_role_policy(config, ACCOUNT))
    assert len(grants) > 20
    outside = [(a, r) for a, r, c in grants if not iam.allows(boundary, a, r, c)]
    assert outside == []
    assert boundary == role_boundary.role_boundary_policy(ELSEWHERE, ACCOUNT)  # nothing in it depends on the run


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", role_boundary.BOUNDED_ROLE_ACTIONS)
def test_the_operator_creates_and_changes_the_roles_only_with_the_workshops_boundary(role, action):
    assert iam.allows(OPERATOR, action, role, {"iam:PermissionsBoundary": BOUNDARY})
    assert not iam.allows(OPERATOR, action, role)  # no boundary on the role (or in CreateRole)
    other = f"arn:aws:iam::{ACCOUNT}:policy/AdministratorAccess"
    assert not iam.allows(OPERATOR, action, role, {"iam:PermissionsBoundary": other})
    assert not iam.allows(OPERATOR, action, f"arn:aws:iam::{ACCOUNT}:role/Admin", {"iam:PermissionsBoundary": BOUNDARY})


@pytest.mark.parametrize("role", ROLES)
def test_the_operator_may_not_remove_or_replace_the_boundary(role):
    verdict = iam.evaluate(OPERATOR, "iam:DeleteRolePermissionsBoundary", role, {"iam:PermissionsBoundary": BOUNDARY})
    assert not verdict.allowed and verdict.reason == "denied by KeepRoleBoundary"
    other = f"arn:aws:iam::{ACCOUNT}:policy/AdministratorAccess"
    verdict = iam.evaluate(OPERATOR, "iam:PutRolePermissionsBoundary", role, {"iam:PermissionsBoundary": other})
    assert not verdict.allowed and verdict.reason == "denied by NoOtherBoundary"
    # an explicit deny wins over any Allow another attached policy might add
    assert not iam.allows([OPERATOR, EVERYTHING], "iam:DeleteRolePermissionsBoundary", role)


def test_a_role_given_everything_by_the_operator_can_still_do_only_the_workshops_work():
    boundary = role_boundary.role_boundary_policy(CONFIG, ACCOUNT)
    # the operator may write "*" into the deadlines' role: the role carries the boundary...
    assert iam.allows(OPERATOR, "iam:PutRolePolicy", ROLES[1], {"iam:PermissionsBoundary": BOUNDARY})
    # ...and what the role may then do, as the scheduler or a build runs it, is capped by the boundary
    for action, resource in (
        ("iam:CreateUser", f"arn:aws:iam::{ACCOUNT}:user/backdoor"),
        ("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/Admin"),
        ("s3:GetObject", "arn:aws:s3:::someone-elses-bucket/secrets.txt"),
        ("sagemaker:DeleteEndpoint", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/production"),
        ("s3:GetObject", "arn:aws:s3:::decision-workshop-sniped/model.tar.gz"),
        ("ecr:PutImage", f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/production"),
    ):
        assert iam.allows(EVERYTHING, action, resource)
        verdict = iam.evaluate(EVERYTHING, action, resource, boundary=boundary)
        assert not verdict.allowed and verdict.reason.startswith("outside the permissions boundary"), action
    endpoint = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{CONFIG.gpu_endpoint_name}"
    tagged = {f"aws:ResourceTag/{k}": v for k, v in name_rules.WORKSHOP_TAGS.items()}
    assert iam.allows(EVERYTHING, "sagemaker:DeleteEndpoint", endpoint, tagged, boundary=boundary)
    own_bucket = {"s3:ResourceAccount": ACCOUNT}
    assert iam.allows(EVERYTHING, "s3:PutObject", "arn:aws:s3:::any-bucket/x", own_bucket, boundary=boundary)
    assert not iam.allows(
        EVERYTHING, "s3:PutObject", "arn:aws:s3:::any-bucket/x", {"s3:ResourceAccount": "2" * 12}, boundary=boundary
    )
    # the boundary grants nothing by itself
    listing = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}]}
    assert not iam.allows(listing, "sagemaker:DeleteEndpoint", endpoint, tagged, boundary=boundary)


def _call(operation, **params):
    return {"principal": permissions.OPERATOR, "service": "iam", "operation": operation, "params": params}


def test_the_rehearsals_audit_reads_the_boundary_from_the_calls():
    name = spend_guard.SCHEDULER_ROLE_NAME
    documents = {permissions.OPERATOR: OPERATOR}
    bounded = [_call("CreateRole", RoleName=name, PermissionsBoundary=BOUNDARY), _call("PutRolePolicy", RoleName=name)]
    audit = permissions.audit(bounded, documents, REGION, ACCOUNT, not_exercised={})
    assert not audit.denied, str(audit)
    unbounded = [_call("CreateRole", RoleName=name), _call("PutRolePolicy", RoleName=name)]
    denied = permissions.audit(unbounded, documents, REGION, ACCOUNT, not_exercised={}).denied
    assert [a for _, a, _, _ in denied] == ["iam:CreateRole", "iam:PutRolePolicy"]
    # a boundary removed (by someone allowed to) leaves the role's permissions closed to the operator
    removed = [bounded[0], _call("DeleteRolePermissionsBoundary", RoleName=name), _call("PutRolePolicy", RoleName=name)]
    denied = permissions.audit(removed, documents, REGION, ACCOUNT, not_exercised={}).denied
    assert [a for _, a, _, _ in denied] == ["iam:DeleteRolePermissionsBoundary", "iam:PutRolePolicy"]
    assert iam_needs.role_boundaries(bounded) == {name: BOUNDARY}


def test_the_update_endpoint_is_checked_and_granted_on_the_endpoint_and_its_new_config():
    call = {
        "principal": permissions.OPERATOR,
        "service": "sagemaker",
        "operation": "UpdateEndpoint",
        "params": {"EndpointName": CONFIG.gpu_endpoint_name, "EndpointConfigName": f"{CONFIG.gpu_endpoint_name}-v2"},
    }
    needs = iam_needs.needed(call, REGION, ACCOUNT)
    arns = [resource for action, resource, _ in needs if action == "sagemaker:UpdateEndpoint"]
    assert arns == [
        f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{CONFIG.gpu_endpoint_name}",
        f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint-config/{CONFIG.gpu_endpoint_name}-v2",
    ]
    audit = permissions.audit([call], {permissions.OPERATOR: OPERATOR}, REGION, ACCOUNT)
    assert not audit.denied, str(audit)
    foreign = {**call, "params": {**call["params"], "EndpointConfigName": "someone-elses-config"}}
    denied = permissions.audit([foreign], {permissions.OPERATOR: OPERATOR}, REGION, ACCOUNT).denied
    assert [(a, r.rsplit("/", 1)[-1]) for _, a, r, _ in denied] == [
        ("sagemaker:UpdateEndpoint", "someone-elses-config")
    ]


def test_the_sagemaker_role_may_read_the_endpoints_rollback_alarms_only():
    role = service_roles.sagemaker_execution_role_policy(CONFIG, ACCOUNT)
    alarm = arns.cloudwatch_alarm_arn(REGION, ACCOUNT, f"{CONFIG.gpu_endpoint_name}/5xx")
    assert iam.allows(role, "cloudwatch:DescribeAlarms", alarm)
    assert not iam.allows(role, "cloudwatch:DescribeAlarms", arns.cloudwatch_alarm_arn(REGION, ACCOUNT, "other"))
    assert not iam.allows(role, "cloudwatch:DeleteAlarms", alarm)


def test_a_boundary_policy_not_created_yet_is_one_line_saying_how(monkeypatch):
    import boto3
    from botocore.stub import ANY, Stubber

    from workshop_lib.aws import roles
    from workshop_lib.errors import AwsFailure

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("iam", region_name="us-east-1")
    trust = service_roles.scheduler_trust_policy(CONFIG, ACCOUNT)
    with Stubber(client) as stub:
        stub.add_client_error(
            "create_role",
            "NoSuchEntity",
            f"Policy {BOUNDARY} does not exist or is not attachable.",
            expected_params={
                "RoleName": "r",
                "Path": "/",
                "AssumeRolePolicyDocument": ANY,
                "Description": ANY,
                "PermissionsBoundary": BOUNDARY,
            },
        )
        with pytest.raises(AwsFailure) as raised:
            roles.create(client, "r", trust, BOUNDARY)
    text = str(raised.value)
    assert "\n" not in text and "does not exist yet" in text
    assert "aws iam create-policy --policy-name decision-workshop-role-boundary --path /decision-workshop/" in text


def test_the_audit_holds_the_workshops_roles_to_their_boundary():
    """A call the role's own policy allows but its boundary does not is denied in the audit, as IAM would."""
    everything = {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "All", "Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    boundary = role_boundary.role_boundary_policy(CONFIG, ACCOUNT)
    push = {
        "principal": permissions.CODEBUILD,
        "service": "ecr",
        "operation": "PutImage",
        "params": {"repositoryName": "production"},
    }
    documents = {permissions.CODEBUILD: everything}
    assert permissions.audit([push], documents, REGION, ACCOUNT, not_exercised={}).ok
    capped = permissions.audit(
        [push], documents, REGION, ACCOUNT, not_exercised={}, capped_by={permissions.CODEBUILD: boundary}
    )
    assert [(a, why.split(" (")[0]) for _, a, _, why in capped.denied] == [
        ("ecr:PutImage", "outside the permissions boundary")
    ]
