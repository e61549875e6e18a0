"""The CreateEndpointConfig and CreateEndpoint requests: a production variant on one instance type or on ordered
instance pools, and the endpoint config and endpoint that carry it.

Each builder returns a plain request checked by botocore against the real service model (``calls.validate``), and
checks here the rules botocore leaves to the service: pool counts and priorities, instance types
(``instance_types``), timeouts' ranges, an AMI that fits the types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..config import check_resource_name
from ..errors import InvalidInput
from . import calls
from .instance_types import (
    check_choice,
    check_cuda13,
    endpoint_instance_types,
    has_local_nvme,
    inference_ami_versions,
    is_gpu_instance,
)
from .model_requests import check_in_range, check_tags

VARIANT_NAME = "AllTraffic"
# Driver 580 / CUDA 13.0: what the server-sagemaker-cuda-v1 DLC (CUDA 13.0.2) needs.
GPU_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
# The published sample's deploy scripts allow 900 s each (AWS recommends >= 600 s for the llama.cpp DLC).
STARTUP_TIMEOUT_S = 900
DOWNLOAD_TIMEOUT_S = 900
PROVISION_TIMEOUT_S = 1200
MAX_POOLS = 5


# ---- CreateEndpointConfig --------------------------------------------------------------


def _timeouts(startup_timeout_s: int, download_timeout_s: int) -> dict[str, Any]:
    check_in_range(startup_timeout_s, 60, 3600, "startup_timeout_s (ContainerStartupHealthCheckTimeoutInSeconds)")
    check_in_range(download_timeout_s, 60, 3600, "download_timeout_s (ModelDataDownloadTimeoutInSeconds)")
    return {
        "ContainerStartupHealthCheckTimeoutInSeconds": startup_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": download_timeout_s,
    }


def _ami(ami_version: str | None, instance_types: Iterable[str]) -> dict[str, Any]:
    if ami_version is None:
        return {}
    check_choice(ami_version, inference_ami_versions(), "InferenceAmiVersion")
    if "-gpu-" in ami_version:
        cpu_types = [t for t in instance_types if not is_gpu_instance(t)]
        if cpu_types:
            raise InvalidInput(f"{ami_version} is a GPU AMI but {', '.join(cpu_types)} has no GPU")
    return {"InferenceAmiVersion": ami_version}


def fixed_instance_variant(
    model_name: str,
    instance_type: str,
    *,
    instance_count: int = 1,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    volume_size_gb: int | None = None,
    ami_version: str | None = None,
    variant_name: str = VARIANT_NAME,
) -> dict[str, Any]:
    """A ProductionVariant on one instance type."""
    check_resource_name(variant_name, "endpoint")
    check_choice(instance_type, endpoint_instance_types(), "instance type")
    check_in_range(instance_count, 1, 100, "instance_count")
    variant = {
        "VariantName": variant_name,
        "ModelName": model_name,
        "InstanceType": instance_type,
        "InitialInstanceCount": instance_count,
        **_timeouts(startup_timeout_s, download_timeout_s),
    }
    if volume_size_gb is not None:
        if has_local_nvme(instance_type):
            raise InvalidInput(
                f"{instance_type} comes with local NVMe storage and SageMaker rejects VolumeSizeInGB for it; "
                "leave volume_size_gb unset"
            )
        check_in_range(volume_size_gb, 1, 512, "volume_size_gb")
        variant["VolumeSizeInGB"] = volume_size_gb
    variant.update(_ami(ami_version, [instance_type]))
    return variant


def instance_pools(instance_types: Sequence[str]) -> list[dict[str, Any]]:
    """``InstancePools`` from an ordered list: the first type gets Priority 1 (first choice)."""
    if isinstance(instance_types, str):
        instance_types = [instance_types]
    return check_instance_pools([{"InstanceType": t, "Priority": i} for i, t in enumerate(instance_types, start=1)])


def check_instance_pools(pools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules botocore leaves to the service: 1-5 pools, distinct types, priorities 1-5."""
    checked = [dict(p) for p in pools]
    if not 1 <= len(checked) <= MAX_POOLS:
        raise InvalidInput(f"{len(checked)} instance pools given; a variant takes 1 to {MAX_POOLS}")
    types = [p.get("InstanceType", "") for p in checked]
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise InvalidInput(f"instance pools repeat {', '.join(duplicates)}; list each type once")
    for pool in checked:
        check_choice(pool["InstanceType"], endpoint_instance_types(), "instance pool type")
        priority = pool.get("Priority")
        if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= MAX_POOLS:
            raise InvalidInput(
                f"pool {pool['InstanceType']} has Priority {priority!r}; use 1 to {MAX_POOLS} (1 = first choice)"
            )
    return checked


def instance_pool_variant(
    model_name: str,
    instance_types: Sequence[str],
    *,
    instance_count: int = 1,
    provision_timeout_s: int = PROVISION_TIMEOUT_S,
    ami_version: str | None = GPU_AMI_VERSION,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    variant_name: str = VARIANT_NAME,
) -> dict[str, Any]:
    """A ProductionVariant placed on the first instance pool with capacity, in the given order.

    No VolumeSizeInGB: the g-family types use their local NVMe storage.
    """
    check_resource_name(variant_name, "endpoint")
    pools = instance_pools(instance_types)
    types = [p["InstanceType"] for p in pools]
    if ami_version and "-gpu-" in ami_version:
        for t in types:
            check_cuda13(t)
    check_in_range(instance_count, 1, 100, "instance_count")
    check_in_range(provision_timeout_s, 300, 3600, "provision_timeout_s (VariantInstanceProvisionTimeoutInSeconds)")
    return {
        "VariantName": variant_name,
        "ModelName": model_name,
        "InitialInstanceCount": instance_count,
        "InstancePools": pools,
        "VariantInstanceProvisionTimeoutInSeconds": provision_timeout_s,
        **_timeouts(startup_timeout_s, download_timeout_s),
        **_ami(ami_version, types),
    }


def endpoint_config_request(
    name: str,
    variant: Mapping[str, Any],
    *,
    tags: list[dict[str, Any]] | None = None,
    data_capture: Mapping[str, Any] | None = None,
    execution_role: str | None = None,
) -> dict[str, Any]:
    """CreateEndpointConfig for one variant; ``data_capture``: a DataCaptureConfig (``capture``).
    ``execution_role``: the config of an endpoint that hosts inference components, whose variant names no model."""
    check_resource_name(name, "endpoint config")
    if execution_role is None:
        check_resource_name(variant["ModelName"], "model")
    elif "ModelName" in variant:
        raise InvalidInput("a variant that hosts inference components names no model; the component does")
    if "InstancePools" in variant:
        if "InstanceType" in variant:
            raise InvalidInput("a variant takes InstanceType or InstancePools, not both")
        check_instance_pools(variant["InstancePools"])
        check_in_range(
            variant.get("VariantInstanceProvisionTimeoutInSeconds", 300),
            300,
            3600,
            "VariantInstanceProvisionTimeoutInSeconds",
        )
    request: dict[str, object] = {"EndpointConfigName": name, "ProductionVariants": [dict(variant)]}
    if execution_role:
        request["ExecutionRoleArn"] = execution_role
    if data_capture:
        request["DataCaptureConfig"] = dict(data_capture)
    if tags:
        request["Tags"] = check_tags(list(tags))
    return calls.validate("sagemaker", "CreateEndpointConfig", request)


def endpoint_request(
    name: str, *, config_name: str | None = None, tags: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    check_resource_name(name, "endpoint")
    config_name = config_name or name
    check_resource_name(config_name, "endpoint config")
    request: dict[str, object] = {"EndpointName": name, "EndpointConfigName": config_name}
    if tags:
        request["Tags"] = check_tags(list(tags))
    return calls.validate("sagemaker", "CreateEndpoint", request)
