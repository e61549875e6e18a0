"""Request bodies of this project's decision schema, built from the caller's options in any of the shapes
they come in (``option_list``), for ``EndpointClient.decide`` and ``decide_batch``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

OptionsLike = Mapping[str, str] | Sequence["str | tuple[str, str] | Mapping[str, str]"]


def option_list(items: OptionsLike) -> list[str | dict[str, str]]:
    """Options in the request schema from ``{id: text}``, ``[(id, text)]``, ``[{"id", "text"}]`` or ``[id]``."""
    if isinstance(items, Mapping):
        return [{"id": oid, "text": text} for oid, text in items.items()]
    out: list[str | dict[str, str]] = []
    for item in items:
        if isinstance(item, tuple):
            oid, text = item
            out.append({"id": oid, "text": text})
        elif isinstance(item, Mapping):
            out.append(dict(item))
        else:
            out.append(item)
    return out


def question(id: str, question: str, options: OptionsLike, *, temperature: float | None = None) -> dict[str, Any]:
    """One question of a shared-state request."""
    body: dict[str, Any] = {"id": id, "question": question, "options": option_list(options)}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def decision(
    id: str, state: object, question: str, options: OptionsLike, *, temperature: float | None = None
) -> dict[str, Any]:
    """A single decision request: ``decision("t-1", ticket, "Which team?", {"billing": "Billing", ...})``."""
    body: dict[str, Any] = {"id": id, "state": state, "question": question, "options": option_list(options)}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def option_ids(items: Iterable[Any]) -> tuple[str, ...]:
    return tuple(item if isinstance(item, str) else item.get("id") for item in items)
