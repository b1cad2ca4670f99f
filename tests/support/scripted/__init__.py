"""Scripted calls with known truth, on a simulated clock. Pure.

A plan (:class:`CallPlan` for raw PCM and Twilio, :class:`WirePlan` for Telnyx,
Plivo, Vonage, Exotel and OpenAI Realtime) describes a conversation: which clip the
caller says, after what delay the agent answers with which clip, how the agent sends
its audio (paced in real time or in bursts ahead of it), and where the caller barges
in and how the agent reacts. :func:`render` turns the plan into the exact wire
messages both sides would exchange, each with its arrival time at the proxy, together
with the ground truth of every turn, computed from the clips' own speech edges. Tests
feed the messages to a :class:`~voxproxy.core.session.CallSession` and compare its receipt
with the truth; benchmarks do the same at scale.

``plan`` (what a call is made of), ``kits`` (each wire's messages), ``render`` (the
one renderer); ``flows``: content-free call flows (edges and events, no audio) replayed
into receipts through the real session, for the verdict tests.

For OpenAI Realtime the caller side is the Realtime *client*: it appends 20 ms frames,
and on a barge-in it flushes its own playout and says so with
``conversation.item.truncate`` (``audio_end_ms`` = how much of the item it played when
it sent the truncate, plus ``claim_offset_ms`` to model a client whose estimate is off)
followed by ``response.cancel``. The agent side is the Realtime *server*: its VAD
reports ``speech_started`` ``vad_detect_ms`` after the speech onset (``audio_start_ms``
= onset - ``vad_prefix_ms``) and ``speech_stopped`` ``vad_silence_ms`` after its end,
then ``response.created``, audio deltas, and ``response.done`` (``cancelled`` when the
client cancelled or its VAD interrupted). With ``tool_every``, a turn's answer starts
with a function call: the server sends ``response.function_call_arguments.done``, the
client answers ``tool_latency_ms`` later with a ``function_call_output`` and
``response.create``, and the audio response follows.

Test and benchmark support, not shipped (no command uses it): the standard library (no
clock, no sockets), numpy, and from voxproxy the core, ``clips``, ``receipts`` and
``yamlmodel``.
"""

from support.scripted.heard import add_bed
from support.scripted.mixes import order_status_turns, turn_taking_plans
from support.scripted.plan import (
    WIRE_DIALECTS,
    BargePlan,
    CallPlan,
    Reaction,
    ScriptedCall,
    SendMode,
    TurnPlan,
    TurnTruth,
    WireDialect,
    WirePlan,
)
from support.scripted.render import mix_caller_track, ms_to_ns, played_ns, render, to_rate

__all__ = [
    "WIRE_DIALECTS",
    "BargePlan",
    "CallPlan",
    "Reaction",
    "ScriptedCall",
    "SendMode",
    "TurnPlan",
    "TurnTruth",
    "WireDialect",
    "WirePlan",
    "add_bed",
    "mix_caller_track",
    "ms_to_ns",
    "order_status_turns",
    "played_ns",
    "render",
    "to_rate",
    "turn_taking_plans",
]
