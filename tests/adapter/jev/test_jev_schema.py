"""The adapter's Jev layer without a model: validation, formulas, error shapes, body decoding."""

from __future__ import annotations

import gzip
import math

import pytest

from decision_adapter.apis.invocations import request_kind
from decision_adapter.apis.systemone import answer, check_model, error_body, error_status, option_texts
from decision_adapter.apis.systemone_requests import JevValidationError, parse_systemone
from decision_adapter.apis.typed import choice_confidence, score_confidence
from decision_adapter.app import decode_body
from decision_adapter.caller_errors import AdapterError, Busy, InvalidType, PromptTooLong, Unauthorized
from decision_adapter.prompt import option_labels
from tests.support.answer_records import record


def test_questions_keep_their_order_and_types():
    request = parse_systemone(
        {
            "state": {"a": 1},
            "questions": {
                "z": {"type": "score", "criteria": ["low", {"label": "high"}]},
                "a": {"type": "noul", "criteria": {"false": "no refund wanted"}, "x_note": "extensions are fine"},
                "m": {"type": "choice", "instructions": ["route", "it"], "criteria": {"B": None, "A": "first"}},
            },
            "seed": 7,
        }
    )  # unknown top-level fields are ignored
    assert [q.key for q in request.questions] == ["z", "a", "m"] and request.model is None
    z, a, m = request.questions
    assert z.names == ("0", "1") and a.names == ("true", "false") and m.names == ("B", "A")
    assert option_texts(a) == ["Yes", "No: no refund wanted"]
    assert option_texts(m) == ["B", "A: first"]
    assert option_texts(z) == ["low", '{"label": "high"}']


def test_every_problem_is_reported_at_once():
    with pytest.raises(JevValidationError) as raised:
        parse_systemone(
            {
                "model": 3,
                "questions": {"a": {"type": "choice", "criteria": {}}, "b": {"type": "score", "criteria": "low, high"}},
            }
        )
    locs = [e["loc"] for e in raised.value.errors]
    assert locs == [
        ["body", "model"],
        ["body", "state"],
        ["body", "questions", "a", "criteria"],
        ["body", "questions", "b", "criteria"],
    ]
    assert error_status(raised.value) == 422 and error_body(raised.value) == {"detail": raised.value.errors}


def test_request_kind_tells_jev_from_the_shared_state_batch():
    assert request_kind({"state": "s", "questions": {"q": {"type": "noul"}}}) == "systemone"
    assert request_kind({"id": "b", "state": "s", "questions": []}) == "decision"


def test_labels_are_letters_then_two_level_codes():
    assert option_labels(3) == ("A", "B", "C")
    assert option_labels(16)[-1] == "P"
    codes = option_labels(255)
    assert codes[:3] == ("A0", "A1", "A2") and codes[10] == "B0" and codes[-1] == "Z4"
    assert len(set(codes)) == 255


def test_confidence_formulas():
    assert choice_confidence([0.5, 0.5]) == 0.0 and choice_confidence([1.0, 0.0, 0.0]) == 1.0
    assert math.isclose(choice_confidence([0.6, 0.3, 0.1]), (0.6 - 1 / 3) / (2 / 3))
    assert score_confidence([0.0, 1.0, 0.0]) == 1.0
    assert score_confidence([1 / 3] * 3) == 0.0  # uniform: spread 2/3 = the uniform spread
    assert score_confidence([0.5, 0.0, 0.5]) == 0.0  # clipped at 0


def test_answers_follow_the_wire_format():
    request = parse_systemone(
        {
            "state": "s",
            "questions": {
                "n": {"type": "noul", "instructions": "q?"},
                "c": {"type": "choice", "criteria": {"x": None, "y": None}},
                "s": {"type": "score", "criteria": ["a", "b", "c"]},
            },
        }
    )
    result = {"method": "letter-slots", "input_tokens": 9, "allowed_token_mass": 0.1}
    n, c, s = request.questions
    assert answer(n, record([0.7, 0.3], **result))["noul"] == 0.7
    tie = answer(c, record([0.5, 0.5], **result))
    assert tie["choice"] == "x" and tie["probabilities"] == {"x": 0.5, "y": 0.5}
    scored = answer(s, record([0.2, 0.3, 0.5], **result))
    assert math.isclose(scored["score"], 1.3) and scored["legend"] == {"0": "a", "1": "b", "2": "c"}
    assert all(
        k.startswith("x_") for k in scored if k not in ("type", "score", "legend", "probabilities", "confidence")
    )


def test_unknown_models_are_refused_aliases_accepted():
    info = {"file": "Qwen_Qwen3.5-4B-Q4_K_M.gguf"}
    for name in (None, "jev-latest", "Qwen_Qwen3.5-4B-Q4_K_M", "Qwen_Qwen3.5-4B-Q4_K_M.gguf", "Qwen3.5-4B Q4_K_M"):
        check_model(name, info, {"model": {"name": "Qwen3.5-4B Q4_K_M"}})
    with pytest.raises(AdapterError) as raised:
        check_model("gpt-4", info, None)
    assert raised.value.status == 404 and error_body(raised.value)["detail"]["error_type"] == "not_found_error"


@pytest.mark.parametrize(
    "exc, status, shape",
    [
        (
            InvalidType("the body is not valid JSON", None),
            422,
            [{"loc": ["body"], "msg": "the body is not valid JSON", "type": "invalid_type"}],
        ),
        (
            PromptTooLong("too long", "state", loc=("body", "questions", "q")),
            422,
            [{"loc": ["body", "questions", "q"], "msg": "too long", "type": "prompt_too_long"}],
        ),
        (Busy("busy", 1), 503, {"error_type": "overloaded_error", "message": "busy"}),
        (Unauthorized("no key"), 401, {"error_type": "authentication_error", "message": "no key"}),
        (AdapterError("boom", status=500, code="internal_error"), 500, {"error_type": "api_error", "message": "boom"}),
    ],
)
def test_adapter_errors_in_jev_shape(exc, status, shape):
    assert error_status(exc) == status and error_body(exc) == {"detail": shape}


def test_decode_body_gzip_and_limits():
    data = b'{"state": "s"}'
    assert decode_body(data, None, 100) == data
    assert decode_body(gzip.compress(data), "gzip", 100) == data
    with pytest.raises(AdapterError) as too_big:
        decode_body(gzip.compress(b" " * 10_000), "gzip", 1000)  # a small body that inflates past the limit
    assert too_big.value.status == 413
    with pytest.raises(AdapterError) as not_gzip:
        decode_body(b"plain", "gzip", 100)
    assert not_gzip.value.status == 400
    with pytest.raises(AdapterError) as unknown:
        decode_body(data, "br", 100)
    assert unknown.value.status == 415 and "compression=False" in unknown.value.message


def test_decode_body_zstd_when_python_has_it():
    class FakeZstd:  # the interface of compression.zstd / backports.zstd
        class ZstdError(Exception):
            pass

        class ZstdDecompressor:
            def decompress(self, raw, max_length=-1):
                return raw[::-1][:max_length]

    assert decode_body(b"}{", "zstd", 100, zstd_module=FakeZstd) == b"{}"
    with pytest.raises(AdapterError) as too_big:
        decode_body(b"x" * 200, "zstd", 100, zstd_module=FakeZstd)
    assert too_big.value.status == 413


def test_a_question_refuses_unknown_fields_other_than_extensions():
    with pytest.raises(JevValidationError) as raised:
        parse_systemone(
            {"state": "s", "questions": {"q": {"type": "choice", "criterias": {"a": None, "b": None}, "x_fine": 1}}}
        )
    items = {tuple(e["loc"]): e["type"] for e in raised.value.errors}
    assert items[("body", "questions", "q", "criterias")] == "extra_forbidden"
    assert items[("body", "questions", "q", "criteria")] == "missing"
    assert ("body", "questions", "q", "x_fine") not in items


@pytest.mark.parametrize(
    "question, loc, kind",
    [
        ({"instructions": "?"}, ["body", "questions", "q", "type"], "missing"),
        ({"type": "box"}, ["body", "questions", "q", "type"], "unsupported"),
        ({"type": "pick"}, ["body", "questions", "q", "type"], "literal_error"),
        ("noul", ["body", "questions", "q"], "dict_type"),
        ({"type": "noul"}, ["body", "questions", "q", "instructions"], "missing"),
        (
            {"type": "noul", "criteria": {"maybe": "x"}},
            ["body", "questions", "q", "criteria", "maybe"],
            "extra_forbidden",
        ),
        ({"type": "score", "criteria": {"0": "a", "1": "b"}}, ["body", "questions", "q", "criteria"], "list_type"),
        (
            {"type": "choice", "criteria": {"": "x", "b": None}},
            ["body", "questions", "q", "criteria", ""],
            "string_too_short",
        ),
        (
            {"type": "choice", "criteria": {"a": 1, "b": None}},
            ["body", "questions", "q", "criteria", "a"],
            "content_type",
        ),
    ],
)
def test_each_problem_has_its_location_and_type(question, loc, kind):
    with pytest.raises(JevValidationError) as raised:
        parse_systemone({"state": "s", "questions": {"q": question}})
    assert [(e["loc"], e["type"]) for e in raised.value.errors] == [(loc, kind)]
