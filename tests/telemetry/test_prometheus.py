"""voxproxy.telemetry.prometheus: the real Prometheus server scrapes a running ``voxproxy
proxy --metrics-listen``, and the expositions of several workers merge into one.

Prometheus comes from Debian (``apt-get install -y prometheus``, done by ``make test``
through ``tools/system-deps``); this test does not skip when it is missing, it fails
and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.child import clean_env, proxy_command, stop
from support.waiting import wait_until

from voxproxy.clips import clip
from voxproxy.loadgen.caller import CallerConfig, Say, ScriptedCaller, WaitAgentEnd
from voxproxy.mockagent import MockAgent, MockAgentConfig
from voxproxy.telemetry.prometheus import merge_expositions

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
ROOT = Path(__file__).resolve().parents[2]


async def _bound_port(stream: Any, pattern: str, timeout_s: float = 20.0) -> int:
    """Read a child's log until ``pattern`` names the port it bound (it was asked for 0,
    so no port has to be guessed free)."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout_s
    regex = re.compile(pattern)
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = await asyncio.wait_for(loop.run_in_executor(None, stream.readline), timeout_s)
        if not line:
            break
        text = line.decode(errors="replace") if isinstance(line, bytes) else line
        seen.append(text)
        found = regex.search(text)
        if found:
            return int(found.group(1))
    raise AssertionError(f"no line matched {pattern!r}; the child said: {''.join(seen)[-2000:]}")


def _drain(stream: Any) -> None:
    """Keep reading a child's log in the background so that it never blocks on a pipe."""

    def read() -> None:
        with contextlib.suppress(ValueError, OSError):  # closed by _stop
            for _ in iter(stream.readline, b""):
                pass

    threading.Thread(target=read, daemon=True).start()


async def _get(http: aiohttp.ClientSession, url: str, **params: str) -> Any:
    async with http.get(url, params=params) as resp:
        if resp.content_type == "application/json":
            return await resp.json()
        return await resp.text()


async def _ready(http: aiohttp.ClientSession, url: str, timeout: float = 15.0) -> None:
    async def up() -> bool:
        try:
            async with http.get(url) as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    await wait_until(up, timeout, f"{url} up", poll_s=0.1)


async def _query(http: aiohttp.ClientSession, base: str, expr: str) -> float | None:
    answer = await _get(http, f"{base}/api/v1/query", query=expr)
    assert answer["status"] == "success", answer
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    stop(proc)
    if proc.stderr is not None:
        proc.stderr.close()


@pytest.mark.slow
async def test_prometheus_scrapes_the_proxy_s_latency_histograms(tmp_path: Path) -> None:
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.fail(
            "the prometheus server is not installed: run `apt-get install -y prometheus` "
            "(`make test` does this: tools/system-deps)"
        )
    agent = MockAgent(
        MockAgentConfig(dialect="twilio", delay_ms=300.0, responses=("agent_confirm",))
    )
    await agent.start()
    proxy = subprocess.Popen(
        proxy_command(
            *("--upstream", agent.url, "--dialect", "twilio"),
            *("--receipts", str(tmp_path / "receipts.jsonl"), "--secret", "prometheus-test"),
            *("--metrics-listen", "127.0.0.1:0", "--log-level", "info", "--drain-timeout", "0"),
            # Every figure published (a busy machine's clock lag would withhold them, and a
            # withheld figure is no histogram sample): this test is about the scrape.
            *("--max-uncertainty-ms", "1e9"),
        ),
        cwd=ROOT,
        env=clean_env("OTEL_"),
        stderr=subprocess.PIPE,
    )
    assert proxy.stderr is not None
    metrics_port = await _bound_port(proxy.stderr, r"metrics on http://127\.0\.0\.1:(\d+)/")
    proxy_port = await _bound_port(proxy.stderr, r"listening on ws://127\.0\.0\.1:(\d+)")
    _drain(proxy.stderr)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: voxproxy\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    prometheus = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            "--web.listen-address=127.0.0.1:0",
            "--log.level=info",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert prometheus.stderr is not None
    prom_port = await _bound_port(
        prometheus.stderr, r'msg="Listening on" address=127\.0\.0\.1:(\d+)'
    )
    _drain(prometheus.stderr)
    base = f"http://127.0.0.1:{prom_port}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            await _ready(http, f"http://127.0.0.1:{metrics_port}/healthz")
            await _ready(http, f"{base}/-/ready")
            calls = 3
            records = await asyncio.gather(
                *(
                    ScriptedCaller(
                        CallerConfig(
                            url=f"ws://127.0.0.1:{proxy_port}/",
                            dialect="twilio",
                            call_id=f"CA{n:032d}",
                            tail_ms=200.0,
                            seed=n,
                        ),
                        [Say(clip("caller_yes")), WaitAgentEnd(quiet_ms=300)],
                    ).run()
                    for n in range(calls)
                )
            )
            assert all(r.error is None for r in records), [r.error for r in records]
            count_expr = "sum(voxproxy_turn_ttfs_seconds_count)"
            seen: list[float | None] = []  # the last query's answers

            async def scraped() -> bool:
                seen[:] = [
                    await _query(http, base, count_expr),
                    await _query(http, base, "sum(voxproxy_calls_total)"),
                ]
                return seen == [calls, calls]

            with contextlib.suppress(AssertionError):  # the check below says what it saw
                await wait_until(scraped, 15.0, "Prometheus scraped every call", poll_s=0.25)
            count = seen[0]
            assert count == calls, f"Prometheus saw {count} ttfs samples, expected {calls}"
            # The median time to first sound, read back through Prometheus' query API, in
            # seconds.
            p50 = await _query(
                http,
                base,
                "histogram_quantile(0.5, sum by (le) (voxproxy_turn_ttfs_seconds_bucket))",
            )
            mean = await _query(
                http,
                base,
                "sum(voxproxy_turn_ttfs_seconds_sum) / sum(voxproxy_turn_ttfs_seconds_count)",
            )
            assert p50 is not None and mean is not None
            assert 0.2 <= mean <= 0.9, mean  # the agent answers 300 ms after speech ends
            assert 0.2 <= p50 <= 1.0, p50
            assert await _query(http, base, "sum(voxproxy_call_active)") == 0.0
            # Every call's duration is in the call-duration histogram, in seconds.
            durations = await _query(http, base, "sum(voxproxy_call_duration_seconds_count)")
            assert durations == calls
            longest = await _query(http, base, "max(voxproxy_call_duration_seconds_sum)")
            assert longest is not None and 0.5 < longest < 60.0, longest
            # No talk-over in these calls: the counter is absent or zero, never negative.
            talk_over = await _query(http, base, "sum(voxproxy_turn_talk_over_total)")
            assert talk_over in (None, 0.0), talk_over
            # Calls are counted by verdict (the proxy judges each receipt) and terminal
            # state, under namespaced labels.
            answer = await _get(http, f"{base}/api/v1/query", query="voxproxy_calls_total")
            labels = [r["metric"] for r in answer["data"]["result"]]
            assert {lab["voxproxy_terminal"] for lab in labels} == {"completed"}
            assert all(lab["voxproxy_verdict"] not in ("", "none") for lab in labels), labels
            buckets = await _get(
                http,
                f"{base}/api/v1/series",
                **{"match[]": "voxproxy_turn_ttfs_seconds_bucket"},
            )
            assert {s["voxproxy_dialect"] for s in buckets["data"]} == {"twilio"}
            les = {float(s["le"]) for s in buckets["data"] if s["le"] != "+Inf"}
            assert max(les) == 10.0 and 0.3 in les and 1.2 in les and 0.05 in les
            # The milliseconds names of 0.1 are gone.
            for old_name in ("voxproxy_turn_ttfs_milliseconds_count", "voxproxy_calls_active"):
                assert await _query(http, base, f"sum({old_name})") is None, old_name
    finally:
        _stop(prometheus)
        _stop(proxy)
        await agent.stop()


def test_merged_metrics_add_up_samples_and_keep_target_info_once() -> None:
    one = (
        "# HELP voxproxy_calls_total Calls ended.\n# TYPE voxproxy_calls_total counter\n"
        'voxproxy_calls_total{verdict="pass"} 3.0\n'
        "# HELP target_info Target metadata\n# TYPE target_info gauge\n"
        'target_info{service_name="voxproxy"} 1.0\n'
        "# HELP voxproxy_calls_active Calls in progress.\n# TYPE voxproxy_calls_active gauge\n"
        "voxproxy_calls_active 2.0\n"
    )
    two = one.replace("} 3.0", "} 4.0").replace("active 2.0", "active 1.0")
    registry = merge_expositions([one, two])
    samples = {
        (s.name, tuple(s.labels.items())): s.value for f in registry.collect() for s in f.samples
    }
    assert samples[("voxproxy_calls_total", (("verdict", "pass"),))] == 7.0
    assert samples[("voxproxy_calls_active", ())] == 3.0
    assert samples[("target_info", (("service_name", "voxproxy"),))] == 1.0
