import threading
import time

import pytest

from decision_adapter.admission import Gate
from decision_adapter.caller_errors import Busy


def _hold(gate, entered, release):
    with gate.admit():
        entered.set()
        release.wait(5)


def test_one_holder_at_a_time_and_full_line_is_refused():
    gate = Gate(max_queue=1, timeout_s=5, retry_after_s=3)
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(gate, entered, release))
    holder.start()
    entered.wait(5)
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(_admit_once(gate)))
    waiter.start()
    _wait_for_line(gate, 1)
    assert gate.waiting == 1
    with pytest.raises(Busy) as refused:
        with gate.admit():
            pass
    assert refused.value.status == 503 and refused.value.retry_after_s == 3
    release.set()
    holder.join(5)
    waiter.join(5)
    assert waited and waited[0] > 0  # the waiter got in after the holder left
    assert not gate.busy and gate.waiting == 0


def _admit_once(gate):
    with gate.admit() as admission:
        return admission.waited_ms


def test_wait_limit_gives_busy_and_leaves_the_line():
    gate = Gate(max_queue=2, timeout_s=0.05)
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(gate, entered, release))
    holder.start()
    entered.wait(5)
    with pytest.raises(Busy, match="waited"):
        with gate.admit():
            pass
    assert gate.waiting == 0
    release.set()
    holder.join(5)
    with gate.admit():
        assert gate.busy


def test_waiters_are_served_in_arrival_order():
    gate = Gate(max_queue=8, timeout_s=5)
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(gate, entered, release))
    holder.start()
    entered.wait(5)
    order = []
    threads = []
    for i in range(5):
        t = threading.Thread(target=lambda i=i: _record(gate, order, i))
        t.start()
        threads.append(t)
        _wait_for_line(gate, i + 1)
    release.set()
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3, 4]


def _record(gate, order, i):
    with gate.admit():
        order.append(i)


def test_closing_refuses_the_waiting_line_at_once_and_leaves_the_holder_alone():
    gate = Gate(max_queue=4, timeout_s=30, retry_after_s=2)
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(gate, entered, release))
    holder.start()
    entered.wait(5)
    refusals = []

    def wait_in_line():
        try:
            with gate.admit():
                refusals.append(None)  # admitted: the test fails below
        except Busy as exc:
            refusals.append((exc, time.monotonic()))

    waiters = [threading.Thread(target=wait_in_line) for _ in range(4)]
    for waiter in waiters:
        waiter.start()
    _wait_for_line(gate, 4)
    assert gate.waiting == 4
    closed_at = time.monotonic()
    gate.close("shutting down")
    for waiter in waiters:
        waiter.join(5)
    assert len(refusals) == 4 and all(r is not None for r in refusals)
    assert all(exc.status == 503 and exc.retry_after_s == 2 and "shutting down" in exc.message for exc, _ in refusals)
    assert max(at for _, at in refusals) - closed_at < 1.0  # at once, not after the 30 s wait
    assert gate.busy and gate.waiting == 0 and gate.closed  # the holder still holds the context
    with pytest.raises(Busy, match="shutting down"):  # and whoever comes later is refused too
        with gate.admit():
            pass
    assert not gate.wait_idle(0.05)
    release.set()
    assert gate.wait_idle(5) and not gate.busy
    holder.join(5)


def test_a_closed_idle_gate_admits_nobody():
    gate = Gate(max_queue=1, timeout_s=5)
    assert gate.wait_idle(0) and not gate.closed
    gate.close()
    with pytest.raises(Busy):
        with gate.admit():
            pass
    assert not gate.busy


# -- lanes: one request on each of several contexts -------------------------------------------------------


def test_each_lane_holds_one_request_and_the_line_waits_for_a_free_one():
    gate = Gate(max_queue=1, timeout_s=5, retry_after_s=2, lanes=2)
    with gate.admit() as first, gate.admit() as second:
        assert (first.lane, second.lane) == (0, 1) and gate.in_flight == 2 and gate.busy
        got = []
        waiter = threading.Thread(target=lambda: got.append(_lane_after_wait(gate)))
        waiter.start()
        _wait_for_line(gate, 1)
        with pytest.raises(Busy) as full:  # two held, one waiting: the line is full
            with gate.admit():
                pass
        assert full.value.status == 503 and full.value.retry_after_s == 2
    waiter.join(5)
    assert got == [0] and gate.in_flight == 0  # the lowest free lane


def _lane_after_wait(gate):
    with gate.admit() as admission:
        return admission.lane


def _wait_for_line(gate, n: int, timeout_s: float = 5.0) -> None:
    """Until ``n`` requests wait at the gate (or ``timeout_s`` passed: the caller's assertion tells)."""
    deadline = time.monotonic() + timeout_s
    while gate.waiting < n and time.monotonic() < deadline:
        time.sleep(0.005)
