"""The harness: mock agents behind proxies, driven by the load generator.

``bench`` runs mock agents and proxies in one process (or the proxies in a child
process) and a load run against them; ``testbench`` is the outcome testbench built on
it; ``demo`` is ``voxproxy demo``; ``ports``, ``child`` (voxproxy commands run as
child processes: their command lines, the port they bound, a stop), ``rawws`` (a
websocket handshake by hand, for agents that misbehave) and ``queued`` (a bare session
as the measurement queue sees a call, for offline runs of the queue) serve the tests
and the benchmarks, which start proxies and mock agents the one way. The demo, the
benchmarks and the tests use it. It is the one place where the two independent peers,
a scripted caller (:mod:`voxproxy.loadgen`) and the mock agent
(:mod:`voxproxy.mockagent`), meet.

May import: anything in voxproxy but ``cli`` and ``commands``. Only the command line
imports it (``commands/demo.py``); nothing in the proxy, the load generator or the mock
agent does (enforced by tests/test_layers.py).
"""
