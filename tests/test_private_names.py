"""No module of the package takes another module's private name.

A name with a leading underscore is its module's own: another module that needs it
means the name is shared, so it is public (or the thing lives in the wrong module). A
private module (``dialects/_telco.py``) is its package's own: only that package imports
it. Read from the source with ``ast``; tests may reach into privates, the package may not.
An alias (``import native as _native``) names nothing private of another module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def violations(root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for path in sorted((root / "voxproxy").rglob("*.py")):
        name = _module(path, root)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        where = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*above, *([base] if base else [])])
                if base.split(".")[0] != "voxproxy":
                    continue
                targets = [(base, f"{base}.{a.name}", a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [
                    (a.name, a.name, "") for a in node.names if a.name.startswith("voxproxy.")
                ]
            else:
                continue
            for module, full, imported in targets:
                if _private(imported) and not (root / (full.replace(".", "/") + ".py")).exists():
                    found.append(f"{where}:{node.lineno}: {imported} is private to {module}")
                    continue
                dotted = full.split(".")
                for i, part in enumerate(dotted):
                    owner = ".".join(dotted[:i])
                    if _private(part) and not (name == owner or name.startswith(owner + ".")):
                        found.append(
                            f"{where}:{node.lineno}: {'.'.join(dotted[: i + 1])} is private "
                            f"to {owner}"
                        )
                        break
    return found


def test_no_module_imports_another_module_s_private_name() -> None:
    assert violations() == []


def test_the_checker_sees_private_names_and_private_modules(tmp_path: Path) -> None:
    """Planted files: a private function, a private class by a relative import, and a
    private module from outside its package are caught; a private module inside its own
    package, a dunder and an alias are not."""
    pkg = tmp_path / "voxproxy"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "_inner.py").write_text("X = 1\n")
    (pkg / "a" / "b.py").write_text(
        "from voxproxy.a._inner import X\nfrom voxproxy import __version__\n"
        "from voxproxy import native as _native\ndef _f(): ...\nclass _C: ...\n"
    )
    (pkg / "c.py").write_text(
        "from voxproxy.a.b import _f\nfrom .a.b import _C\nfrom voxproxy.a._inner import X\n"
        "import voxproxy.a._inner\n"
    )
    assert violations(tmp_path) == [
        "voxproxy/c.py:1: _f is private to voxproxy.a.b",
        "voxproxy/c.py:2: _C is private to voxproxy.a.b",
        "voxproxy/c.py:3: voxproxy.a._inner is private to voxproxy.a",
        "voxproxy/c.py:4: voxproxy.a._inner is private to voxproxy.a",
    ]
