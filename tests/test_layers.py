"""Who may import whom: one table of the layers, and every module checked against it.

Each module of ``voxproxy`` belongs to one layer (:data:`LAYERS`: where the layer lives,
as dotted paths under ``voxproxy``; the longest path that holds a module names its
layer). From voxproxy a module may import its own layer, the layers its row of
:data:`MAY_IMPORT` names (a name also covers the layers under it: ``core`` is
``core.vocabulary`` and ``core.measurement``), and the single modules :data:`ALSO`
names. The table is ordered bottom up and a row names only layers below it (listed
before it), so no two layers can import each other, however indirectly.

The measurement core is held to more: from outside voxproxy it imports only what
:data:`CORE_MAY_USE` allows (an allow-list, each entry with its reason: anything new is
a decision written here), and it calls no clock, no file and no random number generator
(:data:`CORE_NEVER_CALLS`). Timestamps, bytes and secrets are handed in by the shells.

Every ``import`` counts, at any depth (a function-level import, or one under ``if
TYPE_CHECKING``, is still an import). Third-party libraries that only one folder may
import are in :data:`ONLY_IN`. A failure prints the table; docs/architecture.md draws
the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "voxproxy"

# The measurement core, sans-I/O, in one folder (voxproxy/core/). Its vocabulary is what a
# message is made of and the sample maths: the part of the core the forwarding plane
# shares. It measures nothing. (A module belongs to the layer of its longest path.)
CORE_VOCABULARY = tuple(
    f"core.{name}" for name in ("audio", "direction", "errors", "events", "ids", "timebase")
)
CORE_MEASUREMENT = ("core",)

# Layer -> where it lives (dotted paths under voxproxy; "" is the package's __init__).
LAYERS: dict[str, tuple[str, ...]] = {
    "core.vocabulary": CORE_VOCABULARY,
    "core.measurement": CORE_MEASUREMENT,
    "shared": ("", "clock", "extras", "fdwatch", "health", "httpserve", "native", "yamlmodel"),
    "transcripts": ("transcripts",),
    "receipts": ("receipts",),
    "telemetry": ("telemetry",),
    "transports": ("transports",),
    "simcall": ("simcall",),
    "clips": ("clips",),
    "loadgen": ("loadgen",),
    "mockagent": ("mockagent",),
    "recordings": ("recordings",),
    "captures": ("captures",),
    "proxy": ("proxy",),
    "harness": ("harness",),
    "cli": ("cli", "commands"),
}
_BELOW_THE_HARNESS = tuple(layer for layer in LAYERS if layer not in ("harness", "cli"))

# Layer -> the other layers it may import (its own always).
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "core.vocabulary": (),
    "core.measurement": ("core.vocabulary",),
    "shared": ("core",),
    "transcripts": ("core", "shared"),
    "receipts": ("core", "shared"),
    "telemetry": ("core", "shared", "receipts"),
    # The forwarding plane never measures: messages, samples and times only.
    "transports": ("core.vocabulary", "shared"),
    "simcall": ("core",),
    "clips": ("core",),
    # A scripted caller and the mock agent are independent peers: neither imports the other.
    "loadgen": ("core", "shared", "transcripts", "receipts", "transports", "simcall", "clips"),
    "mockagent": ("core", "shared", "transports", "simcall", "clips"),
    "recordings": ("core", "shared", "receipts", "telemetry", "clips"),
    "captures": ("core", "shared", "receipts"),
    "proxy": ("core", "shared", "receipts", "telemetry", "transports", "captures"),
    "harness": _BELOW_THE_HARNESS,
    "cli": (*_BELOW_THE_HARNESS, "harness"),
}
# Layer -> single modules of another layer it may import, and nothing else of that layer.
ALSO: dict[str, tuple[str, ...]] = {
    "recordings": ("loadgen.report",),  # the report page's style and charts
    "captures": ("recordings.batch",),  # where the capture reader registers
}

# What the core may import from outside voxproxy, and why.
CORE_MAY_USE: dict[str, str] = {
    "__future__": "annotations",
    "typing": "types",
    "dataclasses": "records",
    "enum": "vocabularies",
    "collections": "deques, counters, abstract types",
    "functools": "cached tables",
    "contextlib": "suppress",
    "math": "maths",
    "bisect": "sorted timelines",
    "heapq": "merging events in time order",
    "statistics": "medians",
    "re": "the name rule of pseudonymous ids",
    "hashlib": "keyed hashes (the key is handed in)",
    "hmac": "keyed hashes (the key is handed in)",
    "binascii": "base64 of media payloads",
    "json": "the wire builders' exact JSON text",
    "datetime": "a handed-in clock anchor as ISO text, and back (never now())",
    "audioop": "G.711 in C (standard library to 3.12, audioop-lts after)",
    "warnings": "importing audioop quietly (deprecated in 3.11-3.12)",
    "numpy": "samples",
    "scipy.signal": "filters for whole recordings (deferred, off the per-message path)",
    "webrtcvad": "the frame VAD",
    "_webrtcvad": "webrtcvad's C extension, called directly on the hot path",
    "orjson": "JSON wire messages",
    "pydantic": "the receipt document",
}
# Inside what the core may use: what it never touches.
CORE_NEVER_USES = ("numpy.random",)
# Calls the core never makes: files, the terminal, code from text, the clock.
CORE_NEVER_CALLS = frozenset(
    {"open", "print", "input", "breakpoint", "exec", "eval", "compile", "__import__"}
)
CORE_NEVER_METHODS = frozenset({"now", "utcnow", "today"})  # datetime's clock readings

# Third-party libraries only one place may import.
ONLY_IN = {"opentelemetry": "telemetry", "aiortc": "transports.webrtc", "aioice": "transports"}
# What the package never imports: the tests' and the benchmarks' own helpers.
NEVER = ("support", "tests", "benchmarks", "conftest")
# Where what ships is run from: the command line (it loads every module of commands/).
ENTRY_POINTS = ("cli", "commands")


def _in(name: str, path: str) -> bool:
    """Whether module ``name`` lies at ``path`` ("" is only the package itself)."""
    if path == "":
        return name == ""
    return name == path or name.startswith(path + ".")


def layer_of(name: str) -> str | None:
    best: tuple[int, str] | None = None
    for layer, paths in LAYERS.items():
        for path in paths:
            if _in(name, path) and (best is None or len(path) > best[0]):
                best = (len(path), layer)
    return None if best is None else best[1]


def _covers(allowed: str, layer: str) -> bool:
    return layer == allowed or layer.startswith(allowed + ".")


def _is_core(layer: str | None) -> bool:
    return layer is not None and _covers("core", layer)


def _name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every import in the file, relative ones resolved; a
    ``from a import b`` gives ``a.b`` (a module, or a name in one)."""
    tree = ast.parse(path.read_text(), str(path))
    package = _name(path, root).split(".")
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
            out += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return out


def _inner(dotted: str, root: Path) -> str:
    """The voxproxy module ``dotted`` (``voxproxy.x.y[.name]``) imports, less the
    ``voxproxy.`` prefix: the longest prefix of it that is a module or package."""
    parts = dotted.split(".")[1:]
    while parts:
        candidate = root.joinpath(*parts)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return ""


def _core_may_use(dotted: str, module: str) -> bool:
    """``dotted`` is what is imported (``a.b`` of ``from a import b``), ``module`` the
    module named in the statement."""
    if any(_in(dotted, never) for never in CORE_NEVER_USES):
        return False
    return any(_in(dotted, ok) or _in(module, ok) for ok in CORE_MAY_USE)


def _core_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in CORE_NEVER_CALLS:
                found.append((node.lineno, f"calls {f.id}()"))
            elif isinstance(f, ast.Attribute) and f.attr in CORE_NEVER_METHODS:
                found.append((node.lineno, f"calls .{f.attr}()"))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "random"
            and isinstance(node.value, ast.Name)
            and node.value.id in ("np", "numpy")
        ):
            found.append((node.lineno, "uses numpy.random"))
    return found


def violations(path: Path, root: Path = ROOT) -> list[str]:
    name = _name(path, root)
    rel = f"voxproxy/{path.relative_to(root)}"
    layer = layer_of(name)
    if layer is None:
        return [f"{rel}: in no layer of the table (add it to LAYERS)"]
    found: list[str] = []
    for line, dotted in _imports(path, root):
        top = dotted.split(".")[0]
        where = f"{rel}:{line} imports {dotted}"
        if top == "voxproxy":
            target = _inner(dotted, root)
            other = layer_of(target)
            if other is None or other == layer:
                continue
            allowed = any(_covers(a, other) for a in MAY_IMPORT[layer])
            allowed = allowed or any(_in(target, m) for m in ALSO.get(layer, ()))
            if not allowed:
                found.append(f"{where}: {layer} may not import {other}")
            continue
        module = dotted.rpartition(".")[0] if "." in dotted else dotted
        if _is_core(layer) and not _core_may_use(dotted, module):
            found.append(f"{where}: not in the core's allow-list")
        only = ONLY_IN.get(top)
        if only is not None and not _in(name, only):
            found.append(f"{where}: only {only} imports {top}")
        if top in NEVER:
            found.append(f"{where}: the package ships without the tests' helpers")
    if _is_core(layer):
        tree = ast.parse(path.read_text(), str(path))
        found += [
            f"{rel}:{line} {what}: the core is handed them" for line, what in _core_calls(tree)
        ]
    return found


def table() -> str:
    """The rules, as a failure prints them."""
    rows = [("layer", "where (under voxproxy/)", "may import (besides itself)")]
    order = list(LAYERS)
    for layer, paths in LAYERS.items():
        where = ", ".join(p or "__init__" for p in paths)
        named = MAY_IMPORT[layer]
        if len(named) > 1 and set(named) == set(order[: order.index(layer)]):
            named = ("every layer below",)
        may = ", ".join([*named, *(f"{m} (only)" for m in ALSO.get(layer, ()))])
        rows.append((layer, where, may or "-"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    lines.append("core (both parts), from outside voxproxy, only: " + ", ".join(CORE_MAY_USE))
    return "\n".join(lines)


MODULES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_keep_to_the_layers(path: Path) -> None:
    found = violations(path)
    assert not found, "\n".join([*found, "", "The layers, bottom up:", table()])


def test_the_table_is_layered() -> None:
    """Every layer lives somewhere, and each row names only layers below it (listed
    before it), so no two layers may import each other."""
    assert MAY_IMPORT.keys() == LAYERS.keys()
    order = list(LAYERS)
    names = [_name(p, ROOT) for p in MODULES]
    for layer, paths in LAYERS.items():
        for path in paths:
            assert any(_in(n, path) for n in names), f"{layer}: nothing at {path!r}"
        below = order[: order.index(layer)]
        for allowed in MAY_IMPORT[layer]:
            assert any(_covers(allowed, b) for b in below), f"{layer} -> {allowed}\n{table()}"
        for module in ALSO.get(layer, ()):
            assert layer_of(module) in below, f"{layer} -> {module}\n{table()}"


def unshipped(root: Path = ROOT) -> list[str]:
    """The modules no command runs: none of :data:`ENTRY_POINTS` imports them, however
    indirectly (importing ``a.b.c`` runs ``a`` and ``a.b`` too)."""
    paths = {_name(p, root): p for p in sorted(root.rglob("*.py"))}
    todo = [n for n in paths if any(_in(n, e) for e in ENTRY_POINTS)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in paths:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(len(parts))]
        todo += [
            _inner(d, root) for _, d in _imports(paths[name], root) if d.startswith("voxproxy.")
        ]
    return sorted(n for n in paths if n not in seen)


def test_what_ships_runs_under_a_command() -> None:
    """Test support is not product: a module that only tests or benchmarks use lives in
    tests/support/ or benchmarks/, not in the package."""
    assert unshipped() == []


def test_every_folder_says_what_it_may_import() -> None:
    for init in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, f"{init.relative_to(ROOT)}: no import rule in its docstring"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """Planted files: a core module that draws a secret, opens a WAV file or reads the
    clock; a load generator that imports the mock agent; a transport that imports the
    session; a recording that imports the load generator's runner; a module in no layer."""
    plant = {
        "core/ids.py": "import secrets\n",
        "core/audio/pcm.py": "def f(p):\n    import wave\n    return wave.open(p)\n",
        "core/turns.py": "from datetime import datetime\n\ndef f():\n    return datetime.today()\n",
        "core/analysis/x.py": "import numpy as np\n\nR = np.random.default_rng()\n",
        "core/dialects/y.py": "def f(p):\n    return open(p).read()\n",
        "core/session/z.py": "from numpy import random\n",
        "loadgen/x.py": "from voxproxy.mockagent import MockAgent\n",
        "loadgen/report.py": "",
        "loadgen/runner.py": "",
        "mockagent/__init__.py": "",
        "core/__init__.py": "",
        "core/session/__init__.py": "",
        "transports/x.py": (
            "from voxproxy.core.events import Audio\nfrom voxproxy.core.session import S\n"
        ),
        "core/events.py": "",
        "recordings/x.py": "from voxproxy.loadgen import report, runner\n",
        "stray.py": "",
        "clips.py": "from support.scripted import render\n",
        "cli.py": "from voxproxy import clips\n",
        "commands/__init__.py": "from voxproxy.loadgen import report\n",
    }
    for rel, text in plant.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {rel: violations(tmp_path / rel, tmp_path) for rel in plant}
    # What each planted file breaks, said after its path.
    broken = {
        "core/ids.py": ":1 imports secrets: not in the core's allow-list",
        "core/audio/pcm.py": ":2 imports wave: not in the core's allow-list",
        "core/turns.py": ":4 calls .today(): the core is handed them",
        "core/analysis/x.py": ":3 uses numpy.random: the core is handed them",
        "core/dialects/y.py": ":2 calls open(): the core is handed them",
        "core/session/z.py": ":1 imports numpy.random: not in the core's allow-list",
        "loadgen/x.py": ":1 imports voxproxy.mockagent.MockAgent: loadgen may not import mockagent",
        "transports/x.py": (
            ":2 imports voxproxy.core.session.S: transports may not import core.measurement"
        ),
        "recordings/x.py": ":1 imports voxproxy.loadgen.runner: recordings may not import loadgen",
        "stray.py": ": in no layer of the table (add it to LAYERS)",
        "clips.py": (
            ":1 imports support.scripted.render: the package ships without the tests' helpers"
        ),
    }
    for rel, why in broken.items():
        assert found[rel] == [f"voxproxy/{rel}{why}"], rel
    # cli -> clips, commands -> loadgen.report (and loadgen): the rest ships unused.
    assert "loadgen.runner" in unshipped(tmp_path) and "clips" not in unshipped(tmp_path)
    assert "loadgen.report" not in unshipped(tmp_path)
