"""What can be checked of ``deploy/`` without a container engine.

Every YAML and JSON file parses; ``promtool`` accepts the Prometheus config;
the Grafana dashboard queries only metrics that the proxy really serves (read
back from a live ``/metrics``); the compose stack's services, mounts and
``VOXPROXY_*`` settings match the repository and the proxy's flags; the
collector's pipelines name only what it defines.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from support.receipt_samples import sample_receipt

from voxproxy.cli import build_parser, subcommand_parsers
from voxproxy.telemetry import TelemetryConfig, make_telemetry
from voxproxy.telemetry.metrics import PROMETHEUS_NAMES
from voxproxy.telemetry.otel import OtelTelemetry

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "voxproxy.json"


def _load(path: Path) -> Any:
    text = path.read_text()
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def test_every_config_file_parses() -> None:
    files = [p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json")]
    assert len(files) >= 6
    for path in files:
        assert isinstance(_load(path), dict), path


def test_promtool_accepts_the_prometheus_config() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(
            "promtool is not installed: `apt-get install -y prometheus` "
            "(`make test` does it: tools/system-deps)"
        )
    result = subprocess.run(
        [promtool, "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _dashboard_exprs() -> list[str]:
    dash = _load(DASHBOARD)
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


async def _exported_series(
    monkeypatch: pytest.MonkeyPatch, labels: dict[str, set[str]] | None = None
) -> set[str]:
    """The series names a live /metrics serves (and, into ``labels``, each one's label
    names)."""
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    telemetry = make_telemetry(TelemetryConfig(metrics_listen=("127.0.0.1", 0)))
    assert isinstance(telemetry, OtelTelemetry)
    await telemetry.start()
    try:
        telemetry.call_opened()
        r = sample_receipt()
        telemetry.instruments.record(r)
        # A talk-over turn (negative time to first sound) has its own counter.
        talk_over = r.turns[0].model_copy(update={"ttfs_ms": -250.0})
        telemetry.instruments.record(r.model_copy(update={"turns": [talk_over]}))
        telemetry.note_dropped(1, "export_failed")
        telemetry.note_logs_dropped(1, "export_failed")
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{telemetry.metrics_port}/metrics"
            async with http.get(url) as resp:
                assert resp.status == 200
                text = await resp.text()
    finally:
        await telemetry.aclose()
    names: set[str] = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        names.add(name)
        if labels is not None:
            labels.setdefault(name, set()).update(re.findall(r'(\w+)="', line))
    return names


def _metric_and_labels(expr: str) -> tuple[set[str], set[str]]:
    """The metric names an expression reads, and the labels it groups by."""
    grouped = {
        label.strip()
        for clause in re.findall(r"by \(([^)]*)\)", expr)
        for label in clause.split(",")
    }
    bare = re.sub(r"by \([^)]*\)", "", expr)
    return set(re.findall(r"\b(?:voxproxy|gen_ai)_\w+", bare)), grouped - {"le"}


async def test_the_dashboard_queries_metrics_the_proxy_really_exports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    labels: dict[str, set[str]] = {}
    series = await _exported_series(monkeypatch, labels)
    referenced: set[str] = set()
    for expr in _dashboard_exprs():
        metrics, grouped = _metric_and_labels(expr)
        referenced |= metrics
        # Every label a panel groups by is a label of the series it reads.
        for m in metrics & series:
            assert grouped <= labels[m], (expr, grouped - labels[m])
    missing = referenced - series
    assert not missing, f"the dashboard queries metrics voxproxy does not export: {missing}"
    # The latency histograms (in seconds), the talk-over count beside them, the tool
    # duration of the GenAI conventions and the verdict counter are on it.
    for family in (
        "voxproxy_turn_ttfs_seconds_bucket",
        "voxproxy_turn_ttfs_seconds_count",
        "voxproxy_turn_talk_over_total",
        "voxproxy_barge_in_stop_latency_seconds_bucket",
        "gen_ai_execute_tool_duration_seconds_bucket",
        "voxproxy_call_duration_seconds_bucket",
        "voxproxy_calls_total",
    ):
        assert family in referenced
    assert not any("milliseconds" in e for e in _dashboard_exprs())
    # The names documented in voxproxy.telemetry.metrics are the ones served.
    for name in PROMETHEUS_NAMES.values():
        assert name in series or f"{name}_count" in series, name
    # None of the milliseconds names of 0.1.
    assert not any("milliseconds" in name for name in series), series
    assert any("by (voxproxy_verdict)" in e for e in _dashboard_exprs())


def test_the_compose_stack_matches_the_repository_and_the_proxy_s_flags() -> None:
    compose = _load(DEPLOY / "compose.yaml")
    services = compose["services"]
    for name in (
        "voxproxy",
        "agent",
        "caller",
        "otel-collector",
        "jaeger",
        "prometheus",
        "grafana",
    ):
        assert name in services, name
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).exists(), source
    # Every VOXPROXY_* setting of a service is a variable of the subcommand it runs.
    commands = {p.command: p for p in subcommand_parsers(build_parser())}
    for service in services.values():
        command = service.get("command") or []
        settings = {k for k in service.get("environment", {}) if k.startswith("VOXPROXY_")}
        if settings:
            known = set(commands[command[0]].env_vars)
            assert settings <= known, settings - known
    env = services["voxproxy"]["environment"]
    assert env["VOXPROXY_PROXY_UPSTREAM"].startswith("ws://agent:")
    scrape = _load(DEPLOY / "prometheus" / "prometheus.yml")
    targets = [
        t for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]
    ]
    assert "voxproxy:" + env["VOXPROXY_PROXY_METRICS_LISTEN"].rsplit(":", 1)[1] in targets
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:  # (not a stage's output)
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source


def test_the_image_runs_the_compiled_core_its_figures_were_measured_on() -> None:
    """The image installs the wheel its first stage compiled, refusing the pure-Python
    fallback there and checking the installed build (docker is not run here)."""
    stages = re.split(r"^FROM ", (DEPLOY / "Dockerfile").read_text(), flags=re.M)[1:]
    assert len(stages) == 2, "a stage that compiles the wheel, then the image"
    build, image = stages
    assert "VOXPROXY_REQUIRE_NATIVE=1 pip wheel" in build and "gcc" in build
    # Everything the wheel's build reads (the sdist's files) is copied in.
    for name in ("pyproject.toml", "setup.py", "tools/build_backend.py", "voxproxy"):
        assert re.search(rf"^COPY .*\b{re.escape(name)}\b", build, flags=re.M), name
    assert "COPY --from=wheel /wheels" in image
    assert "native.build()" in image and "'mypyc'" in image
    assert "pip install ." not in image


def test_the_collector_pipelines_name_only_what_it_defines() -> None:
    config = _load(DEPLOY / "otel-collector" / "config.yaml")
    pipelines = config["service"]["pipelines"]
    assert "traces" in pipelines
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline.get(kind, []):
                assert name in config[kind], (kind, name)
    assert "otlp" in config["receivers"]
    assert any(e.startswith("otlp") for e in pipelines["traces"]["exporters"])


def test_the_datasources_and_the_dashboard_provider_point_at_the_stack() -> None:
    sources = _load(DEPLOY / "grafana" / "provisioning" / "datasources" / "datasources.yaml")
    uids = {d["uid"] for d in sources["datasources"]}
    assert uids == {"prometheus", "jaeger"}
    dash = _load(DASHBOARD)
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] in uids
    provider = _load(DEPLOY / "grafana" / "provisioning" / "dashboards" / "dashboards.yaml")
    compose = _load(DEPLOY / "compose.yaml")
    path = provider["providers"][0]["options"]["path"]
    assert any(v.endswith(":" + path + ":ro") for v in compose["services"]["grafana"]["volumes"])


def test_the_compose_caller_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(DEPLOY / "caller.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "--every" in result.stdout
