"""The scale-to-zero requests: each accepted by botocore's service model, the minimums at 0 where SageMaker
allows them and at 1 where it does not, and the removal in the order SageMaker needs."""

from __future__ import annotations

import pytest
from botocore.validate import ParamValidator

from workshop_lib.aws import inference_components as ic
from workshop_lib.aws.images import parse_image_uri
from workshop_lib.errors import InvalidInput
from workshop_lib.name_rules import operation_model

IMAGE = parse_image_uri("123456789012.dkr.ecr.us-east-1.amazonaws.com/decision-workshop@sha256:" + "a" * 64)
ROLE = "arn:aws:iam::123456789012:role/workshop-sagemaker"
MODEL = "s3://amzn-s3-demo-bucket/decision-workshop/model/model.tar.gz"


@pytest.fixture(scope="module")
def plan():
    return ic.zero_plan("decision-workshop-zero", image=IMAGE, role_arn=ROLE, model_data_url=MODEL, max_instances=2)


def _valid(service: str, operation: str, request: dict) -> bool:
    return not ParamValidator().validate(request, operation_model(service, operation).input_shape).has_errors()


def test_every_request_of_the_plan_is_one_botocore_accepts(plan):
    sent = plan.requests()
    assert [op for _, op, _ in sent] == [
        "CreateModel",
        "CreateEndpointConfig",
        "CreateEndpoint",
        "CreateInferenceComponent",
        "RegisterScalableTarget",
        "PutScalingPolicy",
        "PutScalingPolicy",
        "PutMetricAlarm",
    ]
    for service, operation, request in sent:
        assert _valid(service, operation, request), operation


def test_the_variant_scales_its_instances_down_to_zero_and_names_no_model(plan):
    variant = plan.endpoint_config["ProductionVariants"][0]
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert "ModelName" not in variant
    assert plan.endpoint_config["ExecutionRoleArn"] == ROLE
    assert (
        variant["RoutingConfig"]["RoutingStrategy"]
        in operation_model("sagemaker", "CreateEndpointConfig")
        .input_shape.members["ProductionVariants"]
        .member.members["RoutingConfig"]
        .members["RoutingStrategy"]
        .enum
    )


def test_the_component_starts_with_one_copy_and_scaling_may_take_it_to_zero(plan):
    assert plan.component["RuntimeConfig"] == {"CopyCount": 1}
    assert plan.component["Specification"]["ModelName"] == plan.model["ModelName"]
    assert plan.scalable_target["MinCapacity"] == 0
    assert plan.scalable_target["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    assert plan.scalable_target["ResourceId"] == f"inference-component/{plan.component_name}"


def test_a_component_cannot_be_created_with_zero_copies():
    with pytest.raises(InvalidInput, match="at least 1 copy"):
        ic.component_request("x-decision", endpoint="x", model_name="x", copies=0)
    assert ic.copies_request("x-decision", 0)["DesiredRuntimeConfig"] == {"CopyCount": 0}


def test_the_copy_reserves_part_of_the_instance_it_runs_on():
    needs = ic.compute_requirements("ml.c6i.8xlarge")  # 32 vCPU, 64 GiB
    assert needs == {"NumberOfCpuCoresRequired": 16.0, "MinMemoryRequiredInMb": 32 * 1024}
    assert ic.compute_requirements("ml.m5.xlarge")["MinMemoryRequiredInMb"] == 8 * 1024
    with pytest.raises(InvalidInput, match="CPU decision image"):
        ic.compute_requirements("ml.g5.2xlarge")


def test_the_alarm_fires_on_one_refused_invocation_and_runs_the_step_policy(plan):
    arn = "arn:aws:autoscaling:us-east-1:123456789012:scalingPolicy:x"
    alarm = plan.alarm(arn)
    assert _valid("cloudwatch", "PutMetricAlarm", alarm)
    assert alarm["MetricName"] == "NoCapacityInvocationFailures" and alarm["AlarmActions"] == [arn]
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": plan.component_name}]
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    step = plan.step_scaling["StepScalingPolicyConfiguration"]
    assert step["StepAdjustments"] == [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]
    assert plan.target_tracking["PolicyType"] == "TargetTrackingScaling"


def test_removal_deletes_the_component_before_the_endpoint():
    sent = ic.removal_requests("decision-workshop-zero")
    operations = [op for _, op, _ in sent]
    assert operations.index("DeleteInferenceComponent") < operations.index("DeleteEndpoint")
    assert operations.index("DeregisterScalableTarget") < operations.index("DeleteInferenceComponent")
    for service, operation, request in sent:
        assert _valid(service, operation, request), operation


def test_regions_without_a_documented_scale_to_zero_are_refused_by_name():
    assert ic.offered_in("us-east-1") is None and ic.offered_in("cn-north-1") is None
    why = ic.offered_in("us-gov-west-1")
    assert why is not None and "us-gov-west-1" in why and "aws-us-gov" in why


def test_the_cost_table_bills_idle_hours_only_on_the_always_on_side():
    rows = dict(ic.cost_rows("ml.c6i.8xlarge", busy_hours_per_day=2, busy_spells=1))
    always = float(rows["a day always on (24 h)"])
    zero = float(next(v for k, v in rows.items() if k.startswith("a day scaled to zero")))
    price = ic.HOURLY_PRICE_USD["ml.c6i.8xlarge"]
    assert always == pytest.approx(24 * price)
    assert zero == pytest.approx((2 + ic.IDLE_TAIL_MIN / 60) * price, abs=0.01)
    assert zero < always
