"""Results to compare against: each notebook's local run, and ``make demo``'s output, in the docs site.

``python -m scripts.results`` (``make results``) runs every notebook once in local mode, in order,
in one temporary workshop folder, then ``make demo`` once, and writes what they printed:
``docs/results/NN_name.md`` per notebook (each code cell, then its output; images beside it) and
``docs/results/demo.md``, and fills the excerpts of that demo output that README.md and
docs/getting-started.md show (between ``<!-- results: NAME -->`` and ``<!-- /results -->``).

``make test`` runs the same (tests/notebooks/test_results.py) and compares each page with its run
once both are normalised (``VARIES``: what differs between two runs of one tree). The notebooks'
markdown is left out but for its headings, and headings are not compared: the pages hold what the
code prints.
"""

from __future__ import annotations

import base64
import difflib
import os
import re
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "docs" / "results"
EXCERPT_FILES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
REFRESH = "make results"
SAME = (
    f"`{REFRESH}` wrote this page and `make test` checks it against a new run. Timings, ports,\n"
    "paths and dates differ from run to run ([what differs](index.md#what-differs-from-your-run)); the\n"
    "rest should match what you see."
)
CELL_TIMEOUT_S = 900

# What legitimately differs between two runs of the same tree, each replaced by a placeholder before
# pages are compared (in this order). Anything else that differs is drift.
VARIES = [
    ("temporary folder", r"/tmp/[\w.-]+", "<tmp>"),
    ("port", r"\b(127\.0\.0\.1|localhost):\d+", r"\1:<port>"),
    ("date and time", r"\b20\d\d-?[01]\d-?[0-3]\d(?:[T _-]?[0-2]\d:?[0-5]\d:?[0-5]\d(?:[.,]\d+)?Z?)?\b", "<time>"),
    ("time of day", r"\b[0-2]\d:[0-5]\d(?::[0-5]\d)?\b", "<time>"),
    ("id", r"\b(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})\b", "<id>"),
    (
        "digest of an image the emulated account's build made",
        r"(123456789012\.dkr\.ecr\.[\w.-]+/[\w/-]+@sha256:)[0-9a-f]+",
        r"\1<digest>",
    ),
    (
        "size of model.tar.gz (its entries carry the time they were packed)",
        r"(model\.tar\.gz\s+\()[\d,]+ bytes",
        r"\1<size> bytes",
    ),
    (
        "count of what a timed phase sent or a wait polled: captured requests, their objects, AWS calls",
        r"\b\d[\d,]* (?=captured invocations|decision tasks to label|objects deleted|permissions checked|"
        r"recorded AWS permissions)",
        "<count> ",
    ),
    (
        "checksum of a file fitted on the run's answers (calibration.json)",
        r"('sha256': ')[0-9a-f]{64}'",
        r"\1<sha256>'",
    ),
    ("plural of a count of callers the load decides", r"\bconcurrent callers?\b", "concurrent caller(s)"),
    ("version of Python or a package", r"(?<![\w.])\d+\.\d+\.\d+(?![\w.])", "<version>"),
    ("duration", r"\b\d[\d,]*(?:\.\d+)? ?(?:ms|s|min)\b", "<duration>"),
    ("rate", r"\b\d[\d,]*(?:\.\d+)? ?(?:\w+/s|/s|per s(?:econd)?)\b", "<rate>"),
]


# A paragraph that reports latency percentiles or rates has all its numbers hidden: how many requests
# fit in a few seconds, and what is derived from that (rates, ratios, scaling targets), varies with the
# machine's speed and load. Its words are still compared.
TIMED = re.compile(r"\bp(?:50|95)\b|/s\b|/token\b|per minute|a minute")


def normalise(text: str) -> str:
    for _, pattern, placeholder in VARIES:
        text = re.sub(pattern, placeholder, text)
    return "\n\n".join(
        re.sub(r"(?<![\w.<])\d[\d,.]*", "<n>", paragraph) if TIMED.search(paragraph) else paragraph
        for paragraph in text.split("\n\n")
    )


# ---- rendering ----------------------------------------------------------------------------------


@dataclass
class Page:
    """One results page: its Markdown and the images it links to (file name -> PNG bytes)."""

    markdown: str
    images: dict[str, bytes] = field(default_factory=dict)


def _fence(text: str, lang: str = "text") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _headings(source: str) -> list[str]:
    """A markdown cell's headings (outside its code blocks)."""
    found, fenced = [], False
    for line in source.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} \S", line):
            found.append(line.strip())
    return found


WIDGET = "*(an interactive widget: it works in JupyterLab)*"  # progress bars too: one line for a run of them


def _joined(outputs) -> list:
    """The outputs with each run of text printed to one stream joined: how the kernel cut it into
    messages varies from run to run."""
    joined = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous["name"] == output["name"]
        ):
            joined[-1] = {**previous, "text": previous["text"] + output["text"]}
        else:
            joined.append(output)
    return joined


def _output(output, stem: str, cell_no: int, images: dict[str, bytes]) -> list[str]:
    kind = output.get("output_type")
    if kind == "stream":
        return [_fence(output["text"])]
    if kind == "error":
        return [_fence(f"{output['ename']}: {output['evalue']}")]
    data = output.get("data", {})
    parts = []
    if "image/png" in data:
        earlier = sum(name.startswith(f"{stem}/cell-{cell_no:02d}") for name in images)
        name = f"{stem}/cell-{cell_no:02d}{f'-{earlier + 1}' if earlier else ''}.png"
        images[name] = base64.b64decode(data["image/png"])
        parts.append(f"![cell {cell_no}'s figure]({name})")
    if "application/vnd.jupyter.widget-view+json" in data:
        parts.append(WIDGET)
    elif "text/markdown" in data:  # its headings nest under the notebook's
        parts.append(re.sub(r"^(#{1,4}) ", r"##\1 ", data["text/markdown"].strip(), flags=re.MULTILINE))
    elif "text/plain" in data:
        parts.append(_fence(data["text/plain"]))
    return parts


def render(nb, stem: str) -> Page:
    """A notebook that ran: its title, the headings of its markdown, each code cell and its outputs."""
    images: dict[str, bytes] = {}
    title = next(
        (h for c in nb.cells if c.cell_type == "markdown" for h in _headings(c.source) if h.startswith("# ")),
        f"# {stem}",
    )
    blocks = [title, f"What `notebooks/{stem}.ipynb` printed in a local run.\n{SAME}"]
    number = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            blocks += [h for h in _headings(cell.source) if h != title]
        elif cell.cell_type == "code":
            number += 1
            blocks.append(f"**In [{number}]:**\n\n" + _fence(cell.source, "python"))
            parts = [
                part for output in _joined(cell.get("outputs", [])) for part in _output(output, stem, number, images)
            ]
            blocks += [part for i, part in enumerate(parts) if part != WIDGET or parts[i - 1 : i] != [WIDGET]]
    return Page("\n\n".join(blocks) + "\n", images)


def compared(markdown: str) -> str:
    """What a check compares: the page normalised, without the headings (outside code blocks)."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            lines.append(line)
    return normalise("\n".join(lines))


def drift(committed: str, fresh: str, name: str) -> str:
    """A diff of the two pages as compared, empty where they agree. Whitespace is not compared: the
    code wraps lines and pads columns to the length of values that vary (paths, timings)."""
    old, new = compared(committed), compared(fresh)
    if old.split() == new.split():
        return ""
    diff = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"{name} (committed)", f"{name} (this run)", lineterm=""
    )
    return "\n".join(line.rstrip() for line in diff)


# ---- running ------------------------------------------------------------------------------------


@contextmanager
def workshop_folder():
    """A temporary workshop folder in local mode (config, outputs, rehearsal), its processes stopped
    and the folder removed at the end. Yields the kernels' environment."""
    from workshop_lib.local.rehearsal import Rehearsal

    with tempfile.TemporaryDirectory(prefix="workshop-results-") as run:
        env = {
            **os.environ,
            "WORKSHOP_MODE": "local",
            "WORKSHOP_CONFIG": f"{run}/config.json",
            "WORKSHOP_LOCAL_DIR": f"{run}/local",
        }
        try:
            yield env
        finally:
            Rehearsal(f"{run}/local").stop_all()


def as_participant_sees(text: str, env: dict | None = None) -> str:
    """Paths as a participant's run prints them: relative to the checkout, where they run from, and
    the temporary workshop folder (``env``'s) as their ``.workshop``, which has the same layout."""
    if env:
        text = text.replace(str(Path(env["WORKSHOP_CONFIG"]).parent), ".workshop")
    return text.replace(f"{ROOT}/", "").replace(str(ROOT), ".")


def execute(path: Path, env: dict):
    """Run one notebook as Run All does, in its folder, with the venv's python3 kernel. Raises
    nbclient's CellExecutionError (the cell and its traceback) when a cell fails."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # The venv's python3 kernelspec before a user-level one of that name, as JupyterLab in the venv finds it.
    venv = str(Path(sys.prefix) / "share" / "jupyter")
    if not os.environ.get("JUPYTER_PATH", "").startswith(venv):
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [venv, os.environ.get("JUPYTER_PATH")]))
    NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute(env=env)
    return nb


def notebook_page(path: Path, env: dict) -> Page:
    page = render(execute(path, env), path.stem)
    return Page(as_participant_sees(page.markdown, env), page.images)


def run_demo() -> str:
    """What ``make demo`` prints (``python -m workshop_lib demo``, run the same way)."""
    done = subprocess.run(
        [sys.executable, "-m", "workshop_lib", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=1800,
    )
    if done.returncode:
        raise RuntimeError(f"make demo failed (exit status {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return as_participant_sees(done.stdout)


def render_demo(output: str) -> str:
    return (
        f"# make demo\n\nWhat `make demo` printed, after the notebooks in the same run.\n{SAME}\n\n{_fence(output)}\n"
    )


# ---- excerpts -----------------------------------------------------------------------------------

EXCERPT = re.compile(r"(<!-- results: ([a-z0-9-]+) -->\n)(.*?)(<!-- /results -->)", re.DOTALL)
# The pieces of the demo's output a file may show: part 1 (the adapter) or part 2 (the rehearsal of the
# notebooks), whole or as the lines that a short excerpt keeps, "..." between them.
EXCERPTS = {
    "demo-adapter": (0, [slice(None)]),
    "demo-rehearsal": (1, [slice(None)]),
    "demo-adapter-short": (0, [slice(3, 12), slice(-3, None)]),
    "demo-rehearsal-short": (1, [slice(0, 2), slice(-4, None)]),
}


def excerpt(demo_output: str, name: str) -> str:
    part, pieces = EXCERPTS[name]
    lines = demo_output.strip("\n").split("\n\n", 1)[part].splitlines()
    return "\n...\n".join("\n".join(lines[piece]) for piece in pieces)


def fill_excerpts(text: str, demo_output: str) -> str:
    return EXCERPT.sub(lambda m: f"{m[1]}\n{_fence(excerpt(demo_output, m[2]))}\n\n{m[4]}", text)


# ---- the command --------------------------------------------------------------------------------


def pages(env: dict, log=print) -> dict[str, Page]:
    """Every notebook, then the demo, run once: the pages they make, by file name under docs/results."""
    made = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        log(f"running {path.name} ...")
        made[f"{path.stem}.md"] = notebook_page(path, env)
    log("running make demo ...")
    made["demo.md"] = Page(render_demo(run_demo()))
    return made


def write(made: dict[str, Page]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name, page in made.items():
        (RESULTS / name).write_text(page.markdown)
        for image in RESULTS.glob(f"{Path(name).stem}/*.png"):
            image.unlink()
        for image, data in page.images.items():
            (RESULTS / image).parent.mkdir(parents=True, exist_ok=True)
            (RESULTS / image).write_bytes(data)
    demo = demo_output(made["demo.md"].markdown)
    for path in EXCERPT_FILES:
        path.write_text(fill_excerpts(path.read_text(), demo))


def demo_output(page: str) -> str:
    """The demo's output back from its page (the one code block)."""
    return re.search(r"^```+text\n(.*?)\n```+$", page, re.DOTALL | re.MULTILINE)[1]


def main() -> int:
    with workshop_folder() as env:
        made = pages(env)
    write(made)
    print(
        f"wrote {len(made)} pages in {RESULTS.relative_to(ROOT)}/ and the excerpts in "
        f"{', '.join(str(p.relative_to(ROOT)) for p in EXCERPT_FILES)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
