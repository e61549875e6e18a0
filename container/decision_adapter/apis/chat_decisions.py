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

Chat's generation parameters (``temperature``, ``max_tokens``, ``logprobs``, ...) are checked as for chat
and change nothing (the decision's own temperature is ``decision.temperature``); ``stream: true`` is
refused, naming ``stream``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from decision_contract import names

from .. import chat as chat_completion
from ..answer_record import AnswerRecord
from ..errors import InvalidValue
from ..questions import DecisionBatch, Message
from ..seams import Scorer
from ..settings import Settings
from . import own
from .chat_requests import chat_request, validate_chat
from .dialect import Body

FIELD = names.CHAT_DECISION
NO_PROBABILITY = -9999.0  # the logprob written for a probability of 0 (OpenAI's value for an impossible token)


@dataclass(frozen=True)
class ChatDecision:
    """A chat body that asks a decision: the decision as the core's batch of one, and the completion's id."""

    completion_id: str
    batch: DecisionBatch
    model: str | None  # the model the request named (checked as chat's)


def asks_decision(body: object) -> bool:
    return isinstance(body, dict) and body.get(FIELD) is not None


def _last_user(messages: tuple[Message, ...]) -> tuple[str, int]:
    """The last user message's content and its index."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user":
            return messages[i]["content"], i
    raise InvalidValue(
        f"{FIELD}.state is absent and messages hold no user message; send {FIELD}.state or a user message "
        "holding the text the question is about",
        f"{FIELD}.state",
    )


def parse(body: Any, settings: Settings) -> ChatDecision:
    fields = validate_chat(body)
    if fields.stream:
        raise InvalidValue(
            f"stream: true cannot carry a {FIELD} (it is answered whole, at once); send stream: false or omit it",
            "stream",
        )
    chat = chat_request(fields, settings.chat_max_tokens)  # chat's values checked as for chat, then unused
    decision = fields.decision
    if decision is None:  # not a decision after all (asks_decision chose this parse)
        raise InvalidValue(f"{FIELD} must be an object", FIELD)
    state, state_field = decision.state, f"{FIELD}.state"
    if state is None:
        state, i = _last_user(chat.messages)
        state_field = f"messages[{i}].content"
        if not state.strip():
            raise InvalidValue(
                f"{state_field} is empty and {FIELD}.state is absent; send the text the question is about",
                state_field,
            )
    completion_id = chat_completion.completion_id()
    decision_id = decision.id or completion_id
    question = own.question_of(decision, f"{FIELD}.", decision_id)
    batch = DecisionBatch(decision_id, state, (question,), single=True, state_field=state_field)
    return ChatDecision(completion_id, batch, chat.model)


def work(engine: Scorer, request: ChatDecision) -> tuple[list[AnswerRecord], dict[str, Any]]:
    return own.decide(engine, request.batch)


def _logprob(p: float) -> float:
    return math.log(p) if p > 0 else NO_PROBABILITY


def _token(option_id: str, p: float) -> Body:
    return {"token": option_id, "logprob": _logprob(p), "bytes": list(option_id.encode("utf-8"))}


def answer(request: ChatDecision, answers: list[AnswerRecord], timing: dict[str, Any], info: dict[str, Any]) -> Body:
    """The chat completion that answers the decision."""
    result = own.respond(request.batch, answers, timing, info)["result"]
    ids, p = result["option_ids"], result["probabilities"]
    ranked = sorted(range(len(p)), key=lambda i: (-p[i], i))  # likeliest first; equals in request order
    chosen = ids[ranked[0]]
    read = sum(a.read_tokens for a in answers) + timing["prior_tokens"]
    return {
        "id": request.completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": info["file"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": chosen},
                "logprobs": {
                    "content": [
                        {**_token(chosen, p[ranked[0]]), "top_logprobs": [_token(ids[i], p[i]) for i in ranked]}
                    ]
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": read,
            "completion_tokens": 0,
            "total_tokens": read,
            "prompt_tokens_details": {"cached_tokens": max(0, read - int(timing["input_tokens"]))},
        },
        FIELD: {**result, "choice": chosen, "readout_name": answers[0].readout},
    }
