"""``rehearse_all``: every notebook's steps in order, headless, in local mode (``make demo``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .. import builds, rehearsal
from ..config import WorkshopConfig, repo_root
from .context import StepError, _CLIENTS, _short
from .setup import check_environment, ensure_codebuild_role, setup
from .package import package_model, verify_package
from .decision_image import build_decision_image, refuse_mutable_tag
from .deploy import deploy_decision_cpu, deploy_decision_gpu, deploy_standard, placement
from .invoke import client, decision_endpoint
from .cleanup import (audit_permissions, delete_artifacts, delete_build_resources, delete_codebuild_role,
                      delete_endpoints, running_endpoints, stop_local)


def rehearse_all(work_dir: str | Path | None = None, out=print) -> int:
    """Run the notebooks' local path (00-07) in this process and print a short summary.

    Uses its own directory (default ``.workshop/rehearsal``) for the config, outputs and
    processes, so it neither reads nor overwrites the notebooks' saved config. Returns 0
    when every step passed; everything it started is stopped before it returns.
    """
    import contextlib

    from ..bench import run_notebook_benchmark
    from ..bench.report import fmt_s
    from ..client import decision as make_decision
    from ..decisions import Policy
    from ..examples import CHAT, SHARED_STATE, SUPPORT_ROUTE

    work = Path(work_dir or repo_root() / ".workshop" / "rehearsal").resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").unlink(missing_ok=True)  # a rehearsal starts as a new participant does
    saved_env = {k: os.environ.get(k) for k in ("WORKSHOP_CONFIG", "WORKSHOP_LOCAL_DIR", "WORKSHOP_MODE")}
    os.environ.update(WORKSHOP_CONFIG=str(work / "config.json"), WORKSHOP_LOCAL_DIR=str(work / "local"),
                      WORKSHOP_MODE="local")
    log_path = work / "steps.log"
    summary: list[tuple[str, str, float]] = []
    failed = None
    started = time.perf_counter()
    out("Local rehearsal of notebooks 00-07: AWS emulated by moto, endpoints served by the real adapter")
    try:
        with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            def step(label, fn):
                t = time.perf_counter()
                text = fn()
                summary.append((label, text, time.perf_counter() - t))
                print(f"== {label}\n{text}\n", file=log, flush=True)

            config = WorkshopConfig.load()
            box: dict = {}

            def s00():
                checks = check_environment(config)
                if not checks.ok:
                    raise StepError(str(checks))
                role = ensure_codebuild_role(setup(config, "decision-cpu", reset=True).config)
                box["config"] = role.config
                return (f"checks passed; emulator {rehearsal.emulator_url()}, bucket s3://{box['config'].bucket}; "
                        f"{role.notes[0].split(' (')[0]}")

            def s01():
                c = box["config"]
                p = package_model(c, progress=False)
                f = p.manifest["files"][0]
                verify_package(c)
                return f"{f['path']} {f['size']:,} bytes, sha256 {f['sha256'][:12]}… in emulated S3; verified"

            def s02():
                c = box["config"]
                r = deploy_standard(c, progress=False)
                reply = client(c, c.standard_endpoint_name).chat(CHAT["messages"], max_tokens=24)
                return (f"DLC pinned {_short(r.plan.image_uri)}; {r.name} {r.status}; chat: "
                        f"{reply.content.strip()[:60]!r}")

            def s03():
                c = box["config"]
                cpu = build_decision_image(c, "cpu", progress=False)
                gpu = build_decision_image(c, "gpu", progress=False)
                refused = "refused" in refuse_mutable_tag(c, "cpu")
                return (f"cpu {_short(cpu.image_uri)}, gpu {_short(gpu.image_uri)}; tag refused: {refused}; "
                        "docker build not exercised")

            def s04():
                c = box["config"]
                cpu = deploy_decision_cpu(c, progress=False)
                gpu = deploy_decision_gpu(c, progress=False)
                offloaded = placement(c, c.gpu_endpoint_name).offloaded
                return (f"{cpu.name} {cpu.status}; {gpu.name}: pools request validated, CPU stand-in "
                        f"({offloaded} offloaded)")

            def s05():
                c = box["config"]
                ep = client(c, decision_endpoint(c))
                d = ep.decide(SUPPORT_ROUTE)
                batch = ep.decide_batch(SHARED_STATE["id"], SHARED_STATE["state"], SHARED_STATE["questions"])
                outcome = Policy(threshold=0.6, fallback="needs_review").apply(d)
                built = ep.decide(make_decision("builder-1", SUPPORT_ROUTE["state"], "Is this about money?",
                                                {"yes": "Yes", "no": "No"}))
                return (f"{d.id}: top {d.top} {d.top_probability:.2f} -> {outcome.option_id}; "
                        f"shared state: {len(batch)} answers; builder: {built.top}")

            def s06():
                c = box["config"]
                name = decision_endpoint(c)
                # notebook 06's defaults: 6 tasks, every study on the first 2
                report = run_notebook_benchmark(client(c, name), limit=6, study_limit=2, label=name, progress=False)
                saved = report.save(work / "bench")
                head = report.summary
                latency = head["client_latency_ms"]
                return (f"{head['valid']}/{head['tasks']} valid, {head['correct']}/{head['tasks']} correct, client p50 "
                        f"{fmt_s(latency['p50'])}, p95 {fmt_s(latency['p95'])}; report {saved['markdown']}")

            def s07():
                c = box["config"]
                delete_endpoints(c, (c.standard_endpoint_name, c.cpu_endpoint_name, c.gpu_endpoint_name))
                delete_build_resources(c, [builds.MODEL_PACKAGE_PROJECT, builds.IMAGE_BUILD_PROJECT],
                                       c.ecr_repository)
                delete_codebuild_role(c)
                delete_artifacts(c, c.s3_uri())
                left = running_endpoints(c)
                audit = audit_permissions(c)
                (work / "permission-audit.txt").write_text(str(audit) + "\n")
                stop_local(c)
                checked = sum(audit.checked.values())
                return (f"{left}; {rehearsal.format_status()}; {checked} recorded AWS permissions allowed by the "
                        f"three policies ({len(audit.unused)} statements unused locally, see permission-audit.txt)")

            for label, fn in (("00 setup", s00), ("01 package model", s01), ("02 standard endpoint", s02),
                              ("03 decision images", s03), ("04 decision endpoints", s04),
                              ("05 invoke decisions", s05), ("06 benchmark", s06), ("07 cleanup", s07)):
                try:
                    step(label, fn)
                except Exception as exc:  # noqa: BLE001 - reported in the summary, details in the log
                    failed = (label, exc)
                    import traceback

                    traceback.print_exc(file=log)
                    break
    finally:
        rehearsal.stop_all()
        _CLIENTS.clear()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    for label, text, seconds in summary:
        out(f"  {label:<22} {seconds:5.1f} s  {text}")
    if failed:
        out(f"  {failed[0]:<22} FAILED: {failed[1]}")
        out(f"  details: {log_path}")
    out("Not exercised locally: the CodeBuild model download, docker build/push, the DLC's llama-server, "
        "GPU pool placement and offload.")
    out(f"Everything started was stopped. Total {time.perf_counter() - started:.1f} s (log: {log_path}).")
    return 1 if failed else 0
