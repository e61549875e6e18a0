"""The benchmark pages' tables, rendered from the recorded runs in ``benchmarks/results`` (each renderer
takes the folder, so a test can hand it a changed copy), and the index of every file there."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.docs_markdown import cell, code, table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _ms(value) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.2f} ms"


def _pct(part, whole) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f} %)" if whole else f"{part}/{whole}"


def _load(name: str, results: Path):
    return json.loads((results / name).read_text())


def render_bench_adapter(results: Path = RESULTS) -> str:
    run = _load("adapter.json", results)
    modes = run["modes"]
    header = ["measurement"] + [code(m["mode"]) for m in modes]

    def row(label, fn):
        return [label] + [fn(m) for m in modes]

    rows = [
        row("tasks", lambda m: str(m["tasks"])),
        row("tokens evaluated per decision, mean", lambda m: f"{m['evaluated_mean']:.1f}"),
        row("decision p50 / p95 over HTTP", lambda m: f"{_ms(m['p50_ms'])} / {_ms(m['p95_ms'])}"),
        row("generation baseline p50, same server", lambda m: _ms(m["generation_p50_ms"])),
        row("decision p50 / generation p50 (target ≤ 0.5)", lambda m: f"{m['p50_ms'] / m['generation_p50_ms']:.2f}×"),
        row("evaluation / llama.cpp in-process, p50 (target ≤ 1.1)", lambda m: f"{m['eval_over_in_process_p50']:.2f}×"),
        row("non-model time per request, p50 (target ≤ 3 ms)", lambda m: _ms(m["non_model_ms_p50"])),
        row("of it rendering + tokenizing (target < 1 ms)", lambda m: _ms(m["prepare_ms_p50"])),
        row("one decision on a ~400-token state", lambda m: _ms(m["one_decision_ms"])),
        row(
            "k questions on that state / one decision (k = 8 target ≤ 1.35)",
            lambda m: " / ".join(f"k={k['k']}: {k['ratio']:.2f}×" for k in m["k"]),
        ),
        row("worker peak RSS (target ≤ 260 MiB)", lambda m: f"{m['peak_rss_mib']:.0f} MiB"),
    ]
    facts = (
        f"Model `{run['model']}`, {run['threads']} threads, {run['context']}-token context, "
        f"tasks: {run['tasks']}; extra buffer types {run['extra_buffers']}. Host CPU flags: "
        f"{', '.join(run['host_cpu_flags'])}; llama.cpp features: {', '.join(run['llama_cpp_features'])}."
    )
    in_process = ", ".join(f"{n} tokens {_ms(ms)}" for n, ms in run["in_process_eval_ms"].items())
    return "\n\n".join([facts, table(header, rows), f"llama.cpp in-process for plain token runs: {in_process}."])


def render_bench_llama_server(results: Path = RESULTS) -> str:
    run = _load("llama_server.json", results)
    machine = run["machine"]
    load = machine.get("load_average_1min", [])
    new, repeated = run["new_prompts"], run["repeated"]
    rows = [
        [
            "new prompts (first pass)",
            _ms(new["adapter"]["p50"]),
            _ms(new["llama"]["p50"]),
            f"{new['adapter']['p50'] / new['llama']['p50']:.2f}×",
        ],
        [
            "repeated states (adapter's state cache / llama-server's prompt cache)",
            _ms(repeated["adapter_cache"]["p50"]),
            _ms(repeated["llama"]["p50"]),
            f"{repeated['adapter_cache']['p50'] / repeated['llama']['p50']:.2f}×",
        ],
        ["repeated states, adapter without the cache", _ms(repeated["adapter"]["p50"]), "", ""],
    ]
    if "adapter_flash_attn" in new:
        rows.append(
            [
                "new prompts, both with flash attention (auto)",
                _ms(new["adapter_flash_attn"]["p50"]),
                _ms(new["llama_default"]["p50"]),
                f"{new['adapter_flash_attn']['p50'] / new['llama_default']['p50']:.2f}×",
            ]
        )
    for shared in run["shared_state"]:
        rows.append(
            [
                f"shared state, k = {shared['k']}: one request vs k requests",
                _ms(shared["adapter_one_request_ms"]),
                _ms(shared["llama_k_requests_ms"]),
                f"{shared['adapter_one_request_ms'] / shared['llama_k_requests_ms']:.2f}×",
            ]
        )
        if "adapter_flash_attn_one_request_ms" in shared:
            rows.append(
                [
                    f"shared state, k = {shared['k']}, both with flash attention (auto)",
                    _ms(shared["adapter_flash_attn_one_request_ms"]),
                    _ms(shared["llama_default_k_requests_ms"]),
                    f"{shared['adapter_flash_attn_one_request_ms'] / shared['llama_default_k_requests_ms']:.2f}×",
                ]
            )
    facts = (
        f"{run['tasks']} tasks, model `{run['model']}`, {machine['threads']} threads, {machine['context']}-token "
        f"context on {machine['cores']} cores ({machine['cpu']}); the second adapter ran with "
        f"DECISION\\_ADAPTER\\_STATE\\_CACHE\\_MIB={run['state_cache_mib']}"
        + (f"; 1-minute load average {load[0]} at the start, {load[-1]} at the end" if load else "")
        + "."
    )
    letters = run["letters"]
    breakdown = run["breakdown_p50_ms"]
    where = (
        f"Where the adapter's time went on new prompts (p50): HTTP stack {_ms(breakdown['client_minus_server'])}, "
        f"request handling {_ms(breakdown['handling'])}, tokenizing {_ms(breakdown['tokenize'])}, evaluation "
        f"{_ms(breakdown['evaluate'])} for {breakdown['adapter_tokens']:.0f} prompt tokens; llama-server: "
        f"{_ms(breakdown['llama_prompt_ms'])} of prompt evaluation for {breakdown['llama_prompt_n']:.0f} tokens "
        f"and {_ms(breakdown['llama_client_minus_prompt'])} for everything else."
    )
    return "\n\n".join(
        [
            facts,
            table(["p50 client latency", "adapter", "llama-server", "adapter / llama-server"], rows),
            f"Letter probabilities from llama-server (top {run['top_logprobs']}): every option's letter came back in "
            f"{letters['valid']} of {run['tasks']} tasks; in those, its top option was the adapter's in {letters['agree']}.",
            where,
        ]
    )


def render_bench_load(results: Path = RESULTS) -> str:
    run = _load("load.json", results)
    settings = run["settings"]
    rss = run["worker_rss_bytes"]
    mib = 1024 * 1024
    other = run.get("other_non_2xx") or {}
    rows = [
        [
            "requests sent / answered",
            f"{run['requests_sent']} / {run['requests_answered']} ({run['http_attempts']} HTTP attempts with retries)",
        ],
        ["503 busy (with Retry-After)", f"{run['busy_503']} ({run['busy_503_with_retry_after']})"],
        ["other non-2xx", str(sum(other.values()) if isinstance(other, dict) else len(other))],
        [
            "crossed answers",
            f"{len(run['crossed_answers'])}; probes equal to a lone run: "
            f"{run['probes']['equal_to_lone_run']}/{run['probes']['sent']}",
        ],
        ["client p50 / p95", f"{_ms(run['latency_ms']['p50'])} / {_ms(run['latency_ms']['p95'])}"],
        ["throughput", f"{run['throughput_per_s']:.2f} answered requests/s"],
        ["worker RSS after warm-up / end", f"{rss['start_after_warmup'] / mib:.1f} / {rss['end'] / mib:.1f} MiB"],
    ]
    by_kind = table(
        ["kind", "sent", "answered", "p50", "p95"],
        [
            [kind, str(v["sent"]), str(v["answered"]), _ms(v["p50_ms"]), _ms(v["p95_ms"])]
            for kind, v in run["by_kind"].items()
        ],
    )
    worst = run.get("worst_cases", {})
    parts = [
        f"{settings['clients']} clients for {settings['duration_s']:.0f} s, mix "
        + ", ".join(
            f"{kind} {100 * share:.0f} %" for kind, share in settings["mix"].items() if isinstance(share, float)
        )
        + f", model "
        f"`{settings['model']}`, {run['machine']['cpus']} CPUs.",
        table(["", "figure"], rows),
        by_kind,
    ]
    if worst.get("requests"):
        parts.append(
            table(
                ["costliest body the limits allow", "route", "bytes", "answer", "seconds"],
                [
                    [cell(r["body"]), code(r["route"]), f"{r['bytes']:,}", str(r["status"]), f"{r['seconds']:.1f}"]
                    for r in worst["requests"]
                ],
            )
        )
    targets = run.get("targets", {})
    if targets:
        parts.append(
            table(
                ["target", "met"],
                [[cell(name.replace("_", " ")), "yes" if ok else "**no**"] for name, ok in targets.items()],
            )
        )
    return "\n\n".join(parts)


def render_bench_embedded(results: Path = RESULTS) -> str:
    report = _load("embedded/report.json", results)
    summary = report["summary"]
    decision = summary["decision"]
    latency = decision["client_latency_ms"]
    reference = decision.get("reference", {})
    parts = [
        f"*{report['title']}*, {report['created'][:10]}. "
        + " ".join(f"{n[:1].upper()}{n[1:]}." for n in report["notes"]),
        table(
            ["valid", "correct (accuracy)", "client p50", "client p95", "client max"],
            [
                [
                    f"{decision['valid']}/{decision['tasks']}",
                    _pct(decision["correct"], decision["tasks"]),
                    _ms(latency["p50"]),
                    _ms(latency["p95"]),
                    _ms(latency["max"]),
                ]
            ],
        ),
    ]
    if reference:
        parts.append(
            f"Chance: {100 * reference['chance']:.1f} %; always the first option shown: "
            f"{100 * reference['first_option']:.1f} %."
        )
    compared = [
        (label, summary[key])
        for key, label in (
            ("decision_reversed", "decision readout, options reversed"),
            ("debiased", "order-debiased readout"),
            ("generation", "generation baseline (chat, parse the reply)"),
        )
        if key in summary
    ]
    if compared:
        parts.append(
            table(
                ["run", "valid", "correct (accuracy)", "client p50", "client p95"],
                [
                    [
                        label,
                        f"{s['valid']}/{s['tasks']}",
                        _pct(s["correct"], s["tasks"]),
                        _ms(s["client_latency_ms"]["p50"]),
                        _ms(s["client_latency_ms"]["p95"]),
                    ]
                    for label, s in compared
                ],
            )
        )
    order = report.get("order_test")
    if order:
        rows = []
        for key in ("plain", "debiased"):
            if key in order:
                o = order[key]
                rows.append(
                    [
                        key,
                        f"{o['flips']}/{o['compared']} ({100 * o['rate']:.1f} %)",
                        f"{100 * o['accuracy_original']:.1f} % / {100 * o['accuracy_reordered']:.1f} %",
                        _ms(o["client_latency_ms"]["p50"]),
                    ]
                )
        parts.append(
            table(
                [
                    "readout",
                    f"top choice changes, options {order['order']}",
                    "accuracy (original / reordered)",
                    "client p50",
                ],
                rows,
            )
        )
    calibration = report.get("calibration")
    if calibration:
        before, after = calibration["before"], calibration["after"]
        parts.append(
            f"Calibration ({calibration['split']}, fitted on {calibration['fit_tasks']} tasks, reported on "
            f"{calibration['report_tasks']}): temperature {after['temperature']:.4g}; ECE "
            f"{before['ece']:.3f} → {after['ece']:.3f}, Brier {before['brier']:.3f} → {after['brier']:.3f}, "
            f"accuracy {100 * before['accuracy']:.1f} % → {100 * after['accuracy']:.1f} %."
        )
    return "\n\n".join(parts)


def render_bench_conformance(results: Path = RESULTS) -> str:
    rows = []
    for path in sorted(results.glob("jevcompat-*.json")):
        run = json.loads(path.read_text())
        summary = run["summary"]
        must, should = summary["MUST"], summary["SHOULD"]
        rows.append(
            [
                code(path.name),
                cell(summary["verdict"]),
                f"{must['passed']}/{must['tested']}",
                f"{should['passed']}/{should['tested']}",
                run["started"][:10],
                f"{run['seconds']:.0f} s",
            ]
        )
    return table(["run", "verdict", "MUST passed", "SHOULD passed", "date", "took"], rows)


def render_results_index(results: Path = RESULTS) -> str:
    rows = []
    for path in sorted(p for p in results.rglob("*") if p.is_file()):
        shown = path.relative_to(ROOT) if ROOT in path.parents else path.relative_to(results)
        rows.append([code(shown.as_posix()), f"{path.stat().st_size:,} bytes"])
    return table(["file", "size"], rows)
