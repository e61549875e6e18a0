"""Throughput under concurrent callers (notebook 06): decisions per second and client p50/p95 at
C = 1, 2, 4 callers, and the sustainable rate, the highest measured rate whose p95 stays within a chosen
limit, which sets notebook 07's auto scaling target.

    levels = measure_throughput(client, concurrencies=(1, 2, 4), seconds=5)
    levels.sustainable(p95_ms=2000)        # a Sustainable: the level picked, or none that fits

``sustainable_level`` and the ``Level`` statistics are pure; ``measure_throughput`` calls the endpoint.
``measure_level`` is the one load driver: C callers over any "send one request" callable, which
``benchmarks/concurrency.py`` also drives the adapter and llama-server with.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..aws.alarms import Thresholds
from ..client.endpoint import EndpointClient
from ..client.endpoint_errors import EndpointBusy, EndpointError
from .markdown import table
from .report import percentile
from .tasks import Task, resolve_tasks

CONCURRENCIES = (1, 2, 4)
DEFAULT_P95_MS = Thresholds().latency_p95_ms  # where notebook 07's latency alarms fire
TASKS = 8  # distinct tasks cycled through; each request is still new to the endpoint (see ``fresh_request``)


@dataclass(frozen=True)
class Level:
    """What ``concurrency`` callers, each sending its next request as soon as the last was answered, got."""

    concurrency: int
    latencies_ms: tuple[float, ...]  # client side, per answered request, the waits before retries included
    wall_s: float  # from the first request sent to the last answer
    busy_503: int = 0  # 503 answers received (each retried after its Retry-After while retries were left)
    refused: int = 0  # requests still refused when the client's retries ran out
    failed: int = 0  # requests that ended in another error (the endpoint's fault, not load)
    error: str = ""  # the first such error

    @property
    def answered(self) -> int:
        return len(self.latencies_ms)

    @property
    def decisions_per_s(self) -> float:
        return self.answered / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def p50_ms(self) -> float | None:
        return percentile(self.latencies_ms, 50)

    @property
    def p95_ms(self) -> float | None:
        return percentile(self.latencies_ms, 95)

    @property
    def complete(self) -> bool:
        """Every request sent was answered (a 503 that a retry got past counts as answered)."""
        return self.answered > 0 and not self.refused and not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "decisions_per_s": round(self.decisions_per_s, 4),
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "answered": self.answered,
            "busy_503": self.busy_503,
            "refused": self.refused,
            "failed": self.failed,
            "error": self.error,
            "wall_s": self.wall_s,
            "latencies_ms": [round(v, 3) for v in self.latencies_ms],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Level:
        return cls(
            concurrency=int(data["concurrency"]),
            latencies_ms=tuple(float(v) for v in data["latencies_ms"]),
            wall_s=float(data["wall_s"]),
            busy_503=int(data.get("busy_503", 0)),
            refused=int(data.get("refused", 0)),
            failed=int(data.get("failed", 0)),
            error=str(data.get("error", "")),
        )


def sustainable_level(levels: Sequence[Level], p95_ms: float) -> Level | None:
    """The level with the highest decisions per second among those whose p95 is within ``p95_ms`` and
    whose every request was answered; on equal rates the one with fewer callers. None when none fits."""
    if not p95_ms > 0:
        raise ValueError(f"p95_ms must be above 0 (milliseconds), not {p95_ms!r}")
    fits = [level for level in levels if level.complete and level.p95_ms is not None and level.p95_ms <= p95_ms]
    if not fits:
        return None
    return max(fits, key=lambda level: (level.decisions_per_s, -level.concurrency))


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def levels_table(levels: Sequence[Level]) -> str:
    rows = [
        (
            f"C = {level.concurrency}",
            f"{level.decisions_per_s:.2f}",
            _ms(level.p50_ms),
            _ms(level.p95_ms),
            level.answered,
            level.busy_503,
            level.refused + level.failed,
        )
        for level in levels
    ]
    return table(["callers", "decisions/s", "p50", "p95", "answered", "503s retried", "not answered"], rows)


@dataclass(frozen=True)
class Sustainable:
    """The rate one instance sustains with p95 within ``p95_limit_ms``: ``level`` (None when no level fits)."""

    endpoint: str
    p95_limit_ms: float
    level: Level | None
    levels: tuple[Level, ...] = field(repr=False, default=())

    @property
    def decisions_per_s(self) -> float | None:
        return self.level.decisions_per_s if self.level else None

    def lines(self) -> list[str]:
        if self.level is None:
            measured = ", ".join(
                f"C = {lv.concurrency}: p95 {_ms(lv.p95_ms)}" + ("" if lv.complete else " (requests not answered)")
                for lv in self.levels
            )
            return [
                f"No measured level keeps p95 within {_ms(self.p95_limit_ms)} with every request answered "
                f"({measured or 'nothing measured'}): there is no sustainable rate at this limit. Raise the limit, "
                "or serve from a faster instance type."
            ]
        lv = self.level
        return [
            f"Sustainable rate at p95 within {_ms(self.p95_limit_ms)}: {lv.decisions_per_s:.2f} decisions/s "
            f"per instance ({lv.decisions_per_s * 60:.0f} a minute), with {lv.concurrency} concurrent "
            f"caller{'s' if lv.concurrency > 1 else ''} (p95 {_ms(lv.p95_ms)})."
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__

    def to_dict(self) -> dict[str, Any]:
        level = self.level
        return {
            "decisions_per_s": round(level.decisions_per_s, 4) if level else None,
            "concurrency": level.concurrency if level else None,
            "p95_ms": level.p95_ms if level else None,
            "p95_limit_ms": self.p95_limit_ms,
        }


@dataclass(frozen=True)
class Throughput:
    """The levels measured against one endpoint, shown as a table."""

    endpoint: str
    levels: tuple[Level, ...]
    seconds: float  # of load per level

    @property
    def ok(self) -> bool:
        """Every level had answers and no request failed for another reason than load."""
        return bool(self.levels) and all(level.answered and not level.failed for level in self.levels)

    @property
    def problem(self) -> str:
        bad = [f"C = {lv.concurrency}: {lv.error or 'no answer'}" for lv in self.levels if not lv.answered or lv.failed]
        return "; ".join(bad) if self.levels else "no level measured"

    @property
    def summary(self) -> str:
        return "; ".join(
            f"C = {lv.concurrency}: {lv.decisions_per_s:.2f} decisions/s, p95 {_ms(lv.p95_ms)}" for lv in self.levels
        )

    def sustainable(self, p95_ms: float = DEFAULT_P95_MS) -> Sustainable:
        return Sustainable(self.endpoint, float(p95_ms), sustainable_level(self.levels, p95_ms), self.levels)

    def to_markdown(self) -> str:
        return (
            f"**{self.endpoint}**: about {self.seconds:g} s of load per level; every request new to the "
            "endpoint; client-side latency, the waits before retried 503s included\n\n" + levels_table(self.levels)
        )

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __str__(self) -> str:
        return self.to_markdown()

    def to_dict(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "seconds": self.seconds, "levels": [lv.to_dict() for lv in self.levels]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Throughput:
        return cls(str(data["endpoint"]), tuple(Level.from_dict(lv) for lv in data["levels"]), float(data["seconds"]))


# ---- measuring ----------------------------------------------------------------------------------


def note_tag(run: str, n: int) -> str:
    """Eight hex characters that open the n-th request's note. The first differs between any 16 consecutive
    requests (5 is prime to 16), so no two prompts in flight share a token after the template's head: a server
    that reuses another caller's opening (llama-server's slots do) gains nothing from the note itself."""
    return "0123456789abcdef"[n * 5 % 16] + hashlib.sha256(f"{run}-{n}".encode()).hexdigest()[:7]


def fresh_request(task: Task, n: int, run: str) -> dict[str, Any]:
    """The task's request with a unique id and a note opening its state, so that no cache the endpoint
    may keep (the adapter's opt-in state cache, llama-server's prompt cache) answers it from an earlier one."""
    body = task.request(request_id=f"throughput-{run}-{n}")
    if isinstance(body["state"], str):
        body["state"] = f"{note_tag(run, n)} (request {run}-{n})\n{body['state']}"
    return body


def cycled_requests(
    tasks: Sequence[Task], request: Callable[[Task, int], dict[str, Any]]
) -> Callable[[], dict[str, Any]]:
    """A thread-safe source of requests: ``tasks`` in turn, cycled, the n-th (from 0) made by ``request(task, n)``."""
    if not tasks:
        raise ValueError("no tasks to send")
    cycle, numbers, lock = itertools.cycle(tasks), itertools.count(), threading.Lock()

    def next_request() -> dict[str, Any]:
        with lock:
            task, n = next(cycle), next(numbers)
        return request(task, n)

    return next_request


def fresh_requests(tasks: Sequence[Task], run: str) -> Callable[[], dict[str, Any]]:
    """``tasks`` cycled, the n-th opened by ``fresh_request``, so two sources of the same ``run`` give two servers
    the same prompts in the same order."""
    return cycled_requests(tasks, lambda task, n: fresh_request(task, n, run))


class Answered(Protocol):
    """What ``measure_level`` reads of an answer."""

    @property
    def client_latency_ms(self) -> float: ...

    @property
    def attempts(self) -> int: ...  # 503s retried, plus one


def measure_level(
    send: Callable[[dict[str, Any]], Answered],
    concurrency: int,
    seconds: float,
    next_request: Callable[[], dict[str, Any]],
    *,
    limit: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Level:
    """``concurrency`` callers each send a request, wait for its answer, and send the next until ``seconds``
    have passed or ``limit`` requests were sent (requests sent before then are answered and counted).

    ``send`` sends one request body and returns its answer, which carries ``client_latency_ms`` (the retries'
    waits included) and ``attempts`` (a ``client.Decision``: ``client.decide``); it retries a 503 after its
    Retry-After and raises ``EndpointBusy`` when its retries ran out. A caller stops at the first other
    ``EndpointError``."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    lock = threading.Lock()
    latencies: list[float] = []
    counts = {"busy_503": 0, "refused": 0, "failed": 0}
    errors: list[str] = []
    sent = [0]
    started = clock()
    stop_at = started + seconds

    def caller() -> None:
        while True:
            with lock:
                if clock() >= stop_at or (limit is not None and sent[0] >= limit):
                    return
                sent[0] += 1
            try:
                answer = send(next_request())
            except EndpointBusy as exc:
                with lock:
                    counts["busy_503"] += getattr(exc, "attempts", 1)
                    counts["refused"] += 1
                continue
            except EndpointError as exc:
                with lock:
                    counts["failed"] += 1
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            with lock:
                latencies.append(answer.client_latency_ms)
                counts["busy_503"] += answer.attempts - 1

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"throughput-c{concurrency}") as pool:
        for running in [pool.submit(caller) for _ in range(concurrency)]:
            running.result()
    return Level(
        concurrency=concurrency,
        latencies_ms=tuple(latencies),
        wall_s=clock() - started,
        error=errors[0][:300] if errors else "",
        **counts,
    )


def measure_throughput(
    client: EndpointClient,
    tasks: str | Path | Iterable[Task] | None = None,
    *,
    concurrencies: Sequence[int] = CONCURRENCIES,
    seconds: float = 5.0,
    label: str | None = None,
) -> Throughput:
    """Each of ``concurrencies`` in turn for about ``seconds``, after one request that is not counted (it
    wakes the endpoint). ``tasks``: a path, a list of tasks or None (``TASKS`` of the packaged set), cycled."""
    if not seconds > 0:
        raise ValueError(f"seconds must be above 0, not {seconds!r}")
    if not concurrencies or any(int(c) < 1 for c in concurrencies):
        raise ValueError(f"concurrencies must be callers counts of 1 or more, not {list(concurrencies)!r}")
    chosen, _ = resolve_tasks(tasks, TASKS)
    next_request = fresh_requests(chosen, uuid.uuid4().hex[:8])
    client.decide(next_request())  # not counted: a first request may pay for loading or warming
    levels = tuple(measure_level(client.decide, int(c), seconds, next_request) for c in concurrencies)
    return Throughput(
        label or str(getattr(getattr(client, "transport", None), "name", "endpoint")), levels, float(seconds)
    )


__all__ = [
    "CONCURRENCIES",
    "DEFAULT_P95_MS",
    "Level",
    "Sustainable",
    "Throughput",
    "cycled_requests",
    "fresh_request",
    "fresh_requests",
    "levels_table",
    "measure_level",
    "measure_throughput",
    "note_tag",
    "sustainable_level",
]
