"""What each ``python -m workshop_lib`` command does (``cli`` builds the parser and dispatches here).

Each command builds one ``steps.Workshop`` from the saved config with the flags given on top
(``workshop_for``), calls the step the notebooks call and prints its result (``_show``). A flag left
out is None, so the saved config's value or the step's default applies.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from argparse import Namespace
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from . import demo, examples, steps
from .aws import capture, endpoints, images, instance_types
from .aws.requests_sent import requests_text
from .client.endpoint import EndpointClient
from .config import ENV_VARS, WorkshopConfig, default_path
from .deploy_paths import DECISION_CPU, DECISION_GPU, STANDARD, decision_paths, for_image
from .deploy_paths import deploy_path as path_called
from .errors import InvalidInput
from .evaluation import load_comparison, run_benchmark
from .evaluation.logprobs import url_client
from .evaluation.profiles import describe, write_document
from .evaluation.served import calibrate
from .local.rehearsal import READOUT_WHY, readout_env
from .models import embedded_gguf_path
from .steps import Workshop

EXAMPLE_BUCKET = "amzn-s3-demo-semif-artifacts"

# WorkshopConfig field (the flag's argparse dest) -> its flag, for each setting declared with one
CONFIG_FLAGS = {f.name: f.metadata["flag"] for f in fields(WorkshopConfig) if f.metadata["flag"]}


def _given(**values: Any) -> dict[str, Any]:
    """The values a flag gave; the rest are left to the step's (or builder's) own defaults."""
    return {k: v for k, v in values.items() if v is not None}


def workshop_for(args: Namespace, *, deploy_path: str | None = None, check: bool = True) -> Workshop:
    """The ``steps.Workshop`` a command runs with: the config loaded as the notebooks load it, with the
    flags given over the ``WORKSHOP_*`` variables (so they also decide the mode and its local
    placeholders), and ``--name`` as the endpoint name of ``deploy_path``. The command's own path, if it
    has one, is the config's deploy path for this run: asking for it is choosing it."""
    env = dict(os.environ)
    for name in CONFIG_FLAGS:
        if getattr(args, name, None) is not None:
            env[ENV_VARS[name]] = getattr(args, name)
    if deploy_path and getattr(args, "name", None):
        env[path_called(deploy_path).endpoint_env] = args.name
    path = getattr(args, "config", None)
    config = WorkshopConfig.load(path, env)
    if deploy_path and deploy_path != config.deploy_path:
        config = config.replace(deploy_path=deploy_path)
    if check:
        config.check()
        if config.mode == "aws" and not config.region:
            raise InvalidInput(
                "no AWS region: pass --region, set WORKSHOP_REGION or AWS_REGION, or save one "
                "with `python -m workshop_lib setup --region ...`"
            )
    return Workshop(config, path)


def _show(result: object) -> int:
    print(result)
    return 0


def cmd_demo(args: Namespace) -> int:
    status = demo.run(args.work_dir)
    if status or args.adapter_only:
        return status
    print()
    return steps.rehearse_all()


def cmd_config(args: Namespace) -> int:
    workshop = workshop_for(args, check=False)
    return _show(f"{steps.show_config(workshop)}\nconfig file: {workshop.path}")


def cmd_check(args: Namespace) -> int:
    checks = steps.check_environment(workshop_for(args, check=False))
    print(checks)
    return 0 if checks.ok else 1


def cmd_setup(args: Namespace) -> int:
    return _show(steps.setup(workshop_for(args), **_given(deploy_path=args.deploy_path), reset=args.reset))


def cmd_codebuild_role(args: Namespace) -> int:
    return _show(steps.ensure_codebuild_role(workshop_for(args)))


def cmd_package_model(args: Namespace) -> int:
    workshop = workshop_for(args)
    if args.model_s3_uri:  # refused before anything is created: the CodeBuild role writes only the model folder
        workshop.config.check_model_uri(args.model_s3_uri, "--model-s3-uri")
    return _show(steps.package_model(workshop, **_given(model_s3_uri=args.model_s3_uri, calibration=args.calibration)))


def cmd_verify_package(args: Namespace) -> int:
    return _show(steps.verify_package(workshop_for(args), args.model_data_url))


def cmd_resolve_image(args: Namespace) -> int:
    """The digest alone on stdout (for ``$(...)``); what was resolved, and how, on stderr."""
    workshop = workshop_for(args)
    if args.image_uri:
        return _show(images.resolve_digest(workshop.clients.ecr, images.parse_image_uri(args.image_uri)).uri)
    with contextlib.redirect_stdout(sys.stderr):
        pinned = steps.resolve_dlc(workshop, **_given(variant=args.variant), follow_tag=args.follow_tag)
    return _show(pinned)


def cmd_build_image(args: Namespace) -> int:
    by_file = next((p for p in decision_paths() if p.dockerfile == args.dockerfile), None)
    variant = by_file.image_variant if by_file and by_file.gpu else args.variant  # the sample's Dockerfile.gpu
    if by_file and variant and by_file.image_variant != variant:
        wanted = for_image(variant)
        raise InvalidInput(
            f"--dockerfile {by_file.dockerfile} is the {by_file.label} image; the {wanted.label} one is "
            f"{wanted.dockerfile} (--variant {variant})"
        )
    path = for_image(variant) if variant else DECISION_CPU
    return _show(
        steps.build_decision_image(
            workshop_for(args, deploy_path=path.name),
            **_given(variant=variant),
            **_given(base_image=args.base_image, image_tag=args.image_tag),
        )
    )


def _deploy(args: Namespace, path: str, **settings: Any) -> int:
    """Deploy the spec the flags give with the step the notebooks call, or with --dry-run print the
    requests it would send (``steps.deploy_plan``, which sends, prints and writes nothing) and send nothing."""
    spec = steps.DeploySpec.of(
        path,
        image_uri=args.image_uri,
        model_data_url=args.model_data_url,
        **_given(
            startup_timeout_s=args.startup_timeout,
            download_timeout_s=args.download_timeout,
            ctx_size=args.ctx_size,
            threads=args.threads,
            **settings,
        ),
    )
    workshop = workshop_for(args, deploy_path=path)
    if args.dry_run:
        plan = steps.deploy_plan(workshop, spec)
        print(f"instances: {plan.placement}", file=sys.stderr)  # stdout is the JSON alone
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        return _show(plan.to_json())
    return _show(steps.deploy_endpoint(workshop, spec, wait=not args.no_wait))


def cmd_deploy_standard(args: Namespace) -> int:
    return _deploy(args, STANDARD.name, instance_type=args.instance_type)


def cmd_deploy(args: Namespace) -> int:
    """The sample's deploy_endpoint.py: a CPU type, one GPU type, or ordered GPU pools."""
    pools = args.instance_pool or (
        [args.instance_type] if args.instance_type and instance_types.is_gpu_instance(args.instance_type) else None
    )
    if pools:
        return _deploy(
            args,
            DECISION_GPU.name,
            pools=tuple(pools),
            n_gpu_layers=args.gpu_layers,
            provision_timeout_s=args.provision_timeout,
        )
    if args.gpu_layers:
        raise InvalidInput(
            f"--gpu-layers {args.gpu_layers} needs a GPU instance; "
            f"{args.instance_type or endpoints.DECISION_CPU_INSTANCE} has none (pass GPU types "
            "with --instance-pool)"
        )
    return _deploy(args, DECISION_CPU.name, instance_type=args.instance_type)


def cmd_extend(args: Namespace) -> int:
    result = steps.extend_deadline(workshop_for(args), args.name, args.hours)
    print(result)
    return 0 if result.ok else 1


def cmd_deadline(args: Namespace) -> int:
    return _show(steps.deadline_text(workshop_for(args), args.name))


def cmd_alarms(args: Namespace) -> int:
    workshop = workshop_for(args)
    print(
        steps.put_alarms(workshop, args.name, **_given(latency_p95_ms=args.latency_p95_ms, errors_5xx=args.errors_5xx))
    )
    return _show(steps.alarm_states(workshop, args.name))


def cmd_update(args: Namespace) -> int:
    result = steps.update_endpoint(
        workshop_for(args),
        args.name,
        model_data_url=args.model_data_url,
        image_uri=args.image_uri,
        bake_s=args.bake,
        ctx_size=args.ctx_size,
        threads=args.threads,
        dry_run=args.dry_run,
        **_given(routing=args.routing),
    )
    print(result)
    return 0 if result.ok else 1


def cmd_delete_alarms(args: Namespace) -> int:
    return _show(steps.delete_alarms(workshop_for(args), args.name))


def _with_requests(result: object, show: bool) -> int:
    """Print a step's result, then (``--show-requests``) the AWS requests it sent."""
    print(result)
    sent = getattr(result, "requests", None)
    if show and sent:
        print("\nrequests sent:\n" + requests_text(sent))
    return 0 if getattr(result, "ok", True) else 1


def cmd_autoscale(args: Namespace) -> int:
    workshop = workshop_for(args)
    if args.remove:
        names = [args.name] if args.name else None
        return _with_requests(steps.remove_autoscaling(workshop, names), args.show_requests)
    return _with_requests(
        steps.autoscale(
            workshop,
            args.name,
            invocations_per_instance=args.target,
            **_given(min_instances=args.min, max_instances=args.max),
        ),
        args.show_requests,
    )


def cmd_scale_to_zero(args: Namespace) -> int:
    workshop = workshop_for(args)
    if args.remove:
        return _with_requests(steps.remove_scale_to_zero(workshop, args.name), args.show_requests)
    options = _given(
        instance_type=args.instance_type,
        max_instances=args.max_instances,
        image_uri=args.image_uri,
        model_data_url=args.model_data_url,
    )
    if args.dry_run:
        plan = steps.zero_plan(workshop, args.name, **options)
        why = steps.scale_to_zero_refusal(workshop, plan.instance_type)
        if why:
            print(f"note: not deployable here: {why}", file=sys.stderr)
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        sent = steps.zero_requests(workshop, plan)
        return _show(json.dumps([{"operation": f"{s} {o}", "request": r} for s, o, r in sent], indent=2))
    status = 0
    if not args.show_only:
        status |= _with_requests(steps.deploy_scale_to_zero(workshop, args.name, **options), args.show_requests)
    if not args.deploy_only:
        status |= _with_requests(steps.show_scale_to_zero(workshop, args.name), args.show_requests)
    return status


def cmd_transform(args: Namespace) -> int:
    workshop = workshop_for(args)
    if args.delete_output:
        return _with_requests(steps.delete_transform_output(workshop), args.show_requests)
    decisions = None
    if args.decisions:
        decisions = [
            json.loads(line) for line in Path(args.decisions).read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    return _with_requests(
        steps.run_transform(
            workshop, args.name, decisions, instance_type=args.instance_type, progress=not args.no_progress
        ),
        args.show_requests,
    )


def cmd_placement(args: Namespace) -> int:
    return _show(steps.placement(workshop_for(args), args.name))


def _endpoint_client(args: Namespace, default_name: Callable[[Workshop], str]) -> EndpointClient:
    """A client for --url (a local adapter: no config needed), else for the named endpoint, by default
    ``default_name(workshop)``, through the step the notebooks use (SageMaker or the local rehearsal)."""
    if args.url:
        return EndpointClient.local(args.url)
    workshop = workshop_for(args)
    client: EndpointClient = steps.client(workshop, args.endpoint_name or default_name(workshop))
    return client


def cmd_invoke_standard(args: Namespace) -> int:
    chat: Mapping[str, Any] = examples.CHAT
    messages = [{"role": "user", "content": args.message}] if args.message else chat["messages"]
    client = _endpoint_client(args, lambda workshop: workshop.config.standard_endpoint_name)
    result = client.chat(messages, max_tokens=args.max_tokens or chat["max_tokens"])
    return _show(result.content)


def _request_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise SystemExit(f"error: cannot read --request {path}: {exc.strerror}; pass a JSON file that exists") from exc
    except ValueError as exc:
        raise SystemExit(
            f"error: --request {path} is not JSON ({exc}); pass a decision body, or the sample's request file"
        ) from exc


def cmd_invoke(args: Namespace) -> int:
    body = _request_file(args.request) if args.request else examples.SUPPORT_ROUTE
    decisions = _endpoint_client(args, steps.decision_endpoint).decide_any(body)
    for d in decisions:
        print(f"{d.id}: top {d.top} ({d.top_probability:.3f})")
        for oid, p in d.as_dict().items():
            print(f"    {oid:<20} {p:.3f}")
    return 0


def cmd_bench(args: Namespace) -> int:
    standard = None
    if "logprobs" in (args.baseline or ()):
        if not args.standard_url and args.url:
            raise SystemExit(
                "error: --baseline logprobs asks the standard endpoint (llama-server); with --url give "
                "its URL too: --standard-url http://127.0.0.1:PORT/v1/chat/completions"
            )
        if args.standard_url:
            standard = url_client(args.standard_url)
        else:
            workshop = workshop_for(args)
            standard = steps.client(workshop, workshop.config.standard_endpoint_name)
    report = run_benchmark(
        _endpoint_client(args, steps.decision_endpoint),
        args.tasks,
        progress=not args.no_progress,
        **_given(
            limit=args.limit,
            concurrency=args.concurrency,
            study_limit=args.study_limit,
            label=args.label,
            schema=args.schema,
            compare_with=load_comparison(args.compare) if args.compare else None,
        ),
        baseline=args.baseline or False,
        standard=standard,
        bias=args.bias,
        debias=args.debias,
        calibrate=args.calibrate,
    )
    paths = report.save(args.out or Path(args.config or default_path()).parent / "bench")
    print(report.to_markdown())
    print()
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def cmd_calibrate(args: Namespace) -> int:
    client = None if args.run else _endpoint_client(args, steps.decision_endpoint)
    doc = calibrate(
        client,
        args.tasks,
        run=args.run,
        progress=not args.no_progress,
        **_given(order=args.order, limit=args.limit, alpha=args.alpha, readout=args.readout),
    )
    path = write_document(doc, args.out or Path(args.config or default_path()).parent / "calibration.json")
    print(describe(doc))
    chosen = (
        "as asked"
        if args.readout
        else ("the one the saved run was read with" if args.run else "the one the endpoint serves")
    )
    print(
        f"fitted for the {doc['readout']} readout ({chosen}): the adapter applies it to {doc['readout']} answers only"
    )
    print(
        f"written: {path}; the next package carries it with `python -m workshop_lib package-model --calibration {path}`"
    )
    return 0


def cmd_captured(args: Namespace) -> int:
    workshop = workshop_for(args)
    name = args.name or steps.decision_endpoint(workshop)
    clients = workshop.clients
    found = capture.collect(
        clients.sm, clients.s3, name, limit=args.limit, default_destination=capture.destination_uri(workshop.config)
    )
    path = capture.write_tasks(found.tasks, args.out or workshop.folder("captured") / f"{name}.jsonl")
    print(found)
    print(
        f'written: {path}; fill in each line\'s "expected" (one of its labels), then `python -m workshop_lib '
        f"calibrate --tasks {path}` fits from them"
    )
    return 0


def cmd_cleanup(args: Namespace) -> int:
    workshop = workshop_for(args)
    names = args.name or steps.tagged_endpoints(workshop)  # the config's, and any other carrying the tag
    return _show(steps.delete_endpoints(workshop, names, wait=not args.no_wait))


def cmd_delete_builds(args: Namespace) -> int:
    return _show(steps.delete_build_resources(workshop_for(args)))


def cmd_delete_codebuild_role(args: Namespace) -> int:
    return _show(steps.delete_codebuild_role(workshop_for(args)))


def cmd_delete_deadline_role(args: Namespace) -> int:
    return _show(steps.delete_deadline_role(workshop_for(args)))


def cmd_delete_artifacts(args: Namespace) -> int:
    workshop = workshop_for(args)
    return _show(steps.delete_artifacts(workshop, workshop.config.s3_uri(), delete_bucket=args.delete_bucket))


def cmd_running(args: Namespace) -> int:
    return _show(steps.running_endpoints(workshop_for(args)))


def cmd_audit(args: Namespace) -> int:
    return _show(steps.audit_permissions(workshop_for(args)))


def cmd_stop_local(args: Namespace) -> int:
    return _show(steps.stop_local(workshop_for(args, check=False)))


def cmd_serve(args: Namespace) -> int:
    """The real adapter in the foreground (its own process: the client side never imports the server)."""
    import signal
    import subprocess

    command = [sys.executable, "-m", "decision_adapter.serve", "--host", args.host, "--port", str(args.port)]
    env = dict(os.environ)
    if args.model_dir:
        command += ["--model-dir", args.model_dir]
    else:
        command += ["--model", args.model or str(embedded_gguf_path())]
    if args.threads:
        command += ["--threads", str(args.threads)]
    print(f"Serving on http://{args.host}:{args.port} (POST /invocations, GET /ping); Ctrl-C stops it.", flush=True)
    added = {} if args.model_dir or args.model else readout_env(env)  # the embedded model: as every local endpoint
    if added:
        env.update(added)
        print(f"  {READOUT_WHY}", flush=True)
    process = subprocess.Popen(command, env=env)
    try:
        return process.wait()
    except KeyboardInterrupt:  # the terminal sent SIGINT to the adapter too; let gunicorn finish
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            return process.wait()
