"""The wire contract (decision_contract.wire): the version an adapter reports and how a client judges it, the
readout an answer names, the readout/order rule, and the one validity rule with its one tolerance, which every
reader of answers in the client applies (the three dialects' readers refuse and accept the same answers)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decision_adapter.apis.registry import DIALECTS
from decision_contract import names, wire
from workshop_lib.client import Decision, InvalidDecision, jev
from workshop_lib.client import openai_decisions as od

IDS = ["refunds", "shipping", "sales"]

# -- the version ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, version",
    [
        (None, None),
        ("", None),
        ("trace-7", None),
        (wire.WIRE_VERSION, wire.WIRE_VERSION),
        ("trace-7, decision-wire/3", "decision-wire/3"),
        ("a=1; decision-wire/2 ;b", "decision-wire/2"),
    ],
)
def test_the_version_is_read_from_the_header_among_other_attributes(header, version):
    assert wire.version_in(header) == version


def test_the_same_version_or_none_from_an_adapter_of_the_first_is_no_problem():
    assert wire.version_problem(wire.WIRE_VERSION) is None
    assert wire.version_problem(None, expected=wire.FIRST_VERSION) is None


@pytest.mark.parametrize("spoken, expected", [("decision-wire/9", None), (None, "decision-wire/9")])
def test_another_version_is_a_problem_naming_both_and_the_fix(spoken, expected):
    problem = wire.version_problem(spoken, expected=expected)
    assert problem is not None
    assert (spoken or wire.FIRST_VERSION) in problem and (expected or wire.WIRE_VERSION) in problem
    assert "make setup" in problem and "workshop build-image" in problem


# -- readouts and order -----------------------------------------------------------------------------------------


def test_every_dialect_that_answers_decisions_says_where_it_names_the_readout():
    """The contract's dialects are the adapter's APIs (by their registry names), chat aside."""
    assert set(wire.READOUT_FIELDS) == {api.name for api in DIALECTS.apis} - {"chat"}


def test_every_method_belongs_to_a_readout_and_every_readout_has_a_method():
    assert set(wire.METHODS.values()) == set(names.READOUTS)


@pytest.mark.parametrize(
    "dialect, answer, readout",
    [
        ("decision", {"readout_name": "cloze"}, "cloze"),
        ("decision", {"readout": "One forward pass over the rendered prompt"}, "letters"),  # a description names none
        ("decision", {}, "letters"),  # this version names only cloze: an answer that names none read letters
        ("sample", {}, "letters"),
        ("decision", {"readout_name": "letters"}, "letters"),
        ("systemone", {"x_readout": "letter-slots"}, "letters"),
        ("systemone", {"x_readout": "two-level-codes"}, "letters"),
        ("systemone", {"x_readout": "cloze"}, "cloze"),
        ("systemone", {}, None),
        ("openai_decisions", {"x_readout": "letters"}, "letters"),
        ("openai_decisions", {"x_readout": "cloze"}, "cloze"),
        ("openai_decisions", {}, None),
    ],
)
def test_an_answer_names_its_readout_in_its_dialects_field(dialect, answer, readout):
    assert wire.readout_of(answer, dialect) == readout


@pytest.mark.parametrize(
    "dialect, answer, needle",
    [
        ("decision", {"readout_name": "words"}, "not a readout"),
        ("decision", {"readout_name": 3}, "not a readout's name"),
        ("systemone", {"x_readout": "letters"}, "not a method"),  # System One names the method, not the readout
        ("openai_decisions", {"x_readout": "letter-slots"}, "not a readout"),
        ("chat", {}, "not a dialect"),
    ],
)
def test_a_readout_this_contract_does_not_know_is_refused(dialect, answer, needle):
    with pytest.raises(wire.WireError, match=needle):
        wire.readout_of(answer, dialect)


@pytest.mark.parametrize("readout", names.READOUTS)
@pytest.mark.parametrize("order", [None, *names.ORDER_MODES])
def test_only_the_letters_readout_takes_an_order_that_moves_the_options(readout, order):
    problem = wire.order_problem(readout, order)
    assert (problem is None) == (readout == names.LETTERS or order in (None, names.AS_GIVEN))
    if problem:
        assert repr(order) in problem and names.AS_GIVEN in problem


def test_an_unknown_readout_or_order_is_named():
    assert "not 'words'" in wire.order_problem("words", None)
    assert "not 'shuffled'" in wire.order_problem(names.LETTERS, "shuffled")


# -- the validity rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "probabilities, needle",
    [
        ([float("nan"), 0.5, 0.5], "'refunds' is nan, not a finite number"),
        ([0.2, -0.1, 0.9], "'shipping' is -0.1, outside [0, 1]"),
        ([0.2, 0.5, True], "'sales' is True, not a number"),
        ([0.5, 0.5], "2 probabilities for 3 option ids"),
        ([0.2, 0.5, 0.4], "sum to 1.1"),
    ],
)
def test_what_is_not_one_distribution_is_named(probabilities, needle):
    assert needle in wire.distribution_problem(IDS, probabilities)


@pytest.mark.parametrize(
    "got, ordered, problem",
    [
        (["refunds", "shipping"], True, "it lacks the options ['sales']"),
        (["shipping"], False, "it lacks the options ['refunds', 'sales']"),
        (["refunds", "shipping", "sales", "other"], True, "it has ['other'], which were not sent"),
        (
            ["refunds", "shipping", "other"],
            True,
            "it lacks the options ['sales'] and has ['other'], which were not sent",
        ),
        (
            ["refunds", "refunds", "sales"],
            True,
            "it lists ['refunds'] more than once and lacks the options ['shipping']",
        ),
        (["refunds", "shipping", "sales", "sales"], False, "it lists ['sales'] more than once"),
        (
            ["refunds", "shipping", "sales", "other", "other"],
            True,
            "it lists ['other'] more than once and has ['other'], which were not sent",
        ),
        (
            ["sales", "shipping", "refunds"],
            True,
            "it lists the options as ['sales', 'shipping', 'refunds'], not in the order sent "
            "['refunds', 'shipping', 'sales']",
        ),
        (["sales", "shipping", "refunds"], False, None),
        (IDS, True, None),
    ],
)
def test_the_ids_are_those_sent(got, ordered, problem):
    assert wire.ids_problem(IDS, got, ordered=ordered) == problem


@pytest.mark.parametrize("got", [["refunds", "shipping"], ["shipping", "refunds", "sales"], ["sales", "refunds"]])
def test_what_was_not_sent_is_named_only_when_something_was(got):
    problem = wire.ids_problem(IDS, got)
    assert "not sent" not in problem and "[]" not in problem


def _off_by(delta: float) -> list[float]:
    return [0.2, 0.5, 0.3 + delta]


def _readers():
    """Each dialect's reader in the client, as ``read(probabilities)``: raises on an answer it refuses."""

    def own(probabilities):
        Decision.from_result({"id": "d", "option_ids": IDS, "probabilities": probabilities})

    def systemone(probabilities):
        question = jev.choice("Which team?", IDS)
        jev.parse_answer(
            "q", question, {"type": "choice", "choice": "shipping", "probabilities": dict(zip(IDS, probabilities))}
        )

    def decisions(probabilities):
        question = od.choice("Which team?", IDS, name="team")
        od.parse_answer(
            0,
            question,
            {
                "type": "choice",
                "name": "team",
                "choice": "shipping",
                "confidence": 0.5,
                "probabilities": [{"value": i, "probability": p} for i, p in zip(IDS, probabilities)],
            },
        )

    return {"own": own, "systemone": systemone, "decisions": decisions}


@pytest.mark.parametrize("reader", ["own", "systemone", "decisions"])
def test_every_reader_holds_answers_to_the_one_tolerance(reader):
    read = _readers()[reader]
    refused = (InvalidDecision, jev.SystemOneFormatError, od.DecisionsFormatError)
    for delta in (0.0, 0.9 * wire.SUM_TOLERANCE, -0.9 * wire.SUM_TOLERANCE):
        read(_off_by(delta))
    for delta in (1.1 * wire.SUM_TOLERANCE, -1.1 * wire.SUM_TOLERANCE):
        with pytest.raises(refused, match="sum to"):
            read(_off_by(delta))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=6))
def test_the_readers_agree_with_the_rule_on_any_numbers(probabilities):
    ids = [f"o{i}" for i in range(len(probabilities))]
    valid = wire.distribution_problem(ids, probabilities) is None
    if valid:
        assert all(0.0 <= p <= 1.0 for p in probabilities)
        assert math.isclose(math.fsum(probabilities), 1.0, abs_tol=wire.SUM_TOLERANCE)
    try:
        Decision.from_result({"id": "d", "option_ids": ids, "probabilities": probabilities})
        accepted = True
    except InvalidDecision:
        accepted = False
    assert accepted == valid
