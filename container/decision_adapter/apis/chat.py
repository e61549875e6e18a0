"""OpenAI chat completions: ``{"messages": [...], ...}``, one choice, on ``POST /v1/chat/completions`` (OpenAI's
error shape, ``stream: true`` as server-sent events: apis/chat_stream.py) and on ``POST /invocations`` (the
project's error shape ``{"error": {"code", "message", "field"}}``, no streaming).

Sampling (``temperature``, ``top_p``, ``seed``, ``stop``, the penalties), ``max_tokens`` /
``max_completion_tokens`` and ``logprobs`` with ``top_logprobs`` are served. OpenAI's parameters that change
nothing here (``user``, ``store``, ``metadata``, ...) and a few of llama-server's (``chat_template_kwargs``,
...) are accepted and ignored, so that OpenAI clients work unchanged. Parameters asking for what this
adapter does not do (tools, ``n`` above 1, JSON output, audio, ...) are refused with a 400 naming them
(code ``unsupported_parameter``); any other field is refused naming it (apis/chat_requests.py).

A body carrying ``decision`` asks a decision instead, on both routes (apis/chat_decisions.py).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from flask import Blueprint, Response, current_app

from ..caller_errors import AdapterError, ModelNotFound
from ..engine import Engine
from ..questions import ChatRequest
from ..settings import Settings
from . import chat_decisions, decisions
from . import openapi_parts as doc
from .api import Api, Scope

# The requests', answers' and stream's pieces live beside this module; the OpenAPI document and the tests find
# them here.
from .chat_answers import ChatCompletion as ChatCompletion
from .chat_answers import ChatCompletionChunk as ChatCompletionChunk
from .chat_decisions import ChatDecision
from .chat_requests import UNSUPPORTED as UNSUPPORTED
from .chat_requests import ChatCompletionRequest as ChatCompletionRequest
from .chat_requests import parse_chat as parse_chat
from .chat_stream import EventStream, events
from .chat_stream import chunks as chunks
from .chat_stream import event as event
from .dialect import SERVING, Body, Dialect, as_adapter_error, json_response, project_error_body, serve
from .typed import accepted_model_names, names_checked, served_model_name

# -- the served model's name ---------------------------------------------------------------------------


def check(chat: ChatRequest | ChatDecision, engine: Engine) -> None:
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


# -- the dialect and the route -----------------------------------------------------------------------


def parse(body: Any, settings: Settings, *, streaming: bool = False) -> ChatRequest | ChatDecision:
    """A chat request, or a decision where the body carries one."""
    if chat_decisions.asks_decision(body):
        return chat_decisions.parse(body, settings)
    return parse_chat(body, settings.chat_max_tokens, streaming=streaming)


def complete(engine: Engine, chat: ChatRequest) -> tuple[Body, dict[str, Any]]:
    """The completion, and the prompt's tokens for the metric line (chat answers no timing of its own)."""
    completion = engine.chat(chat)
    usage: Any = completion["usage"]  # chat_completion.py's chat_response: the completion's usage object
    return completion, {"input_tokens": usage["prompt_tokens"]}


def work(engine: Engine, request: ChatRequest | ChatDecision) -> tuple[Any, dict[str, Any]]:
    if isinstance(request, ChatDecision):
        return chat_decisions.work(engine, request)
    return complete(engine, request)


def answer(request: ChatRequest | ChatDecision, done: Any, timing: dict[str, Any], info: dict[str, Any]) -> Body:
    if isinstance(request, ChatDecision):
        return chat_decisions.answer(request, done, timing, info)
    completion: Body = done
    return completion


def error(exc: AdapterError) -> tuple[Body, int]:
    """Chat's errors on /invocations come in this project's shape."""
    return project_error_body(exc), exc.status


DIALECT = Dialect("chat", parse, work, answer, error, check)


def openai_error(exc: AdapterError) -> tuple[Body, int]:
    """OpenAI's error shape, as /v1/decisions answers it."""
    return decisions.error_body(exc)


OPENAI_DIALECT = Dialect(
    "chat_completions", lambda body, settings: parse(body, settings, streaming=True), work, answer, openai_error, check
)

PATH = "/v1/chat/completions"
blueprint = Blueprint("chat", __name__)
blueprint.register_error_handler(Exception, lambda exc: OPENAI_DIALECT.error_response(as_adapter_error(exc)))


@blueprint.post(PATH)
def chat_completions() -> Response:
    ctx = current_app.extensions[SERVING]
    started = ctx.clock()
    engine = ctx.engine  # 503 while loading, before the body is read
    body = ctx.read_json()
    if not (isinstance(body, dict) and body.get("stream") is True) or chat_decisions.asks_decision(body):
        return json_response(serve(ctx, OPENAI_DIALECT, body, started))
    chat = parse_chat(body, ctx.settings.chat_max_tokens, streaming=True)
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


def openapi_paths() -> Body:
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
                "naming them. A body carrying decision (the openai library's extra_body) asks that decision "
                "instead, scored as POST /invocations scores it: the message's content is the chosen option's "
                "id, the logprobs' top_logprobs every option, the answer's decision the result; stream: true "
                "is refused with it.",
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
