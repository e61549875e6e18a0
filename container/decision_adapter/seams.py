"""The seams the scoring core is handed, as protocols: what readouts, the order and cloze priors and scoring
may ask of the model and of a context of it, and nothing more. The engine (engine.py) satisfies them; no
module below it receives the engine itself, so none can reach past these.

* ``Labels``: the model's read-only side a readout renders and reads with: its chat template, the answer
  labels' tokens, option texts as tokens (model.py's ``Model``);
* ``Evaluator``: where scoring items meet one context of the model (``Engine.score_items``);
* ``Scorer``: what scoring.py is handed for a request: an evaluator, the model's labels, the settings and
  calibration in force, and the content-free priors' cache (priors.py);
* ``ThreadSource``: what runs one llama.cpp call of a context on its share of the server's CPU threads
  (scheduler.py's ``ThreadShares``).

``EngineError`` is the engine's own error: the model cannot be served (no usable answer labels, a context
that cannot save its state, a start-up check that fails).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from decision_contract.calibration import Calibration

from .priors import Priors
from .prompt import ChatTemplate
from .questions import Loc, ScoringItem
from .scores import Reading
from .settings import Settings

CodeTokens = tuple[tuple[int, ...], tuple[int, ...]]  # the group letters' tokens and the digits'
R = TypeVar("R")
Timing = dict[str, float]  # what evaluating took (milliseconds, ``*_ms``) and read (token and prompt counts)


class EngineError(RuntimeError):
    """The model cannot be served by the decision readout (e.g. no usable answer slots)."""


class Labels(Protocol):
    @property
    def template(self) -> ChatTemplate: ...

    @property
    def slot_tokens(self) -> tuple[int, ...]: ...

    @property
    def code_tokens(self) -> CodeTokens | None: ...

    @property
    def max_options(self) -> int: ...

    def option_labels(self, n: int, loc: Loc = ()) -> tuple[str, ...]: ...

    def continuation_tokens(self, text: str, loc: Loc = ()) -> tuple[int, ...]: ...

    def label_tokens(self, n: int) -> tuple[int, ...]: ...

    def token_text(self, token: int) -> str: ...


class Evaluator(Protocol):
    def score_items(self, items: list[ScoringItem]) -> tuple[list[Reading], Timing]: ...


class Scorer(Evaluator, Protocol):
    @property
    def model(self) -> Labels: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def calibration(self) -> Calibration | None: ...

    @property
    def priors(self) -> Priors: ...


class ThreadSource(Protocol):
    def run(self, call: Callable[[tuple[int, int]], R], give_up: Callable[[], None]) -> R: ...
