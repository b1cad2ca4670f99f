"""Dialect ``openai-realtime``: the OpenAI Realtime API over a websocket
(docs/protocols.md section 5).

The proxy sits between a Realtime *client* (the caller side: it appends the
caller's audio and plays the model's audio) and the Realtime *server* (the
agent side). Every message is JSON text with a ``type``; GA and beta event
names are both understood (openai-python ``types/realtime`` and
``types/beta/realtime``).

Audio

* Caller audio: ``input_audio_buffer.append`` ``audio`` (base64). Agent audio:
  ``response.output_audio.delta`` (beta ``response.audio.delta``) ``delta``.
  Formats (docs/protocols.md section 5, "Audio formats"): pcm16 = 16-bit little-endian mono at
  24 kHz (48 bytes/ms) by default, or G.711 μ-law / A-law at 8 kHz, as
  ``session.update`` sets them (GA ``session.audio.input|output.format.type`` =
  ``audio/pcm|audio/pcmu|audio/pcma``; beta ``input_audio_format`` /
  ``output_audio_format`` = ``pcm16|g711_ulaw|g711_alaw``). The server's
  ``session.created`` / ``session.updated`` set them too.
* The server "will produce audio faster than realtime" (truncate docstring):
  agent audio goes through the session's playout model like Twilio bursts.

Flushes (the client drops audio it has not played; MEASUREMENT.md 3)

* ``conversation.item.truncate``: ``audio_end_ms`` is the client's claimed
  playout position in the item's audio, an *estimate* (docs/protocols.md section 5,
  "What the proxy takes from it"); it rides on the :class:`~voxproxy.core.events.Flush` so the
  session can compare it with the playout model.
* ``response.cancel`` (``response_id`` optional: the response in progress) and
  ``output_audio_buffer.clear`` (WebRTC/SIP only, but harmless here).
* After a truncate of an item or a cancel of a response, later deltas of that
  item or response are not played by the client (the point of truncating is to
  "synchronize the server's understanding of the audio with the client's
  playback"), so they are dropped here and never reach the playout model.

Stages (``StageMark``; MEASUREMENT.md 4, "Stage breakdown")

* ``input_audio_buffer.speech_started`` / ``speech_stopped`` become
  ``server_speech_started`` / ``server_speech_stopped``, placed on the proxy clock
  from ``audio_start_ms`` / ``audio_end_ms``, which count ms "from the start of all
  audio written to the buffer during the session" (they include
  ``prefix_padding_ms`` and the silence duration the server VAD waited). Each
  append's arrival time and cumulative duration are recorded; an append of
  duration d arriving at t covers [t - d, t] (MEASUREMENT.md 1).
* ``response.created`` -> ``response_created``; the first audio delta of each
  response -> ``first_audio_delta``; ``response.done`` -> ``response_done`` with
  ``detail`` = ``status`` or ``status/status_details.reason`` (enumerations only).

Tool calls (MEASUREMENT.md 5)

* ``response.function_call_arguments.done`` -> ``tool.started`` (``operation_id`` =
  ``call_id``, ``tool`` = ``name`` as the event API keeps names: declared
  (``DialectOptions.names``) or name-shaped, else its keyed hash, since the caller
  names the tools in ``session.update``; ``args_hash`` = keyed hash of the canonical
  arguments); ``conversation.item.create`` with a ``function_call_output`` item ->
  ``tool.finished`` (``ok``, ``result_hash``). Argument and output text is hashed
  and dropped at once: it is never kept.
* A response cancelled (client ``response.cancel``, or ``response.done`` with
  status ``cancelled``) while one of its calls is in flight gives a
  ``tool.response_cancelled`` event for that call: the tool was *not* cancelled.

The package: ``formats`` (audio formats), ``decoder`` (the decoder and its event
tables), ``wire`` (message builders for the load generator, the mock agent and tests).
"""

from __future__ import annotations

from voxproxy.core.dialects.openai_realtime.decoder import (
    CLIENT_EVENTS,
    NAME,
    SERVER_EVENTS,
    OpenAIRealtimeDecoder,
)
from voxproxy.core.dialects.openai_realtime.formats import (
    FORMATS,
    PCM16,
    PCMA,
    PCMU,
    AudioFormat,
    parse_format,
)
from voxproxy.core.dialects.openai_realtime.wire import (
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
)

__all__ = [
    "CLIENT_EVENTS",
    "FORMATS",
    "NAME",
    "PCM16",
    "PCMA",
    "PCMU",
    "SERVER_EVENTS",
    "AudioFormat",
    "OpenAIRealtimeAgentWire",
    "OpenAIRealtimeCallerWire",
    "OpenAIRealtimeDecoder",
    "parse_format",
]
