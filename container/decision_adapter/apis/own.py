"""This project's decision schema on ``POST /invocations``: one decision, or a shared-state batch.

* a decision: ``{"id", "state", "question", "options": [...], "temperature"?, "order"?,
  "min_answer_mass"?, "question_type"?}``
* a batch: ``{"id", "state", "questions": [{"id", "question", "options", "temperature"?, ...}, ...]}``;
  the state is evaluated once for all questions; ``order``, ``min_answer_mass`` and
  ``question_type`` beside ``questions`` are the defaults of its questions

``order`` (``as_given``, ``prior``, ``rotations``; order.py) defaults to ``DECISION_ADAPTER_ORDER``;
``min_answer_mass`` (0 to 1) to ``DECISION_ADAPTER_MIN_ANSWER_MASS``: an answer whose labels hold
less of the next-token probability says ``abstained`` (its probabilities are still given);
``question_type`` (``choice``, ``noul``, ``score``) picks the calibration profile, which applies
unless the request sets a ``temperature`` (served_calibration.py).

Options are ``{"id": "billing", "text": "Billing and refunds"}`` (``description``, the sample's
name, works as well as ``text``); a bare string is an option whose id and text are that string.
Wrong JSON types are 400s, well-typed but unusable values (unknown fields included) are 422s;
both come as ``{"error": {"code", "message", "field"}}`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal, Protocol, TypeVar, Union

from pydantic import AfterValidator, ConfigDict, Discriminator, Field, PlainValidator, Tag, ValidationError
from pydantic.json_schema import WithJsonSchema
from pydantic_core import ErrorDetails

from decision_contract import names

from .. import scoring
from ..answer_record import AnswerRecord
from ..caller_errors import AdapterError, InvalidValue
from ..prompt import DECISION_PROMPT, LETTERS, PROMPT_VERSION
from ..questions import (
    MAX_OPTIONS,
    MAX_QUESTIONS,
    MAX_TEMPERATURE,
    MIN_OPTIONS,
    MIN_TEMPERATURE,
    DecisionBatch,
    Option,
    Question,
)
from ..readouts import READOUT_METHODS
from ..seams import Scorer
from ..settings import Settings
from .api import Api
from .common import (
    TAG_OBJECT,
    TAG_STRING,
    ErrorWording,
    Id,
    NonBlank,
    Strict,
    adapter_error,
    type_error,
    type_name,
    value_error,
)
from .dialect import Body, Dialect, project_error_body

T = TypeVar("T")


def _state(value: object) -> object:
    if isinstance(value, (str, dict, list)):
        if value.strip() if isinstance(value, str) else value:
            return value
        raise value_error("must not be empty: pass the evidence the question is about")
    raise type_error(f"must be a string, an object or an array, got {type_name(value)}")


State = Annotated[
    Any,
    PlainValidator(_state),
    WithJsonSchema(
        {
            "description": "The evidence the question is about: text, or any JSON object or array (objects are "
            "rendered with sorted keys).",
            "anyOf": [
                {"type": "string", "minLength": 1, "pattern": r"\S"},
                {"type": "object", "minProperties": 1},
                {"type": "array", "minItems": 1},
            ],
        }
    ),
]


def _temperature(value: float) -> float:
    if not (math.isfinite(value) and MIN_TEMPERATURE < value <= MAX_TEMPERATURE):
        raise value_error(f"must be a finite number above {MIN_TEMPERATURE} and at most {MAX_TEMPERATURE}")
    return float(value)


Temperature = Annotated[
    float,
    AfterValidator(_temperature),
    Field(
        gt=MIN_TEMPERATURE,
        le=MAX_TEMPERATURE,
        description="Divides the option logits before the softmax (1 if absent).",
    ),
]


OrderMode = Annotated[
    Literal["as_given", "prior", "rotations"],
    Field(
        description="How option positions are kept out of the answer: as_given (the readout as sent), prior (divided "
        "by the content-free prior of the positions), rotations (averaged over the cyclic rotations of the "
        "options as given and reversed). Default: DECISION_ADAPTER_ORDER."
    ),
]
MinAnswerMass = Annotated[
    float,
    Field(
        ge=0,
        le=1,
        description=(
            "Below this share of the next-token probability on the answer labels the answer says abstained. Default: "
            "DECISION_ADAPTER_MIN_ANSWER_MASS."
        ),
    ),
]
ReadoutName = Annotated[
    str,
    Field(
        json_schema_extra={"enum": list(names.READOUTS)},
        description="How the answer is read: letters (the options listed under letters, the letters' logits read) or "
        "cloze (each option's own text scored as what follows the state and the question; order must be "
        "as_given or absent). Default: DECISION_ADAPTER_READOUT.",
    ),
]
Normalize = Annotated[
    str,
    Field(
        json_schema_extra={"enum": list(names.NORMALIZATIONS)},
        description="cloze: an option's score is the sum of its tokens' log-probabilities (sum), their mean (mean), or "
        "the sum minus the same text's after a content-free prompt (pmi, the default).",
    ),
]
QuestionType = Annotated[
    Literal["choice", "noul", "score"],
    Field(description="Picks the calibration profile <question_type>/<option-count band> (default choice)."),
]


class OptionObject(Strict):
    """An option: its id (returned, never shown to the model) and the text the model reads."""

    id: Id
    text: NonBlank | None = None
    description: str | None = Field(
        None, description="The published sample's name for text; an empty one leaves the id as all the model sees."
    )


def _option_kind(value: object) -> str | None:
    return TAG_STRING if isinstance(value, str) else TAG_OBJECT if isinstance(value, dict) else None


OptionItem = Annotated[
    Union[Annotated[Id, Tag(TAG_STRING)], Annotated[OptionObject, Tag(TAG_OBJECT)]],
    Discriminator(
        _option_kind, custom_error_type="invalid_type", custom_error_message="must be an object {id, text} or a string"
    ),
]
Options = Annotated[
    list[OptionItem],
    Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS, description="In the order answers list them; ids unique."),
]


class DecisionRequest(Strict):
    """One decision about one state."""

    model_config = ConfigDict(title="Decision")
    id: Id
    state: State
    question: NonBlank
    options: Options
    temperature: Temperature | None = None
    order: OrderMode | None = None
    min_answer_mass: MinAnswerMass | None = None
    question_type: QuestionType | None = None
    readout: ReadoutName | None = None
    normalize: Normalize | None = None


class BatchQuestion(Strict):
    id: Id
    question: NonBlank
    options: Options
    temperature: Temperature | None = None
    order: OrderMode | None = None
    min_answer_mass: MinAnswerMass | None = None
    question_type: QuestionType | None = None
    readout: ReadoutName | None = None
    normalize: Normalize | None = None


class BatchRequest(Strict):
    """Several questions about one state, evaluated once."""

    model_config = ConfigDict(title="Shared-state batch")
    id: Id
    state: State
    questions: Annotated[list[BatchQuestion], Field(min_length=1, json_schema_extra={"maxItems": MAX_QUESTIONS})]
    order: OrderMode | None = None
    min_answer_mass: MinAnswerMass | None = None
    question_type: QuestionType | None = None
    readout: ReadoutName | None = None
    normalize: Normalize | None = None


# -- parsing ------------------------------------------------------------------------------------------


def _count_message(field: str | None, error: ErrorDetails) -> AdapterError | None:
    n = error.get("ctx", {}).get("actual_length")
    if field is not None and field.endswith("options"):
        return InvalidValue(
            f"{field} has {n} options; a decision takes {MIN_OPTIONS} to {MAX_OPTIONS} (split larger "
            "sets into two decisions, e.g. a category first)",
            field,
        )
    return None


WORDING: dict[str, ErrorWording] = {"too_short": _count_message, "too_long": _count_message}


def options_of(items: Sequence[str | OptionObject], field: str) -> tuple[Option, ...]:
    """Validated option models as the engine's options; ids unique, text or description (not both differing)."""
    options: list[Option] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        item_field = f"{field}[{i}]"
        if isinstance(item, str):
            option = Option(item, item)
        else:
            if item.text is not None and item.description is not None and item.text != item.description:
                raise InvalidValue(
                    f"{item_field} has both text and description, and they differ; send one of them", item_field
                )
            text = item.text if item.text is not None else item.description
            if text is not None and not text.strip():
                text = None  # the sample accepts an empty description; the id is then all the model sees
            option = Option(item.id, text if text is not None else item.id)
        if option.id in seen:
            raise InvalidValue(
                f"{item_field}.id {option.id!r} is used twice; option ids must be unique", f"{item_field}.id"
            )
        seen.add(option.id)
        options.append(option)
    return tuple(options)


class DecisionFields(Protocol):
    """What ``question_of`` reads of a validated decision, whichever dialect's model it is."""

    @property
    def question(self) -> str: ...

    @property
    def options(self) -> Sequence[str | OptionObject]: ...

    @property
    def temperature(self) -> float | None: ...


def question_of(model: DecisionFields, field_prefix: str, qid: str, defaults: BatchRequest | None = None) -> Question:
    """The engine's question; ``order``, ``min_answer_mass`` and ``question_type`` from the model, else from
    ``defaults`` (a batch's own), else None (the server's defaults)."""

    def pick(name: str) -> Any:
        value = getattr(model, name, None)
        return getattr(defaults, name, None) if value is None else value

    options = options_of(model.options, f"{field_prefix}options")
    question = Question(
        qid,
        model.question,
        options,
        model.temperature,
        pick("order"),
        pick("min_answer_mass"),
        pick("question_type") or "choice",
        readout=pick("readout"),
        normalize=pick("normalize"),
    )
    if question.readout is not None or question.normalize is not None:
        scoring.check_readout(
            question,
            question.readout or names.LETTERS,
            question.normalize,
            lambda name: field_prefix + name if getattr(model, name, None) is not None else name,
        )
    return question


def parse_decision(body: dict[str, Any], max_questions: int = MAX_QUESTIONS) -> DecisionBatch:
    """A single decision or a shared-state batch, validated."""
    if "questions" in body:
        if "question" in body or "options" in body:
            raise InvalidValue(
                "send either question/options (one decision) or questions (a batch), not both", "questions"
            )
        try:
            batch = BatchRequest.model_validate(body)
        except ValidationError as exc:
            raise adapter_error(exc, messages=WORDING) from None
        if len(batch.questions) > max_questions:
            raise InvalidValue(f"questions has {len(batch.questions)} entries; send 1 to {max_questions}", "questions")
        questions: list[Question] = []
        seen: set[str] = set()
        for i, item in enumerate(batch.questions):
            if item.id in seen:
                raise InvalidValue(
                    f"questions[{i}].id {item.id!r} is used twice; question ids must be unique", f"questions[{i}].id"
                )
            seen.add(item.id)
            questions.append(question_of(item, f"questions[{i}].", item.id, batch))
        return DecisionBatch(batch.id, batch.state, tuple(questions), single=False)
    try:
        one = DecisionRequest.model_validate(body)
    except ValidationError as exc:
        raise adapter_error(exc, messages=WORDING) from None
    return DecisionBatch(one.id, one.state, (question_of(one, "", one.id),), single=True)


# -- answers ----------------------------------------------------------------------------------------


def results(batch: DecisionBatch, answers: list[AnswerRecord]) -> list[Body]:
    """One result per question, in request order, options in the order they were sent."""
    out = []
    for question, answer in zip(batch.questions, answers):
        n = len(question.options)
        out.append(
            {
                "id": question.id if not batch.single else batch.id,
                "option_ids": [o.id for o in question.options],
                "probabilities": list(answer.probabilities),
                "option_logits": optional_list(answer.option_logits),
                "answer_token_ids": list(answer.label_tokens),
                "answer_slots": list(LETTERS[:n]),
                "input_tokens": answer.input_tokens,
                "allowed_token_mass": answer.allowed_token_mass,
                "top_vocab_token": {"id": answer.top_token, "text": answer.top_token_text},
                "temperature": answer.temperature,
                "prompt_sha256": answer.prompt_sha256,
                "prompt_version": PROMPT_VERSION,
                "readout": READOUT_METHODS[answer.method],
                "question_eval_ms": answer.question_eval_ms,
                **order_fields(answer),
                # another readout than the letters names itself and adds its own fields
                **({"readout_name": answer.readout, **answer.extras} if answer.readout != names.LETTERS else {}),
                **prediction_set(answer, [o.id for o in question.options]),
            }
        )
    return out


def optional_list(values: Iterable[T] | None) -> list[T] | None:
    return None if values is None else list(values)


def order_fields(answer: AnswerRecord) -> Body:
    """What the core adds to each answer for the order mode, calibration and abstention."""
    return {
        "order": answer.order,
        "order_sensitivity": answer.order_sensitivity,
        "prior": optional_list(answer.prior),
        "calibration": answer.calibration,
        "abstained": answer.abstained,
        "min_answer_mass": answer.min_answer_mass,
    }


def prediction_set(answer: AnswerRecord, ids: list[str]) -> Body:
    """``{"prediction_set": [ids in request order]}`` where a kept calibration threshold applied, else nothing."""
    members = answer.prediction_set
    return {} if members is None else {"prediction_set": [ids[i] for i in members]}


TIMING_KEYS = ("tokenize_ms", "prefix_eval_ms", "evaluate_ms", "shared_prefix_tokens")


def answered_timing(timing: dict[str, Any]) -> dict[str, Any]:
    """The timing this API answers: the wait, the engine's ``TIMING_KEYS`` and the total."""
    return {k: timing[k] for k in ("queue_wait_ms", *TIMING_KEYS, "total_ms") if k in timing}


def decide(engine: Scorer, batch: DecisionBatch) -> tuple[list[AnswerRecord], dict[str, Any]]:
    """Score the batch in each question's order mode: (answers, the engine's timing in ms)."""
    return scoring.decide(engine, batch, DECISION_PROMPT)


def answered(engine: Scorer, batch: DecisionBatch) -> tuple[list[Body], dict[str, Any]]:
    """``decide``, its answers rendered as this API's results (without the model info and timing it adds)."""
    answers, timing = decide(engine, batch)
    return results(batch, answers), timing


def respond(batch: DecisionBatch, answers: list[AnswerRecord], timing: dict[str, Any], model: Body) -> Body:
    results_ = results(batch, answers)
    timing = answered_timing(timing)
    if batch.single:
        return {"result": {**results_[0], "timing": timing, "model": model}}
    return {"id": batch.id, "results": results_, "timing": timing, "model": model}


# -- errors, and the dialect -------------------------------------------------------------------------


def error(exc: AdapterError) -> tuple[Body, int]:
    return project_error_body(exc), exc.status


def parse(body: dict[str, Any], settings: Settings) -> DecisionBatch:
    return parse_decision(body, settings.max_shared_decisions)


DIALECT = Dialect("decision", parse, decide, respond, error)
API = Api("decision", "own", body=DIALECT, sniff=lambda body: "question" in body or "questions" in body)
