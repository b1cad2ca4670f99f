"""A clip at a caller's rate: converted once per clip and rate, shared read-only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.noise import noise_bed

from voxproxy.clips import clip
from voxproxy.core.analysis.truth import audible_speech_edges, speech_edges, truth_threshold_dbfs
from voxproxy.core.audio.resample import resample_linear
from voxproxy.loadgen.steps import (
    BargeIn,
    Say,
    audible_clip_edges,
    clip_at_rate,
    prepare_heard_truth,
)


def test_a_clip_is_converted_once_per_rate_and_shared_read_only() -> None:
    c = clip("caller_iban")
    assert c.sample_rate_hz == 16000
    at8 = clip_at_rate(c, 8000)
    # Two samples averaged per 8 kHz sample: what each caller computed before.
    n = (c.pcm.size // 2) * 2
    expected = c.pcm[:n].reshape(-1, 2).astype(np.int32).mean(axis=1).astype(np.int16)
    assert np.array_equal(at8, expected)
    assert clip_at_rate(c, 8000) is at8  # the second caller gets the same array
    at24 = clip_at_rate(c, 24000)
    assert np.array_equal(at24, resample_linear(c.pcm, 16000, 24000))
    assert clip_at_rate(c, 16000) is c.pcm  # its own rate: the clip itself
    with pytest.raises(ValueError):
        at8[0] = 1  # shared by every caller: nobody writes into it


def test_a_said_clips_truth_is_what_is_heard_over_the_looping_bed_under_it() -> None:
    # The caller loops its bed from the stream's first sample: under stream position p lies
    # bed[p % len(bed)]. Said at a position where the bed wraps round, the clip's truth is
    # its audible edges over exactly those samples (MEASUREMENT.md 2), inside its own edges.
    c = clip("caller_thanks")
    pcm = clip_at_rate(c, 8000)
    threshold = truth_threshold_dbfs(c.pcm, c.sample_rate_hz)
    assert threshold is not None
    bed = noise_bed("pink", 8000 * 3, 8000, seed=4) * 32768 * 10 ** ((threshold + 25) / 20)
    pos = bed.size - 4000  # half a second before the bed starts again
    on, off = audible_clip_edges(c, pcm, bed, pos, 8000, 0.0)
    under = np.concatenate((bed[pos:], bed))[: pcm.size]
    edges = audible_speech_edges(pcm, under, 8000, threshold_dbfs=threshold)
    assert (on, off) == (edges[0][0], edges[-1][1])
    assert c.onset_ms <= on and off <= c.offset_ms and off < c.offset_ms - 10
    # Louder by 6 dB (a step's gain): the threshold follows, the bed stays.
    louder = np.round(pcm * 2.0).astype(np.int16)
    on6, off6 = audible_clip_edges(c, louder, bed, pos, 8000, 20 * np.log10(2.0))
    assert on6 <= on and off6 >= off
    assert audible_clip_edges(c, pcm, None, pos, 8000, 0.0) == (c.onset_ms, c.offset_ms)


def test_the_levels_a_noisy_script_needs_are_read_before_the_call(monkeypatch: Any) -> None:
    # The first level reading imports scipy (over a second), each takes tens of ms: read on
    # a caller's clock, it made the demo's first noisy caller send 0.7-1.4 s late, and the
    # proxies in its loop refused callers for the lag. prepare_heard_truth reads them first.
    from voxproxy.core.analysis import truth
    from voxproxy.loadgen.scenario import find_scenario

    scenario, base = find_scenario("background_noise")
    assert scenario.noise is not None
    steps = scenario.caller_steps(base)
    said = [st for st in steps if isinstance(st, (Say, BargeIn))]
    assert said
    prepare_heard_truth(steps)

    def no_reading(*_a: object) -> None:
        raise AssertionError("a level read on the caller's clock")

    monkeypatch.setattr(truth, "truth_threshold_dbfs", no_reading)
    bed = np.zeros(16000)
    for st in said:
        pcm = clip_at_rate(st.clip, 8000)
        audible_clip_edges(st.clip, pcm, bed + 1.0, 0, 8000, 0.0)


def test_the_load_generator_loads_the_filters_its_truth_reads_when_it_is_imported() -> None:
    # The core imports scipy's filters when a level is first read (over a second): in a
    # test whose caller was made beside a running proxy, the proxy's lag monitor counted
    # the import and refused the caller (503, "overloaded"). Importing the load generator
    # loads them, before anything keeps time. (A fresh interpreter: this one has them.)
    import subprocess
    import sys

    code = (
        "import sys; import voxproxy.loadgen.caller; "
        "assert 'scipy.signal' in sys.modules, sorted(m for m in sys.modules if 'scipy' in m)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_call_lasts_its_clips_and_silences_at_least_and_its_waits_at_most() -> None:
    from voxproxy.loadgen.steps import (
        Interject,
        Silence,
        WaitAgentEnd,
        WaitAgentStart,
        caller_audio_s,
        longest_call_s,
    )

    a, b = clip("caller_where_is_order"), clip("noise_cough")
    steps: list[Any] = [
        Say(a),
        WaitAgentEnd(quiet_ms=600, timeout_ms=30_000, start_timeout_ms=10_000),
        BargeIn(after_ms=900, clip=a, timeout_ms=10_000),
        Interject(after_ms=500, clip=b, timeout_ms=5_000),
        Silence(1500),
        WaitAgentStart(timeout_ms=8_000),
    ]
    clips_ms = 2 * a.duration_ms + b.duration_ms
    assert caller_audio_s(steps) == pytest.approx((clips_ms + 1500) / 1000)
    waits_ms = 40_000 + 10_900 + 5_500 + 8_000
    assert longest_call_s(steps, 800) == pytest.approx((clips_ms + 1500 + waits_ms + 800) / 1000)


def test_a_said_clips_truth_is_read_at_its_wires_rate() -> None:
    # An 8 kHz wire carries the clip averaged down to 8 kHz: caller_topic_change's last
    # sound (an affricate, mostly above 4 kHz) ends tens of ms earlier there than on its
    # 16 kHz recording, and the live caller's truth is what it sent (read here
    # independently: the truth rule on the 8 kHz audio at the recording's level).
    c = clip("caller_topic_change")
    pcm = clip_at_rate(c, 8000)
    threshold = truth_threshold_dbfs(c.pcm, c.sample_rate_hz)
    assert threshold is not None
    at_8k = speech_edges(pcm, 8000, threshold_dbfs=threshold)
    assert c.offset_ms - at_8k[-1][1] > 20.0
    expected = (at_8k[0][0], at_8k[-1][1])
    assert audible_clip_edges(c, pcm, None, 0, 8000, 0.0) == expected
    assert audible_clip_edges(c, c.pcm, None, 0, 16000, 0.0) == (c.onset_ms, c.offset_ms)


@pytest.mark.parametrize("rate", [24000, 48000])
def test_a_wire_above_the_recordings_rate_keeps_its_edges(rate: int) -> None:
    # A wire at 24 or 48 kHz carries all of a 16 kHz recording's band. The tests bring a
    # clip there by linear interpolation, which dims what lies near 8 kHz: read from that
    # audio, caller_topic_change's truth ended about 40 ms early, and the live WebRTC
    # calls (Opus at 48 kHz) measured their ttfs 28-43 ms outside their stated uncertainty
    # against it (tests/proxy/test_webrtc.py). The truth is the recording's edges there.
    c = clip("caller_topic_change")
    pcm = clip_at_rate(c, rate)
    threshold = truth_threshold_dbfs(c.pcm, c.sample_rate_hz)
    assert threshold is not None
    dimmed = speech_edges(pcm, rate, threshold_dbfs=threshold)
    assert c.offset_ms - dimmed[-1][1] > 20.0  # (what reading the interpolated audio gives)
    assert audible_clip_edges(c, pcm, None, 0, rate, 0.0) == (c.onset_ms, c.offset_ms)
