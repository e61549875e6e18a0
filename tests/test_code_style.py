"""The code holds to the tools the field runs on every change, as pyproject.toml configures them: ruff's lint
rules and its formatting, and mypy's types (strict on the modules typed through, mypy's defaults on the rest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What ruff holds to until the whole tree is formatted once; then the whole tree.
FORMATTED = [
    "container/decision_adapter/admission.py",
    "container/decision_adapter/bindings.py",
    "container/decision_adapter/calibration.py",
    "container/decision_adapter/chat.py",
    "container/decision_adapter/deadline.py",
    "container/decision_adapter/errors.py",
    "container/decision_adapter/model_files.py",
    "container/decision_adapter/prompt.py",
    "container/decision_adapter/questions.py",
    "container/decision_adapter/runtime.py",
    "container/decision_adapter/settings.py",
    "container/decision_adapter/splits.py",
    "container/decision_adapter/startup.py",
    "container/decision_adapter/state_cache.py",
    "container/decision_adapter/tokens.py",
    "tests/test_code_style.py",
]


def run(tool: list[str], log: Path) -> tuple[int, str]:
    """Run a dev tool from this Python's environment at the repository root; its exit status and output."""
    with log.open("w") as out:
        try:
            done = subprocess.run(
                [sys.executable, "-m", *tool], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=300
            )
        except subprocess.TimeoutExpired:  # run() has killed it
            pytest.fail(f"{' '.join(tool)} ran past 300 s; its output so far is in {log}")
    return done.returncode, log.read_text()


@pytest.mark.parametrize(
    "check", [["ruff", "check", "--no-fix"], ["ruff", "format", "--check", "--diff"]], ids=["lint", "format"]
)
def test_ruff_finds_nothing(check, tmp_path):
    status, output = run([*check, *FORMATTED], tmp_path / "ruff.log")
    assert status == 0, output


def test_mypy_finds_nothing(tmp_path):
    status, output = run(["mypy"], tmp_path / "mypy.log")
    assert status == 0, output
