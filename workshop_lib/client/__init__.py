"""The caller's side of an endpoint: ``EndpointClient`` (``endpoint``) over a transport
(``transport``: SageMaker runtime or a local URL), the errors an endpoint answers with
(``endpoint_errors``), the request helpers for the other schemas the adapter serves (``jev``: Jev's
System One API; ``openai_decisions``: the OpenAI Decisions API) and ``policy`` (thresholds and
fallbacks applied to a decision's probabilities). Every answer is read by the rules the adapter
writes it to, ``decision_contract.wire``.

The package re-exports what a caller of an endpoint needs, so ``from workshop_lib.client import
EndpointClient`` is the one import a notebook or a benchmark makes.
"""

from .endpoint import (
    BadRequest,
    ChatResult,
    Decision,
    EndpointBusy,
    EndpointClient,
    EndpointError,
    EndpointNotFound,
    EndpointRedirected,
    EndpointServerError,
    EndpointTimeout,
    EndpointUnreachable,
    InvalidDecision,
    InvalidResponse,
    LocalTransport,
    ResponseTooLarge,
    SageMakerTransport,
    UnprocessableRequest,
    WireVersionMismatch,
    decision,
    option_list,
    question,
)
from .transport import MAX_RESPONSE_BYTES, READ_TIMEOUT_S, Deadline, Reply

__all__ = [
    "MAX_RESPONSE_BYTES",
    "READ_TIMEOUT_S",
    "BadRequest",
    "ChatResult",
    "Deadline",
    "Decision",
    "EndpointBusy",
    "EndpointClient",
    "EndpointError",
    "EndpointNotFound",
    "EndpointRedirected",
    "EndpointServerError",
    "EndpointTimeout",
    "EndpointUnreachable",
    "InvalidDecision",
    "InvalidResponse",
    "LocalTransport",
    "Reply",
    "ResponseTooLarge",
    "SageMakerTransport",
    "UnprocessableRequest",
    "WireVersionMismatch",
    "decision",
    "option_list",
    "question",
]
