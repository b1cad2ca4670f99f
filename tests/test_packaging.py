"""The wheel carries what its commands need: built from the source, installed into a
fresh virtualenv outside the checkout, ``voxproxy demo`` runs from an empty directory.

The fresh virtualenv has no access to the checkout: the wheel is installed with
``--no-deps --no-index``, and the third-party dependencies come from this interpreter's
site-packages, added as a plain path (a ``.pth`` line), so that the editable install's
path hook in there is never run. Tests do not reach PyPI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@pytest.mark.slow
def test_the_wheel_runs_the_demo_from_an_empty_directory(tmp_path: Path) -> None:
    # The source as an sdist would carry it, away from the checkout (no build/ left there).
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "voxproxy", src / "voxproxy", symlinks=True, ignore=ignore)
    shutil.copytree(ROOT / "fixtures", src / "fixtures", ignore=ignore)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    dist = tmp_path / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(src),
        ],
        tmp_path,
        env,
        300,
    )
    (wheel,) = dist.glob("voxproxy-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 120)
    python = venv / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        tmp_path,
        env,
        300,
    )
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp_path,
            env,
            60,
        ).strip()
    )
    (site / "voxproxy-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    empty = tmp_path / "empty"
    empty.mkdir()
    run_env = {**env, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    where = _run(
        [
            str(python),
            "-c",
            "import voxproxy, voxproxy.clips as f; print(voxproxy.__file__); "
            "print(f.fixtures_dir())",
        ],
        empty,
        run_env,
        60,
    ).splitlines()
    assert all(Path(p).resolve().is_relative_to(venv.resolve()) for p in where), where

    out = _run([str(venv / "bin" / "voxproxy"), "demo", "--out", "demo"], empty, run_env, 600)
    assert "event API on" not in out
    lines = (empty / "demo" / "receipts.jsonl").read_text().splitlines()
    receipts = [json.loads(line) for line in lines]
    results = json.loads((empty / "demo" / "results.json").read_text())
    assert receipts and len(receipts) == len(results["calls"])
    assert {c["scenario"] for c in results["calls"]} >= {"normal_question", "interruption"}
    assert (empty / "demo" / "report.html").stat().st_size > 0
