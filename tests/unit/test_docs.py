"""The README stays a short user's guide: at most 300 lines, linking docs/ and CONTRIBUTING.md;
every file under docs/ is reachable from the README through links, and no relative link in
the README, CONTRIBUTING.md or docs/ points at a file that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 300
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def local_links(doc: Path) -> set:
    """The files a Markdown document links to, resolved; web links are left out."""
    targets = set()
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if "://" not in target and not target.startswith("mailto:"):
            targets.add((doc.parent / target).resolve())
    return targets


def docs() -> list:
    return sorted((ROOT / "docs").glob("*.md"))


def test_readme_is_short_and_links_docs_and_contributing():
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, "README.md has %d lines, at most %d: move detail to docs/" \
        % (len(lines), README_MAX_LINES)
    links = local_links(readme)
    assert (ROOT / "CONTRIBUTING.md").resolve() in links, "README.md does not link CONTRIBUTING.md"
    assert any(p.parent == (ROOT / "docs").resolve() for p in links), "README.md links nothing in docs/"


def test_every_doc_is_reachable_from_the_readme():
    assert docs(), "docs/ holds no Markdown file"
    seen, todo = set(), [(ROOT / "README.md").resolve()]
    while todo:
        doc = todo.pop()
        if doc in seen or not doc.is_file() or doc.suffix != ".md":
            continue
        seen.add(doc)
        todo.extend(local_links(doc))
    unreachable = [str(p.relative_to(ROOT)) for p in docs() if p.resolve() not in seen]
    assert not unreachable, "not linked from the README or a doc it links: %s" % unreachable


def test_no_link_points_at_a_missing_file():
    broken = ["%s -> %s" % (doc.relative_to(ROOT), target)
              for doc in [ROOT / "README.md", ROOT / "CONTRIBUTING.md"] + docs()
              for target in local_links(doc) if not target.exists()]
    assert not broken, broken


def test_changelog_dates_every_released_version():
    """One "Unreleased" section on top; every other section is a version with its release date."""
    headings = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert headings and headings[0] == "Unreleased", headings[:1]
    undated = [h for h in headings[1:] if not re.fullmatch(r"\d+\.\d+\.\d+ — \d{4}-\d{2}-\d{2}", h)]
    assert not undated, "a released version needs its date (YYYY-MM-DD): %s" % undated


def test_commands_doc_has_one_row_per_command():
    """docs/commands.md's table names each command once: rows added beside an older copy left
    the reader five different `replay` rows, the first ones missing what the last says."""
    rows = re.findall(r"^\| `([^`]+)` \|", (ROOT / "docs" / "commands.md").read_text(encoding="utf-8"), re.M)
    assert rows, "docs/commands.md has no command table"
    repeated = sorted({r for r in rows if rows.count(r) > 1})
    assert not repeated, "rows repeated in docs/commands.md: %s" % repeated
