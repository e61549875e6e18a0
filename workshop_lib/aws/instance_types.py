"""SageMaker instance types as the endpoint builders check them: the types and inference AMIs
botocore's service model allows, vCPUs from a type's size, GPU families, local NVMe storage, and the
GPUs CUDA 13 no longer supports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from ..errors import InvalidInput
from . import calls


@cache
def enum_of(service: str, operation: str, *members: str) -> tuple[str, ...]:
    """Allowed values of a request member, from botocore's model (ParamValidator skips enums)."""
    shape = calls.operation_model(service, operation).input_shape
    for member in members:
        shape = shape.member if member == "[]" else shape.members[member]
    return tuple(shape.enum)


def endpoint_instance_types() -> tuple[str, ...]:
    return enum_of("sagemaker", "CreateEndpointConfig", "ProductionVariants", "[]", "InstanceType")


def inference_ami_versions() -> tuple[str, ...]:
    return enum_of("sagemaker", "CreateEndpointConfig", "ProductionVariants", "[]", "InferenceAmiVersion")


def check_choice(value: str, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        family = value.split(".")[1] if isinstance(value, str) and value.count(".") == 2 else None
        close = [a for a in allowed if family and a.split(".")[1:2] == [family]]
        hint = f" (this family offers {', '.join(close)})" if close else ""
        raise InvalidInput(f"{what} {value!r} is not one SageMaker accepts here{hint}")
    return value


_INSTANCE = re.compile(r"ml\.(?P<family>[a-z0-9-]+)\.(?P<size>medium|large|(?P<n>\d*)xlarge)")


def vcpus(instance_type: str) -> int:
    """vCPUs of an ml.* type from its size (large = 2, xlarge = 4, Nxlarge = 4N)."""
    m = _INSTANCE.fullmatch(instance_type)
    if not m:
        raise InvalidInput(f"cannot tell the vCPUs of {instance_type!r}; pass threads explicitly")
    if m["size"] == "medium":
        return 1
    if m["size"] == "large":
        return 2
    return 4 * int(m["n"] or 1)


def is_gpu_instance(instance_type: str) -> bool:
    m = _INSTANCE.fullmatch(instance_type)
    return m is not None and m["family"][0] in "gp"


def has_local_nvme(instance_type: str) -> bool:
    m = _INSTANCE.fullmatch(instance_type)
    return m is not None and (m["family"][0] in "gp" or m["family"].endswith("d"))


def check_cuda13(instance_type: str) -> None:
    # CUDA 13 dropped Kepler to Volta: the cuda-v1 DLC cannot run on P2 (K80) or P3 (V100).
    if instance_type.startswith(("ml.p2.", "ml.p3.")):
        raise InvalidInput(f"{instance_type} has a GPU that CUDA 13 no longer supports; use g4dn, g5, g6, g6e or newer")


__all__ = ["endpoint_instance_types", "inference_ami_versions", "is_gpu_instance", "vcpus"]
