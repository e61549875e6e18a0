"""The deploy paths: what a participant deploys, one frozen row each.

The config (its endpoint-name settings and the check of ``deploy_path``), the command line (``--deploy-path``
and the deploy commands), ``DeploySpec`` (which settings a path takes, which builder makes its requests,
which instance types it runs on), the steps (image, endpoint, skip rules) and the quota check all read
these rows, so a new deploy path is a new row here (and its endpoint-name setting in ``WorkshopConfig``).

This module sits below the config and ``aws/``: a row names its plan builder in ``aws.endpoints`` by
name, and ``aws.deploy_spec`` looks it up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidInput

STANDARD_NOTEBOOK = "02_deploy_standard_endpoint"
DECISION_NOTEBOOK = "04_deploy_decision_endpoints"


@dataclass(frozen=True)
class DeployPath:
    name: str  # as the config, the command line and DeploySpec spell it
    label: str  # "the <label> endpoint" in messages
    how: str  # what it runs on, said after its label
    endpoint_field: str  # the WorkshopConfig setting that names its endpoint
    default_endpoint: str  # that setting's default: the workshop's own names, never the published sample's
    endpoint_env: str  # the environment variable that sets it
    notebook: str  # the notebook that deploys it
    deploy_step: str  # the step (``steps.<name>``) that deploys it
    plan_builder: str  # the ``aws.endpoints`` function that builds its requests
    decision: bool  # serves the decision image (data capture, the adapter's metrics), else the DLC
    dlc_variant: str  # the llama.cpp DLC it runs, or builds its image FROM: cpu or cuda
    image_variant: str | None = None  # the decision image it runs: cpu or gpu (None: the DLC itself)
    dockerfile: str | None = None  # what that image is built from, in container/
    gpu: bool = False  # ordered GPU instance pools (instance_pools), not one instance_type
    gpu_layers: bool = False  # takes n_gpu_layers (offload to a GPU type)

    @property
    def described(self) -> str:
        """``the CPU decision endpoint (one CPU instance type)``."""
        return f"the {self.label} endpoint ({self.how})"


STANDARD = DeployPath(
    "standard",
    "standard",
    "the DLC, chat schema",
    "standard_endpoint_name",
    "decision-workshop-standard",
    "WORKSHOP_STANDARD_ENDPOINT",
    STANDARD_NOTEBOOK,
    "deploy_standard",
    "standard_plan",
    decision=False,
    dlc_variant="cpu",
    gpu_layers=True,
)
DECISION_CPU = DeployPath(
    "decision-cpu",
    "CPU decision",
    "one CPU instance type",
    "cpu_endpoint_name",
    "decision-workshop-cpu",
    "WORKSHOP_CPU_ENDPOINT",
    DECISION_NOTEBOOK,
    "deploy_decision_cpu",
    "decision_cpu_plan",
    decision=True,
    dlc_variant="cpu",
    image_variant="cpu",
    dockerfile="Dockerfile",
)
DECISION_GPU = DeployPath(
    "decision-gpu",
    "GPU decision",
    "ordered GPU instance pools",
    "gpu_endpoint_name",
    "decision-workshop-gpu",
    "WORKSHOP_GPU_ENDPOINT",
    DECISION_NOTEBOOK,
    "deploy_decision_gpu",
    "decision_gpu_plan",
    decision=True,
    dlc_variant="cuda",
    image_variant="gpu",
    dockerfile="Dockerfile.gpu",
    gpu=True,
    gpu_layers=True,
)

DEPLOY_PATHS: tuple[DeployPath, ...] = (STANDARD, DECISION_CPU, DECISION_GPU)
NAMES: tuple[str, ...] = tuple(p.name for p in DEPLOY_PATHS)
# The decision endpoint a path without one (the standard path, rehearsed locally) calls.
DEFAULT_DECISION = DECISION_CPU


def deploy_path(name: str) -> DeployPath:
    """The row called ``name``; InvalidInput listing the names otherwise."""
    for path in DEPLOY_PATHS:
        if path.name == name:
            return path
    raise InvalidInput(f"deploy path {name!r} is not one of {', '.join(NAMES)}")


def decision_paths() -> tuple[DeployPath, ...]:
    return tuple(p for p in DEPLOY_PATHS if p.decision)


def for_image(variant: str) -> DeployPath:
    """The decision path whose image is ``variant`` (cpu or gpu)."""
    for path in decision_paths():
        if path.image_variant == variant:
            return path
    raise InvalidInput(
        f"image variant {variant!r} is not one of {', '.join(str(p.image_variant) for p in decision_paths())}"
    )
