"""Transcript scoring: what the agent heard, against what the caller said.

:mod:`~voxproxy.transcripts.policy` (the written normalization policy),
:mod:`~voxproxy.transcripts.normalize` (text to tokens), :mod:`~voxproxy.transcripts.terms`
(meaning-bearing terms), :mod:`~voxproxy.transcripts.score` (one alignment, every figure),
:mod:`~voxproxy.transcripts.scorecard` (the weighted card),
:mod:`~voxproxy.transcripts.inputs` (text and SegLST files, cpWER/tcpWER),
:mod:`~voxproxy.transcripts.runlog` (the table of runs) and
:mod:`~voxproxy.transcripts.loadrun` (per-turn scores in a load run).

Scores belong to load-run results and to the ``voxproxy transcripts`` command; they
never go into receipts, which stay content-free.

May import: the standard library, jiwer, meeteval, yaml, and from voxproxy ``errors``,
``timebase``, ``yamlmodel`` and ``extras``. It knows nothing of calls, proxies or wires.
"""

from voxproxy.transcripts.score import PairScore, Scoring, Tally

__all__ = ["PairScore", "Scoring", "Tally"]
