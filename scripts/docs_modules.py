"""The code's layout as tables: each package's modules with the first paragraph of their docstrings, and
the import layers the import-linter contracts in pyproject.toml declare."""

from __future__ import annotations

import ast
from pathlib import Path

from scripts.docs_markdown import cell, code, prose, table

ROOT = Path(__file__).resolve().parent.parent

# -- module tables, from each module's docstring ---------------------------------------------------


def module_summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = doc.strip().split("\n\n")[0]
    return " ".join(first.split())


def render_modules(package: Path) -> str:
    rows = []
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(package)
        name = str(relative.parent) + "/" if relative.name == "__init__.py" else str(relative)
        if name == "./":
            name = f"{package.name} (the package)"
        rows.append([code(name), prose(module_summary(path)) or "–"])
    return table(["module", "what it holds"], rows)


# -- the import layers, from the import-linter contracts in pyproject.toml --------------------------


def import_contracts(pyproject: Path = ROOT / "pyproject.toml") -> list[dict]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]


def render_layers(contracts: list[dict] | None = None) -> str:
    """Each layers contract as a table, top layer first: who may import whom (a module imports only
    from rows below its own; modules in one row with ``|`` between them do not import each other)."""
    contracts = import_contracts() if contracts is None else contracts
    parts = []
    for contract in contracts:
        if contract["type"] != "layers":
            continue
        where = ", ".join(code(c) for c in contract.get("containers", [])) or "the packages"
        rows = [
            [str(n), " \\| ".join(code(m.strip()) for m in layer.split("|"))]
            for n, layer in enumerate(contract["layers"], 1)
        ]
        parts.append(f"**{cell(contract['name'])}** (in {where}):\n\n" + table(["layer", "modules"], rows))
    rules = [f"- {cell(c['name'])}." for c in contracts if c["type"] != "layers"]
    return "\n\n".join(parts + ["\n".join(rules)])
