"""Faults: a worker killed mid-request, and model directories the adapter must refuse to serve.

Real gunicorn processes and the real model; every process is stopped by the
``start_adapter`` fixture's finalizer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support import model_dir_view, partial_copy
from workshop_lib.client import EndpointClient, EndpointError, EndpointServerError, EndpointUnreachable

from .hostile import worker_pids

pytestmark = pytest.mark.slow

OPTIONS = [{"id": "refunds", "text": "Refunds"}, {"id": "shipping", "text": "Shipping"}]
# About 250 tokens: a few hundred milliseconds of model time on an idle 2-core machine, long enough
# to be killed in the middle (the kill follows /ping reporting busy within ~10 ms).
STATE = " ".join(f"Line {i}: the customer called again about order {1000 + i}." for i in range(12))
SLOW = {"id": "slow-1", "state": STATE, "question": "Which team?", "options": OPTIONS}


def wait_for_worker(server, timeout_s: float = 30.0, not_pid: int | None = None) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [p for p in worker_pids(server.process.pid) if p != not_pid]
        if len(pids) == 1:
            return pids[0]
        time.sleep(0.02)
    raise AssertionError(f"no single worker under arbiter {server.process.pid}: {worker_pids(server.process.pid)}")


def wait_until_busy(client: EndpointClient, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if client.status().get("busy"):
                return True
        except EndpointError:
            pass
        time.sleep(0.01)
    return False


def test_worker_killed_mid_request_gives_an_error_then_a_fresh_worker_serves(model_dir, start_adapter):
    server = start_adapter(model_dir, SM_LLAMA_CPP_CTX_SIZE=2048)
    client = EndpointClient.local(server.url, retries=0, timeout_s=60)
    reference = client.decide(SLOW)  # the answer of a healthy server
    old_worker = wait_for_worker(server)

    outcome: dict = {}

    def in_flight():
        try:
            outcome["answer"] = client.decide(dict(SLOW, id="killed-1"))
        except EndpointError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=in_flight)
    thread.start()
    assert wait_until_busy(client), "the request never reached the model"
    os.kill(old_worker, signal.SIGKILL)
    killed_at = time.monotonic()

    # /ping fails until a new worker has loaded the model, then passes.
    statuses = []
    while time.monotonic() - killed_at < 60:
        status = server.ping()
        statuses.append(status)
        if status == 200:
            break
        time.sleep(0.02)
    thread.join(60)

    assert not thread.is_alive()
    assert "answer" not in outcome, f"a killed worker answered: {outcome.get('answer')}"
    assert isinstance(outcome["error"], (EndpointUnreachable, EndpointServerError)), outcome["error"]
    assert statuses[-1] == 200, f"/ping never recovered: {statuses[-10:]}"
    assert statuses[0] != 200 and set(statuses[:-1]) <= {None, 503}, statuses
    new_worker = wait_for_worker(server, not_pid=old_worker)
    assert new_worker != old_worker and server.process.poll() is None
    assert f"Booting worker with pid: {new_worker}" in server.log_path.read_text()

    # Later requests succeed, with the answer a healthy server gives.
    assert client.decide(SLOW) == reference
    again = client.decide(dict(SLOW, id="after-1"))
    assert again.id == "after-1" and again.probabilities == reference.probabilities


# ---- model directories that must not be served ----------------------------------------------------


def _gguf(model_dir: Path) -> Path:
    return next(model_dir.glob("*.gguf"))


def _missing_dir(model_dir, target):
    return target / "not-there", [re.escape(str(target / "not-there")), "does not exist"]


def _no_gguf(model_dir, target):
    target.mkdir()
    shutil.copy(model_dir / "model-manifest.json", target)
    return target, [re.escape(str(target)), r"no \*\.gguf"]


def _truncated_with_manifest(model_dir, target):
    model_dir_view(model_dir, target)
    source = _gguf(model_dir)
    gguf = partial_copy(source, target / source.name, source.stat().st_size // 3)
    return target, [re.escape(gguf.name), "truncated"]


def _truncated_without_manifest(model_dir, target):
    target.mkdir()
    source = _gguf(model_dir)
    with open(source, "rb") as handle:
        (target / source.name).write_bytes(handle.read(source.stat().st_size // 3))
    return target, [re.escape(source.name), r"truncated|corrupt|not a (valid )?GGUF"]


def _corrupt_without_manifest(model_dir, target):
    target.mkdir()
    (target / "model.gguf").write_bytes(bytes(range(256)) * 4096)
    return target, [re.escape("model.gguf"), r"truncated|corrupt|not a (valid )?GGUF"]


def _wrong_digest(model_dir, target):
    model_dir_view(model_dir, target)
    manifest = json.loads((target / "model-manifest.json").read_text())
    actual = manifest["files"][0]["sha256"]
    manifest["files"][0]["sha256"] = "ab" * 32
    (target / "model-manifest.json").write_text(json.dumps(manifest))
    return target, ["ab" * 32, actual, re.escape(_gguf(target).name)]


START_FAILURES = [
    pytest.param(_missing_dir, id="missing-model-dir"),
    pytest.param(_no_gguf, id="no-gguf"),
    pytest.param(_truncated_with_manifest, id="truncated-gguf-with-manifest"),
    pytest.param(_truncated_without_manifest, id="truncated-gguf-no-manifest"),
    pytest.param(_corrupt_without_manifest, id="corrupt-gguf-no-manifest"),
    pytest.param(_wrong_digest, id="manifest-wrong-digest"),
]


@pytest.mark.parametrize("make", START_FAILURES)
def test_unusable_model_dir_refuses_to_start_with_one_clear_line(model_dir, tmp_path, start_adapter, make):
    broken, expected = make(model_dir, tmp_path / "model")
    server = start_adapter(broken, wait=False)
    healthy = False
    deadline = time.monotonic() + 60
    while server.process.poll() is None and time.monotonic() < deadline:
        healthy = healthy or server.ping() == 200
        time.sleep(0.05)
    status = server.process.poll()
    assert status not in (None, 0), "the adapter kept running (or exited 0) on a model it cannot serve"
    assert not healthy, "/ping reported healthy on a model it cannot serve"
    log = server.log_path.read_text(errors="replace")
    critical = [line for line in log.splitlines() if " CRITICAL " in line]
    assert len(critical) == 1, critical
    assert "Traceback" not in log
    for pattern in expected:
        assert re.search(pattern, critical[0]), f"{pattern!r} not in: {critical[0]}"
