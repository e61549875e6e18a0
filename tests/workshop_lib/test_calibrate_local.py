"""``workshop calibrate`` and the order study against the real local adapter (the session's shared one).

A few short packaged tasks; the embedded model is tiny, so this checks mechanics (what is sent, what
is recorded, the file the adapter reads), never accuracy or speed.
"""

from __future__ import annotations

import json

import pytest

from decision_adapter import served_calibration
from workshop_lib import examples
from workshop_lib.cli import main
from workshop_lib.client import EndpointClient
from workshop_lib.evaluation import load_tasks
from workshop_lib.evaluation.order_study import ask_in_each_mode, measure_order_modes
from workshop_lib.evaluation.profiles import read_document

pytestmark = pytest.mark.slow

# Short states: two fitting (dev) tasks and two held-out ones, in two profiles.
TASK_IDS = ["tool_selection-01", "intent-01", "tool_selection-03", "intent-09"]


def _tasks():
    by_id = {t.id: t for t in load_tasks()}
    return [by_id[i] for i in TASK_IDS]


def test_calibrate_writes_the_file_the_adapter_reads_for_the_served_model(adapter, tmp_path, capsys):
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_record()) + "\n" for t in _tasks()))
    out = tmp_path / "calibration.json"
    code = main(
        [
            "calibrate",
            "--url",
            adapter.url,
            "--tasks",
            str(tasks_file),
            "--order",
            "prior",
            "--alpha",
            "0.5",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    doc = read_document(out)
    answer = EndpointClient.local(adapter.url).decide(_tasks()[0].request())
    assert doc["fit_for"] == {"gguf_sha256": answer.model["sha256"], "prompt_version": answer.raw["prompt_version"]}
    assert doc["order"] == "prior"
    assert doc["data"]["fit_n"] == 2 and doc["data"]["heldout_n"] == 2, printed
    assert set(doc["profiles"]) == {"choice/3-4"}
    assert "choice/3-4" in printed and str(out) in printed
    # the adapter's own reader takes it, for this model and prompt, in that order mode
    parsed = served_calibration.load(out, answer.model["sha256"], "the served GGUF", answer.raw["prompt_version"])
    assert parsed.order == "prior"
    assert set(parsed.temperatures) == {name for name, p in doc["profiles"].items() if p["kept"]}
    # alpha 0.5 needs one held-out answer for a set: the two held out give one, at the served temperature
    assert doc["alpha"] == parsed.alpha == 0.5 and doc["readout"] == parsed.readout == "letters"
    sets = doc["profiles"]["choice/3-4"]["conformal"]
    assert sets["kept"] and parsed.thresholds == {"choice/3-4": sets["threshold"]} and "prediction set" in printed


def test_the_order_study_sends_each_mode_and_reads_what_it_reports(adapter, tmp_path):
    one_fit_one_held_out = [_tasks()[0], _tasks()[2]]
    study = measure_order_modes(EndpointClient.local(adapter.url), one_fit_one_held_out, progress=False)
    assert list(study.figures) == ["as_given", "prior", "rotations"]
    for mode, (original, reversed_run) in study.by_mode.items():
        assert [r.valid for r in original.results + reversed_run.results] == [True] * 4, mode
        assert {r.extra.get("order") for r in original.results} == {mode}
        assert all(r.extra["calibration"]["source"] == "request" for r in original.results)  # temperature 1 sent
        assert study.figures[mode]["flips"]["compared"] == 2
    rotations = study.figures["rotations"]
    # 4 options: their 4 rotations as given and 4 of them reversed
    assert rotations["sensitivity"]["n"] == 2 and rotations["sensitivity"]["presentations"] == 8
    assert study.figures["as_given"]["sensitivity"]["n"] == 0
    assert all(
        isinstance(r.extra["prior"], list) and len(r.extra["prior"]) == 4 for r in study.by_mode["prior"][0].results
    )
    # every rotation evaluates more than the plain question does
    assert rotations["tokens_mean"] > study.figures["as_given"]["tokens_mean"]
    assert rotations["rotation_cost"]["pairs"] == 2
    assert "risk / coverage" in study.text()

    # calibrate from a run saved instead of asking again: only in the order mode it was made in
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(study.by_mode["prior"][0].to_dict()))
    out = tmp_path / "calibration.json"
    assert main(["calibrate", "--run", str(saved), "--order", "prior", "--out", str(out), "--no-progress"]) == 0
    assert read_document(out)["profiles"] == study.calibration("prior")["profiles"]
    assert main(["calibrate", "--run", str(saved), "--order", "as_given", "--out", str(out), "--no-progress"]) == 1
    # notebook 06's cells: the study is checked, and writes the file the next package carries
    assert study.ok and "each valid" in study.summary
    written = study.save_calibration(tmp_path, "as_given")
    assert read_document(written)["order"] == "as_given"


def test_one_decision_in_each_mode_as_notebook_05_shows_it(adapter):
    view = ask_in_each_mode(EndpointClient.local(adapter.url), examples.SUPPORT_ROUTE)
    assert [d.raw["order"] for d in view.decisions] == ["as_given", "prior", "rotations"]
    assert [d.id for d in view.decisions] == [
        f"{examples.SUPPORT_ROUTE['id']} ({m})" for m in ("as_given", "prior", "rotations")
    ]
    text = str(view)
    assert "content-free prior" in text and "presentations of 4 options" in text
    assert view.figure() is not None
