"""What can go wrong calling an endpoint, as typed errors: each carries the HTTP status and the server's
error code, message and field, read from whichever error shape the server answered with."""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime

from ..errors import EndpointError


class BadRequest(EndpointError):
    """400, 413, 415 and other 4xx: the body is malformed or of the wrong type or size."""

    hint = "Fix the request body; the field named above is the one at fault"


class UnprocessableRequest(EndpointError):
    """422: well-formed, but values the model cannot use (duplicate ids, too many options, too long)."""

    hint = "Change the values named above; the server never truncates or guesses"


class EndpointNotFound(EndpointError):
    hint = "Check the endpoint name and region, and that the endpoint is InService"


class EndpointBusy(EndpointError):
    """503 (or 429): the model is busy or still loading. Retried before it is raised."""

    hint = "Retry later, raise the client's retries, or add instances to the endpoint"


class NoCapacity(EndpointError):
    """An endpoint scaled to zero: its inference component has no copy, so SageMaker refused the request
    (ValidationError, HTTP 400) without waiting. Raised at once, never retried here: an instance takes
    minutes to start, which ``retry_after`` estimates; the refusal itself is what makes the endpoint's
    step-scaling alarm add one."""

    hint = "The endpoint is starting an instance for its model; send the request again after retry_after seconds"


class EndpointServerError(EndpointError):
    hint = "The server failed on this request; read the endpoint's logs"


class EndpointTimeout(EndpointError):
    hint = (
        "SageMaker stops an invocation after 60 s: shorten the state, ask fewer questions per "
        "request, or use a faster (GPU) instance"
    )


class EndpointUnreachable(EndpointError):
    hint = "Check the URL or endpoint name, the network, and that the server is running"


class InvalidResponse(EndpointError):
    """A 2xx answer that is not what was asked for (not JSON, wrong shape, someone else's ids)."""

    hint = "Is this endpoint running the decision adapter (the standard image only answers chat)?"


class InvalidDecision(InvalidResponse):
    """A decision answer that is not one usable probability per option sent: a NaN, a value outside
    [0, 1], a sum other than 1, a missing, extra or reordered option id."""

    hint = "Do not act on this answer; the server's reply is not a distribution over the options sent"


class WireVersionMismatch(InvalidResponse):
    """The endpoint's adapter speaks another version of the decision wire (``decision_contract.wire``) than this
    client: the message names both and what to update."""

    hint = "The answer was not read"


class ResponseTooLarge(InvalidResponse):
    """The answer is larger than the client's ``max_response_bytes``; it was not read to its end."""

    hint = "Raise max_response_bytes if this server's answers really are this large"


class EndpointRedirected(EndpointError):
    """A 3xx: the client follows no redirects (a redirect could send the request to another host)."""

    hint = "Use the final URL yourself if you trust it; a decision server answers on its own URL"


# The words of SageMaker's refusal while an inference component has no copy ("Inference Component has no
# capacity to process this request. ApplicationAutoScaling may be in-progress ...").
NO_CAPACITY_WORDS = "has no capacity to process this request"
# Minutes SageMaker takes to give a scaled-to-zero endpoint an instance and a copy again (its guide: "several").
NO_CAPACITY_WAIT_S = 300.0


def is_no_capacity(code: str | None, message: str) -> bool:
    return code == "ValidationError" and NO_CAPACITY_WORDS in message.lower()


def error_class(status: int | None) -> type[EndpointError]:
    if status in (429, 503):
        return EndpointBusy
    if status == 404:
        return EndpointNotFound
    if status == 422:
        return UnprocessableRequest
    if status is not None and 400 <= status < 500:
        return BadRequest
    return EndpointServerError


def parse_error_body(body: bytes | str | None) -> tuple[str | None, str, str | None]:
    """(code, message, field) from the adapter's ``{"error": {...}}``, or an OpenAI-style error, or text."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else (body or "")
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        code = error.get("code")
        if not isinstance(code, str):  # llama-server: {"code": 400, "type": "invalid_request_error"}
            code = error.get("type")
        return code, str(error.get("message") or text), error.get("field")
    if isinstance(error, str):
        return None, error, None
    return None, text.strip()[:500] or "(empty body)", None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def error_from_response(
    status: int,
    body: bytes | str | None,
    *,
    endpoint: str,
    retry_after: str | None = None,
    log_stream_arn: str | None = None,
) -> EndpointError:
    code, message, field_ = parse_error_body(body)
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    return error_class(status)(
        message,
        status=status,
        code=code,
        field=field_,
        endpoint=endpoint,
        retry_after=parse_retry_after(retry_after),
        body=text,
        log_stream_arn=log_stream_arn,
    )


__all__ = [
    "NO_CAPACITY_WAIT_S",
    "BadRequest",
    "EndpointBusy",
    "EndpointError",
    "EndpointNotFound",
    "EndpointRedirected",
    "EndpointServerError",
    "EndpointTimeout",
    "EndpointUnreachable",
    "InvalidDecision",
    "InvalidResponse",
    "NoCapacity",
    "ResponseTooLarge",
    "UnprocessableRequest",
    "WireVersionMismatch",
    "error_class",
    "error_from_response",
    "is_no_capacity",
    "parse_error_body",
    "parse_retry_after",
]
