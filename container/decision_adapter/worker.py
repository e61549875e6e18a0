"""The gunicorn worker: gthread, except that a request is read whole before it gets a thread.

gunicorn's gthread worker hands a connection to a thread as soon as its first bytes arrive,
and the thread then blocks until the headers and body are complete. A client that sends half
a header holds a thread for as long as it likes; a handful of such clients hold all of them,
``/ping`` included, and SageMaker replaces a container whose ``/ping`` stops answering.

This worker reads requests in its main loop instead, without blocking, the way a buffering
proxy in front would (the DLC puts nginx in front of llama-server for the same reason): bytes
are collected until the headers and the announced body are complete, and only then does the
connection go to the thread pool, with everything already in the parser's buffer. A request
not complete within ``DECISION_ADAPTER_READ_TIMEOUT`` (10 s; SageMaker's proxy sends a whole
request in milliseconds) is answered 408 and closed, so a slow client costs a
socket and at most one buffered body, never a thread. Responses are bounded too: a client that
stops reading gets its connection closed after ``SEND_TIMEOUT_S``.

It builds on gthread's internals (``TConn``, its parser's ``unreader``, the poller), so the
adapter pins the gunicorn release it was written for (container/pyproject.toml); the tests in
tests/adapter/security/test_slow_clients.py run it against real sockets.
"""

from __future__ import annotations

import io
import re
import selectors
import socket
import struct
import time
from functools import partial

from gunicorn.workers.gthread import TConn, ThreadWorker

SEND_TIMEOUT_S = 10.0     # per blocked send of a response
MAX_HEADER_BYTES = 65536  # far above any real client; gunicorn's own field limits still apply
CONNECTIONS = 256         # open at once (reading, waiting, kept alive): bounds the buffered bytes

_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]+)[ \t]*(?=\r\n)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:", re.IGNORECASE)
_EXPECT_CONTINUE = re.compile(rb"\r\nexpect:[ \t]*100-continue[ \t]*(?=\r\n)", re.IGNORECASE)
_LAST_CHUNK = b"\r\n0\r\n\r\n"


def _reply_and_close(sock, status: str) -> None:
    """A fixed, tiny answer for a request that never reached the application."""
    body = b'{"error": {"code": "%s", "message": "%s"}}' % (
        status.split(" ", 1)[1].lower().replace(" ", "_").encode(), status.encode())
    head = b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (
        status.encode(), len(body))
    try:
        sock.send(head + body)  # non-blocking; a client that cannot take 150 bytes gets nothing
    except OSError:
        pass


def request_complete(data: bytes | bytearray, max_body: int) -> bool:
    """Whether ``data`` holds a request's headers and its whole body (or enough to refuse it).

    A body announced larger than ``max_body`` counts as complete once the headers are in: the
    application refuses it (413) without reading it. Anything malformed is also handed over as
    it is, for gunicorn's parser to answer 400.
    """
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = bytes(data[:end + 2])  # keep the last CRLF so every header line is followed by one
    if _CHUNKED.search(head):
        # Chunked: complete at the last-chunk marker (a body that merely pauses on those bytes
        # is handed over early and its thread reads the rest, as plain gthread would).
        return data.endswith(_LAST_CHUNK) or len(data) - end - 4 > max_body + 65536
    lengths = _CONTENT_LENGTH.findall(head)
    if len(lengths) != 1:
        return True  # no body, or a framing error for gunicorn to refuse
    length = int(lengths[0])
    return length > max_body or len(data) - end - 4 >= length


class BufferedThreadWorker(ThreadWorker):
    """gthread with requests read whole in the main loop before they take a thread."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reading: dict[TConn, float] = {}  # connection -> deadline
        settings = self.app.settings  # serve.DecisionServer's
        self.max_body = settings.max_body_bytes
        self.read_timeout_s = settings.read_timeout_s

    # gthread hands new and kept-alive connections straight to the pool; read them first.
    def enqueue_req(self, conn):
        if getattr(conn, "read_whole", False):
            conn.read_whole = False  # the next request on a kept-alive connection is read afresh
            return super().enqueue_req(conn)
        leftover = b""
        if conn.parser is not None:  # bytes of a pipelined next request may be buffered already
            leftover = conn.parser.unreader.buf.getvalue()
            conn.parser.unreader.buf = io.BytesIO()
        conn.buffered = bytearray(leftover)
        conn.continued = False
        conn.sock.setblocking(False)
        self.reading[conn] = time.monotonic() + self.read_timeout_s
        if leftover and request_complete(leftover, self.max_body):
            return self._hand_over(conn, registered=False)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn, sock):
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return self._drop(conn)  # closed before the request was complete
                conn.buffered += chunk
                if len(chunk) < 65536:
                    break
        except BlockingIOError:
            pass
        except OSError:
            return self._drop(conn)
        data = conn.buffered
        if data.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES + 4) < 0 and len(data) > MAX_HEADER_BYTES:
            _reply_and_close(sock, "431 Request Header Fields Too Large")
            return self._drop(conn)
        if request_complete(data, self.max_body):
            return self._hand_over(conn)
        if not conn.continued and data.find(b"\r\n\r\n") >= 0 and _EXPECT_CONTINUE.search(data):
            # The client waits for this before sending its body; gunicorn would only send it
            # once the request reaches a thread, which here waits for the body.
            conn.continued = True
            try:
                sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:
                return self._drop(conn)

    def _hand_over(self, conn, registered=True):
        del self.reading[conn]
        if registered:
            self.poller.unregister(conn.sock)
        data = bytes(conn.buffered)
        if conn.continued:  # answered already; gunicorn must not send a second 100
            data = _EXPECT_CONTINUE.sub(b"", data, count=1)
        conn.buffered = None
        conn.read_whole = True
        conn.sock.setblocking(True)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(SEND_TIMEOUT_S), 0))
        conn.data_ready = True
        conn.init()  # creates the parser (once per connection)
        conn.parser.unreader.unread(data)
        self.enqueue_req(conn)

    def _drop(self, conn):
        self.reading.pop(conn, None)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self):
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c, deadline in self.reading.items() if deadline <= now or not self.alive]:
            _reply_and_close(conn.sock, "408 Request Timeout")
            self._drop(conn)
