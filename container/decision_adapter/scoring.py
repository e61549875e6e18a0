"""Scoring a batch of questions on the engine: plan, evaluate, answer. Every API's questions take this
way through the core, whatever their order mode.

1. ``plan``: each question's order mode (its own, else ``DECISION_ADAPTER_ORDER``), the presentations it is
   asked in (order.py) and their prompts, rendered by the readout (readout.py) in the API's prompt family;
   a question's prompts stand in a fixed order (by their text), so the same set of prompts is evaluated
   alike whatever order the request listed the options in.
2. ``evaluate``: where an admitted request's scoring items meet the model's one context
   (``Engine.score_items``), the one seam between admission and evaluation: first each content-free prior
   this request is the first to need (an evaluation of its own, so it never displaces the request's own
   prefix), then every item of the request together (identical prompts once, the shared prefix once).
   The tokens a prior read count in the request's ``input_tokens`` and ``prior_tokens``: it paid for them.
3. ``answer``: per question, its readings' raw per-option scores → the order correction (order.py) → the
   temperature in force (the request's, else its calibration profile's, else 1: calibration.py) →
   probabilities (scores.py) → abstention below the question's ``min_answer_mass``. One function, in
   this order, for every mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decision_contract import names
from decision_contract.names import AS_GIVEN, PRIOR

from . import cloze_priors, order
from .calibration import in_force, set_of
from .errors import InvalidValue
from .prompt import DECISION_PROMPT, PromptFamily
from .questions import DecisionBatch, Question, ScoringItem
from .readout import READOUTS, Reading, cloze_text
from .scores import SlotLogits


@dataclass(frozen=True)
class Planned:
    """One question, planned: its order mode, and its presentations in the order their items stand."""

    question: Question
    mode: str
    readout: str
    asked: tuple[tuple[int, ...], ...]
    start: int  # where its items begin in the plan's items


@dataclass(frozen=True)
class Plan:
    family: PromptFamily
    questions: tuple[Planned, ...]
    items: tuple[ScoringItem, ...]


def readout_of(engine, question: Question) -> str:
    """The question's readout: its own, else the server's (DECISION_ADAPTER_READOUT)."""
    return question.readout or engine.settings.readout


def normalize_of(question: Question) -> str:
    return question.normalize or names.PMI


def check_readout(question: Question, readout: str, normalize: str | None, field=lambda name: name) -> None:
    """A 400 naming the field for what the readout cannot take: an unknown readout or normalisation, or
    cloze with an order mode that moves options (a cloze prompt lists none). ``field(name)``: the request's
    path of the field that set ``name``."""
    if readout not in READOUTS:
        raise InvalidValue(f"{field('readout')} {readout!r} is not a readout; use one of {', '.join(READOUTS)}",
                           field("readout"), status=400, loc=(*question.loc, "readout"))
    if normalize is not None and normalize not in names.NORMALIZATIONS:
        raise InvalidValue(f"{field('normalize')} {normalize!r} is not a normalisation; use one of "
                           f"{', '.join(names.NORMALIZATIONS)} (cloze only)", field("normalize"), status=400,
                           loc=(*question.loc, "normalize"))
    if readout == names.CLOZE and question.order not in (None, AS_GIVEN):
        raise InvalidValue(f"{field('order')} {question.order!r} does not apply to the cloze readout: its prompt "
                           "lists no options, so their order cannot move the answer; send order as_given or none",
                           field("order"), status=400, loc=(*question.loc, "order"))


def plan(engine, batch: DecisionBatch, family: PromptFamily = DECISION_PROMPT) -> Plan:
    """Every question's prompts, rendered (errors in a question's options or prompt are raised here)."""
    max_rotations = engine.settings.max_rotations
    planned, items = [], []
    for question in batch.questions:
        readout = readout_of(engine, question)
        check_readout(question, readout, question.normalize)
        reader = READOUTS[readout]
        # cloze: one prompt for every order of the options
        mode = AS_GIVEN if readout == names.CLOZE else question.order or engine.settings.order
        pairs = [(shown, reader.item(engine, family, batch, question, shown))
                 for shown in order.asked_in(mode, len(question.options), max_rotations)]
        pairs.sort(key=lambda pair: pair[1].prompt.text)
        planned.append(Planned(question, mode, readout, tuple(shown for shown, _ in pairs), len(items)))
        items.extend(item for _, item in pairs)
    return Plan(family, tuple(planned), tuple(items))


def evaluate(engine, planned: Plan) -> tuple[list[Reading], dict, dict]:
    """(a reading per item, the priors: per option count of the questions in prior mode, and per cloze
    prior key of the cloze questions normalised by pmi; the engine's timing)."""
    priors, prior_tokens = {}, 0
    for question in planned.questions:
        if question.mode == PRIOR:
            n = len(question.question.options)
            priors[n], read = order.measured_prior(engine, n, planned.family)
            prior_tokens += read
    pmi = [q.question for q in planned.questions if q.readout == names.CLOZE and normalize_of(q.question) == names.PMI]
    if pmi:
        found, read = cloze_priors.measure(engine, pmi)
        priors.update(found)
        prior_tokens += read
    readings, timing = engine.score_items(list(planned.items))
    return readings, priors, {**timing, "input_tokens": timing.get("input_tokens", 0) + prior_tokens,
                              "prior_tokens": prior_tokens}


def answer(planned: Planned, readings: list[Reading], prior: np.ndarray | None, calibration, min_answer_mass: float
           ) -> dict:
    """A question's answer from its readings (one per presentation, in ``planned.asked``'s order)."""
    question, n = planned.question, len(planned.question.options)
    cloze = {}
    if planned.readout == names.CLOZE:
        scores, reported, cloze = cloze_scores(question, readings[0], prior)
    else:
        scores, reported = order.correct(planned.mode, list(planned.asked), readings, prior)
    temperature, used = in_force(calibration, question.question_type, n, planned.mode, question.temperature,
                                 planned.readout)
    probabilities = scores.probabilities(temperature)
    in_set = set_of(calibration, question.question_type, planned.mode, question.temperature, probabilities,
                    planned.readout)
    as_sent = readings[planned.asked.index(tuple(range(n)))]
    mass = float(np.mean([r.allowed_token_mass for r in readings]))
    return {"readout_name": planned.readout, **cloze,
        "probabilities": [float(v) for v in probabilities],
        "option_logits": scores.option_logits(),
        "readout": as_sent.method,
        "forward_passes": sum(r.forward_passes for r in readings),
        "input_tokens": sum(r.input_tokens for r in readings),
        "read_tokens": sum(r.input_tokens + r.appended_tokens for r in readings),
        "allowed_token_mass": mass,
        "top_token": as_sent.top_token,
        "prompt_sha256": as_sent.prompt_sha256,
        "question_eval_ms": sum(r.question_eval_ms for r in readings),
        "order": planned.mode, **reported, "calibration": used, "temperature": temperature,
        "min_answer_mass": min_answer_mass, "abstained": bool(mass < min_answer_mass),
        "prediction_set": in_set,  # option indices in request order, or None
    }


def cloze_scores(question: Question, reading: Reading, priors: dict | None) -> tuple[SlotLogits, dict, dict]:
    """A cloze reading's summed log-probabilities, normalised as the question asks; what the answer reports
    of it (the readout's name, the normalisation, each option's tokens)."""
    sums = reading.scores.logits
    normalize = normalize_of(question)
    if normalize == names.MEAN:
        scores = sums / np.asarray(reading.option_tokens, dtype=np.float64)
    elif normalize == names.PMI:
        scores = sums - np.array([priors[cloze_priors.key(question, cloze_text(o))] for o in question.options])
    else:
        scores = sums
    return SlotLogits(scores), {"order_sensitivity": None, "prior": None}, {
        "normalize": normalize, "option_tokens": list(reading.option_tokens)}


def decide(engine, batch: DecisionBatch, family: PromptFamily = DECISION_PROMPT) -> tuple[list[dict], dict]:
    """One answer per question (request order), and the engine's timing for all prompts together.

    An answer holds the readout's figures (``probabilities`` in the request's option order, ``option_logits``,
    ``readout``, ``allowed_token_mass``, tokens, ...) with the order mode applied, and ``order``,
    ``order_sensitivity``, ``prior``, ``calibration``, ``temperature`` (in force), ``abstained``,
    ``min_answer_mass`` and ``prediction_set`` (option indices; None unless a kept threshold applies).
    """
    planned = plan(engine, batch, family)
    readings, priors, timing = evaluate(engine, planned)
    default_mass = engine.settings.min_answer_mass
    results = []
    for question in planned.questions:
        own = readings[question.start:question.start + len(question.asked)]
        mass = default_mass if question.question.min_answer_mass is None else question.question.min_answer_mass
        prior = (priors if question.readout == names.CLOZE
                 else priors.get(len(question.question.options)) if question.mode == PRIOR else None)
        results.append(answer(question, own, prior, engine.calibration, mass))
    return results, timing
