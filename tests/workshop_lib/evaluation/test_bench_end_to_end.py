"""The benchmark end to end through the CLI, against the real adapter (gunicorn + llama.cpp + SmolLM2).

A handful of packaged tasks, two clients for the decision run, and every study on two of them.
The embedded model is tiny, so this checks mechanics and invariants, never accuracy.
"""

import json

import pytest

from workshop_lib.cli import main
from workshop_lib.evaluation import load_tasks

pytestmark = pytest.mark.slow

# Short states; the first two share one state (one group) and get the studies.
TASK_IDS = ["policy-14", "extraction-10", "scoring-07", "intent-09"]


def test_bench_cli_against_the_local_adapter(adapter, tmp_path, capsys):
    by_id = {t.id: t for t in load_tasks()}
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(by_id[i].to_record()) + "\n" for i in TASK_IDS))
    out = tmp_path / "out"

    code = main(
        [
            "bench",
            "--url",
            adapter.url,
            "--tasks",
            str(tasks_file),
            "--concurrency",
            "2",
            "--baseline",
            "--debias",
            "--calibrate",
            "--study-limit",
            "2",
            "--label",
            "local",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "## Decision readout" in printed and "## Option order" in printed and "## Calibration" in printed
    for name in ("report.json", "report.md", "latency.png", "accuracy_by_family.png", "reliability.png"):
        assert (out / name).stat().st_size > 0

    report = json.loads((out / "report.json").read_text())
    decision = report["summary"]["decision"]
    assert (decision["tasks"], decision["answered"], decision["valid"]) == (4, 4, 4)
    assert decision["label"] == "local" and decision["concurrency"] == 2
    assert decision["model"]["file"].endswith(".gguf")
    assert 0 < decision["client_latency_ms"]["p50"] <= decision["client_latency_ms"]["max"]
    for r in report["runs"]["decision"]["results"]:
        assert abs(sum(r["probabilities"].values()) - 1) < 1e-3 and set(r["probabilities"]) == set(r["labels"])
        assert r["predicted"] in r["labels"] and r["input_tokens"] > 0 and 0 < r["server_ms"] <= r["client_latency_ms"]

    runs = report["runs"]
    assert set(runs) == {"decision", "decision_reversed", "debiased", "debiased_reversed", "generation"}
    studied = ["policy-14", "extraction-10"]
    for key in ("decision_reversed", "debiased", "debiased_reversed", "generation"):
        assert [r["task_id"] for r in runs[key]["results"]] == studied
    reversed_ids = [r["presented"] for r in runs["decision_reversed"]["results"]]
    assert reversed_ids == [["yes", "no"], ["INV-29031", "INV-20931", "INV-20391"]]

    # The debiased readout is the adapter's rotations mode: 2n option orders (2 for two options), the
    # state and question evaluated once, and the same orders (so the same answer) whichever way round
    # the options were sent.
    debiased = {r["task_id"]: r for r in runs["debiased"]["results"]}
    flipped = {r["task_id"]: r for r in runs["debiased_reversed"]["results"]}
    shown = {"policy-14": 2, "extraction-10": 6}
    for task_id, k in shown.items():
        r = debiased[task_id]
        assert r["valid"] and r["extra"]["order"] == "rotations"
        assert r["extra"]["order_sensitivity"]["presentations"] == k
        assert r["timing"]["shared_prefix_tokens"] > 0 and r["input_tokens"] > k * r["timing"]["shared_prefix_tokens"]
        for oid, p in r["probabilities"].items():
            assert flipped[task_id]["probabilities"][oid] == pytest.approx(p, abs=1e-4)
    assert report["order_test"]["plain"]["compared"] == 2
    assert report["order_test"]["debiased"]["presentations_mean"] == 4
    assert report["order_test"]["debiased"]["flips"] == 0
    # The shared prefix counted once: fewer tokens than k separate plain decisions.
    deb = report["order_test"]["debiased"]
    assert 0 < deb["evaluated_tokens_mean"] < deb["k_separate_tokens_mean"]

    # The generation baseline answered through chat; whatever it wrote is kept and parsed.
    for r in runs["generation"]["results"]:
        assert r["answered"] and isinstance(r["extra"]["answer"], str) and r["extra"]["parse"]
        assert r["valid"] == (r["predicted"] in r["labels"])

    assert report["calibration"]["report_tasks"] + report["calibration"]["fit_tasks"] == 4
