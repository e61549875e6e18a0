"""SageMaker's ``POST /invocations``: one route for every API that serves bodies there, told apart by the
body's shape.

``body_api`` picks the API, asking each registered one's sniffer in the registry's order (registry.py);
its dialect parses the body, serves it and shapes its own answer and errors (dialect.py). Errors raised
before the dialect is known (loading, key, content type, JSON) use the project's shape; a missing or wrong
key also carries Jev's ``detail``, as such a caller may be either kind of client.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from ..caller_errors import AdapterError, InvalidType, InvalidValue, Unauthorized
from ..settings import Settings
from . import systemone
from .api import Api
from .common import type_name
from .dialect import SERVING, Serving, as_adapter_error, error_headers, json_response, project_error_body, serve
from .registry import DIALECTS, INVOCATIONS, Registry

blueprint = Blueprint("invocations", __name__)


def body_api(body: Any, dialects: Registry = DIALECTS) -> Api:
    """The API whose body this is (the first in ``dialects`` whose sniffer takes it), or raise."""
    if not isinstance(body, dict):
        raise InvalidType(f"the request body must be a JSON object, got {type_name(body)}", None)
    api = dialects.sniff(body)
    if api is None:
        raise InvalidValue(
            "the body must carry 'question' and 'options' (a decision), 'questions' (a shared-state batch: an "
            "array; a Jev System One request: an object keyed by question id; with 'input', the OpenAI Decisions "
            "format), 'decision' or 'decisions' (the "
            "published sample's format) or 'messages' (a chat request)",
            None,
        )
    return api


def request_kind(body: Any, dialects: Registry = DIALECTS) -> str:
    """'chat', 'systemone', 'openai_decisions', 'sample', 'decision' (or another registered API's name) or raise."""
    return body_api(body, dialects).name


def project_error(exc: AdapterError) -> Response:
    body = project_error_body(exc)
    if isinstance(exc, Unauthorized):  # sent before the body is read: readable by either kind of client
        body.update(systemone.error_body(exc))
    return json_response(body, exc.status, error_headers(exc))


@blueprint.errorhandler(Exception)
def _error(exc: Exception) -> Response:
    return project_error(as_adapter_error(exc))


def parse(body: Any, settings: Settings, dialects: Registry = DIALECTS) -> Any:
    """What /invocations validates before a request waits for the model: the dialect's parsed request."""
    return body_api(body, dialects).served.parse(body, settings)


@blueprint.post(INVOCATIONS)
def invocations() -> Response:
    ctx: Serving = current_app.extensions[SERVING]
    dialects: Registry = current_app.extensions[SERVING].dialects
    started = ctx.clock()
    ctx.engine  # 503 while loading, before the body is read
    body = ctx.read_json()
    dialect = body_api(body, dialects).served
    try:
        return dialect.response(serve(ctx, dialect, body, started))
    except Exception as exc:
        return dialect.error_response(as_adapter_error(exc))
