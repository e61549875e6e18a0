"""A bounded store of recent llama.cpp sequence states, for requests that repeat an earlier state.

Opt-in (``DECISION_ADAPTER_STATE_CACHE_MIB``, with ``DECISION_ADAPTER_CROSS_REQUEST_REUSE=on``): it keeps
what earlier callers sent, so how fast a request is answered tells its caller whether someone sent the
same state before. Only for endpoints that serve a single tenant.

Each entry is the token sequence that was evaluated and the state llama.cpp saved right after it (the
whole sequence, and in ``restore`` mode also its recurrent part alone); an entry for a whole prompt also
keeps the last position's logits, so the same prompt again is read without evaluating anything. The byte
bound counts what is kept; the least recently used entries go first, and an entry larger than the bound
is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class CachedState:
    tokens: tuple[int, ...]
    state: bytearray  # the whole sequence after ``tokens`` (llama_state_seq_get_data)
    partial: bytearray | None = None  # restore mode: its recurrent part alone, for rewinds between questions
    logits: npt.NDArray[np.float32] | None = None  # a whole prompt: the last position's logits after ``tokens``

    @property
    def size(self) -> int:
        return (
            len(self.state)
            + (len(self.partial) if self.partial is not None else 0)
            + (self.logits.nbytes if self.logits is not None else 0)
        )


def _shared(a: tuple[int, ...], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(differ[0]) if differ.size else n


class StateCache:
    """Least-recently-used sequence states, at most ``max_bytes`` of them; one cache for all the model's
    contexts (a sequence state loads into any of them), so each call holds a lock."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[int, ...], CachedState] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, tokens: Sequence[int]) -> bool:
        return tuple(tokens) in self._entries

    def get(self, tokens: Sequence[int]) -> CachedState | None:
        """The entry for exactly these tokens (now the most recent), or None."""
        with self._lock:
            return self._get(tokens)

    def _get(self, tokens: Sequence[int]) -> CachedState | None:
        entry = self._entries.get(tuple(tokens))
        if entry is not None:
            self._entries.move_to_end(entry.tokens)
        return entry

    def longest(self, tokens: Sequence[int], *, more_than: int = 0) -> tuple[CachedState, int] | None:
        """The entry sharing the longest token prefix with ``tokens``, if longer than ``more_than``, and that
        length (the entry becomes the most recent)."""
        with self._lock:
            return self._longest(tokens, more_than)

    def _longest(self, tokens: Sequence[int], more_than: int) -> tuple[CachedState, int] | None:
        best, best_len = None, more_than
        for entry in self._entries.values():
            if len(entry.tokens) <= best_len:
                continue
            n = _shared(entry.tokens, tokens)
            if n > best_len:
                best, best_len = entry, n
        if best is None:
            return None
        self._entries.move_to_end(best.tokens)
        return best, best_len

    def put(self, entry: CachedState) -> bool:
        """Keep ``entry`` as the most recent, dropping the least recent ones beyond the bound; False (and
        nothing kept) when it alone is larger than the bound."""
        with self._lock:
            return self._put(entry)

    def _put(self, entry: CachedState) -> bool:
        old = self._entries.pop(entry.tokens, None)
        if old is not None:
            self.bytes -= old.size
        if entry.size > self.max_bytes:
            return False
        while self._entries and self.bytes + entry.size > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= dropped.size
        self._entries[entry.tokens] = entry
        self.bytes += entry.size
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0
