"""The prompt room: what the model reads, for every API, and the model's chat template that wraps it.

Every prompt is a system turn and a user turn ending where the model would write its answer. The user
turn is a JSON object whose first member is the state, so every question about the same state shares
the rendered text up to the end of the state; the engine evaluates that prefix once. Option ids never
reach the model: options are shown under labels (the letters A, B, ..., past 16 options codes such as
"A0") and mapped back afterwards.

Two prompt families (``PromptFamily``), each with its version (answers report it; a calibration file is
fitted for one): the decision prompt (this project's schema and the published sample's) and Jev's
(System One and the OpenAI Decisions API, whose typed questions are worded here too: the default
question of each type, Yes and No, an option's name with its description).
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import NoReturn

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .caller_errors import InvalidValue
from .questions import Message, Question, RenderedPrompt


@dataclass(frozen=True)
class PromptFamily:
    version: str
    system: str


PROMPT_VERSION = "decision-prompt/1"
SYSTEM_PROMPT = (
    "You are a decision component inside a software system. You receive a JSON object with "
    "a state (the evidence), a question (the criterion to apply to it) and options labelled "
    "with capital letters. Apply the question to the state and answer with the single capital "
    "letter of the best option. Write nothing else."
)
DECISION_PROMPT = PromptFamily(PROMPT_VERSION, SYSTEM_PROMPT)

JEV_PROMPT_VERSION = "jev-systemone-prompt/1"
JEV_SYSTEM_PROMPT = (
    "You are a decision component inside a software system. You receive a JSON object with "
    "a state (the evidence), a question (the criterion to apply to it) and options, each under "
    "a short code (a capital letter, or a capital letter and a digit). Apply the question to the "
    "state and answer with the code of the best option. Write nothing else."
)
JEV_PROMPT = PromptFamily(JEV_PROMPT_VERSION, JEV_SYSTEM_PROMPT)

# The cloze readout's prompt: the state and the question, no options; the answer's own words follow it.
CLOZE_PROMPT_VERSION = "decision-cloze-prompt/1"
CLOZE_SYSTEM_PROMPT = (
    "You are a decision component inside a software system. You receive a JSON object with "
    "a state (the evidence) and a question (the criterion to apply to it). Apply the question to the "
    "state and answer in a few words. Write nothing else."
)
CLOZE_PROMPT = PromptFamily(CLOZE_PROMPT_VERSION, CLOZE_SYSTEM_PROMPT)

# The typed questions' words (System One's types; the OpenAI Decisions API's predicate is a noul).
DEFAULT_QUESTIONS = {  # what a question without instructions asks
    "noul": "Which option describes the state?",
    "choice": "Which option fits the state best?",
    "score": "Which level fits the state best?",
}
YES_NO = ("Yes", "No")  # a noul's (a predicate's) two options, yes first

LETTERS = tuple("ABCDEFGHIJKLMNOP")

# Beyond len(LETTERS) options, each option gets a two-character code: a group
# letter and a digit ("A0" ... "Z9"), read out in two steps (see readout.py).
GROUP_LETTERS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
DIGITS = tuple("0123456789")
MAX_CODED_OPTIONS = len(GROUP_LETTERS) * len(DIGITS)


def option_labels(n: int) -> tuple[str, ...]:
    """The answer labels shown for n options: letters up to 16, then group-letter + digit codes."""
    if n <= len(LETTERS):
        return LETTERS[:n]
    if n > MAX_CODED_OPTIONS:
        raise ValueError(f"at most {MAX_CODED_OPTIONS} options can be labelled")
    return tuple(GROUP_LETTERS[i // len(DIGITS)] + DIGITS[i % len(DIGITS)] for i in range(n))


def render_state(state: object) -> str:
    """The state as JSON text: strings stay strings, objects get sorted keys."""
    return render_json(state, "state")


def render_json(value: object, field: str | None = None) -> str:
    """Any JSON value as text, deterministically: sorted keys, fixed separators. A value nested deeper than
    Python's recursion allows (the parser takes more than ``json.dumps`` can write) is the caller's error."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    except RecursionError:
        raise InvalidValue(
            f"{field or 'a value'} is nested too deeply to render; flatten it to a few levels", field
        ) from None


def as_text(value: object) -> str:
    """A string as it is, any other JSON value rendered."""
    return value if isinstance(value, str) else render_json(value)


def option_text(name: str, description: object = None) -> str:
    """A typed question's option as the model reads it: its name, and its description after a colon."""
    return name if description is None else f"{name}: {as_text(description)}"


# Every user turn opens with this; what comes before the state is the same for every request (the head).
STATE_OPENING = '{"state": '


def compose_user_message(state: object, question: object, labelled_options: dict[str, str]) -> tuple[str, int]:
    """The user turn ``{"state", "question", "options"}``, and the offset where the state ends.

    ``question`` is any JSON value (a string, or structured instructions); the
    options map each answer label to its text, in the order they are shown.
    """
    head = STATE_OPENING + render_state(state)
    tail = (
        ', "question": '
        + render_json(question)
        + ', "options": '
        + json.dumps(labelled_options, ensure_ascii=False, separators=(", ", ": "))
        + "}"
    )
    return head + tail, len(head)


def compose_cloze_message(state: object, question: object) -> tuple[str, int]:
    """The user turn ``{"state", "question"}`` of a cloze prompt, and the offset where the state ends."""
    head = STATE_OPENING + render_state(state)
    return head + ', "question": ' + render_json(question) + "}", len(head)


def user_message(state: object, question: Question) -> tuple[str, int]:
    """The user turn of a decision, and the offset in it where the state ends."""
    options = {letter: option.text for letter, option in zip(LETTERS, question.options)}
    return compose_user_message(state, question.question, options)


_MARK = re.compile("\ue000(\\d+)\ue001")  # render_with_spans' placeholders


def _spans(text: str, marked: str, messages: list[Message]) -> tuple[tuple[int, int], ...] | None:
    """Where each content sits in ``text``, given the rendering with placeholders; None if it does not fit."""
    # One pass over the placeholders: each must appear exactly once, in message order.
    found = list(_MARK.finditer(marked))
    if [int(m.group(1)) for m in found] != list(range(len(messages))):
        return None
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    at = length = 0
    for match, message in zip(found, messages):
        pieces += [marked[at : match.start()], message["content"]]
        length += match.start() - at
        spans.append((length, length + len(message["content"])))
        length += len(message["content"])
        at = match.end()
    pieces.append(marked[at:])
    return tuple(spans) if "".join(pieces) == text else None


class TemplateError(RuntimeError):
    """The model's chat template cannot render a decision prompt."""


class ChatTemplate:
    """The model's own Jinja chat template, rendered in a sandbox."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())

        def raise_exception(message: str) -> NoReturn:
            raise TemplateError(message)

        def strftime_now(fmt: str) -> str:
            return datetime.datetime.now().strftime(fmt)

        env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
        env.filters.setdefault("tojson", lambda v, **kw: json.dumps(v, ensure_ascii=False, **kw))
        self.template = env.from_string(source)
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._turn_marked: str | None = None

    def render(self, messages: list[Message], add_generation_prompt: bool = True) -> str:
        return self.template.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            enable_thinking=False,  # Qwen3-style templates: no reasoning block
        )

    def render_with_spans(
        self, messages: list[Message], marked: str | None = None
    ) -> tuple[str, tuple[tuple[int, int], ...] | None]:
        """The conversation's text, and where each message's content sits in it.

        Each content is rendered once as a unique placeholder, so a content that repeats the
        template's own text cannot be mistaken for it. The spans are None when the template
        does not copy contents verbatim (putting the contents back into the placeholders'
        text must give exactly the real rendering). ``marked``: that placeholder rendering, if known.
        """
        text = self.render(messages)
        if marked is None:
            try:
                marked = self._marked(messages)
            except TemplateError:
                return text, None
        return text, _spans(text, marked, messages)

    def _marked(self, messages: list[Message]) -> str:
        return self.render([dict(m, content=f"\ue000{i}\ue001") for i, m in enumerate(messages)])

    def _turn_spans(self, messages: list[Message]) -> tuple[str, tuple[tuple[int, int], ...] | None]:
        """render_with_spans for a system + user turn, the placeholder rendering kept between requests
        (it depends on nothing the request sends); made again once when it no longer fits (a date in it)."""
        if self._turn_marked is not None:
            text, spans = self.render_with_spans(messages, self._turn_marked)
            if spans is not None:
                return text, spans
        try:
            self._turn_marked = self._marked(messages)
        except TemplateError:
            return self.render(messages), None
        return self.render_with_spans(messages, self._turn_marked)

    def render_decision(self, state: object, question: Question) -> RenderedPrompt:
        """A decision prompt with the question's options under the letters, in the order given."""
        content, state_end = user_message(state, question)
        return self.render_turn(SYSTEM_PROMPT, content, state_end)

    def render_question(
        self, family: PromptFamily, state: object, question: object, labelled_options: dict[str, str]
    ) -> RenderedPrompt:
        """A prompt of ``family`` asking ``question`` about ``state`` over the options, each under its label."""
        content, state_end = compose_user_message(state, question, labelled_options)
        return self.render_turn(family.system, content, state_end)

    def render_cloze(self, state: object, question: object) -> RenderedPrompt:
        """A cloze prompt: the state and the question, ending where the answer's words begin."""
        content, state_end = compose_cloze_message(state, question)
        return self.render_turn(CLOZE_SYSTEM_PROMPT, content, state_end)

    def render_turn(self, system: str, content: str, state_end: int) -> RenderedPrompt:
        """System + user turn with the generation prompt; locate the user turn and the state's end in it."""
        text, spans = self._turn_spans([{"role": "system", "content": system}, {"role": "user", "content": content}])
        opening = len(STATE_OPENING) if content.startswith(STATE_OPENING) else None
        if spans is None:  # the template changed the content; only the state may still be found
            at = text.find(content[:state_end])
            if at < 0:
                return RenderedPrompt(text, None)
            return RenderedPrompt(text, at + state_end, None, None if opening is None else at + opening)
        start, end = spans[1]
        return RenderedPrompt(text, start + state_end, (start, end), None if opening is None else start + opening)
