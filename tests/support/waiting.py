"""Waiting for what a test needs to have happened, instead of sleeping and hoping.

``await wait_until(lambda: receipts)`` returns the condition's first truthy value as
soon as it holds, and raises ``AssertionError`` naming what it waited for when it did
not hold within ``timeout_s``: a bound that fails loudly, never a timed assertion (the
bound is generous; a fast machine and a slow one pass alike). The condition may also be
a coroutine function, for a probe of another process (a port that answers, a page's
state). This is the one polling loop the tests share; where the code under test sets an
event or calls a sink, await that instead.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.01


async def wait_until(
    condition: Callable[[], T | Awaitable[T]],
    timeout_s: float = 10.0,
    what: str = "",
    poll_s: float = POLL_S,
) -> T:
    """``condition()``'s first truthy value, polled every ``poll_s`` for up to
    ``timeout_s`` seconds; ``AssertionError`` (with ``what``) when it never comes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(f"not met within {timeout_s} s: {what or condition!r}")
        await asyncio.sleep(poll_s)
