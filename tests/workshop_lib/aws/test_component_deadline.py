"""The deadline of an endpoint that hosts an inference component: two one-time schedules, the component's
DeleteInferenceComponent at the deadline and the endpoint's DeleteEndpoint ``COMPONENT_MARGIN`` later, both run as
the deadlines' role, which may delete exactly those. Pure builders through botocore's model, the senders against
moto's scheduler, the fired calls held against the role by the audit."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from workshop_lib import name_rules
from workshop_lib.aws import calls, iam, inference_components, service_roles, spend_guard
from workshop_lib.config import WorkshopConfig
from workshop_lib.local import permissions

from .values import REGION, ROLE

ACCOUNT = "123456789012"
CONFIG = WorkshopConfig(mode="aws", region=REGION, bucket="sagemaker-decision-workshop-test", sagemaker_role_arn=ROLE)
NOW = datetime(2026, 12, 1, 9, 30, 5, tzinfo=timezone.utc)
SCHEDULER_ROLE = spend_guard.scheduler_role_arn(REGION, ACCOUNT)
ENDPOINT = inference_components.ZERO_ENDPOINT
COMPONENT = inference_components.component_name(ENDPOINT)


def _component_request(operation="CreateSchedule", when=NOW, region=REGION):
    return spend_guard.schedule_request(
        COMPONENT,
        role_arn=SCHEDULER_ROLE,
        when=when,
        region=region,
        operation=operation,
        deletes=spend_guard.COMPONENT,
    )


def test_the_components_schedule_calls_delete_inference_component_with_its_name():
    for operation in ("CreateSchedule", "UpdateSchedule"):
        request = _component_request(operation)
        calls.validate("scheduler", operation, request)
        assert request["Name"] == f"{COMPONENT}-deadline" != spend_guard.schedule_name(ENDPOINT)
        assert request["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:sagemaker:deleteInferenceComponent"
        assert json.loads(request["Target"]["Input"]) == {"InferenceComponentName": COMPONENT}
        assert request["Target"]["RoleArn"] == SCHEDULER_ROLE and request["ActionAfterCompletion"] == "NONE"
    china = _component_request(region="cn-north-1")["Target"]["Arn"]
    assert china == "arn:aws-cn:scheduler:::aws-sdk:sagemaker:deleteInferenceComponent"


def test_the_endpoint_goes_a_margin_after_its_component_and_alone_at_the_deadline():
    assert spend_guard.deadline_times(NOW) == [("", NOW)]
    (first, at_first), (second, at_second) = spend_guard.deadline_times(NOW, COMPONENT)
    assert (first, second) == (COMPONENT, "") and at_first == NOW
    assert at_second - at_first == spend_guard.COMPONENT_MARGIN >= timedelta(minutes=10)


def test_only_the_workshops_schedule_for_that_component_counts():
    request = _component_request()
    described = {**request, "Target": request["Target"]}
    assert spend_guard.is_workshop_schedule(described, COMPONENT, spend_guard.COMPONENT)
    assert not spend_guard.is_workshop_schedule(described, COMPONENT)  # not DeleteEndpoint
    assert not spend_guard.is_workshop_schedule(described, "other-decision", spend_guard.COMPONENT)
    theirs = {**request, "Target": {**request["Target"], "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/their-role"}}
    assert not spend_guard.is_workshop_schedule(theirs, COMPONENT, spend_guard.COMPONENT)


def test_the_role_deletes_the_workshops_components_and_tagged_endpoints_only():
    document = iam.check_policy_document(service_roles.scheduler_role_policy(CONFIG, ACCOUNT))
    tags = {f"aws:ResourceTag/{k}": v for k, v in name_rules.WORKSHOP_TAGS.items()}

    def allowed(action, resource, context=None):
        return iam.evaluate([document], action, resource, context or {}).allowed

    component = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:inference-component/{COMPONENT}"
    assert allowed("sagemaker:DeleteInferenceComponent", component)
    assert not allowed("sagemaker:DeleteInferenceComponent", component.replace(ACCOUNT, "210987654321"))
    assert not allowed("sagemaker:DeleteInferenceComponent", component.replace("-decision", "-theirs"))
    assert not allowed("sagemaker:DeleteEndpoint", component, tags)
    assert not allowed("sagemaker:UpdateInferenceComponent", component)
    endpoint = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:endpoint/{ENDPOINT}"
    assert allowed("sagemaker:DeleteEndpoint", endpoint, tags) and not allowed("sagemaker:DeleteEndpoint", endpoint)
    assert not allowed("sagemaker:DeleteInferenceComponent", endpoint, tags)


def test_the_audit_holds_both_fired_calls_to_the_role():
    def sent(operation, params):
        return {"principal": permissions.OPERATOR, "service": "sagemaker", "operation": operation, "params": params}

    tagged = name_rules.tag_list(name_rules.WORKSHOP_TAGS)
    calls = [
        sent("CreateEndpoint", {"EndpointName": ENDPOINT, "Tags": tagged}),
        sent("CreateInferenceComponent", {"InferenceComponentName": COMPONENT, "EndpointName": ENDPOINT}),
        {
            "principal": permissions.OPERATOR,
            "service": "scheduler",
            "operation": "CreateSchedule",
            "params": _component_request(),
        },
        {
            "principal": permissions.OPERATOR,
            "service": "scheduler",
            "operation": "CreateSchedule",
            "params": spend_guard.schedule_request(ENDPOINT, role_arn=SCHEDULER_ROLE, when=NOW, region=REGION),
        },
    ]
    fired = spend_guard.deadline_calls(calls)
    assert [(c["operation"], c["params"]) for c in fired] == [
        ("DeleteInferenceComponent", {"InferenceComponentName": COMPONENT}),
        ("DeleteEndpoint", {"EndpointName": ENDPOINT}),
    ]
    assert {c["principal"] for c in fired} == {spend_guard.PRINCIPAL}
    documents = {spend_guard.PRINCIPAL: service_roles.scheduler_role_policy(CONFIG, ACCOUNT)}
    audit = permissions.audit(fired, documents, REGION, ACCOUNT)
    assert audit.ok and audit.checked[spend_guard.PRINCIPAL] == 2, str(audit)
    without = {spend_guard.PRINCIPAL: service_roles.scheduler_role_policy(CONFIG, ACCOUNT)}
    without[spend_guard.PRINCIPAL]["Statement"] = [
        s for s in without[spend_guard.PRINCIPAL]["Statement"] if s["Sid"] != "DeleteWorkshopComponents"
    ]
    refused = permissions.audit(fired, without, REGION, ACCOUNT)
    assert {a for _, a, _, _ in refused.denied} == {"sagemaker:DeleteInferenceComponent"}


# ---- the senders, against moto's scheduler -----------------------------------------------------------


@pytest.fixture
def scheduler(moto_aws):
    import boto3

    return boto3.client("scheduler", region_name=REGION)


def test_both_schedules_are_set_moved_and_removed(scheduler):
    when = spend_guard.deadline_after(4, NOW)
    made = spend_guard.set_deadlines(
        scheduler, ENDPOINT, role_arn=SCHEDULER_ROLE, region=REGION, when=when, component=COMPONENT
    )
    assert [(d.component, d.when) for d in made] == [(COMPONENT, when), ("", when + spend_guard.COMPONENT_MARGIN)]
    assert spend_guard.read_deadline(scheduler, ENDPOINT, COMPONENT) == made[0]
    assert spend_guard.read_deadline(scheduler, ENDPOINT) == made[1]
    assert f"inference component {COMPONENT} (on endpoint {ENDPOINT}) is deleted at" in made[0].text(NOW)
    assert f"extend --name {ENDPOINT} " in made[0].text(NOW)

    moved = spend_guard.extend(
        scheduler, ENDPOINT, 8, role_arn=SCHEDULER_ROLE, region=REGION, component=COMPONENT, now=NOW
    )
    assert moved.component == "" and moved.when == when + timedelta(hours=4) + spend_guard.COMPONENT_MARGIN
    assert spend_guard.read_deadline(scheduler, ENDPOINT, COMPONENT).when == when + timedelta(hours=4)
    stored = scheduler.get_schedule(Name=f"{COMPONENT}-deadline")
    assert stored["Target"]["Arn"].endswith(":deleteInferenceComponent")

    assert spend_guard.remove_deadline(scheduler, ENDPOINT, COMPONENT) == spend_guard.DELETED
    assert spend_guard.read_deadline(scheduler, ENDPOINT) is not None  # the endpoint's is its own
    assert spend_guard.remove_deadline(scheduler, ENDPOINT) == spend_guard.DELETED
    assert spend_guard.remove_deadline(scheduler, ENDPOINT, COMPONENT) == spend_guard.ALREADY_GONE
    assert scheduler.list_schedules()["Schedules"] == []


def test_an_endpoint_schedule_under_the_components_name_is_left_alone(scheduler):
    # An endpoint named like the component has a schedule of the same name that deletes an endpoint.
    spend_guard.set_deadline(scheduler, COMPONENT, role_arn=SCHEDULER_ROLE, region=REGION, when=NOW)
    with pytest.raises(spend_guard.NotTheWorkshops):
        spend_guard.read_deadline(scheduler, ENDPOINT, COMPONENT)
    with pytest.raises(spend_guard.NotTheWorkshops):
        spend_guard.set_deadlines(
            scheduler, ENDPOINT, role_arn=SCHEDULER_ROLE, region=REGION, when=NOW, component=COMPONENT
        )
    assert spend_guard.remove_deadline(scheduler, ENDPOINT, COMPONENT) == spend_guard.LEFT_ALONE
    assert spend_guard.read_deadline(scheduler, COMPONENT) is not None


def test_a_components_schedule_left_over_is_reported_with_its_endpoints(scheduler):
    assert spend_guard.schedules_left(lambda region: scheduler, [REGION], [ENDPOINT]) == []
    spend_guard.set_deadlines(
        scheduler, ENDPOINT, role_arn=SCHEDULER_ROLE, region=REGION, when=NOW, component=COMPONENT
    )
    left = spend_guard.schedules_left(lambda region: scheduler, [REGION], [ENDPOINT, "decision-workshop-cpu"])
    assert left == [f"{REGION}: {COMPONENT}-deadline", f"{REGION}: {spend_guard.schedule_name(ENDPOINT)}"]
    spend_guard.remove_deadline(scheduler, ENDPOINT)  # the endpoint's own gone, the component's still set
    left = spend_guard.schedules_left(lambda region: scheduler, [REGION], [ENDPOINT])
    assert left == [f"{REGION}: {COMPONENT}-deadline"]


def test_a_schedule_of_the_components_name_that_is_not_the_workshops_is_not_counted(scheduler):
    # An endpoint named like the component: its schedule deletes an endpoint, not the component.
    spend_guard.set_deadline(scheduler, COMPONENT, role_arn=SCHEDULER_ROLE, region=REGION, when=NOW)
    assert spend_guard.schedules_left(lambda region: scheduler, [REGION], [ENDPOINT]) == []
    assert spend_guard.schedules_left(lambda region: scheduler, [REGION], [COMPONENT]) == [
        f"{REGION}: {COMPONENT}-deadline"
    ]


def test_the_deadline_parts_of_a_name_too_long_for_a_component_are_the_endpoints_alone():
    assert spend_guard.deadline_parts(ENDPOINT) == [COMPONENT, ""]
    assert spend_guard.deadline_parts("e" * 63) == [""]  # a valid endpoint name, with no room for "-decision"


# ---- the dry run: the two schedules listed with the rest, built as the senders build them ----------------


def test_the_requests_listed_are_those_set_deadlines_sends(scheduler):
    listed = spend_guard.deadline_requests(
        ENDPOINT, role_arn=SCHEDULER_ROLE, when=NOW, region=REGION, component=COMPONENT
    )
    spend_guard.set_deadlines(
        scheduler, ENDPOINT, role_arn=SCHEDULER_ROLE, when=NOW, region=REGION, component=COMPONENT
    )
    assert [r["Name"] for r in listed] == [f"{COMPONENT}-deadline", spend_guard.schedule_name(ENDPOINT)]
    for request in listed:
        stored = scheduler.get_schedule(Name=request["Name"])
        assert {k: stored[k] for k in ("ScheduleExpression", "Target")} == {
            "ScheduleExpression": request["ScheduleExpression"],
            "Target": request["Target"],
        }
    alone = spend_guard.deadline_requests(ENDPOINT, role_arn=SCHEDULER_ROLE, when=NOW, region=REGION)
    assert [(r["Name"], r["Target"]) for r in alone] == [(listed[1]["Name"], listed[1]["Target"])]
    assert alone[0]["ScheduleExpression"] == spend_guard.at_expression(NOW)  # an endpoint alone goes at the deadline


def _zero_workshop(tmp_path, ttl_hours: str):
    from workshop_lib.steps import Workshop

    config = WorkshopConfig(mode="aws", region=REGION, sagemaker_role_arn=ROLE, endpoint_ttl_hours=ttl_hours)
    return Workshop(config, tmp_path / "config.json")


def test_the_dry_run_lists_the_deadlines_two_schedules_after_the_plan(tmp_path):
    from workshop_lib import steps

    workshop = _zero_workshop(tmp_path, "4")
    model = "s3://amzn-s3-demo-bucket/decision-workshop/model/model.tar.gz"
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/decision-workshop@sha256:" + "a" * 64
    plan = steps.zero_plan(workshop, image_uri=image, model_data_url=model)
    before = datetime.now(timezone.utc)
    listed = steps.zero_requests(workshop, plan)
    after = datetime.now(timezone.utc)
    assert listed[: len(plan.requests())] == plan.requests()
    schedules = listed[len(plan.requests()) :]
    assert [(s, o) for s, o, _ in schedules] == [("scheduler", "CreateSchedule")] * 2
    component, endpoint = (r for _, _, r in schedules)
    for request in (component, endpoint):
        calls.validate("scheduler", "CreateSchedule", request)
        assert request["Target"]["RoleArn"] == spend_guard.scheduler_role_arn(REGION, name_rules.role_account(ROLE))
    assert json.loads(component["Target"]["Input"]) == {"InferenceComponentName": COMPONENT}
    assert json.loads(endpoint["Target"]["Input"]) == {"EndpointName": ENDPOINT}
    at = [spend_guard.parse_at(r["ScheduleExpression"]) for r in (component, endpoint)]
    assert before + timedelta(hours=4) <= at[0] <= after + timedelta(hours=4, minutes=1)
    assert at[1] - at[0] == spend_guard.COMPONENT_MARGIN

    no_deadline = _zero_workshop(tmp_path, "0")
    assert steps.zero_requests(no_deadline, plan) == plan.requests()  # endpoint_ttl_hours 0: no schedule is sent
