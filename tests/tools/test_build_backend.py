"""The build backend asks, for a compiled wheel, for everything mypyc's type check reads.

An isolated build (what pip, ``python -m build`` and cibuildwheel do for a user) has only
what the backend asks for: a stub package the development environment's mypy reads and
the build does not ask for stops the compile (2026-12-05: ``yaml``'s stubs, reached from
the compiled modules through the receipts' policy, and ``make wheels`` failed while the
suite, which builds without isolation in the development venv, passed).
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.chdir(ROOT)  # the backend reads pyproject.toml from the build's directory
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    monkeypatch.delenv("VOXPROXY_PURE_PYTHON", raising=False)
    import build_backend

    yield build_backend
    sys.modules.pop("build_backend", None)


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_a_compiled_build_asks_for_the_stubs_the_development_mypy_reads(
    backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    stubs = {r for r in _names(project["optional-dependencies"]["dev"]) if r.startswith("types-")}
    assert stubs  # types-pyyaml today
    compiled = _names(backend.get_requires_for_build_wheel())  # type: ignore[attr-defined]
    assert stubs <= compiled
    assert {"mypy", "numpy", "pydantic", "aiortc"} <= compiled
    monkeypatch.setenv("VOXPROXY_PURE_PYTHON", "1")
    pure = _names(backend.get_requires_for_build_wheel())  # type: ignore[attr-defined]
    assert not (stubs | {"mypy"}) & pure
