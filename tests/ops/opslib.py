"""Helpers for the operations suites (#8): where the dashboards, rules and manifests live, the
PromQL they contain (parsed with promql-parser), the series a live /metrics exposes, and a
traffic driver that makes a broker export every family it has."""
import json
import re
import socket
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness import wire

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"
GRAFANA_DASHBOARDS = DASHBOARDS / "grafana" / "dashboards"
DATASOURCES = DASHBOARDS / "grafana" / "provisioning" / "datasources"
RULE_FILES = sorted((DASHBOARDS / "prometheus").glob("*.rules.yml"))
KUSTOMIZE = ROOT / "deploy" / "kubernetes"

# Series the dashboards and rules may use that no broker exports, each with why.
EXTERNAL_SERIES = {
    "up": "Prometheus's own per-target scrape health",
    "kubelet_volume_stats_used_bytes": "the kubelet's PVC stats (disk usage of log.dirs)",
    "kubelet_volume_stats_capacity_bytes": "the kubelet's PVC stats (disk usage of log.dirs)",
}
# Labels Prometheus attaches to every scraped series (target labels from the scrape configs in
# dashboards/prometheus/ and the ServiceMonitor), plus the kubelet's volume labels.
TARGET_LABELS = {"job", "instance", "cluster", "namespace", "pod", "service", "endpoint",
                 "container", "__name__"}
EXTERNAL_LABELS = {"persistentvolumeclaim"}


# ---- where the expressions are -------------------------------------------------------------

@dataclass
class Expr:
    where: str
    promql: str


def load_dashboards():
    return {p.name: json.loads(p.read_text()) for p in sorted(GRAFANA_DASHBOARDS.glob("*.json"))}


def iter_panels(panels):
    for p in panels:
        yield p
        yield from iter_panels(p.get("panels", []))


def dashboard_exprs():
    out = []
    for name, d in load_dashboards().items():
        for p in iter_panels(d.get("panels", [])):
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append(Expr(f"{name} panel {p['id']} '{p['title']}' {t['refId']}",
                                    t["expr"]))
        for v in d.get("templating", {}).get("list", []):
            if v.get("type") != "query":
                continue
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            inner = variable_promql(q)
            if inner:
                out.append(Expr(f"{name} variable ${v['name']}", inner))
    return out


def variable_promql(query):
    """The PromQL inside a Grafana Prometheus variable query (label_values, query_result)."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query, re.S)
    if m:
        return m.group(1)
    m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    if m:
        return m.group(1)
    return None


def load_rules():
    return {p.name: yaml.safe_load(p.read_text()) for p in RULE_FILES}


def rule_exprs():
    out = []
    for name, doc in load_rules().items():
        for g in doc["groups"]:
            for r in g["rules"]:
                out.append(Expr(f"{name} {g['name']}/{r.get('alert') or r.get('record')}",
                                r["expr"]))
    return out


def recorded_series():
    return {r["record"] for doc in load_rules().values() for g in doc["groups"]
            for r in g["rules"] if "record" in r}


# ---- PromQL --------------------------------------------------------------------------------

def grafana_to_promql(expr):
    """Replaces Grafana's macros and variables so the text parses as PromQL. Variables are only
    used inside label-matcher strings; macros are durations."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)
    expr = re.sub(r"\$\{(\w+)(:\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", "x", expr)
    return expr


def grafana_to_query(expr, rate_interval="20s", range_="1m"):
    """A panel expression as Grafana would send it with every variable at "All" (".*")."""
    expr = expr.replace("$__rate_interval", rate_interval).replace("$__interval", "5s")
    expr = expr.replace("$__range", range_)
    return re.sub(r"\$\{(\w+)(:\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", ".*", expr)


@dataclass
class SeriesUse:
    name: str
    labels: set = field(default_factory=set)  # label names matched in its selector


@dataclass
class ExprUses:
    series: list = field(default_factory=list)  # [SeriesUse]
    grouping: set = field(default_factory=set)  # labels in by/without/on/ignoring/group_x


def parse_uses(promql):
    import promql_parser

    uses = ExprUses()
    _walk(promql_parser.parse(grafana_to_promql(promql)), uses)
    return uses


def _walk(node, uses):
    kind = type(node).__name__
    if kind == "VectorSelector":
        labels = set()
        name = node.name
        for m in list(node.matchers.matchers) + [m for ms in node.matchers.or_matchers
                                                 for m in ms]:
            if m.name == "__name__":
                name = m.value
            else:
                labels.add(m.name)
        uses.series.append(SeriesUse(name, labels))
    elif kind == "MatrixSelector":
        _walk(node.vector_selector, uses)
    elif kind == "AggregateExpr":
        if node.modifier is not None:
            uses.grouping.update(node.modifier.labels)
        _walk(node.expr, uses)
        if node.param is not None:
            _walk(node.param, uses)
    elif kind == "BinaryExpr":
        mod = node.modifier
        if mod is not None:
            if mod.matching is not None:
                uses.grouping.update(mod.matching.labels)
            uses.grouping.update(mod.group_labels or [])
        _walk(node.lhs, uses)
        _walk(node.rhs, uses)
    elif kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        _walk(node.expr, uses)
    elif kind == "Call":
        for a in node.args:
            _walk(a, uses)
    elif kind in ("NumberLiteral", "StringLiteral"):
        pass
    else:
        raise AssertionError(f"unhandled PromQL node {kind}")


# ---- the exposition ------------------------------------------------------------------------

def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+\S+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')


def exposed_series(text):
    """{series name: set of label names} over every sample line of a Prometheus text scrape
    (histograms contribute their _bucket/_sum/_count names)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"unparsable sample line: {line!r}"
        out.setdefault(m.group(1), set()).update(_LABEL.findall(m.group(3) or ""))
    return out


def wait_readyz(broker, timeout=60):
    """Waits for /readyz (registered and unfenced: what the Kubernetes readiness probe waits
    for before the client Service routes to the pod). The harness's readiness is ApiVersions
    only, and kactor may leave admin requests sent before this point unanswered."""
    if broker.target != "kactor":
        return
    url = broker.metrics_url.rsplit("/", 1)[0] + "/readyz"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if http_get(url, timeout=2)[0] == 200:
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{broker.name}: /readyz not 200 after {timeout}s"
        time.sleep(0.1)


# ---- traffic -------------------------------------------------------------------------------

def drive_traffic(broker, seconds=5.0):
    """Produce, fetch and admin traffic through a real client, plus raw requests that make the
    broker count an error, a refused and a closed connection, so every family it has exports a
    sample. Requests the broker does not serve yet fail and are ignored: the point is to
    exercise whatever it does export, not to test the APIs."""
    for v in (0, 3, 4):
        wire.api_versions(broker.port, v)
    # An ApiVersions at an unknown version gets UNSUPPORTED_VERSION (35): an error response.
    with wire.connect(broker.port) as s:
        s.sendall(wire.api_versions_request(99, correlation_id=5))
        try:
            wire.recv_frame(s)
        except OSError:
            pass
    # A frame over socket.request.max.bytes: the broker closes the connection.
    with wire.connect(broker.port) as s:
        s.sendall(wire.i32(0x7FFFFFF0) + b"\0" * 16)
        wire.wait_closed(s, timeout=5)
    _client_traffic(broker, seconds)
    _quota_traffic(broker, seconds)


def sasl_ssl_login(broker, certs):
    """One TLS handshake and one SASL PLAIN login (alice, from the SecureBroker's JAAS users)
    on the SASL_SSL listener, so the TLS and SASL families export a sample."""
    import ssl
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    with socket.create_connection(("127.0.0.1", broker.sasl_ssl_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(wire.frame(wire.request_header_v1(17, 1, 1) + wire.string("PLAIN")))
            wire.recv_frame(s)
            token = b"\0alice\0alice-plain"
            s.sendall(wire.frame(wire.request_header_v1(36, 1, 2) + wire.i32(len(token))
                                 + token))
            wire.recv_frame(s)
            # Metadata v1 for one topic alice has no ACL on: with an authorizer, a denial.
            s.sendall(wire.frame(wire.request_header_v1(3, 1, 3) + wire.i32(1)
                                 + wire.string("ops-denied")))
            wire.recv_frame(s)


def _quota_traffic(broker, seconds):
    """A producer over a tiny producer_byte_rate quota (set with a raw AlterClientQuotas),
    so the quota families export a throttled client."""
    try:
        from confluent_kafka import Producer

        from harness import schema_codec as sc
        schemas = sc.Schemas.from_dir()
        body = {"Entries": [{"Entity": [{"EntityType": "client-id", "EntityName": "ops-quota"}],
                             "Ops": [{"Key": "producer_byte_rate", "Value": 1000.0,
                                      "Remove": False}]}], "ValidateOnly": False}
        with wire.connect(broker.port) as s:
            s.sendall(sc.encode_request(schemas, 49, 1, body, 1))
            wire.recv_frame(s)
        p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "ops-quota",
                      "log_level": 0, "message.timeout.ms": int(seconds * 1000)})
        deadline = time.monotonic() + seconds
        for _ in range(40):
            p.produce(f"ops-quota-{int(time.time())}", value=b"q" * 1000)
            p.flush(max(0.1, deadline - time.monotonic()))
            if time.monotonic() > deadline:
                break
    except Exception as e:  # noqa: BLE001 - a broker without quotas still gets traffic
        print(f"ops traffic: quota traffic failed: {e}")


def _client_traffic(broker, seconds):
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return
    topic = f"ops-traffic-{int(time.time() * 1000)}"
    # log_level 0: the clients' complaints about APIs the broker lacks are expected here.
    common = {"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 3000, "log_level": 0,
              "reconnect.backoff.max.ms": 500}
    try:
        admin = AdminClient(common)
        futs = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=seconds)
        for f in futs.values():
            f.result(timeout=seconds)
    except Exception as e:  # noqa: BLE001 - a broker without CreateTopics still gets traffic
        print(f"ops traffic: CreateTopics failed: {e}")
    try:
        p = Producer({**common, "message.timeout.ms": int(seconds * 1000), "linger.ms": 5})
        for i in range(100):
            p.produce(topic, value=f"ops-{i}".encode())
        p.flush(seconds)
    except Exception:
        pass
    try:
        # Assigned, not subscribed: fetches without depending on the group coordinator.
        c = Consumer({**common, "group.id": f"{topic}-g", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + seconds
        got = 0
        while time.monotonic() < deadline and got < 100:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        c.close()
    except Exception:
        pass
    try:
        # A transactional producer that commits one transaction and aborts another: the
        # transaction coordinator then exports its ids by state, commits, aborts, markers and
        # the producer ids it handed out.
        p = Producer({**common, "transactional.id": f"{topic}-tx",
                      "transaction.timeout.ms": 10000})
        p.init_transactions(seconds * 2)
        for commit in (True, False):
            p.begin_transaction()
            p.produce(topic, value=b"ops-tx")
            # Delivered first: librdkafka skips EndTxn for a transaction with nothing sent.
            p.flush(seconds)
            (p.commit_transaction if commit else p.abort_transaction)(seconds * 2)
    except Exception as e:  # noqa: BLE001 - a broker without transactions still gets traffic
        print(f"ops traffic: transactions failed: {e}")
    try:
        # A subscribed consumer in a group that commits: the group coordinator then exports
        # the group's count, members, rebalance, commit, committed-offset and lag series.
        c = Consumer({**common, "group.id": f"{topic}-sub", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000})
        c.subscribe([topic])
        deadline = time.monotonic() + 3 * seconds
        committed = False
        while time.monotonic() < deadline and not committed:
            m = c.poll(0.5)
            if m is not None and not m.error():
                try:
                    c.commit(message=m, asynchronous=False)
                    committed = True
                except Exception:  # noqa: BLE001 - the coordinator may still be loading
                    pass
        if not committed:
            print("ops traffic: no group commit")
        c.close()
        # The coordinator's first metrics refresh after it loads is only a baseline for the
        # rebalance counter, and the group above may predate it; once the group is on
        # /metrics, a second member joining starts a generation that is counted.
        wait_for_series(broker, "kactor_group_members{")
        c = Consumer({**common, "group.id": f"{topic}-sub", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000})
        c.subscribe([topic])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not c.assignment():
            c.poll(0.5)
        c.close()
    except Exception as e:  # noqa: BLE001
        print(f"ops traffic: group consumer failed: {e}")


def wait_for_series(broker, prefix, timeout=15.0):
    """Waits until /metrics has a series starting with `prefix` (families refreshed on a timer,
    such as the group coordinator's every 5 s)."""
    deadline = time.monotonic() + timeout
    while True:
        status, text = http_get(broker.metrics_url)
        if status == 200 and any(line.startswith(prefix) for line in text.splitlines()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def hold_connections(broker, n):
    """Opens n client connections (closed by the caller)."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        socks.append(s)
    return socks
