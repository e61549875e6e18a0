"""The adapter's OpenAPI document, generated from the dialects' pydantic models.

    python -m decision_adapter.openapi           # writes openapi.json next to this module
    python -m decision_adapter.openapi --check   # exit 1 when the file differs from a fresh generation

Request and answer schemas come from the models (``apis/``); this module adds what only the
routes know: the operations, their statuses and headers, and which error codes each may send. Each
registered API describes its own paths (its record's ``openapi``, apis/registry.py); this module the
SageMaker routes and its own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import __name__ as _package
from .apis import chat, decisions, meta, own, own_answers, sample, systemone_answers, systemone_requests
from .apis.openapi_parts import (
    REF,
    SAMPLE,
    UNREADABLE,
    any_of,
    body,
    common,
    jev,
    ok,
    openai,
    project,
    ref,
    response,
    shared,
)
from .apis.registry import DIALECTS, Registry

FILE = Path(__file__).with_name("openapi.json")

MODELS: list[type[BaseModel]] = [
    own.DecisionRequest,
    own.BatchRequest,
    own_answers.DecisionResponse,
    own_answers.BatchResponse,
    own_answers.Error,
    sample.SampleDecisionRequest,
    sample.SampleDecisionsRequest,
    sample.SampleSharedResponse,
    sample.SampleError,
    chat.ChatCompletionRequest,
    chat.ChatCompletion,
    chat.ChatCompletionChunk,
    systemone_requests.SystemOneRequest,
    systemone_answers.SystemOneResponse,
    systemone_answers.ModelList,
    systemone_answers.JevValidationErrorBody,
    systemone_answers.JevError,
    decisions.DecisionsRequest,
    decisions.DecisionsResponse,
    decisions.OpenAIError,
    meta.PingReady,
    meta.PingLoading,
    meta.Status,
    meta.OpenAIModelList,
]


def schemas() -> dict[str, object]:
    _, generated = models_json_schema([(model, "validation") for model in MODELS], ref_template=REF)
    found = generated["$defs"]
    found["SystemOneInvocation"] = {
        "title": "Jev System One (on /invocations)",
        "description": "A System One body sent to /invocations: told apart by 'questions' being an object.",
        "allOf": [ref("SystemOneRequest"), {"not": {"required": ["messages"]}}],
    }
    found["InvocationRequest"] = {
        "description": "Seven bodies share /invocations and are told apart by shape: 'messages' makes a chat "
        "request; 'decision' or 'decisions' the published sample's format; 'questions' as an object "
        "a System One request; 'input' with 'questions' as an array an OpenAI Decisions request; "
        "'questions' as an array a shared-state batch; 'question' a single decision.",
        "oneOf": [
            ref("DecisionRequest"),
            ref("BatchRequest"),
            ref("ChatCompletionRequest"),
            ref("SystemOneInvocation"),
            ref("SampleDecisionRequest"),
            ref("SampleDecisionsRequest"),
            ref("DecisionsRequest"),
        ],
    }
    found["InvocationResponse"] = {
        "description": "The answer's shape follows the request's: decision, batch, chat, System One, OpenAI "
        "Decisions or the sample's.",
        "anyOf": [
            ref("DecisionResponse"),
            ref("BatchResponse"),
            ref("ChatCompletion"),
            ref("SystemOneResponse"),
            ref("DecisionsResponse"),
            ref("SampleSharedResponse"),
        ],
    }
    return dict(sorted(found.items()))


RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }
}
WWW_AUTHENTICATE = {
    "WWW-Authenticate": {"description": "Always 'Bearer'.", "required": True, "schema": {"type": "string"}}
}
TOO_LARGE = "The body (after decompression) is larger than DECISION_ADAPTER_MAX_BODY_BYTES (1,000,000 by default)."
MEDIA = (
    "The Content-Type is not JSON (application/json or a +json type), or the Content-Encoding is neither "
    "identity, gzip nor (where the Python runtime has it) zstd."
)
INTERNAL = "The adapter failed on this request; details are in the endpoint's logs, never in the response."
DEADLINE = (
    "The request ran longer than DECISION_ADAPTER_REQUEST_TIMEOUT and was cut off; send a shorter state, "
    "fewer questions or fewer tokens to generate."
)
UNAUTHORIZED = (
    "Only when the adapter runs with DECISION_ADAPTER_API_KEY: the Authorization header is missing or "
    "holds another key."
)
BUSY = (
    "not_ready: the model is still loading. busy: one request holds the model and the waiting line "
    "(DECISION_ADAPTER_MAX_QUEUE) is full, or the wait ran past DECISION_ADAPTER_QUEUE_TIMEOUT. Retry after the "
    "Retry-After seconds, or add instances."
)


def responses() -> dict[str, object]:
    return {
        "SageMakerUnauthorized": response(
            UNAUTHORIZED + " The body carries both error shapes, since it is sent before the body is read.",
            {"allOf": [project("authentication_error"), jev("authentication_error")]},
            WWW_AUTHENTICATE,
        ),
        "JevUnauthorized": response(UNAUTHORIZED, jev("authentication_error"), WWW_AUTHENTICATE),
        "DecisionsUnauthorized": response(UNAUTHORIZED, openai("invalid_api_key"), WWW_AUTHENTICATE),
        "SageMakerTooLarge": response(TOO_LARGE, project("request_entity_too_large")),
        "JevTooLarge": response(TOO_LARGE, jev("request_too_large")),
        "DecisionsTooLarge": response(TOO_LARGE, openai("request_too_large")),
        "SageMakerUnsupportedMediaType": response(MEDIA, project("unsupported_media_type")),
        "JevUnsupportedMediaType": response(MEDIA, jev("invalid_request_error")),
        "DecisionsUnsupportedMediaType": response(MEDIA, openai("unsupported_media_type")),
        "NotReadyOrBusy": response(
            BUSY,
            any_of(project("busy", "not_ready"), SAMPLE, openai("busy", "not_ready", kind="server_error")),
            RETRY_AFTER,
        ),
        "JevBusy": response(BUSY, jev("overloaded_error"), RETRY_AFTER),
        "DecisionsBusy": response(BUSY, openai("busy", "not_ready", kind="server_error"), RETRY_AFTER),
        "NotReady": response(
            "The model is still loading; retry after the Retry-After seconds.", project("not_ready"), RETRY_AFTER
        ),
        "InternalError": response(INTERNAL, project("internal_error")),
        "InvocationInternalError": response(
            INTERNAL,
            any_of(project("internal_error"), jev("api_error"), SAMPLE, openai("internal_error", kind="server_error")),
        ),
        "JevInternalError": response(INTERNAL, jev("api_error")),
        "DecisionsInternalError": response(INTERNAL, openai("internal_error", kind="server_error")),
        "InvocationDeadlineExceeded": response(
            DEADLINE,
            any_of(project("deadline_exceeded"), jev("api_error"), SAMPLE, openai("timeout", kind="server_error")),
        ),
        "JevDeadlineExceeded": response(DEADLINE, jev("api_error")),
        "DecisionsDeadlineExceeded": response(DEADLINE, openai("timeout", kind="server_error")),
        "NotFound": response(
            "No such route (any path not described here). Paths under /v1/decisions answer in OpenAI's shape, "
            "others under /v1/ in Jev's (error_type not_found_error), the rest in the project's (code not_found).",
            any_of(project("not_found"), jev("not_found_error"), openai("not_found")),
        ),
        "MethodNotAllowed": response(
            "The path exists but not with this method (for example GET /invocations), in the shape of the path's "
            "API as for 404.",
            any_of(project("method_not_allowed"), jev("invalid_request_error"), openai("method_not_allowed")),
        ),
        "InvocationBadRequest": response(
            "A field has the wrong JSON type (code invalid_type, field names it), or a chat body asks for what the "
            "adapter does not do (unsupported_parameter: tools, n above 1, JSON output), or the cloze readout is asked "
            "for what it cannot take (invalid_value: an order that moves the options, an unknown normalize). Also: "
            + UNREADABLE
            + " A body in "
            'the published sample\'s format gets its error shape, {"error": "..."}, with 400 for anything wrong '
            "in it (wrong types and values, unknown fields, states that differ, too many decisions, a prompt too "
            "long). An OpenAI Decisions body gets OpenAI's shape, with 400 for anything wrong in it.",
            any_of(
                project("invalid_type", "invalid_value", "unsupported_parameter", "bad_request"),
                SAMPLE,
                openai(
                    "invalid_type",
                    "invalid_value",
                    "missing_required_parameter",
                    "unknown_parameter",
                    "unsupported_content",
                    "context_length_exceeded",
                    "bad_request",
                ),
            ),
        ),
    }


def paths(dialects: Registry = DIALECTS) -> dict[str, object]:
    """SageMaker's and the app's own paths, with each registered API's in between (its record's part)."""
    return {
        "/ping": {
            "get": {
                "operationId": "ping",
                "tags": ["SageMaker"],
                "summary": "Health check",
                "description": "SageMaker's health check: 200 once the model is loaded and has scored one decision at "
                'start-up, 503 while it loads. Never needs an API key, and says only {"status": '
                '"ready"} unless the adapter runs with DECISION_ADAPTER_API_KEY and the caller sends '
                "the key; then it adds what GET /status tells.",
                "security": [],
                "responses": {
                    "200": ok("Ready.", "PingReady"),
                    "503": ok("The model is still loading (no Retry-After here; SageMaker polls).", "PingLoading"),
                    "500": shared("InternalError"),
                },
            }
        },
        "/status": {
            "get": {
                "operationId": "status",
                "tags": ["SageMaker"],
                "summary": "What runs here, and whether it is busy",
                "description": "The model file, whether llama.cpp's extra buffer types are in use, the start-up "
                "decision, whether a request holds the model and how many wait. Needs the API key when "
                "the adapter runs with DECISION_ADAPTER_API_KEY (without one it is as open as "
                "/invocations). Not reachable through SageMaker's InvokeEndpoint.",
                "responses": {
                    "200": ok("Ready.", "Status"),
                    "401": shared("SageMakerUnauthorized"),
                    "503": shared("NotReady"),
                    "500": shared("InternalError"),
                },
            }
        },
        "/invocations": {
            "post": {
                "operationId": "invoke",
                "tags": ["SageMaker"],
                "summary": "Score a decision, a shared-state batch or a System One request, or generate a chat answer",
                "description": "SageMaker's inference route. The body is validated before it waits for the model (one "
                "request at a time holds it). Content-Type must be application/json or another +json "
                "type; the body may be gzip-compressed (Content-Encoding: gzip; zstd where the runtime "
                "has it). A System One body is answered, and its errors reported, exactly as on POST "
                "/v1/systemone, and an OpenAI Decisions body as on POST /v1/decisions (errors in OpenAI's "
                'shape). Bodies in the published SemIf sample\'s format ({"decision": ...} or '
                '{"decisions": [...]}) get the sample\'s answers and errors.',
                "requestBody": body("InvocationRequest"),
                "responses": {
                    "200": ok("The answer, shaped after the request.", "InvocationResponse"),
                    "400": shared("InvocationBadRequest"),
                    "404": response(
                        "Only with DECISION_ADAPTER_STRICT_MODEL_NAMES=on: a System One, OpenAI "
                        "Decisions or chat request names a model this endpoint does not serve.",
                        any_of(jev("not_found_error"), openai("model_not_found"), project("model_not_found")),
                    ),
                    "422": response(
                        "The body is well typed but cannot be served: a required field is missing, a field is unknown, "
                        "a value is out of range, blank or repeated (invalid_value), or the prompt does not fit the "
                        "context (prompt_too_long). A System One request gets Jev's list of problems instead, and its "
                        "JSON and type errors come back as 422 too.",
                        any_of(project("invalid_value", "prompt_too_long"), ref("JevValidationErrorBody")),
                    ),
                    **common("SageMaker"),
                },
            }
        },
        **dialects.openapi_paths(),
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "tags": ["Meta"],
                "summary": "This description",
                "description": "The OpenAPI description the adapter ships with, byte for byte. Never needs an API key.",
                "security": [],
                "responses": {"200": response("This document.", {"type": "object"}), "500": shared("InternalError")},
            }
        },
    }


def document(dialects: Registry = DIALECTS) -> dict[str, object]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Decision adapter",
            "version": "0.1.0",
            "summary": "Decision scoring on llama.cpp for SageMaker endpoints, plus Jev's System One API and the "
            "OpenAI Decisions API.",
            "description": (
                "The HTTP interface of the decision adapter (container/decision_adapter), the entrypoint of the "
                "workshop's child image of the AWS llama.cpp DLC. Generated from the adapter's models by "
                f"`python -m {_package}.openapi`.\n\n"
                "A decision declares its options; the answer is one probability per option id, read from the "
                "model's logits at the answer slots, never parsed from generated text. The same model also answers "
                "OpenAI-style chat requests, Jev's System One questions and OpenAI Decisions questions.\n\n"
                'Errors are JSON. The project\'s routes and bodies use {"error": {"code", "message", '
                '"field"}}: wrong JSON types are 400, well-typed but unusable values (unknown fields included) '
                "422. Jev's routes (/v1/systemone, /v1/models) and System One bodies on /invocations use Jev's "
                '{"detail": ...} shapes, /v1/decisions OpenAI\'s {"error": {"message", "type", "param", '
                '"code"}}, as does /v1/chat/completions. Paths not described here answer 404, and described paths '
                "with another method 405 "
                '(components.responses NotFound and MethodNotAllowed). Every response that means "come back '
                "later\" (503) carries Retry-After, except /ping's.\n\n"
                "Every answer and error of the API routes (/invocations, /v1/*) carries request_id at its top "
                "level (System One's: x_request_id, as Jev's spec wants extra fields x_-prefixed) and the header "
                "X-Request-Id: SageMaker's inference id (the X-Amzn-SageMaker-Inference-Id "
                "header, set from InvokeEndpoint's InferenceId), else the caller's X-Request-Id (up to 128 safe "
                "characters), else one the adapter makes. The answer schemas allow fields they do not list; "
                "request_id is one.\n\n"
                "With DECISION_ADAPTER_API_KEY set, every route except GET /ping and GET /openapi.json needs "
                "Authorization: Bearer <key>; without it the header is ignored. GET /ping says only whether the "
                "adapter is ready, except to a caller holding the key; GET /status gives the details (the model, "
                "whether it is busy) and needs the key like every other route."
            ),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "SageMaker", "description": "The SageMaker hosting contract: /ping and /invocations."},
            {"name": "Jev", "description": "Jev's System One API on the same model."},
            {"name": "OpenAI", "description": "The OpenAI Decisions API and chat completions on the same model."},
            {"name": "Meta", "description": "About the interface itself."},
        ],
        "security": [{}, {"apiKey": []}],
        "paths": paths(dialects),
        "components": {
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "Needed only when the adapter runs with DECISION_ADAPTER_API_KEY set; then a missing "
                    "or wrong key gets 401 with WWW-Authenticate: Bearer.",
                }
            },
            "schemas": schemas(),
            "responses": responses(),
        },
    }


def render() -> bytes:
    return (json.dumps(document(), indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {_package}.openapi", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare the file with a fresh generation")
    args = parser.parse_args(argv)
    fresh = render()
    if args.check:
        if FILE.read_bytes() != fresh:
            print(f"{FILE.name} is stale; run python -m {_package}.openapi", file=sys.stderr)
            return 1
        return 0
    FILE.write_bytes(fresh)
    print(f"wrote {FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
