"""Scenario files: validation errors that name the file, the step and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxproxy.core.errors import FixtureError
from voxproxy.loadgen.caller import BargeIn, Interject, Say, Silence, WaitAgentEnd, WaitAgentStart
from voxproxy.loadgen.scenario import builtin_names, find_scenario, load_scenario


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_every_builtin_scenario_loads_and_resolves_its_clips() -> None:
    names = builtin_names()
    assert set(names) >= {
        "normal_question",
        "interruption",
        "silence_after_answer",
        "topic_change",
        "long_number",
        "background_noise",
        "noise_interruption",
    }
    for name in names:
        scenario, base = find_scenario(name)
        steps = scenario.caller_steps(base)
        assert steps and scenario.name == name


def test_steps_map_to_caller_actions(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
name: all_steps
noise: {clip: noise_pink, snr_db: 12}
steps:
  - say: caller_yes
    expect: {ttfs_ms_max: 900, response: true}
  - wait: agent_start
  - wait: {until: agent_end, quiet_ms: 300}
  - barge_in: {after_ms: 500, say: caller_interrupt}
  - interject: {after_ms: 200, sound: noise_cough}
  - silence: 1500
""",
    )
    s = load_scenario(p)
    steps = s.caller_steps(tmp_path)
    assert [type(x) for x in steps] == [
        Say,
        WaitAgentStart,
        WaitAgentEnd,
        BargeIn,
        Interject,
        Silence,
    ]
    assert isinstance(steps[2], WaitAgentEnd) and steps[2].quiet_ms == 300
    assert isinstance(steps[3], BargeIn) and steps[3].after_ms == 500
    bed = s.noise_bed(tmp_path)
    assert bed is not None and bed.snr_db == 12 and bed.clip.name == "noise_pink"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nsteps:\n  - say: caller_yes\n    wait: agent_end\n", "step 1"),
        ("name: x\nsteps:\n  - shout: caller_yes\n", "exactly one action"),
        (
            "name: x\nsteps:\n  - say: caller_yes\n  - barge_in: {after_ms: -5, say: caller_yes}\n",
            "step 2 (barge_in)",
        ),
        ("name: x\nsteps:\n  - say: no_such_clip\n", "step 1 (say)"),
        ("name: x\nsteps:\n  - say: caller_yes\n    expect: {ttfs_ms_max: fast}\n", "ttfs_ms_max"),
        ("name: x\nsteps: []\n", "steps"),
        ("name: 'bad name'\nsteps:\n  - silence: 10\n", "name"),
        ("steps: [\n", "not valid YAML"),
        ("name: x\nnoise: {clip: nope, snr_db: 10}\nsteps:\n  - silence: 10\n", "noise"),
        ("name: x\nsteps:\n  - wait: forever\n", "step 1 (wait)"),
    ],
)
def test_invalid_files_name_the_file_and_the_step(tmp_path: Path, text: str, message: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(FixtureError) as info:
        load_scenario(p)
    assert str(p) in str(info.value)
    assert message in str(info.value)


def test_a_wav_file_next_to_the_scenario_can_be_said(tmp_path: Path) -> None:
    from voxproxy.clips import clip, write_wav

    c = clip("caller_yes")
    write_wav(tmp_path / "mine.wav", c.pcm, c.sample_rate_hz)
    s = load_scenario(write(tmp_path, "name: x\nsteps:\n  - say: mine.wav\n"))
    step = s.caller_steps(tmp_path)[0]
    assert isinstance(step, Say)
    # Truth edges recomputed from the file match the fixture's own.
    assert step.clip.segments_ms == c.segments_ms


def test_unknown_scenario_name_lists_the_builtin_ones() -> None:
    with pytest.raises(FixtureError) as info:
        find_scenario("no_such_scenario")
    assert "normal_question" in str(info.value)


def test_a_44k1_stereo_recording_is_said_as_the_clip_it_holds(tmp_path: Path) -> None:
    import wave

    import numpy as np
    from scipy.signal import resample_poly

    from voxproxy.clips import clip

    c = clip("caller_hello")
    # The fixture as a phone or a DAW would export it: 44.1 kHz, two channels (the right
    # one 6 dB down).
    up = np.rint(resample_poly(c.pcm.astype(np.float64), 441, 160)).astype(np.int16)
    right = (up // 2).astype(np.int16)
    frames = np.stack([up, right], axis=1).reshape(-1).astype("<i2").tobytes()
    with wave.open(str(tmp_path / "hello.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        w.writeframes(frames)
    s = load_scenario(write(tmp_path, "name: x\nsteps:\n  - say: hello.wav\n"))
    step = s.caller_steps(tmp_path)[0]
    assert isinstance(step, Say)
    assert step.clip.sample_rate_hz == 16000
    assert abs(step.clip.pcm.size - c.pcm.size) <= 1
    # The speech is where the fixture's truth says: each edge within 10 ms (the mix is
    # 3.5 dB below the original; the truth rule's threshold is relative to the level).
    assert len(step.clip.segments_ms) == len(c.segments_ms)
    for (a, b), (ta, tb) in zip(step.clip.segments_ms, c.segments_ms, strict=True):
        assert abs(a - ta) <= 10.0 and abs(b - tb) <= 10.0, (a, b, ta, tb)
