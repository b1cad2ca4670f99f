"""The agent leaking into the caller's channel: found at its lag and level, removed, or
its figures withheld when it cannot be removed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.scripted.recording import (
    recording_plans,
    recording_tracks,
    render_recording,
)

from voxproxy.clips import load_corpus
from voxproxy.recordings.echo import find_and_remove
from voxproxy.recordings.files import Channel, Recording
from voxproxy.recordings.measure import measure, withhold_echo


def _speech(role: str) -> list:  # type: ignore[type-arg]
    return [c for c in load_corpus().values() if c.role == role and c.kind == "speech"]


@pytest.fixture(scope="module")
def call():  # type: ignore[no-untyped-def]
    plans = recording_plans(2, 7, _speech("caller"), _speech("agent"))
    return render_recording(plans[1])  # (the first of three has no barge-in)


@pytest.mark.parametrize(
    ("rate", "lag_ms", "leak_db"), [(8000, 120.0, -20.0), (16000, 35.0, -30.0)]
)
def test_a_leak_is_found_at_its_lag_and_level_and_removed(call, rate, lag_ms, leak_db) -> None:  # type: ignore[no-untyped-def]
    caller, agent = recording_tracks(call, rate, echo_db=leak_db, echo_lag_ms=lag_ms)
    clean, _ = recording_tracks(call, rate)
    found = find_and_remove(Channel(caller, rate, "pcm_s16le"), Channel(agent, rate, "pcm_s16le"))
    assert found.action == "removed"
    assert found.lag_ms == pytest.approx(lag_ms, abs=1000 / rate)
    assert found.leak_db == pytest.approx(leak_db, abs=0.5)
    assert found.caller is not None
    # What is left of the caller channel is the caller: the leak is gone to rounding.
    left = found.caller.pcm.astype(np.float64) - clean
    leak = caller.astype(np.float64) - clean
    assert 10 * np.log10(np.mean(left**2) / np.mean(leak**2)) < -30
    assert found.residual_db is not None and found.residual_db < leak_db - 25


def test_no_leak_is_found_where_there_is_none(call) -> None:  # type: ignore[no-untyped-def]
    caller, agent = recording_tracks(call, 8000)
    found = find_and_remove(Channel(caller, 8000, "ulaw"), Channel(agent, 8000, "ulaw"))
    assert (found.action, found.leak_db, found.caller) == ("none", None, None)


def test_a_leak_whose_path_changes_is_said_and_no_figure_strays(call) -> None:  # type: ignore[no-untyped-def]
    """Half the call the echo comes 120 ms late, half 300 ms late (a handset moved): one
    filter removes one of them; what is left is said (residual_db), and every figure
    published lies within its stated uncertainty."""
    rate = 8000
    early, agent = recording_tracks(call, rate, echo_db=-15.0, echo_lag_ms=120.0)
    late, _ = recording_tracks(call, rate, echo_db=-15.0, echo_lag_ms=300.0)
    half = early.size // 2
    caller = np.concatenate([early[:half], late[half:]])
    found = find_and_remove(Channel(caller, rate, "pcm_s16le"), Channel(agent, rate, "pcm_s16le"))
    assert found.leak_db is not None and found.residual_db is not None
    assert found.residual_db > found.leak_db - 10  # half of it is still there
    rec = _recording(caller, agent, rate)
    receipt = measure(rec, secret=b"t").receipt
    responses = [t for t in receipt.turns if t.kind == "response"]
    assert len(responses) == len(call.truth)
    for truth, turn in zip(call.truth, responses, strict=True):
        if turn.ttfs_ms is not None:
            assert turn.ttfs_uncertainty_ms is not None
            assert abs(turn.ttfs_ms - truth.ttfs_ns / 1e6) <= turn.ttfs_uncertainty_ms + 1


def _recording(caller: np.ndarray, agent: np.ndarray, rate: int) -> Recording:
    return Recording(
        "call.wav",
        Channel(caller, rate, "pcm_s16le"),
        Channel(agent, rate, "pcm_s16le"),
        "wav",
        "stereo",
        ("call.wav",),
    )


def test_figures_the_leak_left_could_move_are_withheld(call) -> None:  # type: ignore[no-untyped-def]
    """A barge-in's onset lies under agent audio: where what the removal left of the leak
    stands near the caller's edge threshold, its stop is withheld (caller_echo); where
    the removal left nothing, it stands."""
    rate = 8000
    caller, agent = recording_tracks(call, rate, echo_db=-20.0)
    rec = _recording(caller, agent, rate)
    found = find_and_remove(rec.caller, rec.agent)
    assert found.caller is not None and found.residual_db is not None
    receipt = measure(rec, secret=b"t").receipt
    barged = [t for t in receipt.turns if t.barge_in is not None]
    assert barged and barged[0].barge_in is not None
    assert barged[0].barge_in.stop_latency_ms is not None
    kept, n = withhold_echo(receipt, replace(found, residual_db=-150.0), found.caller, rec.agent)
    assert n == 0 and kept == receipt
    left, n = withhold_echo(receipt, replace(found, residual_db=0.0), found.caller, rec.agent)
    assert n >= 1
    b = next(t.barge_in for t in left.turns if t.barge_in is not None)
    assert b is not None
    assert (b.stop_latency_ms, b.outcome, b.reason) == (None, "unknown", "caller_echo")
    assert left.summary.stop_latency_ms_max is None or left.summary.barge_ins_stopped == 0


def test_a_mono_pair_at_other_rates_and_an_offset_is_aligned_first(call) -> None:  # type: ignore[no-untyped-def]
    caller16, agent16 = recording_tracks(call, 16000, echo_db=-20.0, echo_lag_ms=80.0)
    offset = 4000  # the agent's file starts 250 ms into the caller's
    agent = Channel(agent16[offset:], 16000, "pcm_s16le", start_ns=250_000_000)
    found = find_and_remove(Channel(caller16, 16000, "pcm_s16le"), agent)
    assert found.action == "removed" and found.lag_ms == pytest.approx(80.0, abs=0.1)
    _, agent8 = recording_tracks(call, 8000)
    found8 = find_and_remove(
        Channel(caller16, 16000, "pcm_s16le"), Channel(agent8, 8000, "pcm_s16le")
    )
    assert found8.lag_ms == pytest.approx(80.0, abs=0.2)


def test_the_normal_equations_are_the_regressions() -> None:
    """X'X and X'y from prefix sums and a correlation equal the matrix products."""
    from voxproxy.recordings.echo import _normal_equations

    rng = np.random.default_rng(3)
    k, n = 9, 200
    u = rng.standard_normal(n + k - 1) * 1000
    y = rng.standard_normal(n) * 1000
    x = np.stack([u[k - 1 - j : k - 1 - j + n] for j in range(k)], axis=1)
    gram, cross = _normal_equations(u, y, k)
    assert np.allclose(gram, x.T @ x, rtol=1e-9)
    assert np.allclose(cross, x.T @ y, rtol=1e-9)
