"""Admission to the model's contexts: one request per context, a short bounded line, then 503.

A llama.cpp context holds one KV cache; two requests evaluating on it at once would
read each other's logits. The engine keeps ``lanes`` contexts on one loaded model
(scheduler.py); exactly one request holds each, at most ``max_queue`` wait for a
free one (each at most ``timeout_s``), and everyone else is told to come back later
(503 with ``Retry-After``). Waiters are served first come, first served, and a
request always takes the lowest-numbered free lane, so a lone request is served by
lane 0 as on a one-context server.

At shutdown (SIGTERM) the gate is closed: everyone waiting, and anyone who arrives
later, is refused at once with 503 and ``Retry-After`` so that SageMaker can send
them to another instance; the requests holding lanes carry on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .caller_errors import Busy


@dataclass(frozen=True)
class Admission:
    lane: int  # the context the request holds
    waited_ms: float


class Gate:
    def __init__(self, max_queue: int, timeout_s: float, retry_after_s: int = 1, lanes: int = 1) -> None:
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._cond = threading.Condition()
        self._lanes = lanes
        self._held: set[int] = set()
        self._closed: str | None = None  # why the gate refuses everyone (shutting down)
        self._line: deque[object] = deque()

    @property
    def lanes(self) -> int:
        return self._lanes

    def set_lanes(self, lanes: int) -> None:
        """How many contexts requests may hold (set once the engine has made them)."""
        with self._cond:
            self._lanes = lanes
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._line)

    @property
    def in_flight(self) -> int:
        """Requests holding a lane now."""
        with self._cond:
            return len(self._held)

    @property
    def busy(self) -> bool:
        """A request holds a lane."""
        with self._cond:
            return bool(self._held)

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed is not None

    def close(self, reason: str = "the server is shutting down") -> None:
        """Refuse the waiting line and every later arrival (503); the holders keep their lanes."""
        with self._cond:
            self._closed = reason
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nobody holds a lane; False if someone still does after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._held:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _refused(self) -> Busy:
        return Busy(
            f"{self._closed}; retry after {self.retry_after_s} s (another instance will answer)", self.retry_after_s
        )

    @contextmanager
    def admit(self) -> Iterator[Admission]:
        """Hold a lane for the ``with`` block; yields an ``Admission`` (the lane, the wait in milliseconds)."""
        start = time.perf_counter()
        lane = self._acquire()
        try:
            yield Admission(lane, (time.perf_counter() - start) * 1000.0)
        finally:
            self._release(lane)

    def _free_lane(self) -> int | None:
        return next((lane for lane in range(self._lanes) if lane not in self._held), None)

    def _take(self) -> int:
        lane = self._free_lane()
        assert lane is not None  # called only once a lane is free
        self._held.add(lane)
        return lane

    def _acquire(self) -> int:
        ticket = object()
        with self._cond:
            if self._closed is not None:
                raise self._refused()
            if not self._line and self._free_lane() is not None:
                return self._take()
            if len(self._line) >= self.max_queue:
                raise Busy(
                    f"the model is busy (all {self._lanes} lane(s) held) and {len(self._line)} request(s) are "
                    f"already waiting; retry after {self.retry_after_s} s or add instances",
                    self.retry_after_s,
                )
            self._line.append(ticket)
            deadline = time.monotonic() + self.timeout_s
            try:
                while self._closed is None and (self._free_lane() is None or self._line[0] is not ticket):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise Busy(
                            f"waited {self.timeout_s:g} s for the model without getting it; "
                            f"retry after {self.retry_after_s} s or add instances",
                            self.retry_after_s,
                        )
                    self._cond.wait(remaining)
                if self._closed is not None:
                    raise self._refused()
            except BaseException:
                self._line.remove(ticket)
                self._cond.notify_all()
                raise
            self._line.popleft()
            self._cond.notify_all()  # the next in line may find another free lane
            return self._take()

    def _release(self, lane: int) -> None:
        with self._cond:
            self._held.discard(lane)
            self._cond.notify_all()
