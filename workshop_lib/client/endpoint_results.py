"""What an endpoint's answers become: a ``Decision`` (probabilities over the caller's option ids, checked by
the rule the adapter writes them to, ``decision_contract.wire``) and a ``ChatResult``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from decision_contract import wire

from .endpoint_errors import InvalidDecision, InvalidResponse


@dataclass(frozen=True)
class Decision:
    """Probabilities over the caller's option ids, in the order the options were sent.

    Equality looks at id, option ids and probabilities only.
    """

    id: str
    option_ids: tuple[str, ...]
    probabilities: tuple[float, ...]
    timing: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    model: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    client_latency_ms: float = field(default=0.0, compare=False)
    attempts: int = field(default=1, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def top(self) -> str:
        """The most probable option id (the first one on a tie)."""
        return self.option_ids[self._top_index]

    @property
    def top_probability(self) -> float:
        return self.probabilities[self._top_index]

    @property
    def _top_index(self) -> int:
        return max(range(len(self.probabilities)), key=self.probabilities.__getitem__)

    @property
    def server_ms(self) -> float | None:
        """Server-side time for the whole request (for a batch: the whole batch)."""
        return self.timing.get("total_ms")

    @property
    def readout(self) -> str | None:
        """The readout that answered (``wire.readout_of``: letters where the answer names none, as this version's
        letters answers do)."""
        return wire.readout_of(self.raw)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.option_ids, self.probabilities))

    @classmethod
    def from_result(
        cls,
        result: Mapping[str, Any],
        *,
        timing: Mapping[str, Any] | None = None,
        model: Mapping[str, Any] | None = None,
        client_latency_ms: float = 0.0,
        attempts: int = 1,
        endpoint: str | None = None,
    ) -> Decision:
        try:
            option_ids = tuple(str(i) for i in result[wire.OPTION_IDS])
            probabilities = tuple(result[wire.PROBABILITIES])
            rid = str(result[wire.ID])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidResponse(
                f"the decision result lacks a usable {exc}", endpoint=endpoint, body=json.dumps(result)[:2000]
            ) from None
        try:
            wire.readout_of(result)
        except wire.WireError as exc:
            raise InvalidDecision(
                f"the answer to {rid!r} is unusable: {exc}", endpoint=endpoint, body=json.dumps(result)[:2000]
            ) from None
        problem = wire.distribution_problem(option_ids, probabilities)
        if problem:
            raise InvalidDecision(
                f"the answer to {rid!r} is unusable: {problem}", endpoint=endpoint, body=json.dumps(result)[:2000]
            )
        probabilities = tuple(float(p) for p in probabilities)
        return cls(
            rid,
            option_ids,
            probabilities,
            timing=dict(timing if timing is not None else result.get("timing") or {}),
            model=dict(model if model is not None else result.get("model") or {}),
            client_latency_ms=client_latency_ms,
            attempts=attempts,
            raw=result,
        )


@dataclass(frozen=True)
class ChatResult:
    content: str
    finish_reason: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    client_latency_ms: float = field(default=0.0, compare=False)
    attempts: int = field(default=1, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    reasoning: str = field(default="", compare=False, repr=False)  # a reasoning model's reasoning_content
