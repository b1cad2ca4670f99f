"""The harness: mock agents behind proxies, driven by the load generator.

It ships because ``voxproxy demo`` runs on it: ``demo`` is the command's work, ``bench``
runs mock agents and proxies in one process (or the proxies in a child process) and a
load run against them, ``ports`` finds a free port for a child. The benchmarks and the
tests start proxies and mock agents the same way; what only they use lives beside them
(``tests/support/``: child processes, hand-made handshakes, the outcome testbench, the
bare queued session; ``benchmarks/cpushare.py``). It is the one place where the two
independent peers, a scripted caller (:mod:`voxproxy.loadgen`) and the mock agent
(:mod:`voxproxy.mockagent`), meet.

May import: anything in voxproxy but ``cli`` and ``commands``. Only the command line
imports it (``commands/demo.py``); nothing in the proxy, the load generator or the mock
agent does (enforced by tests/test_layers.py).
"""
