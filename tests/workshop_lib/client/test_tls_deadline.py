"""EndpointClient.local over https: the call's one deadline holds on a TLS socket as on a plain one.

A TLS server on loopback (a certificate made for 127.0.0.1 by the test, trusted by the client's context
alone) answers in its own thread, stopped by the fixture. A well-formed answer comes through, so the
timeout below is the deadline's doing, not a broken handshake's.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workshop_lib.client import EndpointClient, EndpointTimeout, EndpointUnreachable, decision

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

DECISION = decision("d-1", "The parcel never arrived.", "Which team?", {"refunds": "Refunds", "shipping": "Shipping"})
GOOD = {"id": "d-1", "option_ids": ["refunds", "shipping"], "probabilities": [0.25, 0.75]}


def answer() -> bytes:
    body = json.dumps({"result": GOOD}).encode()
    head = f"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for IP 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _request_length(data: bytes) -> int:
    """The whole request's length once its head is in: the head and the body its Content-Length gives (read
    in full before answering, or closing with the body unread resets the connection under the answer)."""
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return len(head) + 4


class TLSServer:
    """Accepts one TLS connection at a time on 127.0.0.1, reads the request's head, then sends ``reply``
    after ``first`` bytes at once, one byte every ``every_s`` seconds."""

    def __init__(self, cert: Path, key: Path, reply: bytes, *, first: int, every_s: float):
        self.reply, self.first, self.every_s = reply, first, every_s
        self.stop = threading.Event()
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, name="tls-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                raw.settimeout(5)
                with self._context.wrap_socket(raw, server_side=True) as conn:
                    data = b""
                    while b"\r\n\r\n" not in data or len(data) < _request_length(data):
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    conn.sendall(self.reply[: self.first])
                    for i in range(self.first, len(self.reply)):
                        if self.stop.wait(self.every_s):
                            return
                        conn.sendall(self.reply[i : i + 1])
            except OSError:  # the client hung up (the deadline's doing), or its handshake failed
                pass
            finally:
                raw.close()

    def close(self) -> None:
        self.stop.set()
        self._listener.close()
        self._thread.join(timeout=5)


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[Callable[..., TLSServer]]:
    cert, key = self_signed(tmp_path)
    servers: list[TLSServer] = []

    def start(reply: bytes, *, first: int, every_s: float = 0.0) -> TLSServer:
        server = TLSServer(cert, key, reply, first=first, every_s=every_s)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def trusting(client: EndpointClient, tmp_path: Path) -> EndpointClient:
    """The client's own TLS context, told to trust the test's certificate too."""
    client.transport._tls.load_verify_locations(tmp_path / "cert.pem")
    return client


def test_an_answer_over_tls_comes_through(tls_server, tmp_path):
    reply = answer()
    server = tls_server(reply, first=len(reply))
    made = trusting(EndpointClient.local(server.url, retries=0), tmp_path).decide(DECISION)
    assert made.as_dict() == {"refunds": 0.25, "shipping": 0.75}


def test_an_untrusted_certificate_is_refused(tls_server):
    reply = answer()
    server = tls_server(reply, first=len(reply))
    with pytest.raises(EndpointUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
        EndpointClient.local(server.url, retries=0).decide(DECISION)


def test_a_tls_server_trickling_its_body_is_stopped_at_the_call_deadline(tls_server, tmp_path):
    reply = answer()
    # The head at once, then a byte a second: each read is well inside its own timeout, so only the
    # whole call's deadline, applied to every read of the TLS socket, stops it.
    server = tls_server(reply, first=reply.index(b"\r\n\r\n") + 4, every_s=1.0)
    client = trusting(EndpointClient.local(server.url, timeout_s=2.5, retries=0), tmp_path)
    started = time.monotonic()
    with pytest.raises(EndpointTimeout, match="no complete answer"):
        client.decide(DECISION)
    elapsed = time.monotonic() - started
    assert 2.0 < elapsed < len(reply) / 4, elapsed  # the deadline, not the trickle (a byte a second) ended it
