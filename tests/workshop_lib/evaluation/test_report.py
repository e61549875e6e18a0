"""Percentiles, summaries, side-by-side ratios, Markdown/JSON output and figures on fixed runs."""

import json

import numpy as np
import pytest

from workshop_lib.evaluation.report import compare, latency_stats, load_comparison, percentile, summarize
from workshop_lib.evaluation.report_view import ReportView
from workshop_lib.evaluation.runner import Run, TaskResult


def test_percentile_known_values_and_numpy_agreement():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert percentile([7], 95) == 7 and percentile([], 50) is None
    assert percentile([5, 1, 3], 0) == 1 and percentile([5, 1, 3], 100) == 5
    data = [0.3, 1.7, 19.3, 0.35, 0.6, 2.2, 1.1]
    for q in (5, 50, 95, 99):
        assert percentile(data, q) == pytest.approx(float(np.percentile(data, q)))
    with pytest.raises(ValueError):
        percentile([1], 101)


def _r(
    task_id,
    family,
    type_,
    expected,
    predicted,
    *,
    latency,
    valid=True,
    answered=True,
    attempts=1,
    busy=False,
    presented=("a", "b"),
    tokens=100,
):
    labels = list(presented)
    probs = {label: (0.9 if label == predicted else 0.1 / (len(labels) - 1)) for label in labels} if valid else None
    return TaskResult(
        task_id=task_id,
        family=family,
        type=type_,
        expected=expected,
        labels=labels,
        presented=list(presented),
        valid=valid,
        answered=answered,
        predicted=predicted if valid else None,
        correct=valid and predicted == expected,
        probabilities=probs,
        client_latency_ms=latency,
        server_ms=latency and latency * 0.9,
        input_tokens=tokens,
        attempts=attempts,
        busy=busy,
    )


def _run(label="cpu", wall_s=10.0, scale=1.0):
    results = [
        _r("r1", "routing", "choice", "a", "a", latency=1000 * scale),
        _r("r2", "routing", "choice", "b", "a", latency=2000 * scale),
        _r("p1", "policy", "noul", "yes", "yes", latency=3000 * scale, presented=("no", "yes")),
        _r("p2", "policy", "noul", "no", None, latency=4000 * scale, valid=False, presented=("no", "yes")),
        _r(
            "s1",
            "scoring",
            "score",
            "0",
            None,
            latency=50 * scale,
            valid=False,
            answered=False,
            attempts=4,
            busy=True,
            presented=("0", "1", "2", "3"),
        ),
    ]
    return Run(label=label, kind="decision", results=results, endpoint="http://x", wall_s=wall_s)


def test_summary_counts_accuracy_and_groups():
    s = summarize(_run())
    assert (s["tasks"], s["answered"], s["valid"], s["correct"]) == (5, 4, 3, 2)
    assert s["accuracy"] == pytest.approx(0.4) and s["accuracy_of_valid"] == pytest.approx(2 / 3)
    assert s["by_family"]["routing"] == {"n": 2, "valid": 2, "correct": 1, "accuracy": 0.5, "chance": 0.5}
    assert s["by_family"]["scoring"]["accuracy"] == 0.0 and s["by_family"]["scoring"]["chance"] == 0.25
    assert s["by_type"]["noul"]["correct"] == 1
    assert s["busy"] == {"retried_after_503": 1, "failed_with_503": 1} and s["errors"] == 1
    assert s["throughput_per_s"] == 0.5
    assert s["reference"]["first_option"] == pytest.approx(0.6)  # r1 "a", p2 "no" and s1 "0" come first
    assert s["predicted_position"] == {"1": 2, "2": 1}


def test_latency_is_over_answered_requests_only():
    s = summarize(_run())
    # The fast failure (50 ms) is left out: 1000, 2000, 3000, 4000 ms remain.
    assert s["client_latency_ms"]["n"] == 4
    assert s["client_latency_ms"]["p50"] == 2500 and s["client_latency_ms"]["max"] == 4000
    assert s["client_latency_ms"]["p95"] == pytest.approx(3850)
    assert latency_stats([])["p50"] is None


def test_compare_gives_a_over_b_ratios():
    cpu, gpu = summarize(_run("cpu", wall_s=10.0, scale=5.0)), summarize(_run("gpu", wall_s=2.0))
    rows = {r["metric"]: r for r in compare(cpu, gpu)}
    assert rows["client p50"]["ratio"] == pytest.approx(5.0)
    assert rows["throughput (tasks/s)"]["ratio"] == pytest.approx(0.2)
    assert rows["accuracy"]["ratio"] == pytest.approx(1.0)
    assert rows["valid responses"]["a"] == 3 and rows["valid responses"]["a_total"] == 5


def test_report_markdown_json_round_trip_and_comparison(tmp_path):
    first = ReportView(runs={"decision": _run("cpu", scale=5.0)}, tasks_source="fixed")
    saved = first.save(tmp_path / "cpu", figures=False)
    assert set(saved) == {"json", "markdown"}
    loaded = ReportView.load(saved["json"])
    assert loaded.summary["accuracy"] == first.summary["accuracy"]
    assert [r.to_dict() for r in loaded.decision.results] == [r.to_dict() for r in first.decision.results]

    other = load_comparison(saved["json"])
    assert other["label"] == "cpu"
    second = ReportView(runs={"decision": _run("gpu")}, compare_with=other)
    text = second.to_markdown()
    assert "## Side by side" in text and "| client p50 | 12.500 s | 2.500 s | 5.00× |" in text
    assert "| 3/5 | 2/5 (40.0 %) | 2.500 s |" in text  # the headline row of this run
    data = json.loads(second.to_json())
    assert data["comparison"][2]["ratio"] == pytest.approx(5.0) and data["summary"]["decision"]["label"] == "gpu"


def test_load_comparison_refuses_other_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{}")
    with pytest.raises(ValueError, match="not a benchmark report"):
        load_comparison(path)


def test_figures_are_written_as_png(tmp_path):
    pytest.importorskip("matplotlib")
    report = ReportView(runs={"decision": _run(), "generation": _run("gen", scale=2.0)}, calibrate=True)
    paths = report.save(tmp_path)
    for name in ("latency", "accuracy_by_family", "reliability"):
        assert paths[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _order_runs(n: int) -> dict:
    """A decision run and its reversed-order run over n tasks, every other top choice flipped."""
    plain = [_r(f"t{i}", "routing", "choice", "a", "a", latency=100) for i in range(n)]
    flipped = [_r(f"t{i}", "routing", "choice", "a", "b" if i % 2 else "a", latency=100) for i in range(n)]
    return {
        "decision": Run(label="cpu", kind="decision", results=plain, endpoint="http://x", wall_s=1.0),
        "decision_reversed": Run(
            label="cpu",
            kind="decision",
            results=flipped,
            endpoint="http://x",
            wall_s=1.0,
            settings={"order": "reversed"},
        ),
    }


def test_the_option_order_table_says_when_too_few_tasks_were_compared():
    from workshop_lib.evaluation.markdown import MIN_STUDIED

    small = ReportView(runs=_order_runs(2)).to_markdown()
    assert "| 1/2 (" in small  # the flip count is still shown, under the caveat
    assert (
        "Too few to mean anything: 2 tasks compared in both orders, so each task is 50 points of the flip rate" in small
    )
    enough = ReportView(runs=_order_runs(MIN_STUDIED)).to_markdown()
    assert "## Option order" in enough and "Too few to mean anything" not in enough


def test_the_calibration_table_marks_a_temperature_at_the_search_bound_and_too_few_tasks():
    import math

    def result(task_id, split, correct):
        logits = {"a": 0.0, "b": 3.0}
        return TaskResult(
            task_id=task_id,
            family="f",
            type="choice",
            expected="b" if correct else "a",
            labels=["a", "b"],
            presented=["a", "b"],
            valid=True,
            answered=True,
            predicted="b",
            correct=correct,
            split=split,
            option_logits=logits,
            probabilities={k: math.exp(v) / (1 + math.exp(3.0)) for k, v in logits.items()},
            client_latency_ms=100.0,
        )

    wrong = [result("d0", "dev", False), result("t0", "test", False)]  # always wrong: T runs to its bound
    text = ReportView(runs={"decision": Run("cpu", "decision", wrong, wall_s=1.0)}, calibrate=True).to_markdown()
    after = next(line for line in text.splitlines() if line.startswith("| after"))
    assert "(search bound)" in after
    assert "Too few to mean anything: fitted on 1 and reported on 1 tasks" in text
    mixed = [result(f"d{i}", "dev", i % 3 != 0) for i in range(20)] + [
        result(f"t{i}", "test", i % 3 != 0) for i in range(20)
    ]
    text = ReportView(runs={"decision": Run("cpu", "decision", mixed, wall_s=1.0)}, calibrate=True).to_markdown()
    after = next(line for line in text.splitlines() if line.startswith("| after"))
    assert "(search bound)" not in after and "Too few to mean anything" not in text
