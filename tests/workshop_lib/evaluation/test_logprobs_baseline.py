"""The letter-probability baseline: real llama-server answers parsed, options missing from the top
tokens made invalid (never guessed), and its prompt held to the adapter's own.

llama-server runs on the embedded model (loopback, its own process group, stopped by the fixture's
finalizer); it is found as the workshop finds it (benchmarks/servers.py), and the tests that need it
are skipped, saying why, where no build exists.
"""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from benchmarks.servers import LlamaServerProcess, find_llama_server
from workshop_lib.client import EndpointClient
from workshop_lib.evaluation import run_benchmark
from workshop_lib.evaluation.logprobs import (
    LETTERS,
    NoLogprobs,
    agreement,
    decision_messages,
    first_token_logprobs,
    logprobs_payload,
    logprobs_result,
    read_letters,
    run_logprobs_baseline,
    task_messages,
    url_client,
)
from workshop_lib.evaluation.runner import TaskResult
from workshop_lib.evaluation.tasks import Task, load_tasks
from workshop_lib.local import post_json

LLAMA_SERVER = find_llama_server()
needs_llama_server = pytest.mark.skipif(
    LLAMA_SERVER is None, reason="no llama-server build (WORKSHOP_LLAMA_SERVER, .llama.cpp/bin/llama-server or PATH)"
)


@pytest.fixture(scope="module")
def llama_server(embedded_gguf, tmp_path_factory):
    server = LlamaServerProcess(
        LLAMA_SERVER, embedded_gguf, log_path=tmp_path_factory.mktemp("llama") / "server.log", threads=2, context=4096
    )
    try:
        server.start(timeout_s=120)
        yield server
    finally:
        server.stop()


def task(n: int, tid: str = "t") -> Task:
    options = tuple((f"opt{i}", f"the option numbered {i}") for i in range(n))
    return Task(
        id=f"{tid}{n}",
        family="synthetic",
        type="choice",
        state="A customer writes about an invoice.",
        question="Which option fits the message?",
        options=options,
        expected="opt0",
    )


def reply_with(top: dict[str, float]) -> dict:
    """An OpenAI chat reply's shape, with these first-token logprobs (for the pure parts)."""
    first = next(iter(top))
    return {
        "choices": [
            {
                "message": {"content": first},
                "logprobs": {
                    "content": [
                        {
                            "token": first,
                            "logprob": top[first],
                            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top.items()],
                        }
                    ]
                },
            }
        ]
    }


# -- pure parts ---------------------------------------------------------------------------


def test_read_letters_renormalises_over_the_letters_only_when_all_are_there():
    top = {"A": math.log(0.3), "The": math.log(0.4), "B": math.log(0.1), " C": math.log(0.05)}
    two = read_letters(top, 2)
    assert two["missing"] == [] and two["found"] == ["A", "B"]
    assert two["probabilities"] == pytest.approx([0.75, 0.25])
    assert two["letter_mass"] == pytest.approx(0.4)
    three = read_letters(top, 3)  # " C" is another token than the slot "C"
    assert three["missing"] == ["C"] and three["probabilities"] is None
    assert three["letter_mass"] == pytest.approx(0.4)


def test_a_missing_option_makes_the_answer_invalid_and_is_not_guessed():
    t = task(3)
    result = logprobs_result(t, reply_with({"B": -0.5, "A": -1.5, "x": -2.0}))
    assert not result.valid and result.probabilities is None and result.predicted is None and not result.correct
    assert result.extra["missing"] == ["C"] and "C" in result.error and "top 20" in result.error
    complete = logprobs_result(t, reply_with({"B": -0.5, "A": -1.5, "C": -3.0}))
    assert complete.valid and complete.predicted == "opt1"
    assert sum(complete.probabilities.values()) == pytest.approx(1.0)
    assert list(complete.probabilities) == ["opt0", "opt1", "opt2"]


def test_a_reply_without_logprobs_is_invalid_and_says_the_server_gives_none():
    bare = {"choices": [{"message": {"content": "A"}, "logprobs": None}]}
    with pytest.raises(NoLogprobs):
        first_token_logprobs(bare)
    result = logprobs_result(task(2), bare)
    assert not result.valid and "log-probabilities" in result.error


def test_agreement_counts_tasks_valid_in_both_and_the_largest_difference():
    def res(tid, probs, valid=True):
        r = TaskResult(task_id=tid, family="f", type="choice", expected="a", labels=list(probs))
        r.valid, r.probabilities = valid, dict(probs) if valid else None
        r.predicted = max(probs, key=probs.get) if valid else None
        return r

    decision = [res("1", {"a": 0.7, "b": 0.3}), res("2", {"a": 0.4, "b": 0.6}), res("3", {"a": 0.5, "b": 0.5})]
    baseline = [res("1", {"a": 0.6, "b": 0.4}), res("2", {"a": 0.55, "b": 0.45}), res("3", {"a": 1, "b": 0}, False)]
    out = agreement(decision, baseline)
    assert (out["tasks"], out["valid"], out["compared"], out["agree"]) == (3, 2, 2, 1)
    assert out["max_abs_diff"] == pytest.approx(0.15) and out["max_abs_diff_task"] == "2"


def test_the_payload_asks_for_one_token_and_the_top_logprobs():
    payload = logprobs_payload(task_messages(task(4)))
    assert (payload["max_tokens"], payload["logprobs"], payload["top_logprobs"]) == (1, True, 20)
    user = json.loads(payload["messages"][1]["content"])
    assert list(user) == ["state", "question", "options"] and list(user["options"]) == list(LETTERS[:4])
    with pytest.raises(ValueError):
        decision_messages("s", "q", ["only one"])


# -- real llama-server answers ------------------------------------------------------------


@needs_llama_server
@pytest.mark.slow
def test_real_answers_are_parsed_and_valid_exactly_when_every_letter_came_back(llama_server):
    client = url_client(llama_server.url + "/v1/chat/completions")
    tasks = [task(2), task(4), task(16)] + load_tasks(None, limit=4)
    run = run_logprobs_baseline(client, tasks, progress=False)
    assert run.kind == "logprobs" and all(r.answered for r in run.results)
    for t, r in zip(tasks, run.results):
        reply_top = r.extra["returned"]
        assert 0 < reply_top <= 20
        assert r.valid == (r.extra["missing"] == [])
        assert sorted(r.extra["found"] + r.extra["missing"]) == list(LETTERS[: len(t.options)])
        if r.valid:
            assert sum(r.probabilities.values()) == pytest.approx(1.0)
            assert r.predicted == max(r.probabilities, key=r.probabilities.get)
        else:
            assert r.probabilities is None and r.predicted is None
        assert r.input_tokens and r.client_latency_ms > 0


@needs_llama_server
@pytest.mark.slow
def test_options_outside_the_returned_tokens_in_a_real_answer_are_missing(llama_server):
    """16 options and only the top 3 asked for: at least 13 letters cannot be among them."""
    t = task(16, "few")
    status, reply = post_json(llama_server.url + "/v1/chat/completions", logprobs_payload(task_messages(t), 3))
    assert status == 200
    top = first_token_logprobs(reply)
    assert len(top) <= 3
    result = logprobs_result(t, reply, top_logprobs=3)
    assert not result.valid and len(result.extra["missing"]) >= 13
    assert set(result.extra["missing"]).isdisjoint(top) and result.probabilities is None


@needs_llama_server
@pytest.mark.slow
def test_the_messages_render_to_the_adapters_own_prompt(llama_server, adapter):
    """llama-server renders the client's messages with the model's template; their sha256 is the adapter's
    prompt_sha256 for the same decision (state string or object, 2 to 16 options, non-ASCII text)."""
    tasks = [
        task(2),
        task(16),
        load_tasks(None, limit=1)[0],
        Task(
            id="obj",
            family="f",
            type="choice",
            state={"zeta": 1, "alpha": ["ü", "x"]},
            question="Wählen Sie: which one?",
            options=(("y", 'yes "quoted"'), ("n", "no")),
            expected="y",
        ),
    ]
    for t in tasks:
        status, rendered = post_json(llama_server.url + "/apply-template", {"messages": task_messages(t)})
        assert status == 200
        status, answer = post_json(adapter.url + "/invocations", t.request())
        assert status == 200, answer
        assert hashlib.sha256(rendered["prompt"].encode("utf-8")).hexdigest() == answer["result"]["prompt_sha256"], t.id


@needs_llama_server
@pytest.mark.slow
def test_the_benchmark_reports_the_baseline_beside_the_decision_readout(llama_server, adapter):
    tasks = [task(3), task(16)]
    report = run_benchmark(
        EndpointClient.local(adapter.url),
        tasks,
        baseline="logprobs",
        standard=url_client(llama_server.url + "/v1/chat/completions"),
        progress=False,
    )
    letters = report.letter_baseline
    valid = [r for r in report.runs["logprobs"].results if r.valid]
    assert letters["valid"] == len(valid) and letters["compared"] == len(valid)
    text = report.to_markdown()
    assert "letter probabilities (standard endpoint, top 20)" in text
    assert f"{letters['valid']}/2" in text
    saved = json.loads(report.to_json())
    assert saved["letter_baseline"]["tasks"] == 2


def test_the_logprobs_baseline_needs_the_standard_endpoint():
    with pytest.raises(ValueError, match="standard"):
        run_benchmark(EndpointClient.local("http://127.0.0.1:9"), [task(2)], baseline="logprobs", progress=False)
    with pytest.raises(ValueError, match="unknown baseline"):
        run_benchmark(EndpointClient.local("http://127.0.0.1:9"), [task(2)], baseline="guess", progress=False)
