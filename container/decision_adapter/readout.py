"""From the logits at a prompt's end to one probability per declared option.

Up to 16 options: the letters A-P, read in the one forward pass over the prompt
("letter-slots"). More options (the Jev API allows 255): each option gets a code,
a group letter and a digit ("A0", "A1", ... "Z9"), and the readout takes two steps
("two-level-codes"): the letter logits at the last prompt position give P(group),
restricted to the groups in use; then, for each group, the group's letter is
appended (one more token, evaluated from the cached prompt) and the digit logits
give P(member | group), restricted to that group's members. An option's
probability is P(group) x P(member | group), a proper distribution over exactly the
declared options. Cost: one prompt pass plus one single-token evaluation per group
in use (ceil(n / 10), at most 26).

The maths is here; evaluating the appended group letter is the engine's, handed in
as a function.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

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
}


def softmax(values: np.ndarray) -> np.ndarray:
    return np.exp(values - logsumexp(values))


def logsumexp(values: np.ndarray) -> float:
    # A vocabulary's float32 logits stay float32 through exp (faster than float64, and close enough for a
    # normaliser) and are summed in float64.
    peak = values.max()
    return float(peak) + float(np.log(np.sum(np.exp(values - peak), dtype=np.float64)))


def letter_slots(logits: np.ndarray, slot_tokens, temperature: float) -> tuple[np.ndarray, float, list[float]]:
    """P(option) over the given letter tokens; the probability mass they hold; their logits."""
    slot_logits = logits[list(slot_tokens)].astype(np.float64)
    probabilities = softmax(slot_logits / temperature)
    mass = float(np.exp(logsumexp(slot_logits) - logsumexp(logits)))
    return probabilities, mass, [float(v) for v in slot_logits]


def two_level(logits: np.ndarray, code_tokens, n: int, temperature: float,
              logits_after: Callable[[int], np.ndarray]) -> tuple[np.ndarray, float, int]:
    """P(group) at the prompt's end, then P(member | group) from ``logits_after(group_token)``, the logits
    once that group's letter follows the prompt. Returns (probabilities, mass, forward passes)."""
    groups, digits = code_tokens
    width = len(digits)
    n_groups = -(-n // width)
    group_logits = logits[list(groups[:n_groups])].astype(np.float64)
    p_group = softmax(group_logits / temperature)
    log_total = logsumexp(logits)
    probabilities, mass = [], 0.0
    for g in range(n_groups):
        members = min(width, n - g * width)
        after = logits_after(groups[g])
        digit_logits = after[list(digits[:members])].astype(np.float64)
        probabilities.extend(p_group[g] * softmax(digit_logits / temperature))
        mass += float(np.exp(group_logits[g] - log_total + logsumexp(digit_logits) - logsumexp(after)))
    return np.asarray(probabilities), mass, 1 + n_groups


def result(tokens: list[int], logits: np.ndarray, probabilities, mass: float, method: str, passes: int,
           option_logits: list[float] | None) -> dict:
    """One item's readout as score_items reports it."""
    return {
        "probabilities": [float(p) for p in probabilities],
        "option_logits": option_logits,
        "readout": method,
        "forward_passes": passes,
        "input_tokens": len(tokens),
        "allowed_token_mass": mass,
        "top_token": int(np.argmax(logits)),
    }
