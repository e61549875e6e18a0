"""``rehearse_all``: every notebook's steps in order, headless, in local mode (``make demo``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..aws.alarms import alarm_names
from ..client.endpoint import decision as make_decision
from ..client.policy import Policy
from ..config import WorkshopConfig, repo_root
from ..deploy_paths import DECISION_CPU
from ..errors import StepError
from ..evaluation import run_notebook_benchmark
from ..evaluation.markdown import fmt_s
from ..evaluation.throughput import DEFAULT_P95_MS, measure_throughput
from ..examples import CHAT, SHARED_STATE, SUPPORT_ROUTE
from ..local import permissions, rehearsal
from .cleanup import (
    audit_permissions,
    delete_artifacts,
    delete_build_resources,
    delete_codebuild_role,
    delete_endpoints,
    running_endpoints,
    stop_local,
    tagged_endpoints,
)
from .context import Workshop, decision_endpoint, short
from .decision_image import build_decision_image, refuse_mutable_tag
from .deploy import Placement, deploy_decision_cpu, deploy_decision_gpu, deploy_standard, placement
from .endpoint_clients import client
from .operate import UpdateResult, delete_alarms, put_alarms, update_endpoint
from .package import package_model, verify_package
from .scale import (
    autoscale,
    delete_transform_output,
    record_rate,
    record_throughput,
    remove_autoscaling,
    run_transform,
    scaling_target,
    target_source,
)
from .setup import check_environment, ensure_codebuild_role, setup

DEMO_CONCURRENCIES = (1, 2)  # notebook 06 measures 1, 2 and 4 callers; the demo stays short
DEMO_LOAD_S = 2.0  # of load per level


def rehearse_all(work_dir: str | Path | None = None, out: Callable[[str], object] = print) -> int:
    """Run the notebooks' local path (00-08) in this process and print a short summary.

    Uses its own directory (default ``.workshop/rehearsal``) for the config, outputs and
    processes, so it neither reads nor overwrites the notebooks' saved config. Returns 0
    when every step passed; everything it started is stopped before it returns.
    """
    import contextlib

    work = Path(work_dir or repo_root() / ".workshop" / "rehearsal").resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").unlink(missing_ok=True)  # a rehearsal starts as a new participant does
    (work / "outputs.json").unlink(missing_ok=True)
    ws = Workshop(WorkshopConfig.load(work / "config.json").replace(mode="local"), work / "config.json")
    ws.rehearsal = rehearsal.Rehearsal(work / "local")  # its own processes, whatever WORKSHOP_LOCAL_DIR says
    log_path = work / "steps.log"
    summary: list[tuple[str, str, float]] = []
    failed = None
    started = time.perf_counter()
    persona = permissions.persona()
    out(
        f"Local rehearsal of notebooks 00-08 as {persona}: AWS emulated by moto, the standard endpoint served by "
        "llama-server, the decision endpoints by the real adapter"
    )
    try:
        with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):

            def step(label: str, fn: Callable[[], str]) -> None:
                t = time.perf_counter()
                text = fn()
                summary.append((label, text, time.perf_counter() - t))
                print(f"== {label}\n{text}\n", file=log, flush=True)

            def s00() -> str:
                checks = check_environment(ws)
                if not checks.ok:
                    raise StepError(str(checks))
                setup(ws, DECISION_CPU.name, reset=True)
                role = ensure_codebuild_role(ws)
                return (
                    f"checks passed; emulator {ws.rehearsal.emulator_url()}, bucket s3://{ws.config.bucket}; "
                    f"{role.notes[0].split(' (')[0]}"
                )

            def s01() -> str:
                p = package_model(ws, progress=False)
                f = p.manifest["files"][0]
                verify_package(ws)
                return f"{f['path']} {f['size']:,} bytes, sha256 {f['sha256'][:12]}… in emulated S3; verified"

            def s02() -> str:
                c = ws.config
                r = deploy_standard(ws, progress=False)
                assert r.plan is not None  # a deploy that returns made its plan
                reply = client(ws, c.standard_endpoint_name).chat(CHAT["messages"], max_tokens=24)
                return (
                    f"DLC pinned {short(r.plan.image_uri)}; {r.name} {r.status}; chat: {reply.content.strip()[:60]!r}"
                )

            def s03() -> str:
                cpu = build_decision_image(ws, "cpu", progress=False)
                gpu = build_decision_image(ws, "gpu", progress=False)
                refused = "refused" in refuse_mutable_tag(ws, "cpu")
                assert cpu.image_uri is not None and gpu.image_uri is not None  # local mode builds both
                return (
                    f"cpu {short(cpu.image_uri)}, gpu {short(gpu.image_uri)}; tag refused: {refused}; "
                    "docker build not exercised"
                )

            def s04() -> str:
                c = ws.config
                cpu = deploy_decision_cpu(ws, progress=False)
                gpu = deploy_decision_gpu(ws, progress=False)
                placed = placement(ws, c.gpu_endpoint_name)
                assert isinstance(placed, Placement)  # the rehearsal's GPU endpoint is running
                offloaded = placed.offloaded
                return (
                    f"{cpu.name} {cpu.status}; {gpu.name}: pools request validated, CPU stand-in "
                    f"({offloaded} offloaded)"
                )

            def s05() -> str:
                ep = client(ws, decision_endpoint(ws))
                d = ep.decide(SUPPORT_ROUTE)
                batch = ep.decide_batch(SHARED_STATE["id"], SHARED_STATE["state"], SHARED_STATE["questions"])
                outcome = Policy(threshold=0.6, fallback="needs_review").apply(d)
                built = ep.decide(
                    make_decision(
                        "builder-1", SUPPORT_ROUTE["state"], "Is this about money?", {"yes": "Yes", "no": "No"}
                    )
                )
                return (
                    f"{d.id}: top {d.top} {d.top_probability:.2f} -> {outcome.option_id}; "
                    f"shared state: {len(batch)} answers; builder: {built.top}"
                )

            def s06() -> str:
                name = decision_endpoint(ws)
                # notebook 06's defaults: 6 tasks, every study on the first 2
                report = run_notebook_benchmark(client(ws, name), limit=6, study_limit=2, label=name, progress=False)
                saved = report.save(work / "bench")
                record_rate(ws, report, name)  # 07's fallback, as in notebook 06
                # notebook 06's throughput cells, shorter: its sustainable rate sets 07's auto scaling target
                throughput = measure_throughput(
                    client(ws, name), concurrencies=DEMO_CONCURRENCIES, seconds=DEMO_LOAD_S, label=name
                )
                if not throughput.ok:
                    raise StepError(f"throughput: {throughput.problem}")
                record_throughput(ws, throughput.sustainable(DEFAULT_P95_MS), name)
                head = report.summary
                latency = head["client_latency_ms"]
                return (
                    f"{head['valid']}/{head['tasks']} valid, {head['correct']}/{head['tasks']} correct, client p50 "
                    f"{fmt_s(latency['p50'])}, p95 {fmt_s(latency['p95'])}; report {saved['markdown']}; "
                    f"{throughput.summary}; auto scaling target {scaling_target(ws, name):g} invocations per "
                    f"instance per minute ({target_source(ws, name)})"
                )

            def s07() -> str:
                put_alarms(ws)
                update = update_endpoint(ws, progress=False)
                if not update.ok:
                    raise StepError(str(update))
                assert isinstance(update, UpdateResult)  # not a dry run
                d = client(ws, decision_endpoint(ws)).decide(SUPPORT_ROUTE)
                scaled, batch = autoscale(ws), run_transform(ws, progress=False)
                if not (scaled.ok and batch.ok):
                    raise StepError(f"{scaled}\n{batch}")
                return (
                    f"{len(alarm_names(update.plan.endpoint_name))} alarms and a dashboard; "
                    f"{update.rollout.endpoint_name}: {' -> '.join(update.rollout.statuses)} on "
                    f"{update.plan.version} in {update.rollout.seconds:.1f} s; then {d.id}: top {d.top}; "
                    f"auto scaling registered; transform: {len(batch.answers)} decisions answered"
                )

            def s08() -> str:
                c = ws.config
                remove_autoscaling(ws)
                delete_transform_output(ws)
                delete_endpoints(ws, tagged_endpoints(ws))
                delete_alarms(ws)
                delete_build_resources(ws)
                delete_codebuild_role(ws)
                delete_artifacts(ws, c.s3_uri())
                left = running_endpoints(ws)
                audit = audit_permissions(ws)
                assert isinstance(audit, permissions.Audit)  # local mode records the calls
                (work / "permission-audit.txt").write_text(str(audit) + "\n")
                stop_local(ws)
                checked = sum(audit.checked.values())
                return (
                    f"{left}; {ws.rehearsal.format_status()}; {checked} recorded AWS permissions allowed by the "
                    f"three policies ({len(audit.unused)} statements unused locally, see permission-audit.txt)"
                )

            for label, fn in (
                ("00 setup", s00),
                ("01 package model", s01),
                ("02 standard endpoint", s02),
                ("03 decision images", s03),
                ("04 decision endpoints", s04),
                ("05 invoke decisions", s05),
                ("06 benchmark", s06),
                ("07 operate", s07),
                ("08 cleanup", s08),
            ):
                try:
                    step(label, fn)
                except Exception as exc:
                    failed = (label, exc)
                    import traceback

                    traceback.print_exc(file=log)
                    break
    finally:
        ws.rehearsal.stop_all()
    for label, text, seconds in summary:
        out(f"  {label:<22} {seconds:5.1f} s  {text}")
    if failed:
        out(f"  {failed[0]:<22} FAILED: {failed[1]}")
        out(f"  details: {log_path}")
    out(
        "Not exercised locally: the CodeBuild model download, docker build/push, the DLC image itself (this "
        "checkout's llama-server behind nginx stands in where it is built), "
        "GPU pool placement and offload, the endpoint deadlines firing (the emulator keeps the schedules, never runs "
        "them)."
    )
    out(f"Everything started was stopped. Total {time.perf_counter() - started:.1f} s (log: {log_path}).")
    return 1 if failed else 0
