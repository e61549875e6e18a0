"""The generation baseline: what a user does without decision scoring.

The same tasks go to the same server through the chat schema (OpenAI
chat-completions on ``/invocations``): the prompt lists the option ids and asks
for one of them; the reply text is parsed back to an id. It is reported beside
the decision readout (validity, accuracy, latency), whichever way the comparison goes.

Parsing, in order: the whole reply (trimmed of quotes, backticks, ``*`` and final
punctuation, case and ``_``/``-``/space differences ignored) equals an id: ``exact``;
otherwise exactly one id occurs in the reply as a whole word: ``found``. Anything
else (no id, or several different ids) is invalid and counts as wrong. There are no
probabilities, so the baseline has no calibration or reliability figures.

``generation_messages`` and ``parse_answer`` are pure; ``run_generation_baseline``
calls the endpoint.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from ..client import EndpointClient, EndpointError
from .runner import Run, TaskResult, endpoint_name, execute, failed_result, utc_now
from .tasks import Task

MAX_TOKENS = 16
SYSTEM = (
    "You are a decision component inside a software system. Read the state, apply the question to it "
    "and reply with exactly one option id from the list. Write the id only, nothing else."
)


def generation_messages(task: Task, order: str = "original") -> list[dict[str, str]]:
    """Chat messages asking for one option id (options in ``order``)."""
    state = task.state if isinstance(task.state, str) else json.dumps(task.state, ensure_ascii=False, sort_keys=True)
    lines = []
    for oid, text in task.presented(order):
        lines.append(f"- {oid}" if text == oid else f"- {oid}: {text}")
    ids = ", ".join(oid for oid, _ in task.presented(order))
    user = (
        f"State:\n{state}\n\nQuestion: {task.question}\n\nOptions (id: meaning):\n"
        + "\n".join(lines)
        + f"\n\nReply with one of these ids only: {ids}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _label_pattern(label: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in re.split(r"[\s_\-]+", label.strip()) if p]
    return re.compile(r"(?<![0-9A-Za-z])" + r"[\s_\-]+".join(parts) + r"(?![0-9A-Za-z])", re.IGNORECASE)


def _normal(text: str) -> str:
    return re.sub(r"[\s_\-]+", "_", text.strip().lower())


def parse_answer(text: str, labels: Sequence[str]) -> tuple[str | None, str]:
    """(label or None, how): ``exact``, ``found``, ``ambiguous`` (several ids) or ``none``."""
    trimmed = (text or "").strip().strip("`*\"' \t\n").rstrip(".!;:,").strip("`*\"' \t\n")
    for label in labels:
        if _normal(trimmed) == _normal(label):
            return label, "exact"
    hits = [label for label in labels if _label_pattern(label).search(text or "")]
    if len(hits) == 1:
        return hits[0], "found"
    return None, "ambiguous" if hits else "none"


def generation_result(task: Task, text: str, *, order: str = "original", **measured: Any) -> TaskResult:
    """Score one generated reply (pure)."""
    label, how = parse_answer(text, task.labels)
    result = TaskResult(
        task_id=task.id,
        family=task.family,
        type=task.type,
        expected=task.expected,
        labels=list(task.labels),
        split=task.split,
        order=order,
        presented=[oid for oid, _ in task.presented(order)],
        **measured,
    )
    result.valid = label is not None
    result.predicted = label
    result.correct = label is not None and label == task.expected
    result.extra = {"answer": (text or "")[:300], "parse": how}
    if label is None:
        result.error = f"no single option id in the reply ({how}): {(text or '')[:80]!r}"
    return result


def run_generation_baseline(
    client: EndpointClient,
    tasks: Sequence[Task],
    *,
    max_tokens: int = MAX_TOKENS,
    concurrency: int = 1,
    progress: bool = True,
    label: str = "generation",
) -> Run:
    """Each task answered by generation (temperature 0) through ``client.chat``."""

    def attempt(task: Task) -> TaskResult:
        t0 = time.perf_counter()
        try:
            reply = client.chat(generation_messages(task), max_tokens=max_tokens, temperature=0.0)
        except EndpointError as exc:
            return failed_result(task, exc, client_latency_ms=(time.perf_counter() - t0) * 1000.0)
        usage = reply.usage or {}
        result = generation_result(
            task,
            reply.content,
            client_latency_ms=reply.client_latency_ms,
            input_tokens=usage.get("prompt_tokens"),
            attempts=reply.attempts,
        )
        result.extra["completion_tokens"] = usage.get("completion_tokens")
        result.extra["finish_reason"] = reply.finish_reason
        return result

    started_at = utc_now()
    results, wall = execute(tasks, attempt, concurrency=concurrency, progress=progress, desc=label)
    return Run(
        label=label,
        kind="generation",
        results=results,
        endpoint=endpoint_name(client),
        concurrency=concurrency,
        wall_s=wall,
        started_at=started_at,
        settings={"max_tokens": max_tokens, "temperature": 0.0},
    )


__all__ = [
    "MAX_TOKENS",
    "SYSTEM",
    "generation_messages",
    "generation_result",
    "parse_answer",
    "run_generation_baseline",
]
