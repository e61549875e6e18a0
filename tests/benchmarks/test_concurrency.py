"""The concurrency table (benchmarks/concurrency.py): its arithmetic on synthetic timings, the llama-server
client over real HTTP (the prompt it sends, its 503 retried), and one tiny real run against both servers on the
embedded model (each adapter's start-up check read back from its log). The callers themselves are the workshop's driver (tests/workshop_lib/evaluation/test_throughput.py).

The real run's figures are not judged (the machine is shared): only that every cell answered what it was
asked, the report reads the figures back, and every server it started is stopped, also when one fails."""

from __future__ import annotations

import dataclasses
import json
import logging
import re

import numpy as np
import pytest

from benchmarks import concurrency
from benchmarks.servers import find_llama_server
from tests.support import adapter_settings
from tests.support.stand_in import serving
from workshop_lib.aws import endpoints
from workshop_lib.evaluation.tasks import load_tasks
from workshop_lib.local import processes

LLAMA_SERVER = find_llama_server()


# ---- the arithmetic -------------------------------------------------------------------------------


def test_a_cell_is_decisions_over_wall_time_with_numpys_percentiles():
    rng = np.random.default_rng(7)
    latencies = list(rng.uniform(100, 900, size=37))
    figures = concurrency.cell(latencies, 12.5, busy=3, callers=4)
    assert figures["decisions"] == 37 and figures["busy_503"] == 3 and figures["callers"] == 4
    assert figures["per_s"] == pytest.approx(37 / 12.5)
    assert figures["p50_ms"] == pytest.approx(np.percentile(latencies, 50))
    assert figures["p95_ms"] == pytest.approx(np.percentile(latencies, 95))
    empty = concurrency.cell([], 3.0)
    assert empty["decisions"] == 0 and empty["per_s"] is None and empty["p95_ms"] is None


def test_a_cell_of_several_rounds_pools_their_latencies_over_their_wall_time_together():
    rounds = [
        concurrency.Level(concurrency=2, latencies_ms=(100.0, 300.0, 500.0), wall_s=1.0, busy_503=1),
        concurrency.Level(concurrency=2, latencies_ms=(200.0, 900.0), wall_s=4.0),
    ]
    figures = concurrency.pooled(rounds, 2)
    assert figures["decisions"] == 5 and figures["busy_503"] == 1 and figures["callers"] == 2
    assert figures["per_s"] == pytest.approx(5 / 5.0)  # not the mean of 3/s and 0.5/s
    assert figures["p50_ms"] == pytest.approx(300.0)
    assert concurrency.pooled(rounds[:1], 2) == concurrency.cell([100.0, 300.0, 500.0], 1.0, 1, 2)


def _cell(per_s, p95):
    return {"per_s": per_s, "p50_ms": p95 / 2, "p95_ms": p95, "busy_503": 0, "decisions": 10}


@pytest.mark.parametrize(
    "mine, theirs, throughput_meets, p95_meets",
    [
        ((3.0, 500.0), (3.0, 500.0), True, True),  # equal: both targets are met at exactly 1.0x
        ((2.9, 500.0), (3.0, 500.0), False, True),
        ((3.0, 501.0), (3.0, 500.0), True, False),
        ((4.0, 400.0), (2.0, 800.0), True, True),
    ],
)
def test_ratios_and_their_verdicts_follow_the_figures(mine, theirs, throughput_meets, p95_meets):
    r = concurrency.ratios(_cell(*mine), _cell(*theirs))
    assert r["throughput"] == pytest.approx(mine[0] / theirs[0])
    assert r["p95"] == pytest.approx(mine[1] / theirs[1])
    assert (r["throughput_meets"], r["p95_meets"]) == (throughput_meets, p95_meets)


def test_a_missing_figure_is_no_ratio_and_never_meets():
    r = concurrency.ratios({"per_s": None, "p95_ms": None}, _cell(2.0, 100.0))
    assert r == {"throughput": None, "p95": None, "throughput_meets": False, "p95_meets": False}


def _rows(adapter_per_s, llama_per_s, adapter_p95=500.0, llama_p95=500.0):
    levels = ("1", "2", "4", "8")
    return {
        "adapter_parallel": {c: _cell(v, adapter_p95) for c, v in zip(levels, adapter_per_s)},
        "adapter_deployed": {c: _cell(v, adapter_p95) for c, v in zip(levels, adapter_per_s)},
        "llama_server": {c: _cell(v, llama_p95) for c, v in zip(levels, llama_per_s)},
    }


def test_the_cpu_verdicts_look_at_c_1_2_4_only():
    # the adapter misses at C=8 alone: not one of the CPU targets' levels
    s = concurrency.summarise(_rows([2.0, 3.0, 4.0, 1.0], [2.0, 3.0, 4.0, 5.0]))
    v = s["verdicts"]["adapter_parallel"]
    assert v == {"levels": [1, 2, 4], "throughput_meets": True, "p95_meets": True}
    assert s["ratios"]["adapter_parallel"]["8"]["throughput"] == pytest.approx(0.2)
    # one miss at C=2 fails the verdict
    s = concurrency.summarise(_rows([2.0, 2.9, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0]))
    assert s["verdicts"]["adapter_deployed"]["throughput_meets"] is False
    s = concurrency.summarise(_rows([2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0], adapter_p95=600.0))
    assert s["verdicts"]["adapter_deployed"]["p95_meets"] is False


def test_the_gpu_verdict_is_c8_throughput_at_least_three_times_c1():
    assert concurrency.scaling({"1": _cell(2.0, 1), "8": _cell(6.0, 1)}) == {
        "low": 1,
        "high": 8,
        "ratio": pytest.approx(3.0),
        "meets": True,
    }
    assert concurrency.scaling({"1": _cell(2.0, 1), "8": _cell(5.9, 1)})["meets"] is False
    assert concurrency.scaling({"1": _cell(2.0, 1)}) == {"low": 1, "high": 1, "ratio": None, "meets": False}
    assert concurrency.scaling({"2": _cell(2.0, 1), "1": _cell(1.0, 1), "4": _cell(4.0, 1)})["ratio"] == 4.0


def _table(rows):
    return {
        "levels": [1, 2, 4, 8],
        "tasks_per_cell": 10,
        "seconds_per_cell": 20.0,
        "prompts": 48,
        "threads": 2,
        "rows": rows,
        **concurrency.summarise(rows),
    }


def test_the_report_prints_each_cell_ratio_and_verdict():
    table = _table(_rows([2.0, 3.0, 4.0, 4.0], [2.0, 3.5, 4.0, 5.0], adapter_p95=450.0))
    text = "\n".join(concurrency.report(table))
    assert "2.00/s (225/450 ms)" in text and "3.50/s (250/500 ms)" in text
    assert "C=2 0.86x / 0.90x" in text
    line = next(
        x for x in text.splitlines() if x.strip().startswith(concurrency.ROWS["adapter_parallel"]) and "C=1 " in x
    )
    assert "throughput MISSES, p95 meets" in line
    gpu = "\n".join(concurrency.report(_table(_rows([1.0, 2.0, 3.0, 3.5], [1.0, 2.0, 3.0, 2.0])), gpu=True))
    assert "C=8 throughput 3.50x C=1's (meets >= 3x on a GPU)" in gpu
    assert "C=8 throughput 2.00x C=1's (MISSES >= 3x on a GPU)" in gpu
    assert "targets at C = 1, 2, 4" not in gpu


def test_the_start_up_checks_are_read_from_each_adapters_log(tmp_path, model_dir, caplog, monkeypatch):
    """From the lines a real engine logs at start-up: one whose check passes with flash attention, and one whose
    check is made to fail (flash attention left off, then prefix reuse)."""
    from decision_adapter import split_check
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    def started(name):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="decision_adapter"):
            Engine(adapter_settings(model_dir, SM_LLAMA_CPP_FLASH_ATTN="auto"), locate_model(model_dir)).prove()
        (tmp_path / f"{name}.log").write_text(caplog.text)

    started("adapter-parallel-8")
    monkeypatch.setattr(split_check, "check_splits", lambda context, model: 0.25)
    started("adapter-default")
    (tmp_path / "llama-server-np8.log").write_text("load_tensors: offloaded 31/31 layers to GPU\n")
    assert concurrency.start_up_checks(tmp_path) == {
        "adapter-default": [
            "0.25 with flash attention on",
            "flash attention left off",
            "0.25 with flash attention off",
            "prefix reuse turned off",
        ],
        "adapter-parallel-8": ["0 with flash attention on"],
    }


def _reuse_table(reuse_per_s, plain_per_s, llama_per_s):
    levels = ("1", "2", "4")
    rows = {
        name: {c: _cell(v, 1000.0 / v) for c, v in zip(levels, values)}
        for name, values in (
            ("adapter_reuse", reuse_per_s),
            ("adapter_parallel", plain_per_s),
            ("llama_server", llama_per_s),
        )
    }
    return {
        "levels": [1, 2, 4],
        "tasks_per_cell": 16,
        "seconds_per_cell": 8.0,
        "prompts": 4,
        "threads": 2,
        "state_cache_mib": 256,
        "rows": rows,
        "ratios": concurrency.reuse_ratios(rows),
    }


def test_the_reuse_part_compares_the_cached_adapter_with_both_others_and_judges_nothing():
    table = _reuse_table([8.0, 9.0, 10.0], [2.0, 3.0, 4.0], [4.0, 4.5, 5.0])
    r = table["ratios"]
    assert r["reuse_vs_llama_server"]["2"] == {"throughput": pytest.approx(2.0), "p95": pytest.approx(0.5)}
    assert r["reuse_vs_plain"]["4"]["throughput"] == pytest.approx(2.5)
    assert r["plain_vs_llama_server"]["1"]["p95"] == pytest.approx(2.0)
    text = "\n".join(concurrency.report_reuse(table))
    assert "DECISION_ADAPTER_CROSS_REQUEST_REUSE=on, DECISION_ADAPTER_STATE_CACHE_MIB=256" in text
    line = next(x for x in text.splitlines() if x.strip().startswith(concurrency.REUSE_ROWS["adapter_reuse"]))
    assert "8.00/s (62/125 ms)" in line and "10.00/s (50/100 ms)" in line
    assert "C=2 2x / 0.5x" in text and "C=4 2.5x / 0.4x" in text
    assert "meets" not in text.lower() and "misses" not in text.lower()


def test_repeated_requests_cycle_the_prompts_unchanged_with_new_ids():
    tasks = concurrency.held_out()[:3]
    source = concurrency.repeated_requests(tasks, "c2")
    bodies = [source() for _ in range(7)]
    for n, body in enumerate(bodies):
        expected = tasks[n % 3].request()
        assert {k: v for k, v in body.items() if k != "id"} == {k: v for k, v in expected.items() if k != "id"}
    assert len({body["id"] for body in bodies}) == 7
    with pytest.raises(ValueError):
        concurrency.repeated_requests([], "c1")


# ---- the llama-server client ---------------------------------------------------------------------


@pytest.fixture
def chat_server():
    """A stand-in llama-server on a real socket: the first request gets a 503 (``Retry-After: 0``), the rest a
    one-token chat reply; every body received is kept. Stopped after the test."""
    import json
    from http.server import BaseHTTPRequestHandler

    received: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            busy = len(received) == 1
            data = (
                b'{"error": "busy"}'
                if busy
                else json.dumps({"choices": [{"message": {"content": "A"}, "finish_reason": "length"}]}).encode()
            )
            self.send_response(503 if busy else 200)
            if busy:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    with serving(Handler) as url:
        yield url, received


def test_llama_server_is_asked_the_adapters_body_as_the_standard_paths_chat_with_its_503_retried(chat_server):
    from workshop_lib.evaluation.logprobs import logprobs_payload, task_messages
    from workshop_lib.evaluation.throughput import fresh_requests

    url, received = chat_server
    task = concurrency.held_out()[0]
    body = fresh_requests([task], "c4")()
    answer = concurrency.LlamaServerClient(url).decide(body)
    assert answer.attempts == 2 and answer.client_latency_ms > 0  # the 503, then the answer
    assert [path for path, _ in received] == ["/v1/chat/completions"] * 2
    sent = received[-1][1]
    opened = dataclasses.replace(task, state=body["state"])
    assert sent == logprobs_payload(task_messages(opened))  # the letter prompt, max_tokens 1, top_logprobs 20
    assert sent["max_tokens"] == 1 and sent["top_logprobs"] == 20
    assert body["state"] != task.state and body["state"].endswith(task.state)  # new to the server, same task


def test_the_prompts_are_the_held_out_split():
    tasks = load_tasks()
    held = concurrency.held_out(tasks)
    assert held and all(t.split == "test" for t in held)
    assert len(held) == sum(t.split == "test" for t in tasks)


# ---- one tiny real run -------------------------------------------------------------------------

needs_llama_server = pytest.mark.skipif(
    LLAMA_SERVER is None, reason="no llama-server build (WORKSHOP_LLAMA_SERVER, .llama.cpp/bin/llama-server or PATH)"
)


@pytest.fixture
def no_server_left():
    """Whatever a test leaves running is stopped afterwards (and the test is told about it)."""
    before = set(processes._RUNNING)
    left: list = []
    yield left
    for server in set(processes._RUNNING) - before:
        left.append(server)
        server.stop()


@pytest.mark.slow
@needs_llama_server
def test_a_tiny_table_runs_against_both_servers_and_stops_them(model_dir, embedded_gguf, tmp_path, no_server_left):
    before = set(processes._RUNNING)
    table = concurrency.run_table(
        model_dir,
        embedded_gguf,
        LLAMA_SERVER,
        tmp_path,
        levels=(1, 2),
        tasks=3,
        seconds=60,
        prompts=concurrency.held_out()[:6],
        start_timeout_s=120,
        reuse_levels=(2,),
        reuse_tasks=3,
        reuse_seconds=60,
        rounds=2,
    )
    assert set(processes._RUNNING) == before  # every server it started is stopped
    for name in concurrency.ROWS:
        for c in ("1", "2"):
            figures = table["rows"][name][c]
            assert figures["decisions"] == 2 * 3 and figures["callers"] == int(c)  # both rounds pooled
            assert figures["per_s"] > 0 and figures["p50_ms"] <= figures["p95_ms"]
    # the order alternates from round to round and from one C to the next
    assert table["rounds"] == 2 and [names[0] for names in table["order"]] == [
        "adapter_parallel",
        "adapter_deployed",
        "adapter_deployed",
        "adapter_parallel",
    ]
    assert set(table["ratios"]["adapter_deployed"]) == {"1", "2"}
    assert table["verdicts"]["adapter_parallel"]["levels"] == [1, 2]
    logs = {p.name for p in tmp_path.iterdir()}
    assert {"adapter-deployed.log", "adapter-parallel-2.log", "llama-server-np2.log"} <= logs
    # the row "as deployed" runs the CPU decision endpoint's settings: its contexts, its flash attention
    assert table["deployed_settings"] == endpoints.decision_cpu_settings()
    deployed_log = (tmp_path / "adapter-deployed.log").read_text()
    assert f"{endpoints.CPU_PARALLEL} request(s) evaluated at once" in deployed_log
    assert "n_slots = 2" in (tmp_path / "llama-server-np2.log").read_text()
    reuse = table["reuse"]  # at C=2 only, on the first REUSE_PROMPTS prompts repeated
    assert reuse["levels"] == [2] and reuse["prompts"] == concurrency.REUSE_PROMPTS
    for name in concurrency.REUSE_ROWS:
        figures = reuse["rows"][name]
        assert set(figures) == {"2"} and figures["2"]["decisions"] == 3 and figures["2"]["callers"] == 2
        assert figures["2"]["per_s"] > 0 and figures["2"]["p50_ms"] <= figures["2"]["p95_ms"]
    assert reuse["order"] == [list(concurrency.REUSE_ROWS)] and set(reuse["ratios"]["reuse_vs_plain"]) == {"2"}
    assert {"adapter-reuse-2.log"} <= logs and "adapter-reuse-1.log" not in logs
    # each adapter's own start-up check (flash attention on for the tuned ones, here where it passes); not
    # llama-server's
    checks = table["start_up_checks"]
    assert set(checks) == {"adapter-deployed", "adapter-parallel-1", "adapter-parallel-2", "adapter-reuse-2"}
    assert re.fullmatch(r"\S+ with flash attention on", *checks["adapter-deployed"])
    assert re.fullmatch(r"\S+ with flash attention on", *checks["adapter-parallel-2"])
    text = "\n".join(concurrency.report(table))
    assert concurrency.ROWS["llama_server"] in text and "per adapter: adapter-deployed " in text
    assert "at most 3 decisions or 60 s per cell in each of 2 rounds" in text
    assert text.index(concurrency.ROWS["llama_server"]) < text.index(concurrency.REUSE_ROWS["adapter_reuse"])


@pytest.mark.slow
def test_a_server_that_fails_to_start_leaves_none_running(model_dir, embedded_gguf, tmp_path, no_server_left):
    broken = tmp_path / "llama-server"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    before = set(processes._RUNNING)
    with pytest.raises(processes.ServerFailedToStart):
        concurrency.run_table(
            model_dir, embedded_gguf, broken, tmp_path, levels=(1,), tasks=1, seconds=5, start_timeout_s=120
        )
    assert set(processes._RUNNING) == before


def test_the_llama_server_reports_carry_the_table():
    import json
    from pathlib import Path

    from benchmarks import llama_server_report

    table = _table(_rows([2.0, 3.0, 4.0, 4.0], [2.0, 3.5, 4.0, 5.0]))
    recorded = json.loads((Path(llama_server_report.__file__).parent / "results" / "llama_server.json").read_text())
    recorded.pop("concurrency", None)  # a run with the table left out
    assert "concurrency: decisions/s" not in llama_server_report.report(recorded)
    full = llama_server_report.report({**recorded, "concurrency": table})
    alone = llama_server_report.report_concurrency(
        {"machine": recorded["machine"], "model": recorded["model"], "concurrency": table}
    )
    for text in (full, alone):
        assert "concurrency: decisions/s" in text and "C=2 0.86x / 1.00x" in text
        assert "reuse (opt-in" not in text
    reuse = _reuse_table([8.0, 9.0, 10.0], [2.0, 3.0, 4.0], [4.0, 4.5, 5.0])
    full = llama_server_report.report({**recorded, "concurrency": {**table, "reuse": reuse}})
    alone = llama_server_report.report_concurrency(
        {"machine": recorded["machine"], "model": recorded["model"], "concurrency": {**table, "reuse": reuse}}
    )
    for text in (full, alone):
        assert text.index("concurrency: decisions/s") < text.index("reuse (opt-in") and "C=4 2.5x / 0.4x" in text


# ---- the command line's table (benchmarks.llama_server) ------------------------------------------------------


@pytest.mark.parametrize("short", [True, False])
def test_the_table_alone_names_its_prompts_and_passes_its_rounds(short, tmp_path, monkeypatch):
    from benchmarks import llama_server
    from benchmarks.workload import short_tickets

    asked = {}

    def run_table(*args, **kwargs):
        asked.update(kwargs)
        return {"prompt_set": kwargs["prompt_set"], "rounds": kwargs["rounds"]}

    monkeypatch.setattr(llama_server.concurrency, "run_table", run_table)
    monkeypatch.setattr(llama_server, "_binary", lambda: tmp_path / "llama-server")
    monkeypatch.setattr(llama_server, "prepare_model_dir", lambda work: (work, None))
    monkeypatch.setattr(llama_server, "machine", lambda binary, load_before: {})
    out = tmp_path / "table.json"
    llama_server.run_concurrency(5, out, levels=(1,), short=short, rounds=2)
    assert asked["rounds"] == 2
    assert asked["prompts"] == (short_tickets(5) if short else concurrency.held_out(load_tasks(None, limit=5)))
    assert asked["prompt_set"] == ("short-ticket" if short else "held-out")
    assert asked["reuse_levels"] == (() if short else concurrency.REUSE_LEVELS)
    assert json.loads(out.read_text())["concurrency"] == {"prompt_set": asked["prompt_set"], "rounds": 2}


def test_rounds_go_with_the_table_alone(capsys):
    from benchmarks import llama_server

    for argv in (["--rounds", "2"], ["--concurrency-only", "--rounds", "0"]):
        with pytest.raises(SystemExit):
            llama_server.main(argv)
    assert "--rounds" in capsys.readouterr().err
