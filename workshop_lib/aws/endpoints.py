"""SageMaker endpoints for both paths: the pure request builders and the three deploy plans.

Builders return plain request dicts for CreateModel, CreateEndpointConfig and
CreateEndpoint, each checked by botocore against the real service model
(``api.validate``). botocore checks types, required members and minimums only,
so this module also checks what SageMaker would reject later: maximums, enums,
name patterns, pool rules (instance types: ``instance_types``). Sending a plan and
waiting for it is ``hosting``; scaling an endpoint out is in ``scaling``, offline
decisions (Batch Transform) in ``transform``.

The llama.cpp settings use the DLC's own ``SM_LLAMA_CPP_*`` variables; the
decision adapter reads the same names, so one code path configures both images.

Both models run with ``EnableNetworkIsolation``: SageMaker downloads ``model.tar.gz`` itself, and
neither image needs the network at run time (the standard DLC only when told to download from
Hugging Face instead, which therefore leaves isolation off). The GPU plan uses instance pools where
SageMaker offers them (``regions``) and one fixed type elsewhere (``gpu_instance_types``), with a note.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .. import names
from ..config import check_resource_name, check_role_arn
from ..errors import InvalidInput
from . import api, regions
from .images import ImageRef, parse_image_uri, require_pinned
from .instance_types import (
    check_choice,
    check_cuda13,
    endpoint_instance_types,
    has_local_nvme,
    inference_ami_versions,
    is_gpu_instance,
    vcpus,
)

VARIANT_NAME = "AllTraffic"
STANDARD_CPU_INSTANCE = "ml.c6i.2xlarge"
DECISION_CPU_INSTANCE = "ml.c6i.8xlarge"
DEFAULT_GPU_POOLS = ("ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge")
# Where instance pools are not offered the GPU endpoint gets one fixed type: not the pools' first choice (g6e,
# the scarcest) but their last resort, the GPU type SageMaker offers in the most regions (its T4's 16 GB hold
# the pinned 4B model).
FIXED_GPU_INSTANCE = "ml.g4dn.2xlarge"
# Driver 580 / CUDA 13.0: what the server-sagemaker-cuda-v1 DLC (CUDA 13.0.2) needs.
GPU_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
FULL_OFFLOAD = 999  # llama.cpp: "all layers"
# Requests the GPU decision endpoint evaluates at once (SM_LLAMA_CPP_PARALLEL): one 200-token decision leaves a
# GPU mostly idle. llama-server's own default slot count; not yet measured on a GPU (benchmarks/gpu_concurrency.sh).
GPU_PARALLEL = 4
DEFAULT_CTX_SIZE = 4096  # the standard DLC's; the decision image's default (8192) is the adapter's own
# The published sample's deploy scripts allow 900 s each (AWS recommends >= 600 s for the llama.cpp DLC).
STARTUP_TIMEOUT_S = 900
DOWNLOAD_TIMEOUT_S = 900
PROVISION_TIMEOUT_S = 1200
LLAMA_PREFIX = "SM_LLAMA_CPP_"
MAX_POOLS = 5


# ---- small checks ---------------------------------------------------------------


def check_in_range(value, low, high, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidInput(f"{what} is {value!r}; it must be between {low} and {high}")


def _check_environment(env: Mapping[str, str]) -> None:
    if len(env) > 100:
        raise InvalidInput(f"the container environment has {len(env)} variables; SageMaker allows 100")
    for key, value in env.items():
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key) or len(key) > 1024:
            raise InvalidInput(f"environment variable name {key!r} is not valid (letters, digits, _)")
        if not isinstance(value, str):
            raise InvalidInput(f"environment variable {key} must be a string, got {type(value).__name__}")
        if len(value) > 1024:
            raise InvalidInput(f"environment variable {key} is {len(value)} characters long; SageMaker allows 1024")


def workshop_tags(
    workshop: str = names.WORKSHOP_TAGS[names.TAG_WORKSHOP],
    created_by: str = names.WORKSHOP_TAGS[names.TAG_CREATED_BY],
    extra: Mapping[str, str] | None = None,
) -> list[dict]:
    """The tags every workshop resource carries (``names.WORKSHOP_TAGS``), plus ``extra``."""
    tags = {names.TAG_WORKSHOP: workshop, names.TAG_CREATED_BY: created_by, **(extra or {})}
    return check_tags(names.tag_list(tags))


def check_tags(tags: list[dict]) -> list[dict]:
    if len(tags) > 50:
        raise InvalidInput(f"{len(tags)} tags; SageMaker allows 50 per resource")
    keys = [t["Key"] for t in tags]
    if len(set(keys)) != len(keys):
        raise InvalidInput(f"tag keys must be unique, got {keys}")
    for tag in tags:
        key, value = tag["Key"], tag["Value"]
        if not names.is_tag_key(key):
            raise InvalidInput(
                f"tag key {key!r} is not valid (1-128 letters, digits, spaces, _.:/=+-@; not starting with aws:)"
            )
        if not names.is_tag_value(value):
            raise InvalidInput(
                f"tag value {value!r} for {key!r} is not valid (up to 256 letters, digits, spaces, _.:/=+-@)"
            )
    return tags


def _s3_tarball(url: str) -> str:
    if not names.is_s3_tarball(url):
        raise InvalidInput(
            f"model data {url!r} must be one s3://<bucket>/<key>.tar.gz object (SageMaker extracts it "
            "into /opt/ml/model); package the model first"
        )
    return url


# ---- environment ---------------------------------------------------------------------


def llama_environment(
    *,
    ctx_size: int | None = DEFAULT_CTX_SIZE,
    threads: int | None = None,
    n_gpu_layers: int | None = None,
    model_file: str | None = None,
    hf_repo: str | None = None,
    hf_file: str | None = None,
    parallel: int | None = None,
) -> dict[str, str]:
    """``SM_LLAMA_CPP_*`` variables; the DLC turns each into a llama-server flag, the adapter reads them."""
    env: dict[str, str] = {}
    if ctx_size is not None:
        check_in_range(ctx_size, 64, 1_048_576, "ctx_size")
        env["CTX_SIZE"] = str(ctx_size)
    if threads is not None:
        check_in_range(threads, 1, 512, "threads")
        env["THREADS"] = str(threads)
    if n_gpu_layers is not None:
        if n_gpu_layers == -1:  # llama-cpp-python's spelling of "all"
            n_gpu_layers = FULL_OFFLOAD
        check_in_range(n_gpu_layers, 0, FULL_OFFLOAD, "n_gpu_layers (-1 or 999 = all)")
        env["N_GPU_LAYERS"] = str(n_gpu_layers)
    if parallel is not None:
        check_in_range(parallel, 1, 64, "parallel (requests evaluated at once)")
        env["PARALLEL"] = str(parallel)
    if model_file:
        env["MODEL"] = model_file
    if hf_file and not hf_repo:
        raise InvalidInput("hf_file needs hf_repo (the Hugging Face repository to take it from)")
    if hf_repo:
        env["HF_REPO"] = hf_repo
    if hf_file:
        env["HF_FILE"] = hf_file
    return {LLAMA_PREFIX + k: v for k, v in env.items()}


# ---- CreateModel ----------------------------------------------------------------------


def model_request(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str | None = None,
    environment: Mapping[str, str] | None = None,
    tags: list[dict] | None = None,
    network_isolation: bool = True,
) -> dict:
    """CreateModel for one container; the image must be pinned by digest. ``network_isolation``: the
    container gets no network at run time (SageMaker still downloads the model data for it)."""
    check_resource_name(name, "model")
    check_role_arn(role_arn)
    require_pinned(image)
    env = dict(environment or {})
    _check_environment(env)
    hf_repo = env.get(LLAMA_PREFIX + "HF_REPO")
    if model_data_url and hf_repo:
        raise InvalidInput(
            f"both a model tarball ({model_data_url}) and SM_LLAMA_CPP_HF_REPO={hf_repo} are set: the DLC "
            "would pass both --model and --hf-repo. Use the tarball (pinned, checked) or the Hugging Face "
            "download, not both"
        )
    if network_isolation and hf_repo:
        raise InvalidInput(
            f"SM_LLAMA_CPP_HF_REPO={hf_repo} downloads the model at start-up, which an isolated container cannot "
            "do: package the model instead (model_data_url), or pass network_isolation=False"
        )
    container: dict = {"Image": image.uri, "Mode": "SingleModel"}
    if model_data_url:
        container["ModelDataUrl"] = _s3_tarball(model_data_url)
    if env:
        container["Environment"] = env
    request = {
        "ModelName": name,
        "ExecutionRoleArn": role_arn,
        "PrimaryContainer": container,
        "EnableNetworkIsolation": bool(network_isolation),
    }
    if tags:
        request["Tags"] = check_tags(list(tags))
    return api.validate("sagemaker", "CreateModel", request)


def standard_model_request(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str | None = None,
    hf_repo: str | None = None,
    hf_file: str | None = None,
    ctx_size: int = DEFAULT_CTX_SIZE,
    threads: int | None = None,
    n_gpu_layers: int | None = None,
    environment: Mapping[str, str] | None = None,
    tags: list[dict] | None = None,
) -> dict:
    """The standard DLC: a model tarball in S3 (network-isolated), or instead a GGUF the DLC downloads from
    Hugging Face at start-up (which needs the network, so that model is not isolated)."""
    if model_data_url and hf_repo:
        raise InvalidInput(
            "pass model_data_url (the packaged, pinned model) or hf_repo/hf_file (downloaded at start-up), "
            "not both: the DLC would receive both --model and --hf-repo"
        )
    if not model_data_url and not hf_repo:
        raise InvalidInput("the standard endpoint needs model_data_url (s3://.../model.tar.gz) or hf_repo")
    env = llama_environment(
        ctx_size=ctx_size, threads=threads, n_gpu_layers=n_gpu_layers, hf_repo=hf_repo, hf_file=hf_file
    )
    env.update(environment or {})
    return model_request(
        name,
        image=image,
        role_arn=role_arn,
        model_data_url=model_data_url,
        environment=env,
        tags=tags,
        network_isolation=not hf_repo,
    )


def decision_model_request(
    name: str,
    *,
    image: ImageRef,
    role_arn: str,
    model_data_url: str,
    ctx_size: int | None = None,
    threads: int | None = None,
    n_gpu_layers: int = 0,
    parallel: int | None = None,
    environment: Mapping[str, str] | None = None,
    tags: list[dict] | None = None,
) -> dict:
    """The decision image (network-isolated); ``environment`` carries DECISION_ADAPTER_* settings if any."""
    if not model_data_url:
        raise InvalidInput("the decision endpoint needs model_data_url (s3://.../model.tar.gz)")
    env = llama_environment(ctx_size=ctx_size, threads=threads, n_gpu_layers=n_gpu_layers, parallel=parallel)
    env.update(environment or {})
    return model_request(
        name, image=image, role_arn=role_arn, model_data_url=model_data_url, environment=env, tags=tags
    )


# ---- CreateEndpointConfig --------------------------------------------------------------


def _timeouts(startup_timeout_s: int, download_timeout_s: int) -> dict:
    check_in_range(startup_timeout_s, 60, 3600, "startup_timeout_s (ContainerStartupHealthCheckTimeoutInSeconds)")
    check_in_range(download_timeout_s, 60, 3600, "download_timeout_s (ModelDataDownloadTimeoutInSeconds)")
    return {
        "ContainerStartupHealthCheckTimeoutInSeconds": startup_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": download_timeout_s,
    }


def _ami(ami_version: str | None, instance_types: Iterable[str]) -> dict:
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
) -> dict:
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


def instance_pools(instance_types: Sequence[str]) -> list[dict]:
    """``InstancePools`` from an ordered list: the first type gets Priority 1 (first choice)."""
    if isinstance(instance_types, str):
        instance_types = [instance_types]
    return check_instance_pools([{"InstanceType": t, "Priority": i} for i, t in enumerate(instance_types, start=1)])


def check_instance_pools(pools: Sequence[Mapping]) -> list[dict]:
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
    instance_types: Sequence[str] = DEFAULT_GPU_POOLS,
    *,
    instance_count: int = 1,
    provision_timeout_s: int = PROVISION_TIMEOUT_S,
    ami_version: str | None = GPU_AMI_VERSION,
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    variant_name: str = VARIANT_NAME,
) -> dict:
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
    name: str, variant: Mapping, *, tags: list[dict] | None = None, data_capture: Mapping | None = None
) -> dict:
    """CreateEndpointConfig for one variant; ``data_capture``: a DataCaptureConfig (``capture``)."""
    check_resource_name(name, "endpoint config")
    check_resource_name(variant["ModelName"], "model")
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
    if data_capture:
        request["DataCaptureConfig"] = dict(data_capture)
    if tags:
        request["Tags"] = check_tags(list(tags))
    return api.validate("sagemaker", "CreateEndpointConfig", request)


def endpoint_request(name: str, *, config_name: str | None = None, tags: list[dict] | None = None) -> dict:
    check_resource_name(name, "endpoint")
    config_name = config_name or name
    check_resource_name(config_name, "endpoint config")
    request: dict[str, object] = {"EndpointName": name, "EndpointConfigName": config_name}
    if tags:
        request["Tags"] = check_tags(list(tags))
    return api.validate("sagemaker", "CreateEndpoint", request)


# ---- the three deployments -----------------------------------------------------------------


@dataclass(frozen=True)
class DeployPlan:
    """The three requests that make an endpoint; model, config and endpoint share ``name``."""

    model: dict
    endpoint_config: dict
    endpoint: dict
    notes: tuple[str, ...] = ()  # what the builder chose that the requests alone do not say

    @property
    def name(self) -> str:
        return self.endpoint["EndpointName"]

    @property
    def image_uri(self) -> str:
        return self.model["PrimaryContainer"]["Image"]

    @property
    def image(self) -> ImageRef:
        """The image the CreateModel request names, read from the request (what is sent is what is checked)."""
        return parse_image_uri(self.image_uri)

    @property
    def model_data_url(self) -> str | None:
        return self.model["PrimaryContainer"].get("ModelDataUrl")

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

    def requests(self) -> list[tuple[str, dict]]:
        return [
            ("CreateModel", self.model),
            ("CreateEndpointConfig", self.endpoint_config),
            ("CreateEndpoint", self.endpoint),
        ]

    def to_json(self) -> str:
        return json.dumps(dict(self.requests()), indent=2)


def _plan(
    name: str,
    model: dict,
    variant: dict,
    tags: list[dict] | None,
    notes: Sequence[str] = (),
    data_capture: Mapping | None = None,
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
    tags: list[dict] | None = None,
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
    startup_timeout_s: int = STARTUP_TIMEOUT_S,
    download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
    tags: list[dict] | None = None,
    data_capture: Mapping | None = None,
) -> DeployPlan:
    """The decision image on a fixed CPU type; threads default to the type's vCPUs, the context to the
    adapter's default (8192 tokens: room for a 255-option Jev choice). ``data_capture``: SageMaker's
    capture of requests and answers (``capture.data_capture_config``)."""
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
    tags: list[dict] | None = None,
    region: str | None = None,
    data_capture: Mapping | None = None,
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
