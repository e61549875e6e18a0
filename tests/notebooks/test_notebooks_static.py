"""The notebooks, read without running them: structure, AWS access, widgets, cleanup coverage."""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace

import nbformat
import pytest

from workshop_lib import steps, widgets
from workshop_lib.config import repo_root

NOTEBOOK_DIR = repo_root() / "notebooks"
EXPECTED = [
    "00_setup",
    "01_package_model",
    "02_deploy_standard_endpoint",
    "03_build_decision_image",
    "04_deploy_decision_endpoints",
    "05_invoke_decisions",
    "06_benchmark",
    "07_operate",
    "08_cleanup",
]


def load(name: str):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def code_cells(nb) -> list[str]:
    return [cell.source for cell in nb.cells if cell.cell_type == "code"]


def parse(source: str) -> ast.Module:
    """A code cell as Python, with IPython magics (``%...``, ``!...``) left out."""
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


def steps_calls(sources) -> list[str]:
    found = []
    for source in sources:
        for node in ast.walk(parse(source)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "steps"
            ):
                found.append(node.func.attr)
    return found


def test_the_notebooks_are_the_ordered_set():
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_valid_nbformat_4_with_the_python3_kernel_and_no_outputs(name):
    nb = load(name)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: commit without outputs"


@pytest.mark.parametrize("name", EXPECTED)
def test_starts_by_loading_the_shared_config(name):
    cells = code_cells(load(name))
    if name == "00_setup":  # first makes the library importable in a fresh Studio kernel
        assert cells[0].strip() == "%run studio_setup.py"
        cells = cells[1:]
    body = parse(cells[0]).body
    work = [ast.unparse(n) for n in body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    # Expected mistakes are shown as one line from the first cell on; then the workshop is loaded.
    assert work[:2] == ["steps.short_errors()", "workshop = steps.Workshop.load()"], work


@pytest.mark.parametrize("name", EXPECTED)
def test_ends_by_checking_its_own_outcome(name):
    """The last code cell asserts the notebook's outcome through the library (nbmake fails on it); notebook 06
    checks each of its parts at the part's end (test_the_benchmark_checks_part_1_before_its_optional_studies)."""
    cells = code_cells(load(name))
    assert steps_calls(cells[-1:]) == ["check_outcome"], cells[-1]
    assert f'steps.check_outcome(workshop,"{name[:2]}",' in "".join(cells[-1].split())  # however it is wrapped


def assigned(sources) -> set[str]:
    """The names the cells bind (assignments, imports, loop targets)."""
    names = set()
    for source in sources:
        for node in ast.walk(parse(source)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def checked(source: str) -> set[str]:
    """The names a cell's ``steps.check_outcome`` call reads for its results (its keyword arguments)."""
    calls = [
        node
        for node in ast.walk(parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "check_outcome"
    ]
    assert len(calls) == 1, source
    return {n.id for kw in calls[0].keywords for n in ast.walk(kw.value) if isinstance(n, ast.Name)}


OPTIONAL_PARTS = {  # notebook: (what Part 1's check reads at least, what Part 2's check reads at least)
    "06_benchmark": ({"report", "throughput"}, {"study", "readouts"}),
    "07_operate": ({"update", "scaled", "batch"}, {"zero", "back"}),
}


@pytest.mark.parametrize("name", sorted(OPTIONAL_PARTS))
def test_an_optional_part_2_comes_after_part_1s_check_and_checks_only_its_own_results(name):
    """Notebook 06's studies and 07's scale to zero are optional: Part 1 ends with a check of Part 1's results,
    and Part 2 ends with its own check of what Part 2 made, so a participant who stops after Part 1 has a
    passing closing check, and one who skips Part 2's cells never meets a check that reads their results."""
    nb = load(name)
    start = next(
        i for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown" and cell.source.startswith("## Part 2")
    )
    part1, part2 = (
        code_cells(SimpleNamespace(cells=nb.cells[:start])),
        code_cells(SimpleNamespace(cells=nb.cells[start:])),
    )
    assert "optional" in nb.cells[start].source.splitlines()[0]
    for part, earlier in ((part1, []), (part2, part1)):
        assert steps_calls(part[-1:]) == ["check_outcome"], part[-1]
        assert f'steps.check_outcome(workshop,"{name[:2]}",' in "".join(part[-1].split())
        results = checked(part[-1])
        made_here = assigned(part[:-1]) - assigned(earlier)
        assert results and results <= made_here, (
            f"the check {part[-1]!r} reads {sorted(results - made_here)}, not made in its own part"
        )
    first, second = OPTIONAL_PARTS[name]
    assert first <= checked(part1[-1]) and second <= checked(part2[-1])


@pytest.mark.parametrize("name", EXPECTED)
def test_markdown_never_pairs_dollar_signs_into_maths(name):
    """JupyterLab typesets $...$ as maths, and in a table even an escaped \\$ pair (markdown removes the
    backslash before MathJax reads the text): prices are written in USD (code spans are left alone)."""
    for cell in load(name).cells:
        if cell.cell_type == "markdown":
            prose = re.sub(r"`[^`]*`", "", cell.source)
            assert "$" not in prose, f"{name}: a $ in: {cell.source[:80]}"


@pytest.mark.parametrize("name", EXPECTED)
def test_every_aws_call_goes_through_workshop_lib(name):
    for source in code_cells(load(name)):
        assert not re.search(r"\bboto3\b|\bbotocore\b|sagemaker-runtime|\.client\(['\"]", source), source
        for node in ast.walk(parse(source)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                # openai: notebook 05's local call to the adapter's OpenAI Decisions API (never AWS)
                assert all(
                    m and m.split(".")[0] in {"workshop_lib", "os", "json", "ipywidgets", "openai"} for m in modules
                ), f"{name} imports {modules}"


@pytest.mark.parametrize("name", EXPECTED)
def test_every_widget_comes_from_the_helper_and_is_read_in_a_later_cell(name):
    """Cells build no widget themselves: ``workshop_lib.widgets`` makes each one with its environment
    default (tests/workshop_lib/test_widgets.py checks those), and a cell reads ``.value`` only later."""
    helpers = {n for n in widgets.__all__ if n not in ("ENV", "column", "keep_choice")}
    for source in code_cells(load(name)):
        assert "ipywidgets" not in source, f"{name} builds a widget inline; make it in workshop_lib.widgets"
        assert "interact_manual" not in source and ".on_click(" not in source and ".observe(" not in source
        made = set()
        for node in ast.walk(parse(source)):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "widgets":
                    assert func.attr in helpers, f"{name}: widgets.{func.attr} is not a widget helper"
                    for target in node.targets:
                        names = target.elts if isinstance(target, ast.Tuple) else [target]
                        made.update(t.id for t in names if isinstance(t, ast.Name))
        for node in ast.walk(parse(source)):
            if isinstance(node, ast.Attribute) and node.attr == "value" and isinstance(node.value, ast.Name):
                assert node.value.id not in made, (
                    f"{name}: {node.value.id}.value is read in the cell that builds it; read it in the next cell"
                )


def test_notebooks_write_only_beside_their_config():
    """Files a notebook saves go where its config says (``Workshop.folder``), never to a fixed
    ``.workshop/`` path: nbmake runs use a temporary config folder (notebooks/conftest.py)."""
    for name in EXPECTED:
        for source in code_cells(load(name)):
            assert ".workshop" not in source and "repo_root" not in source, f"{name}: {source[:120]}"


@pytest.mark.parametrize("name", EXPECTED)
def test_every_step_called_exists_and_is_classified(name):
    for call in steps_calls(code_cells(load(name))):
        assert callable(getattr(steps, call, None)), f"{name} calls steps.{call}, which does not exist"
        assert call in steps.CREATES or call in steps.READ_ONLY or name == "08_cleanup", (
            f"steps.{call} is neither in steps.CREATES nor in steps.READ_ONLY: say what it creates"
        )


def test_cleanup_names_every_resource_the_earlier_notebooks_create():
    earlier = [source for name in EXPECTED[:-1] for source in code_cells(load(name))]
    cleanup = "\n".join(code_cells(load("08_cleanup")))
    creating = {call for call in steps_calls(earlier) if call in steps.CREATES}
    assert creating >= {
        "setup",
        "package_model",
        "deploy_standard",
        "build_decision_image",
        "deploy_decision_cpu",
        "deploy_decision_gpu",
    }
    for call in sorted(creating):
        for name in steps.CREATES[call]:
            assert name in cleanup, f"steps.{call} creates {name}, which 08_cleanup never names"


def test_cleanup_proves_nothing_is_left_after_deleting():
    order = steps_calls(code_cells(load("08_cleanup")))
    deletions = [order.index(c) for c in ("delete_endpoints", "delete_build_resources", "delete_artifacts")]
    assert deletions == sorted(deletions)  # the endpoints, which bill, first
    assert order.index("running_endpoints") > max(deletions)
    assert order[-2:] == ["stop_local", "check_outcome"]


HEADER = ("You learn", "Time", "Cost while it runs", "Cost if left running", "Creates", "Removed by")


def header(nb) -> dict[str, str]:
    """The rows of the header table in the notebook's first cell: ``| **Name** | value |``."""
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "the first cell is the title"
    return dict(re.findall(r"^\| \*\*(.+?)\*\* \| (.+?) \|$", first.source, flags=re.MULTILINE))


@pytest.mark.parametrize("name", EXPECTED)
def test_opens_with_the_header_every_notebook_shares(name):
    """Title, then what you learn, time, cost while it runs and left running, what it creates and
    which notebook removes it; a notebook whose cells create AWS resources says 08 removes them."""
    rows = header(load(name))
    assert tuple(rows) == HEADER, f"{name}: header rows {tuple(rows)}"
    assert all(value.strip() for value in rows.values()), name
    for cost in ("Cost while it runs", "Cost if left running"):
        assert re.search(r"USD|nothing", rows[cost]), f"{name}: {cost} names no price"
    creating = [call for call in steps_calls(code_cells(load(name))) if call in steps.CREATES]
    if creating and name != "08_cleanup":
        assert "08" in rows["Removed by"], f"{name} creates resources ({creating}); say that 08 removes them"


def test_cleanup_ends_with_what_deliberately_remains():
    last = load("08_cleanup").cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("## What deliberately remains")
    assert "bucket" in last.source and "Studio space" in last.source
