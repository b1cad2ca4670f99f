"""The shared pacer: every sender at its deadlines, in order, on one timer."""

from __future__ import annotations

import asyncio
import gc
import itertools
import time

from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.pacing import EARLY_NS, FULL_GC_AFTER, Pacer, Send, pacer


def test_each_sender_runs_at_each_deadline_in_order_never_before_it() -> None:
    frames = 5
    frame_ns = 20 * NS_PER_MS

    async def main() -> tuple[dict[int, list[tuple[int, int]]], Pacer]:
        p = Pacer(asyncio.get_running_loop())
        seen: dict[int, list[tuple[int, int]]] = {}
        finished = asyncio.Event()
        t0 = time.monotonic_ns()

        def sender(n: int) -> Send:
            calls: list[tuple[int, int]] = []
            seen[n] = calls

            def send(now: int, deadline: int) -> int | None:
                calls.append((now, deadline))
                if len(calls) == frames:
                    if all(len(c) == frames for c in seen.values()):
                        finished.set()
                    return None
                return deadline + frame_ns

            return send

        for n in range(4):  # staggered starts, 3 ms apart
            p.add(t0 + n * 3 * NS_PER_MS + frame_ns, sender(n))
        await asyncio.wait_for(finished.wait(), 10)
        return seen, p

    seen, p = asyncio.run(main())
    for calls in seen.values():
        deadlines = [d for _, d in calls]
        assert len(calls) == frames
        assert deadlines == sorted(deadlines)
        assert all(b - a == frame_ns for a, b in itertools.pairwise(deadlines))
        assert all(now >= d - EARLY_NS for now, d in calls)  # at most one timer tick early
    assert p.sends == 4 * frames
    assert len(p) == 0


def test_senders_due_together_share_one_fire_and_a_failing_one_stops_alone() -> None:
    async def main() -> tuple[list[int], Pacer]:
        p = Pacer(asyncio.get_running_loop())
        order: list[int] = []
        done = asyncio.Event()
        deadline0 = time.monotonic_ns() + 5 * NS_PER_MS

        def ok(n: int) -> Send:
            def send(now: int, deadline: int) -> int | None:
                order.append(n)
                if order.count(n) == 2:
                    if n == 2:
                        done.set()
                    return None
                return deadline + 20 * NS_PER_MS

            return send

        def boom(now: int, deadline: int) -> int | None:
            order.append(-1)
            raise RuntimeError("this sender's socket broke")

        for s in (ok(0), boom, ok(1), ok(2)):
            p.add(deadline0, s)
        await asyncio.wait_for(done.wait(), 10)
        return order, p

    order, p = asyncio.run(main())
    assert order == [0, -1, 1, 2, 0, 1, 2]  # added order kept on equal deadlines
    assert p.fires <= 3 < p.sends  # the first fire served all four


def test_senders_that_fell_behind_catch_up_at_once_taking_turns_by_deadline() -> None:
    frame_ns = 20 * NS_PER_MS

    async def main() -> list[tuple[str, int, int]]:
        p = Pacer(asyncio.get_running_loop())
        log: list[tuple[str, int, int]] = []
        done = asyncio.Event()
        now0 = time.monotonic_ns()

        def sender(name: str, frames: int) -> Send:
            def send(now: int, deadline: int) -> int | None:
                log.append((name, deadline, p.fires))
                if sum(1 for n, _, _ in log if n == name) == frames:
                    if len(log) == 8:
                        done.set()
                    return None
                return deadline + frame_ns

            return send

        # "a" is five frames late (the loop was held up 100 ms), "b" three, 10 ms apart.
        p.add(now0 - 100 * NS_PER_MS, sender("a", 5))
        p.add(now0 - 50 * NS_PER_MS, sender("b", 3))
        await asyncio.wait_for(done.wait(), 10)
        return log

    log = asyncio.run(main())
    deadlines = [d for _, d, _ in log]
    assert deadlines == sorted(deadlines)  # by deadline, the two interleaved
    assert [n for n, _, _ in log] == ["a", "a", "a", "b", "a", "b", "a", "b"]
    assert {f for _, _, f in log} == {1}  # all in the first fire: nothing was early


def test_one_pacer_per_running_loop() -> None:
    async def main() -> tuple[Pacer, Pacer]:
        return pacer(), pacer()

    a, b = asyncio.run(main())
    c, _ = asyncio.run(main())
    assert a is b
    assert c is not a


def test_full_collections_are_spaced_out_while_any_pacer_has_senders() -> None:
    saved = gc.get_threshold()
    gc.set_threshold(saved[0], saved[1], 10)  # CPython's default
    seen: list[tuple[str, int]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = Pacer(loop), Pacer(loop)
        finished = {"a": asyncio.Event(), "b": asyncio.Event()}
        now0 = time.monotonic_ns()

        def sender(name: str, frames: int) -> Send:
            left = [frames]

            def send(now: int, deadline: int) -> int | None:
                seen.append((name, gc.get_threshold()[2]))
                left[0] -= 1
                if left[0]:
                    return deadline + 5 * NS_PER_MS
                loop.call_soon(finished[name].set)  # after the fire: the pacer has let go
                return None

            return send

        seen.append(("before", gc.get_threshold()[2]))
        a.add(now0, sender("a", 2))
        b.add(now0, sender("b", 6))
        await finished["a"].wait()
        seen.append(("a done", gc.get_threshold()[2]))  # b still holds
        await finished["b"].wait()
        seen.append(("b done", gc.get_threshold()[2]))

    try:
        asyncio.run(main())
        after = gc.get_threshold()
    finally:
        gc.set_threshold(*saved)
    assert seen[0] == ("before", 10)
    held = {t for n, t in seen if n in ("a", "b", "a done")}
    assert len(held) == 1 and held.pop() >= FULL_GC_AFTER  # raised once, kept while b paced
    assert seen[-1] == ("b done", 10)
    assert after == (saved[0], saved[1], 10)
