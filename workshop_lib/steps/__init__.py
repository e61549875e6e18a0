"""The workshop's steps, as the notebooks call them (``steps.setup(config)``, ...), in ``aws`` or
``local`` mode.

Each step is a few lines around the library (config, packaging, builds, images, endpoints, client,
cleanup) and returns a small result whose text is what the notebook shows and which knows whether
it succeeded. The mode comes from the config (``WorkshopConfig.mode``):

* ``aws``: boto3 clients for the configured region; real CodeBuild, ECR and SageMaker.
* ``local``: the same flows against the local AWS emulator (``rehearsal``). What the emulator
  cannot do is a parameter of the flows (``builds.CodeBuildRunner``, ``hosting.SageMakerHosting``)
  and local mode passes ``stand_ins``: a build's effect done on this machine (the embedded model
  packaged, a stand-in image pushed), each endpoint served by a real adapter process. Every other
  request reaches the emulator, and each result says in one sentence what was not exercised.

One module per notebook, plus what they share:

=================== ==========================================================================
``context``         clients for the mode, outputs recorded for later notebooks, result types
``setup``           00: configuration, checks, bucket, CodeBuild role, local rehearsal
``package``         01: the model packaged with its manifest and verified
``decision_image``  02/03: the pinned DLC, the decision image built and pushed by digest
``deploy``          02/04: standard, decision CPU and decision GPU endpoints, placement
``invoke``          05: endpoint clients, decisions shown as charts
``operate``         07: alarms and the dashboard, a safe (blue/green) update, the endpoint's status
``scale``           07: auto scaling from 06's rate, one Batch Transform job; 08 removes both
``cleanup``         08: deletion by name, the permissions audit, what is still running
``outcome``         every notebook's closing check; expected mistakes in one line
``rehearse``        every step in order, headless (``make demo``)
=================== ==========================================================================

Every step takes the ``Workshop`` first (``workshop = steps.Workshop.load()``): the config, the
clients for its mode and, in ``outputs.json`` next to the config file, the values a later notebook
needs (the model's S3 URL, the pinned image digests). Nothing is kept at module level.

A step that sends AWS requests returns them beside its summary (``result.requests``: service, operation
and botocore's validated parameters, secrets masked); a notebook shows them folded under the result.
"""

from __future__ import annotations

from ..aws.deploy_spec import DeploySpec
from .cleanup import (audit_permissions, delete_artifacts, delete_build_resources, delete_codebuild_role,
                      delete_deadline_role, delete_endpoint, delete_endpoints, running_endpoints, stop_local,
                      tagged_endpoints)
from .context import (BOTO3_FLOOR, CALL_LOG, CREATES, Clients, READ_ONLY, StepError, StepNotRun, Text, Workshop,
                      keep_choice, model_spec, short_errors, shows_requests)
from .decision_image import ImageResult, build_decision_image, decision_image, refuse_mutable_tag, resolve_dlc
from .deploy import (EndpointResult, Placement, check_dlc_pins, deadline_text, deploy_decision_cpu,
                     deploy_decision_gpu, deploy_endpoint, deploy_plan, deploy_standard, extend_deadline,
                     llama_settings, placement, set_capture_percent, set_endpoint_ttl)
from .invoke import (builder_default, builder_request, client, decision_client, decision_endpoint, openai_base_url,
                     parse_options, show_decision, show_decisions, show_outcome, standard_client, which_endpoint)
from .operate import (UpdateResult, alarm_states, audit_trail, calibrated_package, delete_alarms, endpoint_status,
                      put_alarms, update_endpoint, update_package)
from .outcome import check_outcome
from .package import PackageResult, package_model, verify_package
from .rehearse import rehearse_all
from .scale import (TransformResult, autoscale, delete_transform_output, record_rate, record_throughput,
                    remove_autoscaling, run_transform, scaling_target)
from .setup import Checks, SetupResult, check_environment, check_quotas, ensure_codebuild_role, setup, show_config

__all__ = [
    "CREATES", "READ_ONLY", "Checks", "Clients", "EndpointResult", "ImageResult", "PackageResult", "Placement",
    "SetupResult", "StepError", "StepNotRun", "Workshop", "builder_default", "builder_request", "decision_client",
    "keep_choice", "which_endpoint", "build_decision_image", "check_environment", "check_quotas", "client",
    "audit_permissions", "decision_endpoint", "openai_base_url", "decision_image", "delete_artifacts",
    "delete_build_resources",
    "delete_codebuild_role", "ensure_codebuild_role",
    "delete_endpoint", "delete_endpoints", "tagged_endpoints", "check_dlc_pins", "deadline_text", "delete_deadline_role",
    "extend_deadline", "set_capture_percent", "set_endpoint_ttl",
    "DeploySpec", "deploy_decision_cpu", "deploy_decision_gpu", "deploy_endpoint", "deploy_plan", "deploy_standard", "llama_settings", "model_spec",
    "package_model", "parse_options", "placement", "refuse_mutable_tag", "rehearse_all", "resolve_dlc",
    "running_endpoints", "setup", "show_config", "show_decision", "show_decisions", "show_outcome", "standard_client",
    "stop_local",
    "Text", "check_outcome", "short_errors",
    "UpdateResult", "alarm_states", "audit_trail", "calibrated_package", "delete_alarms", "endpoint_status",
    "put_alarms", "update_endpoint",
    "update_package",
    "verify_package",
    "TransformResult", "autoscale", "delete_transform_output", "record_rate", "record_throughput", "remove_autoscaling",
    "run_transform",
    "scaling_target", "shows_requests",
]
