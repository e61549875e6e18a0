"""The adapter against llama-server: ``python -m benchmarks.llama_server`` (``make bench`` runs it after
benchmarks/adapter.py).

One run, one machine, the embedded model, 2 threads and a 4096-token context on both sides, the same
prompts (the decision prompt rendered by the adapter; sent to llama-server as its chat messages with
``max_tokens: 1, logprobs: true, top_logprobs: 20``, the letter-probability baseline), requests
alternating between the servers task by task:

1. new prompts: each task's decision once to the adapter (defaults, no cache) and once to llama-server
   (its first pass: the prompt is new to it);
2. repeated states: the same tasks again, to an adapter with the state cache on
   (``DECISION_ADAPTER_CROSS_REQUEST_REUSE=on``, ``DECISION_ADAPTER_STATE_CACHE_MIB``; it saw them in
   pass 1) and to llama-server (warm: its prompt cache, ``--cache-ram``, holds them);
3. shared state: k = 2, 4, 8 questions on one ~400-token state, one adapter request against k separate
   requests to llama-server (whose prompt cache reuses the state between them), the same state to each
   (new to every server);
4. where the adapter's time goes on new prompts: the HTTP stack (client, nginx, gunicorn, response JSON),
   request handling (JSON parsing, validation, rendering, readout), tokenizing in Python, evaluation; and
   from an in-process engine, the readout alone and the llama_decode calls per decision;
5. the concurrency table (benchmarks/concurrency.py): C = 1, 2, 4, 8 callers at once against the adapter
   (``SM_LLAMA_CPP_PARALLEL=C``, and as the CPU endpoint deploys it) and llama-server ``-np C`` as deployed,
   decisions/s and p50/p95, with the ratios and the issue #40 targets' verdicts; then, apart, the opt-in reuse under
   concurrency: at C = 1, 2, 4, callers repeating a few prompts to an adapter with the state cache, to the
   table's adapter without it and to its llama-server (``--concurrency-only`` runs these alone and writes
   benchmarks/results/concurrency.json).

Like for like, both sides run llama.cpp's attention without flash attention (the adapter's default,
``--flash-attn off``). New prompts and shared states are also sent to the pair with it: llama-server at its
default (auto, which enables it on these CPUs) and the adapter with ``SM_LLAMA_CPP_FLASH_ATTN=auto``
(on after its start-up check).

Prints the figures and writes benchmarks/results/llama_server.json. Asserts nothing: the machine is
shared, so speed is reported, not tested. Every server it starts is stopped before it returns.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks import concurrency
from benchmarks.llama_server_report import report, report_concurrency
from benchmarks.machine import cores, cpu_name, load_average
from benchmarks.servers import LlamaServerProcess, find_llama_server, timed_post
from benchmarks.workload import QUESTIONS, short_tickets, ticket
from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.engine import Engine
from decision_adapter.model_files import locate_model
from decision_adapter.questions import ScoringItem
from decision_adapter.settings import load_settings
from workshop_lib.demo import prepare_model_dir
from workshop_lib.evaluation.logprobs import (
    TOP_LOGPROBS,
    decision_messages,
    first_token_logprobs,
    logprobs_payload,
    read_letters,
)
from workshop_lib.evaluation.report import percentile
from workshop_lib.evaluation.tasks import load_tasks
from workshop_lib.local import AdapterProcess
from workshop_lib.models import embedded_gguf_path

THREADS = 2
CTX = 4096
CACHE_MIB = 512
RESULTS = Path(__file__).resolve().parent / "results" / "llama_server.json"
CONCURRENCY_RESULTS = RESULTS.with_name("concurrency.json")
SHORT_RESULTS = RESULTS.with_name("concurrency_short.json")


def letter_body(state, question, option_texts) -> dict:
    return logprobs_payload(decision_messages(state, question, option_texts))


def p50(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def stats(values) -> dict:
    values = [v for v in values if v is not None]
    return {"n": len(values), "p50": p50(values), "p95": percentile(values, 95)}


def in_process(model_dir: Path, bodies: list[dict]) -> dict:
    """The readout alone and the llama_decode calls per decision, from an engine fed the same requests."""
    settings = load_settings(
        {"SM_MODEL_DIR": str(model_dir), "SM_LLAMA_CPP_THREADS": str(THREADS), "SM_LLAMA_CPP_CTX_SIZE": str(CTX)}
    )
    engine = Engine(settings, locate_model(model_dir))
    engine.prove()
    decode_calls, evaluated, readout_ms, decide_ms = [], [], [], []
    for body in bodies:
        calls, before = engine.context.decode_calls, engine.context.tokens_evaluated
        start = time.perf_counter()
        batch = parse_decision(body)
        _results, _ = own.decide(engine, batch)
        decide_ms.append((time.perf_counter() - start) * 1000.0)
        decode_calls.append(engine.context.decode_calls - calls)
        evaluated.append(engine.context.tokens_evaluated - before)
        question = batch.questions[0]
        item = ScoringItem(engine.model.template.render_decision(batch.state, question), len(question.options))
        tokens, logits = engine.model.prompt_tokens(item.prompt), engine.context.last_logits()
        start = time.perf_counter()
        for _ in range(20):  # the letters readout evaluates nothing: it reads the slots of the last logits
            engine.read(item, tokens, logits)
        readout_ms.append((time.perf_counter() - start) * 1000.0 / 20)
    del engine
    return {
        "decode_calls_p50": p50(decode_calls),
        "tokens_evaluated_p50": p50(evaluated),
        "readout_ms_p50": p50(readout_ms),
        "in_process_decide_ms_p50": p50(decide_ms),
    }


def _binary() -> Path:
    binary = find_llama_server()
    if binary is None:
        raise SystemExit(
            "no llama-server: build it (make; the checkout's .llama.cpp/bin/llama-server), or set "
            "WORKSHOP_LLAMA_SERVER to a llama-server binary"
        )
    return binary


def machine(binary: Path, load_before: float | None) -> dict:
    """What the figures were measured on (the llama-server build as its --version says)."""
    import subprocess

    try:
        version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
        build = " ".join((version.stdout + version.stderr).split()) or None
    except (OSError, subprocess.SubprocessError):
        build = None
    return {
        "cpu": cpu_name(),
        "cores": cores(),
        "python": platform.python_version(),
        "llama_server_build": build,
        "threads": THREADS,
        "context": CTX,
        "load_average_1min": [load_before, load_average()],
    }


def run_concurrency(
    limit: int | None = None,
    out: Path | None = CONCURRENCY_RESULTS,
    *,
    levels=concurrency.LEVELS,
    tasks: int = concurrency.TASKS,
    seconds: float = concurrency.SECONDS,
    gpu_layers: int = 0,
    short: bool = False,
    rounds: int = 1,
) -> dict:
    """The concurrency table alone: ``{"machine", "model", "concurrency"}``, written to ``out``. ``short``: on
    short tickets (``workload.short_tickets``) instead of the packaged tasks, without the reuse part; ``rounds``:
    each C's cells measured that many times (``concurrency.run_table``)."""
    binary, load_before = _binary(), load_average()
    work = Path(tempfile.mkdtemp(prefix="concurrency-bench-"))
    model_dir, _ = prepare_model_dir(work)
    table = concurrency.run_table(
        model_dir,
        embedded_gguf_path(),
        binary,
        work,
        levels=levels,
        tasks=tasks,
        seconds=seconds,
        threads=THREADS,
        context=CTX,
        gpu_layers=gpu_layers,
        prompts=short_tickets(limit or concurrency.TASKS)
        if short
        else concurrency.held_out(load_tasks(None, limit=limit)),
        prompt_set="short-ticket" if short else "held-out",
        reuse_levels=() if gpu_layers or short else concurrency.REUSE_LEVELS,
        rounds=rounds,
    )
    figures = {"machine": machine(binary, load_before), "model": embedded_gguf_path().name, "concurrency": table}
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def run(
    limit: int | None = None,
    out: Path | None = RESULTS,
    *,
    concurrency_table: bool = True,
    cell_tasks: int = concurrency.TASKS,
    seconds: float = concurrency.SECONDS,
) -> dict:
    binary = _binary()
    load_before = load_average()
    work = Path(tempfile.mkdtemp(prefix="llama-server-bench-"))
    model_dir, _ = prepare_model_dir(work)
    tasks = load_tasks(None, limit=limit)
    bodies = [t.request() for t in tasks]
    letters = [letter_body(t.state, t.question, [text for _, text in t.presented()]) for t in tasks]
    adapter_env = {"SM_LLAMA_CPP_CTX_SIZE": str(CTX), "DECISION_ADAPTER_REQUEST_TIMEOUT": "600"}  # a loaded machine
    cache_env = {
        **adapter_env,
        "DECISION_ADAPTER_CROSS_REQUEST_REUSE": "on",
        "DECISION_ADAPTER_STATE_CACHE_MIB": str(CACHE_MIB),
    }
    fa_env = {**adapter_env, "SM_LLAMA_CPP_FLASH_ATTN": "auto"}
    servers = [
        LlamaServerProcess(
            binary,
            embedded_gguf_path(),
            log_path=work / "llama-server.log",
            threads=THREADS,
            context=CTX,
            extra_args=("--flash-attn", "off"),
        ),
        AdapterProcess(model_dir, log_path=work / "adapter.log", threads=THREADS, env=adapter_env),
        AdapterProcess(model_dir, log_path=work / "adapter-cache.log", threads=THREADS, env=cache_env),
        LlamaServerProcess(
            binary, embedded_gguf_path(), log_path=work / "llama-server-default.log", threads=THREADS, context=CTX
        ),
        AdapterProcess(model_dir, log_path=work / "adapter-fa.log", threads=THREADS, env=fa_env),
    ]
    try:
        for server in servers:
            server.start(timeout_s=180)
        llama, plain, cached, llama_default, plain_fa = servers
        chat_url, plain_url, cached_url = (
            llama.url + "/v1/chat/completions",
            plain.url + "/invocations",
            cached.url + "/invocations",
        )
        default_url, fa_url = llama_default.url + "/v1/chat/completions", plain_fa.url + "/invocations"
        with urllib.request.urlopen(llama.url + "/props", timeout=10) as response:
            props = json.loads(response.read())

        new = {"adapter": [], "adapter_cache": [], "llama": [], "adapter_flash_attn": [], "llama_default": []}
        parts = {
            "client_minus_server": [],
            "handling": [],
            "tokenize": [],
            "evaluate": [],
            "llama_prompt_ms": [],
            "llama_client_minus_prompt": [],
            "adapter_tokens": [],
            "llama_prompt_n": [],
        }
        valid = agree = 0
        for body, letter in zip(bodies, letters):
            ms, reply = timed_post(plain_url, body)
            new["adapter"].append(ms)
            t = reply["result"]["timing"]
            parts["client_minus_server"].append(ms - t["total_ms"])
            parts["tokenize"].append(t["tokenize_ms"])
            parts["evaluate"].append(t["evaluate_ms"])
            parts["handling"].append(t["total_ms"] - t["tokenize_ms"] - t["evaluate_ms"])
            parts["adapter_tokens"].append(reply["result"]["input_tokens"])
            new["adapter_cache"].append(timed_post(cached_url, body)[0])
            ms, answer = timed_post(chat_url, letter)
            new["llama"].append(ms)
            parts["llama_prompt_ms"].append(answer["timings"]["prompt_ms"])
            parts["llama_client_minus_prompt"].append(ms - answer["timings"]["prompt_ms"])
            parts["llama_prompt_n"].append(answer["timings"]["prompt_n"])
            new["adapter_flash_attn"].append(timed_post(fa_url, body)[0])
            new["llama_default"].append(timed_post(default_url, letter)[0])
            read = read_letters(first_token_logprobs(answer), len(body["options"]))
            if read["probabilities"] is not None:
                valid += 1
                probs = reply["result"]["probabilities"]
                agree += max(range(len(probs)), key=probs.__getitem__) == max(
                    range(len(probs)), key=read["probabilities"].__getitem__
                )

        warm = {"adapter_cache": [], "llama": [], "adapter": []}
        for body, letter in zip(bodies, letters):
            warm["adapter_cache"].append(timed_post(cached_url, body)[0])
            warm["llama"].append(timed_post(chat_url, letter)[0])
            warm["adapter"].append(timed_post(plain_url, body)[0])

        def k_requests(url, state, k) -> float:
            start = time.perf_counter()
            for _, text, opts in QUESTIONS[:k]:
                timed_post(url, letter_body(state, text, opts))
            return (time.perf_counter() - start) * 1000.0

        shared_rows = []
        for k in (2, 4, 8):
            one, separate, one_fa, separate_default = [], [], [], []
            for rep in range(3):
                state = ticket(700 + 10 * k + rep)  # the same state to every server, new to each
                body = {
                    "id": f"k{k}-{rep}",
                    "state": state,
                    "questions": [{"id": q, "question": text, "options": opts} for q, text, opts in QUESTIONS[:k]],
                }
                one.append(timed_post(plain_url, body)[0])
                separate.append(k_requests(chat_url, state, k))
                one_fa.append(timed_post(fa_url, body)[0])
                separate_default.append(k_requests(default_url, state, k))
            shared_rows.append(
                {
                    "k": k,
                    "adapter_one_request_ms": p50(one),
                    "llama_k_requests_ms": p50(separate),
                    "adapter_flash_attn_one_request_ms": p50(one_fa),
                    "llama_default_k_requests_ms": p50(separate_default),
                }
            )
    finally:
        for server in servers:
            server.stop()

    local = in_process(model_dir, bodies)
    table = (
        concurrency.run_table(
            model_dir,
            embedded_gguf_path(),
            binary,
            work,
            tasks=cell_tasks,
            seconds=seconds,
            threads=THREADS,
            context=CTX,
            prompts=concurrency.held_out(tasks),
            reuse_levels=concurrency.REUSE_LEVELS,
        )
        if concurrency_table
        else None
    )
    figures = {
        "machine": {
            "cpu": cpu_name(),
            "cores": cores(),
            "python": platform.python_version(),
            "llama_server_build": props.get("build_info"),
            "threads": THREADS,
            "context": CTX,
            "load_average_1min": [load_before, load_average()],
        },
        "model": embedded_gguf_path().name,
        "tasks": len(tasks),
        "top_logprobs": TOP_LOGPROBS,
        "state_cache_mib": CACHE_MIB,
        "flash_attention": {
            "like_for_like": "off on both sides (SM_LLAMA_CPP_FLASH_ATTN unset; --flash-attn off)",
            "as_deployed": "llama-server's default (auto) and SM_LLAMA_CPP_FLASH_ATTN=auto",
        },
        "new_prompts": {k: stats(v) for k, v in new.items()},
        "repeated": {k: stats(v) for k, v in warm.items()},
        "letters": {"valid": valid, "agree": agree},
        "shared_state": shared_rows,
        "breakdown_p50_ms": {k: p50(v) for k, v in parts.items()},
        "in_process": local,
    }
    if table is not None:
        figures["concurrency"] = table
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llama_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="at most this many tasks, across families (default: all)")
    parser.add_argument(
        "--out",
        type=Path,
        help=f"write the figures as JSON here (default {RESULTS}, or {CONCURRENCY_RESULTS} with --concurrency-only)",
    )
    parser.add_argument(
        "--concurrency-only",
        action="store_true",
        help="only the concurrency table (C = 1, 2, 4, 8 callers) and its reuse part "
        "(C = 1, 2, 4; repeated prompts); a few minutes",
    )
    parser.add_argument(
        "--short-tickets",
        action="store_true",
        help=f"with --concurrency-only: the table on short tickets (a state of 6 to 30 tokens, 2 to 5 options) "
        f"at C = 1, 2, 4, without the reuse part (default --out {SHORT_RESULTS})",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=concurrency.TASKS,
        help=f"decisions per concurrency cell at most (default {concurrency.TASKS})",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=concurrency.SECONDS,
        help=f"seconds of load per concurrency cell at most (default {concurrency.SECONDS:g})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --concurrency-only: measure each C's cells this many times, the servers' order alternating, "
        "and pool them (default 1)",
    )
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--tasks and --rounds must be at least 1 and --seconds above 0")
    if args.rounds > 1 and not args.concurrency_only:
        parser.error("--rounds goes with --concurrency-only")
    if args.short_tickets and not args.concurrency_only:
        parser.error("--short-tickets goes with --concurrency-only")
    if args.concurrency_only:
        short = {"short": True, "levels": concurrency.TARGET_LEVELS} if args.short_tickets else {}
        out = args.out or (SHORT_RESULTS if args.short_tickets else CONCURRENCY_RESULTS)
        print(
            report_concurrency(
                run_concurrency(args.limit, out, tasks=args.tasks, seconds=args.seconds, rounds=args.rounds, **short)
            )
        )
    else:
        print(report(run(args.limit, args.out or RESULTS, cell_tasks=args.tasks, seconds=args.seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
