"""Shared fixtures: the embedded model laid out as SageMaker lays out /opt/ml/model,
an in-process engine on it, and real adapter processes (gunicorn) on free ports, all from one
pool (``adapters``; ``adapter`` and ``start_adapter`` are views onto it).

Every process started here is stopped by a finalizer, even when a test fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import adapter_settings
from tests.support.adapters import TEST_ENV, AdapterPool
from workshop_lib.local import AdapterProcess
from workshop_lib.models import EMBEDDED_MODEL, embedded_gguf_path
from workshop_lib.packaging import extract_model, package_local


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
def flash_engine(model_dir):
    """The engine with flash attention (``auto``, on for this CPU after its start-up check, as the worker runs it)."""
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    engine = Engine(adapter_settings(model_dir, SM_LLAMA_CPP_FLASH_ATTN="auto"), locate_model(model_dir))
    engine.prove()
    return engine


@pytest.fixture(scope="session")
def adapters(model_dir, tmp_path_factory):
    """The one source of adapter processes (tests/support/adapters.py): ``adapters.shared(**env)`` for
    a process per distinct settings, reused for the session; ``adapters.fresh(...)`` for one of a
    test's own. The finalizer stops every process the pool started."""
    pool = AdapterPool(model_dir, tmp_path_factory.mktemp("adapter-logs"))
    yield pool
    pool.stop_all()


@pytest.fixture(scope="session")
def adapter(adapters):
    """The tests' usual adapter process (TEST_ENV), shared by every test that asks for it."""
    return adapters.shared(**TEST_ENV)


@pytest.fixture
def start_adapter(adapters, tmp_path):
    """Start adapter processes of the test's own, with their own settings; all are stopped afterwards."""
    started: list[AdapterProcess] = []

    def start(model_dir, *, wait: bool = True, **env) -> AdapterProcess:
        process = adapters.fresh(model_dir, log_path=tmp_path / f"adapter-{len(started)}.log", wait=wait, **env)
        started.append(process)
        return process

    yield start
    for process in started:
        adapters.stop(process)


# Fixtures that start a real process (adapter, JupyterLab with a browser). Every test using one is
# marked slow here, so `pytest -m "not slow"` is the quick in-process run whatever a test file says.
PROCESS_FIXTURES = frozenset({"adapters", "adapter", "start_adapter", "lab"})


def pytest_collection_modifyitems(items):
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
