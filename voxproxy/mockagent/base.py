"""What the websocket and the WebRTC mock agents share: their configuration and clips,
the events they post to an event API, ``async with`` around ``start``/``stop``, and
serving from the command line until cancelled."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import aiohttp

from voxproxy.mockagent.config import MockAgentConfig, prepare_clips

logger = logging.getLogger("voxproxy.mockagent")


class AgentBase:
    """A mock agent: ``config``, its ``clips``, and the event API client."""

    def __init__(self, config: MockAgentConfig | None = None) -> None:
        self.config = config or MockAgentConfig()
        self.clips = prepare_clips(self.config)
        self._http: aiohttp.ClientSession | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on ``host``:``port`` (0: a free port); the port it listens on."""
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def post_events(self, call_id: str, events: list[dict[str, Any]]) -> bool:
        """POST ``events`` for ``call_id`` to the configured event API. Never raises."""
        cfg = self.config
        if cfg.post_events_url is None:
            return False
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        url = f"{cfg.post_events_url.rstrip('/')}/v1/calls/{quote(call_id, safe='')}/events"
        headers = {"Authorization": f"Bearer {cfg.events_token}"}
        try:
            async with self._http.post(url, json=events, headers=headers) as resp:
                ok = resp.status == 202
                if not ok:
                    logger.warning("event API answered %d: %s", resp.status, await resp.text())
        except (aiohttp.ClientError, TimeoutError) as exc:
            logger.warning("could not post events: %r", exc)
            ok = False
        return ok

    async def _close_http(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def serve_until_cancelled(agent: AgentBase, host: str, port: int, banner: str) -> None:
    """Start ``agent``, print ``banner`` (its ``{host}`` and ``{port}`` filled in) and
    serve until cancelled."""
    bound = await agent.start(host, port)
    shown = f"[{host}]" if ":" in host else host
    print(banner.format(host=shown, port=bound), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await agent.stop()
