"""One question's answer as the scoring core returns it: a frozen record every dialect renders in its own
shape, and the metric line reads as it is.

The probabilities and logits are in the request's option order; ``extras`` holds the readout's own answer
fields (cloze: the normalisation and each option's tokens), in the order the readout declares them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class AnswerRecord:
    readout: str  # the readout's name (decision_contract.names.READOUTS)
    method: str  # how it read the options (readout.READOUT_METHODS' keys)
    probabilities: tuple[float, ...]
    option_logits: tuple[float, ...] | None  # None where the readout has no one logit per option (two-level codes)
    order: str  # the order mode applied
    order_sensitivity: Mapping[str, Any] | None  # rotations: how much the presentations disagree
    prior: tuple[float, ...] | None  # prior: the content-free prior divided by
    calibration: Mapping[str, Any]  # the temperature in force and how it was chosen (calibration.in_force)
    temperature: float
    min_answer_mass: float
    abstained: bool
    prediction_set: tuple[int, ...] | None  # option indices in request order, where a kept threshold applies
    allowed_token_mass: float
    forward_passes: int
    input_tokens: int  # the prompts' tokens, summed over the question's presentations
    read_tokens: int  # those and the tokens the readout evaluated past the prompts
    top_token: int  # the vocabulary's most probable next token after the prompt as sent
    top_token_text: str
    label_tokens: tuple[int, ...]  # the answer labels' tokens for this many options (letters, or groups and digits)
    prompt_sha256: str
    question_eval_ms: float
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))

    @property
    def n_options(self) -> int:
        return len(self.probabilities)
