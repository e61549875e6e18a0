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

Validation failures are collected into one 422 ``{"detail": [{"loc", "msg", "type"}]}``.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass

from .engine import READOUT_METHODS, Engine, ScoringItem
from .errors import AdapterError, InvalidValue
from .prompt import TemplateError, compose_user_message, render_json

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
_QUESTION_FIELDS = {"type", "instructions", "criteria"}
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


# -- validation -----------------------------------------------------------------------


def _where(loc) -> str:
    return ".".join(str(part) for part in loc[1:]) or "body"


def _kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


MAX_ERRORS = 20  # listed per response: a small body with thousands of faults must not get a huge answer
MAX_LOC_CHARS = 100


class _Errors:
    def __init__(self):
        self.items: list[dict] = []
        self.dropped = 0

    def add(self, loc: tuple, msg: str, kind: str) -> None:
        if len(self.items) >= MAX_ERRORS:
            if self.dropped == 0:
                self.items.append({"loc": ["body"], "msg": "", "type": "too_many_errors"})
            self.dropped += 1
            self.items[-1]["msg"] = (f"{self.dropped} more problem(s) not listed; fix the ones above and send "
                                     "again")
            return
        parts = [p if not isinstance(p, str) or len(p) <= MAX_LOC_CHARS else p[:MAX_LOC_CHARS] + "..." for p in loc]
        self.items.append({"loc": ["body", *parts], "msg": msg, "type": kind})

    def content(self, value, loc: tuple, *, nullable: bool) -> bool:
        if isinstance(value, (str, dict, list)) or (nullable and value is None):
            return True
        allowed = "a string, an object, an array" + (" or null" if nullable else "")
        self.add(loc, f"must be {allowed}, got {_kind(value)}", "content_type")
        return False


def parse_systemone(body) -> JevRequest:
    """Validate a System One request body; raise JevValidationError listing every problem."""
    errors = _Errors()
    if not isinstance(body, dict):
        errors.add((), f"the body must be a JSON object, got {_kind(body)}", "model_attributes_type")
        raise JevValidationError(errors.items)
    try:  # JSON may escape half a UTF-16 pair ("\ud800"): no text can be made of it
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        errors.add((), "the body holds an unpaired UTF-16 surrogate escape (such as \\ud800); send valid "
                       "Unicode text", "string_unicode")
        raise JevValidationError(errors.items) from None
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        errors.add(("model",), f"must be a string, got {_kind(model)}", "string_type")
    if "state" not in body:
        errors.add(("state",), "Field required: the evidence the questions are about", "missing")
    else:
        errors.content(body["state"], ("state",), nullable=False)
    if body.get("assets") not in (None, {}):
        errors.add(("assets",), "images are not supported: this endpoint serves a text model", "unsupported")
    questions: list[JevQuestion] = []
    raw = body.get("questions")
    if "questions" not in body:
        errors.add(("questions",), "Field required: an object of questions keyed by id", "missing")
    elif not isinstance(raw, dict):
        errors.add(("questions",), f"must be an object keyed by question id, got {_kind(raw)}", "dict_type")
    elif not 1 <= len(raw) <= MAX_QUESTIONS:
        errors.add(("questions",), f"has {len(raw)} questions; send 1 to {MAX_QUESTIONS}",
                   "too_short" if not raw else "too_long")
    else:
        for key, question in raw.items():
            parsed = _question(key, question, errors)
            if parsed is not None:
                questions.append(parsed)
    if errors.items:
        raise JevValidationError(errors.items)
    return JevRequest(model, body["state"], tuple(questions))


def _question(key: str, question, errors: _Errors) -> JevQuestion | None:
    loc = ("questions", key)
    if not key or len(key) > MAX_KEY_CHARS:
        errors.add(loc, f"a question id must be a non-empty string of at most {MAX_KEY_CHARS} characters",
                   "string_type")
        return None
    if not isinstance(question, dict):
        errors.add(loc, f"must be an object {{type, instructions, criteria}}, got {_kind(question)}", "dict_type")
        return None
    before = len(errors.items)
    for field in question:
        if field not in _QUESTION_FIELDS and not field.startswith("x_"):
            errors.add((*loc, field), "Extra inputs are not permitted (a question takes type, instructions "
                                      "and criteria)", "extra_forbidden")
    qtype = question.get("type")
    if qtype not in QUESTION_TYPES:
        if "type" not in question:
            errors.add((*loc, "type"), "Field required: noul, choice or score", "missing")
        elif qtype == "box":
            errors.add((*loc, "type"), "box questions need an image; this endpoint serves a text model",
                       "unsupported")
        else:
            errors.add((*loc, "type"), f"must be one of noul, choice, score; got {render_json(qtype)}",
                       "literal_error")
        return None
    instructions = question.get("instructions")
    errors.content(instructions, (*loc, "instructions"), nullable=True)
    criteria = question.get("criteria")
    cloc = (*loc, "criteria")
    names: tuple[str, ...] = ()
    descriptions: tuple[object, ...] = ()
    if qtype == "noul":
        names, descriptions = ("true", "false"), (None, None)
        if criteria is not None:
            if not isinstance(criteria, dict):
                errors.add(cloc, f"must be an object {{true, false}} or null, got {_kind(criteria)}", "dict_type")
            else:
                for side in criteria:
                    if side not in ("true", "false"):
                        errors.add((*cloc, side), "Extra inputs are not permitted (true and false only)",
                                   "extra_forbidden")
                for side in ("true", "false"):
                    errors.content(criteria.get(side), (*cloc, side), nullable=True)
                descriptions = (criteria.get("true"), criteria.get("false"))
        described = any(d is not None for d in descriptions)
        if not described and (instructions is None or (isinstance(instructions, str) and not instructions.strip())):
            errors.add((*loc, "instructions"), "a noul needs instructions or a described outcome in criteria",
                       "missing")
    elif qtype == "choice":
        if not isinstance(criteria, dict):
            why = "Field required" if criteria is None else f"got {_kind(criteria)}"
            errors.add(cloc, f"must be an object mapping option names to descriptions ({why})",
                       "missing" if criteria is None else "dict_type")
        elif not MIN_CHOICE_OPTIONS <= len(criteria) <= MAX_CHOICE_OPTIONS:
            errors.add(cloc, f"has {len(criteria)} options; a choice takes {MIN_CHOICE_OPTIONS} to "
                             f"{MAX_CHOICE_OPTIONS}", "too_short" if len(criteria) < MIN_CHOICE_OPTIONS else "too_long")
        else:
            for name, description in criteria.items():
                if not name:
                    errors.add((*cloc, name), "an option name must not be empty", "string_too_short")
                errors.content(description, (*cloc, name), nullable=True)
            names, descriptions = tuple(criteria), tuple(criteria.values())
    else:  # score
        if isinstance(criteria, dict):
            errors.add(cloc, "score levels are an ordered array (level 0 first), not an object", "list_type")
        elif not isinstance(criteria, list):
            why = "Field required" if criteria is None else f"got {_kind(criteria)}"
            errors.add(cloc, f"must be an ordered array of level descriptions ({why})",
                       "missing" if criteria is None else "list_type")
        elif not MIN_SCORE_LEVELS <= len(criteria) <= MAX_SCORE_LEVELS:
            errors.add(cloc, f"has {len(criteria)} levels; a score takes {MIN_SCORE_LEVELS} to {MAX_SCORE_LEVELS}",
                       "too_short" if len(criteria) < MIN_SCORE_LEVELS else "too_long")
        else:
            for i, level in enumerate(criteria):
                errors.content(level, (*cloc, i), nullable=False)
            names, descriptions = tuple(str(i) for i in range(len(criteria))), tuple(criteria)
    if len(errors.items) > before:
        return None
    return JevQuestion(key, qtype, instructions, names, descriptions)


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
    items = []
    for question in request.questions:
        loc = ("body", "questions", question.key)
        texts = option_texts(question)
        labels = engine.option_labels(len(texts), loc=(*loc, "criteria"))
        asked = question.instructions if question.instructions is not None else _DEFAULT_QUESTION[question.type]
        content, state_end = compose_user_message(request.state, asked, dict(zip(labels, texts)))
        try:
            prompt = engine.template.render_turn(JEV_SYSTEM_PROMPT, content, state_end)
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None, loc=loc) from None
        items.append(ScoringItem(prompt, len(texts), loc))
    return items


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
