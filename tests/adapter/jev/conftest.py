"""Adapters for the Jev tests, with the settings a user deploys (the default 8192-token context holds
a 255-option Jev choice, about 5,400 prompt tokens): one without and one with an API key.

Both are real processes (gunicorn + llama.cpp) on loopback ports, started on first use and
stopped by their finalizers; their output goes to log files.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from workshop_lib.local import AdapterProcess

from tests.support import THREADS

# Only the request time limit differs from a user's defaults: a 255-option choice can hold these 2 cores
# for minutes, and the 30 s default is sized for SageMaker's 60 s invocations (the suites allow 600 s).
JEV_ENV = {"DECISION_ADAPTER_REQUEST_TIMEOUT": "600"}


def _start(model_dir: Path, log_path: Path, **env) -> AdapterProcess:
    process = AdapterProcess(model_dir, log_path=log_path, threads=THREADS, env={**JEV_ENV, **env})
    return process.start()


@pytest.fixture(scope="session")
def jev_adapter(model_dir, tmp_path_factory):
    """An adapter with no API key."""
    process = _start(model_dir, tmp_path_factory.mktemp("jev-logs") / "adapter.log")
    yield process
    process.stop()


@pytest.fixture(scope="session")
def api_key() -> str:
    return "wk-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="session")
def keyed_adapter(model_dir, tmp_path_factory, api_key):
    """An adapter with DECISION_ADAPTER_API_KEY set."""
    process = _start(model_dir, tmp_path_factory.mktemp("jev-keyed-logs") / "adapter.log",
                     DECISION_ADAPTER_API_KEY=api_key)
    yield process
    process.stop()
