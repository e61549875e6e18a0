"""Real adapter processes for the tests (nginx + gunicorn + llama.cpp on a loopback port), from one place.

``AdapterPool`` is the only code in the suite that starts an adapter process. The conftest's
``adapters`` fixture holds one pool for the session:

* ``adapters.shared(**env)``: one process per distinct settings, started on first use, reused by
  every test that asks for the same settings, and stopped when the session ends;
* ``adapters.fresh(model_dir, **env)``: a process of the test's own, for a test that breaks, kills
  or exhausts a server (or needs another model directory); the ``start_adapter`` fixture stops its
  fresh processes at the end of the test.

``adapter`` (the test settings below) and ``start_adapter`` are thin fixtures on top of the pool;
every test that uses any of them is marked ``slow`` at collection (tests/conftest.py).

``serve`` puts nginx in front of gunicorn when nginx is installed (``make test`` installs Debian's
as root); ``needs_nginx`` skips a test that is about the pair where it is not, and ``ALONE_ENV``
starts gunicorn by itself.
"""

from __future__ import annotations

import itertools
import secrets
from pathlib import Path

import pytest

from decision_adapter.nginx import find_nginx
from tests.support import THREADS
from workshop_lib.local import AdapterProcess

# The tests' usual adapter: a 2048-token context (enough for every request they send, and a
# smaller KV cache than the 8192 default) and a short waiting line.
TEST_ENV = {"SM_LLAMA_CPP_CTX_SIZE": "2048", "DECISION_ADAPTER_MAX_QUEUE": "4"}

# The Jev suites run against a user's defaults (the default 8192-token context holds a 255-option
# Jev choice, about 5,400 prompt tokens). Only the request time limit differs: a 255-option choice
# can hold these 2 cores for minutes, and the 30 s default is sized for SageMaker's 60 s invocations
# (the suites allow 600 s).
JEV_ENV = {"DECISION_ADAPTER_REQUEST_TIMEOUT": "600"}
# The key of the keyed Jev adapter, new for every session.
JEV_API_KEY = "wk-" + secrets.token_urlsafe(24)

# gunicorn alone on the port, without nginx in front.
ALONE_ENV = {"DECISION_ADAPTER_NGINX": "off"}
NGINX = find_nginx()
needs_nginx = pytest.mark.skipif(
    NGINX is None,
    reason="nginx is not installed (make test installs Debian's nginx when run as root; apt-get install nginx)",
)
FRONTED = "in front on"  # serve's log line once nginx runs in front of gunicorn


def fronted_by_nginx(process: AdapterProcess) -> bool:
    """Whether this adapter process has nginx in front (its log says so at start-up)."""
    return FRONTED in process.log_path.read_text(errors="replace")


def _env(env: dict) -> dict[str, str]:
    return {k: str(v) for k, v in env.items()}


class AdapterPool:
    """Adapter processes on one model directory; every one it starts, it stops (``stop_all``)."""

    def __init__(self, model_dir: Path, log_dir: Path):
        self.model_dir = Path(model_dir)
        self.log_dir = Path(log_dir)
        self._shared: dict[tuple, AdapterProcess] = {}
        self._started: list[AdapterProcess] = []
        self._count = itertools.count()

    def _start(self, model_dir: Path, log_path: Path, env: dict[str, str], wait: bool) -> AdapterProcess:
        process = AdapterProcess(model_dir, log_path=log_path, threads=THREADS, env=env)
        self._started.append(process)  # before launching: a failed start is stopped as well
        return process.start() if wait else process.launch()

    def shared(self, **env) -> AdapterProcess:
        """The session's process with these settings, started on first use (a dead one is replaced)."""
        env = _env(env)
        key = tuple(sorted(env.items()))
        process = self._shared.get(key)
        if process is None or process.process is None or process.process.poll() is not None:
            log = self.log_dir / f"shared-{next(self._count)}.log"
            process = self._shared[key] = self._start(self.model_dir, log, env, wait=True)
        return process

    def fresh(
        self, model_dir: Path | None = None, *, log_path: Path | None = None, wait: bool = True, **env
    ) -> AdapterProcess:
        """A process nobody else uses; stop it with ``stop`` (``start_adapter`` does at the test's end)."""
        log_path = log_path or self.log_dir / f"fresh-{next(self._count)}.log"
        return self._start(Path(model_dir or self.model_dir), log_path, _env(env), wait)

    def stop(self, process: AdapterProcess) -> None:
        process.stop()
        if process in self._started:
            self._started.remove(process)

    def stop_all(self) -> None:
        while self._started:
            self._started.pop().stop()
        self._shared.clear()
