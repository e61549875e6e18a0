"""One deploy, specified once: what a notebook's deploy step or the CLI's deploy flags asked for.

``DeploySpec`` is frozen and built once, from the step's arguments (``steps.deploy_standard`` and the
two decision steps) or from ``workshop deploy`` / ``deploy-standard``'s flags, then passed down
unchanged. A setting left at None takes the ``endpoints`` plan builder's default, which is where
every default lives. ``plan_for`` turns a spec and the workshop's names into the three requests;
it is pure: it sends, prints and writes nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Sequence

from . import endpoints
from ..config import DEPLOY_PATHS
from ..errors import InvalidInput
from .images import ImageRef

# Settings only an ordered-pool GPU deploy takes; n_gpu_layers is also the standard DLC's (on a GPU type).
GPU_ONLY = ("instance_pools", "provision_timeout_s")
_BUILDERS = {"standard": endpoints.standard_plan, "decision-cpu": endpoints.decision_cpu_plan,
             "decision-gpu": endpoints.decision_gpu_plan}


@dataclass(frozen=True)
class DeploySpec:
    """What to deploy on which path; None everywhere means "the builder's default"."""

    path: str
    image_uri: str | None = None       # default: the pinned DLC (standard) or the image notebook 03 built
    model_data_url: str | None = None  # default: the model notebook 01 packaged
    instance_type: str | None = None   # standard and decision-cpu: one fixed type
    instance_pools: tuple[str, ...] | None = None  # decision-gpu: ordered, first = first choice
    threads: int | None = None
    ctx_size: int | None = None
    n_gpu_layers: int | None = None
    provision_timeout_s: int | None = None
    startup_timeout_s: int | None = None
    download_timeout_s: int | None = None

    def __post_init__(self):
        if self.path not in DEPLOY_PATHS:
            raise InvalidInput(f"deploy path {self.path!r} is not one of {', '.join(DEPLOY_PATHS)}")
        if self.instance_pools is not None:
            pools = (self.instance_pools,) if isinstance(self.instance_pools, str) else tuple(self.instance_pools)
            object.__setattr__(self, "instance_pools", pools)
        if self.path == "decision-gpu":
            if self.instance_type is not None:
                raise InvalidInput(f"the decision-gpu path takes instance_pools, in order of preference; pass "
                                      f"instance_pools=({self.instance_type!r},) for one type")
            return
        wrong = [name for name in GPU_ONLY + (("n_gpu_layers",) if self.path == "decision-cpu" else ())
                 if getattr(self, name) is not None]
        if wrong:
            raise InvalidInput(f"{', '.join(wrong)} {'is a setting' if len(wrong) == 1 else 'are settings'} of "
                                  f"the GPU path; the {self.path} path takes none (choose decision-gpu for GPUs)")

    @classmethod
    def of(cls, path: str, *, pools: Sequence[str] | None = None, **settings) -> DeploySpec:
        """A spec from keyword settings (``pools`` is the steps' name for ``instance_pools``)."""
        if pools is not None:
            settings["instance_pools"] = pools
        return cls(path, **settings)

    def with_sources(self, *, image_uri: str, model_data_url: str) -> DeploySpec:
        """The same spec with its image and model named (by the step that resolved them)."""
        return replace(self, image_uri=image_uri, model_data_url=model_data_url)

    def settings(self) -> dict:
        """The builder's keyword arguments this spec sets (image and model are passed on their own)."""
        given = asdict(self)
        for own in ("path", "image_uri", "model_data_url"):
            given.pop(own)
        return {k: v for k, v in given.items() if v is not None}


# The adapter's name for the endpoint it serves, the dimension of its metric lines (SageMaker sets none).
ENDPOINT_NAME_ENV = "DECISION_ADAPTER_ENDPOINT_NAME"


def plan_for(spec: DeploySpec, *, name: str, role_arn: str, region: str, image: ImageRef,
             model_data_url: str, data_capture: dict | None = None) -> endpoints.DeployPlan:
    """The validated requests for ``spec`` under the workshop's ``name`` and ``role_arn``; nothing sent.

    A decision endpoint also gets ``data_capture`` (a DataCaptureConfig, ``capture.data_capture_config``)
    and its own name in the adapter's environment; the standard endpoint (the DLC) gets neither.
    """
    settings = spec.settings()
    if spec.path != "standard":
        settings["environment"] = {ENDPOINT_NAME_ENV: name}
        settings["data_capture"] = data_capture
    if spec.path == "decision-gpu":
        settings["region"] = region  # pools where offered, else the first type, fixed
    return _BUILDERS[spec.path](name, image=image, role_arn=role_arn, model_data_url=model_data_url,
                                **settings)


__all__ = ["DeploySpec", "ENDPOINT_NAME_ENV", "GPU_ONLY", "plan_for"]
