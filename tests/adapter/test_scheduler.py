"""Many callers at once (issue #40): the model's contexts (lanes), one request on each, every answer equal to
the same request alone. In-process engines on the real llama.cpp runtime (the embedded model, trim; the hybrid
test GGUF, restore); the start-up check's choices forced with fake probes; the gate's lanes on their own.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from decision_adapter import scheduler
from decision_adapter.admission import Gate
from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import TimedOut
from decision_adapter.scheduler import (
    FIXED,
    ONE,
    SHARED,
    ThreadShares,
    choose_threads,
    lanes_that_fit,
    share,
    thread_counts,
)
from scripts.hybrid_gguf import write_hybrid_gguf
from tests.support import adapter_settings

TOLERANCE = 1e-4
OPTIONS = [
    {"id": "refunds", "text": "Refunds and returns"},
    {"id": "shipping", "text": "Shipping and delivery"},
    {"id": "billing", "text": "Billing and invoices"},
    {"id": "tech", "text": "Technical support"},
]


def _engine(folder, **env):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    settings = adapter_settings(folder, **env)
    engine = Engine(settings, locate_model(folder))
    engine.prove()
    return engine, settings


@pytest.fixture(scope="module")
def lanes(model_dir):
    engine, settings = _engine(model_dir, SM_LLAMA_CPP_PARALLEL=3)
    return scheduler.open_lanes(engine, settings, Gate(max_queue=8, timeout_s=120))


@pytest.fixture(scope="module")
def hybrid_lanes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hybrid-lanes")
    write_hybrid_gguf(folder / "hybrid-qwen35.gguf")
    engine, settings = _engine(folder, SM_LLAMA_CPP_PARALLEL=2, DECISION_ADAPTER_PREFIX_REUSE="auto")
    return scheduler.open_lanes(engine, settings, Gate(max_queue=8, timeout_s=120))


def body(i: int, **fields) -> dict:
    return {
        "id": f"d{i}",
        "state": f"Ticket {i}: order {4400 + i} arrived late and the invoice shows {i + 2} "
        "charges. The customer asks what happens next.",
        "question": "Which team should handle this?",
        "options": OPTIONS,
        **fields,
    }


def batch(i: int, **fields) -> dict:
    return {
        "id": f"b{i}",
        "state": body(i)["state"],
        **fields,
        "questions": [
            {"id": "team", "question": "Which team should handle this?", "options": OPTIONS},
            {"id": "late", "question": "Did the parcel arrive late?", "options": ["no", "yes"]},
        ],
    }


KINDS = {
    "letters as_given": lambda i: body(i, order="as_given"),
    "letters prior": lambda i: body(i, order="prior"),
    "letters rotations": lambda i: body(i, order="rotations"),
    "cloze pmi": lambda i: body(i, readout="cloze"),
    "shared-state batch": lambda i: batch(i),
    "shared-state batch, cloze": lambda i: batch(i, readout="cloze"),
}


def probabilities(lanes, request: dict, *, limit_s: float | None = None) -> list[list[float]]:
    with lanes.admit() as (engine, _), engine.time_limit(limit_s):
        results, _ = own.decide(engine, parse_decision(request))
    return [list(result.probabilities) for result in results]


def at_once(lanes, requests: list[dict], limits: dict[int, float] | None = None) -> list:
    """Each request from its own thread, all released together; an answer or the exception per request."""
    out: list = [None] * len(requests)
    start = threading.Barrier(len(requests))

    def run(i):
        start.wait(30)
        try:
            out[i] = probabilities(lanes, requests[i], limit_s=(limits or {}).get(i))
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return out


def assert_equal_alone(together, alone):
    for got, want in zip(together, alone):
        assert not isinstance(got, Exception), got
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert len(g) == len(w) and abs(sum(g) - 1.0) < 1e-6
            assert float(np.max(np.abs(np.subtract(g, w)))) <= TOLERANCE, (g, w)


# -- the arithmetic ---------------------------------------------------------------------------------------


def test_lanes_that_fit_keeps_the_first_and_stops_at_the_memory_bound():
    assert lanes_that_fit(4, 100.0, 1000) == 4
    assert lanes_that_fit(4, 300.0, 1000) == 3
    assert lanes_that_fit(4, 2000.0, 1000) == 1  # the model's own context is always made
    assert lanes_that_fit(3, 0.0, 1) == 3  # nothing logged: no bound to apply


def test_thread_shares():
    assert share((4, 4), 1) == (4, 4) and share((4, 8), 2) == (2, 4) and share((2, 2), 3) == (1, 1)
    assert thread_counts((4, 4), 4) == [(4, 4), (2, 2), (1, 1)]


def _held(shares, release, started):
    """A call that holds its share until ``release`` is set: records the threads it was given."""

    def call(threads):
        started.append(threads)
        release.wait(10)
        return threads

    return lambda: shares.run(call, lambda: None)


def test_calls_at_once_never_hold_more_threads_than_the_server():
    shares = ThreadShares((4, 4), 4, lambda: 2)
    release, started, results = threading.Event(), [], []
    workers = [threading.Thread(target=lambda: results.append(_held(shares, release, started)())) for _ in range(3)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 5
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert started == [(2, 2), (2, 2)] and shares.free == 0  # the third waits: no thread is free
    release.set()
    for worker in workers:
        worker.join(5)
    assert results == [(2, 2)] * 3 and shares.free == 4


def test_a_lone_callers_calls_run_on_one_long_lived_thread_and_a_one_thread_call_where_it_is():
    in_flight = [1]
    shares = ThreadShares((2, 2), 2, lambda: in_flight[0])
    here = threading.current_thread().name
    alone = [shares.run(lambda threads: (threads, threading.current_thread().name), lambda: None) for _ in range(3)]
    assert [threads for threads, _ in alone] == [(2, 2)] * 3
    assert len({name for _, name in alone}) == 1 and alone[0][1] != here
    in_flight[0] = 2
    assert shares.run(lambda threads: (threads, threading.current_thread().name), lambda: None) == ((1, 1), here)


def test_a_newcomer_waits_for_a_lone_calls_threads_then_takes_its_share():
    in_flight = [1]
    shares = ThreadShares((2, 2), 2, lambda: in_flight[0])
    release, started = threading.Event(), []
    first = threading.Thread(target=_held(shares, release, started))
    first.start()
    while not started:
        time.sleep(0.01)
    in_flight[0] = 2
    got = []
    second = threading.Thread(target=lambda: got.append(shares.run(lambda threads: threads, lambda: None)))
    second.start()
    second.join(0.3)
    assert started == [(2, 2)] and not got  # every thread is held: it waits
    release.set()
    first.join(5)
    second.join(5)
    assert got == [(1, 1)] and shares.free == 2


def test_a_call_waiting_for_threads_gives_up_and_a_failed_call_gives_them_back():
    shares = ThreadShares((2, 2), 2, lambda: 1)

    def expired():
        raise TimedOut("past its limit")

    def holds_all(threads):
        with pytest.raises(TimedOut):
            shares.run(lambda threads: threads, expired)
        raise RuntimeError("failed")

    with pytest.raises(RuntimeError, match="failed"):
        shares.run(holds_all, lambda: None)
    assert shares.free == 2 and shares.run(lambda threads: threads, lambda: None) == (2, 2)


# -- the start-up check, forced ---------------------------------------------------------------------------


def _probe(answer):
    """A fake probe: ``answer(lane, threads, together)`` -> probabilities."""

    def probe(lane, threads):
        if lane is None:
            return [answer(i, threads, True) for i in range(3)]
        return answer(lane, threads, False)

    return probe


def test_the_check_shares_threads_when_every_context_and_count_agrees():
    policy, findings = choose_threads(_probe(lambda lane, threads, together: [0.5, 0.5]), 3, (4, 4))
    assert (policy, findings) == (SHARED, [])


def test_the_check_fixes_the_threads_when_the_count_moves_an_answer():
    def answer(lane, threads, together):
        return [0.5, 0.5] if threads == (1, 1) else [0.6, 0.4]

    policy, findings = choose_threads(_probe(answer), 3, (4, 4))
    assert policy == FIXED and "context 0 with 1 thread(s)" in findings[0]


def test_the_check_fixes_the_threads_when_company_moves_an_answer_at_another_count():
    def answer(lane, threads, together):
        return [0.5, 0.5] if not together or threads == (2, 2) else [0.5 + 1e-3, 0.5 - 1e-3]

    policy, findings = choose_threads(_probe(answer), 2, (4, 4))
    assert policy == SHARED  # the shared policy's company runs at (2, 2) here, which agrees
    policy, findings = choose_threads(_probe(answer), 4, (4, 4))
    assert policy == ONE and any("in company" in f for f in findings)


def test_the_check_serves_one_context_when_the_contexts_disagree():
    policy, findings = choose_threads(
        _probe(lambda lane, threads, together: [0.5, 0.5] if lane == 0 else [0.7, 0.3]), 3, (2, 2)
    )
    assert policy == ONE and "context 1" in findings[-1]


def test_a_difference_within_the_tolerance_is_no_difference():
    def answer(lane, threads, together):
        return [0.5 + lane * 1e-5, 0.5 - lane * 1e-5]

    assert choose_threads(_probe(answer), 3, (2, 2))[0] == SHARED


def threads_of(engine) -> tuple[int, int]:
    """The (generation, prompt) threads llama.cpp's context was last given."""
    llama_cpp = engine.context.llama_cpp
    return llama_cpp.llama_n_threads(engine.llm.ctx), llama_cpp.llama_n_threads_batch(engine.llm.ctx)


def test_open_lanes_follows_the_check(model_dir):
    engine, settings = _engine(model_dir, SM_LLAMA_CPP_PARALLEL=2)
    fixed = scheduler.open_lanes(engine, settings, Gate(1, 5), check=lambda probe, n, threads: (FIXED, ["forced"]))
    assert fixed.policy == FIXED and len(fixed.engines) == 2
    assert all(
        threads_of(e) == share(engine.model.loaded_threads, 2) and e.context.thread_source is None
        for e in fixed.engines
    )
    one = scheduler.open_lanes(engine, settings, Gate(1, 5), check=lambda probe, n, threads: (ONE, ["forced"]))
    assert one.policy == ONE and len(one.engines) == 1 and one.gate.lanes == 1


def test_the_memory_bound_limits_the_contexts(model_dir):
    engine, _settings = _engine(model_dir, SM_LLAMA_CPP_PARALLEL=4)
    assert engine.model.context_mib > 0
    bounded = adapter_settings(
        model_dir, SM_LLAMA_CPP_PARALLEL=4, DECISION_ADAPTER_MAX_KV_MIB=int(engine.model.context_mib * 2.5)
    )
    lanes = scheduler.open_lanes(engine, bounded, Gate(1, 5))
    assert len(lanes.engines) == 2 and lanes.gate.lanes == 2 and engine.info["parallel"]["lanes"] == 2


# -- real contexts: in company as alone ---------------------------------------------------------------------


def test_the_embedded_models_contexts_pass_the_start_up_check(lanes):
    assert len(lanes.engines) == 3 and lanes.policy in (SHARED, FIXED)
    assert len({id(e.llm.ctx) for e in lanes.engines}) == 3  # a context each
    assert len({id(e.llm._model) for e in lanes.engines}) == 1  # on one loaded model


@pytest.mark.parametrize("kind", list(KINDS))
def test_different_and_identical_requests_together_equal_each_alone(lanes, kind):
    different = [KINDS[kind](i) for i in range(3)]
    alone = [probabilities(lanes, r) for r in different]
    assert_equal_alone(at_once(lanes, different), alone)
    assert_equal_alone(at_once(lanes, [different[0]] * 3), [alone[0]] * 3)


@pytest.mark.parametrize(
    "kind", ["letters as_given", "letters rotations", "shared-state batch", "shared-state batch, cloze"]
)
def test_the_hybrid_models_contexts_answer_as_alone(hybrid_lanes, kind):
    assert len(hybrid_lanes.engines) == 2 and hybrid_lanes.engines[0].context.prefix_mode == "restore"
    different = [KINDS[kind](i) for i in range(3)]
    alone = [probabilities(hybrid_lanes, r) for r in different]
    assert_equal_alone(at_once(hybrid_lanes, different), alone)


def test_a_request_past_its_time_limit_stops_alone(lanes):
    long_state = " ".join(f"Line {n}: the customer wrote again about order {n}." for n in range(120))
    slow = dict(body(9), state=long_state)
    others = [body(i) for i in range(2)]
    alone = [probabilities(lanes, r) for r in others]
    out = at_once(lanes, [slow, *others], limits={0: 0.001})
    assert isinstance(out[0], TimedOut)
    assert_equal_alone(out[1:], alone)
    assert_equal_alone([probabilities(lanes, others[0])], alone[:1])  # and the contexts serve on


def test_the_opt_in_reuse_and_state_cache_answer_as_alone_under_concurrency(model_dir):
    engine, settings = _engine(
        model_dir,
        SM_LLAMA_CPP_PARALLEL=2,
        DECISION_ADAPTER_CROSS_REQUEST_REUSE="on",
        DECISION_ADAPTER_STATE_CACHE_MIB=64,
    )
    reuse = scheduler.open_lanes(engine, settings, Gate(max_queue=8, timeout_s=120))
    assert len(reuse.engines) == 2 and reuse.engines[1].context.state_cache is engine.context.state_cache  # one cache
    requests = [body(i) for i in range(3)] + [batch(0)]
    alone = [probabilities(reuse, r) for r in requests]  # the cache holds these states now
    assert len(engine.context.state_cache) > 0
    assert_equal_alone(at_once(reuse, requests), alone)  # answered from the cache, on either context
    assert_equal_alone(at_once(reuse, requests[::-1]), alone[::-1])
