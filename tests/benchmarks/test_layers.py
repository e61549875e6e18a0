"""The benchmarks import one way: what two of them share sits below both, the library never imports them."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each benchmark module and the benchmark modules it may import.
ALLOWED = {
    "workload": set(),
    "servers": set(),
    "llama_server": {"servers", "workload"},
    "adapter": {"llama_server", "servers", "workload"},
    "embedded": set(),
    "jev": set(),
    "load": set(),
    "__init__": set(),
}


def benchmark_imports(path: Path) -> set[str]:
    """The benchmark modules ``path`` imports (``benchmarks.x`` or ``from benchmarks import x``), anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("benchmarks.")}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "benchmarks":
                found |= {a.name for a in node.names}
            elif node.module.startswith("benchmarks."):
                found.add(node.module.split(".")[1])
    return found


def test_every_benchmark_module_is_listed():
    assert {p.stem for p in (ROOT / "benchmarks").glob("*.py")} == set(ALLOWED)


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_a_benchmark_imports_only_what_sits_below_it(module):
    assert benchmark_imports(ROOT / "benchmarks" / f"{module}.py") <= ALLOWED[module]


def test_the_library_never_imports_the_benchmarks():
    for path in (ROOT / "workshop_lib").rglob("*.py"):
        assert not benchmark_imports(path), path
