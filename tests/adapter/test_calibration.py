"""Served calibration (served_calibration.py; the file's rules are the contract's, tests/contract): where the model folder's
manifest vouches for it (model_files.py), the refusal to start for another build or readout, which
temperature an answer gets (the request's, the profile's, or 1) and when it carries a prediction set, on the
embedded model in-process."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from decision_adapter import served_calibration
from decision_adapter.apis import own
from decision_adapter.apis import systemone as jev
from decision_adapter.apis.own import parse_decision
from decision_adapter.model_files import ModelFilesError, locate_model
from decision_adapter.prompt import PROMPT_VERSION
from decision_adapter.seams import EngineError
from decision_contract import calibration as contract

OTHER_SHA = "ab" * 32
STATE = "The invoice for March was charged twice and the customer asks for the money back."
OPTIONS = ["billing", "shipping", "technical"]
HELDOUT = {
    "nll_before": 1.2,
    "nll_after": 1.0,
    "ece_before": 0.5,
    "ece_after": 0.2,
    "brier_before": 0.7,
    "brier_after": 0.6,
}


# A threshold of 0.8 puts every option of probability at least 0.2 in the set.
SETS = {
    "threshold": 0.8,
    "kept": True,
    "reason": None,
    "heldout_n": 13,
    "temperature": 2.0,
    "fit_coverage": 0.9,
    "fit_set_size": 2.0,
}


def calibration_file(
    gguf_sha256: str,
    *,
    prompt_version: str = PROMPT_VERSION,
    order: str = "as_given",
    profiles: dict | None = None,
    readout: str = "letters",
) -> dict:
    return {
        "format": contract.FORMAT,
        "fit_for": {"gguf_sha256": gguf_sha256, "prompt_version": prompt_version},
        "order": order,
        "readout": readout,
        "alpha": 0.1,
        "profiles": profiles
        if profiles is not None
        else {
            "choice/3-4": {
                "temperature": 2.0,
                "kept": True,
                "fit_n": 30,
                "heldout_n": 13,
                "heldout": HELDOUT,
                "conformal": SETS,
            },
            "choice/2": {
                "temperature": 0.5,
                "kept": False,
                "fit_n": 3,
                "heldout_n": 0,
                "heldout": None,
                "conformal": {"threshold": None, "kept": False, "reason": "too few", "heldout_n": 0},
            },
        },
        "data": {"tasks": "test", "fit_n": 30, "heldout_n": 13},
        "created": "2026-01-01T00:00:00Z",
    }


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


# -- the file, without a model --------------------------------------------------------------------------------


def test_a_kept_profile_applies_in_its_order_mode_unless_the_request_sets_a_temperature():
    cal = contract.parse(calibration_file(OTHER_SHA), "calibration.json", "00" * 32)
    assert cal.temperatures == {"choice/3-4": 2.0}  # choice/2 was not kept
    assert served_calibration.in_force(cal, "choice", 3, "as_given", None) == (
        2.0,
        {"profile": "choice/3-4", "temperature": 2.0, "source": "calibration"},
    )
    assert served_calibration.in_force(cal, "choice", 3, "as_given", 0.7)[1]["source"] == "request"
    assert (
        served_calibration.in_force(cal, "choice", 3, "rotations", None)[1]["source"] == "none"
    )  # fit in another mode
    assert served_calibration.in_force(cal, "choice", 2, "as_given", None) == (
        1.0,
        {"profile": None, "temperature": 1.0, "source": "none"},
    )
    assert served_calibration.in_force(None, "score", 5, "as_given", None)[0] == 1.0


def _model_folder(tmp_path, listed: bool):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps(calibration_file(hashlib.sha256(gguf.read_bytes()).hexdigest())))
    files = [gguf] + ([cal] if listed else [])
    manifest = {
        "files": [
            {"path": f.name, "size": f.stat().st_size, "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
            for f in files
        ]
    }
    (tmp_path / "model-manifest.json").write_text(json.dumps(manifest))
    return cal


def test_the_manifest_may_list_the_file_and_then_vouches_for_it(tmp_path):
    cal = _model_folder(tmp_path, listed=True)
    found = locate_model(tmp_path)
    assert found.calibration == cal.resolve() and found.calibration_listed
    cal.write_text(cal.read_text().replace("2.0", "3.0"))  # same size, other bytes
    with pytest.raises(ModelFilesError, match="calibration.json: sha256 mismatch"):
        locate_model(tmp_path)


def test_an_unlisted_file_is_found_and_reported_unverified(tmp_path):
    _model_folder(tmp_path, listed=False)
    found = locate_model(tmp_path)
    assert found.calibration is not None and not found.calibration_listed


# -- on the embedded model --------------------------------------------------------------------------------------


def test_the_engine_refuses_to_start_with_a_file_fit_for_another_gguf(engine, tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(calibration_file(OTHER_SHA)))
    from decision_adapter.engine import Engine

    with pytest.raises(EngineError) as caught:
        Engine(engine.settings, dataclasses.replace(engine.model.files, calibration=path))
    assert OTHER_SHA in str(caught.value) and engine.model.files.sha256 in str(caught.value)
    # off: the file is not read at all
    off = Engine(
        dataclasses.replace(engine.settings, calibration="off"),
        dataclasses.replace(engine.model.files, calibration=path),
    )
    assert off.calibration is None and off.info["calibration"] is None


def test_the_engine_refuses_to_start_with_a_file_fit_for_a_readout_it_does_not_serve(engine, tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(calibration_file(engine.model.files.sha256, readout="tea-leaves")))
    from decision_adapter.engine import Engine

    with pytest.raises(EngineError, match="readout 'tea-leaves'.*this adapter serves letters"):
        Engine(engine.settings, dataclasses.replace(engine.model.files, calibration=path))


def test_a_file_fit_for_this_gguf_is_loaded_and_reported(engine, tmp_path):
    path = tmp_path / "calibration.json"
    data = json.dumps(calibration_file(engine.model.files.sha256)).encode()
    path.write_bytes(data)
    from decision_adapter.engine import Engine

    served = Engine(engine.settings, dataclasses.replace(engine.model.files, calibration=path))
    info = served.info["calibration"]
    assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["order"] == "as_given"
    assert info["fit_for"] == {"gguf_sha256": engine.model.files.sha256, "prompt_version": PROMPT_VERSION}
    assert info["temperatures"] == {"choice/3-4": 2.0} and set(info["profiles"]) == {"choice/3-4", "choice/2"}
    assert info["readout"] == "letters" and info["alpha"] == 0.1 and info["set_thresholds"] == {"choice/3-4": 0.8}


@pytest.fixture
def calibrated(engine, monkeypatch):
    cal = contract.parse(calibration_file(engine.model.files.sha256), "calibration.json", "00" * 32)
    monkeypatch.setattr(engine, "calibration", cal)
    return engine


def decide(engine, **fields):
    body = {"id": "d", "state": STATE, "question": "Which team?", "options": OPTIONS, **fields}
    (result,), _ = own.answered(engine, parse_decision(body))
    return result


def test_the_profile_temperature_is_applied_inside_the_readout(calibrated):
    result = decide(calibrated)
    assert result["calibration"] == {"profile": "choice/3-4", "temperature": 2.0, "source": "calibration"}
    assert result["temperature"] == 2.0
    assert np.allclose(result["probabilities"], softmax(np.asarray(result["option_logits"]) / 2.0), atol=1e-9)


def test_a_request_temperature_overrides_the_profile(calibrated):
    result = decide(calibrated, temperature=0.5)
    assert result["calibration"] == {"profile": None, "temperature": 0.5, "source": "request"}
    assert np.allclose(result["probabilities"], softmax(np.asarray(result["option_logits"]) / 0.5), atol=1e-9)


def test_another_question_type_or_order_mode_gets_no_profile(calibrated):
    assert decide(calibrated, question_type="score")["calibration"]["source"] == "none"
    prior = decide(calibrated, order="prior")
    assert prior["calibration"]["source"] == "none" and prior["temperature"] == 1.0


def test_jev_confidence_uses_the_calibrated_probabilities(calibrated):
    body = {
        "state": STATE,
        "questions": {
            "team": {"type": "choice", "instructions": "Which team?", "criteria": {name: None for name in OPTIONS}}
        },
    }
    request = jev.parse_systemone(body)
    results, _ = jev.score(calibrated, request)
    answer = jev.answer(request.questions[0], results[0])
    assert answer["x_calibration"]["profile"] == "choice/3-4"
    raw = np.asarray(results[0].option_logits)
    assert np.allclose(list(answer["probabilities"].values()), softmax(raw / 2.0), atol=1e-9)
    assert answer["confidence"] == pytest.approx(jev.choice_confidence(list(softmax(raw / 2.0))), abs=1e-9)


def test_a_kept_threshold_gives_the_prediction_set_in_request_order(calibrated):
    for options in (OPTIONS, OPTIONS[::-1]):
        result = decide(calibrated, options=options)
        p = dict(zip(result["option_ids"], result["probabilities"]))
        assert result["prediction_set"] == [o for o in options if p[o] >= 0.2 - 1e-12]
        assert result["option_ids"] == options


def test_no_prediction_set_where_no_kept_threshold_applies(calibrated):
    assert "prediction_set" not in decide(calibrated, order="prior")  # fit in another order mode
    assert "prediction_set" not in decide(calibrated, temperature=2.0)  # the request's own temperature
    assert "prediction_set" not in decide(calibrated, question_type="score")  # no such profile
    assert "prediction_set" not in decide(calibrated, options=OPTIONS[:2])  # choice/2: threshold not kept


def test_no_prediction_set_without_a_calibration_file(engine):
    assert engine.calibration is None
    assert "prediction_set" not in decide(engine)


def test_system_one_names_the_prediction_set_criteria(calibrated):
    body = {
        "state": STATE,
        "questions": {
            "team": {"type": "choice", "instructions": "Which team?", "criteria": {name: None for name in OPTIONS}}
        },
    }
    request = jev.parse_systemone(body)
    results, _ = jev.score(calibrated, request)
    answer = jev.answer(request.questions[0], results[0])
    assert answer["x_prediction_set"] == [n for n in OPTIONS if answer["probabilities"][n] >= 0.2 - 1e-12]


def test_a_threshold_between_two_answers_probabilities_splits_the_set_there(calibrated, monkeypatch):
    p = dict(zip(OPTIONS, decide(calibrated)["probabilities"]))
    ranked = sorted(OPTIONS, key=lambda o: -p[o])
    if p[ranked[0]] - p[ranked[1]] < 1e-6:
        pytest.skip("the model gives the top two options the same probability")
    cut = (p[ranked[0]] + p[ranked[1]]) / 2  # the set: probability at least cut, so the top option alone
    narrowed = dataclasses.replace(calibrated.calibration, thresholds={"choice/3-4": 1.0 - cut})
    monkeypatch.setattr(calibrated, "calibration", narrowed)
    assert decide(calibrated)["prediction_set"] == [ranked[0]]


# -- the OpenAI Decisions API: the set named by the API's own values -------------------------------------------

TEAM = {"type": "choice", "name": "team", "instructions": "Which team?", "choices": [{"value": v} for v in OPTIONS]}
DECISIONS_QUESTIONS = [
    {"type": "predicate", "name": "refund", "instructions": "The customer asks for money back."},
    TEAM,
    {
        "type": "choice",
        "name": "pair",
        "instructions": "Which team?",
        "choices": [{"value": "billing"}, {"value": True, "description": "Someone else"}],
    },
    {
        "type": "score",
        "name": "anger",
        "instructions": "How frustrated is the customer?",
        "levels": [{"label": "calm"}, {"label": "annoyed"}, {"label": "furious"}],
    },
]


def openai_decisions(engine, questions):
    from decision_adapter.apis import decisions

    request = decisions.parse_decisions({"input": STATE, "questions": questions})
    return decisions.respond(request, *decisions.score(engine, request), engine.info)


def in_set(pairs):
    return [value for value, p in pairs if p >= 0.2 - 1e-12]


def test_the_openai_decisions_api_names_the_set_by_its_values_where_a_kept_threshold_applies(engine, monkeypatch):
    """choice/3-4 and noul/2 keep a threshold; choice/2 does not, and score/3-4 has no profile. The official
    library's Decision type reads the answers, the extensions included."""
    from openai.types.decision import Decision

    profiles = calibration_file(engine.model.files.sha256)["profiles"]
    profiles["noul/2"] = profiles["choice/3-4"]
    monkeypatch.setattr(
        engine,
        "calibration",
        contract.parse(calibration_file(engine.model.files.sha256, profiles=profiles), "calibration.json", "00" * 32),
    )
    body = openai_decisions(engine, DECISIONS_QUESTIONS)
    predicate, team, pair, score = body["answers"]
    assert [a["x_readout"] for a in body["answers"]] == ["letters"] * 4
    p = predicate["probability"]
    assert predicate["x_prediction_set"] == in_set([(True, p), (False, 1.0 - p)])
    assert team["x_prediction_set"] == in_set((c["value"], c["probability"]) for c in team["probabilities"])
    assert "x_prediction_set" not in pair and "x_prediction_set" not in score

    reversed_team = {**TEAM, "choices": TEAM["choices"][::-1]}
    (again,) = openai_decisions(engine, [reversed_team])["answers"]
    assert again["x_prediction_set"] == in_set((c["value"], c["probability"]) for c in again["probabilities"])
    assert [c["value"] for c in again["probabilities"]] == OPTIONS[::-1]

    parsed = Decision.model_validate(body)
    assert [a.x_readout for a in parsed.answers] == ["letters"] * 4
    assert parsed.answers[0].x_prediction_set == predicate["x_prediction_set"]
    assert parsed.answers[1].x_prediction_set == team["x_prediction_set"]


def test_the_openai_decisions_api_sends_no_set_without_a_kept_threshold(engine):
    assert engine.calibration is None
    body = openai_decisions(engine, DECISIONS_QUESTIONS)
    assert all("x_prediction_set" not in a and a["x_readout"] == "letters" for a in body["answers"])
