"""Reuse across requests: the fixed head (system prompt, opening of the user turn) and a repeated
state are evaluated once, and every answer equals a fresh evaluation of the whole prompt.

The reference is an engine with prefix reuse off: it evaluates each prompt from an empty context.
"""

import numpy as np
import pytest

from decision_adapter.errors import TimedOut
from decision_adapter.schema import parse_decision
from tests.support import adapter_settings

STATES = ["The parcel arrived with a cracked screen and the customer wants a replacement.",
          "Order 7: the invoice shows a double charge for the same month.",
          {"customer": {"tier": "gold"}, "message": "My password reset link never arrives."}]
QUESTIONS = [{"id": "team", "question": "Which team should handle this?", "options": ["refunds", "billing", "it"]},
             {"id": "upset", "question": "Is the customer upset?", "options": ["no", "yes"]}]


def single(state, q=QUESTIONS[0]):
    return parse_decision({"id": "r", "state": state, "question": q["question"], "options": q["options"]})


def shared(state):
    return parse_decision({"id": "b", "state": state, "questions": QUESTIONS})


def _engine(model_dir, mode):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    return Engine(adapter_settings(model_dir, DECISION_ADAPTER_PREFIX_REUSE=mode), locate_model(model_dir))


@pytest.fixture(scope="module")
def fresh(model_dir):
    return _engine(model_dir, "off")


@pytest.fixture(scope="module")
def restore(model_dir):
    engine = _engine(model_dir, "restore")
    engine.prove()  # saves the decision head, as the worker does at start-up
    return engine


@pytest.fixture(params=["trim", "restore"])
def reusing(request, engine, restore):
    return engine if request.param == "trim" else restore


def probabilities(engine, batch):
    results, _ = engine.decide(batch)
    return [r["probabilities"] for r in results]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.allclose(x, y, atol=1e-4, rtol=0)
        assert abs(sum(x) - 1) < 1e-9


def evaluated(engine, batch) -> tuple[list, int]:
    before = engine.tokens_evaluated
    got = probabilities(engine, batch)
    return got, engine.tokens_evaluated - before


def prompt_length(engine, batch) -> int:
    prompt = engine.template.render_decision(batch.state, batch.questions[0])
    return len(engine.prompt_tokens(prompt))


def test_only_what_is_not_cached_is_read_and_answers_equal_fresh_evaluations(reusing, fresh):
    probabilities(reusing, single(STATES[0]))  # whatever the context held before, it now holds a decision
    got, n = evaluated(reusing, single(STATES[1]))
    assert_same(got, probabilities(fresh, single(STATES[1])))
    # a new state: the head is not read again (the system prompt alone is longer than this margin)
    assert n < prompt_length(reusing, single(STATES[1])) - 40
    got, n = evaluated(reusing, single(STATES[1], QUESTIONS[1]))
    assert_same(got, probabilities(fresh, single(STATES[1], QUESTIONS[1])))
    assert n < 40  # the same state: only the question and its options
    got, n = evaluated(reusing, single(STATES[1], QUESTIONS[1]))  # the same request again: hardly anything new
    assert_same(got, probabilities(fresh, single(STATES[1], QUESTIONS[1])))
    assert_same(probabilities(reusing, shared(STATES[2])), probabilities(fresh, shared(STATES[2])))


def test_answers_after_a_timed_out_request_equal_fresh_evaluations(reusing, fresh):
    long_state = " ".join(f"line {i}: the customer wrote again about order {i * 7}." for i in range(90))
    probabilities(reusing, single(STATES[0]))
    with reusing.time_limit(0.05), pytest.raises(TimedOut):
        reusing.decide(single(long_state))
    assert reusing._prefix is None and reusing.llm.n_tokens == 0
    got, n = evaluated(reusing, single(STATES[2]))
    assert_same(got, probabilities(fresh, single(STATES[2])))
    if reusing.prefix_mode == "restore":  # the head saved at start-up outlives the time-out
        assert len(reusing._heads) == 1 and n < prompt_length(reusing, single(STATES[2])) - 40
    assert_same(probabilities(reusing, shared(STATES[0])), probabilities(fresh, shared(STATES[0])))


def test_a_question_as_long_as_the_cached_one_is_evaluated_anew(reusing, fresh):
    # ["no", "yes"] and ["yes", "no"] tokenize to prompts of the same length: holding as many tokens as the
    # prompt is not holding the prompt (restore once answered the second with the first's probabilities).
    for options in (["no", "yes"], ["yes", "no"], ["no", "yes"]):
        batch = single(STATES[1], {"question": "Is it urgent?", "options": options})
        got = probabilities(reusing, batch)
        assert_same(got, probabilities(fresh, batch))
    assert got != probabilities(reusing, single(STATES[1], {"question": "Is it urgent?", "options": ["yes", "no"]}))
