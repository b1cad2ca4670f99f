"""The README's layout block and the architecture page name the tree as it is.

A newcomer finds where a thing lives from these two pages, so a module that moves must
move there too: every entry at the top of ``voxproxy/`` is named in the README's layout
block, every ``voxproxy/`` entry the block names exists, and every source path the
architecture page quotes in backticks exists.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "voxproxy"


def _layout_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    return block.splitlines()[1:]


def _package_entries_named(lines: list[str]) -> set[str]:
    """The names of the block's entries under voxproxy/ (indented two spaces)."""
    names: set[str] = set()
    inside = False
    for line in lines:
        if line.startswith("voxproxy/"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break  # the next top-level folder of the repository
        match = re.match(r"^  (\S+)", line)
        if inside and match:
            names.add(match.group(1).rstrip("/"))
    return names


def _tree_entries() -> set[str]:
    names = set()
    for path in PACKAGE.iterdir():
        if path.name.startswith("__") or path.name in {"py.typed"}:
            continue
        is_package = (path / "__init__.py").exists()
        if path.is_dir() and not is_package and path.name != "data" and path.name[0] != "_":
            continue  # a stray folder: neither a package, nor data, nor the fixtures link
        if path.is_file() and path.suffix != ".py":
            continue
        names.add(path.stem if path.is_file() else path.name)
    return names


def test_the_readme_layout_names_every_top_level_entry_of_the_package() -> None:
    named = {n.removesuffix(".py") for n in _package_entries_named(_layout_block())}
    tree = _tree_entries()
    assert tree - named == set(), "in voxproxy/ but not in the README's layout block"
    assert named - tree == set(), "in the README's layout block but not in voxproxy/"


def test_the_readme_layout_names_only_repository_folders_that_exist() -> None:
    for line in _layout_block():
        match = re.match(r"^(\S+/)", line)
        if match:
            for part in match.group(1).split(","):
                part = part.strip()
                if part:
                    assert (ROOT / part).exists(), part


def test_every_source_path_the_architecture_page_quotes_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    quoted = set(re.findall(r"`([A-Za-z_][\w/]*\.py|[a-z_]+/(?:[\w]+/)*)`", text))
    assert len(quoted) >= 10  # the page does quote paths: this test reads them
    missing = []
    for path in sorted(quoted):
        candidates = [ROOT / path, PACKAGE / path, ROOT / "tests" / path]
        if not any(c.exists() for c in candidates):
            missing.append(path)
    assert missing == []
