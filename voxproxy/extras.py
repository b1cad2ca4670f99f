"""Optional dependencies, installed as extras of the ``voxproxy`` package.

The proxy, the mock agent, the load generator and the demo need only the base
install. What only some commands need is an extra:

==============  ======================  ============================================
extra           modules                 needed by
==============  ======================  ============================================
``webrtc``      aiortc (and PyAV)       ``--transport webrtc`` (proxy, load)
``report``      matplotlib              the charts in ``report.html`` (the tables
                                        are written without it)
``transcripts`` jiwer, meeteval         ``voxproxy transcripts``, and scoring what
                                        an agent reports it heard in a load run
``parquet``     pyarrow                 ``voxproxy receipts export --format parquet``
``flac``        soundfile (libsndfile)  ``voxproxy analyze`` of FLAC recordings
``all``         every one of them
==============  ======================  ============================================

A command that needs a missing extra stops with one line naming the ``pip install``
to run (:func:`require`), exit status 2.
"""

from __future__ import annotations

import importlib.util

from voxproxy.core.errors import ConfigError

EXTRAS: dict[str, tuple[str, ...]] = {
    "webrtc": ("aiortc", "av"),
    "report": ("matplotlib",),
    "transcripts": ("jiwer", "meeteval"),
    "parquet": ("pyarrow",),
    "flac": ("soundfile",),
}


class MissingExtra(ConfigError):
    """An optional dependency a command needs is not installed."""


def install_line(extra: str) -> str:
    return f"pip install 'voxproxy[{extra}]'"


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed, or None."""
    for module in EXTRAS[extra]:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def has(extra: str) -> bool:
    return missing(extra) is None


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` (one line: what to install) unless ``extra`` is there."""
    module = missing(extra)
    if module is not None:
        raise MissingExtra(f"{what} needs {module}, which is not installed: {install_line(extra)}")
