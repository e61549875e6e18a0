"""What the OpenAPI document's parts share: schema and response references, responses, and error bodies
narrowed to the codes a response may carry. ``openapi.py`` assembles the document; each API describes its
own paths with these (its record's ``openapi``, apis/api.py).
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]  # a part of the OpenAPI document

REF = "#/components/schemas/{model}"


def ref(name: str) -> Schema:
    return {"$ref": REF.format(model=name)}


def shared(name: str) -> Schema:
    """One of the document's shared responses (components.responses)."""
    return {"$ref": f"#/components/responses/{name}"}


# -- error bodies, narrowed to the codes a response may carry ----------------------------------------


def project(*codes: str) -> Schema:
    return {"allOf": [ref("Error"), {"properties": {"error": {"properties": {"code": {"enum": list(codes)}}}}}]}


def jev(*types: str) -> Schema:
    return {
        "allOf": [ref("JevError"), {"properties": {"detail": {"properties": {"error_type": {"enum": list(types)}}}}}]
    }


def openai(*codes: str, kind: str = "invalid_request_error") -> Schema:
    return {
        "allOf": [
            ref("OpenAIError"),
            {"properties": {"error": {"properties": {"type": {"const": kind}, "code": {"enum": list(codes)}}}}},
        ]
    }


SAMPLE = ref("SampleError")
UNREADABLE = (
    "the body is not JSON the adapter can read: malformed JSON, invalid UTF-8, NaN or Infinity, a key twice "
    "in one object, nesting too deep, a number too long, an unpaired surrogate escape, or compressed data "
    "that does not decompress."
)


def response(description: str, schema: Schema, headers: Schema | None = None) -> Schema:
    out: Schema = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def any_of(*options: Schema) -> Schema:
    return options[0] if len(options) == 1 else {"anyOf": list(options)}


def common(prefix: str) -> Schema:
    """The statuses every POST route of an API family answers alike, in its shapes (SageMaker, Jev, Decisions)."""
    names = {
        "SageMaker": (
            "SageMakerUnauthorized",
            "SageMakerTooLarge",
            "SageMakerUnsupportedMediaType",
            "InvocationInternalError",
            "NotReadyOrBusy",
            "InvocationDeadlineExceeded",
        ),
        "Jev": (
            "JevUnauthorized",
            "JevTooLarge",
            "JevUnsupportedMediaType",
            "JevInternalError",
            "JevBusy",
            "JevDeadlineExceeded",
        ),
        "Decisions": (
            "DecisionsUnauthorized",
            "DecisionsTooLarge",
            "DecisionsUnsupportedMediaType",
            "DecisionsInternalError",
            "DecisionsBusy",
            "DecisionsDeadlineExceeded",
        ),
    }[prefix]
    return {status: shared(name) for status, name in zip(("401", "413", "415", "500", "503", "504"), names)}


def body(schema: str) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": ref(schema)}}}


def ok(description: str, schema: str) -> Schema:
    return response(description, ref(schema))
