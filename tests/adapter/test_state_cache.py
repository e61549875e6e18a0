"""The opt-in state cache: recent requests' sequences kept (LRU, bounded in MiB) for single-tenant endpoints.

Off by default (a timing oracle across callers), and only with cross-request reuse on. With it, a state
sent a few requests ago is not evaluated again: the tokens handed to llama.cpp are counted (no clock).
Every answer equals a fresh evaluation of the whole prompt (1e-4), in ``trim`` and ``restore``.
"""

import numpy as np
import pytest

from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.settings import Settings, SettingsError, load_settings
from decision_adapter.state_cache import CachedState, StateCache
from tests.support import adapter_settings

STATES = [
    f"Ticket {n}: the customer with account {4000 + n} reports that invoice {n}-7 was charged twice "
    f"and asks for the card ending {1000 + 37 * n} to be checked."
    for n in range(5)
]
QUESTIONS = [
    {"id": "team", "question": "Which team should handle this?", "options": ["refunds", "billing", "it"]},
    {"id": "upset", "question": "Is the customer upset?", "options": ["no", "yes"]},
]
CACHE_ENV = {"DECISION_ADAPTER_CROSS_REQUEST_REUSE": "on", "DECISION_ADAPTER_STATE_CACHE_MIB": "64"}


def single(state, q=QUESTIONS[0]):
    return parse_decision({"id": "r", "state": state, "question": q["question"], "options": q["options"]})


def shared(state):
    return parse_decision({"id": "b", "state": state, "questions": QUESTIONS})


def _engine(model_dir, mode, **env):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    engine = Engine(adapter_settings(model_dir, DECISION_ADAPTER_PREFIX_REUSE=mode, **env), locate_model(model_dir))
    engine.prove()
    return engine


@pytest.fixture(scope="module")
def fresh(model_dir):
    return _engine(model_dir, "off")


@pytest.fixture(scope="module", params=["trim", "restore"])
def cached(request, model_dir):
    return _engine(model_dir, request.param, **CACHE_ENV)


@pytest.fixture(scope="module")
def across_only(model_dir):
    return _engine(model_dir, "trim", DECISION_ADAPTER_CROSS_REQUEST_REUSE="on")


_FRESH: dict = {}


def answers(engine, batch):
    return [r.probabilities for r in own.decide(engine, batch)[0]]


def fresh_answers(fresh, batch):
    key = (batch.state, tuple(q.question for q in batch.questions))
    if key not in _FRESH:
        _FRESH[key] = answers(fresh, batch)
    return _FRESH[key]


def evaluated(engine, batch):
    """The answers, and how many tokens went to llama.cpp for them."""
    before = engine.context.tokens_evaluated
    got = answers(engine, batch)
    return got, engine.context.tokens_evaluated - before


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.allclose(x, y, atol=1e-4, rtol=0)


def prompt_length(engine, batch) -> int:
    return len(engine.model.prompt_tokens(engine.model.template.render_decision(batch.state, batch.questions[0])))


# -- settings -----------------------------------------------------------------------------


def test_the_cache_is_off_by_default(engine):
    assert Settings().state_cache_mib == 0 and load_settings({}).state_cache_mib == 0
    assert engine.context.state_cache is None  # the tests' usual engine: the defaults


def test_the_cache_needs_cross_request_reuse_and_prefix_reuse():
    with pytest.raises(SettingsError, match="CROSS_REQUEST_REUSE=on"):
        load_settings({"DECISION_ADAPTER_STATE_CACHE_MIB": "16"})
    with pytest.raises(SettingsError, match="PREFIX_REUSE=off"):
        load_settings({**CACHE_ENV, "DECISION_ADAPTER_PREFIX_REUSE": "off"})
    with pytest.raises(SettingsError, match="below 0"):
        load_settings({**CACHE_ENV, "DECISION_ADAPTER_STATE_CACHE_MIB": "-1"})
    assert load_settings(CACHE_ENV).state_cache_mib == 64
    assert load_settings({"DECISION_ADAPTER_STATE_CACHE_MIB": "0"}).state_cache_mib == 0


# -- the store itself ---------------------------------------------------------------------


def entry(tokens, size):
    return CachedState(tuple(tokens), bytearray(size))


def test_the_store_keeps_the_most_recent_within_its_bound():
    cache = StateCache(100)
    for i in range(5):
        assert cache.put(entry([i, i], 30))
        assert cache.bytes <= 100
    assert len(cache) == 3 and [2, 2] in cache and [1, 1] not in cache
    cache.get([2, 2])  # used again: now the most recent, so [3, 3] goes first
    cache.put(entry([9], 30))
    assert [2, 2] in cache and [3, 3] not in cache and cache.bytes == 90
    assert not cache.put(entry([8], 101)) and [8] not in cache and cache.bytes <= 100


def test_the_longest_shared_prefix_is_found():
    cache = StateCache(1000)
    cache.put(entry([1, 2, 3, 4], 10))
    cache.put(entry([1, 2, 9], 10))
    assert cache.longest([1, 2, 3, 5, 6])[1] == 3
    assert cache.longest([1, 2, 9, 9])[0].tokens == (1, 2, 9)
    assert cache.longest([1, 2, 3, 5], more_than=3) is None
    assert cache.longest([7]) is None


# -- the engine with it -------------------------------------------------------------------


def test_a_state_sent_before_other_requests_is_not_evaluated_again(cached, fresh):
    first = []
    for state in STATES[:3]:
        got, n = evaluated(cached, single(state))
        assert_same(got, fresh_answers(fresh, single(state)))
        first.append(n)
    got, again = evaluated(cached, single(STATES[0]))  # two other states came in between
    assert_same(got, fresh_answers(fresh, single(STATES[0])))
    assert again < first[0] - 30  # its state came from the cache
    got, other = evaluated(cached, single(STATES[1], QUESTIONS[1]))  # a cached state, another question
    assert_same(got, fresh_answers(fresh, single(STATES[1], QUESTIONS[1])))
    assert other < prompt_length(cached, single(STATES[1], QUESTIONS[1])) - 30
    got, _ = evaluated(cached, shared(STATES[2]))
    assert_same(got, fresh_answers(fresh, shared(STATES[2])))
    assert cached.context.state_cache.bytes <= cached.context.state_cache.max_bytes == 64 * 2**20


def test_without_the_cache_only_the_last_request_is_reused(across_only, fresh):
    for state in STATES[:2]:
        answers(across_only, single(state))
    got, again = evaluated(across_only, single(STATES[0]))
    assert_same(got, fresh_answers(fresh, single(STATES[0])))
    assert across_only.context.state_cache is None
    assert again > prompt_length(across_only, single(STATES[0])) // 3  # read again: only the head was shared


def test_the_cache_drops_the_least_recent_state_beyond_its_bound(model_dir, fresh):
    engine = _engine(model_dir, "trim", **CACHE_ENV)
    assert len(engine.context.state_cache) == 0  # the start-up probe is not kept
    answers(engine, single(STATES[0]))
    size = engine.context.state_cache.bytes  # one entry, a prompt of about this length
    engine.context.state_cache = StateCache(int(size * 2.5))  # room for two such states
    for state in STATES[:3]:
        answers(engine, single(state))
        assert engine.context.state_cache.bytes <= engine.context.state_cache.max_bytes
    assert len(engine.context.state_cache) == 2
    got, newest = evaluated(engine, single(STATES[1]))  # kept: STATES[1] and STATES[2]
    assert_same(got, fresh_answers(fresh, single(STATES[1])))
    assert newest <= 2
    answers(engine, single(STATES[3]))  # drops STATES[2], the least recently used now
    got, dropped = evaluated(engine, single(STATES[2]))
    assert_same(got, fresh_answers(fresh, single(STATES[2])))
    assert dropped > prompt_length(engine, single(STATES[2])) // 3


def test_the_same_prompt_again_is_read_from_its_kept_logits(model_dir, fresh):
    engine = _engine(model_dir, "trim", **CACHE_ENV)
    first, n_first = evaluated(engine, single(STATES[3]))
    answers(engine, single(STATES[4]))  # another prompt in between: the context no longer holds it
    again, n_again = evaluated(engine, single(STATES[3]))
    assert n_first > 30 and n_again == 0  # nothing evaluated: the whole prompt and its logits were kept
    assert again == first
    assert_same(again, fresh_answers(fresh, single(STATES[3])))
    other, n_other = evaluated(engine, single(STATES[3], QUESTIONS[1]))  # the kept state, another question
    assert n_other > 0
    assert_same(other, fresh_answers(fresh, single(STATES[3], QUESTIONS[1])))


def test_kept_logits_count_against_the_bound():
    logits = np.zeros(1000, dtype=np.float32)
    with_logits = CachedState((1, 2), bytearray(10), logits=logits)
    assert with_logits.size == 10 + logits.nbytes
    cache = StateCache(5000)
    assert not cache.put(CachedState((3,), bytearray(10), logits=np.zeros(1000, dtype=np.float64)))  # 8,010 bytes
    assert cache.put(with_logits) and cache.bytes == with_logits.size
