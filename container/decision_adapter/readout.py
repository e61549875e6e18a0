"""The readout: how a question is put to the model, and how the logits at the prompt's end become one
raw score per declared option. A named step (``READOUTS``, keyed by ``decision_contract.names.READOUTS``):
``letters`` and ``cloze``.

``letters`` lists the options in the prompt under answer labels and reads the labels' logits. Up to 16
options: the letters A-P, read in the one forward pass over the prompt ("letter-slots"). More options
(the Jev API allows 255): each option gets a code, a group letter and a digit ("A0", "A1", ... "Z9"),
read in two steps ("two-level-codes"): the letter logits at the last prompt position give P(group),
restricted to the groups in use; then, for each group, the group's letter is appended (one more token,
evaluated from the cached prompt) and the digit logits give P(member | group), restricted to that
group's members. An option's probability is P(group) x P(member | group), a proper distribution over
exactly the declared options. Cost: one prompt pass plus one single-token evaluation per group in use
(ceil(n / 10), at most 26).

``cloze`` lists no options: the prompt holds the state and the question and ends where the answer's words
begin, and each option's own text (``cloze_text``) is scored as what follows it: the log-probability of its
first token from the logits at the prompt's end, then of each further token after the ones before it, read
at each position of one evaluation of the option's tokens from the prompt (the engine rewinds to the
prompt's end before each option, so an option's score depends on nothing but the prompt and its own text,
whatever the order the options came in).
The raw score is the sum of those log-probabilities; the answer step (scoring.py) applies the
normalisation (``sum``, ``mean`` per token, or ``pmi``: minus the same sum after a content-free prompt).

A readout has two sides, both handed the engine: ``item`` renders one presentation of a question (its
options in a given order) as a ``ScoringItem``; ``read`` turns the logits at that prompt's end into
``Scored``: ``Scores`` (scores.py: no temperature is applied here), the share of the next-token
probability the labels hold, the forward passes it took and the tokens it evaluated past the prompt,
evaluating what follows the prompt through the functions the engine hands it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from decision_contract import names

from .errors import InvalidValue
from .prompt import PromptFamily, TemplateError
from .questions import DecisionBatch, Question, ScoringItem
from .scores import CodeLogits, Scores, SlotLogits, logsumexp

READOUT_LETTER_SLOTS = "letter-slots"
READOUT_TWO_LEVEL = "two-level-codes"
READOUT_METHODS = {
    READOUT_LETTER_SLOTS: (
        "One forward pass over the rendered prompt; the logits at the last position, restricted to the "
        "answer-letter tokens of the declared options (A, B, ...), divided by the temperature, softmaxed. "
        "No tokens were generated."
    ),
    READOUT_TWO_LEVEL: (
        "Options are labelled with codes (a group letter and a digit: A0, A1, ... Z9). Step 1: the logits "
        "at the last prompt position, restricted to the group letters in use, divided by the temperature, "
        "softmaxed: P(group). Step 2: for each group, its letter is appended and evaluated from the cached "
        "prompt; the logits restricted to that group's digits, divided by the temperature, softmaxed: "
        "P(member | group). P(option) = P(group) x P(member | group), a "
        "distribution over exactly the declared options. Cost: one prompt pass plus one single-token "
        "evaluation per group in use. No tokens were generated."
    ),
    names.CLOZE: (
        "The prompt holds the state and the question and lists no options; each option's own text is scored "
        "as the continuation of the prompt: the sum of its tokens' log-probabilities, each evaluated after the "
        "prompt and the option's tokens before it (the per-token mean with normalize=mean; with pmi, minus the "
        "same sum after a content-free prompt of the same question); divided by the temperature, softmaxed. "
        "No tokens were generated."
    ),
}


@dataclass(frozen=True, eq=False)
class Scored:
    """What a readout read at one prompt's end."""

    scores: Scores  # raw, per option in the order the prompt showed them
    method: str  # a key of READOUT_METHODS
    allowed_token_mass: float  # the share of the next-token probability on the answer labels (cloze: texts)
    forward_passes: int
    appended_tokens: int  # the tokens evaluated past the prompt (two-level group letters, cloze option tokens)


@dataclass(frozen=True, eq=False)
class Reading(Scored):
    """What the engine read for one scoring item: the readout's ``Scored``, and what the prompt was."""

    input_tokens: int  # the prompt's tokens
    top_token: int  # the vocabulary's most probable next token
    question_eval_ms: float = 0.0
    prompt_sha256: str = ""
    option_tokens: tuple[int, ...] = ()  # cloze: the tokens of each option's text


class Letters:
    """Options listed under labels (letters, past 16 options codes); their labels' logits read back."""

    name = names.LETTERS

    def item(self, engine, family: PromptFamily, batch: DecisionBatch, question: Question,
             shown: tuple[int, ...]) -> ScoringItem:
        """The question's prompt with its options in the order ``shown`` (option indices)."""
        labels = engine.option_labels(len(question.options), loc=question.options_loc)
        texts = (question.options[i].text for i in shown)
        try:
            prompt = engine.template.render_question(family, batch.state, question.question, dict(zip(labels, texts)))
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None, loc=question.loc) from None
        return ScoringItem(prompt, len(question.options), question.loc, batch.state_field, self.name)

    def read(self, engine, logits: np.ndarray, item: ScoringItem, logits_after: Callable[[list[int]], np.ndarray],
             log_probs_after: Callable[[tuple[int, ...]], tuple[list[float], int]]) -> Scored:
        """Letter slots for up to 16 options, else two-level codes."""
        n = item.n_options
        if n <= len(engine.slot_tokens):
            return letter_slots(logits, engine.slot_tokens[:n])
        return two_level(logits, engine.code_tokens, n, logits_after)


def cloze_text(option) -> str:
    """What the cloze readout scores for an option: the API's wording, else its text (its id made readable
    when it has no text of its own)."""
    if option.cloze is not None:
        return option.cloze
    return option.text.replace("_", " ") if option.text == option.id else option.text


class Cloze:
    """No options in the prompt; each option's own text scored as the prompt's continuation."""

    name = names.CLOZE

    def item(self, engine, family: PromptFamily, batch: DecisionBatch, question: Question,
             shown: tuple[int, ...]) -> ScoringItem:
        """The question's cloze prompt and its options' texts as tokens (``shown`` is always as given)."""
        try:
            prompt = engine.template.render_cloze(batch.state, question.question)
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None, loc=question.loc) from None
        continuations = tuple(engine.continuation_tokens(cloze_text(question.options[i]), loc=question.options_loc)
                              for i in shown)
        return ScoringItem(prompt, len(question.options), question.loc, batch.state_field, self.name, continuations)

    def read(self, engine, logits: np.ndarray, item: ScoringItem, logits_after, log_probs_after) -> Scored:
        """The options' summed log-probabilities; the mass is the probability of exactly the options' texts (at
        most 1), the passes the prompt's and one per option of more than one token."""
        log_total, sums, appended = logsumexp(logits), [], 0
        for c in item.continuations:
            after, evaluated = log_probs_after(c)
            sums.append(float(logits[c[0]]) - log_total + float(np.sum(after)))
            appended += evaluated
        sums = np.array(sums, dtype=np.float64)
        mass = min(1.0, float(np.exp(sums).sum()))
        return Scored(SlotLogits(sums), names.CLOZE, mass, 1 + sum(len(c) > 1 for c in item.continuations), appended)


READOUTS = {Letters.name: Letters(), Cloze.name: Cloze()}


def letter_slots(logits: np.ndarray, slot_tokens) -> Scored:
    """The given letter tokens' logits, and the probability mass they hold."""
    slot_logits = logits[list(slot_tokens)].astype(np.float64)
    mass = float(np.exp(logsumexp(slot_logits) - logsumexp(logits)))
    return Scored(SlotLogits(slot_logits), READOUT_LETTER_SLOTS, mass, 1, 0)


def two_level(logits: np.ndarray, code_tokens, n: int, logits_after: Callable[[list[int]], np.ndarray]
              ) -> Scored:
    """The group letters' logits at the prompt's end, then each group's digits' logits from
    ``logits_after([group_token])``, the logits once that group's letter follows the prompt."""
    groups, digits = code_tokens
    width = len(digits)
    n_groups = -(-n // width)
    group_logits = logits[list(groups[:n_groups])].astype(np.float64)
    log_total = logsumexp(logits)
    members, mass = [], 0.0
    for g in range(n_groups):
        after = logits_after([groups[g]])
        digit_logits = after[list(digits[:min(width, n - g * width)])].astype(np.float64)
        members.append(digit_logits)
        mass += float(np.exp(group_logits[g] - log_total + logsumexp(digit_logits) - logsumexp(after)))
    return Scored(CodeLogits(group_logits, tuple(members)), READOUT_TWO_LEVEL, mass, 1 + n_groups, n_groups)
