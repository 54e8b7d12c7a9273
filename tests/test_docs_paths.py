"""Every path the documentation cites exists: README.md and docs/**/*.md.

Two kinds of citation are read: a repository path written out (``docs/...``, ``bench/...``,
``onlinepgs/...``, ``tests/...``, ``examples/...``, in prose, code or a command), which
must exist from the repository's root or from the citing file's folder (a page of docs/
may say ``bench/auto.md`` for its neighbour docs/bench/auto.md); and a relative Markdown
link target, which must exist from the citing file's folder. A ``#section`` after a path
is not part of it; a pattern (``*``, ``<name>``, ``{a,b}``) names no one file and is
skipped.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# a repository path: one of the top folders, not inside a longer path (/work/x/docs/...)
_PATH = re.compile(r"(?<![\w./-])((?:docs|bench|onlinepgs|tests|examples)/[\w./*<>{},-]*)")
# a Markdown link's target, up to its closing parenthesis, an anchor or a title
_LINK = re.compile(r"\]\(([^)\s#]+)")


def cited(text):
    """(path, how it resolves: "root or here" / "here") for each citation in `text`."""
    found = []
    for match in _PATH.finditer(text):
        path = match.group(1).rstrip(".,:;")
        if not any(c in path for c in "*<>{}"):
            found.append((path, "root or here"))
    for match in _LINK.finditer(text):
        target = match.group(1)
        if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            found.append((target, "here"))
    return found


def dangling(page):
    here = page.parent
    missing = []
    for path, where in cited(page.read_text(encoding="utf-8")):
        places = [here / path] if where == "here" else [ROOT / path, here / path]
        if not any(p.exists() for p in places):
            missing.append(path)
    return sorted(set(missing))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_cited_path_exists(page):
    assert dangling(page) == []


def test_the_reader_finds_what_a_page_cites(tmp_path):
    text = ("See `docs/bench/gone.md#run`, [the record](bench/here.md#x), "
            "/work/main/docs/elsewhere.md, `tests/test_*.py`, bench/<name>.py, "
            "[a site](https://example.org/docs/x), and onlinepgs/pgs.py.")
    assert cited(text) == [("docs/bench/gone.md", "root or here"),
                           ("bench/here.md", "root or here"),
                           ("onlinepgs/pgs.py", "root or here"),
                           ("bench/here.md", "here")]
    page = tmp_path / "page.md"
    page.write_text(text)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "here.md").write_text("")
    assert dangling(page) == ["docs/bench/gone.md"]
