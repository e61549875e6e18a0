"""EndpointClient.local against a hostile server: a raw TCP server on loopback, started by each test
in threads of its own and stopped by a finalizer, that trickles its answer a byte at a time, announces
or streams a body of gigabytes, answers with probabilities no distribution has, redirects, or speaks
another version of the decision wire.

A well-formed answer from the same server is accepted (``test_a_well_formed_answer_is_accepted``), so
each refusal below is the client's doing, not the harness's.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from decision_contract import wire
from workshop_lib.client import (
    MAX_RESPONSE_BYTES,
    EndpointBusy,
    EndpointClient,
    EndpointRedirected,
    EndpointTimeout,
    InvalidDecision,
    ResponseTooLarge,
    WireVersionMismatch,
    decision,
    jev,
    question,
)
from workshop_lib.client import openai_decisions as od

DECISION = decision(
    "d-1", "The parcel never arrived.", "Which team?", {"refunds": "Refunds", "shipping": "Shipping", "sales": "Sales"}
)
GOOD = {"id": "d-1", "option_ids": ["refunds", "shipping", "sales"], "probabilities": [0.2, 0.5, 0.3]}


def http_response(status: int, body: bytes = b"", headers: dict | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} Hostile", "Connection: close", "Content-Type: application/json"]
    headers = {"Content-Length": str(len(body)), **(headers or {})}
    head += [f"{name}: {value}" for name, value in headers.items() if value is not None]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def answer(result: dict) -> bytes:
    # allow_nan: the server may send NaN, which Python's json reads back as a float
    return http_response(200, json.dumps({"result": result}, allow_nan=True).encode())


class HostileServer:
    """Accepts connections on 127.0.0.1, reads each request whole, then lets ``behave`` answer it."""

    def __init__(self, behave):
        self.behave = behave
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads = [threading.Thread(target=self._accept, name="hostile-accept", daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(conn,), name="hostile-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                self.requests.append(_read_request(conn))
                self.behave(conn, self.stop)
            except OSError:  # the client hung up, as it should
                pass

    def close(self) -> None:
        self.stop.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture
def hostile():
    servers: list[HostileServer] = []

    def start(behave) -> HostileServer:
        server = HostileServer(behave)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def sends(data: bytes):
    def behave(conn, stop):
        conn.sendall(data)

    return behave


def trickles(data: bytes, *, first: int, every_s: float):
    """The first ``first`` bytes at once, then one byte every ``every_s`` seconds."""

    def behave(conn, stop):
        conn.sendall(data[:first])
        for i in range(first, len(data)):
            if stop.wait(every_s):
                return
            conn.sendall(data[i : i + 1])

    return behave


def test_a_well_formed_answer_is_accepted(hostile):
    server = hostile(sends(answer(GOOD)))
    made = EndpointClient.local(server.url, retries=0).decide(DECISION)
    assert made.as_dict() == {"refunds": 0.2, "shipping": 0.5, "sales": 0.3}
    assert server.requests[0].startswith(b"POST /invocations HTTP/1.1")


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_server_trickling_its_answer_is_stopped_at_the_call_deadline(hostile, where):
    reply = answer(GOOD)
    first = 0 if where == "headers" else reply.index(b"\r\n\r\n") + 4
    # A byte a second: well inside a per-read timeout of 2.5 s, so only a whole-call deadline stops it
    # (the whole answer would take minutes).
    server = hostile(trickles(reply, first=first, every_s=1.0))
    client = EndpointClient.local(server.url, timeout_s=2.5, retries=0)
    started = time.monotonic()
    with pytest.raises(EndpointTimeout, match="2.5 s") as caught:
        client.decide(DECISION)
    elapsed = time.monotonic() - started
    assert 2.0 < elapsed < 2.5 + 1.0, elapsed
    assert "no complete answer" in str(caught.value)


def test_busy_answers_are_retried_only_while_the_deadline_allows(hostile):
    server = hostile(
        sends(
            http_response(503, b'{"error": {"code": "busy", "message": "busy", "field": null}}', {"Retry-After": "1"})
        )
    )
    client = EndpointClient.local(server.url, timeout_s=2.5, retries=50)
    started = time.monotonic()
    with pytest.raises(EndpointBusy) as caught:
        client.decide(DECISION)
    assert time.monotonic() - started < 2.5 + 0.5
    assert 1 <= caught.value.attempts <= 3 and len(server.requests) == caught.value.attempts


def test_an_announced_body_over_the_cap_is_refused_unread(hostile):
    head = http_response(200, headers={"Content-Length": str(2 * 1024**3)})  # 2 GiB announced, none sent
    server = hostile(sends(head))
    with pytest.raises(
        ResponseTooLarge, match=f"announces {2 * 1024**3} bytes.*max_response_bytes={MAX_RESPONSE_BYTES}"
    ):
        EndpointClient.local(server.url, retries=0).decide(DECISION)


def test_a_streamed_body_over_the_cap_is_refused_once_it_passes_it(hostile):
    cap = 256 * 1024

    def endless(conn, stop):  # chunked, no length: a body that never ends
        conn.sendall(http_response(200, headers={"Content-Length": None, "Transfer-Encoding": "chunked"}))
        chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        while not stop.is_set():
            conn.sendall(chunk)

    server = hostile(endless)
    with pytest.raises(ResponseTooLarge, match=f"longer than {cap} bytes"):
        EndpointClient.local(server.url, retries=0, max_response_bytes=cap).decide(DECISION)
    # the same body under the cap is read whole
    small = hostile(sends(answer(GOOD)))
    assert (
        EndpointClient.local(small.url, retries=0, max_response_bytes=len(json.dumps({"result": GOOD})) + 1)
        .decide(DECISION)
        .top
        == "shipping"
    )


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"probabilities": [float("nan"), 0.5, 0.5]}, "'refunds' is nan, not a finite number"),
        ({"probabilities": [float("inf"), 0.0, 0.0]}, "'refunds' is inf, not a finite number"),
        ({"probabilities": [-0.2, 0.7, 0.5]}, "'refunds' is -0.2, outside \\[0, 1\\]"),
        ({"probabilities": [0.2, 0.5, 0.4]}, "sum to 1.1"),
        ({"probabilities": [0.2, 0.2, 0.2]}, "sum to 0.6"),
        ({"probabilities": ["0.2", 0.5, 0.3]}, "'refunds' is '0.2', not a number"),
        ({"probabilities": [0.5, 0.5]}, "2 probabilities for 3 option ids"),
        ({"option_ids": ["refunds", "shipping"], "probabilities": [0.5, 0.5]}, "lacks the options \\['sales'\\]"),
        ({"option_ids": ["shipping", "refunds", "sales"]}, "not in the order sent"),
        ({"option_ids": ["refunds", "shipping", "other"]}, "has \\['other'\\], which were not sent"),
        ({"option_ids": ["refunds", "refunds", "sales"]}, "lists \\['refunds'\\] more than once"),
        ({"id": "someone-else"}, "got an answer for 'someone-else'"),
    ],
)
def test_unusable_decision_answers_are_refused_naming_the_fault(hostile, change, needle):
    server = hostile(sends(answer({**GOOD, **change})))
    with pytest.raises(InvalidDecision, match=needle):
        EndpointClient.local(server.url, retries=0).decide(DECISION)


def test_a_batch_answer_is_checked_question_by_question(hostile):
    questions = [question("a", "A?", ["yes", "no"]), question("b", "B?", ["x", "y"])]
    reply = {
        "id": "b",
        "results": [
            {"id": "a", "option_ids": ["yes", "no"], "probabilities": [0.5, 0.5]},
            {"id": "b", "option_ids": ["x", "y"], "probabilities": [0.9, 0.3]},
        ],
    }
    server = hostile(sends(http_response(200, json.dumps(reply).encode())))
    with pytest.raises(InvalidDecision, match="answer to 'b'.*sum to 1.2"):
        EndpointClient.local(server.url, retries=0).decide_batch("b", "s", questions)


def test_a_redirect_is_not_followed_and_names_where_it_pointed(hostile):
    elsewhere = hostile(sends(answer(GOOD)))
    server = hostile(sends(http_response(307, headers={"Location": elsewhere.url + "/invocations"})))
    with pytest.raises(EndpointRedirected, match=f"307 and points to '{elsewhere.url}/invocations'") as caught:
        EndpointClient.local(server.url, retries=0).decide(DECISION)
    assert caught.value.status == 307
    assert len(server.requests) == 1 and elsewhere.requests == []  # nothing was sent to the Location


# -- the wire version (decision_contract.wire) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [None, wire.WIRE_VERSION, f"trace-7, {wire.WIRE_VERSION}"],
    ids=["absent", "this-version", "among-other-attributes"],
)
def test_an_answer_of_this_clients_wire_version_is_read(hostile, header):
    server = hostile(sends(http_response(200, json.dumps({"result": GOOD}).encode(), {wire.VERSION_HEADER: header})))
    assert EndpointClient.local(server.url, retries=0).decide(DECISION).top == "shipping"


@pytest.mark.parametrize("ask", ["decide", "decide_batch", "systemone", "openai_decisions"])
def test_an_adapter_of_another_wire_version_is_refused_naming_both(hostile, ask):
    other = "decision-wire/999"
    server = hostile(sends(http_response(200, json.dumps({"result": GOOD}).encode(), {wire.VERSION_HEADER: other})))
    client = EndpointClient.local(server.url, retries=0)
    calls = {
        "decide": lambda: client.decide(DECISION),
        "decide_batch": lambda: client.decide_batch("b", "s", [question("a", "A?", ["yes", "no"])]),
        "systemone": lambda: client.systemone("s", {"q": jev.noul("Is it?")}),
        "openai_decisions": lambda: client.openai_decisions("s", [od.predicate("It is.")]),
    }
    with pytest.raises(WireVersionMismatch) as caught:
        calls[ask]()
    message = str(caught.value)
    assert other in message and wire.WIRE_VERSION in message and "make setup" in message
    assert "build-image" in message  # the way to bring the adapter to the client's version


def test_an_older_adapter_without_the_header_speaks_the_first_version(hostile, monkeypatch):
    """An answer that names no version comes from an adapter older than the header: it is read as the first
    version, which a client of a later version refuses rather than misreads."""
    server = hostile(sends(http_response(200, json.dumps({"result": GOOD}).encode())))
    monkeypatch.setattr(wire, "WIRE_VERSION", "decision-wire/2")
    with pytest.raises(WireVersionMismatch, match=f"speaks {wire.FIRST_VERSION}, this client decision-wire/2"):
        EndpointClient.local(server.url, retries=0).decide(DECISION)


def test_chat_is_not_held_to_the_decision_wire(hostile):
    """llama-server answers chat without the header, and an adapter of any version answers chat the same way."""
    chat = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}
    server = hostile(sends(http_response(200, json.dumps(chat).encode(), {wire.VERSION_HEADER: "decision-wire/999"})))
    assert EndpointClient.local(server.url, retries=0).chat("hello").content == "hi"
