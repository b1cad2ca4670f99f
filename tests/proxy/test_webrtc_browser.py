"""A real browser: headless Chromium calls the WebRTC mock agent through voxproxy.

The call runs in a private network namespace (``unshare -n``, loopback only)
driven by ``tests/support/browsercall.py``; see there for what the page does. The
receipt is checked against what is known without the proxy:

* the caller's speech edges: the fixture's edges in the fake microphone's file,
  whose start lies between the call to ``getUserMedia`` (the fake device plays from
  then) and the moment the page's own copy of the microphone heard its first loud
  sample less the silence before it (that copy is late by Chromium's WebAudio input
  path, 2 to 49 ms here, so it bounds the start but does not place it);
* the answer: the agent logged when it sent its clip's speech onset (its known
  response delay after the caller's speech end); the proxy hears it on arrival,
  later only by the Opus look-ahead;
* what the browser played: the page's copy of the agent's audio heard its first
  loud sample some time after the proxy's agent onset. The proxy declares the
  browser's playout floor (``downstream_offset_ms``, ``DOWNSTREAM_OFFSET_MS``) and
  states in the figure's uncertainty what it could see of the rest (the page's
  jitter reports, the relay's late packets): the page must hear the answer within
  that uncertainty of the onset plus the offset, later only by the page's own
  WebAudio path (``PAGE_PATH_MS``). Before the proxy stated any of this, the page
  heard it 35-65 ms after the proxy's figure, and twice in twelve 190-200 ms.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.browsercall import DOWNSTREAM_OFFSET_MS
from support.groundtruth import LOAD_REASONS

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


def _run_in_namespace(out: Path) -> subprocess.CompletedProcess[str]:
    caller = TESTS / "support" / "browsercall.py"
    script = f"ip link set lo up && exec {sys.executable} {caller} --out {out}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS.parent), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        check=False,
    )


# How late the page's WebAudio copy of a track may hear it (seen on the microphone's side:
# 2 to 49 ms): what the page measures of the answer is late by up to this much too.
PAGE_PATH_MS = 49.0


def _call(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """One browser call through the proxy: what the run wrote, and the receipt's one
    response turn (the page, the agent and the receipt checked on the way)."""
    proc = _run_in_namespace(out)
    if proc.returncode != 0 or not out.exists():
        # One retry, said out loud: Chromium's start-up in a fresh namespace is the only part
        # seen to fail here (once in about twenty runs, within two seconds).
        print(f"browser run failed ({proc.returncode}), retrying once: {proc.stderr[-2000:]}")
        proc = _run_in_namespace(out)
    assert proc.returncode == 0 and out.exists(), (proc.returncode, proc.stderr[-3000:])
    r = json.loads(out.read_text())
    page, receipt = r["page"], r["receipt"]
    assert page["status"] == 201 and page["connectionState"] == "connected", page
    assert page["delete_status"] == 200
    assert page["errors"] == []
    # Nothing but loopback was ever offered.
    assert page["candidates"] and all(" 127.0.0.1 " in c for c in page["candidates"])
    # The page's oai-events channel reached the agent and the agent's echo came back.
    assert r["agent"]["channel_messages"] == ['{"type":"session.update","session":{}}']
    assert page["channel"] == 'echo:{"type":"session.update","session":{}}'

    assert receipt is not None
    assert receipt["transport"] == "webrtc" and receipt["terminal"] == "caller_closed"
    assert receipt["dialect"] == "openai-realtime"  # the oai-events channel was decoded
    responses = [t for t in receipt["turns"] if t["kind"] == "response"]
    assert len(responses) == 1, receipt["turns"]
    return r, responses[0]


# How wide the span where the microphone's file started may be for the figures to be
# checked against it (the truth's own uncertainty, below).
MAX_SPAN_MS = 100.0
CALLS = 3  # browser calls at most, when a busy machine spoils one (see the test)


def _file_start(r: dict[str, Any]) -> tuple[float, float]:
    """Where the microphone's file started playing, on this process's monotonic clock (ms):
    known to lie between two instants. The fake device cannot play before getUserMedia asks
    for it, and the page cannot hear a sample before it plays. The page's copy is late by
    Chromium's WebAudio input path, and by a varying amount (2 to 28 ms over 17 runs here,
    49 in CI on a busy machine): taken as the start itself, it moved the truth by that
    much, so the proxy's figures are held to the span."""
    page, truth = r["page"], r["truth_file"]
    page_minus_mono = r["clock"]["page_minus_mono_ms"]
    earliest = page["events"]["gum_called"] - page_minus_mono
    latest = page["first"]["mic"] - page_minus_mono - truth["first_loud_ms"]
    return earliest, latest


def _span_ms(r: dict[str, Any]) -> float:
    earliest, latest = _file_start(r)
    return latest - earliest


def test_chromium_calls_through_the_proxy_and_the_receipt_matches(tmp_path: Path) -> None:
    # Missing tools are a broken setup, not a reason to skip: `make test` installs chromium.
    assert CHROMIUM is not None, (
        "Debian's chromium is not installed (`make test` installs it: tools/system-deps)"
    )
    assert shutil.which("unshare") is not None and shutil.which("ip") is not None, (
        "needs unshare and ip (util-linux, iproute2) for a private network namespace"
    )
    assert os.geteuid() == 0, "needs root to make a private network namespace"
    # The proxy withholds a figure it cannot stand behind (MEASUREMENT.md): on a machine busy
    # enough (the suite and a browser on two cores) its clock readings may run late or its
    # measurement shed audio. That is the product working, not a wrong figure. And the truth
    # is known only within the span below, which Chromium's input path on a busy machine can
    # widen past what checks the proxy to its bound (110-166 ms seen beside the suite's other
    # process and two busy loops). Either way the call is said out loud and made again, up
    # to CALLS times; a figure withheld for any other reason is a failure at once.
    for attempt in range(CALLS):
        r, turn = _call(tmp_path / f"browser-{attempt}.json")
        if turn["ttfs_ms"] is None:
            assert turn["reason"] in LOAD_REASONS, turn
            print(f"ttfs withheld ({turn['reason']}) on a busy machine: calling once more")
        elif _span_ms(r) > MAX_SPAN_MS:
            print(f"the truth's span is {_span_ms(r):.0f} ms on a busy machine: calling again")
        else:
            break
    assert turn["ttfs_ms"] is not None, turn
    page, truth = r["page"], r["truth_file"]

    # Everything on this process's monotonic clock, in ms (see _file_start).
    page_minus_mono = r["clock"]["page_minus_mono_ms"]
    start = r["call_start_mono_ms"]
    earliest, latest = _file_start(r)

    def outside(value: float, lo: float, hi: float) -> float:
        """How far ``value`` lies outside [lo, hi] (negative: below it)."""
        return min(0.0, value - lo) + max(0.0, value - hi)

    onset_err = outside(start + turn["caller_onset_ms"] - truth["onset_ms"], earliest, latest)
    offset_err = outside(start + turn["caller_offset_ms"] - truth["offset_ms"], earliest, latest)
    duration_err = (turn["caller_offset_ms"] - turn["caller_onset_ms"]) - (
        truth["offset_ms"] - truth["onset_ms"]
    )
    answer = r["agent"]["responses"][0]
    # The receipt's agent times are the caller's (the declared offset added): the proxy's
    # own vantage point is that much earlier.
    offset = r["receipt"]["settings"]["downstream_offset_ms"]
    assert offset == DOWNSTREAM_OFFSET_MS
    agent_onset_late = start + turn["agent_onset_ms"] - offset - answer["speech_mono_ms"]
    # The true ttfs spans the same interval (an earlier file start, a longer ttfs).
    ttfs_lo = answer["speech_mono_ms"] - (latest + truth["offset_ms"])
    ttfs_hi = answer["speech_mono_ms"] - (earliest + truth["offset_ms"])
    ttfs_err = outside(turn["ttfs_ms"] - offset, ttfs_lo, ttfs_hi)
    # What the page played against what the proxy says the caller heard: the agent onset
    # (offset included) within the figure's uncertainty, later only by the page's own path.
    unc = turn["ttfs_uncertainty_ms"]
    played = page["first"]["remote"] - page_minus_mono - (start + turn["agent_onset_ms"])
    played_err = outside(played, -unc, unc + PAGE_PATH_MS)
    heard_after_gum = latest + page_minus_mono - page["events"]["gum_resolved"]
    heard_at_page = page["first"]["remote"] - page_minus_mono - answer["speech_mono_ms"]
    print(
        f"browser: the file started within {latest - earliest:.1f} ms after getUserMedia was "
        f"called (the page heard it {heard_after_gum:.1f} ms after it resolved); caller "
        f"onset {onset_err:+.1f}, offset {offset_err:+.1f} ms "
        f"outside that span, duration err {duration_err:+.1f} ms; agent onset "
        f"{agent_onset_late:+.1f} ms after it was sent (agent delay "
        f"{answer['actual_delay_ms']:.0f} ms); ttfs {turn['ttfs_ms']:.1f} vs {ttfs_lo:.1f} to "
        f"{ttfs_hi:.1f} ({ttfs_err:+.1f} outside); the page heard the answer "
        f"{heard_at_page:.1f} ms after it was sent, {played:+.1f} ms from the proxy's "
        f"onset with the declared {offset:.0f} ms (stated uncertainty {unc:.1f} ms; "
        f"{played_err:+.1f} outside; page jitter buffer {_jitter_buffer(page)}; relay "
        f"{r['relay']})"
    )
    assert 0.0 <= latest - earliest <= MAX_SPAN_MS, (earliest, latest)
    assert abs(onset_err) <= 15.0 and abs(offset_err) <= 15.0
    # Over Opus, -6 to +18 ms over 17 runs (the large ones on the offset's side).
    assert abs(duration_err) <= 25.0
    assert 0.0 <= agent_onset_late <= 20.0
    # The agent's side is late by Opus's look-ahead (above): 8-11 ms.
    assert abs(ttfs_err) <= 25.0
    # Within the stated uncertainty: the browser's jitter buffer is the declared offset
    # plus what the figure's uncertainty says it may have grown by.
    assert played_err == 0.0, (played, unc)


def _jitter_buffer(page: dict[str, Any]) -> str:
    """The page's inbound audio stats: the mean jitter buffer delay and target, in ms."""
    s = page.get("inbound") or {}
    n = s.get("jitterBufferEmittedCount") or 0
    if not n:
        return "unknown"
    mean = 1000 * s["jitterBufferDelay"] / n
    target = 1000 * (s.get("jitterBufferTargetDelay") or 0) / n
    return f"mean {mean:.1f} ms, target {target:.1f} ms"
