"""The results pages (docs/results/, scripts/results.py) hold what the code prints.

The slow tests run every notebook once, in order, in local mode (the run ``make test`` relies on:
a cell that fails fails its notebook's test), then ``make demo``, and compare each with its
committed page once both are normalised; ``make results`` refreshes the pages. The others test the
rendering, the normalisation and the excerpts without running anything.
"""

from __future__ import annotations

import base64

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from scripts import results

STEMS = [path.stem for path in sorted(results.NOTEBOOKS.glob("*.ipynb"))]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really a picture").decode()


def test_normalise_hides_what_varies_and_keeps_what_the_code_decides():
    varies = (
        "ready at http://127.0.0.1:41585 (log: /tmp/workshop-results-x1_y/local/adapter.log); "
        "client 2207 ms, took 0.633 s, 1,668 ms; decision-workshop-cpu-20261204152728 at "
        "2026-12-04T15:27:28Z, tag cpu-20261206-102341, deleted at 14:24 UTC; request "
        "0f8e1c2a-1b2c-4d3e-8f9a-0123456789ab, models/1506de74fd8992d7360f59704f2a71e7/model; "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-decision-workshop@sha256:d006daedb738…; "
        "model.tar.gz (92,799,675 bytes); boto3 1.44.18; 20 captured invocations, 137 objects deleted"
    )
    assert results.normalise(varies) == (
        "ready at http://127.0.0.1:<port> (log: <tmp>/local/adapter.log); "
        "client <duration>, took <duration>, <duration>; decision-workshop-cpu-<time> at "
        "<time>, tag cpu-<time>, deleted at <time> UTC; request "
        "<id>, models/<id>/model; "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-decision-workshop@sha256:<digest>…; "
        "model.tar.gz (<size> bytes); boto3 <version>; <count> captured invocations, <count> objects deleted"
    )
    kept = (
        "billing 0.991 ####; 135 input tokens, options read as 10+8+9+9 tokens; 4/6 correct; "
        "SmolLM2-135M-Instruct.Q4_1.gguf 98,362,432 bytes, sha256 b179c9523d0e…; 127.0.0.1 and "
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@sha256:1f19c220f5f1…; 4 h; C = 2"
    )
    assert results.normalise(kept) == kept
    timed = "C = 1: 0.83 decisions/s, p95 1,649 ms; 3 answered\nas_given 66.7% 1215.6 0.95x"
    assert results.normalise(f"{timed}\n\n{kept}") == (
        "C = <n>: <rate>, p95 <duration>; <n> answered\nas_given <n>% <n> <n>x\n\n" + kept
    )


def notebook():
    nb = new_notebook(
        cells=[
            new_markdown_cell(
                "# 05 · Invoke decisions\n\nProse that is left out.\n\n## One ticket\n\n```\n# not a heading\n```"
            ),
            new_code_cell(
                "print('hi')",
                outputs=[
                    new_output("stream", name="stdout", text="hi 1.5 s\n"),
                    new_output("stream", name="stdout", text="there\n"),
                ],
            ),
            new_code_cell(
                "table",
                outputs=[
                    new_output(
                        "execute_result",
                        execution_count=2,
                        data={"text/markdown": "| a |\n|---|\n| 1 |", "text/plain": "<Table>"},
                    )
                ],
            ),
            new_code_cell(
                "chart", outputs=[new_output("display_data", data={"image/png": PNG, "text/plain": "billing 0.9"})]
            ),
            new_code_cell(
                "widgets.builder()",
                outputs=[
                    new_output(
                        "display_data",
                        data={
                            "application/vnd.jupyter.widget-view+json": {"model_id": "abc"},
                            "text/plain": "VBox(...)",
                        },
                    )
                ],
            ),
            new_code_cell("x = 1"),
        ]
    )
    nbformat.validate(nb)
    return nb


def test_a_page_holds_each_code_cell_its_outputs_the_headings_and_the_images():
    page = results.render(notebook(), "05_invoke_decisions")
    text = page.markdown
    assert text.startswith("# 05 · Invoke decisions\n")
    assert "\n## One ticket\n" in text and "Prose" not in text and "not a heading" not in text
    assert [f"**In [{n}]:**" in text for n in range(1, 6)] == [True] * 5
    assert "```text\nhi 1.5 s\nthere\n```" in text  # one block, however the kernel cut what was printed
    assert "| a |\n|---|\n| 1 |" in text and "<Table>" not in text  # the richest text a notebook shows
    assert page.images == {"05_invoke_decisions/cell-03.png": base64.b64decode(PNG)}
    assert "![cell 3's figure](05_invoke_decisions/cell-03.png)" in text and "billing 0.9" in text
    assert "interactive widget" in text and "VBox" not in text


def test_drift_is_what_the_code_prints_not_timings_or_headings():
    page = results.render(notebook(), "05_invoke_decisions").markdown
    assert results.drift(page, page.replace("1.5 s", "9.25 s").replace("## One ticket", "## A ticket"), "p") == ""
    diff = results.drift(page, page.replace("hi 1.5 s", "ho 1.5 s"), "p")
    assert "-hi <duration>" in diff and "+ho <duration>" in diff


def test_paths_read_as_a_participant_sees_them():
    env = {"WORKSHOP_CONFIG": "/tmp/workshop-results-abc/config.json"}
    text = f"log {results.ROOT}/.workshop/demo/adapter.log, report /tmp/workshop-results-abc/bench/report.md"
    assert results.as_participant_sees(text, env) == "log .workshop/demo/adapter.log, report .workshop/bench/report.md"


DEMO = "\n".join([f"part one {n}" for n in range(1, 16)] + [""] + [f"part two {n}" for n in range(1, 13)])


def test_excerpts_come_from_the_demo_output_and_the_rest_of_the_file_stays():
    text = (
        "before\n<!-- results: demo-adapter-short -->\n\nold\n\n<!-- /results -->\nbetween\n"
        "<!-- results: demo-rehearsal -->\nold\n<!-- /results -->\nafter\n"
    )
    filled = results.fill_excerpts(text, DEMO)
    assert filled.startswith("before\n<!-- results: demo-adapter-short -->\n\n```text\npart one 4\n")
    assert "part one 12\n...\npart one 13\npart one 14\npart one 15\n```\n\n<!-- /results -->\nbetween\n" in filled
    assert (
        "```text\n" + "\n".join(f"part two {n}" for n in range(1, 13)) + "\n```\n\n<!-- /results -->\nafter\n" in filled
    )
    assert "old" not in filled and results.fill_excerpts(filled, DEMO) == filled


def test_the_committed_excerpts_are_the_committed_demo_run():
    """README and getting-started show pieces of one run: the one on docs/results/demo.md."""
    demo = results.demo_output((results.RESULTS / "demo.md").read_text())
    for path in results.EXCERPT_FILES:
        text = path.read_text()
        assert results.EXCERPT.search(text), f"{path.name} has no results excerpt"
        assert results.fill_excerpts(text, demo) == text, f"{path.name}'s excerpts differ: run `make results`"


def test_every_notebook_has_a_page_and_every_page_is_in_the_site():
    nav = (results.ROOT / "mkdocs.yml").read_text()
    pages = sorted(path.name for path in results.RESULTS.glob("*.md"))
    assert pages == sorted([f"{stem}.md" for stem in STEMS] + ["demo.md", "index.md"])
    for name in pages:
        assert f"results/{name}" in nav, name
    for stem in STEMS:
        for image in (results.RESULTS / stem).glob("*.png"):
            assert f"({stem}/{image.name})" in (results.RESULTS / f"{stem}.md").read_text(), image


# ---- the real run -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workshop_env():
    with results.workshop_folder() as env:  # every process the notebooks start is stopped at the end
        yield env


FAILED: list[str] = []  # a notebook that failed: the later ones build on it and are not run


def _same(name: str, fresh: str):
    committed = (results.RESULTS / name).read_text()
    diff = results.drift(committed, fresh, f"docs/results/{name}")
    assert not diff, f"{diff}\n\nThe page differs from this run: `{results.REFRESH}` refreshes it."


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_the_notebook_runs_and_prints_what_its_page_shows(stem, workshop_env):
    if FAILED:
        pytest.fail(f"not run: {FAILED[0]} failed before it", pytrace=False)
    try:
        page = results.notebook_page(results.NOTEBOOKS / f"{stem}.ipynb", workshop_env)
    except Exception:
        FAILED.append(stem)
        raise
    _same(f"{stem}.md", page.markdown)


@pytest.mark.slow
def test_make_demo_prints_what_its_page_shows():
    _same("demo.md", results.render_demo(results.run_demo()))
