"""The docs match the tree (a move, a new module or a new setting that forgets its page fails here).

* docs/layout.md, by the rule stated at its top: every folder of ``sharedsub/``, ``connectors/``
  and ``jobs/`` that holds a file has a row in its Folders table; every shipped module (each
  ``*.py`` but ``__init__.py``) is named, by its file name in backticks, in its own folder's row;
  every file a row names is in that folder; every folder the table lists exists.
* README.md and docs/*.md: every relative link points to a file that exists, and every
  ``#anchor`` to a heading of the file it points into (GitHub's anchors); the README links every
  page of docs/, is at most 400 lines, and its performance table is docs/performance.md's.
* docs/configuration.md names every key of sharedsub/core/defaults.toml under its section's
  heading (``## [section]``), and no key that file does not have.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "docs" / "layout.md"
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
DEFAULTS = ROOT / "sharedsub" / "core" / "defaults.toml"
PACKAGES = ("sharedsub", "connectors", "jobs")
README_MAX_LINES = 400
NAMED_FILE = re.compile(r"`([\w./-]+\.(?:py|toml|conf|java))`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def _folder_rows(text: str) -> dict[str, str]:
    """The Folders table: ``{folder: the rest of its row}``."""
    rows = {}
    for line in _section(text, "## Folders").splitlines():
        match = re.match(r"^\| `([^`]+/)` \| (.*) \|$", line)
        if match is not None:
            rows[match.group(1)] = match.group(2)
    return rows


def _shipped_files() -> list[Path]:
    return [
        p
        for top in PACKAGES
        for p in (ROOT / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]


def _folders_with_files() -> set[str]:
    return {p.parent.relative_to(ROOT).as_posix() + "/" for p in _shipped_files()}


def _modules() -> list[Path]:
    return sorted(p for p in _shipped_files() if p.suffix == ".py" and p.name != "__init__.py")


def test_every_folder_has_a_row_in_the_folders_table() -> None:
    listed = set(_folder_rows(LAYOUT.read_text()))
    missing = sorted(_folders_with_files() - listed)
    assert not missing, f"folders without a row in docs/layout.md's Folders table: {missing}"
    gone = sorted(p for p in listed if not (ROOT / p).is_dir())
    assert not gone, f"docs/layout.md lists folders that do not exist: {gone}"


def test_every_module_is_named_in_its_folders_row() -> None:
    rows = _folder_rows(LAYOUT.read_text())
    missing = []
    for module in _modules():
        folder = module.parent.relative_to(ROOT).as_posix() + "/"
        if module.name not in NAMED_FILE.findall(rows.get(folder, "")):
            missing.append(module.relative_to(ROOT).as_posix())
    assert not missing, f"modules docs/layout.md does not name in their folder's row: {missing}"


def test_every_file_a_row_names_is_in_its_folder() -> None:
    missing = [
        folder + name
        for folder, cells in _folder_rows(LAYOUT.read_text()).items()
        for name in NAMED_FILE.findall(cells)
        if not (ROOT / folder / name).is_file()
    ]
    assert not missing, f"docs/layout.md names files that are not there: {missing}"


def test_the_layout_checks_see_a_missing_folder_and_module() -> None:
    page = "# x\n\n## Folders\n\n| folder | holds |\n| --- | --- |\n| `sharedsub/core/` | `model.py` |\n\n## Next\n"
    rows = _folder_rows(page)
    assert rows == {"sharedsub/core/": "`model.py`"}
    assert "sharedsub/core/delivery/" in _folders_with_files() - set(rows)
    assert "errors.py" not in NAMED_FILE.findall(rows["sharedsub/core/"])


def _outside_code(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks, inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def anchors(text: str) -> set[str]:
    """The ``#anchors`` GitHub makes of a Markdown file's headings: the heading's text, lower case,
    without punctuation but ``-`` and ``_``, spaces as ``-``; a repeated one gets ``-1``, ``-2``, …"""
    seen: Counter[str] = Counter()
    found = set()
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or match is None:
            continue
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1))  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file or ``#anchor`` is not there."""
    broken = []
    for line in _outside_code(page.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
                broken.append(f"{target} (no such heading in {path or page.name})")
    return broken


def _pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_link_check_sees_a_missing_file_and_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Two words (and `code`)\n\n## Two words (and code)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "See [ok](other.md#two-words-and-code), [again](other.md#two-words-and-code-1), [up](#page),\n"
        "[gone](missing.md), [bad](other.md#nowhere), `[code](nowhere.md)`, [web](https://example.com).\n"
        "```\n[fenced](nowhere.md)\n```\n# Page\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nowhere (no such heading in other.md)"]


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {target.partition("#")[0] for line in _outside_code(README.read_text()) for target in LINK.findall(line)}
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    unlinked = [p for p in pages if p not in linked]
    assert not unlinked, f"pages of docs/ the README does not link: {unlinked}"


def test_the_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}: move a part into docs/)"


def _table(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def test_the_readmes_performance_table_is_the_guides() -> None:
    readme = _table(_section(README.read_text(), "## Performance (measured on one 2-core machine)"))
    guide = _table((ROOT / "docs" / "performance.md").read_text())
    assert readme, "the README has no performance table"
    assert readme == guide, "README.md's performance table differs from docs/performance.md's"


def _documented_keys(text: str) -> dict[str, set[str]]:
    """``{section: keys}`` of docs/configuration.md: the ``key`` = ``default`` items under each
    ``## [section]`` heading."""
    found: dict[str, set[str]] = {}
    for part in re.split(r"^## \[", text, flags=re.M)[1:]:
        section, _, body = part.partition("]")
        found[section] = set(re.findall(r"`(\w+)` = `", body))
    return found


def test_every_setting_is_in_the_configuration_guide() -> None:
    defaults = tomllib.loads(DEFAULTS.read_text())
    documented = _documented_keys(CONFIGURATION.read_text())
    missing = sorted(f"[{s}] {k}" for s, keys in defaults.items() for k in keys if k not in documented.get(s, set()))
    assert not missing, f"settings of defaults.toml docs/configuration.md does not document: {missing}"
    extra = sorted(f"[{s}] {k}" for s, keys in documented.items() for k in keys if k not in defaults.get(s, {}))
    assert not extra, f"docs/configuration.md documents settings defaults.toml does not have: {extra}"
