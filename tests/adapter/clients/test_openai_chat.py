"""The official ``openai`` library against a live adapter over HTTP: chat (plain and streamed), the model
list, refused parameters and the model-name rule, as a user pointing ``base_url`` at the adapter would.

The tiny test model has no signal: these check mechanics (streamed chunks join to the plain answer at
temperature 0, the stream's framing, usage, a client leaving mid-stream frees the model), not content.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import openai
import pytest

from tests.support.adapters import TEST_ENV

ASK = [{"role": "user", "content": "Count from one to twenty in words, one per line."}]
STRICT_ENV = {**TEST_ENV, "DECISION_ADAPTER_STRICT_MODEL_NAMES": "on"}


def client_for(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def client(adapter):
    return client_for(adapter)


def served_name(client) -> str:
    return client.models.list().data[0].id


def test_models_list_gives_the_served_name_and_keeps_jevs_models(client, adapter):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert "jev-latest" in ids and all(m.object == "model" and m.owned_by for m in models.data)
    with urllib.request.urlopen(adapter.url + "/v1/models") as reply:
        raw = json.load(reply)
    assert raw["object"] == "list" and [m["name"] for m in raw["models"]] == ids


def test_a_plain_chat(client):
    answer = client.chat.completions.create(
        model=served_name(client), messages=ASK, max_completion_tokens=8, temperature=0
    )
    choice = answer.choices[0]
    assert answer.object == "chat.completion" and choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length") and isinstance(choice.message.content, str)
    assert answer.usage.completion_tokens <= 8
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens


def test_streamed_chunks_join_to_the_plain_answer_at_temperature_0(client):
    kwargs = dict(model="anything", messages=ASK, max_tokens=24, temperature=0, seed=7, logprobs=True, top_logprobs=2)
    plain = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [plain.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == plain.usage.model_dump()
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in plain.choices[0].logprobs.content]
    assert len(streamed) == plain.usage.completion_tokens
    for entry in streamed:  # the sampled token at temperature 0 is the likeliest one
        assert len(entry.top_logprobs) == 2 and entry.logprob <= 0
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob)


def test_stop_ends_the_answer_before_the_stop_text(client):
    plain = client.chat.completions.create(model="x", messages=ASK, max_tokens=16, temperature=0)
    text = plain.choices[0].message.content
    if len(text.strip()) < 2:
        pytest.skip("the model answered too little to cut")
    stop = text.strip()[1:3]
    cut = client.chat.completions.create(model="x", messages=ASK, max_tokens=16, temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop" and stop not in cut.choices[0].message.content
    assert text.startswith(cut.choices[0].message.content)
    streamed = client.chat.completions.create(
        model="x", messages=ASK, max_tokens=16, temperature=0, stop=stop, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == cut.choices[0].message.content


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}, "tools"),
        ({"n": 2}, "n"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}},
            "response_format",
        ),
        ({"logit_bias": {"1": 5}}, "logit_bias"),
    ],
)
def test_unsupported_parameters_are_400s_naming_them(client, extra, param):
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="x", messages=ASK, max_tokens=2, **extra)
    error = raised.value.body
    assert raised.value.status_code == 400
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, "unsupported_parameter")
    assert param in error["message"]


def test_any_model_name_is_answered_by_the_served_model(client, adapter):
    served = served_name(client)
    answer = client.chat.completions.create(model="gpt-nothing", messages=ASK, max_tokens=2)
    assert answer.model.removesuffix(".gguf") == served
    body = {
        "model": "gpt-nothing",
        "input": "The parcel never arrived.",
        "questions": [{"type": "predicate", "name": "late", "instructions": "Is the parcel late?"}],
    }
    request = urllib.request.Request(
        adapter.url + "/v1/decisions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request) as reply:
        assert json.load(reply)["model"] == served


def test_strict_model_names_refuse_other_names_naming_the_served_one(adapters):
    strict = client_for(adapters.shared(**STRICT_ENV))
    served = served_name(strict)
    with pytest.raises(openai.NotFoundError) as raised:
        strict.chat.completions.create(model="gpt-nothing", messages=ASK, max_tokens=2)
    assert raised.value.body["code"] == "model_not_found" and served in raised.value.body["message"]
    for name in (served, "jev-latest"):
        assert strict.chat.completions.create(model=name, messages=ASK, max_tokens=2).choices
    body = {
        "model": "gpt-nothing",
        "input": "x",
        "questions": [{"type": "predicate", "name": "q", "instructions": "Is it?"}],
    }
    request = urllib.request.Request(
        str(strict.base_url).rstrip("/") + "/decisions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 404 and json.load(refused.value)["error"]["code"] == "model_not_found"
    jev_body = {"model": "gpt-nothing", "state": "x", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}
    jev = urllib.request.Request(
        str(strict.base_url).rstrip("/") + "/systemone",
        json.dumps(jev_body).encode(),
        {"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(jev)
    assert refused.value.code == 404 and json.load(refused.value)["detail"]["error_type"] == "not_found_error"


def _status(server) -> dict:
    with urllib.request.urlopen(server.url + "/status") as reply:
        return json.load(reply)


def test_a_client_leaving_mid_stream_frees_the_model(adapters):
    # One context and a waiting line of 0: while a request holds the model, any other is refused at once (503),
    # so a 200 for the next request proves the first one let go of the model.
    server = adapters.shared(
        **{
            **TEST_ENV,
            "DECISION_ADAPTER_MAX_QUEUE": "0",
            "SM_LLAMA_CPP_PARALLEL": "1",
            "DECISION_ADAPTER_CHAT_MAX_TOKENS": "2000",
        }
    )
    client = client_for(server)
    long = dict(model="x", messages=ASK, max_tokens=2000, temperature=1.0, seed=3)
    stream = client.chat.completions.create(**long, stream=True)
    received = 0
    for chunk in stream:
        received += bool(chunk.choices and chunk.choices[0].delta.content)
        if received == 3:
            break
    assert _status(server)["busy"]  # the stream holds the model
    with pytest.raises(openai.APIStatusError) as busy:
        client.chat.completions.create(model="x", messages=ASK, max_tokens=1)
    assert busy.value.status_code == 503
    stream.close()  # the client leaves with up to 1,997 tokens to go
    for _ in range(200):  # the server notices at its next write; each token is a write
        if not _status(server)["busy"]:
            break
        time.sleep(0.05)
    answer = client.chat.completions.create(model="x", messages=ASK, max_tokens=1)
    assert answer.choices[0].finish_reason in ("stop", "length")
