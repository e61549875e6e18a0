"""The Flask application: SageMaker's ``/ping`` and ``/invocations`` over one engine.

The engine (one llama.cpp context) is owned by the app factory. Requests are
validated before they queue, admitted one at a time by the gate, and every
error leaves as JSON ``{"error": {"code", "message", "field"}}`` from one place.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from .admission import Gate
from .errors import AdapterError, Busy, InvalidType, NotReady
from .model_files import locate_model
from .schema import parse_chat, parse_decision, request_kind
from .settings import Settings, load_settings

log = logging.getLogger(__name__)

# Exit status gunicorn's arbiter treats as "worker failed to boot": it stops
# the whole server instead of restarting a worker that can never serve.
WORKER_BOOT_ERROR = 3


class _Holder:
    """Owns the engine: loads it, reports readiness, remembers why loading failed."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine = None
        self.error: str | None = None
        self.ready = threading.Event()

    def load(self) -> None:
        from .engine import Engine

        model = locate_model(self.settings.model_dir, self.settings.model_file)
        for name in self.settings.ignored_llama_settings:
            log.warning("%s is a llama-server flag the decision adapter does not use; ignored", name)
        self.engine = Engine(self.settings, model)
        self.ready.set()

    def load_or_exit(self) -> None:
        try:
            self.load()
        except Exception as exc:  # noqa: BLE001 - any load failure ends the server
            self.error = str(exc)
            log.critical("cannot serve the model: %s", exc)
            logging.shutdown()
            os._exit(WORKER_BOOT_ERROR)


def _reject_constant(name):
    raise InvalidType(f"{name} is not valid JSON; send finite numbers only", None)


def _no_duplicate_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidType(f"the key {key!r} appears twice in one JSON object; send it once", key)
        obj[key] = value
    return obj


def parse_json_body(raw: bytes):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidType("the body is not valid UTF-8; send UTF-8 encoded JSON", None) from None
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise InvalidType(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                          None) from None
    except RecursionError:
        raise InvalidType("the body is nested too deeply; flatten the JSON", None) from None


def _json(payload, status: int = 200, headers: dict | None = None) -> Response:
    return Response(json.dumps(payload, ensure_ascii=False), status=status,
                    mimetype="application/json", headers=headers)


def create_app(settings: Settings | None = None, *, load: str = "now") -> Flask:
    """Build the app. ``load``: "now" (in this thread), "background" (serve /ping 503 meanwhile)."""
    settings = settings or load_settings()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    holder = _Holder(settings)
    gate = Gate(settings.max_queue, settings.queue_timeout_s, settings.retry_after_s)
    app.extensions["decision_adapter"] = holder

    if load == "now":
        holder.load()
    elif load == "background":
        threading.Thread(target=holder.load_or_exit, name="model-loader", daemon=True).start()
    else:
        raise ValueError(f"load must be 'now' or 'background', not {load!r}")

    @app.get("/ping")
    def ping():
        if holder.ready.is_set():
            return _json({"status": "ready", "model": holder.engine.info["file"],
                          "busy": gate.busy, "waiting": gate.waiting})
        return _json({"status": "loading"}, status=503)

    @app.post("/invocations")
    def invocations():
        started = time.perf_counter()
        if not holder.ready.is_set():
            raise NotReady("the model is still loading; retry shortly")
        if request.mimetype != "application/json":
            raise AdapterError(
                f"Content-Type {request.mimetype or '(none)'} is not supported; send application/json",
                "Content-Type", status=415, code="unsupported_media_type")
        body = parse_json_body(request.get_data(cache=False))
        kind = request_kind(body)
        engine = holder.engine
        if kind == "chat":
            chat = parse_chat(body, settings.chat_max_tokens)
            with gate.admit():
                return _json(engine.chat(chat))
        batch = parse_decision(body)
        with gate.admit() as waited_ms:
            results, timing = engine.decide(batch)
        timing = {"queue_wait_ms": waited_ms, **timing,
                  "total_ms": (time.perf_counter() - started) * 1000.0}
        if batch.single:
            return _json({"result": {**results[0], "timing": timing, "model": engine.info}})
        return _json({"id": batch.id, "results": results, "timing": timing, "model": engine.info})

    @app.errorhandler(AdapterError)
    def adapter_error(exc: AdapterError):
        headers = {}
        if isinstance(exc, (Busy, NotReady)):
            headers["Retry-After"] = str(exc.retry_after_s)
        return _json(exc.to_json(), exc.status, headers)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        messages = {
            404: "no such route; use GET /ping or POST /invocations",
            405: f"{request.method} is not allowed on {request.path}",
            413: f"the body is larger than {settings.max_body_bytes} bytes; send a smaller state "
                 "or raise DECISION_ADAPTER_MAX_BODY_BYTES",
        }
        message = messages.get(exc.code, exc.description or exc.name)
        code = exc.name.lower().replace(" ", "_")
        return _json({"error": {"code": code, "message": message, "field": None}}, exc.code or 500)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        log.exception("unexpected error while serving %s", request.path)
        return _json({"error": {"code": "internal_error",
                                "message": "the adapter failed on this request; see the endpoint logs",
                                "field": None}}, 500)

    return app
