"""Notebooks 02 and 04: endpoints for the standard DLC and for the decision image on CPU and on an
ordered GPU instance pool, and where each one was placed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .. import aws, endpoints, images, rehearsal
from ..config import WorkshopConfig
from .context import EMULATOR_INSTANCE_TYPES, Text, _EMULATOR_FAMILIES, _Shown, _on_path, _recall, _short, clients
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
    def ok(self) -> bool:  # serving (locally: a stand-in for the pools), or skipped on purpose
        if self.plan is None:
            return self.status == "skipped"
        return self.status in ("InService", "stand-in") and (self.where == "SageMaker" or bool(self.url))

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


def _for_emulator(plan: endpoints.DeployPlan) -> tuple[endpoints.DeployPlan, list[str]]:
    """The plan with instance types the emulator's (older) list knows."""
    variant = dict(plan.endpoint_config["ProductionVariants"][0])
    wanted = variant.get("InstanceType")
    if not wanted or wanted.split(".")[1] in _EMULATOR_FAMILIES:
        return plan, []
    sent = EMULATOR_INSTANCE_TYPES.get(wanted, "ml.g4dn.2xlarge" if endpoints.is_gpu_instance(wanted)
                                       else "ml.c5.2xlarge")
    variant["InstanceType"] = sent
    config = {**plan.endpoint_config, "ProductionVariants": [variant]}
    return (endpoints.DeployPlan(plan.model, aws.validate("sagemaker", "CreateEndpointConfig", config), plan.endpoint),
            [f"  the emulator's instance-type list predates {wanted}, so it was sent {sent} (validated for {wanted})"])


def _deploy(config: WorkshopConfig, plan: endpoints.DeployPlan, *, progress: bool) -> EndpointResult:
    started = time.perf_counter()
    c = clients(config)
    if config.mode == "aws":
        described = endpoints.deploy(c.sm, plan, logs_client=c.logs, s3_client=c.s3, progress=progress)
        return EndpointResult(plan.name, plan, described["EndpointStatus"], "SageMaker",
                              time.perf_counter() - started)
    sent, notes = _for_emulator(plan)
    described = endpoints.deploy(c.sm, sent, s3_client=c.s3, progress=False, poll_s=0.2, timeout_s=60)
    local = rehearsal.start_local_endpoint(plan.name, c.sm, c.s3, calls=c.calls)
    notes.append(f"  local endpoint: {local.url} ({local.changes_text()})")
    return EndpointResult(plan.name, plan, described["EndpointStatus"], "emulator + local adapter",
                          time.perf_counter() - started, local.url, notes)


def _model_data_url(config: WorkshopConfig) -> str:
    return _recall("model_data_url", "01_package_model")


def deploy_standard(config: WorkshopConfig, image_uri: str | None = None, *,
                    instance_type: str = endpoints.STANDARD_CPU_INSTANCE, progress: bool = True) -> EndpointResult:
    """The published DLC (pinned by digest) serving the packaged model: OpenAI chat on /invocations.

    Locally the adapter stands in for the DLC's llama-server: it answers the same chat schema.
    """
    image_uri = image_uri or resolve_dlc(config, "cpu")
    plan = endpoints.standard_plan(config.standard_endpoint_name, image_uri=image_uri,
                                   role_arn=config.sagemaker_role_arn, model_data_url=_model_data_url(config),
                                   instance_type=instance_type)
    result = _deploy(config, plan, progress=progress)
    if config.mode == "local":
        result.notes.append("Not exercised locally: the DLC's llama-server; the decision adapter stands in for it "
                            "and answers the same OpenAI chat schema on /invocations.")
    return result


def deploy_decision_cpu(config: WorkshopConfig, image_uri: str | None = None, *,
                        instance_type: str = endpoints.DECISION_CPU_INSTANCE, threads: int | None = None,
                        progress: bool = True) -> EndpointResult:
    """The decision image on a fixed CPU instance; llama.cpp threads = the instance's vCPUs by default."""
    if not _on_path(config, "decision-cpu"):
        return EndpointResult(config.cpu_endpoint_name, None, "skipped", "", notes=[
            f"skipped the CPU endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"])
    plan = endpoints.decision_cpu_plan(config.cpu_endpoint_name, image_uri=image_uri or decision_image(config, "cpu"),
                                       role_arn=config.sagemaker_role_arn, model_data_url=_model_data_url(config),
                                       instance_type=instance_type, threads=threads)
    return _deploy(config, plan, progress=progress)


def deploy_decision_gpu(config: WorkshopConfig, image_uri: str | None = None, *,
                        pools: Sequence[str] = endpoints.DEFAULT_GPU_POOLS, progress: bool = True) -> EndpointResult:
    """The decision image on ordered GPU instance pools with every layer offloaded."""
    if not _on_path(config, "decision-gpu"):
        return EndpointResult(config.gpu_endpoint_name, None, "skipped", "", notes=[
            f"skipped the GPU endpoint: the deploy path is {config.deploy_path!r} (notebook 00)"])
    plan = endpoints.decision_gpu_plan(config.gpu_endpoint_name, image_uri=image_uri or decision_image(config, "gpu"),
                                       role_arn=config.sagemaker_role_arn, model_data_url=_model_data_url(config),
                                       instance_pools=pools)
    if config.mode == "aws":
        return _deploy(config, plan, progress=progress)
    started = time.perf_counter()
    c = clients(config)
    images.check_deployable(plan.image_uri, config.region)
    endpoints.create_model(c.sm, plan.model)
    kept = rehearsal.local_dir() / f"{plan.name}.requests.json"
    kept.write_text(plan.to_json() + "\n")
    try:
        endpoints.create_endpoint_config(c.sm, plan.endpoint_config)
        endpoints.create_endpoint(c.sm, plan.endpoint)
        status = "InService"  # an emulator that learnt instance pools
        local = rehearsal.start_local_endpoint(plan.name, c.sm, c.s3, calls=c.calls)
        emulator_note = "the emulator accepted the InstancePools request"
    except endpoints.DeployError as exc:
        status = "stand-in"
        local = rehearsal.start_local_endpoint(plan.name, c.sm, c.s3, model_name=plan.model["ModelName"],
                                               calls=c.calls)
        code = re.search(r"failed: (\w+):", str(exc))
        emulator_note = f"the emulator rejected InstancePools ({code[1] if code else 'an error'}: it predates them)"
    return EndpointResult(plan.name, plan, status, "local CPU stand-in", time.perf_counter() - started, local.url, [
        f"  CreateEndpointConfig with InstancePools built and validated by botocore; {emulator_note}; "
        f"the validated requests are kept in {kept}",
        f"  local endpoint: {local.url} ({local.changes_text()})",
        "Not exercised locally: GPU placement from the ordered pools and full GPU offload; a CPU adapter "
        "serving the same model and settings stands in."])


@dataclass(repr=False)
class Placement(_Shown):
    name: str
    placed: dict[str, int]
    offload_line: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def offloaded(self) -> str | None:
        """"N/M layers" from the offload line."""
        found = _OFFLOAD.search(self.offload_line or "")
        return found[1] if found else None

    def lines(self) -> list[str]:
        placed = ", ".join(f"{t} x{n}" for t, n in self.placed.items()) or "no pool placement reported"
        return [f"endpoint {self.name}: {placed}", f"  offload: {self.offload_line or '(no offload line yet)'}",
                *self.notes]


_OFFLOAD = re.compile(r"offloaded (\d+/\d+ layers) to GPU")


def placement(config: WorkshopConfig, name: str | None = None) -> Placement | Text:
    """Which instance pool SageMaker placed the endpoint on, and llama.cpp's offload log line."""
    name = name or config.gpu_endpoint_name
    if config.mode == "aws" and name == config.gpu_endpoint_name and config.deploy_path != "decision-gpu":
        return Text(f"skipped: no GPU endpoint on the {config.deploy_path!r} path (notebook 00)")
    if config.mode == "aws":
        c = clients(config)
        placed = endpoints.placed_instance_types(c.sm.describe_endpoint(EndpointName=name))
        lines = endpoints.offload_log_lines(c.logs, name)
        return Placement(name, placed, lines[-1].message if lines else None)
    log = rehearsal.endpoint_log(name)
    found = [line.strip() for line in log.read_text(errors="replace").splitlines() if _OFFLOAD.search(line)]
    return Placement(name, {}, found[-1] if found else None, [
        f"  read from the local adapter's log {log}; locally nothing is placed from the pools (no GPU here, "
        "so 0 layers are offloaded)"])
