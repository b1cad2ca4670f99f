"""The build's one step beyond pyproject.toml: the measurement core compiled with mypyc.

A wheel built here carries :data:`voxproxy.native.NATIVE_MODULES` (read from
voxproxy/native.py, the one list) as extension modules, the same as ``make native``
builds in place, so what ``pip install`` gives is the build every figure was measured
on. It is the pure-Python wheel (``py3-none-any``, the sources only) when

* ``VOXPROXY_PURE_PYTHON=1`` is set while building (``make wheels`` builds both),
* the install is editable (``pip install -e``: a checkout compiles in place with
  ``make native``), or
* mypyc, a C compiler or Python's headers are missing (the in-tree backend,
  tools/build_backend.py, also retries pure when the compile itself fails),

unless ``VOXPROXY_REQUIRE_NATIVE=1``, which turns the fallback into an error (the
release and the Docker image must not ship the sources by accident).
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import setup

ROOT = Path(__file__).resolve().parent
PURE_ENV = "VOXPROXY_PURE_PYTHON"
REQUIRE_ENV = "VOXPROXY_REQUIRE_NATIVE"
# The setup.py commands that build a wheel's contents (the backend runs bdist_wheel).
_BUILDS = {"bdist_wheel", "build", "build_ext", "install"}


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _missing_toolchain() -> str | None:
    """Why this machine cannot compile the core (``None``: it can)."""
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", cc).split()[0]) is None:
        return f"no C compiler ({cc})"
    if not Path(sysconfig.get_paths()["include"], "Python.h").exists():
        return "Python's headers (Python.h) are missing"
    return None


def ext_modules() -> list[Any]:
    if not _BUILDS.intersection(sys.argv[1:]):
        # Metadata, an sdist (which carries the sources, never generated C) or an
        # editable install (in a checkout, `make native` compiles in place and the test
        # suite refuses compiled modules older than their source).
        return []
    if _flag(PURE_ENV):
        print(f"{PURE_ENV} is set: building the pure-Python wheel", file=sys.stderr)
        return []
    why = _missing_toolchain()
    if why is not None:
        if _flag(REQUIRE_ENV):
            raise SystemExit(f"{REQUIRE_ENV} is set but the core cannot be compiled: {why}")
        print(f"{why}: building the pure-Python wheel", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    # The list, not the package: importing voxproxy would import its dependencies.
    native = runpy.run_path(str(ROOT / "voxproxy" / "native.py"))
    paths = [
        str(native["source_path"](m, ROOT / "voxproxy").relative_to(ROOT))
        for m in native["NATIVE_MODULES"]
    ]
    print(f"compiling {len(paths)} modules with mypyc", file=sys.stderr)
    built: list[Any] = mypycify(
        paths, group_name=native["GROUP_NAME"], opt_level="3", target_dir="build/mypyc"
    )
    return built


# (mypyc reads pyproject.toml's [tool.mypy] from the working directory: the build runs in
# the source tree.)
setup(ext_modules=ext_modules())
