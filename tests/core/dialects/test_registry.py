"""voxproxy.core.dialects.registry: every dialect by name, ``auto`` among them, a new
decoder per call, and an unknown name refused with the names known."""

from __future__ import annotations

import pytest

from voxproxy.core.dialects import detect
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.registry import DIALECTS, make_decoder
from voxproxy.core.errors import ConfigError


def test_every_wire_auto_tells_apart_is_a_dialect_and_so_is_auto() -> None:
    assert set(DIALECTS) == {*detect.WIRES, "auto"}
    assert {"twilio", "raw", "openai-realtime"} <= set(DIALECTS)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_each_call_gets_a_decoder_of_its_own(name: str) -> None:
    options = DialectOptions(secret=b"registry-test")  # a wire that hashes needs one
    a, b = make_decoder(name, options), make_decoder(name, options)
    assert a is not b
    assert type(a) is type(b)


def test_without_options_a_decoder_gets_the_defaults() -> None:
    assert make_decoder("raw").name == "raw"


def test_an_unknown_dialect_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown dialect 'sip'; known: .*auto.*twilio"):
        make_decoder("sip")
