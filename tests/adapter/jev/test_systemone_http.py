"""Jev's System One API on a real adapter process: answers, invariances, errors, API key."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from tests.support.adapters import JEV_API_KEY, JEV_ENV
from tests.support.http_client import call as _call

TICKET = (
    "I was charged twice for my March invoice and the refund I was promised has not arrived. "
    "Fix it today or I will dispute the charge with my bank."
)
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
CHOICE = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {"Billing": "Payments, invoices, refunds", "Technical": None, "Sales": "Pricing, upgrades"},
}
SCORE = {
    "type": "score",
    "instructions": "How frustrated is the customer?",
    "criteria": ["Calm", "Frustrated", "Very angry"],
}


def call(url, body=None, **kw):
    kw.setdefault("timeout", 300.0)  # a 255-option choice takes minutes on 2 shared cores
    return _call(url, body, **kw)


def ask(adapter, questions, state=TICKET, path="/v1/systemone", **extra):
    body = {"model": "jev-latest", "state": state, "questions": questions, **extra}
    status, _, reply = call(adapter.url + path, body)
    assert status == 200, reply
    return reply


def numbers(answer: dict) -> dict:
    """What an answer commits to, for comparing two answers to the same question."""
    if answer["type"] == "noul":
        return {"noul": answer["noul"]}
    return dict(answer["probabilities"])


def same(a: dict, b: dict, tol=1e-6) -> bool:
    na, nb = numbers(a), numbers(b)
    return na.keys() == nb.keys() and all(math.isclose(na[k], nb[k], abs_tol=tol) for k in na)


def test_models_lists_the_served_model_and_the_alias(adapters):
    server = adapters.shared(**JEV_ENV)
    status, headers, body = call(server.url + "/v1/models")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    names = [m["name"] for m in body["models"]]
    assert names == ["SmolLM2-135M-Instruct.Q4_1", "jev-latest"]
    assert all(set(m) >= {"name", "description", "release_date"} for m in body["models"])


def test_three_question_types_in_one_request(adapters):
    server = adapters.shared(**JEV_ENV)
    reply = ask(server, {"refund": NOUL, "team": CHOICE, "anger": SCORE})
    assert reply["model"] == "SmolLM2-135M-Instruct.Q4_1"  # the real model, though jev-latest was asked for
    assert set(reply["answers"]) == {"refund", "team", "anger"}
    usage = reply["usage"]
    assert usage["output_tokens"] == 0 and isinstance(usage["input_tokens"], int)
    # the state is read once: fewer tokens than the three prompts added up
    prompts = sum(a["x_input_tokens"] for a in reply["answers"].values())
    assert reply["x_timing"]["shared_prefix_tokens"] < usage["input_tokens"] < prompts

    refund = reply["answers"]["refund"]
    assert refund["type"] == "noul" and 0.0 <= refund["noul"] <= 1.0

    team = reply["answers"]["team"]
    p = team["probabilities"]
    assert list(p) == ["Billing", "Technical", "Sales"] and math.isclose(sum(p.values()), 1.0, abs_tol=1e-9)
    assert team["choice"] == max(p, key=p.get)
    assert math.isclose(team["confidence"], (max(p.values()) - 1 / 3) / (1 - 1 / 3), abs_tol=1e-9)
    assert team["x_readout"] == "letter-slots" and "letter-slots" in reply["x_readout_methods"]

    anger = reply["answers"]["anger"]
    levels = anger["probabilities"]
    assert list(levels) == ["0", "1", "2"] and math.isclose(sum(levels.values()), 1.0, abs_tol=1e-9)
    assert math.isclose(anger["score"], sum(i * levels[str(i)] for i in range(3)), abs_tol=1e-9)
    assert anger["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert 0.0 <= anger["confidence"] <= 1.0


def test_jevcompat_finds_only_audit_unprefixed_and_the_request_id_is_x_prefixed(adapters):
    from jevcompat.client import Client
    from jevcompat.validate import validate_success

    server = adapters.shared(**JEV_ENV)
    questions = {"refund": NOUL, "team": CHOICE, "anger": SCORE}
    for path in ("/v1/systemone", "/invocations"):  # one dialect: the same body answered the same way
        response = Client(server.url).post_json(path, {"model": "jev-latest", "state": TICKET, "questions": questions})
        assert response.status == 200, response.excerpt()
        body = response.data
        # audit stays unprefixed on purpose: avrik-sdk's Decision requires it under that name
        assert [(v.req, v.message) for v in validate_success({"questions": questions}, response)] == [
            ("response.extensions", "unprefixed top-level field(s) audit")
        ]
        assert "request_id" not in body and body["x_request_id"] == response.headers["x-request-id"]
    status, _headers, error = call(
        server.url + "/v1/systemone", {"state": TICKET, "questions": {}}, headers={"X-Request-Id": "jev-error-1"}
    )
    assert status == 422 and "request_id" not in error and error["x_request_id"] == "jev-error-1"


def test_an_answer_depends_on_nothing_but_its_own_question(adapters):
    server = adapters.shared(**JEV_ENV)
    alone = ask(server, {"team": CHOICE})["answers"]["team"]
    crowd = ask(
        server,
        {"refund": NOUL, "anger": SCORE, "team": CHOICE, "urgent": {"type": "noul", "instructions": "Is it urgent?"}},
    )["answers"]
    renamed_reordered = ask(server, {"zz 🙂 renamed": CHOICE, "refund": NOUL})["answers"]
    assert same(alone, crowd["team"])
    assert same(alone, renamed_reordered["zz 🙂 renamed"])
    assert alone["x_prompt_sha256"] == renamed_reordered["zz 🙂 renamed"]["x_prompt_sha256"]
    # the same question twice in one request gets the same answer twice
    twice = ask(server, {"a": SCORE, "b": SCORE})["answers"]
    assert same(twice["a"], twice["b"], tol=0)


def test_structured_state_instructions_and_descriptions_render_deterministically(adapters):
    server = adapters.shared(**JEV_ENV)
    question = {
        "type": "choice",
        "instructions": {"task": "Route the ticket", "teams": ["billing", "tech"]},
        "criteria": {"Billing": {"owns": ["invoices", "refunds"], "sla": "1 day"}, "Technical": ["bugs"]},
    }
    shuffled = {
        "type": "choice",
        "instructions": {"teams": ["billing", "tech"], "task": "Route the ticket"},
        "criteria": {"Billing": {"sla": "1 day", "owns": ["invoices", "refunds"]}, "Technical": ["bugs"]},
    }
    state = {"subject": "Charged twice", "customer": {"plan": "pro", "tickets": 3}, "lines": ["a", "b"]}
    first = ask(server, {"q": question}, state=state)["answers"]["q"]
    second = ask(server, {"q": shuffled}, state=dict(reversed(list(state.items()))))["answers"]["q"]
    assert first["x_prompt_sha256"] == second["x_prompt_sha256"] and same(first, second, tol=0)
    levels = [{"label": "Calm"}, {"label": "Angry", "signals": ["threats"]}]
    score = ask(
        server,
        {"s": {"type": "score", "instructions": ["How", "angry?"], "criteria": levels}},
        state=["one line", "two lines"],
    )["answers"]["s"]
    assert score["legend"] == {"0": levels[0], "1": levels[1]}


def test_more_than_sixteen_options_use_the_two_level_readout(adapters):
    server = adapters.shared(**JEV_ENV)
    options = {f"Queue {i:02d}": (f"Tickets about topic {i}" if i % 3 else None) for i in range(40)}
    reply = ask(server, {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": options}})
    answer = reply["answers"]["queue"]
    p = answer["probabilities"]
    assert list(p) == list(options) and all(0.0 <= v <= 1.0 for v in p.values())
    assert math.isclose(sum(p.values()), 1.0, abs_tol=1e-9)
    assert answer["x_readout"] == "two-level-codes" and answer["x_forward_passes"] == 1 + 4  # 4 groups of 10
    assert answer["choice"] == max(p, key=p.get)
    assert "two-level-codes" in reply["x_readout_methods"]
    # the readout's extra tokens are input the model read
    assert reply["usage"]["input_tokens"] == answer["x_input_tokens"] + 4


def test_the_same_body_on_invocations_and_the_project_batch_beside_it(adapters):
    server = adapters.shared(**JEV_ENV)
    body = {"state": TICKET, "questions": {"team": CHOICE}}  # no model: the served one
    status, _, via_invocations = call(server.url + "/invocations", body)
    assert status == 200
    direct = ask(server, {"team": CHOICE})
    assert same(via_invocations["answers"]["team"], direct["answers"]["team"], tol=0)
    batch = {
        "id": "b-1",
        "state": TICKET,
        "questions": [{"id": "team", "question": "Which team?", "options": ["billing", "tech"]}],
    }
    status, _, reply = call(server.url + "/invocations", batch)
    assert status == 200 and reply["results"][0]["id"] == "team"


def test_gzip_bodies_are_accepted(adapters):
    server = adapters.shared(**JEV_ENV)
    raw = gzip.compress(json.dumps({"state": TICKET, "questions": {"refund": NOUL}}).encode())
    status, _, reply = call(server.url + "/v1/systemone", raw=raw, headers={"Content-Encoding": "gzip"})
    assert status == 200 and reply["answers"]["refund"]["type"] == "noul"


BASE = {"model": "jev-latest", "state": TICKET, "questions": {"refund": NOUL}}
INVALID = [
    ("not JSON", dict(raw=b'{"state": "x", "questions": {'), ["body"]),
    ("missing state", dict(body={"questions": {"refund": NOUL}}), ["body", "state"]),
    ("null state", dict(body={**BASE, "state": None}), ["body", "state"]),
    ("missing questions", dict(body={"state": TICKET}), ["body", "questions"]),
    ("empty questions", dict(body={**BASE, "questions": {}}), ["body", "questions"]),
    (
        "unknown type",
        dict(body={**BASE, "questions": {"q": {"type": "boolean", "instructions": "x?"}}}),
        ["body", "questions", "q", "type"],
    ),
    (
        "one option",
        dict(body={**BASE, "questions": {"q": {"type": "choice", "criteria": {"A": None}}}}),
        ["body", "questions", "q", "criteria"],
    ),
    (
        "256 options",
        dict(body={**BASE, "questions": {"q": {"type": "choice", "criteria": {f"o{i}": None for i in range(256)}}}}),
        ["body", "questions", "q", "criteria"],
    ),
    (
        "map-form score",
        dict(body={**BASE, "questions": {"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}}}),
        ["body", "questions", "q", "criteria"],
    ),
    (
        "eleven levels",
        dict(body={**BASE, "questions": {"q": {"type": "score", "criteria": list("abcdefghijk")}}}),
        ["body", "questions", "q", "criteria"],
    ),
    (
        "null level",
        dict(body={**BASE, "questions": {"q": {"type": "score", "criteria": ["a", None]}}}),
        ["body", "questions", "q", "criteria", 1],
    ),
    (
        "noul with nothing to ask",
        dict(body={**BASE, "questions": {"q": {"type": "noul"}}}),
        ["body", "questions", "q", "instructions"],
    ),
    (
        "misspelt field",
        dict(body={**BASE, "questions": {"q": {"type": "noul", "instruction": "x?"}}}),
        ["body", "questions", "q", "instruction"],
    ),
    ("state too long for the context", dict(body={**BASE, "state": "word " * 9000}), ["body", "questions", "refund"]),
    (
        "unpaired surrogate",
        dict(raw=b'{"state": "s", "questions": {"q\\udc00": {"type": "noul", "instructions": "x?"}}}'),
        ["body"],
    ),
    (
        "5000-digit integer",
        dict(raw=b'{"state": {"n": ' + b"7" * 5000 + b'}, "questions": {"q": {"type": "noul"}}}'),
        ["body"],
    ),
]


@pytest.mark.parametrize("kwargs, loc", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_requests_get_422_with_a_detail_list(adapters, kwargs, loc):
    server = adapters.shared(**JEV_ENV)
    status, headers, body = call(server.url + "/v1/systemone", **kwargs)
    assert status == 422 and headers["Content-Type"].startswith("application/json")
    detail = body["detail"]
    assert isinstance(detail, list) and detail[0]["loc"] == loc
    assert all(isinstance(d["msg"], str) and isinstance(d["type"], str) for d in detail)


def test_a_jev_body_on_invocations_gets_jev_errors_and_a_project_body_the_project_shape(adapters):
    server = adapters.shared(**JEV_ENV)
    status, _, body = call(server.url + "/invocations", {"state": TICKET, "questions": {}})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "questions"]
    status, _, body = call(
        server.url + "/invocations", {"id": "x", "state": " ", "question": "q", "options": ["a", "b"]}
    )
    assert status == 422 and body["error"]["field"] == "state"


@pytest.mark.parametrize(
    "method, path, kwargs, status, error_type",
    [
        (
            "POST",
            "/v1/systemone",
            dict(raw=b"{}", headers={"Content-Type": "text/plain"}),
            415,
            "invalid_request_error",
        ),
        ("POST", "/v1/systemone", dict(raw=b"{}", headers={"Content-Encoding": "br"}), 415, "invalid_request_error"),
        ("GET", "/v1/systemone", {}, 405, "invalid_request_error"),
        ("GET", "/v1/nowhere", {}, 404, "not_found_error"),
    ],
)
def test_other_errors_carry_error_type_and_message(adapters, method, path, kwargs, status, error_type):
    server = adapters.shared(**JEV_ENV)
    got, _, body = call(server.url + path, method=method, **kwargs)
    assert got == status
    assert body["detail"]["error_type"] == error_type and body["detail"]["message"]


def test_without_a_key_an_authorization_header_is_ignored(adapters):
    server = adapters.shared(**JEV_ENV)
    status, _, _ = call(server.url + "/v1/systemone", BASE, headers={"Authorization": "Bearer anything"})
    assert status == 200


def test_with_a_key_every_route_but_ping_needs_it(adapters):
    keyed = adapters.shared(**JEV_ENV, DECISION_ADAPTER_API_KEY=JEV_API_KEY)
    url = keyed.url
    assert call(url + "/ping")[0] == 200
    good = {"Authorization": f"Bearer {JEV_API_KEY}"}
    assert call(url + "/v1/systemone", BASE, headers=good)[0] == 200
    assert call(url + "/v1/models", headers=good)[0] == 200
    for headers in (
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": f"Basic {JEV_API_KEY}"},
        {"Authorization": JEV_API_KEY},
    ):
        for method, path, body in (
            ("POST", "/v1/systemone", BASE),
            ("GET", "/v1/models", None),
            ("POST", "/invocations", BASE),
            ("GET", "/nowhere", None),
        ):
            status, got_headers, reply = call(url + path, body, method=method, headers=headers)
            assert status == 401, (path, headers)
            assert reply["detail"]["error_type"] == "authentication_error"
            assert got_headers.get("WWW-Authenticate") == "Bearer"
            assert JEV_API_KEY not in json.dumps(reply)
    # /invocations answers 401 before it knows the body's schema: readable by either kind of client
    _, _, reply = call(url + "/invocations", {"id": "x"})
    assert reply["error"]["code"] == "authentication_error"
    decision = {"id": "d", "state": "s", "question": "q?", "options": ["a", "b"]}
    assert call(url + "/invocations", decision, headers=good)[0] == 200
