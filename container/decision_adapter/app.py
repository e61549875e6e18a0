"""The Flask application: what every API shares, over one engine.

Each API dialect is a module of ``apis/`` with its models, its routes (a blueprint) and its
error shape: ``POST /invocations`` (``apis/invocations.py``: this project's decisions, the
published sample's format, OpenAI chat and Jev System One, told apart by the body's shape),
Jev's ``POST /v1/systemone``, ``GET /v1/models`` (read by Jev's and OpenAI's clients), the OpenAI
Decisions API's ``POST /v1/decisions`` and OpenAI's ``POST /v1/chat/completions`` (streamed as server-sent
events); ``apis/dialect.py`` serves each the same way, and ``apis/registry.py`` lists them: the app
registers their routes, meters them and names their API on the metric line from that list. This module
keeps the rest: loading the engine, the API key, reading and decoding bodies within their limits,
admission (one request at a time holds the model: ``Serving.run``, in front of the core's scoring.py),
``/ping``, ``/status``, ``/openapi.json``, the wire version every response reports (``decision_contract.wire``)
and the shape of 404/405 answers (that of the API whose scope the path falls in: OpenAI's under
``/v1/decisions`` and on ``/v1/chat/completions``, Jev's elsewhere under ``/v1/``, the project's
``{"error": {"code", "message", "field"}}`` otherwise).

With ``DECISION_ADAPTER_API_KEY`` set, every route but ``/ping`` and ``/openapi.json``
needs ``Authorization: Bearer <key>``; without it, the header is ignored. ``GET /openapi.json``
serves the OpenAPI description of every route (``openapi.json`` in this package).

``/ping`` says only whether the adapter is healthy: ``{"status": "ready"}`` or 503 while it
loads. Whether the model is busy helps a caller time its probes of someone else's requests,
and what runs here is nobody else's business, so the details (model file, extra buffer types,
the start-up proof, busy and waiting) go only to a caller holding the key, on ``/ping`` when a
key is configured and on ``GET /status``, which needs the key like every other route (without
a key configured, ``/status`` is as open as ``/invocations``, whose own timings say as much).
"""

from __future__ import annotations

import hmac
import importlib
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from importlib import resources
from types import ModuleType
from typing import Any, NoReturn, TypeVar

from flask import Flask, Response, g, has_request_context, request

from decision_contract import wire

from . import metrics, runtime, startup
from .admission import Gate
from .apis import invocations
from .apis.common import REQUEST_ID_HEADER, choose_request_id
from .apis.dialect import SERVING, Body, as_adapter_error, json_response
from .apis.invocations import body_api, project_error
from .apis.registry import DIALECTS, INVOCATIONS, Registry
from .caller_errors import AdapterError, Busy, InvalidType, NotReady, TimedOut, Unauthorized
from .engine import Engine
from .model_files import locate_model
from .scheduler import SHARED, Lanes, open_lanes
from .settings import Settings, load_settings
from .startup import StartupRecord

log = logging.getLogger(__name__)

# Exit status gunicorn's arbiter treats as "worker failed to boot": it stops
# the whole server instead of restarting a worker that can never serve.
WORKER_BOOT_ERROR = 3

# Routes that never need the API key: SageMaker's health check and the OpenAPI description.
OPEN_ROUTES = ("/ping", "/openapi.json")

T = TypeVar("T")


def _facts() -> metrics.RequestFacts | None:
    """The current API request's facts (None outside one)."""
    return g.get("request_facts") if has_request_context() else None


class _Holder:
    """Owns the engine: loads it, proves it with one decision, then reports ready.

    Each stage goes to the start-up record (startup.py) when the server keeps one,
    so that a crash inside llama.cpp still leaves a word on what was running.
    """

    def __init__(self, settings: Settings, gate: Gate, record: StartupRecord | None = None) -> None:
        self.settings = settings
        self.gate = gate
        self.record = record
        self.engine: Engine | None = None  # the first context's engine: what is served (model info, checks)
        self.lanes: Lanes | None = None  # every context, one request on each (scheduler.py)
        self.error: str | None = None
        self.ready = threading.Event()

    def _stage(self, stage: str, **details: Any) -> None:
        if self.record is not None:
            self.record.write(stage, **details)

    def load(self) -> None:
        model = locate_model(self.settings.model_dir, self.settings.model_file)
        for name in self.settings.ignored_llama_settings:
            log.warning("%s is a llama-server flag the decision adapter does not use; ignored", name)
        for name in self.settings.unknown_sample_settings:
            log.warning(
                "%s is not a setting of the published sample nor of this adapter; ignored (check the spelling)", name
            )
        for note in self.settings.notes:
            log.info("%s", note)
        self._stage(startup.LOADING, model=model.gguf.name)
        rt = runtime.inspect(self.settings.extra_buffers)
        self._stage(startup.LOADING, **rt.describe())
        engine = Engine(self.settings, model, rt)
        self._stage(startup.PROVING)
        engine.prove()
        self._stage(startup.PROVING, parallel=self.settings.parallel)
        self.serve(engine, open_lanes(engine, self.settings, self.gate))

    def serve(self, engine: Engine, lanes: Lanes | None = None) -> None:
        """Serve ``engine`` on its contexts (``lanes``; none given: its own one only); ready from here."""
        self.lanes = lanes or Lanes([engine], self.gate, SHARED)
        self.engine = engine
        self._stage(startup.READY)
        self.ready.set()

    def load_or_exit(self) -> None:
        try:
            self.load()
        except Exception as exc:
            self.error = str(exc)
            log.critical("cannot serve the model: %s", exc)
            logging.shutdown()
            os._exit(WORKER_BOOT_ERROR)


def _reject_constant(name: str) -> NoReturn:
    raise InvalidType(f"{name} is not valid JSON; send finite numbers only", None)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidType(f"the key {key!r} appears twice in one JSON object; send it once", key)
        obj[key] = value
    return obj


def parse_json_body(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidType("the body is not valid UTF-8; send UTF-8 encoded JSON", None) from None
    try:
        body = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise InvalidType(
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", None
        ) from None
    except RecursionError:
        raise InvalidType("the body is nested too deeply; flatten the JSON", None) from None
    except ValueError:  # e.g. an integer literal longer than Python parses (4,300 digits)
        raise InvalidType("the body holds a number too long to parse; send ordinary numbers", None) from None
    if "\\ud" not in text and "\\uD" not in text:
        return body  # valid UTF-8 cannot hold a lone surrogate; only a JSON escape can make one
    try:
        # \ud800-style escapes decode to strings no UTF-8 encoder (tokenizer, reply) accepts.
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidType(
            "the body holds an unpaired UTF-16 surrogate escape (e.g. \\ud800); send valid Unicode text", None
        ) from None
    except RecursionError:
        raise InvalidType("the body is nested too deeply; flatten the JSON", None) from None
    return body


def _too_large(max_bytes: int) -> AdapterError:
    return AdapterError(
        f"the body is larger than {max_bytes} bytes; send a smaller state or raise DECISION_ADAPTER_MAX_BODY_BYTES",
        None,
        status=413,
        code="request_entity_too_large",
    )


def _zstd_module() -> ModuleType | None:
    for name in ("compression.zstd", "backports.zstd"):  # Python 3.14+, else the backport
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def decode_body(
    raw: bytes, content_encoding: str | None, max_bytes: int, *, zstd_module: ModuleType | None = None
) -> bytes:
    """The body with its Content-Encoding undone (gzip; zstd where Python has it), size-limited."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            data: bytes = inflater.decompress(raw, max_bytes + 1)
        except zlib.error:
            raise InvalidType("the body is not valid gzip data; check Content-Encoding", "Content-Encoding") from None
        if len(data) > max_bytes or inflater.unconsumed_tail:
            raise _too_large(max_bytes)
        return data
    if encoding == "zstd":
        zstd = zstd_module or _zstd_module()
        if zstd is not None:
            try:
                data = zstd.ZstdDecompressor().decompress(raw, max_length=max_bytes + 1)
            except zstd.ZstdError:
                raise InvalidType(
                    "the body is not valid zstd data; check Content-Encoding", "Content-Encoding"
                ) from None
            if len(data) > max_bytes:
                raise _too_large(max_bytes)
            return data
    raise AdapterError(
        f"Content-Encoding {encoding} is not supported here; send the body uncompressed or gzip-compressed "
        "(typesafe-sdk: TypeSafeClient(compression=False))",
        "Content-Encoding",
        status=415,
        code="unsupported_media_type",
    )


def _bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class Serving:
    """What every dialect's routes use: the settings, the engine once loaded, the body, a context to run on."""

    clock = staticmethod(time.perf_counter)

    def __init__(self, settings: Settings, holder: _Holder, dialects: Registry = DIALECTS) -> None:
        self.settings = settings
        self.holder = holder
        self.dialects = dialects

    @property
    def engine(self) -> Engine:
        if not self.holder.ready.is_set() or self.holder.engine is None:
            raise NotReady("the model is still loading; retry shortly")
        return self.holder.engine

    def read_json(self, *, jev_route: bool = False) -> Any:
        """The request's JSON body: a JSON content type, Content-Encoding undone, size-limited."""
        mimetype = request.mimetype
        # Every route wants a JSON type: a browser page can post text/plain (or nothing) to a keyless
        # local adapter without a CORS preflight, but not application/json.
        if not (mimetype == "application/json" or mimetype.endswith("+json")):
            raise AdapterError(
                f"Content-Type {mimetype or '(none)'} is not supported; send application/json",
                "Content-Type",
                status=415,
                code="unsupported_media_type",
            )
        raw = decode_body(
            request.get_data(cache=False), request.headers.get("Content-Encoding"), self.settings.max_body_bytes
        )
        if not jev_route:
            body = parse_json_body(raw)
            facts = _facts()
            if facts is not None and request.path == INVOCATIONS:
                try:
                    facts.api = body_api(body, self.dialects).metric
                except AdapterError:
                    pass  # the dialect's parse says what is wrong with the body
            return body
        try:
            return parse_json_body(raw)
        except ValueError:  # an integer literal over Python's 4,300-digit limit
            raise InvalidType("a number in the body has too many digits; send at most 4,300", None) from None

    def run(self, work: Callable[[Engine], T]) -> tuple[T, float]:
        """``work(engine)`` on the context the gate admits the request to, inside its time limit: (its result,
        ms waited)."""
        facts = _facts()
        self.engine
        lanes = self.holder.lanes
        if lanes is None:  # set with the engine, before ready
            raise NotReady("the model is still loading; retry shortly")
        try:
            with lanes.admit() as (engine, waited_ms), engine.time_limit(self.settings.request_timeout_s):
                if facts is not None:
                    facts.queue_wait_ms = waited_ms
                result = work(engine)
        except Busy:
            if facts is not None:
                facts.busy = 1
            raise
        except TimedOut:
            if facts is not None:
                facts.time_limit_stops = 1
            raise
        if facts is not None:
            facts.read_work(result)
        return result, waited_ms

    def timing(self, timing: dict[str, Any], waited_ms: float, started: float) -> dict[str, Any]:
        return {"queue_wait_ms": waited_ms, **timing, "total_ms": (time.perf_counter() - started) * 1000.0}


# Routes no blueprint matched (404, 405) answer in the shape of the API their path belongs to.
def _unmatched_shape(path: str, dialects: Registry) -> Callable[[AdapterError], Response]:
    dialect = dialects.scoped(path)
    return project_error if dialect is None else dialect.error_response


def create_app(
    settings: Settings | None = None,
    *,
    load: str = "now",
    startup_record: StartupRecord | None = None,
    dialects: Registry = DIALECTS,
) -> Flask:
    """Build the app. ``load``: "now" (in this thread), "background" (serve /ping 503 meanwhile).

    ``startup_record``: where the worker records its start-up stages for the arbiter (serve.py).
    ``dialects``: the APIs it serves (apis/registry.py).
    """
    settings = settings or load_settings()
    app = Flask(__name__, static_folder=None)  # no static files: no /static route
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    gate = Gate(settings.max_queue, settings.queue_timeout_s, settings.retry_after_s)
    holder = _Holder(settings, gate, startup_record)
    app.extensions["decision_adapter"] = holder
    app.extensions["decision_adapter.gate"] = gate  # closed by the worker on SIGTERM (serve.py)
    app.extensions[SERVING] = serving = Serving(settings, holder, dialects)
    openapi_description = resources.files(__package__).joinpath("openapi.json").read_bytes()

    if load == "now":
        holder.load()
    elif load == "background":
        threading.Thread(target=holder.load_or_exit, name="model-loader", daemon=True).start()
    else:
        raise ValueError(f"load must be 'now' or 'background', not {load!r}")

    for blueprint in (invocations.blueprint, *dialects.blueprints()):
        app.register_blueprint(blueprint)

    endpoint = settings.endpoint_name

    @app.before_request
    def request_id() -> None:
        # First, so that a refused key or body still answers with the id its log lines carry.
        if dialects.is_api_path(request.path):
            g.request_facts = metrics.RequestFacts(
                choose_request_id(request.headers), api=dialects.metric(request.path) or "unknown"
            )

    @app.after_request
    def audit_trail(response: Response) -> Response:
        facts = _facts()
        if facts is None:
            return response
        response.headers[REQUEST_ID_HEADER] = facts.request_id
        if request.method == "POST" and dialects.metered(request.path):
            facts.finish(response.status_code)
            metrics.write(metrics.emf_line(facts, endpoint=endpoint))
        return response

    @app.after_request
    def wire_version(response: Response) -> Response:
        # Every answer names the version of the decision wire it speaks (decision_contract.wire), in the one
        # header SageMaker hands back to the caller of InvokeEndpoint (as CustomAttributes).
        response.headers[wire.VERSION_HEADER] = wire.WIRE_VERSION
        return response

    @app.before_request
    def authenticate() -> None:
        if settings.api_key is None or request.path in OPEN_ROUTES:
            return None
        if _bearer_token(request.headers.get("Authorization")) is None:
            raise Unauthorized("this endpoint needs an API key: send Authorization: Bearer <key>")
        if not _has_key(request.headers.get("Authorization")):
            raise Unauthorized("the API key is not valid")
        return None

    def details(engine: Engine) -> Body:
        return {
            "status": "ready",
            "model": engine.info["file"],
            "extra_buffer_types": engine.model.runtime.extra_buffers,
            "startup_probe": engine.startup_probe,
            "busy": gate.busy,
            "waiting": gate.waiting,
            "in_flight": gate.in_flight,
            "lanes": gate.lanes,
            **{k: engine.info.get(k) for k in ("order", "order_priors", "order_priors_jev", "calibration")},
        }

    @app.get("/ping")
    def ping() -> Response:
        if not holder.ready.is_set() or holder.engine is None:
            return json_response({"status": "loading"}, status=503)
        if settings.api_key is not None and _has_key(request.headers.get("Authorization")):
            return json_response(details(holder.engine))
        return json_response({"status": "ready"})

    @app.get("/status")
    def status() -> Response:
        return json_response(details(serving.engine))  # behind the key when one is configured (authenticate)

    def _has_key(header: str | None) -> bool:
        token = _bearer_token(header)
        key = settings.api_key
        return token is not None and key is not None and hmac.compare_digest(token.encode("utf-8"), key.encode("utf-8"))

    @app.get("/openapi.json")
    def openapi() -> Response:
        return Response(openapi_description, mimetype="application/json")

    @app.errorhandler(Exception)
    def error(exc: Exception) -> Response:
        # The app's own routes, and requests no route matched: blueprints answer for their own routes.
        shape = _unmatched_shape(request.path, dialects) if request.url_rule is None else project_error
        return shape(as_adapter_error(exc))

    return app
