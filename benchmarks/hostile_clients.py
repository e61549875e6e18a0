"""What runs beside the load: hostile clients holding sockets on the adapter, and ``/ping`` sampled meanwhile."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

from workshop_lib.evaluation.report import percentile


class PingSampler:
    """``GET /ping`` on a fresh connection every ``every_s``: latencies, and the failures (no 200 within 5 s)."""

    def __init__(self, url: str, every_s: float = 0.1):
        self.url, self.every_s = url + "/ping", every_s
        self.latencies_s: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ping-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:
                    reply.read()
                self.latencies_s.append(time.monotonic() - started)
            except OSError:
                self.failed += 1

    def __enter__(self) -> PingSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def figures(self) -> dict:
        pings = self.latencies_s
        return {
            "count": len(pings),
            "failed": self.failed,
            "p50_s": percentile(pings, 50),
            "p95_s": percentile(pings, 95),
            "max_s": max(pings) if pings else None,
        }


class HostileClients:
    """What an attacker on the network would run, bounded: a fixed number of sockets to 127.0.0.1, for as long
    as the ``with`` block lasts, each reopened when the server closes it (at most once a second).

    * slow headers: a request header sent a byte every half second, never finished;
    * trickled bodies: a body announced one byte over the limit, then sent a byte every 0.1 s;
    * half-open: connections that send nothing at all.
    """

    def __init__(
        self,
        port: int,
        *,
        slow_headers: int = 16,
        tricklers: int = 4,
        half_open: int = 200,
        max_body_bytes: int = 1_048_576,
    ):
        self.port = port
        self.groups = {"slow_header": slow_headers, "trickled_body": tricklers, "half_open": half_open}
        self.oversized = (
            b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (max_body_bytes + 1)
        )
        self.counts = {"opened": 0, "closed_by_server": 0, "refused_413": 0, "other_answers": 0, "bytes_sent": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostile-clients", daemon=True)

    def _open(self, kind: str) -> dict | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            return None
        sock.setblocking(False)
        self.counts["opened"] += 1
        conn = {"kind": kind, "sock": sock, "opened": time.monotonic(), "next": time.monotonic(), "answer": b""}
        if kind == "trickled_body":
            self._send(conn, self.oversized)
        elif kind == "slow_header":
            self._send(conn, b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nX-Slow: ")
        return conn

    def _send(self, conn: dict, data: bytes) -> bool:
        try:
            self.counts["bytes_sent"] += conn["sock"].send(data)
            return True
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False

    def _alive(self, conn: dict) -> bool:
        """Read what the server sent; False once it closed the connection."""
        try:
            data = conn["sock"].recv(65536)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not data:
            return False
        conn["answer"] += data
        return True

    def _tick(self, conn: dict, now: float) -> bool:
        if now >= conn["next"]:
            if conn["kind"] == "slow_header":
                conn["next"] = now + 0.5
                if not self._send(conn, b"a"):
                    return False
            elif conn["kind"] == "trickled_body":
                conn["next"] = now + 0.1
                if not self._send(conn, b"x"):
                    return False
        return self._alive(conn)

    def _close(self, conn: dict) -> None:
        answer = conn["answer"]
        if answer.startswith((b"HTTP/1.1 413", b"HTTP/1.0 413")):
            self.counts["refused_413"] += 1
        elif answer:
            self.counts["other_answers"] += 1
        self.counts["closed_by_server"] += 1
        conn["sock"].close()

    def _run(self) -> None:
        conns = [c for kind, n in self.groups.items() for c in (self._open(kind) for _ in range(n)) if c]
        reopen_after: dict[str, float] = {}
        while not self._stop.wait(0.05):
            now = time.monotonic()
            still = []
            for conn in conns:
                if self._tick(conn, now):
                    still.append(conn)
                else:
                    self._close(conn)
                    reopen_after.setdefault(conn["kind"], now + 1.0)
            for kind in [k for k, at in reopen_after.items() if at <= now]:
                del reopen_after[kind]
                missing = self.groups[kind] - sum(c["kind"] == kind for c in still)
                still += [c for c in (self._open(kind) for _ in range(missing)) if c]
            conns = still
        for conn in conns:
            conn["sock"].close()

    def __enter__(self) -> HostileClients:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def figures(self) -> dict:
        return {**self.groups, **self.counts}
