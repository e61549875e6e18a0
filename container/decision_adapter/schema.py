"""The request types the engine reads, and how ``POST /invocations`` tells its bodies apart.

Each body is validated by its dialect's pydantic models (``apis/``) before anything reaches the
model; the engine gets these plain types:

* ``DecisionBatch``: one state and one or more questions about it (``apis/own.py``,
  ``apis/sample.py``; a single decision is a batch of one)
* ``ChatRequest``: an OpenAI chat request (``apis/chat.py``)

``parse_decision``, ``parse_sample`` and ``parse_chat`` are the dialects' parsers, named here for
the callers that parse bodies without the app (benchmarks, the bindings proof, tests).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidType, InvalidValue

MIN_OPTIONS = 2
MAX_OPTIONS = 16
MAX_QUESTIONS = 64  # the default of DECISION_ADAPTER_MAX_SHARED_DECISIONS, as the sample's
SAMPLE_FIELDS = ("decision", "decisions")
MAX_ID_CHARS = 256
MIN_TEMPERATURE = 1e-3  # exclusive lower bound for a decision's temperature
CHAT_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Option:
    id: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    options: tuple[Option, ...]
    temperature: float | None = None  # None: the calibration's, or 1
    order: str | None = None  # None: the server's default (DECISION_ADAPTER_ORDER)
    min_answer_mass: float | None = None  # None: DECISION_ADAPTER_MIN_ANSWER_MASS
    question_type: str = "choice"  # picks the calibration profile


@dataclass(frozen=True)
class DecisionBatch:
    """One state and one or more questions about it (a single decision is a batch of one)."""

    id: str
    state: object
    questions: tuple[Question, ...]
    single: bool  # True when the body was a single decision


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[dict, ...]
    max_tokens: int | None
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]


def _type_name(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null", int: "integer", float: "number"}.get(type(value), type(value).__name__)


# The parsers live with their dialects, which import the types above: imported when called.

def parse_decision(body: dict, max_questions: int = MAX_QUESTIONS) -> DecisionBatch:
    """A single decision or a shared-state batch (apis/own.py)."""
    from .apis.own import parse_decision as parse

    return parse(body, max_questions)


def parse_sample(body: dict, max_decisions: int = MAX_QUESTIONS) -> DecisionBatch:
    """The published sample's ``{"decision"}`` or ``{"decisions"}`` (apis/sample.py)."""
    from .apis.sample import parse_sample as parse

    return parse(body, max_decisions)


def parse_chat(body: dict, default_max_tokens: int, max_tokens_cap: int | None = None) -> ChatRequest:
    """An OpenAI chat request (apis/chat.py)."""
    from .apis.chat import parse_chat as parse

    return parse(body, default_max_tokens, max_tokens_cap)


def request_kind(body) -> str:
    """'chat', 'systemone', 'openai_decisions', 'sample', 'decision' or raise: dispatch on the body's shape."""
    if not isinstance(body, dict):
        raise InvalidType(f"the request body must be a JSON object, got {_type_name(body)}", None)
    if "messages" in body:
        return "chat"
    if "decision" in body or "decisions" in body:
        return "sample"
    if isinstance(body.get("questions"), dict):
        return "systemone"
    if "input" in body and isinstance(body.get("questions"), list):
        return "openai_decisions"
    if "question" in body or "questions" in body:
        return "decision"
    raise InvalidValue(
        "the body must carry 'question' and 'options' (a decision), 'questions' (a shared-state batch: an "
        "array; a Jev System One request: an object keyed by question id; with 'input', the OpenAI Decisions "
        "format), 'decision' or 'decisions' (the "
        "published sample's format) or 'messages' (a chat request)",
        None,
    )
