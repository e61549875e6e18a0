"""Running tasks against an endpoint: sequential (as the blog) or N clients at once.

``run_decisions(client, tasks)`` sends one decision per task through any
``EndpointClient`` (SageMaker or a local URL) and keeps, per task: valid or not,
the predicted label, correct or not, the client latency, the server's timings,
the input tokens and how many 503s it met. ``concurrency=N`` keeps at most N
requests in flight (N threads, one request each), which is how throughput and the
adapter's 503 behaviour are measured. A tqdm progress bar shows the run.

``score_response`` and ``failed_result`` are the pure part: they turn one answer
(or one failure) into a ``TaskResult`` and are tested on fixed inputs.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm.auto import tqdm

from ..client import Decision, EndpointBusy, EndpointClient, EndpointError
from .grading import invalid_reason, is_correct, predicted_label
from .tasks import Task

# What a run keeps of the model metadata the adapter returns.
MODEL_KEYS = (
    "file",
    "sha256",
    "size_bytes",
    "source_revision",
    "quantization",
    "context_size",
    "gpu_layers_offloaded",
    "threads",
)
# What a result keeps (in ``extra``) of the fields the adapter's order modes, calibration and
# abstention add to each answer; absent fields are left out.
SERVED_KEYS = (
    "order",
    "order_sensitivity",
    "prior",
    "calibration",
    "abstained",
    "min_answer_mass",
    "allowed_token_mass",
    "prompt_version",
)


@dataclass
class TaskResult:
    """One task answered once (by the decision readout, the generation baseline, ...)."""

    task_id: str
    family: str
    type: str
    expected: str
    labels: list[str]
    split: str = "test"
    order: str = "original"  # how the options were presented
    presented: list[str] = field(default_factory=list)  # option ids in the order sent
    answered: bool = True  # the request completed (an answer came back, usable or not)
    valid: bool = False
    predicted: str | None = None
    correct: bool = False
    probabilities: dict[str, float] | None = None  # by option id
    option_logits: dict[str, float] | None = None
    error: str | None = None
    client_latency_ms: float | None = None
    server_ms: float | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    input_tokens: int | None = None
    attempts: int = 1  # > 1: the request met 503s and was retried
    busy: bool = False  # still 503 after the client's retries
    started_s: float | None = None  # seconds after the run started
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def top_probability(self) -> float | None:
        return max(self.probabilities.values()) if self.valid and self.probabilities else None

    @property
    def predicted_position(self) -> int | None:
        """Where the predicted option was shown (0 = first), to see position preferences."""
        if self.predicted is None or self.predicted not in self.presented:
            return None
        return self.presented.index(self.predicted)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def evaluated_tokens(result: TaskResult) -> int | None:
    """The tokens the server evaluated for this answer: ``timing.input_tokens`` when the server says;
    else the prompt's ``input_tokens``, and for k presentations (which share ``shared_prefix_tokens``,
    evaluated once) their prompts' tokens less the k - 1 repeats of that prefix."""
    told = _int(result.timing.get("input_tokens"))
    if told is not None:
        return told
    tokens = _int(result.input_tokens)
    sensitivity = result.extra.get("order_sensitivity")
    shared = _int(result.timing.get("shared_prefix_tokens"))
    if tokens is not None and isinstance(sensitivity, Mapping) and shared is not None:
        shown = _int(sensitivity.get("presentations")) or 1
        return tokens - (shown - 1) * shared
    return tokens


def _base(task: Task, order: str, presented: Sequence[str]) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "family": task.family,
        "type": task.type,
        "expected": task.expected,
        "labels": list(task.labels),
        "split": task.split,
        "order": order,
        "presented": list(presented),
    }


def score_response(
    task: Task,
    option_ids: Sequence[str],
    probabilities: Sequence[float],
    *,
    option_logits: Sequence[Any] | None = None,
    order: str = "original",
    presented: Sequence[str] | None = None,
    **measured: Any,
) -> TaskResult:
    """A ``TaskResult`` from one probability vector (pure): validity, prediction, correctness."""
    presented = list(presented if presented is not None else option_ids)
    reason = invalid_reason(task.labels, option_ids, probabilities)
    result = TaskResult(**_base(task, order, presented), **measured)
    if reason is not None:
        result.error = f"invalid response: {reason}"
        return result
    result.valid = True
    result.probabilities = {oid: float(p) for oid, p in zip(option_ids, probabilities)}
    if (
        option_logits is not None
        and len(option_logits) == len(option_ids)
        and all(isinstance(v, (int, float)) and math.isfinite(v) for v in option_logits)
    ):
        result.option_logits = {oid: float(v) for oid, v in zip(option_ids, option_logits)}
    result.predicted = predicted_label(list(option_ids), [float(p) for p in probabilities])
    result.correct = is_correct(result.predicted, task.expected)
    return result


def failed_result(
    task: Task,
    error: BaseException | str,
    *,
    order: str = "original",
    presented: Sequence[str] | None = None,
    **measured: Any,
) -> TaskResult:
    """A failed request: invalid, wrong, with the error's text; a 503 after retries is marked busy."""
    presented = list(presented if presented is not None else task.labels)
    busy = isinstance(error, EndpointBusy)
    attempts = getattr(error, "attempts", measured.pop("attempts", 1)) or 1
    return TaskResult(
        **_base(task, order, presented), answered=False, error=str(error), busy=busy, attempts=attempts, **measured
    )


def decision_result(task: Task, decision: Decision, *, order: str = "original") -> TaskResult:
    """Score a ``client.Decision`` for ``task``; the served order, calibration and abstention fields go
    to ``extra``."""
    raw = decision.raw or {}
    result = score_response(
        task,
        decision.option_ids,
        decision.probabilities,
        option_logits=raw.get("option_logits"),
        order=order,
        presented=decision.option_ids,
        client_latency_ms=decision.client_latency_ms,
        server_ms=decision.timing.get("total_ms"),
        timing=dict(decision.timing),
        input_tokens=raw.get("input_tokens"),
        attempts=decision.attempts,
    )
    result.extra = {k: raw[k] for k in SERVED_KEYS if k in raw}
    if decision.model.get("sha256"):
        result.extra["model_sha256"] = decision.model["sha256"]
    return result


def model_summary(model: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: model[k] for k in MODEL_KEYS if model and k in model}


@dataclass
class Run:
    """Results of one pass over a task list, in task order."""

    label: str
    kind: str  # decision | generation | debiased
    results: list[TaskResult]
    endpoint: str = ""
    concurrency: int = 1
    wall_s: float = 0.0
    started_at: str = ""
    model: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def by_task(self) -> dict[str, TaskResult]:
        return {r.task_id: r for r in self.results}

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "kind": self.kind,
            "endpoint": self.endpoint,
            "concurrency": self.concurrency,
            "wall_s": self.wall_s,
            "started_at": self.started_at,
            "model": self.model,
            "settings": self.settings,
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run:
        return cls(
            label=data["label"],
            kind=data["kind"],
            endpoint=data.get("endpoint", ""),
            concurrency=data.get("concurrency", 1),
            wall_s=data.get("wall_s", 0.0),
            started_at=data.get("started_at", ""),
            model=dict(data.get("model") or {}),
            settings=dict(data.get("settings") or {}),
            results=[TaskResult.from_dict(r) for r in data.get("results", [])],
        )


def progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar over ``total`` tasks, or None when ``enabled`` is false."""
    if not enabled:
        return None
    return tqdm(total=total, desc=desc, unit="task", leave=True)


def execute(
    tasks: Sequence[Task],
    attempt: Callable[[Task], TaskResult],
    *,
    concurrency: int = 1,
    progress: bool = True,
    desc: str = "bench",
) -> tuple[list[TaskResult], float]:
    """Call ``attempt`` for every task with at most ``concurrency`` in flight; results in task order.

    ``attempt`` turns a task into a ``TaskResult``; it must catch the endpoint's errors itself.
    Each result gets ``started_s`` (seconds after the run began). Returns (results, wall seconds).
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    bar = progress_bar(len(tasks), desc, progress)
    started = time.perf_counter()

    def one(task: Task) -> TaskResult:
        t0 = time.perf_counter()
        result = attempt(task)
        result.started_s = round(t0 - started, 4)
        if bar is not None:
            bar.set_postfix_str(f"last {result.client_latency_ms or 0:.0f} ms", refresh=False)
            bar.update(1)
        return result

    try:
        if concurrency == 1:
            results = [one(task) for task in tasks]
        else:
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench") as pool:
                results = list(pool.map(one, tasks))
    finally:
        if bar is not None:
            bar.close()
    return results, time.perf_counter() - started


def _timed_failure(task: Task, exc: EndpointError, t0: float, **kw: Any) -> TaskResult:
    return failed_result(task, exc, client_latency_ms=(time.perf_counter() - t0) * 1000.0, **kw)


def run_decisions(
    client: EndpointClient,
    tasks: Sequence[Task],
    *,
    concurrency: int = 1,
    order: str = "original",
    temperature: float | None = None,
    progress: bool = True,
    label: str = "decision",
    fields: Mapping[str, Any] | Callable[[Task], Mapping[str, Any]] | None = None,
) -> Run:
    """One decision per task through ``client.decide``; failures are recorded, never raised.

    ``fields`` are added to every request body (e.g. ``{"order": "rotations"}``), or computed per task
    by a function of the task.
    """
    model: dict[str, Any] = {}

    def attempt(task: Task) -> TaskResult:
        body = task.request(
            order, request_id=task.id if order == "original" else f"{task.id}@{order}", temperature=temperature
        )
        if fields:
            body.update(fields(task) if callable(fields) else fields)
        presented = [o["id"] for o in body["options"]]
        t0 = time.perf_counter()
        try:
            decision = client.decide(body)
        except EndpointError as exc:
            return _timed_failure(task, exc, t0, order=order, presented=presented)
        if not model and decision.model:
            model.update(model_summary(decision.model))
        return decision_result(task, decision, order=order)

    started_at = utc_now()
    results, wall = execute(
        tasks,
        attempt,
        concurrency=concurrency,
        progress=progress,
        desc=f"{label} ({order})" if order != "original" else label,
    )
    return Run(
        label=label,
        kind="decision",
        results=results,
        endpoint=endpoint_name(client),
        concurrency=concurrency,
        wall_s=wall,
        started_at=started_at,
        model=model,
        settings={
            "order": order,
            "temperature": temperature,
            **({"fields": dict(fields)} if isinstance(fields, Mapping) else {}),
        },
    )


def systemone_question(task: Task) -> dict[str, Any]:
    """The task as one Jev System One question (answers keyed by the task's labels)."""
    if task.type == "noul":
        return {"type": "noul", "instructions": task.question}
    if task.type == "score":
        return {"type": "score", "instructions": task.question, "criteria": [text for _, text in task.options]}
    return {"type": "choice", "instructions": task.question, "criteria": {oid: text for oid, text in task.options}}


def run_systemone(
    client: EndpointClient,
    tasks: Sequence[Task],
    *,
    concurrency: int = 1,
    progress: bool = True,
    label: str = "systemone",
) -> Run:
    """The same tasks through the Jev ``/v1/systemone`` schema (``client.systemone``), scored alike."""

    def attempt(task: Task) -> TaskResult:
        t0 = time.perf_counter()
        try:
            result = client.systemone(task.state, {task.id: systemone_question(task)})
        except EndpointError as exc:
            return _timed_failure(task, exc, t0)
        probabilities = result[task.id].probabilities
        labels = [oid for oid in task.labels if oid in probabilities] if task.type == "choice" else list(probabilities)
        return score_response(
            task,
            labels,
            [probabilities[k] for k in labels],
            client_latency_ms=result.client_latency_ms,
            server_ms=result.server_ms,
            input_tokens=result.usage.get("input_tokens"),
            attempts=result.attempts,
        )

    started_at = utc_now()
    results, wall = execute(tasks, attempt, concurrency=concurrency, progress=progress, desc=label)
    return Run(
        label=label,
        kind="decision",
        results=results,
        endpoint=endpoint_name(client),
        concurrency=concurrency,
        wall_s=wall,
        started_at=started_at,
        settings={"schema": "systemone"},
    )


def utc_now() -> str:
    """Now in UTC, to the second (a run's ``started_at``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def endpoint_name(client: object) -> str:
    """What a run calls the endpoint behind ``client``: its transport's name, else the client's repr."""
    transport = getattr(client, "transport", None)
    return getattr(transport, "name", "") or repr(client)


__all__ = [
    "Run",
    "TaskResult",
    "decision_result",
    "endpoint_name",
    "evaluated_tokens",
    "execute",
    "failed_result",
    "model_summary",
    "progress_bar",
    "run_decisions",
    "score_response",
    "utc_now",
]
