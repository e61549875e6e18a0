"""``RoutedTransport``: a local endpoint's transport that follows the process serving it through an update,
as SageMaker's router does (the rehearsal's registry, rehearsal.py, says which process that is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..client.transport import Deadline, LocalTransport


class Registry(Protocol):
    """What the transport reads of a rehearsal (``rehearsal.Rehearsal``)."""

    def endpoint_url(self, name: str) -> str: ...

    def registry_path(self) -> Path: ...

    def read_registry(self) -> dict[str, Any]: ...


class RoutedTransport(LocalTransport):
    """``LocalTransport`` to whichever process serves local endpoint ``name`` now: before each request
    it looks at the registry (its size and time, re-read only when they change) and follows a
    replacement (``start_local_endpoint(..., replace=True)``), as SageMaker's router follows an update."""

    def __init__(self, local: Registry, name: str, **options: Any):
        self._local, self._endpoint, self._stamp, self._options = local, name, None, options
        super().__init__(local.endpoint_url(name), **options)
        self._stamp = self._registry_stamp()

    def _registry_stamp(self) -> tuple[int, int, int] | None:
        try:
            stat = self._local.registry_path().stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size, stat.st_ino

    def _follow(self) -> None:
        stamp = self._registry_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        entry = self._local.read_registry()["endpoints"].get(self._endpoint)
        if entry and entry["url"].rstrip("/") != self.url:
            LocalTransport.__init__(self, entry["url"], **self._options)

    def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        deadline: Deadline,
        extra_headers: dict[str, str] | None = None,
    ) -> bytes:
        self._follow()
        return super()._send(method, path, body, deadline, extra_headers)
