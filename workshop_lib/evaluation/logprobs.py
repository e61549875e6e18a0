"""The letter-probability baseline: the standard endpoint asked for the answer letter's probabilities.

What a user of the standard path (llama-server behind the DLC's ``/invocations``) can do to get
probabilities without the decision image: send the decision prompt itself (the same system and user
turns the adapter renders, options under the letters A, B, ...) as a chat completion with
``max_tokens: 1, logprobs: true, top_logprobs: 20``, take the option letters among the 20 most likely
first tokens and renormalise over them.

What that cannot give: the server returns at most 20 tokens (OpenAI's limit), so a letter outside them
has no probability at all. A task whose letters are not all among the 20 is invalid here; a missing
option is never guessed (giving it 0, or the leftover mass, would invent a number the server did not
return). The decision readout reads every declared option's logit instead.

``decision_messages``, ``logprobs_payload``, ``read_letters`` and ``logprobs_result`` are pure;
``run_logprobs_baseline`` calls the endpoint; ``agreement`` compares the baseline with the decision
readout on the same tasks.

The messages are built here, never imported from the adapter (the two rooms meet only over HTTP):
tests/workshop_lib/evaluation/test_logprobs_baseline.py holds them to the adapter's own rendering by
comparing the prompt llama-server renders from them with the adapter's ``prompt_sha256``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..client import Deadline, EndpointClient, EndpointError, LocalTransport
from ..errors import WorkshopError
from .grading import is_correct, predicted_label
from .runner import Run, TaskResult, endpoint_name, execute, failed_result, utc_now
from .tasks import Task

TOP_LOGPROBS = 20  # the most llama-server (and OpenAI's schema) return per position
LETTERS = tuple("ABCDEFGHIJKLMNOP")

# The adapter's decision prompt ("decision-prompt/1"), as it reaches the chat template: its system turn,
# and a user turn holding {"state", "question", "options": {letter: text}} in that order.
DECISION_SYSTEM = (
    "You are a decision component inside a software system. You receive a JSON object with "
    "a state (the evidence), a question (the criterion to apply to it) and options labelled "
    "with capital letters. Apply the question to the state and answer with the single capital "
    "letter of the best option. Write nothing else."
)


def _json_text(value: object, *, sort_keys: bool) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(", ", ": "))


def decision_messages(state: Any, question: Any, option_texts: Sequence[str]) -> list[dict[str, str]]:
    """The decision prompt's chat messages for options shown in this order (at most 16)."""
    if not 2 <= len(option_texts) <= len(LETTERS):
        raise ValueError(f"{len(option_texts)} options: the letter prompt shows 2 to {len(LETTERS)}")
    labelled = dict(zip(LETTERS, option_texts))
    user = (
        '{"state": '
        + _json_text(state, sort_keys=True)
        + ', "question": '
        + _json_text(question, sort_keys=True)
        + ', "options": '
        + _json_text(labelled, sort_keys=False)
        + "}"
    )
    return [{"role": "system", "content": DECISION_SYSTEM}, {"role": "user", "content": user}]


def task_messages(task: Task, order: str = "original") -> list[dict[str, str]]:
    """``decision_messages`` for a benchmark task, options in ``order`` (as ``task.request`` sends them)."""
    return decision_messages(task.state, task.question, [text for _, text in task.presented(order)])


def logprobs_payload(messages: Sequence[Mapping[str, Any]], top_logprobs: int = TOP_LOGPROBS) -> dict[str, Any]:
    """The chat-completions body: one token, greedy, with the top first tokens' log-probabilities."""
    return {
        "messages": list(messages),
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": True,
        "top_logprobs": top_logprobs,
        "chat_template_kwargs": {"enable_thinking": False},
    }


class NoLogprobs(WorkshopError, ValueError):
    """The reply carries no ``choices[0].logprobs.content[0].top_logprobs`` (the server does not give them)."""


def first_token_logprobs(reply: Mapping[str, Any]) -> dict[str, float]:
    """token text -> log-probability of the first generated position's top tokens (an OpenAI chat reply)."""
    try:
        entries = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise NoLogprobs(
            "the reply has no choices[0].logprobs.content[0].top_logprobs: this endpoint does not "
            "return log-probabilities (llama-server does; the decision adapter's chat does not)"
        ) from None
    top: dict[str, float] = {}
    for entry in entries:
        token, logprob = entry.get("token"), entry.get("logprob")
        if isinstance(token, str) and isinstance(logprob, (int, float)) and math.isfinite(logprob):
            top.setdefault(token, float(logprob))  # the first (most likely) spelling of a token text wins
    return top


def read_letters(top: Mapping[str, float], n: int) -> dict[str, Any]:
    """The first ``n`` letters' share of ``top`` (pure).

    A letter counts only as exactly its own token (``"A"``, as the decision readout's slots); ``" A"`` or
    ``"A."`` are other tokens. ``probabilities`` (renormalised over the letters, in letter order) is None
    unless all ``n`` letters are present; ``letter_mass`` is their summed probability as returned.
    """
    letters = LETTERS[:n]
    found = [letter for letter in letters if letter in top]
    missing = [letter for letter in letters if letter not in top]
    mass = sum(math.exp(top[letter]) for letter in found)
    probabilities = None
    if not missing:
        peak = max(top[letter] for letter in letters)
        weights = [math.exp(top[letter] - peak) for letter in letters]
        total = sum(weights)
        probabilities = [w / total for w in weights]
    return {
        "letters": list(letters),
        "found": found,
        "missing": missing,
        "letter_mass": mass,
        "probabilities": probabilities,
    }


def logprobs_result(
    task: Task,
    reply: Mapping[str, Any],
    *,
    order: str = "original",
    top_logprobs: int = TOP_LOGPROBS,
    **measured: Any,
) -> TaskResult:
    """Score one llama-server reply for ``task`` (pure): valid only with every option's letter in the top."""
    presented = [oid for oid, _ in task.presented(order)]
    result = TaskResult(
        task_id=task.id,
        family=task.family,
        type=task.type,
        expected=task.expected,
        labels=list(task.labels),
        split=task.split,
        order=order,
        presented=presented,
        **measured,
    )
    try:
        top = first_token_logprobs(reply)
    except NoLogprobs as exc:
        result.error = str(exc)
        result.extra = {"found": [], "missing": list(LETTERS[: len(presented)]), "letter_mass": None}
        return result
    read = read_letters(top, len(presented))
    choice = (reply.get("choices") or [{}])[0]
    result.extra = {
        "found": read["found"],
        "missing": read["missing"],
        "letter_mass": read["letter_mass"],
        "returned": len(top),
        "top_logprobs": top_logprobs,
        "first_token": ((choice.get("message") or {}).get("content") or "")[:20],
    }
    if read["probabilities"] is None:
        result.error = (
            f"options {', '.join(read['missing'])} ({len(read['missing'])} of {len(presented)}) are not "
            f"among the top {top_logprobs} first tokens: no probability for them"
        )
        return result
    result.valid = True
    result.probabilities = dict(zip(presented, read["probabilities"]))
    result.option_logits = {oid: top[letter] for oid, letter in zip(presented, read["letters"])}
    result.predicted = predicted_label(presented, read["probabilities"])
    result.correct = is_correct(result.predicted, task.expected)
    return result


def run_logprobs_baseline(
    client: EndpointClient,
    tasks: Sequence[Task],
    *,
    top_logprobs: int = TOP_LOGPROBS,
    progress: bool = True,
    label: str = "logprobs",
) -> Run:
    """Each task's decision prompt sent to ``client`` (the standard endpoint) for its first token's top logprobs."""

    def attempt(task: Task) -> TaskResult:
        payload = logprobs_payload(task_messages(task), top_logprobs)
        t0 = time.perf_counter()
        try:
            reply, latency_ms, attempts = client.invoke(payload)
        except EndpointError as exc:
            return failed_result(task, exc, client_latency_ms=(time.perf_counter() - t0) * 1000.0)
        usage = reply.get("usage") or {}
        timings = reply.get("timings") or {}
        result = logprobs_result(
            task,
            reply,
            top_logprobs=top_logprobs,
            client_latency_ms=latency_ms,
            input_tokens=usage.get("prompt_tokens"),
            attempts=attempts,
            server_ms=timings.get("prompt_ms"),
            timing={k: timings[k] for k in ("prompt_n", "prompt_ms", "cache_n") if k in timings},
        )
        return result

    started_at = utc_now()
    results, wall = execute(tasks, attempt, concurrency=1, progress=progress, desc=label)
    return Run(
        label=label,
        kind="logprobs",
        results=results,
        endpoint=endpoint_name(client),
        concurrency=1,
        wall_s=wall,
        started_at=started_at,
        settings={"max_tokens": 1, "logprobs": True, "top_logprobs": top_logprobs, "temperature": 0.0},
    )


def agreement(decision: Sequence[TaskResult], baseline: Sequence[TaskResult]) -> dict[str, Any]:
    """The baseline against the decision readout, task by task (pure).

    ``compared``: tasks both answered validly; ``agree``: of those, the same top option;
    ``max_abs_diff``: the largest |p_decision - p_baseline| over every option of every compared task
    (with ``max_abs_diff_task``), ``median_task_diff``: the median of each task's largest difference.
    """
    by_id = {r.task_id: r for r in decision}
    diffs, agree, worst, worst_task = [], 0, None, None
    for r in baseline:
        d = by_id.get(r.task_id)
        if d is None or not (d.valid and r.valid and d.probabilities and r.probabilities):
            continue
        task_diff = max(abs(d.probabilities[k] - r.probabilities[k]) for k in d.probabilities)
        diffs.append(task_diff)
        agree += d.predicted == r.predicted
        if worst is None or task_diff > worst:
            worst, worst_task = task_diff, r.task_id
    diffs.sort()
    median = None
    if diffs:
        mid = len(diffs) // 2
        median = diffs[mid] if len(diffs) % 2 else (diffs[mid - 1] + diffs[mid]) / 2
    return {
        "tasks": len(baseline),
        "valid": sum(r.valid for r in baseline),
        "compared": len(diffs),
        "agree": agree,
        "max_abs_diff": worst,
        "max_abs_diff_task": worst_task,
        "median_task_diff": median,
        "missing_options_mean": (
            sum(len(r.extra.get("missing") or []) for r in baseline if r.answered)
            / max(1, sum(r.answered for r in baseline))
        ),
    }


CHAT_COMPLETIONS = "/v1/chat/completions"


class ChatCompletionsTransport(LocalTransport):
    """POST to the URL's own path (a bare llama-server's ``/v1/chat/completions``), not ``/invocations``."""

    def invoke(self, body: bytes, *, deadline: Deadline | None = None, inference_id: str | None = None) -> bytes:
        # a bare llama-server has no use for SageMaker's InferenceId header: ``inference_id`` is not sent
        return self._send("POST", "", body, deadline or Deadline(self.timeout_s))


def url_client(url: str) -> EndpointClient:
    """An ``EndpointClient`` for a standard endpoint's URL: one that serves ``/invocations`` (the DLC's
    contract, or the local launcher behind nginx), or a bare llama-server when the URL ends with
    ``/v1/chat/completions``."""
    base = url.rstrip("/")
    if base.endswith(CHAT_COMPLETIONS):
        return EndpointClient(ChatCompletionsTransport(base))
    return EndpointClient.local(base)


def show_letter_request(
    client: EndpointClient, decision: Mapping[str, Any], *, top_logprobs: int = TOP_LOGPROBS
) -> LetterView:
    """Send one decision (this project's body: state, question, options) to the standard endpoint as a
    letter-probability request; the view shows what came back and what it leaves out."""
    options = decision["options"]
    ids = [o["id"] if isinstance(o, Mapping) else o for o in options]
    texts = [(o.get("text") or o.get("description") or o["id"]) if isinstance(o, Mapping) else o for o in options]
    payload = logprobs_payload(decision_messages(decision["state"], decision["question"], texts), top_logprobs)
    reply, latency_ms, _ = client.invoke(payload)
    return LetterView(ids, reply, latency_ms, top_logprobs)


class LetterView:
    """One letter-probability reply: the option letters found, renormalised, and what is missing."""

    def __init__(
        self, option_ids: Sequence[str], reply: Mapping[str, Any], latency_ms: float, top_logprobs: int
    ) -> None:
        self.option_ids, self.reply, self.latency_ms, self.top_logprobs = (
            list(option_ids),
            reply,
            latency_ms,
            top_logprobs,
        )
        try:
            self.top = first_token_logprobs(reply)
            self.problem = None
        except NoLogprobs as exc:
            self.top, self.problem = {}, str(exc)
        self.read = read_letters(self.top, len(self.option_ids))

    def __str__(self) -> str:
        lines = [f"asked for the first token with top_logprobs={self.top_logprobs} ({self.latency_ms:.0f} ms)"]
        if self.problem:
            return "\n".join(lines + [self.problem])
        letters = self.read["letters"]
        lines.append(
            f"{len(self.top)} tokens came back; option letters among them: {len(self.read['found'])} "
            f"of {len(letters)}, holding {100 * self.read['letter_mass']:.1f} % of the probability"
        )
        shown = self.read["probabilities"]
        for i, (letter, oid) in enumerate(zip(letters, self.option_ids)):
            if letter in self.top:
                p = f"{shown[i]:.3f} (renormalised)" if shown else f"raw {math.exp(self.top[letter]):.3f}"
            else:
                p = f"not among the top {self.top_logprobs}: no probability"
            lines.append(f"    {letter} = {oid:<20} {p}")
        others = [t for t in self.top if t not in letters][:8]
        lines.append("most likely other first tokens: " + ", ".join(repr(t) for t in others))
        lines.append(
            "not given: a probability for letters outside the top tokens (then the answer is invalid, "
            "not guessed), the option ids (mapped back from letters here), one state evaluated once for "
            "several questions (one request per question)"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


__all__ = [
    "CHAT_COMPLETIONS",
    "DECISION_SYSTEM",
    "LETTERS",
    "TOP_LOGPROBS",
    "ChatCompletionsTransport",
    "LetterView",
    "NoLogprobs",
    "agreement",
    "decision_messages",
    "first_token_logprobs",
    "logprobs_payload",
    "logprobs_result",
    "read_letters",
    "run_logprobs_baseline",
    "show_letter_request",
    "task_messages",
    "url_client",
]
