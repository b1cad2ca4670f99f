"""A real browser: headless Chromium calls the WebRTC mock agent through voxproxy.

The call runs in a private network namespace (``unshare -n``, loopback only)
driven by ``tests/support/browsercall.py``; see there for what the page does. The
receipt is checked against what is known without the proxy:

* the caller's speech edges: the fixture's edges in the fake microphone's file,
  placed by the moment its first loud sample played, seen in the page's own copy
  of the microphone (that copy is later than the capture by Chromium's WebAudio
  input path, about 15 ms here, so the proxy's edges come out that much earlier);
* the answer: the agent logged when it sent its clip's speech onset (its known
  response delay after the caller's speech end); the proxy hears it on arrival,
  later only by the Opus look-ahead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


def _run_in_namespace(out: Path) -> subprocess.CompletedProcess[str]:
    caller = HERE / "support" / "browsercall.py"
    script = f"ip link set lo up && exec {sys.executable} {caller} --out {out}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        check=False,
    )


def test_chromium_calls_through_the_proxy_and_the_receipt_matches(tmp_path: Path) -> None:
    # Missing tools are a broken setup, not a reason to skip: `make test` installs chromium.
    assert CHROMIUM is not None, (
        "Debian's chromium is not installed (`make test` installs it: tools/system-deps)"
    )
    assert shutil.which("unshare") is not None and shutil.which("ip") is not None, (
        "needs unshare and ip (util-linux, iproute2) for a private network namespace"
    )
    assert os.geteuid() == 0, "needs root to make a private network namespace"
    out = tmp_path / "browser.json"
    proc = _run_in_namespace(out)
    if proc.returncode != 0 or not out.exists():
        # One retry, said out loud: Chromium's start-up in a fresh namespace is the only part
        # seen to fail here (once in about twenty runs, within two seconds).
        print(f"browser run failed ({proc.returncode}), retrying once: {proc.stderr[-2000:]}")
        proc = _run_in_namespace(out)
    assert proc.returncode == 0 and out.exists(), (proc.returncode, proc.stderr[-3000:])
    r = json.loads(out.read_text())
    page, truth, receipt = r["page"], r["truth_file"], r["receipt"]
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
    turn = responses[0]

    # Everything on this process's monotonic clock, in ms.
    page_minus_mono = r["clock"]["page_minus_mono_ms"]
    start = r["call_start_mono_ms"]
    file_start = page["first"]["mic"] - page_minus_mono - truth["first_loud_ms"]
    mic_after_gum = page["first"]["mic"] - page["events"]["gum_resolved"] - truth["first_loud_ms"]
    onset_err = start + turn["caller_onset_ms"] - (file_start + truth["onset_ms"])
    offset_err = start + turn["caller_offset_ms"] - (file_start + truth["offset_ms"])
    duration_err = (turn["caller_offset_ms"] - turn["caller_onset_ms"]) - (
        truth["offset_ms"] - truth["onset_ms"]
    )
    answer = r["agent"]["responses"][0]
    agent_onset_late = start + turn["agent_onset_ms"] - answer["speech_mono_ms"]
    true_ttfs = answer["speech_mono_ms"] - (file_start + truth["offset_ms"])
    ttfs_err = turn["ttfs_ms"] - true_ttfs
    heard_at_page = page["first"]["remote"] - page_minus_mono - answer["speech_mono_ms"]
    print(
        f"browser: mic started {mic_after_gum:.1f} ms after getUserMedia resolved; caller onset "
        f"err {onset_err:+.1f}, offset err {offset_err:+.1f}, duration err {duration_err:+.1f} ms; "
        f"agent onset {agent_onset_late:+.1f} ms after it was sent (agent delay "
        f"{answer['actual_delay_ms']:.0f} ms); ttfs {turn['ttfs_ms']:.1f} vs {true_ttfs:.1f} "
        f"({ttfs_err:+.1f}); the page heard the answer {heard_at_page:.1f} ms after it was sent "
        f"(jitter buffer and playout, beyond the proxy's vantage point)"
    )
    assert -10.0 <= mic_after_gum <= 60.0
    assert abs(onset_err) <= 30.0 and abs(offset_err) <= 30.0
    assert abs(duration_err) <= 10.0
    assert 0.0 <= agent_onset_late <= 20.0
    assert abs(ttfs_err) <= 40.0
