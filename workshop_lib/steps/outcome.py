"""The closing check of every notebook: did the step reach what a participant needs next, and
expected mistakes shown in one line instead of a traceback.
"""

from __future__ import annotations

import math
from typing import Any

from decision_contract import wire

from ..client.endpoint import ChatResult, Decision
from ..display import shorten
from ..errors import StepError
from .context import Checks, Workshop
from .endpoint_clients import answered_by


def _reached(value: Any) -> tuple[bool, str]:
    """Whether one result shows the step got where the participant needs to be, and what was checked."""
    if isinstance(value, Decision):
        p = value.probabilities
        problem = wire.distribution_problem(value.option_ids, p)
        return problem is None, (
            f"{len(p)} probabilities summing to {math.fsum(p):.3f}, top {value.top}"
            if problem is None
            else f"not a probability vector over its options ({problem}): {dict(zip(value.option_ids, p))}"
        )
    if isinstance(value, ChatResult):
        words = len(value.content.split())
        return bool(words), f"an answer of {words} words" if words else "the chat answer is empty"
    if isinstance(value, (list, tuple)):
        found = [_reached(v) for v in value]
        bad = [detail for ok, detail in found if not ok]
        return bool(found) and not bad, ("; ".join(bad) or f"{len(found)} answers, each valid") if found else "none"
    if hasattr(value, "runs") and hasattr(value, "summary"):  # an evaluation.BenchReport
        failed = {key: sum(not r.answered for r in run.results) for key, run in value.runs.items()}
        failed = {key: n for key, n in failed.items() if n}
        head = value.summary
        valid = head["tasks"] > 0 and head["valid"] == head["tasks"] and not failed
        detail = f"{head['valid']}/{head['tasks']} decisions valid"
        if failed:
            detail += "; requests failed in " + ", ".join(f"{key} ({n})" for key, n in failed.items())
        return valid, detail
    if hasattr(value, "ok"):
        problem = getattr(value, "problem", "") or ("" if value.ok else "did not succeed")
        return value.ok, problem or getattr(value, "summary", "") or shorten((str(value).splitlines() or [""])[0])
    raise TypeError(f"check_outcome does not know how to check a {type(value).__name__}")


def _standard_rows(workshop: Workshop, results: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Notebook 02: each chat answer came from llama-server (locally: the launcher's, checked against it)."""
    chats = [name for name, value in results.items() if isinstance(value, ChatResult)]
    return [
        ("server" if len(chats) == 1 else f"server ({name})", *answered_by(workshop, results[name])) for name in chats
    ]


def check_outcome(workshop: Workshop, notebook: str, **results: Any) -> Checks:
    """A notebook's closing check: one row per named result (valid probabilities, an answer with
    content, something deleted, nothing left running). In local mode (CI, the rehearsal) a failed row
    stops the notebook with the reason, so a run a participant would be stuck after never passes."""
    config = workshop.config
    rows: list[tuple[str, bool | None, str]] = [(name, *_reached(value)) for name, value in results.items()]
    if notebook == "02":
        rows += _standard_rows(workshop, results)
    checks = Checks(rows)
    if config.mode == "local" and not checks.ok:
        raise StepError(f"notebook {notebook} did not get where it should:\n{checks}")
    return checks
