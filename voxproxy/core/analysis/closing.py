"""When a talk spurt closes, and where its edges stand by then (a base of the detector).

A spurt's offset is refined once the look-ahead after its last loud window has been
analysed (over a bed, against the noise read after it, which ends before the next
spurt's first loud window where that came first); the spurt closes once the pause after
that offset passes the merge gap plus a look-back, and its onset is walked again at the
level known by then (the whole utterance's, which the truth takes). What the closed
spurt carries is ``SpeechDetector._close``'s (``vad.py``). Compiled with the measurement
core (``voxproxy/native.py``).
"""

from __future__ import annotations

from voxproxy.core.analysis.audible import OFFSET_REFERENCE, REFERENCE_GAP_MS
from voxproxy.core.analysis.floor import NoiseFloor
from voxproxy.core.analysis.vadconfig import CLOSE_LOOKBACK_NS
from voxproxy.core.timebase import NS_PER_MS


class SpurtClosing(NoiseFloor):
    """The closing rules of one direction's detector (a base of ``SpeechDetector``)."""

    _end_cache: tuple[int, int] | None  # (last loud window, the offset refined from it)
    _onset_final: bool  # the onset was walked again at the utterance's own level
    _last_active_t: int  # clock time at the end of the last loud window

    def _cap_reference(self, first_above: int) -> None:
        """The next spurt's first loud window came at ``first_above`` while the open spurt
        waited to close: the noise its offset is read against (after it, OFFSET_REFERENCE)
        must end before that speech as an onset's does (REFERENCE_GAP_MS before it), or the
        bed reads several dB high and the talker too near it (a barge-in's first word 240
        ms before the next: 7.5 dB over a bed 10 dB under it, its edges left unresolved).
        An end walked over the uncapped noise is walked again."""
        self._next_onset_win = first_above
        cached = self._end_cache
        if cached is not None and first_above - REFERENCE_GAP_MS < cached[0] + OFFSET_REFERENCE[1]:
            self._end_cache = None

    def _rewalk_onset(self) -> None:
        """The onset was walked back before the talker's level was known (with a nominal
        level, which stops short of a quiet talker's soft start). With the utterance's
        own level, walk again."""
        self._onset_final = True
        self._walk_onset_again()

    def _refined_end(self) -> int:
        """The open spurt's offset window; final once the look-ahead has been analysed."""
        win = self._last_active_win
        cached = self._end_cache
        if cached is not None and cached[0] == win:
            return cached[1]
        end = self._walk_forward(win, self._edge_threshold())
        if self._written_win >= win + 1 + self.config.offset_lookahead_ms:
            self._end_cache = (win, end)
        return end

    def _maybe_finish(self, now_ns: int, merge_ns: float) -> None:
        """Close the open spurt once the pause after its refined offset is long enough.

        The wait includes a look-back, so that a later onset walked back into the
        merge gap mostly still merges; it is shorter than the onsets' full look-back,
        which would make every listener (the mock agent's turn-taking above all) hear
        the end of speech later.
        """
        if now_ns - self._last_active_t <= merge_ns:
            return
        wait_ns = merge_ns + self._close_lookback_ns()
        win = self._last_active_win
        cached = self._end_cache
        if (cached is None or cached[0] != win) and (
            self._written_win < win + 1 + self.config.offset_lookahead_ms
        ):
            # The refined offset lies in [win + 1, what is analysed] and is not final yet
            # (nothing is kept of it): when no offset there is far enough back, skip it.
            top = max(win, self._written_win - 1) * self._win
            if now_ns - self._timeline.earliest(win * self._win, top) - NS_PER_MS <= wait_ns:
                return
        end_win = self._refined_end()
        if now_ns - self._t_of_end(end_win) > wait_ns:
            self._close(end_win)

    def _close_lookback_ns(self) -> int:
        return min(self.config.onset_lookback_ms * NS_PER_MS, CLOSE_LOOKBACK_NS)

    def _finish_spurt(self) -> None:
        self._close(self._refined_end())

    def _walk_onset_again(self) -> None:
        """Walk from the first loud window again, at the level known now (at the close:
        the whole utterance's, which the truth takes; its first half second's can stand
        several dB off), by up to two look-backs (a quiet talker's soft start)."""
        lookback = 2 * self.config.onset_lookback_ms
        first = self._first_above_win
        if not self._timeline.covers(max(first - lookback, 0) * self._win):
            return
        onset = self._walk_back(first, self._edge_threshold(), lookback=lookback)
        # Never later: a level read from part of a recording stands a few dB off that of
        # the whole (which the truth takes), and a later walk at a higher threshold loses
        # a soft first window for good; an earlier walk still stops at the threshold.
        if onset < self._onset_win:
            self._onset_win = onset
            self._onset_t = self._t_of_win(onset)
