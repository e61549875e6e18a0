"""Throughput under concurrent callers (notebook 06): the sustainable-rate arithmetic on synthetic levels, the
callers' loop against a fake client (in flight, 503s counted, errors), and one short run against the real adapter."""

from __future__ import annotations

import threading
import time

import pytest

from workshop_lib.client.endpoint import Decision
from workshop_lib.client.endpoint_errors import BadRequest, EndpointBusy
from workshop_lib.evaluation import load_tasks
from workshop_lib.evaluation.report import percentile
from workshop_lib.evaluation.throughput import (
    Level,
    Sustainable,
    Throughput,
    fresh_request,
    fresh_requests,
    measure_level,
    measure_throughput,
    note_tag,
    sustainable_level,
)


def level(concurrency: int, *, rate: float, p95: float, refused: int = 0, failed: int = 0, n: int = 20) -> Level:
    """A level of ``n`` answers whose p95 is ``p95`` ms (the rest faster) and whose rate is ``rate`` a second."""
    latencies = tuple([p95 / 2] * (n - 2) + [p95, p95])
    return Level(concurrency, latencies, wall_s=n / rate, refused=refused, failed=failed)


LEVELS = (level(1, rate=2.0, p95=500), level(2, rate=3.0, p95=900), level(4, rate=3.5, p95=2500))


def test_a_synthetic_level_has_the_rate_and_p95_it_was_made_with():
    made = level(2, rate=3.0, p95=900)
    assert made.decisions_per_s == pytest.approx(3.0) and made.p95_ms == pytest.approx(900)
    assert made.p50_ms == percentile(made.latencies_ms, 50) == pytest.approx(450)


@pytest.mark.parametrize("limit, picked", [(600, 1), (1000, 2), (2499, 2), (2500, 4), (60_000, 4)])
def test_the_highest_rate_whose_p95_is_within_the_limit_is_picked(limit, picked):
    assert sustainable_level(LEVELS, limit).concurrency == picked


def test_none_fits_when_every_p95_is_above_the_limit():
    assert sustainable_level(LEVELS, 499) is None
    assert sustainable_level((), 2000) is None
    shown = str(Throughput("e", LEVELS, 1.0).sustainable(499))
    assert "no sustainable rate" in shown and "C = 1: p95 500 ms" in shown


def test_a_faster_level_that_left_requests_unanswered_does_not_count():
    levels = (
        level(1, rate=2.0, p95=500),
        level(2, rate=3.0, p95=900, refused=1),
        level(4, rate=3.5, p95=900, failed=1),
    )
    assert sustainable_level(levels, 2000).concurrency == 1
    assert "requests not answered" in str(Sustainable("e", 400.0, None, levels))


def test_on_equal_rates_the_fewer_callers_win_whatever_the_order():
    tied = (level(4, rate=3.0, p95=800), level(2, rate=3.0, p95=900), level(1, rate=1.0, p95=300))
    assert sustainable_level(tied, 2000).concurrency == 2
    assert sustainable_level(tuple(reversed(tied)), 2000).concurrency == 2


def test_the_limit_must_be_positive():
    with pytest.raises(ValueError, match="p95_ms"):
        sustainable_level(LEVELS, 0)


def test_the_sustainable_rate_says_what_it_picked_and_keeps_it_as_data():
    chosen = Throughput("e", LEVELS, 1.0).sustainable(1000)
    assert chosen.decisions_per_s == pytest.approx(3.0)
    assert "3.00 decisions/s" in str(chosen) and "180 a minute" in str(chosen) and "2 concurrent callers" in str(chosen)
    assert chosen.to_dict() == {
        "decisions_per_s": 3.0,
        "concurrency": 2,
        "p95_ms": pytest.approx(900),
        "p95_limit_ms": 1000.0,
    }


def test_a_measurement_reads_back_as_it_was_saved():
    made = Throughput("e", LEVELS + (Level(8, (), 1.0, busy_503=3, refused=2),), 2.5)
    again = Throughput.from_dict(made.to_dict())
    assert again.levels == made.levels and again.seconds == 2.5
    assert "| C = 4 | 3.50 |" in again.to_markdown()


def test_each_request_is_new_and_keeps_the_task():
    task = load_tasks()[0]
    first, second = fresh_request(task, 0, "r1"), fresh_request(task, 1, "r1")
    assert first["id"] != second["id"] and first["state"] != second["state"]
    assert first["state"].endswith(task.state) and first["options"] == task.request()["options"]


def test_requests_near_each_other_share_nothing_after_the_head():
    # A server reusing one caller's opening for the next (llama-server's slots) must gain nothing from the note:
    # with C callers, the prompts in flight and in its C slots are a few consecutive ones.
    task = load_tasks()[0]
    firsts = [fresh_request(task, n, "c8")["state"][0] for n in range(64)]
    assert all(len(set(firsts[i : i + 16])) == 16 for i in range(len(firsts) - 15))
    assert fresh_request(task, 3, "c8") == fresh_request(task, 3, "c8")  # both servers get the same prompts
    assert note_tag("c8", 3) != note_tag("c4", 3)


# ---- the callers' loop, against a fake client -----------------------------------------------------


class FakeClient:
    """Answers after ``delay`` s; counts the requests in flight at once; the ``busy`` first requests get
    503s (two retried, then answered) and ``refuse`` every request from then on, or ``bad`` raises a 400."""

    def __init__(self, delay: float = 0.01, *, busy: int = 0, refuse: bool = False, bad: bool = False):
        self.delay, self.busy, self.refuse, self.bad = delay, busy, refuse, bad
        self.lock, self.in_flight, self.most, self.seen = threading.Lock(), 0, 0, 0

    def decide(self, body):
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.seen += 1
            n = self.seen
        try:
            time.sleep(self.delay)
            if self.bad:
                raise BadRequest("options: at least two", endpoint="fake", status=400)
            if self.refuse:
                error = EndpointBusy("busy", endpoint="fake", status=503)
                error.attempts = 4
                raise error
            ids = tuple(o["id"] for o in body["options"])
            return Decision(
                body["id"],
                ids,
                tuple(1 / len(ids) for _ in ids),
                client_latency_ms=self.delay * 1000,
                attempts=3 if n <= self.busy else 1,
            )
        finally:
            with self.lock:
                self.in_flight -= 1


def _requests():
    return fresh_requests(load_tasks()[:1], "t")


@pytest.mark.parametrize("concurrency", [1, 2, 4])
def test_the_callers_keep_exactly_c_requests_in_flight(concurrency):
    client = FakeClient(busy=2)
    made = measure_level(client.decide, concurrency, 0.15, _requests())
    assert client.most == concurrency and made.concurrency == concurrency
    assert made.answered == client.seen and made.complete
    assert made.busy_503 == 4  # two requests answered on their third attempt
    assert made.decisions_per_s == pytest.approx(made.answered / made.wall_s)


def test_requests_refused_after_the_retries_are_counted_and_do_not_stop_the_callers():
    client = FakeClient(refuse=True)
    made = measure_level(client.decide, 2, 0.1, _requests())
    assert made.answered == 0 and made.refused == client.seen >= 2 and made.busy_503 == 4 * client.seen
    assert not made.complete and sustainable_level([made], 10**6) is None


def test_a_caller_stops_at_an_error_that_is_not_load():
    client = FakeClient(bad=True)
    made = measure_level(client.decide, 2, 5.0, _requests())
    assert made.failed == client.seen == 2 and made.wall_s < 1.0 and "BadRequest" in made.error
    assert not Throughput("fake", (made,), 5.0).ok


def test_a_limit_stops_the_callers_after_that_many_requests_each_sent_once():
    client, source, taken = FakeClient(delay=0.02), _requests(), []

    def next_request():
        body = source()
        taken.append(body["id"])
        return body

    made = measure_level(client.decide, 4, 30.0, next_request, limit=20)
    assert made.answered == client.seen == 20 and client.most == 4 and made.complete
    assert len(set(taken)) == len(taken) == 20
    assert made.wall_s < 5.0  # the limit ended it, not the 30 s


def test_the_time_limit_stops_the_callers_taking_requests():
    made = measure_level(FakeClient(delay=0.05).decide, 2, 0.3, _requests(), limit=10_000)
    assert 2 <= made.answered < 40


def test_requests_from_one_source_are_new_and_two_sources_of_a_run_agree():
    tasks = load_tasks()[:3]
    one, two = fresh_requests(tasks, "c2"), fresh_requests(tasks, "c2")
    first = [one() for _ in range(7)]
    assert [b["id"] for b in first] == [two()["id"] for _ in range(7)]  # the same prompts to two servers
    assert len({b["state"] for b in first}) == 7  # each new to a server
    assert [b["question"] for b in first[:3]] == [t.question for t in tasks] == [b["question"] for b in first[3:6]]
    with pytest.raises(ValueError, match="no tasks"):
        fresh_requests([], "r")


def test_measuring_runs_each_level_in_turn_after_an_uncounted_first_request():
    client = FakeClient()
    made = measure_throughput(client, concurrencies=(1, 2), seconds=0.1, label="fake")
    assert [lv.concurrency for lv in made.levels] == [1, 2] and made.ok
    assert client.seen == 1 + sum(lv.answered for lv in made.levels)
    with pytest.raises(ValueError, match="concurrencies"):
        measure_throughput(client, concurrencies=(0,), seconds=0.1)


# ---- the real adapter ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_short_measurement_against_the_local_adapter(adapter):
    from workshop_lib.client.endpoint import EndpointClient

    made = measure_throughput(EndpointClient.local(adapter.url), concurrencies=(1, 2), seconds=1.0)
    assert made.ok and [lv.concurrency for lv in made.levels] == [1, 2]
    for lv in made.levels:
        assert lv.answered >= 1 and lv.decisions_per_s > 0 and lv.p50_ms <= lv.p95_ms
    picked = made.sustainable(10**6)
    assert picked.level in [lv for lv in made.levels if lv.complete]
