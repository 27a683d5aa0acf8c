"""Every relative link in README.md and docs/*.md names a file of the repository, and every #anchor a
heading of the file it points into (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens)."""
import glob
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(path):
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def relative_links(path):
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"^[a-z]+:", t)]


def test_the_docs_exist():
    assert "docs/models.md" in DOCS and "docs/conventions.md" in DOCS


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    source = os.path.join(ROOT, doc)
    broken = []
    for target in relative_links(source):
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
        if not os.path.exists(full):
            broken.append(f"{target}: no such file")
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{doc}: " + "; ".join(broken)
