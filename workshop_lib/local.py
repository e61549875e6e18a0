"""Local rehearsal: the adapter as a real process on a loopback port.

Each local "endpoint" is ``python -m decision_adapter.serve`` (gunicorn + llama.cpp
+ a GGUF) in its own process group, its output in a log file. ``stop()`` ends
the whole group, and an ``atexit`` hook stops anything still running when the
Python process exits, so a failed notebook or test leaves nothing behind.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

_RUNNING: set["AdapterProcess"] = set()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class AdapterFailedToStart(RuntimeError):
    pass


class AdapterProcess:
    """A real adapter server for a model directory laid out like /opt/ml/model."""

    def __init__(self, model_dir: str | Path, *, log_path: str | Path, port: int | None = None,
                 threads: int = 2, env: dict[str, str] | None = None):
        self.model_dir = Path(model_dir)
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.threads = threads
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SM_LLAMA_CPP_", "DECISION_ADAPTER_"))}
        env.update({
            "SM_MODEL_DIR": str(self.model_dir),
            "SAGEMAKER_BIND_TO_PORT": str(self.port),
            "SM_LLAMA_CPP_THREADS": str(self.threads),
            "SM_LLAMA_CPP_N_GPU_LAYERS": "0",
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self.extra_env)
        return env

    def start(self, timeout_s: float = 120.0) -> "AdapterProcess":
        """Launch the server and wait until /ping says it is ready."""
        self.launch()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> "AdapterProcess":
        """Launch the server without waiting for it."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "decision_adapter.serve", "--host", "127.0.0.1"],
                env=self.environment(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends gunicorn and its worker
            )
        finally:
            log.close()
        _RUNNING.add(self)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AdapterFailedToStart(
                    f"the adapter exited with status {self.process.returncode}; last log lines:\n{self.log_tail()}")
            if self.ping() == 200:
                return
            time.sleep(0.1)
        raise AdapterFailedToStart(f"the adapter was not ready after {timeout_s:g} s; last log lines:\n"
                                   f"{self.log_tail()}")

    def ping(self) -> int | None:
        try:
            with urllib.request.urlopen(self.url + "/ping", timeout=2) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (urllib.error.URLError, OSError):
            return None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal(self, signum: int) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signum)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM the process group, SIGKILL it if it is still there after timeout_s."""
        process = self.process
        _RUNNING.discard(self)
        if process is None:
            return None
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
            except ProcessLookupError:
                pass
        try:  # the worker may outlive the arbiter for a moment
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return process.returncode

    def __enter__(self) -> "AdapterProcess":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"AdapterProcess({self.url}, model_dir={str(self.model_dir)!r})"


def post_json(url: str, payload, timeout: float = 70.0) -> tuple[int, dict]:
    """POST JSON, return (status, parsed body) for any status. A tiny helper for demos and tests."""
    request = urllib.request.Request(url, data=json.dumps(payload).encode("utf-8"),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@atexit.register
def _stop_all() -> None:
    for process in list(_RUNNING):
        process.stop(timeout_s=10)
