"""Reuse of evaluated tokens, and what one caller can learn of another's from it.

By default a request reuses the fixed head (system prompt, opening of the user turn: nothing a caller
wrote) and, inside itself, its own state for each of its questions; never what the previous request
sent. So a right and a wrong guess of the previous caller's state cost the same evaluation: the tokens
given to llama.cpp are counted (deterministic, no clock). With DECISION_ADAPTER_CROSS_REQUEST_REUSE=on
(single-tenant endpoints) a repeated state is not evaluated again, and a right guess costs less.
Every answer equals a fresh evaluation of the whole prompt (1e-4).

The reference is an engine with prefix reuse off: it evaluates each prompt from an empty context. The
engines run without flash attention (the default), where the tokens a request hands to llama.cpp are
exactly those not reused; the default reuse is also held with flash attention (each prompt's calls at
least 64 tokens), and test_flash_attention.py holds the opt-in reuse with it.
"""

import numpy as np
import pytest

from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import TimedOut
from tests.support import adapter_settings

STATES = [
    "The parcel arrived with a cracked screen and the customer wants a replacement.",
    "Order 7: the invoice shows a double charge for the same month.",
    {"customer": {"tier": "gold"}, "message": "My password reset link never arrives."},
]
QUESTIONS = [
    {"id": "team", "question": "Which team should handle this?", "options": ["refunds", "billing", "it"]},
    {"id": "upset", "question": "Is the customer upset?", "options": ["no", "yes"]},
]
# The previous caller's state, and two guesses of it differing in one digit.
SECRET = "Customer with social security number 078-05-1120 asks to close the account."
WRONG = SECRET.replace("1120", "1121")


def single(state, q=QUESTIONS[0]):
    return parse_decision({"id": "r", "state": state, "question": q["question"], "options": q["options"]})


def shared(state):
    return parse_decision({"id": "b", "state": state, "questions": QUESTIONS})


def _engine(model_dir, mode, **env):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    return Engine(adapter_settings(model_dir, DECISION_ADAPTER_PREFIX_REUSE=mode, **env), locate_model(model_dir))


@pytest.fixture(scope="module")
def fresh(model_dir):
    """Per flash attention ("on", "off"), an engine that evaluates every prompt from an empty context."""
    return {"off": _engine(model_dir, "off"), "on": _engine(model_dir, "off", SM_LLAMA_CPP_FLASH_ATTN="on")}


@pytest.fixture(scope="module")
def restore(model_dir):
    engine = _engine(model_dir, "restore")
    engine.prove()  # saves the decision head, as the worker does at start-up
    return engine


@pytest.fixture(scope="module")
def trim_across(model_dir):
    return _engine(model_dir, "trim", DECISION_ADAPTER_CROSS_REQUEST_REUSE="on")


@pytest.fixture(scope="module")
def restore_across(model_dir):
    engine = _engine(model_dir, "restore", DECISION_ADAPTER_CROSS_REQUEST_REUSE="on")
    engine.prove()
    return engine


@pytest.fixture(params=["trim", "trim-flash-attention", "restore"])
def reusing(request, engine, flash_engine, restore):
    """The default: the fixed head only across requests."""
    return {"trim": engine, "trim-flash-attention": flash_engine, "restore": restore}[request.param]


@pytest.fixture(params=["trim", "restore"])
def reusing_plain(request, engine, restore):
    """The default reuse, counted without flash attention: with it, a question shorter than 64 tokens takes the
    state's last tokens with it, so two short questions cost as much together as apart."""
    return engine if request.param == "trim" else restore


@pytest.fixture(params=["trim", "restore"])
def across(request, trim_across, restore_across):
    """The opt-in: the previous request's tokens reused as far as they match."""
    return trim_across if request.param == "trim" else restore_across


@pytest.fixture(params=["trim", "restore-across"])
def after_timeout(request, engine, restore_across):
    """One engine of each kind of memory and each reuse setting (the model's time is the tests' budget)."""
    return engine if request.param == "trim" else restore_across


def probabilities(engine, batch):
    results, _ = own.decide(engine, batch)
    return [r.probabilities for r in results]


_FRESH: dict = {}


def fresh_probabilities(fresh, batch, like):
    """A fresh evaluation's answers with ``like``'s flash attention, each computed once for the module."""
    kernels = "off" if like.context.flash_attention == "off" else "on"
    key = (kernels, repr(batch.state), tuple((q.question, tuple(o.text for o in q.options)) for q in batch.questions))
    if key not in _FRESH:
        _FRESH[key] = probabilities(fresh[kernels], batch)
    return _FRESH[key]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.allclose(x, y, atol=1e-4, rtol=0)
        assert abs(sum(x) - 1) < 1e-9


def evaluated(engine, batch, monkeypatch) -> tuple[list, int]:
    """The answer, and how many tokens were handed to llama.cpp's eval (llama_decode) to get it."""
    real_eval, counted = engine.llm.eval, []

    def counting(tokens):
        counted.append(len(tokens))
        return real_eval(tokens)

    with monkeypatch.context() as patch:
        patch.setattr(engine.llm, "eval", counting)
        got = probabilities(engine, batch)
    return got, sum(counted)


def prompt_length(engine, batch) -> int:
    prompt = engine.model.template.render_decision(batch.state, batch.questions[0])
    return len(engine.model.prompt_tokens(prompt))


def guesses(engine, fresh, monkeypatch) -> tuple[int, int]:
    """Tokens evaluated for a right and for a wrong guess, each asked right after the caller's request."""
    right, wrong = single(SECRET, QUESTIONS[1]), single(WRONG, QUESTIONS[1])
    assert prompt_length(engine, right) == prompt_length(engine, wrong)  # the same work if nothing is reused
    costs = []
    for guess in (right, wrong):
        probabilities(engine, single(SECRET))  # the other caller's request
        got, n = evaluated(engine, guess, monkeypatch)
        assert_same(got, fresh_probabilities(fresh, guess, engine))
        costs.append(n)
    return costs[0], costs[1]


def test_a_right_and_a_wrong_guess_of_the_previous_callers_state_cost_the_same(reusing, fresh, monkeypatch):
    right, wrong = guesses(reusing, fresh, monkeypatch)
    assert right == wrong  # the same state again is evaluated again, as a new one is
    # the fixed head is still reused (the system prompt alone is longer than this margin)
    assert right < prompt_length(reusing, single(SECRET, QUESTIONS[1])) - 40


def test_with_cross_request_reuse_a_right_guess_costs_less(across, fresh, monkeypatch):
    right, wrong = guesses(across, fresh, monkeypatch)
    assert right < wrong - 10  # the state was not evaluated again: the timing oracle the default closes


def test_with_cross_request_reuse_only_what_is_not_cached_is_read(across, fresh, monkeypatch):
    probabilities(across, single(STATES[0]))  # whatever the context held before, it now holds a decision
    got, n = evaluated(across, single(STATES[1]), monkeypatch)
    assert_same(got, fresh_probabilities(fresh, single(STATES[1]), across))
    assert n < prompt_length(across, single(STATES[1])) - 40  # a new state: the head is not read again
    got, n = evaluated(across, single(STATES[1], QUESTIONS[1]), monkeypatch)
    assert_same(got, fresh_probabilities(fresh, single(STATES[1], QUESTIONS[1]), across))
    assert n < 40  # the same state: only the question and its options
    assert_same(probabilities(across, shared(STATES[2])), fresh_probabilities(fresh, shared(STATES[2]), across))


def test_inside_one_request_the_state_is_evaluated_once_for_all_its_questions(reusing_plain, fresh, monkeypatch):
    reusing = reusing_plain
    alone = [evaluated(reusing, single(STATES[2], q), monkeypatch) for q in QUESTIONS]
    got, both = evaluated(reusing, shared(STATES[2]), monkeypatch)
    assert_same(got, fresh_probabilities(fresh, shared(STATES[2]), reusing))
    assert_same(got, [answer[0] for answer, _ in alone])  # batched equals unbatched
    # asked apart, each question reads the state; asked together, the second one does not
    assert both < alone[0][1] + alone[1][1] - 10


def test_answers_after_a_timed_out_request_equal_fresh_evaluations(after_timeout, fresh, monkeypatch):
    long_state = " ".join(f"line {i}: the customer wrote again about order {i * 7}." for i in range(90))
    probabilities(after_timeout, single(STATES[0]))
    with after_timeout.time_limit(0.05), pytest.raises(TimedOut):
        own.decide(after_timeout, single(long_state))
    assert after_timeout.context.prefix is None and after_timeout.llm.n_tokens == 0
    got, n = evaluated(after_timeout, single(STATES[0]), monkeypatch)  # the state before the time-out
    assert_same(got, fresh_probabilities(fresh, single(STATES[0]), after_timeout))
    if after_timeout.context.prefix_mode == "restore":  # the head saved at start-up outlives the time-out
        assert n < prompt_length(after_timeout, single(STATES[0])) - 40
    else:
        assert n == prompt_length(after_timeout, single(STATES[0]))  # nothing was kept


def test_a_question_as_long_as_the_cached_one_is_evaluated_anew(across, fresh):
    # ["no", "yes"] and ["yes", "no"] tokenize to prompts of the same length: holding as many tokens as the
    # prompt is not holding the prompt (restore once answered the second with the first's probabilities).
    for options in (["no", "yes"], ["yes", "no"], ["no", "yes"]):
        batch = single(STATES[1], {"question": "Is it urgent?", "options": options})
        got = probabilities(across, batch)
        assert_same(got, fresh_probabilities(fresh, batch, across))
    assert got != probabilities(across, single(STATES[1], {"question": "Is it urgent?", "options": ["yes", "no"]}))


# ---- a build that answers a prompt cut into calls otherwise than whole ---------------------------------------


def test_where_the_start_up_check_fails_auto_evaluates_every_prompt_whole_and_explicit_modes_refuse(
    model_dir, fresh, monkeypatch
):
    """Reuse rests on a token's logits not depending on how its prompt was cut into llama.cpp calls: checked at
    start-up (with the kernels here it holds, bit for bit). Where it does not, ``auto`` evaluates every prompt
    from its first token in the same calls whatever else is asked, and ``trim`` / ``restore`` stop the start."""
    from decision_adapter import split_check
    from decision_adapter.seams import EngineError
    from decision_adapter.split_check import SPLIT_TOLERANCE

    env = {"DECISION_ADAPTER_CROSS_REQUEST_REUSE": "on", "DECISION_ADAPTER_STATE_CACHE_MIB": 16}
    checked = _engine(model_dir, "auto", **env)
    checked.prove()
    assert checked.split_check <= SPLIT_TOLERANCE and checked.context.prefix_mode == "trim"
    assert checked.context.state_cache is not None
    assert _engine(model_dir, "off").split_check is None  # nothing to check: nothing is cut

    monkeypatch.setattr(split_check, "check_splits", lambda context, model: 0.25)  # the kernels of a build that differs
    fallen = _engine(model_dir, "auto", **env)
    fallen.prove()
    assert fallen.context.prefix_mode == fallen.info["prefix_reuse"] == "off" and fallen.context.state_cache is None
    twin = fallen.twin(1)
    for served in (fallen, twin):
        assert served.context.prefix_mode == "off"
        for batch in (shared(STATES[0]), single(STATES[0]), single(STATES[0])):
            got, n = evaluated(served, batch, monkeypatch)
            assert_same(got, fresh_probabilities(fresh, batch, fallen))
            # each prompt whole, the same state again included: nothing was taken from the request before
            assert n == sum(
                prompt_length(
                    served, single(STATES[0], {"question": q.question, "options": [o.text for o in q.options]})
                )
                for q in batch.questions
            )
    for mode in ("trim", "restore"):
        with pytest.raises(
            EngineError,
            match=f"DECISION_ADAPTER_PREFIX_REUSE={mode}: this llama.cpp build gives "
            "answers up to 0.25 apart .* set it to auto",
        ):
            _engine(model_dir, mode).prove()
