"""Each wire's messages, as a scripted conversation needs them: one kit per dialect.

A kit says what the caller's and the agent's audio messages look like, how the agent
places a played-marker and how the caller echoes it, how the agent flushes, and what
opens and closes the stream. The renderer (:mod:`support.scripted.render`) is the
same for every wire.
"""

from __future__ import annotations

from typing import Any, Protocol

from support.scripted.plan import CallPlan, WirePlan
from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects.exotel import ExotelAgentWire, ExotelCallerWire
from voxproxy.core.dialects.openai_realtime import (
    AudioFormat,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
    parse_format,
)
from voxproxy.core.dialects.plivo import PlivoAgentWire, PlivoCallerWire
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.telnyx import TelnyxAgentWire, TelnyxCallerWire
from voxproxy.core.dialects.telnyx import encode as telnyx_encode
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.core.dialects.vonage import VonageAgentWire, VonageCallerWire
from voxproxy.core.events import Pcm


class Kit:
    """One wire's messages, as the scripted conversation needs them."""

    caller_rate = 8000
    agent_rate = 8000
    marks = True  # the agent places a played-marker after each answer
    echo_on_flush = True  # pending markers come back at a flush (Twilio, Telnyx, Exotel)
    min_chunk_ms = 0
    # Twilio, as first scripted: every pending marker comes back at the flush itself,
    # even one whose audio had played out before it.
    echo_at_flush = False
    wire_call_id: str | None = None

    def setup(self) -> list[bytes | str]:
        return []

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        raise NotImplementedError

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        raise NotImplementedError

    def mark(self, name: str) -> str:
        raise NotImplementedError

    def echo(self, name: str) -> str:
        raise NotImplementedError

    def flush(self) -> str:
        raise NotImplementedError

    def end(self) -> list[bytes | str]:
        return []


class Raw(Kit):
    marks = False

    def __init__(self, rate: int) -> None:
        self.caller_rate = self.agent_rate = rate

    def setup(self) -> list[bytes | str]:
        return [RawWire.start(self.caller_rate)]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return pcm_to_bytes(pcm)

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return RawWire.audio(pcm_to_bytes(pcm))

    def flush(self) -> str:
        return RawWire.clear()


class _StreamCaller(Protocol):
    def connected(self) -> str: ...
    def start(self) -> str: ...
    def media(self, payload: Any, /) -> str: ...
    def mark(self, name: str, /) -> str: ...
    def stop(self) -> str: ...


class _StreamAgent(Protocol):
    def media(self, payload: Any, /) -> str: ...
    def mark(self, name: str, /) -> str: ...
    def clear(self) -> str: ...


class MediaStream(Kit):
    """The Twilio Media Streams shape (Twilio, Telnyx, Exotel): connected and start
    open the stream, the agent's marks come back as the caller's marks, clear flushes,
    stop ends it. A subclass names its two wires and how audio is encoded on them."""

    caller: _StreamCaller
    agent: _StreamAgent

    def encode(self, pcm: Pcm) -> object:
        return pcm

    def setup(self) -> list[bytes | str]:
        return [self.caller.connected(), self.caller.start()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.caller.media(self.encode(pcm))

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.agent.media(self.encode(pcm))

    def mark(self, name: str) -> str:
        return self.agent.mark(name)

    def echo(self, name: str) -> str:
        return self.caller.mark(name)

    def flush(self) -> str:
        return self.agent.clear()

    def end(self) -> list[bytes | str]:
        return [self.caller.stop()]


class Twilio(MediaStream):
    echo_at_flush = True

    def __init__(self, seed: int) -> None:
        caller = TwilioCallerWire(f"MZsim{seed}", f"CAsim{seed}")
        self.caller, self.agent = caller, TwilioAgentWire(caller.stream_sid)
        self.wire_call_id = caller.call_sid

    def encode(self, pcm: Pcm) -> object:
        return pcm_to_ulaw(pcm)


class Telnyx(MediaStream):
    def __init__(self, seed: int, encoding: str = "PCMU") -> None:
        self.caller = TelnyxCallerWire(f"st-{seed}", f"v3:call-{seed}", encoding=encoding)
        self.agent = TelnyxAgentWire()
        self.encoding = encoding

    def encode(self, pcm: Pcm) -> object:
        return telnyx_encode(pcm, self.encoding)


class Exotel(MediaStream):
    min_chunk_ms = 100  # agent chunks of at least 3.2 KB (100 ms)

    def __init__(self, seed: int) -> None:
        self.caller = ExotelCallerWire(f"st-{seed}", f"call-{seed}")
        self.agent = ExotelAgentWire(f"st-{seed}")


def call_kit(plan: CallPlan) -> Kit:
    return Raw(plan.sample_rate_hz) if plan.dialect == "raw" else Twilio(plan.seed)


class Plivo(Kit):
    echo_on_flush = False  # playedStream only "if the preceding events were played"

    def __init__(self, seed: int) -> None:
        self.caller = PlivoCallerWire(f"st-{seed}", f"call-{seed}")
        self.agent = PlivoAgentWire(f"st-{seed}")

    def setup(self) -> list[bytes | str]:
        return [self.caller.start()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.caller.media(pcm)

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.agent.play_audio(pcm)

    def mark(self, name: str) -> str:
        return self.agent.checkpoint(name)

    def echo(self, name: str) -> str:
        return self.caller.played_stream(name)

    def flush(self) -> str:
        return self.agent.clear_audio()


class Vonage(Kit):
    caller_rate = 16000
    agent_rate = 16000
    echo_on_flush = False  # assumed: a cleared notify is not reported as played [D]

    def __init__(self, seed: int) -> None:
        self.caller = VonageCallerWire(16000, {"call_ref": f"call-{seed}"})

    def setup(self) -> list[bytes | str]:
        return [self.caller.connected()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return VonageCallerWire.audio(pcm)

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return VonageAgentWire.audio(pcm)

    def mark(self, name: str) -> str:
        return VonageAgentWire.notify({"name": name})

    def echo(self, name: str) -> str:
        return VonageCallerWire.notify({"name": name})

    def flush(self) -> str:
        return VonageAgentWire.clear()


class Realtime(Kit):
    marks = False

    def __init__(self, plan: WirePlan) -> None:
        fin, fout = parse_format(plan.input_format), parse_format(plan.output_format)
        if fin is None or fout is None:
            raise ValueError(f"unknown format {plan.input_format!r} or {plan.output_format!r}")
        self.fin: AudioFormat = fin
        self.fout: AudioFormat = fout
        self.caller_rate = fin.sample_rate_hz
        self.agent_rate = fout.sample_rate_hz
        self.client = OpenAIRealtimeCallerWire(beta=plan.beta)
        self.server = OpenAIRealtimeAgentWire(beta=plan.beta)

    def setup(self) -> list[bytes | str]:
        return [self.client.session_update(self.fin, self.fout)]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.client.append(self.fin.encode(pcm))

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.server.audio_delta(f"resp_{turn}", f"item_{turn}", self.fout.encode(pcm))


def wire_kit(plan: WirePlan) -> Kit:
    if plan.dialect == "telnyx":
        return Telnyx(plan.seed, plan.telnyx_encoding)
    if plan.dialect == "plivo":
        return Plivo(plan.seed)
    if plan.dialect == "vonage":
        return Vonage(plan.seed)
    if plan.dialect == "exotel":
        return Exotel(plan.seed)
    return Realtime(plan)
