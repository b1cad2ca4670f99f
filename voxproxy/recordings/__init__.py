"""Calls that never passed through the proxy, measured all the same (``voxproxy analyze``).

A recording of a call (a dual-channel WAV or FLAC, or two mono files with a declared
offset) is the listener's vantage: what the caller said on one channel, what the caller
heard of the agent on the other. Its samples are handed to the measurement core
(:class:`voxproxy.core.session.CallSession`, ``on_audio``) with times derived from their
sample positions, the agent's audio audible where it lies (no playout model), and the
core's receipt comes back with ``source: recording`` and ``vantage: listener``.

``files`` and ``wavfile`` read and decode files (the I/O shell: RIFF parsed here, FLAC
through soundfile); ``echo`` finds and removes the agent's audio leaking into the caller
channel (pure); ``measure`` feeds the core (pure: no clock, no files); ``batch`` runs a
folder across processes with a progress bar; ``player`` writes ``report.html``, whose
timelines play the calls. Another kind of file (the captures of the proxy's wire, issue
38 part 2) plugs in with ``batch.register_source``: recognised by its first bytes, found
in folders by its suffix, measured by its own reader, then judged, written and reported
like a recording.

May import: the standard library, numpy, rich, soundfile (the ``flac`` extra), and from
voxproxy the core, ``receipts``, ``telemetry``, ``clips``, ``extras``, ``loadgen.report``
(the page's style and charts). Never the proxy, a transport, the load generator's
runner, the mock agent or the harness.
"""
