"""Jev System One's requests (``POST /v1/systemone``, and on ``/invocations``): the pydantic models, and
parsing a body into a ``JevRequest``.

Validation failures are collected into one 422 ``{"detail": [{"loc", "msg", "type"}]}``, pydantic's own
error list (the models below), with locations under ``body``. Unknown top-level fields are ignored, as
Jev's servers do (its SDK sends options a server may not know); a question refuses unknown fields other
than ``x_`` extensions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    StringConstraints,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import WithJsonSchema
from pydantic_core import ErrorDetails, PydanticCustomError

from ..caller_errors import InvalidValue
from ..prompt import render_json
from ..questions import MAX_CHOICE_OPTIONS, MAX_QUESTIONS, MAX_SCORE_LEVELS, MIN_CHOICE_OPTIONS, MIN_SCORE_LEVELS
from .common import NormalizationChoice, ReadoutChoice
from .dialect import Body
from .typed import MODEL_ALIAS

QUESTION_TYPES = ("noul", "choice", "score", "multi_label")
DEFAULT_THRESHOLD = 0.7  # a multi_label label is selected at or above it (as Jev's clients read it)
MAX_KEY_CHARS = 1024


class JevValidationError(InvalidValue):
    """One or more problems with a System One request, each with its location."""

    def __init__(self, errors: list[Body]):
        first = errors[0]
        super().__init__(
            "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:5]), None, loc=tuple(first["loc"])
        )
        self.errors = errors


@dataclass(frozen=True)
class JevQuestion:
    key: str
    type: str
    instructions: object  # None, a string, an object or an array
    names: tuple[str, ...]  # choice: option names; noul: ("true", "false"); score: "0".."n-1"
    descriptions: tuple[object, ...]  # one per name: None, a string, an object or an array
    threshold: float | None = None  # multi_label: a label is selected at or above it


@dataclass(frozen=True)
class JevRequest:
    model: str | None
    state: object
    questions: tuple[JevQuestion, ...]
    order: str | None = None  # x_order; None: DECISION_ADAPTER_ORDER
    min_answer_mass: float | None = None  # x_min_answer_mass; None: DECISION_ADAPTER_MIN_ANSWER_MASS
    readout: str | None = None  # x_readout; None: DECISION_ADAPTER_READOUT
    normalize: str | None = None  # x_normalize (cloze); None: pmi


# -- the request, as models -------------------------------------------------------------


def _where(loc: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in loc[1:]) or "body"


def _kind(value: object) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _content(value: object) -> object:
    if isinstance(value, (str, dict, list)):
        return value
    raise PydanticCustomError(
        "content_type", "must be a string, an object or an array, got {kind}", {"kind": _kind(value)}
    )


_CONTENT_SCHEMA = {
    "description": "Text, or any JSON object or array (rendered as JSON).",
    "type": ["string", "object", "array"],
}
JevContent = Annotated[Any, PlainValidator(_content), WithJsonSchema(_CONTENT_SCHEMA)]
JevContentOrNull = Annotated[
    Any,
    PlainValidator(lambda v: v if v is None else _content(v)),
    WithJsonSchema({**_CONTENT_SCHEMA, "type": ["string", "object", "array", "null"]}),
]


class _Question(BaseModel):
    """A question's fields; ``x_`` extensions are accepted (and not used), any other unknown field refused."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, json_schema_extra={"patternProperties": {"^x_": {}}}
    )
    instructions: JevContentOrNull = None

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x_"))}
        return data


class NoulCriteria(BaseModel):
    """What yes (true) and no (false) mean; either may be left out."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    true: JevContentOrNull = None
    false: JevContentOrNull = None


class NoulQuestion(_Question):
    """A yes/no question; answered with the probability of yes."""

    model_config = ConfigDict(title="noul question")
    type: Literal["noul"]
    criteria: NoulCriteria | None = None

    @model_validator(mode="after")
    def _needs_something_to_ask(self) -> NoulQuestion:
        described = self.criteria is not None and (self.criteria.true is not None or self.criteria.false is not None)
        blank = self.instructions is None or (isinstance(self.instructions, str) and not self.instructions.strip())
        if not described and blank:
            raise PydanticCustomError(
                "missing", "a noul needs instructions or a described outcome in criteria", {"at": "instructions"}
            )
        return self


OptionName = Annotated[str, StringConstraints(min_length=1)]


class ChoiceQuestion(_Question):
    """One of named options; each name maps to its description (or null)."""

    model_config = ConfigDict(title="choice question")
    type: Literal["choice"]
    criteria: Annotated[
        dict[OptionName, JevContentOrNull], Field(min_length=MIN_CHOICE_OPTIONS, max_length=MAX_CHOICE_OPTIONS)
    ]


class ScoreQuestion(_Question):
    """A level on an ordered scale, level 0 first."""

    model_config = ConfigDict(title="score question")
    type: Literal["score"]
    criteria: Annotated[list[JevContent], Field(min_length=MIN_SCORE_LEVELS, max_length=MAX_SCORE_LEVELS)]


Label = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEY_CHARS)]


class MultiLabelQuestion(_Question):
    """Several labels, each read as its own yes/no on the state; answered with P(yes) per label."""

    model_config = ConfigDict(title="multi_label question")
    type: Literal["multi_label"]
    labels: Annotated[list[Label], Field(min_length=1, max_length=MAX_CHOICE_OPTIONS)]
    threshold: Annotated[float, Field(ge=0, le=1)] = DEFAULT_THRESHOLD

    @model_validator(mode="after")
    def _distinct_labels(self) -> MultiLabelQuestion:
        if len(set(self.labels)) != len(self.labels):
            raise PydanticCustomError("value_error", "every label must be distinct", {"at": "labels"})
        return self


def _question_type(value: object) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) and kind in QUESTION_TYPES else None


JevQuestionModel = Annotated[
    Union[
        Annotated[NoulQuestion, Tag("noul")],
        Annotated[ChoiceQuestion, Tag("choice")],
        Annotated[ScoreQuestion, Tag("score")],
        Annotated[MultiLabelQuestion, Tag("multi_label")],
    ],
    Discriminator(_question_type),
]
QuestionKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEY_CHARS)]


def _no_assets(value: object) -> object:
    if value in (None, {}):
        return value
    raise PydanticCustomError("unsupported", "images are not supported: this endpoint serves a text model")


class SystemOneRequest(BaseModel):
    """Typed questions about one state."""

    # Unknown top-level fields are ignored, as Jev's servers do.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, title="Jev System One request")
    model: str | None = Field(None, description=f"{MODEL_ALIAS!r}, the served model's name, or absent.")
    state: JevContent
    assets: Annotated[
        Any,
        PlainValidator(_no_assets),
        WithJsonSchema({"type": ["object", "null"], "maxProperties": 0, "description": "Images: not supported."}),
    ] = None
    questions: Annotated[dict[QuestionKey, JevQuestionModel], Field(min_length=1, max_length=MAX_QUESTIONS)]
    x_order: Literal["as_given", "prior", "rotations"] | None = Field(
        None, description="This adapter's extension: the order mode (default DECISION_ADAPTER_ORDER)."
    )
    x_min_answer_mass: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None,
        description="This adapter's extension: the abstention threshold (default DECISION_ADAPTER_MIN_ANSWER_MASS).",
    )
    x_readout: ReadoutChoice | None = Field(
        None,
        description="This adapter's extension: the readout, letters or cloze (each option's own words scored "
        "as the answer; x_order must then be as_given or absent). Default DECISION_ADAPTER_READOUT.",
    )
    x_normalize: NormalizationChoice | None = Field(
        None, description="This adapter's extension, cloze only: pmi (default), sum or mean."
    )


MAX_ERRORS = 20  # listed per response: a small body with thousands of faults must not get a huge answer
MAX_LOC_CHARS = 100
_MESSAGES = {
    ("state", "missing"): "Field required: the evidence the questions are about",
    ("questions", "missing"): "Field required: an object of questions keyed by id",
}


def _jev_item(error: ErrorDetails) -> Body:
    """One pydantic error as Jev's ``{"loc", "msg", "type"}``: discriminator tags dropped, our wording."""
    loc: list[str | int] = list(error["loc"])
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if len(loc) >= 3 and loc[0] == "questions" and loc[2] in QUESTION_TYPES:
        del loc[2]  # the discriminator's tag
    if loc and loc[-1] == "[key]":
        loc.pop()
        kind, msg = (
            ("string_type" if len(loc) == 2 else "string_too_short"),
            (
                f"a question id must be a non-empty string of at most {MAX_KEY_CHARS} characters"
                if len(loc) == 2
                else "an option name must not be empty"
            ),
        )
    elif kind == "union_tag_not_found" or kind == "union_tag_invalid":
        qtype = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict):
            kind, msg = "dict_type", f"must be an object {{type, instructions, criteria}}, got {_kind(value)}"
        elif "type" not in value:
            loc, kind, msg = [*loc, "type"], "missing", "Field required: noul, choice, score or multi_label"
        elif qtype == "box":
            loc, kind, msg = (
                [*loc, "type"],
                "unsupported",
                "box questions need an image; this endpoint serves a text model",
            )
        else:
            loc, kind, msg = (
                [*loc, "type"],
                "literal_error",
                f"must be one of noul, choice, score, multi_label; got {render_json(qtype)}",
            )
    elif kind in ("missing", "value_error") and (error.get("ctx") or {}).get("at"):
        loc.append(error.get("ctx", {})["at"])
    elif kind == "missing":
        msg = _MESSAGES.get((".".join(map(str, loc)), kind), msg)
    elif kind == "extra_forbidden":
        msg = (
            "Extra inputs are not permitted (true and false only)"
            if len(loc) >= 4 and loc[2] == "criteria"
            else "Extra inputs are not permitted (a question takes type, instructions and criteria)"
        )
    elif kind == "list_type" and loc[-1:] == ["criteria"] and isinstance(value, dict):
        msg = "score levels are an ordered array (level 0 first), not an object"
    elif kind == "dict_type" and loc[-1:] == ["criteria"] and value is None:
        kind, msg = "missing", "must be an object mapping option names to descriptions (Field required)"
    parts = [p if not isinstance(p, str) or len(p) <= MAX_LOC_CHARS else p[:MAX_LOC_CHARS] + "..." for p in loc]
    return {"loc": ["body", *parts], "msg": msg, "type": kind}


def _jev_errors(exc: ValidationError) -> list[Body]:
    items = [_jev_item(e) for e in exc.errors(include_url=False)]
    if len(items) > MAX_ERRORS:
        dropped = len(items) - MAX_ERRORS
        items = items[:MAX_ERRORS] + [
            {
                "loc": ["body"],
                "type": "too_many_errors",
                "msg": f"{dropped} more problem(s) not listed; fix the ones above and send again",
            }
        ]
    return items


def parse_systemone(body: Any) -> JevRequest:
    """Validate a System One request body; raise JevValidationError listing every problem."""
    if not isinstance(body, dict):
        raise JevValidationError(
            [
                {
                    "loc": ["body"],
                    "msg": f"the body must be a JSON object, got {_kind(body)}",
                    "type": "model_attributes_type",
                }
            ]
        )
    try:  # JSON may escape half a UTF-16 pair ("\ud800"): no text can be made of it
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise JevValidationError(
            [
                {
                    "loc": ["body"],
                    "msg": "the body holds an unpaired UTF-16 surrogate escape (such "
                    "as \\ud800); send valid Unicode text",
                    "type": "string_unicode",
                }
            ]
        ) from None
    try:
        parsed = SystemOneRequest.model_validate(body)
    except ValidationError as exc:
        raise JevValidationError(_jev_errors(exc)) from None
    if parsed.x_readout == "cloze" and parsed.x_order not in (None, "as_given"):
        raise JevValidationError(
            [
                {
                    "loc": ["body", "x_order"],
                    "type": "value_error",
                    "msg": (
                        f"x_order {parsed.x_order!r} does not apply to x_readout cloze: its prompt lists no options, so their "
                        "order cannot move the answer; send x_order as_given or none"
                    ),
                }
            ]
        )
    return JevRequest(
        parsed.model,
        parsed.state,
        tuple(_question_of(k, q) for k, q in parsed.questions.items()),
        parsed.x_order,
        parsed.x_min_answer_mass,
        parsed.x_readout,
        parsed.x_normalize,
    )


def _question_of(key: str, question: Any) -> JevQuestion:
    if question.type == "noul":
        c = question.criteria
        return JevQuestion(
            key, "noul", question.instructions, ("true", "false"), (None, None) if c is None else (c.true, c.false)
        )
    if question.type == "multi_label":
        return JevQuestion(
            key,
            "multi_label",
            question.instructions,
            tuple(question.labels),
            (None,) * len(question.labels),
            question.threshold,
        )
    if question.type == "choice":
        return JevQuestion(
            key, "choice", question.instructions, tuple(question.criteria), tuple(question.criteria.values())
        )
    levels = question.criteria
    return JevQuestion(key, "score", question.instructions, tuple(str(i) for i in range(len(levels))), tuple(levels))
