"""The published SemIf sample's format on ``POST /invocations`` (aws-samples/sagemaker-genai-hosting-examples,
03-features/semif-decision-model/server.py).

``{"decision": {"id", "state", "question", "options": [{"id", "description"}]}}`` or
``{"decisions": [...]}``: exactly one of the two and no other top-level field, and in
``decisions`` one exact state shared by all (it is evaluated once) and unique ids. Answers
``{"result": ...}`` or ``{"results": [...], "timing": {...}}`` with the sample's names first;
errors ``{"error": "..."}``: 400 for anything wrong with the body, 503 retryable when busy.

The sample's fields are all it takes: the order mode, the abstention threshold and the calibration
follow the server's settings (``DECISION_ADAPTER_ORDER``, ``DECISION_ADAPTER_MIN_ANSWER_MASS``,
calibration.json's ``choice`` profiles), and its answers carry the same fields as the project's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationError

from ..answer_record import AnswerRecord
from ..caller_errors import AdapterError, Busy, InvalidType, InvalidValue, PromptTooLong
from ..questions import MAX_QUESTIONS, DecisionBatch
from ..settings import Settings
from . import own
from .answers import ModelInfo, Timing
from .api import Api
from .common import Answer, Id, NonBlank, Strict, adapter_error, type_name
from .dialect import Body, Dialect
from .own import WORDING, Options, State, Temperature, decide, question_of
from .own_answers import DecisionResult

SAMPLE_FIELDS = ("decision", "decisions")
SAMPLE_BUSY = "model is busy; retry the request"


class SampleDecision(Strict):
    """A decision as the sample writes it (options with ``description``; ``text`` works too)."""

    id: Id
    state: State
    question: NonBlank
    options: Options
    temperature: Temperature | None = None


class SampleDecisionRequest(Strict):
    model_config = ConfigDict(title="Sample decision")
    decision: SampleDecision


class SampleDecisionsRequest(Strict):
    model_config = ConfigDict(title="Sample shared-state decisions")
    decisions: Annotated[list[SampleDecision], Field(min_length=1, json_schema_extra={"maxItems": MAX_QUESTIONS})]


def _validated(model: type[SampleDecision], value: object, field: str) -> SampleDecision:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise adapter_error(exc, prefix=field + ".", messages=WORDING) from None


def parse_sample(body: dict[str, Any], max_decisions: int = MAX_QUESTIONS) -> DecisionBatch:
    """The sample's body as a batch; states that differ are refused at the first differing index,
    never scored one by one behind the caller's back."""
    extra = sorted(set(body) - set(SAMPLE_FIELDS))
    if extra:
        raise InvalidValue(
            f"unsupported request fields {extra}; a request holds exactly one of decision or decisions", extra[0]
        )
    if len(set(body) & set(SAMPLE_FIELDS)) != 1:
        raise InvalidValue("send exactly one of decision (one object) or decisions (a list)", None)
    if "decision" in body:
        item = body["decision"]
        if not isinstance(item, dict):
            raise InvalidType(f"decision must be an object, got {type_name(item)}", "decision")
        one = _validated(SampleDecision, item, "decision")
        return DecisionBatch(one.id, one.state, (question_of(one, "decision.", one.id),), single=True)
    items = body["decisions"]
    if not isinstance(items, list) or not items:
        raise InvalidType("decisions must be a non-empty list of decision objects", "decisions")
    if len(items) > max_decisions:
        raise InvalidValue(
            f"decisions has {len(items)} items; send at most {max_decisions} per request "
            "(DECISION_ADAPTER_MAX_SHARED_DECISIONS)",
            "decisions",
        )
    questions, seen, state = [], set(), None
    for i, item in enumerate(items):
        field = f"decisions[{i}]"
        if not isinstance(item, dict):
            raise InvalidType(f"{field} must be a decision object, got {type_name(item)}", field)
        one = _validated(SampleDecision, item, field)
        if i == 0:
            state = one.state
        elif one.state != state:
            raise InvalidValue(
                f"{field}.state differs from decisions[0].state; a shared request scores one "
                "exact state (send decisions about other states as separate requests)",
                f"{field}.state",
            )
        if one.id in seen:
            raise InvalidValue(f"{field}.id {one.id!r} is used twice; decision ids must be unique", f"{field}.id")
        seen.add(one.id)
        questions.append(question_of(one, f"{field}.", one.id))
    return DecisionBatch("decisions", state, tuple(questions), single=False)


def respond(batch: DecisionBatch, answers: list[AnswerRecord], timing: dict[str, Any], model: Body) -> Body:
    results, timing = own.results(batch, answers), own.answered_timing(timing)
    if batch.single:
        return {"result": {**results[0], "timing": timing, "model": model}}
    return {
        "results": [{**result, "model": model} for result in results],
        "timing": {
            "batch_size": len(results),
            "prefix_tokens": timing["shared_prefix_tokens"],
            "prefill_seconds": timing["prefix_eval_ms"] / 1000.0,
            "suffix_forward_seconds": (timing["evaluate_ms"] - timing["prefix_eval_ms"]) / 1000.0,
            "total_seconds": timing["total_ms"] / 1000.0,
            **timing,
        },
    }


def error_body(exc: AdapterError) -> tuple[Body, int]:
    """The sample's ``{"error": "..."}``: 400 for anything wrong with the body, 503 retryable when busy."""
    if isinstance(exc, Busy):
        return {"error": SAMPLE_BUSY, "retryable": True, "detail": exc.message}, 503
    message = exc.message + (f" (field: {exc.field})" if exc.field else "")
    status = 400 if isinstance(exc, (InvalidType, InvalidValue, PromptTooLong)) else exc.status
    return {"error": message}, status


# -- answers, described -------------------------------------------------------------------------------


class SampleTiming(Answer):
    batch_size: int = Field(ge=1)
    prefix_tokens: int = Field(ge=0)
    prefill_seconds: float = Field(ge=0)
    suffix_forward_seconds: float
    total_seconds: float = Field(ge=0)


class SampleResult(DecisionResult):
    model: ModelInfo


class SampleSharedTiming(SampleTiming, Timing):
    pass


class SampleSharedResponse(Answer):
    model_config = ConfigDict(title="Sample shared-state answer")
    results: list[SampleResult] = Field(min_length=1, description="One result per decision, in request order.")
    timing: SampleSharedTiming


class SampleError(Answer):
    """The published sample's error shape."""

    error: str
    retryable: bool | None = None
    detail: str | None = None


def parse(body: Any, settings: Settings) -> DecisionBatch:
    return parse_sample(body, settings.max_shared_decisions)


DIALECT = Dialect("sample", parse, decide, respond, error_body)
API = Api("sample", "sample", body=DIALECT, sniff=lambda body: "decision" in body or "decisions" in body)
