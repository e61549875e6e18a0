"""pytest --nbmake runs these notebooks in order, in local mode unless told otherwise.

The notebooks start processes that outlive each notebook's kernel (the AWS emulator
and local endpoints, recorded in the rehearsal registry). They are all stopped when
the session ends, so a notebook that fails half-way leaves nothing running.

Each run uses its own config folder, a temporary one (``$WORKSHOP_CONFIG``), and everything the
notebooks write goes beside that config (outputs, policies, the rehearsal's registry and logs,
benchmark results), so a run never touches a participant's ``.workshop/``. The folder is removed
when the run passed and kept, with its path printed, when it failed. Deploying to a real account
needs ``WORKSHOP_MODE=aws`` set on purpose.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Set at import time: nbmake starts each kernel with this process's environment.
os.environ.setdefault("WORKSHOP_MODE", "local")
_OWN_DIR = not os.environ.get("WORKSHOP_CONFIG", "").strip()  # else the caller chose where the run writes
if _OWN_DIR:
    _RUN_DIR = Path(tempfile.mkdtemp(prefix="workshop-nbmake-"))
    os.environ["WORKSHOP_CONFIG"] = str(_RUN_DIR / "config.json")
    os.environ["WORKSHOP_LOCAL_DIR"] = str(_RUN_DIR / "local")


def _stop_everything() -> None:
    from workshop_lib.local import rehearsal

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
    if _OWN_DIR:
        if exitstatus == 0:
            shutil.rmtree(_RUN_DIR, ignore_errors=True)
        else:
            print(f"\nthe notebooks' config, outputs and logs are in {_RUN_DIR}")
