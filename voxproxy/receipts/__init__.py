"""Receipts: the one content-free record of each call, how they are written and stored
(``writer``, ``store``, ``journal``, ``export``), and how they are judged (``policy``,
``verdict``, ``release``).

``model`` is part of the measurement core (pure pydantic). May import, for the rest: the
standard library (threads and files: it is a sink), pydantic, yaml, and from voxproxy
the core and ``yamlmodel``. Never a transport, the proxy, telemetry, the load
generator, the mock agent or the scripted calls (enforced by tests/test_layers.py).
"""

from voxproxy.core.receipt import BargeInRecord, Receipt, TurnRecord

__all__ = ["BargeInRecord", "Receipt", "TurnRecord"]
