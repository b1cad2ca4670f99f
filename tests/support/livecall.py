"""Live calls for the end-to-end proxy tests (websocket, OpenAI Realtime, WebRTC): the
caller's script with a barge-in, one call through a proxy in this process (or straight
to the agent), each turn's error against the truth, and the bounds they all hold; and a
rendered call's messages played on a websocket at their times (``send_at``, ``drain``)."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from websockets.exceptions import ConnectionClosed

from support.groundtruth import NEVER_WITHHELD, beyond_lag
from support.waiting import wait_until
from voxproxy.clips import clip
from voxproxy.clock import LagMonitor
from voxproxy.core.receipt import Receipt
from voxproxy.core.session import SessionConfig
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.loadgen.caller import BargeIn, CallRecord, Say, ScriptedCaller, Step, WaitAgentEnd
from voxproxy.loadgen.truth import TurnTruth
from voxproxy.mockagent import CallLog, MockAgent
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.transports.websocket import RelayConfig


def publishing_config(upstream: str, dialect: str, secret: bytes) -> ProxyConfig:
    """A proxy to ``upstream`` that publishes every figure (``NEVER_WITHHELD``: a busy
    machine's clock lag would withhold some), so that each can be checked."""
    return ProxyConfig(
        RelayConfig(upstream),
        dialect=dialect,
        secret=secret,
        session=SessionConfig(max_uncertainty_ms=NEVER_WITHHELD),
    )


async def send_at(ws: object, t0: int, messages: list[tuple[int, bytes | str]]) -> None:
    """Send each of ``messages`` on ``ws`` at its time (ns after ``t0``, monotonic)."""
    for t_ns, payload in messages:
        delay = (t0 + t_ns - time.monotonic_ns()) / NS_PER_S
        if delay > 0:
            await asyncio.sleep(delay)
        await ws.send(payload)  # type: ignore[attr-defined]


async def drain(ws: object, into: list[bytes | str] | None = None) -> None:
    """Read ``ws`` until it closes, keeping what it got in ``into`` (if given)."""
    try:
        async for message in ws:  # type: ignore[attr-defined]
            if into is not None:
                into.append(message)
    except ConnectionClosed:
        pass


def barge_script(barge_after_ms: float) -> list[Step]:
    """Three turns; the caller talks over the second answer ``barge_after_ms`` in."""
    return [
        Say(clip("caller_where_is_order")),
        WaitAgentEnd(quiet_ms=400),
        Say(clip("caller_topic_change")),
        BargeIn(after_ms=barge_after_ms, clip=clip("caller_interrupt")),
        WaitAgentEnd(quiet_ms=400),
        Say(clip("caller_yes")),
        WaitAgentEnd(quiet_ms=400),
    ]


def hello_then_barge_in() -> list[Step]:
    """Two turns; the caller talks over the second answer 700 ms in."""
    return [
        Say(clip("caller_hello")),
        WaitAgentEnd(quiet_ms=300),
        Say(clip("caller_yes")),
        BargeIn(after_ms=700, clip=clip("caller_yes")),
        WaitAgentEnd(quiet_ms=300),
    ]


@asynccontextmanager
async def agent_behind_proxy(
    agent: MockAgent, secret: bytes
) -> AsyncIterator[tuple[int, dict[str, Receipt]]]:
    """``agent`` started behind a proxy (``--dialect auto``) for the block: the proxy's
    port and its receipts by call; both stopped at the end."""
    await agent.start()
    receipts: dict[str, Receipt] = {}
    proxy = Proxy(
        ProxyConfig(RelayConfig(agent.url), dialect="auto", secret=secret),
        sinks=[lambda r: receipts.__setitem__(r.call, r)],
    )
    port = await proxy.start("127.0.0.1", 0)
    try:
        yield port, receipts
    finally:
        await proxy.stop()
        await agent.stop()


@dataclass
class Outcome:
    receipt: Receipt | None  # None when the call went straight to the agent
    record: CallRecord
    log: CallLog
    loop_lag: LagMonitor | None = None  # the proxy's, of the loop it shares with both ends


async def call_through(
    agent: MockAgent,
    config: ProxyConfig,
    caller: Callable[[str], ScriptedCaller],
    path: str,
    via_proxy: bool = True,
) -> Outcome:
    """One call by ``caller(url)`` to the started ``agent`` at ``path``, through a proxy
    with ``config`` (or straight to the agent); stops both and checks the call went
    through with one receipt."""
    receipts: list[Receipt] = []
    proxy = Proxy(config, sinks=[receipts.append])
    port = await proxy.start("127.0.0.1", 0)
    url = f"ws://127.0.0.1:{port}{path}" if via_proxy else f"{agent.url}{path}"
    record = await caller(url).run()
    if via_proxy:
        await wait_until(lambda: receipts, what="the receipt")
    await proxy.stop()
    await agent.stop()
    assert record.error is None, record.error
    if not via_proxy:
        return Outcome(None, record, agent.calls[0])
    assert len(receipts) == 1
    return Outcome(receipts[0], record, agent.calls[0], proxy.clock_lag)


# Around a clock reading, the span whose loop blocks it may carry: the proxy's own
# (voxproxy/core/session/evidence.py) from 100 ms before to 350 ms after its edge.
_LAG_BEFORE_NS = 100 * NS_PER_MS
_LAG_AFTER_NS = 350 * NS_PER_MS


def truth_lag_ms(loop_lag: LagMonitor, *instants_ns: int) -> float:
    """How late this process's event loop ran near the truth's own instants: the caller
    and the agent stamp them on the loop the proxy runs on, so when the machine is busy
    the truth is off by as much as the proxy's readings (the proxy's monitor saw it)."""
    return (
        sum(loop_lag.max_between(t - _LAG_BEFORE_NS, t + _LAG_AFTER_NS) for t in instants_ns)
        / NS_PER_MS
    )


def turn_errors(
    receipt: Receipt,
    truths: Sequence[TurnTruth],
    evidence: str,
    ttfs_err: list[float],
    stop_err: list[float],
    spec: object = None,
    loop_lag: LagMonitor | None = None,
) -> None:
    """Append each response's time-to-first-sound error and each barge-in's stop
    latency error (beyond the clock lag it states) to the lists: the receipt must have
    one response turn per true turn, four in all, with nothing it could not read; a
    barge-in must have stopped the agent with ``evidence``, a turn without one none.
    With ``loop_lag`` (the monitor of the loop the caller and the agent stamped the truth
    on), the time to first sound is also allowed the lag near the truth's two instants."""
    responses = [t for t in receipt.turns if t.kind == "response"]
    assert len(responses) == len(truths) == 4, (spec, receipt.turns, truths)
    assert receipt.anomalies == {}
    for truth, turn in zip(truths, responses, strict=True):
        assert truth.ttfs_ns is not None and turn.ttfs_ms is not None, (spec, turn)
        assert turn.ttfs_uncertainty_ms is not None
        allowed = turn.ttfs_uncertainty_ms
        if loop_lag is not None:
            answered_ns = truth.caller_offset_ns + truth.ttfs_ns
            allowed += truth_lag_ms(loop_lag, truth.caller_offset_ns, answered_ns)
        ttfs_err.append(beyond_lag(turn.ttfs_ms - truth.ttfs_ns / NS_PER_MS, allowed))
        if truth.barge_in:
            assert turn.barge_in is not None, (spec, turn)
            assert turn.barge_in.outcome == "stopped"
            assert turn.barge_in.evidence == evidence
            assert truth.stop_latency_ns is not None and turn.barge_in.stop_latency_ms is not None
            stop_err.append(
                beyond_lag(
                    turn.barge_in.stop_latency_ms - truth.stop_latency_ns / NS_PER_MS,
                    turn.barge_in.stop_uncertainty_ms,
                )
            )
        else:
            assert turn.barge_in is None


# The longest event-loop stall a scripted live call is still its script under: its caller
# and agent react in 120 to 400 ms (the quiet before the next line, the reaction to a
# barge-in), so a longer stall changes what they did, not only when it was heard, and the
# truth taken from the script no longer describes the call. The loop is the one the
# caller, the agent and the proxy share; a stall is the machine's (on two cores, beside
# two busy loops and another test process) or the proxy's own work.
MAX_STALL_MS = 250.0


def worst_stall_ms(outcomes: Sequence[Any]) -> float:
    """The longest stall of the loop the calls ran on, as their proxies' monitors saw it
    (each outcome's ``loop_lag``)."""
    monitors = [o.loop_lag for o in outcomes if o.loop_lag is not None]
    return max((m.max_lag_ns for m in monitors), default=0) / NS_PER_MS


async def every_call(
    one_call: Callable[..., Awaitable[Any]], specs: Sequence[Sequence[Any]]
) -> list[Any]:
    """All of ``specs``' calls at once, ``one_call(n, *spec)`` for call ``n``: the ``run``
    of :func:`checked_live_calls` for a table of calls."""
    return list(await asyncio.gather(*(one_call(n, *spec) for n, spec in enumerate(specs))))


async def checked_live_calls(
    run: Callable[[], Awaitable[Sequence[Any]]],
    check: Callable[[Sequence[Any]], None],
    off_script: Callable[[Sequence[Any]], str | None] = lambda outcomes: None,
) -> None:
    """Run the live calls and ``check`` their outcomes. A check that fails on a run whose
    loop stalled past MAX_STALL_MS, or that ``off_script`` says did not keep its script
    (read from the truth alone: an agent that answered seconds after its scripted delay
    was starved of CPU, though no single turn of the loop ran long), is the machine's, not
    the product's: said out loud, the calls run once more and that run's check decides.
    A failure on a run that neither stalled nor left its script is the test's failure at
    once."""
    outcomes = await run()
    try:
        check(outcomes)
    except AssertionError as failure:
        stall = worst_stall_ms(outcomes)
        why = off_script(outcomes)
        if stall <= MAX_STALL_MS and why is None:
            raise
        print(
            f"live calls failed on a loop that stalled {stall:.0f} ms (the script holds up to "
            f"{MAX_STALL_MS:.0f}; off script: {why}): {str(failure)[:300]}; calling once more"
        )
        outcomes = await run()
        print(
            f"the second run's loop stalled at most {worst_stall_ms(outcomes):.0f} ms "
            f"(off script: {off_script(outcomes)})"
        )
        check(outcomes)


def late_answers(delays_ms: Sequence[float], truths: Sequence[Sequence[TurnTruth]]) -> str | None:
    """Which calls' agents answered later than their script allows (their ``delays_ms``
    plus a second: jitter, reaction and the agent's end-of-turn wait are well under it),
    by the truth; None when every answer kept to it."""
    late = [
        f"call {n}: {truth.ttfs_ns / NS_PER_MS:.0f} ms for a {delay:.0f} ms delay"
        for n, (delay, call) in enumerate(zip(delays_ms, truths, strict=True))
        for truth in call
        if truth.ttfs_ns is not None and truth.ttfs_ns / NS_PER_MS > delay + 1000.0
    ]
    return "; ".join(late) or None


def live_bounds(
    label: str, ttfs_err: Sequence[float], stop_err: Sequence[float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Print the errors and check the bounds every live test holds, looser than the
    fake-clock ones (real scheduling jitter on the event loops): time to first sound
    within 30 ms at p95 and 60 ms at most, stop latency within 60 ms. The absolute
    errors, for the checks a test adds."""
    t, s = np.abs(np.array(ttfs_err)), np.abs(np.array(stop_err))
    assert t.size >= 1  # a test that withheld every figure has checked nothing

    def stats(kind: str, errors: Sequence[float], a: npt.NDArray[np.float64]) -> str:
        if a.size == 0:
            return f"{kind}: none published"
        return (
            f"{kind} err mean {np.mean(errors):+.1f} |err| p95 {np.percentile(a, 95):.1f} "
            f"max {a.max():.1f} ms (n={a.size})"
        )

    print(f"live {label}: {stats('ttfs', ttfs_err, t)}; {stats('stop', stop_err, s)}")
    assert np.percentile(t, 95) <= 30.0 and t.max() <= 60.0
    assert s.size == 0 or s.max() <= 60.0
    return t, s


class _OnlyHeldHere:
    """For an object that takes no weak reference (a class compiled by mypyc, see
    voxproxy/native.py): held here, and "gone" once nothing else refers to it, which is
    when reference counting alone would free it once this lets go."""

    def __init__(self, obj: object) -> None:
        self._obj: object | None = obj

    def __call__(self) -> object | None:
        obj = self._obj
        # The references: this holder's, ``obj`` here, and getrefcount's argument.
        if obj is not None and sys.getrefcount(obj) <= 3:
            return None
        return obj

    def release(self) -> None:
        self._obj = None


@contextmanager
def sessions_of(
    monkeypatch: pytest.MonkeyPatch, context: type[Any]
) -> Iterator[list[Callable[[], object | None]]]:
    """Weak references to the session of each call ``context`` (a proxy's call context
    class) makes inside, with the cycle collector off: what is gone at the end was freed
    by reference counting alone (a compiled session is held, and is gone when nothing
    else holds it)."""
    sessions: list[Callable[[], object | None]] = []
    real_init = context.__init__

    def spy_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        try:
            sessions.append(weakref.ref(self.session))
        except TypeError:
            sessions.append(_OnlyHeldHere(self.session))

    monkeypatch.setattr(context, "__init__", spy_init)
    gc.collect()
    gc.disable()
    try:
        yield sessions
    finally:
        gc.enable()
        for ref in sessions:
            if isinstance(ref, _OnlyHeldHere):
                ref.release()
