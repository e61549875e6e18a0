"""SageMaker's ``POST /invocations``: one route for five dialects, told apart by the body's shape.

``request_kind`` picks the dialect; the dialect parses the body, serves it and shapes its own
answer and errors (dialect.py). Errors raised before the dialect is known (loading, key, content
type, JSON) use the project's shape; a missing or wrong key also carries Jev's ``detail``, as such a
caller may be either kind of client.
"""

from __future__ import annotations

from flask import Blueprint, current_app

from ..errors import AdapterError, InvalidType, InvalidValue, Unauthorized
from . import chat, decisions, own, sample, systemone
from .common import type_name
from .dialect import SERVING, as_adapter_error, error_headers, json_response, project_error_body, serve

DIALECTS = {"decision": own.DIALECT, "sample": sample.DIALECT, "chat": chat.DIALECT, "systemone": systemone.DIALECT,
            "openai_decisions": decisions.DIALECT}

blueprint = Blueprint("invocations", __name__)


def request_kind(body) -> str:
    """'chat', 'systemone', 'openai_decisions', 'sample', 'decision' or raise: dispatch on the body's shape."""
    if not isinstance(body, dict):
        raise InvalidType(f"the request body must be a JSON object, got {type_name(body)}", None)
    if "messages" in body:
        return "chat"
    if "decision" in body or "decisions" in body:
        return "sample"
    if isinstance(body.get("questions"), dict):
        return "systemone"
    if "input" in body and isinstance(body.get("questions"), list):
        return "openai_decisions"
    if "question" in body or "questions" in body:
        return "decision"
    raise InvalidValue(
        "the body must carry 'question' and 'options' (a decision), 'questions' (a shared-state batch: an "
        "array; a Jev System One request: an object keyed by question id; with 'input', the OpenAI Decisions "
        "format), 'decision' or 'decisions' (the "
        "published sample's format) or 'messages' (a chat request)",
        None,
    )


def project_error(exc: AdapterError):
    body = project_error_body(exc)
    if isinstance(exc, Unauthorized):  # sent before the body is read: readable by either kind of client
        body.update(systemone.error_body(exc))
    return json_response(body, exc.status, error_headers(exc))


@blueprint.errorhandler(Exception)
def _error(exc: Exception):
    return project_error(as_adapter_error(exc))


def parse(body, settings):
    """What /invocations validates before a request waits for the model: the dialect's parsed request."""
    return DIALECTS[request_kind(body)].parse(body, settings)


@blueprint.post("/invocations")
def invocations():
    ctx = current_app.extensions[SERVING]
    started = ctx.clock()
    ctx.engine  # 503 while loading, before the body is read
    body = ctx.read_json()
    dialect = DIALECTS[request_kind(body)]
    try:
        return dialect.response(serve(ctx, dialect, body, started))
    except Exception as exc:  # noqa: BLE001 - every failure leaves in the dialect's own shape
        return dialect.error_response(as_adapter_error(exc))
