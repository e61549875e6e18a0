"""Decisions through OpenAI chat completions: a chat body carrying ``decision`` (the ``openai`` library's
``extra_body={"decision": {...}}``) is scored as this project's single decision, not chatted.

SageMaker's OpenAI-compatible route forwards only ``/v1/chat/completions``, so this is how the ``openai``
library reaches the decision model there. ``decision`` holds the fields of one decision of this project's
schema (apis/own.py: ``question``, ``options``, ``temperature``, ``order``, ``min_answer_mass``,
``question_type``, ``readout``, ``normalize``), with two of them optional:

* ``state``: absent, the state is the content of the last ``user`` message in ``messages``; present,
  ``messages`` are validated as for chat and not read;
* ``id``: absent, the completion's id.

The decision is scored exactly as ``POST /invocations`` scores the same decision (the same prompt, readout,
order mode, calibration and abstention), so the probabilities are the same numbers. The answer is a chat
completion the library parses: the message's content is the chosen option's id (the likeliest, the first
of equals; an abstained answer still names it and says ``abstained``), ``finish_reason`` ``stop``, the
choice's logprobs one token whose ``top_logprobs`` hold every option (token: its id, logprob: the natural
log of its probability, -9999 for a probability of 0), likeliest first, and beside ``choices`` a
``decision`` object: this project's result (ids and probabilities in request order, the readout, order,
calibration, timing, model) with ``choice`` and ``readout_name`` added. ``usage.prompt_tokens`` counts the
tokens read; nothing is generated.

A ``decision`` with a ``type`` is instead one question of the OpenAI Decisions API (``predicate``, ``choice``
or ``score``, as ``POST /v1/decisions`` takes it in ``questions``), with one more optional field, ``input``
(that API's input; absent, the content of the last ``user`` message). It is parsed, scored and answered
exactly as ``/v1/decisions`` answers a request of that input and that one question, so its probabilities are
that API's: the ``decision`` object is the answer ``/v1/decisions`` gives (``answers[0]``), the content the
likeliest value as text (a predicate's ``true`` or ``false``, a choice's value, a score's level index), the
logprobs every value. An abstention is the message's ``refusal`` (its content null, no logprobs), as the
API's answer is then a refusal.

Chat's generation parameters (``temperature``, ``max_tokens``, ``logprobs``, ...) are checked as for chat
and change nothing (the decision's own temperature is ``decision.temperature``); ``stream: true`` is
refused, naming ``stream``.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace
from typing import Any

from decision_contract import names

from .. import chat_completion
from ..answer_record import AnswerRecord
from ..caller_errors import AdapterError, InvalidValue
from ..prompt import as_text
from ..questions import ChatRequest, DecisionBatch
from ..seams import Scorer
from ..settings import Settings
from . import decisions, own
from .chat_requests import ChatDecisionFields, chat_request, validate_chat
from .decisions_requests import DecisionsQuestion, parse_decisions
from .dialect import Body

FIELD = names.CHAT_DECISION
NO_PROBABILITY = -9999.0  # the logprob written for a probability of 0 (OpenAI's value for an impossible token)


@dataclass(frozen=True)
class ChatDecision:
    """A chat body that asks a decision: the decision as the core's batch of one, and the completion's id."""

    completion_id: str
    batch: DecisionBatch
    model: str | None  # the model the request named (checked as chat's)
    question: DecisionsQuestion | None = None  # a Decisions-API question, answered as /v1/decisions answers it


def asks_decision(body: object) -> bool:
    return isinstance(body, dict) and body.get(FIELD) is not None


def _asks_question(body: object) -> bool:
    decision = body.get(FIELD) if isinstance(body, dict) else None
    return isinstance(decision, dict) and "type" in decision


def _user_state(chat: ChatRequest, own_field: str) -> tuple[str, str]:
    """The last user message's content, not blank, and its field; ``own_field``: the decision's field that
    would have carried the text instead."""
    for i in range(len(chat.messages) - 1, -1, -1):
        if chat.messages[i]["role"] == "user":
            state, field = chat.messages[i]["content"], f"messages[{i}].content"
            if not state.strip():
                raise InvalidValue(
                    f"{field} is empty and {own_field} is absent; send the text the question is about", field
                )
            return state, field
    raise InvalidValue(
        f"{own_field} is absent and messages hold no user message; send {own_field} or a user message "
        "holding the text the question is about",
        own_field,
    )


def _moved(exc: AdapterError, input_field: str) -> AdapterError:
    """An error of the Decisions API's parse, its field and message naming where the chat body holds it, and its
    code chat's own for the kind of error (that API's codes are not chat's, nor /invocations')."""

    def move(text: str) -> str:
        text = text.replace("questions[0]", FIELD)
        return re.sub(r"(?<![\w.\[])input(?=[\[.:\s]|$)", input_field, text)  # not input_text, input_json

    return type(exc)(move(exc.message), exc.field and move(exc.field), status=exc.status)


def _question(sent: dict[str, Any], chat: ChatRequest) -> ChatDecision:
    """A Decisions-API question: parsed by that API's rules, about its ``input`` or the last user message."""
    given = sent.get("input")
    if given is None:
        given, input_field = _user_state(chat, f"{FIELD}.input")
    else:
        input_field = f"{FIELD}.input"
    question = {key: value for key, value in sent.items() if key != "input"}
    try:
        request = parse_decisions({"input": given, "questions": [question]})
    except AdapterError as exc:
        raise _moved(exc, input_field) from None
    completion_id = chat_completion.completion_id()
    batch = decisions.batch_of(request)
    asked = replace(batch.questions[0], loc=("body", FIELD), options_loc=("body", FIELD))
    batch = replace(batch, id=completion_id, questions=(asked,), single=True, state_field=input_field)
    return ChatDecision(completion_id, batch, chat.model, request.questions[0])


def parse(body: Any, settings: Settings) -> ChatDecision:
    question = _asks_question(body)
    fields = validate_chat({k: v for k, v in body.items() if k != FIELD} if question else body)
    if fields.stream:
        raise InvalidValue(
            f"stream: true cannot carry a {FIELD} (it is answered whole, at once); send stream: false or omit it",
            "stream",
        )
    chat = chat_request(fields, settings.chat_max_tokens)  # chat's values checked as for chat, then unused
    if question:
        return _question(body[FIELD], chat)
    decision = fields.decision
    if not isinstance(decision, ChatDecisionFields):  # not a decision after all (asks_decision chose this parse)
        raise InvalidValue(f"{FIELD} must be an object", FIELD)
    state, state_field = decision.state, f"{FIELD}.state"
    if state is None:
        state, state_field = _user_state(chat, f"{FIELD}.state")
    completion_id = chat_completion.completion_id()
    decision_id = decision.id or completion_id
    question_ = own.question_of(decision, f"{FIELD}.", decision_id)
    batch = DecisionBatch(decision_id, state, (question_,), single=True, state_field=state_field)
    return ChatDecision(completion_id, batch, chat.model)


def work(engine: Scorer, request: ChatDecision) -> tuple[list[AnswerRecord], dict[str, Any]]:
    if request.question is not None:
        return decisions.decide(engine, request.batch)
    return own.decide(engine, request.batch)


def _logprob(p: float) -> float:
    return math.log(p) if p > 0 else NO_PROBABILITY


def _token(option_id: str, p: float) -> Body:
    return {"token": option_id, "logprob": _logprob(p), "bytes": list(option_id.encode("utf-8"))}


def _logprobs(labels: list[str], p: list[float]) -> tuple[str, Body]:
    """The chosen label (the likeliest, the first of equals) and the logprobs naming every label, likeliest
    first."""
    ranked = sorted(range(len(p)), key=lambda i: (-p[i], i))
    tops = [_token(labels[i], p[i]) for i in ranked]
    return labels[ranked[0]], {"content": [{**tops[0], "top_logprobs": tops}]}


def answer(request: ChatDecision, answers: list[AnswerRecord], timing: dict[str, Any], info: dict[str, Any]) -> Body:
    """The chat completion that answers the decision."""
    message: Body
    logprobs: Body | None
    if request.question is not None:
        found = decisions.answer(request.question, answers[0])
        if found["type"] == "refusal":
            message, logprobs = {"role": "assistant", "content": None, "refusal": found["refusal"]}, None
        else:
            labels = [as_text(value) for value in decisions.values_of(request.question)]
            chosen, logprobs = _logprobs(labels, list(answers[0].probabilities))
            message = {"role": "assistant", "content": chosen}
    else:
        result = own.respond(request.batch, answers, timing, info)["result"]
        chosen, logprobs = _logprobs(result["option_ids"], result["probabilities"])
        message = {"role": "assistant", "content": chosen}
        found = {**result, "choice": chosen, "readout_name": answers[0].readout}
    read = sum(a.read_tokens for a in answers) + timing["prior_tokens"]
    return {
        "id": request.completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": info["file"],
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": read,
            "completion_tokens": 0,
            "total_tokens": read,
            "prompt_tokens_details": {"cached_tokens": max(0, read - int(timing["input_tokens"]))},
        },
        FIELD: found,
    }
