"""Every dialect by name (``--dialect``): the wires ``auto`` tells apart, and ``auto``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from voxproxy.core.dialects import detect
from voxproxy.core.dialects.base import Decoder, DialectOptions
from voxproxy.core.errors import ConfigError

DIALECTS: Final[dict[str, Callable[[DialectOptions], Decoder]]] = {
    **detect.WIRES,
    "auto": detect.new_decoder,
}


def make_decoder(name: str, options: DialectOptions | None = None) -> Decoder:
    """A new decoder of dialect ``name`` (one per call)."""
    try:
        factory = DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ConfigError(f"unknown dialect {name!r}; known: {known}") from None
    return factory(options or DialectOptions())
