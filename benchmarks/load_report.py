"""The load run's table: what ``python -m benchmarks.load`` prints from its figures, each target's verdict
beside its figure."""

from __future__ import annotations

KIND_LABELS = {
    "decision": "single decision",
    "shared": "shared state (3 q)",
    "chat": "chat (8 tokens)",
    "probe": "probe (vs lone run)",
}


def _ms(value) -> str:
    return f"{value:8.0f}" if value is not None else "       -"


def report(f: dict) -> str:
    s, rss, t = f["settings"], f["worker_rss_bytes"], f["targets"]
    verdict = lambda ok: "meets target" if ok else "MISSES target"  # noqa: E731
    mib = lambda b: f"{b / 2**20:.1f} MiB" if b else "-"  # noqa: E731
    lines = [
        f"Load run: {s['clients']} clients for {s['duration_s']:g} s (at most {s['max_requests']} requests) "
        f"against the local adapter ({s['model']}, {s['adapter_threads']} threads, max queue {s['max_queue']})",
        f"machine: {f['machine']['cpus']} CPUs, load average at the end "
        f"{', '.join(f'{x:.1f}' for x in f['machine']['load_average_at_end'])}",
        "",
        f"  {'kind':<22}{'sent':>6}{'answered':>10}{'p50 ms':>9}{'p95 ms':>9}",
    ]
    for kind, row in f["by_kind"].items():
        lines.append(
            f"  {KIND_LABELS[kind]:<22}{row['sent']:>6}{row['answered']:>10} {_ms(row['p50_ms'])} {_ms(row['p95_ms'])}"
        )
    lines += [
        f"  {'all':<22}{f['requests_sent']:>6}{f['requests_answered']:>10} {_ms(f['latency_ms']['p50'])} "
        f"{_ms(f['latency_ms']['p95'])}",
        "",
        f"  HTTP attempts (incl. retries)   {f['http_attempts']}",
        f"  503 busy                        {f['busy_503']} ({f['busy_503_with_retry_after']} with Retry-After: "
        f"{verdict(t['every_503_has_retry_after'])})",
        f"  other non-2xx                   {sum(f['other_non_2xx'].values())} {f['other_non_2xx'] or ''} "
        f"({verdict(t['no_other_non_2xx'])}: none)",
        f"  unanswered after retries        {len(f['unanswered'])} ({verdict(t['every_request_answered'])}: none)",
        f"  crossed answers                 {len(f['crossed_answers'])} ({verdict(t['no_crossed_answers'])}: none)",
        f"  probes equal to a lone run      {f['probes']['equal_to_lone_run']}/{f['by_kind']['probe']['answered']} "
        f"(max |diff| {f['probes']['max_abs_difference']:.1e})",
        f"  throughput                      {f['throughput_per_s']:.2f} answered requests/s over "
        f"{f['elapsed_s']:.1f} s",
        f"  worker RSS after warm-up / end  {mib(rss['start_after_warmup'])} / {mib(rss['end'])} "
        f"(peak {mib(rss['peak'])}; growth {100 * (rss['growth_fraction'] or 0):+.2f} %: "
        f"{verdict(t['rss_growth_under_5_percent'])} < 5 %)",
        "  worker RSS during the run       "
        + ", ".join(f"{mib(b)} at {t:.0f} s" for t, b in rss["timeline"][:: max(1, len(rss["timeline"]) // 6)]),
        f"  same gunicorn worker throughout {'yes' if t['same_worker_throughout'] else 'NO'} "
        f"(pid {rss['pid_start']} -> {rss['pid_end']})",
    ]
    for problem in (f["crossed_answers"] + f["unanswered"])[:5]:
        lines.append(f"    ! {problem}")
    ping, hostile = f.get("ping_during_load"), f.get("hostile_clients")  # runs recorded before they existed: none
    if ping or hostile:
        lines.append("")
    if hostile:
        lines += [
            f"Hostile clients alongside ({'nginx in front' if f['nginx_in_front'] else 'gunicorn alone'}): "
            f"{hostile['slow_header']} slow headers, {hostile['trickled_body']} trickled oversized bodies, "
            f"{hostile['half_open']} half-open connections",
            f"  {hostile['opened']} connections opened, {hostile['closed_by_server']} closed by the server, "
            f"{hostile['refused_413']} answered 413, {hostile['other_answers']} other answers",
        ]
    if ping:
        lines.append(
            f"  /ping during the load: {ping['count']} answered, {ping['failed']} failed; p50 "
            f"{1000 * (ping['p50_s'] or 0):.0f} ms, p95 {1000 * (ping['p95_s'] or 0):.0f} ms, max "
            f"{1000 * (ping['max_s'] or 0):.0f} ms ({verdict(t['ping_p95_under_1_s_during_load'])}: "
            "p95 < 1 s)"
        )
    worst = f.get("worst_cases")
    if worst:
        ping = worst["ping"]
        lines += [
            "",
            f"Worst cases, one at a time on an adapter with the default settings, "
            f"{worst['half_open_connections']} connections holding half a header throughout:",
            f"  {'body':<42}{'bytes':>9}{'status':>8}{'seconds':>9}",
        ]
        lines += [f"  {r['body']:<42}{r['bytes']:>9}{r['status']:>8}{r['seconds']:>9.1f}" for r in worst["requests"]]
        lines.append(
            f"  /ping meanwhile: {ping['count']} answered, {ping['failed']} failed; p50 "
            f"{1000 * (ping['p50_s'] or 0):.0f} ms, p95 {1000 * (ping['p95_s'] or 0):.0f} ms, max "
            f"{1000 * (ping['max_s'] or 0):.0f} ms ({verdict(t['ping_p95_under_1_s_during_worst_cases'])}: "
            f"p95 < 1 s)"
        )
    return "\n".join(lines)
