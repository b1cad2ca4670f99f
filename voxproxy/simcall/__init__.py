"""Simulated calls: the vocabulary the load generator and the mock agent share.

A scripted caller (:mod:`voxproxy.loadgen`) and the mock agent
(:mod:`voxproxy.mockagent`) are independent peers, as a real caller and a real agent
are; what both must agree on lives here, below both: the task script (what each
caller turn means, what the tool backend does) and the agent's log of what it really
did (the ground truth a load run is scored against). It ships with them:
``voxproxy load`` and ``voxproxy mock-agent`` run on it.

May import: the standard library, numpy, and from voxproxy only the core (``events``,
``errors``, ``timebase``, ``analysis``, ``audio``). Never ``loadgen`` or ``mockagent``
(enforced by tests/test_layers.py).
"""
