"""Every glossary term is a link to the glossary where a page or a notebook first uses it.

A use is the term in prose: code, headings, HTML comments and the text of links elsewhere do not
count. The first use in each page (README, docs/) and in each notebook's markdown must sit inside a
link to ``glossary.md#<the term's anchor>``."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"
GENERATED = {"api-reference.md", "changes.md", "glossary.md"}

# anchor in docs/glossary.md: how the term is written (a regular expression, case-insensitive unless it
# starts with (?-i))
TERMS = {
    "logits": r"\blogits?\b",
    "readout": r"\breadouts?\b",
    "letters": r"\bletters\b",
    "cloze": r"\bcloze\b",
    "pmi": r"(?-i:\bPMI\b)",
    "noul": r"\bnoul\b",
    "models": r"\bQwen3\.5-4B\b|\bSmolLM2-135M\b",
    "gguf": r"(?-i:\bGGUFs?\b)",
    "q4-k-m": r"\bQ4_K_M\b",
    "dlc": r"(?-i:\bDLCs?\b)",
    "inference-component": r"\binference components?\b",
    "kv-cache": r"\bKV[ -]cache\b",
    "prefix-reuse": r"\bprefix reuse\b",
    "batch-invariance": r"\bbatch[ -]invarian(?:ce|t)\b",
    "nll": r"(?-i:\bNLL\b)",
    "ece": r"(?-i:\bECE\b)",
    "brier": r"\bBrier\b",
    "profile-and-band": r"\bprofiles?\b",
    "prediction-set": r"\bprediction sets?\b",
    "jev": r"(?-i:\bJev\b)",
    "system-one": r"\bSystem One\b",
    "jevbench": r"(?-i:\bJevBench\b)",
    "the-published-sample": r"\bpublished (?:AWS )?sample\b",
    "the-blog": r"\bthe blog\b",
}
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]*)\)")
NOT_PROSE = re.compile(r"^```(?s:.*?)^```|`[^`\n]*`|<!--(?s:.*?)-->|^#{1,6} .*$", re.MULTILINE)


def blank(text: str, pattern: re.Pattern) -> str:
    """``text`` with what ``pattern`` matches replaced by spaces (newlines kept), so positions hold."""
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def first_unlinked_use(text: str, anchor: str) -> re.Match | None:
    """The term's first use in prose if it is not a link to its glossary entry; None when it is, or
    when the text never uses it."""
    prose = blank(text, NOT_PROSE)
    links = [(m.start(1), m.end(1), m.group(2)) for m in LINK.finditer(prose)]
    prose = LINK.sub(lambda m: m.group(0)[: m.end(1) - m.start(0)] + " " * (m.end(0) - m.end(1)), prose)
    for use in re.finditer(TERMS[anchor], prose, flags=re.IGNORECASE):
        inside = next((target for start, end, target in links if start <= use.start() and use.end() <= end), None)
        if inside is None:
            return use
        if inside.endswith(f"glossary.md#{anchor}"):
            return None
    return None


def documents() -> dict[str, str]:
    """Each page's Markdown, and each notebook's markdown cells together, by a readable name."""
    found = {"README.md": (ROOT / "README.md").read_text()}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name not in GENERATED:
            found[f"docs/{page.name}"] = page.read_text()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(notebook, as_version=4).cells
        found[f"notebooks/{notebook.name}"] = "\n\n".join(c.source for c in cells if c.cell_type == "markdown")
    return found


def test_every_term_has_its_entry():
    anchors = set(re.findall(r"\{#([\w-]+)\}", GLOSSARY.read_text()))
    assert set(TERMS) <= anchors, sorted(set(TERMS) - anchors)


def test_the_check_finds_an_unlinked_first_use_and_accepts_a_linked_one():
    assert first_unlinked_use("The `cloze` code, then cloze in prose.", "cloze").start() == 23
    assert first_unlinked_use("A [cloze](glossary.md#cloze) readout; cloze again.", "cloze") is None
    assert first_unlinked_use("[Why cloze](api.md#why) here, then [cloze](glossary.md#cloze).", "cloze") is None
    assert first_unlinked_use("## Cloze\n\nno use in prose", "cloze") is None


@pytest.mark.parametrize("name,text", sorted(documents().items()))
def test_each_term_is_linked_to_the_glossary_where_first_used(name, text):
    unlinked = {anchor: text[m.start() : m.end()] for anchor in TERMS if (m := first_unlinked_use(text, anchor))}
    assert not unlinked, f"{name}: first use not linked to docs/glossary.md: {unlinked}"
