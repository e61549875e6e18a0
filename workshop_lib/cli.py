"""``python -m workshop_lib <command>``: the notebooks' steps from a shell.

One command per step (``setup``, ``package-model``, ``build-image``, ``deploy``, ``extend``, ``invoke``,
``cleanup``, ``delete-builds``, ...). Each builds one ``steps.Workshop`` from the config the notebooks use
(``.workshop/config.json`` or ``--config``, under ``WORKSHOP_*`` variables), with the flags given
on top (``CONFIG_FLAGS``: ``--region``, ``--bucket``, ``--role-arn``, ``--mode``, ...), calls the
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
import contextlib
import json
import os
import sys
from pathlib import Path

from botocore.exceptions import ClientError, NoCredentialsError, ProfileNotFound

from .errors import WorkshopError

EXAMPLE_BUCKET = "amzn-s3-demo-semif-artifacts"

# flag (its argparse dest) -> the WorkshopConfig field it overrides for the command's run
CONFIG_FLAGS = {
    "mode": "mode",
    "region": "region",
    "bucket": "bucket",
    "prefix": "prefix",
    "role_arn": "sagemaker_role_arn",
    "codebuild_role_arn": "codebuild_role_arn",
    "repository": "ecr_repository",
    "endpoint_ttl_hours": "endpoint_ttl_hours",
}
# A deploy command's --name is the config's endpoint name for the path it deploys.
ENDPOINT_NAME_FIELDS = {"standard": "standard_endpoint_name", "decision-cpu": "cpu_endpoint_name",
                        "decision-gpu": "gpu_endpoint_name"}


class CommandError(WorkshopError, ValueError):
    """Flags that do not fit together, or a setting the command needs and nobody gave."""


def _given(**values) -> dict:
    """The values a flag gave; the rest are left to the step's (or builder's) own defaults."""
    return {k: v for k, v in values.items() if v is not None}


def workshop_for(args, *, deploy_path: str | None = None, check: bool = True):
    """The ``steps.Workshop`` a command runs with: the config loaded as the notebooks load it, with the
    flags given over the ``WORKSHOP_*`` variables (so they also decide the mode and its local
    placeholders), and ``--name`` as the endpoint name of ``deploy_path``. The command's own path, if it
    has one, is the config's deploy path for this run: asking for it is choosing it."""
    from .config import ENV_VARS, WorkshopConfig
    from .steps import Workshop

    env = dict(os.environ)
    for dest, field in CONFIG_FLAGS.items():
        if getattr(args, dest, None) is not None:
            env[ENV_VARS[field]] = getattr(args, dest)
    if deploy_path and getattr(args, "name", None):
        env[ENV_VARS[ENDPOINT_NAME_FIELDS[deploy_path]]] = args.name
    path = getattr(args, "config", None)
    config = WorkshopConfig.load(path, env)
    if deploy_path and deploy_path != config.deploy_path:
        config = config.replace(deploy_path=deploy_path)
    if check:
        config.check()
        if config.mode == "aws" and not config.region:
            raise CommandError("no AWS region: pass --region, set WORKSHOP_REGION or AWS_REGION, or save one "
                               "with `python -m workshop_lib setup --region ...`")
    return Workshop(config, path)


def _show(result) -> int:
    print(result)
    return 0


# -- commands -------------------------------------------------------------------


def cmd_demo(args) -> int:
    from . import demo, steps

    status = demo.run(args.work_dir)
    if status or args.adapter_only:
        return status
    print()
    return steps.rehearse_all()


def cmd_config(args) -> int:
    from . import steps

    workshop = workshop_for(args, check=False)
    return _show(f"{steps.show_config(workshop)}\nconfig file: {workshop.path}")


def cmd_check(args) -> int:
    from . import steps

    checks = steps.check_environment(workshop_for(args, check=False))
    print(checks)
    return 0 if checks.ok else 1


def cmd_setup(args) -> int:
    from . import steps

    return _show(steps.setup(workshop_for(args), **_given(deploy_path=args.deploy_path), reset=args.reset))


def cmd_codebuild_role(args) -> int:
    from . import steps

    return _show(steps.ensure_codebuild_role(workshop_for(args)))


def cmd_package_model(args) -> int:
    from . import steps

    workshop = workshop_for(args)
    if args.model_s3_uri:  # refused before anything is created: the CodeBuild role writes only the model folder
        workshop.config.check_model_uri(args.model_s3_uri, "--model-s3-uri")
    return _show(steps.package_model(workshop, **_given(model_s3_uri=args.model_s3_uri)))


def cmd_verify_package(args) -> int:
    from . import steps

    return _show(steps.verify_package(workshop_for(args), args.model_data_url))


def cmd_resolve_image(args) -> int:
    """The digest alone on stdout (for ``$(...)``); what was resolved, and how, on stderr."""
    from . import images, steps

    workshop = workshop_for(args)
    if args.image_uri:
        return _show(images.resolve_digest(workshop.clients.ecr, args.image_uri))
    with contextlib.redirect_stdout(sys.stderr):
        pinned = steps.resolve_dlc(workshop, **_given(variant=args.variant), follow_tag=args.follow_tag)
    return _show(pinned)


def cmd_build_image(args) -> int:
    from . import steps

    variant = "gpu" if args.dockerfile == "Dockerfile.gpu" else args.variant
    if args.dockerfile == "Dockerfile" and variant == "gpu":
        raise CommandError("--dockerfile Dockerfile is the CPU image; the GPU one is Dockerfile.gpu (--variant gpu)")
    path = "decision-gpu" if variant == "gpu" else "decision-cpu"
    return _show(steps.build_decision_image(workshop_for(args, deploy_path=path), **_given(variant=variant),
                                            **_given(base_image=args.base_image, image_tag=args.image_tag)))


def _deploy(args, path: str, **settings) -> int:
    """Deploy the spec the flags give with the step the notebooks call, or with --dry-run print the
    requests it would send (``steps.deploy_plan``, which sends, prints and writes nothing) and send nothing."""
    from . import steps

    spec = steps.DeploySpec.of(path, image_uri=args.image_uri, model_data_url=args.model_data_url,
                               **_given(startup_timeout_s=args.startup_timeout, download_timeout_s=args.download_timeout,
                                        ctx_size=args.ctx_size, threads=args.threads, **settings))
    workshop = workshop_for(args, deploy_path=path)
    if args.dry_run:
        plan = steps.deploy_plan(workshop, spec)
        print(f"instances: {plan.placement}", file=sys.stderr)  # stdout is the JSON alone
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        return _show(plan.to_json())
    return _show(steps.deploy_endpoint(workshop, spec, wait=not args.no_wait))


def cmd_deploy_standard(args) -> int:
    return _deploy(args, "standard", instance_type=args.instance_type)


def cmd_deploy(args) -> int:
    """The sample's deploy_endpoint.py: a CPU type, one GPU type, or ordered GPU pools."""
    from . import endpoints

    pools = args.instance_pool or ([args.instance_type] if args.instance_type and
                                   endpoints.is_gpu_instance(args.instance_type) else None)
    if pools:
        return _deploy(args, "decision-gpu", pools=tuple(pools), n_gpu_layers=args.gpu_layers,
                       provision_timeout_s=args.provision_timeout)
    if args.gpu_layers:
        raise CommandError(f"--gpu-layers {args.gpu_layers} needs a GPU instance; "
                           f"{args.instance_type or endpoints.DECISION_CPU_INSTANCE} has none (pass GPU types "
                           "with --instance-pool)")
    return _deploy(args, "decision-cpu", instance_type=args.instance_type)


def cmd_extend(args) -> int:
    from . import steps

    result = steps.extend_deadline(workshop_for(args), args.name, args.hours)
    print(result)
    return 0 if result.ok else 1


def cmd_deadline(args) -> int:
    from . import steps

    return _show(steps.deadline_text(workshop_for(args), args.name))


def cmd_placement(args) -> int:
    from . import steps

    return _show(steps.placement(workshop_for(args), args.name))


def _endpoint_client(args, default_name):
    """A client for --url (a local adapter: no config needed), else for the named endpoint, by default
    ``default_name(workshop)``, through the step the notebooks use (SageMaker or the local rehearsal)."""
    from . import steps
    from .client import EndpointClient

    if args.url:
        return EndpointClient.local(args.url)
    workshop = workshop_for(args)
    return steps.client(workshop, args.endpoint_name or default_name(workshop))


def cmd_invoke_standard(args) -> int:
    from . import examples

    messages = [{"role": "user", "content": args.message}] if args.message else examples.CHAT["messages"]
    client = _endpoint_client(args, lambda workshop: workshop.config.standard_endpoint_name)
    result = client.chat(messages, max_tokens=args.max_tokens or examples.CHAT["max_tokens"])
    return _show(result.content)


def _request_file(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise SystemExit(f"error: cannot read --request {path}: {exc.strerror}; pass a JSON file that exists")
    except ValueError as exc:
        raise SystemExit(f"error: --request {path} is not JSON ({exc}); pass a decision body, or the sample's "
                         "request file")


def cmd_invoke(args) -> int:
    from . import examples, steps

    body = _request_file(args.request) if args.request else examples.SUPPORT_ROUTE
    decisions = _endpoint_client(args, steps.decision_endpoint).decide_any(body)
    for d in decisions:
        print(f"{d.id}: top {d.top} ({d.top_probability:.3f})")
        for oid, p in d.as_dict().items():
            print(f"    {oid:<20} {p:.3f}")
    return 0


def cmd_bench(args) -> int:
    from . import steps
    from .bench import load_comparison, run_benchmark
    from .config import default_path

    standard = None
    if "logprobs" in (args.baseline or ()):
        from .bench.logprobs import url_client

        if not args.standard_url and args.url:
            raise SystemExit("error: --baseline logprobs asks the standard endpoint (llama-server); with --url give "
                             "its URL too: --standard-url http://127.0.0.1:PORT/v1/chat/completions")
        if args.standard_url:
            standard = url_client(args.standard_url)
        else:
            workshop = workshop_for(args)
            standard = steps.client(workshop, workshop.config.standard_endpoint_name)
    report = run_benchmark(
        _endpoint_client(args, steps.decision_endpoint), args.tasks, progress=not args.no_progress,
        **_given(limit=args.limit, concurrency=args.concurrency, rotations=args.rotations,
                 study_limit=args.study_limit, label=args.label, schema=args.schema,
                 compare_with=load_comparison(args.compare) if args.compare else None),
        baseline=args.baseline or False, standard=standard, bias=args.bias, debias=args.debias,
        calibrate=args.calibrate)
    paths = report.save(args.out or Path(args.config or default_path()).parent / "bench")
    print(report.to_markdown())
    print()
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def cmd_cleanup(args) -> int:
    from . import steps

    workshop = workshop_for(args)
    c = workshop.config
    names = args.name or (c.standard_endpoint_name, c.cpu_endpoint_name, c.gpu_endpoint_name)
    return _show(steps.delete_endpoints(workshop, names, wait=not args.no_wait))


def cmd_delete_builds(args) -> int:
    from . import steps
    from .builds import IMAGE_BUILD_PROJECT, MODEL_PACKAGE_PROJECT

    workshop = workshop_for(args)
    return _show(steps.delete_build_resources(workshop, [MODEL_PACKAGE_PROJECT, IMAGE_BUILD_PROJECT],
                                              workshop.config.ecr_repository))


def cmd_delete_codebuild_role(args) -> int:
    from . import steps

    return _show(steps.delete_codebuild_role(workshop_for(args)))


def cmd_delete_deadline_role(args) -> int:
    from . import steps

    return _show(steps.delete_deadline_role(workshop_for(args)))


def cmd_delete_artifacts(args) -> int:
    from . import steps

    workshop = workshop_for(args)
    return _show(steps.delete_artifacts(workshop, workshop.config.s3_uri(), delete_bucket=args.delete_bucket))


def cmd_running(args) -> int:
    from . import steps

    return _show(steps.running_endpoints(workshop_for(args)))


def cmd_audit(args) -> int:
    from . import steps

    return _show(steps.audit_permissions(workshop_for(args)))


def cmd_stop_local(args) -> int:
    from . import steps

    return _show(steps.stop_local(workshop_for(args, check=False)))


def cmd_serve(args) -> int:
    """The real adapter in the foreground (its own process: the client side never imports the server)."""
    import signal
    import subprocess

    from .models import embedded_gguf_path

    command = [sys.executable, "-m", "decision_adapter.serve", "--host", args.host, "--port", str(args.port)]
    if args.model_dir:
        command += ["--model-dir", args.model_dir]
    else:
        command += ["--model", args.model or str(embedded_gguf_path())]
    if args.threads:
        command += ["--threads", str(args.threads)]
    print(f"Serving on http://{args.host}:{args.port} (POST /invocations, GET /ping); Ctrl-C stops it.",
          flush=True)
    process = subprocess.Popen(command, env=dict(os.environ))
    try:
        return process.wait()
    except KeyboardInterrupt:  # the terminal sent SIGINT to the adapter too; let gunicorn finish
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            return process.wait()


# -- parser ---------------------------------------------------------------------
# Every flag defaults to None (False for switches): what is left out comes from the saved config,
# or from the step's or the endpoints builder's default (tests/workshop_lib/test_cli.py checks).


def _workshop_flags(parser, *config_flags: str) -> None:
    """The flags every workshop command takes, and those of ``config_flags`` (CONFIG_FLAGS dests) it uses."""
    helps = {
        "bucket": f"S3 bucket for model and build sources (e.g. {EXAMPLE_BUCKET}); config: bucket",
        "prefix": "S3 folder of the workshop's objects in the bucket; config: prefix",
        "role_arn": "SageMaker execution role ARN; config: sagemaker_role_arn",
        "codebuild_role_arn": "CodeBuild service role ARN; config: codebuild_role_arn",
        "repository": "ECR repository of the decision image; config: ecr_repository",
        "endpoint_ttl_hours": "hours each endpoint lives before its deadline deletes it, 0.25-168, or 0 for none; "
                              "config: endpoint_ttl_hours",
    }
    group = parser.add_argument_group("workshop config (flags override the saved config for this run)")
    group.add_argument("--config", metavar="PATH", help="config file (default: $WORKSHOP_CONFIG or "
                                                        ".workshop/config.json; outputs.json sits beside it)")
    group.add_argument("--mode", choices=("aws", "local"), help="aws, or local to rehearse against the emulator")
    group.add_argument("--region", help="AWS region; config: region")
    for dest in config_flags:
        group.add_argument("--" + dest.replace("_", "-"), help=helps[dest])


def _deploy_flags(parser, *, default_name: str) -> None:
    parser.add_argument("--image-uri", help="image pinned by digest: repo@sha256:... (tags are refused); default: "
                                            "the pinned DLC (deploy-standard) or the image build-image recorded")
    parser.add_argument("--model-data-url", help="s3://.../model.tar.gz in the endpoint's region; default: the "
                                                 "one package-model recorded")
    parser.add_argument("--name", help=f"endpoint, config and model name (default: the config's {default_name})")
    parser.add_argument("--ctx-size", "--context-size", type=int, help="llama.cpp context size")
    parser.add_argument("--threads", type=int, help="llama.cpp threads")
    parser.add_argument("--startup-timeout", type=int, help="ContainerStartupHealthCheckTimeoutInSeconds")
    parser.add_argument("--download-timeout", type=int, help="ModelDataDownloadTimeoutInSeconds")
    parser.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")
    parser.add_argument("--no-wait", action="store_true", help="return once the endpoint is being created (AWS)")


def _target_flags(parser, *, default: str) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--endpoint-name", "--endpoint", "--name", dest="endpoint_name", metavar="NAME",
                        help=f"endpoint name (default: {default})")
    target.add_argument("--url", help="a local adapter's base URL, e.g. http://127.0.0.1:8080 (no config needed)")


def build_parser() -> argparse.ArgumentParser:
    from . import endpoints

    parser = argparse.ArgumentParser(
        prog="python -m workshop_lib",
        description="Deploy llama.cpp decision models on Amazon SageMaker AI, or rehearse locally: the notebooks' "
                    "steps, one command each, on the saved workshop config (flags override it).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_text, description=None, aliases=()):
        sub = commands.add_parser(name, help=help_text, description=description or help_text, aliases=list(aliases))
        sub.set_defaults(func=func)
        return sub

    p = add("demo", cmd_demo, "rehearse the workshop locally with the embedded model (no AWS account)",
            "Part 1: package the embedded model, start the real adapter on a local port, send a decision, a "
            "shared-state request and a chat message, then stop the server. Part 2: run the notebooks' local "
            "path (00-07) against the AWS emulator and print one line per notebook. Everything is stopped.")
    p.add_argument("--work-dir", default=".workshop/demo", help="where part 1's package and logs go")
    p.add_argument("--adapter-only", action="store_true", help="run part 1 only")

    p = add("config", cmd_config, "show the workshop config this command line would use (00)")
    _workshop_flags(p, "bucket", "prefix", "role_arn", "codebuild_role_arn", "repository")

    p = add("check", cmd_check, "check Python, boto3, config, credentials, region and quotas (00)",
            "The checks notebook 00 shows; exit status 1 when one fails.")
    _workshop_flags(p, "bucket", "role_arn")

    p = add("setup", cmd_setup, "save the config, prepare the bucket; locally start the rehearsal (00)",
            "Resolve role and bucket (created if missing), and save the config with the flags given, where every "
            "later command (and notebook) reads it. In local mode start the AWS emulator, or keep the one running.")
    _workshop_flags(p, "bucket", "prefix", "role_arn", "codebuild_role_arn", "repository", "endpoint_ttl_hours")
    p.add_argument("--deploy-path", choices=("standard", "decision-cpu", "decision-gpu"),
                   help="what the later notebooks deploy (default: the config's)")
    p.add_argument("--reset", action="store_true", help="local mode: stop the running rehearsal and start afresh")

    p = add("codebuild-role", cmd_codebuild_role, "the CodeBuild service role: the one given, or made (00)",
            "Save --codebuild-role-arn (or the configured one) in the config, or create the role from the "
            "least-privilege documents when there is none.")
    _workshop_flags(p, "bucket", "prefix", "codebuild_role_arn", "repository")

    p = add("package-model", cmd_package_model, "package the pinned GGUF + tokenizer in CodeBuild (01)",
            "Download the pinned model revision in CodeBuild, verify sizes and sha256 (the build fails on a "
            "mismatch), write model-manifest.json and upload model.tar.gz; record its S3 URL for deploy.")
    _workshop_flags(p, "bucket", "prefix", "codebuild_role_arn")
    p.add_argument("--model-s3-uri", help=f"where model.tar.gz goes, e.g. s3://{EXAMPLE_BUCKET}/decision-workshop/"
                                          "model/ (default and only place allowed: model/ under the workshop's "
                                          "prefix, the folder the CodeBuild role may write)")

    p = add("verify-package", cmd_verify_package, "re-read the packaged model's manifest and check it (01)")
    _workshop_flags(p)
    p.add_argument("--model-data-url", help="s3://.../model.tar.gz (default: the one package-model recorded)")

    p = add("resolve-image", cmd_resolve_image, "pin the llama.cpp DLC (or any ECR image) to its digest (02)",
            "Print the region's llama.cpp DLC pinned by digest (the digest tested with this library's bindings; "
            "--follow-tag for the floating tag's), or --image-uri's digest.")
    _workshop_flags(p)
    p.add_argument("--variant", choices=("cpu", "cuda"), help="DLC variant (default cpu)")
    p.add_argument("--follow-tag", action="store_true", help="the floating SageMaker tag's digest, not the pin")
    p.add_argument("--image-uri", help="a tagged ECR image to pin instead of the DLC")

    p = add("deploy-standard", cmd_deploy_standard, "deploy the llama.cpp DLC as a standard endpoint (02)",
            "Create model, endpoint config and endpoint for the published DLC (OpenAI chat on /invocations).")
    _workshop_flags(p, "bucket", "role_arn")
    _deploy_flags(p, default_name="standard_endpoint_name")
    p.add_argument("--instance-type", help=f"instance type (default {endpoints.STANDARD_CPU_INSTANCE})")

    p = add("invoke-standard", cmd_invoke_standard, "send one chat message to an endpoint (02)")
    _workshop_flags(p)
    _target_flags(p, default="the config's standard_endpoint_name")
    p.add_argument("--message", help="the user message (default: the library's example chat)")
    p.add_argument("--max-tokens", type=int, help="answer length cap (default: the example's)")

    p = add("build-image", cmd_build_image, "build the decision image FROM the DLC in CodeBuild, push to ECR (03)",
            "Build container/Dockerfile (or Dockerfile.gpu) in CodeBuild with BASE_IMAGE set to the pinned "
            "DLC digest, push it to an immutable ECR repository and record repo@sha256:... for deploy.")
    _workshop_flags(p, "bucket", "prefix", "codebuild_role_arn", "repository")
    p.add_argument("--variant", choices=("cpu", "gpu"), help="cpu (Dockerfile, the default) or gpu (Dockerfile.gpu)")
    p.add_argument("--dockerfile", choices=("Dockerfile", "Dockerfile.gpu"), help="the sample's spelling of --variant")
    p.add_argument("--base-image", help="the DLC pinned by digest (default: the pinned DLC, see resolve-image)")
    p.add_argument("--image-tag", help="tag to push (default: cpu-/gpu-<timestamp>)")

    p = add("deploy", cmd_deploy, "deploy the decision image on CPU or on ordered GPU pools (04)",
            "The published sample's deploy_endpoint.py flags. CPU: --instance-type and --threads (default: the "
            "type's vCPUs). GPU: --instance-pool repeated in order of preference (first = priority 1), or one GPU "
            "--instance-type; --gpu-layers (default: all; 0 keeps the model on the CPU) and --provision-timeout for "
            "finding capacity. Decision endpoints get the adapter's context (8192 tokens) unless --ctx-size.")
    _workshop_flags(p, "bucket", "role_arn")
    _deploy_flags(p, default_name="cpu_endpoint_name, or gpu_endpoint_name for GPU types")
    placement = p.add_mutually_exclusive_group()
    placement.add_argument("--instance-type", help=f"instance type (default {endpoints.DECISION_CPU_INSTANCE})")
    placement.add_argument("--instance-pool", action="append", metavar="TYPE",
                           help="GPU type, repeat in order of preference, e.g. the notebooks' " + " ".join(
                                "--instance-pool " + t for t in endpoints.DEFAULT_GPU_POOLS))
    p.add_argument("--gpu-layers", type=int, help="layers to offload to the GPU: -1 = all (the default)")
    p.add_argument("--provision-timeout", type=int,
                   help=f"seconds to find pool capacity, 300-3600 (default {endpoints.PROVISION_TIMEOUT_S})")

    p = add("extend", cmd_extend, "move an endpoint's deadline to N hours from now (04)",
            "Every endpoint the workshop creates is deleted at its deadline (endpoint_ttl_hours after it was created, "
            "chosen in notebook 00) by an EventBridge Scheduler schedule. This moves it to --hours from now, or sets "
            "it again if it had gone; the endpoint must be the workshop's (tagged).")
    _workshop_flags(p, "bucket")
    p.add_argument("--name", help="endpoint name (default: the config's endpoint of the deploy path)")
    p.add_argument("--hours", type=float, help="hours from now, 0.25-168 (default: the config's endpoint_ttl_hours)")

    p = add("deadline", cmd_deadline, "when an endpoint's deadline deletes it (04, 05)")
    _workshop_flags(p)
    p.add_argument("--name", help="endpoint name (default: the deploy path's decision endpoint)")

    p = add("placement", cmd_placement, "which GPU pool an endpoint was placed on, and llama.cpp's offload line (04)")
    _workshop_flags(p)
    p.add_argument("--name", help="endpoint name (default: the config's gpu_endpoint_name)")

    p = add("invoke", cmd_invoke, "send a decision (or shared-state request) to a decision endpoint (05)")
    _workshop_flags(p)
    _target_flags(p, default="the deploy path's decision endpoint")
    p.add_argument("--request", help="a JSON file with a decision or shared-state request, in this project's "
                                     "format or the published sample's (example-request.json, "
                                     "example-shared-request.json); default: the README's support-route example")

    p = add("bench", cmd_bench, "benchmark a decision endpoint: validity, accuracy, latency, baselines, plots (06)",
            "Send labelled tasks (JevBench JSONL or decision records; default: the packaged set) to a decision "
            "endpoint, sequentially (as the blog) or with --concurrency N clients, and report valid responses, "
            "accuracy by family and type, client p50/p95/max and throughput. Opt-in: a generation baseline "
            "through the chat schema, an option-order test, an order-debiased readout and temperature "
            "calibration. Writes report.json, report.md and PNGs to --out; --compare puts a saved report.json "
            "beside this run (e.g. CPU vs GPU).")
    _workshop_flags(p)
    _target_flags(p, default="the deploy path's decision endpoint")
    p.add_argument("--tasks", metavar="PATH", help="JSONL task file (default: the packaged task set)")
    p.add_argument("--limit", type=int, metavar="N", help="use N tasks, spread across families")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="requests in flight for the decision run (default 1: sequential)")
    p.add_argument("--baseline", action="append", nargs="?", const="generation", choices=("generation", "logprobs"),
                   help="also a baseline: generation (the default; chat, parse the reply) or logprobs (the decision "
                        "prompt's first-token top_logprobs from the standard endpoint); repeat for both")
    p.add_argument("--standard-url", metavar="URL",
                   help="the standard endpoint for --baseline logprobs: a URL serving /invocations, or a "
                        "llama-server's .../v1/chat/completions (default: the config's standard endpoint)")
    p.add_argument("--bias", action="store_true", help="also send the options reversed; report top-choice flips")
    p.add_argument("--debias", action="store_true",
                   help="also the order-debiased readout (k rotations in one shared-state request); implies --bias")
    p.add_argument("--rotations", type=int, metavar="K", help="rotations for --debias (default: one per option)")
    p.add_argument("--study-limit", type=int, metavar="N",
                   help="run the baseline and order studies on N of the tasks (default: all)")
    p.add_argument("--calibrate", action="store_true",
                   help="fit a temperature on the dev tasks; ECE and Brier before/after on the rest")
    p.add_argument("--compare", metavar="REPORT_JSON", help="a saved report.json to show side by side")
    p.add_argument("--label", help="name of this run in tables, e.g. cpu, gpu (default: decision)")
    p.add_argument("--schema", choices=("decision", "systemone"),
                   help="send the tasks as decisions (default) or as Jev /v1/systemone questions")
    p.add_argument("--out", help="output folder (default: bench/ beside the config file)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = add("cleanup", cmd_cleanup, "delete endpoints with their config, model, deadline and log group (07)",
            "Delete the named endpoints (--name, repeated), by default the config's three, each with its "
            "endpoint config, model, deadline and log group, and only what carries the workshop's tag; nothing "
            "else. Locally also stop their adapter processes.",
            aliases=("delete-endpoints",))
    _workshop_flags(p)
    p.add_argument("--name", action="append", metavar="NAME",
                   help="an endpoint name (its config and model share it); repeat for more")
    p.add_argument("--no-wait", action="store_true", help="do not wait until the endpoint is gone")

    p = add("delete-builds", cmd_delete_builds, "delete the two CodeBuild projects and the ECR repository (07)",
            "Delete the model-packaging and image-build CodeBuild projects with their log groups, and the ECR "
            "repository with its images, each only if it carries the workshop's tag (one of the same name without "
            "it is kept, images and all, and the output says why); what is already gone is said, not raised.")
    _workshop_flags(p, "repository")

    p = add("delete-codebuild-role", cmd_delete_codebuild_role,
            "delete the CodeBuild role codebuild-role created (a role given by ARN is left alone) (07)")
    _workshop_flags(p, "codebuild_role_arn")

    p = add("delete-deadline-role", cmd_delete_deadline_role,
            "delete the role the endpoint deadlines run as (07, once no endpoint is left)")
    _workshop_flags(p)

    p = add("delete-artifacts", cmd_delete_artifacts, "delete the objects under the workshop's S3 prefix (07)")
    _workshop_flags(p, "bucket", "prefix")
    p.add_argument("--delete-bucket", action="store_true", help="also the bucket, if nothing else is in it")

    p = add("running", cmd_running, "list workshop-tagged endpoints still running, with their age (07)")
    _workshop_flags(p)

    p = add("audit", cmd_audit, "local mode: hold every recorded AWS call against the generated policies (07)")
    _workshop_flags(p, "bucket", "prefix", "repository")

    p = add("stop-local", cmd_stop_local, "local mode: stop the local endpoints and the AWS emulator (07)")
    _workshop_flags(p)

    p = add("serve", cmd_serve, "run the real decision adapter locally, in the foreground (Ctrl-C stops it)",
            "A local endpoint without AWS: nginx + gunicorn + llama.cpp serving /ping and /invocations on this machine, "
            "by default on the embedded model, so invoke --url, bench --url and any HTTP client can use it.")
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
    except WorkshopError as exc:  # expected: the message says what to do; anything else is a bug
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ClientError, NoCredentialsError, ProfileNotFound) as exc:  # AWS said no, or no credentials
        print(f"error: {exc}", file=sys.stderr)
        return 1
