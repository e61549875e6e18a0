"""Shared fixtures: the embedded model laid out as SageMaker lays out /opt/ml/model,
an in-process engine on it, and a real adapter process (gunicorn) on a free port.

Every process started here is stopped by a finalizer, even when a test fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workshop_lib.local import AdapterProcess
from workshop_lib.models import EMBEDDED_MODEL, embedded_gguf_path
from workshop_lib.packaging import extract_model, package_local

from tests.support import THREADS, adapter_settings



@pytest.fixture(scope="session")
def embedded_gguf() -> Path:
    return embedded_gguf_path()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, embedded_gguf) -> Path:
    """model.tar.gz (GGUF + manifest) extracted like SageMaker fills /opt/ml/model."""
    work = tmp_path_factory.mktemp("model")
    package = package_local(EMBEDDED_MODEL, {EMBEDDED_MODEL.gguf.path: embedded_gguf}, work / "package")
    return extract_model(package.tarball, work / "opt-ml-model")


@pytest.fixture(scope="session")
def settings(model_dir):
    return adapter_settings(model_dir)


@pytest.fixture(scope="session")
def engine(settings):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    return Engine(settings, locate_model(settings.model_dir))


@pytest.fixture(scope="session")
def adapter(model_dir, tmp_path_factory):
    """A real adapter process: python -m decision_adapter.serve on a loopback port."""
    logs = tmp_path_factory.mktemp("logs")
    process = AdapterProcess(model_dir, log_path=logs / "adapter.log", threads=THREADS,
                             env={"SM_LLAMA_CPP_CTX_SIZE": "2048", "DECISION_ADAPTER_MAX_QUEUE": "4"})
    process.start()
    yield process
    process.stop()


@pytest.fixture
def start_adapter(tmp_path):
    """Start extra adapter processes with their own settings; all are stopped afterwards."""
    started: list[AdapterProcess] = []

    def start(model_dir, *, wait: bool = True, **env) -> AdapterProcess:
        process = AdapterProcess(model_dir, log_path=tmp_path / f"adapter-{len(started)}.log", threads=THREADS,
                                 env={k: str(v) for k, v in env.items()})
        started.append(process)
        return process.start() if wait else process.launch()

    yield start
    for process in started:
        process.stop()


# Fixtures that start a real process (adapter, JupyterLab with a browser). Every test using one is
# marked slow here, so `pytest -m "not slow"` is the quick in-process run whatever a test file says.
PROCESS_FIXTURES = frozenset({"adapter", "start_adapter", "jev_adapter", "keyed_adapter", "hostile_adapter", "lab"})


def pytest_collection_modifyitems(items):
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
