"""How ``EndpointClient`` reaches an endpoint: ``LocalTransport`` posts to a local server's
``/invocations`` over HTTP, ``SageMakerTransport`` calls ``InvokeEndpoint`` through boto3. Both
answer with the body as a ``Reply`` (bytes that also carry the wire version the server reported:
``decision_contract.wire``) and keep to one deadline per call (``Deadline``): connecting,
sending, reading and the waits between retries come out of it, and a body is read in chunks up to
a cap (``read_capped``), so a server that trickles or floods its answer cannot hold a call past it.
No redirect is followed."""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from botocore.exceptions import ClientError, ConnectTimeoutError, HTTPClientError, IncompleteReadError, ReadTimeoutError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from decision_contract import wire

from .endpoint_errors import (
    NO_CAPACITY_WAIT_S,
    EndpointBusy,
    EndpointError,
    EndpointNotFound,
    EndpointRedirected,
    EndpointServerError,
    EndpointTimeout,
    EndpointUnreachable,
    NoCapacity,
    ResponseTooLarge,
    error_class,
    error_from_response,
    is_no_capacity,
)

JSON = "application/json"
READ_TIMEOUT_S = 70.0  # above SageMaker's 60 s invocation limit, so SageMaker's own error arrives first
CONNECT_TIMEOUT_S = 10.0
# The adapter's largest answers (a 255-option System One choice, 64 questions on one state) are well
# under 1 MiB; this leaves room for other servers' chat answers while refusing a body of gigabytes.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
# One retry policy, the client's: botocore makes exactly one attempt per call (its standard mode would
# retry 503s and throttling on its own, unseen, under each of our retries), and EndpointClient retries
# busy answers itself, counting every attempt it makes (``Decision.attempts``).
BOTOCORE_TOTAL_ATTEMPTS = 1


class Reply(bytes):
    """An answer's body, and the wire version its server reported in ``wire.VERSION_HEADER`` (None where it
    reported none, or the way the answer came hides the header). Plain bytes otherwise, so a transport
    that wraps another passes it on unchanged."""

    wire_version: str | None

    def __new__(cls, body: bytes, wire_version: str | None = None) -> Reply:
        reply = super().__new__(cls, body)
        reply.wire_version = wire_version
        return reply


class Deadline:
    """The instant (``time.monotonic``) by which a whole call must be done."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def remaining(self) -> float:
        """The time left; TimeoutError once there is none."""
        left = self.left()
        if left <= 0:
            raise TimeoutError(f"the call's {self.seconds:g} s are up")
        return left


class Transport(Protocol):
    """What ``EndpointClient`` asks of a transport (``LocalTransport``, ``SageMakerTransport``, a test's
    stand-in): a name for messages, one invocation within a deadline, and /ping."""

    @property
    def name(self) -> str: ...

    def invoke(self, body: bytes, *, deadline: Deadline | None = None) -> bytes: ...

    def ping(self) -> bytes: ...


class RuntimeClient(Protocol):
    """The one call ``SageMakerTransport`` makes of a boto3 ``sagemaker-runtime`` client (or a stub of it)."""

    def invoke_endpoint(self, **request: Any) -> dict[str, Any]: ...


class _DeadlineIO(socket.socket):
    """Every send and receive gets only the time left until the call's deadline. A socket timeout
    alone starts again with each operation, so a server sending a byte at a time would never trip it.
    Placed before ``ssl.SSLSocket`` in a subclass's bases, its methods wrap the TLS socket's own."""

    deadline: Deadline | None = None

    def _time_left(self) -> None:
        if self.deadline is not None:
            self.settimeout(self.deadline.remaining())

    # The arguments pass through unchanged: plain and TLS sockets name and default them differently.
    def recv(self, *args: Any, **kwargs: Any) -> bytes:
        self._time_left()
        return super().recv(*args, **kwargs)

    def recv_into(self, *args: Any, **kwargs: Any) -> int:
        self._time_left()
        return super().recv_into(*args, **kwargs)

    def send(self, *args: Any, **kwargs: Any) -> int:
        self._time_left()
        return super().send(*args, **kwargs)

    # a plain socket's sendall holds its timeout for the whole send
    def sendall(self, *args: Any, **kwargs: Any) -> None:
        self._time_left()
        super().sendall(*args, **kwargs)


class _DeadlineSocket(_DeadlineIO):
    pass


class _DeadlineSSLSocket(_DeadlineIO, ssl.SSLSocket):
    pass


class _Connection(http.client.HTTPConnection):
    """http.client's connection on a socket that works to one deadline (plain or TLS)."""

    def __init__(self, host: str, port: int, deadline: Deadline, tls: ssl.SSLContext | None):
        super().__init__(host, port, timeout=deadline.remaining())
        self.deadline = deadline
        self.tls = tls

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.deadline.remaining())
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock: socket.socket
        if self.tls is not None:
            # The handshake runs with the time left when it starts, per operation (ssl does it in C).
            raw.settimeout(self.deadline.remaining())
            sock = self.tls.wrap_socket(raw, server_hostname=self.host)  # a _DeadlineSSLSocket: _tls_context's class
        else:
            sock = _DeadlineSocket(fileno=raw.detach())
        if isinstance(sock, _DeadlineIO):
            sock.deadline = self.deadline
        self.sock = sock


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.sslsocket_class = _DeadlineSSLSocket
    return context


def read_capped(
    read: Callable[[int], bytes],
    limit: int,
    *,
    announced: int | None = None,
    endpoint: str | None = None,
    deadline: Deadline | None = None,
) -> bytes:
    """A body read in chunks of at most READ_CHUNK_BYTES through ``read(n)``, refused once it passes
    ``limit`` bytes (at once when its announced length does); the deadline is checked between chunks."""
    if announced is not None and announced > limit:
        raise ResponseTooLarge(
            f"the answer announces {announced} bytes, more than the client reads (max_response_bytes={limit})",
            endpoint=endpoint,
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline is not None:
            deadline.remaining()
        chunk = read(min(READ_CHUNK_BYTES, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(
                f"the answer is longer than {limit} bytes, more than the client reads "
                "(max_response_bytes); it was not read further",
                endpoint=endpoint,
            )
        chunks.append(chunk)


# The header SageMaker passes an InvokeEndpoint's InferenceId to the container in (docs/operate.md).
INFERENCE_ID_HEADER = "X-Amzn-SageMaker-Inference-Id"


def new_inference_id() -> str:
    return str(uuid.uuid4())


class LocalTransport:
    """POST /invocations on an http(s) URL, with one deadline per call for connecting, sending and
    reading together, a cap on the answer's size and no redirects followed. No proxy is used: the
    URL is a local server's (an adapter process, a tunnel's end). ``invoke_path`` posts elsewhere
    (llama-server's ``/v1/chat/completions``, which has no /invocations)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = READ_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        invoke_path: str = "/invocations",
    ):
        if not invoke_path.startswith("/"):
            raise ValueError(f"invoke_path must start with '/', not {invoke_path!r}")
        self.invoke_path = invoke_path
        self.url = url.rstrip("/")
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
        if timeout_s <= 0 or max_response_bytes < 1:
            raise ValueError("timeout_s must be above 0 and max_response_bytes at least 1")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._path = parts.path.rstrip("/")
        self._tls = _tls_context() if parts.scheme == "https" else None
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes

    @property
    def name(self) -> str:
        return self.url

    def invoke(self, body: bytes, *, deadline: Deadline | None = None, inference_id: str | None = None) -> bytes:
        """POST /invocations (``invoke_path``); ``inference_id`` goes in the header SageMaker passes an
        InvokeEndpoint's InferenceId in (the local rehearsal's stand-in for SageMaker sets it)."""
        extra = {INFERENCE_ID_HEADER: inference_id} if inference_id else {}
        return self._send("POST", self.invoke_path, body, deadline or Deadline(self.timeout_s), extra)

    def ping(self, timeout_s: float = CONNECT_TIMEOUT_S) -> bytes:
        return self._send("GET", "/ping", None, Deadline(timeout_s))

    def get(self, path: str, timeout_s: float = CONNECT_TIMEOUT_S) -> bytes:
        return self._send("GET", path, None, Deadline(timeout_s))

    def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        deadline: Deadline,
        extra_headers: dict[str, str] | None = None,
    ) -> bytes:
        headers = {"Accept": JSON, **(extra_headers or {})}
        if body is not None:
            headers["Content-Type"] = JSON
        try:
            connection = _Connection(self._host, self._port, deadline, self._tls)
        except TimeoutError:
            raise EndpointTimeout(f"no time left of the call's {deadline.seconds:g} s", endpoint=self.name) from None
        try:
            try:
                connection.connect()
            except TimeoutError:
                raise EndpointTimeout(f"no connection within {deadline.seconds:g} s", endpoint=self.name) from None
            except OSError as exc:
                raise EndpointUnreachable(f"cannot connect: {exc}", endpoint=self.name) from None
            connection.request(method, self._path + path, body=body, headers=headers)
            response = connection.getresponse()
            if 300 <= response.status < 400:
                location = response.getheader("Location")
                where = f"points to {location[:500]!r}" if location else "names no Location"
                raise EndpointRedirected(
                    f"the server answered {response.status} and {where}; the client follows no redirects",
                    status=response.status,
                    endpoint=self.name,
                )
            data = read_capped(response.read, self.max_response_bytes, announced=response.length, endpoint=self.name)
        except TimeoutError:
            raise EndpointTimeout(
                f"no complete answer within {deadline.seconds:g} s (connecting, sending and reading together)",
                endpoint=self.name,
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise EndpointUnreachable(f"the connection failed: {exc!r}", endpoint=self.name) from None
        finally:
            connection.close()
        if 200 <= response.status < 300:
            return Reply(data, wire.version_in(response.getheader(wire.VERSION_HEADER)))
        raise error_from_response(
            response.status, data, endpoint=self.name, retry_after=response.getheader("Retry-After")
        )


_STATUS_IN_MESSAGE = re.compile(r"error \((\d{3})\) from")


class SageMakerTransport:
    """``InvokeEndpoint`` through a ``sagemaker-runtime`` client.

    What a deadline means here: botocore sends the request and waits for the answer's headers, and
    its config's ``connect_timeout`` and ``read_timeout`` bound connecting and each socket read, not
    the call (a byte every few seconds keeps a read alive). The transport reads the answer's body in
    chunks of at most READ_CHUNK_BYTES, stops once ``max_response_bytes`` is passed (at once when the
    announced length does), and checks the call's deadline before each chunk; ``EndpointClient``
    checks it before each retry. So a call ends at most one ``read_timeout`` past its deadline once
    the headers are in, while the wait for the headers is bounded by SageMaker itself, which ends an
    invocation the container has not answered within 60 s.
    """

    def __init__(
        self,
        endpoint_name: str,
        runtime_client: RuntimeClient,
        *,
        timeout_s: float = READ_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        inference_component: str | None = None,
    ):
        self.endpoint_name = endpoint_name
        self.inference_component = inference_component  # the model on an endpoint hosting inference components
        self.runtime = runtime_client
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes

    @property
    def name(self) -> str:
        return f"endpoint {self.endpoint_name}"

    def invoke(self, body: bytes, *, deadline: Deadline | None = None, inference_id: str | None = None) -> bytes:
        """InvokeEndpoint with an InferenceId (``inference_id``, else a new one): data capture records it, and
        the adapter answers with it as its ``request_id``, so a captured record, the endpoint's log line and
        its metric line share one id. SageMaker hands back the container's ``wire.VERSION_HEADER`` alone of its
        headers, as ``CustomAttributes``."""
        deadline = deadline or Deadline(self.timeout_s)
        try:
            response = self.runtime.invoke_endpoint(
                EndpointName=self.endpoint_name,
                Body=body,
                ContentType=JSON,
                Accept=JSON,
                InferenceId=inference_id or new_inference_id(),
                **({"InferenceComponentName": self.inference_component} if self.inference_component else {}),
            )
            stream = response["Body"]
            announced = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("content-length")
            try:
                body = read_capped(
                    stream.read,
                    self.max_response_bytes,
                    endpoint=self.name,
                    deadline=deadline,
                    announced=int(announced) if announced and announced.isdigit() else None,
                )
                return Reply(body, wire.version_in(response.get("CustomAttributes")))
            finally:
                stream.close()
        except ClientError as exc:
            raise self._error(exc) from None
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise EndpointTimeout(str(exc), endpoint=self.name) from None
        except TimeoutError:
            raise EndpointTimeout(f"no complete answer within {deadline.seconds:g} s", endpoint=self.name) from None
        except (BotocoreConnectionError, HTTPClientError, IncompleteReadError) as exc:  # refused, reset, DNS, proxy
            raise EndpointUnreachable(str(exc), endpoint=self.name) from None

    def ping(self, timeout_s: float = CONNECT_TIMEOUT_S) -> bytes:
        raise NotImplementedError(
            "SageMaker does not let callers reach /ping; it checks health itself. "
            "Ask DescribeEndpoint for the status instead (InService = healthy)"
        )

    def _error(self, exc: ClientError) -> EndpointError:
        response = exc.response
        error = response.get("Error", {})
        code = error.get("Code")
        message = error.get("Message") or str(exc)
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "ModelError":
            # The container answered with an error: SageMaker wraps its status and body
            # (OriginalStatusCode / OriginalMessage, top-level keys of the parsed error).
            original = response.get("OriginalStatusCode")
            if original is None:
                match = _STATUS_IN_MESSAGE.search(message)
                original = int(match.group(1)) if match else None
            if original is None:
                cls = EndpointTimeout if "timed out" in message.lower() else EndpointServerError
                return cls(
                    message, status=status, code=code, endpoint=self.name, log_stream_arn=response.get("LogStreamArn")
                )
            return error_from_response(
                int(original),
                response.get("OriginalMessage") or message,
                endpoint=self.name,
                log_stream_arn=response.get("LogStreamArn"),
            )
        if is_no_capacity(code, message):
            return NoCapacity(message, status=status, code=code, endpoint=self.name, retry_after=NO_CAPACITY_WAIT_S)
        if code == "ValidationError" and "not found" in message.lower():
            return EndpointNotFound(message, status=status, code=code, endpoint=self.name)
        if code in ("ThrottlingException", "Throttling", "ModelNotReadyException"):
            return EndpointBusy(message, status=status, code=code, endpoint=self.name)
        return error_class(status)(message, status=status, code=code, endpoint=self.name)


__all__ = [
    "CONNECT_TIMEOUT_S",
    "MAX_RESPONSE_BYTES",
    "READ_TIMEOUT_S",
    "Deadline",
    "LocalTransport",
    "RuntimeClient",
    "SageMakerTransport",
    "Transport",
    "read_capped",
]
