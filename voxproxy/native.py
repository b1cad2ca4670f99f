"""The compiled build of the measurement core, and its pure-Python fallback.

The modules in :data:`NATIVE_MODULES` (the per-message path of measurement: the
speech detector, the playout timeline, the session, the levels) are plain
``mypy --strict`` Python. ``make native`` (``tools/build_native.py``) compiles them with
mypyc into extension modules beside their sources (``vad.cpython-311-*.so`` next to
``vad.py``), which Python then imports first. The sources stay the reference: the
compiled build gives byte-identical receipts (``benchmarks/measurement.py``'s
``receipts_sha256``) and passes the same tests.

* ``VOXPROXY_PURE_PYTHON=1`` imports the sources even where compiled modules exist (a
  finder placed first on ``sys.meta_path`` by :func:`install`, which the package's
  ``__init__`` calls before anything else is imported).
* :func:`build` says which build runs (the proxy logs it at start; the benchmarks
  print it next to their figures).
* :func:`stale` lists compiled modules older than their source (an edit since the last
  ``make native``): the test suite refuses to run on them, and the proxy warns.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PURE_ENV = "VOXPROXY_PURE_PYTHON"

# Compiled together (one mypyc group, its shared library voxproxy/_native__mypyc.*.so).
# Of the dialects only the Twilio decoder (twilio_decoder.py, a module of its own): every
# message of a Twilio call passes through it. The wire modules stay interpreted: their
# message builders are subclassed by users and tests, which a compiled class forbids.
# The proxy's measurement queue (proxy/measuring.py) is compiled too, though it is no
# core module: every message passes through it. (What each gained: docs/performance.md,
# "The compiled build".)
NATIVE_MODULES: tuple[str, ...] = (
    "voxproxy.core.analysis.timeline",
    "voxproxy.core.analysis.edges",
    "voxproxy.core.analysis.audible",
    "voxproxy.core.analysis.floor",
    "voxproxy.core.analysis.closing",
    "voxproxy.core.analysis.energies",
    "voxproxy.core.analysis.vad",
    "voxproxy.core.analysis.together",
    "voxproxy.core.analysis.voicing",
    "voxproxy.core.analysis.vadconfig",
    "voxproxy.core.analysis.playout",
    "voxproxy.core.dialects.twilio_decoder",
    "voxproxy.core.session.call",
    "voxproxy.core.session.batch",
    "voxproxy.core.session.pumps",
    "voxproxy.core.session.hearing",
    "voxproxy.core.session.intake",
    "voxproxy.proxy.measuring",
    "voxproxy.core.session.ordering",
    "voxproxy.core.session.marks",
    "voxproxy.core.session.evidence",
    "voxproxy.core.audio.levels",
    "voxproxy.core.audio.g711",
    "voxproxy.core.audio.event",
)
GROUP_NAME = "voxproxy._native"  # the shared library's module name (+ "__mypyc")

_ROOT = Path(__file__).resolve().parent


def pure_python_requested() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def source_path(module: str, package_dir: Path = _ROOT) -> Path:
    """The ``.py`` file of one of :data:`NATIVE_MODULES` (in the package at ``package_dir``)."""
    return package_dir.joinpath(*module.split(".")[1:]).with_suffix(".py")


def compiled_path(module: str, package_dir: Path = _ROOT) -> Path | None:
    """The compiled extension of ``module`` beside its source, if one was built."""
    src = source_path(module, package_dir)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = src.with_name(src.stem + suffix)
        if candidate.exists():
            return candidate
    return None


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the native modules' ``.py`` sources before their compiled extensions."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if fullname not in NATIVE_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


def install() -> None:
    """With ``VOXPROXY_PURE_PYTHON`` set, make the sources win over compiled modules."""
    if pure_python_requested() and not any(isinstance(f, _SourcesFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourcesFirst())


def build() -> str:
    """``"mypyc"`` when the measurement core runs compiled, ``"pure-python"`` when it runs
    from its sources (or ``"mixed"``: some modules of each, a broken build)."""
    kinds = set()
    compiled = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for name in NATIVE_MODULES:
        module = sys.modules.get(name) or importlib.import_module(name)
        origin = getattr(module, "__file__", "") or ""
        kinds.add("mypyc" if origin.endswith(compiled) else "py")
    if kinds == {"mypyc"}:
        return "mypyc"
    return "pure-python" if kinds == {"py"} else "mixed"


def compiled_files(package_dir: Path = _ROOT) -> list[Path]:
    """Every compiled module in the package: the modules' builds, their shared library,
    and any left from a module no longer in :data:`NATIVE_MODULES`."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    out: list[Path] = []
    # os.walk follows no symbolic link (the package's _fixtures is one, to fixtures/).
    for folder, _, files in os.walk(package_dir):
        out.extend(Path(folder, f) for f in files if f.endswith(suffixes))
    return sorted(out)


def installed_from_wheel(package_dir: Path = _ROOT) -> bool:
    """Whether an installer unpacked the package at ``package_dir`` from a wheel (its
    ``voxproxy-*.dist-info`` lies beside it; an editable install's lies elsewhere)."""
    return any(package_dir.parent.glob("voxproxy-*.dist-info"))


def stale(package_dir: Path = _ROOT) -> list[str]:
    """Compiled modules older than their source, or left from a module no longer compiled
    (rebuild with ``make native``). None in an installed wheel: its files were built
    together, and their times are the order the installer wrote them in, not edits."""
    if installed_from_wheel(package_dir):
        return []
    out = []
    for name in NATIVE_MODULES:
        so = compiled_path(name, package_dir)
        src = source_path(name, package_dir)
        if so is not None and src.stat().st_mtime > so.stat().st_mtime:
            out.append(name)
    group = GROUP_NAME.rsplit(".", 1)[1] + "__mypyc"
    for path in compiled_files(package_dir):
        parts = path.relative_to(package_dir).parts
        module = ".".join(["voxproxy", *parts[:-1], path.name.split(".")[0]])
        if module not in NATIVE_MODULES and path.name.split(".")[0] != group:
            out.append(module)
    return out


def stale_warning(package_dir: Path = _ROOT) -> str | None:
    """What to say when compiled modules older than their source would run (``None``:
    nothing is stale, or the sources run anyway)."""
    old = stale(package_dir)
    if not old or pure_python_requested():
        return None
    return (
        f"compiled modules older than their source: {', '.join(old)} "
        "(rebuild with `make native`, or remove them with `make clean-native`)"
    )
