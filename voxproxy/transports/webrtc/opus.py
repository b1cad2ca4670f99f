"""libopus called directly through ctypes, decoding Opus straight to 16 kHz for
measurement (the copy PyAV ships, else the system's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voxproxy.core.events import Pcm

_LIBOPUS: Any = None  # ctypes handle, False when not found


def libopus() -> Any:
    """libopus, for decoding at a detector rate: the copy PyAV ships, else the system's."""
    global _LIBOPUS
    if _LIBOPUS is None:
        import ctypes
        import ctypes.util
        from pathlib import Path

        import av

        candidates = sorted((Path(av.__file__).parent.parent / "av.libs").glob("libopus*.so*"))
        found = ctypes.util.find_library("opus")
        names = [str(c) for c in candidates] + ([found] if found else [])
        _LIBOPUS = False
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                lib.opus_decoder_create.restype = ctypes.c_void_p
                lib.opus_decoder_create.argtypes = [
                    ctypes.c_int32,
                    ctypes.c_int,
                    ctypes.POINTER(ctypes.c_int),
                ]
                lib.opus_decode.restype = ctypes.c_int
                lib.opus_decode.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_char_p,
                    ctypes.c_int32,
                    ctypes.c_void_p,
                    ctypes.c_int,
                    ctypes.c_int,
                ]
                lib.opus_decoder_destroy.argtypes = [ctypes.c_void_p]
                _LIBOPUS = lib
                break
            except (OSError, AttributeError):
                continue
    return _LIBOPUS if _LIBOPUS is not False else None


class OpusDecoder16k:
    """libopus called directly (ctypes), decoding to mono 16 kHz.

    libopus decodes to any of 8/12/16/24/48 kHz itself (RFC 6716 section 4); at
    16 kHz it skips its own upsampling, and the 48 -> 16 kHz filter that a
    48 kHz decode would need here: less than half the CPU of PyAV plus
    :class:`Decimator` (docs/performance.md, "Choices in the code, measured"). (PyAV's
    ``libopus`` decoder ignores the requested rate and always gives 48 kHz.)
    """

    RATE = 16000

    def __init__(self, lib: Any) -> None:
        import ctypes

        err = ctypes.c_int()
        self._lib = lib
        self._dec = lib.opus_decoder_create(self.RATE, 1, ctypes.byref(err))
        if not self._dec or err.value != 0:
            raise OSError(f"opus_decoder_create failed ({err.value})")
        self._buf = np.zeros(self.RATE * 120 // 1000, dtype=np.int16)  # 120 ms: Opus's longest
        self._ptr = self._buf.ctypes.data

    def decode(self, payload: bytes) -> Pcm:
        n = self._lib.opus_decode(self._dec, payload, len(payload), self._ptr, self._buf.size, 0)
        if n < 0:
            raise ValueError(f"opus_decode: error {n}")
        out: Pcm = self._buf[:n].copy()
        return out

    def __del__(self) -> None:
        dec = getattr(self, "_dec", None)
        if dec:
            self._lib.opus_decoder_destroy(dec)
            self._dec = None
