"""The steps depend on what they share and on the library, never on each other: the import contract
"workshop-steps" says so (tests/test_layers.py runs import-linter on it), and this reads the modules'
own imports to hold the same rule where a reader sees it."""

from __future__ import annotations

import ast
from pathlib import Path

from scripts.docs_modules import import_contracts

STEPS = Path(__file__).resolve().parents[2] / "workshop_lib" / "steps"


def _contract() -> list[list[str]]:
    contract = next(c for c in import_contracts() if c.get("id") == "workshop-steps")
    assert contract["containers"] == ["workshop_lib.steps"] and contract["exhaustive"]
    return [[m.strip() for m in layer.split("|")] for layer in contract["layers"]]


def _siblings_imported(path: Path) -> set[str]:
    """The modules of ``steps`` that ``path`` imports (``from .x import``, ``from . import x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return found


def test_the_contract_names_every_step_module_once_with_rehearse_alone_on_top():
    layers = _contract()
    named = [m for layer in layers for m in layer]
    modules = sorted(p.stem for p in STEPS.glob("*.py") if p.stem != "__init__")
    assert sorted(named) == modules and len(named) == len(set(named))
    assert layers[0] == ["rehearse"] and layers[-1] == ["context"]


def test_no_step_imports_another_step_and_the_shared_modules_only_go_down():
    layers = _contract()
    level = {m: i for i, layer in enumerate(layers) for m in layer}
    for module, i in level.items():
        imported = _siblings_imported(STEPS / f"{module}.py")
        upward_or_sideways = sorted(m for m in imported if level[m] <= i)
        assert upward_or_sideways == [], (module, upward_or_sideways)
    steps = layers[1]
    assert {"deploy", "invoke", "operate", "setup"} <= set(steps)  # the modules that used to call each other


def test_the_check_sees_a_step_calling_another(tmp_path):
    made = tmp_path / "made.py"
    made.write_text("from .deploy import deploy_plan\nfrom . import invoke\nfrom ..aws import images\n")
    assert _siblings_imported(made) == {"deploy", "invoke"}
