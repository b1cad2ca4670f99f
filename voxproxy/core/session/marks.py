"""Marks and items: what the wire says was played, beside what the playout model says.

:class:`Marks` keeps the agent's marks (Twilio-style ``mark`` messages) until their
echo and how far each echo came from its predicted time; :class:`Items` keeps where
each agent audio item (OpenAI ``item_id``) plays, so that a client's truncate
(``claimed_played_ms``) can be set beside the model's figure. Sans-I/O; a peer's
mark names are never kept (only their hash, in memory).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from voxproxy.core.events import AnomalyKind, Flush

MAX_PENDING_MARKS = 4096  # agent marks awaiting their echo (more: marks_over_limit)
MAX_MARK_NAME_CHARS = 256  # longer mark names are still matched (mark_name_too_long)
MAX_TRUNCATIONS = 10_000  # truncates kept per call (the bound of stage marks)
_MAX_ITEMS = 64  # agent audio items whose playout is remembered (for truncates)
_MAX_ITEM_GAPS = 1024


class Marks:
    """Agent marks awaiting their echo. ``anomalies``: the session's counter."""

    def __init__(self, anomalies: Counter[str]) -> None:
        self._anomalies = anomalies
        # hash(name) -> (predicted echo time, flush count): a peer's names are never kept
        self._pending: dict[int, tuple[int, int]] = {}
        self.errors: list[int] = []  # echo time - predicted time, per echo checked
        self.cleared = 0  # echoes of marks a flush dropped

    def sent(self, name: str, predicted_ns: int, flushes: int) -> None:
        """The agent sent mark ``name``; its echo is due at ``predicted_ns`` unless one
        of the call's flushes (``flushes`` so far) comes first."""
        if len(name) > MAX_MARK_NAME_CHARS:
            self._anomalies[AnomalyKind.MARK_NAME_TOO_LONG.value] += 1
        key = hash(name)  # in memory only, to match the echo
        if key not in self._pending and len(self._pending) >= MAX_PENDING_MARKS:
            self._pending.pop(next(iter(self._pending)))
            self._anomalies[AnomalyKind.MARKS_OVER_LIMIT.value] += 1
        self._pending[key] = (predicted_ns, flushes)

    def echoed(self, name: str, t_ns: int, flushes: int) -> None:
        """The caller echoed mark ``name`` at ``t_ns``."""
        sent = self._pending.pop(hash(name), None)  # (a long name was counted when sent)
        if sent is None:
            return
        predicted, flushes_then = sent
        if flushes != flushes_then:
            self.cleared += 1  # a flush came between: the echo says "dropped"
            return
        self.errors.append(t_ns - predicted)


@dataclass(slots=True)
class _ItemPlay:
    """One agent audio item on the playout timeline."""

    start_ns: int  # its first sample
    end_ns: int  # the end of its latest chunk
    # (start, length) of the pauses between its chunks, when its audio came slower than
    # real time; bounded (a stream with that many pauses is no longer worth modelling).
    gaps: list[tuple[int, int]] = field(default_factory=list)


class Items:
    """Where each agent audio item plays, and the truncates checked against it."""

    def __init__(self) -> None:
        self._items: dict[str, _ItemPlay] = {}  # agent audio items (OpenAI item_id), playout
        self.truncations: list[tuple[int, float, int | None]] = []  # t, claimed ms, modelled ns

    def note(self, item_id: str, start_ns: int, dur_ns: int) -> None:
        """Keep where each agent audio item plays, so that a truncate can be checked."""
        item = self._items.get(item_id)
        if item is None:
            if len(self._items) >= _MAX_ITEMS:
                del self._items[next(iter(self._items))]
            self._items[item_id] = _ItemPlay(start_ns, start_ns + dur_ns)
            return
        if start_ns > item.end_ns and len(item.gaps) < _MAX_ITEM_GAPS:
            item.gaps.append((item.end_ns, start_ns - item.end_ns))  # its audio came slowly
        item.end_ns = start_ns + dur_ns

    def truncate(self, ev: Flush) -> None:
        """The client's claimed playout (``claimed_played_ms``) beside the model's.

        The model's figure is how much of the item's audio had played by the
        truncate's arrival: its audible time up to then, less the pauses inside it.
        """
        assert ev.claimed_played_ms is not None
        item = self._items.get(ev.item_id) if ev.item_id is not None else None
        modelled = None
        if item is not None:
            # The truncate is the client's own act, at its arrival; the item's audio is on
            # the playout timeline, which the downstream offset already moved to the ear.
            t = ev.t_ns
            paused = sum(min(n, max(0, t - a)) for a, n in item.gaps)
            modelled = max(0, min(t, item.end_ns) - item.start_ns - paused)
        if len(self.truncations) < MAX_TRUNCATIONS:
            self.truncations.append((ev.t_ns, ev.claimed_played_ms, modelled))
