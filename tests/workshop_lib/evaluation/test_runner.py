"""The runner's bounded concurrency and error handling (no server needed)."""

import threading
import time

from workshop_lib.client import EndpointBusy
from workshop_lib.evaluation.runner import TaskResult, execute, run_decisions
from workshop_lib.evaluation.tasks import Task

TASKS = [Task(f"t{i}", "f", "choice", "s", "q", (("a", "A"), ("b", "B")), "a") for i in range(8)]


def test_execute_keeps_at_most_n_in_flight_and_task_order():
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def attempt(task):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return TaskResult(task_id=task.id, family="f", type="choice", expected="a", labels=["a", "b"])

    results, wall = execute(TASKS, attempt, concurrency=3, progress=False)
    assert [r.task_id for r in results] == [t.id for t in TASKS]
    assert state["peak"] == 3 and wall > 0 and all(r.started_s is not None for r in results)


class FakeBusyClient:
    """Stands in for a saturated endpoint: every decision ends in a 503 after the client's retries."""

    def decide(self, body):
        exc = EndpointBusy("the model is busy", status=503)
        exc.attempts = 4
        raise exc


def test_failures_are_recorded_not_raised():
    run = run_decisions(FakeBusyClient(), TASKS[:2], progress=False)
    assert [r.busy for r in run.results] == [True, True]
    assert all(not r.valid and not r.correct and r.attempts == 4 for r in run.results)
