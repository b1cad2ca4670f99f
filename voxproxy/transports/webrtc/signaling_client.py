"""Signaling, the agent's side: voxproxy as the agent's WHIP or Pipecat client."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from yarl import URL

from voxproxy.transports.ends import EndCause

log = logging.getLogger("voxproxy.webrtc")

Signaling = Literal["whip", "pipecat"]


SIGNALINGS: tuple[Signaling, ...] = ("whip", "pipecat")


PIPECAT_PATH = "/api/offer"


WHIP_PATH = "/whip"


class SignalingError(Exception):
    """Signaling failed; ``status`` is the HTTP status to answer the caller with."""

    def __init__(self, status: int, reason: str, cause: EndCause, upstream_status: int | None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.cause = cause
        self.upstream_status = upstream_status


@dataclass(slots=True)
class AgentAnswer:
    status: int
    sdp: str
    session_url: str | None  # WHIP: the Location to DELETE at hang-up
    pc_id: str | None  # pipecat


async def post_offer(
    http: aiohttp.ClientSession,
    url: str,
    signaling: Signaling,
    sdp: str,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    request_data: Any = None,
) -> AgentAnswer:
    """Send our offer to the agent; raises :class:`SignalingError` with the caller's status."""
    hdrs = dict(headers or {})
    if signaling == "whip":
        hdrs["Content-Type"] = "application/sdp"
        body: str = sdp
    else:
        hdrs["Content-Type"] = "application/json"
        payload: dict[str, Any] = {"sdp": sdp, "type": "offer"}
        if request_data is not None:
            payload["request_data"] = request_data
        body = json.dumps(payload)
    try:
        async with asyncio.timeout(timeout_s):
            async with http.post(url, data=body.encode(), headers=hdrs) as resp:
                status = resp.status
                text = await resp.text(errors="replace")
                location = resp.headers.get("Location")
    except TimeoutError:
        raise SignalingError(
            504, "the agent did not answer the offer in time", EndCause.UPSTREAM_TIMEOUT, None
        ) from None
    except aiohttp.ClientError as exc:
        reason = f"the agent is unreachable: {exc}"
        raise SignalingError(502, reason, EndCause.UPSTREAM_UNREACHABLE, None) from None
    if status >= 300:
        shown = " ".join(text.split())[:200] or "no reason given"
        code = status if 400 <= status <= 599 else 502
        raise SignalingError(
            code,
            f"the agent refused the call: HTTP {status}: {shown}",
            EndCause.UPSTREAM_REFUSED,
            status,
        )
    if signaling == "whip":
        answer_sdp, pc_id = text, None
        session_url = str(URL(url).join(URL(location))) if location else None
        if status != 201:
            log.info("WHIP agent answered %d rather than 201", status)
    else:
        session_url = None
        try:
            msg = json.loads(text)
            answer_sdp = str(msg["sdp"])
            pc_id = str(msg.get("pc_id")) if msg.get("pc_id") is not None else None
        except (ValueError, KeyError, TypeError):
            raise SignalingError(
                502,
                "the agent's answer is not the JSON {sdp, type, pc_id} of Pipecat's runner",
                EndCause.UPSTREAM_UNREACHABLE,
                status,
            ) from None
    return AgentAnswer(status, answer_sdp, session_url, pc_id)


async def hang_up(
    http: aiohttp.ClientSession, session_url: str, timeout_s: float = 2.0
) -> int | None:
    """WHIP teardown: DELETE the session URL. Returns the status, None if it failed."""
    try:
        async with asyncio.timeout(timeout_s):
            async with http.delete(session_url) as resp:
                return resp.status
    except Exception:  # unreachable, refused, or our client session already closed
        return None
