"""The one list of call endings: every transport cause is a receipt terminal of the same
name or one of the causes that never make a receipt, and every terminal has a source."""

from __future__ import annotations

from typing import get_args

from voxproxy.core.receipt import TERMINALS, Terminal, terminal_of
from voxproxy.transports import webrtc, websocket
from voxproxy.transports.ends import NOT_A_CALL, EndCause


def test_each_cause_is_the_terminal_of_its_name_or_never_a_receipt() -> None:
    for cause in EndCause:
        if cause in NOT_A_CALL:
            assert cause.value not in TERMINALS
            assert terminal_of(cause) == "proxy_error"
        else:
            assert terminal_of(cause) == cause.value


def test_every_terminal_comes_from_a_cause_or_says_where_else() -> None:
    # "completed": a caller close after the wire's own end of stream (proxy.py);
    # "proxy_crashed": written for a call left open in the journal at the next start.
    from_causes = {terminal_of(c) for c in EndCause if c not in NOT_A_CALL}
    assert set(get_args(Terminal)) - from_causes == {"completed", "proxy_crashed"}


def test_both_transports_end_calls_with_the_same_causes() -> None:
    assert websocket.EndCause is EndCause
    assert webrtc.EndCause is EndCause
    assert terminal_of("not a cause") == "proxy_error"
