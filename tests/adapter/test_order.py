"""Order modes (order.py): the maths without a model, then the mechanics on the embedded model in-process.

The embedded model reads positions more than content, so nothing here checks which option wins: only
that rotations do not depend on the order the options were sent in, that they are the mean of the
rotations asked one by one, that the prior is the explicit division, and that the guarantees (ids in
request order, same request same answer, batched equals unbatched, the time limit) hold in every mode.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from decision_adapter import order, readout_letters, scores, scoring
from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import TimedOut
from decision_adapter.priors import Priors
from decision_adapter.prompt import DECISION_PROMPT, SYSTEM_PROMPT
from decision_adapter.questions import ScoringItem

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants a replacement."
OPTIONS = [
    {"id": "refunds", "text": "Refunds and returns"},
    {"id": "shipping", "text": "Shipping and delivery"},
    {"id": "sales", "text": "Sales"},
]
QUESTION = "Which team should handle this?"


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


# -- the maths ----------------------------------------------------------------------------------------------


def test_all_rotations_up_to_the_bound_then_evenly_spaced_ones():
    assert order.rotation_shifts(4, 16) == [0, 1, 2, 3]
    assert order.rotation_shifts(16, 16) == list(range(16))
    shifts = order.rotation_shifts(255, 16)
    assert len(shifts) == 16 and shifts[0] == 0 and len(set(shifts)) == 16 and max(shifts) < 255
    gaps = np.diff(shifts + [255])
    assert gaps.max() - gaps.min() <= 1  # evenly spaced


def test_presentations_put_each_option_in_each_position_in_both_directions():
    assert order.presentations(2, 16) == [(0, 1), (1, 0)]  # two options: the two orders, once each
    for n in (3, 4, 7):
        shown = order.presentations(n, 16)
        assert len(shown) == len(set(shown)) == 2 * n
        for position in range(n):  # each option twice in each position
            assert sorted(p[position] for p in shown) == sorted(list(range(n)) * 2)
        listed_otherwise = {tuple(p[i] for i in order.rotated(n, 1)) for p in shown}  # a request rotated by one
        assert listed_otherwise == set(shown)
        reversed_request = {tuple(n - 1 - i for i in p) for p in shown}  # the same options listed backwards
        assert reversed_request == set(shown)
    assert len(order.presentations(255, 16)) == 32


def test_a_presentation_read_back_is_the_request_order():
    rng = np.random.default_rng(3)
    p = softmax(rng.normal(size=7))
    for presentation in order.presentations(7, 16):
        shown = p[list(presentation)]  # what the presentation's positions hold
        assert np.allclose(order.read_back(shown, presentation), p, atol=1e-15)


def test_rotations_combine_as_the_renormalised_geometric_mean():
    rng = np.random.default_rng(4)
    rows = [softmax(rng.normal(size=5)) for _ in range(5)]
    explicit = np.exp(np.mean(np.log(rows), axis=0))
    explicit /= explicit.sum()
    assert np.allclose(order.mean_log(rows), explicit, atol=1e-12)
    assert np.allclose(order.mean_log(rows[::-1]), explicit, atol=1e-12)


def test_prior_division_and_temperature():
    p, prior = np.array([0.6, 0.3, 0.1]), np.array([0.7, 0.2, 0.1])
    divided = order.divide_by_prior(p, prior)
    assert np.allclose(divided, (p / prior) / (p / prior).sum()) and abs(divided.sum() - 1) < 1e-12
    z = np.array([1.0, -0.5, 2.0])
    assert np.allclose(scores.with_temperature(softmax(z), 2.5), softmax(z / 2.5), atol=1e-12)
    assert np.allclose(scores.with_temperature(p, 1.0), p)


def test_order_sensitivity_reports_spread_and_top_changes():
    same = order.order_sensitivity([np.array([0.5, 0.3, 0.2])] * 3, 3)
    assert same == {"presentations": 3, "of": 3, "max_spread": 0.0, "top_changes": False}
    moved = order.order_sensitivity([np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.7, 0.1])], 3)
    assert moved["top_changes"] is True and abs(moved["max_spread"] - 0.4) < 1e-12


def test_the_prior_mode_without_its_prior_says_which_prior_is_missing():
    with pytest.raises(ValueError, match="content-free prior of 3 options"):
        order.correct("prior", [(0, 1, 2)], [], None)


# -- on the embedded model ------------------------------------------------------------------------------------


def decision(options=OPTIONS, **fields):
    return parse_decision({"id": "d", "state": STATE, "question": QUESTION, "options": options, **fields})


def by_id(result) -> dict[str, float]:
    return dict(zip(result["option_ids"], result["probabilities"]))


def decide_one(engine, batch):
    (result,) = own.results(batch, own.decide(engine, batch)[0])
    return result


def test_rotations_do_not_depend_on_a_shift_or_reversal_and_are_the_mean_of_the_presentations(engine):
    reference = decide_one(engine, decision(order="rotations"))
    assert reference["order"] == "rotations" and reference["option_ids"] == [o["id"] for o in OPTIONS]
    sensitivity = reference["order_sensitivity"]
    assert sensitivity["presentations"] == 6 and sensitivity["of"] == 3 and 0 <= sensitivity["max_spread"] <= 1
    rows, masses = [], []
    for listed in (OPTIONS[1:] + OPTIONS[:1], OPTIONS[2:] + OPTIONS[:2], OPTIONS[::-1]):  # shifted, and reversed
        got = decide_one(engine, decision(listed, order="rotations"))
        assert got["option_ids"] == [o["id"] for o in listed]  # ids in request order
        for key, value in by_id(reference).items():
            assert abs(by_id(got)[key] - value) < 1e-6
    for presentation in order.presentations(3, 16):  # each presentation asked alone, as given
        alone = decide_one(engine, decision([OPTIONS[i] for i in presentation], order="as_given"))
        rows.append([by_id(alone)[o["id"]] for o in OPTIONS])
        masses.append(alone["allowed_token_mass"])
    assert np.allclose(reference["probabilities"], order.mean_log(rows), atol=1e-4, rtol=0)
    assert abs(reference["allowed_token_mass"] - np.mean(masses)) < 1e-4
    assert reference["input_tokens"] > 2 * alone["input_tokens"]
    # the temperature in force applies to the combination, and the reported logits are its logs
    hot = decide_one(engine, decision(order="rotations", temperature=2.0))
    assert hot["temperature"] == 2.0 and hot["calibration"]["source"] == "request"
    assert np.allclose(hot["probabilities"], softmax(np.log(reference["probabilities"]) / 2.0), atol=1e-9)
    assert np.allclose(softmax(np.asarray(hot["option_logits"]) / 2.0), hot["probabilities"], atol=1e-9)


def test_prior_is_the_explicit_division_by_the_content_free_decision(engine):
    got = decide_one(engine, decision(order="prior"))
    plain = decide_one(engine, decision(order="as_given"))
    # the content-free decision, scored here by hand
    from decision_adapter.prompt import compose_user_message

    content, end = compose_user_message("N/A", "N/A", {label: "N/A" for label in "ABC"})
    prompt = engine.model.template.render_turn(SYSTEM_PROMPT, content, end)
    (blank,), _ = engine.score_items([ScoringItem(prompt, 3)])
    prior = blank.scores.probabilities(1.0)
    assert np.allclose(got["prior"], prior, atol=1e-6)
    want = np.asarray(plain["probabilities"]) / prior
    assert np.allclose(got["probabilities"], want / want.sum(), atol=1e-6)
    assert engine.info["order_priors"]["3"] == pytest.approx(list(prior), abs=1e-6)
    assert got["order_sensitivity"] is None and plain["prior"] is None
    hot = decide_one(engine, decision(order="prior", temperature=0.5))
    assert np.allclose(hot["probabilities"], softmax(np.log(got["probabilities"]) / 0.5), atol=1e-9)


@pytest.mark.parametrize("mode", ["prior", "rotations"])
def test_batched_equals_unbatched_and_the_same_request_the_same_answer(engine, mode):
    questions = [
        {"id": "team", "question": QUESTION, "options": OPTIONS},
        {"id": "damaged", "question": "Was the item damaged?", "options": ["no", "yes"]},
    ]
    batch = parse_decision({"id": "b", "state": STATE, "questions": questions, "order": mode})
    results = own.results(batch, own.decide(engine, batch)[0])
    assert [r["id"] for r in results] == ["team", "damaged"] and {r["order"] for r in results} == {mode}
    if mode == "rotations":
        assert [r.probabilities for r in own.decide(engine, batch)[0]] == [tuple(r["probabilities"]) for r in results]
    for first, question in zip(results, questions):
        alone = decide_one(
            engine,
            parse_decision(
                {
                    "id": "x",
                    "state": STATE,
                    "question": question["question"],
                    "options": question["options"],
                    "order": mode,
                }
            ),
        )
        assert np.allclose(first["probabilities"], alone["probabilities"], atol=1e-4, rtol=0)


def test_a_question_of_a_batch_overrides_the_batch_order(engine):
    batch = parse_decision(
        {
            "id": "b",
            "state": STATE,
            "order": "rotations",
            "questions": [
                {"id": "a", "question": QUESTION, "options": OPTIONS},
                {"id": "b", "question": QUESTION, "options": OPTIONS, "order": "as_given"},
            ],
        }
    )
    a, b = own.decide(engine, batch)[0]
    assert (a.order, b.order) == ("rotations", "as_given")
    assert a.order_sensitivity["presentations"] == 6 and b.order_sensitivity is None


def test_the_server_default_applies_when_a_request_names_no_mode(engine, monkeypatch):
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, order="rotations", max_rotations=2))
    result = decide_one(engine, decision(OPTIONS + [{"id": "it", "text": "IT support"}]))
    assert result["order"] == "rotations"
    assert result["order_sensitivity"]["presentations"] == 4 and result["order_sensitivity"]["of"] == 4  # 2 each way


def test_rotations_of_a_shared_state_request_stay_within_its_time_limit(engine):
    questions = [{"id": f"q{i}", "question": f"{QUESTION} ({i})", "options": OPTIONS} for i in range(2)]
    batch = parse_decision({"id": "b", "state": STATE, "questions": questions, "order": "rotations"})
    before = own.decide(engine, batch)[0]
    with engine.time_limit(0.02), pytest.raises(TimedOut):
        own.decide(engine, batch)
    after = own.decide(engine, batch)[0]
    for a, b in zip(after, before):
        assert np.allclose(a.probabilities, b.probabilities, atol=1e-6, rtol=0)


def forget_priors(engine, monkeypatch) -> None:
    """A fresh priors' cache for this test, and model info that reports none yet."""
    monkeypatch.setattr(engine, "priors", Priors(engine.settings.cloze_prior_cache, report=engine.model.report_prior))
    monkeypatch.setattr(engine.model, "info", {**engine.info, "order_priors": {}, "order_priors_jev": {}})


def test_priors_are_measured_at_start_up_when_the_default_is_prior(engine, monkeypatch):
    forget_priors(engine, monkeypatch)
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, order="prior"))
    monkeypatch.setattr(readout_letters, "STARTUP_COUNTS", range(4, 6))  # 2 to 16 in production: kept short here
    engine.prove()
    assert sorted(map(int, engine.info["order_priors"])) == [4, 5]
    assert sorted(map(int, engine.info["order_priors_jev"])) == [4, 5]
    for n, prior in engine.info["order_priors"].items():
        assert len(prior) == int(n) and abs(sum(prior) - 1) < 1e-9
    counted = engine.context.tokens_evaluated
    readout_letters.prior(engine, engine.model, engine.priors, 5, DECISION_PROMPT)  # cached: nothing evaluated again
    assert engine.context.tokens_evaluated == counted


def test_a_prior_measured_on_first_use_counts_in_that_requests_input_tokens(engine, monkeypatch):
    forget_priors(engine, monkeypatch)
    batch = decision(order="prior")
    counted = engine.context.tokens_evaluated
    first, paid = scoring.decide(engine, batch)
    read_first = engine.context.tokens_evaluated - counted
    assert "3" in engine.info["order_priors"]
    counted = engine.context.tokens_evaluated
    again, cached = scoring.decide(engine, batch)  # the prior is cached now
    assert engine.context.tokens_evaluated - counted < read_first and cached["input_tokens"] < paid["input_tokens"]
    # the difference is the content-free decision alone, and the answers do not depend on who paid for it
    from decision_adapter.prompt import compose_user_message

    content, end = compose_user_message("N/A", "N/A", {label: "N/A" for label in "ABC"})
    _, blank = engine.score_items([ScoringItem(engine.model.template.render_turn(SYSTEM_PROMPT, content, end), 3)])
    assert paid["input_tokens"] - cached["input_tokens"] == blank["input_tokens"]
    assert np.allclose(first[0].probabilities, again[0].probabilities, atol=1e-6, rtol=0)


def test_the_decisions_api_counts_a_first_use_prior_in_its_usage(engine, monkeypatch):
    from decision_adapter.apis import decisions

    forget_priors(engine, monkeypatch)
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, order="prior"))
    request = decisions.parse_decisions(
        {
            "input": "I was charged twice for March.",
            "questions": [
                {
                    "type": "choice",
                    "instructions": "Which team?",
                    "choices": [{"value": v} for v in ("billing", "tech", "sales")],
                },
                {"type": "predicate", "instructions": "Does the customer ask for money back?"},
            ],
        }
    )
    results, timing = decisions.score(engine, request)
    first = decisions.respond(request, results, timing, engine.info)["usage"]
    assert timing["prior_tokens"] > 0  # two option counts, both new
    again = decisions.respond(request, *decisions.score(engine, request), engine.info)["usage"]  # priors cached
    assert first["input_tokens"] - again["input_tokens"] == timing["prior_tokens"]
    assert first["input_tokens_details"]["cached_tokens"] == again["input_tokens_details"]["cached_tokens"] > 0
    assert first["total_tokens"] == first["input_tokens"]


def test_rotations_on_the_hybrid_test_gguf_are_the_mean_of_the_presentations(tmp_path_factory):
    """The restore path (a recurrent memory cannot be cut back): each presentation from the saved state."""
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model
    from scripts.hybrid_gguf import write_hybrid_gguf
    from tests.support import adapter_settings

    folder = tmp_path_factory.mktemp("hybrid-order")
    write_hybrid_gguf(folder / "hybrid-qwen35.gguf")
    hybrid = Engine(adapter_settings(folder), locate_model(folder))
    assert hybrid.context.prefix_mode == "restore"
    combined = decide_one(hybrid, decision(order="rotations"))
    rows = []
    for presentation in order.presentations(3, 16):
        alone = decide_one(hybrid, decision([OPTIONS[i] for i in presentation]))
        rows.append([by_id(alone)[o["id"]] for o in OPTIONS])
    assert np.allclose(combined["probabilities"], order.mean_log(rows), atol=1e-4, rtol=0)
