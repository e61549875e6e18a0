"""``python -m workshop_lib serve``: a local endpoint in the foreground, used by ``invoke``, then Ctrl-C.

The server runs in its own process group with its output in a file; the finalizer ends the
group whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from workshop_lib import examples
from workshop_lib.cli import main
from workshop_lib.local import free_port, group_alive, rehearsal, stop_process_group

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path):
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "workshop_lib", "serve", "--port", str(port), "--threads", "2"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "DECISION_ADAPTER_REQUEST_TIMEOUT": "120"},
    )  # a busy machine
    log.close()
    yield process, f"http://127.0.0.1:{port}", tmp_path / "serve.log"
    stop_process_group(process.pid, timeout_s=10)


def _wait_ready(url: str, process, log_path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, log_path.read_text()
        try:
            with urllib.request.urlopen(url + "/ping", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not ready:\n{log_path.read_text()}")


def test_serve_answers_invoke_with_the_sample_files_and_stops_on_ctrl_c(served, tmp_path, capsys):
    process, url, log_path = served
    _wait_ready(url, process, log_path)
    for name, body in (
        ("example-request.json", examples.SAMPLE_DECISION),
        ("example-shared-request.json", examples.SAMPLE_SHARED),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(body, indent=2))
        assert main(["invoke", "--url", url, "--request", str(path)]) == 0
        out = capsys.readouterr().out
        asked = [body["decision"]] if "decision" in body else body["decisions"]
        for decision in asked:
            assert f"{decision['id']}: top " in out
            for option in decision["options"]:
                assert option["id"] in out
    # The embedded model is served with the readout make demo and every local endpoint use, and says why.
    request = urllib.request.Request(
        url + "/invocations",
        data=json.dumps(examples.SUPPORT_ROUTE).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        assert json.load(response)["result"]["model"]["readout"] == "cloze"
    assert rehearsal.READOUT_WHY in log_path.read_text()
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends to the foreground group
    assert process.wait(timeout=40) == 0, log_path.read_text()
    deadline = time.monotonic() + 10
    while group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(process.pid)  # gunicorn's worker went with it
    assert "Ctrl-C stops it" in log_path.read_text()


def test_the_adapter_entrypoint_prints_real_help():
    done = subprocess.run(
        [sys.executable, "-m", "decision_adapter.serve", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    for needle in (
        "usage: decision-adapter-serve",
        "--model",
        "--model-dir",
        "--port",
        "SM_LLAMA_CPP_CTX_SIZE",
        "SEMIF_",
    ):
        assert needle in done.stdout
