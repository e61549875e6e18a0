"""Local servers end with the process that started them, however it ends: a parent killed by a signal
runs no atexit hook, so the server must not depend on one. Servers started to outlive it (keep_alive_s)
are left to their own time limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from workshop_lib.local import group_alive, stop_process_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# A parent that starts one loopback server (Python's own http.server), prints its process group and waits.
PARENT = textwrap.dedent("""
    import sys, time
    from workshop_lib.local import ServerProcess

    class Plain(ServerProcess):
        def command(self):
            return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(self.port)]

    keep = float(sys.argv[2]) if len(sys.argv) > 2 else None
    server = Plain(log_path=sys.argv[1], keep_alive_s=keep).start(timeout_s=30)
    print(server.process.pid, flush=True)
    time.sleep(600)
""")


def start_parent(tmp_path, *args: str) -> tuple[subprocess.Popen, int]:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "server.log"), *args],
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "parent.log", "wb"),
        text=True,
        start_new_session=True,
    )
    line = parent.stdout.readline()
    if not line:
        parent.kill()
        raise AssertionError((tmp_path / "parent.log").read_text())
    return parent, int(line)


def gone_within(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    return False


def test_a_server_ends_when_its_parent_is_killed(tmp_path):
    parent, server = start_parent(tmp_path)
    try:
        assert group_alive(server)
        os.killpg(parent.pid, signal.SIGKILL)  # no atexit, no finally
        parent.wait(10)
        assert gone_within(server, 15)
    finally:
        stop_process_group(server, timeout_s=5)
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(10)


def test_a_server_started_to_outlive_its_parent_does(tmp_path):
    parent, server = start_parent(tmp_path, "120")
    try:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert not gone_within(server, 2)  # a server tied to its parent is gone by now (the test above)
    finally:
        assert stop_process_group(server, timeout_s=5)
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(10)
