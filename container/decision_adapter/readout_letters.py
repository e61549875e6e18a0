"""The ``letters`` readout: the options listed in the prompt under answer labels, the labels' logits read back.

Up to 16 options: the letters A-P, read in the one forward pass over the prompt ("letter-slots"). More
options (the Jev API allows 255): each option gets a code, a group letter and a digit ("A0", "A1", ...
"Z9"), read in two steps ("two-level-codes"): the letter logits at the last prompt position give
P(group), restricted to the groups in use; then, for each group, the group's letter is appended (one more
token, evaluated from the cached prompt) and the digit logits give P(member | group), restricted to that
group's members. An option's probability is P(group) x P(member | group), a proper distribution over
exactly the declared options. Cost: one prompt pass plus one single-token evaluation per group in use
(ceil(n / 10), at most 26).

As its prompt lists the options, the order modes apply (order.py): its presentations are the mode's, its
priors the content-free priors of the ``prior`` mode (one per prompt version and option count, measured on
first use through the ``Evaluator`` seam and kept in the priors' cache), its finishing step the order
correction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from decision_contract import names
from decision_contract.names import PRIOR

from . import order
from .caller_errors import InvalidValue
from .priors import Priors
from .prompt import DECISION_PROMPT, JEV_PROMPT, PromptFamily, TemplateError
from .questions import DecisionBatch, Option, Question, ScoringItem
from .readout import Finished, LogitsAfter, LogProbsAfter, Planned, register
from .scores import CodeLogits, Reading, Scored, SlotLogits, logsumexp
from .seams import CodeTokens, Evaluator, Labels

READOUT_LETTER_SLOTS = "letter-slots"
READOUT_TWO_LEVEL = "two-level-codes"
CONTENT_FREE = "N/A"  # the state, the question and every option of the decision a prior is read from
STARTUP_COUNTS = range(2, 17)  # the option counts whose priors start-up measures when the default is prior


class Letters:
    """Options listed under labels (letters, past 16 options codes); their labels' logits read back."""

    name = names.LETTERS
    moves_options = True
    methods = {
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
    }

    def presentations(self, mode: str, n: int, max_rotations: int) -> tuple[str, list[tuple[int, ...]]]:
        return mode, order.asked_in(mode, n, max_rotations)

    def item(
        self, labels: Labels, family: PromptFamily, batch: DecisionBatch, question: Question, shown: tuple[int, ...]
    ) -> ScoringItem:
        """The question's prompt with its options in the order ``shown`` (option indices)."""
        shown_labels = labels.option_labels(len(question.options), loc=question.options_loc)
        texts = (question.options[i].text for i in shown)
        try:
            prompt = labels.template.render_question(
                family, batch.state, question.question, dict(zip(shown_labels, texts))
            )
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None, loc=question.loc) from None
        return ScoringItem(prompt, len(question.options), question.loc, batch.state_field, self.name)

    def read(
        self,
        labels: Labels,
        logits: np.ndarray,
        item: ScoringItem,
        logits_after: LogitsAfter,
        log_probs_after: LogProbsAfter,
    ) -> Scored:
        """Letter slots for up to 16 options, else two-level codes."""
        n = item.n_options
        if n <= len(labels.slot_tokens) or labels.code_tokens is None:
            return letter_slots(logits, labels.slot_tokens[:n])
        return two_level(logits, labels.code_tokens, n, logits_after)

    def measure_priors(
        self, evaluator: Evaluator, labels: Labels, priors: Priors, questions: list[Planned], family: PromptFamily
    ) -> tuple[dict[int, np.ndarray], int]:
        """The prior of each option count asked in ``prior`` mode: {n: prior}, and the tokens read for them."""
        found: dict[int, np.ndarray] = {}
        read = 0
        for planned in questions:
            if planned.mode == PRIOR:
                n = len(planned.question.options)
                found[n], tokens = measured_prior(evaluator, labels, priors, n, family)
                read += tokens
        return found, read

    def finish(self, planned: Planned, readings: list[Reading], priors: Mapping[int, np.ndarray]) -> Finished:
        prior = priors.get(len(planned.question.options)) if planned.mode == PRIOR else None
        scores, reported = order.correct(planned.mode, list(planned.asked), readings, prior)
        return Finished(
            scores, reported["order_sensitivity"], None if reported["prior"] is None else tuple(reported["prior"])
        )


LETTERS = register(Letters())


def letter_slots(logits: np.ndarray, slot_tokens: Sequence[int]) -> Scored:
    """The given letter tokens' logits, and the probability mass they hold."""
    slot_logits = logits[list(slot_tokens)].astype(np.float64)
    mass = float(np.exp(logsumexp(slot_logits) - logsumexp(logits)))
    return Scored(SlotLogits(slot_logits), READOUT_LETTER_SLOTS, mass, 1, 0)


def two_level(logits: np.ndarray, code_tokens: CodeTokens, n: int, logits_after: LogitsAfter) -> Scored:
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
        digit_logits = after[list(digits[: min(width, n - g * width)])].astype(np.float64)
        members.append(digit_logits)
        mass += float(np.exp(group_logits[g] - log_total + logsumexp(digit_logits) - logsumexp(after)))
    return Scored(CodeLogits(group_logits, tuple(members)), READOUT_TWO_LEVEL, mass, 1 + n_groups, n_groups)


# -- the content-free priors of the prior mode ----------------------------------------------------------


def prior(evaluator: Evaluator, labels: Labels, priors: Priors, n: int, family: PromptFamily) -> np.ndarray:
    """The content-free prior of n positions in this prompt family, scored on first use and cached."""
    return measured_prior(evaluator, labels, priors, n, family)[0]


def measured_prior(
    evaluator: Evaluator, labels: Labels, priors: Priors, n: int, family: PromptFamily
) -> tuple[np.ndarray, int]:
    """``prior``, and the tokens the model read to score it now (0 when it came from the cache)."""
    key = (family.version, n)
    value = priors.order.get(key)
    read = 0
    if value is None:
        blank = Question("prior", CONTENT_FREE, tuple(Option(str(i), CONTENT_FREE) for i in range(n)))
        item = LETTERS.item(labels, family, DecisionBatch("prior", CONTENT_FREE, (blank,)), blank, tuple(range(n)))
        (reading,), timing = evaluator.score_items([item])
        value = np.asarray(reading.scores.probabilities(1.0), dtype=np.float64)
        read = int(timing.get("input_tokens", reading.input_tokens))
        priors.order[key] = value
    # what model info reports follows the cache, whichever context filled it
    priors.report("order_priors" if family.version == DECISION_PROMPT.version else "order_priors_jev", n, value)
    return value, read


def measure_priors(
    evaluator: Evaluator,
    labels: Labels,
    priors: Priors,
    families: tuple[PromptFamily, ...],
    counts: Iterable[int] = range(2, 17),
) -> None:
    """Score the priors of ``counts`` options for each prompt family now."""
    for family in families:
        for n in counts:
            if n <= labels.max_options:
                prior(evaluator, labels, priors, n, family)


def measure_startup_priors(evaluator: Evaluator, labels: Labels, priors: Priors) -> None:
    """The priors of 2 to 16 options for both prompt families served (the decision prompt, and Jev's
    shared by System One and the OpenAI Decisions API), when the server's default order is prior."""
    measure_priors(evaluator, labels, priors, (DECISION_PROMPT, JEV_PROMPT), STARTUP_COUNTS)
