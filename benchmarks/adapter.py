"""Adapter benchmark: ``python -m benchmarks.adapter`` (or ``make bench``).

Measures, side by side in one run, on the embedded model with 2 threads:

1. decision latency in-process (the engine called directly) vs over HTTP through
   gunicorn, and the adapter's own overhead (client latency minus the server's
   own timing of the same request);
2. k = 1, 4, 8 questions about one ~400-token state: one shared-state request vs
   k separate requests;
3. the model's raw prompt-evaluation rate, and each decision's latency against
   its floor ``input_tokens / rate``;
4. peak RSS of the serving process against the GGUF's size.

It prints figures and target verdicts; it asserts nothing (this machine is
shared and noisy, so speed is reported, not tested). Every server it starts is
stopped before it returns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from decision_adapter import runtime
from decision_adapter.engine import Engine
from decision_adapter.model_files import locate_model
from decision_adapter.schema import parse_decision
from decision_adapter.settings import load_settings
from workshop_lib.demo import prepare_model_dir
from workshop_lib.local import AdapterProcess, post_json

THREADS = 2
OPTIONS = [{"id": "billing", "text": "Billing: charges, refunds, invoices"},
           {"id": "tech", "text": "Technical support: errors and outages"},
           {"id": "security", "text": "Account security: logins and passwords"},
           {"id": "sales", "text": "Sales: plans, upgrades, quotes"}]
QUESTIONS = [
    ("route", "Which team should handle this ticket?", OPTIONS),
    ("priority", "How urgent is it?", ["low", "normal", "high"]),
    ("refund", "Does the customer ask for money back?", ["no", "yes"]),
    ("angry", "Is the customer angry?", ["no", "yes"]),
    ("churn", "Does the customer threaten to cancel?", ["no", "yes"]),
    ("language", "Which language is the ticket in?", ["english", "german", "french", "other"]),
    ("product", "Which product is concerned?", ["pro plan", "team plan", "api", "unknown"]),
    ("followup", "Does the ticket need a call back?", ["no", "yes"]),
]


def ticket(n: int, sentences: int = 22) -> str:
    """A synthetic support ticket; n makes it unique so no cached prefix is reused."""
    lines = [f"Ticket {n}. Customer account {4000 + n}, Pro plan since 2021."]
    for i in range(sentences):
        lines.append(f"Note {i}: on day {i + 1} the customer reported that invoice {n}-{i} was charged twice "
                     f"and asked support to check the card ending {1000 + (n * 7 + i) % 9000}.")
    return " ".join(lines)


def decision(n: int, sentences: int = 22) -> dict:
    rid, question, options = QUESTIONS[0]
    return {"id": f"{rid}-{n}", "state": ticket(n, sentences), "question": question, "options": options}


def shared(n: int, k: int) -> dict:
    return {"id": f"batch-{n}", "state": ticket(n),
            "questions": [{"id": q, "question": text, "options": opts} for q, text, opts in QUESTIONS[:k]]}


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def peak_rss_bytes(arbiter_pid: int) -> int:
    """VmHWM of the gunicorn worker(s) under the arbiter (the process that holds the model)."""
    peak = 0
    children = Path(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children").read_text().split()
    for pid in [arbiter_pid, *map(int, children)]:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) * 1024)
    return peak


def timed_post(url: str, body: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    status, reply = post_json(url, body)
    elapsed = (time.perf_counter() - start) * 1000.0
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {reply}")
    return elapsed, reply


def run(repeats: int, out: Path | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix="adapter-bench-"))
    model_dir, manifest = prepare_model_dir(work)
    gguf_size = manifest["files"][0]["size"]
    settings = load_settings({"SM_MODEL_DIR": str(model_dir), "SM_LLAMA_CPP_THREADS": str(THREADS),
                              "SM_LLAMA_CPP_CTX_SIZE": "4096"})
    engine = Engine(settings, locate_model(model_dir))
    figures: dict = {"model": engine.info["file"], "threads": THREADS, "repeats": repeats,
                     "host_cpu_flags": list(runtime.host_cpu_flags()),
                     "llama_cpp_features": list(engine.runtime.cpu_features),
                     "extra_buffers": engine.runtime.extra_buffers_reason}

    # 3 first: the raw prompt-evaluation rate on a plain token sequence.
    tokens = engine.tokenize(ticket(10_000))
    rates = []
    for _ in range(3):
        engine._reset_context()
        engine._prefix = None
        start = time.perf_counter()
        engine.llm.eval(tokens)
        rates.append(len(tokens) / (time.perf_counter() - start))
    engine._reset_context()
    engine._prefix = None
    rate = statistics.median(rates)
    figures["prompt_eval_tokens_per_s"] = rate

    # 1. in-process: distinct states so nothing is served from the prefix cache.
    in_process, floors = [], []
    for i in range(repeats):
        start = time.perf_counter()
        (result,), _ = engine.decide(parse_decision(decision(100 + i)))
        elapsed = (time.perf_counter() - start) * 1000.0
        in_process.append(elapsed)
        floors.append(elapsed / (result["input_tokens"] / rate * 1000.0))
    del engine

    with AdapterProcess(model_dir, log_path=work / "adapter.log", threads=THREADS,
                        env={"SM_LLAMA_CPP_CTX_SIZE": "4096"}) as server:
        url = server.url + "/invocations"
        timed_post(url, decision(0))  # warm-up
        over_http, overhead = [], []
        for i in range(repeats):
            elapsed, reply = timed_post(url, decision(200 + i))
            over_http.append(elapsed)
            overhead.append(elapsed - reply["result"]["timing"]["evaluate_ms"]
                            - reply["result"]["timing"]["tokenize_ms"])
        figures["in_process_ms_p50"] = statistics.median(in_process)
        figures["http_ms_p50"] = statistics.median(over_http)
        figures["http_overhead_ms_p50"] = statistics.median(overhead)
        figures["latency_over_floor_p50"] = statistics.median(floors)
        figures["latency_over_floor_max"] = max(floors)

        one = figures["http_ms_p50"]
        figures["shared_state"] = []
        for k in (1, 4, 8):
            batch_ms = [timed_post(url, shared(300 + 10 * k + i, k))[0] for i in range(max(1, repeats // 3))]
            separate_ms = []
            for i in range(max(1, repeats // 3)):
                n = 400 + 10 * k + i
                total = 0.0
                for q, text, opts in QUESTIONS[:k]:
                    total += timed_post(url, {"id": f"{q}-{n}", "state": ticket(n), "question": text,
                                              "options": opts})[0]
                separate_ms.append(total)
            batch = statistics.median(batch_ms)
            figures["shared_state"].append({
                "k": k, "one_request_ms": batch, "separate_requests_ms": statistics.median(separate_ms),
                "ratio_to_one_decision": batch / one, "target_ratio": 1 + 0.25 * (k - 1)})
        figures["serving_peak_rss_bytes"] = peak_rss_bytes(server.process.pid)
    figures["gguf_bytes"] = gguf_size
    if out:
        out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def report(f: dict) -> str:
    ok = lambda good: "meets target" if good else "MISSES target"  # noqa: E731
    lines = [f"Adapter benchmark: {f['model']}, {f['threads']} threads, {f['repeats']} repeats (p50 unless noted)",
             "",
             "1. One decision (~400-token state, 4 options)",
             f"   in-process (engine called directly)   {f['in_process_ms_p50']:8.1f} ms",
             f"   over HTTP through gunicorn            {f['http_ms_p50']:8.1f} ms",
             f"   adapter overhead per decision         {f['http_overhead_ms_p50']:8.1f} ms"
             f"   ({ok(f['http_overhead_ms_p50'] <= 5)}: <= 5 ms)",
             "",
             "2. k questions on one state: one shared-state request vs k separate requests",
             "    k   shared request   k separate   shared / one decision   target"]
    for row in f["shared_state"]:
        lines.append(f"   {row['k']:2d}   {row['one_request_ms']:11.1f} ms {row['separate_requests_ms']:9.1f} ms"
                     f"   {row['ratio_to_one_decision']:10.2f}x          <= {row['target_ratio']:.2f}x "
                     f"({ok(row['ratio_to_one_decision'] <= row['target_ratio'])})")
    lines += ["",
              f"3. Raw prompt evaluation: {f['prompt_eval_tokens_per_s']:.0f} tokens/s on a CPU reporting "
              f"{' '.join(f['host_cpu_flags']) or '(no /proc/cpuinfo)'};",
              f"   llama.cpp built for {' '.join(f['llama_cpp_features'])}; extra buffer types {f['extra_buffers']}",
              f"   decision latency / floor "
              f"(input_tokens / rate): p50 {f['latency_over_floor_p50']:.2f}x, max {f['latency_over_floor_max']:.2f}x"
              f" ({ok(f['latency_over_floor_p50'] <= 1.2)}: <= 1.2x)",
              "",
              f"4. Serving process peak RSS {f['serving_peak_rss_bytes'] / 2**20:.0f} MiB; GGUF "
              f"{f['gguf_bytes'] / 2**20:.0f} MiB + 300 MiB = {(f['gguf_bytes'] + 300 * 2**20) / 2**20:.0f} MiB "
              f"({ok(f['serving_peak_rss_bytes'] <= f['gguf_bytes'] + 300 * 2**20)})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adapter", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="decisions per measurement (default 9)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    print(report(run(args.repeats, args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
