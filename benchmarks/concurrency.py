"""The concurrency table (issue #40): C callers at once against the adapter and against llama-server.

For each C in 1, 2, 4, 8, three cells, each C callers sending decisions until a fixed number is sent or a
fixed time has passed, whichever comes first:

* the adapter tuned for this load of one-question prompts: ``SM_LLAMA_CPP_PARALLEL=C`` and
  ``SM_LLAMA_CPP_FLASH_ATTN=auto`` (flash attention, as llama-server runs it);
* the adapter as its endpoint deploys it (one process for every C; on a CPU the CPU decision endpoint's
  ``SM_LLAMA_CPP_PARALLEL=4`` and ``SM_LLAMA_CPP_FLASH_ATTN=auto``, ``endpoints.decision_cpu_settings``);
* llama-server ``-np C`` as the DLC starts it with ``SM_LLAMA_CPP_PARALLEL=C`` (flash attention auto, its
  default; the context divided between the slots, 512 tokens each at C=8, over twice the longest of these
  prompts), asked the same messages with ``max_tokens: 1, top_logprobs: 20``.

Same model, threads and context on both sides, the same prompts in the same order to each server, every one new to
every server: a note opens each state whose first character differs between any 16 requests in a row
(``throughput.note_tag``), so only the template's fixed head can be reused. The callers are the workshop's own load
driver (``workshop_lib.evaluation.throughput.measure_level``, which notebook 06 runs against an endpoint), over an
``EndpointClient`` for the adapter and ``LlamaServerClient`` for llama-server: 503s are retried after their
``Retry-After`` and counted; a decision's latency includes its retries. Throughput is answered decisions over the
cell's wall time. The servers of one C run one after another, the order alternating from one C to the next; with
``rounds`` above 1, each C's cells are measured that many times, the order alternating from round to round, each
round on prompts new to every server, and a cell pools its rounds (decisions over the rounds' wall time,
percentiles of every latency), so that a drift of the machine's speed during a run falls on every server alike.
Speed is printed, never asserted. Each adapter's log is read back for its start-up check of prompts cut into calls
(``start_up_checks``): a row whose check turned flash attention or prefix reuse off is not the settings it names.

After the table's cells of a C in ``reuse_levels`` (``make bench``: 1, 2, 4), a smaller measurement of the
opt-in reuse for single-tenant endpoints, reported apart: the callers repeat a few prompts unchanged, each
sent once unmeasured before the cell, to

* an adapter started beside the others as the tuned one, with ``DECISION_ADAPTER_CROSS_REQUEST_REUSE=on``
  and ``DECISION_ADAPTER_STATE_CACHE_MIB`` (so a state it has seen can be taken from its cache);
* the table's tuned adapter, without them (only the template's fixed head is reused);
* the table's llama-server ``-np C``, whose prompt cache keeps what it has seen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from benchmarks.servers import LlamaServerProcess
from workshop_lib.aws import endpoints
from workshop_lib.client import ChatResult, EndpointClient
from workshop_lib.client.transport import LocalTransport
from workshop_lib.evaluation.logprobs import TOP_LOGPROBS, decision_messages
from workshop_lib.evaluation.report import percentile
from workshop_lib.evaluation.tasks import Task, load_tasks
from workshop_lib.evaluation.throughput import Level, cycled_requests, fresh_requests, measure_level
from workshop_lib.local import AdapterProcess

LEVELS = (1, 2, 4, 8)
# Engine.prove's log lines: its check's difference, and what a failed check turned off
CHECKED = re.compile(r"cut into evaluations differs from it whole by (\S+) \(flash attention (\w+)\)")
TURNED_OFF = re.compile(r"flash attention left off|prefix reuse turned off")
TARGET_LEVELS = (1, 2, 4)  # where the adapter must match llama-server on a CPU
TARGET_THROUGHPUT = 1.0  # adapter / llama-server, at least
TARGET_P95 = 1.0  # adapter / llama-server, at most
GPU_SCALING = 3.0  # C=8 throughput over C=1, at least, on a GPU
TASKS = 60  # decisions per cell at most
SECONDS = 20.0  # load per cell at most
TIMEOUT_S = 600.0  # one decision, its retries included (a loaded machine)
MAX_BUSY = 600  # 503s retried for one decision before it fails the cell
ROWS = {
    "adapter_parallel": "adapter, PARALLEL=C, FLASH_ATTN=auto",
    "adapter_deployed": "adapter as deployed",
    "llama_server": "llama-server -np C (as deployed)",
}
ADAPTER_ROWS = ("adapter_parallel", "adapter_deployed")
REUSE_LEVELS = (1, 2, 4)
REUSE_PROMPTS = 4  # the repeating set
REUSE_TASKS = 12  # decisions per reuse cell at most
REUSE_SECONDS = 5.0  # load per reuse cell at most
REUSE_CACHE_MIB = 256
# The table's adapter tuned for its load, prompts of one question each: C contexts and flash attention, which
# speeds up such prompts and slows down shared-state batches of short questions (docs/benchmarks.md).
TUNED_ENV = {"SM_LLAMA_CPP_FLASH_ATTN": "auto"}
REUSE_ENV = {"DECISION_ADAPTER_CROSS_REQUEST_REUSE": "on", "DECISION_ADAPTER_STATE_CACHE_MIB": str(REUSE_CACHE_MIB)}
REUSE_ROWS = {
    "adapter_reuse": "adapter, reuse + state cache",
    "adapter_parallel": "adapter, no cross-request reuse",
    "llama_server": "llama-server -np C (its prompt cache)",
}


# ---- the prompts and the two clients ------------------------------------------------------------


def held_out(tasks: list[Task] | None = None) -> list[Task]:
    """The packaged tasks' test split (the dev split fits calibrations), or all where none is marked."""
    tasks = load_tasks() if tasks is None else tasks
    return [t for t in tasks if t.split == "test"] or list(tasks)


class LlamaServerClient:
    """llama-server asked the adapter's decision bodies the standard path's way: the same state, question and
    options as the letter prompt's chat messages, ``max_tokens: 1, top_logprobs: 20`` (``logprobs_payload``).
    ``decide(body)`` answers with the reply's timing (``client.ChatResult``), a 503 retried as the adapter's."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S, retries: int = MAX_BUSY):
        transport = LocalTransport(url, timeout_s=timeout_s, invoke_path="/v1/chat/completions")
        self.endpoint = EndpointClient(transport, retries=retries)

    def decide(self, body: dict) -> ChatResult:
        messages = decision_messages(body["state"], body["question"], [o["text"] for o in body["options"]])
        return self.endpoint.chat(messages, max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS)


def repeated_requests(tasks: list[Task], run: str) -> Callable[[], dict]:
    """``tasks`` cycled, each unchanged but for a numbered id, so from the second round on every prompt is one
    the server has been asked before."""
    return cycled_requests(tasks, lambda task, n: task.request(request_id=f"repeat-{run}-{n}"))


def client_for(server, is_llama: bool):
    """The client a cell drives: llama-server's chat, or the adapter's /invocations (its 503s retried)."""
    if is_llama:
        return LlamaServerClient(server.url)
    return EndpointClient.local(server.url, timeout_s=TIMEOUT_S, retries=MAX_BUSY)


# ---- one cell: C callers ------------------------------------------------------------------------


def cell(latencies_ms: list[float], elapsed_s: float, busy: int = 0, callers: int | None = None) -> dict:
    """A cell's figures: decisions answered, per second of wall time, p50/p95 latency, 503s retried."""
    n = len(latencies_ms)
    return {
        "callers": callers,
        "decisions": n,
        "seconds": elapsed_s,
        "per_s": n / elapsed_s if n and elapsed_s > 0 else None,
        "p50_ms": percentile(latencies_ms, 50),
        "p95_ms": percentile(latencies_ms, 95),
        "busy_503": busy,
    }


# ---- the table's arithmetic ---------------------------------------------------------------------


def _over(a, b) -> float | None:
    return a / b if a is not None and b else None


def _pair(a: dict, b: dict) -> dict:
    """a / b for one C: throughput and p95."""
    return {"throughput": _over(a.get("per_s"), b.get("per_s")), "p95": _over(a.get("p95_ms"), b.get("p95_ms"))}


def ratios(adapter: dict, llama: dict) -> dict:
    """adapter / llama-server for one C: throughput and p95, with the CPU targets' verdicts."""
    r = _pair(adapter, llama)
    return {
        **r,
        "throughput_meets": r["throughput"] is not None and r["throughput"] >= TARGET_THROUGHPUT,
        "p95_meets": r["p95"] is not None and r["p95"] <= TARGET_P95,
    }


def scaling(row: dict) -> dict:
    """A row's throughput at its most callers over its fewest (C=8 over C=1 in the full table), with the GPU
    target's verdict (at least ``GPU_SCALING``); no ratio with fewer than two levels."""
    levels = sorted(int(c) for c in row)
    low, high = (levels[0], levels[-1]) if levels else (None, None)
    most, fewest = ((row.get(str(c)) or {}).get("per_s") for c in (high, low))
    ratio = _over(most, fewest) if len(levels) > 1 else None
    return {"low": low, "high": high, "ratio": ratio, "meets": ratio is not None and ratio >= GPU_SCALING}


def summarise(rows: dict[str, dict[str, dict]]) -> dict:
    """The ratios per adapter row and C, the CPU verdicts at TARGET_LEVELS, the scaling per row."""
    llama = rows.get("llama_server", {})
    out: dict = {"ratios": {}, "verdicts": {}, "scaling": {name: scaling(row) for name, row in rows.items()}}
    for name in ADAPTER_ROWS:
        if name not in rows:
            continue
        per_c = {c: ratios(rows[name][c], llama[c]) for c in rows[name] if c in llama}
        out["ratios"][name] = per_c
        judged = [per_c[str(c)] for c in TARGET_LEVELS if str(c) in per_c]
        out["verdicts"][name] = {
            "levels": [c for c in TARGET_LEVELS if str(c) in per_c],
            "throughput_meets": bool(judged) and all(r["throughput_meets"] for r in judged),
            "p95_meets": bool(judged) and all(r["p95_meets"] for r in judged),
        }
    return out


REUSE_PAIRS = {
    "reuse_vs_llama_server": ("adapter_reuse", "llama_server"),
    "reuse_vs_plain": ("adapter_reuse", "adapter_parallel"),
    "plain_vs_llama_server": ("adapter_parallel", "llama_server"),
}
REUSE_SHORT = {
    "adapter_reuse": "adapter with reuse",
    "adapter_parallel": "adapter without",
    "llama_server": "llama-server",
}


def reuse_ratios(rows: dict[str, dict[str, dict]]) -> dict:
    """Throughput and p95 ratios per C for each of ``REUSE_PAIRS`` (no targets: the reuse is opt-in)."""
    out = {}
    for key, (a, b) in REUSE_PAIRS.items():
        mine, theirs = rows.get(a, {}), rows.get(b, {})
        out[key] = {c: _pair(mine[c], theirs[c]) for c in mine if c in theirs}
    return out


# ---- the run --------------------------------------------------------------------------------------


def run_table(
    model_dir: Path,
    gguf: Path,
    binary: Path,
    work: Path,
    *,
    levels=LEVELS,
    tasks: int = TASKS,
    seconds: float = SECONDS,
    threads: int = 2,
    context: int = 4096,
    gpu_layers: int = 0,
    prompts: list[Task] | None = None,
    prompt_set: str = "held-out",
    deployed: Mapping[str, str] | None = None,
    start_timeout_s: float = 180.0,
    reuse_levels=(),
    reuse_tasks: int = REUSE_TASKS,
    reuse_seconds: float = REUSE_SECONDS,
    rounds: int = 1,
) -> dict:
    """Start the servers, drive every cell ``rounds`` times, stop every server (also on failure): the table's figures.
    ``deployed``: the settings of the row "as deployed" (None: the CPU decision endpoint's). At each C of
    ``reuse_levels`` also the reuse part, under ``"reuse"``: beside the C's servers an adapter with the reuse on,
    and after the table's cells the three of ``REUSE_ROWS`` driven with the first ``REUSE_PROMPTS`` prompts
    repeated, at most ``reuse_tasks`` decisions or ``reuse_seconds`` a cell."""
    prompts = held_out() if prompts is None else prompts
    adapter_env = {
        "SM_LLAMA_CPP_CTX_SIZE": str(context),
        "DECISION_ADAPTER_REQUEST_TIMEOUT": "600",
        "SM_LLAMA_CPP_N_GPU_LAYERS": str(gpu_layers),
    }
    gpu_args = ("-ngl", str(gpu_layers)) if gpu_layers else ()
    rows: dict[str, dict[str, dict]] = {name: {} for name in ROWS}
    reuse_rows: dict[str, dict[str, dict]] = {name: {} for name in REUSE_ROWS}
    order: list[list[str]] = []
    reuse_order: list[list[str]] = []

    def adapter(name: str, env: dict) -> AdapterProcess:
        return AdapterProcess(model_dir, log_path=work / f"{name}.log", threads=threads, env={**adapter_env, **env})

    deployed = dict(endpoints.decision_cpu_settings() if deployed is None else deployed)
    deployed_adapter = adapter("adapter-deployed", deployed)
    try:
        deployed_adapter.start(timeout_s=start_timeout_s)
        for index, c in enumerate(levels):
            servers = {
                "adapter_parallel": adapter(f"adapter-parallel-{c}", {"SM_LLAMA_CPP_PARALLEL": str(c), **TUNED_ENV}),
                "llama_server": LlamaServerProcess(
                    binary,
                    gguf,
                    log_path=work / f"llama-server-np{c}.log",
                    threads=threads,
                    context=context,
                    extra_args=("-np", str(c), *gpu_args),
                ),
            }
            if c in reuse_levels:
                servers["adapter_reuse"] = adapter(
                    f"adapter-reuse-{c}", {"SM_LLAMA_CPP_PARALLEL": str(c), **TUNED_ENV, **REUSE_ENV}
                )
            try:
                for server in servers.values():
                    server.start(timeout_s=start_timeout_s)
                levels_measured: dict[str, list[Level]] = {name: [] for name in ROWS}
                for round_ in range(rounds):
                    names = ["adapter_parallel", "llama_server", "adapter_deployed"]
                    names = names if (index + round_) % 2 == 0 else names[::-1]
                    order.append(names)
                    for name in names:
                        server = deployed_adapter if name == "adapter_deployed" else servers[name]
                        level = measure(
                            server, name == "llama_server", prompts, c, tasks=tasks, seconds=seconds, round_=round_
                        )
                        levels_measured[name].append(level)
                for name, measured in levels_measured.items():
                    rows[name][str(c)] = pooled(measured, c)
                if c in reuse_levels:
                    names = list(REUSE_ROWS) if len(reuse_order) % 2 == 0 else list(REUSE_ROWS)[::-1]
                    reuse_order.append(names)
                    for name in names:
                        reuse_level = measure(
                            servers[name],
                            name == "llama_server",
                            prompts[:REUSE_PROMPTS],
                            c,
                            tasks=reuse_tasks,
                            seconds=reuse_seconds,
                            repeat=True,
                        )
                        reuse_rows[name][str(c)] = pooled([reuse_level], c)
            finally:
                for server in servers.values():
                    server.stop()
    finally:
        deployed_adapter.stop()
    table = {
        "levels": list(levels),
        "tasks_per_cell": tasks,
        "seconds_per_cell": seconds,
        "rounds": rounds,
        "threads": threads,
        "context": context,
        "gpu_layers": gpu_layers,
        "prompts": len(prompts),
        "prompt_set": prompt_set,
        "order": order,
        "llama_server_args": ["-np", "C", *gpu_args],
        "deployed_settings": deployed,
        "rows": rows,
        **summarise(rows),
        "start_up_checks": start_up_checks(work),
    }
    if reuse_order:
        table["reuse"] = {
            "levels": [c for c in levels if c in reuse_levels],
            "tasks_per_cell": reuse_tasks,
            "seconds_per_cell": reuse_seconds,
            "threads": threads,
            "prompts": len(prompts[:REUSE_PROMPTS]),
            "state_cache_mib": REUSE_CACHE_MIB,
            "order": reuse_order,
            "rows": reuse_rows,
            "ratios": reuse_ratios(reuse_rows),
        }
    return table


def measure(
    server,
    is_llama: bool,
    prompts: list[Task],
    c: int,
    *,
    tasks: int,
    seconds: float,
    repeat: bool = False,
    round_: int = 0,
) -> Level:
    """One cell's round on a started server: C callers (``measure_level``) over the cell's prompts, the same for every
    server at this C. New prompts (the table): each opened by its number in the round's run (``fresh_requests``:
    ``c<C>``, then ``c<C>-r<round>``, so each round's prompts are new), after two unmeasured decisions. Repeated
    prompts (``repeat``): each prompt sent once unmeasured, then the callers cycle them unchanged
    (``repeated_requests``). A decision that fails, or is still refused after its retries, fails the cell."""
    run = f"c{c}-r{round_}" if round_ else f"c{c}"
    client = client_for(server, is_llama)
    if repeat:
        for task in prompts:
            client.decide(task.request(request_id=f"seen-c{c}"))
        source = repeated_requests(prompts, f"c{c}")
    else:
        warm = fresh_requests(prompts, f"warm-{run}")
        for _ in range(2):
            client.decide(warm())
        source = fresh_requests(prompts, run)
    level = measure_level(client.decide, c, seconds, source, limit=tasks)
    if level.failed or level.refused:
        raise RuntimeError(f"C={c} on {server.url}: {level.error or f'{level.refused} requests still refused (503)'}")
    return level


def pooled(levels: list[Level], c: int) -> dict:
    """A cell of one or more rounds: every latency, over the rounds' wall time together."""
    return cell(
        [ms for level in levels for ms in level.latencies_ms],
        sum(level.wall_s for level in levels),
        sum(level.busy_503 for level in levels),
        c,
    )


# ---- the report -----------------------------------------------------------------------------------


def _cell_text(cell_figures: dict | None) -> str:
    if not cell_figures or cell_figures.get("per_s") is None:
        return "-"
    busy = f", {cell_figures['busy_503']} 503" if cell_figures.get("busy_503") else ""
    return f"{cell_figures['per_s']:.2f}/s ({cell_figures['p50_ms']:.0f}/{cell_figures['p95_ms']:.0f} ms{busy})"


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pad(labels) -> int:
    """The width of a column of these row labels."""
    return max(34, *(len(label) + 2 for label in labels))


def _grid(rows: dict, labels: dict, levels: list[str], width: int = 30) -> list[str]:
    pad = _pad(labels.values())
    lines = [(" " * (pad + 2) + "".join(f"C={c:<{width - 2}}" for c in levels)).rstrip()]
    for name, label in labels.items():
        row = rows.get(name, {})
        lines.append((f"  {label:<{pad}}" + "".join(f"{_cell_text(row.get(c)):<{width}}" for c in levels)).rstrip())
    return lines


def start_up_checks(work: Path) -> dict[str, list[str]]:
    """Each adapter log's start-up checks of a prompt cut into calls against it whole, then what they turned
    off, e.g. ``["0.041 with flash attention on", "flash attention left off", "0 with flash attention off"]``."""
    found: dict[str, list[str]] = {}
    for log in sorted(work.glob("*.log")):
        text = log.read_text(errors="replace")
        events = sorted(
            [(m.start(), f"{m.group(1)} with flash attention {m.group(2)}") for m in CHECKED.finditer(text)]
            + [(m.start(), m.group(0)) for m in TURNED_OFF.finditer(text)]
        )
        if events:
            found[log.stem] = [event for _, event in events]
    return found


def report_checks(checks: dict[str, list[str]]) -> list[str]:
    lines = [
        "start-up check of cut prompts (the largest answer difference from the prompt whole), per adapter: "
        + ("; ".join(f"{name} {', '.join(events)}" for name, events in checks.items()) or "none logged")
    ]
    turned = [name for name, events in checks.items() if any(TURNED_OFF.fullmatch(e) for e in events)]
    if turned:
        lines.append(
            f"NOTE: the check turned something off in {', '.join(turned)}: those rows are not the "
            "settings they name (flash attention off, or every prompt evaluated whole)"
        )
    return lines


def report(t: dict, *, gpu: bool = False) -> list[str]:
    """The table, the ratios and the verdicts as printed lines."""
    ok = lambda good: "meets" if good else "MISSES"  # noqa: E731
    levels = [str(c) for c in t["levels"]]
    labels = {name: ROWS.get(name, name.replace("_", " ")) for name in t["rows"]}  # a recorded run's own rows
    on_gpu = f", {t['gpu_layers']} GPU layers" if t.get("gpu_layers") else ""
    rounds = f" in each of {t['rounds']} rounds" if t.get("rounds", 1) > 1 else ""
    lines = [
        f"concurrency: decisions/s (p50/p95 ms; 503s retried) with C callers, at most {t['tasks_per_cell']} "
        f"decisions or {t['seconds_per_cell']:g} s per cell{rounds}, {t['prompts']} {t.get('prompt_set', 'held-out')} prompts "
        "each opened by a "
        f"nonce, {t['threads']} threads{on_gpu}",
        *_grid(t["rows"], labels, levels),
    ]
    if not gpu:
        lines.append(
            f"adapter / llama-server, throughput / p95 (targets at C = {', '.join(map(str, TARGET_LEVELS))}: throughput >= "
            f"{TARGET_THROUGHPUT:g}x, p95 <= {TARGET_P95:g}x)"
        )
        for name, per_c in t["ratios"].items():
            parts = [f"C={c} {_x(per_c[c]['throughput'])} / {_x(per_c[c]['p95'])}" for c in levels if c in per_c]
            v = t["verdicts"].get(name)
            verdict = f": throughput {ok(v['throughput_meets'])}, p95 {ok(v['p95_meets'])}" if v and v["levels"] else ""
            lines.append(f"  {labels[name]:<{_pad(labels.values())}}" + ", ".join(parts) + verdict)
    for name, s in t["scaling"].items():
        if gpu or s["ratio"] is not None:
            target = f" ({ok(s['meets'])} >= {GPU_SCALING:g}x on a GPU)" if gpu else ""
            lines.append(f"  {labels[name]}: C={s['high']} throughput {_x(s['ratio'])} C={s['low']}'s{target}")
    if "start_up_checks" in t:
        lines += report_checks(t["start_up_checks"])
    if t.get("reuse"):
        lines += ["", *report_reuse(t["reuse"])]
    return lines


def _g(v) -> str:
    return "-" if v is None else f"{v:.3g}x"  # a cache hit against a full evaluation: ratios far from 1


def report_reuse(t: dict) -> list[str]:
    """The reuse measurement as printed lines: its cells and its ratios."""
    levels = [str(c) for c in t["levels"]]
    labels = {key: f"{REUSE_SHORT[a]} / {REUSE_SHORT[b]}" for key, (a, b) in REUSE_PAIRS.items()}
    lines = [
        f"reuse (opt-in, single-tenant endpoints): decisions/s (p50/p95 ms; 503s retried) with C callers "
        f"repeating {t['prompts']} held-out prompts, each sent once before the cell, at most "
        f"{t['tasks_per_cell']} decisions or {t['seconds_per_cell']:g} s per cell, {t['threads']} threads; "
        f"the reuse row: DECISION_ADAPTER_CROSS_REQUEST_REUSE=on, "
        f"DECISION_ADAPTER_STATE_CACHE_MIB={t['state_cache_mib']}",
        *_grid(t["rows"], REUSE_ROWS, levels),
        "throughput / p95",
    ]
    for key, label in labels.items():
        per_c = t["ratios"].get(key, {})
        lines.append(
            f"  {label:<{_pad(labels.values())}}"
            + ", ".join(f"C={c} {_g(per_c[c]['throughput'])} / {_g(per_c[c]['p95'])}" for c in levels if c in per_c)
        )
    return lines
