"""OpenAI chat completions on ``POST /invocations``: ``{"messages": [...], ...}``, one choice, no streaming.

OpenAI's own parameters this adapter does not use (``model``, ``n``, ``user``, ``logprobs``, ...)
and a few of llama-server's (``chat_template_kwargs``, ...) are accepted and ignored, so that
OpenAI clients work unchanged; any other field is refused naming it. Errors use the project's shape, ``{"error": {"code", "message", "field"}}``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from ..errors import AdapterError, InvalidType, InvalidValue
from ..questions import CHAT_ROLES, ChatRequest
from .common import Answer, Strict, adapter_error, type_error, value_error
from .dialect import Dialect, project_error_body

MAX_STOP = 4  # as OpenAI's chat completions
MAX_STOP_CHARS = 64
MAX_MESSAGES = 256

# OpenAI chat-completion parameters accepted and ignored (sent by OpenAI clients as a matter of course).
IGNORED_OPENAI = ("model", "n", "user", "logprobs", "top_logprobs", "frequency_penalty", "presence_penalty",
                  "logit_bias", "response_format", "tools", "tool_choice", "parallel_tool_calls", "metadata",
                  "store", "service_tier", "stream_options", "modalities", "reasoning_effort", "prediction",
                  "audio", "functions", "function_call", "web_search_options", "verbosity", "prompt_cache_key",
                  "safety_identifier")
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


class _ChatFields(Strict):
    model_config = ConfigDict(title="Chat completion")
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    stream: bool | None = Field(None, description="false or absent: streaming is not supported.")
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = Field(None, description=f"Up to {MAX_STOP} strings of at most {MAX_STOP_CHARS} "
                                                           "characters.")
    @field_validator("stop", mode="plain")
    @classmethod
    def _check_stop(cls, value):
        return _stop(value)


ChatCompletionRequest = create_model(
    "ChatCompletionRequest", __base__=_ChatFields,
    **{name: (Any, Field(None, description="OpenAI's parameter; accepted and ignored.")) for name in IGNORED_OPENAI},
    **{name: (Any, Field(None, description="llama-server's parameter; accepted and ignored."))
       for name in IGNORED_LLAMA_SERVER})


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
    return None


WORDING = {"too_short": _count, "too_long": _count, "literal_error": _role, "greater_than": _range,
           "greater_than_equal": _range, "less_than_equal": _range}


def parse_chat(body: dict, default_max_tokens: int, max_tokens_cap: int | None = None) -> ChatRequest:
    """A chat request; ``max_tokens`` above ``max_tokens_cap`` (the default's value if not given) is refused."""
    max_tokens_cap = max_tokens_cap or default_max_tokens
    try:
        chat = ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise adapter_error(exc, messages=WORDING) from None
    if chat.stream:
        raise InvalidType("stream: true is not supported by the decision adapter; send stream: false or omit it",
                          "stream")
    max_tokens = None
    for key in ("max_tokens", "max_completion_tokens"):  # both checked; max_tokens wins when both are set
        value = getattr(chat, key)
        if value is None:
            continue
        if not 1 <= value <= max_tokens_cap:
            raise InvalidValue(f"{key} must be between 1 and {max_tokens_cap} (DECISION_ADAPTER_CHAT_MAX_TOKENS); "
                               "ask for fewer tokens", key)
        max_tokens = value if max_tokens is None else max_tokens
    for key in ("temperature", "top_p"):
        value = getattr(chat, key)
        if value is not None and not math.isfinite(value):
            raise InvalidValue(f"{key} must be a finite number", key)
    messages = tuple({"role": m.role, "content": m.content} for m in chat.messages)
    return ChatRequest(messages, max_tokens or default_max_tokens, 0.0 if chat.temperature is None else
                       float(chat.temperature), 1.0 if chat.top_p is None else float(chat.top_p), chat.seed,
                       chat.stop or ())


# -- answers, described -------------------------------------------------------------------------------


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None


class ChatChoice(BaseModel):
    index: int = Field(ge=0)
    message: AssistantMessage
    logprobs: Any = None
    finish_reason: str | None


class ChatUsage(Answer):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)


class ChatCompletion(Answer):
    """An OpenAI-style chat completion (one choice); 'model' names the served GGUF file."""

    model_config = ConfigDict(title="Chat completion answer")
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice] = Field(min_length=1)
    usage: ChatUsage


# -- the dialect ------------------------------------------------------------------------------------


def parse(body, settings) -> ChatRequest:
    return parse_chat(body, settings.chat_max_tokens)


def complete(engine, chat: ChatRequest) -> tuple[dict, dict]:
    """The completion; chat reports no timing of its own."""
    return engine.chat(chat), {}


def error(exc: AdapterError) -> tuple[dict, int]:
    """Chat's errors come in this project's shape."""
    return project_error_body(exc), exc.status


DIALECT = Dialect("chat", parse, complete, lambda chat, completion, timing, model: completion, error)
