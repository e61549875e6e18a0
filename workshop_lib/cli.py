"""``python -m workshop_lib <command>``: the library's functions from a shell.

The commands and flags follow the published sample's ``deploy/`` scripts
(``--region``, ``--bucket``, ``--image-uri``, ``--instance-pool`` repeated, ...),
so its users feel at home. Flags left out fall back to the workshop config
(``.workshop/config.json`` and ``WORKSHOP_*`` variables, see ``config.py``).
Each command is a few lines around a library function; nothing here talks to
AWS on its own.
"""

from __future__ import annotations

import argparse
import json
import sys

from botocore.exceptions import ClientError, NoCredentialsError, ProfileNotFound

from .endpoints import DECISION_CPU_INSTANCE as DEFAULT_DECISION_CPU_TYPE
from .endpoints import DOWNLOAD_TIMEOUT_S, STARTUP_TIMEOUT_S
from .errors import WorkshopError

EXAMPLE_BUCKET = "amzn-s3-demo-semif-artifacts"


def _config():
    from .config import WorkshopConfig

    return WorkshopConfig.load()


def _region(args) -> str:
    region = args.region or _config().region
    if not region:
        raise SystemExit("error: no region; pass --region or set WORKSHOP_REGION")
    return region


def _clients(region: str, *services: str):
    from . import aws

    return [aws.client(service, region) for service in services]


def _print_json(value) -> None:
    print(json.dumps(value, indent=2, default=str))


# -- commands -------------------------------------------------------------------


def cmd_demo(args) -> int:
    from . import demo, steps

    status = demo.run(args.work_dir)
    if status or args.adapter_only:
        return status
    print()
    return steps.rehearse_all()


def _source_prefix() -> str:
    # Under the workshop prefix, where the least-privilege CodeBuild policy lets builds read it.
    from .builds import SOURCE_PREFIX

    return f"{_config().prefix}/{SOURCE_PREFIX}"


def cmd_package_model(args) -> int:
    from .builds import package_model_in_codebuild

    region = _region(args)
    codebuild, s3, logs = _clients(region, "codebuild", "s3", "logs")
    packaged = package_model_in_codebuild(
        codebuild, s3, logs, model_s3_uri=args.model_s3_uri, service_role_arn=args.codebuild_role_arn,
        source_bucket=args.bucket, source_prefix=_source_prefix())
    print(packaged)
    return 0


def cmd_resolve_image(args) -> int:
    from .images import dlc_image_uri, resolve_digest

    region = _region(args)
    (ecr,) = _clients(region, "ecr")
    tagged = args.image_uri or dlc_image_uri(region, args.variant)
    print(resolve_digest(ecr, tagged))
    return 0


def cmd_deploy_standard(args) -> int:
    from .endpoints import standard_plan

    region = _region(args)
    plan = standard_plan(args.name, image_uri=args.image_uri, role_arn=args.role_arn,
                         model_data_url=args.model_data_url, instance_type=args.instance_type,
                         threads=args.threads, ctx_size=args.ctx_size, startup_timeout_s=args.startup_timeout,
                         download_timeout_s=args.download_timeout)
    return _deploy(region, plan, args)


def cmd_deploy(args) -> int:
    from .endpoints import decision_cpu_plan, decision_gpu_plan, is_gpu_instance

    region = _region(args)
    common = dict(image_uri=args.image_uri, role_arn=args.role_arn, model_data_url=args.model_data_url,
                  ctx_size=args.ctx_size, threads=args.threads, startup_timeout_s=args.startup_timeout,
                  download_timeout_s=args.download_timeout)
    if args.instance_pool:
        if args.gpu_layers == 0:
            print("note: --gpu-layers 0 (the default) keeps the model on the CPU of the GPU instance; pass "
                  "--gpu-layers=-1 to offload every layer", file=sys.stderr)
        plan = decision_gpu_plan(args.name, instance_pools=tuple(args.instance_pool),
                                 provision_timeout_s=args.provision_timeout, n_gpu_layers=args.gpu_layers, **common)
    elif args.instance_type and is_gpu_instance(args.instance_type):  # the sample's GPU form: one fixed type
        plan = decision_gpu_plan(args.name, instance_pools=(args.instance_type,),
                                 provision_timeout_s=args.provision_timeout, n_gpu_layers=args.gpu_layers, **common)
    else:
        if args.gpu_layers:
            raise SystemExit(f"error: --gpu-layers {args.gpu_layers} needs a GPU instance; "
                             f"{args.instance_type or DEFAULT_DECISION_CPU_TYPE} has none")
        plan = decision_cpu_plan(args.name, instance_type=args.instance_type or DEFAULT_DECISION_CPU_TYPE, **common)
    return _deploy(region, plan, args)


def _deploy(region: str, plan, args) -> int:
    from .endpoints import deploy, offload_log_lines, placed_instance_types

    if args.dry_run:
        print(plan.to_json())
        return 0
    sm, logs, s3 = _clients(region, "sagemaker", "logs", "s3")
    described = deploy(sm, plan, wait=not args.no_wait, logs_client=logs, s3_client=s3)
    print(f"{plan.name}: {described['EndpointStatus']}")
    placed = placed_instance_types(described)
    if placed:
        print("placed on: " + ", ".join(f"{t} x{n}" for t, n in placed.items()))
    if described["EndpointStatus"] == "InService" and plan.uses_instance_pools:
        for line in offload_log_lines(logs, plan.name):
            print(f"llama.cpp: offloaded {line.offloaded}/{line.total} layers to GPU ({line.log_stream})")
    return 0


def _endpoint_client(args):
    from .client import EndpointClient

    if args.url:
        return EndpointClient.local(args.url)
    return EndpointClient.sagemaker(args.endpoint_name, _region(args))


def cmd_invoke_standard(args) -> int:
    result = _endpoint_client(args).chat([{"role": "user", "content": args.message}],
                                         max_tokens=args.max_tokens)
    print(result.content)
    return 0


def _request_file(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise SystemExit(f"error: cannot read --request {path}: {exc.strerror}; pass a JSON file that exists")
    except ValueError as exc:
        raise SystemExit(f"error: --request {path} is not JSON ({exc}); pass a decision body, or the sample's request file")


def cmd_invoke(args) -> int:
    from . import examples

    body = _request_file(args.request) if args.request else examples.SUPPORT_ROUTE
    decisions = _endpoint_client(args).decide_any(body)
    for d in decisions:
        print(f"{d.id}: top {d.top} ({d.top_probability:.3f})")
        for oid, p in d.as_dict().items():
            print(f"    {oid:<20} {p:.3f}")
    return 0


def cmd_serve(args) -> int:
    """The real adapter in the foreground (its own process: the client side never imports the server)."""
    import os
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


def cmd_build_image(args) -> int:
    from .builds import build_decision_image

    region = _region(args)
    codebuild, ecr, s3, logs = _clients(region, "codebuild", "ecr", "s3", "logs")
    image = build_decision_image(codebuild, ecr, s3, logs, base_image=args.base_image,
                                 service_role_arn=args.codebuild_role_arn, source_bucket=args.bucket,
                                 dockerfile=args.dockerfile, image_tag=args.image_tag,
                                 repository_name=args.repository, source_prefix=_source_prefix())
    print(image)
    return 0


def cmd_cleanup(args) -> int:
    from .cleanup import delete_endpoint_resources

    (sm,) = _clients(_region(args), "sagemaker")
    result = delete_endpoint_resources(sm, args.name, wait=not args.no_wait)
    print(result)
    return 0


def cmd_running(args) -> int:
    from .cleanup import format_running, running_workshop_endpoints

    (sm,) = _clients(_region(args), "sagemaker")
    print(format_running(running_workshop_endpoints(sm)))
    return 0


def cmd_bench(args) -> int:
    from .bench import load_comparison, run_benchmark

    compare_with = load_comparison(args.compare) if args.compare else None
    report = run_benchmark(
        _endpoint_client(args), args.tasks, limit=args.limit, concurrency=args.concurrency,
        baseline=args.baseline, bias=args.bias, debias=args.debias, calibrate=args.calibrate,
        rotations=args.rotations, study_limit=args.study_limit, label=args.label, compare_with=compare_with,
        schema=args.schema,
        progress=not args.no_progress)
    paths = report.save(args.out)
    print(report.to_markdown())
    print()
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


# -- parser ---------------------------------------------------------------------


def _common(parser, *, region=True):
    if region:
        parser.add_argument("--region", help="AWS region (default: the workshop config's)")


def _model_flags(parser, *, ctx_default: int | None):
    parser.add_argument("--image-uri", required=True, help="image pinned by digest: repo@sha256:... (tags are refused)")
    parser.add_argument("--model-data-url", required=True, help="s3://.../model.tar.gz in the endpoint's region")
    parser.add_argument("--role-arn", required=True, help="SageMaker execution role ARN")
    parser.add_argument("--ctx-size", "--context-size", type=int, default=ctx_default,
                        help=f"llama.cpp context size (default {ctx_default or 'the adapter’s: 8192'})")
    parser.add_argument("--startup-timeout", type=int, default=STARTUP_TIMEOUT_S,
                        help=f"ContainerStartupHealthCheckTimeoutInSeconds (default {STARTUP_TIMEOUT_S})")
    parser.add_argument("--download-timeout", type=int, default=DOWNLOAD_TIMEOUT_S,
                        help=f"ModelDataDownloadTimeoutInSeconds (default {DOWNLOAD_TIMEOUT_S})")
    parser.add_argument("--dry-run", action="store_true", help="print the validated requests, send nothing")
    parser.add_argument("--no-wait", action="store_true", help="return once the endpoint is being created")


def _target_flags(parser):
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint-name", help="SageMaker endpoint name")
    target.add_argument("--url", help="a local adapter's base URL, e.g. http://127.0.0.1:8080")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workshop_lib",
        description="Deploy llama.cpp decision models on Amazon SageMaker AI, or rehearse locally.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_text, description=None):
        sub = commands.add_parser(name, help=help_text, description=description or help_text)
        sub.set_defaults(func=func)
        return sub

    p = add("demo", cmd_demo, "rehearse the workshop locally with the embedded model (no AWS account)",
            "Part 1: package the embedded model, start the real adapter on a local port, send a decision, a "
            "shared-state request and a chat message, then stop the server. Part 2: run the notebooks' local "
            "path (00-07) against the AWS emulator and print one line per notebook. Everything is stopped.")
    p.add_argument("--work-dir", default=".workshop/demo", help="where part 1's package and logs go")
    p.add_argument("--adapter-only", action="store_true", help="run part 1 only")

    p = add("package-model", cmd_package_model, "package the pinned GGUF + tokenizer in CodeBuild",
            "Download the pinned model revision in CodeBuild, verify sizes and sha256 (the build fails on a "
            "mismatch), write model-manifest.json and upload model.tar.gz to --model-s3-uri.")
    _common(p)
    p.add_argument("--bucket", required=True, help=f"artifact bucket for the build source (e.g. {EXAMPLE_BUCKET})")
    p.add_argument("--codebuild-role-arn", required=True, help="CodeBuild service role ARN")
    p.add_argument("--model-s3-uri", required=True,
                   help=f"where model.tar.gz goes, e.g. s3://{EXAMPLE_BUCKET}/semif-llamacpp/")

    p = add("resolve-image", cmd_resolve_image, "pin the llama.cpp DLC (or any ECR image) to its digest")
    _common(p)
    p.add_argument("--variant", choices=("cpu", "cuda"), default="cpu", help="DLC variant (default cpu)")
    p.add_argument("--image-uri", help="a tagged ECR image to pin instead of the DLC")

    p = add("deploy-standard", cmd_deploy_standard, "deploy the llama.cpp DLC as a standard endpoint",
            "Create model, endpoint config and endpoint for the published DLC (OpenAI chat on /invocations).")
    _common(p)
    _model_flags(p, ctx_default=4096)
    p.add_argument("--instance-type", default="ml.c6i.2xlarge", help="instance type (default ml.c6i.2xlarge)")
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: the DLC's)")
    p.add_argument("--name", default="llamacpp-gguf", help="endpoint, config and model name")

    p = add("invoke-standard", cmd_invoke_standard, "send one chat message to an endpoint")
    _common(p)
    _target_flags(p)
    p.add_argument("--message", default="In one sentence: what is a decision model?")
    p.add_argument("--max-tokens", type=int, default=64)

    p = add("build-image", cmd_build_image, "build the decision image FROM the DLC in CodeBuild, push to ECR",
            "Build container/Dockerfile (or Dockerfile.gpu) in CodeBuild with BASE_IMAGE set to the pinned "
            "DLC digest, push it to an immutable ECR repository and print repo@sha256:...")
    _common(p)
    p.add_argument("--bucket", required=True, help="artifact bucket for the build source")
    p.add_argument("--codebuild-role-arn", required=True, help="CodeBuild service role ARN")
    p.add_argument("--base-image", required=True, help="the DLC pinned by digest (see resolve-image)")
    p.add_argument("--dockerfile", default="Dockerfile", choices=("Dockerfile", "Dockerfile.gpu"))
    p.add_argument("--image-tag", help="tag to push (default: cpu-/gpu-<timestamp>)")
    p.add_argument("--repository", default="semif-llamacpp-dlc", help="ECR repository (default semif-llamacpp-dlc)")

    p = add("deploy", cmd_deploy, "deploy the decision image on CPU or on an ordered GPU pool",
            "The published sample's deploy_endpoint.py flags and defaults. CPU: --instance-type and --threads. "
            "GPU: --instance-pool repeated in order of preference (first = priority 1) with --gpu-layers=-1 "
            "(all layers; the default 0 keeps the model on the CPU, and the adapter refuses to start when "
            "layers are asked for and no GPU backend loaded) and --provision-timeout for finding capacity.")
    _common(p)
    _model_flags(p, ctx_default=None)
    placement = p.add_mutually_exclusive_group()
    placement.add_argument("--instance-type", help=f"CPU instance type (default {DEFAULT_DECISION_CPU_TYPE})")
    placement.add_argument("--instance-pool", action="append", metavar="TYPE",
                           help="GPU type, repeat in order (e.g. ml.g6e.xlarge, ml.g6.2xlarge, ml.g5.2xlarge, "
                                "ml.g4dn.2xlarge)")
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: the type's vCPUs)")
    p.add_argument("--gpu-layers", type=int, default=0,
                   help="layers to offload to the GPU: -1 = all (default 0, as the published sample)")
    p.add_argument("--provision-timeout", type=int, default=1200, help="seconds to find pool capacity (300-3600)")
    p.add_argument("--name", default="semif-decision-workflows", help="endpoint, config and model name")

    p = add("invoke", cmd_invoke, "send a decision (or shared-state request) to a decision endpoint")
    _common(p)
    _target_flags(p)
    p.add_argument("--request", help="a JSON file with a decision or shared-state request, in this project's "
                                     "format or the published sample's (example-request.json, "
                                     "example-shared-request.json); default: the README's support-route example")

    p = add("serve", cmd_serve, "run the real decision adapter locally, in the foreground (Ctrl-C stops it)",
            "A local endpoint without AWS: gunicorn + llama.cpp serving /ping and /invocations on this machine, "
            "by default on the embedded model, so invoke --url, bench --url and any HTTP client can use it.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", metavar="GGUF", help="a GGUF file (default: the embedded SmolLM2-135M)")
    source.add_argument("--model-dir", metavar="DIR", help="a directory laid out like /opt/ml/model")
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: llama.cpp's)")

    p = add("bench", cmd_bench, "benchmark a decision endpoint: validity, accuracy, latency, baselines, plots",
            "Send labelled tasks (JevBench JSONL or decision records; default: the packaged set) to a decision "
            "endpoint, sequentially (as the blog) or with --concurrency N clients, and report valid responses, "
            "accuracy by family and type, client p50/p95/max and throughput. Opt-in: a generation baseline "
            "through the chat schema, an option-order test, an order-debiased readout and temperature "
            "calibration. Writes report.json, report.md and PNGs to --out; --compare puts a saved report.json "
            "beside this run (e.g. CPU vs GPU).")
    _common(p)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", "--endpoint-name", dest="endpoint_name", metavar="NAME",
                        help="SageMaker endpoint name")
    target.add_argument("--url", help="a local adapter's base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--tasks", metavar="PATH", help="JSONL task file (default: the packaged task set)")
    p.add_argument("--limit", type=int, metavar="N", help="use N tasks, spread across families")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help="requests in flight for the decision run (default 1: sequential)")
    p.add_argument("--baseline", action="store_true", help="also answer by generation through the chat schema")
    p.add_argument("--bias", action="store_true", help="also send the options reversed; report top-choice flips")
    p.add_argument("--debias", action="store_true",
                   help="also the order-debiased readout (k rotations in one shared-state request); implies --bias")
    p.add_argument("--rotations", type=int, metavar="K", help="rotations for --debias (default: one per option)")
    p.add_argument("--study-limit", type=int, metavar="N",
                   help="run the baseline and order studies on N of the tasks (default: all)")
    p.add_argument("--calibrate", action="store_true",
                   help="fit a temperature on the dev tasks; ECE and Brier before/after on the rest")
    p.add_argument("--compare", metavar="REPORT_JSON", help="a saved report.json to show side by side")
    p.add_argument("--label", default="decision", help="name of this run in tables (e.g. cpu, gpu)")
    p.add_argument("--schema", choices=("decision", "systemone"), default="decision",
                   help="send the tasks as decisions (default) or as Jev /v1/systemone questions")
    p.add_argument("--out", default=".workshop/bench", help="output folder (default .workshop/bench)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = add("cleanup", cmd_cleanup, "delete the named endpoint, its config and model (nothing else)")
    _common(p)
    p.add_argument("--name", required=True, help="the endpoint name (its config and model share it)")
    p.add_argument("--no-wait", action="store_true", help="do not wait until the endpoint is gone")

    p = add("running", cmd_running, "list workshop-tagged endpoints still running, with their age (read-only)")
    _common(p)
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
