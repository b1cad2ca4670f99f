"""The :class:`Audio` event and its samples' type :data:`Pcm` (both re-exported by
:mod:`voxproxy.core.events`, where the rest of the vocabulary is).

It is made for nearly every message (50 a second each way), so it is a plain class
compiled with the measurement core (``voxproxy/native.py``): a decoder compiled with it
makes one with a native call. As a dataclass its ``__init__`` stayed interpreted even
when compiled (mypyc leaves a dataclass's generated ``__init__`` to Python): an
interpreted frame a message (docs/performance.md, "The compiled build").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # annotations only
    from voxproxy.core.direction import Direction

Pcm = npt.NDArray[np.int16]
"""Mono 16-bit PCM samples."""


class Audio:
    """Audio carried by one message, decoded to 16-bit PCM.

    Not frozen, as the other events are (a frozen class sets each field through
    ``object.__setattr__``): treat it as read-only all the same. Two are equal when every
    field is, the samples compared value by value."""

    __slots__ = ("direction", "item_id", "pcm", "sample_rate_hz", "t_ns")

    def __init__(
        self,
        direction: Direction,
        pcm: Pcm,
        sample_rate_hz: int,
        t_ns: int,
        item_id: str | None = None,
    ) -> None:
        self.direction = direction
        self.pcm = pcm
        self.sample_rate_hz = sample_rate_hz
        self.t_ns = t_ns
        # The wire's id of the audio item this chunk belongs to (OpenAI Realtime
        # ``item_id``), so that a truncate can be checked against the playout model.
        # Kept in memory only.
        self.item_id = item_id

    def __repr__(self) -> str:
        return (
            f"Audio(direction={self.direction!r}, pcm=<{self.pcm.size} samples>, "
            f"sample_rate_hz={self.sample_rate_hz}, t_ns={self.t_ns}, item_id={self.item_id!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Audio):
            return NotImplemented
        return (
            self.direction == other.direction
            and self.sample_rate_hz == other.sample_rate_hz
            and self.t_ns == other.t_ns
            and self.item_id == other.item_id
            and bool(np.array_equal(self.pcm, other.pcm))
        )

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value)
