import pytest

from decision_adapter.apis.chat import parse_chat
from decision_adapter.apis.invocations import request_kind
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import InvalidType, InvalidValue
from decision_adapter.prompt import render_state, user_message

OPTIONS = [{"id": "a", "text": "Alpha"}, {"id": "b", "text": "Beta"}]


def decision(**overrides):
    body = {"id": "r1", "state": "some evidence", "question": "Which?", "options": OPTIONS}
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


def test_single_decision_is_a_batch_of_one_keeping_option_order():
    batch = parse_decision(decision(options=[{"id": "z", "text": "Z"}, "y", {"id": "x"}]))
    assert batch.single and batch.id == "r1"
    (q,) = batch.questions
    assert [o.id for o in q.options] == ["z", "y", "x"]
    assert [o.text for o in q.options] == ["Z", "y", "x"]  # a bare string or a missing text is the id


def test_shared_state_batch():
    batch = parse_decision(
        {
            "id": "r",
            "state": {"ticket": 1},
            "questions": [
                {"id": "q1", "question": "A?", "options": OPTIONS},
                {"id": "q2", "question": "B?", "options": OPTIONS, "temperature": 0.5},
            ],
        }
    )
    assert not batch.single
    assert [q.id for q in batch.questions] == ["q1", "q2"]
    assert batch.questions[1].temperature == 0.5


@pytest.mark.parametrize(
    "body, error, field",
    [
        (decision(id=...), InvalidValue, "id"),
        (decision(id=7), InvalidType, "id"),
        (decision(state=""), InvalidValue, "state"),
        (decision(state="   "), InvalidValue, "state"),
        (decision(state={}), InvalidValue, "state"),
        (decision(state=3), InvalidType, "state"),
        (decision(question=""), InvalidValue, "question"),
        (decision(question=["x"]), InvalidType, "question"),
        (decision(options="a,b"), InvalidType, "options"),
        (decision(options=[OPTIONS[0]]), InvalidValue, "options"),
        (decision(options=[f"o{i}" for i in range(17)]), InvalidValue, "options"),
        (decision(options=[{"id": "a"}, {"id": "a"}]), InvalidValue, "options[1].id"),
        (decision(options=[{"id": "a"}, 5]), InvalidType, "options[1]"),
        (decision(options=[{"id": "a"}, {"text": "no id"}]), InvalidValue, "options[1].id"),
        (decision(temperature=0), InvalidValue, "temperature"),
        (decision(temperature="hot"), InvalidType, "temperature"),
        ({"id": "r", "state": "s", "questions": []}, InvalidValue, "questions"),
        (
            {"id": "r", "state": "s", "questions": [{"id": "q", "question": "?", "options": OPTIONS}] * 2},
            InvalidValue,
            "questions[1].id",
        ),
        ({"id": "r", "state": "s", "questions": ["q"]}, InvalidType, "questions[0]"),
        ({"id": "r", "state": "s", "question": "?", "options": OPTIONS, "questions": []}, InvalidValue, "questions"),
    ],
)
def test_bad_decisions_name_the_field(body, error, field):
    with pytest.raises(error) as raised:
        parse_decision(body)
    assert raised.value.field == field
    assert raised.value.status == (400 if error is InvalidType else 422)


def test_request_kind_dispatches_on_shape():
    assert request_kind({"messages": []}) == "chat"
    assert request_kind(decision()) == "decision"
    assert request_kind({"id": "x", "state": "s", "questions": []}) == "decision"
    assert request_kind({"input": "s", "questions": [{"type": "predicate", "instructions": "q"}]}) == "openai_decisions"
    with pytest.raises(InvalidValue):
        request_kind({"state": "only"})
    with pytest.raises(InvalidType):
        request_kind([1, 2])


def test_chat_refuses_streaming_and_bad_roles():
    with pytest.raises(InvalidType, match="stream"):
        parse_chat({"messages": [{"role": "user", "content": "hi"}], "stream": True}, 32)
    with pytest.raises(InvalidValue) as raised:
        parse_chat({"messages": [{"role": "robot", "content": "hi"}]}, 32)
    assert raised.value.field == "messages[0].role"
    chat = parse_chat({"messages": [{"role": "user", "content": "hi"}]}, 32)
    assert chat.max_tokens == 32 and chat.temperature == 0.0


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"stream": {}}, "stream"),
        ({"stream": 0}, "stream"),
        ({"stream": "false"}, "stream"),
        ({"stop": 0}, "stop"),
        ({"stop": False}, "stop"),
        ({"stop": {}}, "stop"),
        ({"max_completion_tokens": "8"}, "max_completion_tokens"),
        ({"max_tokens": None, "max_completion_tokens": 1.5}, "max_completion_tokens"),
        ({"max_tokens": 8, "max_completion_tokens": True}, "max_completion_tokens"),
    ],
)
def test_chat_refuses_wrong_types_even_when_falsy_or_shadowed(extra, field):
    with pytest.raises(InvalidType) as raised:
        parse_chat({"messages": [{"role": "user", "content": "hi"}], **extra}, 32)
    assert raised.value.field == field


def test_chat_token_limit_names():
    hi = [{"role": "user", "content": "hi"}]
    assert parse_chat({"messages": hi, "max_completion_tokens": 5}, 32).max_tokens == 5
    assert parse_chat({"messages": hi, "max_tokens": None, "max_completion_tokens": 5}, 32).max_tokens == 5
    assert parse_chat({"messages": hi, "max_tokens": 7, "max_completion_tokens": 5}, 32).max_tokens == 7
    with pytest.raises(InvalidValue) as raised:
        parse_chat({"messages": hi, "max_tokens": 7, "max_completion_tokens": 0}, 32)
    assert raised.value.field == "max_completion_tokens"
    chat = parse_chat({"messages": hi, "stream": False, "stop": ""}, 32)
    assert chat.stop == () and chat.max_tokens == 32


def test_state_comes_first_so_questions_share_a_prefix():
    from decision_adapter.questions import Option, Question

    q1 = Question("1", "First?", (Option("a", "A"), Option("b", "B")))
    q2 = Question("2", "Second?", (Option("c", "C"), Option("d", "D")))
    text1, end1 = user_message({"b": 1, "a": "x"}, q1)
    text2, end2 = user_message({"a": "x", "b": 1}, q2)
    assert end1 == end2 and text1[:end1] == text2[:end2]
    assert render_state({"b": 1, "a": "x"}) in text1  # keys sorted: deterministic
    assert '"A": "A"' in text1 and '"a"' not in text1.split('"question"')[1]  # option ids stay out


# -- unknown fields are refused, naming them (a misspelt field used to be ignored silently) ----------------


@pytest.mark.parametrize(
    "body, field",
    [
        (decision(temperture=0.5), "temperture"),
        (decision(options=[{"id": "a", "txt": "Alpha"}, "b"]), "options[0].txt"),
        (
            {"id": "r", "state": "s", "questions": [{"id": "q", "question": "?", "options": OPTIONS, "colour": 1}]},
            "questions[0].colour",
        ),
        (
            {"id": "r", "state": "s", "questions": [{"id": "q", "question": "?", "options": OPTIONS}], "mdoel": "x"},
            "mdoel",
        ),
    ],
)
def test_unknown_fields_are_refused_naming_them(body, field):
    with pytest.raises(InvalidValue) as raised:
        parse_decision(body)
    assert raised.value.field == field and raised.value.status == 422
    assert field.rpartition(".")[2] in raised.value.message and "spelling" in raised.value.message


def test_a_misspelt_required_field_is_named_rather_than_reported_missing():
    body = decision(question=...)
    body["qestion"] = "Which?"
    with pytest.raises(InvalidValue) as raised:
        parse_decision(body)
    assert raised.value.field == "qestion"


def test_chat_refuses_unknown_fields_but_takes_openais_and_llama_servers_own():
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(InvalidValue) as raised:
        parse_chat({"messages": hi, "temprature": 0.2}, 32)
    assert raised.value.field == "temprature"
    chat = parse_chat(
        {
            "messages": [{"role": "user", "content": "hi", "name": "ann"}],
            "model": "gpt-x",
            "n": 1,
            "user": "u",
            "logprobs": False,
            "chat_template_kwargs": {"enable_thinking": False},
        },
        32,
    )
    assert chat.messages == ({"role": "user", "content": "hi"},)


def test_the_samples_decisions_refuse_unknown_fields_too():
    from decision_adapter.apis.sample import parse_sample

    one = {"id": "a", "state": "s", "question": "q", "options": [{"id": "x", "description": "X"}, "y"]}
    with pytest.raises(InvalidValue) as raised:
        parse_sample({"decision": {**one, "temperture": 1}})
    assert raised.value.field == "decision.temperture"
    with pytest.raises(InvalidValue) as raised:
        parse_sample({"decisions": [one, {**one, "id": "b", "options": [{"id": "x", "descripton": "X"}, "y"]}]})
    assert raised.value.field == "decisions[1].options[0].descripton"
    with pytest.raises(InvalidValue, match="unsupported request fields"):
        parse_sample({"decision": one, "extra": 1})


def test_the_parsers_keep_the_first_problem_with_its_status():
    with pytest.raises(InvalidType) as raised:  # a type error is a 400 even beside value errors
        parse_decision(decision(id=3, question=""))
    assert raised.value.field == "id" and raised.value.status == 400
