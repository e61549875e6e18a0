"""Jev System One requests and answers, built and read without any I/O.

The decision adapter also speaks Jev's ``/v1/systemone`` API, and accepts the same body on
``POST /invocations`` (it tells the two apart by shape: here ``questions`` is an object keyed
by question id). So a request built here goes through SageMaker's ``InvokeEndpoint`` or to a
local adapter unchanged::

    body = request(ticket, {"refund": noul("Is the customer asking for money back?"),
                            "team": choice("Which team?", {"Billing": "Payments", "Technical": None}),
                            "anger": score("How frustrated?", ["Calm", "Frustrated", "Very angry"])})
    result = parse_response(reply, body)      # reply: the parsed JSON the endpoint sent back
    result["team"].value                      # 'Billing'
    result["refund"].probabilities            # {'no': 0.06, 'yes': 0.94}

Every answer exposes ``probabilities`` keyed like a JevBench task's labels (choice: option
names; noul: ``no``/``yes``; score: ``"0"``..``"n-1"``), so ``decisions.accept_or_fallback``
and the benchmark read Jev answers the same way as decisions. An answer is checked by the contract's one
rule (``decision_contract.wire``) and says which readout read it (``readout``, from the method the adapter
names in ``x_readout``; None from a server that names none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decision_contract import wire

from ..errors import InvalidInput

DEFAULT_MODEL = "jev-latest"
QUESTION_TYPES = ("noul", "choice", "score")
MIN_OPTIONS, MAX_OPTIONS = 2, 255
MIN_LEVELS, MAX_LEVELS = 2, 10


# What a state, an instruction, a description or a level may be: text, or structured content the adapter renders.
Content = str | dict[str, Any] | list[Any]


class SystemOneFormatError(InvalidInput):
    """A System One reply that does not answer the request it was sent for."""


# -- requests -------------------------------------------------------------------------


def _content(value: object, what: str) -> Content | None:
    if value is None or isinstance(value, (str, dict, list)):
        return value
    raise TypeError(f"{what} must be a string, a dict or a list, got {type(value).__name__}")


def noul(
    instructions: Content | None = None, *, true: Content | None = None, false: Content | None = None
) -> dict[str, Any]:
    """A yes/no question; ``true``/``false`` optionally describe the two outcomes."""
    if instructions is None and true is None and false is None:
        raise ValueError("a noul needs instructions or a description of one outcome")
    question: dict[str, Any] = {"type": "noul"}
    if instructions is not None:
        question["instructions"] = _content(instructions, "instructions")
    criteria = {side: _content(text, side) for side, text in (("true", true), ("false", false)) if text is not None}
    if criteria:
        question["criteria"] = criteria
    return question


def choice(instructions: Content | None, options: Mapping[str, Content | None] | Sequence[str]) -> dict[str, Any]:
    """One of 2-255 named options: ``{name: description or None}``, or a list of names."""
    if isinstance(options, Mapping):
        criteria = {str(k): _content(v, f"the description of {k!r}") for k, v in options.items()}
    else:
        names = [str(o) for o in options]
        if len(set(names)) != len(names):
            raise ValueError("option names must be unique")
        criteria = {name: None for name in names}
    if not MIN_OPTIONS <= len(criteria) <= MAX_OPTIONS:
        raise ValueError(f"a choice takes {MIN_OPTIONS} to {MAX_OPTIONS} options, got {len(criteria)}")
    if any(not name for name in criteria):
        raise ValueError("option names must not be empty")
    question: dict[str, Any] = {"type": "choice", "criteria": criteria}
    if instructions is not None:
        question["instructions"] = _content(instructions, "instructions")
    return question


def score(instructions: Content | None, levels: Sequence[Content]) -> dict[str, Any]:
    """A rating on 2-10 ordered levels, level 0 first."""
    checked = [_content(level, "a level") for level in levels]
    if not MIN_LEVELS <= len(checked) <= MAX_LEVELS or any(level is None for level in checked):
        raise ValueError(f"a score takes {MIN_LEVELS} to {MAX_LEVELS} levels (none of them null)")
    question: dict[str, Any] = {"type": "score", "criteria": checked}
    if instructions is not None:
        question["instructions"] = _content(instructions, "instructions")
    return question


def request(
    state: Content,
    questions: Mapping[str, Mapping[str, Any]],
    *,
    model: str | None = DEFAULT_MODEL,
    **extra: Any,
) -> dict[str, Any]:
    """The request body: ``{"model", "state", "questions": {id: question}}`` (plus ``x_``-style extras)."""
    _content(state, "state")
    if state is None:
        raise ValueError("state is required: the evidence the questions are about")
    if not questions:
        raise ValueError("send at least one question")
    for qid, question in questions.items():
        if not isinstance(qid, str) or not qid:
            raise ValueError(f"question ids must be non-empty strings, got {qid!r}")
        if not isinstance(question, Mapping) or question.get("type") not in QUESTION_TYPES:
            raise ValueError(f"question {qid!r} needs a type: one of {', '.join(QUESTION_TYPES)}")
    body: dict[str, Any] = {"state": state, "questions": {qid: dict(q) for qid, q in questions.items()}, **extra}
    if model is not None:
        body["model"] = model
    return body


# -- answers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One answer. ``value``: the probability of yes (noul), the chosen option (choice), or the
    expected level (score). ``probabilities`` in question order, keyed as described above."""

    id: str
    type: str
    value: Any
    probabilities: dict[str, float]
    confidence: float | None = None
    legend: dict[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    readout: str | None = None  # the readout that read it, where the server names its method (x_readout)

    @property
    def top(self) -> str:
        """The most probable label (the first one on a tie)."""
        return max(self.probabilities, key=self.probabilities.__getitem__)


@dataclass(frozen=True)
class SystemOneResult:
    model: str
    answers: dict[str, Answer]
    usage: dict[str, int]
    client_latency_ms: float = field(default=0.0, compare=False)
    attempts: int = field(default=1, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __getitem__(self, question_id: str) -> Answer:
        return self.answers[question_id]

    @property
    def server_ms(self) -> float | None:
        """The adapter's own time for the request (its ``x_timing``), if it reported one."""
        return (self.raw.get("x_timing") or {}).get("total_ms")


def _probability(value: Any, where: str) -> float:
    problem = wire.probability_problem(value)
    if problem:
        raise SystemOneFormatError(f"{where} {problem}, not a probability")
    return float(value)


def _distribution(raw: object, keys: list[str], where: str) -> dict[str, float]:
    """The answer's ``probabilities``, an object keyed by exactly ``keys`` (in any order), by the contract's rule."""
    if not isinstance(raw, Mapping):
        raise SystemOneFormatError(f"{where}.probabilities is a {type(raw).__name__}, not an object keyed by {keys}")
    got = [str(key) for key in raw]
    problem = wire.answer_problem(keys, got, list(raw.values()), ordered=False)
    if problem:
        raise SystemOneFormatError(f"{where}.probabilities: {problem}")
    return {key: float(raw[key]) for key in keys}


def _readout(raw: Mapping[str, Any], where: str) -> str | None:
    try:
        return wire.readout_of(raw, "systemone")
    except wire.WireError as exc:
        raise SystemOneFormatError(f"{where}: {exc}") from None


def parse_answer(qid: str, question: Mapping[str, Any], raw: object) -> Answer:
    where = f"answers[{qid!r}]"
    qtype = question.get("type")
    if not isinstance(raw, Mapping) or raw.get("type") != qtype:
        got = raw.get("type") if isinstance(raw, Mapping) else type(raw).__name__
        raise SystemOneFormatError(f"{where} is of type {got!r}, the question is {qtype!r}")
    readout = _readout(raw, where)
    if qtype == "noul":
        p = _probability(raw.get("noul"), f"{where}.noul")
        return Answer(qid, qtype, p, {"no": 1.0 - p, "yes": p}, raw=raw, readout=readout)
    if qtype == "choice":
        names = list(question["criteria"])
        probabilities = _distribution(raw.get("probabilities"), names, where)
        picked = raw.get("choice")
        if picked not in probabilities:
            raise SystemOneFormatError(f"{where}.choice {picked!r} is not one of the options")
        return Answer(qid, qtype, picked, probabilities, raw.get("confidence"), raw=raw, readout=readout)
    if qtype != "score":
        raise SystemOneFormatError(f"{where}: the question's type {qtype!r} is none of {', '.join(QUESTION_TYPES)}")
    levels = [str(i) for i in range(len(question["criteria"]))]
    probabilities = _distribution(raw.get("probabilities"), levels, where)
    value = raw.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SystemOneFormatError(f"{where}.score is {value!r}, not a number")
    return Answer(
        qid, "score", float(value), probabilities, raw.get("confidence"), raw.get("legend"), raw=raw, readout=readout
    )


def parse_response(
    reply: Mapping[str, Any], sent: Mapping[str, Any], *, client_latency_ms: float = 0.0, attempts: int = 1
) -> SystemOneResult:
    """Read a System One reply, checking it answers exactly the questions of ``sent``."""
    if not isinstance(reply, Mapping) or not isinstance(reply.get("answers"), Mapping):
        raise SystemOneFormatError("the reply has no 'answers' object; is this a System One endpoint?")
    questions = sent["questions"]
    answers = reply["answers"]
    missing = [q for q in questions if q not in answers]
    extra = [a for a in answers if a not in questions]
    if missing or extra:
        raise SystemOneFormatError(f"answers do not match the questions: missing {missing}, unexpected {extra}")
    usage = reply.get("usage") or {}
    return SystemOneResult(
        model=str(reply.get("model", "")),
        answers={qid: parse_answer(qid, question, answers[qid]) for qid, question in questions.items()},
        usage={k: int(v) for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)},
        client_latency_ms=client_latency_ms,
        attempts=attempts,
        raw=reply,
    )


def error_fields(body: object) -> tuple[str | None, str, str | None] | None:
    """(code, message, field) from a Jev error body (``{"detail": [...]}`` or ``{"detail": {...}}``),
    or None when the body is not one."""
    detail = body.get("detail") if isinstance(body, Mapping) else None
    if isinstance(detail, Mapping) and isinstance(detail.get("message"), str):
        return detail.get("error_type"), detail["message"], None
    if isinstance(detail, list) and detail and all(isinstance(d, Mapping) for d in detail):
        first = detail[0]
        loc = [str(part) for part in (first.get("loc") or []) if part != "body"]
        message = "; ".join(str(d.get("msg")) for d in detail)
        return first.get("type"), message, ".".join(loc) or None
    return None


# -- JevBench task records (docs/glossary.md) --------------------------------------------------


def task_request(task: Mapping[str, Any], *, model: str | None = DEFAULT_MODEL) -> dict[str, Any]:
    """A one-question System One request for a JevBench task ``{id, state, question, labels, ...}``."""
    return request(task["state"], {str(task["id"]): dict(task["question"])}, model=model)


def task_probabilities(task: Mapping[str, Any], answer: Answer) -> dict[str, float]:
    """The answer's probabilities keyed by the task's labels (noul ``no``/``yes``, score ``"0"``.., options)."""
    labels = [str(label) for label in task["labels"]]
    if set(labels) != set(answer.probabilities):
        raise SystemOneFormatError(f"task {task['id']!r} has labels {labels}, the answer {list(answer.probabilities)}")
    return {label: answer.probabilities[label] for label in labels}
