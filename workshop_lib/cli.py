"""``python -m workshop_lib <command>``: the notebooks' steps from a shell.

One command per step (``setup``, ``package-model``, ``build-image``, ``deploy``, ``extend``, ``invoke``,
``cleanup``, ``delete-builds``, ...). Each builds one ``steps.Workshop`` from the config the notebooks use
(``.workshop/config.json`` or ``--config``, under ``WORKSHOP_*`` variables), with the flags given
on top (``--region``, ``--bucket``, ``--role-arn``, ``--mode``, ...: each made from its setting's declaration in
``WorkshopConfig``, so a setting with a ``flag`` is a flag of every command that names it), calls the
step the notebooks call and prints its result. So ``--mode local`` (or ``WORKSHOP_MODE=local``)
runs the same commands against the local emulator, and a flag left out takes the saved config's
value or the library's default: no default is repeated here (every flag defaults to None, the
step's or the ``endpoints`` builder's default applies). Only ``setup`` and ``codebuild-role``
save the config, as notebook 00 does; other commands use the flags for that run only, and record
what a later command needs (the model's S3 URL, image digests) in ``outputs.json`` as the
notebooks do.

The flag names follow the published sample's ``deploy/`` scripts (``--region``, ``--bucket``,
``--image-uri``, ``--instance-pool`` repeated, ``--gpu-layers``, ``--provision-timeout``,
``--dry-run``, ...), so its users feel at home. ``demo`` and ``serve`` need no config.

Expected mistakes (every ``WorkshopError``, AWS refusals, missing credentials) print one line and
exit with status 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from botocore.exceptions import ClientError, NoCredentialsError, ProfileNotFound

from .aws import endpoints, variants
from .cli_commands import (
    EXAMPLE_BUCKET,
    cmd_alarms,
    cmd_audit,
    cmd_autoscale,
    cmd_bench,
    cmd_build_image,
    cmd_calibrate,
    cmd_captured,
    cmd_check,
    cmd_cleanup,
    cmd_codebuild_role,
    cmd_config,
    cmd_deadline,
    cmd_delete_alarms,
    cmd_delete_artifacts,
    cmd_delete_builds,
    cmd_delete_codebuild_role,
    cmd_delete_deadline_role,
    cmd_demo,
    cmd_deploy,
    cmd_deploy_standard,
    cmd_extend,
    cmd_invoke,
    cmd_invoke_standard,
    cmd_package_model,
    cmd_placement,
    cmd_resolve_image,
    cmd_running,
    cmd_serve,
    cmd_setup,
    cmd_stop_local,
    cmd_transform,
    cmd_update,
    cmd_verify_package,
)
from .config import WorkshopConfig, check_endpoint_name
from .deploy_paths import DECISION_CPU, DECISION_GPU, DEPLOY_PATHS, STANDARD, decision_paths
from .errors import InvalidInput, WorkshopError

# -- parser ---------------------------------------------------------------------
# Every flag defaults to None (False for switches): what is left out comes from the saved config,
# or from the step's or the endpoints builder's default (tests/workshop_lib/test_cli.py checks).

SETTINGS = {f.name: f for f in dataclasses.fields(WorkshopConfig)}
EVERY_COMMAND = ("mode", "region")  # the settings every workshop command takes a flag for


def _setting_flag(group, name: str) -> None:
    """The flag of setting ``name``, from its declaration: flag, choices and meaning; its value is the setting's
    for this run (``cli_commands.workshop_for``), so it defaults to None."""
    declared = SETTINGS[name].metadata
    default = SETTINGS[name].default
    metavar = None if declared["choices"] else declared["flag"].lstrip("-").replace("-", "_").upper()
    group.add_argument(
        declared["flag"],
        dest=name,
        choices=declared["choices"],
        metavar=metavar,
        help=f"{declared['doc']}; left out: the config's {name}" + (f" (default {default})" if default else ""),
    )


def _workshop_flags(parser, *settings: str) -> None:
    """The flags every workshop command takes (``--config`` and those of ``EVERY_COMMAND``), and those of the
    ``settings`` (WorkshopConfig fields) it uses."""
    group = parser.add_argument_group("workshop config (flags override the saved config for this run)")
    group.add_argument(
        "--config",
        metavar="PATH",
        help="config file (default: $WORKSHOP_CONFIG or .workshop/config.json; outputs.json sits beside it)",
    )
    for name in (*EVERY_COMMAND, *settings):
        _setting_flag(group, name)


def _endpoint_name(value: str) -> str:
    """``--name``'s type: an endpoint name SageMaker takes, in lower case (``config.check_endpoint_name``)."""
    try:
        return check_endpoint_name(value, "--name")
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _deploy_flags(parser, *, default_name: str) -> None:
    parser.add_argument(
        "--image-uri",
        help="image pinned by digest: repo@sha256:... (tags are refused); default: "
        "the pinned DLC (deploy-standard) or the image build-image recorded",
    )
    parser.add_argument(
        "--model-data-url",
        help="s3://.../model.tar.gz in the endpoint's region; default: the one package-model recorded",
    )
    parser.add_argument(
        "--name",
        type=_endpoint_name,
        help=f"endpoint, config and model name, lower case (default: the config's {default_name})",
    )
    parser.add_argument("--ctx-size", "--context-size", type=int, help="llama.cpp context size")
    parser.add_argument("--threads", type=int, help="llama.cpp threads")
    parser.add_argument("--startup-timeout", type=int, help="ContainerStartupHealthCheckTimeoutInSeconds")
    parser.add_argument("--download-timeout", type=int, help="ModelDataDownloadTimeoutInSeconds")
    parser.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")
    parser.add_argument("--no-wait", action="store_true", help="return once the endpoint is being created (AWS)")


def _name_flag(parser, *, default: str = "the deploy path's decision endpoint", what: str = "endpoint name") -> None:
    """``--name``: the one endpoint a command acts on."""
    parser.add_argument("--name", type=_endpoint_name, help=f"{what} (default: {default})")


def _target_flags(parser, *, default: str) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--endpoint-name",
        "--endpoint",
        "--name",
        dest="endpoint_name",
        metavar="NAME",
        help=f"endpoint name (default: {default})",
    )
    target.add_argument("--url", help="a local adapter's base URL, e.g. http://127.0.0.1:8080 (no config needed)")


def _task_flags(parser, *, out: str, tasks: bool = True, limit: str = "use N tasks, spread across families") -> None:
    """``--tasks`` (unless ``tasks=False``), ``--limit`` and ``--out``: the commands that read tasks and write a file."""
    if tasks:
        parser.add_argument("--tasks", metavar="PATH", help="JSONL task file (default: the packaged task set)")
    parser.add_argument("--limit", type=int, metavar="N", help=limit)
    parser.add_argument("--out", metavar="PATH", help=out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workshop_lib",
        description="Deploy llama.cpp decision models on Amazon SageMaker AI, or rehearse locally: the notebooks' "
        "steps, one command each, on the saved workshop config (flags override it).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_text, description=None, aliases=()):
        sub = commands.add_parser(name, help=help_text, description=description or help_text, aliases=list(aliases))
        sub.set_defaults(func=func)
        return sub

    p = add(
        "demo",
        cmd_demo,
        "rehearse the workshop locally with the embedded model (no AWS account)",
        "Part 1: package the embedded model, start the real adapter on a local port, send a decision, a "
        "shared-state request and a chat message, then stop the server. Part 2: run the notebooks' local "
        "path (00-08) against the AWS emulator and print one line per notebook. Everything is stopped.",
    )
    p.add_argument("--work-dir", default=".workshop/demo", help="where part 1's package and logs go")
    p.add_argument("--adapter-only", action="store_true", help="run part 1 only")

    p = add("config", cmd_config, "show the workshop config this command line would use (00)")
    _workshop_flags(p, "bucket", "prefix", "sagemaker_role_arn", "codebuild_role_arn", "ecr_repository")

    p = add(
        "check",
        cmd_check,
        "check Python, boto3, config, credentials, region and quotas (00)",
        "The checks notebook 00 shows; exit status 1 when one fails.",
    )
    _workshop_flags(p, "bucket", "sagemaker_role_arn")

    p = add(
        "setup",
        cmd_setup,
        "save the config, prepare the bucket; locally start the rehearsal (00)",
        "Resolve role and bucket (created if missing), and save the config with the flags given, where every "
        "later command (and notebook) reads it. In local mode start the AWS emulator, or keep the one running.",
    )
    _workshop_flags(
        p,
        "bucket",
        "prefix",
        "sagemaker_role_arn",
        "codebuild_role_arn",
        "ecr_repository",
        "endpoint_ttl_hours",
        "deploy_path",
    )
    p.add_argument("--reset", action="store_true", help="local mode: stop the running rehearsal and start afresh")

    p = add(
        "codebuild-role",
        cmd_codebuild_role,
        "the CodeBuild service role: the one given, or made (00)",
        "Save --codebuild-role-arn (or the configured one) in the config, or create the role from the "
        "least-privilege documents when there is none.",
    )
    _workshop_flags(p, "bucket", "prefix", "codebuild_role_arn", "ecr_repository")

    p = add(
        "package-model",
        cmd_package_model,
        "package the pinned GGUF + tokenizer in CodeBuild (01)",
        "Download the pinned model revision in CodeBuild, verify sizes and sha256 (the build fails on a "
        "mismatch), write model-manifest.json and upload model.tar.gz; record its S3 URL for deploy.",
    )
    _workshop_flags(p, "bucket", "prefix", "codebuild_role_arn")
    p.add_argument(
        "--model-s3-uri",
        help=f"where model.tar.gz goes, e.g. s3://{EXAMPLE_BUCKET}/decision-workshop/"
        "model/ (default and only place allowed: model/ under the workshop's "
        "prefix, the folder the CodeBuild role may write)",
    )
    p.add_argument(
        "--calibration",
        metavar="PATH",
        help="a calibration.json from `calibrate`, fitted for the pinned "
        "GGUF: packaged next to it and listed in the manifest",
    )

    p = add("verify-package", cmd_verify_package, "re-read the packaged model's manifest and check it (01)")
    _workshop_flags(p)
    p.add_argument("--model-data-url", help="s3://.../model.tar.gz (default: the one package-model recorded)")

    p = add(
        "resolve-image",
        cmd_resolve_image,
        "pin the llama.cpp DLC (or any ECR image) to its digest (02)",
        "Print the region's llama.cpp DLC pinned by digest (the digest tested with this library's bindings; "
        "--follow-tag for the floating tag's), or --image-uri's digest.",
    )
    _workshop_flags(p)
    p.add_argument(
        "--variant",
        choices=tuple(dict.fromkeys(path.dlc_variant for path in DEPLOY_PATHS)),
        help=f"DLC variant (default {STANDARD.dlc_variant})",
    )
    p.add_argument("--follow-tag", action="store_true", help="the floating SageMaker tag's digest, not the pin")
    p.add_argument("--image-uri", help="a tagged ECR image to pin instead of the DLC")

    p = add(
        "deploy-standard",
        cmd_deploy_standard,
        "deploy the llama.cpp DLC as a standard endpoint (02)",
        "Create model, endpoint config and endpoint for the published DLC (OpenAI chat on /invocations).",
    )
    _workshop_flags(p, "bucket", "sagemaker_role_arn")
    _deploy_flags(p, default_name=STANDARD.endpoint_field)
    p.add_argument("--instance-type", help=f"instance type (default {endpoints.STANDARD_CPU_INSTANCE})")

    p = add("invoke-standard", cmd_invoke_standard, "send one chat message to an endpoint (02)")
    _workshop_flags(p)
    _target_flags(p, default=f"the config's {STANDARD.endpoint_field}")
    p.add_argument("--message", help="the user message (default: the library's example chat)")
    p.add_argument("--max-tokens", type=int, help="answer length cap (default: the example's)")

    p = add(
        "build-image",
        cmd_build_image,
        "build the decision image FROM the DLC in CodeBuild, push to ECR (03)",
        "Build container/Dockerfile (or Dockerfile.gpu) in CodeBuild with BASE_IMAGE set to the pinned "
        "DLC digest, push it to an immutable ECR repository and record repo@sha256:... for deploy.",
    )
    _workshop_flags(p, "bucket", "prefix", "codebuild_role_arn", "ecr_repository")
    p.add_argument(
        "--variant",
        choices=tuple(path.image_variant for path in decision_paths()),
        help=" or ".join(f"{path.image_variant} ({path.dockerfile})" for path in decision_paths())
        + f"; default {DECISION_CPU.image_variant}",
    )
    p.add_argument(
        "--dockerfile",
        choices=tuple(path.dockerfile for path in decision_paths()),
        help="the sample's spelling of --variant",
    )
    p.add_argument("--base-image", help="the DLC pinned by digest (default: the pinned DLC, see resolve-image)")
    p.add_argument("--image-tag", help="tag to push (default: cpu-/gpu-<timestamp>)")

    p = add(
        "deploy",
        cmd_deploy,
        "deploy the decision image on CPU or on ordered GPU pools (04)",
        "The published sample's deploy_endpoint.py flags. CPU: --instance-type and --threads (default: the "
        "type's vCPUs). GPU: --instance-pool repeated in order of preference (first = priority 1), or one GPU "
        "--instance-type; --gpu-layers (default: all; 0 keeps the model on the CPU) and --provision-timeout for "
        "finding capacity. Decision endpoints get the adapter's context (8192 tokens) unless --ctx-size.",
    )
    _workshop_flags(p, "bucket", "sagemaker_role_arn")
    _deploy_flags(p, default_name=f"{DECISION_CPU.endpoint_field}, or {DECISION_GPU.endpoint_field} for GPU types")
    placement = p.add_mutually_exclusive_group()
    placement.add_argument("--instance-type", help=f"instance type (default {endpoints.DECISION_CPU_INSTANCE})")
    placement.add_argument(
        "--instance-pool",
        action="append",
        metavar="TYPE",
        help="GPU type, repeat in order of preference, e.g. the notebooks' "
        + " ".join("--instance-pool " + t for t in endpoints.DEFAULT_GPU_POOLS),
    )
    p.add_argument("--gpu-layers", type=int, help="layers to offload to the GPU: -1 = all (the default)")
    p.add_argument(
        "--provision-timeout",
        type=int,
        help=f"seconds to find pool capacity, 300-3600 (default {variants.PROVISION_TIMEOUT_S})",
    )

    p = add(
        "extend",
        cmd_extend,
        "move an endpoint's deadline to N hours from now (04)",
        "Every endpoint the workshop creates is deleted at its deadline (endpoint_ttl_hours after it was created, "
        "chosen in notebook 00) by an EventBridge Scheduler schedule. This moves it to --hours from now, or sets "
        "it again if it had gone; the endpoint must be the workshop's (tagged).",
    )
    _workshop_flags(p, "bucket")
    _name_flag(p, default="the config's endpoint of the deploy path")
    p.add_argument("--hours", type=float, help="hours from now, 0.25-168 (default: the config's endpoint_ttl_hours)")

    p = add("deadline", cmd_deadline, "when an endpoint's deadline deletes it (04, 05)")
    _workshop_flags(p)
    _name_flag(p)

    p = add("placement", cmd_placement, "which GPU pool an endpoint was placed on, and llama.cpp's offload line (04)")
    _workshop_flags(p)
    _name_flag(p, default=f"the config's {DECISION_GPU.endpoint_field}")

    p = add("invoke", cmd_invoke, "send a decision (or shared-state request) to a decision endpoint (05)")
    _workshop_flags(p)
    _target_flags(p, default="the deploy path's decision endpoint")
    p.add_argument(
        "--request",
        help="a JSON file with a decision or shared-state request, in this project's "
        "format or the published sample's (example-request.json, "
        "example-shared-request.json); default: the README's support-route example",
    )

    p = add(
        "bench",
        cmd_bench,
        "benchmark a decision endpoint: validity, accuracy, latency, baselines, plots (06)",
        "Send labelled tasks (JevBench JSONL or decision records; default: the packaged set) to a decision "
        "endpoint, sequentially (as the blog) or with --concurrency N clients, and report valid responses, "
        "accuracy by family and type, client p50/p95/max and throughput. Opt-in: a generation baseline "
        "through the chat schema, an option-order test, an order-debiased readout and temperature "
        "calibration. Writes report.json, report.md and PNGs to --out; --compare puts a saved report.json "
        "beside this run (e.g. CPU vs GPU).",
    )
    _workshop_flags(p)
    _target_flags(p, default="the deploy path's decision endpoint")
    _task_flags(p, out="output folder (default: bench/ beside the config file)")
    p.add_argument(
        "--concurrency", type=int, metavar="N", help="requests in flight for the decision run (default 1: sequential)"
    )
    p.add_argument(
        "--baseline",
        action="append",
        nargs="?",
        const="generation",
        choices=("generation", "logprobs"),
        help="also a baseline: generation (the default; chat, parse the reply) or logprobs (the decision "
        "prompt's first-token top_logprobs from the standard endpoint); repeat for both",
    )
    p.add_argument(
        "--standard-url",
        metavar="URL",
        help="the standard endpoint for --baseline logprobs: a URL serving /invocations, or a "
        "llama-server's .../v1/chat/completions (default: the config's standard endpoint)",
    )
    p.add_argument("--bias", action="store_true", help="also send the options reversed; report top-choice flips")
    p.add_argument(
        "--debias",
        action="store_true",
        help="also the order-debiased readout (the adapter's rotations mode, for the options as declared "
        "and reversed); implies --bias",
    )
    p.add_argument(
        "--study-limit",
        type=int,
        metavar="N",
        help="run the baseline and order studies on N of the tasks (default: all)",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="fit a temperature on the dev tasks; ECE and Brier before/after on the rest",
    )
    p.add_argument("--compare", metavar="REPORT_JSON", help="a saved report.json to show side by side")
    p.add_argument("--label", help="name of this run in tables, e.g. cpu, gpu (default: decision)")
    p.add_argument(
        "--schema",
        choices=("decision", "systemone"),
        help="send the tasks as decisions (default) or as Jev /v1/systemone questions",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = add(
        "captured",
        cmd_captured,
        "read a decision endpoint's captured decisions into tasks to label (06)",
        "Read what SageMaker's data capture recorded for the endpoint (locally: what the stand-in hosting wrote "
        "into the emulator's S3, in the same layout), and write its decisions as JevBench task records with an "
        "empty expected, one a line, for a person to label; labelled, they feed calibrate --tasks.",
    )
    _workshop_flags(p, "bucket", "prefix")
    _name_flag(p)
    _task_flags(
        p,
        tasks=False,
        limit="read at most N captured invocations (oldest first)",
        out="the JSONL file to write (default: captured/<endpoint>.jsonl beside the config file)",
    )

    p = add(
        "calibrate",
        cmd_calibrate,
        "fit a temperature and a prediction-set threshold per question type and option count: calibration.json (06)",
        "Send labelled tasks (JevBench JSONL; default: the packaged set) to a decision endpoint at temperature 1 "
        "in one order mode (or read a saved run with --run), fit a temperature per <question_type>/<band> "
        "profile on the fitting split, keep it only where at least 5 held-out answers judge it and their NLL "
        "improves, fit the split-conformal threshold whose prediction sets cover the labelled answer in at "
        "least 1 - alpha of held-out tasks (kept with at least ceil(1/alpha) - 1 of them), and write "
        "calibration.json for that GGUF, prompt version and readout. `package-model --calibration "
        "PATH` puts it into the next package; the adapter applies it to requests in the same order mode.",
    )
    _workshop_flags(p)
    _target_flags(p, default="the deploy path's decision endpoint")
    _task_flags(p, out="where to write it (default: calibration.json beside the config file)")
    p.add_argument(
        "--order",
        choices=("as_given", "prior", "rotations"),
        help="the order mode to fit for (default as_given); the adapter applies the file in that mode only",
    )
    p.add_argument(
        "--readout",
        choices=("letters", "cloze"),
        help="the readout to fit for (default: the one the endpoint serves, as its answers report it; "
        "with --run, the one the run was read with); the adapter applies the file to that readout only",
    )
    p.add_argument(
        "--alpha",
        type=float,
        help="the prediction sets' miss rate: they cover the labelled answer in at "
        "least 1 - alpha of held-out tasks (default 0.1; recorded in the file)",
    )
    p.add_argument("--run", metavar="RUN_JSON", help="a saved temperature-1 run (Run.to_dict) instead of sending tasks")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = add(
        "alarms",
        cmd_alarms,
        "put a decision endpoint's alarms and the workshop's dashboard (07)",
        "PutMetricAlarm for the endpoint's six alarms, named <endpoint>/<what>: SageMaker's ModelLatency p95, "
        "Invocation5XXErrors and InvocationsPerInstance, the adapter's latency p95, busy 503s and time-limit "
        "stops (from its metric lines); then PutDashboard for the workshop's one dashboard. Putting them again "
        "replaces them; delete-alarms deletes exactly these names.",
    )
    _workshop_flags(p)
    _name_flag(p)
    p.add_argument("--latency-p95-ms", type=float, help="latency alarms' threshold in ms (default 2000)")
    p.add_argument("--errors-5xx", type=float, help="5XX errors per minute that fire the alarm (default 5)")

    p = add(
        "update",
        cmd_update,
        "roll a decision endpoint to a new model package or image, blue/green (07)",
        "Create a new version of the endpoint's model and endpoint config (<endpoint>-<UTC time>, the shape "
        "deploy makes) and send UpdateEndpoint with a blue/green deployment: traffic moves ALL_AT_ONCE (or a "
        "CANARY half first, on 2 instances or more), the new fleet is watched for --bake seconds, and the "
        "endpoint rolls back by itself if one of its rollback alarms fires (put them first with `alarms`). "
        "Waits, printing each status the endpoint passes through. Locally the stand-in replaces the local "
        "endpoint's process once the new one is ready.",
    )
    _workshop_flags(p, "bucket", "sagemaker_role_arn")
    _name_flag(p)
    p.add_argument(
        "--model-data-url",
        help="s3://.../model.tar.gz to roll to (default: the calibrated package "
        "notebook 07 made, else the one package-model recorded)",
    )
    p.add_argument("--image-uri", help="image pinned by digest (default: the one build-image recorded)")
    p.add_argument("--routing", choices=("ALL_AT_ONCE", "CANARY"), help="traffic routing (default ALL_AT_ONCE)")
    p.add_argument("--bake", type=int, metavar="SECONDS", help="how long the new fleet is watched (default 300)")
    p.add_argument("--ctx-size", "--context-size", type=int, help="llama.cpp context size of the new version")
    p.add_argument("--threads", type=int, help="llama.cpp threads of the new version")
    p.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")

    p = add("delete-alarms", cmd_delete_alarms, "delete the decision endpoints' alarms and the dashboard (08)")
    _workshop_flags(p)
    p.add_argument(
        "--name",
        action="append",
        metavar="NAME",
        help="an endpoint whose alarms to delete; repeat for more (default: both decision endpoints)",
    )

    p = add(
        "autoscale",
        cmd_autoscale,
        "auto scale a decision endpoint on invocations per instance (07)",
        "RegisterScalableTarget for the endpoint's variant (--min to --max instances) and PutScalingPolicy "
        "with target tracking on SageMakerVariantInvocationsPerInstance: --target invocations per instance "
        "per minute, by default 70 %% of the sustainable rate notebook 06 measured under concurrent callers "
        "(or of one instance's pace one decision at a time). --remove deletes the policy and deregisters the variant (08).",
    )
    _workshop_flags(p)
    _name_flag(p)
    p.add_argument(
        "--target",
        type=float,
        help="invocations per instance per minute to track (default: 70 %% "
        "of the sustainable rate 06 kept, else of its median pace one decision at a time)",
    )
    p.add_argument("--min", type=int, help="fewest instances (default 1)")
    p.add_argument("--max", type=int, help="most instances (default 2)")
    p.add_argument("--remove", action="store_true", help="delete the scaling policy and the scalable target")
    p.add_argument("--show-requests", action="store_true", help="print the AWS requests sent, secrets masked")

    p = add(
        "transform",
        cmd_transform,
        "run one Batch Transform job of decisions with the decision model (07)",
        "Upload the decisions as JSON Lines under <prefix>/batch-input/, run a transform job with the model "
        "the endpoint serves (one record per request, in order), and read the answers back from "
        "<prefix>/batch-output/decisions.jsonl.out, joined by decision id. Locally the endpoint's process "
        "answers every record. --delete-output deletes both folders (08).",
    )
    _workshop_flags(p, "bucket")
    _name_flag(p, what="endpoint whose model the job runs")
    p.add_argument(
        "--decisions",
        metavar="JSONL",
        help="decisions, one JSON object with an id per line (default: three example tickets)",
    )
    p.add_argument("--instance-type", help="transform instance type (default: the endpoint's, where offered)")
    p.add_argument("--delete-output", action="store_true", help="delete batch-input/ and batch-output/")
    p.add_argument("--no-progress", action="store_true", help="do not print the job's status as it changes")
    p.add_argument("--show-requests", action="store_true", help="print the AWS requests sent, secrets masked")

    p = add(
        "cleanup",
        cmd_cleanup,
        "delete endpoints with their config, model, deadline and log group (08)",
        "Delete the named endpoints (--name, repeated), by default the config's three, each with its "
        "endpoint config, model, deadline and log group, and only what carries the workshop's tag; nothing "
        "else. Locally also stop their adapter processes.",
        aliases=("delete-endpoints",),
    )
    _workshop_flags(p)
    p.add_argument(
        "--name",
        action="append",
        metavar="NAME",
        help="an endpoint name (its config and model share it); repeat for more",
    )
    p.add_argument("--no-wait", action="store_true", help="do not wait until the endpoint is gone")

    p = add(
        "delete-builds",
        cmd_delete_builds,
        "delete the two CodeBuild projects and the ECR repository (08)",
        "Delete the model-packaging and image-build CodeBuild projects with their log groups, and the ECR "
        "repository with its images, each only if it carries the workshop's tag (one of the same name without "
        "it is kept, images and all, and the output says why); what is already gone is said, not raised.",
    )
    _workshop_flags(p, "ecr_repository")

    p = add(
        "delete-codebuild-role",
        cmd_delete_codebuild_role,
        "delete the CodeBuild role codebuild-role created (a role given by ARN is left alone) (08)",
    )
    _workshop_flags(p, "codebuild_role_arn")

    p = add(
        "delete-deadline-role",
        cmd_delete_deadline_role,
        "delete the role the endpoint deadlines run as (08, once no endpoint is left)",
    )
    _workshop_flags(p)

    p = add("delete-artifacts", cmd_delete_artifacts, "delete the objects under the workshop's S3 prefix (08)")
    _workshop_flags(p, "bucket", "prefix")
    p.add_argument("--delete-bucket", action="store_true", help="also the bucket, if nothing else is in it")

    p = add("running", cmd_running, "list workshop-tagged endpoints still running, with their age (08)")
    _workshop_flags(p)

    p = add("audit", cmd_audit, "local mode: hold every recorded AWS call against the generated policies (08)")
    _workshop_flags(p, "bucket", "prefix", "ecr_repository")

    p = add("stop-local", cmd_stop_local, "local mode: stop the local endpoints and the AWS emulator (08)")
    _workshop_flags(p)

    p = add(
        "serve",
        cmd_serve,
        "run the real decision adapter locally, in the foreground (Ctrl-C stops it)",
        "A local endpoint without AWS: nginx + gunicorn + llama.cpp serving /ping and /invocations on this machine, "
        "by default on the embedded model, so invoke --url, bench --url and any HTTP client can use it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", metavar="GGUF", help="a GGUF file (default: the embedded SmolLM2-135M)")
    source.add_argument("--model-dir", metavar="DIR", help="a directory laid out like /opt/ml/model")
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: llama.cpp's)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (
        WorkshopError,  # expected: the message says what to do; anything else is a bug
        ClientError,
        NoCredentialsError,
        ProfileNotFound,
    ) as exc:  # AWS said no, or no credentials
        # the notes: what a failing step sent before it failed (steps.context.shows_requests)
        print("\n".join([f"error: {exc}", *getattr(exc, "__notes__", ())]), file=sys.stderr)
        return 1
