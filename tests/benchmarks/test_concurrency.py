"""The concurrency table (benchmarks/concurrency.py): its arithmetic on synthetic timings, the callers' 503
retries, the prompts' nonces, and one tiny real run against both servers on the embedded model.

The real run's figures are not judged (the machine is shared): only that every cell answered what it was
asked, the report reads the figures back, and every server it started is stopped, also when one fails."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from benchmarks import concurrency
from benchmarks.servers import find_llama_server
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


def _cell(per_s, p95):
    return {"per_s": per_s, "p50_ms": p95 / 2, "p95_ms": p95, "busy_503": 0, "decisions": 10}


@pytest.mark.parametrize("mine, theirs, throughput_meets, p95_meets", [
    ((3.0, 500.0), (3.0, 500.0), True, True),       # equal: both targets are met at exactly 1.0x
    ((2.9, 500.0), (3.0, 500.0), False, True),
    ((3.0, 501.0), (3.0, 500.0), True, False),
    ((4.0, 400.0), (2.0, 800.0), True, True),
])
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
    return {"adapter_parallel": {c: _cell(v, adapter_p95) for c, v in zip(levels, adapter_per_s)},
            "adapter_default": {c: _cell(v, adapter_p95) for c, v in zip(levels, adapter_per_s)},
            "llama_server": {c: _cell(v, llama_p95) for c, v in zip(levels, llama_per_s)}}


def test_the_cpu_verdicts_look_at_c_1_2_4_only():
    # the adapter misses at C=8 alone: not one of the CPU targets' levels
    s = concurrency.summarise(_rows([2.0, 3.0, 4.0, 1.0], [2.0, 3.0, 4.0, 5.0]))
    v = s["verdicts"]["adapter_parallel"]
    assert v == {"levels": [1, 2, 4], "throughput_meets": True, "p95_meets": True}
    assert s["ratios"]["adapter_parallel"]["8"]["throughput"] == pytest.approx(0.2)
    # one miss at C=2 fails the verdict
    s = concurrency.summarise(_rows([2.0, 2.9, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0]))
    assert s["verdicts"]["adapter_default"]["throughput_meets"] is False
    s = concurrency.summarise(_rows([2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0], adapter_p95=600.0))
    assert s["verdicts"]["adapter_default"]["p95_meets"] is False


def test_the_gpu_verdict_is_c8_throughput_at_least_three_times_c1():
    assert concurrency.scaling({"1": _cell(2.0, 1), "8": _cell(6.0, 1)}) == {
        "low": 1, "high": 8, "ratio": pytest.approx(3.0), "meets": True}
    assert concurrency.scaling({"1": _cell(2.0, 1), "8": _cell(5.9, 1)})["meets"] is False
    assert concurrency.scaling({"1": _cell(2.0, 1)}) == {"low": 1, "high": 1, "ratio": None, "meets": False}
    assert concurrency.scaling({"2": _cell(2.0, 1), "1": _cell(1.0, 1), "4": _cell(4.0, 1)})["ratio"] == 4.0


def _table(rows):
    return {"levels": [1, 2, 4, 8], "tasks_per_cell": 10, "seconds_per_cell": 20.0, "prompts": 48, "threads": 2,
            "rows": rows, **concurrency.summarise(rows)}


def test_the_report_prints_each_cell_ratio_and_verdict():
    table = _table(_rows([2.0, 3.0, 4.0, 4.0], [2.0, 3.5, 4.0, 5.0], adapter_p95=450.0))
    text = "\n".join(concurrency.report(table))
    assert "2.00/s (225/450 ms)" in text and "3.50/s (250/500 ms)" in text
    assert "C=2 0.86x / 0.90x" in text
    line = next(x for x in text.splitlines() if x.strip().startswith(concurrency.ROWS["adapter_parallel"])
                and "C=1 " in x)
    assert "throughput MISSES, p95 meets" in line
    gpu = "\n".join(concurrency.report(_table(_rows([1.0, 2.0, 3.0, 3.5], [1.0, 2.0, 3.0, 2.0])), gpu=True))
    assert "C=8 throughput 3.50x C=1's (meets >= 3x on a GPU)" in gpu
    assert "C=8 throughput 2.00x C=1's (MISSES >= 3x on a GPU)" in gpu
    assert "targets at C = 1, 2, 4" not in gpu


# ---- the callers ---------------------------------------------------------------------------------

def test_a_503_is_retried_after_its_retry_after_and_counted():
    replies = iter([(503, "2"), (503, None), (503, "soon"), (200, None)])
    waits = []
    ms, busy = concurrency.call(lambda: next(replies), sleep=waits.append)
    assert busy == 3 and waits == [2.0, 1.0, 1.0] and ms >= 0


def test_any_other_status_or_too_many_503s_fails_the_decision():
    with pytest.raises(RuntimeError, match="HTTP 400"):
        concurrency.call(lambda: (400, None), sleep=lambda s: None)
    with pytest.raises(RuntimeError, match="HTTP 503 after 2"):
        concurrency.call(lambda: (503, "0"), max_busy=2, sleep=lambda s: None)


def test_drive_runs_c_callers_at_once_and_takes_each_decision_once():
    lock, seen, now, peak = threading.Lock(), [], [0], [0]

    def send(n):
        with lock:
            seen.append(n)
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.02)
        with lock:
            now[0] -= 1
        return 200, None

    figures = concurrency.drive(send, 4, tasks=20, seconds=30)
    assert sorted(seen) == list(range(20)) and figures["decisions"] == 20
    assert peak[0] == 4 and figures["callers"] == 4
    assert figures["per_s"] == pytest.approx(20 / figures["seconds"])


def test_drive_stops_taking_decisions_at_its_time_limit():
    def send(n):
        time.sleep(0.05)
        return 200, None

    figures = concurrency.drive(send, 2, tasks=10_000, seconds=0.3)
    assert 2 <= figures["decisions"] < 40


def test_each_nonce_opens_the_same_state_for_both_servers():
    task = concurrency.held_out()[0]
    body, letters = concurrency.with_nonce(task, "c4-17")
    assert body["state"].startswith("Ref c4-17. ") and body["state"].endswith(task.state)
    assert body["id"] == f"{task.id}-c4-17" and body["question"] == task.question
    assert '"state": "Ref c4-17. ' in letters["messages"][-1]["content"]
    assert letters["max_tokens"] == 1 and letters["top_logprobs"] == 20
    other, _ = concurrency.with_nonce(task, "c4-18")
    assert other["state"] != body["state"]


def test_the_prompts_are_the_held_out_split():
    tasks = load_tasks()
    held = concurrency.held_out(tasks)
    assert held and all(t.split == "test" for t in held)
    assert len(held) == sum(t.split == "test" for t in tasks)


# ---- one tiny real run -------------------------------------------------------------------------

needs_llama_server = pytest.mark.skipif(
    LLAMA_SERVER is None, reason="no llama-server build (WORKSHOP_LLAMA_SERVER, .llama.cpp/bin/llama-server or PATH)")


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
    table = concurrency.run_table(model_dir, embedded_gguf, LLAMA_SERVER, tmp_path, levels=(1, 2), tasks=3,
                                  seconds=60, prompts=concurrency.held_out()[:4], start_timeout_s=120)
    assert set(processes._RUNNING) == before  # every server it started is stopped
    for name in concurrency.ROWS:
        for c in ("1", "2"):
            figures = table["rows"][name][c]
            assert figures["decisions"] == 3 and figures["callers"] == int(c)
            assert figures["per_s"] > 0 and figures["p50_ms"] <= figures["p95_ms"]
    assert table["order"][0][0] == "adapter_parallel" and table["order"][1][0] == "adapter_default"
    assert set(table["ratios"]["adapter_default"]) == {"1", "2"}
    assert table["verdicts"]["adapter_parallel"]["levels"] == [1, 2]
    logs = {p.name for p in tmp_path.iterdir()}
    assert {"adapter-default.log", "adapter-parallel-2.log", "llama-server-np2.log"} <= logs
    assert "n_slots = 2" in (tmp_path / "llama-server-np2.log").read_text()
    text = "\n".join(concurrency.report(table))
    assert concurrency.ROWS["llama_server"] in text


@pytest.mark.slow
def test_a_server_that_fails_to_start_leaves_none_running(model_dir, embedded_gguf, tmp_path, no_server_left):
    broken = tmp_path / "llama-server"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    before = set(processes._RUNNING)
    with pytest.raises(processes.ServerFailedToStart):
        concurrency.run_table(model_dir, embedded_gguf, broken, tmp_path, levels=(1,), tasks=1, seconds=5,
                              start_timeout_s=120)
    assert set(processes._RUNNING) == before


def test_the_llama_server_reports_carry_the_table():
    import json
    from pathlib import Path

    from benchmarks import llama_server

    table = _table(_rows([2.0, 3.0, 4.0, 4.0], [2.0, 3.5, 4.0, 5.0]))
    recorded = json.loads((Path(llama_server.__file__).parent / "results" / "llama_server.json").read_text())
    assert "concurrency: decisions/s" not in llama_server.report(recorded)
    full = llama_server.report({**recorded, "concurrency": table})
    alone = llama_server.report_concurrency({"machine": recorded["machine"], "model": recorded["model"],
                                             "concurrency": table})
    for text in (full, alone):
        assert "concurrency: decisions/s" in text and "C=2 0.86x / 1.00x" in text
