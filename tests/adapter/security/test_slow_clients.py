"""Slow clients: requests are read whole before they take one of the worker's threads (worker.py).

With plain gthread, eight connections that each sent half a header held all seven threads and
``/ping`` stopped answering. These tests open such connections against the real adapter over
loopback, then check that ``/ping`` and a decision are still answered, that an unfinished
request is closed with 408 at the read deadline, and that the buffering keeps HTTP itself
intact (keep-alive, pipelining, ``Expect: 100-continue``, chunked bodies, oversized bodies).
"""

from __future__ import annotations

import json
import socket
import time
from contextlib import ExitStack

import pytest

from decision_adapter.worker import request_complete
from tests.support.http_client import call

DECISION = {"id": "d-1", "state": "The parcel never arrived.", "question": "Which team?",
            "options": [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}]}


def _post(path: str, body: bytes, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: adapter", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _connect(server, stack: ExitStack) -> socket.socket:
    sock = stack.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=30))
    return sock


def _exchange(server, raw: bytes) -> tuple[int, bytes, bytes]:
    """Send ``raw`` on a fresh connection and read the one answer."""
    with ExitStack() as stack:
        sock = _connect(server, stack)
        sock.sendall(raw)
        return _read_response(sock)


def _read_response(sock: socket.socket) -> tuple[int, bytes, bytes]:
    """One HTTP/1.1 response with a Content-Length; returns (status, head, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if head.startswith(b"HTTP/1.1 100"):
        return _read_response_from(sock, rest)
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    return int(head.split()[1]), head, rest[:length]


def _read_response_from(sock, already: bytes):
    class Prefixed:
        def __init__(self):
            self.pending = already

        def recv(self, n):
            if self.pending:
                out, self.pending = self.pending[:n], self.pending[n:]
                return out
            return sock.recv(n)
    return _read_response(Prefixed())


# -- the completeness rule, on bytes ------------------------------------------------------------

@pytest.mark.parametrize("data, complete", [
    (b"GET /ping HTTP/1.1\r\nHost: a\r\n", False),                                  # header unfinished
    (b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n", True),                               # no body
    (_post("/invocations", b"{}")[:-1], False),                                     # body one byte short
    (_post("/invocations", b"{}"), True),
    (b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", True),                 # over the limit: refuse now
    (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", True),   # framing error: gunicorn's 400
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n", False),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", True),
])
def test_a_request_is_complete_when_its_announced_body_is_in(data, complete):
    assert request_complete(data, max_body=1_048_576) is complete


# -- over real sockets --------------------------------------------------------------------------


@pytest.mark.slow
def test_half_sent_requests_hold_no_thread_ping_and_decisions_still_answer(adapter):
    with ExitStack() as stack:
        for i in range(24):  # three times the worker's threads
            sock = _connect(adapter, stack)
            if i % 2:
                sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Ty")  # half a header
            else:
                sock.sendall(_post("/invocations", json.dumps(DECISION).encode())[:-10])  # body short by 10
        time.sleep(0.5)  # let the worker see them all
        status, _, ping = call(adapter.url + "/ping", timeout=5)
        assert status == 200 and ping["status"] == "ready"
        status, _, reply = call(adapter.url + "/invocations", DECISION, timeout=60)
        assert status == 200 and reply["result"]["id"] == "d-1"


@pytest.mark.slow
def test_an_unfinished_request_is_answered_408_at_the_read_deadline(model_dir, start_adapter):
    server = start_adapter(model_dir, DECISION_ADAPTER_READ_TIMEOUT="1", SM_LLAMA_CPP_CTX_SIZE="2048")
    with ExitStack() as stack:
        sock = _connect(server, stack)
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: adapter\r\n")
        for _ in range(3):  # a byte now and then does not extend the deadline
            time.sleep(0.3)
            sock.sendall(b"X")
        status, head, body = _read_response(sock)
        assert status == 408 and b"Connection: close" in head and json.loads(body)["error"]["code"] == "request_timeout"
        assert sock.recv(1) == b""  # and closed
    assert call(server.url + "/ping", timeout=5)[0] == 200


@pytest.mark.slow
def test_keep_alive_and_pipelined_requests_are_each_answered_in_order(adapter):
    first = _post("/invocations", json.dumps(DECISION).encode())
    second = _post("/invocations", json.dumps(dict(DECISION, id="d-2")).encode())
    with ExitStack() as stack:
        sock = _connect(adapter, stack)
        sock.sendall(first)
        status, _, body = _read_response(sock)
        assert status == 200 and json.loads(body)["result"]["id"] == "d-1"
        sock.sendall(first[:40])  # the next request on the same connection, in pieces
        time.sleep(0.2)
        sock.sendall(first[40:] + second)  # ... with a third one right behind it
        answers = [_read_response(sock) for _ in range(2)]
        assert [json.loads(body)["result"]["id"] for _, _, body in answers] == ["d-1", "d-2"]


@pytest.mark.slow
def test_expect_100_continue_gets_one_interim_answer_before_the_body(adapter):
    body = json.dumps(DECISION).encode()
    with ExitStack() as stack:
        sock = _connect(adapter, stack)
        sock.sendall(_post("/invocations", body, "Expect: 100-continue")[:-len(body)])
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        status, head, answer = _read_response(sock)
        assert status == 200 and json.loads(answer)["result"]["id"] == "d-1"
        assert b"100 Continue" not in head and b"100 Continue" not in answer


@pytest.mark.slow
def test_a_chunked_body_sent_slowly_is_read_whole(adapter):
    body = json.dumps(DECISION).encode()
    chunks = [body[:20], body[20:]]
    with ExitStack() as stack:
        sock = _connect(adapter, stack)
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        for chunk in chunks:
            time.sleep(0.2)
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        sock.sendall(b"0\r\n\r\n")
        status, _, answer = _read_response(sock)
        assert status == 200 and json.loads(answer)["result"]["id"] == "d-1"


@pytest.mark.slow
def test_an_oversized_announced_body_is_refused_without_waiting_for_it(adapter):
    status, _, answer = _exchange(adapter, b"POST /invocations HTTP/1.1\r\nHost: adapter\r\n"
                                           b"Content-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{")
    assert status == 413 and json.loads(answer)["error"]["code"] == "request_entity_too_large"


@pytest.mark.slow
def test_a_header_block_beyond_64_kib_is_refused_431(adapter):
    status, _, _ = _exchange(adapter, b"GET /ping HTTP/1.1\r\nHost: adapter\r\n" + b"X-Pad: " + b"p" * 70_000 + b"\r\n")
    assert status == 431
