"""Jev's System One API (``POST /v1/systemone``) on the same engine as the decision schema.

A request asks typed questions about one state::

    {"model": "jev-latest", "state": "...",
     "questions": {"refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
                   "team":   {"type": "choice", "instructions": "Which team?",
                              "criteria": {"Billing": "Payments, refunds", "Technical": null}},
                   "anger":  {"type": "score", "instructions": "How frustrated?",
                              "criteria": ["Calm", "Frustrated", "Very angry"]}}}

Every question becomes a decision prompt over labelled options (choice: its options;
noul: Yes / No; score: its levels in order) after the same state, so the state is
evaluated once for the whole request. The question's id never reaches the model,
and each question is scored from the cached state alone, so an answer does not
depend on the other questions, their order or its id.

Answers: noul -> ``{"type", "noul"}`` (the probability of yes); choice -> ``{"type",
"choice", "probabilities", "confidence"}``; score -> ``{"type", "score" (= sum of
i * p_i), "legend", "probabilities" (keys "0".."n-1"), "confidence"}``. Extra
fields carry the ``x_`` prefix. Confidence follows the reference formulas:
choice ``(p_max - 1/n) / (1 - 1/n)``; score ``1 - spread / spread_uniform`` where
spread is the expected distance from the most probable level.

Order modes, calibration and abstention (order.py, calibration.py) follow the server's defaults
(``DECISION_ADAPTER_ORDER``, ``DECISION_ADAPTER_MIN_ANSWER_MASS``); a request may set its own as the
top-level extensions ``x_order`` and ``x_min_answer_mass``. The calibration profile is the
question's type. ``confidence`` is computed from the probabilities served (calibrated, in the order
mode). Jev's answers have no abstention of their own: ``x_abstained`` says it, beside
``x_order``, ``x_order_sensitivity``, ``x_calibration`` and ``x_min_answer_mass``.

Validation failures are collected into one 422 ``{"detail": [{"loc", "msg", "type"}]}``, pydantic's
own error list (the models below), with locations under ``body``. Unknown top-level fields are
ignored, as Jev's servers do (its SDK sends options a server may not know); a question refuses
unknown fields other than ``x_`` extensions.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from flask import Blueprint, current_app
from pydantic import BaseModel, ConfigDict, Discriminator, Field, PlainValidator, StringConstraints, Tag, \
    ValidationError, model_validator
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError

from ..errors import AdapterError, InvalidValue
from ..prompt import TemplateError, compose_user_message, render_json
from .common import as_adapter_error, error_headers, json_response

if TYPE_CHECKING:
    from ..engine import Engine, ScoringItem

JEV_PROMPT_VERSION = "jev-systemone-prompt/1"
JEV_SYSTEM_PROMPT = (
    "You are a decision component inside a software system. You receive a JSON object with "
    "a state (the evidence), a question (the criterion to apply to it) and options, each under "
    "a short code (a capital letter, or a capital letter and a digit). Apply the question to the "
    "state and answer with the code of the best option. Write nothing else."
)
MODEL_ALIAS = "jev-latest"
QUESTION_TYPES = ("noul", "choice", "score")
MIN_CHOICE_OPTIONS, MAX_CHOICE_OPTIONS = 2, 255
MIN_SCORE_LEVELS, MAX_SCORE_LEVELS = 2, 10
MAX_QUESTIONS = 64
MAX_KEY_CHARS = 1024
_DEFAULT_QUESTION = {
    "noul": "Which option describes the state?",
    "choice": "Which option fits the state best?",
    "score": "Which level fits the state best?",
}


class JevValidationError(InvalidValue):
    """One or more problems with a System One request, each with its location."""

    def __init__(self, errors: list[dict]):
        first = errors[0]
        super().__init__("; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:5]), None,
                         loc=tuple(first["loc"]))
        self.errors = errors


class ModelNotFound(AdapterError):
    status = 404
    code = "not_found_error"


@dataclass(frozen=True)
class JevQuestion:
    key: str
    type: str
    instructions: object  # None, a string, an object or an array
    names: tuple[str, ...]  # choice: option names; noul: ("true", "false"); score: "0".."n-1"
    descriptions: tuple[object, ...]  # one per name: None, a string, an object or an array


@dataclass(frozen=True)
class JevRequest:
    model: str | None
    state: object
    questions: tuple[JevQuestion, ...]
    order: str | None = None  # x_order; None: DECISION_ADAPTER_ORDER
    min_answer_mass: float | None = None  # x_min_answer_mass; None: DECISION_ADAPTER_MIN_ANSWER_MASS




# -- the request, as models -------------------------------------------------------------


def _where(loc) -> str:
    return ".".join(str(part) for part in loc[1:]) or "body"


def _kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _content(value):
    if isinstance(value, (str, dict, list)):
        return value
    raise PydanticCustomError("content_type", "must be a string, an object or an array, got {kind}",
                              {"kind": _kind(value)})


_CONTENT_SCHEMA = {"description": "Text, or any JSON object or array (rendered as JSON).",
                   "type": ["string", "object", "array"]}
JevContent = Annotated[Any, PlainValidator(_content), WithJsonSchema(_CONTENT_SCHEMA)]
JevContentOrNull = Annotated[Any, PlainValidator(lambda v: v if v is None else _content(v)),
                             WithJsonSchema({**_CONTENT_SCHEMA, "type": ["string", "object", "array", "null"]})]


class _Question(BaseModel):
    """A question's fields; ``x_`` extensions are accepted (and not used), any other unknown field refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              json_schema_extra={"patternProperties": {"^x_": {}}})
    instructions: JevContentOrNull = None

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, data):
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
    def _needs_something_to_ask(self):
        described = self.criteria is not None and (self.criteria.true is not None or self.criteria.false is not None)
        blank = self.instructions is None or (isinstance(self.instructions, str) and not self.instructions.strip())
        if not described and blank:
            raise PydanticCustomError("missing", "a noul needs instructions or a described outcome in criteria",
                                      {"at": "instructions"})
        return self


OptionName = Annotated[str, StringConstraints(min_length=1)]


class ChoiceQuestion(_Question):
    """One of named options; each name maps to its description (or null)."""

    model_config = ConfigDict(title="choice question")
    type: Literal["choice"]
    criteria: Annotated[dict[OptionName, JevContentOrNull],
                        Field(min_length=MIN_CHOICE_OPTIONS, max_length=MAX_CHOICE_OPTIONS)]


class ScoreQuestion(_Question):
    """A level on an ordered scale, level 0 first."""

    model_config = ConfigDict(title="score question")
    type: Literal["score"]
    criteria: Annotated[list[JevContent], Field(min_length=MIN_SCORE_LEVELS, max_length=MAX_SCORE_LEVELS)]


def _question_type(value):
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) and kind in QUESTION_TYPES else None


JevQuestionModel = Annotated[
    Union[Annotated[NoulQuestion, Tag("noul")], Annotated[ChoiceQuestion, Tag("choice")],
          Annotated[ScoreQuestion, Tag("score")]],
    Discriminator(_question_type)]
QuestionKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEY_CHARS)]


def _no_assets(value):
    if value in (None, {}):
        return value
    raise PydanticCustomError("unsupported", "images are not supported: this endpoint serves a text model")


class SystemOneRequest(BaseModel):
    """Typed questions about one state."""

    # Unknown top-level fields are ignored, as Jev's servers do.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, title="Jev System One request")
    model: str | None = Field(None, description=f"{MODEL_ALIAS!r}, the served model's name, or absent.")
    state: JevContent
    assets: Annotated[Any, PlainValidator(_no_assets), WithJsonSchema({"type": ["object", "null"], "maxProperties": 0,
                                                                       "description": "Images: not supported."})] = None
    questions: Annotated[dict[QuestionKey, JevQuestionModel], Field(min_length=1, max_length=MAX_QUESTIONS)]
    x_order: Literal["as_given", "prior", "rotations"] | None = Field(
        None, description="This adapter's extension: the order mode (default DECISION_ADAPTER_ORDER).")
    x_min_answer_mass: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="This adapter's extension: the abstention threshold (default "
                          "DECISION_ADAPTER_MIN_ANSWER_MASS).")


MAX_ERRORS = 20  # listed per response: a small body with thousands of faults must not get a huge answer
MAX_LOC_CHARS = 100
_MESSAGES = {
    ("state", "missing"): "Field required: the evidence the questions are about",
    ("questions", "missing"): "Field required: an object of questions keyed by id",
}


def _jev_item(error: dict) -> dict | None:
    """One pydantic error as Jev's ``{"loc", "msg", "type"}``: discriminator tags dropped, our wording."""
    loc = list(error["loc"])
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if len(loc) >= 3 and loc[0] == "questions" and loc[2] in QUESTION_TYPES:
        del loc[2]  # the discriminator's tag
    if loc and loc[-1] == "[key]":
        loc.pop()
        kind, msg = ("string_type" if len(loc) == 2 else "string_too_short"), (
            f"a question id must be a non-empty string of at most {MAX_KEY_CHARS} characters" if len(loc) == 2
            else "an option name must not be empty")
    elif kind == "union_tag_not_found" or kind == "union_tag_invalid":
        qtype = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict):
            kind, msg = "dict_type", f"must be an object {{type, instructions, criteria}}, got {_kind(value)}"
        elif "type" not in value:
            loc, kind, msg = [*loc, "type"], "missing", "Field required: noul, choice or score"
        elif qtype == "box":
            loc, kind, msg = [*loc, "type"], "unsupported", "box questions need an image; this endpoint serves a text model"
        else:
            loc, kind, msg = [*loc, "type"], "literal_error", f"must be one of noul, choice, score; got {render_json(qtype)}"
    elif kind == "missing" and (error.get("ctx") or {}).get("at"):
        loc.append(error["ctx"]["at"])
    elif kind == "missing":
        msg = _MESSAGES.get((".".join(map(str, loc)), kind), msg)
    elif kind == "extra_forbidden":
        msg = ("Extra inputs are not permitted (true and false only)" if len(loc) >= 4 and loc[2] == "criteria"
               else "Extra inputs are not permitted (a question takes type, instructions and criteria)")
    elif kind == "list_type" and loc[-1:] == ["criteria"] and isinstance(value, dict):
        msg = "score levels are an ordered array (level 0 first), not an object"
    elif kind == "dict_type" and loc[-1:] == ["criteria"] and value is None:
        kind, msg = "missing", "must be an object mapping option names to descriptions (Field required)"
    parts = [p if not isinstance(p, str) or len(p) <= MAX_LOC_CHARS else p[:MAX_LOC_CHARS] + "..." for p in loc]
    return {"loc": ["body", *parts], "msg": msg, "type": kind}


def _jev_errors(exc: ValidationError) -> list[dict]:
    items = [_jev_item(e) for e in exc.errors(include_url=False)]
    if len(items) > MAX_ERRORS:
        dropped = len(items) - MAX_ERRORS
        items = items[:MAX_ERRORS] + [{"loc": ["body"], "type": "too_many_errors",
                                       "msg": f"{dropped} more problem(s) not listed; fix the ones above and send again"}]
    return items


def parse_systemone(body) -> JevRequest:
    """Validate a System One request body; raise JevValidationError listing every problem."""
    if not isinstance(body, dict):
        raise JevValidationError([{"loc": ["body"], "msg": f"the body must be a JSON object, got {_kind(body)}",
                                   "type": "model_attributes_type"}])
    try:  # JSON may escape half a UTF-16 pair ("\ud800"): no text can be made of it
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise JevValidationError([{"loc": ["body"], "msg": "the body holds an unpaired UTF-16 surrogate escape (such "
                                   "as \\ud800); send valid Unicode text", "type": "string_unicode"}]) from None
    try:
        parsed = SystemOneRequest.model_validate(body)
    except ValidationError as exc:
        raise JevValidationError(_jev_errors(exc)) from None
    return JevRequest(parsed.model, parsed.state, tuple(_question_of(k, q) for k, q in parsed.questions.items()),
                      parsed.x_order, parsed.x_min_answer_mass)


def _question_of(key: str, question) -> JevQuestion:
    if question.type == "noul":
        c = question.criteria
        return JevQuestion(key, "noul", question.instructions, ("true", "false"),
                           (None, None) if c is None else (c.true, c.false))
    if question.type == "choice":
        return JevQuestion(key, "choice", question.instructions, tuple(question.criteria),
                           tuple(question.criteria.values()))
    levels = question.criteria
    return JevQuestion(key, "score", question.instructions, tuple(str(i) for i in range(len(levels))), tuple(levels))


# -- the served model -----------------------------------------------------------------


def served_model_name(info: dict) -> str:
    """The name the reply carries: the pinned GGUF's file name without ``.gguf``."""
    return re.sub(r"\.gguf$", "", info["file"], flags=re.IGNORECASE)


def accepted_model_names(info: dict, manifest: dict | None) -> set[str]:
    names = {MODEL_ALIAS, served_model_name(info), info["file"]}
    listed = ((manifest or {}).get("model") or {}).get("name")
    if isinstance(listed, str) and listed:
        names.add(listed)
    return names


def check_model(requested: str | None, info: dict, manifest: dict | None) -> None:
    if requested is None or requested in accepted_model_names(info, manifest):
        return
    raise ModelNotFound(f"model {requested!r} is not served here; send {MODEL_ALIAS!r} or "
                        f"{served_model_name(info)!r} (GET /v1/models lists them)", "model")


def release_date(info: dict, metadata: dict, manifest: dict | None) -> str:
    """YYYY-MM-DD: the GGUF's own date if it has one, else when the model was packaged, else today."""
    for raw in (metadata.get("general.date"), ((manifest or {}).get("build") or {}).get("time")):
        if isinstance(raw, str) and re.match(r"\d{4}-\d{2}-\d{2}", raw):
            return raw[:10]
    return datetime.date.today().isoformat()


def models_payload(info: dict, metadata: dict, manifest: dict | None) -> dict:
    name = served_model_name(info)
    date = release_date(info, metadata, manifest)
    source = " ".join(str(p) for p in (info.get("source_repo"), info.get("source_revision")) if p)
    description = (f"{info.get('name') or name} ({info.get('quantization') or 'GGUF'}), scored by the decision "
                   f"adapter on llama.cpp; sha256 {info.get('sha256')}" + (f"; from {source}" if source else ""))
    return {"models": [
        {"name": name, "description": description, "release_date": date},
        {"name": MODEL_ALIAS, "description": f"Alias of {name}, the one model this endpoint serves.",
         "release_date": date},
    ]}


# -- prompts and answers ----------------------------------------------------------------


def _option_text(name: str, description) -> str:
    if description is None:
        return name
    return f"{name}: {description if isinstance(description, str) else render_json(description)}"


def option_texts(question: JevQuestion) -> list[str]:
    if question.type == "choice":
        return [_option_text(n, d) for n, d in zip(question.names, question.descriptions)]
    if question.type == "noul":
        return [_option_text("Yes", question.descriptions[0]), _option_text("No", question.descriptions[1])]
    return [d if isinstance(d, str) else render_json(d) for d in question.descriptions]


def scoring_items(engine: Engine, request: JevRequest) -> list[ScoringItem]:
    """One prompt per question, its options as sent (the as_given mode at temperature 1)."""
    return [_builder(engine, request, q)(tuple(range(len(q.names))), 1.0) for q in request.questions]


def _builder(engine: Engine, request: JevRequest, question: JevQuestion):
    """The question's ScoringItem with its options shown in a given order, at a given temperature."""
    from ..engine import ScoringItem

    loc = ("body", "questions", question.key)
    texts = option_texts(question)
    labels = engine.option_labels(len(texts), loc=(*loc, "criteria"))
    asked = question.instructions if question.instructions is not None else _DEFAULT_QUESTION[question.type]

    def build(order: tuple[int, ...], temperature: float) -> ScoringItem:
        content, state_end = compose_user_message(request.state, asked, dict(zip(labels, (texts[i] for i in order))))
        try:
            prompt = engine.template.render_turn(JEV_SYSTEM_PROMPT, content, state_end)
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None, loc=loc) from None
        return ScoringItem(prompt, len(texts), loc, temperature=temperature)

    return build


def asked(engine: Engine, request: JevRequest) -> list:
    """The questions for order.score, in the request's (or the server's) order mode."""
    from ..order import Asked

    settings = engine.settings
    mass = settings.min_answer_mass if request.min_answer_mass is None else request.min_answer_mass
    return [Asked(len(q.names), _builder(engine, request, q), request.order or settings.order, None, mass,
                  JEV_SYSTEM_PROMPT, JEV_PROMPT_VERSION, q.type) for q in request.questions]


def score(engine: Engine, request: JevRequest) -> tuple[list[dict], dict]:
    from .. import order

    return order.score(engine, asked(engine, request))


def choice_confidence(probabilities: list[float]) -> float:
    n = len(probabilities)
    return _unit((max(probabilities) - 1.0 / n) / (1.0 - 1.0 / n))


def score_confidence(probabilities: list[float]) -> float:
    n = len(probabilities)
    mode = max(range(n), key=probabilities.__getitem__)
    spread = sum(p * abs(i - mode) for i, p in enumerate(probabilities))
    uniform = sum(abs(i - (n - 1) / 2.0) for i in range(n)) / n
    return _unit(1.0 - spread / uniform)


def _unit(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def answer(question: JevQuestion, result: dict) -> dict:
    p = result["probabilities"]
    extras = {"x_readout": result["readout"], "x_forward_passes": result["forward_passes"],
              "x_input_tokens": result["input_tokens"], "x_allowed_token_mass": result["allowed_token_mass"],
              "x_prompt_sha256": result["prompt_sha256"]}
    if "order" in result:  # scored through order.score
        extras.update(x_order=result["order"], x_order_sensitivity=result["order_sensitivity"],
                      x_prior=result["prior"], x_calibration=result["calibration"],
                      x_abstained=result["abstained"], x_min_answer_mass=result["min_answer_mass"])
    if question.type == "noul":
        return {"type": "noul", "noul": _unit(p[0]), **extras}
    if question.type == "choice":
        top = max(range(len(p)), key=p.__getitem__)  # the first option on a tie
        return {"type": "choice", "choice": question.names[top],
                "probabilities": dict(zip(question.names, p)), "confidence": choice_confidence(p), **extras}
    return {"type": "score", "score": sum(i * v for i, v in enumerate(p)),
            "legend": {name: level for name, level in zip(question.names, question.descriptions)},
            "probabilities": dict(zip(question.names, p)), "confidence": score_confidence(p), **extras}


def respond(engine: Engine, request: JevRequest, results: list[dict], timing: dict) -> dict:
    from ..readout import READOUT_METHODS

    return {
        "model": served_model_name(engine.info),
        "answers": {q.key: answer(q, r) for q, r in zip(request.questions, results)},
        "usage": {"input_tokens": int(timing["input_tokens"]), "output_tokens": 0},
        "x_prompt_version": JEV_PROMPT_VERSION,
        "x_readout_methods": {m: READOUT_METHODS[m] for m in sorted({r["readout"] for r in results})},
        "x_timing": timing,
        "x_model": engine.info,
    }


def systemone(engine: Engine, body) -> JevRequest:
    """Validate and check the model name: the cheap part, done before the request waits for the model.
    The prompts are built (``scoring_items``) once it holds it, inside its time limit."""
    request = parse_systemone(body)
    check_model(request.model, engine.info, engine.model_files.manifest)
    return request


# -- the error shapes Jev clients read ------------------------------------------------------

# error_type by HTTP status for errors that are not validation failures
_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                405: "invalid_request_error", 413: "request_too_large", 415: "invalid_request_error",
                429: "rate_limit_error", 503: "overloaded_error"}


def _loc_from_field(field: str | None) -> list:
    if not field:
        return ["body"]
    parts: list = ["body"]
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        parts.append(int(index) if index else name)
    return parts


def error_body(exc: AdapterError) -> dict:
    """``{"detail": [...]}`` for validation failures, ``{"detail": {"error_type", "message"}}`` otherwise."""
    if isinstance(exc, JevValidationError):
        return {"detail": exc.errors}
    if exc.status in (400, 422):
        loc = list(exc.loc) if exc.loc else _loc_from_field(exc.field)
        return {"detail": [{"loc": loc, "msg": exc.message, "type": exc.code}]}
    return {"detail": {"error_type": _ERROR_TYPES.get(exc.status, "api_error" if exc.status >= 500
                                                      else "invalid_request_error"),
                       "message": exc.message}}


def error_status(exc: AdapterError) -> int:
    """Jev reports every validation failure, malformed JSON included, as 422."""
    return 422 if exc.status == 400 else exc.status


# -- the routes ----------------------------------------------------------------------------------

blueprint = Blueprint("systemone", __name__, url_prefix="/v1")


def error_response(exc: AdapterError):
    return json_response(error_body(exc), error_status(exc), error_headers(exc))


@blueprint.errorhandler(Exception)
def _error(exc: Exception):
    return error_response(as_adapter_error(exc))


def parse(body, settings) -> JevRequest:
    return parse_systemone(body)


def serve(ctx, body, started: float) -> dict:
    parsed = parse_systemone(body)
    check_model(parsed.model, ctx.engine.info, ctx.engine.model_files.manifest)
    (results, timing), waited_ms = ctx.run(lambda engine: score(engine, parsed))
    return respond(ctx.engine, parsed, results, ctx.timing(timing, waited_ms, started))


@blueprint.post("/systemone")
def systemone_route():
    ctx = current_app.extensions["decision_adapter.serving"]
    started = ctx.clock()
    ctx.engine  # 503 while loading, before the body is read
    return json_response(serve(ctx, ctx.read_json(jev_route=True), started))


@blueprint.get("/models")
def models_route():
    engine = current_app.extensions["decision_adapter.serving"].engine
    return json_response(models_payload(engine.info, engine.metadata, engine.model_files.manifest))
