"""Decisions through chat completions, built and read without any I/O.

The decision adapter answers a chat-completions request that carries ``decision`` with that decision's
probabilities (docs/api.md, "Decisions through chat completions"). That is the one way the official
``openai`` library reaches a decision through SageMaker's OpenAI-compatible route, which forwards only chat
completions. This module builds the keyword arguments of ``client.chat.completions.create`` and reads the
completion; whoever holds the ``openai`` client (a local base URL, or the route with a bearer token) sends
them::

    kwargs = create_kwargs("I was charged twice this month.", "Which team should handle it?",
                           {"billing": "Billing and refunds", "tech": "Technical support"})
    completion = client.chat.completions.create(**kwargs)
    answer = read(completion, kwargs)
    answer.choice                    # 'billing'
    answer.probabilities             # {'billing': 0.71, 'tech': 0.29}, in the order sent

``read`` checks the answer by the rule the adapter writes every decision to (``decision_contract.wire``):
exactly the option ids sent, in their order, one distribution over them.

One question of the OpenAI Decisions API (``openai_decisions.predicate``, ``choice`` or ``score``) travels the
same way, and comes back as the answer ``POST /v1/decisions`` gives it::

    kwargs = question_kwargs("I was charged twice this month.", choice("Which team?", ["billing", "tech"]))
    answer = read_question(client.chat.completions.create(**kwargs), kwargs)
    answer.choice, answer.probabilities  # 'billing', {'billing': 0.71, 'tech': 0.29}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from decision_contract import names, wire

from ..errors import InvalidInput
from . import openai_decisions
from .openai_decisions import DEFAULT_MODEL
from .request_bodies import OptionsLike, option_list

FIELD = names.CHAT_DECISION  # the body's (extra_body's) field, and the completion's


class ChatDecisionFormatError(InvalidInput):
    """A chat completion that does not carry the decision asked for."""


def create_kwargs(
    state: Any,
    question: str,
    options: OptionsLike,
    *,
    id: str | None = None,
    model: str = DEFAULT_MODEL,
    readout: str | None = None,
    normalize: str | None = None,
    order: str | None = None,
    temperature: float | None = None,
    min_answer_mass: float | None = None,
    question_type: str | None = None,
) -> dict[str, Any]:
    """``client.chat.completions.create(**kwargs)``'s arguments asking one decision: ``state`` (text, or any
    JSON object or array) and ``question`` over ``options`` (``{id: text}``, ``[(id, text)]``,
    ``[{"id", "text"}]`` or ``[id]``). The state travels in ``decision.state``; the one user message holds
    the question, for whatever reads the conversation on the way (the adapter does not read it then).
    Left out (None), a knob takes the server's default."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("a decision needs a question: a non-blank string")
    listed = option_list(options)
    if len(listed) < 2:
        raise ValueError("a decision needs at least two options")
    if readout is not None and wire.order_problem(readout, order):
        raise ValueError(wire.order_problem(readout, order))
    decision: dict[str, Any] = {"state": state, "question": question, "options": listed}
    knobs = {
        "id": id,
        "readout": readout,
        "normalize": normalize,
        "order": order,
        "temperature": temperature,
        "min_answer_mass": min_answer_mass,
        "question_type": question_type,
    }
    decision.update({key: value for key, value in knobs.items() if value is not None})
    return {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "extra_body": {FIELD: decision},
    }


@dataclass(frozen=True)
class ChatDecision:
    """A decision read from a chat completion."""

    id: str
    choice: str  # the chosen option's id: the likeliest, the first of equals
    probabilities: dict[str, float]  # option id -> probability, in the order the options were sent
    readout: str | None  # letters or cloze
    abstained: bool
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the completion's decision


def carried(completion: Any) -> Mapping[str, Any]:
    """The ``decision`` object of a chat completion (the ``openai`` library's ``ChatCompletion`` or its JSON as a
    dict); a plain chat answer is refused."""
    data = completion if isinstance(completion, Mapping) else completion.model_dump()
    found = data.get(FIELD)
    if not isinstance(found, Mapping):
        raise ChatDecisionFormatError(
            f"the completion carries no {FIELD!r} object: the server answered a plain chat (is it the decision "
            f"adapter, and did the request carry extra_body={{{FIELD!r}: ...}}?)"
        )
    return found


def read(completion: Any, asked: Mapping[str, Any] | None = None) -> ChatDecision:
    """The decision a chat completion carries: the ``openai`` library's ``ChatCompletion`` or its JSON as a
    dict. ``asked``: the kwargs it was created with, to check that it answers exactly their options."""
    found = carried(completion)
    ids, probabilities = found.get("option_ids"), found.get("probabilities")
    if not isinstance(ids, list) or not isinstance(probabilities, list):
        raise ChatDecisionFormatError(f"the completion's {FIELD} lacks option_ids or probabilities")
    sent = ids
    if asked is not None:
        sent = [item if isinstance(item, str) else item["id"] for item in asked["extra_body"][FIELD]["options"]]
    problem = wire.answer_problem(sent, ids, probabilities)
    if problem:
        raise ChatDecisionFormatError(f"the completion's {FIELD} does not answer the options sent: {problem}")
    by_id = dict(zip(ids, (float(p) for p in probabilities)))
    choice = found.get("choice")
    if not isinstance(choice, str) or choice not in by_id:
        raise ChatDecisionFormatError(f"the completion's {FIELD}.choice {choice!r} is not an option sent")
    try:
        readout = wire.readout_of(found)
    except wire.WireError as exc:
        raise ChatDecisionFormatError(f"the completion's {FIELD}: {exc}") from None
    return ChatDecision(str(found.get("id")), choice, by_id, readout, bool(found.get("abstained")), found)


def question_kwargs(input: Any, question: Mapping[str, Any], *, model: str = DEFAULT_MODEL) -> dict[str, Any]:
    """``client.chat.completions.create(**kwargs)``'s arguments asking one OpenAI Decisions question (as
    ``openai_decisions.predicate`` / ``choice`` / ``score`` build it) about ``input``: a text travels as the user
    message, a list of the API's input items in ``decision.input``."""
    if not isinstance(question, Mapping) or question.get("type") not in ("predicate", "choice", "score"):
        raise ValueError("question must be one OpenAI Decisions question: a predicate, choice or score")
    decision = dict(question)
    if isinstance(input, str):
        if not input.strip():
            raise ValueError("input must hold the text the question is about")
        messages = [{"role": "user", "content": input}]
    else:
        decision["input"] = list(input)
        instructions = question.get("instructions")
        messages = [{"role": "user", "content": instructions if isinstance(instructions, str) else "Decide."}]
    return {"model": model, "messages": messages, "extra_body": {FIELD: decision}}


def read_question(completion: Any, asked: Mapping[str, Any]) -> openai_decisions.Answer:
    """The Decisions-API answer a chat completion carries, checked against the question ``asked`` (the kwargs
    ``question_kwargs`` made): the same ``Answer`` that ``openai_decisions.parse_response`` gives."""
    found = carried(completion)
    question = asked["extra_body"][FIELD]
    try:
        return openai_decisions.parse_answer(0, question, found)
    except openai_decisions.DecisionsFormatError as exc:
        raise ChatDecisionFormatError(f"the completion's {FIELD} does not answer the question sent: {exc}") from None
