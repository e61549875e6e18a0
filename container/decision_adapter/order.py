"""Order modes: how the position of an option in the prompt is kept out of its probability.

A letter readout favours some positions whatever they hold. Three modes (``DECISION_ADAPTER_ORDER``,
or a request's ``order``):

* ``as_given``: the readout of the options as sent;
* ``prior``: the readout at temperature 1 divided by the *content-free prior* of its option count
  (the probabilities the model gives the positions of a decision whose state, question and every
  option read "N/A"), renormalised; one prior per option count and prompt, scored once and cached;
* ``rotations``: the question is asked under the cyclic rotations of its options as given and of
  the same options reversed (each option once in each position in each direction: 2n presentations,
  n for two options, whose two rotations are the two orders; past ``DECISION_ADAPTER_MAX_ROTATIONS``
  options, that many evenly spaced rotations in each direction). A request that lists its options
  rotated or reversed therefore gets exactly the same presentations, and the same answer: rotations
  of one direction alone leave a model that reads each option with its neighbours dependent on
  which way round they were listed. Each presentation is one more prompt on the same state and
  question, so the engine's shared-prefix evaluation reads those once and only the options per
  presentation. The per-option log-probabilities are averaged and renormalised.

Here: the maths (numpy only), the presentations a question is asked in (``asked_in``) and the correction
itself (``correct``): the readings of a question's presentations as one set of scores at temperature 1. The
content-free priors are the letters readout's to measure (readout_letters.py). The temperature in force is applied after it, by the answer step (scoring.py), in every
mode: softmax(log p / T) of a combination, the logits over T of a readout as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from decision_contract.names import AS_GIVEN, ORDER_MODES, PRIOR, ROTATIONS

from .scores import TINY, Combined, Reading, Scores, normalised

# -- the maths ------------------------------------------------------------------------------------------


def rotation_shifts(n: int, max_rotations: int) -> list[int]:
    """The rotations asked for n options: all n, or ``max_rotations`` evenly spaced ones (0 first)."""
    if n <= max_rotations:
        return list(range(n))
    return sorted({(i * n) // max_rotations for i in range(max_rotations)})


def rotated(n: int, shift: int) -> tuple[int, ...]:
    """The options' indices in the order a rotation shows them: position j shows option (j + shift) mod n."""
    return tuple((j + shift) % n for j in range(n))


def presentations(n: int, max_rotations: int) -> list[tuple[int, ...]]:
    """The option orders the rotations mode asks: the rotations of the options as given, then those of
    the options reversed that are not among them (for two options there are none)."""
    forward = [rotated(n, s) for s in rotation_shifts(n, max_rotations)]
    seen = set(forward)
    backward = [tuple(n - 1 - i for i in shown) for shown in forward]
    return forward + [shown for shown in backward if shown not in seen]


def read_back(shown: np.ndarray, presentation: tuple[int, ...]) -> np.ndarray:
    """A presentation's probabilities per position, back in the request's option order."""
    back = np.empty(len(presentation), dtype=np.float64)
    back[list(presentation)] = np.asarray(shown, dtype=np.float64)
    return back


def mean_log(per_rotation: list[np.ndarray]) -> np.ndarray:
    """The renormalised geometric mean: softmax of the mean per-option log-probability."""
    logs = np.mean(np.log(np.maximum(np.asarray(per_rotation, dtype=np.float64), TINY)), axis=0)
    return normalised(np.exp(logs - logs.max()))


def divide_by_prior(p: np.ndarray, prior: np.ndarray) -> np.ndarray:
    return normalised(np.asarray(p, dtype=np.float64) / np.asarray(prior, dtype=np.float64))


def order_sensitivity(per_rotation: list[np.ndarray], n: int) -> dict[str, Any]:
    """How much the presentations disagree: how many were averaged, the largest per-option spread, and
    whether the top option moves."""
    table = np.asarray(per_rotation, dtype=np.float64)
    tops = {int(np.argmax(row)) for row in table}
    return {
        "presentations": len(per_rotation),
        "of": n,
        "max_spread": float(np.max(table.max(0) - table.min(0))),
        "top_changes": len(tops) > 1,
    }


# -- the presentations and the correction -----------------------------------------------------


def asked_in(mode: str, n: int, max_rotations: int) -> list[tuple[int, ...]]:
    """The presentations (option orders) a question of n options is asked in, in this mode."""
    if mode not in ORDER_MODES:
        raise ValueError(f"unknown order mode {mode!r}")
    return presentations(n, max_rotations) if mode == ROTATIONS else [tuple(range(n))]


def correct(
    mode: str, asked: list[tuple[int, ...]], readings: list[Reading], prior_value: np.ndarray | None
) -> tuple[Scores, dict[str, Any]]:
    """The order correction: a question's readings (one per presentation, in ``asked``'s order) as one set
    of scores in the request's option order, and what the answer reports of it (``order_sensitivity``,
    ``prior``). as_given leaves the readout's scores as they are; prior and rotations combine the
    presentations' probabilities at temperature 1."""
    if mode == AS_GIVEN:
        return readings[0].scores, {"order_sensitivity": None, "prior": None}
    if mode == PRIOR:
        if prior_value is None:
            raise ValueError(f"the prior mode needs the content-free prior of {len(asked[0])} options")
        combined = divide_by_prior(readings[0].scores.probabilities(1.0), prior_value)
        return Combined(combined), {"order_sensitivity": None, "prior": [float(v) for v in prior_value]}
    ordered = sorted(zip(asked, readings), key=lambda pair: pair[0])  # by presentation: the same whatever the text
    per_rotation = [read_back(r.scores.probabilities(1.0), presentation) for presentation, r in ordered]
    sensitivity = order_sensitivity(per_rotation, len(asked[0]))
    return Combined(mean_log(per_rotation)), {"order_sensitivity": sensitivity, "prior": None}
