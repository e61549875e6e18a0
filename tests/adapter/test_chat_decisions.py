"""Decisions through chat completions (apis/chat_decisions.py): the parse and its errors, the answer built from
the core's records, the client's builder and reader (workshop_lib/client/chat_decision_calls.py), and the official
``openai`` library against a live adapter getting the numbers POST /invocations gives for the same decision.

The tiny test model has no signal: these check mechanics (the same numbers as the project's own decision,
ids in request order, the answer's shape), never which option wins.
"""

from __future__ import annotations

import json
import math
import urllib.request
from types import SimpleNamespace

import openai
import pytest

from decision_adapter.apis import chat, chat_decisions, decisions
from decision_adapter.caller_errors import AdapterError
from tests.support.answer_records import record
from workshop_lib.client import chat_decision_calls as client_side
from workshop_lib.client import openai_decisions

SETTINGS = SimpleNamespace(chat_max_tokens=64)
STATE = "Subject: charged twice\n\nMy card was billed two times for the March invoice. Please refund one."
QUESTION = "Which team should handle this ticket?"
OPTIONS = {"billing": "Billing: charges, refunds, invoices", "tech": "Technical support", "sales": "Sales"}
LISTED = [{"id": k, "text": v} for k, v in OPTIONS.items()]
USER = [{"role": "user", "content": "Route this ticket."}]


def body(**decision) -> dict:
    return {"model": "any", "messages": USER, "decision": {"question": QUESTION, "options": LISTED, **decision}}


# -- parsing and errors (no model) ------------------------------------------------------------------------


def openai_error_of(payload) -> tuple[dict, int]:
    with pytest.raises(AdapterError) as caught:
        chat.OPENAI_DIALECT.parse(payload, SETTINGS)
    return decisions.error_body(caught.value)


BAD = [
    (body(options=[{"id": "a", "text": "A"}, {"text": "B"}]), "decision.options[1].id"),
    (body(options=[{"id": "a", "text": "A"}, {"id": "a", "text": "B"}]), "decision.options[1].id"),
    (body(options=[{"id": "a", "text": "A"}]), "decision.options"),
    (body(temprature=0.5), "decision.temprature"),
    (body(temperature=0), "decision.temperature"),
    (body(readout="cloze", order="rotations"), "decision.order"),
    (body(readout="tea leaves"), "decision.readout"),
    (body(question="  "), "decision.question"),
    (body(state=""), "decision.state"),
    ({**body(), "messages": [{"role": "system", "content": "You route tickets."}]}, "decision.state"),
    ({**body(), "messages": [{"role": "user", "content": " "}]}, "messages[0].content"),
    ({**body(), "decision": ["billing", "tech"]}, "decision"),
    ({**body(), "stream": True}, "stream"),
    ({**body(), "tools": [{"type": "function"}]}, "tools"),
    ({**body(), "max_tokens": 10**6}, "max_tokens"),
]

TEAM = {"type": "choice", "instructions": QUESTION, "choices": [{"value": "billing"}, {"value": "tech"}]}


def asked(**question) -> dict:
    return {"model": "any", "messages": USER, "decision": {**TEAM, **question}}


BAD += [
    (asked(choices=[{"value": "billing"}]), "decision.choices"),
    (asked(choices=[{"value": "billing"}, {"value": "billing"}]), "decision.choices"),
    (asked(colour="red"), "decision.colour"),
    (asked(type="guess"), "decision.type"),
    (asked(instructions=""), "decision.instructions"),
    (asked(input=""), "decision.input"),
    (
        asked(input=[{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]),
        "decision.input[0].content[0].type",
    ),
    ({**asked(), "messages": [{"role": "system", "content": "You route tickets."}]}, "decision.input"),
    ({**asked(), "stream": True}, "stream"),
]


@pytest.mark.parametrize(("payload", "field"), BAD, ids=[field + f"-{i}" for i, (_, field) in enumerate(BAD)])
def test_a_bad_decision_is_a_400_naming_the_field(payload, field):
    error, status = openai_error_of(payload)
    assert status == 400 and error["error"]["param"] == field, error
    assert error["error"]["type"] == "invalid_request_error" and error["error"]["message"]
    with pytest.raises(AdapterError) as caught:  # on /invocations, in the project's shape and its codes
        chat.DIALECT.parse(payload, SETTINGS)
    assert caught.value.code in ("invalid_value", "invalid_type", "unsupported_parameter"), caught.value.code


def test_the_state_is_the_last_user_message_unless_the_decision_carries_one():
    messages = [
        {"role": "system", "content": "You route tickets."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": STATE},
        {"role": "assistant", "content": "noted"},
    ]
    parsed = chat.OPENAI_DIALECT.parse({**body(), "messages": messages}, SETTINGS)
    assert isinstance(parsed, chat_decisions.ChatDecision)
    assert parsed.batch.state == STATE and parsed.batch.state_field == "messages[3].content"
    given = chat.OPENAI_DIALECT.parse({**body(state={"ticket": 1}, id="t-9"), "messages": messages}, SETTINGS)
    assert given.batch.state == {"ticket": 1} and given.batch.state_field == "decision.state"
    assert given.batch.id == "t-9" and given.batch.questions[0].id == "t-9"
    assert parsed.batch.id == parsed.completion_id and parsed.completion_id.startswith("chatcmpl-")


def test_a_typed_question_is_read_as_v1_decisions_reads_it():
    """A decision with a type is a Decisions-API question: the same core batch /v1/decisions makes of it, about
    the last user message or the question's own input."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": STATE}]
    parsed = chat.OPENAI_DIALECT.parse({**asked(name="team"), "messages": messages}, SETTINGS)
    direct = decisions.batch_of(decisions.parse_decisions({"input": STATE, "questions": [{**TEAM, "name": "team"}]}))
    assert isinstance(parsed, chat_decisions.ChatDecision) and parsed.question is not None
    assert parsed.batch.state == direct.state == STATE and parsed.batch.state_field == "messages[1].content"
    mine, theirs = parsed.batch.questions[0], direct.questions[0]
    assert (mine.question, mine.options, mine.question_type) == (theirs.question, theirs.options, theirs.question_type)
    items = [{"role": "developer", "content": "Route tickets."}, {"role": "user", "content": STATE}]
    given = chat.OPENAI_DIALECT.parse(asked(input=items), SETTINGS)
    assert (
        given.batch.state == decisions.batch_of(decisions.parse_decisions({"input": items, "questions": [TEAM]})).state
    )
    assert given.batch.state_field == "decision.input" and given.batch.id == given.completion_id


def test_without_a_decision_the_body_is_a_chat():
    parsed = chat.OPENAI_DIALECT.parse({"messages": USER, "decision": None, "stream": True}, SETTINGS)
    assert not isinstance(parsed, chat_decisions.ChatDecision) and parsed.stream


# -- the answer (hand-built records) ----------------------------------------------------------------------


def test_the_answer_names_the_likeliest_option_and_lists_every_option_as_a_logprob():
    parsed = chat.OPENAI_DIALECT.parse(body(id="t-1"), SETTINGS)
    answers = [record((0.25, 0.75, 0.0), read_tokens=31, input_tokens=30)]
    timing = {"input_tokens": 12, "prior_tokens": 4, "queue_wait_ms": 0.0, "total_ms": 1.0}
    answer = chat.OPENAI_DIALECT.answer(parsed, answers, timing, {"file": "m.gguf"})
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "tech"} and choice["finish_reason"] == "stop"
    [token] = choice["logprobs"]["content"]
    assert token["token"] == "tech" and token["logprob"] == pytest.approx(math.log(0.75))
    tops = token["top_logprobs"]
    assert [t["token"] for t in tops] == ["tech", "billing", "sales"]  # likeliest first
    assert [t["logprob"] for t in tops] == [math.log(0.75), math.log(0.25), chat_decisions.NO_PROBABILITY]
    assert all(bytes(t["bytes"]).decode() == t["token"] for t in tops)
    found = answer["decision"]
    assert found["id"] == "t-1" and found["option_ids"] == list(OPTIONS)  # request order
    assert found["probabilities"] == [0.25, 0.75, 0.0] and found["choice"] == "tech"
    assert found["readout_name"] == "letters" and found["model"] == {"file": "m.gguf"}
    assert answer["usage"]["prompt_tokens"] == 35 and answer["usage"]["completion_tokens"] == 0
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 35 - 12
    assert answer["model"] == "m.gguf" and answer["id"] == parsed.completion_id
    json.dumps(answer, allow_nan=False)  # no infinite logprob for a probability of 0
    equal = chat.OPENAI_DIALECT.answer(parsed, [record((0.5, 0.5, 0.0))], timing, {"file": "m.gguf"})
    assert equal["choices"][0]["message"]["content"] == "billing"  # the first of equals


@pytest.mark.parametrize(
    ("question", "labels"),
    [
        (TEAM, ["billing", "tech"]),
        ({"type": "predicate", "instructions": "The customer asks for a refund."}, ["true", "false"]),
        (
            {"type": "score", "instructions": "How upset?", "levels": [{"label": "calm"}, {"label": "angry"}]},
            ["0", "1"],
        ),
    ],
    ids=["choice", "predicate", "score"],
)
def test_a_typed_question_is_answered_with_the_v1_decisions_answer(question, labels):
    parsed = chat.OPENAI_DIALECT.parse(
        {"messages": [{"role": "user", "content": STATE}], "decision": question}, SETTINGS
    )
    timing = {"input_tokens": 12, "prior_tokens": 0, "queue_wait_ms": 0.0, "total_ms": 1.0}
    records = [record((0.3, 0.7), read_tokens=20)]
    answer = chat.OPENAI_DIALECT.answer(parsed, records, timing, {"file": "m.gguf"})
    assert answer["decision"] == decisions.answer(parsed.question, records[0])  # /v1/decisions' answers[0]
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": labels[1]}
    tops = choice["logprobs"]["content"][0]["top_logprobs"]
    assert [t["token"] for t in tops] == [labels[1], labels[0]]
    assert [t["logprob"] for t in tops] == [math.log(0.7), math.log(0.3)]

    refused = chat.OPENAI_DIALECT.answer(
        parsed, [record((0.3, 0.7), abstained=True, min_answer_mass=0.5, allowed_token_mass=0.2)], timing, {"file": "m"}
    )
    message = refused["choices"][0]["message"]
    assert refused["decision"]["type"] == "refusal" and message["content"] is None
    assert message["refusal"] == refused["decision"]["refusal"] and refused["choices"][0]["logprobs"] is None


# -- the client's builder and reader ----------------------------------------------------------------------


def test_the_client_builds_the_request_the_adapter_parses():
    kwargs = client_side.create_kwargs(STATE, QUESTION, OPTIONS, id="t-2", readout="cloze", temperature=0.5)
    assert set(kwargs) == {"model", "messages", "extra_body"}
    sent = {"model": kwargs["model"], "messages": kwargs["messages"], **kwargs["extra_body"]}
    parsed = chat.OPENAI_DIALECT.parse(sent, SETTINGS)
    question = parsed.batch.questions[0]
    assert parsed.batch.state == STATE and parsed.batch.id == "t-2"
    assert [o.id for o in question.options] == list(OPTIONS) and question.readout == "cloze"
    assert question.temperature == 0.5 and question.order is None  # unset knobs stay the server's
    for bad in ({"options": ["only"]}, {"question": " "}, {"readout": "cloze", "order": "prior"}):
        args = {"state": STATE, "question": QUESTION, "options": OPTIONS, **bad}
        with pytest.raises(ValueError):
            client_side.create_kwargs(**args)


def test_the_client_reads_and_checks_the_decision():
    kwargs = client_side.create_kwargs(STATE, QUESTION, OPTIONS)
    sent = {"model": kwargs["model"], "messages": kwargs["messages"], **kwargs["extra_body"]}
    parsed = chat.OPENAI_DIALECT.parse(sent, SETTINGS)
    timing = {"input_tokens": 12, "prior_tokens": 0, "queue_wait_ms": 0.0, "total_ms": 1.0}
    answer = chat.OPENAI_DIALECT.answer(parsed, [record((0.2, 0.3, 0.5))], timing, {"file": "m.gguf"})
    got = client_side.read(answer, kwargs)
    assert got.choice == "sales" and got.probabilities == {"billing": 0.2, "tech": 0.3, "sales": 0.5}
    assert list(got.probabilities) == list(OPTIONS) and got.readout == "letters" and not got.abstained
    reordered = {**answer, "decision": {**answer["decision"], "option_ids": ["tech", "billing", "sales"]}}
    with pytest.raises(client_side.ChatDecisionFormatError, match="order"):
        client_side.read(reordered, kwargs)
    with pytest.raises(client_side.ChatDecisionFormatError, match="plain chat"):
        client_side.read({k: v for k, v in answer.items() if k != "decision"})


# -- the openai library against a live adapter -------------------------------------------------------------


def post(url: str, payload: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as reply:
        return json.load(reply)


def test_the_openai_library_gets_the_numbers_of_the_projects_own_decision(adapter):
    """One live adapter (the session's shared one): both readouts equal POST /invocations within 1e-6, the
    state from the messages, plain and streamed chat untouched, bad fields named."""
    client = openai.OpenAI(base_url=adapter.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    for readout in ("letters", "cloze"):
        kwargs = client_side.create_kwargs(STATE, QUESTION, OPTIONS, id=f"t-{readout}", readout=readout)
        completion = client.chat.completions.create(**kwargs)
        own = post(
            adapter.url + "/invocations",
            {"id": f"t-{readout}", "state": STATE, "question": QUESTION, "options": LISTED, "readout": readout},
        )["result"]
        found = completion.model_extra["decision"]
        assert found["option_ids"] == own["option_ids"] == list(OPTIONS)
        assert found["probabilities"] == pytest.approx(own["probabilities"], abs=1e-6)
        assert found["readout_name"] == readout and found["prompt_sha256"] == own["prompt_sha256"]
        p = dict(zip(found["option_ids"], found["probabilities"]))
        choice = completion.choices[0]
        assert choice.finish_reason == "stop" and choice.message.content == max(p, key=p.get)
        tops = choice.logprobs.content[0].top_logprobs
        assert sorted(t.token for t in tops) == sorted(OPTIONS)
        assert {t.token: math.exp(t.logprob) for t in tops} == pytest.approx(p, abs=1e-9)
        assert completion.usage.completion_tokens == 0 and completion.usage.prompt_tokens >= own["input_tokens"]
        read = client_side.read(completion, kwargs)
        assert read.probabilities == p and read.readout == readout and read.id == f"t-{readout}"

    # on /invocations (chat's body there), the state taken from the last user message: the same numbers
    messages = [{"role": "system", "content": "You route tickets."}, {"role": "user", "content": STATE}]
    decision = {"question": QUESTION, "options": LISTED, "readout": "cloze"}
    invoked = post(adapter.url + "/invocations", {"messages": messages, "decision": decision})
    assert invoked["choices"][0]["message"]["content"] == invoked["decision"]["choice"]
    assert invoked["decision"]["probabilities"] == pytest.approx(list(p.values()), abs=1e-6)

    # one OpenAI Decisions question through chat: the answer /v1/decisions gives for it
    for question in (
        openai_decisions.choice(QUESTION, OPTIONS, name="team"),
        openai_decisions.predicate("The customer asks for a refund."),
    ):
        kwargs = client_side.question_kwargs(STATE, question)
        via_chat = client_side.read_question(client.chat.completions.create(**kwargs), kwargs)
        sent = openai_decisions.request(STATE, [question])
        direct = openai_decisions.parse_response(post(adapter.url + "/v1/decisions", sent), sent)
        assert list(via_chat.probabilities) == list(direct.answers[0].probabilities)
        assert list(via_chat.probabilities.values()) == pytest.approx(
            list(direct.answers[0].probabilities.values()), abs=1e-6
        )
        assert via_chat.readout == direct.answers[0].readout and via_chat.type == question["type"]

    # plain chat, whole and streamed, still chats
    plain = client.chat.completions.create(model="x", messages=USER, max_completion_tokens=4, temperature=0)
    assert isinstance(plain.choices[0].message.content, str) and "decision" not in (plain.model_extra or {})
    streamed = list(client.chat.completions.create(model="x", messages=USER, max_tokens=4, temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == plain.choices[0].message.content

    # bad input, named in OpenAI's error shape
    for extra, field in (
        ({"stream": True}, "stream"),
        ({"extra_body": {"decision": {**decision, "options": [LISTED[0], {"text": "B"}]}}}, "decision.options[1].id"),
    ):
        args = {"model": "x", "messages": messages, "extra_body": {"decision": decision}, **extra}
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(**args)
        assert caught.value.status_code == 400 and caught.value.body["param"] == field
