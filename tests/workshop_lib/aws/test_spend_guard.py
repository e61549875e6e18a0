"""The spend guard: each endpoint's deadline as an EventBridge Scheduler one-time schedule.

The requests are checked against botocore's Scheduler model; the role's documents and the operator's
statements go through the same IAM checks as the other policies (``iam.check_policy_document``,
the evaluator, the audit); the senders run against moto, whose scheduler stores schedules and never
fires them (what firing would do is held against the role by the audit instead).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from workshop_lib import name_rules
from workshop_lib.aws import calls, iam, operator_policies, policies, role_boundary, service_roles, spend_guard
from workshop_lib.config import WorkshopConfig
from workshop_lib.errors import AwsFailure, InvalidInput
from workshop_lib.local import iam_needs, permissions

from .values import REGION, ROLE

ACCOUNT = "123456789012"
OTHER = "210987654321"
CONFIG = WorkshopConfig(mode="aws", region=REGION, bucket="sagemaker-decision-workshop-test", sagemaker_role_arn=ROLE)
NOW = datetime(2026, 12, 1, 9, 30, 5, tzinfo=timezone.utc)
SCHEDULER_ROLE = spend_guard.scheduler_role_arn(REGION, ACCOUNT)


def _request(name="decision-workshop-cpu", operation="CreateSchedule", hours=4):
    return spend_guard.schedule_request(
        name, role_arn=SCHEDULER_ROLE, when=spend_guard.deadline_after(hours, NOW), region=REGION, operation=operation
    )


# ---- the requests, through botocore's model ------------------------------------------------------------


def test_the_create_request_is_a_one_time_schedule_that_deletes_the_endpoint():
    request = _request()
    calls.validate("scheduler", "CreateSchedule", request)
    assert request["ScheduleExpression"] == "at(2026-12-01T13:31:00)"  # 4 h on, rounded up to the minute
    assert request["ScheduleExpressionTimezone"] == "UTC"
    assert request["ActionAfterCompletion"] == "NONE" and request["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = request["Target"]
    assert target["Arn"] == "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
    assert target["RoleArn"] == f"arn:aws:iam::{ACCOUNT}:role/decision-workshop-scheduler"
    assert json.loads(target["Input"]) == {"EndpointName": "decision-workshop-cpu"}  # DeleteEndpoint's input
    assert request["Name"] == "decision-workshop-cpu-deadline" and request["GroupName"] == "default"


def test_update_get_and_delete_requests_pass_botocores_model():
    update = _request(operation="UpdateSchedule", hours=8)
    calls.validate("scheduler", "UpdateSchedule", update)
    assert update["ScheduleExpression"] == "at(2026-12-01T17:31:00)"
    assert spend_guard.get_request("e") == {"Name": "e-deadline", "GroupName": "default"}
    assert spend_guard.delete_request("e") == {"Name": "e-deadline", "GroupName": "default"}


def test_botocore_would_refuse_what_the_builder_never_sends():
    broken = _request()
    del broken["FlexibleTimeWindow"]
    with pytest.raises(InvalidInput, match="FlexibleTimeWindow"):
        calls.validate("scheduler", "CreateSchedule", broken)
    with pytest.raises(AwsFailure, match="not an IAM role ARN"):
        spend_guard.schedule_request("e", role_arn="arn:aws:iam::1:user/x", when=NOW, region=REGION)


def test_schedule_names_fit_the_schedulers_pattern_even_for_the_longest_endpoint_names():
    pattern, max_len = (
        calls.operation_model("scheduler", "CreateSchedule").input_shape.members["Name"].metadata["pattern"],
        64,
    )
    import re

    long_a, long_b = "a" * 63, "a" * 62 + "b"
    for name in (long_a, long_b, "e", "decision-workshop-standard"):
        made = spend_guard.schedule_name(name)
        assert re.fullmatch(pattern, made) and len(made) <= max_len and made.endswith("-deadline")
    assert spend_guard.schedule_name(long_a) != spend_guard.schedule_name(long_b)  # the hash keeps them apart


def test_deadlines_and_their_text():
    assert spend_guard.deadline_after(4, NOW) == datetime(2026, 12, 1, 13, 31, tzinfo=timezone.utc)
    assert spend_guard.deadline_after(0.25, NOW.replace(second=0, microsecond=0)) == datetime(
        2026, 12, 1, 9, 45, tzinfo=timezone.utc
    )
    with pytest.raises(AwsFailure, match="a deadline needs a positive number of hours, got 0"):
        spend_guard.deadline_after(0, NOW)
    when = spend_guard.parse_at("at(2026-12-01T13:31:00)")
    assert when == datetime(2026, 12, 1, 13, 31, tzinfo=timezone.utc)
    assert spend_guard.parse_at("rate(5 minutes)") is None
    assert spend_guard.parse_at("at(2026-12-01T13:31:00)", "Europe/Paris") is None  # not read in UTC
    text = spend_guard.EndpointDeadline("e", when, "e-deadline").text(NOW)
    assert text.startswith("endpoint e is deleted at 2026-12-01 13:31 UTC (in 4 h 0 min)")
    assert "python -m workshop_lib extend --name e --hours N" in text
    assert spend_guard.remaining_text(when, when + timedelta(seconds=1)) == "passed"
    assert spend_guard.remaining_text(when, when - timedelta(seconds=20)) == "in less than a minute"


# ---- the documents: the same IAM checks as the other policies ---------------------------------------


def test_the_role_and_trust_documents_pass_the_policy_checks():
    role = service_roles.scheduler_role_policy(CONFIG, ACCOUNT)
    trust = service_roles.scheduler_trust_policy(CONFIG, ACCOUNT)
    iam.check_policy_document(role)
    iam.check_policy_document(trust, trust=True)
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    # the one "*": deregistering a scaled variant, which deleting it requires, held to SageMaker's variants
    assert iam.wildcard_grants(role) == [
        ("DeregisterScaledVariants", "application-autoscaling:DeregisterScalableTarget")
    ]
    calls.validate("iam", "CreateRole", policies.create_role_request(spend_guard.SCHEDULER_ROLE_NAME, trust))


TAGGED = {f"aws:ResourceTag/{k}": v for k, v in name_rules.WORKSHOP_TAGS.items()}
SCALING = {
    "application-autoscaling:service-namespace": "sagemaker",
    "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount",
}


def test_the_role_may_delete_exactly_the_endpoints_that_carry_the_workshops_tag():
    role = service_roles.scheduler_role_policy(CONFIG, ACCOUNT)
    for name in (CONFIG.gpu_endpoint_name, "deployed-with-the-samples-flags"):  # any name, by the tag
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{name}"
        assert iam.allows(role, "sagemaker:DeleteEndpoint", arn, TAGGED)
        for action in ("sagemaker:DeleteEndpointConfig", "sagemaker:CreateEndpoint", "sagemaker:InvokeEndpoint"):
            assert not iam.allows(role, action, arn, TAGGED)
        assert not iam.allows(role, "sagemaker:DeleteEndpoint", arn)  # untagged: someone else's
    # the documents do not name a run's endpoints: a new deploy never rewrites them
    assert role == service_roles.scheduler_role_policy(CONFIG.replace(cpu_endpoint_name="renamed"), ACCOUNT)


def test_the_role_may_delete_a_scaled_endpoint():
    """Deleting an auto-scaled endpoint needs DeregisterScalableTarget from the caller (SageMaker guide)."""
    role = service_roles.scheduler_role_policy(CONFIG, ACCOUNT)
    assert iam.allows(role, "application-autoscaling:DeregisterScalableTarget", "*", SCALING)
    ecs = {**SCALING, "application-autoscaling:service-namespace": "ecs"}
    assert not iam.allows(role, "application-autoscaling:DeregisterScalableTarget", "*", ecs)
    call = {
        "principal": spend_guard.PRINCIPAL,
        "service": "sagemaker",
        "operation": "DeleteEndpoint",
        "params": {"EndpointName": "e"},
        "facts": {
            "resource_tags": dict(name_rules.WORKSHOP_TAGS),
            "scaled_variants": ["endpoint/e/variant/AllTraffic"],
        },
    }
    needs = iam_needs.needed(call, REGION, ACCOUNT)
    assert [a for a, _, _ in needs] == ["sagemaker:DeleteEndpoint", "application-autoscaling:DeregisterScalableTarget"]
    assert all(iam.allows(role, *need) for need in needs)
    old = {"Version": "2012-10-17", "Statement": [role["Statement"][0]]}  # the role before: DeleteEndpoint only
    assert not iam.allows(old, *needs[1])


def test_the_operator_may_manage_the_deadlines_and_pass_the_role_to_the_scheduler_only():
    document = operator_policies.operator_deadlines_policy(CONFIG, ACCOUNT)
    iam.check_policy_document(document)
    assert iam.wildcard_grants(document) == []
    schedule = spend_guard.schedule_arn(REGION, ACCOUNT, CONFIG.cpu_endpoint_name)
    for action in ("CreateSchedule", "UpdateSchedule", "GetSchedule", "DeleteSchedule"):
        assert iam.allows(document, f"scheduler:{action}", schedule)
    assert not iam.allows(
        document, "scheduler:DeleteSchedule", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/someone-elses"
    )
    assert iam.allows(document, "iam:PassRole", SCHEDULER_ROLE, {"iam:PassedToService": "scheduler.amazonaws.com"})
    assert not iam.allows(document, "iam:PassRole", SCHEDULER_ROLE, {"iam:PassedToService": "ec2.amazonaws.com"})
    assert not iam.allows(document, "iam:PassRole", ROLE, {"iam:PassedToService": "scheduler.amazonaws.com"})
    # the role itself is managed under operator-roles-policy.json, only with the workshop's boundary on it
    roles = role_boundary.operator_roles_policy(CONFIG, ACCOUNT)
    bounded = {"iam:PermissionsBoundary": role_boundary.boundary_policy_arn(REGION, ACCOUNT)}
    for action in ("iam:CreateRole", "iam:PutRolePolicy", "iam:DeleteRolePolicy"):
        assert iam.allows(roles, action, SCHEDULER_ROLE, bounded)
        assert not iam.allows(roles, action, SCHEDULER_ROLE)
        assert not iam.allows(roles, action, f"arn:aws:iam::{ACCOUNT}:role/Admin", bounded)
    for action in ("iam:GetRole", "iam:DeleteRole"):
        assert iam.allows(roles, action, SCHEDULER_ROLE)
        assert not iam.allows(roles, action, f"arn:aws:iam::{ACCOUNT}:role/Admin")


def test_a_deadline_set_before_a_change_of_region_keeps_its_permissions():
    role = service_roles.scheduler_role_policy(CONFIG.replace(region="us-west-2"), ACCOUNT)
    operator = operator_policies.operator_deadlines_policy(CONFIG.replace(region="us-west-2"), ACCOUNT)
    for region in (REGION, "us-west-2", "ap-southeast-3"):
        endpoint = f"arn:aws:sagemaker:{region}:{ACCOUNT}:endpoint/{CONFIG.gpu_endpoint_name}"
        assert iam.allows(role, "sagemaker:DeleteEndpoint", endpoint, TAGGED)
        assert iam.allows(
            operator, "scheduler:GetSchedule", spend_guard.schedule_arn(region, ACCOUNT, CONFIG.gpu_endpoint_name)
        )
    assert not iam.allows(
        role,
        "sagemaker:DeleteEndpoint",
        f"arn:aws:sagemaker:{REGION}:{OTHER}:endpoint/{CONFIG.gpu_endpoint_name}",
        TAGGED,
    )


def test_the_documents_are_written_with_the_others_and_each_fits_iams_quota():
    written = policies.policies(CONFIG, ACCOUNT)
    assert {"scheduler-role-policy.json", "scheduler-trust-policy.json", "operator-deadlines-policy.json"} <= set(
        written
    )
    for region in ("us-east-1", "ap-southeast-3", "eu-central-2"):  # the longer regions lengthen every ARN
        config = CONFIG.replace(region=region, bucket=f"sagemaker-decision-workshop-{ACCOUNT}-{region}")
        for name, document in policies.policies(config, ACCOUNT).items():
            iam.check_policy_document(document, trust=name.endswith("-trust-policy.json"))


def test_the_audit_holds_the_deadline_calls_to_the_documents():
    documents = {
        permissions.OPERATOR: operator_policies.operator_documents(CONFIG, ACCOUNT),
        spend_guard.PRINCIPAL: service_roles.scheduler_role_policy(CONFIG, ACCOUNT),
    }
    request = _request(CONFIG.gpu_endpoint_name)
    made = [
        {"principal": permissions.OPERATOR, "service": "scheduler", "operation": "CreateSchedule", "params": request},
        {
            "principal": permissions.OPERATOR,
            "service": "scheduler",
            "operation": "DeleteSchedule",
            "params": spend_guard.delete_request(CONFIG.gpu_endpoint_name),
        },
        {
            "principal": permissions.OPERATOR,
            "service": "iam",
            "operation": "CreateRole",
            "params": {
                "RoleName": spend_guard.SCHEDULER_ROLE_NAME,
                "PermissionsBoundary": role_boundary.boundary_policy_arn(REGION, ACCOUNT),
            },
        },
        {
            "principal": permissions.OPERATOR,
            "service": "iam",
            "operation": "PutRolePolicy",
            "params": {"RoleName": spend_guard.SCHEDULER_ROLE_NAME},
        },
    ]
    created = {
        "principal": permissions.OPERATOR,
        "service": "sagemaker",
        "operation": "CreateEndpoint",
        "params": {"EndpointName": CONFIG.gpu_endpoint_name, "Tags": name_rules.tag_list(name_rules.WORKSHOP_TAGS)},
    }
    fired = spend_guard.deadline_calls([created, *made])
    assert fired == [
        {
            "principal": spend_guard.PRINCIPAL,
            "service": "sagemaker",
            "operation": "DeleteEndpoint",
            "params": {"EndpointName": CONFIG.gpu_endpoint_name},
            "facts": {"resource_tags": dict(name_rules.WORKSHOP_TAGS), "scaled_variants": []},
        }
    ]
    audit = permissions.audit([*made, *fired], documents, REGION, ACCOUNT)
    assert audit.ok, str(audit)
    assert audit.checked[spend_guard.PRINCIPAL] == 1
    # a deadline for an endpoint that is not the workshop's (no workshop tag) would be refused to the role
    foreign = {
        **request,
        "Name": "theirs-deadline",
        "Target": {**request["Target"], "Input": json.dumps({"EndpointName": "theirs"})},
    }
    call = {"principal": permissions.OPERATOR, "service": "scheduler", "operation": "CreateSchedule", "params": foreign}
    audit = permissions.audit([call, *spend_guard.deadline_calls([call])], documents, REGION, ACCOUNT)
    assert {(p, a) for p, a, _, _ in audit.denied} == {(spend_guard.PRINCIPAL, "sagemaker:DeleteEndpoint")}


# ---- the senders, against moto's scheduler -----------------------------------------------------------


@pytest.fixture
def aws_clients(moto_aws):
    import boto3

    return {s: boto3.client(s, region_name=REGION) for s in ("scheduler", "iam", "sagemaker")}


def test_set_read_extend_and_remove_a_deadline(aws_clients):
    scheduler = aws_clients["scheduler"]
    name = CONFIG.cpu_endpoint_name
    assert spend_guard.read_deadline(scheduler, name) is None
    made = spend_guard.set_deadline(
        scheduler, name, role_arn=SCHEDULER_ROLE, region=REGION, when=spend_guard.deadline_after(4, NOW)
    )
    assert made.when == datetime(2026, 12, 1, 13, 31, tzinfo=timezone.utc)
    assert spend_guard.read_deadline(scheduler, name) == made
    stored = scheduler.get_schedule(Name=made.schedule)
    assert stored["ActionAfterCompletion"] == "NONE" and stored["Target"]["Arn"].endswith(":deleteEndpoint")
    moved = spend_guard.extend(scheduler, name, 8, role_arn=SCHEDULER_ROLE, region=REGION, now=NOW)
    assert moved.when == made.when + timedelta(hours=4)
    assert scheduler.get_schedule(Name=made.schedule)["ScheduleExpression"] == "at(2026-12-01T17:31:00)"
    again = spend_guard.set_deadline(
        scheduler, name, role_arn=SCHEDULER_ROLE, region=REGION, when=spend_guard.deadline_after(1, NOW)
    )  # an existing one is moved
    assert spend_guard.read_deadline(scheduler, name).when == again.when
    assert spend_guard.remove_deadline(scheduler, name) == spend_guard.DELETED
    assert spend_guard.remove_deadline(scheduler, name) == spend_guard.ALREADY_GONE
    assert scheduler.list_schedules()["Schedules"] == []


def test_a_schedule_of_the_same_name_that_is_not_the_workshops_is_left_alone(aws_clients):
    scheduler = aws_clients["scheduler"]
    name = CONFIG.gpu_endpoint_name
    scheduler.create_schedule(
        Name=spend_guard.schedule_name(name),
        ScheduleExpression="rate(1 day)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:nightly",
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/their-role",
        },
    )
    with pytest.raises(spend_guard.NotTheWorkshops):
        spend_guard.read_deadline(scheduler, name)
    with pytest.raises(spend_guard.NotTheWorkshops):
        spend_guard.set_deadline(scheduler, name, role_arn=SCHEDULER_ROLE, region=REGION, when=NOW)
    assert spend_guard.remove_deadline(scheduler, name) == spend_guard.LEFT_ALONE
    assert scheduler.get_schedule(Name=spend_guard.schedule_name(name))["ScheduleExpression"] == "rate(1 day)"


def test_a_new_role_the_scheduler_cannot_use_yet_is_retried(aws_clients):
    scheduler = aws_clients["scheduler"]
    answers = iter(["ValidationException", "ValidationException", None])

    class Denied:
        status_code = 400

    def first_refuse(**_):
        code = next(answers)
        if code:
            return Denied(), {
                "Error": {
                    "Code": code,
                    "Message": "The execution role you provide must allow AWS "
                    "EventBridge Scheduler to assume the role.",
                }
            }
        return None

    scheduler.meta.events.register("before-call.scheduler.CreateSchedule", first_refuse)
    slept = []
    made = spend_guard.set_deadline(
        scheduler, "e", role_arn=SCHEDULER_ROLE, region=REGION, when=NOW, sleep=slept.append
    )
    assert slept == [1, 2] and spend_guard.read_deadline(scheduler, "e") == made


def test_ensure_role_creates_the_role_once_and_keeps_its_permissions_current(aws_clients):
    iam = aws_clients["iam"]
    arn, done = spend_guard.ensure_role(iam, CONFIG, ACCOUNT)
    assert arn == SCHEDULER_ROLE and done.startswith("created")
    role = iam.get_role(RoleName=spend_guard.SCHEDULER_ROLE_NAME)["Role"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == role_boundary.boundary_policy_arn(REGION, ACCOUNT)
    assert spend_guard.regions_of(iam.list_role_tags(RoleName=spend_guard.SCHEDULER_ROLE_NAME)["Tags"]) == [REGION]
    renamed = CONFIG.replace(cpu_endpoint_name="renamed-cpu")
    arn, done = spend_guard.ensure_role(iam, renamed, ACCOUNT)
    assert "exists" in done
    inline = iam.get_role_policy(RoleName=spend_guard.SCHEDULER_ROLE_NAME, PolicyName=spend_guard.SCHEDULER_ROLE_NAME)[
        "PolicyDocument"
    ]
    # keyed on the workshop's tag, not on names: a deploy under another name leaves the role as it was
    assert inline == service_roles.scheduler_role_policy(CONFIG, ACCOUNT) and "renamed" not in json.dumps(inline)


def test_ensure_role_adds_each_region_and_bounds_a_role_made_without_a_boundary(aws_clients):
    iam = aws_clients["iam"]
    iam.create_role(
        **policies.create_role_request(
            spend_guard.SCHEDULER_ROLE_NAME, service_roles.scheduler_trust_policy(CONFIG, ACCOUNT), path="/"
        )
    )
    _, done = spend_guard.ensure_role(iam, CONFIG, ACCOUNT)
    assert "boundary" in done
    role = iam.get_role(RoleName=spend_guard.SCHEDULER_ROLE_NAME)["Role"]
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == role_boundary.boundary_policy_arn(REGION, ACCOUNT)
    spend_guard.ensure_role(iam, CONFIG.replace(region="us-west-2"), ACCOUNT)
    spend_guard.ensure_role(iam, CONFIG, ACCOUNT)
    tags = iam.list_role_tags(RoleName=spend_guard.SCHEDULER_ROLE_NAME)["Tags"]
    assert spend_guard.regions_of(tags) == sorted([REGION, "us-west-2"])
