"""workshop_lib.client.openai_decisions: pure builders and readers of OpenAI Decisions bodies (no server)."""

import pytest

from workshop_lib.client import openai_decisions as od

QUESTIONS = [
    od.predicate("The customer asks for a refund.", name="refund"),
    od.choice("Which team?", {"billing": "Payments", "shipping": None}, name="team"),
    od.score("How frustrated?", ["calm", "annoyed", "furious"], name="anger"),
]


def reply(**changes):
    answers = [
        {"type": "predicate", "name": "refund", "probability": 0.7},
        {
            "type": "choice",
            "name": "team",
            "choice": "billing",
            "confidence": 0.4,
            "probabilities": [{"value": "billing", "probability": 0.6}, {"value": "shipping", "probability": 0.4}],
        },
        {
            "type": "score",
            "name": "anger",
            "score": 1.2,
            "confidence": 0.3,
            "probabilities": [
                {"value": 0, "label": "calm", "probability": 0.2},
                {"value": 1, "label": "annoyed", "probability": 0.4},
                {"value": 2, "label": "furious", "probability": 0.4},
            ],
        },
    ]
    for index, fields in changes.items():
        answers[int(index[1:])].update(fields)
    return {"model": "m", "answers": answers, "usage": {"input_tokens": 10}}


def test_the_request_keeps_the_questions_in_order_with_their_descriptions():
    body = od.request("text", QUESTIONS)
    assert body["model"] == "jev-latest" and body["input"] == "text"
    assert [q["type"] for q in body["questions"]] == ["predicate", "choice", "score"]
    assert body["questions"][1]["choices"] == [{"value": "billing", "description": "Payments"}, {"value": "shipping"}]
    assert "model" not in od.request("text", QUESTIONS, model=None)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: od.choice("Which?", ["only"]), "two values"),
        (lambda: od.score("How?", ["one"]), "two levels"),
        (lambda: od.predicate("  "), "instructions"),
        (lambda: od.request("t", []), "at least one"),
        (lambda: od.request("t", [od.predicate("a", name="x"), od.predicate("b", name="x")]), "unique"),
    ],
)
def test_bad_requests_are_refused_before_sending(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_fitting_reply_is_read_by_name_with_probabilities_keyed_by_option():
    result = od.parse_response(reply(), od.request("text", QUESTIONS))
    assert result["refund"].probabilities == pytest.approx({"yes": 0.7, "no": 0.3})
    assert result["team"].choice == "billing" and result["team"].top == "billing"
    assert result["anger"].score == 1.2 and list(result["anger"].probabilities) == ["calm", "annoyed", "furious"]
    assert [a.name for a in result.answers] == ["refund", "team", "anger"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"a0": {"name": "other"}}, "expected the predicate question"),
        ({"a0": {"probability": 1.5}}, "not a probability"),
        ({"a1": {"choice": "it"}}, "not one of the values"),
        (
            {
                "a1": {
                    "probabilities": [
                        {"value": "shipping", "probability": 0.4},
                        {"value": "billing", "probability": 0.6},
                    ]
                }
            },
            "not in the order sent",
        ),
        ({"a2": {"score": 3}}, "level index"),
        (
            {
                "a2": {
                    "probabilities": [
                        {"value": 0, "label": "calm", "probability": 0.5},
                        {"value": 1, "label": "annoyed", "probability": 0.5},
                        {"value": 2, "label": "furious", "probability": 0.5},
                    ]
                }
            },
            "sum to",
        ),
    ],
)
def test_a_reply_that_does_not_answer_the_request_is_refused(changes, message):
    with pytest.raises(od.DecisionsFormatError, match=message):
        od.parse_response(reply(**changes), od.request("text", QUESTIONS))


def test_a_missing_answer_is_refused():
    short = reply()
    short["answers"].pop()
    with pytest.raises(od.DecisionsFormatError, match="expected 3 answers"):
        od.parse_response(short, od.request("text", QUESTIONS))


# -- the adapter's x_readout and x_prediction_set --------------------------------------------------------------


def test_the_readout_and_prediction_sets_are_read_into_the_answers_own_keys():
    got = reply(
        a0={"x_readout": "cloze", "x_prediction_set": [False, True]},
        a1={"x_readout": "cloze", "x_prediction_set": ["shipping"]},
        a2={"x_readout": "cloze", "x_prediction_set": [1, 2]},
    )
    result = od.parse_response(got, od.request("text", QUESTIONS))
    assert [a.readout for a in result.answers] == ["cloze"] * 3
    assert [a.prediction_set for a in result.answers] == [("no", "yes"), ("shipping",), ("annoyed", "furious")]
    assert result["team"].raw is got["answers"][1]


def test_an_answer_without_the_adapters_fields_has_none():
    result = od.parse_response(reply(), od.request("text", QUESTIONS))
    assert all(a.readout is None and a.prediction_set is None for a in result.answers)
    assert (
        od.parse_response(reply(a1={"x_prediction_set": []}), od.request("text", QUESTIONS))["team"].prediction_set
        == ()
    )


def test_boolean_choice_values_in_the_set_are_matched_by_type_too():
    questions = [od.choice("Valid?", [True, False], name="v")]
    answer = {
        "type": "choice",
        "name": "v",
        "choice": True,
        "confidence": 0.2,
        "probabilities": [{"value": True, "probability": 0.6}, {"value": False, "probability": 0.4}],
    }
    body = od.request("text", questions)
    assert od.parse_response({"model": "m", "answers": [{**answer, "x_prediction_set": [True]}]}, body)[
        "v"
    ].prediction_set == ("True",)  # keyed as probabilities are
    for member in ("True", 1):
        with pytest.raises(od.DecisionsFormatError, match="not one of the question's answers"):
            od.parse_response({"model": "m", "answers": [{**answer, "x_prediction_set": [member]}]}, body)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"a0": {"x_prediction_set": ["true"]}}, "not one of the question's answers"),
        ({"a1": {"x_prediction_set": ["sales"]}}, "not one of the question's answers"),
        ({"a2": {"x_prediction_set": [3]}}, "not one of the question's answers"),
        ({"a2": {"x_prediction_set": ["annoyed"]}}, "not one of the question's answers"),  # levels go by value
        ({"a2": {"x_prediction_set": [[1]]}}, "not one of the question's answers"),
        ({"a2": {"x_prediction_set": [1.0]}}, "not one of the question's answers"),
        ({"a1": {"x_prediction_set": "billing"}}, "not a list"),
        ({"a0": {"x_readout": 1}}, "x_readout"),
    ],
)
def test_adapter_fields_that_do_not_fit_the_question_are_refused(changes, message):
    with pytest.raises(od.DecisionsFormatError, match=message):
        od.parse_response(reply(**changes), od.request("text", QUESTIONS))


def test_a_policy_routes_a_decisions_answer_on_its_prediction_set():
    from workshop_lib.client.policy import ACCEPTED, NOT_SET_OF_ONE, Policy

    body = od.request("text", QUESTIONS)
    policy = Policy(require_set_of_one=True)
    clear = od.parse_response(reply(a1={"x_prediction_set": ["billing"]}), body)["team"]
    outcome = policy.apply(clear)
    assert (outcome.rule, outcome.option_id, outcome.prediction_set) == (ACCEPTED, "billing", ("billing",))
    for members in (["billing", "shipping"], ["shipping"], []):
        unclear = od.parse_response(reply(a1={"x_prediction_set": members}), body)["team"]
        assert policy.apply(unclear).rule == NOT_SET_OF_ONE
    assert policy.apply(od.parse_response(reply(), body)["team"]).rule == NOT_SET_OF_ONE  # served without a set
    assert policy.apply(od.parse_response(reply(a0={"x_prediction_set": [True]}), body)["refund"]).option_id == "yes"


def test_a_refusal_is_read_with_its_readout_and_no_probabilities():
    refused = {"type": "refusal", "name": "team", "refusal": "the answer labels held 0.01", "x_readout": "letters"}
    got = reply()
    got["answers"][1] = refused
    result = od.parse_response(got, od.request("text", QUESTIONS))
    team = result["team"]
    assert (team.type, team.refusal, team.readout, team.probabilities, team.prediction_set) == (
        "refusal",
        "the answer labels held 0.01",
        "letters",
        {},
        None,
    )
    with pytest.raises(ValueError, match="refusal"):
        team.top
    assert result["refund"].type == "predicate"  # the other answers are read as usual
    from workshop_lib.client.policy import ABSTAINED, Policy

    routed = Policy(fallback="human_review").apply(team)
    assert (routed.option_id, routed.accepted, routed.rule) == ("human_review", False, ABSTAINED)
    assert "the answer labels held 0.01" in routed.reason
    with pytest.raises(od.DecisionsFormatError, match="expected the choice question"):
        od.parse_response(reply(a1={"type": "refusal", "name": "other"}), od.request("text", QUESTIONS))
