"""The builder side of the JSON media-stream wires: Twilio, Telnyx, Plivo, Exotel.

Every message these wires carry is a JSON object whose first key is ``"event"``. Around
a message's own fields stand, each under the wire's own key, a sequence number (a
counter from 1 over the messages that carry one: text on Twilio and Telnyx, a number on
Plivo and Exotel) and the stream's id; the agent side of each wire sends no sequence
number, and Telnyx's agent side no stream id. A caller-side media message also numbers
its chunk (from 1) and stamps it with the milliseconds of audio sent before it.

:class:`StreamWire` keeps those counters and lays a message out; :class:`MarkWire` adds
the messages of the Twilio vocabulary (agent audio in ``media``, ``mark``, ``clear``)
that Twilio, Telnyx and Exotel share. Each wire's ``*CallerWire`` / ``*AgentWire``
names its keys and writes its own fields. The decoders of the same wires are in
``_telco``; the proxy never builds a message.
"""

from __future__ import annotations

import json
from typing import ClassVar, Literal

from voxproxy.core.dialects._common import b64encode, dumps

Layout = Literal["sif", "sfi", "isf", "sf", "fi", "f"]
"""Where the sequence number (``s``) and the stream id (``i``) stand around a message's
own fields (``f``), after ``"event"``. A wire without one of them leaves it out."""


class StreamWire:
    """Counters and layout of one stream's messages, in one direction."""

    seq_key: ClassVar[str | None] = None  # None: these messages carry no sequence number
    seq_as_text: ClassVar[bool] = False  # "1" (Twilio, Telnyx) rather than 1
    id_key: ClassVar[str] = ""
    compact: ClassVar[bool] = True  # orjson's compact text; Twilio's builders: json.dumps

    def __init__(self, stream_id: str | None) -> None:
        self.stream_id = stream_id
        self._seq = 0
        self._chunk = 0
        self._media_ms = 0

    def message(
        self, event: str, fields: dict[str, object] | None = None, at: Layout = "sif"
    ) -> str:
        """The JSON text of one ``event`` message laid out as ``at`` says."""
        msg: dict[str, object] = {"event": event}
        for part in at:
            if part == "s" and self.seq_key is not None:
                self._seq += 1
                msg[self.seq_key] = str(self._seq) if self.seq_as_text else self._seq
            elif part == "i" and self.stream_id is not None:
                msg[self.id_key] = self.stream_id
            elif part == "f" and fields:
                msg.update(fields)
        return dumps(msg) if self.compact else json.dumps(msg)

    def next_chunk(self, duration_ms: int) -> tuple[int, int]:
        """The number of the next media chunk (from 1) and the ms of audio sent before it;
        then ``duration_ms`` more are counted as sent."""
        self._chunk += 1
        sent_ms = self._media_ms
        self._media_ms += duration_ms
        return self._chunk, sent_ms


class MarkWire(StreamWire):
    """The messages of the Twilio vocabulary that Twilio, Telnyx and Exotel share."""

    def agent_media(self, payload: bytes) -> str:
        """Agent audio: ``{"event": "media", <id>, "media": {"payload": <base64>}}``."""
        return self.message("media", {"media": {"payload": b64encode(payload)}})

    def mark(self, name: str) -> str:
        return self.message("mark", {"mark": {"name": name}})

    def clear(self) -> str:
        return self.message("clear")
