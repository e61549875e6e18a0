"""OpenAI Decisions API requests and answers, built and read without any I/O.

The decision adapter serves this format on ``POST /v1/decisions`` and accepts the same body on
``POST /invocations`` (told apart by its ``input``), so a request built here goes through SageMaker's
``InvokeEndpoint`` or to a local adapter unchanged::

    body = request("The parcel never arrived; I want my money back.",
                   [predicate("The customer asks for a refund.", name="refund"),
                    choice("Which team should handle it?", ["billing", "shipping"], name="team"),
                    score("How frustrated is the customer?", ["calm", "annoyed", "furious"], name="anger")])
    result = parse_response(reply, body)   # reply: the parsed JSON the endpoint sent back
    result["team"].choice                  # 'billing'
    result["refund"].probabilities         # {'yes': 0.71, 'no': 0.29}

Every answer exposes ``probabilities`` keyed by option (predicate: ``yes``/``no``; choice: the values;
score: the levels' labels), so callers read all three types the same way. The adapter's own fields are read
too: ``readout`` (its ``x_readout``: a readout of ``decision_contract.names.READOUTS``) and ``prediction_set`` (its
``x_prediction_set``, keyed like ``probabilities``; None where no kept calibration threshold applied), so
``policy.Policy(require_set_of_one=True).apply(result["team"])`` routes on it as on the other APIs' answers.
An answer the server abstained on is the API's refusal: ``type`` ``"refusal"``, no probabilities, and
``refusal`` saying why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decision_contract import wire

from ..errors import InvalidInput

DEFAULT_MODEL = "jev-latest"


class DecisionsFormatError(InvalidInput):
    """An OpenAI Decisions reply that does not answer the request it was sent for."""


# -- requests -------------------------------------------------------------------------


def predicate(instructions: str, *, name: str | None = None) -> dict[str, Any]:
    """Is the instruction true of the input? Answered with the probability of yes."""
    return _question("predicate", instructions, name)


def choice(
    instructions: str, values: Sequence[str] | Mapping[str, str | None], *, name: str | None = None
) -> dict[str, Any]:
    """One of a fixed set of values; a mapping gives each value a description."""
    items = values.items() if isinstance(values, Mapping) else ((value, None) for value in values)
    choices = [{"value": value, **({"description": text} if text else {})} for value, text in items]
    if len(choices) < 2:
        raise ValueError("a choice needs at least two values")
    return {**_question("choice", instructions, name), "choices": choices}


def score(instructions: str, levels: Sequence[str], *, name: str | None = None) -> dict[str, Any]:
    """A level of an ordered rubric, the first level lowest."""
    if len(levels) < 2:
        raise ValueError("a score needs at least two levels")
    return {**_question("score", instructions, name), "levels": [{"label": label} for label in levels]}


def _question(kind: str, instructions: str, name: str | None) -> dict[str, Any]:
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValueError(f"a {kind} question needs instructions: a non-blank string")
    return {"type": kind, **({"name": name} if name is not None else {}), "instructions": instructions}


def request(
    input: str | Sequence[Mapping[str, Any]],
    questions: Sequence[Mapping[str, Any]],
    *,
    model: str | None = DEFAULT_MODEL,
) -> dict[str, Any]:
    """The body: one input (a string, or user messages) and its questions, answered in this order."""
    if not questions:
        raise ValueError("ask at least one question")
    names = [q.get("name") for q in questions if q.get("name") is not None]
    if len(names) != len(set(names)):
        raise ValueError("question names must be unique within a request")
    body: dict[str, Any] = {"input": input if isinstance(input, str) else list(input), "questions": list(questions)}
    if model is not None:
        body["model"] = model
    return body


# -- answers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    type: str
    name: str | None
    probabilities: dict[str, float]  # option -> probability, in the question's order
    choice: str | None = None  # choice: the value picked
    score: float | None = None  # score: the expected level index (0 = the first level)
    confidence: float | None = None
    readout: str | None = None  # x_readout: the readout that read it, where the server says
    prediction_set: tuple[str, ...] | None = None  # x_prediction_set, keyed like probabilities
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    refusal: str | None = None  # type "refusal": why the server gave no probabilities (it abstained)

    @property
    def top(self) -> str:
        if not self.probabilities:
            raise ValueError(f"the answer to {self.name!r} is a refusal, with no options ranked: {self.refusal}")
        return max(self.probabilities, key=self.probabilities.__getitem__)

    def as_dict(self) -> dict[str, float]:
        return dict(self.probabilities)


@dataclass(frozen=True)
class DecisionsResult:
    model: str
    answers: tuple[Answer, ...]
    usage: Mapping[str, Any]
    client_latency_ms: float = 0.0
    attempts: int = 1

    def __getitem__(self, name: str) -> Answer:
        for answer in self.answers:
            if answer.name == name:
                return answer
        raise KeyError(name)


def _probability(value: Any, where: str) -> float:
    problem = wire.probability_problem(value)
    if problem:
        raise DecisionsFormatError(f"{where}: {value!r} is not a probability ({problem.removeprefix('is ')})")
    return float(value)


def _distribution(raw: object, keys: list[str], key_field: str, where: str) -> dict[str, float]:
    """The answer's list of ``{key_field, probability}``, one per key in the question's order, by the contract's
    rule."""
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        raise DecisionsFormatError(f"{where}: expected a list of {len(keys)} probabilities, got {raw!r:.200}")
    got = [str(item.get(key_field)) for item in raw]
    probabilities = [item.get("probability") for item in raw]
    problem = wire.answer_problem(keys, got, probabilities)
    if problem:
        raise DecisionsFormatError(f"{where}: {problem}")
    return {key: float(p) for key, p in zip(got, probabilities)}


def _readout(raw: Mapping[str, Any], where: str) -> str | None:
    try:
        return wire.readout_of(raw, "openai_decisions")
    except wire.WireError as exc:
        raise DecisionsFormatError(f"{where}: {exc}") from None


def _prediction_set(
    raw: Mapping[str, Any], keys: Mapping[tuple[type, object], str], where: str
) -> tuple[str, ...] | None:
    """``x_prediction_set`` in the answer's own keys; ``keys`` maps each value the API names a member by
    (tagged with its type, as true and "true" differ) to the key ``probabilities`` uses."""
    members = raw.get(wire.X_PREDICTION_SET)
    if members is None:
        return None
    if not isinstance(members, list):
        raise DecisionsFormatError(f"{where}.x_prediction_set: {members!r:.200} is not a list")
    found = []
    for member in members:
        key = keys.get((type(member), member)) if isinstance(member, (str, int)) else None  # bool is an int
        if key is None:
            raise DecisionsFormatError(f"{where}.x_prediction_set: {member!r} is not one of the question's answers")
        found.append(key)
    return tuple(found)


def parse_answer(index: int, question: Mapping[str, Any], raw: object) -> Answer:
    where = f"answers[{index}]"
    kind = question["type"]
    if (
        not isinstance(raw, Mapping)
        or raw.get("type") not in (kind, "refusal")
        or raw.get("name") != question.get("name")
    ):
        raise DecisionsFormatError(f"{where}: expected the {kind} question {question.get('name')!r}, got {raw!r:.200}")
    readout = _readout(raw, where)
    if raw["type"] == "refusal":
        why = raw.get("refusal")
        if why is not None and not isinstance(why, str):
            raise DecisionsFormatError(f"{where}.refusal: {why!r:.200} is not a text")
        return Answer("refusal", raw.get("name"), {}, readout=readout, raw=raw, refusal=why)
    if kind == "predicate":
        yes = _probability(raw.get("probability"), f"{where}.probability")
        members = _prediction_set(raw, {(bool, True): "yes", (bool, False): "no"}, where)
        return Answer(
            kind, raw.get("name"), {"yes": yes, "no": 1.0 - yes}, readout=readout, prediction_set=members, raw=raw
        )
    confidence = _probability(raw.get("confidence"), f"{where}.confidence")
    if kind == "choice":
        values = [str(c["value"]) for c in question["choices"]]
        probabilities = _distribution(raw.get("probabilities"), values, "value", f"{where}.probabilities")
        if str(raw.get("choice")) not in probabilities:
            raise DecisionsFormatError(f"{where}.choice: {raw.get('choice')!r} is not one of the values sent")
        members = _prediction_set(
            raw, {(type(c["value"]), c["value"]): str(c["value"]) for c in question["choices"]}, where
        )
        return Answer(
            kind,
            raw.get("name"),
            probabilities,
            choice=str(raw["choice"]),
            confidence=confidence,
            readout=readout,
            prediction_set=members,
            raw=raw,
        )
    labels = [level["label"] for level in question["levels"]]
    probabilities = _distribution(raw.get("probabilities"), labels, "label", f"{where}.probabilities")
    value = raw.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= len(labels) - 1:
        raise DecisionsFormatError(f"{where}.score: {value!r} is not a level index between 0 and {len(labels) - 1}")
    members = _prediction_set(raw, {(int, i): label for i, label in enumerate(labels)}, where)
    return Answer(
        kind,
        raw.get("name"),
        probabilities,
        score=float(value),
        confidence=confidence,
        readout=readout,
        prediction_set=members,
        raw=raw,
    )


def parse_response(
    reply: Mapping[str, Any], sent: Mapping[str, Any], *, client_latency_ms: float = 0.0, attempts: int = 1
) -> DecisionsResult:
    """The reply read against the request it answers: one answer per question, in order."""
    answers = reply.get("answers") if isinstance(reply, Mapping) else None
    questions = sent["questions"]
    if not isinstance(answers, list) or len(answers) != len(questions):
        raise DecisionsFormatError(f"expected {len(questions)} answers, got {answers!r:.200}")
    parsed = tuple(parse_answer(i, q, a) for i, (q, a) in enumerate(zip(questions, answers)))
    return DecisionsResult(
        str(reply.get("model")),
        parsed,
        dict(reply.get("usage") or {}),
        client_latency_ms=client_latency_ms,
        attempts=attempts,
    )
