"""The rehearsal's stand-in for SageMaker's OpenAI-compatible route: ``POST /endpoints/<name>/openai/v1/chat/completions``
on a loopback port, checked as AWS checks it as far as the rehearsal can, then passed to the local endpoint's
own ``/v1/chat/completions`` (a streamed answer streams through).

The bearer token (``workshop_lib.client.openai_route``, minted by the SageMaker Python SDK) is checked in
``check_token``: the SDK's prefix, base64, a presigned ``CallWithBearerToken`` request whose SigV4 signature is
computed again (botocore's ``SigV4QueryAuth``) with the secret the local emulator's credentials hold, not
expired, and scoped to the rehearsal's region. Then the principal's policies, as the rehearsal holds the
operator's (``permissions``: the persona and the documents attached so far), must allow
``sagemaker:CallWithBearerToken`` and ``sagemaker:InvokeEndpoint`` on the endpoint; both calls are written to the
rehearsal's call log, so the permission audit counts them. A refusal is 401 (no valid token) or 403 (a valid
token that may not do this), with an OpenAI-style error body naming what failed; an endpoint the rehearsal does
not run is 404.

``RouteProcess`` (processes.py) runs this module; the rehearsal starts it with its first local endpoint and
stops it with the last one (rehearsal.py).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import hmac
import http.client
import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ..aws import iam
from ..aws.policies import OPERATOR
from ..client.openai_route import MAX_TOKEN_S, ROUTE_PATH
from ..errors import AwsFailure
from .iam_needs import needed
from .modes import CALL_LOG, FAKE_CREDENTIALS
from .permissions import ADMINISTRATOR, ATTACHED_FILE, AttachedPolicies, caller_arn, persona
from .processes import group_alive

TOKEN_PREFIX = "sagemaker-api-key-"
SIGNED_ACTION = "CallWithBearerToken"
SIGNING_SERVICE = "sagemaker"
CLOCK_SKEW_S = 300  # a token dated this far ahead of the clock is still taken, as SigV4 allows
# The secret of each access key the rehearsal knows: the local emulator's fake credentials, and whose they are.
LOCAL_SECRETS = {FAKE_CREDENTIALS["aws_access_key_id"]: FAKE_CREDENTIALS["aws_secret_access_key"]}
LOCAL_PRINCIPALS = {FAKE_CREDENTIALS["aws_access_key_id"]: OPERATOR}
CHAT_PATH = "/v1/chat/completions"
FORWARD_TIMEOUT_S = 300


class Refusal(AwsFailure):
    """What AWS answers instead of the endpoint's answer: the status, a code and the reason."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message

    def body(self) -> bytes:
        return json.dumps({"error": {"message": self.message, "type": self.code, "code": self.code}}).encode()


@dataclass(frozen=True)
class Signer:
    """Whose token it is: the access key, the region and the date of its scope."""

    access_key: str
    region: str
    date: str


def _refuse(status: int, code: str, message: str) -> Refusal:
    return Refusal(status, code, message)


def _decode(authorization: str | None) -> str:
    """The presigned URL inside an ``Authorization: Bearer`` header's token; Refusal (401) if there is none."""
    if not authorization:
        raise _refuse(401, "MissingToken", "no Authorization header: send 'Authorization: Bearer <token>'")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _refuse(401, "MissingToken", "the Authorization header is not 'Bearer <token>'")
    token = token.strip()
    if not token.startswith(TOKEN_PREFIX):
        raise _refuse(
            401,
            "MalformedToken",
            f"the bearer token does not start with {TOKEN_PREFIX!r}: mint it with "
            "sagemaker.core.token_generator.generate_token",
        )
    try:
        return base64.b64decode(token[len(TOKEN_PREFIX) :], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise _refuse(401, "MalformedToken", "the bearer token after its prefix is not base64 of a URL") from None


def check_token(
    authorization: str | None,
    *,
    secrets: Mapping[str, str],
    region: str,
    now: datetime.datetime | None = None,
) -> Signer:
    """Check a bearer token as AWS would, as far as the rehearsal can; its signer, or Refusal naming what failed.

    ``secrets``: access key -> secret access key (the local emulator's); ``region``: the rehearsal's."""
    url = _decode(authorization)
    host, _, query = url.partition("/?")
    if not host.startswith("sagemaker.") or not query.endswith("&Version=1"):
        raise _refuse(401, "MalformedToken", "the bearer token is not a presigned SageMaker request of version 1")
    signed_query = query.removesuffix("&Version=1")
    pairs = urllib.parse.parse_qsl(signed_query, keep_blank_values=True)
    params = dict(pairs)
    if len(params) != len(pairs):
        raise _refuse(401, "MalformedToken", "the bearer token names a query parameter twice")
    if params.get("Action") != SIGNED_ACTION:
        raise _refuse(
            401, "InvalidAction", f"the bearer token presigns Action={params.get('Action')!r}, not {SIGNED_ACTION}"
        )
    missing = [
        p
        for p in ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-Signature")
        if not params.get(p)
    ]
    if missing:
        raise _refuse(401, "MissingSignature", f"the bearer token is not signed: it lacks {', '.join(missing)}")
    scope = params["X-Amz-Credential"].split("/")
    if (
        params["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256"
        or len(scope) != 5
        or scope[3:] != [SIGNING_SERVICE, "aws4_request"]
        or params.get("X-Amz-SignedHeaders") != "host"
    ):
        raise _refuse(
            401, "MalformedToken", "the bearer token's signature is not SigV4 for sagemaker over the host alone"
        )
    signer = Signer(access_key=scope[0], region=scope[2], date=scope[1])
    if signer.region != region:
        raise _refuse(
            403,
            "WrongRegion",
            f"the bearer token is scoped to region {signer.region}, the endpoint is in {region}: mint it for {region}",
        )
    secret = secrets.get(signer.access_key)
    if secret is None:
        raise _refuse(401, "UnknownAccessKey", f"the access key {signer.access_key!r} is not one this account knows")
    try:
        signed_at = datetime.datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc
        )
        lifetime = int(params["X-Amz-Expires"])
    except ValueError:
        raise _refuse(401, "MalformedToken", "the bearer token's X-Amz-Date or X-Amz-Expires is not valid") from None
    if signed_at.strftime("%Y%m%d") != signer.date or not 0 < lifetime <= MAX_TOKEN_S:
        raise _refuse(401, "MalformedToken", "the bearer token's date or lifetime (at most 12 h) is not valid")
    if not hmac.compare_digest(
        _signature(host, signed_query, params, secret, signer, lifetime), params["X-Amz-Signature"]
    ):
        raise _refuse(
            401,
            "SignatureDoesNotMatch",
            "the bearer token's signature does not match the one its credentials give: mint a new one",
        )
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if now > signed_at + datetime.timedelta(seconds=lifetime):
        raise _refuse(
            401,
            "ExpiredToken",
            f"the bearer token expired at {(signed_at + datetime.timedelta(seconds=lifetime)).isoformat()}: "
            "mint a new one",
        )
    if signed_at - now > datetime.timedelta(seconds=CLOCK_SKEW_S):
        raise _refuse(401, "MalformedToken", "the bearer token is dated in the future")
    return signer


def _signature(
    host: str, signed_query: str, params: Mapping[str, str], secret: str, signer: Signer, lifetime: int
) -> str:
    """The SigV4 signature botocore gives this presigned request (every parameter but the signature signed)."""
    query = "&".join(p for p in signed_query.split("&") if not p.startswith("X-Amz-Signature="))
    request = AWSRequest(method="POST", url=f"https://{host}/?{query}", headers={"host": host})
    request.context["timestamp"] = params["X-Amz-Date"]
    token = params.get("X-Amz-Security-Token")
    auth = SigV4QueryAuth(Credentials(signer.access_key, secret, token), SIGNING_SERVICE, signer.region, lifetime)
    return str(auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request))


# ---- what IAM allows the principal ---------------------------------------------------------------------------


def iam_refusal(home: Path, principal: str, endpoint: str, region: str) -> Refusal | None:
    """The 403 IAM answers if ``principal`` may not call endpoint ``endpoint`` through the route, else None; both
    permissions are checked and written to the rehearsal's call log, as the operator's other calls are."""
    attached = AttachedPolicies(home / ATTACHED_FILE)
    account = attached.account
    refusal = None
    for operation, params in ((SIGNED_ACTION, {}), ("InvokeEndpoint", {"EndpointName": endpoint})):
        entry: dict[str, Any] = {
            "principal": principal,
            "service": "sagemaker",
            "operation": operation,
            "params": params,
        }
        if refusal is None and principal == OPERATOR and persona() != ADMINISTRATOR:
            for action, resource, context in needed(entry, region, account):
                verdict = iam.evaluate(attached.documents(), action, resource, context)
                if not verdict.allowed:
                    why = (
                        "with an explicit deny" if verdict.matched else f"because no policy allows the {action} action"
                    )
                    message = (
                        f"User: {caller_arn(attached.role_arn)} is not authorized to perform: {action} on resource: "
                        f"{resource} {why}"
                    )
                    refusal = _refuse(403, "AccessDenied", message)
                    entry["refused"] = message
                    break
        with open(home / CALL_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")
        if refusal is not None:
            return refusal
    return None


# ---- the HTTP front ---------------------------------------------------------------------------------------------


def endpoint_url(registry: Path, name: str) -> str | None:
    """The URL of the process serving local endpoint ``name`` now (the registry's; it follows a replacement)."""
    try:
        entry = json.loads(registry.read_text()).get("endpoints", {}).get(name)
    except (OSError, ValueError):
        return None
    return entry["url"] if entry and group_alive(entry.get("pgid")) else None


def _route_endpoint(path: str) -> str | None:
    parts = urllib.parse.urlsplit(path).path.split("/")
    # "", "endpoints", name, "openai", "v1", "chat", "completions"
    if len(parts) == 7 and parts[:2] == ["", "endpoints"] and parts[3:] == ["openai", "v1", "chat", "completions"]:
        return urllib.parse.unquote(parts[2]) or None
    return None


class RouteHandler(BaseHTTPRequestHandler):
    server: RouteServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # one line per request in the log file, no colour
        print(f"{self.address_string()} {format % args}", flush=True)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/ping":
            self._answer(200, b'{"status": "ok"}')
        else:
            self._answer(404, _refuse(404, "NotFound", "the route answers POST .../openai/v1/chat/completions").body())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        name = _route_endpoint(self.path)
        if name is None:
            self._answer(
                404,
                _refuse(
                    404, "NotFound", f"{self.path} is not routed: only POST {ROUTE_PATH}/chat/completions is"
                ).body(),
            )
            return
        try:
            signer = check_token(self.headers.get("Authorization"), secrets=LOCAL_SECRETS, region=self.server.region)
            principal = LOCAL_PRINCIPALS.get(signer.access_key, OPERATOR)
            refusal = iam_refusal(self.server.home, principal, name, self.server.region)
            if refusal is not None:
                raise refusal
        except Refusal as refused:
            self._answer(refused.status, refused.body())
            return
        upstream = endpoint_url(self.server.registry, name)
        if upstream is None:
            self._answer(
                404,
                _refuse(404, "ValidationError", f"Endpoint {name} of account not found: no local endpoint runs").body(),
            )
            return
        self._forward(upstream, body)

    def _forward(self, upstream: str, body: bytes) -> None:
        target = urllib.parse.urlsplit(upstream)
        connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=FORWARD_TIMEOUT_S)
        try:
            connection.request(
                "POST", CHAT_PATH, body, {"Content-Type": self.headers.get("Content-Type", "application/json")}
            )
            reply = connection.getresponse()
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.getheader("Content-Type", "application/json"))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := reply.read1(65536):  # as it comes: a streamed answer's events are not held back
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            self._answer(502, _refuse(502, "EndpointUnreachable", f"the local endpoint did not answer: {exc}").body())
        finally:
            connection.close()


class RouteServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, registry: Path, region: str):
        super().__init__(("127.0.0.1", port), RouteHandler)
        self.registry, self.home, self.region = registry, registry.parent, region


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", required=True, type=Path, help="the rehearsal's rehearsal.json")
    parser.add_argument("--region", required=True)
    parser.add_argument("--port", required=True, type=int)
    args = parser.parse_args(argv)
    server = RouteServer(args.port, args.registry, args.region)
    print(f"SageMaker's OpenAI-compatible route for region {args.region} on http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
