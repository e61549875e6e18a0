"""Notebooks 02 and 04: endpoints for the standard DLC and for the decision image on CPU and on an
ordered GPU instance pool, and where each one was placed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .. import endpoints
from .context import StepError, Text, Workshop, _Shown, _on_path, _short
from .decision_image import decision_image, resolve_dlc


def llama_settings(environment: Mapping[str, str]) -> list[str]:
    """What each SM_LLAMA_CPP_* variable becomes: the DLC's llama-server flag (the adapter reads the same)."""
    out = []
    for key, value in sorted(environment.items()):
        if not key.startswith(endpoints.LLAMA_PREFIX):
            out.append(f"{key}={value}  (adapter setting)")
            continue
        name = key[len(endpoints.LLAMA_PREFIX):]
        flag = "--" + name.lower().replace("_", "-")
        if name == "PORT":
            became = "not passed on (nginx listens on 8080)"
        elif value.lower() == "false":
            became = "dropped"
        elif value.lower() in ("true", ""):
            became = flag
        else:
            became = f"{flag} {value}"
        out.append(f"{key}={value}  ->  llama-server {became}")
    return out


@dataclass(repr=False)
class EndpointResult(_Shown):
    name: str
    plan: endpoints.DeployPlan | None
    status: str
    where: str
    seconds: float = 0.0
    url: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:  # serving (locally: by a local adapter), or skipped on purpose
        if self.plan is None:
            return self.status == "skipped"
        return self.status == "InService" and (self.where == "SageMaker" or bool(self.url))

    def lines(self) -> list[str]:
        if self.plan is None:
            return self.notes
        variant = self.plan.endpoint_config["ProductionVariants"][0]
        placement = (" > ".join(p["InstanceType"] for p in variant["InstancePools"]) + " (ordered pools)"
                     if "InstancePools" in variant else variant["InstanceType"])
        return [f"endpoint {self.name}: {self.status} after {self.seconds:.1f} s ({self.where})",
                f"  image {_short(self.plan.image_uri)}", f"  instances: {placement}",
                *("  " + s for s in llama_settings(self.plan.model["PrimaryContainer"].get("Environment", {}))),
                *self.notes]


def _deploy(workshop: Workshop, plan: endpoints.DeployPlan, *, progress: bool, wait: bool = True) -> EndpointResult:
    started = time.perf_counter()
    c = workshop.clients
    workshop.check_recorded("model_data_url", plan.model_data_url, "01_package_model")  # gone after 07 or a reset?
    described = endpoints.deploy(c.sm, plan, wait=wait, logs_client=c.logs, s3_client=c.s3, progress=progress,
                                 hosting=c.hosting)
    url, notes = c.hosting.served(plan.name)
    where = "SageMaker" if url is None else "emulator + local adapter"
    return EndpointResult(plan.name, plan, described["EndpointStatus"], where, time.perf_counter() - started, url,
                          notes)


def _model_data_url(workshop: Workshop) -> str:
    return workshop.recall("model_data_url", "01_package_model")


_BUILDERS = {"standard": endpoints.standard_plan, "decision-cpu": endpoints.decision_cpu_plan,
             "decision-gpu": endpoints.decision_gpu_plan}


def deploy_plan(workshop: Workshop, path: str, image_uri: str | None = None, *, model_data_url: str | None = None,
                **settings) -> endpoints.DeployPlan:
    """The requests the deploy step of ``path`` (``standard``, ``decision-cpu``, ``decision-gpu``) sends,
    built and validated, nothing sent: the config's endpoint name and execution role, ``image_uri`` (else
    the pinned DLC for ``standard``, the decision image notebook 03 built for the others) and
    ``model_data_url`` (else the model notebook 01 packaged). ``settings`` go straight to the ``endpoints``
    plan builder (``instance_type``, ``instance_pools``, ``threads``, ``ctx_size``, ``n_gpu_layers``,
    ``provision_timeout_s``, ``startup_timeout_s``, ``download_timeout_s``, ...); those left out or None
    take the builder's defaults."""
    if path not in _BUILDERS:
        raise StepError(f"deploy path {path!r} is not one of {', '.join(_BUILDERS)}")
    config = workshop.config
    config.require("sagemaker_role_arn")
    if path == "standard":
        image_uri = image_uri or resolve_dlc(workshop, "cpu")
    else:
        image_uri = image_uri or decision_image(workshop, "gpu" if path == "decision-gpu" else "cpu")
    return _BUILDERS[path](config.endpoint_name(path), image_uri=image_uri, role_arn=config.sagemaker_role_arn,
                           model_data_url=model_data_url or _model_data_url(workshop),
                           **{k: v for k, v in settings.items() if v is not None})


def deploy_standard(workshop: Workshop, image_uri: str | None = None, *,
                    instance_type: str = endpoints.STANDARD_CPU_INSTANCE, threads: int | None = None,
                    ctx_size: int | None = None, startup_timeout_s: int | None = None,
                    download_timeout_s: int | None = None, model_data_url: str | None = None, wait: bool = True,
                    progress: bool = True) -> EndpointResult:
    """The published DLC (pinned by digest) serving the packaged model: OpenAI chat on /invocations.

    Locally the adapter stands in for the DLC's llama-server: it answers the same chat schema. The
    llama.cpp settings and timeouts left at None take ``endpoints.standard_plan``'s defaults; ``wait``
    False returns once SageMaker is creating the endpoint.
    """
    made = deploy_plan(workshop, "standard", image_uri, model_data_url=model_data_url, instance_type=instance_type,
                       threads=threads, ctx_size=ctx_size, startup_timeout_s=startup_timeout_s,
                       download_timeout_s=download_timeout_s)
    return _deploy(workshop, made, progress=progress, wait=wait)


def deploy_decision_cpu(workshop: Workshop, image_uri: str | None = None, *,
                        instance_type: str = endpoints.DECISION_CPU_INSTANCE, threads: int | None = None,
                        ctx_size: int | None = None, startup_timeout_s: int | None = None,
                        download_timeout_s: int | None = None, model_data_url: str | None = None,
                        wait: bool = True, progress: bool = True) -> EndpointResult:
    """The decision image on a fixed CPU instance; llama.cpp threads = the instance's vCPUs by default
    (the other settings left at None take ``endpoints.decision_cpu_plan``'s defaults)."""
    config = workshop.config
    if not _on_path(config, "decision-cpu"):
        return EndpointResult(config.cpu_endpoint_name, None, "skipped", "", notes=[
            f"skipped the CPU endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"])
    made = deploy_plan(workshop, "decision-cpu", image_uri, model_data_url=model_data_url,
                       instance_type=instance_type, threads=threads, ctx_size=ctx_size,
                       startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s)
    return _deploy(workshop, made, progress=progress, wait=wait)


def deploy_decision_gpu(workshop: Workshop, image_uri: str | None = None, *,
                        pools: Sequence[str] = endpoints.DEFAULT_GPU_POOLS, n_gpu_layers: int | None = None,
                        provision_timeout_s: int | None = None, threads: int | None = None,
                        ctx_size: int | None = None, startup_timeout_s: int | None = None,
                        download_timeout_s: int | None = None, model_data_url: str | None = None,
                        wait: bool = True, progress: bool = True) -> EndpointResult:
    """The decision image on ordered GPU instance pools (first = first choice) with every layer offloaded
    unless ``n_gpu_layers`` says otherwise (settings left at None: ``endpoints.decision_gpu_plan``'s defaults)."""
    config = workshop.config
    if not _on_path(config, "decision-gpu"):
        return EndpointResult(config.gpu_endpoint_name, None, "skipped", "", notes=[
            f"skipped the GPU endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"])
    made = deploy_plan(workshop, "decision-gpu", image_uri, model_data_url=model_data_url,
                       instance_pools=tuple(pools), n_gpu_layers=n_gpu_layers,
                       provision_timeout_s=provision_timeout_s, threads=threads, ctx_size=ctx_size,
                       startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s)
    return _deploy(workshop, made, progress=progress, wait=wait)


@dataclass(repr=False)
class Placement(_Shown):
    name: str
    placed: dict[str, int]
    offload: endpoints.OffloadLine | None
    notes: list[str] = field(default_factory=list)

    @property
    def offloaded(self) -> str | None:
        """"N/M layers" from llama.cpp's offload line."""
        return f"{self.offload.offloaded}/{self.offload.total} layers" if self.offload else None

    def lines(self) -> list[str]:
        placed = ", ".join(f"{t} x{n}" for t, n in self.placed.items()) or "no pool placement reported"
        line = self.offload.message if self.offload else "(no offload line yet)"
        return [f"endpoint {self.name}: {placed}", f"  offload: {line}", *self.notes]


def placement(workshop: Workshop, name: str | None = None) -> Placement | Text:
    """Which instance pool SageMaker placed the endpoint on, and llama.cpp's offload log line."""
    config = workshop.config
    name = name or config.gpu_endpoint_name
    if config.mode == "aws" and name == config.gpu_endpoint_name and config.deploy_path != "decision-gpu":
        return Text(f"skipped: no GPU endpoint on the {config.deploy_path!r} path (notebook 00)")
    c = workshop.clients
    placed = endpoints.placed_instance_types(c.sm.describe_endpoint(EndpointName=name))
    lines, where = c.hosting.offload_lines(c.logs, name)
    return Placement(name, placed, lines[-1] if lines else None, [f"  offload read from {where}"])
