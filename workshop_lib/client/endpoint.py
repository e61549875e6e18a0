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

The client trusts the server only as far as it checks it:

* one deadline per call (``timeout_s``): connecting, sending, reading and the waits
  between retries all come out of it, so a server that trickles its answer a byte at
  a time cannot hold a call past it (the SageMaker transport can only approach this:
  see ``SageMakerTransport``);
* answers are read in chunks up to ``max_response_bytes`` (32 MiB unless told, far above
  the largest answer the adapter gives), a bigger one is refused (``ResponseTooLarge``);
* no redirect is followed: a 3xx is an error naming where it pointed (``EndpointRedirected``);
* every decision answer is checked before it is returned, by the rule the adapter writes
  it to (``decision_contract.wire``): the request's id, exactly the option ids sent and in
  their order, one finite probability in [0, 1] per option, summing to 1 within
  ``wire.SUM_TOLERANCE`` (else ``InvalidDecision``), from an adapter speaking this client's
  wire version (else ``WireVersionMismatch``, naming both).

The client speaks only the documented JSON schemas: it never imports the adapter.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from botocore.config import Config

# The errors the client raises, importable from here as from endpoint_errors.
import workshop_lib.client.jev as jev
import workshop_lib.client.openai_decisions as openai_decisions
from decision_contract import names, wire

from ..aws import calls
from .endpoint_errors import (
    BadRequest,
    EndpointBusy,
    EndpointError,
    EndpointNotFound,
    EndpointRedirected,
    EndpointServerError,
    EndpointTimeout,
    EndpointUnreachable,
    InvalidDecision,
    InvalidResponse,
    ResponseTooLarge,
    UnprocessableRequest,
    WireVersionMismatch,
)
from .endpoint_results import ChatResult as ChatResult
from .endpoint_results import Decision as Decision
from .request_bodies import OptionsLike as OptionsLike
from .request_bodies import decision as decision
from .request_bodies import option_ids
from .request_bodies import option_list as option_list
from .request_bodies import question as question
from .transport import (
    BOTOCORE_TOTAL_ATTEMPTS,
    CONNECT_TIMEOUT_S,
    MAX_RESPONSE_BYTES,
    READ_TIMEOUT_S,
    Deadline,
    LocalTransport,
    RuntimeClient,
    SageMakerTransport,
    Transport,
)

DEFAULT_RETRIES = 3
# SageMaker hands back the container's body but not its headers, so a 503 that
# came through SageMaker has no Retry-After; wait this long instead.
DEFAULT_RETRY_AFTER_S = 1.0
MAX_RETRY_SLEEP_S = 30.0


# -- the client -----------------------------------------------------------------------


class EndpointClient:
    """chat / decide / decide_batch over SageMaker runtime or a local URL."""

    def __init__(
        self,
        transport: Transport,
        *,
        retries: int = DEFAULT_RETRIES,
        max_retry_sleep_s: float = MAX_RETRY_SLEEP_S,
        default_retry_after_s: float = DEFAULT_RETRY_AFTER_S,
        sleep: Callable[[float], None] = time.sleep,
        readout: str | None = None,
        normalize: str | None = None,
    ) -> None:
        """``readout`` (letters or cloze) and ``normalize`` (cloze: pmi, sum or mean) go with every request in
        this project's schema and System One's (``x_readout``, ``x_normalize``) that does not set its own;
        None leaves them to the endpoint (DECISION_ADAPTER_READOUT). The sample's format has no field for them."""
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        if readout is not None and readout not in names.READOUTS:
            raise ValueError(f"readout must be one of {', '.join(names.READOUTS)}, not {readout!r}")
        if normalize is not None and normalize not in names.NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {', '.join(names.NORMALIZATIONS)}, not {normalize!r}")
        self.readout, self.normalize = readout, normalize
        self.transport = transport
        self.retries = retries
        self.max_retry_sleep_s = max_retry_sleep_s
        self.default_retry_after_s = default_retry_after_s
        self._sleep = sleep
        self._jitter = random.Random()

    @classmethod
    def local(
        cls,
        url: str,
        *,
        timeout_s: float = READ_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        **options: Any,
    ) -> EndpointClient:
        """A client for a server on a URL (a local adapter process: ``AdapterProcess.url``). ``timeout_s``
        is each call's deadline, retries included; answers over ``max_response_bytes`` are refused."""
        return cls(LocalTransport(url, timeout_s=timeout_s, max_response_bytes=max_response_bytes), **options)

    @classmethod
    def sagemaker(
        cls,
        endpoint_name: str,
        region: str | None = None,
        runtime_client: RuntimeClient | None = None,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        timeout_s: float = READ_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        endpoint_url: str | None = None,
        inference_component: str | None = None,
        **options: Any,
    ) -> EndpointClient:
        """A client for a SageMaker endpoint; pass ``runtime_client`` to reuse (or stub) one, or
        ``endpoint_url`` for a VPC endpoint of the SageMaker runtime, ``inference_component`` for the model of an endpoint
        that hosts inference components. ``read_timeout_s`` and
        ``connect_timeout_s`` go to botocore (per socket operation); ``timeout_s`` is the call's
        deadline as far as the transport can hold it (``SageMakerTransport`` says how far)."""
        if runtime_client is None:
            config = Config(
                read_timeout=read_timeout_s,
                connect_timeout=connect_timeout_s,
                retries={"mode": "standard", "total_max_attempts": BOTOCORE_TOTAL_ATTEMPTS},
            )
            runtime_client = calls.client("sagemaker-runtime", region, endpoint_url=endpoint_url, config=config)
        return cls(
            SageMakerTransport(
                endpoint_name,
                runtime_client,
                timeout_s=timeout_s,
                max_response_bytes=max_response_bytes,
                inference_component=inference_component,
            ),
            **options,
        )

    def __repr__(self) -> str:
        return f"EndpointClient({self.transport.name}, retries={self.retries})"

    def _readout_fields(self, prefix: str = "") -> dict[str, str]:
        """The client's readout and normalize, as fields of a body (``prefix``: System One's ``x_``)."""
        fields = {"readout": self.readout, "normalize": self.normalize}
        return {prefix + k: v for k, v in fields.items() if v is not None}

    # -- calls --

    def invoke(self, payload: Mapping[str, Any]) -> tuple[dict[str, Any], float, int]:
        """Send one JSON body; return (parsed reply, client latency in ms incl. retries, attempts)."""
        reply, latency_ms, attempts = self._send(payload)
        return self._parsed(reply), latency_ms, attempts

    def _decision_reply(self, payload: Mapping[str, Any]) -> tuple[dict[str, Any], float, int]:
        """``invoke`` for a decision answer: refused unless its adapter speaks this client's wire version."""
        reply, latency_ms, attempts = self._send(payload)
        problem = wire.version_problem(getattr(reply, "wire_version", None))
        if problem:
            raise WireVersionMismatch(problem, endpoint=self.transport.name)
        return self._parsed(reply), latency_ms, attempts

    def _send(self, payload: Mapping[str, Any]) -> tuple[bytes, float, int]:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        started = time.perf_counter()
        timeout_s = getattr(self.transport, "timeout_s", None)
        deadline = Deadline(timeout_s) if timeout_s else None  # the whole call's, retries included
        attempt = 1
        while True:
            try:
                reply = self.transport.invoke(body, deadline=deadline)
                break
            except EndpointBusy as exc:
                exc.attempts = attempt
                delay = self._retry_delay(exc.retry_after)
                if attempt > self.retries or (deadline is not None and deadline.left() <= delay):
                    raise
                self._sleep(delay)
                attempt += 1
        return reply, (time.perf_counter() - started) * 1000.0, attempt

    def _parsed(self, reply: bytes) -> dict[str, Any]:
        try:
            parsed = json.loads(reply)
        except ValueError:
            raise InvalidResponse(
                "the reply is not JSON",
                endpoint=self.transport.name,
                body=reply[:2000].decode("utf-8", errors="replace"),
            ) from None
        if not isinstance(parsed, dict):
            raise InvalidResponse("the reply is not a JSON object", endpoint=self.transport.name)
        return parsed

    def chat(
        self,
        messages: Sequence[Mapping[str, str]] | str,
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        thinking: bool = False,
        **extra: Any,
    ) -> ChatResult:
        """An OpenAI chat completion; a bare string is one user message.

        ``thinking=False`` (the default) asks a reasoning model such as Qwen3.5 to answer directly:
        llama-server hands ``chat_template_kwargs`` to the model's chat template, whose
        ``enable_thinking`` switch would otherwise let the model spend all of ``max_tokens`` in
        ``reasoning_content`` and return empty content. Templates without the switch ignore it,
        and the decision adapter always renders without thinking.
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        payload: dict[str, Any] = {
            "messages": list(messages),
            "temperature": temperature,
            "chat_template_kwargs": {"enable_thinking": thinking},
            **extra,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        reply, latency, attempts = self.invoke(payload)
        try:
            choice = reply["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise InvalidResponse(
                "the reply has no choices[0].message.content",
                endpoint=self.transport.name,
                body=json.dumps(reply)[:2000],
            ) from None
        return ChatResult(
            content=content or "",
            finish_reason=choice.get("finish_reason"),
            usage=reply.get("usage") or {},
            client_latency_ms=latency,
            attempts=attempts,
            raw=reply,
            reasoning=choice["message"].get("reasoning_content") or "",
        )

    def decide(self, decision: Mapping[str, Any]) -> Decision:
        """One decision: this project's body (e.g. from ``decision(...)``) or the published sample's
        ``{"decision": {"id", "state", "question", "options": [{"id", "description"}]}}``."""
        if "questions" in decision or "decisions" in decision:
            raise TypeError(
                "this is a shared-state request; call decide_batch(id, state, questions) or decide_shared(decisions)"
            )
        if "decision" not in decision:
            decision = {**self._readout_fields(), **decision}
        reply, latency, attempts = self._decision_reply(decision)
        decision = decision.get("decision", decision)
        result = reply.get(wire.RESULT)
        if not isinstance(result, dict):
            raise InvalidResponse(
                "the reply has no 'result' object", endpoint=self.transport.name, body=json.dumps(reply)[:2000]
            )
        made = Decision.from_result(result, client_latency_ms=latency, attempts=attempts, endpoint=self.transport.name)
        self._check_answers(made, decision.get("id"), decision.get("options", ()))
        return made

    def decide_batch(
        self, id: str, state: object, questions: Sequence[Mapping[str, Any]], **extra: Any
    ) -> list[Decision]:
        """Several questions on one state; results in question order, ids = question ids."""
        reply, latency, attempts = self._decision_reply(
            {"id": id, "state": state, "questions": list(questions), **self._readout_fields(), **extra}
        )
        results = reply.get(wire.RESULTS)
        if not isinstance(results, list) or len(results) != len(questions):
            raise InvalidResponse(
                f"expected {len(questions)} results, got {len(results) if isinstance(results, list) else 'none'}",
                endpoint=self.transport.name,
                body=json.dumps(reply)[:2000],
            )
        timing, model = reply.get("timing") or {}, reply.get("model") or {}
        decisions = []
        for asked, result in zip(questions, results):
            if not isinstance(result, dict):
                raise InvalidResponse("a batch result is not an object", endpoint=self.transport.name)
            made = Decision.from_result(
                result,
                timing={**timing, "question_eval_ms": result.get("question_eval_ms")},
                model=model,
                client_latency_ms=latency,
                attempts=attempts,
                endpoint=self.transport.name,
            )
            self._check_answers(made, asked.get("id"), asked.get("options", ()))
            decisions.append(made)
        return decisions

    def decide_shared(self, decisions: Sequence[Mapping[str, Any]]) -> list[Decision]:
        """The published sample's shared-state request, ``{"decisions": [...]}``: every decision carries
        the same state (evaluated once); results in request order."""
        reply, latency, attempts = self._decision_reply({"decisions": list(decisions)})
        results = reply.get(wire.RESULTS)
        if not isinstance(results, list) or len(results) != len(decisions):
            raise InvalidResponse(
                f"expected {len(decisions)} results, got {len(results) if isinstance(results, list) else 'none'}",
                endpoint=self.transport.name,
                body=json.dumps(reply)[:2000],
            )
        timing = reply.get("timing") or {}
        answers = []
        for asked, result in zip(decisions, results):
            if not isinstance(result, dict):
                raise InvalidResponse("a shared result is not an object", endpoint=self.transport.name)
            made = Decision.from_result(
                result,
                timing={**timing, "question_eval_ms": result.get("question_eval_ms")},
                client_latency_ms=latency,
                attempts=attempts,
                endpoint=self.transport.name,
            )
            self._check_answers(made, asked.get("id"), asked.get("options", ()))
            answers.append(made)
        return answers

    def decide_any(self, body: Mapping[str, Any]) -> list[Decision]:
        """Any decision body, this project's (single or ``questions``) or the sample's (``decision`` or
        ``decisions``), e.g. read from a file; one Decision per question, in request order."""
        if "decisions" in body:
            return self.decide_shared(body["decisions"])
        if "questions" in body:
            extra = {k: v for k, v in body.items() if k not in ("id", "state", "questions")}
            return self.decide_batch(body["id"], body["state"], body["questions"], **extra)
        return [self.decide(body)]

    def systemone(
        self,
        state: jev.Content,
        questions: Mapping[str, Mapping[str, Any]],
        *,
        model: str | None = "jev-latest",
        **extra: Any,
    ) -> jev.SystemOneResult:
        """Jev System One questions (``workshop_lib.client.jev``: noul / choice / score) on one state.

        Sent to ``/invocations`` (the adapter tells the shape apart), so it travels through SageMaker's
        InvokeEndpoint unchanged; returns a ``jev.SystemOneResult`` checked against the questions.
        """
        body = jev.request(state, questions, model=model, **{**self._readout_fields("x_"), **extra})
        reply, latency, attempts = self._decision_reply(body)
        try:
            return jev.parse_response(reply, body, client_latency_ms=latency, attempts=attempts)
        except jev.SystemOneFormatError as exc:
            raise InvalidResponse(str(exc), endpoint=self.transport.name, body=json.dumps(reply)[:2000]) from None

    def openai_decisions(
        self,
        input: str | Sequence[Mapping[str, Any]],
        questions: Sequence[Mapping[str, Any]],
        *,
        model: str | None = "jev-latest",
    ) -> openai_decisions.DecisionsResult:
        """Predicate, choice and score questions in the OpenAI Decisions format (``workshop_lib.client.openai_decisions``)
        about one input, answered in order.

        Sent to ``/invocations`` (the adapter tells the shape apart by ``input``; locally ``/v1/decisions``
        takes the same body), so it travels through SageMaker's InvokeEndpoint unchanged; returns an
        ``openai_decisions.DecisionsResult`` checked against the questions.
        """
        body = openai_decisions.request(input, questions, model=model)
        reply, latency, attempts = self._decision_reply(body)
        try:
            return openai_decisions.parse_response(reply, body, client_latency_ms=latency, attempts=attempts)
        except openai_decisions.DecisionsFormatError as exc:
            raise InvalidResponse(str(exc), endpoint=self.transport.name, body=json.dumps(reply)[:2000]) from None

    def ping(self) -> dict[str, Any]:
        """The server's /ping reply (local servers only: SageMaker keeps /ping to itself). The adapter
        says only ``{"status": "ready"}`` there to a caller without its key; ``status()`` says more."""
        return self._json_reply(self.transport.ping())

    def status(self) -> dict[str, Any]:
        """The adapter's ``GET /status`` (local servers only): the model file, the start-up proof, and
        whether a request holds the model (``busy``) and how many wait. An adapter with an API key
        keeps it to callers holding the key, which this client does not send."""
        get = getattr(self.transport, "get", None)
        if get is None:
            raise NotImplementedError(
                "SageMaker routes callers to /invocations only; /status is for a local "
                "adapter (DescribeEndpoint says how a SageMaker endpoint is)"
            )
        return self._json_reply(get("/status"))

    @staticmethod
    def _json_reply(reply: bytes) -> dict[str, Any]:
        """The reply's JSON object; a reply that is not one comes back as its text (``body``)."""
        if not reply.strip():
            return {}
        try:
            parsed = json.loads(reply)
        except ValueError:
            parsed = None
        return parsed if isinstance(parsed, dict) else {"body": reply.decode("utf-8", errors="replace")}

    # -- internals --

    def _retry_delay(self, retry_after: float | None) -> float:
        base = self.default_retry_after_s if retry_after is None else retry_after
        # A little jitter so clients told "1 s" together do not all come back together.
        return min(self.max_retry_sleep_s, base * (1.0 + 0.25 * self._jitter.random()))

    def _check_answers(self, made: Decision, asked_id: object, asked_options: Iterable[Any]) -> None:
        """The answer must be to this request: same id, exactly the option ids sent, in their order."""
        expected = option_ids(asked_options)
        if made.id != asked_id:
            raise InvalidDecision(f"asked {asked_id!r}, got an answer for {made.id!r}", endpoint=self.transport.name)
        problem = wire.ids_problem(expected, made.option_ids)
        if problem:
            raise InvalidDecision(
                f"the answer to {asked_id!r} does not fit the options sent: {problem}", endpoint=self.transport.name
            )


__all__ = [
    "BadRequest",
    "ChatResult",
    "Decision",
    "EndpointBusy",
    "EndpointClient",
    "EndpointError",
    "EndpointNotFound",
    "EndpointRedirected",
    "EndpointServerError",
    "EndpointTimeout",
    "EndpointUnreachable",
    "InvalidDecision",
    "InvalidResponse",
    "LocalTransport",
    "ResponseTooLarge",
    "SageMakerTransport",
    "UnprocessableRequest",
    "WireVersionMismatch",
    "decision",
    "option_list",
    "question",
]
