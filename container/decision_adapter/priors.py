"""The content-free priors, one cache for every context of the model: what the order mode ``prior`` divides
by (per prompt version and option count: readout_letters.py) and what the cloze readout's ``pmi`` subtracts
(per prompt version, question and option text: readout_cloze.py). Scoring is handed this cache; it never
reaches the engine that holds it.

The order priors measured so far are reported in the model info (``order_priors``, ``order_priors_jev``)
through ``report``, a function the cache's owner gives it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

OrderKey = tuple[str, int]  # (prompt version, option count)
ClozeKey = tuple[str, str, str]  # (prompt version, question as rendered, option text)


class PriorCache:
    """An LRU of at most ``size`` entries: (prompt version, question, option text) -> summed log-probability."""

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[ClozeKey, float] = OrderedDict()
        self._lock = threading.Lock()  # one cache for all the model's contexts

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: ClozeKey) -> float | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: ClozeKey, value: float) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


class Priors:
    """The order priors (kept for good: at most one per prompt version and option count) and the cloze LRU."""

    def __init__(self, cloze_size: int, report: Callable[[str, int, np.ndarray], None] = lambda f, n, v: None):
        self.order: dict[OrderKey, np.ndarray] = {}
        self.cloze = PriorCache(cloze_size)
        self.report = report  # (field, option count, prior): model info shows it unless it already does
