"""Raw per-option scores, and the one way each kind becomes probabilities at a temperature.

A readout reads scores from the logits at a prompt's end (readout.py); an order correction may combine
the scores of several presentations into one (order.py). Neither applies a temperature: the answer step
(scoring.py) applies the temperature in force to whatever scores the question ended with, for every
order mode alike, by calling ``probabilities(temperature)`` once. Each kind divides its own logits:

* ``SlotLogits``: the answer labels' logits at the prompt's end: softmax(logits / T);
* ``CodeLogits``: two-level codes: the group letters' logits, then each group's digits' logits after its
  letter; P(option) = softmax(groups / T)[group] x softmax(digits / T)[member];
* ``Combined``: probabilities an order correction made (at temperature 1): softmax(log p / T).

numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TINY = np.finfo(float).tiny


def logsumexp(values: np.ndarray) -> float:
    # A vocabulary's float32 logits stay float32 through exp (faster than float64, and close enough for a
    # normaliser) and are summed in float64.
    peak = values.max()
    return float(peak) + float(np.log(np.sum(np.exp(values - peak), dtype=np.float64)))


def softmax(values: np.ndarray) -> np.ndarray:
    return np.exp(values - logsumexp(values))


def normalised(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    shares: np.ndarray = p / p.sum()
    return shares


def with_temperature(p: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T); T = 1 gives p back."""
    if temperature == 1.0:
        return normalised(p)
    logs = np.log(np.maximum(np.asarray(p, dtype=np.float64), TINY)) / temperature
    return normalised(np.exp(logs - logs.max()))


@dataclass(frozen=True, eq=False)
class SlotLogits:
    """The logits of the options' answer labels (one token each), float64, in the order shown."""

    logits: np.ndarray

    def probabilities(self, temperature: float) -> np.ndarray:
        return softmax(self.logits / temperature)

    def option_logits(self) -> list[float]:
        return [float(v) for v in self.logits]


@dataclass(frozen=True, eq=False)
class CodeLogits:
    """Two-level codes: the logits of the group letters in use, and per group those of its members' digits."""

    groups: np.ndarray
    members: tuple[np.ndarray, ...]

    def probabilities(self, temperature: float) -> np.ndarray:
        p_group = softmax(self.groups / temperature)
        probabilities = []
        for g, digits in enumerate(self.members):
            probabilities.extend(p_group[g] * softmax(digits / temperature))
        return np.asarray(probabilities)

    def option_logits(self) -> None:
        return None  # no one logit per option to report


@dataclass(frozen=True, eq=False)
class Combined:
    """Probabilities at temperature 1 that an order correction combined; reported as their logs."""

    p: np.ndarray

    def probabilities(self, temperature: float) -> np.ndarray:
        return with_temperature(self.p, temperature)

    def option_logits(self) -> list[float]:
        return [float(v) for v in np.log(np.maximum(self.p, TINY))]


Scores = SlotLogits | CodeLogits | Combined


@dataclass(frozen=True, eq=False)
class Scored:
    """What a readout read at one prompt's end."""

    scores: Scores  # raw, per option in the order the prompt showed them
    method: str  # how it read them (readout.READOUT_METHODS' keys)
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
