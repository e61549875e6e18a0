"""Admission to the one llama.cpp context: one holder, a short bounded line, then 503.

A llama.cpp context holds one KV cache; two requests evaluating on it at once
would read each other's logits. So exactly one request holds the context, at
most ``max_queue`` wait for it (each at most ``timeout_s``), and everyone else is
told to come back later. Waiters are served first come, first served.

At shutdown (SIGTERM) the gate is closed: everyone waiting, and anyone who arrives
later, is refused at once with 503 and ``Retry-After`` so that SageMaker can send
them to another instance; the request holding the context carries on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager

from .errors import Busy


class Gate:
    def __init__(self, max_queue: int, timeout_s: float, retry_after_s: int = 1):
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._cond = threading.Condition()
        self._held = False
        self._closed: str | None = None  # why the gate refuses everyone (shutting down)
        self._line: deque[object] = deque()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._line)

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._held

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed is not None

    def close(self, reason: str = "the server is shutting down") -> None:
        """Refuse the waiting line and every later arrival (503); the holder keeps the context."""
        with self._cond:
            self._closed = reason
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nobody holds the context; False if someone still does after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._held:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _refused(self) -> Busy:
        return Busy(f"{self._closed}; retry after {self.retry_after_s} s (another instance will answer)",
                    self.retry_after_s)

    @contextmanager
    def admit(self):
        """Hold the context for the ``with`` block; yields the wait in milliseconds."""
        start = time.perf_counter()
        self._acquire()
        try:
            yield (time.perf_counter() - start) * 1000.0
        finally:
            self._release()

    def _acquire(self) -> None:
        ticket = object()
        with self._cond:
            if self._closed is not None:
                raise self._refused()
            if not self._held and not self._line:
                self._held = True
                return
            if len(self._line) >= self.max_queue:
                raise Busy(
                    f"the model is busy and {len(self._line)} request(s) are already waiting; "
                    f"retry after {self.retry_after_s} s or add instances",
                    self.retry_after_s,
                )
            self._line.append(ticket)
            deadline = time.monotonic() + self.timeout_s
            try:
                while self._closed is None and (self._held or self._line[0] is not ticket):
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
            self._held = True

    def _release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()
