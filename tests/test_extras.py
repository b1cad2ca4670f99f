"""A command that needs a missing extra says which ``pip install`` to run, in one line."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from support.loadcli import run_load
from support.ports import refusing_port

from voxproxy.cli import main
from voxproxy.extras import EXTRAS, MissingExtra, has, require


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make the modules of an extra look uninstalled (as in a bare ``pip install voxproxy``)."""

    def hide(extra: str) -> None:
        gone = set(EXTRAS[extra])
        real = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: None if name.split(".")[0] in gone else real(name, *a),
        )

    return hide


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_every_extra_is_installed_here_and_require_passes() -> None:
    for extra in EXTRAS:
        assert has(extra), extra
        require(extra, "this test")


@pytest.mark.parametrize(
    ("extra", "argv"),
    [
        ("webrtc", ["proxy", "--transport", "webrtc", "--upstream", "http://127.0.0.1:9/whip"]),
        ("webrtc", ["load", "normal_question", "--transport", "webrtc", "--target", "http://x/"]),
        ("transcripts", ["transcripts", "score", "--ref", "a.txt", "--hyp", "b.txt"]),
    ],
)
def test_a_command_names_the_extra_it_needs(
    extra: str,
    argv: list[str],
    without: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    without(extra)
    assert (
        main([*argv, "--receipts", str(tmp_path / "r.jsonl")] if argv[0] == "proxy" else argv) == 2
    )
    line = _one_line(capsys)
    assert line.startswith("voxproxy: error: ") and "which is not installed" in line
    assert line.endswith(f"pip install 'voxproxy[{extra}]'"), line
    assert not (tmp_path / "r.jsonl").exists()


def test_scoring_a_transcript_without_the_extra_raises_the_one_line(without: Any) -> None:
    from voxproxy.transcripts.score import align

    assert align(["yes"], ["yes"])[0] == ["ok"]
    without("transcripts")
    with pytest.raises(MissingExtra, match=r"pip install 'voxproxy\[transcripts\]'$"):
        align(["yes"], ["no"])


def test_a_load_report_without_matplotlib_keeps_its_tables_and_says_how_to_draw_charts(
    without: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    without("report")
    with refusing_port() as port:
        status = run_load(f"ws://127.0.0.1:{port}", tmp_path / "run", "--dialect", "raw")
    assert status == 1  # the call could not connect: an expectation failed, nothing else
    page = (tmp_path / "run" / "report.html").read_text()
    assert "<svg" not in page
    assert "chart left out: matplotlib is not installed; pip install 'voxproxy[report]'" in page
    assert "<h2>By scenario</h2>" in page
    capsys.readouterr()
