"""Flash attention (opt-in) served only where an answer cannot depend on how its prompt was cut into evaluations.

llama.cpp's CPU flash-attention kernel reads a call of 64 tokens or more with its tiled kernel and a smaller
one with its vector kernel, which differ by up to a few logits; calls of 64 or more agree bit for bit however
a prompt is cut into them. So the engine evaluates every prompt in calls of at least 64 (splits.py), checks
that at start-up, and leaves flash attention off where it cannot hold (``auto``) or refuses to start (``on``).
"""

import numpy as np
import pytest

from decision_adapter import split_check, splits
from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.scores import logsumexp
from decision_adapter.seams import EngineError
from decision_adapter.split_check import SPLIT_TOLERANCE
from scripts.hybrid_gguf import write_hybrid_gguf
from tests.support import adapter_settings

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants a replacement."
QUESTIONS = [
    {
        "id": "route",
        "question": "Which team should handle this?",
        "options": ["Refunds and returns", "Shipping and delivery", "Sales"],
    },
    {"id": "damaged", "question": "Was it damaged?", "options": ["no", "yes"]},
    {
        "id": "tone",
        "question": "How does the customer sound, judging by the words chosen in the message?",
        "options": ["Calm", "Upset", "Angry", "Hard to say from one message"],
    },
]


def _engine(folder, **env):
    """Flash attention ``auto`` unless ``env`` says otherwise; loaded and proven as the worker does at start-up
    (the split check runs in ``prove``)."""
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    engine = Engine(adapter_settings(folder, **{"SM_LLAMA_CPP_FLASH_ATTN": "auto", **env}), locate_model(folder))
    engine.prove()
    return engine


def _body(question, state=STATE, **fields):
    return parse_decision({"id": "f1", "state": state, **{k: v for k, v in question.items() if k != "id"}, **fields})


def _probabilities(engine, body):
    return [np.array(r["probabilities"]) for r in own.answered(engine, body)[0]]


# ---- how calls are cut (pure) -------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 127, 128, 511, 512, 513, 575, 576, 577, 1100])
@pytest.mark.parametrize("least", [splits.PLAIN_LEAST, splits.FLASH_ATTENTION_LEAST])
def test_calls_cover_the_tokens_in_order_none_over_the_batch_and_none_short_but_a_lone_call(n, least):
    points = splits.cuts(n, 512, least)
    sizes = np.diff(points)
    assert points[0] == 0 and points[-1] == n and np.all(sizes > 0) and np.all(sizes <= 512)
    assert len(sizes) == 1 or np.all(sizes >= least)


def test_a_short_addition_takes_the_last_held_tokens_with_it():
    least = splits.FLASH_ATTENTION_LEAST
    assert splits.back_up(100, 10, least, short=False) == 54  # 54 held + 10 new: one call of 64
    assert splits.back_up(100, 64, least, short=False) == 0
    assert splits.back_up(40, 10, least, short=False) == 40  # 50 in all: the prompt whole, from cell 0
    assert splits.back_up(61, 30, least, short=False) == 34  # the cells of a longer prompt's call: kept
    assert splits.back_up(61, 30, least, short=True) == 61  # cells that may come from a short call: again
    assert splits.back_up(100, 0, least, short=True) == 0
    assert splits.back_up(100, 1, splits.PLAIN_LEAST, short=False) == 1  # never one token alone


# ---- flash attention asked for (auto): on where it cannot change an answer -----------------------------------


def test_flash_attention_is_off_by_default_and_auto_serves_it_after_proving_a_split_changes_nothing(
    engine, flash_engine
):
    assert engine.settings.flash_attn == "off" and engine.context.flash_attention == "off"
    assert engine.llm.context_params.flash_attn_type == 0 and engine.context.least_tokens == splits.PLAIN_LEAST
    assert flash_engine.context.flash_attention == "on" and flash_engine.llm.context_params.flash_attn_type == -1
    assert flash_engine.context.least_tokens == splits.FLASH_ATTENTION_LEAST
    assert flash_engine.split_check is not None and flash_engine.split_check <= SPLIT_TOLERANCE
    assert flash_engine.info["runtime"]["flash_attention"] == "on"


def test_without_the_floor_the_same_prompt_cut_differently_moves_its_logits(flash_engine, monkeypatch):
    """The check can fail: evaluated in calls under 64 tokens, the kernel gives other logits."""
    monkeypatch.setattr(splits, "FLASH_ATTENTION_LEAST", splits.PLAIN_LEAST)
    try:
        # 0.04 in an answer letter's probability here
        assert split_check.check_splits(flash_engine.context, flash_engine.model) > 10 * SPLIT_TOLERANCE
    finally:
        flash_engine.start_afresh()


@pytest.fixture(scope="module")
def whole_reader(flash_engine):
    """The GGUF loaded again with flash attention and ``logits_all``, its batch large enough to evaluate any of
    these prompts in one call: none of the engine's path (the held head, a shared state, calls cut short)."""
    import llama_cpp

    from decision_adapter import runtime

    with runtime.context_params(llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES["on"]):
        llm = llama_cpp.Llama(
            model_path=str(flash_engine.model.files.gguf),
            logits_all=True,
            verbose=False,
            **{**flash_engine.settings.llama_kwargs(), "n_ctx": 1024, "n_batch": 1024, "n_ubatch": 1024},
        )
    yield llm
    llm.close()


def test_every_answer_is_its_prompt_evaluated_whole(flash_engine, whole_reader):
    """Alone after the held head, in a shared-state batch (short questions take the state's last tokens with
    them), and with a prompt beyond one batch of 512: each question's letters read as from its whole prompt."""
    engine = flash_engine
    long_state = STATE + " The customer adds: " + "the box was wet and the tape was torn open. " * 40
    bodies = [
        parse_decision({"id": "b", "state": STATE, "questions": QUESTIONS}),
        parse_decision({"id": "l", "state": long_state, "questions": QUESTIONS[:2]}),
    ]
    bodies += [_body(q) for q in QUESTIONS]
    for body in bodies:
        results, _ = own.answered(engine, body)
        for question, result in zip(body.questions, results):
            prompt = engine.model.template.render_decision(body.state, question)
            tokens = engine.model.prompt_tokens(prompt)
            whole_reader.reset()
            whole_reader.eval(tokens)
            logits = np.asarray(whole_reader.scores[len(tokens) - 1], dtype=np.float64)
            slots = logits[list(result["answer_token_ids"])]
            expected = np.exp(slots - logsumexp(slots))
            assert len(tokens) > splits.FLASH_ATTENTION_LEAST
            assert np.allclose(result["probabilities"], expected, atol=1e-4, rtol=0), (question.id, len(tokens))


def test_cloze_answers_do_not_depend_on_the_batch_or_the_order_of_the_options(flash_engine):
    alone = [_probabilities(flash_engine, _body(q, readout="cloze"))[0] for q in QUESTIONS]
    together = _probabilities(
        flash_engine, parse_decision({"id": "b", "state": STATE, "questions": QUESTIONS, "readout": "cloze"})
    )
    for a, b in zip(alone, together):
        assert np.allclose(a, b, atol=1e-4, rtol=0)
    turned = dict(QUESTIONS[2], options=QUESTIONS[2]["options"][::-1])
    turned_back = _probabilities(flash_engine, _body(turned, readout="cloze"))[0][::-1]
    assert np.allclose(turned_back, alone[2], atol=1e-4, rtol=0)


def test_reuse_across_requests_and_the_state_cache_answer_as_a_fresh_context(model_dir):
    reusing = _engine(model_dir, DECISION_ADAPTER_CROSS_REQUEST_REUSE="on", DECISION_ADAPTER_STATE_CACHE_MIB=64)
    assert reusing.context.flash_attention == "on"
    fresh = {}
    # the same state again, a state that shares only its opening, then the first again (from the cache)
    states = [STATE, STATE, STATE[:40] + " and the courier left it outside.", STATE]
    for state in states:
        for question in QUESTIONS:
            got = _probabilities(reusing, _body(question, state))[0]
            key = (state, question["id"])
            if key not in fresh:
                reusing_cells = reusing.llm.n_tokens
                reusing.start_afresh()
                fresh[key] = _probabilities(reusing, _body(question, state))[0]
                assert reusing_cells > 0
            assert np.allclose(got, fresh[key], atol=1e-4, rtol=0), key


# ---- where it cannot hold: auto leaves it off, on refuses ---------------------------------------------------


def test_a_build_whose_split_check_fails_serves_without_flash_attention(model_dir, engine, monkeypatch):
    monkeypatch.setattr(splits, "FLASH_ATTENTION_LEAST", splits.PLAIN_LEAST)  # a kernel the floor cannot fix
    fallen = _engine(model_dir)
    assert fallen.context.flash_attention == "off" and fallen.llm.context_params.flash_attn_type == 0
    # checked again without it: this build passes, so prefix reuse stays (test_prefix_reuse.py: where it fails)
    assert fallen.context.least_tokens == splits.PLAIN_LEAST and fallen.split_check <= SPLIT_TOLERANCE
    assert fallen.context.prefix_mode == "trim"
    assert fallen.info["runtime"]["flash_attention"] == "off"
    twin = fallen.twin(1)
    assert twin.llm.context_params.flash_attn_type == 0
    for served in (fallen, twin):  # answers as the engine without flash attention does
        for question in QUESTIONS:
            assert np.allclose(
                _probabilities(served, _body(question))[0],
                _probabilities(engine, _body(question))[0],
                atol=1e-4,
                rtol=0,
            )
    with pytest.raises(EngineError, match="SM_LLAMA_CPP_FLASH_ATTN=on: .*answers up to .* set it to"):
        _engine(model_dir, SM_LLAMA_CPP_FLASH_ATTN="on")


def test_evaluating_every_prompt_whole_answers_as_alone_where_cut_prompts_differ(model_dir, monkeypatch):
    """What ``auto`` prefix reuse falls back to where the start-up check fails, on kernels that do differ with the
    cut (flash attention without its floor): each prompt evaluated whole from its first token answers a batch's
    questions exactly as alone; reusing the state across them does not."""
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    monkeypatch.setattr(splits, "FLASH_ATTENTION_LEAST", splits.PLAIN_LEAST)
    whole = _engine(model_dir, DECISION_ADAPTER_PREFIX_REUSE="off")
    assert whole.context.flash_attention == "on" and whole.split_check is None  # nothing is cut: nothing to check
    # not proven: its start-up check would leave flash attention off
    cutting = Engine(adapter_settings(model_dir, SM_LLAMA_CPP_FLASH_ATTN="auto"), locate_model(model_dir))
    assert cutting.context.flash_attention == "on" and cutting.context.prefix_mode == "trim"
    batch = parse_decision({"id": "b", "state": STATE, "questions": QUESTIONS})

    def gap(engine):
        together = _probabilities(engine, batch)
        return max(
            float(np.abs(_probabilities(engine, _body(q))[0] - answer).max()) for q, answer in zip(QUESTIONS, together)
        )

    assert gap(whole) == 0.0
    assert gap(cutting) > SPLIT_TOLERANCE  # 0.004 here


def test_calls_too_small_for_the_floor_leave_it_off(model_dir):
    assert _engine(model_dir, SM_LLAMA_CPP_UBATCH_SIZE=100).context.flash_attention == "off"
    with pytest.raises(
        EngineError,
        match="calls must hold 128 tokens, but SM_LLAMA_CPP_BATCH_SIZE / SM_LLAMA_CPP_UBATCH_SIZE allow 100",
    ):
        _engine(model_dir, SM_LLAMA_CPP_UBATCH_SIZE=100, SM_LLAMA_CPP_FLASH_ATTN="on")


def test_a_hybrid_model_is_served_without_it(tmp_path):
    write_hybrid_gguf(tmp_path / "hybrid-qwen35.gguf")
    engine = _engine(tmp_path)
    assert engine.context.prefix_mode == "restore" and engine.context.flash_attention == "off"
    assert engine.llm.context_params.flash_attn_type == 0
    assert _engine(tmp_path, DECISION_ADAPTER_PREFIX_REUSE="off").context.flash_attention == "off"
    with pytest.raises(EngineError, match="recurrent model's memory cannot be cut back"):
        _engine(tmp_path, SM_LLAMA_CPP_FLASH_ATTN="on")
