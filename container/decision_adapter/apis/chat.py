"""OpenAI chat completions: ``{"messages": [...], ...}``, one choice, on ``POST /v1/chat/completions`` (OpenAI's
error shape, ``stream: true`` as server-sent events: apis/chat_route.py) and on ``POST /invocations`` (the
project's error shape ``{"error": {"code", "message", "field"}}``, no streaming).

Sampling (``temperature``, ``top_p``, ``seed``, ``stop``, the penalties), ``max_tokens`` /
``max_completion_tokens`` and ``logprobs`` with ``top_logprobs`` are served. OpenAI's parameters that change
nothing here (``user``, ``store``, ``metadata``, ...) and a few of llama-server's (``chat_template_kwargs``,
...) are accepted and ignored, so that OpenAI clients work unchanged. Parameters asking for what this
adapter does not do (tools, ``n`` above 1, JSON output, audio, ...) are refused with a 400 naming them
(code ``unsupported_parameter``); any other field is refused naming it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Annotated, Any, Literal

from flask import Blueprint, Response, current_app
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from .. import chat as chat_completion
from ..engine import Engine
from ..errors import AdapterError, InvalidType, InvalidValue, ModelNotFound
from ..questions import CHAT_ROLES, ChatRequest
from . import decisions
from . import openapi_parts as doc
from .api import Api, Scope
from .common import Answer, Strict, adapter_error, type_error, value_error
from .dialect import SERVING, Dialect, as_adapter_error, json_response, project_error_body, serve
from .typed import accepted_model_names, names_checked, served_model_name

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


def _absent(value) -> bool:
    return value is None or value == [] or value == {}


# OpenAI parameters asking for what this adapter does not do, and which of their values ask for nothing.
UNSUPPORTED = {
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


def _stop(value):
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

    @field_validator("stop", mode="plain")
    @classmethod
    def _check_stop(cls, value):
        return _stop(value)


ChatCompletionRequest = create_model(
    "ChatCompletionRequest",
    __base__=_ChatFields,
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
)


def _count(field: str, error: dict):
    n = error["ctx"].get("actual_length")
    if field == "messages":
        if not n:
            return InvalidValue("messages must hold at least one message", "messages")
        return InvalidValue(f"messages holds {n} messages; send at most {MAX_MESSAGES}", "messages")
    return None


def _role(field: str, error: dict):
    return InvalidValue(f"{field} must be one of {', '.join(CHAT_ROLES)}", field)


def _range(field: str, error: dict):
    if field == "temperature":
        return InvalidValue("temperature must be between 0 and 2", field)
    if field == "top_p":
        return InvalidValue("top_p must be a finite number above 0.0 and at most 1.0", field)
    if field == "top_logprobs":
        return InvalidValue(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}", field)
    if field in ("frequency_penalty", "presence_penalty"):
        return InvalidValue(f"{field} must be between -2 and 2", field)
    return None


WORDING = {
    "too_short": _count,
    "too_long": _count,
    "literal_error": _role,
    "greater_than": _range,
    "greater_than_equal": _range,
    "less_than_equal": _range,
}


def parse_chat(
    body: dict, default_max_tokens: int, max_tokens_cap: int | None = None, *, streaming: bool = False
) -> ChatRequest:
    """A chat request; ``max_tokens`` above ``max_tokens_cap`` (the default's value if not given) is refused;
    ``stream: true`` only where ``streaming``."""
    max_tokens_cap = max_tokens_cap or default_max_tokens
    if isinstance(body, dict):
        for name, asks_nothing in UNSUPPORTED.items():
            if not asks_nothing(body.get(name)):
                raise unsupported(name)
    try:
        chat = ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise adapter_error(exc, messages=WORDING) from None
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


# -- answers, described -------------------------------------------------------------------------------


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None


class ChatChoice(BaseModel):
    index: int = Field(ge=0)
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None


class ChatUsage(Answer):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)


class ChatCompletion(Answer):
    """An OpenAI-style chat completion (one choice); 'model' names the served GGUF file, whatever the request
    named."""

    model_config = ConfigDict(title="Chat completion answer")
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice] = Field(min_length=1)
    usage: ChatUsage


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = Field(ge=0)
    delta: ChunkDelta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None


class ChatCompletionChunk(Answer):
    """One server-sent event of a streamed chat (``data: {chunk}``); the stream ends with ``data: [DONE]``."""

    model_config = ConfigDict(title="Chat completion chunk")
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = Field(
        None, description="Only on the last chunk, with stream_options.include_usage (its choices are empty)."
    )


# -- the served model's name ---------------------------------------------------------------------------


def check(chat: ChatRequest, engine: Engine) -> None:
    """The model's name, before the request waits for the model: any name unless the names are strict."""
    if chat.model is None or not names_checked(engine):
        return
    if chat.model not in accepted_model_names(engine.info, engine.model.files.manifest):
        raise ModelNotFound(
            f"The model {chat.model!r} does not exist here; send {served_model_name(engine.info)!r} "
            "or leave model out (GET /v1/models lists the names)",
            "model",
            code="model_not_found",
        )


# -- streamed answers ---------------------------------------------------------------------------------


def chunk(
    head: dict,
    delta: dict,
    *,
    logprobs: list[dict] | None = None,
    finish_reason: str | None = None,
    usage: bool = False,
) -> dict:
    """One ``chat.completion.chunk``; ``head``: the stream's id, created and model; ``usage``: the stream
    ends with a usage chunk, so every other chunk says ``usage: null`` (as OpenAI's)."""
    body = {
        **head,
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": None if logprobs is None else {"content": logprobs},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage:
        body["usage"] = None
    return body


def chunks(chat: ChatRequest, pieces, model_name: str):
    """The chunks of a streamed completion, from the engine's pieces (core chat.py's ``Piece``)."""
    head = {"id": chat_completion.completion_id(), "created": int(time.time()), "model": model_name}
    wants = chat.top_logprobs is not None
    yield chunk(head, {"role": "assistant", "content": ""}, logprobs=[] if wants else None, usage=chat.include_usage)
    for piece in pieces:
        if piece.finish_reason is not None:
            yield chunk(head, {}, finish_reason=piece.finish_reason, usage=chat.include_usage)
            if chat.include_usage:
                yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": piece.usage}
            return
        yield chunk(head, {"content": piece.text}, logprobs=piece.logprobs if wants else None, usage=chat.include_usage)


def event(payload) -> bytes:
    # ASCII only: a generated U+2028, U+0085 or U+001C is a line break to readers that split lines as Python's
    # str.splitlines does, which would cut the event's JSON in two.
    return b"data: " + json.dumps(payload).encode("ascii") + b"\n\n"


DONE = b"data: [DONE]\n\n"


class EventStream:
    """A streamed answer's body, holding the model until it ends or is closed: the WSGI server closes it when
    the client goes away (its next write fails), which stops generation and lets the next request in."""

    def __init__(self, events: Iterator[bytes], release: Callable[[], None]):
        self._events = events
        self._release = release

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._events)
        except BaseException:  # the end, or a failure: either way the model is free now
            self.close()
            raise

    def close(self) -> None:
        try:
            self._events.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


def events(chat: ChatRequest, pieces, model_name: str) -> Iterator[bytes]:
    """Server-sent events: ``data: {chunk}`` each, ``data: [DONE]`` at the end; an error once the answer has
    started (the time limit) is a last ``data: {"error": ...}`` event in OpenAI's shape."""
    try:
        for body in chunks(chat, pieces, model_name):
            yield event(body)
    except AdapterError as exc:
        yield event(openai_error(exc)[0])
        return
    finally:
        pieces.close()
    yield DONE


# -- the dialect and the route -----------------------------------------------------------------------


def parse(body, settings) -> ChatRequest:
    return parse_chat(body, settings.chat_max_tokens)


def complete(engine: Engine, chat: ChatRequest) -> tuple[dict, dict]:
    """The completion, and the prompt's tokens for the metric line (chat answers no timing of its own)."""
    completion = engine.chat(chat)
    return completion, {"input_tokens": completion["usage"]["prompt_tokens"]}


def error(exc: AdapterError) -> tuple[dict, int]:
    """Chat's errors on /invocations come in this project's shape."""
    return project_error_body(exc), exc.status


DIALECT = Dialect("chat", parse, complete, lambda chat, completion, timing, model: completion, error, check)


def openai_error(exc: AdapterError) -> tuple[dict, int]:
    """OpenAI's error shape, as /v1/decisions answers it."""
    return decisions.error_body(exc)


OPENAI_DIALECT = Dialect(
    "chat_completions",
    lambda body, settings: parse_chat(body, settings.chat_max_tokens, streaming=True),
    complete,
    DIALECT.answer,
    openai_error,
    check,
)

PATH = "/v1/chat/completions"
blueprint = Blueprint("chat", __name__)
blueprint.register_error_handler(Exception, lambda exc: OPENAI_DIALECT.error_response(as_adapter_error(exc)))


@blueprint.post(PATH)
def chat_completions():
    ctx = current_app.extensions[SERVING]
    started = ctx.clock()
    engine = ctx.engine  # 503 while loading, before the body is read
    body = ctx.read_json()
    if not (isinstance(body, dict) and body.get("stream") is True):
        return json_response(serve(ctx, OPENAI_DIALECT, body, started))
    chat = OPENAI_DIALECT.parse(body, ctx.settings)
    check(chat, engine)
    held = ExitStack()  # a context of the model, held from here until the stream ends or the client leaves
    engine, _ = held.enter_context(ctx.holder.lanes.admit())
    try:
        held.enter_context(engine.time_limit(ctx.settings.request_timeout_s))
        pieces = engine.chat_pieces(chat)
    except BaseException:
        held.close()
        raise
    stream = EventStream(events(chat, pieces, engine.model.files.gguf.name), held.close)
    # X-Accel-Buffering: nginx passes each event on as it comes (nginx.conf.template says so too).
    return Response(
        stream, mimetype="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


def openapi_paths() -> dict:
    """Its path of the OpenAPI document (openapi.py)."""
    return {
        PATH: {
            "post": {
                "operationId": "chat",
                "tags": ["OpenAI"],
                "summary": "Generate a chat answer (OpenAI chat completions)",
                "description": "The same chat as on /invocations, as OpenAI's clients send it: one choice, sampling, "
                "stop, seed, max_completion_tokens, logprobs with top_logprobs, and stream: true as "
                "server-sent events (text/event-stream: data: {chunk} per event, data: [DONE] last; "
                "stream_options.include_usage adds a last chunk with the usage). A client that leaves "
                "mid-stream stops the generation. The model field may name any model: the served one "
                "answers and its answer says so (DECISION_ADAPTER_STRICT_MODEL_NAMES=on: 404 for other "
                "names). Errors use OpenAI's shape; parameters asking for what the adapter does not do "
                "(tools, n above 1, JSON output, audio, logit_bias) are 400 unsupported_parameter "
                "naming them.",
                "requestBody": doc.body("ChatCompletionRequest"),
                "responses": {
                    "200": {
                        "description": "The completion; with stream: true, server-sent events of chunks.",
                        "content": {
                            "application/json": {"schema": doc.ref("ChatCompletion")},
                            "text/event-stream": {"schema": doc.ref("ChatCompletionChunk")},
                        },
                    },
                    "400": doc.response(
                        "The body cannot be served; param names the field.",
                        doc.openai(
                            "invalid_type",
                            "invalid_value",
                            "missing_required_parameter",
                            "unknown_parameter",
                            "unsupported_parameter",
                            "context_length_exceeded",
                            "bad_request",
                        ),
                    ),
                    "404": doc.response(
                        "Only with DECISION_ADAPTER_STRICT_MODEL_NAMES=on: the request names a model "
                        "this endpoint does not serve.",
                        doc.openai("model_not_found"),
                    ),
                    **doc.common("Decisions"),
                },
            }
        }
    }


API = Api(
    "chat",
    "chat",
    body=DIALECT,
    sniff=lambda body: "messages" in body,
    routes=(f"POST {PATH}",),
    blueprint=blueprint,
    scope=Scope(PATH),
    errors=OPENAI_DIALECT,
    shape="decisions",
    openapi=openapi_paths,
)
