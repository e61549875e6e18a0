"""Chat's pure pieces: what a stream may give out before a stop sequence is ruled out, cut multi-byte text,
the parameters refused by name, and the chunks a stream is made of (the live stream: tests/adapter/clients)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from decision_adapter.apis.chat import UNSUPPORTED, chunks, event, parse_chat
from decision_adapter.caller_errors import AdapterError, InvalidValue
from decision_adapter.chat_completion import Piece, decoded, held_back, token_logprobs

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "text, stops, kept",
    [
        ("Hello wor", ("world",), 3),
        ("Hello", ("world",), 0),
        ("ab", ("b", "bc"), 1),
        ("xyz", (), 0),
        ("the end.", (".\n",), 1),
    ],
)
def test_held_back_is_the_longest_tail_that_starts_a_stop(text, stops, kept):
    assert held_back(text, stops) == kept


def test_a_character_cut_between_tokens_waits_for_its_last_bytes():
    data = "naïve".encode()
    assert decoded(data[:3]) == "na" and decoded(data) == "naïve"


def test_logprobs_are_a_distribution_with_the_likeliest_first():
    logits = np.array([1.0, 3.0, 2.0, -1.0], dtype=np.float32)
    entry = token_logprobs(logits, 2, 3, str)
    assert [t["token"] for t in entry["top_logprobs"]] == ["1", "2", "0"]
    assert entry["token"] == "2" and entry["logprob"] == entry["top_logprobs"][1]["logprob"]
    assert sum(np.exp(t["logprob"]) for t in entry["top_logprobs"]) < 1.0
    assert np.exp([token_logprobs(logits, t, 0, str)["logprob"] for t in range(4)]).sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "name, value",
    [
        ("tools", [{"type": "function", "function": {"name": "f"}}]),
        ("tool_choice", "auto"),
        ("n", 3),
        ("response_format", {"type": "json_object"}),
        ("logit_bias", {"5": 1}),
        ("functions", [{"name": "f"}]),
        ("audio", {"voice": "x"}),
        ("modalities", ["text", "audio"]),
    ],
)
def test_unsupported_parameters_are_400s_naming_them(name, value):
    with pytest.raises(AdapterError) as raised:
        parse_chat({"messages": HI, name: value}, 32, streaming=True)
    assert (raised.value.status, raised.value.code, raised.value.field) == (400, "unsupported_parameter", name)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_values_that_ask_for_nothing_are_accepted(name):
    nothing = {"n": 1, "response_format": {"type": "text"}, "modalities": ["text"], "tool_choice": "none"}
    parse_chat({"messages": HI, name: nothing.get(name)}, 32)


def test_stream_only_where_the_route_streams_and_logprobs_parsed():
    with pytest.raises(AdapterError, match="stream"):
        parse_chat({"messages": HI, "stream": True}, 32)
    chat = parse_chat(
        {
            "messages": HI,
            "stream": True,
            "stream_options": {"include_usage": True},
            "logprobs": True,
            "top_logprobs": 3,
        },
        32,
        streaming=True,
    )
    assert chat.stream and chat.include_usage and chat.top_logprobs == 3
    assert parse_chat({"messages": HI, "logprobs": True}, 32).top_logprobs == 0
    assert parse_chat({"messages": HI}, 32).top_logprobs is None
    with pytest.raises(InvalidValue) as raised:
        parse_chat({"messages": HI, "top_logprobs": 2}, 32)
    assert raised.value.field == "top_logprobs"
    with pytest.raises(InvalidValue) as raised:
        parse_chat({"messages": HI, "logprobs": True, "top_logprobs": 21}, 32)
    assert raised.value.field == "top_logprobs"


def test_chunks_carry_the_role_the_text_the_finish_and_the_usage_last():
    chat = parse_chat({"messages": HI, "stream": True, "stream_options": {"include_usage": True}}, 32, streaming=True)
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    pieces = [Piece("He"), Piece("llo"), Piece(finish_reason="length", usage=usage)]
    made = list(chunks(chat, iter(pieces), "m"))
    assert len({c["id"] for c in made}) == 1 and all(c["object"] == "chat.completion.chunk" for c in made)
    assert made[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in made if c["choices"]) == "Hello"
    assert made[-2]["choices"][0]["finish_reason"] == "length" and made[-2]["usage"] is None
    assert made[-1]["choices"] == [] and made[-1]["usage"] == usage


def test_an_event_is_one_line_whatever_the_model_generated():
    text = "a\u2028b\x85c\x1cd\re\nf"
    raw = event({"choices": [{"delta": {"content": text}}]})
    line = raw.decode("ascii")
    assert line.endswith("\n\n") and len(line[:-2].splitlines()) == 1
    assert json.loads(line[len("data: ") :])["choices"][0]["delta"]["content"] == text
