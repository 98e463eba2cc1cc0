"""docs/layout.md matches the folders: every package is in its Folders table, and every path it
names exists (a move that forgets the page fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "layout.md"
PACKAGES = ("sharedsub", "connectors", "jobs")


def _folders_table(text: str) -> list[str]:
    section = text.split("## Folders", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+/)` \|", section, flags=re.M)


def _packages() -> set[str]:
    found = set()
    for top in PACKAGES:
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).as_posix() + "/"
            if "__pycache__" not in rel:
                found.add(rel)
    return found


def test_every_package_has_a_row_in_the_folders_table() -> None:
    listed = set(_folders_table(PAGE.read_text()))
    missing = sorted(_packages() - listed - {"connectors/"})  # (a namespace for the adapters)
    assert not missing, f"packages without a row in docs/layout.md's Folders table: {missing}"
    gone = sorted(p for p in listed if not (ROOT / p).is_dir())
    assert not gone, f"docs/layout.md lists folders that do not exist: {gone}"


def test_every_module_the_folders_table_names_is_in_its_folder() -> None:
    text = PAGE.read_text()
    section = text.split("## Folders", 1)[1].split("\n## ", 1)[0]
    missing = []
    for row in section.splitlines():
        match = re.match(r"^\| `([^`]+/)` \| (.*) \|$", row)
        if match is None:
            continue
        folder, cells = match.groups()
        for name in re.findall(r"`([\w./-]+\.(?:py|toml))`", cells):
            if not (ROOT / folder / name).is_file():
                missing.append(folder + name)
    assert not missing, f"docs/layout.md names modules that are not there: {missing}"


def test_the_check_sees_a_missing_package(tmp_path: Path) -> None:
    page = "## Folders\n\n| folder | holds |\n| --- | --- |\n| `sharedsub/core/` | `model.py` |\n\n## Next\n"
    assert _folders_table(page) == ["sharedsub/core/"]
    assert "sharedsub/core/delivery/" in _packages() - set(_folders_table(page))
