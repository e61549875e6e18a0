"""The ``cloze`` readout: no options in the prompt; each option's own text scored as what follows it.

The prompt holds the state and the question and ends where the answer's words begin, and each option's own
text (``cloze_text``) is scored as its continuation: the log-probability of its first token from the logits
at the prompt's end, then of each further token after the ones before it, read at each position of one
evaluation of the option's tokens from the prompt (the engine rewinds to the prompt's end before each
option, so an option's score depends on nothing but the prompt and its own text, whatever the order the
options came in). The raw score is the sum of those log-probabilities; the finishing step applies the
normalisation (``sum``, ``mean`` per token, or ``pmi``: minus the same sum after a content-free prompt).

Its presentations: one, as given (the prompt lists no options, so no order mode can move them). Its priors:
``pmi``'s content-free sums, each option text's summed log-probability after a cloze prompt whose state
reads "N/A" (the same question), kept per (prompt version, question, option text) in the priors' bounded
LRU (``DECISION_ADAPTER_CLOZE_PRIOR_CACHE`` entries). A request whose questions need a prior the cache lacks
scores the missing ones first, in an evaluation of their own (so it never displaces the request's own
prefix), and pays for their tokens. Its answer extras: the normalisation and each option's tokens.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from decision_contract import names
from decision_contract.names import AS_GIVEN

from .caller_errors import InvalidValue
from .priors import ClozeKey, Priors
from .prompt import CLOZE_PROMPT_VERSION, PromptFamily, TemplateError, render_json
from .questions import DecisionBatch, Option, Question, ScoringItem
from .readout import Finished, LogitsAfter, LogProbsAfter, Planned, register
from .scores import Reading, Scored, SlotLogits, logsumexp
from .seams import Evaluator, Labels

CONTENT_FREE = "N/A"


def cloze_text(option: Option) -> str:
    """What the cloze readout scores for an option: the API's wording, else its text (its id made readable
    when it has no text of its own)."""
    if option.cloze is not None:
        return option.cloze
    return option.text.replace("_", " ") if option.text == option.id else option.text


def normalize_of(question: Question) -> str:
    return question.normalize or names.PMI


class Cloze:
    """No options in the prompt; each option's own text scored as the prompt's continuation."""

    name = names.CLOZE
    moves_options = False
    methods = {
        names.CLOZE: (
            "The prompt holds the state and the question and lists no options; each option's own text is scored "
            "as the continuation of the prompt: the sum of its tokens' log-probabilities, each evaluated after the "
            "prompt and the option's tokens before it (the per-token mean with normalize=mean; with pmi, minus the "
            "same sum after a content-free prompt of the same question); divided by the temperature, softmaxed. "
            "No tokens were generated."
        ),
    }

    def presentations(self, mode: str, n: int, max_rotations: int) -> tuple[str, list[tuple[int, ...]]]:
        return AS_GIVEN, [tuple(range(n))]  # one prompt for every order of the options

    def item(
        self, labels: Labels, family: PromptFamily, batch: DecisionBatch, question: Question, shown: tuple[int, ...]
    ) -> ScoringItem:
        """The question's cloze prompt and its options' texts as tokens (``shown`` is always as given)."""
        try:
            prompt = labels.template.render_cloze(batch.state, question.question)
        except TemplateError as exc:
            raise InvalidValue(f"the model's chat template refused the prompt: {exc}", None, loc=question.loc) from None
        continuations = tuple(
            labels.continuation_tokens(cloze_text(question.options[i]), loc=question.options_loc) for i in shown
        )
        return ScoringItem(prompt, len(question.options), question.loc, batch.state_field, self.name, continuations)

    def read(
        self,
        labels: Labels,
        logits: np.ndarray,
        item: ScoringItem,
        logits_after: LogitsAfter,
        log_probs_after: LogProbsAfter,
    ) -> Scored:
        """The options' summed log-probabilities; the mass is the probability of exactly the options' texts (at
        most 1), the passes the prompt's and one per option of more than one token."""
        log_total, sums, appended = logsumexp(logits), [], 0
        for c in item.continuations:
            after, evaluated = log_probs_after(c)
            sums.append(float(logits[c[0]]) - log_total + float(np.sum(after)))
            appended += evaluated
        scores = np.array(sums, dtype=np.float64)
        mass = min(1.0, float(np.exp(scores).sum()))
        return Scored(SlotLogits(scores), names.CLOZE, mass, 1 + sum(len(c) > 1 for c in item.continuations), appended)

    def measure_priors(
        self, evaluator: Evaluator, labels: Labels, priors: Priors, questions: list[Planned], family: PromptFamily
    ) -> tuple[dict[ClozeKey, float], int]:
        """The content-free sums of the questions normalised by pmi: {key: sum}, and the tokens read for them."""
        pmi = [planned.question for planned in questions if normalize_of(planned.question) == names.PMI]
        return measure(evaluator, labels, priors, pmi, family) if pmi else ({}, 0)

    def finish(self, planned: Planned, readings: list[Reading], priors: Mapping[ClozeKey, float]) -> Finished:
        """The reading's summed log-probabilities, normalised as the question asks."""
        question, reading = planned.question, readings[0]
        assert isinstance(reading.scores, SlotLogits)  # as read() made it
        sums = reading.scores.logits
        normalize = normalize_of(question)
        if normalize == names.MEAN:
            scores = sums / np.asarray(reading.option_tokens, dtype=np.float64)
        elif normalize == names.PMI:
            scores = sums - np.array([priors[key(question, cloze_text(o))] for o in question.options])
        else:
            scores = sums
        return Finished(
            SlotLogits(scores), extras={"normalize": normalize, "option_tokens": list(reading.option_tokens)}
        )


CLOZE = register(Cloze())


def key(question: Question, text: str) -> ClozeKey:
    return (CLOZE_PROMPT_VERSION, render_json(question.question), text)


def measure(
    evaluator: Evaluator, labels: Labels, priors: Priors, questions: list[Question], family: PromptFamily
) -> tuple[dict[ClozeKey, float], int]:
    """The priors of every option of ``questions`` (key -> value), scoring those the cache lacks now; and the
    tokens the model read for them (0 when all came from the cache)."""
    cache = priors.cloze
    found: dict[ClozeKey, float] = {}
    missing: dict[str, tuple[Question, dict[str, Option]]] = {}  # the question as rendered -> (it, options to score)
    for question in questions:
        for option in question.options:
            k = key(question, cloze_text(option))
            value = cache.get(k)
            if value is not None:
                found[k] = value
            elif k not in found:
                entry = missing.setdefault(k[1], (question, {}))
                entry[1].setdefault(k[2], option)
    if not missing:
        return found, 0
    items, keys = [], []
    for question, options in missing.values():
        blank = Question(
            question.id, question.question, tuple(options.values()), loc=question.loc, options_loc=question.options_loc
        )
        item = CLOZE.item(
            labels, family, DecisionBatch("prior", CONTENT_FREE, (blank,)), blank, tuple(range(len(blank.options)))
        )
        items.append(item)
        keys.append([key(question, text) for text in options])
    readings, timing = evaluator.score_items(items)
    for reading, item_keys in zip(readings, keys):
        for k, value in zip(item_keys, reading.scores.option_logits() or ()):
            cache.put(k, value)
            found[k] = value
    return found, int(timing.get("input_tokens", 0))
