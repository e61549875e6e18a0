"""What every API does the same way, declared once: parse, wait for the model, score, answer, and errors in
the API's own shape. Each API module declares only what differs (a ``Dialect``); ``serve`` runs one
request of any of them, and ``post`` registers a route of one with its error handler.

``serve``: the body is parsed into the dialect's request (a 4xx in its shape when it cannot be: nothing
reaches the model unvalidated), checked where the dialect checks more before waiting (the model's name),
then its work runs once admission lets it hold the model (the app's ``Serving.run``: the gate, the time
limit, the metric line's facts), and its answer is written from what the work returned and the timing.

Errors: ``as_adapter_error`` makes any exception the adapter's (HTTP errors keep their status; anything
unexpected is logged and becomes a 500 that says where to look), and the dialect's ``error`` gives the
body and status in its shape. ``project_error_body`` is this project's own shape, which the app's routes,
chat and requests whose dialect is not known yet answer in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from flask import Blueprint, Response, current_app, g, has_request_context, request
from werkzeug.exceptions import HTTPException

from ..caller_errors import AdapterError, Busy, NotReady, Unauthorized
from ..engine import Engine
from ..settings import Settings

log = logging.getLogger("decision_adapter.app")

SERVING = "decision_adapter.serving"  # the app's Serving (its settings, its dialects' registry), in app.extensions

Body = dict[str, Any]  # an answer's (or an error's) JSON object
Headers = dict[str, str]
T = TypeVar("T")


class Serving(Protocol):
    """What the dialects use of the app's ``Serving`` (app.py, a layer above them)."""

    settings: Settings

    @property
    def engine(self) -> Engine: ...

    def clock(self) -> float: ...

    def read_json(self, *, jev_route: bool = False) -> Any: ...

    def run(self, work: Callable[[Engine], T]) -> tuple[T, float]: ...

    def timing(self, timing: dict[str, Any], waited_ms: float, started: float) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Dialect:
    """One API: how its bodies are read, worked on and answered, and its error shape."""

    name: str
    parse: Callable[[Any, Any], Any]  # (body, settings) -> its request
    work: Callable[[Any, Any], tuple[Any, dict[str, Any]]]  # (engine, request) -> (what it scored, timing)
    answer: Callable[[Any, Any, dict[str, Any], dict[str, Any]], Body]  # (request, scored, timing, model info)
    error: Callable[[AdapterError], tuple[Body, int]]  # an error as (body, status) in this API's shape
    check: Callable[[Any, Any], None] | None = None  # (request, engine): after parsing, before waiting
    # the body's field for the request id: System One's x_request_id, as its spec wants extra fields x_-prefixed
    id_field: str = "request_id"

    def response(self, payload: Any, status: int = 200, headers: Headers | None = None) -> Response:
        return json_response(payload, status, headers, id_field=self.id_field)

    def error_response(self, exc: AdapterError) -> Response:
        return self.response(*self.error(exc), error_headers(exc))


def serve(ctx: Serving, dialect: Dialect, body: Any, started: float) -> Body:
    """One request of ``dialect``, from its parsed body to its answer (``ctx``: the app's Serving)."""
    parsed = dialect.parse(body, ctx.settings)
    if dialect.check is not None:
        dialect.check(parsed, ctx.engine)
    (scored, timing), waited_ms = ctx.run(lambda engine: dialect.work(engine, parsed))
    return dialect.answer(parsed, scored, ctx.timing(timing, waited_ms, started), ctx.engine.info)


def post(blueprint: Blueprint, rule: str, dialect: Dialect, **read: bool) -> None:
    """``POST rule`` on ``blueprint`` serves ``dialect``; every error of the blueprint's routes answers in its
    shape. ``read``: how the body is read (the app's ``Serving.read_json``)."""

    def route() -> Response:
        ctx: Serving = current_app.extensions[SERVING]
        started = ctx.clock()
        ctx.engine  # 503 while loading, before the body is read
        return dialect.response(serve(ctx, dialect, ctx.read_json(**read), started))

    blueprint.add_url_rule(rule, f"{dialect.name}_route", route, methods=["POST"])
    blueprint.register_error_handler(Exception, lambda exc: dialect.error_response(as_adapter_error(exc)))


def json_response(
    payload: Any, status: int = 200, headers: Headers | None = None, *, id_field: str = "request_id"
) -> Response:
    """A JSON answer; inside an API request (app.py keeps its facts) an object gains the request id, as
    ``id_field``."""
    facts = g.get("request_facts") if has_request_context() else None
    if facts is not None and isinstance(payload, dict):
        payload = {**payload, id_field: facts.request_id}
    return Response(
        json.dumps(payload, ensure_ascii=False), status=status, mimetype="application/json", headers=headers
    )


def error_headers(exc: AdapterError) -> Headers:
    headers: Headers = {}
    if isinstance(exc, (Busy, NotReady)):
        headers["Retry-After"] = str(exc.retry_after_s)
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    return headers


def project_error_body(exc: AdapterError) -> Body:
    """This project's error shape: ``{"error": {"code", "message", "field"}}``, retryable when busy."""
    body = exc.to_json()
    if exc.status == 503:
        body["retryable"] = True
    return body


def as_adapter_error(exc: Exception) -> AdapterError:
    """Any exception raised while serving as the adapter's error: HTTP errors keep their status,
    anything unexpected is logged and becomes a 500 that says where to look."""
    if isinstance(exc, AdapterError):
        return exc
    if isinstance(exc, HTTPException):
        messages = {
            404: f"no such route; use {current_app.extensions[SERVING].dialects.described()}",
            405: f"{request.method} is not allowed on {request.path}",
            413: f"the body is larger than {current_app.config['MAX_CONTENT_LENGTH']} bytes; send a smaller state "
            "or raise DECISION_ADAPTER_MAX_BODY_BYTES",
        }
        message = messages.get(exc.code or 0, exc.description or exc.name)
        return AdapterError(message, None, status=exc.code or 500, code=exc.name.lower().replace(" ", "_"))
    log.error("unexpected error while serving %s", request.path, exc_info=exc)
    return AdapterError(
        "the adapter failed on this request; see the endpoint logs", None, status=500, code="internal_error"
    )
