"""Served calibration, the pure part (profile names are the contract's, tests/contract): the fit kept only when held-out NLL improves, the
file's format (round trip and refusals), and the order study's arithmetic (risk/coverage, rotation cost)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.support.calibration_results import SHA, AnsweringClient, mixed_results, task_result
from workshop_lib.evaluation import profiles
from workshop_lib.evaluation.order_study import heldout_calibration, per_token_ms, risk_coverage, rotation_cost
from workshop_lib.evaluation.profiles import (
    CalibrationFileError,
    Labelled,
    calibration_document,
    check_document,
    fit_profile,
    read_document,
    write_document,
)
from workshop_lib.evaluation.runner import TaskResult, evaluated_tokens


def _rows(rng, n, *, p_top, right_share, k=3, profile="choice/3-4"):
    """Answers putting p_top on one option, the expected one in ``right_share`` of them."""
    out = []
    for i in range(n):
        top = int(rng.integers(k))
        target = top if rng.random() < right_share else (top + 1) % k
        p = np.full(k, (1 - p_top) / (k - 1))
        p[top] = p_top
        out.append(Labelled(f"t{i}", profile, tuple(np.log(p)), target))
    return out


def test_an_overconfident_model_is_softened_and_kept_when_held_out_nll_improves():
    rng = np.random.default_rng(1)
    fit, held = _rows(rng, 60, p_top=0.98, right_share=0.6), _rows(rng, 40, p_top=0.98, right_share=0.6)
    entry = fit_profile(fit, held)
    assert entry["temperature"] > 1.0
    assert entry["kept"] is True
    assert entry["heldout"]["nll_after"] < entry["heldout"]["nll_before"]
    assert entry["heldout"]["ece_after"] < entry["heldout"]["ece_before"]
    assert (entry["fit_n"], entry["heldout_n"]) == (60, 40) and entry["reason"] is None


def test_a_fit_that_makes_held_out_nll_worse_is_not_kept():
    rng = np.random.default_rng(2)
    # Fitted where the model is always right (sharpen), judged where it is right a third of the time.
    fit, held = _rows(rng, 30, p_top=0.6, right_share=1.0), _rows(rng, 30, p_top=0.6, right_share=0.3)
    entry = fit_profile(fit, held)
    assert entry["temperature"] < 1.0
    assert entry["heldout"]["nll_after"] > entry["heldout"]["nll_before"]
    assert entry["kept"] is False and "does not improve" in entry["reason"]


def test_a_profile_without_held_out_answers_is_not_kept():
    rng = np.random.default_rng(3)
    entry = fit_profile(_rows(rng, 10, p_top=0.9, right_share=0.5), [])
    assert entry["kept"] is False and entry["heldout"] is None and entry["heldout_n"] == 0
    assert "no held-out answer" in entry["reason"]


def test_a_profile_judged_on_fewer_than_the_minimum_held_out_answers_is_not_kept():
    # The overconfident answers of the kept case above, judged on a few held-out ones (one confidently
    # wrong, so softening helps): one fewer than the minimum and the NLL improves, but the profile is
    # not kept and says why; with the minimum it is kept.
    rng = np.random.default_rng(1)
    fit, held = _rows(rng, 60, p_top=0.98, right_share=0.6), _rows(rng, 40, p_top=0.98, right_share=0.6)
    few = [h for h in held if h.target != int(np.argmax(h.log_probs))][:1] + held[: profiles.MIN_HELDOUT - 2]
    assert len(few) == profiles.MIN_HELDOUT - 1
    entry = fit_profile(fit, few)
    assert entry["heldout"]["nll_after"] < entry["heldout"]["nll_before"]
    assert entry["kept"] is False and f"only {len(few)} held-out answers" in entry["reason"]
    enough = few + [h for h in held if h not in few][:1]
    judged = fit_profile(fit, enough)
    assert judged["heldout"]["nll_after"] < judged["heldout"]["nll_before"] and judged["kept"] is True


def test_a_model_that_reads_positions_is_flattened_within_the_adapters_temperature_range():
    rng = np.random.default_rng(4)
    # Always the first option, with confidence, whatever the label: only uniform answers help.
    rows = []
    for i in range(40):
        p = np.array([0.9, 0.05, 0.05])
        rows.append(Labelled(f"t{i}", "choice/3-4", tuple(np.log(p)), int(rng.integers(3))))
    entry = fit_profile(rows[:20], rows[20:])
    low, high = profiles.TEMPERATURE_RANGE
    assert low < entry["temperature"] <= high
    assert entry["temperature"] > 10


def test_the_file_holds_what_the_adapter_reads_and_round_trips(tmp_path):
    doc = calibration_document(mixed_results(), order="rotations", tasks="tasks.jsonl")
    assert doc["format"] == "decision-calibration/2"
    assert doc["fit_for"] == {"gguf_sha256": SHA, "prompt_version": "decision-prompt/1"}
    assert doc["order"] == "rotations" and doc["readout"] == "letters" and doc["alpha"] == 0.1
    assert set(doc["profiles"]) == {"choice/3-4", "noul/2"}
    assert doc["data"] == {"tasks": "tasks.jsonl", "fit_n": 16, "heldout_n": 32}
    for entry in doc["profiles"].values():
        assert set(entry) == {
            "temperature",
            "kept",
            "fit_n",
            "heldout_n",
            "heldout",
            "reason",
            "conformal",
            "temperature_from",
            "temperature_fit_n",
        }
        assert set(entry["heldout"]) == set(profiles.HELDOUT_KEYS)
    path = write_document(doc, tmp_path)
    assert path.name == "calibration.json"
    assert read_document(path) == json.loads(json.dumps(doc))


def test_each_profile_keeps_a_prediction_set_only_with_enough_held_out_answers_for_its_alpha():
    at_10 = calibration_document(mixed_results(), order="as_given", tasks="t")  # 16 held out per profile; 9 needed
    assert all(entry["conformal"]["kept"] for entry in at_10["profiles"].values())
    at_5 = calibration_document(mixed_results(), order="as_given", tasks="t", alpha=0.05)  # 19 needed
    assert at_5["alpha"] == 0.05
    for entry in at_5["profiles"].values():
        assert not entry["conformal"]["kept"] and "needs at least 19" in entry["conformal"]["reason"]
    assert "prediction set: not kept (16 held-out answers" in profiles.describe(at_5)
    with pytest.raises(CalibrationFileError, match="alpha"):
        calibration_document(mixed_results(), order="as_given", tasks="t", alpha=1.0)
    with pytest.raises(CalibrationFileError, match="readout"):
        calibration_document(mixed_results(), order="as_given", tasks="t", readout="tea-leaves")


def test_the_split_falls_back_to_a_stable_hash_when_tasks_carry_none():
    results = [task_result(i, split="test") for i in range(40)]
    first = calibration_document(results, order="as_given", tasks="t")
    again = calibration_document(list(reversed(results)), order="as_given", tasks="t")
    assert first["data"] == again["data"]
    assert 0 < first["data"]["fit_n"] < 40 and first["data"]["fit_n"] + first["data"]["heldout_n"] == 40


def test_answers_from_two_models_cannot_be_fitted_together():
    results = mixed_results()
    results[5].extra["model_sha256"] = "cd" * 32
    with pytest.raises(CalibrationFileError, match="model.sha256"):
        calibration_document(results, order="as_given", tasks="t")


def test_an_unknown_order_mode_is_refused():
    with pytest.raises(CalibrationFileError, match="order"):
        calibration_document(mixed_results(), order="shuffled", tasks="t")


def _doc():
    return calibration_document(mixed_results(), order="as_given", tasks="t")


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d.update(format="decision-calibration/3"), "format"),
        (lambda d: d.update(alpha=1.0), "alpha"),
        (lambda d: d.pop("readout"), "readout"),
        (lambda d: d["profiles"]["noul/2"]["conformal"].update(threshold=1.5), "conformal.threshold"),
        (lambda d: d["profiles"]["noul/2"]["conformal"].update(kept=True, threshold=None), "without a threshold"),
        (lambda d: d["fit_for"].update(gguf_sha256="xyz"), "gguf_sha256"),
        (lambda d: d["fit_for"].update(prompt_version=""), "prompt_version"),
        (lambda d: d.update(order="sorted"), "order"),
        (lambda d: d["profiles"].update({"choice/6": d["profiles"]["choice/3-4"]}), "choice/6"),
        (lambda d: d["profiles"]["noul/2"].update(temperature=1000.0), "temperature"),
        (lambda d: d["profiles"]["noul/2"].update(temperature=float("nan")), "temperature"),
        (lambda d: d["profiles"]["noul/2"].update(kept="yes"), "kept"),
        (lambda d: d["profiles"]["noul/2"].update(kept=True, heldout=None), "held-out"),
        (lambda d: d["data"].update(fit_n=-1), "data.fit_n"),
    ],
)
def test_a_broken_file_is_refused_naming_the_field(change, field):
    doc = json.loads(json.dumps(_doc()))
    change(doc)
    with pytest.raises(CalibrationFileError, match=field.replace("/", "/").replace("-", "-")):
        check_document(doc)


def test_held_out_figures_apply_only_kept_profiles():
    results = mixed_results()
    doc = _doc()
    for entry in doc["profiles"].values():
        entry["kept"] = False
    unchanged = heldout_calibration(results, doc)
    assert unchanged["before"] == unchanged["after"] and unchanged["kept"] == []
    doc["profiles"]["noul/2"].update(kept=True, temperature=4.0)
    changed = heldout_calibration(results, doc)
    assert changed["after"]["nll"] != changed["before"]["nll"] and changed["kept"] == ["noul/2"]


def test_risk_and_coverage_over_answer_mass_thresholds():
    results = [
        task_result(0, split="test", mass=0.99, correct=True),
        task_result(1, split="test", mass=0.99, correct=False),
        task_result(2, split="test", mass=0.6, correct=False),
        task_result(3, split="test", mass=0.3, correct=True),
    ]
    failed = TaskResult("task-9", "f", "choice", "a", ["a", "b"], answered=False)
    rows = {r["min_answer_mass"]: r for r in risk_coverage([*results, failed], (0.0, 0.5, 0.9, 0.999))}
    assert (rows[0.0]["answered"], rows[0.0]["coverage"], rows[0.0]["risk"]) == (4, 4 / 5, 2 / 4)
    assert (rows[0.5]["answered"], rows[0.5]["risk"]) == (3, 2 / 3)
    assert (rows[0.9]["answered"], rows[0.9]["risk"]) == (2, 1 / 2)
    assert (rows[0.999]["answered"], rows[0.999]["coverage"], rows[0.999]["risk"]) == (0, 0.0, None)


def _timed(i, ms, tokens):
    r = task_result(i, split="test")
    r.server_ms, r.input_tokens = ms, tokens
    return r


def test_the_per_token_rate_is_the_slope_of_time_against_tokens():
    assert per_token_ms([100, 200, 300], [15.0, 25.0, 35.0]) == pytest.approx(0.1)
    assert per_token_ms([100, 100], [1.0, 2.0]) is None


def test_rotation_cost_compares_extra_time_with_what_extra_tokens_cost():
    base = [_timed(i, 0.1 * t, t) for i, t in enumerate((100, 200, 300))]
    rotations = [_timed(i, 0.1 * t + 0.1 * 50 * 1.5, t + 50) for i, t in enumerate((100, 200, 300))]
    cost = rotation_cost(base, rotations)
    assert cost["pairs"] == 3 and cost["extra_tokens"] == 150
    assert cost["rate_ms_per_token"] == pytest.approx(0.1)  # as_given's time per token
    assert cost["ratio"] == pytest.approx(1.5)
    assert rotation_cost(base, rotations, rate_ms=0.15)["ratio"] == pytest.approx(1.0)
    assert math.isclose(cost["extra_ms"], 22.5)
    assert cost["rate_source"] == "read"


def test_rotation_cost_leaves_the_head_the_server_kept_out_of_the_rate():
    # each answer read a 50-token head it did not evaluate: 0.1 ms per token evaluated, 0.075 per token read
    base = [_timed(i, 0.1 * (t - 50), t) for i, t in enumerate((100, 200, 300))]
    rotations = [_timed(i, 0.1 * (t - 50) + 0.1 * 40, t + 40) for i, t in enumerate((100, 200, 300))]
    counted = rotation_cost(base, rotations, head_tokens=50)
    assert counted["rate_ms_per_token"] == pytest.approx(0.1) and counted["rate_source"] == "evaluated"
    assert counted["ratio"] == pytest.approx(1.0) and counted["extra_tokens"] == 120
    assert rotation_cost(base, rotations)["ratio"] == pytest.approx(4 / 3)  # the head priced in: too high


def test_rotations_count_their_shared_prefix_once_unless_the_server_says():
    r = _timed(0, 10.0, 4 * 200)  # four rotation prompts of 200 tokens, sharing their first 150
    r.timing = {"shared_prefix_tokens": 150}
    r.extra["order_sensitivity"] = {"presentations": 4, "of": 4, "max_spread": 0.1, "top_changes": False}
    assert evaluated_tokens(r) == 150 + 4 * 50
    r.timing["input_tokens"] = 321
    assert evaluated_tokens(r) == 321
    plain = _timed(1, 10.0, 200)
    assert evaluated_tokens(plain) == 200


def test_notebook_06s_closing_check_reads_an_order_study():
    from workshop_lib import steps
    from workshop_lib.config import WorkshopConfig
    from workshop_lib.evaluation.order_study import OrderStudy
    from workshop_lib.evaluation.runner import Run

    def run(results):
        return Run(label="x", kind="decision", results=results, settings={"order_mode": "as_given"})

    aws = steps.Workshop(WorkshopConfig(mode="aws"))  # the rows as a participant reads them; nothing raised
    good = OrderStudy({"as_given": (run(mixed_results()), run(mixed_results()))}, tasks="t")
    checks = steps.check_outcome(aws, "06", orders=good)
    assert checks.ok and f"{2 * len(mixed_results())} answers in 1 order modes, each valid" in str(checks)
    failed = TaskResult("task-9", "f", "choice", "a", ["a", "b"], answered=False)
    bad = OrderStudy({"as_given": (run([*mixed_results(), failed]), run(mixed_results()))}, tasks="t")
    checks = steps.check_outcome(aws, "06", orders=bad)
    assert not checks.ok and "1 invalid or failed answers" in str(checks)


def test_the_order_study_warms_each_option_counts_prior_before_any_timed_request(monkeypatch):
    from workshop_lib.evaluation import order_study
    from workshop_lib.evaluation.runner import Run
    from workshop_lib.evaluation.tasks import Task

    def task(i, n):
        return Task(f"t{i}", "f", "choice", "s", "q?", tuple((f"o{j}", f"O{j}") for j in range(n)), "o0")

    tasks = [task(0, 3), task(1, 2), task(2, 3), task(3, 5)]
    calls = []

    class Recording:
        def decide(self, body):
            calls.append(("warm", body["id"], body["order"], len(body["options"])))

    def run_mode(client, task_list, mode, order="original", **_):
        calls.append(("timed", mode, order, tuple(t.id for t in task_list)))
        return Run(label=mode, kind="decision", results=[], settings={"order_mode": mode})

    monkeypatch.setattr(order_study, "run_mode", run_mode)
    monkeypatch.setattr(order_study, "OrderStudy", lambda by_mode, **_: by_mode)
    by_mode = order_study.measure_order_modes(Recording(), tasks, modes=("prior", "as_given"))
    assert calls[:3] == [
        ("warm", "t1@warm-prior", "prior", 2),
        ("warm", "t0@warm-prior", "prior", 3),
        ("warm", "t3@warm-prior", "prior", 5),
    ]
    # Task by task, every mode and order before the next task, as_given first: ratios compare requests made
    # moments apart.
    combos = [("as_given", "original"), ("as_given", "reversed"), ("prior", "original"), ("prior", "reversed")]
    assert calls[3:] == [("timed", mode, order, (t.id,)) for t in tasks for mode, order in combos]
    assert list(by_mode) == ["as_given", "prior"]
    assert [run.label for run in by_mode["prior"]] == ["prior", "prior (reversed)"]
    calls.clear()
    order_study.measure_order_modes(Recording(), tasks, modes=("as_given",))
    assert [c[0] for c in calls] == ["timed"] * 8  # no prior mode: nothing to warm


def test_interleaved_runs_join_into_one_run_per_mode_and_order_in_task_order():
    from workshop_lib.evaluation.order_study import join_runs
    from workshop_lib.evaluation.runner import Run, TaskResult

    def one(task_id, wall):
        result = TaskResult(task_id=task_id, family="f", type="choice", expected="a", labels=["a", "b"])
        return Run(
            label="x",
            kind="decision",
            results=[result],
            wall_s=wall,
            model={"file": "m.gguf"} if wall > 1 else {},
            settings={"order": "reversed", "order_mode": "prior"},
        )

    joined = join_runs([one("t0", 1.0), one("t1", 2.0), one("t2", 0.5)], "prior (reversed)")
    assert [r.task_id for r in joined.results] == ["t0", "t1", "t2"]
    assert joined.label == "prior (reversed)" and joined.wall_s == 3.5 and joined.model == {"file": "m.gguf"}
    assert joined.settings == {"order": "reversed", "order_mode": "prior"}


def test_the_order_study_reports_the_prediction_sets_and_the_bench_judges_their_coverage():
    from benchmarks.adapter import order_verdicts
    from workshop_lib.evaluation.order_study import OrderStudy, set_figures
    from workshop_lib.evaluation.runner import Run

    doc = calibration_document(mixed_results(), order="as_given", tasks="t")
    sets = set_figures(doc)
    entries = doc["profiles"].values()
    assert sets["alpha"] == 0.1 and sets["n"] == sum(e["fit_n"] for e in entries)
    assert sets["coverage"] == pytest.approx(
        sum(e["conformal"]["fit_coverage"] * e["fit_n"] for e in entries) / sets["n"]
    )
    assert (
        min(e["conformal"]["fit_set_size"] for e in entries)
        <= sets["mean_size"]
        <= max(e["conformal"]["fit_set_size"] for e in entries)
    )
    none_kept = calibration_document(mixed_results(), order="as_given", tasks="t", alpha=0.01)
    assert set_figures(none_kept) == {"alpha": 0.01, "n": 0, "kept": []}

    run = Run(label="x", kind="decision", results=mixed_results(), settings={"order_mode": "as_given"})
    study = OrderStudy({"as_given": (run, run)}, tasks="t")
    assert study.figures["as_given"]["prediction_sets"] == sets
    assert "prediction sets on the fitting split" in study.text()
    verdict = [line for line in order_verdicts(study.figures) if "prediction sets" in line]
    within = abs(sets["coverage"] - 0.9) <= 0.05
    assert len(verdict) == 1 and ("meets" if within else "MISSES") in verdict[0]


def test_calibrate_fits_for_the_readout_it_is_asked_for_and_names_it_in_every_request():
    from workshop_lib.evaluation.runner import Run
    from workshop_lib.evaluation.served import calibrate, served_fields

    task = type("T", (), {"type": "choice"})()
    assert served_fields("as_given", readout="cloze")(task)["readout"] == "cloze"
    assert served_fields("prior")(task)["readout"] == "letters"  # named even when it is the default
    with pytest.raises(ValueError, match="only the letters readout"):
        served_fields("rotations", readout="cloze")
    saved = Run("calibrate", "decision", mixed_results(), settings={"order_mode": "as_given", "readout": "cloze"})
    assert calibrate(run=saved, readout="cloze")["readout"] == "cloze"
    assert calibrate(run=saved)["readout"] == "cloze"  # unnamed: the readout the run was read with
    with pytest.raises(CalibrationFileError, match="'cloze' readout, not 'letters'"):
        calibrate(run=saved, readout="letters")
    with pytest.raises(CalibrationFileError, match="only the letters readout"):
        calibrate(client=object(), order="prior", readout="cloze")


@pytest.mark.parametrize("reported", ["cloze", "letters"])
def test_the_served_readout_is_read_from_an_answers_model_block(reported):
    from workshop_lib.evaluation.served import served_readout

    client = AnsweringClient(reported)
    assert served_readout(client) == reported
    assert len(client.sent) == 1 and "readout" not in client.sent[0]  # asked as any caller asks


def test_the_served_readout_is_the_clients_own_where_it_names_one_and_letters_for_an_older_server():
    from workshop_lib.evaluation.served import served_readout

    named = AnsweringClient("letters", readout="cloze")
    assert served_readout(named) == "cloze" and named.sent == []
    assert served_readout(AnsweringClient(None)) == "letters"  # no readout reported, no cloze fields in the answer
    with pytest.raises(CalibrationFileError, match="'logits'"):
        served_readout(AnsweringClient("logits"))


def test_a_profile_with_few_fitting_answers_takes_the_temperature_fitted_on_all_of_them():
    from workshop_lib.evaluation.profiles import MIN_PROFILE_FIT, fit_profiles
    from workshop_lib.evaluation.temperature import fit_temperature

    rng = np.random.default_rng(7)
    many = _rows(rng, MIN_PROFILE_FIT, p_top=0.98, right_share=0.6)
    # Too few to fit alone, and fitted alone they would sharpen: always right.
    few = _rows(rng, 4, p_top=0.6, right_share=1.0, k=2, profile="noul/2")
    held = _rows(rng, 20, p_top=0.98, right_share=0.6) + _rows(
        rng, 10, p_top=0.6, right_share=0.6, k=2, profile="noul/2"
    )
    entries = fit_profiles(many + few, held)
    own, pooled = entries["choice/3-4"], entries["noul/2"]
    assert own["temperature_from"] == "profile" and own["temperature_fit_n"] == MIN_PROFILE_FIT
    assert math.isclose(own["temperature"], fit_profile(many, [])["temperature"])
    everyone = [list(r.log_probs) for r in many + few], [r.target for r in many + few]
    assert pooled["temperature_from"] == "all profiles" and pooled["temperature_fit_n"] == len(many) + len(few)
    assert math.isclose(pooled["temperature"], fit_temperature(*everyone, beta_range=profiles.BETA_RANGE))
    assert pooled["temperature"] > 1.0 > fit_profile(few, [])["temperature"]
    assert pooled["fit_n"] == 4 and pooled["heldout_n"] == len(held)  # judged on every held-out answer
    assert pooled["conformal"]["heldout_n"] == 10  # the set's threshold rests on the profile's own
    assert pooled["heldout"] == fit_profile(many + few, held)["heldout"] and pooled["kept"] is True
    assert pooled["fit_n"] == 4 and "all 24 fitting answers" in profiles.describe(
        {
            "fit_for": {"gguf_sha256": SHA, "prompt_version": "v"},
            "data": {"fit_n": 24, "heldout_n": 30, "tasks": "t"},
            "order": "as_given",
            "profiles": entries,
        }
    )
    # With enough answers of its own, no profile is pooled.
    alone = fit_profiles(many, held[:20])
    assert alone["choice/3-4"]["temperature_from"] == "profile"
