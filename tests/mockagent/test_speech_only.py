"""Agents that send only speech, answer with corpus voices, vary their answers per call, and
hear the caller with a detector of their own settings."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from support.waiting import wait_until

from voxproxy.clips import clip, load_corpus
from voxproxy.core.analysis.vad import VadConfig
from voxproxy.core.errors import ConfigError
from voxproxy.loadgen.caller import CallerConfig, Say, ScriptedCaller, WaitAgentEnd
from voxproxy.mockagent import MockAgent, MockAgentConfig
from voxproxy.mockagent.config import halve_rate, prepare_clips, response_clip, trim_to_speech


def test_trim_to_speech_cuts_at_the_first_and_last_sample_of_speech() -> None:
    c = clip("agent_confirm")  # 253 ms of silence, two segments, silence after
    t = trim_to_speech(c)
    rate = c.sample_rate_hz
    a, b = round(c.onset_ms * rate / 1000), round(c.offset_ms * rate / 1000)
    assert np.array_equal(t.pcm, c.pcm[a:b])
    assert t.trimmed and t.name == c.name
    assert t.onset_ms == 0.0
    assert t.offset_ms == pytest.approx(c.offset_ms - c.onset_ms)
    # Every segment moves with the cut; the pause between them stays where it was.
    shifted = [e - c.onset_ms for seg in c.segments_ms for e in seg]
    assert [e for seg in t.segments_ms for e in seg] == pytest.approx(shifted)
    # A clip that already starts and ends on speech keeps all of it (up to its last
    # 1 ms window of speech).
    assert trim_to_speech(t).pcm.size == t.pcm.size
    harmonic = load_corpus()["synth_harmonic_trimmed"]
    assert trim_to_speech(harmonic).pcm.size >= harmonic.pcm.size - rate // 1000


def test_responses_resolve_in_the_fixtures_and_the_corpus() -> None:
    voices = [c.name for c in load_corpus().values() if c.role == "agent"]
    names = ("agent_reprompt", "synth_harmonic_trimmed", *voices[:2])
    for dialect in ("raw", "twilio"):
        config = MockAgentConfig(dialect=dialect, responses=names)  # type: ignore[arg-type]
        clips = prepare_clips(config)
        assert set(clips) == set(names)
        for name in names:
            source = response_clip(name)
            expected = source.pcm if dialect == "raw" else halve_rate(source.pcm)
            assert np.array_equal(clips[name].pcm, expected)
    with pytest.raises(ConfigError, match="no fixture or corpus clip"):
        MockAgent(MockAgentConfig(responses=("no_such_clip",)))


def test_trim_silence_makes_every_clip_start_on_speech() -> None:
    names = ("agent_reprompt", "agent_confirm", "synth_harmonic_trimmed")
    for dialect, rate in (("raw", 16000), ("twilio", 8000)):
        config = MockAgentConfig(dialect=dialect, responses=names, trim_silence=True)  # type: ignore[arg-type]
        plain = prepare_clips(MockAgentConfig(dialect=dialect, responses=names))  # type: ignore[arg-type]
        for name, agent_clip in prepare_clips(config).items():
            assert agent_clip.onset_sample == 0
            span_ms = response_clip(name).offset_ms - response_clip(name).onset_ms
            assert agent_clip.pcm.size == pytest.approx(span_ms * rate / 1000, abs=2)
            assert agent_clip.pcm.size <= plain[name].pcm.size
    assert not MockAgentConfig().trim_silence  # off unless asked for


async def _call(url: str) -> None:
    config = CallerConfig(url=url, dialect="raw", tail_ms=200.0, keep_messages=False)
    script = [Say(clip("caller_hello")), WaitAgentEnd(quiet_ms=300.0, timeout_ms=8000.0)]
    record = await ScriptedCaller(config, script).run()
    assert record.error is None


@pytest.mark.slow
async def test_a_speech_only_agent_sends_its_speech_and_nothing_else() -> None:
    """Live, over loopback: each connection answers with the next clip in turn, and what
    goes on the wire is exactly the clip cut to its speech (no silence before or after)."""
    names = ("agent_reprompt", "agent_confirm")
    config = MockAgentConfig(
        responses=names,
        trim_silence=True,
        vary_responses=True,
        delay_ms=200.0,
        send_mode="burst",
        caller_vad=VadConfig(floor_clamp_dbfs=-50.0),
    )
    async with MockAgent(config) as agent:
        await asyncio.gather(_call(agent.url), _call(agent.url))
        await wait_until(
            lambda: all(log.ended_ns is not None for log in agent.calls), what="both calls ended"
        )
    logs = sorted(agent.calls, key=lambda log: log.index)
    assert [log.responses[0].clip for log in logs] == list(names)  # the rotation starts at i
    for log in logs:
        r = log.responses[0]
        assert r.skipped_samples == 0
        sent = b"".join(m for is_text, m in log.sent_messages if not is_text)  # type: ignore[misc]
        expected = trim_to_speech(clip(r.clip)).pcm.astype("<i2").tobytes()
        assert sent == expected
