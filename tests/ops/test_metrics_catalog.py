"""Dashboards and alert rules against a live broker (#8): every series a panel, variable or rule
queries is one that a broker which has served traffic really exports; the scrape passes
`promtool check metrics`; a real Prometheus server scrapes kactor, loads the rules and answers
queries."""
import json
import subprocess
import time
import urllib.request

import pytest

from harness import wire
from harness.prometheus import Prometheus

from . import opslib

MAX_CONNECTIONS = 20


@pytest.fixture(scope="module")
def scraped(tmp_path_factory, target):
    """A private broker that has served produce/fetch/admin traffic, an error response, an
    oversize frame and a refused connection; yields (broker, /metrics text)."""
    if target != "kactor":
        pytest.skip("kactor's /metrics (Kafka exposes JMX)")
    from harness.security import SecureBroker, make_certs

    # Secured listeners too (SSL, SASL_SSL, SASL_PLAINTEXT), so the TLS and SASL families
    # export series; one PLAIN login over TLS is part of the traffic.
    certs = tmp_path_factory.mktemp("ops-certs")
    make_certs(certs)
    # Checkpoints every second: the log-size gauges are refreshed at each checkpoint.
    # A bounded request memory pool (twice socket.request.max.bytes): unbounded, the pool
    # panel leaves its "available" series (2^63-1) out and would show nothing.
    b = SecureBroker(tmp_path_factory.mktemp("ops-catalog"), certs, name="ops-catalog",
                     overrides={"max.connections": str(MAX_CONNECTIONS),
                                # ACLs on, every local listener's ANONYMOUS a super user:
                                # alice's SASL login below is refused a topic.
                                "authorizer.class.name":
                                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                "super.users": "User:ANONYMOUS;User:admin",
                                "log.flush.offset.checkpoint.interval.ms": "1000",
                                "queued.max.request.bytes": str(2 * 104857600)})
    b.start()
    try:
        opslib.wait_readyz(b)
        opslib.drive_traffic(b)
        opslib.sasl_ssl_login(b, certs)
        # The group and transaction coordinators refresh their gauges every 5 s; lag is the
        # last step.
        for family in ("kactor_group_consumer_lag{", "kactor_group_rebalances_total{",
                       "kactor_transaction_aborts_total{"):
            opslib.wait_for_series(b, family)
        # Let the clients' connections close and a checkpoint pass, then go past
        # max.connections once.
        time.sleep(2)
        socks = opslib.hold_connections(b, MAX_CONNECTIONS + 3)
        time.sleep(0.5)
        for s in socks:
            s.close()
        status, text = opslib.http_get(b.metrics_url)
        assert status == 200
        yield b, text
    finally:
        b.stop()


def all_exprs():
    return opslib.dashboard_exprs() + opslib.rule_exprs()


def test_every_expression_parses():
    exprs = all_exprs()
    assert len(exprs) > 20, "expected the dashboards' and rules' expressions"
    bad = []
    for e in exprs:
        try:
            opslib.parse_uses(e.promql)
        except Exception as err:  # noqa: BLE001 - report every bad expression at once
            bad.append(f"{e.where}: {err}\n    {e.promql}")
    assert not bad, "unparsable PromQL:\n" + "\n".join(bad)


def test_dashboards_and_rules_use_only_exported_series(scraped):
    _, text = scraped
    exposed = opslib.exposed_series(text)
    recorded = opslib.recorded_series()
    problems = []
    for e in all_exprs():
        uses = opslib.parse_uses(e.promql)
        labels_here = set(opslib.TARGET_LABELS)
        for s in uses.series:
            if s.name is None:
                problems.append(f"{e.where}: selector without a metric name")
                continue
            if s.name in exposed:
                known_labels = exposed[s.name] | opslib.TARGET_LABELS
            elif s.name in recorded:
                known_labels = opslib.TARGET_LABELS
            elif s.name in opslib.EXTERNAL_SERIES:
                known_labels = opslib.TARGET_LABELS | opslib.EXTERNAL_LABELS
            else:
                problems.append(f"{e.where}: unknown series {s.name}")
                continue
            labels_here |= known_labels
            for label in s.labels - known_labels:
                problems.append(f"{e.where}: {s.name} has no label {label!r}")
        for label in uses.grouping - labels_here:
            problems.append(f"{e.where}: groups by {label!r}, which none of its series has")
    assert not problems, "\n".join(problems) + "\n\nexported: " + ", ".join(sorted(exposed))


# Components whose families the dashboards cover in full. A component's new families show up
# here once its panels exist, so a component adding metrics doesn't fail this suite before the
# dashboards catch up (they're reported by the test below instead).
COVERED_PREFIXES = ("kactor_actor_", "kactor_group_", "kactor_groups", "kactor_network_",
                    "kactor_partition_", "kactor_partitions", "kactor_purgatory_",
                    "kactor_transaction", "kactor_producer_id")


def _family(series):
    return series.rsplit("_", 1)[0] if series.endswith(("_bucket", "_sum", "_count")) else series


def test_every_exported_family_has_a_panel(scraped):
    """The other direction: an exported family no dashboard shows is an operator blind spot."""
    _, text = scraped
    used = {_family(s.name) for e in opslib.dashboard_exprs()
            for s in opslib.parse_uses(e.promql).series if s.name}
    exported = {_family(n) for n in opslib.exposed_series(text) if n.startswith("kactor_")}
    missing = sorted(f for f in exported - used if f.startswith(COVERED_PREFIXES))
    assert not missing, f"exported but on no dashboard: {missing}"
    uncovered = sorted(f for f in exported - used if not f.startswith(COVERED_PREFIXES))
    if uncovered:
        print(f"families not on a dashboard yet (new components): {uncovered}")


def test_promtool_check_metrics_on_live_scrape(scraped):
    _, text = scraped
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=60)
    # No allowance: every family is lint-clean (gauges counting things are plural nouns such
    # as kactor_partitions, never *_count, which Prometheus reserves for histograms/summaries).
    assert out.returncode == 0 and not (out.stdout + out.stderr).strip(), \
        out.stdout + out.stderr


def test_prometheus_scrapes_broker_and_evaluates_rules(scraped, tmp_path):
    """A real Prometheus scrapes kactor with the rules loaded: the target is up, every rule
    group evaluates without error, and the request rate the overview shows is non-zero."""
    b, _ = scraped
    host_port = b.metrics_url.split("/")[2]
    with Prometheus(tmp_path / "prom", [host_port], rule_files=opslib.RULE_FILES) as prom:
        prom.wait_for('up{job="kactor"} == 1')
        # Traffic while Prometheus watches, so rate() has two different samples.
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            wire.api_versions(b.port, 3)
            time.sleep(0.2)
        result = prom.wait_for(
            'sum(rate(kactor_network_requests_total{job="kactor", api="ApiVersions"}[10s]))',
            lambda r: r and float(r[0]["value"][1]) > 0)
        assert float(result[0]["value"][1]) > 0
        with urllib.request.urlopen(prom.url + "/api/v1/rules", timeout=10) as r:
            groups = json.loads(r.read())["data"]["groups"]
        names = {g["name"] for g in groups}
        expected = {g["name"] for doc in opslib.load_rules().values() for g in doc["groups"]}
        assert names == expected
        # Wait for one evaluation of every rule, then require that none failed.
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(prom.url + "/api/v1/rules", timeout=10) as r:
                rules = [rule for g in json.loads(r.read())["data"]["groups"]
                         for rule in g["rules"]]
            if all(rule.get("lastEvaluation", "").startswith("20") for rule in rules) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        bad = [(rule["name"], rule.get("lastError")) for rule in rules
               if rule.get("health") != "ok"]
        assert not bad, bad
        # Every panel's query, as Grafana sends it with the variables at "All", is accepted by
        # Prometheus itself; the core panels show data.
        failed, empty = [], []
        for e in opslib.dashboard_exprs():
            q = opslib.grafana_to_query(e.promql)
            try:
                result = prom.query(q)
            except Exception as err:  # noqa: BLE001 - report every failing panel at once
                failed.append(f"{e.where}: {err}")
                continue
            if not result:
                empty.append(e)
        assert not failed, "\n".join(failed)
        # And every one shows data: the fixture's traffic touches every family a panel reads
        # (test_every_exported_family_has_a_panel is the converse). A query that returns
        # nothing here is a panel a user sees empty, like the SLO panels that once filtered
        # the recording rules' output on the job label those rules aggregate away. Asked
        # again for a while first: a recording rule's series appears one evaluation after its
        # inputs.
        still_empty = []
        for e in empty:
            q = opslib.grafana_to_query(e.promql)
            try:
                prom.wait_for(q, timeout=10)
            except AssertionError:  # wait_for gave up: report every empty panel at once
                still_empty.append(f"{e.where}: {q}")
        assert not still_empty, "panels that show nothing against a live broker:\n" + \
            "\n".join(still_empty)
        # The broker is up, so its availability alert must not be firing.
        alerts = prom.query('ALERTS{alertname="KactorBrokerDown"}')
        assert not alerts, alerts


def test_prometheus_answers_produce_rate(broker_factory, tmp_path, target):
    """The overview's produce-rate query, answered non-zero by a real Prometheus while a client
    produces."""
    if target == "kafka":
        pytest.skip("kactor's /metrics (Kafka exposes JMX)")
    from confluent_kafka import Producer

    from harness.clients import create_topic
    b = broker_factory(name="ops-produce")
    opslib.wait_readyz(b)
    topic = "ops-produce-rate"
    create_topic(b, topic)
    host_port = b.metrics_url.split("/")[2]
    with Prometheus(tmp_path / "prom", [host_port]) as prom:
        prom.wait_for('up{job="kactor"} == 1')
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            for i in range(50):
                p.produce(topic, value=b"x" * 100)
            p.flush(10)
            time.sleep(0.1)
        result = prom.wait_for(
            'sum(rate(kactor_network_requests_total{job="kactor", api="Produce"}[10s]))',
            lambda r: r and float(r[0]["value"][1]) > 0)
        assert float(result[0]["value"][1]) > 0
        # The overview's "Messages in / s by topic" panel, as Grafana sends it.
        [panel] = [e for e in opslib.dashboard_exprs() if "'Messages in / s by topic'" in e.where]
        result = prom.wait_for(opslib.grafana_to_query(panel.promql, rate_interval="10s"),
                               lambda r: any(x["metric"].get("topic") == topic
                                             and float(x["value"][1]) > 0 for x in r))
