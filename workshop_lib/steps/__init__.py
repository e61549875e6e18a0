"""The workshop's steps, as the notebooks call them (``steps.setup(config)``, ...), in ``aws`` or
``local``            mode.

Each step is a few lines around the library (config, packaging, builds, images, endpoints, client,
cleanup) and returns a small result whose text is what the notebook shows and which knows whether
it succeeded. The mode comes from the config (``WorkshopConfig.mode``):

* ``aws``: boto3 clients for the configured region; real CodeBuild, ECR and SageMaker.
* ``local``: the same flows against the local AWS emulator (``rehearsal``). What the emulator
  cannot do is a parameter of the flows (``builds.CodeBuildRunner``, ``hosting.SageMakerHosting``)
  and local mode passes ``stand_ins``: a build's effect done on this machine (the embedded model
  packaged, a stand-in image pushed), each endpoint served by a real adapter process. Every other
  request reaches the emulator, and each result says in one sentence what was not exercised.

One module per notebook, each importing only what the steps share (never another step), with
``rehearse`` the one module above them:

==================== ==========================================================================
``setup``            00: configuration, checks, bucket, CodeBuild role, local rehearsal
``package``          01: the model packaged with its manifest and verified; 07: with a calibration
``decision_image``   03: the decision image built and pushed by digest, a tag refused
``deploy``           02/04: the endpoint of each deploy path, its placement and deadline
``invoke``           05: the decision client, decisions shown as charts
``operate``          07: alarms and the dashboard, a safe (blue/green) update, the endpoint's status
``scale``            07: auto scaling from 06's rate, one Batch Transform job; 08 removes both
``scale_to_zero``    an endpoint that scales to zero (inference components), shown going to zero and back
``cleanup``          08: deletion by name, the permissions audit, what is still running
``outcome``          every notebook's closing check; expected mistakes in one line
``rehearse``         every step in order, headless (``make demo``)
==================== ==========================================================================

What they share, below them:

==================== ==========================================================================
``recorded``         what one notebook records for a later one: packages, the pinned DLC, images
``endpoint_clients`` a client for each endpoint, and whether llama-server answered
``quotas``           00's quota check, from the deploy path's instance types
``policy_files``     00's least-privilege documents and the administrator's lines
``context``          the ``Workshop``: clients for the mode, outputs, result types, the decision endpoint
==================== ==========================================================================

Every step takes the ``Workshop`` first (``workshop = steps.Workshop.load()``): the config, the
clients for its mode and, in ``outputs.json`` next to the config file, the values a later notebook
needs (the model's S3 URL, the pinned image digests). Nothing is kept at module level.

A step that sends AWS requests returns them beside its summary (``result.requests``: service, operation
and botocore's validated parameters, secrets masked); a notebook shows them folded under the result.
"""

from __future__ import annotations

from ..aws.deploy_spec import DeploySpec
from ..aws.session import Clients
from ..errors import StepError, StepNotRun
from ..local.modes import CALL_LOG
from .cleanup import (
    audit_permissions,
    delete_artifacts,
    delete_build_resources,
    delete_codebuild_role,
    delete_deadline_role,
    delete_endpoint,
    delete_endpoints,
    running_endpoints,
    stop_local,
    tagged_endpoints,
)
from .context import (
    BOTO3_FLOOR,
    CREATES,
    READ_ONLY,
    Checks,
    Text,
    Workshop,
    decision_endpoint,
    keep_choice,
    model_spec,
    short_errors,
    shows_requests,
)
from .decision_image import ImageResult, build_decision_image, refuse_mutable_tag
from .deploy import (
    EndpointResult,
    Placement,
    check_dlc_pins,
    deadline_text,
    deploy_decision_cpu,
    deploy_decision_gpu,
    deploy_endpoint,
    deploy_plan,
    deploy_standard,
    extend_deadline,
    llama_settings,
    placement,
    set_capture_percent,
    set_endpoint_ttl,
)
from .endpoint_clients import client, route_client
from .invoke import (
    builder_default,
    builder_request,
    decision_client,
    openai_base_url,
    parse_options,
    show_decision,
    show_decisions,
    show_outcome,
    standard_client,
    which_endpoint,
)
from .operate import (
    UpdateResult,
    alarm_states,
    audit_trail,
    delete_alarms,
    endpoint_status,
    put_alarms,
    update_endpoint,
)
from .outcome import check_outcome
from .package import PackageResult, calibrated_package, package_model, verify_package
from .quotas import check_quotas
from .recorded import decision_image, resolve_dlc, update_package
from .rehearse import rehearse_all
from .scale import (
    TransformResult,
    autoscale,
    delete_transform_output,
    record_rate,
    record_throughput,
    remove_autoscaling,
    run_transform,
    scaling_target,
)
from .scale_to_zero import (
    ZeroResult,
    deploy_scale_to_zero,
    remove_scale_to_zero,
    show_scale_to_zero,
    zero_plan,
    zero_requests,
)
from .scale_to_zero import refusal as scale_to_zero_refusal
from .setup import SetupResult, check_environment, ensure_codebuild_role, setup, show_config

__all__ = [
    "BOTO3_FLOOR",
    "CALL_LOG",
    "CREATES",
    "READ_ONLY",
    "Checks",
    "Clients",
    "DeploySpec",
    "EndpointResult",
    "ImageResult",
    "PackageResult",
    "Placement",
    "SetupResult",
    "StepError",
    "StepNotRun",
    "Text",
    "TransformResult",
    "UpdateResult",
    "Workshop",
    "ZeroResult",
    "alarm_states",
    "audit_permissions",
    "audit_trail",
    "autoscale",
    "build_decision_image",
    "builder_default",
    "builder_request",
    "calibrated_package",
    "check_dlc_pins",
    "check_environment",
    "check_outcome",
    "check_quotas",
    "client",
    "deadline_text",
    "decision_client",
    "decision_endpoint",
    "decision_image",
    "delete_alarms",
    "delete_artifacts",
    "delete_build_resources",
    "delete_codebuild_role",
    "delete_deadline_role",
    "delete_endpoint",
    "delete_endpoints",
    "delete_transform_output",
    "deploy_decision_cpu",
    "deploy_decision_gpu",
    "deploy_endpoint",
    "deploy_plan",
    "deploy_scale_to_zero",
    "deploy_standard",
    "endpoint_status",
    "ensure_codebuild_role",
    "extend_deadline",
    "keep_choice",
    "llama_settings",
    "model_spec",
    "openai_base_url",
    "package_model",
    "parse_options",
    "placement",
    "put_alarms",
    "record_rate",
    "record_throughput",
    "refuse_mutable_tag",
    "rehearse_all",
    "remove_autoscaling",
    "remove_scale_to_zero",
    "resolve_dlc",
    "route_client",
    "run_transform",
    "running_endpoints",
    "scale_to_zero_refusal",
    "scaling_target",
    "set_capture_percent",
    "set_endpoint_ttl",
    "setup",
    "short_errors",
    "show_config",
    "show_decision",
    "show_decisions",
    "show_outcome",
    "show_scale_to_zero",
    "shows_requests",
    "standard_client",
    "stop_local",
    "tagged_endpoints",
    "update_endpoint",
    "update_package",
    "verify_package",
    "which_endpoint",
    "zero_plan",
    "zero_requests",
]
