"""Pieces the OpenAI Realtime dialect tests share: a decoder with a known secret, and
messages as a Realtime client or server writes them (docs/protocols.md section 5)."""

from __future__ import annotations

import json

import numpy as np

from support.dialectkit import b64, msg
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime import OpenAIRealtimeDecoder
from voxproxy.core.events import Audio, Direction

T = 5_000_000_000
SECRET = b"deployment-secret"
PCM = np.array([0, 1000, -1000, 8000, -32000, 32767], dtype=np.int16)
B64_PCM16 = b64(pcm_to_bytes(PCM))


def decoder() -> OpenAIRealtimeDecoder:
    return OpenAIRealtimeDecoder(DialectOptions(secret=SECRET))


def audio(d: Direction, pcm: np.ndarray = PCM, rate: int = 24000) -> Audio:
    return Audio(d, pcm.astype(np.int16), rate, T)


def delta(kind: str = "response.output_audio.delta", **extra: object) -> str:
    fields: dict[str, object] = {
        "type": kind,
        "event_id": "event_1",
        "response_id": "resp_1",
        "item_id": "item_1",
        "output_index": 0,
        "content_index": 0,
        "delta": B64_PCM16,
    }
    fields.update(extra)
    return json.dumps(fields)


def ga_update(input_type: str, output_type: str) -> str:
    return msg(
        type="session.update",
        session={
            "type": "realtime",
            "audio": {
                "input": {"format": {"type": input_type}, "turn_detection": {"type": "server_vad"}},
                "output": {"format": {"type": output_type}, "voice": "marin"},
            },
        },
    )


def beta_update(input_format: str, output_format: str) -> str:
    return msg(
        type="session.update",
        session={"input_audio_format": input_format, "output_audio_format": output_format},
    )


# Each case runs on a fresh decoder: (name, direction, message, expected events).
