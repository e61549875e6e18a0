"""SageMaker endpoints for both paths: pure request builders, then thin senders.

Builders return plain request dicts for CreateModel, CreateEndpointConfig and
CreateEndpoint, each checked by botocore against the real service model
(``aws.validate``). botocore checks types, required members and minimums only,
so this module also checks what SageMaker would reject later: maximums, enums,
name patterns, pool rules. Scaling an endpoint out is in ``scaling``, offline
decisions (Batch Transform) in ``transform``.

Senders take a boto3 client and do one thing each. Model, endpoint config and
endpoint share one name, so ``cleanup.delete_endpoint_resources(sm, name)``
finds all three without listing anything. ``deploy`` chains them; what only
SageMaker can do (run the container on instances it places) is a parameter,
``hosting``: ``SageMakerHosting`` waits for SageMaker, the local rehearsal passes
``rehearsal.LocalHosting``, which serves the endpoint from a local adapter process.

The llama.cpp settings use the DLC's own ``SM_LLAMA_CPP_*`` variables; the
decision adapter reads the same names, so one code path configures both images.

Both models run with ``EnableNetworkIsolation``: SageMaker downloads ``model.tar.gz`` itself, and
neither image needs the network at run time (the standard DLC only when told to download from
Hugging Face instead, which therefore leaves isolation off). The GPU plan uses instance pools where
SageMaker offers them (``regions``) and the first pool's type as a fixed type elsewhere, with a note.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from . import aws, names, regions
from .config import check_bucket_region, check_resource_name, check_role_arn
from .errors import WorkshopError
from .images import check_deployable, require_pinned

VARIANT_NAME = "AllTraffic"
STANDARD_CPU_INSTANCE = "ml.c6i.2xlarge"
DECISION_CPU_INSTANCE = "ml.c6i.8xlarge"
DEFAULT_GPU_POOLS = ("ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge")
# Driver 580 / CUDA 13.0: what the server-sagemaker-cuda-v1 DLC (CUDA 13.0.2) needs.
GPU_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
FULL_OFFLOAD = 999  # llama.cpp: "all layers"
DEFAULT_CTX_SIZE = 4096  # the standard DLC's; the decision image's default (8192) is the adapter's own
# The published sample's deploy scripts allow 900 s each (AWS recommends >= 600 s for the llama.cpp DLC).
STARTUP_TIMEOUT_S = 900
DOWNLOAD_TIMEOUT_S = 900
PROVISION_TIMEOUT_S = 1200
LLAMA_PREFIX = "SM_LLAMA_CPP_"
MAX_POOLS = 5


class EndpointSpecError(WorkshopError, ValueError):
    """A deployment request SageMaker would reject, caught before sending it."""


class OutOfRange(EndpointSpecError):
    pass


class InvalidInstancePools(EndpointSpecError):
    pass


class ConflictingModelSource(EndpointSpecError):
    pass


class DeployError(WorkshopError, RuntimeError):
    """SageMaker refused a request; the message says what to do."""


class QuotaExceeded(DeployError):
    pass


class AlreadyExists(DeployError):
    pass


class EndpointFailed(WorkshopError, RuntimeError):
    def __init__(self, message: str, *, endpoint_name: str, status: str, reason: str = "",
                 log_lines: Sequence[str] = ()):
        super().__init__(message)
        self.endpoint_name = endpoint_name
        self.status = status
        self.reason = reason
        self.log_lines = list(log_lines)


class EndpointWaitTimeout(WorkshopError, TimeoutError):
    pass


# ---- small checks ---------------------------------------------------------------


def _in_range(value, low, high, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise OutOfRange(f"{what} is {value!r}; it must be between {low} and {high}")


@lru_cache(maxsize=None)
def _enum(service: str, operation: str, *members: str) -> tuple[str, ...]:
    """Allowed values of a request member, from botocore's model (ParamValidator skips enums)."""
    shape = aws.operation_model(service, operation).input_shape
    for member in members:
        shape = shape.member if member == "[]" else shape.members[member]
    return tuple(shape.enum)


def endpoint_instance_types() -> tuple[str, ...]:
    return _enum("sagemaker", "CreateEndpointConfig", "ProductionVariants", "[]", "InstanceType")


def inference_ami_versions() -> tuple[str, ...]:
    return _enum("sagemaker", "CreateEndpointConfig", "ProductionVariants", "[]", "InferenceAmiVersion")


def _check_choice(value: str, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        family = value.split(".")[1] if isinstance(value, str) and value.count(".") == 2 else None
        close = [a for a in allowed if family and a.split(".")[1:2] == [family]]
        hint = f" (this family offers {', '.join(close)})" if close else ""
        raise EndpointSpecError(f"{what} {value!r} is not one SageMaker accepts here{hint}")
    return value


_INSTANCE = re.compile(r"ml\.(?P<family>[a-z0-9-]+)\.(?P<size>medium|large|(?P<n>\d*)xlarge)")


def vcpus(instance_type: str) -> int:
    """vCPUs of an ml.* type from its size (large = 2, xlarge = 4, Nxlarge = 4N)."""
    m = _INSTANCE.fullmatch(instance_type)
    if not m:
        raise EndpointSpecError(f"cannot tell the vCPUs of {instance_type!r}; pass threads explicitly")
    if m["size"] == "medium":
        return 1
    if m["size"] == "large":
        return 2
    return 4 * int(m["n"] or 1)


def is_gpu_instance(instance_type: str) -> bool:
    m = _INSTANCE.fullmatch(instance_type)
    return bool(m) and m["family"][0] in "gp"


def _has_local_nvme(instance_type: str) -> bool:
    m = _INSTANCE.fullmatch(instance_type)
    return bool(m) and (m["family"][0] in "gp" or m["family"].endswith("d"))


def _check_cuda13(instance_type: str) -> None:
    # CUDA 13 dropped Kepler to Volta: the cuda-v1 DLC cannot run on P2 (K80) or P3 (V100).
    if instance_type.startswith(("ml.p2.", "ml.p3.")):
        raise EndpointSpecError(
            f"{instance_type} has a GPU that CUDA 13 no longer supports; use g4dn, g5, g6, g6e or newer"
        )


def _check_environment(env: Mapping[str, str]) -> None:
    if len(env) > 100:
        raise OutOfRange(f"the container environment has {len(env)} variables; SageMaker allows 100")
    for key, value in env.items():
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key) or len(key) > 1024:
            raise EndpointSpecError(f"environment variable name {key!r} is not valid (letters, digits, _)")
        if not isinstance(value, str):
            raise EndpointSpecError(f"environment variable {key} must be a string, got {type(value).__name__}")
        if len(value) > 1024:
            raise OutOfRange(f"environment variable {key} is {len(value)} characters long; SageMaker allows 1024")


def workshop_tags(workshop: str = names.WORKSHOP_TAGS[names.TAG_WORKSHOP],
                  created_by: str = names.WORKSHOP_TAGS[names.TAG_CREATED_BY],
                  extra: Mapping[str, str] | None = None) -> list[dict]:
    """The tags every workshop resource carries (``names.WORKSHOP_TAGS``), plus ``extra``."""
    tags = {names.TAG_WORKSHOP: workshop, names.TAG_CREATED_BY: created_by, **(extra or {})}
    return check_tags(names.tag_list(tags))


def check_tags(tags: list[dict]) -> list[dict]:
    if len(tags) > 50:
        raise OutOfRange(f"{len(tags)} tags; SageMaker allows 50 per resource")
    keys = [t["Key"] for t in tags]
    if len(set(keys)) != len(keys):
        raise EndpointSpecError(f"tag keys must be unique, got {keys}")
    for tag in tags:
        key, value = tag["Key"], tag["Value"]
        if not names.is_tag_key(key):
            raise EndpointSpecError(f"tag key {key!r} is not valid (1-128 letters, digits, spaces, _.:/=+-@; "
                                    "not starting with aws:)")
        if not names.is_tag_value(value):
            raise EndpointSpecError(f"tag value {value!r} for {key!r} is not valid (up to 256 letters, digits, "
                                    "spaces, _.:/=+-@)")
    return tags


def _s3_tarball(url: str) -> str:
    if not names.is_s3_tarball(url):
        raise EndpointSpecError(
            f"model data {url!r} must be one s3://<bucket>/<key>.tar.gz object (SageMaker extracts it "
            "into /opt/ml/model); package the model first"
        )
    return url


# ---- environment ---------------------------------------------------------------------


def llama_environment(*, ctx_size: int | None = DEFAULT_CTX_SIZE, threads: int | None = None,
                      n_gpu_layers: int | None = None, model_file: str | None = None,
                      hf_repo: str | None = None, hf_file: str | None = None) -> dict[str, str]:
    """``SM_LLAMA_CPP_*`` variables; the DLC turns each into a llama-server flag, the adapter reads them."""
    env: dict[str, str] = {}
    if ctx_size is not None:
        _in_range(ctx_size, 64, 1_048_576, "ctx_size")
        env["CTX_SIZE"] = str(ctx_size)
    if threads is not None:
        _in_range(threads, 1, 512, "threads")
        env["THREADS"] = str(threads)
    if n_gpu_layers is not None:
        if n_gpu_layers == -1:  # llama-cpp-python's spelling of "all"
            n_gpu_layers = FULL_OFFLOAD
        _in_range(n_gpu_layers, 0, FULL_OFFLOAD, "n_gpu_layers (-1 or 999 = all)")
        env["N_GPU_LAYERS"] = str(n_gpu_layers)
    if model_file:
        env["MODEL"] = model_file
    if hf_file and not hf_repo:
        raise EndpointSpecError("hf_file needs hf_repo (the Hugging Face repository to take it from)")
    if hf_repo:
        env["HF_REPO"] = hf_repo
    if hf_file:
        env["HF_FILE"] = hf_file
    return {LLAMA_PREFIX + k: v for k, v in env.items()}


# ---- CreateModel ----------------------------------------------------------------------


def model_request(name: str, *, image_uri: str, role_arn: str, model_data_url: str | None = None,
                  environment: Mapping[str, str] | None = None, tags: list[dict] | None = None,
                  network_isolation: bool = True) -> dict:
    """CreateModel for one container; the image must be pinned by digest. ``network_isolation``: the
    container gets no network at run time (SageMaker still downloads the model data for it)."""
    check_resource_name(name, "model")
    check_role_arn(role_arn)
    require_pinned(image_uri)
    env = dict(environment or {})
    _check_environment(env)
    hf_repo = env.get(LLAMA_PREFIX + "HF_REPO")
    if model_data_url and hf_repo:
        raise ConflictingModelSource(
            f"both a model tarball ({model_data_url}) and SM_LLAMA_CPP_HF_REPO={hf_repo} are set: the DLC "
            "would pass both --model and --hf-repo. Use the tarball (pinned, checked) or the Hugging Face "
            "download, not both"
        )
    if network_isolation and hf_repo:
        raise EndpointSpecError(
            f"SM_LLAMA_CPP_HF_REPO={hf_repo} downloads the model at start-up, which an isolated container cannot "
            "do: package the model instead (model_data_url), or pass network_isolation=False")
    container: dict = {"Image": image_uri, "Mode": "SingleModel"}
    if model_data_url:
        container["ModelDataUrl"] = _s3_tarball(model_data_url)
    if env:
        container["Environment"] = env
    request = {"ModelName": name, "ExecutionRoleArn": role_arn, "PrimaryContainer": container,
               "EnableNetworkIsolation": bool(network_isolation)}
    if tags:
        request["Tags"] = check_tags(list(tags))
    return aws.validate("sagemaker", "CreateModel", request)


def standard_model_request(name: str, *, image_uri: str, role_arn: str, model_data_url: str | None = None,
                           hf_repo: str | None = None, hf_file: str | None = None,
                           ctx_size: int = DEFAULT_CTX_SIZE, threads: int | None = None,
                           n_gpu_layers: int | None = None, environment: Mapping[str, str] | None = None,
                           tags: list[dict] | None = None) -> dict:
    """The standard DLC: a model tarball in S3 (network-isolated), or instead a GGUF the DLC downloads from
    Hugging Face at start-up (which needs the network, so that model is not isolated)."""
    if model_data_url and hf_repo:
        raise ConflictingModelSource(
            "pass model_data_url (the packaged, pinned model) or hf_repo/hf_file (downloaded at start-up), "
            "not both: the DLC would receive both --model and --hf-repo"
        )
    if not model_data_url and not hf_repo:
        raise EndpointSpecError("the standard endpoint needs model_data_url (s3://.../model.tar.gz) or hf_repo")
    env = llama_environment(ctx_size=ctx_size, threads=threads, n_gpu_layers=n_gpu_layers,
                            hf_repo=hf_repo, hf_file=hf_file)
    env.update(environment or {})
    return model_request(name, image_uri=image_uri, role_arn=role_arn, model_data_url=model_data_url,
                         environment=env, tags=tags, network_isolation=not hf_repo)


def decision_model_request(name: str, *, image_uri: str, role_arn: str, model_data_url: str,
                           ctx_size: int | None = None, threads: int | None = None, n_gpu_layers: int = 0,
                           environment: Mapping[str, str] | None = None, tags: list[dict] | None = None) -> dict:
    """The decision image (network-isolated); ``environment`` carries DECISION_ADAPTER_* settings if any."""
    if not model_data_url:
        raise EndpointSpecError("the decision endpoint needs model_data_url (s3://.../model.tar.gz)")
    env = llama_environment(ctx_size=ctx_size, threads=threads, n_gpu_layers=n_gpu_layers)
    env.update(environment or {})
    return model_request(name, image_uri=image_uri, role_arn=role_arn, model_data_url=model_data_url,
                         environment=env, tags=tags)


# ---- CreateEndpointConfig --------------------------------------------------------------


def _timeouts(startup_timeout_s: int, download_timeout_s: int) -> dict:
    _in_range(startup_timeout_s, 60, 3600, "startup_timeout_s (ContainerStartupHealthCheckTimeoutInSeconds)")
    _in_range(download_timeout_s, 60, 3600, "download_timeout_s (ModelDataDownloadTimeoutInSeconds)")
    return {"ContainerStartupHealthCheckTimeoutInSeconds": startup_timeout_s,
            "ModelDataDownloadTimeoutInSeconds": download_timeout_s}


def _ami(ami_version: str | None, instance_types: Iterable[str]) -> dict:
    if ami_version is None:
        return {}
    _check_choice(ami_version, inference_ami_versions(), "InferenceAmiVersion")
    if "-gpu-" in ami_version:
        cpu_types = [t for t in instance_types if not is_gpu_instance(t)]
        if cpu_types:
            raise EndpointSpecError(f"{ami_version} is a GPU AMI but {', '.join(cpu_types)} has no GPU")
    return {"InferenceAmiVersion": ami_version}


def fixed_instance_variant(model_name: str, instance_type: str, *, instance_count: int = 1,
                           startup_timeout_s: int = STARTUP_TIMEOUT_S, download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
                           volume_size_gb: int | None = None, ami_version: str | None = None,
                           variant_name: str = VARIANT_NAME) -> dict:
    """A ProductionVariant on one instance type."""
    check_resource_name(variant_name, "endpoint")
    _check_choice(instance_type, endpoint_instance_types(), "instance type")
    _in_range(instance_count, 1, 100, "instance_count")
    variant = {"VariantName": variant_name, "ModelName": model_name, "InstanceType": instance_type,
               "InitialInstanceCount": instance_count, **_timeouts(startup_timeout_s, download_timeout_s)}
    if volume_size_gb is not None:
        if _has_local_nvme(instance_type):
            raise EndpointSpecError(
                f"{instance_type} comes with local NVMe storage and SageMaker rejects VolumeSizeInGB for it; "
                "leave volume_size_gb unset"
            )
        _in_range(volume_size_gb, 1, 512, "volume_size_gb")
        variant["VolumeSizeInGB"] = volume_size_gb
    variant.update(_ami(ami_version, [instance_type]))
    return variant


def instance_pools(instance_types: Sequence[str]) -> list[dict]:
    """``InstancePools`` from an ordered list: the first type gets Priority 1 (first choice)."""
    if isinstance(instance_types, str):
        instance_types = [instance_types]
    return check_instance_pools(
        [{"InstanceType": t, "Priority": i} for i, t in enumerate(instance_types, start=1)]
    )


def check_instance_pools(pools: Sequence[Mapping]) -> list[dict]:
    """The rules botocore leaves to the service: 1-5 pools, distinct types, priorities 1-5."""
    pools = [dict(p) for p in pools]
    if not 1 <= len(pools) <= MAX_POOLS:
        raise InvalidInstancePools(f"{len(pools)} instance pools given; a variant takes 1 to {MAX_POOLS}")
    types = [p.get("InstanceType") for p in pools]
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise InvalidInstancePools(f"instance pools repeat {', '.join(duplicates)}; list each type once")
    for pool in pools:
        _check_choice(pool["InstanceType"], endpoint_instance_types(), "instance pool type")
        priority = pool.get("Priority")
        if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= MAX_POOLS:
            raise InvalidInstancePools(
                f"pool {pool['InstanceType']} has Priority {priority!r}; use 1 to {MAX_POOLS} (1 = first choice)"
            )
    return pools


def instance_pool_variant(model_name: str, instance_types: Sequence[str] = DEFAULT_GPU_POOLS, *,
                          instance_count: int = 1, provision_timeout_s: int = PROVISION_TIMEOUT_S,
                          ami_version: str | None = GPU_AMI_VERSION, startup_timeout_s: int = STARTUP_TIMEOUT_S,
                          download_timeout_s: int = DOWNLOAD_TIMEOUT_S, variant_name: str = VARIANT_NAME) -> dict:
    """A ProductionVariant placed on the first instance pool with capacity, in the given order.

    No VolumeSizeInGB: the g-family types use their local NVMe storage.
    """
    check_resource_name(variant_name, "endpoint")
    pools = instance_pools(instance_types)
    types = [p["InstanceType"] for p in pools]
    if ami_version and "-gpu-" in ami_version:
        for t in types:
            _check_cuda13(t)
    _in_range(instance_count, 1, 100, "instance_count")
    _in_range(provision_timeout_s, 300, 3600, "provision_timeout_s (VariantInstanceProvisionTimeoutInSeconds)")
    return {"VariantName": variant_name, "ModelName": model_name, "InitialInstanceCount": instance_count,
            "InstancePools": pools, "VariantInstanceProvisionTimeoutInSeconds": provision_timeout_s,
            **_timeouts(startup_timeout_s, download_timeout_s), **_ami(ami_version, types)}


def endpoint_config_request(name: str, variant: Mapping, *, tags: list[dict] | None = None) -> dict:
    check_resource_name(name, "endpoint config")
    check_resource_name(variant["ModelName"], "model")
    if "InstancePools" in variant:
        if "InstanceType" in variant:
            raise InvalidInstancePools("a variant takes InstanceType or InstancePools, not both")
        check_instance_pools(variant["InstancePools"])
        _in_range(variant.get("VariantInstanceProvisionTimeoutInSeconds", 300), 300, 3600,
                  "VariantInstanceProvisionTimeoutInSeconds")
    request = {"EndpointConfigName": name, "ProductionVariants": [dict(variant)]}
    if tags:
        request["Tags"] = check_tags(list(tags))
    return aws.validate("sagemaker", "CreateEndpointConfig", request)


def endpoint_request(name: str, *, config_name: str | None = None, tags: list[dict] | None = None) -> dict:
    check_resource_name(name, "endpoint")
    config_name = config_name or name
    check_resource_name(config_name, "endpoint config")
    request = {"EndpointName": name, "EndpointConfigName": config_name}
    if tags:
        request["Tags"] = check_tags(list(tags))
    return aws.validate("sagemaker", "CreateEndpoint", request)


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
        return [("CreateModel", self.model), ("CreateEndpointConfig", self.endpoint_config),
                ("CreateEndpoint", self.endpoint)]

    def to_json(self) -> str:
        return json.dumps(dict(self.requests()), indent=2)


def _plan(name: str, model: dict, variant: dict, tags: list[dict] | None, notes: Sequence[str] = ()) -> DeployPlan:
    tags = tags if tags is not None else workshop_tags()
    return DeployPlan(model=model, endpoint_config=endpoint_config_request(name, variant, tags=tags),
                      endpoint=endpoint_request(name, tags=tags), notes=tuple(notes))


def standard_plan(name: str, *, image_uri: str, role_arn: str, model_data_url: str | None = None,
                  hf_repo: str | None = None, hf_file: str | None = None,
                  instance_type: str = STANDARD_CPU_INSTANCE, instance_count: int = 1,
                  ctx_size: int = DEFAULT_CTX_SIZE, threads: int | None = None, n_gpu_layers: int | None = None,
                  startup_timeout_s: int = STARTUP_TIMEOUT_S, download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
                  environment: Mapping[str, str] | None = None, tags: list[dict] | None = None) -> DeployPlan:
    """The published llama.cpp DLC (OpenAI chat on /invocations) on one instance type."""
    tags = tags if tags is not None else workshop_tags()
    gpu = is_gpu_instance(instance_type)
    if gpu:
        _check_cuda13(instance_type)
    model = standard_model_request(name, image_uri=image_uri, role_arn=role_arn, model_data_url=model_data_url,
                                   hf_repo=hf_repo, hf_file=hf_file, ctx_size=ctx_size, threads=threads,
                                   n_gpu_layers=n_gpu_layers, environment=environment, tags=tags)
    variant = fixed_instance_variant(name, instance_type, instance_count=instance_count,
                                     startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s,
                                     ami_version=GPU_AMI_VERSION if gpu else None)
    return _plan(name, model, variant, tags)


def decision_cpu_plan(name: str, *, image_uri: str, role_arn: str, model_data_url: str,
                      instance_type: str = DECISION_CPU_INSTANCE, instance_count: int = 1,
                      threads: int | None = None, ctx_size: int | None = None,
                      startup_timeout_s: int = STARTUP_TIMEOUT_S, download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
                      environment: Mapping[str, str] | None = None, tags: list[dict] | None = None) -> DeployPlan:
    """The decision image on a fixed CPU type; threads default to the type's vCPUs, the context to the
    adapter's default (8192 tokens: room for a 255-option Jev choice)."""
    tags = tags if tags is not None else workshop_tags()
    if is_gpu_instance(instance_type):
        raise EndpointSpecError(f"{instance_type} is a GPU type; use decision_gpu_plan for GPUs")
    model = decision_model_request(name, image_uri=image_uri, role_arn=role_arn, model_data_url=model_data_url,
                                   ctx_size=ctx_size, threads=threads or vcpus(instance_type), n_gpu_layers=0,
                                   environment=environment, tags=tags)
    variant = fixed_instance_variant(name, instance_type, instance_count=instance_count,
                                     startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s)
    return _plan(name, model, variant, tags)


def decision_gpu_plan(name: str, *, image_uri: str, role_arn: str, model_data_url: str,
                      instance_pools: Sequence[str] = DEFAULT_GPU_POOLS, instance_count: int = 1,
                      provision_timeout_s: int = PROVISION_TIMEOUT_S, ami_version: str = GPU_AMI_VERSION,
                      n_gpu_layers: int = FULL_OFFLOAD, ctx_size: int | None = None, threads: int | None = None,
                      startup_timeout_s: int = STARTUP_TIMEOUT_S, download_timeout_s: int = DOWNLOAD_TIMEOUT_S,
                      environment: Mapping[str, str] | None = None, tags: list[dict] | None = None,
                      region: str | None = None) -> DeployPlan:
    """The decision image on ordered GPU instance pools (first with capacity wins), full offload.

    With ``region`` outside ``regions.INSTANCE_POOL_REGIONS``, where SageMaker refuses pools, the
    variant gets the first pool's type as a fixed InstanceType instead, and the plan's notes say so.
    """
    tags = tags if tags is not None else workshop_tags()
    types = [instance_pools] if isinstance(instance_pools, str) else list(instance_pools)
    for t in types:
        if not is_gpu_instance(t):
            raise InvalidInstancePools(f"{t} has no GPU; the GPU plan takes GPU types (e.g. {DEFAULT_GPU_POOLS[0]})")
    model = decision_model_request(name, image_uri=image_uri, role_arn=role_arn, model_data_url=model_data_url,
                                   ctx_size=ctx_size, threads=threads, n_gpu_layers=n_gpu_layers,
                                   environment=environment, tags=tags)
    if region is not None and not regions.offers_instance_pools(region):
        # the list is checked as pools would be, though only its first type is used here
        check_instance_pools([{"InstanceType": t, "Priority": i} for i, t in enumerate(types, start=1)])
        _check_cuda13(types[0])
        _in_range(provision_timeout_s, 300, 3600, "provision_timeout_s (VariantInstanceProvisionTimeoutInSeconds)")
        variant = fixed_instance_variant(name, types[0], instance_count=instance_count, ami_version=ami_version,
                                         startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s)
        return _plan(name, model, variant, tags, [regions.no_pools_note(region, types[0], types[1:])])
    variant = instance_pool_variant(name, types, instance_count=instance_count,
                                    provision_timeout_s=provision_timeout_s, ami_version=ami_version,
                                    startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s)
    return _plan(name, model, variant, tags)


# ---- senders --------------------------------------------------------------------------------


def _error_code(exc) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _send(call, operation: str, request: dict, name: str):
    from botocore.exceptions import ClientError

    try:
        return call(**request)
    except ClientError as exc:
        code, message = _error_code(exc)
        if code == "ResourceLimitExceeded":
            raise QuotaExceeded(
                f"{operation} for {name!r}: {message}. Your account's quota for this instance type "
                "'for endpoint usage' is too low (often 0): request an increase in Service Quotas "
                "(Amazon SageMaker) or choose another instance type"
            ) from None
        if "already exist" in message:
            raise AlreadyExists(
                f"{operation}: {message}. Delete it first with "
                f"workshop_lib.cleanup.delete_endpoint_resources(sm, {name!r}) or choose another name"
            ) from None
        raise DeployError(f"{operation} for {name!r} failed: {code}: {message}") from None


def create_model(sm_client, request: dict) -> str:
    require_pinned(request["PrimaryContainer"]["Image"])
    aws.validate("sagemaker", "CreateModel", request)
    return _send(sm_client.create_model, "CreateModel", request, request["ModelName"])["ModelArn"]


def create_endpoint_config(sm_client, request: dict) -> str:
    aws.validate("sagemaker", "CreateEndpointConfig", request)
    response = _send(sm_client.create_endpoint_config, "CreateEndpointConfig", request,
                     request["EndpointConfigName"])
    return response["EndpointConfigArn"]


def create_endpoint(sm_client, request: dict) -> str:
    aws.validate("sagemaker", "CreateEndpoint", request)
    return _send(sm_client.create_endpoint, "CreateEndpoint", request, request["EndpointName"])["EndpointArn"]


class SageMakerHosting:
    """Where ``deploy`` runs an endpoint: SageMaker, which the flow waits for."""

    def __init__(self, *, poll_s: float = 30, timeout_s: float = 3600):
        self.poll_s, self.timeout_s = poll_s, timeout_s

    def adapt(self, plan: DeployPlan) -> DeployPlan:
        """The plan as sent (as built, on AWS)."""
        return plan

    def wait(self, sm_client, name: str, *, logs_client=None, progress: bool = True) -> dict:
        return wait_in_service(sm_client, name, poll_s=self.poll_s, timeout_s=self.timeout_s, progress=progress,
                               logs_client=logs_client)

    def created(self, sm_client, name: str) -> dict:
        """What ``deploy`` returns when told not to wait: the endpoint as SageMaker describes it now."""
        return sm_client.describe_endpoint(EndpointName=name)

    def served(self, name: str) -> tuple[str | None, list[str]]:
        """A URL to reach endpoint ``name`` directly and notes on how it is served (none on AWS)."""
        return None, []

    def offload_lines(self, logs_client, name: str) -> tuple[list[OffloadLine], str]:
        """llama.cpp's offload lines for endpoint ``name``, and where they were read."""
        return offload_log_lines(logs_client, name), f"CloudWatch {log_group(name)}"


def deploy(sm_client, plan: DeployPlan, *, wait: bool = True, logs_client=None, s3_client=None,
           progress: bool = True, poll_s: float = 30, timeout_s: float = 3600,
           hosting: SageMakerHosting | None = None, after_create=None) -> dict:
    """Create model, endpoint config and endpoint; return the latest DescribeEndpoint response.

    Refuses an image not pinned by digest or in another region; with ``s3_client``
    also checks that the model data bucket is in the endpoint's region. ``after_create(name)``
    runs once CreateEndpoint was accepted and before the wait (the spend guard sets the endpoint's
    deadline there, so it exists however the wait ends).
    """
    hosting = hosting or SageMakerHosting(poll_s=poll_s, timeout_s=timeout_s)
    region = sm_client.meta.region_name
    check_deployable(plan.image_uri, region)
    if s3_client is not None and plan.model_data_url:
        check_bucket_region(s3_client, names.split_s3_uri(plan.model_data_url)[0], region)
    sent = hosting.adapt(plan)
    created: list[str] = []
    try:
        create_model(sm_client, sent.model)
        created.append(f"model {sent.model['ModelName']}")
        create_endpoint_config(sm_client, sent.endpoint_config)
        created.append(f"endpoint config {sent.endpoint_config['EndpointConfigName']}")
        create_endpoint(sm_client, sent.endpoint)
    except DeployError as exc:
        if created:
            exc.args = (f"{exc.args[0]}\nAlready created: {', '.join(created)}; remove them with "
                        f"workshop_lib.cleanup.delete_endpoint_resources(sm, {plan.name!r})",)
        raise
    if after_create is not None:
        after_create(plan.name)
    if wait:
        return hosting.wait(sm_client, plan.name, logs_client=logs_client, progress=progress)
    return hosting.created(sm_client, plan.name)


_WAITING = ("Creating", "Updating", "SystemUpdating", "RollingBack")


def wait_in_service(sm_client, name: str, poll_s: float = 30, timeout_s: float = 3600, progress: bool = True,
                    *, logs_client=None, sleep=time.sleep, clock=time.monotonic) -> dict:
    """Poll until the endpoint is InService and return DescribeEndpoint.

    On Failed, raise EndpointFailed with SageMaker's FailureReason and, given
    ``logs_client``, the first lines of ``/aws/sagemaker/Endpoints/<name>`` (when the logs
    cannot be read, the reason still comes through, with a note saying so).
    """
    from botocore.exceptions import ClientError

    def failure(described: dict) -> EndpointFailed | None:
        status = described["EndpointStatus"]
        if status in _WAITING:
            return None
        reason = described.get("FailureReason", "")
        lines, unreadable = [], None
        if logs_client is not None:
            try:
                lines = endpoint_log_lines(logs_client, name)
            except ClientError as exc:  # e.g. a Studio role without logs:FilterLogEvents: keep the reason
                unreadable = "{}: {}".format(*_error_code(exc))
        message = _failure_message(name, status, reason, lines, logs_client is not None and not unreadable)
        if unreadable:
            message += (f"\n(the endpoint's logs could not be read: {unreadable}; open "
                        f"/aws/sagemaker/Endpoints/{name} in the CloudWatch console)")
        return EndpointFailed(message, endpoint_name=name, status=status, reason=reason, log_lines=lines)

    def timeout(status: str) -> EndpointWaitTimeout:
        return EndpointWaitTimeout(
            f"endpoint {name} is still {status} after {timeout_s:.0f} s; it keeps going (and billing "
            f"once instances run): wait again with wait_in_service, or delete it with "
            f"workshop_lib.cleanup.delete_endpoint_resources(sm, {name!r})"
        )

    return aws.wait_for_status(lambda: sm_client.describe_endpoint(EndpointName=name), "EndpointStatus",
                               done="InService", label=f"endpoint {name}", failure=failure, timeout=timeout,
                               poll_s=poll_s, timeout_s=timeout_s, progress=progress, sleep=sleep, clock=clock)


def _failure_message(name: str, status: str, reason: str, lines: list[str], had_logs: bool) -> str:
    parts = [f"endpoint {name} is {status}: {reason or 'no FailureReason given'}"]
    if lines:
        parts.append(f"first log lines of /aws/sagemaker/Endpoints/{name}:")
        parts.extend(f"  {line}" for line in lines)
    elif had_logs:
        parts.append(f"no log lines in /aws/sagemaker/Endpoints/{name} (the container may never have started)")
    parts.append(f"It still exists; delete it with workshop_lib.cleanup.delete_endpoint_resources(sm, {name!r})")
    return "\n".join(parts)


def log_group(endpoint_name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def _log_events(logs_client, endpoint_name: str, limit: int, pattern: str | None = None) -> list[dict]:
    from botocore.exceptions import ClientError

    kwargs = {"logGroupName": log_group(endpoint_name), "limit": min(limit, 10_000)}
    if pattern:
        kwargs["filterPattern"] = pattern
    events: list[dict] = []
    try:
        while len(events) < limit:
            response = logs_client.filter_log_events(**kwargs)
            events.extend(response.get("events", []))
            if not response.get("nextToken") or not response.get("events"):
                break
            kwargs["nextToken"] = response["nextToken"]
    except ClientError as exc:
        if _error_code(exc)[0] == "ResourceNotFoundException":
            return []
        raise
    return events[:limit]


def endpoint_log_lines(logs_client, endpoint_name: str, limit: int = 20) -> list[str]:
    """The first ``limit`` lines the endpoint's containers logged (oldest first)."""
    return [e["message"].rstrip() for e in _log_events(logs_client, endpoint_name, limit)]


@dataclass(frozen=True)
class OffloadLine:
    log_stream: str
    message: str
    offloaded: int
    total: int


_OFFLOAD = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def parse_offload(message: str, log_stream: str = "") -> OffloadLine | None:
    """llama.cpp's "offloaded N/M layers to GPU" line, or None for any other line."""
    m = _OFFLOAD.search(message)
    return OffloadLine(log_stream, message.strip(), int(m[1]), int(m[2])) if m else None


def offload_log_lines(logs_client, endpoint_name: str, limit: int = 50) -> list[OffloadLine]:
    """llama.cpp's offload lines from the endpoint's CloudWatch logs (one per model load)."""
    found = (parse_offload(e["message"], e.get("logStreamName", ""))
             for e in _log_events(logs_client, endpoint_name, limit, pattern='"offloaded"'))
    return [line for line in found if line]


def placed_instance_types(describe_endpoint_response: Mapping) -> dict[str, int]:
    """Instance type -> running count for pooled variants (which pool SageMaker placed on).

    Fixed-type variants do not report their type in DescribeEndpoint: they give ``{}``.
    """
    placed: dict[str, int] = {}
    for variant in describe_endpoint_response.get("ProductionVariants", []):
        for pool in variant.get("InstancePools") or []:
            count = pool.get("CurrentInstanceCount") or 0
            if count > 0:
                placed[pool["InstanceType"]] = placed.get(pool["InstanceType"], 0) + count
    return placed

