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

A ``multi_label`` question (``labels``, ``threshold`` 0.7 by default) is a noul per label on the same state
("Does this label apply: <label>?"), answered ``{"type", "scores", "threshold", "selected", "abstained"}``.
Every reply carries ``audit`` (apis/audit.py): what Jev's client libraries need to replay the answers, the one
unprefixed field beside Jev's (avrik-sdk requires it so). Its answers and errors carry the request id as
``x_request_id`` where the other APIs' carry ``request_id``.

Order modes, calibration and abstention (scoring.py) follow the server's defaults
(``DECISION_ADAPTER_ORDER``, ``DECISION_ADAPTER_MIN_ANSWER_MASS``); a request may set its own as the
top-level extensions ``x_order`` and ``x_min_answer_mass``. The calibration profile is the
question's type. ``confidence`` is computed from the probabilities served (calibrated, in the order
mode). Jev's answers have no abstention of their own: ``x_abstained`` says it, beside
``x_order``, ``x_order_sensitivity``, ``x_calibration`` and ``x_min_answer_mass``.

The requests' models and their validation errors are in systemone_requests.py, the answers' models in
systemone_answers.py; Jev's prompt is the prompt room's (prompt.py); the confidence formulas and the
model's names are shared with the OpenAI Decisions API (typed.py).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from flask import Blueprint, Response, current_app

from .. import scoring
from ..answer_record import AnswerRecord
from ..caller_errors import AdapterError, ModelNotFound
from ..engine import Engine
from ..prompt import DEFAULT_QUESTIONS, JEV_PROMPT, JEV_PROMPT_VERSION, YES_NO, as_text, option_text
from ..questions import DecisionBatch, Option, Question
from ..readouts import READOUT_METHODS
from ..seams import Scorer
from ..settings import Settings
from . import audit
from . import openapi_parts as doc
from .api import Api, Scope
from .dialect import SERVING, Body, Dialect, json_response, post
from .systemone_requests import DEFAULT_THRESHOLD, JevQuestion, JevRequest, JevValidationError, parse_systemone
from .typed import (
    MODEL_ALIAS,
    accepted_model_names,
    choice_confidence,
    names_checked,
    score_confidence,
    served_model_name,
    unit,
)

# -- the served model -----------------------------------------------------------------


def check_model(requested: str | None, info: dict[str, Any], manifest: dict[str, Any] | None) -> None:
    if requested is None or requested in accepted_model_names(info, manifest):
        return
    raise ModelNotFound(
        f"model {requested!r} is not served here; send {MODEL_ALIAS!r} or "
        f"{served_model_name(info)!r} (GET /v1/models lists them)",
        "model",
    )


def release_date(info: dict[str, Any], metadata: dict[str, Any], manifest: dict[str, Any] | None) -> str:
    """YYYY-MM-DD: the GGUF's own date if it has one, else when the model was packaged, else today."""
    for raw in (metadata.get("general.date"), ((manifest or {}).get("build") or {}).get("time")):
        if isinstance(raw, str) and re.match(r"\d{4}-\d{2}-\d{2}", raw):
            return raw[:10]
    return datetime.date.today().isoformat()


def models_payload(info: dict[str, Any], metadata: dict[str, Any], manifest: dict[str, Any] | None) -> Body:
    name = served_model_name(info)
    date = release_date(info, metadata, manifest)
    source = " ".join(str(p) for p in (info.get("source_repo"), info.get("source_revision")) if p)
    description = (
        f"{info.get('name') or name} ({info.get('quantization') or 'GGUF'}), scored by the decision "
        f"adapter on llama.cpp; sha256 {info.get('sha256')}" + (f"; from {source}" if source else "")
    )
    created = int(datetime.datetime.fromisoformat(date).replace(tzinfo=datetime.timezone.utc).timestamp())
    owner = metadata.get("general.organization") or "decision-adapter"
    return {
        "object": "list",  # OpenAI's list, beside Jev's "models": one document for both kinds of client
        "data": [{"id": n, "object": "model", "created": created, "owned_by": owner} for n in (name, MODEL_ALIAS)],
        "models": [
            {"name": name, "description": description, "release_date": date},
            {
                "name": MODEL_ALIAS,
                "description": f"Alias of {name}, the one model this endpoint serves.",
                "release_date": date,
            },
        ],
    }


# -- questions and answers ----------------------------------------------------------------


def option_texts(question: JevQuestion) -> list[str]:
    if question.type == "choice":
        return [option_text(n, d) for n, d in zip(question.names, question.descriptions)]
    if question.type == "noul":
        return [option_text(label, d) for label, d in zip(YES_NO, question.descriptions)]
    return [as_text(d) for d in question.descriptions]


def cloze_texts(question: JevQuestion) -> list[str]:
    """What the cloze readout scores: a choice's description, else its name made readable; yes and no; a
    score's level labels."""
    if question.type == "noul":
        return [label.lower() for label in YES_NO]
    if question.type == "choice":
        return [
            name.replace("_", " ") if d is None else as_text(d)
            for name, d in zip(question.names, question.descriptions)
        ]
    return [as_text(d) for d in question.descriptions]


def label_question(instructions: object, label: str) -> str:
    """What a multi_label question asks of one label: its own yes/no."""
    asked = as_text(instructions) if instructions is not None else "Which labels apply to the state?"
    return f"{asked}\nDoes this label apply: {label}?"


def batch_of(request: JevRequest) -> DecisionBatch:
    """The request as the core's questions: each question's options under their names, its type the
    calibration profile's, its id never shown to the model; a multi_label question is a noul per label."""
    questions = []
    for q in request.questions:
        loc = ("body", "questions", q.key)
        if q.type == "multi_label":
            for i, label in enumerate(q.names):
                options = tuple(Option(name, text, text.lower()) for name, text in zip(("true", "false"), YES_NO))
                questions.append(
                    Question(
                        f"{q.key}#{i}",
                        label_question(q.instructions, label),
                        options,
                        None,
                        request.order,
                        request.min_answer_mass,
                        "noul",
                        loc=loc,
                        options_loc=(*loc, "labels", i),
                        readout=request.readout,
                        normalize=request.normalize,
                    )
                )
            continue
        asked = q.instructions if q.instructions is not None else DEFAULT_QUESTIONS[q.type]
        options = tuple(
            Option(name, text, cloze) for name, text, cloze in zip(q.names, option_texts(q), cloze_texts(q))
        )
        questions.append(
            Question(
                q.key,
                asked,
                options,
                None,
                request.order,
                request.min_answer_mass,
                q.type,
                loc=loc,
                options_loc=(*loc, "criteria"),
                readout=request.readout,
                normalize=request.normalize,
            )
        )
    return DecisionBatch("systemone", request.state, tuple(questions))


def score(engine: Scorer, request: JevRequest) -> tuple[list[AnswerRecord], dict[str, Any]]:
    """Every question in the request's (or the server's) order mode, in Jev's prompt."""
    return scoring.decide(engine, batch_of(request), JEV_PROMPT)


def _extras(answer: AnswerRecord) -> Body:
    return {
        "x_readout": answer.method,
        "x_forward_passes": answer.forward_passes,
        "x_input_tokens": answer.input_tokens,
        "x_allowed_token_mass": answer.allowed_token_mass,
        "x_prompt_sha256": answer.prompt_sha256,
        "x_order": answer.order,
        "x_order_sensitivity": answer.order_sensitivity,
        "x_prior": None if answer.prior is None else list(answer.prior),
        "x_calibration": answer.calibration,
        "x_abstained": answer.abstained,
        "x_min_answer_mass": answer.min_answer_mass,
        **{f"x_{key}": value for key, value in answer.extras.items()},
    }


def _audited(question: JevQuestion, answers: list[AnswerRecord]) -> Body:
    """The audit block's facts of one question (of several prompts for a multi_label one)."""
    if question.type != "multi_label":
        return {
            "prompt_sha256": answers[0].prompt_sha256,
            "allowed_tokens": answers[0].label_tokens,
            "input_tokens": answers[0].input_tokens,
        }
    return {
        "prompt_sha256": audit.combined_sha256([a.prompt_sha256 for a in answers]),
        "allowed_tokens": answers[0].label_tokens,
        "input_tokens": sum(a.input_tokens for a in answers),
    }


def answer(question: JevQuestion, result: AnswerRecord) -> Body:
    p = list(result.probabilities)
    extras = _extras(result)
    if result.prediction_set is not None:
        extras["x_prediction_set"] = [question.names[i] for i in result.prediction_set]
    if question.type == "noul":
        return {"type": "noul", "noul": unit(p[0]), **extras}
    if question.type == "choice":
        top = max(range(len(p)), key=p.__getitem__)  # the first option on a tie
        return {
            "type": "choice",
            "choice": question.names[top],
            "probabilities": dict(zip(question.names, p)),
            "confidence": choice_confidence(p),
            **extras,
        }
    return {
        "type": "score",
        "score": sum(i * v for i, v in enumerate(p)),
        "legend": {name: level for name, level in zip(question.names, question.descriptions)},
        "probabilities": dict(zip(question.names, p)),
        "confidence": score_confidence(p),
        **extras,
    }


def multi_label_answer(question: JevQuestion, results: list[AnswerRecord]) -> Body:
    """P(yes) per label, the labels at or above the threshold, and those whose read abstained."""
    scores = {label: unit(r.probabilities[0]) for label, r in zip(question.names, results)}
    threshold = DEFAULT_THRESHOLD if question.threshold is None else question.threshold  # always set for these
    return {
        "type": "multi_label",
        "scores": scores,
        "threshold": threshold,
        "selected": [label for label, v in scores.items() if v >= threshold],
        "abstained": [label for label, r in zip(question.names, results) if r.abstained],
        "x_labels": [_extras(r) for r in results],
    }


def grouped(request: JevRequest, results: list[AnswerRecord]) -> list[list[AnswerRecord]]:
    """The core's results, one list per question of the request (a multi_label question has one per label)."""
    out, at = [], 0
    for q in request.questions:
        size = len(q.names) if q.type == "multi_label" else 1
        out.append(results[at : at + size])
        at += size
    return out


def respond(request: JevRequest, results: list[AnswerRecord], timing: dict[str, Any], info: dict[str, Any]) -> Body:
    answers, audited = {}, []
    for q, own in zip(request.questions, grouped(request, results)):
        answers[q.key] = multi_label_answer(q, own) if q.type == "multi_label" else answer(q, own[0])
        audited.append(_audited(q, own))
    return {
        "model": served_model_name(info),
        "answers": answers,
        "usage": {"input_tokens": int(timing["input_tokens"]), "output_tokens": 0},
        "audit": audit.audit_block(audited, info),
        "x_prompt_version": JEV_PROMPT_VERSION,
        "x_readout_methods": {m: READOUT_METHODS[m] for m in sorted({r.method for r in results})},
        "x_timing": timing,
        "x_model": info,
    }


def check(request: JevRequest, engine: Engine) -> None:
    """The model's name: checked before the request waits for the model (its prompts are built once it
    holds it, inside its time limit)."""
    if names_checked(engine):
        check_model(request.model, engine.info, engine.model.files.manifest)


# -- the error shapes Jev clients read ------------------------------------------------------

# error_type by HTTP status for errors that are not validation failures
_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def _loc_from_field(field: str | None) -> list[str | int]:
    if not field:
        return ["body"]
    parts: list[str | int] = ["body"]
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        parts.append(int(index) if index else name)
    return parts


def error_body(exc: AdapterError) -> Body:
    """``{"detail": [...]}`` for validation failures, ``{"detail": {"error_type", "message"}}`` otherwise."""
    if isinstance(exc, JevValidationError):
        return {"detail": exc.errors}
    if exc.status in (400, 422):
        loc = list(exc.loc) if exc.loc else _loc_from_field(exc.field)
        return {"detail": [{"loc": loc, "msg": exc.message, "type": exc.code}]}
    return {
        "detail": {
            "error_type": _ERROR_TYPES.get(exc.status, "api_error" if exc.status >= 500 else "invalid_request_error"),
            "message": exc.message,
        }
    }


def error_status(exc: AdapterError) -> int:
    """Jev reports every validation failure, malformed JSON included, as 422."""
    return 422 if exc.status == 400 else exc.status


# -- the dialect and its routes ------------------------------------------------------------------------


def parse(body: Any, settings: Settings) -> JevRequest:
    return parse_systemone(body)


def error(exc: AdapterError) -> tuple[Body, int]:
    return error_body(exc), error_status(exc)


DIALECT = Dialect("systemone", parse, score, respond, error, check, id_field="x_request_id")

PATH, MODELS_PATH = "/v1/systemone", "/v1/models"
blueprint = Blueprint("systemone", __name__)
post(blueprint, PATH, DIALECT, jev_route=True)


@blueprint.get(MODELS_PATH)
def models_route() -> Response:
    engine = current_app.extensions[SERVING].engine
    return json_response(models_payload(engine.info, engine.model.metadata, engine.model.files.manifest))


def openapi_paths() -> Body:
    """Its paths of the OpenAPI document (openapi.py)."""
    return {
        PATH: {
            "post": {
                "operationId": "systemone",
                "tags": ["Jev"],
                "summary": "Answer typed questions about one state (Jev System One)",
                "description": "Jev's System One API on the same model: every question is scored from the logits of "
                "one forward pass, nothing is generated. Content-Type must be JSON or absent. Every error "
                "uses Jev's shapes; malformed JSON and wrong types are 422 here, not 400.",
                "requestBody": doc.body("SystemOneRequest"),
                "responses": {
                    "200": doc.ok("One answer per question.", "SystemOneResponse"),
                    "404": doc.response(
                        "Only with DECISION_ADAPTER_STRICT_MODEL_NAMES=on: the request names a model "
                        "this endpoint does not serve.",
                        doc.jev("not_found_error"),
                    ),
                    "422": doc.response(
                        "Every problem found in the body, each with its location: missing or mistyped "
                        "fields, malformed JSON, too many options for this model, a prompt that does not "
                        "fit the context.",
                        doc.ref("JevValidationErrorBody"),
                    ),
                    **doc.common("Jev"),
                },
            }
        },
        MODELS_PATH: {
            "get": {
                "operationId": "models",
                "tags": ["Jev", "OpenAI"],
                "summary": "List the served model and its alias",
                "description": 'One document for both kinds of client: OpenAI\'s {"object": "list", "data": '
                '[...]} and Jev\'s {"models": [...]}.',
                "responses": {
                    "200": doc.response(
                        "The served model and the jev-latest alias.",
                        {"allOf": [doc.ref("ModelList"), doc.ref("OpenAIModelList")]},
                    ),
                    "401": doc.shared("JevUnauthorized"),
                    "500": doc.shared("JevInternalError"),
                    "503": doc.shared("JevBusy"),
                },
            }
        },
    }


API = Api(
    "systemone",
    "systemone",
    body=DIALECT,
    sniff=lambda body: isinstance(body.get("questions"), dict),
    routes=(f"POST {PATH}", f"GET {MODELS_PATH}"),
    blueprint=blueprint,
    scope=Scope("/v1/"),
    errors=DIALECT,
    shape="jev",
    openapi=openapi_paths,
)  # Jev's shape: every path under /v1/ that no narrower scope claims
