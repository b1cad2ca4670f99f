"""The architecture page's layout block and its quoted paths name the tree as it is.

A newcomer finds where a thing lives from that page, so a module that moves must move
there too: every entry at the top of ``voxproxy/`` is named in the layout block (moved
from the README to docs/architecture.md), every ``voxproxy/`` entry the block names
exists, and every source path the architecture page quotes in backticks exists. The
block's ``tests/`` line holds too: tests mirror the source, each module with logic has
``tests/<package>/test_<module>.py`` (the modules without one are listed, each with why).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "voxproxy"


def _layout_block() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
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


def test_the_layout_block_names_every_top_level_entry_of_the_package() -> None:
    named = {n.removesuffix(".py") for n in _package_entries_named(_layout_block())}
    tree = _tree_entries()
    assert tree - named == set(), "in voxproxy/ but not in the layout block"
    assert named - tree == set(), "in the layout block but not in voxproxy/"


def test_the_layout_block_names_only_repository_folders_that_exist() -> None:
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
        candidates = [ROOT / path, PACKAGE / path, PACKAGE / "core" / path, ROOT / "tests" / path]
        if not any(c.exists() for c in candidates):
            missing.append(path)
    assert missing == []


# -- documents the code and the docs cite ------------------------------------------------

CITING = ("voxproxy", "tests", "benchmarks", "tools", "deploy", "docs")
CITING_FILES = ("README.md", "MEASUREMENT.md", "CHANGELOG.md", "Makefile", "pyproject.toml")
_DOC = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
_SECTION = re.compile(
    r"((?:[\w.-]+/)*[\w.-]+\.md)`?\s+(?:sections?\s+|§\s*)?(\d+[a-z]?)\b"
    r"(?:\s*(?:-|–|and)\s*(\d+)\b)?(?:'s)?(?:,\s*\"([^\"]+)\")?"
)

_TITLED = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.md)`?,\s+\"([^\"]+)\"")


def _citing_files(root: Path) -> list[Path]:
    found = [root / name for name in CITING_FILES if (root / name).exists()]
    for folder in CITING:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".md", ".yaml", ".yml", ".toml", ""}:
                found.append(path)
    return found


def _cited_path(root: Path, citing: Path, cited: str, link: bool) -> Path | None:
    """Where a cited document must be in the repository, or None when it is not one of
    the repository's (another project's document, such as OpenTelemetry's)."""
    top = {p.name for p in root.iterdir() if p.is_dir()}
    if link:
        return citing.parent / cited  # a Markdown link, relative to its page
    if "/" in cited:
        return root / cited if cited.split("/")[0] in top else None
    if re.fullmatch(r"[A-Z][A-Z0-9_]*\.md", cited):
        return root / cited
    return None


def _numbered_sections(doc: Path) -> dict[str, str]:
    """A document's numbered sections (``## 3. Title``): number -> the section's text."""
    parts = re.split(r"^## (\d+[a-z]?)\. ", doc.read_text(), flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def citation_problems(root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for path in _citing_files(root):
        if path.resolve() == Path(__file__).resolve():
            continue  # this test's own planted citations
        text = path.read_text(errors="replace")
        where = path.relative_to(root)
        for match in _DOC.finditer(text):
            cited = match.group(1)
            link = path.suffix == ".md" and text[: match.start()].endswith("](")
            target = _cited_path(root, path, cited, link)
            if target is not None and not target.exists():
                problems.append(f"{where}: cites {cited}, which the repository does not have")
        for match in _SECTION.finditer(text):
            cited, first, last, title = match.groups()
            target = _cited_path(root, path, cited, link=False)
            if target is None or not target.exists():
                continue
            sections = _numbered_sections(target)
            numbers = (
                [first] if last is None else [str(n) for n in range(int(first), int(last) + 1)]
            )
            for number in numbers:
                if number not in sections:
                    problems.append(f"{where}: cites {cited} section {number}, which it has not")
            if title is not None and first in sections:
                body = sections[first]
                if f"### {title}" not in body and f"**{title}**" not in body:
                    problems.append(f'{where}: cites {cited} {first}, "{title}": not there')
        for match in _TITLED.finditer(text):
            cited, title = match.groups()
            title = re.sub(r"\s*\n\s*#?\s*", " ", title)  # a title across comment lines
            target = _cited_path(root, path, cited, link=False)
            if target is None or not target.exists():
                continue
            part = (
                rf"^(?:#+ (?:\d+[a-z]?\. )?|\s*[-*] |\*\*){re.escape(title)}"  # heading, item, bold
            )
            if not re.search(part, target.read_text(), re.MULTILINE):
                problems.append(f'{where}: cites {cited}, "{title}": no such heading')
    return problems


def test_every_document_and_section_the_code_and_the_docs_cite_exists() -> None:
    assert citation_problems() == []


def test_the_citation_check_sees_a_missing_document_section_and_title(tmp_path: Path) -> None:
    """Planted files: a missing document, a section its document has not, a titled part
    its section has not are caught; another project's document and a good citation pass."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "voxproxy").mkdir()
    (tmp_path / "docs" / "protocols.md").write_text(
        "# P\n\n## 1. One\n\n### Audio formats\n\ntext\n\n## 2. Two\n\n**Bold part** here\n"
    )
    (tmp_path / "MEASUREMENT.md").write_text("# M\n\n## 1. Clocks\n")
    (tmp_path / "voxproxy" / "a.py").write_text(
        '"""See PROTOCOLS.md 0b, docs/protocols.md section 1, "Audio formats",\n'
        'docs/protocols.md sections 1-2, docs/protocols.md 2, "Bold part", MEASUREMENT.md 1,\n'
        'docs/protocols.md, "One", docs/protocols.md, "Three",\n'
        'MEASUREMENT.md 7, docs/protocols.md section 2, "Audio formats", and OpenTelemetry\'s\n'
        'semantic-conventions/docs/general/metrics.md, gen-ai-spans.md."""\n'
    )
    assert citation_problems(tmp_path) == [
        "voxproxy/a.py: cites PROTOCOLS.md, which the repository does not have",
        "voxproxy/a.py: cites MEASUREMENT.md section 7, which it has not",
        'voxproxy/a.py: cites docs/protocols.md 2, "Audio formats": not there',
        'voxproxy/a.py: cites docs/protocols.md, "Three": no such heading',
    ]


_DATE = re.compile(r"20\d\d-\d\d-\d\d")
_DATE_EXAMPLE = re.compile(r"e\.g\.|example|ISO|%Y|strftime|\"20\d\d-|``20\d\d-")


def dated_lines(root: Path = ROOT) -> list[str]:
    """Lines of the package that carry a date and are no example of a format: history and
    dated figures, which belong in docs/performance.md or CHANGELOG.md."""
    found = []
    for path in sorted((root / "voxproxy").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _DATE.search(line) and not _DATE_EXAMPLE.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_the_package_carries_no_dated_history(tmp_path: Path) -> None:
    assert dated_lines() == []
    (tmp_path / "voxproxy").mkdir()
    (tmp_path / "voxproxy" / "a.py").write_text(
        '"""1.36x (benchmarks/overhead.py, 2026-12-02).\nA time, e.g. 2026-12-01T12:00:00Z."""\n'
    )
    assert dated_lines(tmp_path) == [
        'voxproxy/a.py:1: """1.36x (benchmarks/overhead.py, 2026-12-02).'
    ]


# -- links to a section of a page ----------------------------------------------------------

_LINK = re.compile(r"\]\(((?:[\w./-]+\.md)?)#([\w-]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchor_problems(root: Path = ROOT) -> list[str]:
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    problems = []
    for page in pages:
        for target, anchor in _LINK.findall(page.read_text()):
            doc = (page.parent / target) if target else page
            if not doc.exists():
                continue  # a missing page is the citation test's
            headings = re.findall(r"^#+ (.+)$", doc.read_text(), flags=re.M)
            if anchor not in {_slug(h) for h in headings}:
                problems.append(f"{page.relative_to(root)}: #{anchor} is no heading of {target}")
    return problems


def test_every_link_to_a_section_finds_its_heading(tmp_path: Path) -> None:
    assert anchor_problems() == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## The event API: tool, state\n")
    (tmp_path / "README.md").write_text(
        "# A\n\n[x](docs/a.md#the-event-api-tool-state) [y](docs/a.md#gone) [z](#a)\n"
    )
    assert anchor_problems(tmp_path) == ["README.md: #gone is no heading of docs/a.md"]


# -- tests mirror the source (the layout block's tests/ line) ------------------------------
#
# voxproxy/a/b.py is tested in tests/a/test_b.py (a leading underscore dropped: _telco.py
# in test_telco.py); a package's __init__.py that holds logic in tests/<package>/
# test_<package>.py. An __init__.py that only re-exports, and __main__.py, need none.
# More files for one module are welcome (tests/a/test_b_<aspect>.py); this one must exist.

NO_LOGIC: dict[str, str] = {
    # Modules with nothing to run (checked: no function with a body), each with why.
    "core/errors.py": "the exception tree: four classes, each only a docstring",
    "core/events.py": "the measurement vocabulary: frozen dataclasses and enums, no method",
    "core/session/tap.py": "SessionTap, a Protocol: what a capture is told, no behaviour",
    "transports/webrtc/ends.py": "EndInfo, a dataclass of how a WebRTC call ended",
    "transports/websocket/observer.py": "RelayObserver, a Protocol, and its plain records",
}

NOT_YET: tuple[str, ...] = (
    # Modules with logic whose mirrored test file is not written yet (issue 39). They are
    # exercised through other tests (commands, proxies, scripted calls); the list only
    # shrinks: a module that gets its file must leave it (the test says so).
)


def has_logic(module: Path) -> bool:
    """Whether ``module`` defines a function or method with a body beyond a docstring,
    ``...`` or ``pass``."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = [
                b
                for b in node.body
                if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
                and not isinstance(b, ast.Pass)
            ]
            if body:
                return True
    return False


def mirrored_test(module: Path, root: Path = ROOT) -> Path | None:
    """Where ``module``'s tests live, or None when it needs none."""
    rel = module.relative_to(root / "voxproxy")
    if module.name == "__main__.py":
        return None
    if module.name == "__init__.py":
        if not has_logic(module) or rel.parent == Path("."):
            return None
        return root / "tests" / rel.parent / f"test_{rel.parent.name}.py"
    return root / "tests" / rel.parent / f"test_{module.stem.lstrip('_')}.py"


def without_mirrored_test(root: Path = ROOT) -> list[str]:
    """The modules of the package (relative to voxproxy/) whose mirrored test is missing."""
    missing = []
    for module in sorted((root / "voxproxy").rglob("*.py")):
        target = mirrored_test(module, root)
        if target is not None and not target.exists():
            missing.append(str(module.relative_to(root / "voxproxy")))
    return missing


def test_every_module_with_logic_has_its_mirrored_test_file() -> None:
    missing = set(without_mirrored_test())
    new = sorted(missing - NO_LOGIC.keys() - set(NOT_YET))
    assert new == [], "write tests/<package>/test_<module>.py for each (or say why not)"
    done = sorted((NO_LOGIC.keys() | set(NOT_YET)) - missing)
    assert done == [], "has its test file now (or is gone): take it off the list"


def test_the_modules_said_to_have_no_logic_have_none() -> None:
    package = ROOT / "voxproxy"
    assert [m for m in NO_LOGIC if has_logic(package / m)] == []
    assert all(why.strip() for why in NO_LOGIC.values())
    assert not set(NO_LOGIC) & set(NOT_YET)
    assert list(NOT_YET) == sorted(set(NOT_YET))


def test_the_mirror_check_sees_a_module_without_its_test(tmp_path: Path) -> None:
    """A planted tree: a module with logic and no test, a private module and a package's
    __init__ with logic tested under their names, a re-exporting __init__, __main__."""
    pkg, tests = tmp_path / "voxproxy", tmp_path / "tests"
    for folder in (pkg / "a" / "b", tests / "a" / "b"):
        folder.mkdir(parents=True)
    logic = "def f() -> int:\n    return 1\n"
    (pkg / "__init__.py").write_text(logic)  # the package itself: its tests are everywhere
    (pkg / "__main__.py").write_text(logic)
    (pkg / "a" / "__init__.py").write_text('"""A."""\nfrom voxproxy.a._x import f as f\n')
    (pkg / "a" / "_x.py").write_text(logic)
    (pkg / "a" / "y.py").write_text(logic)
    (pkg / "a" / "decl.py").write_text('class P:\n    def f(self) -> int:\n        """F."""\n')
    (pkg / "a" / "b" / "__init__.py").write_text(logic)
    (tests / "a" / "test_x.py").write_text("")
    (tests / "a" / "b" / "test_b.py").write_text("")
    assert without_mirrored_test(tmp_path) == ["a/decl.py", "a/y.py"]
    assert not has_logic(pkg / "a" / "decl.py") and has_logic(pkg / "a" / "y.py")
    (tests / "a" / "b" / "test_b.py").unlink()
    assert without_mirrored_test(tmp_path) == ["a/b/__init__.py", "a/decl.py", "a/y.py"]
