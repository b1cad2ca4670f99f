"""A real browser plays the calls of ``voxproxy analyze``'s report.

Headless Chromium opens report.html from disk (as a user does, file://) with the
recordings in another folder: every ``<audio>`` element loads its recording by the
relative path (metadata read, its duration the recording's), the marks are drawn where
the receipt puts them, clicking the timeline seeks both elements of a pair, playing moves
the playhead; a screenshot of the page is written (``VOXPROXY_SCREENSHOT=PATH`` keeps
it) and checked to be a picture of the page.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support.browsercall import Cdp, chromium_page
from support.scripted.recording import recording_plans, recording_tracks, render_recording
from support.waiting import wait_until

from voxproxy.cli import main
from voxproxy.clips import load_corpus
from voxproxy.receipts.writer import read_receipts
from voxproxy.recordings.wavfile import wav_bytes

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--remote-debugging-port=0",
    "--window-size=1200,1400",
]


def _speech(role: str) -> list:  # type: ignore[type-arg]
    return [c for c in load_corpus().values() if c.role == role and c.kind == "speech"]


def _recordings(root: Path) -> None:
    """A stereo mu-law call with its truth beside it, and the same call as a mono pair."""
    plans = recording_plans(2, 41, _speech("caller"), _speech("agent"), turns=3)
    rec = render_recording(plans[1])
    caller, agent = recording_tracks(rec, 8000)
    (root / "call.wav").write_bytes(wav_bytes([caller, agent], 8000, "ulaw"))
    truth = {
        "turns": [
            {
                "caller_offset_ms": t.caller_offset_ns / 1e6,
                "agent_onset_ms": t.agent_onset_ns / 1e6,
                "stop_ms": None if t.stop_ns is None else t.stop_ns / 1e6,
            }
            for t in rec.truth
        ]
    }
    (root / "call.truth.json").write_text(json.dumps(truth))
    (root / "caller.wav").write_bytes(wav_bytes([caller], 8000, "ulaw"))
    (root / "agent.wav").write_bytes(wav_bytes([agent[4000:]], 8000, "ulaw"))


# (null until the page has loaded: a busy machine's Chromium is read while it still parses
# the report, a section there but not yet its timeline.)
STATE = """(() => document.readyState !== 'complete' ? null :
  [...document.querySelectorAll('section.call')].map(sec => ({
  duration_ms: parseFloat(sec.dataset.durationMs),
  audio: [...sec.querySelectorAll('audio')].map(a => ({
    src: a.getAttribute('src'), readyState: a.readyState, duration: a.duration,
    error: a.error && a.error.code, currentTime: a.currentTime})),
  caller: [...sec.querySelectorAll('rect.edge.caller')].map(r => parseFloat(r.getAttribute('x'))),
  agent: [...sec.querySelectorAll('rect.edge.agent')].map(r => parseFloat(r.getAttribute('x'))),
  ttfs: sec.querySelectorAll('.mark.ttfs').length,
  stops: sec.querySelectorAll('.mark.stop').length,
  truth: sec.querySelectorAll('line.truth').length,
  drawn: [...sec.querySelectorAll('rect.edge, .mark line')].filter(
    e => e.getBoundingClientRect().width > 0).length,
  playhead: parseFloat(sec.querySelector('.playhead').getAttribute('x1')),
})))()"""


async def _open(cdp: Cdp) -> list[dict[str, Any]]:
    async def loaded() -> list[dict[str, Any]] | None:
        state: list[dict[str, Any]] | None = await cdp.evaluate(STATE)
        if state is None:
            return None
        every = [a for call in state for a in call["audio"]]
        if every and all(a["readyState"] >= 1 or a["error"] for a in every):
            return state
        return None

    result: list[dict[str, Any]] = await wait_until(loaded, 30.0, "the audio elements loaded")
    return result


async def _browse(report: Path, shot: Path) -> dict[str, Any]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="voxproxy-chromium-") as profile:
        url = report.resolve().as_uri()
        async with chromium_page(CHROMIUM, FLAGS, Path(profile), url) as cdp:
            out: dict[str, Any] = {"loaded": await _open(cdp)}
            # Click the pair's timeline at 60 %: both of its elements seek there.
            out["seek"] = await cdp.evaluate(
                """(() => { const sec = document.querySelectorAll('section.call')[1];
                const svg = sec.querySelector('svg.timeline');
                const r = svg.getBoundingClientRect();
                svg.dispatchEvent(new MouseEvent('click', {bubbles: true,
                  clientX: r.left + 0.6 * r.width, clientY: r.top + 10}));
                return [...sec.querySelectorAll('audio')].map(
                  a => [parseFloat(a.dataset.startMs), a.currentTime]); })()"""
            )
            out["play"] = await cdp.evaluate(
                """(async () => { const a = document.querySelector('section.call audio');
                try { await a.play(); } catch (e) { return {error: String(e)}; }
                await new Promise(r => setTimeout(r, 800)); a.pause();
                const head = document.querySelector('section.call .playhead');
                return {t: a.currentTime, x: parseFloat(head.getAttribute('x1'))}; })()"""
            )
            await cdp.evaluate(
                "window.scrollTo(0, document.querySelector('h2:last-of-type').offsetTop)"
            )
            png = await cdp.call("Page.captureScreenshot", format="png")
            shot.write_bytes(base64.b64decode(png["data"]))
            return out


def test_the_report_plays_each_call_with_its_marks(tmp_path: Path) -> None:
    # Missing tools are a broken setup, not a reason to skip: `make test` installs chromium.
    assert CHROMIUM is not None, "chromium is missing: tools/system-deps installs it"
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    _recordings(recordings)
    out = tmp_path / "analysed" / "receipts.jsonl"
    pair = ["--pair", str(recordings / "caller.wav"), str(recordings / "agent.wav"), "500"]
    args = ["analyze", str(recordings / "call.wav"), *pair, "--receipts", str(out)]
    assert main([*args, "--no-progress", "--jobs", "1"]) == 0
    receipts = list(read_receipts(str(out)))
    shot = Path(os.environ.get("VOXPROXY_SCREENSHOT") or tmp_path / "report.png")
    seen = asyncio.run(_browse(out.parent / "report.html", shot))

    stereo, paired = seen["loaded"]
    assert [a["src"] for a in stereo["audio"]] == ["../recordings/call.wav"]
    assert [a["src"] for a in paired["audio"]] == [
        "../recordings/caller.wav",
        "../recordings/agent.wav",
    ]
    for call, receipt in zip(seen["loaded"], receipts, strict=True):
        for a in call["audio"]:
            assert a["error"] is None and a["readyState"] >= 1
        # Each element is as long as its file: the whole call, or the agent's 500 ms less.
        assert call["audio"][0]["duration"] * 1000 == pytest.approx(receipt.duration_ms, abs=2)
        first = next(t for t in receipt.turns if t.caller_onset_ms is not None)
        assert first.caller_onset_ms is not None
        assert call["caller"][0] == pytest.approx(
            first.caller_onset_ms / receipt.duration_ms * 1000, abs=0.05
        )
        responses = sum(t.ttfs_ms is not None for t in receipt.turns)
        barges = sum(t.barge_in is not None for t in receipt.turns)
        assert (call["ttfs"], call["stops"]) == (responses, barges)
        assert responses >= 2 and barges == 1
        assert call["drawn"] >= len(call["caller"]) + len(call["agent"]) + responses
    assert paired["audio"][1]["duration"] * 1000 == pytest.approx(
        receipts[1].duration_ms - 500, abs=2
    )
    assert stereo["truth"] == 2 * 3 + 1  # each turn's two edges, the barge-in's stop
    assert paired["truth"] == 0  # no truth beside the caller's file
    # The click at 60 % put both files of the pair at the same moment of the call.
    (start_a, t_a), (start_b, t_b) = seen["seek"]
    at = 0.6 * receipts[1].duration_ms / 1000
    assert start_a / 1000 + t_a == pytest.approx(at, abs=0.05)
    assert start_b / 1000 + t_b == pytest.approx(at, abs=0.05)
    played = seen["play"]
    assert "error" not in played, played
    assert played["t"] > 0.2 and played["x"] > 0
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:4] == b"\x89PNG"
