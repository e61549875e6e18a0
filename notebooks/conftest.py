"""pytest --nbmake runs these notebooks in order, in local mode unless told otherwise.

The notebooks start processes that outlive each notebook's kernel (the AWS emulator
and local endpoints, recorded in the rehearsal registry). They are all stopped when
the session ends, so a notebook that fails half-way leaves nothing running.

CI runs use their own config and registry under ``.workshop/nbmake/`` so they never
touch a participant's saved config. Deploying to a real account needs
``WORKSHOP_MODE=aws`` set on purpose.
"""

from __future__ import annotations

import os

import pytest

from workshop_lib.config import repo_root

_RUN_DIR = repo_root() / ".workshop" / "nbmake"
# Set at import time: nbmake starts each kernel with this process's environment.
os.environ.setdefault("WORKSHOP_MODE", "local")
os.environ.setdefault("WORKSHOP_CONFIG", str(_RUN_DIR / "config.json"))
os.environ.setdefault("WORKSHOP_LOCAL_DIR", str(_RUN_DIR / "local"))


def _stop_everything() -> None:
    from workshop_lib import rehearsal

    stopped = rehearsal.default().stop_all()
    if stopped:
        print(f"\nstopped what the notebooks left running: {', '.join(stopped)}")


@pytest.fixture(scope="session", autouse=True)
def stop_local_rehearsal():
    """For Python test items in the same session (nbmake's notebook items take no fixtures)."""
    yield
    _stop_everything()


def pytest_sessionfinish(session, exitstatus):
    """Runs after the last notebook whatever happened: the finalizer nbmake items cannot request."""
    _stop_everything()
