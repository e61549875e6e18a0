"""Many callers at once: the model's contexts (lanes), one request on each, and the CPU threads they share.

llama-server evaluates its parallel slots together in one batch; on this project's llama.cpp builds a
sequence evaluated in a batch with others can drift from the same sequence evaluated alone (llama.cpp's
CPU kernels split work by batch shape), and a decision must never depend on who else asked. So the
adapter keeps one context per request in flight, all on the one loaded model (``Engine.twin``): the
weights are loaded once, each context has its own KV cache, and a request is evaluated on its context
exactly as it would be alone. ``SM_LLAMA_CPP_PARALLEL`` contexts are made, as many as fit in
``DECISION_ADAPTER_MAX_KV_MIB``; admission.py gives each request a free one or a place in the bounded line.

The CPU threads (``SM_LLAMA_CPP_THREADS``) are divided between the requests in flight. ``shared``: each
llama.cpp call takes its request's share of them at that moment (all of them when alone) from those free
(``ThreadShares``), waiting while none is, which needs the answers not to depend on the thread count.
``fixed``: each context always uses its share of a full server. The
start-up check (``open_lanes``) scores probe decisions, letters and cloze, on the first context at each
thread count a request could be given, and on all contexts at once, against the same decisions alone on
the first context with every thread: ``shared`` only if all agree within ``TOLERANCE``, else ``fixed`` if
the contexts at once agree with the first alone at that share, else one context only. The log and model
info (``parallel``) say which.

Nothing passes between contexts but the fixed head's text (each evaluates and keeps its own), the
content-free priors and the opt-in state cache (shared, under locks): what one caller sent never changes
what another is answered, nor what its request costs.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Protocol, overload

import numpy as np

from decision_contract import names

from . import scoring
from .admission import Gate
from .engine import Engine
from .questions import DecisionBatch
from .seams import R
from .settings import Settings
from .slots import PROBE_QUESTIONS, PROBE_STATE

log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # the largest difference in any probability between a decision in company and alone
WAIT_CHECK_S = 0.05  # how often a call waiting for threads checks its request's time limit
SHARED, FIXED, ONE = "shared", "fixed", "one context"

# Small on purpose (every start-up scores it five times or more): the kernels a decision takes are the same.
PROBE = DecisionBatch(
    "lanes-probe",
    PROBE_STATE,
    (
        dataclasses.replace(PROBE_QUESTIONS[0], options=PROBE_QUESTIONS[0].options[:4], readout=names.LETTERS),
        dataclasses.replace(
            PROBE_QUESTIONS[1],
            id="probe-cloze",
            options=PROBE_QUESTIONS[1].options[:3],
            readout=names.CLOZE,
            normalize=names.SUM,
        ),
    ),
)


class Probe(Protocol):
    """Scores the probe decisions with ``threads``: on context ``lane`` (their probabilities, one flat list),
    or with ``lane`` None on every context at once (a list per context)."""

    @overload
    def __call__(self, lane: int, threads: tuple[int, int]) -> list[float]: ...

    @overload
    def __call__(self, lane: None, threads: tuple[int, int]) -> list[list[float]]: ...


Check = Callable[[Probe, int, tuple[int, int]], tuple[str, list[str]]]  # (probe, contexts, threads) -> policy


def lanes_that_fit(parallel: int, context_mib: float, max_kv_mib: int) -> int:
    """How many contexts to make: ``parallel``, fewer if their memory together would pass the bound; at
    least one (the first context is the model's own)."""
    if context_mib <= 0:
        return parallel
    return max(1, min(parallel, int(max_kv_mib // context_mib)))


def share(threads: tuple[int, int], among: int) -> tuple[int, int]:
    """One request's share of (generation, prompt) threads when ``among`` requests are in flight."""
    generation, prompt = threads
    among = max(1, among)
    return max(1, generation // among), max(1, prompt // among)


def thread_counts(threads: tuple[int, int], lanes: int) -> list[tuple[int, int]]:
    """Every share a request can get on ``lanes`` contexts, the whole first."""
    return list(dict.fromkeys(share(threads, k) for k in range(1, lanes + 1)))


def differs(a: list[float], b: list[float]) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) if len(a) == len(b) else float("inf")


def choose_threads(
    probe: Probe, lanes: int, threads: tuple[int, int], tolerance: float = TOLERANCE
) -> tuple[str, list[str]]:
    """The start-up check: (the policy whose answers equal a lone request's, what disagreed).

    ``probe(lane, threads)`` scores the probe decisions on that context with those threads and returns
    their probabilities, one flat list; ``probe(None, threads)`` does so on every context at once (a list
    per context). Against the first context with every thread alone: ``shared`` when the first context at
    every other share, and every context at once at a full server's share, agree; else ``fixed`` when every
    context at once agrees with the first alone at that share. The contexts are made alike from one model,
    so one in company at a share stands for each at that share.
    """
    findings: list[str] = []

    def agrees(reference: list[float], runs: list[tuple[str, list[float]]]) -> bool:
        for what, got in runs:
            worst = differs(reference, got)
            if worst > tolerance:
                findings.append(f"{what} differed by {worst:.2g} from the same decision alone")
                return False
        return True

    fixed = share(threads, lanes)
    alone = probe(0, threads)
    counts = [(f"context 0 with {t[0]} thread(s)", probe(0, t)) for t in thread_counts(threads, lanes)[1:]]
    together = [
        (f"context {lane} in company with {fixed[0]} thread(s)", got) for lane, got in enumerate(probe(None, fixed))
    ]
    if agrees(alone, counts) and agrees(alone, together):
        return SHARED, findings
    alone = probe(0, fixed) if counts else alone
    if agrees(alone, together):
        return FIXED, findings
    return ONE, findings


class ThreadShares:
    """The server's CPU threads, shared by the llama.cpp calls in flight (policy ``shared``).

    A call takes the largest of the checked shares (``thread_counts``) that both its request's share of the
    requests in flight and the free threads allow, waiting while no share fits, and gives them back when
    it returns: the calls at once never run more threads than the server was given. Running more would
    leave each call's threads waiting at every graph node for one the kernel has set aside; two requests
    at once on one thread each answer more per second than one at a time on two (docs/benchmarks.md).

    A call of more than one thread runs on the first idle of a few long-lived threads, one per context, so
    that a lone caller's calls always come from the same thread. llama.cpp's OpenMP build waits at each
    graph node by spinning, but only while the process holds no more OpenMP threads than CPUs; every
    thread that starts a parallel call keeps helpers of its own, and gunicorn hands requests to whichever
    of its threads is free: calls from those slowed a lone request's evaluation (docs/benchmarks.md).
    """

    def __init__(self, threads: tuple[int, int], lanes: int, in_flight: Callable[[], int]):
        self.threads = threads
        self.counts = thread_counts(threads, lanes)  # every share, most threads first
        self.in_flight = in_flight
        self.free = threads[1]  # prompt threads: a share's generation threads follow its prompt threads
        self._cond = threading.Condition()
        self._callers = [ThreadPoolExecutor(1, thread_name_prefix=f"llama-calls-{n}") for n in range(lanes)]
        self._busy: set[int] = set()

    def run(self, call: Callable[[tuple[int, int]], R], give_up: Callable[[], None]) -> R:
        """``call(threads)`` on a share; ``give_up`` is called while waiting (it raises to stop)."""
        with self._cond:
            while True:
                allowed = min(share(self.threads, self.in_flight())[1], self.free)
                fits = [count for count in self.counts if count[1] <= allowed]
                if fits:
                    break
                self._cond.wait(WAIT_CHECK_S)
                give_up()
            taken = fits[0]
            self.free -= taken[1]
            caller = next((n for n in range(len(self._callers)) if n not in self._busy), None) if taken[1] > 1 else None
            if caller is not None:
                self._busy.add(caller)
        try:
            return call(taken) if caller is None else self._callers[caller].submit(call, taken).result()
        finally:
            with self._cond:
                self.free += taken[1]
                if caller is not None:
                    self._busy.discard(caller)
                self._cond.notify_all()


class Lanes:
    """The model's contexts and the gate in front of them."""

    def __init__(self, engines: list[Engine], gate: Gate, policy: str):
        self.engines = engines
        self.gate = gate
        self.policy = policy
        base = engines[0].model.loaded_threads
        if policy == SHARED:
            shares = ThreadShares(base, len(engines), lambda: gate.in_flight)
            for engine in engines:
                engine.context.thread_source = shares
        else:
            for engine in engines:
                engine.context.set_threads(share(base, len(engines)))
        gate.set_lanes(len(engines))

    @contextmanager
    def admit(self) -> Iterator[tuple[Engine, float]]:
        """A free context for the ``with`` block (or the line, or 503): yields (its engine, ms waited)."""
        with self.gate.admit() as admission:
            yield self.engines[admission.lane], admission.waited_ms


def _probe(engine: Engine, threads: tuple[int, int]) -> list[float]:
    engine.context.set_threads(threads)
    results, _ = scoring.decide(engine, PROBE)
    return [p for result in results for p in result.probabilities]


def _all_at_once(engines: list[Engine], threads: tuple[int, int]) -> list[list[float]]:
    out: list[list[float]] = [[] for _ in engines]
    failures: list[BaseException] = []
    start = threading.Barrier(len(engines))

    def run(lane: int) -> None:
        try:
            start.wait(10)
            out[lane] = _probe(engines[lane], threads)
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=run, args=(lane,), name=f"lanes-probe-{lane}") for lane in range(len(engines))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]
    return out


def open_lanes(engine: Engine, settings: Settings, gate: Gate, *, check: Check = choose_threads) -> Lanes:
    """Make the contexts the settings ask for and fit, prove them (``choose_threads``), open the gate to them."""
    count = lanes_that_fit(settings.parallel, engine.model.context_mib, settings.max_kv_mib)
    if count < settings.parallel:
        log.warning(
            "SM_LLAMA_CPP_PARALLEL=%d asks for %d contexts of %.0f MiB each; %d fit in "
            "DECISION_ADAPTER_MAX_KV_MIB=%d, so %d request(s) are evaluated at once",
            settings.parallel,
            settings.parallel,
            engine.model.context_mib,
            count,
            settings.max_kv_mib,
            count,
        )
    engines = [engine] + [engine.twin(lane) for lane in range(1, count)]
    policy, findings = SHARED, list[str]()
    if count > 1:

        @overload
        def probe(lane: int, threads: tuple[int, int]) -> list[float]: ...

        @overload
        def probe(lane: None, threads: tuple[int, int]) -> list[list[float]]: ...

        def probe(lane: int | None, threads: tuple[int, int]) -> list[float] | list[list[float]]:
            return _probe(engines[lane], threads) if lane is not None else _all_at_once(engines, threads)

        policy, findings = check(probe, count, engine.model.loaded_threads)
        for finding in findings:
            log.warning("start-up check: %s", finding)
        for each in engines:  # the probes are not worth keeping as cached prefixes
            each.context.set_threads(each.model.loaded_threads)
            each.start_afresh()
        if engine.context.state_cache is not None:
            engine.context.state_cache.clear()
    if policy == ONE:
        log.error(
            "the model's contexts do not answer alike on this llama.cpp build; serving one request at a "
            "time (SM_LLAMA_CPP_PARALLEL=%d not honoured)",
            settings.parallel,
        )
        engines = engines[:1]
    lanes = Lanes(engines, gate, policy)
    engine.info["parallel"] = {
        "lanes": len(engines),
        "threads": policy,
        "context_mib": round(engine.model.context_mib, 1),
    }
    log.info(
        "%d request(s) evaluated at once, each on its own context (%.0f MiB of KV each); threads: %s",
        len(engines),
        engine.model.context_mib,
        policy,
    )
    return lanes
