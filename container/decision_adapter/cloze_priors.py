"""The cloze readout's content-free priors, for its ``pmi`` normalisation: each option text's summed
log-probability after a cloze prompt whose state reads "N/A" (the same question), kept per
(prompt version, question, option text) in a bounded LRU (``DECISION_ADAPTER_CLOZE_PRIOR_CACHE`` entries).

A request whose cloze questions need a prior the cache lacks scores the missing ones first, in an
evaluation of their own (so it never displaces the request's own prefix), and pays for their tokens
(``measure`` returns them; scoring.py adds them to the request's ``input_tokens``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from decision_contract import names

from .prompt import CLOZE_PROMPT_VERSION, render_json
from .questions import DecisionBatch, Question
from .readout import READOUTS, cloze_text

CONTENT_FREE = "N/A"


class PriorCache:
    """An LRU of at most ``size`` entries: (prompt version, question, option text) -> summed log-probability."""

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()  # one cache for all the model's contexts

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key) -> float | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key, value: float) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def key(question: Question, text: str) -> tuple[str, str, str]:
    return (CLOZE_PROMPT_VERSION, render_json(question.question), text)


def measure(engine, questions: list[Question]) -> tuple[dict[tuple, float], int]:
    """The priors of every option of ``questions`` (key -> value), scoring those the cache lacks now; and the
    tokens the model read for them (0 when all came from the cache)."""
    cache: PriorCache = engine.cloze_priors
    found: dict[tuple, float] = {}
    missing: dict[str, list] = {}  # the question as rendered -> (its question, its options still to score)
    for question in questions:
        for option in question.options:
            k = key(question, cloze_text(option))
            value = cache.get(k)
            if value is not None:
                found[k] = value
            elif k not in found:
                entry = missing.setdefault(k[1], [question, {}])
                entry[1].setdefault(k[2], option)
    if not missing:
        return found, 0
    reader = READOUTS[names.CLOZE]
    items, keys = [], []
    for question, options in missing.values():
        blank = Question(question.id, question.question, tuple(options.values()), loc=question.loc,
                         options_loc=question.options_loc)
        item = reader.item(engine, None, DecisionBatch("prior", CONTENT_FREE, (blank,)), blank,
                           tuple(range(len(blank.options))))
        items.append(item)
        keys.append([key(question, text) for text in options])
    readings, timing = engine.score_items(items)
    for reading, item_keys in zip(readings, keys):
        for k, value in zip(item_keys, reading.scores.option_logits()):
            cache.put(k, value)
            found[k] = value
    return found, int(timing.get("input_tokens", 0))
