"""The Prometheus ``/metrics`` endpoint: a small aiohttp server over a private registry.

The OpenTelemetry Prometheus reader registers its collector in a
:class:`prometheus_client.CollectorRegistry` of its own (not the process-wide
default, so several proxies can live in one process); each scrape collects the
meter provider through it. Served on the proxy's event loop: a scrape costs a
collection of a handful of instruments.
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from voxproxy.httpserve import HEADER_TIMEOUT_S, HttpListener

log = logging.getLogger("voxproxy.telemetry")


class MetricsServer(HttpListener):
    """``GET /metrics`` (Prometheus text or OpenMetrics, by ``Accept``) and the health
    paths (:class:`~voxproxy.httpserve.HttpListener`)."""

    def __init__(
        self, registry: CollectorRegistry, header_timeout_s: float = HEADER_TIMEOUT_S
    ) -> None:
        self.registry = registry
        self.header_timeout_s = header_timeout_s
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def start(self, host: str, port: int) -> int:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._add_health(app)
        bound = await self._listen(app, host, port)
        log.info("Prometheus metrics on http://%s:%d/metrics", host, bound)
        return bound


def merge_expositions(texts: list[str]) -> CollectorRegistry:
    """One view of several processes' ``/metrics`` (Prometheus text format): samples with
    the same name and labels are added up (counters, histogram buckets, sums and counts,
    and the gauge of calls in progress); ``target_info`` and info metrics, which say the
    same of every process, are kept once, and a ``_created`` time is the earliest.
    Returned as a registry to encode."""
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name not in families:
                families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
                values[family.name] = {}
            seen = values[family.name]
            once = family.type == "info" or family.name == "target_info"
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key in seen and (once or sample.name.endswith("_created")):
                    seen[key] = min(seen[key], sample.value) if not once else seen[key]
                    continue
                seen[key] = seen.get(key, 0.0) + sample.value
    merged = []
    for name, family in families.items():
        for (sample_name, labels), value in values[name].items():
            family.add_sample(sample_name, dict(labels), value)
        merged.append(family)

    class _Merged:
        def collect(self) -> list[Metric]:
            return merged

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged())
    return registry
