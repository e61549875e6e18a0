"""Application rules on fixed probabilities with known answers (no model involved)."""

from __future__ import annotations

import math
import re

import pytest

from workshop_lib.client import Decision
from workshop_lib.client.policy import (
    ACCEPTED,
    BELOW_THRESHOLD,
    NOT_ALLOWED,
    NOT_SET_OF_ONE,
    SMALL_MARGIN,
    Policy,
    accept_if_clear,
    accept_or_fallback,
    margin,
    prediction_set,
    ranked,
    scores,
)

ROUTE = {"billing": 0.62, "tech_support": 0.25, "sales": 0.13}
CLOSE = {"billing": 0.41, "tech_support": 0.39, "sales": 0.20}
TIE = {"low": 0.5, "high": 0.5}


def test_scores_accepts_a_client_decision_and_a_mapping_alike():
    made = Decision("t-1", tuple(ROUTE), tuple(ROUTE.values()))
    assert scores(made) == scores(ROUTE) == ROUTE
    assert list(scores(made)) == ["billing", "tech_support", "sales"]


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"a": math.nan, "b": 0.5},
        {"a": 1.2, "b": 0.0},
        {"a": -0.1, "b": 0.3},
        {"a": "0.5", "b": 0.5},
        {"a": True, "b": 0.0},
    ],
)
def test_unusable_probabilities_are_refused(bad):
    with pytest.raises(ValueError):
        scores(bad)


def test_ranked_orders_by_probability_and_keeps_option_order_on_ties():
    assert [oid for oid, _ in ranked(ROUTE)] == ["billing", "tech_support", "sales"]
    assert [oid for oid, _ in ranked({"a": 0.2, "b": 0.4, "c": 0.4})] == ["b", "c", "a"]
    assert ranked(TIE)[0][0] == "low"


def test_margin_is_top_minus_runner_up():
    assert margin(ROUTE) == pytest.approx(0.37)
    assert margin(CLOSE) == pytest.approx(0.02)
    assert margin(TIE) == 0.0
    assert margin({"only": 0.9}) == pytest.approx(0.9)


@pytest.mark.parametrize(
    "threshold, expected",
    [(0.5, "billing"), (0.62, "billing"), (0.63, "needs_review"), (0.0, "billing"), (1.0, "needs_review")],
)
def test_accept_or_fallback(threshold, expected):
    assert accept_or_fallback(ROUTE, threshold, "needs_review") == expected


def test_accept_or_fallback_on_a_client_decision():
    made = Decision("t-1", ("billing", "sales"), (0.3, 0.7))
    assert accept_or_fallback(made, 0.6, "human") == "sales"
    assert accept_or_fallback(made, 0.8, "human") == "human"


@pytest.mark.parametrize(
    "probabilities, min_margin, expected",
    [
        (ROUTE, 0.3, "billing"),
        (ROUTE, 0.37, "billing"),  # exactly on the boundary: met (float rounding absorbed)
        (ROUTE, 0.38, "manual"),
        (CLOSE, 0.05, "manual"),
        (CLOSE, 0.02, "billing"),
        (TIE, 0.0, "low"),
        (TIE, 0.01, "manual"),
    ],
)
def test_accept_if_clear(probabilities, min_margin, expected):
    assert accept_if_clear(probabilities, min_margin, "manual") == expected


def test_boundary_values_survive_float_rounding():
    # 0.7 - 0.5 == 0.19999999999999996 in floating point
    assert accept_if_clear({"a": 0.7, "b": 0.5}, 0.2, "fallback") == "a"


def test_policy_accepts_and_explains():
    outcome = Policy(threshold=0.6, min_margin=0.2).apply(ROUTE)
    assert (outcome.option_id, outcome.accepted, outcome.rule) == ("billing", True, ACCEPTED)
    assert outcome.top == "billing" and outcome.top_probability == 0.62
    assert outcome.margin == pytest.approx(0.37)
    assert "billing accepted with p=0.620" in outcome.reason


def test_policy_threshold_failure_names_the_numbers():
    outcome = Policy(threshold=0.7, fallback="needs_review").apply(ROUTE)
    assert (outcome.option_id, outcome.accepted, outcome.rule) == ("needs_review", False, BELOW_THRESHOLD)
    assert outcome.top == "billing"
    assert "p=0.620" in outcome.reason and "0.700" in outcome.reason and "needs_review" in outcome.reason


def test_policy_margin_failure_names_the_runner_up():
    outcome = Policy(threshold=0.4, min_margin=0.1, fallback="ask_human").apply(CLOSE)
    assert (outcome.option_id, outcome.rule) == ("ask_human", SMALL_MARGIN)
    assert "tech_support" in outcome.reason and "0.020" in outcome.reason


def test_allow_list_blocks_the_top_option_instead_of_promoting_the_next():
    # tech_support is allowed, but the model's choice (billing) is not: fall back, don't redirect.
    outcome = Policy(allowed={"tech_support", "sales"}, fallback="escalate").apply(ROUTE)
    assert (outcome.option_id, outcome.accepted, outcome.rule) == ("escalate", False, NOT_ALLOWED)
    assert outcome.top == "billing" and "not among the allowed" in outcome.reason


def test_allow_list_is_checked_before_the_threshold():
    outcome = Policy(threshold=0.99, allowed=["sales"]).apply(ROUTE)
    assert outcome.rule == NOT_ALLOWED


def test_allowing_derives_a_restricted_policy():
    base = Policy(threshold=0.5, fallback="review")
    assert base.apply(ROUTE).option_id == "billing"
    restricted = base.allowing(["tech_support"])
    assert restricted.allowed == frozenset({"tech_support"}) and restricted.threshold == 0.5
    assert restricted.apply(ROUTE).option_id == "review"
    assert base.allowing(["billing"]).apply(ROUTE).accepted


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 1.5},
        {"threshold": -0.1},
        {"min_margin": 2},
        {"fallback": ""},
        {"fallback": None},
        {"allowed": "billing"},
        {"threshold": True},
    ],
)
def test_policy_refuses_unusable_settings(kwargs):
    with pytest.raises(ValueError):
        Policy(**kwargs)


def test_helpers_refuse_an_empty_fallback():
    with pytest.raises(ValueError, match="fallback"):
        accept_or_fallback(ROUTE, 0.5, "")


def _answer(mass, abstained=False):
    raw = {"allowed_token_mass": mass, "abstained": abstained}
    return Decision("t-1", tuple(ROUTE), tuple(ROUTE.values()), raw=raw)


def test_an_answer_the_server_marked_abstained_falls_back_whatever_its_probabilities():
    from workshop_lib.client.policy import ABSTAINED

    outcome = Policy(threshold=0.1, fallback="review").apply(_answer(0.4, abstained=True))
    assert (outcome.option_id, outcome.accepted, outcome.rule, outcome.answer_mass) == ("review", False, ABSTAINED, 0.4)
    assert "0.400" in outcome.reason


@pytest.mark.parametrize("mass, accepted", [(0.97, False), (0.98, True), (0.999, True)])
def test_min_answer_mass_falls_back_below_the_threshold(mass, accepted):
    outcome = Policy(min_answer_mass=0.98).apply(_answer(mass))
    assert outcome.accepted is accepted
    assert outcome.option_id == ("billing" if accepted else "needs_review")


def test_min_answer_mass_cannot_be_checked_on_a_plain_mapping_so_it_falls_back():
    from workshop_lib.client.policy import ABSTAINED

    assert Policy(min_answer_mass=0.5).apply(ROUTE).rule == ABSTAINED
    assert Policy().apply(ROUTE).rule == ACCEPTED  # 0: nothing to check


def test_authorization_is_checked_before_abstention_and_allowing_keeps_the_mass_rule():
    policy = Policy(min_answer_mass=0.9, fallback="review").allowing({"sales"})
    assert policy.min_answer_mass == 0.9
    assert policy.apply(_answer(0.1)).rule == NOT_ALLOWED


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.9"])
def test_min_answer_mass_must_be_a_share(bad):
    with pytest.raises(ValueError, match="min_answer_mass"):
        Policy(min_answer_mass=bad)


# -- routing on the prediction set ----------------------------------------------------------------------------


def _with_set(members, key="prediction_set"):
    return Decision("t-1", tuple(ROUTE), tuple(ROUTE.values()), raw={key: members} if members is not None else {})


def test_a_set_of_one_top_option_is_accepted_and_anything_else_needs_review():
    policy = Policy(require_set_of_one=True)
    accepted = policy.apply(_with_set(["billing"]))
    assert accepted.accepted and accepted.option_id == "billing" and accepted.prediction_set == ("billing",)
    for members, says in ((["billing", "sales"], "billing, sales"), ([], "no option"), (["sales"], "sales")):
        outcome = policy.apply(_with_set(members))
        assert (outcome.option_id, outcome.rule) == ("needs_review", NOT_SET_OF_ONE)
        assert f"holds {says}, not billing alone" in outcome.reason


def test_without_a_served_set_the_rule_sends_to_review_and_says_why():
    for decision in (_with_set(None), ROUTE):  # an answer served without a set, a plain mapping
        outcome = Policy(require_set_of_one=True, fallback="human").apply(decision)
        assert (outcome.option_id, outcome.rule) == ("human", NOT_SET_OF_ONE) and "no prediction_set" in outcome.reason
    assert Policy().apply(_with_set(None)).accepted  # off by default: the set is not looked at


def test_system_one_answers_carry_the_set_as_x_prediction_set():
    assert prediction_set(_with_set(["billing"], key="x_prediction_set")) == ("billing",)
    assert Policy(require_set_of_one=True).apply(_with_set(["billing"], key="x_prediction_set")).accepted


def test_the_set_rule_comes_after_the_allow_list_and_before_threshold_and_margin():
    assert Policy(require_set_of_one=True, allowed={"sales"}).apply(_with_set(["billing"])).rule == NOT_ALLOWED
    assert Policy(require_set_of_one=True, threshold=0.9).apply(_with_set(["billing", "sales"])).rule == NOT_SET_OF_ONE
    assert Policy(require_set_of_one=True, threshold=0.9).apply(_with_set(["billing"])).rule == BELOW_THRESHOLD


def test_require_set_of_one_must_be_a_boolean():
    with pytest.raises(ValueError, match="require_set_of_one"):
        Policy(require_set_of_one="yes")


@pytest.mark.parametrize(
    "raw, held", [({}, "the answer letters held 0.400"), ({"readout_name": "cloze"}, "the options' texts held 0.400")]
)
def test_an_abstention_names_what_the_answering_readout_measured(raw, held):
    answer = Decision("t-1", tuple(ROUTE), tuple(ROUTE.values()), raw={"allowed_token_mass": 0.4, **raw})
    assert held in Policy(min_answer_mass=0.9).apply(answer).reason


def _read_by(readout_name, mass):
    raw = {"allowed_token_mass": mass, **({"readout_name": readout_name} if readout_name else {})}
    return Decision("t-1", tuple(ROUTE), tuple(ROUTE.values()), raw=raw)


def test_a_floor_per_readout_holds_only_the_answers_of_the_readouts_it_names():
    from workshop_lib.client.policy import ABSTAINED

    policy = Policy(min_answer_mass={"letters": 0.5})
    letters, cloze = _read_by(None, 0.1), _read_by("cloze", 0.0001)  # this schema's letters answers name no readout
    assert policy.apply(letters).rule == ABSTAINED and "below min_answer_mass 0.500" in policy.apply(letters).reason
    assert policy.apply(cloze).rule == ACCEPTED  # no floor named for cloze: its mass is not held to one
    assert Policy(min_answer_mass={"letters": 0.5, "cloze": 0.001}).apply(cloze).rule == ABSTAINED
    assert Policy(min_answer_mass=0.5).apply(cloze).rule == ABSTAINED  # one number holds every readout
    # An answer that does not say its readout (a plain mapping) is held to the highest floor named.
    assert policy.answer_mass_floor(None) == 0.5 and policy.apply(ROUTE).rule == ABSTAINED


@pytest.mark.parametrize(
    "floors, says", [({"logits": 0.5}, "names readouts ['logits']"), ({"letters": 1.5}, "min_answer_mass['letters']")]
)
def test_a_floor_per_readout_names_known_readouts_and_shares(floors, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        Policy(min_answer_mass=floors)
