"""What a user installs is what was measured: the sdist builds a compiled wheel (the
measurement core from mypyc) and a pure-Python one, each installs into a fresh
virtualenv outside the checkout and runs the build it says, and ``voxproxy demo`` runs
from an empty directory.

The fresh virtualenvs have no access to the checkout: the wheels are built without build
isolation and installed with ``--no-deps --no-index``, and the third-party dependencies
come from this interpreter's site-packages, added as a plain path (a ``.pth`` line), so
that the editable install's path hook in there is never run. Tests do not reach PyPI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from voxproxy import native
from voxproxy.harness.demo import AGENTS
from voxproxy.loadgen.scenario import builtin_names

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

# What an installed package says of itself (run from an empty directory).
PROBE = """
import json, voxproxy
from voxproxy import native
print(json.dumps({
    "at": voxproxy.__file__,
    "build": native.build(),
    "stale": native.stale(),
    "compiled": [m for m in native.NATIVE_MODULES if native.compiled_path(m) is not None],
}))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def _sdist(tmp: Path, env: dict[str, str]) -> Path:
    """The sdist, built by the project's backend from a copy of the checkout's files (no
    build/, no compiled modules, no caches)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    (src / "tools").mkdir()
    shutil.copy2(ROOT / "tools" / "build_backend.py", src / "tools" / "build_backend.py")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    shutil.copytree(ROOT / "voxproxy", src / "voxproxy", symlinks=True, ignore=ignore)
    shutil.copytree(ROOT / "fixtures", src / "fixtures", ignore=ignore)
    hook = "import sys; sys.path.insert(0, 'tools'); import build_backend as b; "
    name = _run(
        [sys.executable, "-c", hook + f"print(b.build_sdist({str(tmp / 'sdist')!r}))"],
        src,
        env,
        300,
    ).splitlines()[-1]
    return tmp / "sdist" / name


def _wheel(sdist: Path, out: Path, env: dict[str, str]) -> Path:
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    _run([*argv, "-w", str(out), str(sdist)], out.parent, env, 900)
    (wheel,) = out.glob("voxproxy-*.whl")
    return wheel


def _install(wheel: Path, venv: Path, env: dict[str, str]) -> Path:
    """A fresh virtualenv with ``wheel`` and this interpreter's dependencies; its python."""
    _run([sys.executable, "-m", "venv", str(venv)], venv.parent, env, 120)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)]
    _run(pip, venv.parent, env, 300)
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", code], venv.parent, env, 60).strip())
    (site / "voxproxy-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _probe(python: Path, empty: Path, env: dict[str, str]) -> dict[str, object]:
    found: dict[str, object] = json.loads(_run([str(python), "-c", PROBE], empty, env, 120))
    return found


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sdist")
    return _sdist(tmp, {**ENV, "HOME": str(tmp)})


@pytest.mark.slow
def test_the_sdist_carries_what_builds_the_wheels(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"setup.py", "tools/build_backend.py", "pyproject.toml", "voxproxy/native.py"} <= names
    assert "voxproxy/_fixtures/audio/manifest.json" in names
    assert not [n for n in names if n.endswith((".so", ".c"))]


@pytest.mark.slow
def test_the_compiled_wheel_installs_the_compiled_core(sdist: Path, tmp_path: Path) -> None:
    env = {**ENV, "HOME": str(tmp_path), "VOXPROXY_REQUIRE_NATIVE": "1"}
    wheel = _wheel(sdist, tmp_path / "dist", env)
    assert not wheel.name.endswith("-py3-none-any.whl"), wheel.name
    env = {**ENV, "HOME": str(tmp_path)}
    python = _install(wheel, tmp_path / "venv", env)
    empty = tmp_path / "empty"
    empty.mkdir()
    found = _probe(python, empty, env)
    assert Path(str(found["at"])).resolve().is_relative_to((tmp_path / "venv").resolve())
    assert found["build"] == "mypyc"
    assert found["compiled"] == list(native.NATIVE_MODULES)
    assert found["stale"] == []  # (the installer wrote each source after its module)
    # The sources still win when asked.
    assert _probe(python, empty, {**env, native.PURE_ENV: "1"})["build"] == "pure-python"


@pytest.mark.slow
def test_the_pure_wheel_runs_the_demo_from_an_empty_directory(sdist: Path, tmp_path: Path) -> None:
    env = {**ENV, "HOME": str(tmp_path), native.PURE_ENV: "1"}
    wheel = _wheel(sdist, tmp_path / "dist", env)
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    env = {**ENV, "HOME": str(tmp_path)}
    venv = tmp_path / "venv"
    python = _install(wheel, venv, env)
    empty = tmp_path / "empty"
    empty.mkdir()
    found = _probe(python, empty, env)
    assert Path(str(found["at"])).resolve().is_relative_to(venv.resolve())
    assert found["build"] == "pure-python" and found["compiled"] == []

    run_env = {**env, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    code = "import voxproxy.clips as f; print(f.fixtures_dir())"
    fixtures = _run([str(python), "-c", code], empty, run_env, 60).strip()
    assert Path(fixtures).resolve().is_relative_to(venv.resolve())
    # Every call at once: one round of real-time calls instead of four (the figures are not
    # checked here, only that the installed demo runs and writes what it says; its
    # default size is tests/harness/test_demo.py's).
    calls = len(builtin_names()) * len(AGENTS)
    demo = [str(venv / "bin" / "voxproxy"), "demo", "--out", "demo", "--concurrency", str(calls)]
    out = _run(demo, empty, run_env, 600)
    assert "event API on" not in out
    lines = (empty / "demo" / "receipts.jsonl").read_text().splitlines()
    receipts = [json.loads(line) for line in lines]
    results = json.loads((empty / "demo" / "results.json").read_text())
    assert len(receipts) == len(results["calls"]) == calls
    assert {c["scenario"] for c in results["calls"]} >= {"normal_question", "interruption"}
    assert (empty / "demo" / "report.html").stat().st_size > 0
