"""MkDocs hooks (mkdocs.yml ``hooks:``): each page's reference markers are filled in as it builds."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts import docs_reference  # noqa: E402


def on_page_markdown(markdown, page, config, files):
    return docs_reference.expand(markdown)
