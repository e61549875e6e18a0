"""Every ``from X import name`` in workshop_lib and the adapter names something that exists, including the
imports made inside functions (deferred to keep start-up light), which importing a module does not run."""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [("workshop_lib", ROOT / "workshop_lib"), ("decision_adapter", ROOT / "container" / "decision_adapter")]


def _imports():
    for package, folder in PACKAGES:
        for path in sorted(folder.rglob("*.py")):
            module = ".".join((package, *path.relative_to(folder).with_suffix("").parts)).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.names[0].name != "*":
                    yield module, path.name == "__init__.py", node


CASES = list(_imports())


@pytest.mark.parametrize("module, is_package, node", CASES, ids=[f"{m}:{n.lineno}" for m, _, n in CASES])
def test_the_imported_name_exists(module, is_package, node):
    base = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    source = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
    if not source.startswith(("workshop_lib", "decision_adapter")):
        return  # third-party imports are the installed packages' business
    imported = importlib.import_module(source)
    for alias in node.names:
        if not hasattr(imported, alias.name):
            importlib.import_module(f"{source}.{alias.name}")  # a submodule, or ImportError naming it
