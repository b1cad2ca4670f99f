"""Compile the measurement core with mypyc (``make native``); see voxproxy/native.py.

Builds :data:`voxproxy.native.NATIVE_MODULES` as one mypyc group into extension modules
beside their sources (``build_ext --inplace --force``; C sources and objects under
build/native, made afresh each time).
``--clean`` removes them again (the sources then run as they are). A machine without a
C compiler or Python's headers keeps the pure-Python build: the failure is printed and
the exit status is 0 unless ``--strict`` is given.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from voxproxy import native  # noqa: E402

PACKAGE = ROOT / "voxproxy"


def clean() -> list[Path]:
    """Remove every compiled module of this checkout's package (also of modules no longer
    listed), never another checkout's."""
    removed = []
    for path in native.compiled_files(PACKAGE):
        path.unlink()
        removed.append(path)
    shutil.rmtree(ROOT / "build" / "native", ignore_errors=True)
    return removed


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    paths = [str(native.source_path(m).relative_to(ROOT)) for m in native.NATIVE_MODULES]
    # mypyc type-checks afresh each time and needs no cache: writing none leaves
    # .mypy_cache to `mypy --strict`, which make test runs beside this build.
    args = ["--cache-dir=/dev/null", *paths]
    setup(
        name="voxproxy-native",
        ext_modules=mypycify(
            args, group_name=native.GROUP_NAME, opt_level="3", target_dir="build/native/c"
        ),
        script_args=[
            *("--quiet", "build_ext", "--inplace", "--force"),
            *("--build-temp", "build/native/tmp", "--build-lib", "build/native/lib"),
        ],
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clean", action="store_true", help="remove the compiled modules")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the build fails")
    args = ap.parse_args()
    os.chdir(ROOT)
    imported = Path(native.__file__).resolve().parent
    if imported != PACKAGE.resolve():
        # (A worktree sharing another checkout's environment, whose editable install
        # maps the package there: its NATIVE_MODULES may not be this checkout's.)
        print(
            f"voxproxy is imported from {imported}, not {PACKAGE}: run this checkout's "
            "build with its own package first on the path (PYTHONPATH)",
            file=sys.stderr,
        )
        return 1
    removed = clean()
    if args.clean:
        print(f"removed {len(removed)} compiled module(s): the measurement core runs from source")
        return 0
    t0 = time.monotonic()
    try:
        build()
    except (Exception, SystemExit) as exc:  # setuptools reports a failed compile by exiting
        clean()
        print(
            f"native build failed ({exc}): the measurement core stays pure Python", file=sys.stderr
        )
        return 1 if args.strict else 0
    built = [m for m in native.NATIVE_MODULES if native.compiled_path(m) is not None]
    print(
        f"compiled {len(built)} of {len(native.NATIVE_MODULES)} modules with mypyc "
        f"in {time.monotonic() - t0:.0f} s (VOXPROXY_PURE_PYTHON=1 runs the sources)"
    )
    return 0 if len(built) == len(native.NATIVE_MODULES) or not args.strict else 1


if __name__ == "__main__":
    raise SystemExit(main())
