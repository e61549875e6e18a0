"""The three deploy plans (standard, CPU decision, GPU decision): each the CreateModel, CreateEndpointConfig and
CreateEndpoint requests of one endpoint, from the builders in ``model_requests`` and ``variants``.

Sending a plan and waiting for it is ``hosting``; scaling an endpoint out is in ``scaling``, offline decisions
(Batch Transform) in ``transform``. The GPU plan uses instance pools where SageMaker offers them (``regions``) and
one fixed type elsewhere (``gpu_instance_types``), with a note.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import check_resource_name
from ..errors import InvalidInput
from . import regions
from .images import ImageRef, parse_image_uri
from .instance_types import check_cuda13, is_gpu_instance, vcpus
from .model_requests import (
    DEFAULT_CTX_SIZE,
    FULL_OFFLOAD,
    check_in_range,
    decision_model_request,
    llama_environment,
    standard_model_request,
    workshop_tags,
)
from .variants import (
    DOWNLOAD_TIMEOUT_S,
    GPU_AMI_VERSION,
    PROVISION_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
    check_instance_pools,
    endpoint_config_request,
    endpoint_request,
    fixed_instance_variant,
    instance_pool_variant,
)

STANDARD_CPU_INSTANCE = "ml.c6i.2xlarge"
DECISION_CPU_INSTANCE = "ml.c6i.8xlarge"
DEFAULT_GPU_POOLS = ("ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge")
# Where instance pools are not offered the GPU endpoint gets one fixed type: not the pools' first choice (g6e,
# the scarcest) but their last resort, the GPU type SageMaker offers in the most regions (its T4's 16 GB hold
# the pinned 4B model).
FIXED_GPU_INSTANCE = "ml.g4dn.2xlarge"
# The CPU decision endpoint: up to four requests evaluated at once, each llama.cpp call on its share of the
# instance's threads, and flash attention where the adapter's start-up check finds it fit: on short tickets
# two requests at once on a thread each answer more per second than one at a time on both, and flash
# attention reads a new prompt faster (docs/benchmarks.md, "On short tickets").
CPU_PARALLEL = 4
CPU_FLASH_ATTN = "auto"
# Requests the GPU decision endpoint evaluates at once (SM_LLAMA_CPP_PARALLEL): one 200-token decision leaves a
# GPU mostly idle. llama-server's own default slot count; not yet measured on a GPU (benchmarks/gpu_concurrency.sh).
GPU_PARALLEL = 4


# ---- the three deployments -----------------------------------------------------------------


@dataclass(frozen=True)
class DeployPlan:
    """The three requests that make an endpoint; model, config and endpoint share ``name``."""

    model: dict[str, Any]
    endpoint_config: dict[str, Any]
    endpoint: dict[str, Any]
    notes: tuple[str, ...] = ()  # what the builder chose that the requests alone do not say

    @property
    def name(self) -> str:
        name: str = self.endpoint["EndpointName"]
        return name

    @property
    def image_uri(self) -> str:
        uri: str = self.model["PrimaryContainer"]["Image"]
        return uri

    @property
    def image(self) -> ImageRef:
        """The image the CreateModel request names, read from the request (what is sent is what is checked)."""
        return parse_image_uri(self.image_uri)

    @property
    def model_data_url(self) -> str | None:
        url: str | None = self.model["PrimaryContainer"].get("ModelDataUrl")
        return url

    @property
    def uses_instance_pools(self) -> bool:
        return any("InstancePools" in v for v in self.endpoint_config["ProductionVariants"])

    @property
    def placement(self) -> str:
        """Where the variant goes: the ordered pools, or the one fixed type."""
        variant = self.endpoint_config["ProductionVariants"][0]
        if "InstancePools" in variant:
            return " > ".join(p["InstanceType"] for p in variant["InstancePools"]) + " (ordered pools)"
        return f"{variant['InstanceType']} (fixed)"

    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("CreateModel", self.model),
            ("CreateEndpointConfig", self.endpoint_config),
            ("CreateEndpoint", self.endpoint),
        ]

    def to_json(self) -> str:
        return json.dumps(dict(self.requests()), indent=2)


def _plan(
    name: str,
    model: dict[str, Any],
    variant: dict[str, Any],
    tags: list[dict[str, Any]] | None,
    notes: Sequence[str] = (),
    data_capture: Mapping[str, Any] | None = None,
) -> DeployPlan:
    tags = tags if tags is not None else workshop_tags()
    config = endpoint_config_request(name, variant, tags=tags, data_capture=data_capture)
    return DeployPlan(
        model=model, endpoint_config=config, endpoint=endpoint_request(name, tags=tags), notes=tuple(notes)
    )


def standard_plan(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str | None = None,
    hf_repo: str | None = None,
    hf_file: str | None = None,
    instance_type: str = STANDARD_CPU_INSTANCE,
    instance_count: int = 1,
    ctx_size: int = DEFAULT_CTX_SIZE,
    threads: int | None = None,
    n_gpu_layers: int | None = None,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
    tags: list[dict[str, Any]] | None = None,
) -> DeployPlan:
    """The published llama.cpp DLC (OpenAI chat on /invocations) on one instance type."""
    tags = tags if tags is not None else workshop_tags()
    gpu = is_gpu_instance(instance_type)
    if gpu:
        check_cuda13(instance_type)
    model = standard_model_request(
        name,
        image=image,
        role_arn=role_arn,
        model_data_url=model_data_url,
        hf_repo=hf_repo,
        hf_file=hf_file,
        ctx_size=ctx_size,
        threads=threads,
        n_gpu_layers=n_gpu_layers,
        environment=environment,
        tags=tags,
    )
    variant = fixed_instance_variant(
        name,
        instance_type,
        instance_count=instance_count,
        startup_timeout_s=startup_timeout_s,
        download_timeout_s=download_timeout_s,
        ami_version=GPU_AMI_VERSION if gpu else None,
    )
    return _plan(name, model, variant, tags)


def decision_cpu_plan(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str,
    instance_type: str = DECISION_CPU_INSTANCE,
    instance_count: int = 1,
    threads: int | None = None,
    ctx_size: int | None = None,
    parallel: int = CPU_PARALLEL,
    flash_attn: str = CPU_FLASH_ATTN,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
    tags: list[dict[str, Any]] | None = None,
    data_capture: Mapping[str, Any] | None = None,
) -> DeployPlan:
    """The decision image on a fixed CPU type; threads default to the type's vCPUs, the context to the
    adapter's default (8192 tokens: room for a 255-option Jev choice), ``parallel`` and ``flash_attn`` to the
    CPU endpoint's (``decision_cpu_settings``). ``data_capture``: SageMaker's capture of requests and answers
    (``capture.data_capture_config``)."""
    tags = tags if tags is not None else workshop_tags()
    if is_gpu_instance(instance_type):
        raise InvalidInput(f"{instance_type} is a GPU type; use decision_gpu_plan for GPUs")
    model = decision_model_request(
        name,
        image=image,
        role_arn=role_arn,
        model_data_url=model_data_url,
        ctx_size=ctx_size,
        threads=threads or vcpus(instance_type),
        n_gpu_layers=0,
        parallel=parallel,
        flash_attn=flash_attn,
        environment=environment,
        tags=tags,
    )
    variant = fixed_instance_variant(
        name,
        instance_type,
        instance_count=instance_count,
        startup_timeout_s=startup_timeout_s,
        download_timeout_s=download_timeout_s,
    )
    return _plan(name, model, variant, tags, data_capture=data_capture)


def decision_cpu_settings() -> dict[str, str]:
    """The adapter settings the CPU decision endpoint deploys besides its threads and context (the benchmarks
    start their adapter "as deployed" with them)."""
    return llama_environment(ctx_size=None, parallel=CPU_PARALLEL, flash_attn=CPU_FLASH_ATTN)


def decision_gpu_settings() -> dict[str, str]:
    """As ``decision_cpu_settings``, the GPU decision endpoint's (its layers offloaded besides)."""
    return llama_environment(ctx_size=None, parallel=GPU_PARALLEL)


def gpu_instance_types(region: str | None, pools: Sequence[str] = DEFAULT_GPU_POOLS) -> list[str]:
    """The GPU types the plan for ``region`` uses: the ordered ``pools`` where SageMaker offers pools (or no region
    is given); elsewhere one fixed type, ``FIXED_GPU_INSTANCE`` for the default pools, else the first one given."""
    types = [pools] if isinstance(pools, str) else list(pools)
    if region is None or regions.offers_instance_pools(region):
        return types
    return [FIXED_GPU_INSTANCE if tuple(types) == DEFAULT_GPU_POOLS else types[0]]


def decision_gpu_plan(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str,
    instance_pools: Sequence[str] = DEFAULT_GPU_POOLS,
    instance_count: int = 1,
    provision_timeout_s: int = PROVISION_TIMEOUT_S,
    ami_version: str = GPU_AMI_VERSION,
    n_gpu_layers: int = FULL_OFFLOAD,
    ctx_size: int | None = None,
    threads: int | None = None,
    parallel: int = GPU_PARALLEL,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
    tags: list[dict[str, Any]] | None = None,
    region: str | None = None,
    data_capture: Mapping[str, Any] | None = None,
) -> DeployPlan:
    """The decision image on ordered GPU instance pools (first with capacity wins), full offload.

    With ``region`` outside ``regions.INSTANCE_POOL_REGIONS``, where SageMaker refuses pools, the
    variant gets one fixed InstanceType instead (``gpu_instance_types``), and the plan's notes say so.
    """
    tags = tags if tags is not None else workshop_tags()
    types = [instance_pools] if isinstance(instance_pools, str) else list(instance_pools)
    for t in types:
        if not is_gpu_instance(t):
            raise InvalidInput(f"{t} has no GPU; the GPU plan takes GPU types (e.g. {DEFAULT_GPU_POOLS[0]})")
    model = decision_model_request(
        name,
        image=image,
        role_arn=role_arn,
        model_data_url=model_data_url,
        ctx_size=ctx_size,
        threads=threads,
        n_gpu_layers=n_gpu_layers,
        parallel=parallel,
        environment=environment,
        tags=tags,
    )
    if region is not None and not regions.offers_instance_pools(region):
        # the list is checked as pools would be, though only one type is used here
        check_instance_pools([{"InstanceType": t, "Priority": i} for i, t in enumerate(types, start=1)])
        (fixed,) = gpu_instance_types(region, types)
        check_cuda13(fixed)
        check_in_range(provision_timeout_s, 300, 3600, "provision_timeout_s (VariantInstanceProvisionTimeoutInSeconds)")
        variant = fixed_instance_variant(
            name,
            fixed,
            instance_count=instance_count,
            ami_version=ami_version,
            startup_timeout_s=startup_timeout_s,
            download_timeout_s=download_timeout_s,
        )
        note = regions.no_pools_note(region, fixed, [t for t in types if t != fixed])
        return _plan(name, model, variant, tags, [note], data_capture=data_capture)
    variant = instance_pool_variant(
        name,
        types,
        instance_count=instance_count,
        provision_timeout_s=provision_timeout_s,
        ami_version=ami_version,
        startup_timeout_s=startup_timeout_s,
        download_timeout_s=download_timeout_s,
    )
    return _plan(name, model, variant, tags, data_capture=data_capture)


# ---- senders --------------------------------------------------------------------------------


# ---- versions: an update's model and endpoint config (updates) ---------------------------------------


def version_name(endpoint_name: str, when: datetime.datetime | None = None) -> str:
    """``<endpoint>-<YYYYmmddHHMMSS>`` (UTC): the name of one version's model and endpoint config."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return check_resource_name(f"{endpoint_name}-{when:%Y%m%d%H%M%S}", "endpoint config")


def is_version(endpoint_name: str, name: str | None) -> bool:
    """Whether ``name`` is one of ``version_name``'s names for ``endpoint_name``."""
    return name is not None and re.fullmatch(re.escape(endpoint_name) + r"-\d{14}", name) is not None
