"""The load generator speaks Telnyx, Plivo, Vonage and Exotel (and Twilio with custom
parameters): a scripted caller through the proxy, with the matching --dialect, to a small
agent that answers each caller turn on the same wire and places a playback marker.

The proxy must take the call as that wire (no mismatch, no anomaly), measure both turns,
and see the caller answer each marker as that wire does; the caller must hear both
answers. A 44.1 kHz stereo recording is played as the clip it holds.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
from support.groundtruth import beside_load, require_published
from support.livecall import publishing_config
from support.scripted.kits import Exotel, Kit, Plivo, Telnyx, Vonage
from support.scripted.render import to_rate
from support.waiting import wait_until
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voxproxy.clips import clip
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import CALLER_TO_AGENT, Audio, MarkEcho
from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.caller import CallerConfig, CallRecord, Say, ScriptedCaller, WaitAgentEnd
from voxproxy.proxy.websocket import Proxy

KITS: dict[str, type[Kit]] = {
    "telnyx": Telnyx,
    "plivo": Plivo,
    "vonage": Vonage,
    "exotel": Exotel,
}
ANSWER_AFTER_QUIET_MS = 400.0


class Agent:
    """Answers each caller turn (speech, then 400 ms below the speech level) with a clip
    and a marker, on ``dialect``'s wire; keeps what it received."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.kit = KITS[dialect](0)
        self.received: list[bytes | str] = []
        self.echoes: list[str] = []
        self.answers = 0

    async def __call__(self, ws: ServerConnection) -> None:
        decoder = make_decoder(self.dialect, DialectOptions(secret=b"wires"))
        voiced, quiet_ms = False, 0.0
        answer = to_rate(clip("agent_confirm").pcm, 16000, self.kit.agent_rate)
        chunk = self.kit.agent_rate // 10  # 100 ms: Exotel's smallest chunk, fine for all
        try:
            async for message in ws:
                self.received.append(message)
                for ev in decoder.decode(CALLER_TO_AGENT, message, 0):
                    if isinstance(ev, MarkEcho):
                        self.echoes.append(ev.name)
                    if not isinstance(ev, Audio) or ev.pcm.size == 0:
                        continue
                    rms = float(np.sqrt(np.mean(ev.pcm.astype(np.float64) ** 2)))
                    if rms > 300.0:
                        voiced, quiet_ms = True, 0.0
                    elif voiced:
                        quiet_ms += 1000.0 * ev.pcm.size / ev.sample_rate_hz
                    if voiced and quiet_ms >= ANSWER_AFTER_QUIET_MS:
                        voiced, quiet_ms = False, 0.0
                        self.answers += 1
                        for i in range(0, answer.size - chunk + 1, chunk):
                            await ws.send(self.kit.agent_audio(answer[i : i + chunk], 0))
                        await ws.send(self.kit.mark(f"answer-{self.answers}"))
        except ConnectionClosed:
            pass


@asynccontextmanager
async def through_proxy(agent: Agent) -> AsyncIterator[tuple[str, list[Receipt]]]:
    receipts: list[Receipt] = []
    async with serve(agent, "127.0.0.1", 0, compression=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        # Every figure published (a busy machine's clock lag would withhold it): these
        # tests are about the wires, the accuracy tests allow for the lag.
        config = publishing_config(f"ws://127.0.0.1:{port}", agent.dialect, b"s")
        proxy = Proxy(config, sinks=[receipts.append])
        bound = await proxy.start("127.0.0.1", 0)
        try:
            yield f"ws://127.0.0.1:{bound}", receipts
        finally:
            await proxy.stop()


async def _call(dialect: str, url: str, **extra: object) -> CallRecord:
    config = CallerConfig(url=url, dialect=dialect, keep_messages=True, **extra)  # type: ignore[arg-type]
    steps = [Say(clip("caller_hello")), WaitAgentEnd(), Say(clip("caller_thanks")), WaitAgentEnd()]
    return await ScriptedCaller(config, steps).run()  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("dialect", sorted(KITS))
async def test_each_new_wire_round_trips_through_the_proxy(dialect: str) -> None:
    agent = Agent(dialect)
    async with through_proxy(agent) as (url, receipts):
        record = await _call(dialect, url)
        await wait_until(lambda: receipts, what="the receipt, written as the call ends")
    assert record.error is None, record.error
    assert agent.answers == 2
    # The caller heard both answers, and answered both markers as its wire does.
    assert len(record.agent_spurts) >= 2, record.agent_spurts
    assert len(agent.echoes) == 2, agent.received[-3:]
    (receipt,) = receipts
    assert receipt.dialect == dialect and receipt.wire_looks_like is None
    assert beside_load(receipt.anomalies) == {}, receipt.anomalies
    assert [t.kind for t in receipt.turns] == ["response", "response"]
    # Both measured (only shed measurement could withhold one here, and not both).
    assert receipt.summary.responses == require_published(receipt.turns, dialect)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dialect", "path"), [("twilio", "customParameters"), ("telnyx", "custom_parameters")]
)
@pytest.mark.slow
async def test_custom_parameters_go_in_the_start_message(dialect: str, path: str) -> None:
    got: list[bytes | str] = []

    async def silent(ws: ServerConnection) -> None:
        async for message in ws:
            got.append(message)

    async with serve(silent, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        config = CallerConfig(
            url=f"ws://127.0.0.1:{port}",
            dialect=dialect,  # type: ignore[arg-type]
            custom_parameters=(("tenant", "42"), ("FirstName", "Jane")),
        )
        await ScriptedCaller(config, [Say(clip("caller_yes"))]).run()
    starts = [json.loads(m) for m in got if isinstance(m, str) and '"start"' in m]
    start = next(s for s in starts if s.get("event") == "start")
    assert start["start"][path] == {"tenant": "42", "FirstName": "Jane"}


def test_param_is_refused_on_a_wire_without_custom_parameters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from voxproxy.cli import main

    argv = ["load", "normal_question", "--target", "ws://127.0.0.1:9", "--out", str(tmp_path)]
    assert main([*argv, "--dialect", "vonage", "--param", "a=b"]) == 2
    assert "only the twilio and telnyx wires carry custom parameters" in capsys.readouterr().err
