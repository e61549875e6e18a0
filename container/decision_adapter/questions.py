"""What is asked, in plain types, and the limits on it: the bottom of the adapter, importing none of it.

Every API's parser (``apis/``) turns its bodies into these; the scoring core reads only these:

* ``DecisionBatch``: one state and one or more ``Question`` about it, each over its ``Option`` list
  (a single decision is a batch of one);
* ``ScoringItem``: one rendered prompt (``RenderedPrompt``) to score over its options, the unit the engine
  evaluates;
* ``ChatRequest``: an OpenAI chat request, the one thing asked that is not a question.

The limits are declared here once, for the parsers, the OpenAPI document and the tests alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from decision_contract import names

# A decision of this project's schema or the published sample's.
MIN_OPTIONS = 2
MAX_OPTIONS = 16
MAX_QUESTIONS = 64  # questions of a request (the default of DECISION_ADAPTER_MAX_SHARED_DECISIONS, as the sample's)
MAX_ID_CHARS = 256
MIN_TEMPERATURE = 1e-3  # exclusive lower bound: below it the scaled logits overflow; it means "argmax" anyway
MAX_TEMPERATURE = 100.0

# A typed question of Jev System One or the OpenAI Decisions API (choice: its options; score: its levels).
MIN_CHOICE_OPTIONS, MAX_CHOICE_OPTIONS = 2, 255
MIN_SCORE_LEVELS, MAX_SCORE_LEVELS = 2, 10
MAX_DECISION_QUESTIONS = 400  # questions of one OpenAI Decisions request, as the API allows

CHAT_ROLES = ("system", "user", "assistant")

Loc = tuple[str | int, ...]  # where an error points in a request body, e.g. ("body", "questions", "q1")
Message = dict[str, str]  # a chat message: its role and its content


@dataclass(frozen=True)
class Option:
    id: str
    text: str  # what the model reads
    cloze: str | None = None  # what the cloze readout scores, where the API words it (else from text and id)


@dataclass(frozen=True)
class Question:
    id: str
    question: object  # what the model reads as the question: a string, or structured instructions (any JSON)
    options: tuple[Option, ...]
    temperature: float | None = None  # None: the calibration's, or 1
    order: str | None = None  # None: the server's default (DECISION_ADAPTER_ORDER)
    min_answer_mass: float | None = None  # None: DECISION_ADAPTER_MIN_ANSWER_MASS
    question_type: str = "choice"  # picks the calibration profile
    loc: Loc = ()  # where an error about this question points
    options_loc: Loc = ()  # where an error about its options points (too many for this model's labels)
    readout: str | None = None  # None: the server's default (DECISION_ADAPTER_READOUT)
    normalize: str | None = None  # cloze only; None: pmi


@dataclass(frozen=True)
class DecisionBatch:
    """One state and one or more questions about it (a single decision is a batch of one)."""

    id: str
    state: object
    questions: tuple[Question, ...]
    single: bool = False  # True when the body was a single decision
    state_field: str = "state"  # the request field that carries the state, for errors about its length


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    max_tokens: int  # the request's cap, else the server's default
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]
    top_logprobs: int | None = None  # None: no logprobs; n: each token's logprob and its n likeliest rivals
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    stream: bool = False
    include_usage: bool = False  # streamed: a last chunk with the usage
    model: str | None = None


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    state_end: int | None  # offset in text right after the state, None if not found
    # Where the caller's text (the user turn) sits in ``text``: control-token text in it stays text.
    content_span: tuple[int, int] | None = None
    state_start: int | None = None  # offset where the state begins: text before it is the fixed head


@dataclass(frozen=True)
class ScoringItem:
    """One prompt to score over ``n_options`` labelled options, read by the readout named ``readout``."""

    prompt: RenderedPrompt
    n_options: int
    loc: Loc = ()  # where an error about this item points
    field: str = "state"  # the field an error about this item names
    readout: str = names.LETTERS  # which readout reads it (readout.READOUTS)
    # cloze: each option's text as tokens, scored as what follows the prompt (in the order shown)
    continuations: tuple[tuple[int, ...], ...] = ()
