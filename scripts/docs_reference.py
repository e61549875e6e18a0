"""The docs site's reference pages, rendered from the code and the recorded results.

Pages ask for a piece with a marker line, ``<!-- reference: NAME -->``, which ``expand`` replaces
(``docs_hooks.py`` calls it for every page MkDocs builds); ``RENDERERS`` names each piece. The pieces
are rendered by pure functions in the modules beside this one, each reading a file or an object
handed to it: the API from ``openapi.json`` (``docs_api``), the settings from their declarations
(``docs_settings``), the command line from the parser ``workshop_lib.cli`` builds (``docs_cli``),
the module and layer tables from the docstrings and pyproject.toml (``docs_modules``), the
benchmark tables from ``benchmarks/results/*.json`` (``docs_benchmarks``). Nothing here imports
the adapter's app or starts a process.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script, from anywhere: the modules below are found from the root
    sys.path.insert(0, str(ROOT))

from scripts.docs_api import render_api, type_expr  # noqa: E402
from scripts.docs_benchmarks import (  # noqa: E402
    RESULTS,
    render_bench_adapter,
    render_bench_conformance,
    render_bench_embedded,
    render_bench_llama_server,
    render_bench_load,
    render_results_index,
)
from scripts.docs_cli import render_cli  # noqa: E402
from scripts.docs_modules import import_contracts, render_layers, render_modules  # noqa: E402
from scripts.docs_settings import (  # noqa: E402
    render_sample_aliases,
    render_settings,
    render_workshop_config,
    settings_rows,
)

# What the tests and callers reach through this module, the pages' one entry point.
__all__ = [
    "MARKER",
    "RENDERERS",
    "RESULTS",
    "expand",
    "import_contracts",
    "render_api",
    "render_bench_adapter",
    "render_bench_conformance",
    "render_bench_embedded",
    "render_bench_llama_server",
    "render_bench_load",
    "render_cli",
    "render_layers",
    "render_modules",
    "render_results_index",
    "render_sample_aliases",
    "render_settings",
    "render_workshop_config",
    "settings_rows",
    "type_expr",
]

MARKER = re.compile(r"^<!-- reference: ([a-z0-9_-]+) -->$", re.MULTILINE)


def _include(relative: str) -> str:
    """Another Markdown file of the repository, its first heading dropped (the page has its own), its
    links into ``docs/`` made relative to the site."""
    source = ROOT / relative
    text = re.sub(r"\A# .*\n+", "", source.read_text())

    def relink(match):
        target = match.group(1)
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve()
        docs = ROOT / "docs"
        if docs not in resolved.parents:
            raise ValueError(f"{relative} links to {target}, outside docs/: the site cannot show it")
        return f"]({resolved.relative_to(docs).as_posix()}{'#' + anchor if anchor else ''})"

    return re.sub(r"\]\(([^)\s]+)\)", relink, text)


RENDERERS = {
    "api": lambda: render_api(json.loads((ROOT / "container/decision_adapter/openapi.json").read_text())),
    "settings": render_settings,
    "layers": render_layers,
    "sample-settings": render_sample_aliases,
    "workshop-config": render_workshop_config,
    "cli": render_cli,
    "adapter-modules": lambda: render_modules(ROOT / "container" / "decision_adapter"),
    "workshop-modules": lambda: render_modules(ROOT / "workshop_lib"),
    "benchmark-modules": lambda: render_modules(ROOT / "benchmarks"),
    "bench-embedded": render_bench_embedded,
    "bench-adapter": render_bench_adapter,
    "bench-llama-server": render_bench_llama_server,
    "bench-load": render_bench_load,
    "bench-conformance": render_bench_conformance,
    "results-index": render_results_index,
    "notebooks": lambda: _include("notebooks/README.md"),
    "changes": lambda: _include("CHANGES.md"),
}


def expand(markdown: str) -> str:
    """Replace each marker line with what it names; an unknown name is an error naming it."""

    def replace(match):
        name = match.group(1)
        if name not in RENDERERS:
            raise KeyError(f"<!-- reference: {name} --> names no renderer; known: {', '.join(sorted(RENDERERS))}")
        return RENDERERS[name]().strip()

    return MARKER.sub(replace, markdown)


if __name__ == "__main__":  # python scripts/docs_reference.py NAME: print one piece
    print(RENDERERS[sys.argv[1]]())
