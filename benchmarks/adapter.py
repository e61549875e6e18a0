"""Adapter benchmark: ``python -m benchmarks.adapter [--tasks FILE.jsonl]`` (or ``make bench``).

In one process and one run, on the embedded model with 2 threads, for each prefix mode
(``trim``, then ``restore``):

1. the tasks (the packaged set, or a JSONL file of tasks) sent one at a time to a real adapter
   over HTTP: decision latency p50/p95, and the same tasks through the generation baseline
   (chat, temperature 0) on the same server;
2. the same tasks through an in-process engine in the same order, which says how many tokens
   each decision really evaluated (the server does not say: that would tell a caller what the
   previous caller sent) and how long llama.cpp itself takes for that many tokens, measured
   on plain token runs of those lengths; evaluation time over HTTP is compared with that;
3. non-model time per request: client latency minus the server's evaluation time;
4. k = 2, 4, 8 questions on one ~400-token state, one shared-state request, against one
   decision on a state of the same length;
5. the worker's peak RSS after all of that;
6. the order modes (``as_given``, ``prior``, ``rotations``) on the same tasks, options as declared and
   reversed, at temperature 1 (workshop_lib/evaluation/order_study.py): accuracy, flips under reversal,
   mean ``order_sensitivity``, p50 against ``as_given`` with the tokens each evaluates, rotations'
   extra time against what their extra tokens cost at the as_given answers' own time per token
   evaluated (step 2's engine shows the head the server keeps) and at llama.cpp's rate on plain token runs,
   ECE and NLL before and after the fitted calibration on the held-out split, and risk/coverage
   over ``min_answer_mass`` thresholds;
7. the readouts (``letters``, ``cloze``) on the same tasks, options as declared and reversed, at
   temperature 1 (workshop_lib/evaluation/readout_study.py): accuracy against chance, flips under
   reversal, a cloze decision's time against what its evaluated tokens cost at llama.cpp's rate on
   plain token runs (step 2), and held-out ECE/NLL before and after each readout's own fitted profile
   and its prediction sets (``--readouts-only`` runs step 2's engine for the rate, then this alone);
8. then (unless ``--no-llama-server``) benchmarks/llama_server.py: the adapter against llama-server, ending
   with the concurrency table (C = 1, 2, 4, 8 callers at once; benchmarks/concurrency.py).

It prints figures and target verdicts and asserts nothing (this machine is shared and noisy,
so speed is reported, not tested). Every server it starts is stopped before it returns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import llama_server, llama_server_report
from benchmarks.servers import find_llama_server, timed_post
from benchmarks.workload import shared, single, ticket
from decision_adapter import runtime
from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.engine import Engine
from decision_adapter.model_files import locate_model
from decision_adapter.settings import load_settings
from workshop_lib.client import EndpointClient
from workshop_lib.demo import prepare_model_dir
from workshop_lib.evaluation.baseline import run_generation_baseline
from workshop_lib.evaluation.order_study import RATE_SOURCES, measure_order_modes, per_token_ms, rotation_cost
from workshop_lib.evaluation.profiles import describe
from workshop_lib.evaluation.readout_study import measure_readouts
from workshop_lib.evaluation.report import percentile
from workshop_lib.evaluation.tasks import load_tasks
from workshop_lib.local import AdapterProcess

THREADS = 2
CTX = 4096  # the standard DLC's default; --context changes it
MODES = ("trim", "restore")
TARGETS = {
    "p50_over_generation": 0.5,
    "eval_over_in_process": 1.1,
    "non_model_ms": 3.0,
    "k8": 1.35,
    "rss_mib": 260,
    "rotations_flips": 0.10,
    "prior_flips_over_as_given": 0.5,
    "prior_p50": 1.05,
    "rotation_cost": 1.05,
    "set_coverage_points": 0.05,
    "cloze_over_chance": 1.5,
    "cloze_flips": 0,
    "cloze_cost": 1.2,
}


def peak_rss_bytes(arbiter_pid: int) -> int:
    """VmHWM of the gunicorn worker(s) under the arbiter (the process that holds the model)."""
    peak = 0
    children = Path(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children").read_text().split()
    for pid in [arbiter_pid, *map(int, children)]:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) * 1024)
    return peak


def eval_cost(engine: Engine, lengths) -> tuple[list[int], list[float]]:
    """llama.cpp's own time to evaluate n tokens from an empty context, at a few lengths (best of 3)."""
    tokens = engine.model.tokenize(" ".join(ticket(90_000 + i, 20) for i in range(3)))
    xs = sorted({max(2, min(int(v), len(tokens))) for v in lengths})
    ys = []
    for n in xs:
        best = float("inf")
        for _ in range(3):
            engine.start_afresh()
            start = time.perf_counter()
            engine.llm.eval(tokens[:n])
            best = min(best, (time.perf_counter() - start) * 1000.0)
        ys.append(best)
    engine.start_afresh()
    return xs, ys


def in_process(model_dir: Path, mode: str, bodies: list[dict], context: int = CTX) -> dict:
    """Tokens evaluated per decision and llama.cpp's own rate, from an engine fed the same requests."""
    settings = load_settings(
        {
            "SM_MODEL_DIR": str(model_dir),
            "SM_LLAMA_CPP_THREADS": str(THREADS),
            "SM_LLAMA_CPP_CTX_SIZE": str(context),
            "DECISION_ADAPTER_PREFIX_REUSE": mode,
        }
    )
    engine = Engine(settings, locate_model(model_dir))
    engine.prove()  # as the worker does before it says ready
    evaluated, read, prepare_ms = [], [], []
    for body in bodies:
        before = engine.context.tokens_evaluated
        results, timing = own.decide(engine, parse_decision(body))
        evaluated.append(engine.context.tokens_evaluated - before)
        read.append(results[0].input_tokens)
        prepare_ms.append(timing["tokenize_ms"])
    cost = eval_cost(engine, [percentile(evaluated, q) for q in (0, 25, 50, 75, 100)])
    info = {"runtime": engine.model.runtime, "file": engine.info["file"]}
    del engine
    # The head kept between requests: read but not evaluated by all but the first decision.
    head = statistics.mode(r - e for r, e in zip(read, evaluated))
    return {"evaluated": evaluated, "head_tokens": head, "prepare_ms": prepare_ms, "cost": cost, **info}


def serve(model_dir: Path, mode: str, tasks, work: Path, local: dict, context: int = CTX) -> dict:
    bodies = [t.request() for t in tasks]
    with AdapterProcess(
        model_dir,
        log_path=work / f"adapter-{mode}.log",
        threads=THREADS,
        env={"SM_LLAMA_CPP_CTX_SIZE": str(context), "DECISION_ADAPTER_PREFIX_REUSE": mode},
    ) as server:
        url = server.url + "/invocations"
        latency, eval_ms, non_model = [], [], []
        for body in bodies:
            elapsed, reply = timed_post(url, body)
            latency.append(elapsed)
            eval_ms.append(reply["result"]["timing"]["evaluate_ms"])
            non_model.append(elapsed - eval_ms[-1])
        floor = np.interp(local["evaluated"], *local["cost"])  # llama.cpp's own time for those tokens
        generation = run_generation_baseline(EndpointClient.local(server.url), tasks, progress=False)
        gen_ms = [r.client_latency_ms for r in generation.results if r.client_latency_ms is not None]
        one = statistics.median(timed_post(url, single(500 + i))[0] for i in range(5))
        k_rows = []
        for k in (2, 4, 8):
            ms = statistics.median(timed_post(url, shared(600 + 10 * k + i, k))[0] for i in range(3))
            k_rows.append({"k": k, "ms": ms, "ratio": ms / one})
        rss = peak_rss_bytes(server.process.pid)
    return {
        "mode": mode,
        "tasks": len(bodies),
        "evaluated_mean": statistics.mean(local["evaluated"]),
        "p50_ms": statistics.median(latency),
        "p95_ms": percentile(latency, 95),
        "generation_p50_ms": statistics.median(gen_ms),
        "eval_over_in_process_p50": statistics.median(float(e / f) for e, f in zip(eval_ms, floor)),
        "prepare_ms_p50": statistics.median(local["prepare_ms"]),
        "non_model_ms_p50": statistics.median(non_model),
        "one_decision_ms": one,
        "k": k_rows,
        "peak_rss_mib": rss / 2**20,
    }


def order_modes(model_dir: Path, tasks, work: Path, local: dict | None, context: int = CTX) -> dict:
    """The order modes side by side on one adapter with the default settings (order_study). Rotations' extra
    tokens are priced at the as_given answers' own time per token evaluated (``local``, fed the same requests,
    shows how long a head the server keeps between them), and for comparison at llama.cpp's rate on plain
    token runs (step 2)."""
    head = local["head_tokens"] if local else None
    with AdapterProcess(
        model_dir,
        log_path=work / "adapter-order-modes.log",
        threads=THREADS,
        env={"SM_LLAMA_CPP_CTX_SIZE": str(context)},
    ) as server:
        study = measure_order_modes(EndpointClient.local(server.url), tasks, head_tokens=head, progress=False)
    doc = study.calibration("as_given")
    out = {"figures": study.figures, "text": study.text(), "calibration": describe(doc) if doc else None}
    if local and "rotations" in study.by_mode and "as_given" in study.by_mode:
        out["rotation_cost_at_llama_cpp_rate"] = rotation_cost(
            study.by_mode["as_given"][0].results, study.by_mode["rotations"][0].results, per_token_ms(*local["cost"])
        )
    return out


def readouts(model_dir: Path, tasks, work: Path, local: dict | None, context: int = CTX) -> dict:
    """The readouts side by side on one adapter with the default settings (readout_study); each readout's
    p50 is priced at llama.cpp's own rate per token on plain token runs (``local``'s step 2)."""
    with AdapterProcess(
        model_dir, log_path=work / "adapter-readouts.log", threads=THREADS, env={"SM_LLAMA_CPP_CTX_SIZE": str(context)}
    ) as server:
        study = measure_readouts(EndpointClient.local(server.url), tasks, progress=False)
    figures = study.figures
    rate = per_token_ms(*local["cost"]) if local else None
    for f in figures.values():
        f["tokens_cost_ms"] = rate * f["tokens_mean"] if rate and f.get("tokens_mean") else None
        f["cost_ratio"] = (
            f["p50_ms"] / f["tokens_cost_ms"] if f["tokens_cost_ms"] and f.get("p50_ms") is not None else None
        )
    return {"figures": figures, "chance": study.chance, "rate_ms_per_token": rate, "text": study.text()}


def run(
    task_file: Path | None,
    limit: int | None,
    out: Path | None,
    context: int = CTX,
    *,
    orders_only: bool = False,
    readouts_only: bool = False,
) -> dict:
    work = Path(tempfile.mkdtemp(prefix="adapter-bench-"))
    model_dir, _ = prepare_model_dir(work)
    tasks = load_tasks(task_file, limit=limit)
    figures: dict = {
        "threads": THREADS,
        "context": context,
        "tasks": str(task_file or "packaged"),
        "host_cpu_flags": list(runtime.host_cpu_flags()),
        "modes": [],
    }
    local = None
    for mode in MODES[:1] if orders_only or readouts_only else MODES:
        local = in_process(model_dir, mode, [t.request() for t in tasks], context)
        figures.update(
            model=local["file"],
            llama_cpp_features=list(local["runtime"].cpu_features),
            extra_buffers=local["runtime"].extra_buffers_reason,
            in_process_eval_ms={str(n): ms for n, ms in zip(*local["cost"])},
        )
        if not (orders_only or readouts_only):
            figures["modes"].append(serve(model_dir, mode, tasks, work, local, context))
    if not readouts_only:
        figures["order_modes"] = order_modes(model_dir, tasks, work, local, context)
    if not orders_only:
        figures["readouts"] = readouts(model_dir, tasks, work, local, context)
    if out:
        out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def report(f: dict) -> str:
    ok = lambda good: "meets" if good else "MISSES"  # noqa: E731
    t = TARGETS
    lines = [
        f"Adapter benchmark: {f['model']}, {f['threads']} threads, context {f['context']}, tasks: {f['tasks']}",
        f"CPU reports: {' '.join(f['host_cpu_flags']) or '(no /proc/cpuinfo)'}; llama.cpp built for "
        f"{' '.join(f['llama_cpp_features'])}; extra buffer types {f['extra_buffers']}",
        "llama.cpp in-process, tokens: ms (last mode's run): "
        + ", ".join(f"{n}: {ms:.0f}" for n, ms in f["in_process_eval_ms"].items()),
        "",
    ]
    for m in f["modes"]:
        ratio = m["p50_ms"] / m["generation_p50_ms"]
        lines += [
            f"prefix reuse: {m['mode']} ({m['tasks']} decisions, one at a time, over HTTP)",
            f"  tokens evaluated per decision, mean     {m['evaluated_mean']:8.1f}",
            f"  decision p50 / p95                      {m['p50_ms']:8.1f} / {m['p95_ms']:.1f} ms",
            f"  generation baseline p50                 {m['generation_p50_ms']:8.1f} ms;  decision p50 is "
            f"{ratio:.2f}x ({ok(ratio <= t['p50_over_generation'])} <= {t['p50_over_generation']})",
            f"  evaluation / in-process, p50            {m['eval_over_in_process_p50']:8.2f}x "
            f"({ok(m['eval_over_in_process_p50'] <= t['eval_over_in_process'])} <= "
            f"{t['eval_over_in_process']})",
            f"  non-model time per request, p50         {m['non_model_ms_p50']:8.1f} ms "
            f"({ok(m['non_model_ms_p50'] <= t['non_model_ms'])} <= {t['non_model_ms']:g} ms; of it "
            f"tokenizing and rendering {m['prepare_ms_p50']:.2f} ms)",
            f"  one decision on a ~400-token state      {m['one_decision_ms']:8.1f} ms; k questions on one: "
            + ", ".join(f"k={r['k']} {r['ratio']:.2f}x" for r in m["k"])
            + f" ({ok(m['k'][-1]['ratio'] <= t['k8'])} k=8 <= {t['k8']})",
            f"  worker peak RSS                         {m['peak_rss_mib']:8.0f} MiB "
            f"({ok(m['peak_rss_mib'] <= t['rss_mib'])} <= {t['rss_mib']} MiB)",
            "",
        ]
    if f.get("order_modes"):
        lines += [
            "order modes (temperature 1, one decision at a time over HTTP; flips: options reversed)",
            f["order_modes"]["text"],
            "",
            *order_verdicts(f["order_modes"]["figures"]),
        ]
        floor = f["order_modes"].get("rotation_cost_at_llama_cpp_rate") or {}
        if floor.get("ratio") is not None:
            lines.append(
                f"  (at llama.cpp's {floor['rate_ms_per_token']:.3f} ms/token on plain token runs, best of 3, "
                f"the same extra time is {floor['ratio']:.2f}x)"
            )
        lines.append("")
        if f["order_modes"]["calibration"]:
            lines += [
                "the calibration file the next package would carry (as_given):",
                f["order_modes"]["calibration"],
                "",
            ]
    if f.get("readouts"):
        lines += [
            "readouts (temperature 1, one decision at a time over HTTP; flips: options reversed)",
            f["readouts"]["text"],
            "",
            *readout_verdicts(f["readouts"]),
            "",
        ]
    return "\n".join(lines)


def readout_verdicts(study: dict) -> list[str]:
    """The cloze readout's targets, each with its figure (printed, not asserted)."""
    ok = lambda good: "meets" if good else "MISSES"  # noqa: E731
    t, out = TARGETS, []
    cloze, chance = study["figures"].get("cloze"), study.get("chance")
    if not cloze:
        return out
    if cloze.get("accuracy") is not None and chance:
        ratio = cloze["accuracy"] / chance
        out.append(
            f"cloze accuracy {cloze['accuracy']:.1%} is {ratio:.2f}x chance {chance:.1%} "
            f"({ok(ratio >= t['cloze_over_chance'])} >= {t['cloze_over_chance']})"
        )
    flips = cloze.get("flips") or {}
    if flips.get("compared"):
        out.append(
            f"cloze flips under reversal {flips.get('flips', 0)}/{flips['compared']} "
            f"({ok(flips.get('flips', 0) <= t['cloze_flips'])} = {t['cloze_flips']})"
        )
    if cloze.get("cost_ratio") is not None:
        out.append(
            f"cloze p50 {cloze['p50_ms']:.0f} ms is {cloze['cost_ratio']:.2f}x what its "
            f"{cloze['tokens_mean']:.0f} evaluated tokens cost at llama.cpp's "
            f"{study['rate_ms_per_token']:.3f} ms/token ({ok(cloze['cost_ratio'] <= t['cloze_cost'])} <= "
            f"{t['cloze_cost']})"
        )
    for readout, f in study["figures"].items():
        h = f.get("heldout") or {}
        if h.get("n"):
            b, a = h["before"], h["after"]
            out.append(
                f"{readout} held-out ECE {b['ece']:.3f} -> {a['ece']:.3f} "
                f"({ok(a['ece'] <= b['ece'] / 2)} at least halved)"
            )
    for readout, f in study["figures"].items():
        sets = f.get("sets") or {}
        r = sets.get("resampled")
        if r:
            gap = abs(r["coverage"] - (1 - sets["alpha"]))
            out.append(
                f"{readout} prediction sets on answers their threshold was not fitted on ({r['rounds']} random "
                f"splits): coverage {r['coverage']:.1%} against 1 - alpha {1 - sets['alpha']:.0%} "
                f"({ok(gap <= t['set_coverage_points'])} within {t['set_coverage_points']:.0%})"
            )
    return out


def order_verdicts(modes: dict) -> list[str]:
    """The issue's targets for the order modes and calibration, each with its figure (printed, not asserted)."""
    ok = lambda good: "meets" if good else "MISSES"  # noqa: E731
    t, out = TARGETS, []
    base = modes.get("as_given", {})
    rot, prior = modes.get("rotations"), modes.get("prior")
    if rot and rot["flips"]["rate"] is not None:
        out.append(
            f"rotations flips under reversal {rot['flips']['rate']:.1%} "
            f"({ok(rot['flips']['rate'] <= t['rotations_flips'])} <= {t['rotations_flips']:.0%} of tasks)"
        )
    if prior and prior["flips"]["rate"] is not None and base.get("flips", {}).get("rate") is not None:
        limit = t["prior_flips_over_as_given"] * base["flips"]["rate"]
        out.append(
            f"prior flips {prior['flips']['rate']:.1%} against as_given {base['flips']['rate']:.1%} "
            f"({ok(prior['flips']['rate'] <= limit)} <= half)"
        )
    if prior and prior.get("p50_over_as_given") is not None:
        out.append(
            f"prior p50 {prior['p50_over_as_given']:.2f}x as_given "
            f"({ok(prior['p50_over_as_given'] <= t['prior_p50'])} <= {t['prior_p50']})"
        )
    cost = (rot or {}).get("rotation_cost") or {}
    if cost.get("ratio") is not None:
        out.append(
            f"rotations extra time {cost['ratio']:.2f}x what their {cost['extra_tokens']} extra tokens cost "
            f"at {cost['rate_ms_per_token']:.3f} ms/token ({RATE_SOURCES[cost['rate_source']]}) "
            f"({ok(cost['ratio'] <= t['rotation_cost'])} <= {t['rotation_cost']})"
        )
    for mode, m in modes.items():
        c = m.get("calibration") or {}
        if not c.get("n"):
            continue
        b, a = c["before"], c["after"]
        line = (
            f"{mode} calibration: NLL {b['nll']:.3f} -> {a['nll']:.3f} ({ok(a['nll'] <= b['nll'] + 1e-12)} never worse)"
        )
        if c["kept"]:
            line += f", ECE {b['ece']:.3f} -> {a['ece']:.3f} ({ok(a['ece'] <= b['ece'] / 2)} at least halved)"
        out.append(line)
    for mode, m in modes.items():
        sets = m.get("prediction_sets") or {}
        if sets.get("n"):
            gap = abs(sets["coverage"] - (1 - sets["alpha"]))
            out.append(
                f"{mode} prediction sets: coverage {sets['coverage']:.1%} against 1 - alpha "
                f"{1 - sets['alpha']:.0%}, mean size {sets['mean_size']:.2f} "
                f"({ok(gap <= t['set_coverage_points'])} within {t['set_coverage_points']:.0%})"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adapter", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, help="a JSONL file of tasks (default: the packaged set)")
    parser.add_argument("--limit", type=int, help="at most this many tasks, across families")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--context", type=int, default=CTX, help=f"context size in tokens (default {CTX})")
    parser.add_argument(
        "--no-llama-server",
        action="store_true",
        help="skip the comparison with llama-server (benchmarks/llama_server.py) that follows",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument(
        "--orders-only",
        action="store_true",
        help="only the order modes and calibration (step 6; implies --no-llama-server)",
    )
    only.add_argument(
        "--readouts-only",
        action="store_true",
        help="only the readouts (step 7, with step 2's engine for the rate; implies --no-llama-server)",
    )
    args = parser.parse_args(argv)
    print(
        report(
            run(
                args.tasks,
                args.limit,
                args.out,
                args.context,
                orders_only=args.orders_only,
                readouts_only=args.readouts_only,
            )
        )
    )
    if not (args.no_llama_server or args.orders_only or args.readouts_only):
        if find_llama_server() is None:
            print(
                "llama-server comparison skipped: no llama-server build (.llama.cpp/bin/llama-server, "
                "WORKSHOP_LLAMA_SERVER or PATH)"
            )
        else:
            print(llama_server_report.report(llama_server.run(args.limit)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
