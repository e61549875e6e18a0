"""Invoke a model endpoint: one client, two transports, the same results.

``EndpointClient.sagemaker(name, region)`` calls ``InvokeEndpoint`` through boto3;
``EndpointClient.local(url)`` posts to ``<url>/invocations`` of a local adapter
(or any server speaking the SageMaker container contract). Both give:

* ``chat(messages)``             -> ``ChatResult`` (OpenAI chat completion, either image)
* ``decide(decision)``           -> ``Decision`` (the decision adapter only)
* ``decide_batch(id, state, qs)`` -> ``list[Decision]``, the state evaluated once

A 503 from the model server (busy, or still loading) is retried a bounded number
of times after its ``Retry-After``; every other failure raises an ``EndpointError``
subclass carrying the HTTP status and the server's error code, message and field.

The client speaks only the documented JSON schemas: it never imports the adapter.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterable, Mapping, Sequence

from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, HTTPClientError, ReadTimeoutError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from .errors import WorkshopError

JSON = "application/json"
READ_TIMEOUT_S = 70.0  # above SageMaker's 60 s invocation limit, so SageMaker's own error arrives first
CONNECT_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 3
# SageMaker hands back the container's body but not its headers, so a 503 that
# came through SageMaker has no Retry-After; wait this long instead.
DEFAULT_RETRY_AFTER_S = 1.0
MAX_RETRY_SLEEP_S = 30.0
# One retry policy, the client's: botocore makes exactly one attempt per call (its standard mode would
# retry 503s and throttling on its own, unseen, under each of our retries), and EndpointClient retries
# busy answers itself, counting every attempt it makes (``Decision.attempts``).
BOTOCORE_TOTAL_ATTEMPTS = 1


# -- errors -------------------------------------------------------------------------


class EndpointError(WorkshopError):
    """An invocation that did not produce a usable answer."""

    hint = ""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 field: str | None = None, endpoint: str | None = None, retry_after: float | None = None,
                 body: str | None = None, log_stream_arn: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.endpoint = endpoint
        self.retry_after = retry_after
        self.body = body
        self.log_stream_arn = log_stream_arn
        self.attempts = 1

    def __str__(self) -> str:
        where = f"{self.endpoint}: " if self.endpoint else ""
        status = " ".join(str(p) for p in (self.status, self.code) if p is not None)
        text = f"{where}{status + ': ' if status else ''}{self.message}"
        if self.field:
            text += f" (field: {self.field})"
        if self.attempts > 1:
            text += f" (gave up after {self.attempts} attempts)"
        if self.hint:
            text += f". {self.hint}"
        if self.log_stream_arn:
            text += f" Container log stream: {self.log_stream_arn}"
        return text


class BadRequest(EndpointError):
    """400, 413, 415 and other 4xx: the body is malformed or of the wrong type or size."""

    hint = "Fix the request body; the field named above is the one at fault"


class UnprocessableRequest(EndpointError):
    """422: well-formed, but values the model cannot use (duplicate ids, too many options, too long)."""

    hint = "Change the values named above; the server never truncates or guesses"


class EndpointNotFound(EndpointError):
    hint = "Check the endpoint name and region, and that the endpoint is InService"


class EndpointBusy(EndpointError):
    """503 (or 429): the model is busy or still loading. Retried before it is raised."""

    hint = "Retry later, raise the client's retries, or add instances to the endpoint"


class EndpointServerError(EndpointError):
    hint = "The server failed on this request; read the endpoint's logs"


class EndpointTimeout(EndpointError):
    hint = ("SageMaker stops an invocation after 60 s: shorten the state, ask fewer questions per "
            "request, or use a faster (GPU) instance")


class EndpointUnreachable(EndpointError):
    hint = "Check the URL or endpoint name, the network, and that the server is running"


class InvalidResponse(EndpointError):
    """A 2xx answer that is not what was asked for (not JSON, wrong shape, someone else's ids)."""

    hint = "Is this endpoint running the decision adapter (the standard image only answers chat)?"


def error_class(status: int | None) -> type[EndpointError]:
    if status in (429, 503):
        return EndpointBusy
    if status == 404:
        return EndpointNotFound
    if status == 422:
        return UnprocessableRequest
    if status is not None and 400 <= status < 500:
        return BadRequest
    return EndpointServerError


def parse_error_body(body: bytes | str | None) -> tuple[str | None, str, str | None]:
    """(code, message, field) from the adapter's ``{"error": {...}}``, or an OpenAI-style error, or text."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else (body or "")
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        code = error.get("code")
        if not isinstance(code, str):  # llama-server: {"code": 400, "type": "invalid_request_error"}
            code = error.get("type")
        return code, str(error.get("message") or text), error.get("field")
    if isinstance(error, str):
        return None, error, None
    return None, text.strip()[:500] or "(empty body)", None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def error_from_response(status: int, body: bytes | str | None, *, endpoint: str,
                        retry_after: str | None = None, log_stream_arn: str | None = None) -> EndpointError:
    code, message, field_ = parse_error_body(body)
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    return error_class(status)(message, status=status, code=code, field=field_, endpoint=endpoint,
                               retry_after=parse_retry_after(retry_after), body=text,
                               log_stream_arn=log_stream_arn)


# -- transports ---------------------------------------------------------------------


class LocalTransport:
    """POST /invocations on a URL with urllib (one timeout covers connect and each read)."""

    def __init__(self, url: str, *, timeout_s: float = READ_TIMEOUT_S):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    @property
    def name(self) -> str:
        return self.url

    def invoke(self, body: bytes) -> bytes:
        request = urllib.request.Request(self.url + "/invocations", data=body, method="POST",
                                         headers={"Content-Type": JSON, "Accept": JSON})
        return self._send(request, self.timeout_s)

    def ping(self, timeout_s: float = CONNECT_TIMEOUT_S) -> bytes:
        return self._send(urllib.request.Request(self.url + "/ping", method="GET"), timeout_s)

    def _send(self, request: urllib.request.Request, timeout_s: float) -> bytes:
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read()
            finally:
                exc.close()
            raise error_from_response(exc.code, body, endpoint=self.name,
                                      retry_after=exc.headers.get("Retry-After")) from None
        except TimeoutError:
            raise EndpointTimeout(f"no answer within {timeout_s:g} s", endpoint=self.name) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise EndpointTimeout(f"no connection within {timeout_s:g} s", endpoint=self.name) from None
            raise EndpointUnreachable(f"cannot connect: {exc.reason}", endpoint=self.name) from None
        except (ConnectionError, http.client.HTTPException) as exc:
            raise EndpointUnreachable(f"the connection failed: {exc!r}", endpoint=self.name) from None


_STATUS_IN_MESSAGE = re.compile(r"error \((\d{3})\) from")


class SageMakerTransport:
    """``InvokeEndpoint`` through a ``sagemaker-runtime`` client."""

    def __init__(self, endpoint_name: str, runtime_client):
        self.endpoint_name = endpoint_name
        self.runtime = runtime_client

    @property
    def name(self) -> str:
        return f"endpoint {self.endpoint_name}"

    def invoke(self, body: bytes) -> bytes:
        try:
            response = self.runtime.invoke_endpoint(EndpointName=self.endpoint_name, Body=body,
                                                    ContentType=JSON, Accept=JSON)
        except ClientError as exc:
            raise self._error(exc) from None
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise EndpointTimeout(str(exc), endpoint=self.name) from None
        except (BotocoreConnectionError, HTTPClientError) as exc:  # refused, reset, DNS, proxy
            raise EndpointUnreachable(str(exc), endpoint=self.name) from None
        return response["Body"].read()

    def ping(self, timeout_s: float = CONNECT_TIMEOUT_S) -> bytes:
        raise NotImplementedError(
            "SageMaker does not let callers reach /ping; it checks health itself. "
            "Ask DescribeEndpoint for the status instead (InService = healthy)")

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
                return cls(message, status=status, code=code, endpoint=self.name,
                           log_stream_arn=response.get("LogStreamArn"))
            return error_from_response(int(original), response.get("OriginalMessage") or message,
                                       endpoint=self.name, log_stream_arn=response.get("LogStreamArn"))
        if code == "ValidationError" and "not found" in message.lower():
            return EndpointNotFound(message, status=status, code=code, endpoint=self.name)
        if code in ("ThrottlingException", "Throttling", "ModelNotReadyException"):
            return EndpointBusy(message, status=status, code=code, endpoint=self.name)
        return error_class(status)(message, status=status, code=code, endpoint=self.name)


# -- results ------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """Probabilities over the caller's option ids, in the order the options were sent.

    Equality looks at id, option ids and probabilities only.
    """

    id: str
    option_ids: tuple[str, ...]
    probabilities: tuple[float, ...]
    timing: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    model: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    client_latency_ms: float = field(default=0.0, compare=False)
    attempts: int = field(default=1, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def top(self) -> str:
        """The most probable option id (the first one on a tie)."""
        return self.option_ids[self._top_index]

    @property
    def top_probability(self) -> float:
        return self.probabilities[self._top_index]

    @property
    def _top_index(self) -> int:
        return max(range(len(self.probabilities)), key=self.probabilities.__getitem__)

    @property
    def server_ms(self) -> float | None:
        """Server-side time for the whole request (for a batch: the whole batch)."""
        return self.timing.get("total_ms")

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.option_ids, self.probabilities))

    @classmethod
    def from_result(cls, result: Mapping, *, timing: Mapping | None = None, model: Mapping | None = None,
                    client_latency_ms: float = 0.0, attempts: int = 1, endpoint: str | None = None) -> Decision:
        try:
            option_ids = tuple(str(i) for i in result["option_ids"])
            probabilities = tuple(float(p) for p in result["probabilities"])
            rid = str(result["id"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidResponse(f"the decision result lacks a usable {exc}", endpoint=endpoint,
                                  body=json.dumps(result)[:2000]) from None
        if len(option_ids) != len(probabilities) or not option_ids:
            raise InvalidResponse(f"{len(option_ids)} option ids but {len(probabilities)} probabilities",
                                  endpoint=endpoint)
        return cls(rid, option_ids, probabilities,
                   timing=dict(timing if timing is not None else result.get("timing") or {}),
                   model=dict(model if model is not None else result.get("model") or {}),
                   client_latency_ms=client_latency_ms, attempts=attempts, raw=result)


@dataclass(frozen=True)
class ChatResult:
    content: str
    finish_reason: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    client_latency_ms: float = field(default=0.0, compare=False)
    attempts: int = field(default=1, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    reasoning: str = field(default="", compare=False, repr=False)  # a reasoning model's reasoning_content


# -- request helpers ----------------------------------------------------------------

OptionsLike = Mapping[str, str] | Sequence["str | tuple[str, str] | Mapping[str, str]"]


def option_list(items: OptionsLike) -> list:
    """Options in the request schema from ``{id: text}``, ``[(id, text)]``, ``[{"id", "text"}]`` or ``[id]``."""
    if isinstance(items, Mapping):
        return [{"id": oid, "text": text} for oid, text in items.items()]
    out = []
    for item in items:
        if isinstance(item, tuple):
            oid, text = item
            out.append({"id": oid, "text": text})
        elif isinstance(item, Mapping):
            out.append(dict(item))
        else:
            out.append(item)
    return out


def question(id: str, question: str, options: OptionsLike, *, temperature: float | None = None) -> dict:
    """One question of a shared-state request."""
    body = {"id": id, "question": question, "options": option_list(options)}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def decision(id: str, state, question: str, options: OptionsLike, *, temperature: float | None = None) -> dict:
    """A single decision request: ``decision("t-1", ticket, "Which team?", {"billing": "Billing", ...})``."""
    body = {"id": id, "state": state, "question": question, "options": option_list(options)}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def _option_ids(items: Iterable) -> tuple[str, ...]:
    return tuple(item if isinstance(item, str) else item.get("id") for item in items)


# -- the client -----------------------------------------------------------------------


class EndpointClient:
    """chat / decide / decide_batch over SageMaker runtime or a local URL."""

    def __init__(self, transport, *, retries: int = DEFAULT_RETRIES, max_retry_sleep_s: float = MAX_RETRY_SLEEP_S,
                 default_retry_after_s: float = DEFAULT_RETRY_AFTER_S,
                 sleep: Callable[[float], None] = time.sleep):
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.transport = transport
        self.retries = retries
        self.max_retry_sleep_s = max_retry_sleep_s
        self.default_retry_after_s = default_retry_after_s
        self._sleep = sleep
        self._jitter = random.Random()

    @classmethod
    def local(cls, url: str, *, timeout_s: float = READ_TIMEOUT_S, **options) -> EndpointClient:
        """A client for a server on a URL (a local adapter process: ``AdapterProcess.url``)."""
        return cls(LocalTransport(url, timeout_s=timeout_s), **options)

    @classmethod
    def sagemaker(cls, endpoint_name: str, region: str | None = None, runtime_client=None, *,
                  read_timeout_s: float = READ_TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                  endpoint_url: str | None = None, **options) -> EndpointClient:
        """A client for a SageMaker endpoint; pass ``runtime_client`` to reuse (or stub) one, or
        ``endpoint_url`` for a VPC endpoint of the SageMaker runtime."""
        if runtime_client is None:
            from . import aws

            config = Config(read_timeout=read_timeout_s, connect_timeout=connect_timeout_s,
                            retries={"mode": "standard", "total_max_attempts": BOTOCORE_TOTAL_ATTEMPTS})
            runtime_client = aws.client("sagemaker-runtime", region, endpoint_url=endpoint_url, config=config)
        return cls(SageMakerTransport(endpoint_name, runtime_client), **options)

    def __repr__(self) -> str:
        return f"EndpointClient({self.transport.name}, retries={self.retries})"

    # -- calls --

    def invoke(self, payload: Mapping) -> tuple[dict, float, int]:
        """Send one JSON body; return (parsed reply, client latency in ms incl. retries, attempts)."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        started = time.perf_counter()
        attempt = 1
        while True:
            try:
                reply = self.transport.invoke(body)
                break
            except EndpointBusy as exc:
                exc.attempts = attempt
                if attempt > self.retries:
                    raise
                self._sleep(self._retry_delay(exc.retry_after))
                attempt += 1
        latency_ms = (time.perf_counter() - started) * 1000.0
        try:
            parsed = json.loads(reply)
        except ValueError:
            raise InvalidResponse("the reply is not JSON", endpoint=self.transport.name,
                                  body=reply[:2000].decode("utf-8", errors="replace")) from None
        if not isinstance(parsed, dict):
            raise InvalidResponse("the reply is not a JSON object", endpoint=self.transport.name)
        return parsed, latency_ms, attempt

    def chat(self, messages: Sequence[Mapping[str, str]] | str, *, max_tokens: int | None = None,
             temperature: float = 0.0, thinking: bool = False, **extra) -> ChatResult:
        """An OpenAI chat completion; a bare string is one user message.

        ``thinking=False`` (the default) asks a reasoning model such as Qwen3.5 to answer directly:
        llama-server hands ``chat_template_kwargs`` to the model's chat template, whose
        ``enable_thinking`` switch would otherwise let the model spend all of ``max_tokens`` in
        ``reasoning_content`` and return empty content. Templates without the switch ignore it,
        and the decision adapter always renders without thinking.
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        payload = {"messages": list(messages), "temperature": temperature,
                   "chat_template_kwargs": {"enable_thinking": thinking}, **extra}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        reply, latency, attempts = self.invoke(payload)
        try:
            choice = reply["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise InvalidResponse("the reply has no choices[0].message.content", endpoint=self.transport.name,
                                  body=json.dumps(reply)[:2000]) from None
        return ChatResult(content=content or "", finish_reason=choice.get("finish_reason"),
                          usage=reply.get("usage") or {}, client_latency_ms=latency, attempts=attempts,
                          raw=reply, reasoning=choice["message"].get("reasoning_content") or "")

    def decide(self, decision: Mapping) -> Decision:
        """One decision: this project's body (e.g. from ``decision(...)``) or the published sample's
        ``{"decision": {"id", "state", "question", "options": [{"id", "description"}]}}``."""
        if "questions" in decision or "decisions" in decision:
            raise TypeError("this is a shared-state request; call decide_batch(id, state, questions) or "
                            "decide_shared(decisions)")
        reply, latency, attempts = self.invoke(decision)
        decision = decision.get("decision", decision)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise InvalidResponse("the reply has no 'result' object", endpoint=self.transport.name,
                                  body=json.dumps(reply)[:2000])
        made = Decision.from_result(result, client_latency_ms=latency, attempts=attempts,
                                    endpoint=self.transport.name)
        self._check_answers(made, decision.get("id"), decision.get("options", ()))
        return made

    def decide_batch(self, id: str, state, questions: Sequence[Mapping], **extra) -> list[Decision]:
        """Several questions on one state; results in question order, ids = question ids."""
        reply, latency, attempts = self.invoke({"id": id, "state": state, "questions": list(questions), **extra})
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(questions):
            raise InvalidResponse(f"expected {len(questions)} results, got "
                                  f"{len(results) if isinstance(results, list) else 'none'}",
                                  endpoint=self.transport.name, body=json.dumps(reply)[:2000])
        timing, model = reply.get("timing") or {}, reply.get("model") or {}
        decisions = []
        for asked, result in zip(questions, results):
            if not isinstance(result, dict):
                raise InvalidResponse("a batch result is not an object", endpoint=self.transport.name)
            made = Decision.from_result(
                result, timing={**timing, "question_eval_ms": result.get("question_eval_ms")}, model=model,
                client_latency_ms=latency, attempts=attempts, endpoint=self.transport.name)
            self._check_answers(made, asked.get("id"), asked.get("options", ()))
            decisions.append(made)
        return decisions

    def decide_shared(self, decisions: Sequence[Mapping]) -> list[Decision]:
        """The published sample's shared-state request, ``{"decisions": [...]}``: every decision carries
        the same state (evaluated once); results in request order."""
        reply, latency, attempts = self.invoke({"decisions": list(decisions)})
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(decisions):
            raise InvalidResponse(f"expected {len(decisions)} results, got "
                                  f"{len(results) if isinstance(results, list) else 'none'}",
                                  endpoint=self.transport.name, body=json.dumps(reply)[:2000])
        timing = reply.get("timing") or {}
        answers = []
        for asked, result in zip(decisions, results):
            if not isinstance(result, dict):
                raise InvalidResponse("a shared result is not an object", endpoint=self.transport.name)
            made = Decision.from_result(result, timing={**timing, "question_eval_ms": result.get("question_eval_ms")},
                                        client_latency_ms=latency, attempts=attempts, endpoint=self.transport.name)
            self._check_answers(made, asked.get("id"), asked.get("options", ()))
            answers.append(made)
        return answers

    def decide_any(self, body: Mapping) -> list[Decision]:
        """Any decision body, this project's (single or ``questions``) or the sample's (``decision`` or
        ``decisions``), e.g. read from a file; one Decision per question, in request order."""
        if "decisions" in body:
            return self.decide_shared(body["decisions"])
        if "questions" in body:
            extra = {k: v for k, v in body.items() if k not in ("id", "state", "questions")}
            return self.decide_batch(body["id"], body["state"], body["questions"], **extra)
        return [self.decide(body)]

    def systemone(self, state, questions: Mapping[str, Mapping], *, model: str | None = "jev-latest", **extra):
        """Jev System One questions (``workshop_lib.systemone``: noul / choice / score) on one state.

        Sent to ``/invocations`` (the adapter tells the shape apart), so it travels through SageMaker's
        InvokeEndpoint unchanged; returns a ``systemone.SystemOneResult`` checked against the questions.
        """
        from . import systemone

        body = systemone.request(state, questions, model=model, **extra)
        reply, latency, attempts = self.invoke(body)
        try:
            return systemone.parse_response(reply, body, client_latency_ms=latency, attempts=attempts)
        except systemone.SystemOneFormatError as exc:
            raise InvalidResponse(str(exc), endpoint=self.transport.name, body=json.dumps(reply)[:2000]) from None

    def ping(self) -> dict:
        """The server's /ping reply (local servers only: SageMaker keeps /ping to itself)."""
        reply = self.transport.ping()
        try:
            return json.loads(reply) if reply.strip() else {}
        except ValueError:
            return {"body": reply.decode("utf-8", errors="replace")}

    # -- internals --

    def _retry_delay(self, retry_after: float | None) -> float:
        base = self.default_retry_after_s if retry_after is None else retry_after
        # A little jitter so clients told "1 s" together do not all come back together.
        return min(self.max_retry_sleep_s, base * (1.0 + 0.25 * self._jitter.random()))

    def _check_answers(self, made: Decision, asked_id, asked_options) -> None:
        """The answer must be to this request: same id, same option ids in the same order."""
        expected = _option_ids(asked_options)
        if made.id != asked_id or made.option_ids != expected:
            raise InvalidResponse(
                f"asked {asked_id!r} with options {list(expected)}, got an answer for {made.id!r} "
                f"with options {list(made.option_ids)}", endpoint=self.transport.name)


__all__ = [
    "BadRequest", "ChatResult", "Decision", "EndpointBusy", "EndpointClient", "EndpointError",
    "EndpointNotFound", "EndpointServerError", "EndpointTimeout", "EndpointUnreachable", "InvalidResponse",
    "LocalTransport", "SageMakerTransport", "UnprocessableRequest", "decision", "error_class",
    "error_from_response", "option_list", "parse_error_body", "parse_retry_after", "question",
]
