"""Every package imports one way down: import-linter checks the contracts in pyproject.toml (the layers
of the adapter, the workshop library, its evaluation and the benchmarks; the wall between the rooms;
no circle at any depth), counting imports inside functions like any other; and no module imports the
project's own code inside a function, where a circle would hide from a reader."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.docs_modules import import_contracts

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "decision_contract": ROOT / "container" / "contract" / "decision_contract",
    "decision_adapter": ROOT / "container" / "decision_adapter",
    "workshop_lib": ROOT / "workshop_lib",
    "benchmarks": ROOT / "benchmarks",
}


def lint_imports() -> str:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command, "import-linter is a dev dependency: make test installs it"
    done = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_import_contracts_hold():
    report = lint_imports()
    assert "BROKEN" not in report and " 0 broken" in report, report


def test_each_package_is_laid_out_in_layers_that_name_every_module():
    contracts = import_contracts()
    layered = {c for contract in contracts if contract["type"] == "layers" for c in contract["containers"]}
    assert {"decision_adapter", "workshop_lib", "benchmarks"} <= layered
    assert all(c.get("exhaustive") for c in contracts if c["type"] == "layers")
    cycles = next(c for c in contracts if c["type"] == "acyclic_siblings")
    assert set(cycles["ancestors"]) == set(PACKAGES)


def function_level_imports(path: Path, packages=tuple(PACKAGES)) -> list[str]:
    """``line: import`` for each import of ``packages`` (or a relative one) inside a function or class body."""
    tree = ast.parse(path.read_text())
    found = []
    for scope in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))):
        for node in ast.walk(scope):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in packages):
                found.append(f"{node.lineno}: from {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in packages for a in node.names):
                found.append(f"{node.lineno}: import {', '.join(a.name for a in node.names)}")
    return sorted(set(found))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_imports_the_projects_code_inside_a_function(package):
    hidden = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(PACKAGES[package].rglob("*.py"))
        if (lines := function_level_imports(path))
    }
    assert not hidden, hidden


def test_the_check_finds_a_circle_and_an_import_inside_a_function(tmp_path):
    # The same two checks on a package made to break them, so a passing run means something.
    pkg = tmp_path / "circle_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def late():\n    from circle_pkg import high\n    return high\n")
    (pkg / "high.py").write_text("from circle_pkg import low\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["circle_pkg"]\n\n[[tool.importlinter.contracts]]\n'
        'name = "no circle"\ntype = "acyclic_siblings"\nancestors = ["circle_pkg"]\n'
    )
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    done = subprocess.run([command, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout
    assert function_level_imports(pkg / "low.py") == []  # not one of the project's packages
    assert function_level_imports(pkg / "low.py", ("circle_pkg",)) == ["2: from circle_pkg"]
