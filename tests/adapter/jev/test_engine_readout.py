"""The engine's readouts for Jev questions, in process: letter slots and the two-level codes."""

from __future__ import annotations

import numpy as np
import pytest

from decision_adapter import scoring
from decision_adapter.apis import systemone as jev
from decision_adapter.prompt import JEV_PROMPT
from tests.support import adapter_settings

STATE = "The parcel never arrived and the customer wants to know where it is."


def items(engine, questions, state=STATE):
    """The request, and its questions' prompts with their options as sent."""
    request = jev.parse_systemone({"state": state, "questions": questions, "x_order": "as_given"})
    return request, list(scoring.plan(engine, jev.batch_of(request), JEV_PROMPT).items)


def probabilities(reading, temperature: float = 1.0):
    return reading.scores.probabilities(temperature).tolist()


def many(n: int) -> dict:
    return {
        "type": "choice",
        "instructions": "Which queue?",
        "criteria": {f"Queue {i}": (f"topic {i}" if i % 2 else None) for i in range(n)},
    }


@pytest.fixture(scope="module")
def restore_engine(model_dir):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    return Engine(adapter_settings(model_dir, DECISION_ADAPTER_PREFIX_REUSE="restore"), locate_model(model_dir))


def test_every_code_is_a_letter_then_a_digit(engine):
    groups, digits = engine.model.code_tokens
    assert len(groups) == 26 and len(digits) == 10
    assert groups[:16] == engine.model.slot_tokens  # A-P are the same tokens as the letter slots
    assert engine.model.max_options == 260


def test_two_level_readout_is_a_distribution_over_exactly_the_options(engine):
    _, built = items(engine, {"q": many(23)})
    (result,), timing = engine.score_items(built)
    p = np.array(probabilities(result))
    assert len(p) == 23 and np.all(p >= 0) and abs(p.sum() - 1) < 1e-9
    assert result.method == "two-level-codes" and result.forward_passes == 1 + 3
    assert 0 < result.allowed_token_mass <= 1
    assert timing["input_tokens"] == result.input_tokens + 3


def test_two_level_readout_by_hand(engine):
    """P(option) = P(group letter | prompt) x P(digit | prompt + group letter), each restricted."""
    _, built = items(engine, {"q": many(19)})  # codes A0-A9 and B0-B8
    (result,), timing = engine.score_items(built)
    groups, digits = engine.model.code_tokens
    tokens = engine.model.tokenize(built[0].prompt.text)
    cut = timing["shared_prefix_tokens"]

    def logits_after(*chunks):  # evaluated in the engine's chunks, so the arithmetic is the same
        engine.context.reset()
        engine.context.prefix = None
        for chunk in chunks:
            engine.llm.eval(chunk)
        return engine.context.last_logits()

    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    first = logits_after(tokens[:cut], tokens[cut:])
    p_group = softmax(first[list(groups[:2])])
    p_a = softmax(logits_after(tokens[:cut], tokens[cut:], [groups[0]])[list(digits)])
    p_b = softmax(logits_after(tokens[:cut], tokens[cut:], [groups[1]])[list(digits[:9])])
    expected = np.concatenate([p_group[0] * p_a, p_group[1] * p_b])
    assert result.method == "two-level-codes"
    assert np.allclose(probabilities(result), expected, atol=1e-6, rtol=0)


def test_restore_mode_reads_the_same_two_level_answers(engine, restore_engine):
    # the path hybrid/recurrent models (Qwen3.5) take: a saved sequence instead of a trimmed cache (both
    # without flash attention, which restore mode is served without)
    questions = {"big": many(31), "small": {"type": "noul", "instructions": "Is the parcel lost?"}}
    trimmed, _ = engine.score_items(items(engine, questions)[1])
    restored, _ = restore_engine.score_items(items(restore_engine, questions)[1])
    for a, b in zip(trimmed, restored):
        assert np.allclose(probabilities(a), probabilities(b), atol=1e-4, rtol=0)


def test_an_item_is_scored_the_same_alone_in_a_crowd_and_twice(engine):
    target = {"type": "score", "instructions": "How worried is the customer?", "criteria": ["calm", "worried", "angry"]}
    (alone,), _ = engine.score_items(items(engine, {"t": target})[1])
    crowd, timing = engine.score_items(
        items(engine, {"n": {"type": "noul", "instructions": "Lost?"}, "t": target, "copy": target, "big": many(18)})[1]
    )
    assert timing["distinct_prompts"] == 3  # the copy is evaluated once
    assert probabilities(crowd[1]) == probabilities(alone) == probabilities(crowd[2])


def test_too_many_options_for_a_model_without_codes_is_a_422(engine, monkeypatch):
    from decision_adapter.caller_errors import InvalidValue

    monkeypatch.setattr(engine.model, "_code_tokens", None)
    monkeypatch.setattr(engine.model, "codes_unavailable", "the codes are not two tokens")
    with pytest.raises(InvalidValue) as raised:
        items(engine, {"q": many(17)})
    assert raised.value.loc == ("body", "questions", "q", "criteria") and "17 options" in raised.value.message


def test_temperature_divides_the_logits_at_both_levels(engine):
    _, (item,) = items(engine, {"q": many(17)})
    (reading,), _ = engine.score_items([item])
    p, q = reading.scores.probabilities(1.0), reading.scores.probabilities(4.0)
    assert abs(q.sum() - 1) < 1e-9 and q.max() < p.max() and q.min() > p.min()
    # the group shares are the softmax of the group letters' logits over T, at T = 1 and at T = 4 alike
    groups, _ = engine.model.code_tokens
    engine.context.reset()
    engine.context.prefix = None
    engine.llm.eval(engine.model.tokenize(item.prompt.text))
    g = engine.context.last_logits()[list(groups[:2])]
    for probs, t in ((p, 1.0), (q, 4.0)):
        expected = np.exp(g / t - np.max(g / t))
        expected /= expected.sum()
        shares = [probs[:10].sum(), probs[10:].sum()]
        assert np.allclose(shares, expected, atol=1e-4, rtol=0)
