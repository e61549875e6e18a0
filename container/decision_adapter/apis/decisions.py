"""The OpenAI Decisions API on ``POST /v1/decisions`` (docs/api.md).

A request asks typed questions about one input::

    {"model": "jev-latest", "input": "The parcel never arrived; I want my money back.",
     "questions": [
       {"type": "predicate", "name": "refund", "instructions": "The customer asks for a refund."},
       {"type": "choice", "name": "team", "instructions": "Which team should handle it?",
        "choices": [{"value": "billing", "description": "Payments, refunds"}, {"value": "shipping"}]},
       {"type": "score", "name": "anger", "instructions": "How frustrated is the customer?",
        "levels": [{"label": "calm"}, {"label": "annoyed"}, {"label": "furious"}]}]}

``input`` is a string or a list of the items the ``openai`` library types: user, system, developer and
assistant messages (content a string or parts: ``input_text``, ``input_json``, an assistant's ``output_text``
and ``refusal``), function and custom tool calls and their outputs (an output must name an earlier call of
its kind). The items, in order and joined by blank lines, are the state: a user's text as it is, any other
item under who said it (``state_of``). Images are refused (a 400: this endpoint reads text). A question's
``instructions`` is a string or ``input_text`` / ``input_json`` parts; a request asks 1 to 400 questions. Each question becomes a decision prompt
over labelled options after the same state, so the state is evaluated once for the whole request,
exactly as System One questions are (a predicate's options are Yes and No; a score's its levels in
order). Answers come in question order, echoing ``name`` (null when the question has none):
predicate ``{probability}`` (of yes); choice ``{choice, confidence, probabilities: [{value,
probability}]}``; score ``{score, confidence, probabilities: [{value, label, probability}]}``, where
a level's value is its index (0 first) and ``score`` the expected value. ``usage`` counts the
tokens of every question's prompt (and of a content-free prior scored for the request) as
``input_tokens``, of which ``cached_tokens`` were not evaluated again because an earlier question of the
same request shared them; nothing is generated.

The API has no field for this adapter's options, so the order mode, the calibration and abstention
follow the server's settings (``DECISION_ADAPTER_ORDER``, calibration.json with a predicate's
profile ``noul/2``, ``DECISION_ADAPTER_MIN_ANSWER_MASS``). An abstention is the API's own refusal
answer ``{"type": "refusal", "name", "refusal"}`` (the text says why); its probabilities are not
given, as the API's refusal carries none.

Beside the API's fields every answer carries this adapter's ``x_readout``: ``letters`` or ``cloze``, the
readout that read it (the server's ``DECISION_ADAPTER_READOUT``; the API has no field to choose one). Where a
kept calibration profile's conformal threshold q applied, a predicate, choice or score answer also carries
``x_prediction_set``: in request order, the answers whose probability is at least 1 - q, named as the API
names them (a predicate's ``true`` for yes and ``false`` for no, a choice's values, a score's level values).
``model`` stays the served model's name, as the API types it. The ``openai`` library keeps fields it does not
know, so its ``Decision`` type parses these answers unchanged.

Errors: ``{"error": {"message", "type", "param", "code"}}``; anything wrong with the body is a 400
``invalid_request_error`` whose ``param`` names the field (e.g. ``questions[1].choices``), unknown
fields included (as OpenAI refuses unrecognised arguments).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from .. import scoring
from ..answer_record import AnswerRecord
from ..caller_errors import AdapterError, InvalidType, InvalidValue, PromptTooLong
from ..engine import Engine
from ..prompt import JEV_PROMPT, YES_NO, as_text, option_text
from ..questions import DecisionBatch, Option
from ..questions import Question as CoreQuestion
from ..seams import Scorer
from ..settings import Settings
from . import openapi_parts as doc
from .api import Api, Scope

# The requests' and answers' models live beside this module; the OpenAPI document and the tests find them here.
from .decisions_answers import DecisionsResponse as DecisionsResponse
from .decisions_answers import OpenAIError as OpenAIError
from .decisions_requests import (
    DecisionsChoice,
    DecisionsPredicate,
    DecisionsQuestion,
    check_model,
    instructions_of,
    state_of,
)
from .decisions_requests import DecisionsRequest as DecisionsRequest
from .decisions_requests import parse_decisions as parse_decisions
from .dialect import Body, Dialect, post
from .typed import choice_confidence, names_checked, score_confidence, served_model_name, unit

# -- questions and answers ------------------------------------------------------------------------------


def option_texts(question: DecisionsQuestion) -> list[str]:
    if isinstance(question, DecisionsPredicate):
        return list(YES_NO)
    if isinstance(question, DecisionsChoice):
        return [option_text(as_text(o.value), o.description) for o in question.choices]
    return [option_text(level.label, level.description) for level in question.levels]


def cloze_texts(question: DecisionsQuestion) -> list[str]:
    """What the cloze readout scores: yes and no; a choice's description, else its value made readable; a
    score's level labels."""
    if isinstance(question, DecisionsPredicate):
        return [label.lower() for label in YES_NO]
    if isinstance(question, DecisionsChoice):
        return [
            as_text(o.value).replace("_", " ") if not o.description else as_text(o.description)
            for o in question.choices
        ]
    return [level.label for level in question.levels]


QUESTION_TYPES = {"predicate": "noul", "choice": "choice", "score": "score"}  # the calibration profiles' names


def batch_of(request: DecisionsRequest) -> DecisionBatch:
    """The request as the core's questions, in the server's order mode and abstention threshold (the API has
    no field for them); an error about a question or its options points at the question."""
    questions = []
    for i, q in enumerate(request.questions):
        loc = ("body", "questions", i)
        options = tuple(
            Option(str(j), text, cloze) for j, (text, cloze) in enumerate(zip(option_texts(q), cloze_texts(q)))
        )
        questions.append(
            CoreQuestion(
                str(i), instructions_of(q), options, question_type=QUESTION_TYPES[q.type], loc=loc, options_loc=loc
            )
        )
    return DecisionBatch("decisions", state_of(request), tuple(questions), state_field="input")


def decide(engine: Scorer, batch: DecisionBatch) -> tuple[list[AnswerRecord], dict[str, Any]]:
    """A batch of this API's questions (``batch_of``) on its prompt: (answers, the engine's timing in ms)."""
    return scoring.decide(engine, batch, JEV_PROMPT)


def score(engine: Scorer, request: DecisionsRequest) -> tuple[list[AnswerRecord], dict[str, Any]]:
    """Every question in the server's order mode, calibrated, with the server's abstention threshold."""
    return decide(engine, batch_of(request))


def values_of(question: DecisionsQuestion) -> list[Any]:
    """What a prediction set names, in request order: a predicate's true (yes) and false (no), a choice's
    values, a score's level values (indices)."""
    if isinstance(question, DecisionsPredicate):
        return [True, False]
    if isinstance(question, DecisionsChoice):
        return [o.value for o in question.choices]
    return list(range(len(question.levels)))


def extensions(question: DecisionsQuestion, result: AnswerRecord) -> Body:
    """This adapter's fields beside the API's: the readout that read the answer, and the prediction set where a
    kept calibration threshold applied."""
    out: Body = {"x_readout": result.readout}
    members = result.prediction_set
    if members is not None:
        values = values_of(question)
        out["x_prediction_set"] = [values[i] for i in members]
    return out


def answer(question: DecisionsQuestion, result: AnswerRecord) -> Body:
    if result.abstained:
        return {
            "type": "refusal",
            "name": question.name,
            "refusal": f"the answer labels held {result.allowed_token_mass:.3g} of the model's next-token "
            f"probability, below this endpoint's threshold {result.min_answer_mass:g} "
            "(DECISION_ADAPTER_MIN_ANSWER_MASS)",
            "x_readout": result.readout,
        }
    p = list(result.probabilities)
    if isinstance(question, DecisionsPredicate):
        return {"type": "predicate", "name": question.name, "probability": unit(p[0]), **extensions(question, result)}
    if isinstance(question, DecisionsChoice):
        top = max(range(len(p)), key=p.__getitem__)  # the first option on a tie
        return {
            "type": "choice",
            "name": question.name,
            "choice": question.choices[top].value,
            "confidence": choice_confidence(p),
            "probabilities": [{"value": o.value, "probability": v} for o, v in zip(question.choices, p)],
            **extensions(question, result),
        }
    return {
        "type": "score",
        "name": question.name,
        "score": sum(i * v for i, v in enumerate(p)),
        "confidence": score_confidence(p),
        "probabilities": [
            {"value": i, "label": level.label, "probability": v} for i, (level, v) in enumerate(zip(question.levels, p))
        ],
        **extensions(question, result),
    }


def respond(
    request: DecisionsRequest, results: list[AnswerRecord], timing: dict[str, Any], info: dict[str, Any]
) -> Body:
    # A content-free prior scored for this request (order mode prior, first use) is paid for here too.
    prompt_tokens = sum(r.read_tokens for r in results) + timing["prior_tokens"]
    evaluated = int(timing["input_tokens"])
    return {
        "model": served_model_name(info),
        "answers": [answer(q, r) for q, r in zip(request.questions, results)],
        "usage": {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": max(0, prompt_tokens - evaluated), "cache_write_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens,
        },
    }


# -- errors ---------------------------------------------------------------------------------------------

_CODES = {
    401: "invalid_api_key",
    413: "request_too_large",
    415: "unsupported_media_type",
    503: "server_busy",
    504: "timeout",
}


def error_body(exc: AdapterError) -> tuple[Body, int]:
    """OpenAI's error object; every problem with the body is a 400, as OpenAI sends them."""
    status = 400 if isinstance(exc, (InvalidType, InvalidValue, PromptTooLong)) else exc.status
    kind = "server_error" if status >= 500 else "invalid_request_error"
    code = exc.code
    if isinstance(exc, PromptTooLong):
        code = "context_length_exceeded"
    elif status in _CODES and not isinstance(exc, (InvalidType, InvalidValue)):
        code = exc.code if exc.code in ("busy", "not_ready") else _CODES[status]
    param = exc.field
    if param is None and exc.loc:
        param = (
            "".join(
                f"[{p}]" if isinstance(p, int) else (f".{p}" if i > 1 else str(p))
                for i, p in enumerate(exc.loc)
                if i > 0
            )
            or None
        )
    return {"error": {"message": exc.message, "type": kind, "param": param, "code": code}}, status


# -- the dialect and its route -------------------------------------------------------------------------


def parse(body: Any, settings: Settings) -> DecisionsRequest:
    return parse_decisions(body)


def check(request: DecisionsRequest, engine: Engine) -> None:
    """The model's name, before the request waits for the model."""
    if names_checked(engine):
        check_model(request.model, engine.info, engine.model.files.manifest)


DIALECT = Dialect("decisions", parse, score, respond, error_body, check)


PATH = "/v1/decisions"
blueprint = Blueprint("decisions", __name__)
post(blueprint, PATH, DIALECT)


def openapi_paths() -> Body:
    """Its path of the OpenAPI document (openapi.py)."""
    return {
        PATH: {
            "post": {
                "operationId": "decisions",
                "tags": ["OpenAI"],
                "summary": "Answer predicate, choice and score questions about one input (OpenAI Decisions API)",
                "description": "The OpenAI Decisions API on the same model and readout as System One: answers in "
                'question order, nothing generated. Errors use OpenAI\'s {"error": {message, type, '
                "param, code}}; anything wrong with the body (" + doc.UNREADABLE.rstrip(".") + "; wrong "
                "types, unknown fields, values out of range, a prompt too long) is a 400 whose param "
                "names the field.",
                "requestBody": doc.body("DecisionsRequest"),
                "responses": {
                    "200": doc.ok("One answer per question, in question order.", "DecisionsResponse"),
                    "400": doc.response(
                        "The body cannot be served; param names the field.",
                        doc.openai(
                            "invalid_type",
                            "invalid_value",
                            "missing_required_parameter",
                            "unknown_parameter",
                            "unsupported_content",
                            "context_length_exceeded",
                            "bad_request",
                        ),
                    ),
                    "404": doc.response(
                        "Only with DECISION_ADAPTER_STRICT_MODEL_NAMES=on: the request names a model "
                        "this endpoint does not serve.",
                        doc.openai("model_not_found"),
                    ),
                    **doc.common("Decisions"),
                },
            }
        }
    }


API = Api(
    "openai_decisions",
    "openai_decisions",
    body=DIALECT,
    sniff=lambda body: "input" in body and isinstance(body.get("questions"), list),
    routes=(f"POST {PATH}",),
    blueprint=blueprint,
    scope=Scope(PATH, under=True),
    errors=DIALECT,
    shape="decisions",
    openapi=openapi_paths,
)
