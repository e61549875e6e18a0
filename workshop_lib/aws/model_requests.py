"""The CreateModel requests of both paths: the llama.cpp settings every image reads, the tags every resource
carries, and the standard DLC's and the decision image's models.

Each builder returns a plain request checked by botocore against the real service model (``calls.validate``), and
checks here what SageMaker would reject later (maximums, name patterns, the environment's limits). The llama.cpp
settings use the DLC's own ``SM_LLAMA_CPP_*`` variables; the decision adapter reads the same names, so one code
path configures both images. Both models run with ``EnableNetworkIsolation``: SageMaker downloads
``model.tar.gz`` itself (the standard DLC needs the network only when told to download from Hugging Face instead,
which therefore leaves isolation off).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .. import name_rules
from ..config import check_resource_name, check_role_arn
from ..errors import InvalidInput
from . import calls
from .images import ImageRef, require_pinned

FULL_OFFLOAD = 999  # llama.cpp: "all layers"
DEFAULT_CTX_SIZE = 4096  # the standard DLC's; the decision image's default (8192) is the adapter's own
LLAMA_PREFIX = "SM_LLAMA_CPP_"
FLASH_ATTN_CHOICES = ("on", "off", "auto")  # llama-server --flash-attn; the adapter reads the same


# ---- small checks ---------------------------------------------------------------


def check_in_range(value: object, low: float, high: float, what: str) -> None:
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
    workshop: str = name_rules.WORKSHOP_TAGS[name_rules.TAG_WORKSHOP],
    created_by: str = name_rules.WORKSHOP_TAGS[name_rules.TAG_CREATED_BY],
    extra: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The tags every workshop resource carries (``name_rules.WORKSHOP_TAGS``), plus ``extra``."""
    tags = {name_rules.TAG_WORKSHOP: workshop, name_rules.TAG_CREATED_BY: created_by, **(extra or {})}
    return check_tags(name_rules.tag_list(tags))


def check_tags(tags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(tags) > 50:
        raise InvalidInput(f"{len(tags)} tags; SageMaker allows 50 per resource")
    keys = [t["Key"] for t in tags]
    if len(set(keys)) != len(keys):
        raise InvalidInput(f"tag keys must be unique, got {keys}")
    for tag in tags:
        key, value = tag["Key"], tag["Value"]
        if not name_rules.is_tag_key(key):
            raise InvalidInput(
                f"tag key {key!r} is not valid (1-128 letters, digits, spaces, _.:/=+-@; not starting with aws:)"
            )
        if not name_rules.is_tag_value(value):
            raise InvalidInput(
                f"tag value {value!r} for {key!r} is not valid (up to 256 letters, digits, spaces, _.:/=+-@)"
            )
    return tags


def _s3_tarball(url: str) -> str:
    if not name_rules.is_s3_tarball(url):
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
    flash_attn: str | None = None,
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
    if flash_attn is not None:
        if flash_attn not in FLASH_ATTN_CHOICES:
            raise InvalidInput(f"flash_attn {flash_attn!r} is not one of {', '.join(FLASH_ATTN_CHOICES)}")
        env["FLASH_ATTN"] = flash_attn
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
    tags: list[dict[str, Any]] | None = None,
    network_isolation: bool = True,
) -> dict[str, Any]:
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
    container: dict[str, Any] = {"Image": image.uri, "Mode": "SingleModel"}
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
    return calls.validate("sagemaker", "CreateModel", request)


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
    tags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
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
    flash_attn: str | None = None,
    environment: Mapping[str, str] | None = None,
    tags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The decision image (network-isolated); ``environment`` carries DECISION_ADAPTER_* settings if any."""
    if not model_data_url:
        raise InvalidInput("the decision endpoint needs model_data_url (s3://.../model.tar.gz)")
    env = llama_environment(
        ctx_size=ctx_size, threads=threads, n_gpu_layers=n_gpu_layers, parallel=parallel, flash_attn=flash_attn
    )
    env.update(environment or {})
    return model_request(
        name, image=image, role_arn=role_arn, model_data_url=model_data_url, environment=env, tags=tags
    )
