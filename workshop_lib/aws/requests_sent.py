"""The AWS requests a step sent, as a participant reads them: service, operation and the parameters
botocore validated, with secrets masked.

``RequestRecorder.attach(client)`` hooks two of botocore's events on a client: ``before-parameter-build``
keeps the call's own parameters (what the caller passed, as IAM and the API reference name them), and
``before-call``, which botocore emits only once those parameters passed its service model, marks them
sent. A call botocore refused, or one refused before it left (the rehearsal's IAM check), is not
shown. ``recording()`` collects what is sent while it is open; recordings nest.
"""

from __future__ import annotations

import datetime
import html
import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

MASK = "****"
# Parameter names whose values are secrets, wherever they sit (an Environment map's keys included).
SECRET_NAME = re.compile(
    r"secret|passw|token|credential|authoriz|api[_-]?key|private[_-]?key|session[_-]?key", re.IGNORECASE
)
# Name/value pairs (CodeBuild's environmentVariables, Tags): the value is masked when the name is a secret's.
_PAIR_KEYS = (("name", "value"), ("Name", "Value"), ("Key", "Value"))


@dataclass(frozen=True)
class SentRequest:
    service: str  # botocore's service name (``sagemaker``, ``application-autoscaling``)
    operation: str  # the API's operation name (``CreateEndpointConfig``)
    params: dict[str, Any]  # the parameters as validated, secrets masked

    @property
    def title(self) -> str:
        return f"{self.service} {self.operation}"

    def to_json(self) -> str:
        return json.dumps(self.params, indent=2, ensure_ascii=False)


def plain(value: Any, *, mask: bool = False, name: str = "") -> Any:
    """``value`` (a call's parameters) as plain JSON: nested maps and lists kept, bytes and streams shown by
    size, times as ISO text, anything else by its type's name. With ``mask``, as ``masked``."""
    if mask and name and SECRET_NAME.search(name) and not isinstance(value, (Mapping, list, tuple)):
        return MASK
    if isinstance(value, Mapping):
        if mask:
            for key_field, value_field in _PAIR_KEYS:
                if set(value) == {key_field, value_field} and SECRET_NAME.search(str(value[key_field])):
                    return {key_field: value[key_field], value_field: MASK}
        return {str(k): plain(v, mask=mask, name=str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, mask=mask) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if hasattr(value, "getbuffer"):  # botocore wraps an S3 body in a BytesIO before the hook sees it
        return f"<{value.getbuffer().nbytes} bytes>"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return f"<{type(value).__name__}>"


def masked(value: Any, name: str = "") -> Any:
    """``value`` as ``plain`` JSON with every secret's value replaced by ``MASK``: a parameter whose name
    looks like a secret's, a map entry whose key does, a name/value pair whose name does."""
    return plain(value, mask=True, name=name)


class RequestRecorder:
    """Records the requests the attached clients send while a ``recording()`` is open."""

    def __init__(self) -> None:
        self._open: list[list[SentRequest]] = []
        self._pending = threading.local()
        self._attached: set[int] = set()

    def attach(self, client: Any) -> None:
        if id(client) in self._attached:
            return
        self._attached.add(id(client))
        service = client.meta.service_model.service_name

        def built(model: Any, params: Any, **_: Any) -> None:
            self._pending.call = (model.name, masked(params)) if self._open else None

        def validated(model: Any, **_: Any) -> None:
            pending = getattr(self._pending, "call", None)
            self._pending.call = None
            if pending is None or pending[0] != model.name:
                return
            sent = SentRequest(service, *pending)
            for recording in self._open:
                recording.append(sent)

        client.meta.events.register("before-parameter-build", built)
        client.meta.events.register("before-call", validated)

    @contextmanager
    def recording(self) -> Iterator[list[SentRequest]]:
        sent: list[SentRequest] = []
        self._open.append(sent)
        try:
            yield sent
        finally:
            self._open.remove(sent)


def requests_html(requests: Iterable[SentRequest], summary: str = "") -> str:
    """``summary`` as preformatted text, then the requests folded: one ``<details>`` for all of them,
    and inside it one per request with its parameters as JSON."""
    requests = list(requests)
    parts = [f"<pre>{html.escape(summary)}</pre>"] if summary else []
    if requests:
        inner = "".join(
            f"<details><summary><code>{html.escape(r.title)}</code></summary>"
            f"<pre>{html.escape(r.to_json())}</pre></details>"
            for r in requests
        )
        count = f"{len(requests)} AWS request" + ("s" if len(requests) != 1 else "")
        parts.append(
            f"<details><summary>{count} sent (open to read each one)</summary>"
            f'<div style="margin-left:1em">{inner}</div></details>'
        )
    return "".join(parts)


def requests_text(requests: Iterable[SentRequest]) -> str:
    """The requests as plain text, one JSON block each (what the CLI prints with ``--show-requests``)."""
    return "\n".join(f"{r.title}\n{r.to_json()}" for r in requests)


__all__ = ["MASK", "SECRET_NAME", "RequestRecorder", "SentRequest", "masked", "requests_html", "requests_text"]
