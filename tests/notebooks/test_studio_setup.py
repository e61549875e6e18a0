"""notebooks/studio_setup.py, notebook 00's first cell, in a Python that has never seen this project.

A fresh virtual environment stands in for a new SageMaker Studio kernel: the script must install
the project into it and make ``workshop_lib`` importable in the same process, without a restart.
Dependencies are skipped (PIP_NO_DEPS) to keep the test short; the editable install itself and the
in-process import are the real thing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "notebooks" / "studio_setup.py"

pytestmark = pytest.mark.slow


def test_a_fresh_kernel_gets_the_project_and_can_import_it_at_once(tmp_path):
    venv.create(tmp_path / "kernel", with_pip=True)
    python = tmp_path / "kernel" / "bin" / "python"
    probe = (
        "import runpy, sys\n"
        f"ns = runpy.run_path({str(SCRIPT)!r})\n"
        f"print(ns['ensure_project']({str(ROOT)!r}))\n"
        "import decision_contract, workshop_lib\n"
        "print('imported from', workshop_lib.__file__)\n"
        "print('contract from', decision_contract.__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run(
        [str(python), "-c", probe],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PIP_NO_DEPS": "1"},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "installing the workshop into this kernel" in done.stdout
    assert f"installed {ROOT} (editable, [notebooks] extras, with its contract)" in done.stdout
    assert f"imported from {ROOT / 'workshop_lib' / '__init__.py'}" in done.stdout
    # The contract comes from this checkout, never from an index that may hold another package of that name.
    assert f"contract from {ROOT / 'container' / 'contract' / 'decision_contract' / '__init__.py'}" in done.stdout


def test_where_the_project_is_installed_nothing_changes():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "nothing to install" in done.stdout and "boto3 1." in done.stdout
