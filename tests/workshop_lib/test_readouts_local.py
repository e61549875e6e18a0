"""Notebook 05's and 06's readout cells, and the order modes, against a real local adapter that serves the
cloze readout by default, as the local rehearsal and ``make demo`` start it. Mechanics only: the embedded
model is tiny, so no accuracy is asserted."""

from __future__ import annotations

import pytest

from tests.support.adapters import TEST_ENV
from workshop_lib import examples
from workshop_lib.client import EndpointClient
from workshop_lib.evaluation import load_tasks
from workshop_lib.evaluation.order_study import ask_in_each_mode
from workshop_lib.evaluation.readout_study import ask_each_readout, measure_readouts, prediction_sets
from workshop_lib.local.rehearsal import LOCAL_READOUT, LOCAL_REQUEST_TIMEOUT_S

pytestmark = pytest.mark.slow

TASK_IDS = ["tool_selection-01", "tool_selection-03"]  # short states: one fitting (dev) task, one held out


@pytest.fixture(scope="module")
def cloze_server(adapters):
    # the rehearsal's request limit too: these 2 cores are shared
    return adapters.shared(**TEST_ENV, **LOCAL_READOUT, DECISION_ADAPTER_REQUEST_TIMEOUT=LOCAL_REQUEST_TIMEOUT_S)


def test_one_decision_both_ways_as_notebook_05_shows_it(cloze_server):
    view = ask_each_readout(EndpointClient.local(cloze_server.url), examples.SUPPORT_ROUTE)
    letters, cloze = view.decisions
    n = len(examples.SUPPORT_ROUTE["options"])
    assert [d.id for d in view.decisions] == [f"{examples.SUPPORT_ROUTE['id']} ({r})" for r in ("letters", "cloze")]
    for d in view.decisions:
        assert list(d.option_ids) == [o["id"] for o in examples.SUPPORT_ROUTE["options"]]
        assert abs(sum(d.probabilities) - 1.0) < 1e-6
    assert "option_tokens" not in letters.raw  # the readout was the one asked for, not the server's default
    assert len(cloze.raw["option_tokens"]) == n and all(t > 0 for t in cloze.raw["option_tokens"])
    text = str(view)
    assert "letters:" in text and "cloze:" in text and cloze.raw["normalize"] in text


def test_order_modes_ask_the_letters_on_a_cloze_default_server(cloze_server):
    view = ask_in_each_mode(EndpointClient.local(cloze_server.url), examples.SUPPORT_ROUTE)
    assert [d.raw["order"] for d in view.decisions] == ["as_given", "prior", "rotations"]
    assert all("option_tokens" not in d.raw for d in view.decisions)
    assert str(view).splitlines()[0].startswith("order modes, read with letters")  # it says which readout


def test_the_readout_study_sends_each_readout_both_ways(cloze_server, tmp_path):
    by_id = {t.id: t for t in load_tasks()}
    tasks = [by_id[i] for i in TASK_IDS]
    study = measure_readouts(EndpointClient.local(cloze_server.url), tasks, progress=False)
    assert list(study.by_readout) == ["letters", "cloze"]
    for readout, (original, reversed_run) in study.by_readout.items():
        assert original.settings["readout"] == reversed_run.settings["readout"] == readout
        assert [r.valid for r in original.results + reversed_run.results] == [True] * 4, readout
        assert [r.order for r in reversed_run.results] == ["reversed"] * 2
        assert {r.extra.get("order") for r in original.results} == {"as_given"}  # what its calibration is for
    figures = study.figures
    assert figures["cloze"]["flips"]["compared"] == 2
    assert figures["cloze"]["flips"]["flips"] == 0  # cloze lists no options: the order cannot move the answer
    assert study.chance == pytest.approx(sum(1 / len(t.options) for t in tasks) / 2)
    for f in figures.values():
        assert f["tokens_mean"] > 0 and f["p50_ms"] > 0
        assert f["heldout"]["n"] == 1  # tool_selection-03 is held out
    text = study.text()
    assert "letters" in text and "cloze" in text and "prediction sets" in text
    with pytest.raises(ValueError, match="unknown readouts"):
        measure_readouts(EndpointClient.local(cloze_server.url), tasks, readouts=["words"], progress=False)
    # notebook 06's calibration cell: the file for the readout the endpoint serves
    from workshop_lib.evaluation.profiles import read_document
    from workshop_lib.evaluation.served import served_readout

    served = served_readout(EndpointClient.local(cloze_server.url))
    assert served == "cloze"
    doc = read_document(study.save_calibration(tmp_path, served))
    assert (doc["readout"], doc["order"]) == ("cloze", "as_given")
    assert doc["profiles"] == study.calibration("cloze")["profiles"]


def test_prediction_sets_weight_the_kept_profiles_by_their_heldout_tasks():
    doc = {
        "alpha": 0.1,
        "profiles": {
            "a": {"conformal": {"kept": True, "heldout_n": 30, "fit_coverage": 0.9, "fit_set_size": 1.0}},
            "b": {"conformal": {"kept": True, "heldout_n": 10, "fit_coverage": 1.0, "fit_set_size": 3.0}},
            "c": {"conformal": {"kept": False, "heldout_n": 2, "fit_coverage": None, "fit_set_size": None}},
        },
    }
    sets = prediction_sets(doc)
    assert sets["kept"] == 2
    assert sets["coverage"] == pytest.approx(0.925) and sets["set_size"] == pytest.approx(1.5)
    assert prediction_sets({"alpha": 0.1, "profiles": {}})["kept"] == 0


def test_calibrate_fits_for_the_readout_the_server_serves_unless_one_is_named(cloze_server, tmp_path, capsys):
    import json

    from workshop_lib.cli import main
    from workshop_lib.evaluation.profiles import read_document

    by_id = {t.id: t for t in load_tasks()}
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(by_id[i].to_record()) + "\n" for i in TASK_IDS))
    fitted = {}
    for named in (None, "letters"):
        out = tmp_path / f"{named}.json"
        args = ["calibrate", "--url", cloze_server.url, "--tasks", str(tasks_file), "--out", str(out), "--no-progress"]
        assert main(args + (["--readout", named] if named else [])) == 0
        fitted[named] = (read_document(out)["readout"], capsys.readouterr().out)
    assert fitted[None][0] == "cloze" and "cloze readout (the one the endpoint serves)" in fitted[None][1]
    assert fitted["letters"][0] == "letters" and "letters readout (as asked)" in fitted["letters"][1]
