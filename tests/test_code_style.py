"""The code holds to the tools the field runs on every change, as pyproject.toml configures them: ruff's lint
rules and its formatting, and mypy's strict types on every module of the adapter, the contract and the
workshop library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    status, output = run([*check, "."], tmp_path / "ruff.log")  # the whole tree, as pyproject.toml excludes
    assert status == 0, output


def test_mypy_finds_nothing(tmp_path):
    status, output = run(["mypy"], tmp_path / "mypy.log")
    assert status == 0, output


MAX_MODULE_LINES = 500  # issue #53: a module longer than this holds more than one thing; split it by what it holds
CODE = ("container", "workshop_lib", "benchmarks", "scripts", "notebooks", "examples")


def test_no_module_is_over_the_line_limit():
    """Every Python module of the code (the tests apart) stays within the limit."""
    long = {
        str(path.relative_to(ROOT)): n
        for folder in CODE
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"over {MAX_MODULE_LINES} lines, split by what each part holds: {long}"


def test_no_file_name_is_spelt_in_two_places():
    """A module's file name says its room: no two modules of the code share one (a package's __init__.py
    apart), so a name in a traceback, a log line or a doc points at one file."""
    seen: dict[str, list[str]] = {}
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts and path.name != "__init__.py":
                seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"file names spelt in more than one place, rename one for what it holds: {twice}"
