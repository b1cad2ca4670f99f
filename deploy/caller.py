"""Scripted calls for the compose stack: a steady trickle of real-time calls through voxproxy.

Each call speaks fixture clips in real time (Twilio Media Streams); every other
call barges in on the agent's answer, so both latency histograms fill up.

    python deploy/caller.py --url ws://voxproxy:8765/ --every 4 [--count 0]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import random

from voxproxy.clips import clip
from voxproxy.loadgen.caller import (
    BargeIn,
    CallerConfig,
    Say,
    ScriptedCaller,
    Step,
    WaitAgentEnd,
)

log = logging.getLogger("caller")


def script(n: int) -> list[Step]:
    steps: list[Step] = [Say(clip("caller_where_is_order")), WaitAgentEnd(quiet_ms=500)]
    if n % 2:
        steps += [
            Say(clip("caller_topic_change")),
            BargeIn(after_ms=600 + 100 * (n % 5), clip=clip("caller_interrupt")),
            WaitAgentEnd(quiet_ms=500),
        ]
    steps += [Say(clip("caller_thanks")), WaitAgentEnd(quiet_ms=500)]
    return steps


async def one(url: str, n: int) -> None:
    config = CallerConfig(
        url=url, dialect="twilio", call_id=f"CA{n:032x}", keep_messages=False, seed=n
    )
    record = await ScriptedCaller(config, script(n)).run()
    if record.error:
        log.warning("call %d: %s", n, record.error)
    else:
        log.info("call %d done", n)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="ws://127.0.0.1:8765/")
    parser.add_argument("--every", type=float, default=4.0, help="seconds between call starts")
    parser.add_argument("--count", type=int, default=0, help="calls to make (0: forever)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    await asyncio.sleep(3.0)  # let the proxy and the agent come up
    running: set[asyncio.Task[None]] = set()
    numbers = itertools.count(random.randrange(1 << 32)) if args.count == 0 else range(args.count)
    for n in numbers:
        task = asyncio.create_task(one(args.url, n))
        running.add(task)
        task.add_done_callback(running.discard)
        await asyncio.sleep(args.every)
    await asyncio.gather(*running)


if __name__ == "__main__":
    asyncio.run(main())
