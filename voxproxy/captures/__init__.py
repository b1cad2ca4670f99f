"""Captures: a call's wire, as the proxy's measurement core was handed it, on disk and
back (issue 38 part 2).

``voxproxy proxy --capture DIR`` writes one file per call (``format``: a documented,
compressed sequence of records: the messages both ways with their arrival times, a
WebRTC call's decoded audio, the events of the event API, the close); ``writer`` does
it off the forwarding path (a buffer per call on the event loop; compression and the
disk in a thread; bounded in memory and on disk; never raising into the proxy).
``voxproxy analyze CAPTURE`` replays one through a new session (``replay``) and gives
the receipt the live proxy gave, ``source: capture``. A capture holds the call's audio:
it is opt-in and its files are the owner's alone (docs/captures.md).

May import: the standard library, numpy, orjson, and from voxproxy the core,
``receipts``, ``clock`` and ``recordings.batch`` (where ``replay`` registers). Never the
proxy, a transport, the load generator, the mock agent, the harness or the commands: the
proxy hands a call's :class:`~voxproxy.captures.writer.CallCapture` to its session as a
:class:`~voxproxy.core.session.tap.SessionTap`.
"""
