"""``voxproxy analyze`` behind its parser (``voxproxy/recordings/run.py``): the jobs the
paths and pairs make, the refusals, and what a batch's outcomes become (receipts in the
order given, a line per skipped file, the table, the exit status), with the batch itself
handed in."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.receipt_samples import sample_receipt

import voxproxy.recordings.run as run
from voxproxy.core.errors import ConfigError
from voxproxy.recordings.batch import Job, Options, Outcome
from voxproxy.recordings.run import jobs_of, run_analyze


def test_files_folders_and_pairs_make_one_job_each_in_the_order_given(tmp_path: Path) -> None:
    folder = tmp_path / "calls"
    (folder / "b").mkdir(parents=True)
    for name in ("z.wav", "a.flac", "b/m.WAV", "notes.txt"):
        (folder / name).write_bytes(b"x")
    jobs = jobs_of(
        [str(tmp_path / "one.wav"), str(folder)],
        [["c.wav", "a.wav", "-120.5"]],
        "agent,caller",
    )
    assert [j.paths for j in jobs] == [
        (str(tmp_path / "one.wav"),),  # a file given is taken whatever it is
        (str(folder / "a.flac"),),
        (str(folder / "b" / "m.WAV"),),
        (str(folder / "z.wav"),),
        ("c.wav", "a.wav"),
    ]
    assert {j.channels for j in jobs} == {("agent", "caller")}
    assert jobs[-1].offset_ms == -120.5 and jobs[0].offset_ms == 0.0


def test_a_bad_offset_or_channel_roles_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"--pair c\.wav a\.wav soon: OFFSET_MS is no number"):
        jobs_of([], [["c.wav", "a.wav", "soon"]], "caller,agent")
    with pytest.raises(ConfigError, match="--channels: expected caller,agent"):
        jobs_of([], [], "left,right")


def _args(tmp_path: Path, paths: Sequence[str], **changes: Any) -> argparse.Namespace:
    base = {
        "paths": list(paths),
        "pair": [],
        "channels": "caller,agent",
        "receipts": str(tmp_path / "out" / "receipts.jsonl"),
        "report": "none",
        "secret": "k",
        "policy": None,
        "jobs": 1,
        "no_progress": True,
        "otel": False,
    }
    return argparse.Namespace(**(base | changes))


def test_nothing_to_analyse_or_a_directory_to_write_to_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothing to analyse"):
        run_analyze(_args(tmp_path, [str(tmp_path)]))  # an empty folder
    with pytest.raises(ConfigError, match="a directory; give the file"):
        run_analyze(_args(tmp_path, ["a.wav"], receipts=str(tmp_path)))


def test_outcomes_become_receipts_in_order_a_line_per_skip_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    receipts = [sample_receipt(call=f"c_{k:016x}") for k in (2, 1)]
    given: list[list[Job]] = []

    def batch(jobs: list[Job], options: Options, workers: int | None, **_: Any) -> list[Outcome]:
        given.append(jobs)
        assert options.secret == b"k" and workers == 1
        first, damaged, last = jobs
        return [
            Outcome(first, receipts[0].to_json_line(), audio_s=30.0, cpu_s=0.5),
            Outcome(damaged, error="an empty file (0 bytes)"),
            Outcome(last, receipts[1].to_json_line(), audio_s=30.0, cpu_s=0.5),
        ]

    monkeypatch.setattr(run, "_run", batch)
    assert run_analyze(_args(tmp_path, ["first.wav", "damaged.wav", "last.wav"])) == 1
    assert [j.paths for j in given[0]] == [("first.wav",), ("damaged.wav",), ("last.wav",)]
    lines = (tmp_path / "out" / "receipts.jsonl").read_text().splitlines()
    assert [json.loads(line)["call"] for line in lines] == [r.call for r in receipts]
    out, err = capsys.readouterr()
    assert "voxproxy analyze: skipped damaged.wav: an empty file (0 bytes)" in err
    assert "2 receipt(s) ->" in err and "; 1 skipped; 60 s of audio in 1.0 s of CPU" in err
    assert "report ->" not in err and not (tmp_path / "out" / "report.html").exists()
    assert "2 of 3 recording(s) measured" in out
    assert "first.wav" in out and "last.wav" in out and "damaged.wav" not in out


def test_all_measured_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)

    def batch(jobs: list[Job], *_: Any, **__: Any) -> list[Outcome]:
        return [Outcome(job, sample_receipt().to_json_line()) for job in jobs]

    monkeypatch.setattr(run, "_run", batch)
    assert run_analyze(_args(tmp_path, ["one.wav"])) == 0
    assert "skipped" not in capsys.readouterr().err
