"""What the load generator's scripted caller sends on each telephony wire, pinned.

``voxproxy.loadgen.wires.caller_wire`` adapts the dialect builders to one caller: the
opening, each frame as a media message, the answer to a marker, the closing. Each
scenario below plays one short call on one wire with fixed inputs; ``wires_golden.json``
holds the exact messages it produced when pinned (see support.wiregolden). To re-pin
after a deliberate wire change: ``PYTHONPATH=$PWD:$PWD/tests python
tests/loadgen/test_wires_golden.py --write``, and say why in the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from support.wiregolden import Message, golden_tests, main

from voxproxy.core.dialects.vonage import marker_name
from voxproxy.loadgen.wires import WIRES, Wire, caller_wire

GOLDEN = Path(__file__).with_name("wires_golden.json")


def _call(wire: Wire, rate: int, custom: dict[str, str] | None) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        caller = caller_wire(wire, "CA" + "7" * 32, rate, custom)
        frame = ((np.arange(rate // 50, dtype=np.int64) * 811) % 65536 - 32768).astype(np.int16)
        # A Vonage marker is named by its notify payload's canonical JSON.
        name = marker_name({"name": "answer-1"}) if wire == "vonage" else "answer-1"
        return [
            *caller.opening(),
            caller.media(frame),
            caller.media(frame[: frame.size // 2]),
            caller.echo(name) or "(no echo)",
            *caller.closing(),
            str(caller.rate_hz),
        ]

    return run


SCENARIOS: dict[str, Callable[[], list[Message]]] = {}
for _wire in WIRES:
    SCENARIOS[f"{_wire} 16k"] = _call(_wire, 16000, None)
    SCENARIOS[f"{_wire} 8k, custom parameters"] = _call(_wire, 8000, {"tenant": "42", "é": "ü"})


test_every_scenario_is_pinned, test_sends_the_pinned_bytes = golden_tests(GOLDEN, SCENARIOS)

if __name__ == "__main__":
    main(GOLDEN, SCENARIOS)
