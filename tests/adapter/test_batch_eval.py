"""A request's prompts evaluated together in one llama.cpp batch (batch.py), on the embedded model in-process.

The plan is pure and tested without a model. The engine evaluates prompts together only where the
build's batch gives the logits of one-after-another evaluation (a start-up check): tests of the guard
run everywhere; the mechanics (what the context holds afterwards, the tokens counted, a time limit
inside a batch, the same request the same answer) run with batching switched on for the test, whatever
the check said; the equality of the two paths is asserted where the check passed, and skipped (naming the
figure) where this build's batch disagrees.
"""

import numpy as np
import pytest

from decision_adapter import batch as batch_eval
from decision_adapter import runtime
from decision_adapter.apis import own
from decision_adapter.errors import TimedOut
from decision_adapter.schema import parse_decision

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants a replacement or a refund."
OPTIONS = ["Refunds and returns", "Shipping and delivery", "Sales", "IT support", "Billing"]


def shared(k=3, order="as_given"):
    return parse_decision({"id": "b", "state": STATE, "order": order, "questions": [
        {"id": f"q{i}", "question": f"Which team should handle this? (case {i})", "options": OPTIONS}
        for i in range(k)]})


def answers(engine, request):
    results, timing = own.decide(engine, request)
    return [r["probabilities"] for r in results], results, timing


# -- the plan ----------------------------------------------------------------------------------------------


def test_chunks_keep_the_order_and_fit_every_limit():
    lengths = [30, 40, 50, 60, 20, 10, 70]
    for n_batch, n_seq_max, n_ctx in [(512, 16, 4096), (100, 16, 4096), (512, 2, 4096), (512, 16, 300), (70, 3, 250)]:
        chunks = batch_eval.plan_chunks(lengths, 100, n_batch=n_batch, n_seq_max=n_seq_max, n_ctx=n_ctx)
        flat = [i for chunk in chunks for i in chunk]
        assert flat == sorted(flat) and len(set(flat)) == len(flat)
        for chunk in chunks:
            tokens = sum(lengths[i] for i in chunk)
            assert chunk and tokens <= n_batch and len(chunk) <= n_seq_max and 100 + tokens <= n_ctx
        # each suffix that fits a decode on its own is in exactly one chunk
        assert set(flat) == {i for i, n in enumerate(lengths) if n <= n_batch and 100 + n <= n_ctx}
    assert batch_eval.plan_chunks(lengths, 100, n_batch=512, n_seq_max=16, n_ctx=4096) == [list(range(7))]
    assert batch_eval.plan_chunks([5, 5, 5], 0, n_batch=10, n_seq_max=16, n_ctx=100) == [[0, 1], [2]]


def test_one_sequence_asks_nothing_of_the_context_and_recurrent_models_keep_one():
    import llama_cpp

    assert runtime.sequence_fields(llama_cpp, 1) == {}
    fields = runtime.sequence_fields(llama_cpp, 16)
    assert set(fields) == {"n_seq_max", "kv_unified"} and all(callable(v) for v in fields.values())


def test_the_context_has_the_sequences_and_the_check_decides(engine):
    import llama_cpp

    assert llama_cpp.llama_n_seq_max(engine.llm.ctx) == engine.settings.parallel_sequences == 16
    assert engine.batch_disagreement is not None and engine.batch_disagreement >= 0
    agrees = engine.batch_disagreement <= batch_eval.CHECK_TOLERANCE
    assert engine.parallel_sequences == (16 if agrees else 1)


def test_the_check_turns_batches_off_when_they_disagree_and_leaves_them_on_when_they_agree(engine, monkeypatch):
    real = batch_eval.decode_suffixes
    monkeypatch.setattr(engine, "batch_disagreement", engine.batch_disagreement)  # the figure is restored after
    monkeypatch.setattr(engine, "parallel_sequences", 16)
    monkeypatch.setattr(batch_eval, "decode_suffixes", lambda *a: [row + 0.01 for row in real(*a)])
    engine._check_batches()
    assert engine.parallel_sequences == 1 and 0.009 < engine.batch_disagreement
    assert engine.llm.n_tokens == 0  # the check leaves an empty context

    def alone(llama_cpp, ctx, prefix_len, suffixes, n_vocab):  # what one-after-another gives, as a batch would
        prefix = list(engine.llm.input_ids[:prefix_len])
        rows = []
        for suffix in suffixes:
            engine._reset_context()
            engine.llm.eval(prefix + list(suffix))
            rows.append(engine._last_logits())
        return rows

    monkeypatch.setattr(engine, "parallel_sequences", 16)
    monkeypatch.setattr(batch_eval, "decode_suffixes", alone)
    engine._check_batches()
    assert engine.parallel_sequences == 16 and engine.batch_disagreement <= batch_eval.CHECK_TOLERANCE
    monkeypatch.undo()
    assert engine.parallel_sequences == (16 if engine.batch_disagreement <= batch_eval.CHECK_TOLERANCE else 1)


# -- the mechanics, batching switched on ---------------------------------------------------------------------


@pytest.fixture
def batching(engine, monkeypatch):
    """The session's engine evaluating prompts together for this test, whatever its start-up check said."""
    calls = []
    real = batch_eval.decode_suffixes

    def counting(llama_cpp, ctx, prefix_len, suffixes, n_vocab):
        calls.append([len(s) for s in suffixes])
        return real(llama_cpp, ctx, prefix_len, suffixes, n_vocab)

    monkeypatch.setattr(batch_eval, "decode_suffixes", counting)
    monkeypatch.setattr(engine, "parallel_sequences", 16)
    engine.batch_calls = calls
    yield engine
    del engine.batch_calls


def seq_pos_max(engine, seq):
    import llama_cpp

    return llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(engine.llm.ctx), seq)


def test_a_batched_request_reads_the_tokens_of_one_after_another_and_leaves_the_prefix(batching, monkeypatch):
    engine = batching
    answers(engine, shared(2))  # the context holds the fixed head, as after any request
    engine.batch_calls.clear()
    before = engine.tokens_evaluated
    probabilities, results, timing = answers(engine, shared(4))
    batched = engine.tokens_evaluated - before
    assert len(engine.batch_calls) == 1 and len(engine.batch_calls[0]) == 3 and len(engine.batch_calls[0]) == 3  # after the first
    assert [r["id"] for r in results] == ["q0", "q1", "q2", "q3"]
    assert all(abs(sum(p) - 1) < 1e-9 for p in probabilities)
    prefix = timing["shared_prefix_tokens"]
    assert engine.llm.n_tokens == prefix and seq_pos_max(engine, 0) == prefix - 1
    assert all(seq_pos_max(engine, s) == -1 for s in range(1, 16))
    assert all(r["question_eval_ms"] > 0 for r in results)

    monkeypatch.setattr(engine, "parallel_sequences", 1)
    before = engine.tokens_evaluated
    _, sequential, _ = answers(engine, shared(4))
    assert engine.tokens_evaluated - before == batched  # the same tokens, read in fewer llama_decode calls
    assert [r["input_tokens"] for r in sequential] == [r["input_tokens"] for r in results]


def test_the_same_request_twice_gives_identical_answers_when_batched(batching):
    first, _, _ = answers(batching, shared(2, order="rotations"))
    answers(batching, parse_decision({"id": "x", "state": "Something else entirely.", "question": "Is it urgent?",
                                      "options": ["no", "yes"]}))  # disturb the context
    second, _, _ = answers(batching, shared(2, order="rotations"))
    assert first == second


def test_suffixes_in_several_batches_are_all_answered(batching, monkeypatch):
    monkeypatch.setattr(batching, "parallel_sequences", 2)  # the request's 4 other prompts need 2 batches
    probabilities, results, _ = answers(batching, shared(5))
    assert [len(c) for c in batching.batch_calls] == [2, 2]
    assert [r["id"] for r in results] == [f"q{i}" for i in range(5)]
    assert all(abs(sum(p) - 1) < 1e-9 for p in probabilities)


def test_a_time_limit_inside_a_batch_leaves_a_fresh_context(batching, monkeypatch):
    engine = batching
    reference, _, _ = answers(engine, shared(3))
    real = batch_eval.decode_suffixes

    def expire_then_decode(*args):
        engine._deadline._flag.value = b"x"  # the watcher's trip, now: llama.cpp aborts the batch's graph
        return real(*args)

    monkeypatch.setattr(batch_eval, "decode_suffixes", expire_then_decode)
    with engine.time_limit(30), pytest.raises(TimedOut):
        own.decide(engine, shared(3))
    assert engine._prefix is None and engine.llm.n_tokens == 0
    assert all(seq_pos_max(engine, s) == -1 for s in range(16))
    monkeypatch.setattr(batch_eval, "decode_suffixes", real)
    again, _, _ = answers(engine, shared(3))
    assert again == reference


# -- the two paths' answers, where the check passed -----------------------------------------------------------


def _agreeing(engine):
    if engine.batch_disagreement is None or engine.batch_disagreement > batch_eval.CHECK_TOLERANCE:
        pytest.skip(f"this llama.cpp build's multi-sequence batch gives logits up to {engine.batch_disagreement:.3g} "
                    "away from one-after-another evaluation, so the engine does not batch (ggml-org/llama.cpp#24962)")


def test_batched_and_one_after_another_give_the_same_answers(batching, monkeypatch):
    _agreeing(batching)
    request = shared(2, order="rotations")  # 20 prompts on one state
    together, _, _ = answers(batching, request)
    monkeypatch.setattr(batching, "parallel_sequences", 2)
    chunked, _, _ = answers(batching, request)
    monkeypatch.setattr(batching, "parallel_sequences", 1)
    alone, _, _ = answers(batching, request)
    assert np.allclose(together, alone, atol=1e-6, rtol=0) and np.allclose(chunked, alone, atol=1e-6, rtol=0)
