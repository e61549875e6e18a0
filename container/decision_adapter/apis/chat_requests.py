"""OpenAI chat-completion requests (apis/chat.py serves them): the body's model, what is served, ignored or
refused, and parsing a body into the core's ``ChatRequest`` with errors naming the field.

A body may carry ``decision`` (apis/chat_decisions.py): one decision of this project's schema, or one question
of the OpenAI Decisions API (told apart by its ``type``), asked through chat; both are described here with the
rest of the body.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, create_model, field_validator
from pydantic_core import ErrorDetails

from decision_contract import names

from ..caller_errors import AdapterError, InvalidType, InvalidValue
from ..questions import CHAT_ROLES, ChatRequest
from . import own
from .common import (
    TAG_OBJECT,
    TAG_QUESTION,
    ErrorWording,
    Id,
    NonBlank,
    Strict,
    adapter_error,
    type_error,
    value_error,
)
from .decisions_requests import DecisionsChoice, DecisionsPredicate, DecisionsScore, Input

MAX_STOP = 4  # as OpenAI's chat completions
MAX_STOP_CHARS = 64
MAX_MESSAGES = 256

MAX_TOP_LOGPROBS = 20  # as OpenAI's

# OpenAI chat-completion parameters that change nothing here (sent by OpenAI clients as a matter of course).
IGNORED_OPENAI = (
    "user",
    "parallel_tool_calls",
    "metadata",
    "store",
    "service_tier",
    "reasoning_effort",
    "verbosity",
    "prompt_cache_key",
    "safety_identifier",
)


def _absent(value: object) -> bool:
    return value is None or value == [] or value == {}


# OpenAI parameters asking for what this adapter does not do, and which of their values ask for nothing.
UNSUPPORTED: dict[str, Callable[[Any], bool]] = {
    "tools": _absent,
    "functions": _absent,
    "tool_choice": lambda v: v is None or v == "none",
    "function_call": lambda v: v is None or v == "none",
    "n": lambda v: v is None or (type(v) is int and v == 1),
    "response_format": lambda v: v is None or v == {"type": "text"},
    "logit_bias": _absent,
    "audio": _absent,
    "prediction": _absent,
    "web_search_options": _absent,
    "modalities": lambda v: v is None or v == ["text"],
}


def unsupported(name: str) -> AdapterError:
    what = {
        "n": "n above 1 (one choice per request)",
        "response_format": 'response_format other than {"type": "text"} (JSON output is not enforced here)',
    }.get(name, name)
    return AdapterError(
        f"{what} is not supported by the decision adapter; remove {name} from the request",
        name,
        status=400,
        code="unsupported_parameter",
    )


# llama-server's own extensions that OpenAI-style clients send to it (this project's client sends
# chat_template_kwargs to turn a reasoning model's thinking off; the adapter never renders thinking).
IGNORED_LLAMA_SERVER = ("chat_template_kwargs", "cache_prompt", "top_k", "min_p", "repeat_penalty")


class ChatMessage(BaseModel):
    # Other message members (name, tool_call_id, ...) are OpenAI's and are ignored.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value] if value else []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise type_error("must be a string or an array of strings")
    if len(value) > MAX_STOP or any(len(s) > MAX_STOP_CHARS for s in value):
        raise value_error(f"takes at most {MAX_STOP} strings of at most {MAX_STOP_CHARS} characters")
    return tuple(value)


class StreamOptions(Strict):
    include_usage: bool | None = None
    include_obfuscation: bool | None = Field(None, description="Accepted; chunks are never padded.")


class ChatDecisionFields(Strict):
    """A decision asked through chat completions: the fields of this project's single decision (POST
    /invocations), with ``id`` and ``state`` optional."""

    model_config = ConfigDict(title="Chat decision")
    id: Id | None = Field(None, description="Echoed as decision.id; default: the completion's id.")
    state: own.State | None = Field(
        None, description="The evidence; default: the content of the last user message in messages."
    )
    question: NonBlank
    options: own.Options
    temperature: own.Temperature | None = None
    order: own.OrderMode | None = None
    min_answer_mass: own.MinAnswerMass | None = None
    question_type: own.QuestionType | None = None
    readout: own.ReadoutName | None = None
    normalize: own.Normalize | None = None


_INPUT = Field(
    None,
    description="What the question is about, as /v1/decisions takes its input; default: the content of the last "
    "user message in messages.",
)


class ChatPredicate(DecisionsPredicate):
    model_config = ConfigDict(title="Chat predicate question")
    input: Input | None = _INPUT


class ChatChoice(DecisionsChoice):
    model_config = ConfigDict(title="Chat choice question")
    input: Input | None = _INPUT


class ChatScore(DecisionsScore):
    model_config = ConfigDict(title="Chat score question")
    input: Input | None = _INPUT


def _decision_kind(value: object) -> str:
    """A decision with a ``type`` is a Decisions-API question; anything else is read as this project's."""
    return TAG_QUESTION if isinstance(value, dict) and "type" in value else TAG_OBJECT


# The question branch is the schema the OpenAPI document shows; at run time chat_decisions.parse takes a decision with
# a ``type`` out of the body and parses it by the Decisions API's own rules (its models are these classes' bases), so
# that its errors are worded as /v1/decisions words them.
ChatDecisionBody = Annotated[
    Union[
        Annotated[ChatDecisionFields, Tag(TAG_OBJECT)],
        Annotated[
            Annotated[Union[ChatPredicate, ChatChoice, ChatScore], Field(discriminator="type")], Tag(TAG_QUESTION)
        ],
    ],
    Discriminator(_decision_kind),
]


class _ChatFields(Strict):
    model_config = ConfigDict(title="Chat completion")
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    stream: bool | None = Field(
        None, description="true: server-sent events on /v1/chat/completions (refused on /invocations)."
    )
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    model: str | None = Field(
        None,
        description="Any name: the served model answers, and the answer's model "
        "names it (DECISION_ADAPTER_STRICT_MODEL_NAMES=on: 404 for names "
        "other than the served model's).",
    )
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = Field(
        None, description=f"Up to {MAX_STOP} strings of at most {MAX_STOP_CHARS} characters."
    )
    decision: ChatDecisionBody | None = Field(
        None,
        description=f"Ask a decision instead of generating (the openai library: extra_body={{'{names.CHAT_DECISION}': "
        "{...}}): this project's decision (the answer's content is the chosen option's id and its decision field "
        "this project's result), or one OpenAI Decisions question with a type (the content is the chosen value "
        "and the decision field the answer /v1/decisions gives); the logprobs hold one entry per option.",
    )

    @field_validator("stop", mode="plain")
    @classmethod
    def _check_stop(cls, value: object) -> tuple[str, ...]:
        return _stop(value)


_PASSED_OVER: dict[str, Any] = {  # accepted for OpenAI's and llama-server's clients, and not used
    **{name: (Any, Field(None, description="OpenAI's parameter; accepted and ignored.")) for name in IGNORED_OPENAI},
    **{
        name: (
            Any,
            Field(
                None, description="OpenAI's parameter; refused (400 unsupported_parameter) unless it asks for nothing."
            ),
        )
        for name in UNSUPPORTED
    },
    **{
        name: (Any, Field(None, description="llama-server's parameter; accepted and ignored."))
        for name in IGNORED_LLAMA_SERVER
    },
}
ChatCompletionRequest: type[_ChatFields] = create_model("ChatCompletionRequest", __base__=_ChatFields, **_PASSED_OVER)


def _count(field: str | None, error: ErrorDetails) -> AdapterError | None:
    if field != "messages":
        return own.WORDING[error["type"]](field, error)  # a decision's options, worded as this project's schema
    n = error.get("ctx", {}).get("actual_length")
    if not n:
        return InvalidValue("messages must hold at least one message", "messages")
    return InvalidValue(f"messages holds {n} messages; send at most {MAX_MESSAGES}", "messages")


def _role(field: str | None, error: ErrorDetails) -> AdapterError:
    return InvalidValue(f"{field} must be one of {', '.join(CHAT_ROLES)}", field)


def _range(field: str | None, error: ErrorDetails) -> AdapterError | None:
    if field == "temperature":
        return InvalidValue("temperature must be between 0 and 2", field)
    if field == "top_p":
        return InvalidValue("top_p must be a finite number above 0.0 and at most 1.0", field)
    if field == "top_logprobs":
        return InvalidValue(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}", field)
    if field in ("frequency_penalty", "presence_penalty"):
        return InvalidValue(f"{field} must be between -2 and 2", field)
    return None


WORDING: dict[str, ErrorWording] = {
    "too_short": _count,
    "too_long": _count,
    "literal_error": _role,
    "greater_than": _range,
    "greater_than_equal": _range,
    "less_than_equal": _range,
}


def validate_chat(body: Any) -> _ChatFields:
    """The body as ``ChatCompletionRequest``: parameters asking for what the adapter does not do are refused
    first, naming them."""
    if isinstance(body, dict):
        for name, asks_nothing in UNSUPPORTED.items():
            if not asks_nothing(body.get(name)):
                raise unsupported(name)
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise adapter_error(exc, messages=WORDING) from None


def parse_chat(
    body: Any, default_max_tokens: int, max_tokens_cap: int | None = None, *, streaming: bool = False
) -> ChatRequest:
    """A chat request; ``max_tokens`` above ``max_tokens_cap`` (the default's value if not given) is refused;
    ``stream: true`` only where ``streaming``."""
    return chat_request(validate_chat(body), default_max_tokens, max_tokens_cap, streaming=streaming)


def chat_request(
    chat: Any, default_max_tokens: int, max_tokens_cap: int | None = None, *, streaming: bool = False
) -> ChatRequest:
    """The core's ``ChatRequest`` from a validated body, its values checked."""
    max_tokens_cap = max_tokens_cap or default_max_tokens
    if chat.stream and not streaming:
        raise InvalidType(
            "stream: true is not supported by the decision adapter; send stream: false or omit it", "stream"
        )
    max_tokens = None
    for key in ("max_tokens", "max_completion_tokens"):  # both checked; max_tokens wins when both are set
        value = getattr(chat, key)
        if value is None:
            continue
        if not 1 <= value <= max_tokens_cap:
            raise InvalidValue(
                f"{key} must be between 1 and {max_tokens_cap} (DECISION_ADAPTER_CHAT_MAX_TOKENS); "
                "ask for fewer tokens",
                key,
            )
        max_tokens = value if max_tokens is None else max_tokens
    for key in ("temperature", "top_p"):
        value = getattr(chat, key)
        if value is not None and not math.isfinite(value):
            raise InvalidValue(f"{key} must be a finite number", key)
    messages = tuple({"role": m.role, "content": m.content} for m in chat.messages)
    if chat.top_logprobs is not None and not chat.logprobs:
        raise InvalidValue("top_logprobs needs logprobs: true; send both", "top_logprobs")
    if chat.stream_options is not None and not chat.stream:
        raise InvalidValue("stream_options needs stream: true; send both or neither", "stream_options")
    return ChatRequest(
        messages,
        max_tokens or default_max_tokens,
        0.0 if chat.temperature is None else float(chat.temperature),
        1.0 if chat.top_p is None else float(chat.top_p),
        chat.seed,
        chat.stop or (),
        top_logprobs=(chat.top_logprobs or 0) if chat.logprobs else None,
        frequency_penalty=float(chat.frequency_penalty or 0.0),
        presence_penalty=float(chat.presence_penalty or 0.0),
        stream=bool(chat.stream),
        include_usage=bool(chat.stream_options and chat.stream_options.include_usage),
        model=chat.model,
    )
