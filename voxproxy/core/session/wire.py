"""Whether the caller's wire is the configured one: a ``raw`` caller on a ``twilio``
proxy sends audio the session cannot decode, so nothing of the call is measured; the
receipt says what the wire looked like instead (the dialect name only). Sans-I/O."""

from __future__ import annotations

from collections import Counter

from voxproxy.core.dialects.detect import PENDING
from voxproxy.core.dialects.detect import guess as guess_dialect

WIRE_SAMPLE = 20  # the caller's first messages are checked against the configured dialect
_WIRE_MIN_SEEN = 3  # ... and this many must look like another one
_WIRES = frozenset({"raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime"})


class WireCheck:
    """The dialects the caller's first :data:`WIRE_SAMPLE` messages look like."""

    def __init__(self) -> None:
        self._looks: Counter[str] = Counter()  # dialects the caller's first messages suggest

    def note(self, payload: bytes | str, *, strict: bool) -> None:
        """What a caller message looks like, whatever the configured dialect (the
        dialect name only; nothing of the message is kept). ``strict``: a failure of the
        guess raises (else it is ignored)."""
        try:
            looks = guess_dialect(payload)
        except Exception:
            if strict:
                raise
            return
        if looks is not None and looks != PENDING:
            self._looks[looks] += 1

    def looks_like(self, configured: str, caller_audio_ns: int) -> str | None:
        """The dialect the caller's wire looks like when it is not ``configured``, and no
        caller audio was decoded: nothing of it can be measured."""
        if configured not in _WIRES:
            return None
        if not self._looks or caller_audio_ns > 0:
            return None
        looks, seen = self._looks.most_common(1)[0]
        return looks if looks != configured and seen >= _WIRE_MIN_SEEN else None
