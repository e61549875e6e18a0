"""Order modes: how the position of an option in the prompt is kept out of its probability.

A letter readout favours some positions whatever they hold. Three modes (``DECISION_ADAPTER_ORDER``,
or a request's ``order``):

* ``as_given``: the readout of the options as sent, the temperature inside the readout;
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

In ``prior`` and ``rotations`` the temperature in force is applied to the combination:
softmax(log p / T). The first part of this module is the maths (numpy only); ``score`` drives the
engine for a list of questions (``Asked``), applying the calibration (calibration.py) and the
abstention threshold to each answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .calibration import in_force
from .prompt import PROMPT_VERSION
from .settings import ORDER_MODES

AS_GIVEN, PRIOR, ROTATIONS = ORDER_MODES
CONTENT_FREE = "N/A"  # the state, the question and every option of the decision a prior is read from
STARTUP_COUNTS = range(2, 17)  # the option counts whose priors start-up measures when the default is prior


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


def normalised(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    return p / p.sum()


def mean_log(per_rotation: list[np.ndarray]) -> np.ndarray:
    """The renormalised geometric mean: softmax of the mean per-option log-probability."""
    logs = np.mean(np.log(np.maximum(np.asarray(per_rotation, dtype=np.float64), np.finfo(float).tiny)), axis=0)
    return normalised(np.exp(logs - logs.max()))


def divide_by_prior(p: np.ndarray, prior: np.ndarray) -> np.ndarray:
    return normalised(np.asarray(p, dtype=np.float64) / np.asarray(prior, dtype=np.float64))


def with_temperature(p: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T); T = 1 gives p back."""
    if temperature == 1.0:
        return normalised(p)
    logs = np.log(np.maximum(np.asarray(p, dtype=np.float64), np.finfo(float).tiny)) / temperature
    return normalised(np.exp(logs - logs.max()))


def order_sensitivity(per_rotation: list[np.ndarray], n: int) -> dict:
    """How much the presentations disagree: how many were averaged, the largest per-option spread, and
    whether the top option moves."""
    table = np.asarray(per_rotation, dtype=np.float64)
    tops = {int(np.argmax(row)) for row in table}
    return {"presentations": len(per_rotation), "of": n, "max_spread": float(np.max(table.max(0) - table.min(0))),
            "top_changes": len(tops) > 1}


# -- driving the engine -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """One question as the order modes see it. ``build(order)`` is the question's ScoringItem with its
    options shown in that order (a tuple of option indices) at the given temperature."""

    n: int
    build: Callable[[tuple[int, ...], float], object]
    order: str
    temperature: float | None  # the request's own, or None
    min_answer_mass: float
    system_prompt: str  # the prompt family a content-free prior is read with
    prompt_version: str
    question_type: str = "choice"


def prior(engine, n: int, system_prompt: str, prompt_version: str) -> np.ndarray:
    """The content-free prior of n positions in this prompt family, scored on first use and cached."""
    return measured_prior(engine, n, system_prompt, prompt_version)[0]


def measured_prior(engine, n: int, system_prompt: str, prompt_version: str) -> tuple[np.ndarray, int]:
    """``prior``, and the tokens the model read to score it now (0 when it came from the cache)."""
    key = (prompt_version, n)
    value = engine.order_priors.get(key)
    read = 0
    if value is None:
        from .engine import ScoringItem
        from .prompt import compose_user_message

        labels = engine.option_labels(n)
        content, state_end = compose_user_message(CONTENT_FREE, CONTENT_FREE,
                                                  {label: CONTENT_FREE for label in labels})
        prompt = engine.template.render_turn(system_prompt, content, state_end)
        (result,), timing = engine.score_items([ScoringItem(prompt, n, field="state")])
        value = np.asarray(result["probabilities"], dtype=np.float64)
        read = int(timing.get("input_tokens", result["input_tokens"]))
        engine.order_priors[key] = value
    field = "order_priors" if prompt_version == PROMPT_VERSION else "order_priors_jev"
    reported = engine.info.get(field) or {}
    if str(n) not in reported:  # what model info reports follows the cache, whichever filled it
        reported = {**reported, str(n): [float(v) for v in value]}
        # Replaced, never changed in place: an answer being written out may hold the old one.
        engine.info[field] = dict(sorted(reported.items(), key=lambda kv: int(kv[0])))
    return value, read


def measure_priors(engine, families: dict[str, str], counts=range(2, 17)) -> None:
    """Score the priors of ``counts`` options for each prompt family {version: system prompt} now."""
    for version, system_prompt in families.items():
        for n in counts:
            if n <= engine.max_options:
                prior(engine, n, system_prompt, version)


def measure_startup_priors(engine) -> None:
    """The priors of 2 to 16 options for both prompt families served (the decision prompt, and Jev's
    shared by System One and the OpenAI Decisions API), when the server's default order is prior."""
    from .apis.systemone import JEV_PROMPT_VERSION, JEV_SYSTEM_PROMPT
    from .prompt import SYSTEM_PROMPT

    measure_priors(engine, {PROMPT_VERSION: SYSTEM_PROMPT, JEV_PROMPT_VERSION: JEV_SYSTEM_PROMPT}, STARTUP_COUNTS)


def _expand(engine, asked: Asked, temperature: float) -> list[tuple[tuple[int, ...], object]]:
    """(presentation, item) per prompt the question needs, presentations in a fixed order (by prompt
    text), so the same set of prompts is evaluated alike whatever order the request listed the options in."""
    as_sent = tuple(range(asked.n))
    if asked.order != ROTATIONS:
        return [(as_sent, asked.build(as_sent, temperature if asked.order == AS_GIVEN else 1.0))]
    items = [(shown, asked.build(shown, 1.0)) for shown in presentations(asked.n, engine.settings.max_rotations)]
    return sorted(items, key=lambda pair: pair[1].prompt.text)


def score(engine, questions: list[Asked]) -> tuple[list[dict], dict]:
    """One result per question (request order), and the engine's timing for all prompts together.

    Each result is the readout's (probabilities, mass, tokens, ...) with the order mode applied, plus
    ``order``, ``order_sensitivity``, ``prior``, ``calibration``, ``temperature`` (in force),
    ``abstained`` and ``min_answer_mass``. A prior first needed by this request is scored before any
    of its prompts (so it never displaces the request's own prefix), and the tokens it read count in
    the timing's ``input_tokens`` (the metric line's InputTokens, Jev's and the Decisions API's usage) and
    ``prior_tokens``: the request paid for them.
    """
    plans, items = [], []
    prior_tokens = 0
    for asked in questions:
        if asked.order not in ORDER_MODES:
            raise ValueError(f"unknown order mode {asked.order!r}")
        temperature, calibration = in_force(engine.calibration, asked.question_type, asked.n, asked.order,
                                            asked.temperature)
        priors = None
        if asked.order == PRIOR:
            priors, read = measured_prior(engine, asked.n, asked.system_prompt, asked.prompt_version)
            prior_tokens += read
        expanded = _expand(engine, asked, temperature)
        plans.append((asked, temperature, calibration, priors, [shown for shown, _ in expanded], len(items)))
        items.extend(item for _, item in expanded)
    scored, timing = engine.score_items(items)
    timing = {**timing, "input_tokens": timing.get("input_tokens", 0) + prior_tokens, "prior_tokens": prior_tokens}
    results = []
    for asked, temperature, calibration, priors, shown, start in plans:
        parts = scored[start:start + len(shown)]
        results.append(_combine(asked, temperature, calibration, priors, shown, parts))
    return results, timing


def _combine(asked: Asked, temperature: float, calibration: dict, priors, shown: list[tuple[int, ...]],
             parts: list[dict]) -> dict:
    if asked.order == ROTATIONS:
        ordered = sorted(zip(shown, parts), key=lambda pair: pair[0])  # by presentation: the same whatever the text
        per_rotation = [read_back(r["probabilities"], presentation) for presentation, r in ordered]
        combined = mean_log(per_rotation)
        first = next(r for presentation, r in zip(shown, parts) if presentation == tuple(range(asked.n)))
        result = dict(first)
        result.update(
            allowed_token_mass=float(np.mean([r["allowed_token_mass"] for r in parts])),
            input_tokens=sum(r["input_tokens"] for r in parts),
            forward_passes=sum(r["forward_passes"] for r in parts),
            read_tokens=sum(r["input_tokens"] + r["forward_passes"] - 1 for r in parts),
            question_eval_ms=sum(r["question_eval_ms"] for r in parts),
            order_sensitivity=order_sensitivity(per_rotation, asked.n), prior=None)
    else:
        result = dict(parts[0])
        result.update(order_sensitivity=None, prior=None)
        combined = None
        if asked.order == PRIOR:
            combined = divide_by_prior(result["probabilities"], priors)
            result["prior"] = [float(v) for v in priors]
    if combined is not None:
        probabilities = with_temperature(combined, temperature)
        result["probabilities"] = [float(v) for v in probabilities]
        result["option_logits"] = [float(v) for v in np.log(np.maximum(combined, np.finfo(float).tiny))]
    mass = result["allowed_token_mass"]
    result.update(order=asked.order, calibration=calibration, temperature=temperature,
                  min_answer_mass=asked.min_answer_mass, abstained=bool(mass < asked.min_answer_mass))
    return result
