"""One deploy, specified once: what a notebook's deploy step or the CLI's deploy flags asked for.

``DeploySpec`` is frozen and built once, from the step's arguments (``steps.deploy_standard`` and the
two decision steps) or from ``workshop deploy`` / ``deploy-standard``'s flags, then passed down
unchanged. A setting left at None takes the ``endpoints`` plan builder's default, which is where
every default lives. ``plan_for`` turns a spec and the workshop's names into the three requests;
it is pure: it sends, prints and writes nothing. What a path takes, and which builder makes its
requests, is its row in ``deploy_paths``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..deploy_paths import DEPLOY_PATHS, DeployPath, deploy_path
from ..errors import InvalidInput
from . import endpoints
from .images import ImageRef

# Settings only an ordered-pool GPU deploy takes; n_gpu_layers is also taken where a row says gpu_layers.
GPU_ONLY = ("instance_pools", "provision_timeout_s")


def plan_builder(path: DeployPath) -> Callable[..., endpoints.DeployPlan]:
    """The ``endpoints`` function that builds ``path``'s requests (its row names it)."""
    builder: Callable[..., endpoints.DeployPlan] = getattr(endpoints, path.plan_builder)
    return builder


@dataclass(frozen=True)
class DeploySpec:
    """What to deploy on which path; None everywhere means "the builder's default"."""

    path: str  # a deploy path's name (deploy_paths)
    image_uri: str | None = None  # default: the pinned DLC (standard) or the image notebook 03 built
    model_data_url: str | None = None  # default: the model notebook 01 packaged
    instance_type: str | None = None  # a path without pools: one fixed type
    instance_pools: tuple[str, ...] | None = None  # the GPU path: ordered, first = first choice
    threads: int | None = None
    ctx_size: int | None = None
    n_gpu_layers: int | None = None
    provision_timeout_s: int | None = None
    startup_timeout_s: int | None = None
    download_timeout_s: int | None = None

    def __post_init__(self) -> None:
        row = self.row
        if self.instance_pools is not None:
            pools = (self.instance_pools,) if isinstance(self.instance_pools, str) else tuple(self.instance_pools)
            object.__setattr__(self, "instance_pools", pools)
        if row.gpu:
            if self.instance_type is not None:
                raise InvalidInput(
                    f"the {row.name} path takes instance_pools, in order of preference; pass "
                    f"instance_pools=({self.instance_type!r},) for one type"
                )
            return
        wrong = [
            name for name in GPU_ONLY + (() if row.gpu_layers else ("n_gpu_layers",)) if getattr(self, name) is not None
        ]
        if wrong:
            gpu = next(p.name for p in DEPLOY_PATHS if p.gpu)
            raise InvalidInput(
                f"{', '.join(wrong)} {'is a setting' if len(wrong) == 1 else 'are settings'} of "
                f"the GPU path; the {row.name} path takes none (choose {gpu} for GPUs)"
            )

    @property
    def row(self) -> DeployPath:
        """The deploy path's row (InvalidInput for a name that is none)."""
        return deploy_path(self.path)

    @classmethod
    def of(cls, path: str, *, pools: Sequence[str] | None = None, **settings: Any) -> DeploySpec:
        """A spec from keyword settings (``pools`` is the steps' name for ``instance_pools``)."""
        if pools is not None:
            settings["instance_pools"] = pools
        return cls(path, **settings)

    def with_sources(self, *, image_uri: str, model_data_url: str) -> DeploySpec:
        """The same spec with its image and model named (by the step that resolved them)."""
        return replace(self, image_uri=image_uri, model_data_url=model_data_url)

    def settings(self) -> dict[str, Any]:
        """The builder's keyword arguments this spec sets (image and model are passed on their own)."""
        given = asdict(self)
        for own in ("path", "image_uri", "model_data_url"):
            given.pop(own)
        return {k: v for k, v in given.items() if v is not None}

    def instance_types(self, region: str | None) -> list[str]:
        """The instance types this deploy runs on in ``region``: the ones it names, else its builder's default;
        for pools, the ordered pools where ``region`` offers them, else the one fixed type the plan falls back
        to (``endpoints.gpu_instance_types``)."""
        defaults = inspect.signature(plan_builder(self.row)).parameters
        if self.row.gpu:
            return endpoints.gpu_instance_types(region, self.instance_pools or defaults["instance_pools"].default)
        return [self.instance_type or defaults["instance_type"].default]


# The adapter's name for the endpoint it serves, the dimension of its metric lines (SageMaker sets none).
ENDPOINT_NAME_ENV = "DECISION_ADAPTER_ENDPOINT_NAME"


def plan_for(
    spec: DeploySpec,
    *,
    name: str,
    role_arn: str,
    region: str,
    image: ImageRef,
    model_data_url: str,
    data_capture: dict[str, Any] | None = None,
) -> endpoints.DeployPlan:
    """The validated requests for ``spec`` under the workshop's ``name`` and ``role_arn``; nothing sent.

    A decision endpoint also gets ``data_capture`` (a DataCaptureConfig, ``capture.data_capture_config``)
    and its own name in the adapter's environment; the standard endpoint (the DLC) gets neither.
    """
    settings = spec.settings()
    if spec.row.decision:
        settings["environment"] = {ENDPOINT_NAME_ENV: name}
        settings["data_capture"] = data_capture
    if spec.row.gpu:
        settings["region"] = region  # pools where offered, else the first type, fixed
    return plan_builder(spec.row)(name, image=image, role_arn=role_arn, model_data_url=model_data_url, **settings)


__all__ = ["ENDPOINT_NAME_ENV", "GPU_ONLY", "DeploySpec", "plan_builder", "plan_for"]
