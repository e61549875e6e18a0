"""What the two APIs of typed questions share, Jev System One and the OpenAI Decisions API: the names a
request may call the served model by, and the confidence of an answer.

Both ask noul (predicate) / choice / score questions in Jev's prompt (prompt.py) and take the same limits
(questions.py); each keeps its own wire format, answers and errors.
"""

from __future__ import annotations

import re
from typing import Any

from ..seams import Scorer

MODEL_ALIAS = "jev-latest"


def served_model_name(info: dict[str, Any]) -> str:
    """The name the reply carries: the pinned GGUF's file name without ``.gguf``."""
    return re.sub(r"\.gguf$", "", info["file"], flags=re.IGNORECASE)


def accepted_model_names(info: dict[str, Any], manifest: dict[str, Any] | None) -> set[str]:
    names = {MODEL_ALIAS, served_model_name(info), info["file"]}
    listed = ((manifest or {}).get("model") or {}).get("name")
    if isinstance(listed, str) and listed:
        names.add(listed)
    return names


def names_checked(engine: Scorer) -> bool:
    """Whether requests naming another model are refused (DECISION_ADAPTER_STRICT_MODEL_NAMES): otherwise the
    served model answers whatever name was sent, and the answer names it."""
    return engine.settings.strict_model_names


def choice_confidence(probabilities: list[float]) -> float:
    """(p_max - 1/n) / (1 - 1/n): 0 when uniform, 1 when certain."""
    n = len(probabilities)
    return unit((max(probabilities) - 1.0 / n) / (1.0 - 1.0 / n))


def score_confidence(probabilities: list[float]) -> float:
    """1 - spread / spread_uniform, where spread is the expected distance from the most probable level."""
    n = len(probabilities)
    mode = max(range(n), key=probabilities.__getitem__)
    spread = sum(p * abs(i - mode) for i, p in enumerate(probabilities))
    uniform = sum(abs(i - (n - 1) / 2.0) for i in range(n)) / n
    return unit(1.0 - spread / uniform)


def unit(value: float) -> float:
    return min(1.0, max(0.0, float(value)))
