"""Scaling a decision endpoint out: Application Auto Scaling on invocations per instance.

The target is what one instance sustains (notebook 06 measures it under concurrent callers), times a
utilisation below 1 so that scaling starts before the instance is full. The builders return RegisterScalableTarget and PutScalingPolicy requests, checked by
botocore (``calls.validate``); ``enable_autoscaling`` sends both.
"""

from __future__ import annotations

from typing import Any

from ..config import check_resource_name
from . import calls
from .model_requests import check_in_range
from .variants import VARIANT_NAME

SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"


# ---- builders ---------------------------------------------------------------------------------


def autoscaling_resource_id(endpoint_name: str, variant_name: str = VARIANT_NAME) -> str:
    check_resource_name(endpoint_name, "endpoint")
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


def target_from_rate(decisions_per_s: float, utilisation: float = 0.7) -> float:
    """A target for InvocationsPerInstance (a per-minute count) from the rate one instance sustains
    (decisions per second, one decision an invocation): ``utilisation`` of that rate, per minute."""
    check_in_range(decisions_per_s, 0.001, 10_000, "decisions_per_s")
    check_in_range(utilisation, 0.05, 1.0, "utilisation")
    return round(decisions_per_s * 60.0 * utilisation, 2)


def target_invocations_per_minute(seconds_per_request: float, utilisation: float = 0.7) -> float:
    """The same target when only one request's time is known (callers served one after another): an
    instance handles at most 60 / seconds_per_request a minute."""
    check_in_range(seconds_per_request, 0.001, 60, "seconds_per_request")
    return target_from_rate(1.0 / seconds_per_request, utilisation)


def scalable_target_request(
    endpoint_name: str, *, min_instances: int = 1, max_instances: int = 2, variant_name: str = VARIANT_NAME
) -> dict[str, Any]:
    check_in_range(min_instances, 1, 100, "min_instances")
    check_in_range(max_instances, min_instances, 100, "max_instances (at least min_instances)")
    request = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": autoscaling_resource_id(endpoint_name, variant_name),
        "ScalableDimension": SCALABLE_DIMENSION,
        "MinCapacity": min_instances,
        "MaxCapacity": max_instances,
    }
    return calls.validate("application-autoscaling", "RegisterScalableTarget", request)


def scaling_policy_request(
    endpoint_name: str,
    *,
    invocations_per_instance: float,
    scale_in_cooldown_s: int = 300,
    scale_out_cooldown_s: int = 60,
    variant_name: str = VARIANT_NAME,
    policy_name: str | None = None,
) -> dict[str, Any]:
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""
    check_in_range(invocations_per_instance, 0.1, 100_000, "invocations_per_instance")
    check_in_range(scale_in_cooldown_s, 0, 86_400, "scale_in_cooldown_s")
    check_in_range(scale_out_cooldown_s, 0, 86_400, "scale_out_cooldown_s")
    request = {
        "PolicyName": policy_name or scaling_policy_name(endpoint_name),
        "ServiceNamespace": "sagemaker",
        "ResourceId": autoscaling_resource_id(endpoint_name, variant_name),
        "ScalableDimension": SCALABLE_DIMENSION,
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": float(invocations_per_instance),
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
            "ScaleInCooldown": scale_in_cooldown_s,
            "ScaleOutCooldown": scale_out_cooldown_s,
        },
    }
    return calls.validate("application-autoscaling", "PutScalingPolicy", request)


def scaling_policy_name(endpoint_name: str) -> str:
    return f"{endpoint_name}-invocations-per-instance"


def delete_policy_request(endpoint_name: str, variant_name: str = VARIANT_NAME) -> dict[str, Any]:
    request = {
        "PolicyName": scaling_policy_name(endpoint_name),
        "ServiceNamespace": "sagemaker",
        "ResourceId": autoscaling_resource_id(endpoint_name, variant_name),
        "ScalableDimension": SCALABLE_DIMENSION,
    }
    return calls.validate("application-autoscaling", "DeleteScalingPolicy", request)


def deregister_target_request(endpoint_name: str, variant_name: str = VARIANT_NAME) -> dict[str, Any]:
    request = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": autoscaling_resource_id(endpoint_name, variant_name),
        "ScalableDimension": SCALABLE_DIMENSION,
    }
    return calls.validate("application-autoscaling", "DeregisterScalableTarget", request)


# ---- sender -----------------------------------------------------------------------------------


def enable_autoscaling(
    autoscaling_client: Any,
    endpoint_name: str,
    *,
    invocations_per_instance: float,
    min_instances: int = 1,
    max_instances: int = 2,
    scale_in_cooldown_s: int = 300,
    scale_out_cooldown_s: int = 60,
) -> str:
    """Register the variant as scalable and attach the target-tracking policy; returns the policy ARN."""
    target = scalable_target_request(endpoint_name, min_instances=min_instances, max_instances=max_instances)
    policy = scaling_policy_request(
        endpoint_name,
        invocations_per_instance=invocations_per_instance,
        scale_in_cooldown_s=scale_in_cooldown_s,
        scale_out_cooldown_s=scale_out_cooldown_s,
    )
    autoscaling_client.register_scalable_target(**target)
    policy_arn: str = autoscaling_client.put_scaling_policy(**policy)["PolicyARN"]
    return policy_arn


DELETED, ALREADY_GONE = "deleted", "already gone"


def disable_autoscaling(autoscaling_client: Any, endpoint_name: str) -> dict[str, str]:
    """Delete the target-tracking policy (and with it the alarms Application Auto Scaling made for it), then
    deregister the variant: ``{"policy": state, "target": state}``, each ``deleted`` or ``already gone``."""
    from botocore.exceptions import ClientError

    states = {}
    for what, call, request in (
        ("policy", autoscaling_client.delete_scaling_policy, delete_policy_request(endpoint_name)),
        ("target", autoscaling_client.deregister_scalable_target, deregister_target_request(endpoint_name)),
    ):
        try:
            call(**request)
            states[what] = DELETED
        except ClientError as exc:
            error = exc.response.get("Error", {})
            # AWS says ObjectNotFoundException; the emulator a ValidationException saying "No ... found".
            if error.get("Code") != "ObjectNotFoundException" and not (
                error.get("Code") == "ValidationException" and str(error.get("Message", "")).startswith("No ")
            ):
                raise
            states[what] = ALREADY_GONE
    return states


def scaling_of(autoscaling_client: Any, endpoint_name: str) -> dict[str, Any] | None:
    """The variant's registration (MinCapacity, MaxCapacity, ...) with its policies under ``Policies``; None
    when it is not registered."""
    resource = autoscaling_resource_id(endpoint_name)
    targets = autoscaling_client.describe_scalable_targets(
        ServiceNamespace="sagemaker", ResourceIds=[resource], ScalableDimension=SCALABLE_DIMENSION
    )
    if not targets["ScalableTargets"]:
        return None
    policies = autoscaling_client.describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=resource, ScalableDimension=SCALABLE_DIMENSION
    )
    return {**targets["ScalableTargets"][0], "Policies": policies["ScalingPolicies"]}


__all__ = [
    "ALREADY_GONE",
    "DELETED",
    "SCALABLE_DIMENSION",
    "autoscaling_resource_id",
    "delete_policy_request",
    "deregister_target_request",
    "disable_autoscaling",
    "enable_autoscaling",
    "scalable_target_request",
    "scaling_of",
    "scaling_policy_name",
    "scaling_policy_request",
    "target_from_rate",
    "target_invocations_per_minute",
]
