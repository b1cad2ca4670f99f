"""A batch across processes: outcomes in the jobs' order, a worker's death survived."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxproxy.receipts.policy import load_policy
from voxproxy.recordings.batch import Job, Options, run_batch
from voxproxy.recordings.files import Recording, RecordingError
from voxproxy.recordings.wavfile import wav_bytes

PARENT = os.getpid()


@dataclass(frozen=True, slots=True)
class Killer(Job):
    """A job whose reading kills the worker process it runs in (as the kernel's OOM
    killer would); in the parent it is an ordinary damaged file."""

    def read(self) -> Recording:
        if os.getpid() != PARENT:
            os._exit(9)
        raise RecordingError("its worker died reading it")


def _files(tmp_path: Path, n: int) -> list[Job]:
    rng = np.random.default_rng(1)
    jobs = []
    for k in range(n):
        pcm = (rng.standard_normal(8000 * (k + 1)) * 300).astype(np.int16)
        path = tmp_path / f"f{k}.wav"
        path.write_bytes(wav_bytes([pcm, pcm[::-1].copy()], 8000))
        jobs.append(Job((str(path),)))
    return jobs


def test_outcomes_keep_the_jobs_order_across_workers(tmp_path: Path) -> None:
    jobs = _files(tmp_path, 5)
    jobs.insert(2, Job((str(tmp_path / "missing.wav"),)))
    options = Options(secret=b"k", policy=load_policy(None))
    done: list[str] = []
    outs = run_batch(jobs, options, workers=2, on_done=lambda o: done.append(o.job.label))
    assert [o.job for o in outs] == jobs and sorted(done) == sorted(j.label for j in jobs)
    assert [o.error is None for o in outs] == [True, True, False, True, True, True]
    assert [round(o.audio_s) for o in outs if o.error is None] == [1, 2, 3, 4, 5]


def test_a_worker_that_dies_costs_only_its_own_job(tmp_path: Path) -> None:
    jobs = _files(tmp_path, 4)
    jobs.insert(1, Killer((str(tmp_path / "f0.wav"),)))
    outs = run_batch(jobs, Options(secret=b"k", policy=load_policy(None)), workers=2)
    assert [o.job for o in outs] == jobs
    assert [o.error for o in outs] == [None, "its worker died reading it", None, None, None]


def test_another_kind_of_file_plugs_in(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """How captures of the proxy's wire will join (issue 38, part 2): a kind registered
    by its first bytes and suffix is found in folders, measured by its own measurer and
    judged and written like a recording; a recording beside it is still a recording."""
    from support.receipt_samples import sample_receipt

    from voxproxy.recordings import batch
    from voxproxy.recordings.run import jobs_of

    monkeypatch.setattr(batch, "SOURCES", [])
    seen: list[str] = []

    def replay(job: Job, options: Options) -> tuple[object, float]:
        seen.append(Path(job.paths[0]).read_bytes()[7:].decode())
        return sample_receipt(source="capture", verdict=None), 30.0

    batch.register_source(
        batch.SourceKind("fake", lambda head: head.startswith(b"FAKECAP"), (".fcap",), replay)  # type: ignore[arg-type]
    )
    (tmp_path / "a.fcap").write_bytes(b"FAKECAPcall-1")
    (tmp_path / "b.fcap").write_bytes(b"not one of them")
    _files(tmp_path, 1)
    jobs = jobs_of([str(tmp_path)], [], "caller,agent")
    assert [Path(j.paths[0]).name for j in jobs] == ["a.fcap", "b.fcap", "f0.wav"]
    outs = run_batch(jobs, Options(secret=b"k", policy=load_policy(None)), workers=1)
    assert seen == ["call-1"]
    first = outs[0].receipt
    assert first is not None and first.source == "capture" and first.verdict is not None
    assert outs[0].audio_s == 30.0
    assert outs[1].error == "not a WAV or FLAC file"  # sniffed as no kind: a recording
    assert outs[2].receipt is not None and outs[2].receipt.source == "recording"
