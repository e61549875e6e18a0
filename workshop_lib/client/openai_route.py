"""SageMaker's OpenAI-compatible route, from the caller's side: the route's URL for an endpoint, the bearer
token it takes, and an ``openai.OpenAI`` client pointed at it.

Every real-time endpoint answers ``POST https://runtime.sagemaker.<region>.<dns suffix>/endpoints/<name>/openai/v1/
chat/completions`` with its container's own ``/v1/chat/completions`` answer, streamed or not. The caller
authenticates with ``Authorization: Bearer <token>``, a token the SageMaker Python SDK mints offline from AWS
credentials (``sagemaker.core.token_generator.generate_token``: a SigV4-presigned ``CallWithBearerToken``
request, at most 12 h long) and needs ``sagemaker:CallWithBearerToken`` and ``sagemaker:InvokeEndpoint``::

    client = openai_client("decision-workshop-cpu", "us-east-1", boto3.Session())
    client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Hello"}])
    decide(client, "I was charged twice.", "Which team?", {"billing": "Billing", "tech": "Tech support"}).choice

The token is minted again before it runs out (``BearerToken``), so a long-lived client keeps working. The
local rehearsal serves the same path with the same token check (``workshop_lib.local.route_stand_in``): the
same call with its ``base_url`` reaches a local endpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import botocore.session
from botocore.credentials import CredentialProvider, Credentials
from botocore.exceptions import UnknownRegionError

from ..errors import InvalidInput
from . import chat_decision_calls, openai_decisions
from .request_bodies import OptionsLike

if TYPE_CHECKING:
    import openai

MAX_TOKEN_S = 12 * 3600  # the SDK refuses a longer token
DEFAULT_TOKEN_S = 3600
RENEW_BEFORE_S = 300  # a token this close to its end is replaced before the next request

# Where AWS documents the route: each partition's own SageMaker developer guide, page "Invoke endpoints with
# OpenAI-compatible APIs" (realtime-endpoints-openai-compatible), read 2026-12-06. Other partitions (GovCloud,
# the isolated ones) have no such page: the workshop says so before it sends anything.
ROUTE_PARTITIONS = {
    "aws": "docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-openai-compatible.html",
    "aws-cn": "docs.amazonaws.cn/en_us/sagemaker/latest/dg/realtime-endpoints-openai-compatible.html",
    "aws-eusc": "docs.aws.eu/sagemaker/latest/dg/realtime-endpoints-openai-compatible.html",
}
ROUTE_PATH = "/endpoints/{name}/openai/v1"


def _botocore() -> botocore.session.Session:
    return botocore.session.get_session()


def runtime_url(region: str) -> str:
    """SageMaker runtime's URL in ``region`` as botocore resolves it (the partition's DNS suffix included);
    InvalidInput where the route is not documented or botocore knows no SageMaker runtime there."""
    if not isinstance(region, str) or not region.strip():
        raise InvalidInput("region is empty: name the AWS region the endpoint is in (for example us-east-1)")
    session = _botocore()
    try:
        partition = session.get_partition_for_region(region)
    except UnknownRegionError:
        raise InvalidInput(
            f"botocore knows no partition for region {region!r}; check the region's name "
            "(aws ec2 describe-regions lists them)"
        ) from None
    if partition not in ROUTE_PARTITIONS:
        raise InvalidInput(
            f"SageMaker's OpenAI-compatible route is not documented in the {partition} partition ({region}); "
            f"it is in {', '.join(sorted(ROUTE_PARTITIONS))}. Call the endpoint with InvokeEndpoint "
            "(EndpointClient.sagemaker) instead"
        )
    if region not in session.get_available_regions("sagemaker-runtime", partition):
        raise InvalidInput(
            f"botocore knows no SageMaker runtime in region {region!r}; check the region's name "
            "(aws ec2 describe-regions lists them)"
        )
    # no call is made: the client only resolves the endpoint's URL, so no credentials are needed here
    made = session.create_client(
        "sagemaker-runtime", region_name=region, aws_access_key_id="-", aws_secret_access_key="-"
    )
    return str(made.meta.endpoint_url).rstrip("/")


def route_base_url(endpoint_name: str, region: str) -> str:
    """The ``base_url`` the ``openai`` library takes for endpoint ``endpoint_name``: ``.../endpoints/<name>/openai/v1``."""
    if not isinstance(endpoint_name, str) or not endpoint_name.strip() or "/" in endpoint_name:
        raise InvalidInput(f"endpoint name {endpoint_name!r} is not a SageMaker endpoint's name; pass the name alone")
    return runtime_url(region) + ROUTE_PATH.format(name=endpoint_name)


class _SessionCredentials(CredentialProvider):  # type: ignore[misc]  # botocore ships no types
    """The SDK's token generator asks a credential provider; this one hands it a boto3 session's credentials."""

    METHOD = "workshop-session"

    def __init__(self, session: Any):
        super().__init__()
        self._session = session

    def load(self) -> Credentials | None:
        return self._session.get_credentials()


def mint_token(session: Any, region: str, expiry_s: int = DEFAULT_TOKEN_S) -> str:
    """A bearer token for the route in ``region``, from ``session``'s credentials (a boto3 Session), by the
    SageMaker Python SDK's own generator; it lasts ``expiry_s`` seconds (at most 12 h) or until the
    credentials it was signed with end, whichever comes first."""
    if not 0 < expiry_s <= MAX_TOKEN_S:
        raise InvalidInput(f"expiry_s={expiry_s} is out of range: a bearer token lasts 1 s to {MAX_TOKEN_S} s (12 h)")
    if session.get_credentials() is None:
        raise InvalidInput(
            "no AWS credentials to sign the bearer token with: configure them (aws configure, or the Studio role)"
        )
    # sagemaker-core (the SageMaker Python SDK v3) takes seconds to import: only the caller that mints pays it
    from sagemaker.core.token_generator import generate_token

    return str(generate_token(region, _SessionCredentials(session), timedelta(seconds=expiry_s)))


@dataclass
class BearerToken:
    """The token a client sends, minted again once it is within ``RENEW_BEFORE_S`` of its end. Calling it
    returns the token to use now (``openai.OpenAI(api_key=...)`` accepts it as a callable)."""

    mint: Callable[[], str]
    lifetime_s: int = DEFAULT_TOKEN_S
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0
        self.minted = 0

    def __call__(self) -> str:
        with self._lock:
            now = self.clock()
            if self._token is None or now >= self._expires_at - min(RENEW_BEFORE_S, self.lifetime_s / 2):
                self._token = self.mint()
                self._expires_at = now + self.lifetime_s
                self.minted += 1
            return self._token


def session_token(session: Any, region: str, lifetime_s: int = DEFAULT_TOKEN_S) -> BearerToken:
    """A ``BearerToken`` minted from ``session``'s credentials for ``region``, renewed before it ends."""
    return BearerToken(lambda: mint_token(session, region, lifetime_s), lifetime_s)


def openai_client(
    endpoint_name: str,
    region: str,
    session: Any,
    *,
    base_url: str | None = None,
    lifetime_s: int = DEFAULT_TOKEN_S,
    **options: Any,
) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for endpoint ``endpoint_name`` through SageMaker's OpenAI-compatible route,
    its bearer token minted from ``session`` (a boto3 Session) and renewed before it ends. ``base_url``: another
    server of the same route (the local rehearsal's); ``options`` go to ``openai.OpenAI`` (timeout, max_retries).
    Checks that the route exists in ``region`` before anything is sent."""
    import openai  # the notebooks extra: only this function needs it

    url = base_url.rstrip("/") if base_url else route_base_url(endpoint_name, region)
    return openai.OpenAI(base_url=url, api_key=session_token(session, region, lifetime_s), **options)


def decide(
    client: Any, state: Any, question: str, options: OptionsLike, **knobs: Any
) -> chat_decision_calls.ChatDecision:
    """One decision through an ``openai.OpenAI`` client (``openai_client``, or any pointed at a decision endpoint's
    chat completions): ``state`` and ``question`` over ``options``, as ``chat_decision_calls.create_kwargs`` takes them
    (``knobs``: its readout, order, normalize, ...); the chosen option and every option's probability."""
    asked = chat_decision_calls.create_kwargs(state, question, options, **knobs)
    return chat_decision_calls.read(client.chat.completions.create(**asked), asked)


def ask(client: Any, input: Any, question: Mapping[str, Any], **options: Any) -> openai_decisions.Answer:
    """One OpenAI Decisions question (``openai_decisions.predicate`` / ``choice`` / ``score``) about ``input``
    through an ``openai.OpenAI`` client: the answer ``/v1/decisions`` gives it (``options``: ``model``)."""
    asked = chat_decision_calls.question_kwargs(input, question, **options)
    return chat_decision_calls.read_question(client.chat.completions.create(**asked), asked)


__all__ = [
    "DEFAULT_TOKEN_S",
    "MAX_TOKEN_S",
    "ROUTE_PARTITIONS",
    "BearerToken",
    "ask",
    "decide",
    "mint_token",
    "openai_client",
    "route_base_url",
    "runtime_url",
    "session_token",
]
