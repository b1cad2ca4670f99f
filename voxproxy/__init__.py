"""voxproxy: a measuring media proxy for voice agents.

The package is split in two planes (docs/architecture.md: the planes, the layers, the
path of one message, where to add a wire, a gate or a sink):

* the measurement plane, sans-I/O: :mod:`voxproxy.core.events`, :mod:`voxproxy.core.timebase`,
  :mod:`voxproxy.core.audio`, :mod:`voxproxy.core.dialects`, :mod:`voxproxy.core.analysis`,
  :mod:`voxproxy.core.turns`, :mod:`voxproxy.core.effects`, :mod:`voxproxy.core.session` and the
  receipt document :mod:`voxproxy.core.receipt`;
* the forwarding plane and the shells around it: :mod:`voxproxy.transports`,
  :mod:`voxproxy.proxy.websocket`, :mod:`voxproxy.proxy.webrtc`, the receipt sinks in
  :mod:`voxproxy.receipts`, :mod:`voxproxy.telemetry`, :mod:`voxproxy.cli`.

Around them: the load generator (:mod:`voxproxy.loadgen`), the mock agent
(:mod:`voxproxy.mockagent`), what both share (:mod:`voxproxy.simcall`) and the
harness that runs them together (:mod:`voxproxy.harness`). ``tests/test_layers.py``
enforces who may import whom.
"""

__version__ = "0.1.0"

# Before any other module of the package is imported: VOXPROXY_PURE_PYTHON=1 runs the
# measurement core from its sources even where its compiled build exists (native.py).
from voxproxy import native as _native

_native.install()
