"""The README stays a front page: short, the two commands, and links that lead somewhere (files that
exist, and headings that exist in the docs pages they point into)."""

from __future__ import annotations

import re
from pathlib import Path

from markdown.extensions.toc import slugify

from scripts import docs_reference as ref

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The heading ids MkDocs gives a page (after its generated parts are filled in)."""
    text = ref.expand(page.read_text())
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE):
        explicit = re.search(r"\{#([\w-]+)\}\s*$", heading)
        found.add(explicit.group(1) if explicit else slugify(heading.replace("`", ""), "-"))
    return found


def test_readme_is_short_and_names_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "make demo" in text and "make test" in text


def test_readme_links_lead_to_files_and_headings_that_exist():
    links = LINK.findall(README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert any(link.startswith("docs/") for link in local)
    for link in local:
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor and target.suffix == ".md" and target.parent == ROOT / "docs":
            assert anchor in anchors(target), f"README links to {link}: no such heading"


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert f" {page.name}" in nav, page.name
