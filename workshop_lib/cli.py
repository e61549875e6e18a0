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
``--dry-run``, ...), so its users feel at home. The parser is built here for notebooks 00 to 05 and in
``cli_operate`` for 06 to 08, from the shared flags of ``cli_flags``. ``demo`` and ``serve`` need no config.

Expected mistakes (every ``WorkshopError``, AWS refusals, missing credentials) print one line and
exit with status 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from botocore.exceptions import ClientError, NoCredentialsError, ProfileNotFound

from .aws import endpoints, variants
from .cli_commands import (
    EXAMPLE_BUCKET,
    cmd_build_image,
    cmd_check,
    cmd_codebuild_role,
    cmd_config,
    cmd_deadline,
    cmd_demo,
    cmd_deploy,
    cmd_deploy_standard,
    cmd_extend,
    cmd_invoke,
    cmd_invoke_standard,
    cmd_package_model,
    cmd_placement,
    cmd_resolve_image,
    cmd_serve,
    cmd_setup,
    cmd_verify_package,
)
from .cli_flags import Command, deploy_flags, name_flag, target_flags, workshop_flags
from .cli_operate import add_cleanup_commands, add_measure_commands, add_operate_commands
from .deploy_paths import DECISION_CPU, DECISION_GPU, DEPLOY_PATHS, STANDARD, decision_paths
from .errors import WorkshopError

# The parser: the commands of notebooks 00 to 05 here, those of 06 to 08 in ``cli_operate``, the shared flags in
# ``cli_flags`` (every flag defaults to None: the saved config's value or the step's default applies).


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workshop_lib",
        description="Deploy llama.cpp decision models on Amazon SageMaker AI, or rehearse locally: the notebooks' "
        "steps, one command each, on the saved workshop config (flags override it).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str,
        func: Command,
        help_text: str,
        description: str | None = None,
        aliases: Sequence[str] = (),
    ) -> argparse.ArgumentParser:
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
    workshop_flags(p, "bucket", "prefix", "sagemaker_role_arn", "codebuild_role_arn", "ecr_repository")

    p = add(
        "check",
        cmd_check,
        "check Python, boto3, config, credentials, region and quotas (00)",
        "The checks notebook 00 shows; exit status 1 when one fails.",
    )
    workshop_flags(p, "bucket", "sagemaker_role_arn")

    p = add(
        "setup",
        cmd_setup,
        "save the config, prepare the bucket; locally start the rehearsal (00)",
        "Resolve role and bucket (created if missing), and save the config with the flags given, where every "
        "later command (and notebook) reads it. In local mode start the AWS emulator, or keep the one running.",
    )
    workshop_flags(
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
    workshop_flags(p, "bucket", "prefix", "codebuild_role_arn", "ecr_repository")

    p = add(
        "package-model",
        cmd_package_model,
        "package the pinned GGUF + tokenizer in CodeBuild (01)",
        "Download the pinned model revision in CodeBuild, verify sizes and sha256 (the build fails on a "
        "mismatch), write model-manifest.json and upload model.tar.gz; record its S3 URL for deploy.",
    )
    workshop_flags(p, "bucket", "prefix", "codebuild_role_arn")
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
    workshop_flags(p)
    p.add_argument("--model-data-url", help="s3://.../model.tar.gz (default: the one package-model recorded)")

    p = add(
        "resolve-image",
        cmd_resolve_image,
        "pin the llama.cpp DLC (or any ECR image) to its digest (02)",
        "Print the region's llama.cpp DLC pinned by digest (the digest tested with this library's bindings; "
        "--follow-tag for the floating tag's), or --image-uri's digest.",
    )
    workshop_flags(p)
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
    workshop_flags(p, "bucket", "sagemaker_role_arn")
    deploy_flags(p, default_name=STANDARD.endpoint_field)
    p.add_argument("--instance-type", help=f"instance type (default {endpoints.STANDARD_CPU_INSTANCE})")

    p = add("invoke-standard", cmd_invoke_standard, "send one chat message to an endpoint (02)")
    workshop_flags(p)
    target_flags(p, default=f"the config's {STANDARD.endpoint_field}")
    p.add_argument("--message", help="the user message (default: the library's example chat)")
    p.add_argument("--max-tokens", type=int, help="answer length cap (default: the example's)")

    p = add(
        "build-image",
        cmd_build_image,
        "build the decision image FROM the DLC in CodeBuild, push to ECR (03)",
        "Build container/Dockerfile (or Dockerfile.gpu) in CodeBuild with BASE_IMAGE set to the pinned "
        "DLC digest, push it to an immutable ECR repository and record repo@sha256:... for deploy.",
    )
    workshop_flags(p, "bucket", "prefix", "codebuild_role_arn", "ecr_repository")
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
    workshop_flags(p, "bucket", "sagemaker_role_arn")
    deploy_flags(p, default_name=f"{DECISION_CPU.endpoint_field}, or {DECISION_GPU.endpoint_field} for GPU types")
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
    workshop_flags(p, "bucket")
    name_flag(p, default="the config's endpoint of the deploy path")
    p.add_argument("--hours", type=float, help="hours from now, 0.25-168 (default: the config's endpoint_ttl_hours)")

    p = add("deadline", cmd_deadline, "when an endpoint's deadline deletes it (04, 05)")
    workshop_flags(p)
    name_flag(p)

    p = add("placement", cmd_placement, "which GPU pool an endpoint was placed on, and llama.cpp's offload line (04)")
    workshop_flags(p)
    name_flag(p, default=f"the config's {DECISION_GPU.endpoint_field}")

    p = add("invoke", cmd_invoke, "send a decision (or shared-state request) to a decision endpoint (05)")
    workshop_flags(p)
    target_flags(p, default="the deploy path's decision endpoint")
    p.add_argument(
        "--request",
        help="a JSON file with a decision or shared-state request, in this project's "
        "format or the published sample's (example-request.json, "
        "example-shared-request.json); default: the README's support-route example",
    )

    add_measure_commands(add)
    add_operate_commands(add)
    add_cleanup_commands(add)

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
        status: int = args.func(args)
        return status
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
