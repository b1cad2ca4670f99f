"""Install each built wheel into a fresh virtualenv and check which build it runs
(``make release-dry-run``, after ``make wheels``).

A wheel tagged for an interpreter and platform (``cp311-cp311-manylinux...``) must run
the compiled measurement core, every module of ``voxproxy.native.NATIVE_MODULES`` from
its extension, none of them stale; the ``py3-none-any`` wheel must run the sources. Its
dependencies come from the package index (uv's cache after the first time); each check
runs from an empty directory, so the checkout cannot be imported by accident. The sdist
is not installed: ``make wheels`` built both wheels from it.

Exit status 1 when any wheel runs the wrong build.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from uv import find_uv_bin

PROBE = """
import json, voxproxy
from voxproxy import native
compiled = [m for m in native.NATIVE_MODULES if native.compiled_path(m) is not None]
print(json.dumps({"build": native.build(), "stale": native.stale(),
                  "compiled": len(compiled), "modules": len(native.NATIVE_MODULES),
                  "at": voxproxy.__file__}))
"""


def expected_build(wheel: Path) -> str:
    """What a wheel must run: its tag says whether it carries compiled modules."""
    return "pure-python" if wheel.name.endswith("-py3-none-any.whl") else "mypyc"


def check(wheel: Path, uv: str) -> tuple[bool, dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="voxproxy-check-") as tmp:
        venv = Path(tmp, "venv")
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", python, str(wheel)], check=True
        )
        empty = Path(tmp, "empty")
        empty.mkdir()
        out = subprocess.run(
            [python, "-c", PROBE], cwd=empty, capture_output=True, text=True, check=True
        ).stdout
        found: dict[str, object] = json.loads(out)
        ok = (
            found["build"] == expected_build(wheel)
            and found["stale"] == []
            and str(found["at"]).startswith(str(venv))
        )
        return ok, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dist", nargs="+", type=Path, help="built files (sdists are passed over)")
    args = ap.parse_args()
    wheels = [p for p in args.dist if p.suffix == ".whl"]
    if not wheels:
        print("no wheel to check", file=sys.stderr)
        return 1
    uv = find_uv_bin()
    failed = 0
    for wheel in wheels:
        ok, found = check(wheel, uv)
        failed += not ok
        print(
            f"{'ok  ' if ok else 'FAIL'} {wheel.name}: {found['build']} "
            f"({found['compiled']} of {found['modules']} modules compiled, "
            f"expected {expected_build(wheel)})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
