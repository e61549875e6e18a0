"""Turning decision probabilities into actions, the way the blog recommends.

The model only ranks the options it was shown; what the application does with
that ranking is decided here, in plain code:

* a threshold: accept the top option only if its probability is high enough;
* a margin: accept only if the top option clearly beats the runner-up;
* an allow-list: the caller, not the model, decides which ids this user or
  context may act on. A top option outside the list is never accepted, and the
  next-best allowed option is not promoted in its place (that would let the
  model's ranking of forbidden options steer the outcome).

* abstention: when the answer letters (the options' texts, under the cloze readout) held
  little of the model's next-token probability mass (``allowed_token_mass`` below ``min_answer_mass``, or the server
  itself marked the answer ``abstained``), the model was not really answering the
  question, whatever the probabilities say. The mass means something else per readout (under cloze, the
  probability of exactly the options' texts, small for any text of several tokens), so ``min_answer_mass``
  may name a floor per readout (``{"letters": 0.5}``); an answer of a readout it does not name is not held
  to one.
* a set of one: with ``require_set_of_one``, accept only an answer whose prediction
  set (``prediction_set``, served where ``workshop calibrate`` kept a split-conformal
  threshold for the question's profile) is the top option alone. A set of several
  options, an empty set, or no set at all needs review: the set covers the right
  answer in at least 1 - alpha of questions like the held-out ones, so one member
  means the model is sure in the sense that was measured.

Anything not accepted goes to a named fallback id (``"needs_review"``, a human
queue, a safe default). Probabilities from small models are uncalibrated, so
thresholds are tuned on labelled examples, not read as confidence.

Functions take a ``client.Decision``, an OpenAI Decisions answer
(``openai_decisions.Answer``) or a plain ``{option_id: probability}``
mapping (in option order) and are pure. A plain mapping carries no answer mass, so a
policy with ``min_answer_mass`` above 0 falls back on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol, TypeAlias

from decision_contract import wire
from decision_contract.names import CLOZE, LETTERS, READOUTS

# Boundary values count as met; this absorbs float rounding (0.7 - 0.5 < 0.2).
TOLERANCE = 1e-12

ACCEPTED = "accepted"
NOT_ALLOWED = "not_allowed"
BELOW_THRESHOLD = "below_threshold"
SMALL_MARGIN = "small_margin"
ABSTAINED = "abstained"
NOT_SET_OF_ONE = "not_set_of_one"


class Answered(Protocol):
    """An answer a policy reads: a ``client.Decision`` or an ``openai_decisions.Answer``."""

    def as_dict(self) -> dict[str, float]: ...


DecisionLike: TypeAlias = "Answered | Mapping[str, float]"


def scores(decision: DecisionLike) -> dict[str, float]:
    """``{option_id: probability}`` in option order, each checked to be a probability (a plain mapping may
    hold some of an answer's options only, so its sum is not checked)."""
    values = dict(decision) if isinstance(decision, Mapping) else decision.as_dict()
    if not values:
        raise ValueError("the decision has no options")
    for oid, p in values.items():
        problem = wire.probability_problem(p)
        if problem:
            raise ValueError(f"probability of {oid!r} {problem}; expected a number between 0 and 1")
    return values


def ranked(decision: DecisionLike) -> list[tuple[str, float]]:
    """Options from most to least probable; ties keep option order."""
    return sorted(scores(decision).items(), key=lambda item: -item[1])


def margin(decision: DecisionLike) -> float:
    """Top probability minus the runner-up's (the top one's own probability if there is one option)."""
    order = ranked(decision)
    return order[0][1] - (order[1][1] if len(order) > 1 else 0.0)


def answer_mass(decision: DecisionLike) -> tuple[float | None, bool]:
    """(``allowed_token_mass``, whether the server marked the answer abstained) of a decision;
    (None, False) for a plain mapping or an answer without the fields."""
    raw = getattr(decision, "raw", None) or {}
    mass = raw.get(wire.ALLOWED_TOKEN_MASS) if isinstance(raw, Mapping) else None
    if wire.probability_problem(mass):
        mass = None
    return (float(mass) if mass is not None else None), bool(
        isinstance(raw, Mapping) and raw.get(wire.ABSTAINED) is True
    )


# What ``allowed_token_mass`` measures, per readout.
HELD_BY = {LETTERS: "the answer letters", CLOZE: "the options' texts"}


def held_by(decision: DecisionLike) -> str:
    """What ``allowed_token_mass`` measures for the readout that answered (the answer's ``readout``, as
    ``wire.readout_of`` reads it): the answer letters or the options' texts; "the answer" where it does not say."""
    return HELD_BY.get(getattr(decision, "readout", None) or "", "the answer")


def prediction_set(decision: DecisionLike) -> tuple[str, ...] | None:
    """The answer's prediction set (option ids; ``x_prediction_set`` for System One's answers; an OpenAI
    Decisions answer's, read into its option keys), or None for a plain mapping or an answer served without one."""
    parsed = getattr(decision, "prediction_set", None)
    if isinstance(parsed, tuple):
        return parsed
    raw = getattr(decision, "raw", None) or {}
    if not isinstance(raw, Mapping):
        return None
    members = raw.get(wire.PREDICTION_SET, raw.get(wire.X_PREDICTION_SET))
    if not isinstance(members, (list, tuple)) or not all(isinstance(m, str) for m in members):
        return None
    return tuple(members)


def _check_unit(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")


def _check_fallback(fallback: str) -> None:
    if not isinstance(fallback, str) or not fallback.strip():
        raise ValueError("fallback must be a non-empty option id, e.g. 'needs_review'")


def accept_or_fallback(decision: DecisionLike, threshold: float, fallback: str) -> str:
    """The top option id if its probability is at least ``threshold``, else ``fallback``."""
    return Policy(threshold=threshold, fallback=fallback).apply(decision).option_id


def accept_if_clear(decision: DecisionLike, min_margin: float, fallback: str) -> str:
    """The top option id if it beats the runner-up by at least ``min_margin``, else ``fallback``."""
    return Policy(min_margin=min_margin, fallback=fallback).apply(decision).option_id


@dataclass(frozen=True)
class Outcome:
    """What to do, and why. ``option_id`` is the accepted id or the fallback."""

    option_id: str
    accepted: bool
    rule: str  # ACCEPTED, NOT_ALLOWED, ABSTAINED, NOT_SET_OF_ONE, BELOW_THRESHOLD or SMALL_MARGIN
    reason: str
    top: str  # "" for a refusal
    top_probability: float
    margin: float
    answer_mass: float | None = None  # the answer letters' (cloze: the options' texts') share of the mass, when known
    prediction_set: tuple[str, ...] | None = None  # the served prediction set, when there is one


@dataclass(frozen=True)
class Policy:
    """Allow-list, abstention, prediction-set, threshold and margin rules in one place; ``apply`` checks
    them in that order: allowed first (authorization), then whether the model answered at all (the
    server's ``abstained`` flag, or ``allowed_token_mass`` below ``min_answer_mass``), then, with
    ``require_set_of_one``, whether the prediction set is the top option alone, then threshold, then
    margin."""

    threshold: float = 0.0
    min_margin: float = 0.0
    allowed: frozenset[str] | None = None  # None: every option id may be acted on
    fallback: str = "needs_review"
    # 0: only the server's own abstention counts; {readout: floor}: a floor for the readouts named, none for others
    min_answer_mass: float | Mapping[str, float] = 0.0
    require_set_of_one: bool = False  # True: anything but a prediction set of one option needs review

    def __post_init__(self) -> None:
        _check_unit("threshold", self.threshold)
        _check_unit("min_margin", self.min_margin)
        if isinstance(self.min_answer_mass, Mapping):
            unknown = sorted(set(self.min_answer_mass) - set(READOUTS))
            if unknown:
                raise ValueError(
                    f"min_answer_mass names readouts {unknown}; name only {', '.join(READOUTS)}, or give one number"
                )
            for readout, floor in self.min_answer_mass.items():
                _check_unit(f"min_answer_mass[{readout!r}]", floor)
            object.__setattr__(self, "min_answer_mass", dict(self.min_answer_mass))
        else:
            _check_unit("min_answer_mass", self.min_answer_mass)
        _check_fallback(self.fallback)
        if not isinstance(self.require_set_of_one, bool):
            raise ValueError(f"require_set_of_one must be true or false, got {self.require_set_of_one!r}")
        if self.allowed is not None:
            if isinstance(self.allowed, str):
                raise ValueError("allowed must be a collection of option ids, not one string")
            object.__setattr__(self, "allowed", frozenset(self.allowed))

    def answer_mass_floor(self, readout: str | None) -> float:
        """The ``min_answer_mass`` an answer read by ``readout`` is held to: the one number, or the floor named
        for that readout (0 for one not named); for an answer that does not say its readout, the highest floor
        named."""
        floors = self.min_answer_mass
        if not isinstance(floors, Mapping):
            return floors
        if readout is None:
            return max(floors.values(), default=0.0)
        return floors.get(readout, 0.0)

    def allowing(self, ids: Iterable[str]) -> Policy:
        """The same rules restricted to ``ids`` (e.g. what this user is authorised for)."""
        return replace(self, allowed=frozenset(ids))

    def apply(self, decision: DecisionLike) -> Outcome:
        refusal = getattr(decision, "refusal", None)
        if refusal is not None:  # an OpenAI Decisions answer the server abstained on: no options ranked
            return Outcome(
                self.fallback,
                False,
                ABSTAINED,
                f"the server refused to answer ({refusal}); fell back to {self.fallback}",
                top="",
                top_probability=0.0,
                margin=0.0,
            )
        order = ranked(decision)
        top, p = order[0]
        gap = p - (order[1][1] if len(order) > 1 else 0.0)
        mass, abstained = answer_mass(decision)
        members = prediction_set(decision)

        def outcome(rule: str, reason: str) -> Outcome:
            accepted = rule == ACCEPTED
            return Outcome(top if accepted else self.fallback, accepted, rule, reason, top, p, gap, mass, members)

        if self.allowed is not None and top not in self.allowed:
            return outcome(
                NOT_ALLOWED, f"{top} (p={p:.3f}) is not among the allowed options; fell back to {self.fallback}"
            )
        what = held_by(decision)
        floor = self.answer_mass_floor(getattr(decision, "readout", None))
        if abstained:
            held = f" held {mass:.3f} of the next-token mass" if mass is not None else ""
            return outcome(
                ABSTAINED,
                f"the server abstained ({what}{held}, below its min_answer_mass); fell back to {self.fallback}",
            )
        if floor > 0.0 and mass is None:
            return outcome(
                ABSTAINED,
                f"the answer carries no allowed_token_mass to check against "
                f"min_answer_mass {floor:.3f}; fell back to {self.fallback}",
            )
        if mass is not None and mass < floor - TOLERANCE:
            return outcome(
                ABSTAINED,
                f"{what} held {mass:.3f} of the next-token mass, below "
                f"min_answer_mass {floor:.3f}; fell back to {self.fallback}",
            )
        if self.require_set_of_one and members is None:
            return outcome(
                NOT_SET_OF_ONE,
                "the answer carries no prediction_set (no kept conformal threshold "
                "applies: see `workshop calibrate`); fell back to " + self.fallback,
            )
        if self.require_set_of_one and members != (top,):
            shown = ", ".join(members) if members else "no option"
            return outcome(
                NOT_SET_OF_ONE, f"the prediction set holds {shown}, not {top} alone; fell back to {self.fallback}"
            )
        if p < self.threshold - TOLERANCE:
            return outcome(
                BELOW_THRESHOLD,
                f"{top} has p={p:.3f}, below the threshold {self.threshold:.3f}; fell back to {self.fallback}",
            )
        if gap < self.min_margin - TOLERANCE:
            runner_up = order[1][0] if len(order) > 1 else "nothing"
            return outcome(
                SMALL_MARGIN,
                f"{top} leads {runner_up} by {gap:.3f}, less than the margin "
                f"{self.min_margin:.3f}; fell back to {self.fallback}",
            )
        return outcome(ACCEPTED, f"{top} accepted with p={p:.3f} (margin {gap:.3f})")


__all__ = [
    "ABSTAINED",
    "ACCEPTED",
    "BELOW_THRESHOLD",
    "NOT_ALLOWED",
    "NOT_SET_OF_ONE",
    "SMALL_MARGIN",
    "Outcome",
    "Policy",
    "accept_if_clear",
    "accept_or_fallback",
    "answer_mass",
    "margin",
    "prediction_set",
    "ranked",
    "scores",
]
