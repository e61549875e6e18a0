"""Cutting off a request that holds the model longer than its time limit.

llama.cpp calls an abort callback between the nodes of every graph it computes
on the CPU. A Python callback would take the GIL some 600 times per forward
pass of even the small model, and wait for it whenever another thread runs
Python, so the callback here is C's own ``strlen`` reading a two-byte flag:
length 0 means carry on, length 1 means stop. A timer thread writes the flag
when the limit passes; no Python runs inside llama.cpp.

A backend that does not call the callback (GPU backends may not) is stopped at
the engine's next step instead: the engine reads the same flag before every
evaluation.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager


class Deadline:
    """One flag per llama.cpp context, armed for the duration of one request."""

    def __init__(self):
        self._flag = ctypes.create_string_buffer(2)  # b"" or b"x", NUL-terminated
        self._lock = threading.Lock()
        self._generation = 0  # a timer from an earlier request must not trip a later one
        self._callback = None
        self.seconds: float | None = None  # the limit of the request in progress

    def install(self, llama_cpp, ctx) -> None:
        strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
        self._callback = llama_cpp.ggml_abort_callback(strlen)  # kept referenced while ctx lives
        llama_cpp.llama_set_abort_callback(ctx, self._callback, ctypes.cast(self._flag, ctypes.c_void_p))

    @property
    def expired(self) -> bool:
        return self._flag.value != b""

    @contextmanager
    def limit(self, seconds: float | None):
        """Trip the flag ``seconds`` from now (never when ``seconds`` is 0 or None)."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            self._flag.value = b""
            self.seconds = seconds or None
        timer = None
        if seconds:
            timer = threading.Timer(seconds, self._trip, args=(generation,))
            timer.daemon = True
            timer.start()
        try:
            yield self
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._generation += 1
                self._flag.value = b""

    def _trip(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._flag.value = b"x"
