"""Jev's client libraries on ``/v1/systemone`` against a live adapter over HTTP: avrik-sdk's ``Client`` parses
every answer (its ``Decision`` requires the ``audit`` block) for every question type it builds, and
deqio-client's ``systemone`` gets the same answers."""

from __future__ import annotations

import hashlib
import math

import pytest
from avrik_sdk import AvrikError, Client, choice, multi_label, noul, score
from avrik_sdk.models import Decision
from deqio_client import DeqioClient, DeqioError

from tests.support.adapters import JEV_ENV

pytestmark = pytest.mark.slow

STATE = "The checkout page times out for customers paying by card since this morning's release."
QUESTIONS = {
    "outage": noul("Is checkout degraded?"),
    "team": choice("Which team should look first?", {"payments": "Card processing", "web": "The site itself"}),
    "severity": score("How severe is it?", ["minor", "major", "critical"]),
    "areas": multi_label("Which areas are affected?", ["payments", "search", "checkout"]),
}
HEX64 = set("0123456789abcdef")


@pytest.fixture(scope="module")
def server(adapters):
    return adapters.shared(**JEV_ENV)


@pytest.fixture(scope="module")
def avrik(server):
    with Client(server.url, timeout=300) as client:
        yield client


@pytest.fixture(scope="module")
def decision(avrik) -> Decision:
    return avrik.decide(STATE, QUESTIONS, model="jev-latest")


def test_avrik_parses_every_question_type(decision):
    assert set(decision.answers) == set(QUESTIONS)
    assert 0.0 <= decision["outage"].noul <= 1.0
    team = decision["team"]
    assert set(team.probabilities) == {"payments", "web"} and math.isclose(sum(team.probabilities.values()), 1.0)
    assert team.choice == max(team.probabilities, key=team.probabilities.get)
    severity = decision["severity"]
    assert severity.legend == {"0": "minor", "1": "major", "2": "critical"}
    assert math.isclose(severity.score, sum(int(k) * v for k, v in severity.probabilities.items()))
    assert decision.usage.input_tokens > 0 and decision.usage.output_tokens == 0


def test_multi_label_scores_each_label_and_selects_at_the_threshold(decision):
    areas = decision["areas"]
    assert areas.type == "multi_label" and list(areas.scores) == ["payments", "search", "checkout"]
    assert all(0.0 <= v <= 1.0 for v in areas.scores.values())
    assert areas.threshold == 0.7
    assert areas.selected == [label for label, v in areas.scores.items() if v >= areas.threshold]
    assert areas.abstained == []


def test_a_label_reads_as_the_same_yes_no_alone(avrik, decision):
    """Each label is its own yes/no on the shared state: asked alone, with another threshold, it scores the same
    and the threshold decides what is selected."""
    alone = avrik.decide(STATE, {"areas": dict(multi_label("Which areas are affected?", ["search"]), threshold=0.0)})
    assert math.isclose(alone["areas"].scores["search"], decision["areas"].scores["search"], abs_tol=1e-6)
    assert alone["areas"].selected == ["search"] and alone["areas"].threshold == 0.0


def test_the_audit_block_names_what_produced_the_answers(server, decision):
    audit = decision.audit
    (gguf,) = server.model_dir.glob("*.gguf")
    assert audit.model_hash == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert audit.calibration_version == "none"  # the tests' model folder has no calibration.json
    n = len(QUESTIONS)
    assert len(audit.prompt_template_sha256) == len(audit.allowed_token_set_hash) == len(audit.input_tokens) == n
    assert all(len(h) == 64 and set(h) <= HEX64 for h in audit.prompt_template_sha256 + audit.allowed_token_set_hash)
    assert len(set(audit.prompt_template_sha256)) == n  # every question its own prompt
    # yes/no questions (a noul, each label of a multi_label) and a two-option choice read the same two tokens
    outage, team, severity, areas = audit.allowed_token_set_hash
    assert outage == areas == team != severity
    assert all(t > 0 for t in audit.input_tokens)
    assert audit.backend.startswith("llama.cpp") and audit.precision and audit.build


def test_the_same_request_gets_the_same_audit(avrik, decision):
    again = avrik.decide(STATE, QUESTIONS, model="jev-latest")
    assert again.audit == decision.audit
    assert again.answers["areas"].scores == decision.answers["areas"].scores


def test_avrik_reads_refusals_as_its_errors(avrik):
    with pytest.raises(AvrikError) as refused:
        avrik.decide(STATE, {"areas": multi_label("Which?", ["a", "a"])})
    assert refused.value.status == 422
    with pytest.raises(AvrikError) as refused:
        avrik.decide(STATE, {"areas": multi_label("Which?", [])})
    assert refused.value.status == 422


def test_deqio_systemone_gets_the_same_answers(server, decision):
    client = DeqioClient(server.url, timeout=300)
    reply = client.systemone(STATE, QUESTIONS)
    assert set(reply["answers"]) == set(QUESTIONS) and "audit" in reply
    assert reply["audit"]["prompt_template_sha256"] == decision.audit.prompt_template_sha256
    assert math.isclose(reply["answers"]["outage"]["noul"], decision["outage"].noul, abs_tol=1e-9)
    assert reply["answers"]["areas"]["scores"] == pytest.approx(decision["areas"].scores, abs=1e-9)
    assert reply["answers"]["team"]["probabilities"] == pytest.approx(decision["team"].probabilities, abs=1e-9)


def test_deqio_reads_refusals_as_its_errors(server):
    client = DeqioClient(server.url, timeout=300)
    with pytest.raises(DeqioError) as refused:
        client.systemone(STATE, {"q": {"type": "pick", "instructions": "?"}})
    assert refused.value.status == 422
    assert refused.value.detail[0]["loc"] == ["body", "questions", "q", "type"]
