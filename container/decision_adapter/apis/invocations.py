"""SageMaker's ``POST /invocations``: one route for five dialects, told apart by the body's shape.

``request_kind`` picks the dialect; the dialect parses the body, serves it and shapes its own
answer and errors. Errors raised before the dialect is known (loading, key, content type, JSON)
use the project's shape; a missing or wrong key also carries Jev's ``detail``, as such a caller
may be either kind of client.
"""

from __future__ import annotations

from flask import Blueprint, current_app

from ..errors import AdapterError, Unauthorized
from ..schema import request_kind
from . import chat, decisions, own, sample, systemone
from .common import as_adapter_error, error_headers, json_response

DIALECTS = {"decision": own, "sample": sample, "chat": chat, "systemone": systemone, "openai_decisions": decisions}

blueprint = Blueprint("invocations", __name__)


def project_error(exc: AdapterError):
    body = own.error_body(exc)
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
    ctx = current_app.extensions["decision_adapter.serving"]
    started = ctx.clock()
    ctx.engine  # 503 while loading, before the body is read
    body = ctx.read_json()
    dialect = DIALECTS[request_kind(body)]
    try:
        return json_response(dialect.serve(ctx, body, started))
    except Exception as exc:  # noqa: BLE001 - every failure leaves in the dialect's own shape
        return dialect.error_response(as_adapter_error(exc))
