"""The benchmarks' reports read the figures their last recorded runs wrote (benchmarks/results/), and a
verdict follows its figure: a benchmark is run by hand and rarely, so a report that no longer reads its own
output, or prints "meets" for a miss, would otherwise go unseen until then."""

import copy
import json
from pathlib import Path

from benchmarks import adapter, llama_server_report, load_report

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def recorded(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def rss_line(text: str, mode: str) -> str:
    section = text.split(f"prefix reuse: {mode} ")[1]
    return next(line for line in section.splitlines() if "worker peak RSS" in line)


def test_the_adapter_report_reads_its_recorded_run_and_each_verdict_follows_its_figure():
    figures = recorded("adapter.json")
    text = adapter.report(figures)
    assert f"context {figures['context']}" in text
    for mode in figures["modes"]:
        line = rss_line(text, mode["mode"])
        assert f"{mode['peak_rss_mib']:.0f} MiB" in line
        assert ("meets" in line) == (mode["peak_rss_mib"] <= adapter.TARGETS["rss_mib"])

    target = adapter.TARGETS["rss_mib"]
    for peak, verdict in ((target + 1, "MISSES"), (target, "meets")):
        changed = copy.deepcopy(figures)
        for mode in changed["modes"]:
            mode["peak_rss_mib"] = peak
        assert all(verdict in rss_line(adapter.report(changed), m["mode"]) for m in changed["modes"])


def test_the_load_report_reads_its_recorded_run():
    figures = recorded("load.json")
    text = load_report.report(figures)
    rss = figures["worker_rss_bytes"]
    assert f"{100 * rss['growth_fraction']:+.2f} %" in text
    assert str(figures["requests_sent"]) in text


def test_the_llama_server_report_reads_its_recorded_run():
    figures = recorded("llama_server.json")
    text = llama_server_report.report(figures)
    assert figures["machine"]["cpu"] in text and f"{figures['tasks']} tasks" in text
    new = figures["new_prompts"]
    assert f"{new['adapter']['p50'] / new['llama']['p50']:.2f}x" in text
    for row in figures["shared_state"]:
        assert f"k={row['k']}:" in text
    assert f"{figures['letters']['valid']}/{figures['tasks']} tasks" in text


def test_the_readout_verdicts_follow_their_figures():
    def study(accuracy, flips, p50, ece_after, coverage=0.88):
        cloze = {
            "accuracy": accuracy,
            "flips": {"flips": flips, "compared": 10},
            "p50_ms": p50,
            "tokens_mean": 100,
            "cost_ratio": p50 / 100.0,
            "heldout": {"n": 20, "before": {"ece": 0.2, "nll": 1.0}, "after": {"ece": ece_after, "nll": 0.9}},
            "sets": {
                "alpha": 0.1,
                "resampled": {"coverage": coverage, "set_size": 2.0, "rounds": 200, "groups": 1, "answers": 39},
            },
        }
        return {"figures": {"cloze": cloze}, "chance": 0.3, "rate_ms_per_token": 1.0}

    good = adapter.readout_verdicts(study(0.6, 0, 110.0, 0.1, coverage=0.86))
    bad = adapter.readout_verdicts(study(0.4, 1, 130.0, 0.11, coverage=0.84))
    assert len(good) == len(bad) == 5
    assert "coverage 86.0% against 1 - alpha 90%" in good[4] and "coverage 84.0%" in bad[4]
    assert all("meets" in line for line in good) and all("MISSES" in line for line in bad)
    assert "2.00x chance" in good[0] and "1/10" in bad[1] and "1.30x" in bad[2]
    text = adapter.report({**recorded("adapter.json"), "readouts": {**study(0.6, 0, 110.0, 0.1), "text": "T"}})
    assert "readouts (temperature 1" in text and good[0] in text


def test_the_in_process_part_reads_its_engine_as_the_benchmark_runs_it(tmp_path):
    """``benchmarks.llama_server.in_process`` on two of the benchmark's requests, with the real engine."""
    from benchmarks import llama_server
    from workshop_lib.demo import prepare_model_dir

    model_dir, _ = prepare_model_dir(tmp_path)
    bodies = [t.request() for t in llama_server.load_tasks(None, limit=2)]
    figures = llama_server.in_process(model_dir, bodies)
    assert figures["decode_calls_p50"] >= 1 and figures["tokens_evaluated_p50"] > 0
    assert 0 < figures["readout_ms_p50"] < figures["in_process_decide_ms_p50"]
