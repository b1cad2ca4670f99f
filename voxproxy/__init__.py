"""voxproxy: a measuring media proxy for voice agents.

The package is split in two planes (see README, "Architecture"):

* the measurement plane, pure and sans-I/O: :mod:`voxproxy.events`,
  :mod:`voxproxy.audio`, :mod:`voxproxy.dialects`, :mod:`voxproxy.analysis`,
  :mod:`voxproxy.turns`, :mod:`voxproxy.session`, :mod:`voxproxy.receipts`;
* the forwarding plane and the shells around it: :mod:`voxproxy.transports`,
  :mod:`voxproxy.proxy`, :mod:`voxproxy.mockagent`, :mod:`voxproxy.cli`.
"""

__version__ = "0.1.0"
