"""voxproxy proxy's arguments become the ServeConfig it runs (commands/proxy.py)."""

from __future__ import annotations

import pytest

from voxproxy.cli import build_parser
from voxproxy.commands.proxy import serve_config
from voxproxy.proxy.websocket import DEFAULT_MAX_LOOP_LAG_MS


@pytest.mark.parametrize(
    "transport",
    [
        ["--upstream", "ws://127.0.0.1:1"],
        ["--transport", "webrtc", "--upstream", "http://127.0.0.1:1/offer"],
    ],
)
def test_the_loop_lag_bound_reaches_both_transports(transport: list[str]) -> None:
    parser = build_parser()
    base = ["proxy", *transport]
    assert serve_config(parser.parse_args(base)).proxy.max_loop_lag_ms == DEFAULT_MAX_LOOP_LAG_MS
    bounded = parser.parse_args([*base, "--max-loop-lag-ms", "250"])
    assert serve_config(bounded).proxy.max_loop_lag_ms == 250.0
    off = parser.parse_args([*base, "--max-loop-lag-ms", "0"])
    assert serve_config(off).proxy.max_loop_lag_ms is None
