"""Errors the adapter reports to callers; the app maps them to HTTP in one place."""

from __future__ import annotations


class AdapterError(Exception):
    """A request the adapter will not serve, with the status and the field at fault."""

    status = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        field: str | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
        loc: tuple[str | int, ...] | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.loc = loc  # the field as a path (Jev's error shape), when the caller knows it exactly
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code

    def to_json(self) -> dict[str, object]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


class InvalidType(AdapterError):
    status = 400
    code = "invalid_type"


class InvalidValue(AdapterError):
    status = 422
    code = "invalid_value"


class ModelNotFound(AdapterError):
    """A request named a model this endpoint does not serve (Jev System One, the OpenAI Decisions API)."""

    status = 404
    code = "not_found_error"


class PromptTooLong(AdapterError):
    status = 422
    code = "prompt_too_long"


class Busy(AdapterError):
    """The context is taken and the waiting line is full (or the wait ran out)."""

    status = 503
    code = "busy"

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Unauthorized(AdapterError):
    """A missing or wrong API key (only when DECISION_ADAPTER_API_KEY is set)."""

    status = 401
    code = "authentication_error"


class NotReady(AdapterError):
    status = 503
    code = "not_ready"

    def __init__(self, message: str, retry_after_s: int = 5):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TimedOut(AdapterError):
    """The request held the model longer than DECISION_ADAPTER_REQUEST_TIMEOUT and was stopped."""

    status = 504
    code = "deadline_exceeded"
