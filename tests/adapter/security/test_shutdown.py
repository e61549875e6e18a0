"""Stopping the served pair: SIGTERM with a full waiting line, either process dying, gunicorn alone.

SageMaker sends SIGTERM to the container's first process (serve, gunicorn's arbiter), then SIGKILL
30 s later. Waiters must hear 503 at once so that SageMaker can send them elsewhere; the request
holding the model finishes, or is stopped at the graceful deadline with one log line; nginx and
gunicorn go together. The tests signal the arbiter alone, as ``docker stop`` does.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from decision_adapter.admission import Gate
from decision_adapter.serve import GRACEFUL_TIMEOUT_S, SHUTDOWN_LINE, ShutdownGuard
from tests.support.adapters import ALONE_ENV, FRONTED, TEST_ENV, needs_nginx
from tests.support.http_client import call, send

from .raw_http import error_of, exchange

OPTIONS = [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}]
SMALL = {"id": "w-1", "state": "The parcel never arrived.", "question": "Which team?", "options": OPTIONS}
# Long enough to hold the model while four others line up behind it (seconds on two idle cores, past
# the graceful deadline on busy ones: either ending is checked): a long state, 32 questions.
STATE = " ".join(
    f"Line {i}: the customer called again about order {1000 + i} and the missing parcel." for i in range(60)
)
HOLDER = {
    "id": "holder",
    "state": STATE,
    "questions": [{"id": f"q{i}", "question": f"Which team handles point {i}?", "options": OPTIONS} for i in range(32)],
}
DEADLINE_PREFIX = SHUTDOWN_LINE.split("{")[0]


# -- the worker's guard, in this process --------------------------------------------------------------


class _Log:
    def __init__(self):
        self.lines = []

    def warning(self, line):
        self.lines.append(line)


def test_the_guard_refuses_the_line_and_stops_a_holder_past_the_deadline_with_one_line():
    gate, log, exits = Gate(max_queue=2, timeout_s=30), _Log(), []
    with gate.admit():
        watcher = ShutdownGuard(gate, log, deadline_s=0.2, exit=exits.append).begin()
        assert gate.closed and ShutdownGuard(gate, log, 0.2, exits.append).begin() is None  # once
        watcher.join(5)
    assert exits == [1] and len(log.lines) == 1 and log.lines[0].startswith(DEADLINE_PREFIX)


def test_the_guard_lets_a_holder_that_finishes_in_time_go_without_a_word():
    gate, log, exits = Gate(max_queue=2, timeout_s=30), _Log(), []
    with gate.admit():
        watcher = ShutdownGuard(gate, log, deadline_s=5, exit=exits.append).begin()
        time.sleep(0.1)
    watcher.join(5)
    assert not watcher.is_alive() and exits == [] and log.lines == []


# -- the served stack -----------------------------------------------------------------------------------


def _load(server) -> tuple[bool, int]:
    """(busy, waiting) as the adapter reports them (/status where it has one, else /ping)."""
    for path in ("/status", "/ping"):
        status, _, reply = call(server.url + path, timeout=5)
        if status == 200 and "waiting" in (reply or {}):
            return reply["busy"], reply["waiting"]
    raise AssertionError("the adapter reports neither busy nor waiting")


def _in_flight(server) -> int:
    status, _, reply = call(server.url + "/status", timeout=5)
    return reply.get("in_flight", 0) if status == 200 else 0


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _nginx_pids(arbiter_pid: int) -> list[int]:
    pids = []
    for pid in Path(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children").read_text().split():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "nginx":
                master = int(pid)
                children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
                pids += [master, *map(int, children)]
        except OSError:
            continue
    return pids


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _wait_fronted(server, timeout_s: float = 60) -> list[int]:
    _wait_for(lambda: FRONTED in server.log_path.read_text(errors="replace"), timeout_s, "nginx to start")
    _wait_for(lambda: len(_nginx_pids(server.process.pid)) >= 2, 10, "nginx's worker")
    return _nginx_pids(server.process.pid)


@pytest.mark.slow
@needs_nginx
def test_sigterm_refuses_the_full_line_at_once_and_the_pair_exits_within_the_grace(model_dir, start_adapter):
    # Two contexts, both held. No request time limit: only the shutdown may stop the holders; waiters would
    # wait a minute.
    server = start_adapter(
        model_dir,
        **TEST_ENV,
        SM_LLAMA_CPP_PARALLEL="2",
        DECISION_ADAPTER_QUEUE_TIMEOUT="60",
        DECISION_ADAPTER_REQUEST_TIMEOUT="0",
    )
    nginx = _nginx_pids(server.process.pid)
    held = {}

    def hold(i):
        held[i] = send(
            server.url + "/invocations",
            json.dumps(dict(HOLDER, id=f"holder-{i}")).encode(),
            headers={"Content-Type": "application/json"},
            timeout=90,
        )

    holders = [threading.Thread(target=hold, args=(i,)) for i in range(2)]
    for holder in holders:
        holder.start()
    _wait_for(lambda: _in_flight(server) == 2, 60, "the holders to take both contexts")
    answers = []

    def wait_in_line(i):
        answer = send(
            server.url + "/invocations",
            json.dumps(dict(SMALL, id=f"w-{i}")).encode(),
            headers={"Content-Type": "application/json"},
            timeout=90,
        )
        answers.append((answer, time.monotonic()))

    waiters = [threading.Thread(target=wait_in_line, args=(i,)) for i in range(4)]
    for waiter in waiters:
        waiter.start()
    _wait_for(lambda: _load(server) == (True, 4), 30, "four waiters behind the holders")
    assert not held, "a holder finished before the line was full; make it longer"

    signalled = time.monotonic()
    os.kill(server.process.pid, signal.SIGTERM)  # the arbiter alone, as docker stop does
    for waiter in waiters:
        waiter.join(10)
    assert len(answers) == 4
    for (status, headers, body), at in answers:
        assert status == 503 and headers.get("Retry-After") and at - signalled < 2.0, (status, body, at - signalled)
        assert "shutting down" in error_of(body)["message"]

    server.process.wait(timeout=GRACEFUL_TIMEOUT_S + 5)
    exited = time.monotonic() - signalled
    for holder in holders:
        holder.join(10)
    statuses = sorted(held[i][0] for i in range(2))
    print(f"holders: {statuses} after SIGTERM; exited {exited:.1f} s after it")
    deadline_lines = server.log_path.read_text(errors="replace").count(DEADLINE_PREFIX)
    # Both finished (200), or what was still running was stopped at the graceful deadline, said once (nginx: 502).
    assert set(statuses) <= {200, 502} and deadline_lines == (502 in statuses), (statuses, deadline_lines)
    assert server.process.returncode == 0 and exited < GRACEFUL_TIMEOUT_S + 5
    assert all(_gone(pid) for pid in nginx), "nginx outlived gunicorn"


@pytest.mark.slow
@needs_nginx
def test_when_nginx_dies_gunicorn_stops_and_serve_exits_non_zero(model_dir, start_adapter):
    server = start_adapter(model_dir, wait=False, **TEST_ENV)
    nginx = _wait_fronted(server)
    os.kill(nginx[0], signal.SIGKILL)
    assert server.process.wait(timeout=30) != 0
    assert "nginx stopped on its own" in server.log_path.read_text(errors="replace")
    _wait_for(lambda: all(_gone(pid) for pid in nginx), 5, "nginx's workers to go")


@pytest.mark.slow
@needs_nginx
def test_when_the_arbiter_dies_nginx_goes_with_it(model_dir, start_adapter):
    server = start_adapter(model_dir, wait=False, **TEST_ENV)
    nginx = _wait_fronted(server)
    os.kill(server.process.pid, signal.SIGKILL)
    _wait_for(lambda: all(_gone(pid) for pid in nginx), 10, "nginx to follow the arbiter")
    # A killed arbiter cannot remove its private directory; the test does.
    workdir = re.search(r"behind it on unix:(\S+)/gunicorn\.sock", server.log_path.read_text())[1]
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.slow
def test_gunicorn_alone_says_so_in_one_line_and_logs_no_caller(model_dir, start_adapter):
    server = start_adapter(model_dir, wait=False, **TEST_ENV, **ALONE_ENV)
    _wait_for(lambda: server.ping() is not None, 60, "gunicorn to listen")
    basic = base64.b64encode(b"basic-user-41aa:pw").decode()
    for headers in ({"Authorization": f"Basic {basic}"}, {"Authorization": "Bearer bearer-key-77b0"}):
        send(server.url + "/ping?api_key=query-key-c3d9", headers=headers, timeout=10)
        send(server.url + "/nowhere?api_key=query-key-c3d9", headers=headers, timeout=10)
    # gunicorn's warning about a malformed request line quotes the line, less its query string
    assert exchange(server.port, b"GET /ping?api_key=query-key-c3d9\r\n\r\n", timeout=10)[0] == 400
    _wait_for(lambda: "Invalid request from" in server.log_path.read_text(errors="replace"), 10, "gunicorn's warning")
    text = server.log_path.read_text(errors="replace")
    assert text.count("slow clients are not contained") == 1 and FRONTED not in text
    assert "DECISION_ADAPTER_NGINX=off" in text
    assert '"GET /ping HTTP/1.1"' in text and '"GET /nowhere HTTP/1.1"' in text  # gunicorn's access log
    assert "?(query left out)" in text
    for secret in ("basic-user-41aa", basic, "bearer-key-77b0", "query-key-c3d9"):
        assert secret not in text
