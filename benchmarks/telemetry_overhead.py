"""What tracing and metrics cost: ``voxproxy proxy`` with telemetry on against off, same run.

Reruns the load of ``benchmarks/overhead.py`` (real-time Twilio calls, 20 ms
frames both ways, the proxy pinned to CPU 0, the load to CPU 1) against the
proxy twice per level and round, alternating:

* ``off``: no telemetry (the default);
* ``on``: ``--otel`` exporting traces and metrics over OTLP/HTTP to a local
  receiver run by this script (metrics every ``--export-interval-ms``, 5000), plus
  ``--metrics-listen`` scraped every ``--scrape-interval`` seconds (5, as the compose
  stack's Prometheus does) by this script.

and prints the proxy's CPU per message with telemetry on divided by off (the
goal is <= 1.1). Spans are written when a call ends, and the benchmark's calls
last the whole run, so the per-call cost of writing a call's spans and metrics
is measured apart (``on_receipt`` of a four-turn receipt with three tool calls)
and shown per message of a one-minute call.

Run:  .venv/bin/python benchmarks/telemetry_overhead.py [--levels 1,50] [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import overhead  # noqa: E402  (benchmarks/overhead.py: the load and the measurement)
import record  # noqa: E402

from voxproxy.harness.ports import free_port  # noqa: E402

TELEMETRY_ENV = (
    "VOXPROXY_PROXY_OTEL",
    "VOXPROXY_PROXY_METRICS_LISTEN",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_SDK_DISABLED",
)


class Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that counts and discards (an empty body is a valid answer)."""

    requests = 0
    bytes = 0

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        Sink.requests += 1
        Sink.bytes += n
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class Scraper(threading.Thread):
    def __init__(self, port: int, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval_s = interval_s
        self.stop = threading.Event()
        self.ok = 0

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):
            try:
                with urllib.request.urlopen(self.url, timeout=2) as resp:
                    resp.read()
                    self.ok += 1
            except OSError:
                pass


def _set_env(values: dict[str, str] | None) -> None:
    for name in TELEMETRY_ENV:
        os.environ.pop(name, None)
    if values:
        os.environ.update(values)


def measure(mode: str, calls: int, args: argparse.Namespace, otlp_port: int) -> overhead.PathResult:
    seconds, warmup = args.seconds, args.warmup
    if mode == "off":
        _set_env(None)
        return overhead.measure("voxproxy", calls, seconds, warmup)
    metrics_port = free_port()
    _set_env(
        {
            "VOXPROXY_PROXY_OTEL": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_METRIC_EXPORT_INTERVAL": str(args.export_interval_ms),
            "VOXPROXY_PROXY_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
        }
    )
    scraper = Scraper(metrics_port, args.scrape_interval)
    scraper.start()
    try:
        return overhead.measure("voxproxy", calls, seconds, warmup)
    finally:
        scraper.stop.set()
        scraper.join()
        _set_env(None)
        if scraper.ok == 0:
            print("warning: /metrics was never scraped", file=sys.stderr)


def per_call_cost_us(repeat: int = 300) -> float:
    """CPU time of writing one call's spans, metrics and receipt log records (to exporters
    that drop them)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from support.receipt_samples import sample_receipt

    from voxproxy.clock import EpochAnchor
    from voxproxy.telemetry import CallTimes, TelemetryConfig
    from voxproxy.telemetry.otel import CountingExporter, OtelTelemetry

    class Drop(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    # Traces on (their exporter is swapped for one that drops), OTLP metrics off, the
    # Prometheus reader on: what a call's end costs on the proxy's event loop.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_METRICS_EXPORTER": "none"}
    telemetry = OtelTelemetry(TelemetryConfig(otlp=True, metrics_listen=("127.0.0.1", 0)), env)
    assert telemetry.exporter is not None
    telemetry.exporter.inner = Drop()
    assert isinstance(telemetry.exporter, CountingExporter)
    # The receipt's log records are built and batched as in the proxy, then dropped too.
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult as LogResult

    class DropLogs(LogRecordExporter):
        def export(self, batch: object) -> LogResult:
            return LogResult.SUCCESS

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    assert telemetry.logger_provider is not None
    telemetry.logger_provider.shutdown()
    telemetry.logger_provider = LoggerProvider()
    telemetry.logger_provider.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
    telemetry.logger = telemetry.logger_provider.get_logger("voxproxy")
    receipt = sample_receipt()
    anchor = EpochAnchor.now()
    samples = []
    for _ in range(repeat):
        t0 = time.thread_time_ns()
        start = time.monotonic_ns()
        telemetry.call_opened()
        handle = telemetry.start_call(anchor, start, {})
        telemetry.call_closed()
        telemetry.on_receipt(receipt, handle, CallTimes(anchor, start, start + 30_000_000_000))
        samples.append(time.thread_time_ns() - t0)
    if telemetry.tracer_provider is not None:
        telemetry.tracer_provider.shutdown()
    telemetry.logger_provider.shutdown()
    return statistics.median(samples) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,50")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3, help="off/on pairs per level")
    parser.add_argument("--scrape-interval", type=float, default=5.0, help="seconds")
    parser.add_argument("--export-interval-ms", type=int, default=5000)
    record.add_flag(parser)
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    otlp_port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)})  # keep this process off the proxy's CPU

    rows = []
    head = ("calls", "mode", "round", "CPU/msg", "p50 1-way", "p99 1-way", "errors")
    print("{:>6} {:>4} {:>5} {:>9} {:>10} {:>10} {:>6}".format(*head))
    for calls in [int(x) for x in args.levels.split(",")]:
        per_msg: dict[str, list[float]] = {"off": [], "on": []}
        p99: dict[str, list[float]] = {"off": [], "on": []}
        for k in range(args.rounds):
            order = ("off", "on") if k % 2 == 0 else ("on", "off")
            for mode in order:
                r = measure(mode, calls, args, otlp_port)
                us = r.cpu_s / r.messages * 1e6 if r.messages else float("nan")
                per_msg[mode].append(us)
                p99[mode].append(overhead.pct(r.latencies_ms, 99))
                p50_ms = overhead.pct(r.latencies_ms, 50)
                p99_ms = overhead.pct(r.latencies_ms, 99)
                print(
                    f"{calls:>6} {mode:>4} {k:>5} {us:>7.1f}µs {p50_ms:>8.2f}ms "
                    f"{p99_ms:>8.2f}ms {r.errors:>6}",
                    flush=True,
                )
        off = statistics.median(per_msg["off"])
        on = statistics.median(per_msg["on"])
        # Each round measured off and on back to back: the median of the rounds' ratios
        # cancels most of the drift of a shared machine.
        ratio = statistics.median(a / b for a, b in zip(per_msg["on"], per_msg["off"], strict=True))
        rows.append(
            {
                "calls": calls,
                "cpu_per_msg_us_off": round(off, 2),
                "cpu_per_msg_us_on": round(on, 2),
                "cpu_per_msg_ratio": round(ratio, 3),
                "cpu_per_msg_ratio_of_medians": round(on / off, 3),
                "p99_one_way_ms_off": round(statistics.median(p99["off"]), 3),
                "p99_one_way_ms_on": round(statistics.median(p99["on"]), 3),
            }
        )
    server.shutdown()
    call_us = per_call_cost_us()
    msgs_per_minute_call = 2 * 50 * 60  # 20 ms frames both ways for a minute
    print(
        "cpu_per_msg_ratio = CPU per message with traces (OTLP/HTTP to a local receiver) and "
        f"metrics (OTLP every {args.export_interval_ms} ms + /metrics scraped every "
        f"{args.scrape_interval:g} s) on / off, same run: the median of the rounds' ratios."
    )
    print(
        f"writing one call's spans, metrics and receipt log records: {call_us:.0f} µs of CPU "
        f"({call_us / msgs_per_minute_call:.3f} µs per message of a one-minute call); "
        f"OTLP requests received: {Sink.requests} ({Sink.bytes} bytes)"
    )
    record.finish(
        "telemetry_overhead",
        {
            "levels": rows,
            "per_call_telemetry_us": round(call_us, 1),
            "per_message_of_a_1min_call_us": round(call_us / msgs_per_minute_call, 4),
            "otlp_requests": Sink.requests,
            "scrape_interval_s": args.scrape_interval,
            "export_interval_ms": args.export_interval_ms,
            "goal_ratio": 1.1,
        },
        args,
    )


if __name__ == "__main__":
    main()
