"""HTTP/1.1 by hand over loopback sockets, for clients no library would be: slow, early, malformed.

``PingWatch`` asks ``/ping`` on fresh connections every 0.2 s while a test misbehaves, and holds
every answer to SageMaker's contract (200 within 2 s).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

PING_LIMIT_S = 2.0  # SageMaker replaces a container whose /ping takes longer


def connect(port: int, timeout: float = 30.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def post(path: str, body: bytes, *extra: str, content_type: str = "application/json") -> bytes:
    head = [
        f"POST {path} HTTP/1.1",
        "Host: adapter",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked_head(path: str, *extra: str) -> bytes:
    head = [
        f"POST {path} HTTP/1.1",
        "Host: adapter",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Reader:
    """Responses read one after another from one connection (bytes past one answer are kept)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.pending = b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        assert data, f"connection closed; unread: {self.pending[:200]!r}"
        self.pending += data

    def response(self, interim: bool = False) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body); 1xx answers are skipped unless ``interim``."""
        while True:
            while b"\r\n\r\n" not in self.pending:
                self._more()
            head, _, self.pending = self.pending.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {
                name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])
            }
            if 100 <= status < 200:
                if interim:
                    return status, headers, b""
                continue
            length = int(headers.get("content-length", "0"))
            while len(self.pending) < length:
                self._more()
            body, self.pending = self.pending[:length], self.pending[length:]
            return status, headers, body


def exchange(port: int, raw: bytes, timeout: float = 60.0) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` on a fresh connection and read one answer."""
    with connect(port, timeout) as sock:
        sock.sendall(raw)
        return Reader(sock).response()


def closed_by_peer(sock: socket.socket, within_s: float) -> float | None:
    """Seconds until the server closed (or reset) the connection, None if it was still open."""
    start = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - start < within_s:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    return None


def error_of(body: bytes, jev: bool = False) -> dict:
    """The error in one of the adapter's shapes: {"error": {"code", "message"}} or Jev's {"detail": ...}."""
    reply = json.loads(body)
    if jev:
        assert set(reply) - {"request_id"} == {"detail"}, reply  # nginx's own refusals carry no id
        return reply["detail"][0] if isinstance(reply["detail"], list) else reply["detail"]
    error = reply["error"]
    assert isinstance(error, dict) and error["code"] and error["message"], reply
    return error


class PingWatch:
    """``/ping`` asked every ``every_s`` on a fresh connection for as long as the ``with`` block lasts."""

    def __init__(self, url: str, every_s: float = 0.2):
        self.url = url + "/ping"
        self.every_s = every_s
        self.answers: list[tuple[int | None, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ping-watch", daemon=True)

    def _ask(self) -> tuple[int | None, float]:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=PING_LIMIT_S + 1) as response:
                response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = None
        return status, time.monotonic() - start

    def _run(self) -> None:
        while not self._stop.is_set():
            self.answers.append(self._ask())
            self._stop.wait(self.every_s)

    def __enter__(self) -> PingWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.answers.append(self._ask())  # and once more at the end, however short the block
        if exc[0] is None:
            self.check()

    def check(self) -> None:
        late = [
            (status, round(seconds, 2)) for status, seconds in self.answers if status != 200 or seconds > PING_LIMIT_S
        ]
        assert not late, f"/ping failed or took over {PING_LIMIT_S:g} s: {late} of {len(self.answers)}"
