"""No module of the package imports, through any chain of imports, a module that imports it.

The graph is read from the source with ``ast``: every ``import`` counts, at any depth
(function-level, and under ``if TYPE_CHECKING``: a cycle closed only for the type checker
still ties two modules into one). ``from voxproxy.x import y`` is an edge to the module
``voxproxy.x.y`` when there is one, else to ``voxproxy.x``. A package's submodules are not
taken to import the package itself (Python runs the ``__init__`` first, which is no
design dependency), unless they name it. ``importlib.import_module("voxproxy.x")`` is an
import too, and ``importlib.import_module(f"voxproxy.x.{name}")`` one of every module of
``voxproxy.x`` (the CLI loads its subcommands so).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "voxproxy"

Graph = dict[str, dict[str, int]]  # module -> {imported module: line}


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root / PACKAGE``, by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: Iterable[str]) -> str | None:
    """``name``, or the nearest package above it, that is a module of the package."""
    names = set(known)
    while name and name not in names:
        name = name.rpartition(".")[0]
    return name or None


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )


def _dynamic_targets(arg: ast.expr, mods: dict[str, Path]) -> list[str]:
    """What ``import_module(arg)`` may import: the module a constant names, or every
    module under the package an f-string's leading text names."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            prefix = head.value
            return [m for m in mods if m.startswith(prefix) and m != prefix.rstrip(".")]
    return []


def import_graph(root: Path = ROOT) -> Graph:
    mods = modules(root)
    graph: Graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*above, *([base] if base else [])])
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
                targets = _dynamic_targets(node.args[0], mods)
            for target in targets:
                if target.split(".")[0] != PACKAGE:
                    continue
                module = _known(target, mods)
                if module is not None and module != name:
                    edges.setdefault(module, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def describe(graph: Graph, groups: list[list[str]], root: Path = ROOT) -> str:
    """Each group and the imports inside it, with their files and lines."""
    paths = modules(root)
    lines = [f"{len(groups)} import cycle(s)"]
    for group in groups:
        lines.append(f"- {len(group)} modules: {', '.join(group)}")
        inside = set(group)
        for a in group:
            for b, line in sorted(graph[a].items()):
                if b in inside:
                    where = paths[a].relative_to(root)
                    lines.append(f"    {a} -> {b}  ({where}:{line})")
    return "\n".join(lines)


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    groups = cycles(graph)
    print(describe(graph, groups))
    assert groups == [], describe(graph, groups)


def test_the_checker_finds_a_cycle_closed_only_for_the_type_checker(tmp_path: Path) -> None:
    """Planted files: a -> b at the top, b -> a under TYPE_CHECKING, inside a function;
    c imports the package a and b live in, which is no cycle of theirs."""
    pkg = tmp_path / PACKAGE / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from voxproxy.sub.a import A\n")
    (pkg / "a.py").write_text("from voxproxy.sub import b\nA = 1\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "def f() -> None:\n"
        "    if TYPE_CHECKING:\n"
        "        from .a import A\n"
    )
    (tmp_path / PACKAGE / "c.py").write_text("import voxproxy.sub\n")
    (tmp_path / PACKAGE / "d.py").write_text(
        "import importlib\ndef f(n: str) -> None:\n"
        "    importlib.import_module(f'voxproxy.sub.{n}')\n"
    )
    graph = import_graph(tmp_path)
    assert graph["voxproxy.d"] == {"voxproxy.sub.a": 3, "voxproxy.sub.b": 3}
    assert graph["voxproxy.sub.b"] == {"voxproxy.sub.a": 4}
    assert cycles(graph) == [["voxproxy.sub.a", "voxproxy.sub.b"]]
    assert "voxproxy.sub.b -> voxproxy.sub.a  (voxproxy/sub/b.py:4)" in describe(
        graph, cycles(graph), tmp_path
    )
