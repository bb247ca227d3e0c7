"""The dashboards, provisioning and Prometheus files, checked without a broker (#8): Grafana
dashboard JSON that loads (schema version, unique panel ids, grid inside 24 columns,
datasource references that resolve to the provisioned datasource, defined variables), the
committed JSON equal to what dashboards/build_dashboards.py writes, and `promtool` on the
rules and the scrape config."""
import importlib.util
import json
import re
import subprocess

import pytest
import yaml

from . import opslib

MIN_SCHEMA_VERSION = 36  # Grafana 9+: panel/target datasource objects {type, uid}


def provisioned_datasources():
    out = {}
    for p in opslib.DATASOURCES.glob("*.yml"):
        doc = yaml.safe_load(p.read_text())
        assert doc["apiVersion"] == 1
        for ds in doc["datasources"]:
            out[ds["uid"]] = ds
    return out


def test_datasource_provisioning():
    ds = provisioned_datasources()
    assert list(ds) == ["kactor-prometheus"]
    d = ds["kactor-prometheus"]
    assert d["type"] == "prometheus" and d["access"] == "proxy" and d["url"].startswith("http")


def test_dashboard_provisioning_points_at_a_folder():
    doc = yaml.safe_load((opslib.DASHBOARDS / "grafana" / "provisioning" / "dashboards" /
                          "kactor.yml").read_text())
    assert doc["apiVersion"] == 1
    [p] = doc["providers"]
    assert p["type"] == "file" and p["folder"] == "kactor" and p["options"]["path"]


def test_committed_json_is_what_the_builder_writes():
    spec = importlib.util.spec_from_file_location("build_dashboards",
                                                  opslib.DASHBOARDS / "build_dashboards.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rendered = mod.render()
    committed = {p.name: p.read_text() for p in opslib.GRAFANA_DASHBOARDS.glob("*.json")}
    assert rendered.keys() == committed.keys()
    for name in rendered:
        assert rendered[name] == committed[name], \
            f"{name} is stale: run python3 dashboards/build_dashboards.py"


@pytest.mark.parametrize("name", sorted(opslib.load_dashboards()))
def test_dashboard_is_valid_grafana_json(name):
    d = opslib.load_dashboards()[name]
    uids = provisioned_datasources()
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= MIN_SCHEMA_VERSION
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]), "Grafana uids: <= 40 chars"
    assert d["title"] and isinstance(d["panels"], list) and d["panels"]
    panels = list(opslib.iter_panels(d["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {ids}"
    assert all(isinstance(i, int) and i > 0 for i in ids)

    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert {"cluster", "instance"} <= variables.keys()
    for v in variables.values():
        assert v["datasource"]["uid"] in uids and v["datasource"]["type"] == "prometheus"

    occupied = set()
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (p["title"], g)
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                 for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & occupied, f"panel {p['id']} overlaps another"
        occupied |= cells
        if p["type"] in ("row", "text"):
            assert "targets" not in p
            continue
        assert p["datasource"]["uid"] in uids, f"panel {p['id']}: unknown datasource"
        assert p["targets"], f"panel {p['id']} has no query"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"]["uid"] in uids
            # Every variable a query uses is defined (or one of Grafana's macros).
            for var in re.findall(r"\$\{?(\w+)", t["expr"]):
                assert var.startswith("__") or var in variables, (p["title"], var)
    # The text a user sees must not be empty JSON-wise: a round trip keeps it identical.
    assert json.loads(json.dumps(d)) == d


def test_actors_dashboard_covers_the_actor_view():
    d = opslib.load_dashboards()["kactor-actors.json"]
    exprs = " ".join(t["expr"] for p in opslib.iter_panels(d["panels"])
                     for t in p.get("targets", []))
    for family in ["kactor_actor_mailbox_depth", "kactor_actor_messages_handled_total",
                   "kactor_actor_handle_duration_seconds_bucket", "kactor_actor_restarts_total"]:
        assert family in exprs
    assert "histogram_quantile(0.99" in exprs and "histogram_quantile(0.5" in exprs
    assert "actor" in {v["name"] for v in d["templating"]["list"]}


def row_exprs(dashboard, title):
    """The query text of every panel below row `title`, up to the next row."""
    exprs, inside = [], False
    for p in opslib.iter_panels(dashboard["panels"]):
        if p["type"] == "row":
            inside = p["title"] == title
        elif inside:
            exprs += [t["expr"] for t in p.get("targets", [])]
    return " ".join(exprs)


def test_overview_partitions_row_uses_the_lint_clean_gauges():
    exprs = row_exprs(opslib.load_dashboards()["kactor-overview.json"], "Partitions")
    for family in ["kactor_partitions{", "kactor_partitions_leader{",
                   "kactor_partitions_under_replicated{", "kactor_partitions_offline{"]:
        assert family in exprs
    assert not re.search(r"kactor_\w+_count\{", exprs), "gauges are not named *_count"


def test_overview_covers_the_transaction_coordinator():
    """A Transactions row: open transactions, commit and abort rates (aborts by reason),
    transactional ids by state, marker appends by result, producer ids handed out."""
    exprs = row_exprs(opslib.load_dashboards()["kactor-overview.json"], "Transactions")
    for family in ["kactor_transactions_open", "kactor_transaction_commits_total",
                   "kactor_transaction_aborts_total", "kactor_transaction_ids",
                   "kactor_transaction_markers_total", "kactor_transaction_coordinator_partitions",
                   "kactor_producer_ids_generated_total", "kactor_producer_id_blocks_total"]:
        assert family in exprs, family
    assert "by (reason)" in exprs and "by (state)" in exprs and "by (result)" in exprs


def test_promtool_check_rules():
    assert opslib.RULE_FILES
    out = subprocess.run(["promtool", "check", "rules", *map(str, opslib.RULE_FILES)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_cover_the_required_alerts():
    alerts = {r["alert"]: r for doc in opslib.load_rules().values() for g in doc["groups"]
              for r in g["rules"] if "alert" in r}
    for name in ["KactorBrokerDown", "KactorActorMailboxSaturated",
                 "KactorRequestLatencySLOFastBurn", "KactorRequestLatencySLOSlowBurn",
                 "KactorLogDirDiskFilling", "KactorBrokerRestartLoop", "KactorActorRestartLoop",
                 "KactorUnderReplicatedPartitions", "KactorOfflinePartitions",
                 "KactorTransactionMarkersFailing"]:
        assert name in alerts, name
    for a in alerts.values():
        assert a["labels"]["severity"] in ("warning", "critical")
        assert a["annotations"]["summary"] and a["annotations"]["description"]


def test_promtool_check_config():
    path = opslib.DASHBOARDS / "prometheus" / "prometheus.yml"
    out = subprocess.run(["promtool", "check", "config", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    # It loads every rule file there is.
    assert sorted(yaml.safe_load(path.read_text())["rule_files"]) == \
        sorted(p.name for p in opslib.RULE_FILES)


def test_kubernetes_scrape_config_keeps_job_kactor():
    # Debian's prometheus is built without Kubernetes discovery, so promtool cannot load this
    # file here; check the relabelling the rules and dashboards depend on.
    doc = yaml.safe_load((opslib.DASHBOARDS / "prometheus" /
                          "prometheus-kubernetes.yml").read_text())
    [job] = doc["scrape_configs"]
    assert job["kubernetes_sd_configs"] == [{"role": "pod"}]
    relabel = job["relabel_configs"]
    assert {"target_label": "job", "replacement": "kactor"} in relabel
    keeps = [r for r in relabel if r.get("action") == "keep"]
    assert any(r["source_labels"] ==
               ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] for r in keeps)
    assert any(r.get("target_label") == "cluster" for r in relabel)
    assert sorted(doc["rule_files"]) == sorted(p.name for p in opslib.RULE_FILES)


def test_promtool_rule_unit_tests():
    """Each alert fires on synthetic series when it should, and stays quiet when it shouldn't
    (dashboards/prometheus/tests/*.test.yml)."""
    tests = sorted((opslib.DASHBOARDS / "prometheus" / "tests").glob("*.test.yml"))
    assert tests
    out = subprocess.run(["promtool", "test", "rules", *map(str, tests)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_unit_test():
    tested = set()
    for p in (opslib.DASHBOARDS / "prometheus" / "tests").glob("*.test.yml"):
        for t in yaml.safe_load(p.read_text())["tests"]:
            tested |= {a["alertname"] for a in t.get("alert_rule_test", [])}
    alerts = {r["alert"] for doc in opslib.load_rules().values() for g in doc["groups"]
              for r in g["rules"] if "alert" in r}
    untested = alerts - tested
    assert not untested, f"alerts without a promtool unit test: {sorted(untested)}"
