"""SageMaker's OpenAI-compatible route: the caller's transport (workshop_lib/client/route_stand_in.py) and the
rehearsal's route (workshop_lib/local/route_stand_in.py), with real tokens from the SageMaker Python SDK.

The token checks run in-process on tokens ``generate_token`` minted (and on tokens broken one way each). Then
the official ``openai`` library goes through the rehearsal's route process to a real adapter: the module's one
route process, in front of the suite's shared adapter, registered as a local endpoint in a rehearsal folder
of the module's own.
"""

from __future__ import annotations

import base64
import datetime
import json
import urllib.parse
import urllib.request

import boto3
import openai
import pytest
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from workshop_lib.aws import iam, operator_policies, policies
from workshop_lib.client import EndpointClient, LocalTransport, decision, openai_decisions
from workshop_lib.client import openai_route as client_route
from workshop_lib.errors import InvalidInput
from workshop_lib.local import permissions, route_stand_in
from workshop_lib.local.modes import CALL_LOG, FAKE_CREDENTIALS, emulator_session
from workshop_lib.local.rehearsal import Rehearsal, RehearsalError

REGION = "us-east-1"
ENDPOINT = "decision-workshop-route"
SECRETS = route_stand_in.LOCAL_SECRETS


def token(region: str = REGION, expiry_s: int = 600, session=None) -> str:
    return client_route.mint_token(session or emulator_session(), region, expiry_s)


def bearer(value: str) -> str:
    return f"Bearer {value}"


def presigned(token_value: str) -> str:
    return base64.b64decode(token_value.removeprefix(route_stand_in.TOKEN_PREFIX)).decode()


def repacked(url: str) -> str:
    return route_stand_in.TOKEN_PREFIX + base64.b64encode(url.encode()).decode()


def refusal(authorization, **options) -> route_stand_in.Refusal:
    with pytest.raises(route_stand_in.Refusal) as refused:
        route_stand_in.check_token(authorization, secrets=SECRETS, region=options.pop("region", REGION), **options)
    return refused.value


# ---- the transport's pieces ---------------------------------------------------------------------------------


def test_the_route_url_comes_from_botocores_endpoint_for_the_region():
    assert client_route.route_base_url("ep-1", "us-east-1") == (
        "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/ep-1/openai/v1"
    )
    # the partition's DNS suffix is botocore's, not written here
    assert client_route.route_base_url("ep-1", "cn-north-1").startswith(
        "https://runtime.sagemaker.cn-north-1.amazonaws.com.cn/"
    )


@pytest.mark.parametrize("region", ["us-gov-west-1", "us-iso-east-1", "xx-nowhere-9"])
def test_where_the_route_is_not_known_the_transport_says_so_before_sending(region):
    with pytest.raises(InvalidInput, match=region):
        client_route.route_base_url("ep-1", region)
    with pytest.raises(InvalidInput):
        client_route.openai_client("ep-1", region, emulator_session())  # refused before any client exists


def test_bad_names_and_lifetimes_are_refused_naming_the_field():
    with pytest.raises(InvalidInput, match="endpoint name"):
        client_route.route_base_url("a/b", REGION)
    with pytest.raises(InvalidInput, match="expiry_s"):
        client_route.mint_token(emulator_session(), REGION, 12 * 3600 + 1)


def test_the_token_is_the_sdks_presigned_call_with_bearer_token():
    url = presigned(token(expiry_s=900))
    query = dict(urllib.parse.parse_qsl(url.partition("?")[2]))
    assert url.startswith("sagemaker.amazonaws.com/?Action=CallWithBearerToken&") and url.endswith("&Version=1")
    assert query["X-Amz-Expires"] == "900"
    assert query["X-Amz-Credential"].split("/")[0] == FAKE_CREDENTIALS["aws_access_key_id"]
    assert query["X-Amz-Credential"].split("/")[2] == REGION


def test_a_token_is_minted_again_only_near_its_end():
    now = [0.0]
    minted = client_route.BearerToken(lambda: f"t{now[0]:g}", lifetime_s=3600, clock=lambda: now[0])
    assert minted() == "t0" and minted() == "t0" and minted.minted == 1
    now[0] = 3600 - client_route.RENEW_BEFORE_S - 1
    assert minted() == "t0"
    now[0] = 3600 - client_route.RENEW_BEFORE_S + 1  # inside the last minutes: a new one
    assert minted() == f"t{now[0]:g}" and minted.minted == 2


# ---- the rehearsal's token check ----------------------------------------------------------------------------


def test_a_token_the_sdk_minted_passes_and_names_its_signer():
    signer = route_stand_in.check_token(bearer(token()), secrets=SECRETS, region=REGION)
    assert signer.access_key == FAKE_CREDENTIALS["aws_access_key_id"] and signer.region == REGION


def test_a_token_minted_with_a_session_token_passes_too():
    session = boto3.session.Session(aws_session_token="a-session-token", **FAKE_CREDENTIALS)
    assert "X-Amz-Security-Token=a-session-token" in presigned(token(session=session))
    assert route_stand_in.check_token(bearer(token(session=session)), secrets=SECRETS, region=REGION)


@pytest.mark.parametrize(
    "authorization, code",
    [
        (None, "MissingToken"),
        ("Basic abc", "MissingToken"),
        (bearer("sk-not-sagemakers"), "MalformedToken"),
        (bearer(route_stand_in.TOKEN_PREFIX + "not base64!"), "MalformedToken"),
    ],
)
def test_no_token_or_a_malformed_one_is_401(authorization, code):
    refused = refusal(authorization)
    assert (refused.status, refused.code) == (401, code)
    assert json.loads(refused.body())["error"]["code"] == code


def test_an_unsigned_token_is_401_naming_the_missing_signature():
    url = presigned(token())
    unsigned = "&".join(p for p in url.split("&") if not p.startswith("X-Amz-Signature="))
    refused = refusal(bearer(repacked(unsigned)))
    assert (refused.status, refused.code) == (401, "MissingSignature") and "X-Amz-Signature" in refused.message


def test_a_token_signed_with_another_secret_or_a_changed_one_does_not_match():
    forged = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="not-the-secret")
    assert refusal(bearer(token(session=forged))).code == "SignatureDoesNotMatch"
    stretched = presigned(token(expiry_s=600)).replace("X-Amz-Expires=600", "X-Amz-Expires=700")
    assert refusal(bearer(repacked(stretched))).code == "SignatureDoesNotMatch"


def test_an_unknown_access_key_is_401():
    stranger = boto3.session.Session(aws_access_key_id="AKIDSTRANGER", aws_secret_access_key="x")
    refused = refusal(bearer(token(session=stranger)))
    assert (refused.status, refused.code) == (401, "UnknownAccessKey")


def test_an_expired_token_is_401():
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=601)
    refused = refusal(bearer(token(expiry_s=600)), now=later)
    assert (refused.status, refused.code) == (401, "ExpiredToken")
    assert route_stand_in.check_token(bearer(token(expiry_s=700)), secrets=SECRETS, region=REGION, now=later)


def test_a_token_for_another_region_is_403_naming_both():
    refused = refusal(bearer(token(region="eu-west-1")))
    assert (refused.status, refused.code) == (403, "WrongRegion")
    assert "eu-west-1" in refused.message and REGION in refused.message


def test_a_token_presigning_another_action_is_401():
    request = AWSRequest(method="POST", url="https://sagemaker.amazonaws.com/", params={"Action": "InvokeEndpoint"})
    request.headers["host"] = "sagemaker.amazonaws.com"
    SigV4QueryAuth(Credentials("testing", "testing"), "sagemaker", REGION, expires=600).add_auth(request)
    other = repacked(request.url.removeprefix("https://") + "&Version=1")
    assert refusal(bearer(other)).code == "InvalidAction"


# ---- the grant ------------------------------------------------------------------------------------------------


def test_the_operator_documents_grant_what_the_route_checks_and_the_audit_counts_it():
    from tests.workshop_lib.aws.test_iam_scanners import ACCOUNT, config

    documents = operator_policies.operator_documents(config(REGION), ACCOUNT)
    name = config(REGION).cpu_endpoint_name
    calls = [
        {"principal": policies.OPERATOR, "service": "sagemaker", "operation": op, "params": params}
        for op, params in (("CallWithBearerToken", {}), ("InvokeEndpoint", {"EndpointName": name}))
    ]
    audit = permissions.audit(calls, {policies.OPERATOR: documents}, REGION, ACCOUNT)
    assert audit.denied == [] and audit.checked[policies.OPERATOR] == 2
    assert ("operator", "OpenAiRouteToken") not in audit.unused
    # held to the caller's own account: a token used on another account's resource is not granted
    assert not iam.allows(
        documents,
        "sagemaker:CallWithBearerToken",
        "*",
        {"aws:ResourceAccount": "999999999999", "aws:PrincipalAccount": ACCOUNT},
    )


# ---- through the rehearsal's route, with the official openai library --------------------------------------------


@pytest.fixture(scope="module")
def route(adapter, tmp_path_factory):
    """The rehearsal's route process, with the shared adapter registered as local endpoint ENDPOINT."""
    home = tmp_path_factory.mktemp("route-rehearsal")
    local = Rehearsal(home)
    data = local.read_registry()
    data["endpoints"][ENDPOINT] = {"url": adapter.url, "pgid": adapter.pid, "log": str(adapter.log_path)}
    local.write_registry(data)
    url = local.ensure_openai_route(REGION, keep_alive_s=900)
    yield local, url
    data = local.read_registry()
    data["endpoints"] = {}  # the shared adapter is the pool's to stop
    local.write_registry(data)
    assert local.stop_all() == []  # the route is stopped with the endpoints, whatever stop_all reports
    assert not local.status() or not any(p.running for p in local.status())


def routed(route, name: str = ENDPOINT, **options) -> openai.OpenAI:
    _, url = route
    base = url + client_route.ROUTE_PATH.format(name=name)
    return client_route.openai_client(name, REGION, emulator_session(), base_url=base, max_retries=0, **options)


HELLO = [{"role": "user", "content": "Say hello."}]


def test_plain_chat_goes_through_the_route(route):
    completion = routed(route).chat.completions.create(model="local", messages=HELLO, max_tokens=8, temperature=0)
    assert completion.choices[0].message.role == "assistant" and completion.usage.completion_tokens >= 1
    calls = permissions.CallLog(route[0].home / CALL_LOG).calls()
    assert [(c["operation"], c["params"]) for c in calls[-2:]] == [
        ("CallWithBearerToken", {}),
        ("InvokeEndpoint", {"EndpointName": ENDPOINT}),
    ]


def test_streaming_passes_through_the_route(route):
    stream = routed(route).chat.completions.create(
        model="local", messages=HELLO, max_tokens=8, temperature=0, stream=True
    )
    chunks = list(stream)
    assert len(chunks) >= 2 and chunks[-1].choices[0].finish_reason in ("length", "stop")
    plain = routed(route).chat.completions.create(model="local", messages=HELLO, max_tokens=8, temperature=0)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == plain.choices[0].message.content  # greedy: the same text either way


def test_the_library_asks_for_the_token_before_each_request_so_it_is_renewed(route):
    now = [0.0]
    renewed = client_route.BearerToken(lambda: token(), lifetime_s=600, clock=lambda: now[0])
    _, url = route
    base = url + client_route.ROUTE_PATH.format(name=ENDPOINT)
    client = openai.OpenAI(base_url=base, api_key=renewed, max_retries=0)
    client.chat.completions.create(model="local", messages=HELLO, max_tokens=2)
    now[0] = 600 - client_route.RENEW_BEFORE_S + 1  # near its end: the next request gets a new token
    client.chat.completions.create(model="local", messages=HELLO, max_tokens=2)
    assert renewed.minted == 2


def test_refusals_reach_the_library_with_their_status_and_reason(route):
    _, url = route
    base = url + client_route.ROUTE_PATH.format(name=ENDPOINT)
    with pytest.raises(openai.AuthenticationError, match="sagemaker-api-key-"):
        openai.OpenAI(base_url=base, api_key="sk-plain", max_retries=0).chat.completions.create(
            model="local", messages=HELLO
        )
    other_region = openai.OpenAI(base_url=base, api_key=token(region="us-west-2"), max_retries=0)
    with pytest.raises(openai.PermissionDeniedError, match="us-west-2"):
        other_region.chat.completions.create(model="local", messages=HELLO)
    with pytest.raises(openai.NotFoundError, match="no-such-endpoint"):
        routed(route, "no-such-endpoint").chat.completions.create(model="local", messages=HELLO)


def test_a_principal_denied_the_bearer_token_action_is_refused_with_iams_message(route):
    local, _ = route
    attached = permissions.AttachedPolicies(local.home / permissions.ATTACHED_FILE)
    deny = {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "NoRoute", "Effect": "Deny", "Action": "sagemaker:CallWithBearerToken", "Resource": "*"}],
    }
    attached.attach("no-route.json", deny)
    try:
        with pytest.raises(openai.PermissionDeniedError, match="not authorized to perform: sagemaker:CallWithBearer"):
            routed(route).chat.completions.create(model="local", messages=HELLO, max_tokens=2)
        refused = permissions.CallLog(local.home / CALL_LOG).calls()[-1]
        assert refused["operation"] == "CallWithBearerToken" and "explicit deny" in refused["refused"]
    finally:
        attached.clear()
    assert routed(route).chat.completions.create(model="local", messages=HELLO, max_tokens=2).choices


def test_without_a_running_route_the_local_client_says_what_to_run(tmp_path):
    with pytest.raises(RehearsalError, match="notebook 04"):
        Rehearsal(tmp_path).openai_route_url()


TICKET = "Subject: charged twice\n\nMy card was billed two times for the March invoice."
TEAMS = {"billing": "Billing: charges, refunds, invoices", "tech": "Technical support", "sales": "Sales"}


@pytest.mark.parametrize("readout", ["letters", "cloze"])
def test_a_decision_through_the_route_has_the_endpoints_own_numbers(route, adapter, readout):
    routed_answer = client_route.decide(routed(route), TICKET, "Which team should handle it?", TEAMS, readout=readout)
    own = EndpointClient(LocalTransport(adapter.url)).decide(
        {**decision("t-own", TICKET, "Which team should handle it?", TEAMS), "readout": readout}
    )
    assert list(routed_answer.probabilities) == list(own.option_ids) == list(TEAMS)
    assert list(routed_answer.probabilities.values()) == pytest.approx(own.probabilities, abs=1e-6)
    assert routed_answer.readout == readout
    assert routed_answer.choice == max(routed_answer.probabilities, key=routed_answer.probabilities.get)


def test_a_decisions_question_through_the_route_has_the_v1_decisions_numbers(route, adapter):
    """The Done-when of the route: the openai library, through the route with a bearer token, gets for one
    OpenAI Decisions question the probabilities POST /v1/decisions gives for it."""
    question = openai_decisions.choice("Which team should handle it?", TEAMS, name="team")
    routed_answer = client_route.ask(routed(route), TICKET, question)
    sent = openai_decisions.request(TICKET, [question])
    reply = urllib.request.urlopen(
        urllib.request.Request(
            adapter.url + "/v1/decisions", json.dumps(sent).encode(), {"Content-Type": "application/json"}
        ),
        timeout=300,
    )
    direct = openai_decisions.parse_response(json.load(reply), sent).answers[0]
    assert list(routed_answer.probabilities) == list(direct.probabilities) == list(TEAMS)
    assert list(routed_answer.probabilities.values()) == pytest.approx(list(direct.probabilities.values()), abs=1e-6)
    assert routed_answer.choice == direct.choice and routed_answer.readout == direct.readout
