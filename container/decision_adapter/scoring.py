"""Scoring a batch of questions: plan, evaluate, answer. Every API's questions take this way through the
core, whatever their readout and order mode. Scoring is handed a ``Scorer`` (seams.py): a context to
evaluate on, the model's labels, the settings and calibration in force, and the priors' cache; it asks the
readout registry (readout.py) for everything a readout decides, and names no readout itself.

1. ``plan``: each question's readout (its own, else ``DECISION_ADAPTER_READOUT``), order mode (its own,
   else ``DECISION_ADAPTER_ORDER``) and the presentations the readout asks it in, with their prompts
   rendered by the readout in the API's prompt family; a question's prompts stand in a fixed order (by
   their text), so the same set of prompts is evaluated alike whatever order the request listed the
   options in.
2. ``evaluate``: where an admitted request's scoring items meet its context (``score_items``): first each
   content-free prior this request is the first to need (an evaluation of its own, so it never displaces
   the request's own prefix), readout by readout, then every item of the request together (identical
   prompts once, the shared prefix once). The tokens a prior read count in the request's ``input_tokens``
   and ``prior_tokens``: it paid for them.
3. ``answer``: per question, the readout's finishing step (its readings and priors as raw per-option
   scores: the order correction, or cloze's normalisation) → the temperature in force (the request's, else
   its calibration profile's, else 1: served_calibration.py) → probabilities (scores.py) → abstention below the
   question's ``min_answer_mass``; one frozen ``AnswerRecord`` (answer_record.py) that every API renders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from decision_contract import names
from decision_contract.names import AS_GIVEN

from .answer_record import AnswerRecord
from .caller_errors import InvalidValue
from .prompt import DECISION_PROMPT, PromptFamily
from .questions import DecisionBatch, Question, ScoringItem
from .readouts import READOUTS, Planned
from .scores import Reading
from .seams import Scorer, Timing
from .served_calibration import Calibration, in_force, set_of


@dataclass(frozen=True)
class Plan:
    family: PromptFamily
    questions: tuple[Planned, ...]
    items: tuple[ScoringItem, ...]


def readout_of(scorer: Scorer, question: Question) -> str:
    """The question's readout: its own, else the server's (DECISION_ADAPTER_READOUT)."""
    return question.readout or scorer.settings.readout


def check_readout(
    question: Question, readout: str, normalize: str | None, field: Callable[[str], str] = lambda name: name
) -> None:
    """A 400 naming the field for what the readout cannot take: an unknown readout or normalisation, or an
    order mode that moves options for a readout whose prompt lists none. ``field(name)``: the request's path
    of the field that set ``name``."""
    if readout not in READOUTS:
        raise InvalidValue(
            f"{field('readout')} {readout!r} is not a readout; use one of {', '.join(READOUTS)}",
            field("readout"),
            status=400,
            loc=(*question.loc, "readout"),
        )
    if normalize is not None and normalize not in names.NORMALIZATIONS:
        raise InvalidValue(
            f"{field('normalize')} {normalize!r} is not a normalisation; use one of "
            f"{', '.join(names.NORMALIZATIONS)} (cloze only)",
            field("normalize"),
            status=400,
            loc=(*question.loc, "normalize"),
        )
    if not READOUTS[readout].moves_options and question.order not in (None, AS_GIVEN):
        raise InvalidValue(
            f"{field('order')} {question.order!r} does not apply to the {readout} readout: its "
            "prompt lists no options, so their order cannot move the answer; send order as_given or "
            "none",
            field("order"),
            status=400,
            loc=(*question.loc, "order"),
        )


def plan(scorer: Scorer, batch: DecisionBatch, family: PromptFamily = DECISION_PROMPT) -> Plan:
    """Every question's prompts, rendered (errors in a question's options or prompt are raised here)."""
    max_rotations = scorer.settings.max_rotations
    planned: list[Planned] = []
    items: list[ScoringItem] = []
    for question in batch.questions:
        readout = readout_of(scorer, question)
        check_readout(question, readout, question.normalize)
        reader = READOUTS[readout]
        mode, shown = reader.presentations(
            question.order or scorer.settings.order, len(question.options), max_rotations
        )
        pairs = [(order, reader.item(scorer.model, family, batch, question, order)) for order in shown]
        pairs.sort(key=lambda pair: pair[1].prompt.text)
        planned.append(Planned(question, mode, readout, tuple(order for order, _ in pairs), len(items)))
        items.extend(item for _, item in pairs)
    return Plan(family, tuple(planned), tuple(items))


def evaluate(scorer: Scorer, planned: Plan) -> tuple[list[Reading], dict[str, dict[Any, Any]], Timing]:
    """(a reading per item, the priors each readout's questions need (by readout name), the engine's timing)."""
    priors: dict[str, dict[Any, Any]] = {}
    prior_tokens = 0
    for name, reader in READOUTS.items():
        questions = [q for q in planned.questions if q.readout == name]
        if questions:
            priors[name], read = reader.measure_priors(scorer, scorer.model, scorer.priors, questions, planned.family)
            prior_tokens += read
    readings, timing = scorer.score_items(list(planned.items))
    return (
        readings,
        priors,
        {**timing, "input_tokens": timing.get("input_tokens", 0) + prior_tokens, "prior_tokens": prior_tokens},
    )


def answer(
    planned: Planned,
    readings: list[Reading],
    priors: Mapping[Any, Any],
    calibration: Calibration | None,
    min_answer_mass: float,
    *,
    label_tokens: tuple[int, ...],
    top_token_text: str,
) -> AnswerRecord:
    """A question's answer from its readings (one per presentation, in ``planned.asked``'s order) and the
    priors its readout measured; ``label_tokens`` and ``top_token_text``: the answer labels' tokens and the
    top token's text, as the model has them."""
    question, n = planned.question, len(planned.question.options)
    finished = READOUTS[planned.readout].finish(planned, readings, priors)
    temperature, used = in_force(
        calibration, question.question_type, n, planned.mode, question.temperature, planned.readout
    )
    probabilities = finished.scores.probabilities(temperature)
    in_set = set_of(
        calibration, question.question_type, planned.mode, question.temperature, probabilities, planned.readout
    )
    as_sent = readings[planned.asked.index(tuple(range(n)))]
    mass = float(np.mean([r.allowed_token_mass for r in readings]))
    logits = finished.scores.option_logits()
    return AnswerRecord(
        readout=planned.readout,
        method=as_sent.method,
        probabilities=tuple(float(v) for v in probabilities),
        option_logits=None if logits is None else tuple(logits),
        order=planned.mode,
        order_sensitivity=finished.order_sensitivity,
        prior=finished.prior,
        calibration=used,
        temperature=temperature,
        min_answer_mass=min_answer_mass,
        abstained=bool(mass < min_answer_mass),
        prediction_set=None if in_set is None else tuple(in_set),
        allowed_token_mass=mass,
        forward_passes=sum(r.forward_passes for r in readings),
        input_tokens=sum(r.input_tokens for r in readings),
        read_tokens=sum(r.input_tokens + r.appended_tokens for r in readings),
        top_token=as_sent.top_token,
        top_token_text=top_token_text,
        label_tokens=label_tokens,
        prompt_sha256=as_sent.prompt_sha256,
        question_eval_ms=sum(r.question_eval_ms for r in readings),
        extras=finished.extras or {},
    )


def decide(
    scorer: Scorer, batch: DecisionBatch, family: PromptFamily = DECISION_PROMPT
) -> tuple[list[AnswerRecord], Timing]:
    """One answer per question (request order), and the engine's timing for all prompts together."""
    planned = plan(scorer, batch, family)
    readings, priors, timing = evaluate(scorer, planned)
    default_mass = scorer.settings.min_answer_mass
    results = []
    for question in planned.questions:
        own = readings[question.start : question.start + len(question.asked)]
        mass = default_mass if question.question.min_answer_mass is None else question.question.min_answer_mass
        n = len(question.question.options)
        top = own[question.asked.index(tuple(range(n)))].top_token
        results.append(
            answer(
                question,
                own,
                priors.get(question.readout, {}),
                scorer.calibration,
                mass,
                label_tokens=scorer.model.label_tokens(n),
                top_token_text=scorer.model.token_text(top),
            )
        )
    return results, timing
