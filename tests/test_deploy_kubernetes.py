"""``deploy/kubernetes/``, checked without a cluster.

Every manifest is validated against the Kubernetes API's JSON schemas (the
``kubernetes-validate`` package ships them; strict mode rejects unknown fields),
with the network switched off to show it needs none. Then what a schema cannot
see: the probes hit the proxy's own readiness and liveness paths on its listen port, the grace
period covers the preStop pause and ``--drain-timeout``, every ``VOXPROXY_*``
setting is a flag of ``voxproxy proxy``, the selectors find the pods, the
collector tails the receipts file the proxy writes, and the load Job's arguments
parse with voxproxy's own parser, its shard count agrees with the Job's and the
merge step reads every shard.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from voxproxy.cli import build_parser, env_name
from voxproxy.health import LIVE_PATH, READY_PATH
from voxproxy.loadgen.shard import Shard

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
PROXY = K8S / "proxy"
LOAD = K8S / "load"
# The oldest Kubernetes the manifests are meant for (backoffLimitPerIndex: 1.29 beta,
# on by default), and the newest the package knows.
VERSIONS = ("1.30", kubernetes_validate.utils.latest_version())


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _manifests() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.yaml") if "apiVersion" in _load(p) and "kind" in _load(p))


def _kind(kind: str, where: Path = K8S) -> list[dict[str, Any]]:
    docs = [_load(p) for p in where.rglob("*.yaml")]
    return [d for d in docs if d.get("kind") == kind and "kustomize" not in d["apiVersion"]]


def _one(kind: str, where: Path = K8S) -> dict[str, Any]:
    (doc,) = _kind(kind, where)
    return doc


def _container(pod_owner: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod_owner["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def _env_map(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kw: Any) -> None:
        raise AssertionError("the schema check tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.slow
def test_every_manifest_validates_against_the_kubernetes_schemas_offline(no_network: None) -> None:
    manifests = _manifests()
    kinds = {_load(p)["kind"] for p in manifests}
    assert {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "Secret",
        "Job",
        "PersistentVolumeClaim",
    } <= kinds
    for path in manifests:
        doc = _load(path)
        if doc["apiVersion"].startswith("kustomize.config.k8s.io/"):
            continue  # kustomize's own file, not an API object
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{path.relative_to(ROOT)} (Kubernetes {version}): {exc}")


def test_the_schema_check_can_fail(no_network: None) -> None:
    doc = _load(PROXY / "deployment.yaml")
    doc["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, VERSIONS[0], strict=True)
    doc = _load(LOAD / "job-shards.yaml")
    doc["spec"]["completions"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, VERSIONS[0], strict=True)


def test_the_kustomization_lists_every_proxy_manifest_but_the_secret_example() -> None:
    kust = _load(PROXY / "kustomization.yaml")
    listed = set(kust["resources"])
    present = {p.name for p in PROXY.glob("*.yaml") if "apiVersion" in _load(p)}
    assert listed == present - {"kustomization.yaml", "secret.example.yaml"}
    for gen in kust["configMapGenerator"]:
        for f in gen["files"]:
            assert (PROXY / f).exists(), f
    # The Deployment mounts the generated ConfigMap under its generator's name.
    volumes = _one("Deployment")["spec"]["template"]["spec"]["volumes"]
    names = {v["configMap"]["name"] for v in volumes if "configMap" in v}
    assert names == {g["name"] for g in kust["configMapGenerator"]}


def _proxy_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    proxy = sub.choices["proxy"]  # type: ignore[attr-defined]
    return {
        env_name("proxy", o) for a in proxy._actions for o in a.option_strings if o.startswith("--")
    }


def test_the_proxy_container_is_configured_with_real_flags_and_secrets() -> None:
    deploy = _one("Deployment")
    proxy = _container(deploy, "voxproxy")
    assert proxy["args"] == ["proxy"]
    env = _env_map(proxy)
    settings = {k for k in env if k.startswith("VOXPROXY_")}
    assert settings <= _proxy_flags(), settings - _proxy_flags()
    # The two credentials come from the Secret whose shape secret.example.yaml shows.
    secret = _load(PROXY / "secret.example.yaml")
    for name in ("VOXPROXY_PROXY_SECRET", "VOXPROXY_PROXY_EVENTS_TOKEN"):
        ref = env[name]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"]
        assert ref["key"] in secret["stringData"]
    assert "VOXPROXY_PROXY_SECRET" not in str(_load(PROXY / "kustomization.yaml"))
    # The ports the container declares are the ones the proxy listens on.
    ports = {p["name"]: p["containerPort"] for p in proxy["ports"]}
    for flag, port_name in (
        ("VOXPROXY_PROXY_LISTEN", "ws"),
        ("VOXPROXY_PROXY_EVENTS_LISTEN", "events"),
        ("VOXPROXY_PROXY_METRICS_LISTEN", "metrics"),
    ):
        assert int(env[flag].rsplit(":", 1)[1]) == ports[port_name], flag


def test_probes_use_the_health_paths_on_the_listen_port() -> None:
    proxy = _container(_one("Deployment"), "voxproxy")
    listen_port = int(_env_map(proxy)["VOXPROXY_PROXY_LISTEN"].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in proxy["ports"]}
    # Readiness fails while the proxy refuses callers; liveness only when it answers not
    # at all (a full proxy restarted would cut every call it carries).
    paths = {"readinessProbe": READY_PATH, "livenessProbe": LIVE_PATH}
    for probe, path in paths.items():
        get = proxy[probe]["httpGet"]
        assert get["path"] == path, probe
        assert ports[get["port"]] == listen_port, probe
    # Liveness is the more patient of the two: a restart would cut every call.
    live, ready = proxy["livenessProbe"], proxy["readinessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > (
        ready["periodSeconds"] * ready["failureThreshold"]
    )


def test_the_grace_period_covers_the_pre_stop_pause_and_the_drain() -> None:
    spec = _one("Deployment")["spec"]["template"]["spec"]
    proxy = _container(_one("Deployment"), "voxproxy")
    command = proxy["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    pause = float(command[1])
    drain = float(_env_map(proxy)["VOXPROXY_PROXY_DRAIN_TIMEOUT"])
    grace = spec["terminationGracePeriodSeconds"]
    # Enough to drain and write the receipts, not so much that a stuck pod lingers.
    assert pause + drain + 5 <= grace <= pause + drain + 30, (pause, drain, grace)


def test_service_budget_and_autoscaler_find_the_proxy_pods() -> None:
    deploy = _one("Deployment")
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert deploy["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for svc in _kind("Service", PROXY):
        assert svc["spec"]["selector"].items() <= labels.items(), svc["metadata"]["name"]
        named = {
            p["name"]
            for c in deploy["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in named
    pdb = _one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = _one("HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deploy["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2  # the budget can then always let one go
    # CPU utilization is measured against a request, which the proxy must have.
    assert _container(deploy, "voxproxy")["resources"]["requests"]["cpu"]


def test_the_collector_ships_the_receipts_file_the_proxy_writes() -> None:
    config = _load(PROXY / "otel-collector.yaml")
    pipelines = config["service"]["pipelines"]
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline.get(kind, []):
                assert name in config[kind], (kind, name)
    for ext in config["service"]["extensions"]:
        assert ext in config["extensions"]
    deploy = _one("Deployment")
    proxy = _container(deploy, "voxproxy")
    collector = _container(deploy, "otel-collector")
    receipts = _env_map(proxy)["VOXPROXY_PROXY_RECEIPTS"]
    filelog = config["receivers"]["filelog/receipts"]
    assert filelog["include"] == [receipts]
    assert "filelog/receipts" in pipelines["logs"]["receivers"]
    # Both containers see the receipts directory, through the same volume.
    mounts = {
        c["name"]: {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        for c in (proxy, collector)
    }
    folder = str(Path(receipts).parent)
    assert mounts["voxproxy"][folder] == mounts["otel-collector"][folder]
    # The proxy's OTLP endpoint is the collector's OTLP/HTTP receiver.
    endpoint = _env_map(proxy)["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint.endswith(
        ":" + config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].rsplit(":", 1)[1]
    )
    # Its config file is the one the container reads.
    arg = next(a for a in collector["args"] if a.startswith("--config="))
    mount = next(m for m in collector["volumeMounts"] if m["name"] == "otel-collector-config")
    assert arg == f"--config={mount['mountPath']}/config.yaml"
    # Where it sends everything comes from the container's environment.
    upstream = re.findall(r"\$\{env:(\w+)\}", (PROXY / "otel-collector.yaml").read_text())
    assert set(upstream) <= set(_env_map(collector)), upstream


def _expand(args: list[str], values: dict[str, str]) -> list[str]:
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in args]


def test_the_load_job_runs_n_shards_of_one_plan_and_the_merge_reads_them_all() -> None:
    shards = next(j for j in _kind("Job", LOAD) if j["metadata"]["name"] == "voxproxy-load")
    merge = next(j for j in _kind("Job", LOAD) if j["metadata"]["name"] == "voxproxy-load-merge")
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    assert spec["parallelism"] == n
    load = _container(shards, "load")
    env = _env_map(load)
    assert env["SHARD_INDEX"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    parser = build_parser()
    outs = []
    for k in range(n):
        values = {"SHARD_INDEX": str(k), "START_AT": "2026-12-01T12:00:00Z", "RUN_ID": "ab12"}
        args = parser.parse_args(_expand(load["args"], values))
        assert args.command == "load"
        shard = Shard.parse(args.shard)
        assert (shard.index, shard.count) == (k, n)
        assert args.start_at and args.run_id
        outs.append(args.out)
    assert len(set(outs)) == n
    # The merge step reads exactly those directories, with the same run id.
    m = _container(merge, "merge")
    from voxproxy.commands.load_merge import rewrite_argv

    margs = parser.parse_args(rewrite_argv(_expand(m["args"], {"RUN_ID": "ab12"})))
    assert margs.command == "load-merge"
    assert sorted(margs.dirs) == sorted(outs)
    assert margs.out not in outs
    # Shards and merge share the results volume, which every pod can mount.
    for job in (shards, merge):
        claims = [
            v["persistentVolumeClaim"]["claimName"]
            for v in job["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        ]
        assert claims == [_one("PersistentVolumeClaim", LOAD)["metadata"]["name"]]
    assert _one("PersistentVolumeClaim", LOAD)["spec"]["accessModes"] == ["ReadWriteMany"]
    # A shard whose expectations failed still exits 0 (the merge judges), so a Job
    # retry never replays calls: only crashes are retried, once.
    assert spec["backoffLimitPerIndex"] <= 1
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert (rule["action"], rule["onExitCodes"]["values"]) == ("FailIndex", [2])
