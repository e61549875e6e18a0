"""workshop_lib.evaluation is one way down: each module imports only modules of a lower layer, all at the top
of the file, and nothing of the notebooks' steps or the CLI above it (which import it)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "workshop_lib" / "evaluation"

# A module may import those of a lower layer only; the report's data (``report``) comes before its renderings.
LAYERS = {
    "scoring": 0, "temperature": 0, "tasks": 0,
    "runner": 1, "profiles": 1,
    "bias": 2, "baseline": 2, "logprobs": 2, "served": 2,
    "order_study": 3, "report": 3,
    "markdown": 4, "plots": 4,
    "report_view": 5,
    "suite": 6,
    "__init__": 7,
}
ABOVE = ("workshop_lib.steps", "workshop_lib.cli", "workshop_lib.cli_commands", "workshop_lib.widgets", "benchmarks")


def imports(path: Path) -> list[tuple[str, bool]]:
    """(absolute module name, imported at module level) for every import in the file."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["workshop_lib", "evaluation"][: 3 - node.level]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((module, id(node) in top))
            found += [(f"{module}.{alias.name}", id(node) in top) for alias in node.names]
    return found


def own(name: str) -> str | None:
    """The evaluation module ``name`` refers to, or None for anything outside the package."""
    parts = name.split(".")
    if parts[:2] != ["workshop_lib", "evaluation"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in LAYERS else "__init__"


def test_every_module_has_a_layer():
    assert {p.stem for p in PACKAGE.glob("*.py")} == set(LAYERS)


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_a_module_imports_only_lower_layers_at_its_top_and_nothing_above_the_package(module):
    for name, at_top in imports(PACKAGE / f"{module}.py"):
        if name.startswith("workshop_lib."):
            assert at_top, f"{module} imports {name} inside a function"
        assert not any(name == above or name.startswith(above + ".") for above in ABOVE), \
            f"{module} imports {name}, which imports the evaluation package"
        target = own(name)
        if target is not None and target != module:
            assert LAYERS[target] < LAYERS[module], f"{module} (layer {LAYERS[module]}) imports {target} " \
                                                    f"(layer {LAYERS[target]})"


def test_the_reports_data_imports_none_of_its_renderings():
    named = {own(name) for name, _ in imports(PACKAGE / "report.py")}
    assert not named & {"markdown", "plots", "report_view"}
