"""The official ``openai`` library's ``client.decisions.create`` against a live adapter over HTTP: every
input kind the library types, its ``Decision`` type parsing every answer, and its errors."""

from __future__ import annotations

import math

import openai
import pytest
from openai.types.decision import (
    AnswerAnswerResourceChoice,
    AnswerAnswerResourcePredicate,
    AnswerAnswerResourceScore,
    Decision,
)

from tests.support.adapters import JEV_ENV

pytestmark = pytest.mark.slow

MODEL = "jev-latest"
TICKET = "I was charged twice for my March invoice. Please refund the second charge."
PREDICATE = {"type": "predicate", "name": "refund", "instructions": "The customer asks for money back."}
CHOICE = {
    "type": "choice",
    "name": "team",
    "instructions": "Which team should handle it?",
    "choices": [
        {"value": "billing", "description": "Payments"},
        {"value": "technical"},
        {"value": True, "description": "Someone else"},
        {"value": "true"},
    ],
}
SCORE = {"type": "score", "instructions": "How urgent is it?", "levels": [{"label": "low"}, {"label": "high"}]}

# every item of the library's input union, in one conversation
CONVERSATION = [
    {"role": "system", "content": "You triage support tickets."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Refunds go to billing."}]},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": TICKET},
            {"type": "input_json", "data": {"invoice": "March", "charges": 2}},
        ],
    },
    {"role": "assistant", "content": [{"type": "output_text", "text": "Let me look that up."}], "phase": "commentary"},
    {"type": "function_call", "call_id": "call_1", "name": "find_invoice", "arguments": '{"month": "March"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "two charges of 40 EUR"},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "ledger", "input": "refunds March"},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "none"}]},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot refund it myself."}]},
]


@pytest.fixture(scope="module")
def server(adapters):
    return adapters.shared(**JEV_ENV)


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="not-checked", max_retries=0, timeout=300) as c:
        yield c


def check_answers(decision: Decision) -> None:
    assert isinstance(decision, Decision)
    for answer in decision.answers:
        if isinstance(answer, AnswerAnswerResourcePredicate):
            assert 0.0 <= answer.probability <= 1.0
        else:
            p = [item.probability for item in answer.probabilities]
            assert math.isclose(sum(p), 1.0, abs_tol=1e-9) and 0.0 <= answer.confidence <= 1.0
    assert decision.usage.total_tokens == decision.usage.input_tokens > 0 and decision.usage.output_tokens == 0


def test_every_question_type_parses_as_the_librarys_answers(client):
    decision = client.decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE, CHOICE, SCORE])
    check_answers(decision)
    predicate, choice, score = decision.answers
    assert isinstance(predicate, AnswerAnswerResourcePredicate) and predicate.name == "refund"
    assert isinstance(choice, AnswerAnswerResourceChoice) and choice.name == "team"
    assert isinstance(score, AnswerAnswerResourceScore) and score.name is None
    values = [item.value for item in choice.probabilities]
    assert values == ["billing", "technical", True, "true"]  # typed as sent: True and "true" stay apart
    assert type(values[2]) is bool and type(values[3]) is str
    p = [item.probability for item in choice.probabilities]
    assert choice.choice == values[p.index(max(p))]
    assert [(item.value, item.label) for item in score.probabilities] == [(0, "low"), (1, "high")]
    # the adapter's extensions ride along as the library's extra fields: the readout that served (the server's
    # default), and no prediction set, as no calibration file is served
    assert [a.model_extra for a in decision.answers] == [{"x_readout": "letters"}] * 3


def test_every_input_kind_the_library_types_is_read(client):
    decision = client.decisions.create(model=MODEL, input=CONVERSATION, questions=[PREDICATE, SCORE])
    check_answers(decision)
    assert [a.type for a in decision.answers] == ["predicate", "score"]


def test_input_items_are_read_in_order(client):
    """The same items in another order are another state: the answer moves, the same order repeats."""
    one = client.decisions.create(model=MODEL, input=CONVERSATION, questions=[CHOICE])
    again = client.decisions.create(model=MODEL, input=CONVERSATION, questions=[CHOICE])
    swapped = [CONVERSATION[2], CONVERSATION[0], CONVERSATION[1], *CONVERSATION[3:]]
    other = client.decisions.create(model=MODEL, input=swapped, questions=[CHOICE])
    assert one.answers == again.answers
    assert one.answers != other.answers


def test_parts_and_strings_say_the_same(client):
    """A user message's input_text part and instructions given as parts read as their strings do."""
    as_strings = client.decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE])
    as_parts = client.decisions.create(
        model=MODEL,
        input=[{"role": "user", "content": [{"type": "input_text", "text": TICKET}]}],
        questions=[dict(PREDICATE, instructions=[{"type": "input_text", "text": PREDICATE["instructions"]}])],
    )
    assert as_parts.answers == as_strings.answers


def test_openai_parameters_accepted_and_the_identifier_never_logged(client, server):
    marker = "user-7b1e0c4f-safety"
    decision = client.decisions.create(
        model=MODEL,
        input=TICKET,
        questions=[PREDICATE],
        prompt_cache_key="tickets",
        prompt_cache_options={"mode": "implicit", "ttl": "30m"},
        safety_identifier=marker,
    )
    check_answers(decision)
    assert marker not in server.log_path.read_text(errors="replace")


def test_many_questions_up_to_the_apis_limit(client):
    questions = [{"type": "predicate", "name": f"q{i}", "instructions": f"Item {i} is mentioned."} for i in range(40)]
    decision = client.decisions.create(model=MODEL, input="Short.", questions=questions)
    assert [a.name for a in decision.answers] == [f"q{i}" for i in range(40)]
    with pytest.raises(openai.BadRequestError) as refused:
        client.decisions.create(model=MODEL, input="Short.", questions=[PREDICATE] * 401)
    assert refused.value.body["param"] == "questions" and "400" in refused.value.body["message"]


@pytest.mark.parametrize(
    "input, param, code",
    [
        (
            [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}],
            "input[0].content[0].type",
            "unsupported_content",
        ),
        ([{"type": "function_call_output", "call_id": "nowhere", "output": "42"}], "input[0].call_id", "invalid_value"),
        (
            [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "custom_tool_call_output", "call_id": "c", "output": "42"},
            ],
            "input[1].call_id",
            "invalid_value",
        ),
    ],
)
def test_refusals_arrive_as_the_librarys_errors(client, input, param, code):
    with pytest.raises(openai.BadRequestError) as refused:
        client.decisions.create(model=MODEL, input=input, questions=[PREDICATE])
    assert refused.value.status_code == 400
    assert (refused.value.body["param"], refused.value.body["code"]) == (param, code)
    if code == "unsupported_content":
        assert "reads text" in refused.value.body["message"]


def test_an_image_in_the_instructions_is_refused(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.decisions.create(
            model=MODEL,
            input=TICKET,
            questions=[
                dict(PREDICATE, instructions=[{"type": "input_image", "image_url": "https://example.com/a.png"}])
            ],
        )
    assert refused.value.body["param"] == "questions[0].instructions[0].type"
