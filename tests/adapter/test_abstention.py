"""Abstention (min_answer_mass) and what every API reports of the order mode, the calibration,
abstention and the readout: the embedded model in-process, and the real app (its routes) on that same engine, so no
adapter process is started."""

from __future__ import annotations

import dataclasses
import json

import pytest

from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import InvalidValue
from decision_adapter.settings import SettingsError, load_settings

STATE = "The parcel arrived with a cracked screen and the customer wants a replacement."
OPTIONS = ["refund", "replacement", "repair"]
ORDER_FIELDS = {"order", "order_sensitivity", "prior", "calibration", "abstained", "min_answer_mass"}


def decide(engine, **fields):
    body = {"id": "d", "state": STATE, "question": "What does the customer want?", "options": OPTIONS, **fields}
    batch = parse_decision(body)
    (result,) = own.results(batch, own.decide(engine, batch)[0])
    return result


def test_abstention_follows_the_threshold_and_keeps_the_probabilities(engine):
    plain = decide(engine)
    mass = plain["allowed_token_mass"]
    assert plain["abstained"] is False and plain["min_answer_mass"] == 0.0  # the default never abstains
    below, above = decide(engine, min_answer_mass=mass * 0.5), decide(engine, min_answer_mass=min(1.0, mass * 1.5))
    assert below["abstained"] is False and above["abstained"] is True
    assert above["min_answer_mass"] == min(1.0, mass * 1.5)
    assert below["probabilities"] == above["probabilities"] == plain["probabilities"]


def test_the_server_default_threshold_applies_when_the_request_sets_none(engine, monkeypatch):
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, min_answer_mass=1.0))
    assert decide(engine)["abstained"] is True
    assert decide(engine, min_answer_mass=0)["abstained"] is False


def test_a_batch_threshold_is_its_questions_default(engine):
    batch = parse_decision(
        {
            "id": "b",
            "state": STATE,
            "min_answer_mass": 1.0,
            "questions": [
                {"id": "a", "question": "What does the customer want?", "options": OPTIONS},
                {"id": "b", "question": "What does the customer want?", "options": OPTIONS, "min_answer_mass": 0},
            ],
        }
    )
    a, b = own.answered(engine, batch)[0]
    assert (a["abstained"], b["abstained"]) == (True, False)


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"min_answer_mass": 1.5}, "min_answer_mass"),
        ({"order": "sideways"}, "order"),
        ({"question_type": "box"}, "question_type"),
    ],
)
def test_bad_values_are_refused_naming_the_field(fields, field):
    with pytest.raises(InvalidValue) as caught:
        parse_decision({"id": "d", "state": STATE, "question": "Q?", "options": OPTIONS, **fields})
    assert caught.value.field == field


@pytest.mark.parametrize(
    "env",
    [
        {"DECISION_ADAPTER_MIN_ANSWER_MASS": "1.5"},
        {"DECISION_ADAPTER_ORDER": "random"},
        {"DECISION_ADAPTER_MAX_ROTATIONS": "1"},
        {"DECISION_ADAPTER_CALIBRATION": "on"},
    ],
)
def test_bad_settings_stop_the_start(env):
    with pytest.raises(SettingsError, match=next(iter(env))):
        load_settings(env)


def test_settings_defaults():
    settings = load_settings({})
    assert (settings.order, settings.max_rotations, settings.min_answer_mass, settings.calibration) == (
        "as_given",
        16,
        0.0,
        "auto",
    )


# -- every API, through the app's routes ---------------------------------------------------------------------


@pytest.fixture
def app_on(engine, monkeypatch):
    """The real app serving the session's engine, with some of its settings replaced."""
    from decision_adapter import app as app_module

    def make(**changes):
        # A generous time limit: these 2 cores are shared, and the limit is not what is tested here.
        settings = dataclasses.replace(engine.settings, request_timeout_s=600.0, **changes)
        monkeypatch.setattr(engine, "settings", settings)
        monkeypatch.setattr(engine.model, "info", {**engine.info, "order": settings.order})  # as at start-up

        def load(holder):
            holder.serve(engine)  # on its own context

        monkeypatch.setattr(app_module._Holder, "load", load)
        return app_module.create_app(settings, load="now").test_client()

    return make


def test_the_own_schema_and_the_sample_report_the_fields(app_on):
    client = app_on(order="prior", min_answer_mass=1.0)
    reply = client.post(
        "/invocations", json={"id": "d", "state": STATE, "question": "Which?", "options": OPTIONS, "order": "rotations"}
    ).get_json()["result"]
    assert set(reply) >= ORDER_FIELDS and reply["order"] == "rotations" and reply["abstained"] is True
    assert reply["order_sensitivity"]["presentations"] == 6 and reply["model"]["order"] == "prior"
    sample = client.post(
        "/invocations",
        json={
            "decision": {
                "id": "s",
                "state": STATE,
                "question": "Which?",
                "options": [{"id": o, "description": o} for o in OPTIONS],
            }
        },
    ).get_json()["result"]
    assert set(sample) >= ORDER_FIELDS and sample["order"] == "prior" and len(sample["prior"]) == 3
    assert sample["abstained"] is True and sample["model"]["order_priors"]["3"] == sample["prior"]


def test_system_one_reports_the_fields_and_takes_its_extensions(app_on):
    client = app_on(min_answer_mass=1.0)
    body = {
        "state": STATE,
        "x_order": "rotations",
        "x_min_answer_mass": 0,
        "questions": {
            "want": {
                "type": "choice",
                "instructions": "What does the customer want?",
                "criteria": {o: None for o in OPTIONS},
            },
            "upset": {"type": "noul", "instructions": "Is the customer upset?"},
        },
    }
    reply = client.post("/v1/systemone", json=body).get_json()
    want, upset = reply["answers"]["want"], reply["answers"]["upset"]
    assert want["x_order"] == upset["x_order"] == "rotations" and want["x_abstained"] is False
    assert want["x_order_sensitivity"]["presentations"] == 6 and upset["x_order_sensitivity"]["presentations"] == 2
    assert want["x_calibration"]["source"] == "none" and want["x_min_answer_mass"] == 0
    body.pop("x_min_answer_mass")
    body["x_order"] = "as_given"
    again = client.post("/v1/systemone", json=body).get_json()["answers"]["upset"]
    assert again["x_abstained"] is True and again["x_order"] == "as_given" and again["x_order_sensitivity"] is None
    bad = client.post("/v1/systemone", json={**body, "x_order": "sideways"})
    assert bad.status_code == 422 and bad.get_json()["detail"][0]["loc"] == ["body", "x_order"]


def test_openai_decisions_answers_an_abstention_with_a_refusal(app_on):
    body = {
        "input": STATE,
        "questions": [
            {"type": "predicate", "name": "upset", "instructions": "The customer is upset."},
            {
                "type": "choice",
                "name": "want",
                "instructions": "What does the customer want?",
                "choices": [{"value": o} for o in OPTIONS],
            },
        ],
    }
    answered = app_on(order="prior").post("/v1/decisions", json=body).get_json()
    assert [a["type"] for a in answered["answers"]] == ["predicate", "choice"]
    refused = app_on(min_answer_mass=1.0).post("/v1/decisions", json=body).get_json()
    assert [(a["type"], a["name"]) for a in refused["answers"]] == [("refusal", "upset"), ("refusal", "want")]
    assert "DECISION_ADAPTER_MIN_ANSWER_MASS" in refused["answers"][0]["refusal"]
    assert refused["usage"]["input_tokens"] > 0
    assert [a["x_readout"] for a in refused["answers"]] == ["letters", "letters"]


@pytest.mark.parametrize("readout", ["letters", "cloze"])
def test_openai_decisions_answers_name_the_servers_readout_as_the_metric_line_does(app_on, capsys, readout):
    body = {
        "input": STATE,
        "questions": [
            {"type": "predicate", "name": "upset", "instructions": "The customer is upset."},
            {
                "type": "choice",
                "name": "want",
                "instructions": "What does the customer want?",
                "choices": [{"value": o} for o in OPTIONS],
            },
            {
                "type": "score",
                "name": "anger",
                "instructions": "How frustrated is the customer?",
                "levels": [{"label": "calm"}, {"label": "annoyed"}, {"label": "furious"}],
            },
        ],
    }
    capsys.readouterr()
    reply = app_on(readout=readout).post("/v1/decisions", json=body, headers={"X-Request-Id": f"od-{readout}"})
    assert reply.status_code == 200, reply.get_json()
    answers = reply.get_json()["answers"]
    assert [a["x_readout"] for a in answers] == [readout] * 3
    assert all("x_prediction_set" not in a for a in answers)  # no calibration file: no set
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    (line,) = [line for line in lines if line["request_id"] == f"od-{readout}"]
    assert (line["api"], line["readout"]) == ("openai_decisions", readout)
