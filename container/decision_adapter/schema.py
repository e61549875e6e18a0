"""Request shapes the adapter accepts, validated before anything reaches the model.

Three bodies arrive on ``POST /invocations`` and are told apart by shape:

* a decision:  ``{"id", "state", "question", "options": [...], "temperature"?}``
* a shared-state batch: ``{"id", "state", "questions": [{"id", "question", "options",
  "temperature"?}, ...]}``; the state is evaluated once for all questions
* a chat request: ``{"messages": [...], ...}`` in the OpenAI chat-completions schema
* a Jev System One request: ``{"state", "questions": {qid: {...}}, "model"?}`` (``questions``
  is an object keyed by question id, where the shared-state batch has an array); see jev.py
* the published SemIf sample's bodies: ``{"decision": {"id", "state", "question", "options"}}``
  and ``{"decisions": [...]}`` (one exact state shared by every decision); see ``parse_sample``

Options are ``{"id": "billing", "text": "Billing and refunds"}`` (``description``, the
sample's name, works as well as ``text``); a bare string is shorthand for an option
whose id and text are that string. Wrong JSON types are 400s, values that are well
typed but unusable are 422s; both name the field. (Errors about the sample's bodies
follow the sample: 400 and ``{"error": "..."}``, shaped in app.py.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InvalidType, InvalidValue

MIN_OPTIONS = 2
MAX_OPTIONS = 16
MAX_QUESTIONS = 64  # the default of DECISION_ADAPTER_MAX_SHARED_DECISIONS, as the sample's
SAMPLE_FIELDS = ("decision", "decisions")
MAX_ID_CHARS = 256
MIN_TEMPERATURE = 1e-3  # exclusive lower bound for a decision's temperature
CHAT_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Option:
    id: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    options: tuple[Option, ...]
    temperature: float = 1.0


@dataclass(frozen=True)
class DecisionBatch:
    """One state and one or more questions about it (a single decision is a batch of one)."""

    id: str
    state: object
    questions: tuple[Question, ...]
    single: bool  # True when the body was a single decision


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[dict, ...]
    max_tokens: int | None
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]


def _type_name(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null", int: "integer", float: "number"}.get(type(value), type(value).__name__)


def _require(body: dict, key: str, field: str):
    if key not in body:
        raise InvalidValue(f"{field} is required", field)
    return body[key]


def _string(value, field: str, *, max_chars: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidType(f"{field} must be a string, got {_type_name(value)}", field)
    if not value.strip():
        raise InvalidValue(f"{field} must not be empty", field)
    if max_chars is not None and len(value) > max_chars:
        raise InvalidValue(f"{field} is longer than {max_chars} characters; shorten it", field)
    return value


def _number(value, field: str, *, minimum_exclusive: float, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{field} must be a number, got {_type_name(value)}", field)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        number = math.inf
    if not math.isfinite(number) or not (minimum_exclusive < number <= maximum):
        raise InvalidValue(f"{field} must be a finite number above {minimum_exclusive} and at most {maximum}", field)
    return number


def _state(value, field: str = "state"):
    if isinstance(value, str):
        if not value.strip():
            raise InvalidValue("state must not be empty: pass the evidence the question is about", field)
        return value
    if isinstance(value, (dict, list)):
        if not value:
            raise InvalidValue("state must not be empty: pass the evidence the question is about", field)
        return value
    raise InvalidType(f"state must be a string, an object or an array, got {_type_name(value)}", field)


def _options(value, field: str) -> tuple[Option, ...]:
    if not isinstance(value, list):
        raise InvalidType(f"{field} must be an array of options, got {_type_name(value)}", field)
    if not MIN_OPTIONS <= len(value) <= MAX_OPTIONS:
        raise InvalidValue(
            f"{field} has {len(value)} options; a decision takes {MIN_OPTIONS} to {MAX_OPTIONS} "
            "(split larger sets into two decisions, e.g. a category first)",
            field,
        )
    options, seen = [], set()
    for i, item in enumerate(value):
        item_field = f"{field}[{i}]"
        if isinstance(item, str):
            option = Option(_string(item, item_field, max_chars=MAX_ID_CHARS), item)
        elif isinstance(item, dict):
            oid = _string(_require(item, "id", f"{item_field}.id"), f"{item_field}.id", max_chars=MAX_ID_CHARS)
            option = Option(oid, _option_text(item, oid, item_field))
        else:
            raise InvalidType(f"{item_field} must be an object {{id, text}} or a string, got {_type_name(item)}",
                              item_field)
        if option.id in seen:
            raise InvalidValue(f"{item_field}.id {option.id!r} is used twice; option ids must be unique",
                               f"{item_field}.id")
        seen.add(option.id)
        options.append(option)
    return tuple(options)


def _option_text(item: dict, oid: str, field: str) -> str:
    """``text`` (this adapter's name) or ``description`` (the sample's); the id when neither is given."""
    text, description = item.get("text"), item.get("description")
    if text is not None and description is not None and text != description:
        raise InvalidValue(f"{field} has both text and description, and they differ; send one of them", field)
    if text is not None:
        return _string(text, f"{field}.text")
    if description is not None:
        if isinstance(description, str) and not description.strip():
            return oid  # the sample accepts an empty description; the id is then all the model sees
        return _string(description, f"{field}.description")
    return oid


def _question(body: dict, field_prefix: str, default_id: str | None) -> Question:
    qid = body.get("id", default_id)
    qid = _string(qid, f"{field_prefix}id", max_chars=MAX_ID_CHARS) if qid is not None else None
    if qid is None:
        raise InvalidValue(f"{field_prefix}id is required", f"{field_prefix}id")
    question = _string(_require(body, "question", f"{field_prefix}question"), f"{field_prefix}question")
    options = _options(_require(body, "options", f"{field_prefix}options"), f"{field_prefix}options")
    temperature = 1.0
    if body.get("temperature") is not None:
        # Below 1e-3 the scaled logits overflow to NaN; such a temperature means "argmax" anyway.
        temperature = _number(body["temperature"], f"{field_prefix}temperature", minimum_exclusive=MIN_TEMPERATURE,
                              maximum=100.0)
    return Question(qid, question, options, temperature)


def parse_sample(body: dict, max_decisions: int = MAX_QUESTIONS) -> DecisionBatch:
    """The published sample's ``{"decision": {...}}`` or ``{"decisions": [...]}`` as a batch.

    As in the sample: exactly one of the two, no other top-level field, and in ``decisions``
    one exact state for all (it is evaluated once) and unique ids. States that differ are
    refused at the first differing index, never scored one by one behind the caller's back.
    """
    extra = sorted(set(body) - set(SAMPLE_FIELDS))
    if extra:
        raise InvalidValue(f"unsupported request fields {extra}; a request holds exactly one of decision or "
                           "decisions", extra[0])
    if len(set(body) & set(SAMPLE_FIELDS)) != 1:
        raise InvalidValue("send exactly one of decision (one object) or decisions (a list)", None)
    if "decision" in body:
        item = body["decision"]
        if not isinstance(item, dict):
            raise InvalidType(f"decision must be an object, got {_type_name(item)}", "decision")
        question = _question(item, "decision.", None)
        state = _state(_require(item, "state", "decision.state"), "decision.state")
        return DecisionBatch(question.id, state, (question,), single=True)
    items = body["decisions"]
    if not isinstance(items, list) or not items:
        raise InvalidType("decisions must be a non-empty list of decision objects", "decisions")
    if len(items) > max_decisions:
        raise InvalidValue(f"decisions has {len(items)} items; send at most {max_decisions} per request "
                           "(DECISION_ADAPTER_MAX_SHARED_DECISIONS)", "decisions")
    questions, seen, state = [], set(), None
    for i, item in enumerate(items):
        field = f"decisions[{i}]"
        if not isinstance(item, dict):
            raise InvalidType(f"{field} must be a decision object, got {_type_name(item)}", field)
        question = _question(item, f"{field}.", None)
        this_state = _state(_require(item, "state", f"{field}.state"), f"{field}.state")
        if i == 0:
            state = this_state
        elif this_state != state:
            raise InvalidValue(f"{field}.state differs from decisions[0].state; a shared request scores one "
                               "exact state (send decisions about other states as separate requests)",
                               f"{field}.state")
        if question.id in seen:
            raise InvalidValue(f"{field}.id {question.id!r} is used twice; decision ids must be unique",
                               f"{field}.id")
        seen.add(question.id)
        questions.append(question)
    return DecisionBatch("decisions", state, tuple(questions), single=False)


def parse_decision(body: dict, max_questions: int = MAX_QUESTIONS) -> DecisionBatch:
    """A single decision or a shared-state batch."""
    rid = _string(_require(body, "id", "id"), "id", max_chars=MAX_ID_CHARS)
    state = _state(_require(body, "state", "state"))
    if "questions" in body:
        if "question" in body or "options" in body:
            raise InvalidValue("send either question/options (one decision) or questions (a batch), not both",
                               "questions")
        items = body["questions"]
        if not isinstance(items, list):
            raise InvalidType(f"questions must be an array, got {_type_name(items)}", "questions")
        if not 1 <= len(items) <= max_questions:
            raise InvalidValue(f"questions has {len(items)} entries; send 1 to {max_questions}", "questions")
        questions, seen = [], set()
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidType(f"questions[{i}] must be an object, got {_type_name(item)}", f"questions[{i}]")
            q = _question(item, f"questions[{i}].", None)
            if q.id in seen:
                raise InvalidValue(f"questions[{i}].id {q.id!r} is used twice; question ids must be unique",
                                   f"questions[{i}].id")
            seen.add(q.id)
            questions.append(q)
        return DecisionBatch(rid, state, tuple(questions), single=False)
    return DecisionBatch(rid, state, (_question(body, "", rid),), single=True)


MAX_STOP = 4  # as OpenAI's chat completions
MAX_STOP_CHARS = 64
MAX_MESSAGES = 256


def parse_chat(body: dict, default_max_tokens: int, max_tokens_cap: int | None = None) -> ChatRequest:
    """A chat request; ``max_tokens`` above ``max_tokens_cap`` (the default's value if not given) is refused."""
    max_tokens_cap = max_tokens_cap or default_max_tokens
    messages = body["messages"]
    if not isinstance(messages, list):
        raise InvalidType(f"messages must be an array, got {_type_name(messages)}", "messages")
    if not messages:
        raise InvalidValue("messages must hold at least one message", "messages")
    if len(messages) > MAX_MESSAGES:
        raise InvalidValue(f"messages holds {len(messages)} messages; send at most {MAX_MESSAGES}", "messages")
    clean = []
    for i, message in enumerate(messages):
        field = f"messages[{i}]"
        if not isinstance(message, dict):
            raise InvalidType(f"{field} must be an object, got {_type_name(message)}", field)
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise InvalidValue(f"{field}.role must be one of {', '.join(CHAT_ROLES)}", f"{field}.role")
        content = message.get("content")
        if not isinstance(content, str):
            raise InvalidType(f"{field}.content must be a string, got {_type_name(content)}", f"{field}.content")
        clean.append({"role": role, "content": content})
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidType(f"stream must be a boolean, got {_type_name(stream)}", "stream")
    if stream:
        raise InvalidType("stream: true is not supported by the decision adapter; send stream: false or omit it",
                          "stream")
    max_tokens = None
    for key in ("max_tokens", "max_completion_tokens"):  # both checked; max_tokens wins when both are set
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidType(f"{key} must be an integer, got {_type_name(value)}", key)
        if not 1 <= value <= max_tokens_cap:
            raise InvalidValue(f"{key} must be between 1 and {max_tokens_cap} (DECISION_ADAPTER_CHAT_MAX_TOKENS); "
                               "ask for fewer tokens", key)
        max_tokens = value if max_tokens is None else max_tokens
    temperature = 0.0
    if body.get("temperature") is not None:
        value = body["temperature"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidType(f"temperature must be a number, got {_type_name(value)}", "temperature")
        try:
            temperature = float(value)
        except OverflowError:  # an integer beyond float range
            temperature = math.inf
        if not math.isfinite(temperature) or not 0 <= temperature <= 2:
            raise InvalidValue("temperature must be between 0 and 2", "temperature")
    top_p = 1.0
    if body.get("top_p") is not None:
        top_p = _number(body["top_p"], "top_p", minimum_exclusive=0.0, maximum=1.0)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidType(f"seed must be an integer, got {_type_name(seed)}", "seed")
    stop = body.get("stop")
    if stop is None:
        stop = ()
    elif isinstance(stop, str):
        stop = (stop,) if stop else ()
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise InvalidType("stop must be a string or an array of strings", "stop")
    if len(stop) > MAX_STOP or any(len(s) > MAX_STOP_CHARS for s in stop):
        raise InvalidValue(f"stop takes at most {MAX_STOP} strings of at most {MAX_STOP_CHARS} characters", "stop")
    return ChatRequest(tuple(clean), max_tokens or default_max_tokens, temperature, top_p, seed, tuple(stop))


def request_kind(body) -> str:
    """'chat', 'systemone', 'sample', 'decision' or raise: dispatch on the body's shape."""
    if not isinstance(body, dict):
        raise InvalidType(f"the request body must be a JSON object, got {_type_name(body)}", None)
    if "messages" in body:
        return "chat"
    if "decision" in body or "decisions" in body:
        return "sample"
    if isinstance(body.get("questions"), dict):
        return "systemone"
    if "question" in body or "questions" in body:
        return "decision"
    raise InvalidValue(
        "the body must carry 'question' and 'options' (a decision), 'questions' (a shared-state batch: an "
        "array; a Jev System One request: an object keyed by question id), 'decision' or 'decisions' (the "
        "published sample's format) or 'messages' (a chat request)",
        None,
    )
