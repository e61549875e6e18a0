"""The decision wire (decision_contract.wire) between a real adapter process and the workshop's client, over
HTTP: every response names the adapter's wire version, the client reads answers of its own version and
refuses another naming both, and each dialect's answer names the readout that read it in the contract's terms.
"""

from __future__ import annotations

import pytest

from decision_contract import names, wire
from tests.support.adapters import JEV_ENV
from tests.support.http_client import call
from workshop_lib.client import EndpointClient, WireVersionMismatch, decision, jev
from workshop_lib.client import openai_decisions as od

pytestmark = pytest.mark.slow

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants the money back."
OPTIONS = {"refunds": "Refunds and returns", "shipping": "Shipping and delivery", "sales": "Sales"}


@pytest.fixture(scope="module")
def adapter(adapters):
    """The process the System One and Decisions API tests use: its request time limit holds on a busy machine."""
    return adapters.shared(**JEV_ENV)


def _header(headers: dict, name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name.lower()), None)


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/invocations", decision("w-1", STATE, "Which team?", OPTIONS)),
        ("POST", "/invocations", {"id": "w-2", "state": STATE}),  # refused: an error answer says it too
        ("GET", "/ping", None),
    ],
)
def test_every_response_names_the_adapters_wire_version(adapter, method, path, body):
    status, headers, _ = call(adapter.url + path, body, method=method, timeout=300.0)
    assert status in (200, 400, 422)
    assert wire.version_in(_header(headers, wire.VERSION_HEADER)) == wire.WIRE_VERSION


def test_the_client_reads_an_answer_of_its_own_version_by_the_one_rule(adapter):
    made = EndpointClient.local(adapter.url, timeout_s=300.0).decide(decision("w-3", STATE, "Which team?", OPTIONS))
    assert wire.answer_problem(list(OPTIONS), made.option_ids, made.probabilities) is None
    assert made.readout == names.LETTERS  # this version's letters answers name no readout: the wire reads letters


def test_a_client_of_another_version_refuses_the_adapters_answer_naming_both(adapter, monkeypatch):
    monkeypatch.setattr(wire, "WIRE_VERSION", "decision-wire/999")  # this process only: the client's side
    client = EndpointClient.local(adapter.url, timeout_s=300.0)
    with pytest.raises(WireVersionMismatch) as caught:
        client.decide(decision("w-4", STATE, "Which team?", OPTIONS))
    assert "speaks decision-wire/1, this client decision-wire/999" in str(caught.value)
    assert client.chat("Say hi.", max_tokens=2).finish_reason is not None  # chat is not held to the decision wire


@pytest.mark.parametrize("readout", names.READOUTS)
def test_each_dialects_answer_names_the_readout_that_read_it(adapter, readout):
    client = EndpointClient.local(adapter.url, timeout_s=300.0, readout=readout)
    (made,) = client.decide_batch(
        "w-5",
        STATE,
        [{"id": "q", "question": "Which team?", "options": [{"id": k, "text": v} for k, v in OPTIONS.items()]}],
    )
    assert made.readout == readout
    answered = client.systemone(
        STATE,
        {"team": jev.choice("Which team?", OPTIONS), "refund": jev.noul("Does the customer want the money back?")},
    )
    assert {a.readout for a in answered.answers.values()} == {readout}


def test_the_openai_decisions_answer_names_the_servers_readout(adapter):
    result = EndpointClient.local(adapter.url, timeout_s=300.0).openai_decisions(
        STATE, [od.choice("Which team?", list(OPTIONS), name="team"), od.predicate("It is about money.", name="m")]
    )
    served = result.answers[0].raw.get(wire.X_READOUT)
    assert served in names.READOUTS and {a.readout for a in result.answers} == {served}
