"""A call's two directions advanced together at a pump, and, split in two halves, with
other calls' (``voxproxy/core/session/pumps.py``): the energies of every batch due at one
moment in one numpy pass (:func:`batch_energies`; every operation is elementwise or per
window, so each batch gets the values it would have had alone).

The halves reach into :class:`SpeechDetector`'s steps of :meth:`SpeechDetector.advance`
(prepare, analyse, advanced), in the order ``advance`` takes them.
"""

from __future__ import annotations

from voxproxy.core.analysis.energies import F32, batch_energies
from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.events import Pcm


def advance_together(a: SpeechDetector, t_a: int, b: SpeechDetector, t_b: int) -> None:
    """``a.advance(t_a)`` then ``b.advance(t_b)`` (a call's two directions at a pump), the
    energies of the two batches in one pass (:func:`batch_energies`: the same values, half of
    numpy's per-call work) when both have whole frames at the same window and frame."""
    batches = prepare_together(a, t_a, b, t_b)
    if batches is not None:
        usable_a, usable_b = batches
        ea, eb = energies_together(a, [usable_a, usable_b])
        finish_together(a, t_a, b, t_b, (usable_a, ea[0], ea[1]), (usable_b, eb[0], eb[1]))


def prepare_together(
    a: SpeechDetector, t_a: int, b: SpeechDetector, t_b: int
) -> tuple[Pcm, Pcm] | None:
    """The first half of :func:`advance_together`: when both detectors have whole frames at
    the same window and frame length, their batches, whose energies (computed with any
    other batches of the same shape) :func:`finish_together` takes; else both advanced
    alone, and None. Between the two halves nothing may be pushed to either detector."""
    ready_a = a._prepare(t_a)
    ready_b = b._prepare(t_b)
    if ready_a and ready_b and a._win == b._win and a.config.frame_ms == b.config.frame_ms:
        usable_a = a._whole_frames()
        usable_b = b._whole_frames()
        if usable_a is not None and usable_b is not None:
            return usable_a, usable_b
    if ready_a:
        a._analyse()
    a._advanced(t_a)
    if ready_b:
        b._analyse()
    b._advanced(t_b)
    return None


def finish_together(
    a: SpeechDetector,
    t_a: int,
    b: SpeechDetector,
    t_b: int,
    batch_a: tuple[Pcm, F32, F32],
    batch_b: tuple[Pcm, F32, F32],
) -> None:
    """The second half of :func:`advance_together`: each batch (samples, windows' and
    frames' dB) walked, then each detector advanced to its time."""
    a._analyse(batch_a)
    a._advanced(t_a)
    b._analyse(batch_b)
    b._advanced(t_b)


def energies_together(shape: SpeechDetector, batches: list[Pcm]) -> list[tuple[F32, F32]]:
    """:func:`batch_energies` of batches of whole frames of ``shape``'s window and frame
    length (``SpeechDetector.energy_shape``), with its scales (made once per detector)."""
    return batch_energies(
        batches, shape._win, shape.config.frame_ms, shape._win_scale, shape._frame_scale
    )
