"""The health paths every listener of the proxy answers, and their answer.

A plain ``GET`` (no ``Upgrade``) of one of them is answered by the proxy itself, on the
proxy port as on ``/metrics``' port and the event API's, never forwarded:

- readiness, ``/healthz`` and ``/readyz``: ``200 ok`` while a caller arriving now would
  be admitted; else ``503`` and why not, on one line (``refusing callers: at capacity
  (140 calls in progress)``, ``... overloaded (event loop lag 80 ms)``, ``... shutting
  down``). A load balancer's health check or a Kubernetes readiness probe takes a
  refusing proxy out of service, and puts it back when it admits again.
- liveness, ``/livez``: ``200 ok`` while the process answers at all (a busy or full
  proxy is alive: restarting it would cut every call it carries).
"""

from __future__ import annotations

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
LIVE_PATH = "/livez"
HEALTH_PATHS = frozenset({HEALTH_PATH, READY_PATH, LIVE_PATH})


REFUSING = "refusing callers: "


def health_answer(refusal: str | None, note: str | None = None) -> tuple[int, str]:
    """A health path's status and body: ``200 ok``, or ``503`` and the reason a caller
    would be refused now (``refusal``), on one line. Every listener answers alike;
    ``note`` adds what a ready proxy should still say (``ok: worker 1: down ...``)."""
    if refusal is None:
        return 200, f"ok: {note}\n" if note else "ok\n"
    return 503, f"{REFUSING}{refusal}\n"
