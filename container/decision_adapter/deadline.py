"""Cutting off a request that holds the model longer than its time limit.

llama.cpp calls an abort callback between the nodes of every graph it computes
on the CPU. A Python callback would take the GIL some 600 times per forward
pass of even the small model, and wait for it whenever another thread runs
Python, so the callback here is C's own ``strlen`` reading a two-byte flag:
length 0 means carry on, length 1 means stop. A watcher thread writes the flag
when the limit passes; no Python runs inside llama.cpp.

A backend that does not call the callback (GPU backends may not) is stopped at
the engine's next step instead: the engine reads the same flag before every
evaluation.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import llama_context_p


class Deadline:
    """One flag per llama.cpp context, armed for the duration of one request.

    One watcher thread per process trips the flag when the armed limit passes. Starting a
    thread per request (``threading.Timer``) waited for the thread to be scheduled: up to a
    millisecond of every request on a busy two-core machine.
    """

    def __init__(self) -> None:
        self._flag = ctypes.create_string_buffer(2)  # b"" or b"x", NUL-terminated
        self._cond = threading.Condition()
        self._due: float | None = None  # time.monotonic() at which the armed limit passes; None: none armed
        self._watcher_pid: int | None = None  # the process whose watcher runs (a forked child needs its own)
        self._callback: object = None
        self.seconds: float | None = None  # the limit of the request in progress

    def install(self, llama_cpp: ModuleType, ctx: llama_context_p) -> None:
        strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
        self._callback = llama_cpp.ggml_abort_callback(strlen)  # kept referenced while ctx lives
        llama_cpp.llama_set_abort_callback(ctx, self._callback, ctypes.cast(self._flag, ctypes.c_void_p))

    @property
    def expired(self) -> bool:
        return self._flag.value != b""

    @contextmanager
    def limit(self, seconds: float | None) -> Iterator[Deadline]:
        """Trip the flag ``seconds`` from now (never when ``seconds`` is 0 or None)."""
        with self._cond:
            self._flag.value = b""
            self.seconds = seconds or None
            if seconds:
                self._due = time.monotonic() + seconds
                if self._watcher_pid != os.getpid():
                    self._watcher_pid = os.getpid()
                    threading.Thread(target=self._watch, name="request-deadline", daemon=True).start()
                self._cond.notify()
        try:
            yield self
        finally:
            with self._cond:
                self._due = None  # a limit that ended never trips a later request's flag
                self._flag.value = b""

    def _watch(self) -> None:
        with self._cond:
            while True:
                left = None if self._due is None else self._due - time.monotonic()
                if left is not None and left <= 0:
                    self._trip()
                else:
                    self._cond.wait(left)

    def _trip(self) -> None:
        """Stop the request in progress, as when its limit passes."""
        with self._cond:  # reentrant: the watcher calls it holding the lock
            self._flag.value = b"x"
            self._due = None
