"""The Markdown pieces every reference page is built from: escaped table cells and paragraphs, code
spans, and pipe tables."""

from __future__ import annotations

import html
import re


def cell(text, *, squeeze: bool = True) -> str:
    """Text safe inside a Markdown table cell (no HTML, no emphasis, no column breaks)."""
    text = html.escape(" ".join(str(text).split()) if squeeze else str(text), quote=False)
    return re.sub(r"([|*_\[\]`])", r"\\\1", text)


def para(text) -> str:
    """A description from a document as a Markdown paragraph: angle brackets shown, not taken as HTML."""
    return html.escape(str(text).strip(), quote=False)


def prose(text) -> str:
    """A docstring's sentence for a table cell: its ``literals`` become code spans."""
    pieces = re.split(r"``(.+?)``", " ".join(str(text).split()))
    return "".join(code(piece) if i % 2 else cell(piece, squeeze=False) for i, piece in enumerate(pieces))


def code(text) -> str:
    text = str(text).replace("|", "\\|")
    return f"`{text}`"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
