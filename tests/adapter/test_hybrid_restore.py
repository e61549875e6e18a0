"""Restore on a real hybrid memory: a tiny random-weight GGUF of llama.cpp's
``qwen35`` architecture (three gated delta-net layers, one attention layer, as the pinned
Qwen3.5-4B mixes them), written by scripts/hybrid_gguf.py with the embedded model's tokenizer
and chat template. llama-cpp-python 0.3.35's llama.cpp has ``qwen35`` itself, so no stand-in
architecture is needed.

Its answers mean nothing; what is tested is that ``auto`` picks ``restore`` for it, that every
answer (the fixed head restored, a shared state, after a request stopped mid-pass) equals a fresh
evaluation of the whole prompt by an engine with prefix reuse off, that a state's snapshot holds
only the recurrent part (the attention cells stay in the cache and are cut back instead), and that
a right and a wrong guess of the previous caller's state cost the same tokens unless cross-request
reuse is turned on.
"""

import time

import numpy as np
import pytest

from decision_adapter import scoring
from decision_adapter.apis import own
from decision_adapter.apis import systemone as jev
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import TimedOut
from decision_adapter.prompt import JEV_PROMPT
from scripts.hybrid_gguf import write_hybrid_gguf
from tests.support import adapter_settings

STATES = [
    "The parcel arrived with a cracked screen and the customer wants a replacement.",
    "Order 7: the invoice shows a double charge for the same month.",
]
QUESTIONS = [
    {"id": "team", "question": "Which team should handle this?", "options": ["refunds", "billing", "it"]},
    {"id": "upset", "question": "Is the customer upset?", "options": ["no", "yes"]},
]


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hybrid")
    write_hybrid_gguf(folder / "hybrid-qwen35.gguf")
    return folder


def _engine(folder, mode, **env):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    return Engine(adapter_settings(folder, DECISION_ADAPTER_PREFIX_REUSE=mode, **env), locate_model(folder))


@pytest.fixture(scope="module")
def hybrid(hybrid_dir):
    engine = _engine(hybrid_dir, "auto")
    engine.prove()  # saves the decision head, as the worker does at start-up
    return engine


@pytest.fixture(scope="module")
def fresh(hybrid_dir):
    return _engine(hybrid_dir, "off")


@pytest.fixture(scope="module")
def hybrid_across(hybrid_dir):
    engine = _engine(hybrid_dir, "auto", DECISION_ADAPTER_CROSS_REQUEST_REUSE="on")
    engine.prove()
    return engine


def single(state, q=QUESTIONS[0]):
    return parse_decision({"id": "r", "state": state, "question": q["question"], "options": q["options"]})


def shared(state):
    return parse_decision({"id": "b", "state": state, "questions": QUESTIONS})


def probabilities(engine, batch):
    return [r["probabilities"] for r in own.answered(engine, batch)[0]]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.allclose(x, y, atol=1e-4, rtol=0) and abs(sum(x) - 1) < 1e-9


def head_reused(engine, batch) -> bool:
    before = engine.context.tokens_evaluated
    own.answered(engine, batch)
    prompt = engine.model.template.render_decision(batch.state, batch.questions[0])
    return engine.context.tokens_evaluated - before < len(engine.model.prompt_tokens(prompt)) - 40


def test_auto_picks_restore_for_the_hybrid_architecture(hybrid):
    assert hybrid.info["architecture"] == "qwen35"
    assert hybrid.context.recurrent and hybrid.context.prefix_mode == "restore"
    assert head_reused(hybrid, single(STATES[0]))  # the first request reads the head the start-up proof saved


def test_restored_head_and_shared_state_equal_fresh_evaluations(hybrid, fresh):
    for state in STATES:
        assert_same(probabilities(hybrid, single(state)), probabilities(fresh, single(state)))
        assert_same(probabilities(hybrid, shared(state)), probabilities(fresh, shared(state)))
    assert head_reused(hybrid, single(STATES[0] + " Again."))


def test_a_state_snapshot_holds_the_recurrent_part_only(hybrid, fresh):
    sizes = []
    for state in (STATES[0], " ".join([STATES[1]] * 12)):  # a state of ~20 tokens, then one of ~200
        assert_same(probabilities(hybrid, shared(state)), probabilities(fresh, shared(state)))
        sizes.append(len(hybrid.context.prefix.state))
    whole = len(hybrid.context.save_sequence())  # the attention cells of the long state's prompt included
    assert sizes[0] == sizes[1] < whole


def test_two_level_readout_restores_the_prompt_for_each_group(hybrid, fresh):
    criteria = {f"Queue {i}": f"topic {i}" for i in range(23)}
    body = {
        "state": STATES[0],
        "questions": {
            "q": {"type": "choice", "instructions": "Which queue?", "criteria": criteria},
            "n": {"type": "noul", "instructions": "Lost?"},
        },
    }
    batch = jev.batch_of(jev.parse_systemone(body))

    def read(engine):
        readings, _ = engine.score_items(list(scoring.plan(engine, batch, JEV_PROMPT).items))
        return [r.scores.probabilities(1.0).tolist() for r in readings]

    assert_same(read(hybrid), read(fresh))


def test_after_a_request_stopped_mid_pass_answers_equal_fresh_evaluations(hybrid, fresh, monkeypatch):
    real_eval, stopped = hybrid.llm.eval, []

    def pass_of(tokens):
        try:
            real_eval(tokens)
        except Exception:  # llama.cpp's abort callback stopped it
            stopped.append(len(tokens))
            raise

    def limit_passes_halfway(tokens):  # the time limit passes while llama.cpp is inside a pass
        pass_of(tokens[: len(tokens) // 2])  # on a busy machine the limit may pass in this half already
        waited = time.monotonic()
        while not hybrid.context.deadline.expired and time.monotonic() - waited < 30:
            time.sleep(0.01)
        pass_of(tokens[len(tokens) // 2 :])

    monkeypatch.setattr(hybrid.llm, "eval", limit_passes_halfway)
    with hybrid.time_limit(1.0), pytest.raises(TimedOut):
        own.answered(hybrid, shared(STATES[1] + " It is the third time this happens."))
    monkeypatch.setattr(hybrid.llm, "eval", real_eval)
    assert len(stopped) == 1 and stopped[0] > 0  # stopped inside llama.cpp, in one pass of a request's first call
    assert hybrid.context.prefix is None and hybrid.llm.n_tokens == 0
    assert_same(probabilities(hybrid, shared(STATES[1])), probabilities(fresh, shared(STATES[1])))
    assert head_reused(hybrid, single(STATES[0] + " Once more."))


SECRET = "Customer with social security number 078-05-1120 asks to close the account."


def guess_costs(engine, fresh, monkeypatch) -> list[int]:
    """Tokens handed to llama.cpp's eval for a right and for a wrong guess, each right after the caller's."""
    right, wrong = single(SECRET, QUESTIONS[1]), single(SECRET.replace("1120", "1121"), QUESTIONS[1])
    lengths = {
        len(engine.model.prompt_tokens(engine.model.template.render_decision(b.state, b.questions[0])))
        for b in (right, wrong)
    }
    assert len(lengths) == 1  # the same work if nothing is reused
    real_eval, costs = engine.llm.eval, []
    for guess in (right, wrong):
        probabilities(engine, single(SECRET))  # the other caller's request
        counted = []
        monkeypatch.setattr(
            engine.llm, "eval", lambda tokens, counted=counted: (counted.append(len(tokens)), real_eval(tokens))[1]
        )
        got = probabilities(engine, guess)
        monkeypatch.setattr(engine.llm, "eval", real_eval)
        assert_same(got, probabilities(fresh, guess))
        costs.append(sum(counted))
    return costs


def test_a_right_and_a_wrong_guess_of_the_previous_callers_state_cost_the_same(hybrid, fresh, monkeypatch):
    right, wrong = guess_costs(hybrid, fresh, monkeypatch)
    assert right == wrong
    assert head_reused(hybrid, single(SECRET))  # the fixed head is still restored, not evaluated


def test_with_cross_request_reuse_a_right_guess_costs_less(hybrid_across, fresh, monkeypatch):
    right, wrong = guess_costs(hybrid_across, fresh, monkeypatch)
    assert right < wrong - 10
