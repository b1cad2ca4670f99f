"""The measurement core's two builds (voxproxy/native.py): compiled with mypyc and from
its sources. They must give the same receipts, byte for byte, and a user must be able to
tell which one runs and to fall back to the sources."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from voxproxy import native

ROOT = Path(__file__).resolve().parent.parent

# Scripted Twilio calls (support.scripted.turn_taking_plans: clean, with caller noise,
# over a babble bed; paced and in bursts, with barge-ins) through CallSession, each
# receipt as JSON less its wall clock.
_RECEIPTS = textwrap.dedent(
    """
    import json
    from voxproxy import native
    from voxproxy.core.dialects import make_decoder
    from voxproxy.core.receipt import CloseInfo
    from support.scripted import render, turn_taking_plans
    from voxproxy.core.session import CallSession

    out = []
    for plan in turn_taking_plans(6, seed=29, turns=3):
        call = render(plan)
        s = CallSession(make_decoder("twilio"), 0, secret=b"k", link_id="native")
        for t, d, payload in call.messages:
            s.on_message(d, payload, t)
        r = s.close(call.end_ns, "completed", CloseInfo(initiator="caller"))
        out.append(r.model_dump_json(exclude={"started_at"}))
    print(json.dumps({"build": native.build(), "receipts": out}))
    """
)


def _python(
    args: list[str], cwd: Path, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """A child of this interpreter on ``args``, its output captured as text (its exit
    status left to the caller)."""
    cmd = [sys.executable, *args]
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def _run(pure: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    if pure:
        env[native.PURE_ENV] = "1"
    # support.scripted: the tests' helpers (the package ships without them)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")]))
    proc = _python(["-c", _RECEIPTS], ROOT, env, timeout_s=300)
    proc.check_returncode()
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_both_builds_give_the_same_receipts_byte_for_byte() -> None:
    pure = _run(pure=True)
    default = _run(pure=False)
    assert pure["build"] == "pure-python"
    # The default is the compiled build wherever `make native` built one (make test does).
    built = all(native.compiled_path(m) is not None for m in native.NATIVE_MODULES)
    assert default["build"] == ("mypyc" if built else "pure-python")
    receipts = pure["receipts"]
    assert isinstance(receipts, list) and len(receipts) == 6
    # Real figures, not empty receipts: every turn has a figure or the reason it has none,
    # and the clean calls' figures are published.
    published = 0
    for text in receipts:
        r = json.loads(text)
        assert len(r["turns"]) == 3
        for turn in r["turns"]:
            assert (turn["ttfs_ms"] is None) != (turn["reason"] is None)
            published += turn["ttfs_ms"] is not None
    assert published >= 6
    assert default["receipts"] == receipts


def test_the_running_build_is_the_modules_actually_imported() -> None:
    kind = native.build()
    files = [sys.modules[m].__file__ or "" for m in native.NATIVE_MODULES]
    if kind == "mypyc":
        assert all(f.endswith(".so") for f in files)
    else:
        assert kind == "pure-python"
        assert all(f.endswith(".py") for f in files)


def _source(package: Path) -> tuple[str, Path]:
    """The first compiled module's name and its source under ``package`` (empty)."""
    module = native.NATIVE_MODULES[0]
    src = native.source_path(module, package)
    src.parent.mkdir(parents=True)
    src.write_text("")
    return module, src


def _compiled(src: Path, built_at: int, edited_at: int) -> Path:
    """An (empty) compiled module beside ``src``, built at ``built_at`` (mtime, s), the
    source edited at ``edited_at``."""
    so = src.with_name(src.stem + importlib.machinery.EXTENSION_SUFFIXES[0])
    so.write_bytes(b"")
    os.utime(so, (built_at, built_at))
    os.utime(src, (edited_at, edited_at))
    return so


def test_a_compiled_module_older_than_its_source_is_stale(tmp_path: Path) -> None:
    module, src = _source(tmp_path)
    assert native.compiled_path(module, tmp_path) is None
    assert native.stale(tmp_path) == []  # nothing compiled: the source runs
    so = _compiled(src, built_at=2_000, edited_at=1_000)
    assert native.compiled_path(module, tmp_path) == so
    assert native.stale(tmp_path) == []
    os.utime(src, (3_000, 3_000))  # the source was edited after the build
    assert native.stale(tmp_path) == [module]
    os.utime(so, (4_000, 4_000))
    # A compiled module left from a module no longer compiled would shadow its source.
    gone = tmp_path / "core" / "dialects" / ("twilio" + importlib.machinery.EXTENSION_SUFFIXES[0])
    gone.parent.mkdir()
    gone.write_bytes(b"")
    assert native.stale(tmp_path) == ["voxproxy.core.dialects.twilio"]
    assert native.compiled_files(tmp_path) == sorted([so, gone])


def test_nothing_is_stale_in_a_package_an_installer_unpacked(tmp_path: Path) -> None:
    # pip writes a wheel's files in its own order (a source may come out a moment after
    # its compiled module): their times are not edits.
    package = tmp_path / "site-packages" / "voxproxy"
    module, src = _source(package)
    _compiled(src, built_at=1_000, edited_at=1_001)
    assert native.stale(package) == [module]  # a checkout's would be
    (package.parent / "voxproxy-0.1.0.dist-info").mkdir()
    assert native.installed_from_wheel(package)
    assert native.stale(package) == []
    assert not native.installed_from_wheel(native.source_path(module).parents[1])


def test_the_stale_warning_names_the_modules_unless_the_sources_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, src = _source(tmp_path)
    so = _compiled(src, built_at=1_000, edited_at=2_000)
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    warning = native.stale_warning(tmp_path)
    assert warning is not None and module in warning and "make native" in warning
    monkeypatch.setenv(native.PURE_ENV, "1")  # the sources run: nothing stale runs
    assert native.stale_warning(tmp_path) is None
    os.utime(so, (3_000, 3_000))
    monkeypatch.delenv(native.PURE_ENV)
    assert native.stale_warning(tmp_path) is None


def test_the_makefile_rebuilds_when_a_compiled_module_changes_and_only_then() -> None:
    """``make native`` depends on exactly the sources of NATIVE_MODULES (read from
    voxproxy/native.py by the Makefile), not on every file of their folders."""
    out = subprocess.run(
        ["make", "-s", "native-sources"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    expected = [m.replace(".", "/") + ".py" for m in native.NATIVE_MODULES]
    assert out.stdout.split() == expected
    assert all((ROOT / path).is_file() for path in expected)


def test_a_build_from_another_checkout_leaves_this_ones_compiled_modules_alone(
    tmp_path: Path,
) -> None:
    """``tools/build_native.py`` of a checkout (a worktree) whose ``voxproxy`` imports
    from elsewhere (a shared environment's editable install) refuses before it removes
    or builds anything: it once removed another checkout's compiled core."""
    other = tmp_path / "worktree"
    (other / "tools").mkdir(parents=True)
    script = other / "tools" / "build_native.py"
    script.write_text((ROOT / "tools" / "build_native.py").read_text())
    here = native.compiled_files()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # voxproxy imports from this checkout
    done = _python([str(script)], tmp_path, env, timeout_s=120)
    assert done.returncode == 1, done.stderr
    assert f"imported from {ROOT / 'voxproxy'}" in done.stderr
    assert str(other / "voxproxy") in done.stderr
    assert native.compiled_files() == here  # (every one of them still there)
    assert not (other / "build").exists()  # nor built anything
