"""The import rules each folder's ``__init__`` docstring states, checked on the source.

Every ``import`` in every module counts, at any depth (a function-level import is still
an import). See docs/architecture.md for the layers these rules keep apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "voxproxy"

# The measurement core (sans-I/O): no clock, no sockets, no threads, no randomness.
CORE = (
    "analysis",
    "audio",
    "dialects",
    "direction",
    "effects",
    "errors",
    "events",
    "ids",
    "receipts.model",
    "session",
    "timebase",
    "turns",
)
CORE_MAY_NOT = (
    "asyncio",
    "socket",
    "time",
    "os",
    "random",
    "threading",
    "subprocess",
    "sqlite3",
    "websockets",
    "aiortc",
    "aioice",
    "av",
    "aiohttp",
    "opentelemetry",
)
# voxproxy modules each layer may not import (prefixes of dotted names).
MAY_NOT: dict[str, tuple[str, ...]] = {
    "transports": (
        "proxy",
        "session",
        "receipts",
        "telemetry",
        "loadgen",
        "mockagent",
        "harness",
        "cli",
        "commands",
    ),
    "simcall": ("loadgen", "mockagent", "harness", "transports", "proxy", "cli", "commands"),
    "loadgen": ("mockagent", "harness", "proxy", "cli", "commands"),
    "mockagent": ("loadgen", "harness", "proxy", "cli", "commands"),
    "telemetry": ("proxy", "transports", "loadgen", "mockagent", "harness", "cli"),
    "captures": (
        "proxy",
        "transports",
        "loadgen",
        "mockagent",
        "harness",
        "cli",
        "commands",
    ),
    "receipts": (
        "proxy",
        "transports",
        "telemetry",
        "loadgen",
        "mockagent",
        "scripted",
        "harness",
    ),
}
# Third-party libraries only one folder may import.
ONLY_IN = {"opentelemetry": "telemetry", "aiortc": "transports.webrtc", "aioice": "transports"}


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = _name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(["voxproxy", *base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.append((node.lineno, module))
    return out


MODULES = sorted(ROOT.rglob("*.py"))


def _in(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


def _violations(path: Path) -> list[str]:
    name = _name(path)
    found: list[str] = []
    for line, module in _imports(path):
        top = module.split(".")[0]
        inner = module.removeprefix("voxproxy.") if top == "voxproxy" else None
        where = f"voxproxy/{path.relative_to(ROOT)}:{line} imports {module}"
        if any(_in(name, c) for c in CORE):
            if top in CORE_MAY_NOT:
                found.append(f"{where}: the core does no I/O")
            if inner is not None and not any(_in(inner, c) for c in CORE):
                found.append(f"{where}: the core imports only the core")
        for layer, banned in MAY_NOT.items():
            if _in(name, layer) and inner is not None and any(_in(inner, b) for b in banned):
                found.append(f"{where}: {layer} sits below it")
        only = ONLY_IN.get(top)
        if only is not None and not _in(name, only):
            found.append(f"{where}: only {only} imports {top}")
        if (
            inner is not None
            and _in(inner, "harness")
            and not (_in(name, "harness") or _in(name, "commands") or name == "cli")
        ):
            found.append(f"{where}: nothing below the harness imports it")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_keep_to_the_layers(path: Path) -> None:
    assert _violations(path) == []


def test_every_folder_says_what_it_may_import() -> None:
    for init in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, f"{init.relative_to(ROOT)}: no import rule in its docstring"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The rules would catch a core module that read the clock, or a load generator that
    imported the mock agent (the checker is run on planted files)."""
    global ROOT
    saved = ROOT
    ROOT = tmp_path
    try:
        (tmp_path / "turns.py").write_text("def f():\n    import time\n")
        (tmp_path / "loadgen").mkdir()
        (tmp_path / "loadgen" / "x.py").write_text("from voxproxy.mockagent import MockAgent\n")
        assert _violations(tmp_path / "turns.py") == [
            "voxproxy/turns.py:2 imports time: the core does no I/O"
        ]
        assert _violations(tmp_path / "loadgen" / "x.py") == [
            "voxproxy/loadgen/x.py:1 imports voxproxy.mockagent: loadgen sits below it"
        ]
    finally:
        ROOT = saved
