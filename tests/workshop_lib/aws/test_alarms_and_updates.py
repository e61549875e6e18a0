"""Alarms, the dashboard and safe updates: every request built here validated by botocore's models (the
builders call calls.validate; these tests also hold the bounds botocore leaves to the services), sent to
moto's CloudWatch where it stands in, and the waiter driven by botocore's Stubber; the operator's
documents grant exactly these calls."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest

from workshop_lib.aws import (
    alarms,
    arns,
    calls,
    hosting,
    iam,
    model_requests,
    operator_policies,
    policies,
    policy_scope,
    teardown,
    updates,
    variants,
)
from workshop_lib.aws.deploy_spec import ENDPOINT_NAME_ENV, DeploySpec, plan_for
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.config import WorkshopConfig
from workshop_lib.errors import AwsFailure, InvalidInput
from workshop_lib.local import iam_needs

from .values import DECISION_PINNED, MODEL_DATA, REGION, ROLE

NAME = "decision-workshop-cpu"
ACCOUNT = "123456789012"


# ---- alarms and the dashboard ----------------------------------------------------------------------


def test_each_endpoint_gets_six_valid_alarms_named_by_the_endpoint():
    requests = alarms.alarm_requests(NAME)
    assert [r["AlarmName"] for r in requests] == [f"{NAME}/{s}" for s in alarms.SUFFIXES] == alarms.alarm_names(NAME)
    for request in requests:
        calls.validate("cloudwatch", "PutMetricAlarm", request)
        assert request["TreatMissingData"] == "notBreaching" and request["Tags"]
    rollback = alarms.rollback_alarms(NAME)
    assert set(rollback) < set(alarms.alarm_names(NAME)) and f"{NAME}/invocations-per-instance" not in rollback


def test_sagemaker_alarms_watch_the_variant_and_scale_the_threshold_to_microseconds():
    latency = alarms.alarm_request(NAME, "model-latency-p95", thresholds=alarms.Thresholds(latency_p95_ms=1500))
    assert (latency["Namespace"], latency["MetricName"], latency["ExtendedStatistic"]) == (
        "AWS/SageMaker",
        "ModelLatency",
        "p95",
    )
    assert latency["Threshold"] == 1_500_000  # ModelLatency is published in microseconds
    assert latency["Dimensions"] == [
        {"Name": "EndpointName", "Value": NAME},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
    errors = alarms.alarm_request(NAME, "invocation-5xx-errors")
    assert errors["Statistic"] == "Sum" and "ExtendedStatistic" not in errors


def test_adapter_alarms_combine_the_per_api_series_the_adapter_publishes():
    request = alarms.alarm_request(NAME, "adapter-latency-p95", thresholds=alarms.Thresholds(latency_p95_ms=900))
    assert "MetricName" not in request and request["Threshold"] == 900
    *series, combined = request["Metrics"]
    assert combined["Expression"] == "MAX(METRICS())" and combined["ReturnData"] is True
    assert {s["MetricStat"]["Metric"]["Dimensions"][1]["Value"] for s in series} == set(alarms.ADAPTER_APIS)
    assert all(s["MetricStat"]["Metric"]["Dimensions"][0] == {"Name": "endpoint", "Value": NAME} for s in series)
    busy = alarms.alarm_request(NAME, "adapter-busy-503")
    assert busy["Metrics"][-1]["Expression"] == "SUM(METRICS())"
    assert len(busy["Metrics"]) <= 10  # CloudWatch's limit of queries in one alarm


def test_the_adapter_names_are_the_ones_its_metric_lines_use():
    from decision_adapter import metrics

    assert alarms.ADAPTER_NAMESPACE == metrics.NAMESPACE
    assert tuple(metrics.DIMENSIONS) == alarms.ADAPTER_DIMENSIONS
    assert set(alarms.ADAPTER_APIS) == set(metrics.API_NAMES.values())
    for name in (alarms.ADAPTER_LATENCY, alarms.ADAPTER_BUSY, alarms.ADAPTER_TIME_LIMIT):
        assert name in metrics.METRICS
    assert metrics.METRICS[alarms.ADAPTER_LATENCY][0] == "Milliseconds"  # the threshold's unit here


@pytest.mark.parametrize(
    "settings, wrong",
    [
        ({"period_s": 45}, "period_s"),
        ({"datapoints_to_alarm": 4}, "datapoints_to_alarm"),
        ({"period_s": 3600, "evaluation_periods": 25}, "one day"),
    ],
)
def test_alarm_settings_cloudwatch_refuses_are_refused_by_name(settings, wrong):
    with pytest.raises(InvalidInput, match=wrong):
        alarms.alarm_request(NAME, "invocation-5xx-errors", **settings)


def test_thresholds_and_names_are_checked():
    with pytest.raises(InvalidInput, match="errors_5xx"):
        alarms.Thresholds(errors_5xx=0)
    with pytest.raises(InvalidInput, match="no alarm"):
        alarms.alarm_name(NAME, "cpu")
    with pytest.raises(InvalidInput, match="dashboard name"):
        alarms.dashboard_request([NAME], REGION, name="has space")


def test_the_dashboard_shows_each_endpoint_from_both_sources():
    request = alarms.dashboard_request([NAME, "decision-workshop-gpu"], REGION)
    body = json.loads(request["DashboardBody"])
    lines = [m for w in body["widgets"] for m in w["properties"]["metrics"]]
    assert {m[0] for m in lines} == {"AWS/SageMaker", alarms.ADAPTER_NAMESPACE}
    assert {m[3] for m in lines} == {NAME, "decision-workshop-gpu"}
    assert all(w["properties"]["region"] == REGION for w in body["widgets"])


def test_put_then_delete_exactly_the_named_alarms_and_the_dashboard(moto_aws):
    import boto3

    cw = boto3.client("cloudwatch", region_name=REGION)
    other = {**alarms.alarm_request("decision-workshop-gpu", "invocation-5xx-errors")}
    cw.put_metric_alarm(**other)  # another endpoint's alarm: not named, so kept
    result = alarms.put_alarms(cw, [NAME], REGION)
    assert set(result.alarms) == set(alarms.alarm_names(NAME)) and result.dashboard == alarms.DASHBOARD
    assert set(alarms.alarm_states(cw, NAME)) == set(result.alarms)
    deleted = teardown.delete_alarms(cw, [NAME])
    assert set(deleted) == set(result.alarms) and set(deleted.values()) == {teardown.DELETED}
    assert [a["AlarmName"] for a in cw.describe_alarms()["MetricAlarms"]] == [other["AlarmName"]]
    assert teardown.delete_dashboard(cw) == teardown.DELETED
    assert teardown.delete_dashboard(cw) == teardown.ALREADY_GONE
    assert set(teardown.delete_alarms(cw, [NAME]).values()) == {teardown.ALREADY_GONE}


# ---- updates ----------------------------------------------------------------------------------------


def test_an_all_at_once_update_rolls_back_on_the_endpoints_alarms():
    config = updates.deployment_config(alarms.rollback_alarms(NAME))
    request = updates.update_request(NAME, f"{NAME}-20260101000000", config)
    policy = request["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": updates.BAKE_S}
    assert [
        a["AlarmName"] for a in request["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    ] == alarms.rollback_alarms(NAME)


def test_a_canary_needs_two_instances_and_at_most_half_of_them():
    with pytest.raises(InvalidInput, match="at least 2 instances"):
        updates.deployment_config(["a"], routing="CANARY")
    made = updates.deployment_config(["a"], routing="CANARY", instance_count=2, canary_percent=25)
    assert made["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["CanarySize"] == {
        "Type": "CAPACITY_PERCENT",
        "Value": 25,
    }
    with pytest.raises(InvalidInput, match="canary_percent"):
        updates.deployment_config(["a"], routing="CANARY", instance_count=2, canary_percent=60)


@pytest.mark.parametrize(
    "kwargs, wrong",
    [
        ({"routing": "LINEAR"}, "also has LINEAR"),
        ({"routing": "SOMETIMES"}, "not one of"),
        ({"bake_s": 4000}, "bake_s"),
        ({"max_execution_s": 100}, "max_execution_s"),
        ({"bake_s": 900, "max_execution_s": 600}, "shorter than the baking"),
    ],
)
def test_deployment_settings_sagemaker_refuses_are_refused_by_name(kwargs, wrong):
    with pytest.raises(InvalidInput, match=wrong):
        updates.deployment_config(["a"], **kwargs)


def test_an_update_needs_between_one_and_ten_rollback_alarms():
    with pytest.raises(InvalidInput, match="put_alarms"):
        updates.deployment_config([])
    with pytest.raises(InvalidInput, match="1 to 10"):
        updates.deployment_config([f"a{i}" for i in range(11)])


def test_the_update_plan_is_a_new_version_of_the_deploys_shape():
    when = datetime.datetime(2026, 12, 1, 15, 36, 4, tzinfo=datetime.timezone.utc)
    plan = updates.update_plan(
        DeploySpec("decision-cpu", threads=4),
        endpoint_name=NAME,
        role_arn=ROLE,
        region=REGION,
        image=parse_image_uri(DECISION_PINNED),
        model_data_url=MODEL_DATA,
        rollback_alarms=alarms.rollback_alarms(NAME),
        version=updates.version_name(NAME, when),
    )
    assert plan.version == f"{NAME}-20261201153604" and updates.is_version(NAME, plan.version)
    assert plan.model["ModelName"] == plan.version
    assert plan.endpoint_config["ProductionVariants"][0]["ModelName"] == plan.version
    assert plan.update["EndpointName"] == NAME and plan.update["EndpointConfigName"] == plan.version
    env = plan.model["PrimaryContainer"]["Environment"]
    assert env[ENDPOINT_NAME_ENV] == NAME and env["SM_LLAMA_CPP_THREADS"] == "4"  # metrics stay the endpoint's
    for operation, request in plan.requests():
        calls.validate("sagemaker", operation, request)
    # What the version serves is read from its one deploy plan, so the two cannot disagree.
    assert [f.name for f in dataclasses.fields(plan)] == ["endpoint_name", "version_plan", "update"]
    assert (plan.image_uri, plan.model_data_url) == (DECISION_PINNED, MODEL_DATA)
    assert plan.model is plan.version_plan.model and plan.version_plan.name == plan.version
    calls.validate("sagemaker", "CreateEndpoint", plan.version_plan.endpoint)
    assert not updates.is_version(NAME, NAME) and not updates.is_version(NAME, f"{NAME}-2-20261201153604")


def test_the_update_keeps_the_instance_count_auto_scaling_reached():
    # SageMaker guide, "Update endpoints that use auto scaling": with RetainAllVariantProperties, a variant of the
    # same name keeps DescribeEndpoint's DesiredInstanceCount whatever the new config's InitialInstanceCount says;
    # without it an endpoint scaled out to 3 would drop to the version's 1 during the update.
    plan = updates.update_plan(
        DeploySpec("decision-cpu"),
        endpoint_name=NAME,
        role_arn=ROLE,
        region=REGION,
        image=parse_image_uri(DECISION_PINNED),
        model_data_url=MODEL_DATA,
        rollback_alarms=alarms.rollback_alarms(NAME),
    )
    (variant,) = plan.endpoint_config["ProductionVariants"]
    assert variant["InitialInstanceCount"] == 1 and variant["VariantName"] == variants.VARIANT_NAME
    assert plan.update["RetainAllVariantProperties"] is True
    assert "ExcludeRetainedVariantProperties" not in plan.update  # the count is not taken from the config
    calls.validate("sagemaker", "UpdateEndpoint", plan.update)


def _describe(status, config="v1", **extra):
    return {
        "EndpointName": NAME,
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{NAME}",
        "EndpointConfigName": config,
        "EndpointStatus": status,
        "CreationTime": datetime.datetime(2026, 1, 1),
        "LastModifiedTime": datetime.datetime(2026, 1, 1),
        **extra,
    }


def test_the_wait_reports_each_status_once_and_ends_in_service(stub_sm):
    sm, stubber = stub_sm
    for status in ("Updating", "Updating", "RollingBack", "InService"):
        stubber.add_response("describe_endpoint", _describe(status), {"EndpointName": NAME})
    reported = []
    seen = updates.wait_rollout(sm, NAME, delay_s=0, report=reported.append, sleep=lambda s: None)
    assert seen == ["Updating", "RollingBack", "InService"]
    assert reported == [f"endpoint {NAME}: {s}" for s in seen]


def test_a_failed_endpoint_stops_the_wait_with_its_reason(stub_sm):
    sm, stubber = stub_sm
    stubber.add_response("describe_endpoint", _describe("Updating"), {"EndpointName": NAME})
    stubber.add_response(
        "describe_endpoint", _describe("Failed", FailureReason="image not found"), {"EndpointName": NAME}
    )
    with pytest.raises(AwsFailure, match="Failed during the update: image not found"):
        updates.wait_rollout(sm, NAME, delay_s=0, sleep=lambda s: None)


def test_a_rollout_back_on_its_old_config_says_it_was_rolled_back():
    rolled = updates.Rollout(NAME, f"{NAME}-20261201153604", ["Updating", "RollingBack", "InService"], NAME, 600.0)
    assert rolled.rolled_back and not rolled.ok and "ROLLED BACK" in str(rolled)
    done = updates.Rollout(NAME, f"{NAME}-20261201153604", ["Updating", "InService"], f"{NAME}-20261201153604")
    assert done.ok and "now serves" in str(done)


# ---- the operator's permissions ------------------------------------------------------------------------


def _scope():
    return policy_scope.scope(
        WorkshopConfig(region=REGION, bucket="decision-workshop-test", sagemaker_role_arn=ROLE), ACCOUNT
    )


def test_the_operations_document_grants_these_calls_and_no_others():
    scope = _scope()
    document = operator_policies.operator_operations_policy(scope)
    iam.check_policy_document(document)
    assert len(iam.minified(document)) < 6144  # IAM's size quota for one managed policy
    version = f"{NAME}-20261201153604"
    allowed = [
        {
            "service": "monitoring",
            "operation": "PutMetricAlarm",
            "params": alarms.alarm_request(NAME, "adapter-busy-503"),
        },
        {"service": "monitoring", "operation": "DeleteAlarms", "params": {"AlarmNames": alarms.alarm_names(NAME)}},
        {"service": "monitoring", "operation": "DescribeAlarms", "params": {"AlarmNames": alarms.alarm_names(NAME)}},
        {"service": "monitoring", "operation": "PutDashboard", "params": alarms.dashboard_request([NAME], REGION)},
        {"service": "monitoring", "operation": "DeleteDashboards", "params": {"DashboardNames": [alarms.DASHBOARD]}},
        {
            "service": "sagemaker",
            "operation": "UpdateEndpoint",
            "params": {"EndpointName": NAME, "EndpointConfigName": version},
        },
        {"service": "sagemaker", "operation": "CreateEndpointConfig", "params": {"EndpointConfigName": version}},
        {"service": "sagemaker", "operation": "DeleteModel", "params": {"ModelName": version}},
    ]
    for call in allowed:
        needs = iam_needs.needed(call, REGION, ACCOUNT)
        assert needs, call
        for action, resource, context in needs:
            assert iam.evaluate(document, action, resource, context).allowed, (action, resource)
    refused = [
        ("cloudwatch:PutMetricAlarm", arns.cloudwatch_alarm_arn(REGION, ACCOUNT, "someone-else/alarm")),
        ("cloudwatch:PutDashboard", arns.cloudwatch_dashboard_arn(REGION, ACCOUNT, "other")),
        ("sagemaker:UpdateEndpoint", f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/other"),
        ("cloudwatch:PutMetricData", "*"),
    ]
    for action, resource in refused:
        assert not iam.evaluate(document, action, resource, {}).allowed, (action, resource)


def test_the_operations_document_is_written_and_attached_with_the_operators():
    written = policies.policies(_scope())
    assert "operator-operations-policy.json" in written
    union = operator_policies.operator_documents(_scope())
    sids = {s["Sid"] for s in union["Statement"]}
    assert {"EndpointAlarms", "WorkshopDashboard", "UpdateEndpoints", "EndpointVersions", "WorkshopEndpoints"} <= sids


class EmulatorOnlyRollout(hosting.SageMakerHosting):
    """A fake of SageMaker's rollout for moto, which has no UpdateEndpoint: it points moto's endpoint at the
    new config at once and serves nothing."""

    def update_endpoint(self, sm_client, request: dict) -> str:
        calls.validate("sagemaker", "UpdateEndpoint", request)
        sm_client.delete_endpoint(EndpointName=request["EndpointName"])
        return sm_client.create_endpoint(
            EndpointName=request["EndpointName"],
            Tags=model_requests.workshop_tags(),
            EndpointConfigName=request["EndpointConfigName"],
        )["EndpointArn"]


def test_a_second_update_deletes_the_version_it_replaced_and_cleanup_the_one_served(clients):
    sm = clients.sm
    spec = DeploySpec("decision-cpu", instance_type="ml.c5.2xlarge")
    first = plan_for(
        spec, name=NAME, role_arn=ROLE, region=REGION, image=parse_image_uri(DECISION_PINNED), model_data_url=MODEL_DATA
    )
    hosting.deploy(sm, first, region=REGION, progress=False, poll_s=0)
    versions = []
    for second in (1, 2):
        plan = updates.update_plan(
            spec,
            endpoint_name=NAME,
            role_arn=ROLE,
            region=REGION,
            image=parse_image_uri(DECISION_PINNED),
            model_data_url=MODEL_DATA,
            rollback_alarms=alarms.rollback_alarms(NAME),
            version=f"{NAME}-2026120115360{second}",
        )
        rollout = updates.roll_out(
            sm, plan, region=REGION, hosting=EmulatorOnlyRollout(), delay_s=0, sleep=lambda s: None
        )
        assert rollout.ok and rollout.config_name == plan.version
        versions.append(plan.version)
    assert f"the version it replaced, {versions[0]}: endpoint config deleted; model deleted" in str(rollout)
    assert sorted(m["ModelName"] for m in sm.list_models()["Models"]) == [NAME, versions[1]]
    result = teardown.delete_endpoint_resources(sm, NAME, poll_s=0)
    assert (result.endpoint, result.endpoint_config, result.model) == (teardown.DELETED,) * 3
    assert sm.list_models()["Models"] == [] and sm.list_endpoint_configs()["EndpointConfigs"] == []


class RefusedUpdate(EmulatorOnlyRollout):
    """UpdateEndpoint refused by SageMaker (or IAM) after the version's model and config were made."""

    def update_endpoint(self, sm_client, request: dict) -> str:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "ValidationException", "Message": "refused (test)"}}, "UpdateEndpoint")


class IgnoredUpdate(EmulatorOnlyRollout):
    """An update the endpoint comes back from on its old config, as after an auto-rollback."""

    def update_endpoint(self, sm_client, request: dict) -> str:
        calls.validate("sagemaker", "UpdateEndpoint", request)
        return ""


def _deployed_and_planned(sm):
    spec = DeploySpec("decision-cpu", instance_type="ml.c5.2xlarge")
    first = plan_for(
        spec, name=NAME, role_arn=ROLE, region=REGION, image=parse_image_uri(DECISION_PINNED), model_data_url=MODEL_DATA
    )
    hosting.deploy(sm, first, region=REGION, progress=False, poll_s=0)
    return updates.update_plan(
        spec,
        endpoint_name=NAME,
        role_arn=ROLE,
        region=REGION,
        image=parse_image_uri(DECISION_PINNED),
        model_data_url=MODEL_DATA,
        rollback_alarms=alarms.rollback_alarms(NAME),
        version=f"{NAME}-20261201153601",
    )


def _left(sm):
    return (
        sorted(m["ModelName"] for m in sm.list_models()["Models"]),
        sorted(c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]),
    )


def test_a_refused_update_leaves_no_version_behind(clients):
    from botocore.exceptions import ClientError

    plan = _deployed_and_planned(clients.sm)
    with pytest.raises(ClientError) as raised:
        updates.roll_out(clients.sm, plan, region=REGION, hosting=RefusedUpdate(), delay_s=0, sleep=lambda s: None)
    assert f"the update's version {plan.version}: endpoint config deleted; model deleted" in raised.value.__notes__
    assert _left(clients.sm) == ([NAME], [NAME])


def test_a_failed_update_leaves_no_version_behind(clients, monkeypatch):
    plan = _deployed_and_planned(clients.sm)

    def failed(*_, **__):
        raise AwsFailure(f"endpoint {NAME} is Failed during the update: the new fleet did not start (test)")

    monkeypatch.setattr(updates, "wait_rollout", failed)
    with pytest.raises(AwsFailure) as raised:
        updates.roll_out(clients.sm, plan, region=REGION, hosting=IgnoredUpdate(), delay_s=0, sleep=lambda s: None)
    assert any("endpoint config deleted; model deleted" in note for note in raised.value.__notes__)
    assert _left(clients.sm) == ([NAME], [NAME])


def test_a_rolled_back_update_deletes_the_version_it_rolled_back_from(clients):
    plan = _deployed_and_planned(clients.sm)
    rollout = updates.roll_out(
        clients.sm, plan, region=REGION, hosting=IgnoredUpdate(), delay_s=0, sleep=lambda s: None
    )
    assert rollout.rolled_back and not rollout.ok
    assert f"the version rolled back from, {plan.version}: endpoint config deleted; model deleted" in str(rollout)
    assert _left(clients.sm) == ([NAME], [NAME])


def test_a_version_the_endpoint_serves_or_may_still_use_is_kept(stub_sm):
    sm, stubber = stub_sm
    version = f"{NAME}-20261201153601"
    for status, config, expected in (
        ("InService", version, "kept: the endpoint serves it"),
        ("Updating", NAME, "kept: the endpoint is Updating"),
    ):
        stubber.add_response(
            "describe_endpoint",
            {
                "EndpointName": NAME,
                "EndpointArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{NAME}",
                "EndpointConfigName": config,
                "EndpointStatus": status,
                "CreationTime": datetime.datetime(2026, 12, 1),
                "LastModifiedTime": datetime.datetime(2026, 12, 1),
            },
            {"EndpointName": NAME},
        )
        assert updates.discard_version(sm, NAME, version).startswith(expected)
