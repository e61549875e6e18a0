"""The requests of an endpoint that scales to zero: the decision model as an inference component on an
endpoint whose instances SageMaker manages down to none, and the scaling that takes its copies to zero and back.

Pure builders, no I/O; each request is checked by botocore against the real service model (``calls.validate``).
SageMaker's rules this module holds to (the SageMaker Developer Guide, "Scale an endpoint to zero instances",
and the AWS blog of 2024-12-03 that introduced it):

* only an endpoint that hosts inference components scales to zero instances: its variant carries
  ``ManagedInstanceScaling`` with ``MinInstanceCount`` 0 and no model, and its endpoint config names an
  ``ExecutionRoleArn`` (SageMaker, not the model, then pulls the components' images and artifacts);
* an inference component is created with at least one copy (``RuntimeConfig.CopyCount`` 0 is refused); it
  reaches zero copies by ``UpdateInferenceComponentRuntimeConfig`` or by auto scaling on the dimension
  ``sagemaker:inference-component:DesiredCopyCount`` registered with a minimum of 0;
* target tracking scales the copies in (and out while some exist); from zero copies nothing is measured, so a
  step-scaling policy adds a copy when the CloudWatch alarm on ``NoCapacityInvocationFailures`` (the
  invocations refused for want of a copy) fires; provisioning an instance then takes minutes;
* while no copy exists, InvokeEndpoint fails with ``ValidationError`` (HTTP 400), "Inference Component has no
  capacity to process this request" (``client.endpoint_errors.NoCapacity`` reads it);
* deleting goes components first, then the endpoint, its config and the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import name_rules
from ..errors import InvalidInput
from . import arns, calls
from .images import ImageRef
from .instance_types import check_choice, endpoint_instance_types, is_gpu_instance, vcpus
from .model_requests import check_in_range, check_tags, decision_model_request, workshop_tags
from .variants import DOWNLOAD_TIMEOUT_S, STARTUP_TIMEOUT_S, VARIANT_NAME, endpoint_config_request, endpoint_request

ZERO_ENDPOINT = "decision-workshop-zero"  # the workshop's scale-to-zero endpoint, unless named otherwise
ZERO_INSTANCE = "ml.c6i.8xlarge"  # the CPU decision endpoint's type
SCALABLE_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
# Target tracking on requests in flight per copy, sampled every 10 s: it sees a burst within a minute.
PER_COPY_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
SCALE_IN_COOLDOWN_S = 300
SCALE_OUT_COOLDOWN_S = 60
# What one instance of the CPU decision type answers at once (the adapter decides one request at a time).
REQUESTS_PER_COPY = 1.0
# The memory per vCPU of each CPU family (c: compute, m: general, r: memory), in GiB.
GIB_PER_VCPU = {"c": 2, "m": 4, "r": 8}
# On-demand list prices in us-east-1, USD per instance-hour, as docs/operator.md's cost table gives them.
HOURLY_PRICE_USD = {"ml.c6i.2xlarge": 0.40, "ml.c6i.8xlarge": 1.60, "ml.g4dn.2xlarge": 0.90, "ml.g6e.xlarge": 2.30}
# Partitions whose SageMaker guide documents scaling to zero (docs.aws.amazon.com, docs.amazonaws.cn), read
# 2026-12-06; elsewhere (GovCloud, the isolated partitions) the workshop knows of no such page and refuses.
# After the last request: target tracking scales in once 15 minutes show no traffic, and SageMaker releases the
# instance about 10 minutes after its last copy went (the AWS blog of 2024-12-03): billed idle time per spell.
IDLE_TAIL_MIN = 25
ZERO_PARTITIONS = {"aws": "docs.aws.amazon.com", "aws-cn": "docs.amazonaws.cn"}


def component_name(endpoint: str) -> str:
    """The decision model's inference component on ``endpoint``."""
    return check_component_name(f"{endpoint}-decision")


def check_component_name(name: str) -> str:
    pattern, max_len = name_rules.service_rule("sagemaker", "CreateInferenceComponent", "InferenceComponentName")
    if not name or len(name) > (max_len or 63) or not pattern.fullmatch(name):
        raise InvalidInput(
            f"inference component name {name!r} is not one SageMaker takes: letters, digits and hyphens, "
            f"at most {max_len or 63} characters; choose a shorter endpoint name"
        )
    return name


def alarm_name(endpoint: str) -> str:
    """The alarm that scales the component out from zero: ``<endpoint>/<what>``, as the workshop names alarms."""
    return f"{endpoint}/scale-out-from-zero"


def offered_in(region: str) -> str | None:
    """None where the workshop knows scaling to zero is offered, else why not (said before anything is sent)."""
    partition = arns.partition(region)
    if partition in ZERO_PARTITIONS:
        return None
    return (
        f"{region} is in the {partition} partition, where the workshop knows of no SageMaker guide page on "
        f"scaling an endpoint to zero (read for {', '.join(ZERO_PARTITIONS)}); deploy in a commercial region"
    )


# ---- the endpoint and its component --------------------------------------------------------------------


def compute_requirements(instance_type: str) -> dict[str, Any]:
    """One copy per instance: half its vCPUs as cores and half its memory, the rest left to the host's agents."""
    family = instance_type.split(".")[1][0] if instance_type.count(".") == 2 else ""
    if is_gpu_instance(instance_type) or family not in GIB_PER_VCPU:
        raise InvalidInput(
            f"{instance_type}: the scale-to-zero endpoint runs the CPU decision image on a c, m or r type "
            f"(default {ZERO_INSTANCE})"
        )
    cpus = vcpus(instance_type)
    return {
        "NumberOfCpuCoresRequired": float(max(1, cpus // 2)),
        "MinMemoryRequiredInMb": cpus * GIB_PER_VCPU[family] * 1024 // 2,
    }


def zero_variant(instance_type: str = ZERO_INSTANCE, *, max_instances: int = 1) -> dict[str, Any]:
    """A variant with no model, its instances managed between 0 and ``max_instances``."""
    check_choice(instance_type, endpoint_instance_types(), "instance type")
    check_in_range(max_instances, 1, 20, "max_instances")
    return {
        "VariantName": VARIANT_NAME,
        "InstanceType": instance_type,
        "InitialInstanceCount": 1,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": max_instances},
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    }


def component_request(
    name: str,
    *,
    endpoint: str,
    model_name: str,
    instance_type: str = ZERO_INSTANCE,
    copies: int = 1,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    tags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """CreateInferenceComponent: the decision model on ``endpoint``'s variant, ``copies`` copies (at least 1)."""
    check_component_name(name)
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise InvalidInput(
            f"copies is {copies!r}: an inference component starts with at least 1 copy (SageMaker refuses 0); "
            "scale it to zero after it is InService"
        )
    check_in_range(copies, 1, 20, "copies")
    request: dict[str, object] = {
        "InferenceComponentName": name,
        "EndpointName": endpoint,
        "VariantName": VARIANT_NAME,
        "Specification": {
            "ModelName": model_name,
            "StartupParameters": {
                "ModelDataDownloadTimeoutInSeconds": download_timeout_s,
                "ContainerStartupHealthCheckTimeoutInSeconds": startup_timeout_s,
            },
            "ComputeResourceRequirements": compute_requirements(instance_type),
        },
        "RuntimeConfig": {"CopyCount": copies},
    }
    if tags:
        request["Tags"] = check_tags(list(tags))
    return calls.validate("sagemaker", "CreateInferenceComponent", request)


def copies_request(name: str, copies: int) -> dict[str, Any]:
    """UpdateInferenceComponentRuntimeConfig: 0 copies frees the instances, 1 brings one back."""
    check_in_range(copies, 0, 20, "copies")
    request = {"InferenceComponentName": check_component_name(name), "DesiredRuntimeConfig": {"CopyCount": copies}}
    return calls.validate("sagemaker", "UpdateInferenceComponentRuntimeConfig", request)


# ---- the scaling -------------------------------------------------------------------------------------


def _scaled(component: str) -> dict[str, Any]:
    return {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"inference-component/{check_component_name(component)}",
        "ScalableDimension": SCALABLE_DIMENSION,
    }


def scalable_target_request(component: str, *, max_copies: int = 1) -> dict[str, Any]:
    check_in_range(max_copies, 1, 20, "max_copies")
    request = {**_scaled(component), "MinCapacity": 0, "MaxCapacity": max_copies}
    return calls.validate("application-autoscaling", "RegisterScalableTarget", request)


def policy_names(component: str) -> tuple[str, str]:
    """(the target-tracking policy, the step policy that scales out from zero)."""
    return f"{component}-requests-per-copy", f"{component}-out-from-zero"


def target_tracking_request(component: str, *, requests_per_copy: float = REQUESTS_PER_COPY) -> dict[str, Any]:
    check_in_range(requests_per_copy, 0.1, 1000, "requests_per_copy")
    request = {
        **_scaled(component),
        "PolicyName": policy_names(component)[0],
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": float(requests_per_copy),
            "PredefinedMetricSpecification": {"PredefinedMetricType": PER_COPY_METRIC},
            "ScaleInCooldown": SCALE_IN_COOLDOWN_S,
            "ScaleOutCooldown": SCALE_OUT_COOLDOWN_S,
        },
    }
    return calls.validate("application-autoscaling", "PutScalingPolicy", request)


def step_scaling_request(component: str) -> dict[str, Any]:
    """One copy more whenever the no-capacity alarm fires (its threshold is one refused invocation)."""
    request = {
        **_scaled(component),
        "PolicyName": policy_names(component)[1],
        "PolicyType": "StepScaling",
        "StepScalingPolicyConfiguration": {
            "AdjustmentType": "ChangeInCapacity",
            "MetricAggregationType": "Maximum",
            "Cooldown": SCALE_OUT_COOLDOWN_S,
            "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}],
        },
    }
    return calls.validate("application-autoscaling", "PutScalingPolicy", request)


def no_capacity_alarm_request(
    endpoint: str, component: str, policy_arn: str, *, tags: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The alarm on one refused invocation in 30 s that runs the step policy (``policy_arn``)."""
    request = {
        "AlarmName": alarm_name(endpoint),
        "AlarmDescription": f"a request found {component} with no copy: add one (scale out from zero)",
        "AlarmActions": [policy_arn],
        "Namespace": "AWS/SageMaker",
        "MetricName": NO_CAPACITY_METRIC,
        "Dimensions": [{"Name": "InferenceComponentName", "Value": component}],
        "Statistic": "Maximum",
        "Period": 30,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "missing",
    }
    return calls.validate("cloudwatch", "PutMetricAlarm", request)


# ---- removal, in the order SageMaker needs ---------------------------------------------------------------


def removal_requests(endpoint: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(service, operation, request) to remove everything ``ZeroPlan`` made, components before the endpoint."""
    component = component_name(endpoint)
    scaled = _scaled(component)
    steps = [
        ("cloudwatch", "DeleteAlarms", {"AlarmNames": [alarm_name(endpoint)]}),
        *(
            ("application-autoscaling", "DeleteScalingPolicy", {**scaled, "PolicyName": policy})
            for policy in policy_names(component)
        ),
        ("application-autoscaling", "DeregisterScalableTarget", scaled),
        ("sagemaker", "DeleteInferenceComponent", {"InferenceComponentName": component}),
        ("sagemaker", "DeleteEndpoint", {"EndpointName": endpoint}),
        ("sagemaker", "DeleteEndpointConfig", {"EndpointConfigName": endpoint}),
        ("sagemaker", "DeleteModel", {"ModelName": endpoint}),
    ]
    return [(service, operation, calls.validate(service, operation, request)) for service, operation, request in steps]


# ---- the plan -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZeroPlan:
    """Every request of a scale-to-zero deployment except the alarm, which names the step policy's ARN."""

    model: dict[str, Any]
    endpoint_config: dict[str, Any]
    endpoint: dict[str, Any]
    component: dict[str, Any]
    scalable_target: dict[str, Any]
    target_tracking: dict[str, Any]
    step_scaling: dict[str, Any]
    notes: tuple[str, ...] = ()  # what the builder or a wrapper (encryption.encrypted_plan) chose

    @property
    def name(self) -> str:
        name: str = self.endpoint["EndpointName"]
        return name

    @property
    def component_name(self) -> str:
        name: str = self.component["InferenceComponentName"]
        return name

    @property
    def instance_type(self) -> str:
        instance_type: str = self.endpoint_config["ProductionVariants"][0]["InstanceType"]
        return instance_type

    def alarm(self, policy_arn: str) -> dict[str, Any]:
        return no_capacity_alarm_request(self.name, self.component_name, policy_arn)

    def requests(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(service, operation, request) in the order they are sent; the alarm's action is a placeholder."""
        return [
            ("sagemaker", "CreateModel", self.model),
            ("sagemaker", "CreateEndpointConfig", self.endpoint_config),
            ("sagemaker", "CreateEndpoint", self.endpoint),
            ("sagemaker", "CreateInferenceComponent", self.component),
            ("application-autoscaling", "RegisterScalableTarget", self.scalable_target),
            ("application-autoscaling", "PutScalingPolicy", self.target_tracking),
            ("application-autoscaling", "PutScalingPolicy", self.step_scaling),
            ("cloudwatch", "PutMetricAlarm", self.alarm("<the ARN PutScalingPolicy returns for the step policy>")),
        ]


def zero_plan(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str,
    instance_type: str = ZERO_INSTANCE,
    max_instances: int = 1,
    environment: Mapping[str, str] | None = None,
    tags: list[dict[str, Any]] | None = None,
) -> ZeroPlan:
    """The decision image's model as the one component of endpoint ``name`` (model, config and endpoint share
    the name), managed between 0 and ``max_instances`` instances, one copy per instance."""
    tags = tags if tags is not None else workshop_tags()
    compute_requirements(instance_type)  # a CPU type, before anything else is built
    component = component_name(name)
    model = decision_model_request(
        name,
        image=image,
        role_arn=role_arn,
        model_data_url=model_data_url,
        threads=vcpus(instance_type) // 2 or 1,  # the cores the copy reserves
        n_gpu_layers=0,
        environment=environment,
        tags=tags,
    )
    return ZeroPlan(
        model=model,
        endpoint_config=endpoint_config_request(
            name, zero_variant(instance_type, max_instances=max_instances), execution_role=role_arn, tags=tags
        ),
        endpoint=endpoint_request(name, tags=tags),
        component=component_request(component, endpoint=name, model_name=name, instance_type=instance_type, tags=tags),
        scalable_target=scalable_target_request(component, max_copies=max_instances),
        target_tracking=target_tracking_request(component),
        step_scaling=step_scaling_request(component),
    )


# ---- what it costs --------------------------------------------------------------------------------------


def cost_rows(instance_type: str, *, busy_hours_per_day: float = 2.0, busy_spells: int = 1) -> list[tuple[str, str]]:
    """(what, USD) for a day of ``busy_hours_per_day`` busy hours in ``busy_spells`` spells: always on, and scaled
    to zero when idle, each spell followed by ``IDLE_TAIL_MIN`` minutes before the instance is released."""
    check_in_range(busy_hours_per_day, 0, 24, "busy_hours_per_day")
    check_in_range(busy_spells, 0, 24, "busy_spells")
    price = HOURLY_PRICE_USD.get(instance_type)
    if price is None:
        return [("price", f"{instance_type} is not in the workshop's price list; see the SageMaker pricing page")]
    billed = min(24.0, busy_hours_per_day + busy_spells * IDLE_TAIL_MIN / 60)
    return [
        (f"{instance_type}, an hour busy (one instance)", f"{price:.2f}"),
        ("an hour idle at zero copies (no instance)", "0.00"),
        ("a day always on (24 h)", f"{24 * price:.2f}"),
        (
            f"a day scaled to zero when idle ({busy_hours_per_day:g} h busy, {busy_spells} spell(s), "
            f"{billed:.2f} h billed)",
            f"{billed * price:.2f}",
        ),
    ]


__all__ = [
    "HOURLY_PRICE_USD",
    "NO_CAPACITY_METRIC",
    "SCALABLE_DIMENSION",
    "ZERO_ENDPOINT",
    "ZERO_INSTANCE",
    "ZeroPlan",
    "alarm_name",
    "component_name",
    "component_request",
    "copies_request",
    "cost_rows",
    "offered_in",
    "removal_requests",
    "zero_plan",
]
