"""Slow and malformed clients against the served stack: nginx in front of gunicorn and the adapter.

Each of these once kept ``/ping`` from answering, for as long as the client liked, when gunicorn's
threads read requests themselves: a chunked body whose first chunk holds the last-chunk marker, an
oversized body trickled a byte at a time, ``Expect: 100-continue`` written inside a body, a few
hundred connections that never finish, trailers, a request pipelined behind a chunked one. Now
nginx reads every request whole before gunicorn sees it; these tests send them over loopback to
the session's adapter and watch ``/ping`` (200 within 2 s) throughout.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack

import pytest

from tests.support.adapters import fronted_by_nginx, needs_nginx
from tests.support.http_client import call

from .raw_http import PingWatch, Reader, chunk, chunked_head, connect, error_of, exchange, post

pytestmark = [pytest.mark.slow, needs_nginx]

DECISION = {
    "id": "d-1",
    "state": "The parcel never arrived.",
    "question": "Which team?",
    "options": [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}],
}
BODY = json.dumps(DECISION).encode()
MAX_BODY = 1_048_576  # the adapter's default DECISION_ADAPTER_MAX_BODY_BYTES


@pytest.fixture(scope="module")
def stack(adapter):
    assert fronted_by_nginx(adapter), adapter.log_tail()
    return adapter


def _decided(answer, rid: str = "d-1") -> bool:
    status, _, body = answer
    return status == 200 and json.loads(body)["result"]["id"] == rid


def test_a_first_chunk_holding_the_last_chunk_marker_is_read_to_the_real_end(stack):
    with PingWatch(stack.url), connect(stack.port) as sock:
        sock.sendall(chunked_head("/invocations") + chunk(b"0\r\n\r\n"))  # data: the last-chunk marker
        time.sleep(1.0)
        sock.sendall(chunk(b"1") + b"0\r\n\r\n" + post("/invocations", BODY))  # ... and a request behind it
        reader = Reader(sock)
        status, _, body = reader.response()
        # The whole body reached the application: "0\r\n\r\n1" is JSON with extra data on line 3.
        assert status == 400 and "line 3 column 1" in error_of(body)["message"], body
        assert _decided(reader.response())


def test_an_oversized_body_trickled_a_byte_at_a_time_is_refused_at_once(stack):
    with PingWatch(stack.url), ExitStack() as held:
        socks = [held.enter_context(connect(stack.port)) for _ in range(8)]
        for sock in socks:
            sock.sendall(
                b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1)
            )
        started = time.monotonic()
        answers = [Reader(sock).response() for sock in socks]  # before a single body byte
        assert time.monotonic() - started < 2.0
        for status, headers, body in answers:
            assert status == 413 and headers["content-type"] == "application/json"
            error = error_of(body)
            assert error["code"] == "request_entity_too_large" and "DECISION_ADAPTER_MAX_BODY_BYTES" in error["message"]
        for _ in range(20):  # the clients keep trickling; nginx reads and drops it, gunicorn never sees it
            for sock in socks:
                try:
                    sock.send(b"x")
                except OSError:
                    pass
            time.sleep(0.05)
        assert call(stack.url + "/invocations", DECISION, timeout=60)[0] == 200


def test_a_chunked_body_past_the_limit_is_refused_while_it_trickles(stack):
    piece = b" " * 16384
    with PingWatch(stack.url), connect(stack.port) as sock:
        sock.sendall(chunked_head("/invocations"))
        for sent in range(1, MAX_BODY // len(piece) + 8):
            try:
                sock.sendall(chunk(piece))
            except OSError:  # nginx has answered and stopped reading
                break
            time.sleep(0.005)
            if sent * len(piece) > MAX_BODY:
                break
        refused = Reader(sock).response()
        assert refused[0] == 413 and error_of(refused[2])["code"] == "request_entity_too_large"


def test_expect_100_continue_inside_a_body_is_body_not_header(stack):
    body = BODY + b"\r\nExpect: 100-continue\r\n"
    with PingWatch(stack.url), connect(stack.port) as sock:
        sock.sendall(post("/invocations", body) + post("/invocations", BODY))
        reader = Reader(sock)
        status, _, answer = reader.response()
        # All of it arrived (removing the 22 bytes would have left valid JSON and a 200).
        assert status == 400 and "line 2 column 1" in error_of(answer)["message"], answer
        assert _decided(reader.response())  # and the next request on the connection is framed right


def test_a_real_expect_100_continue_gets_one_interim_answer(stack):
    with connect(stack.port) as sock:
        sock.sendall(post("/invocations", BODY, "Expect: 100-continue")[: -len(BODY)])
        reader = Reader(sock)
        assert reader.response(interim=True)[0] == 100
        sock.sendall(BODY)
        assert _decided(reader.response())


def test_300_half_open_connections_leave_ping_and_decisions_answering(stack):
    with ExitStack() as held, PingWatch(stack.url):
        for i in range(300):
            sock = held.enter_context(connect(stack.port))
            if i % 3 == 1:
                sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: adapter\r\nContent-Ty")  # half a header
            elif i % 3 == 2:
                sock.sendall(post("/invocations", BODY)[:-10])  # the body 10 bytes short
        time.sleep(0.5)
        assert call(stack.url + "/invocations", DECISION, timeout=60)[0] == 200


def test_a_malformed_chunked_body_gets_a_json_400_without_a_trace(stack):
    before = stack.log_path.read_text(errors="replace").count("Traceback")
    with PingWatch(stack.url):
        for path, jev in (("/invocations", False), ("/v1/systemone", True)):
            status, headers, body = exchange(stack.port, chunked_head(path) + b"zz\r\n{}\r\n0\r\n\r\n")
            assert status == (422 if jev else 400) and headers["content-type"] == "application/json"
            error = error_of(body, jev=jev)
            assert "chunked" in error.get("msg", error.get("message", ""))
            assert b"Traceback" not in body and b".py" not in body
    assert stack.log_path.read_text(errors="replace").count("Traceback") == before


def test_trailers_and_a_request_pipelined_behind_a_chunked_one_are_answered_in_order(stack):
    second = json.dumps(dict(DECISION, id="d-2")).encode()
    with PingWatch(stack.url), connect(stack.port) as sock:
        sock.sendall(
            chunked_head("/invocations")
            + chunk(BODY[:20])
            + chunk(BODY[20:])
            + b"0\r\nX-Checksum: 1234\r\nX-More: yes\r\n\r\n"
            + post("/invocations", second)
        )
        reader = Reader(sock)
        assert _decided(reader.response(), "d-1") and _decided(reader.response(), "d-2")


def test_a_chunked_body_sent_slowly_and_kept_alive_requests_are_read_whole(stack):
    with connect(stack.port) as sock:
        sock.sendall(chunked_head("/invocations"))
        for part in (BODY[:20], BODY[20:]):
            time.sleep(0.3)
            sock.sendall(chunk(part))
        sock.sendall(b"0\r\n\r\n")
        reader = Reader(sock)
        assert _decided(reader.response())
        sock.sendall(post("/invocations", BODY)[:40])  # the next request on the connection, in pieces
        time.sleep(0.2)
        sock.sendall(post("/invocations", BODY)[40:])
        assert _decided(reader.response())


def test_half_sent_requests_hold_no_thread(stack):
    """Twenty-four unfinished requests (three times the worker's threads): a decision still gets through."""
    with ExitStack() as held, PingWatch(stack.url):
        for i in range(24):
            sock = held.enter_context(connect(stack.port))
            half = b"POST /invocations HTTP/1.1\r\nHost: adapter\r\n" if i % 2 else post("/invocations", BODY)[:-10]
            sock.sendall(half)
        assert call(stack.url + "/invocations", DECISION, timeout=60)[0] == 200
