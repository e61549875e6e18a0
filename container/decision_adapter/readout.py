"""Readouts: how a question is put to the model, and how the logits at the prompt's end become one raw score
per declared option. A registry (``READOUTS``), keyed by name; scoring.py and the engine ask it and name no
readout themselves. The built-in ones, each in its own module: ``letters`` (readout_letters.py) and
``cloze`` (readout_cloze.py).

A readout declares, as a ``Readout``:

* ``methods``: how it reads, by method key, as answers describe it (``READOUT_METHODS`` gathers them);
* ``presentations``: the order mode it applies and the option orders a question is asked in (a readout whose
  prompt lists no options asks each question once, as given: ``moves_options`` is false);
* ``item``: one presentation rendered as a ``ScoringItem``, with the model's labels (seams.py's ``Labels``);
* ``read``: the logits at that prompt's end as ``Scored`` (scores.py), evaluating what follows the prompt
  through the functions the engine hands it (``logits_after``, ``log_probs_after``);
* ``measure_priors``: the content-free priors its questions need, from the cache (priors.py) or measured now
  through the ``Evaluator`` seam, and the tokens that took;
* ``finish``: a question's readings (one per presentation) and its priors as one set of raw scores in the
  request's option order, what the answer reports of the order correction, and the readout's own answer
  fields (``extras``).

Adding a readout is one module that registers it (``register``), imported where the built-ins are
(readouts.py), and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from decision_contract import names

from .priors import Priors
from .prompt import PromptFamily
from .questions import DecisionBatch, Question, ScoringItem
from .scores import Reading, Scored, Scores
from .seams import Evaluator, Labels

LogitsAfter = Callable[[list[int]], np.ndarray]
LogProbsAfter = Callable[[tuple[int, ...]], tuple[list[float], int]]


@dataclass(frozen=True)
class Planned:
    """One question, planned: its readout, order mode, and presentations in the order their items stand."""

    question: Question
    mode: str
    readout: str
    asked: tuple[tuple[int, ...], ...]
    start: int  # where its items begin in the plan's items


@dataclass(frozen=True)
class Finished:
    """A question's readings as one set of scores (request order, no temperature), and what its answer reports."""

    scores: Scores
    order_sensitivity: Mapping[str, Any] | None = None
    prior: tuple[float, ...] | None = None
    extras: Mapping[str, Any] | None = None


class Readout(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def methods(self) -> Mapping[str, str]: ...

    @property
    def moves_options(self) -> bool: ...

    def presentations(self, mode: str, n: int, max_rotations: int) -> tuple[str, list[tuple[int, ...]]]: ...

    def item(
        self, labels: Labels, family: PromptFamily, batch: DecisionBatch, question: Question, shown: tuple[int, ...]
    ) -> ScoringItem: ...

    def read(
        self,
        labels: Labels,
        logits: np.ndarray,
        item: ScoringItem,
        logits_after: LogitsAfter,
        log_probs_after: LogProbsAfter,
    ) -> Scored: ...

    def measure_priors(
        self, evaluator: Evaluator, labels: Labels, priors: Priors, questions: list[Planned], family: PromptFamily
    ) -> tuple[dict[Any, Any], int]: ...

    def finish(self, planned: Planned, readings: list[Reading], priors: Mapping[Any, Any]) -> Finished: ...


READOUTS: dict[str, Readout] = {}
READOUT_METHODS: dict[str, str] = {}  # every registered readout's methods: key -> description


def register(readout: Readout) -> Readout:
    """Serve ``readout`` under its name (a later one of the same name replaces it). The contract's readouts
    stand first, in its order (what error messages list and priors are measured in), then the others."""
    READOUTS[readout.name] = readout
    ordered = sorted(
        READOUTS.items(),
        key=lambda pair: names.READOUTS.index(pair[0]) if pair[0] in names.READOUTS else len(names.READOUTS),
    )
    READOUTS.clear()
    READOUTS.update(ordered)
    READOUT_METHODS.clear()
    READOUT_METHODS.update((key, text) for each in READOUTS.values() for key, text in each.methods.items())
    return readout


def unregister(name: str) -> None:
    """Serve the readout no longer (a test's stand-in)."""
    for key in READOUTS.pop(name).methods:
        READOUT_METHODS.pop(key, None)
