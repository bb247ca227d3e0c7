#!/usr/bin/env python3
"""Writes kactor's Grafana dashboards (dashboards/grafana/dashboards/*.json) from the panel lists
below, so every panel gets the same datasource, variables and selector, and panel ids stay
unique. Run it after editing; tests/ops checks that the committed JSON is what it writes.

    python3 dashboards/build_dashboards.py

Every expression may use only metric families a running broker exports (checked against a
live /metrics by tests/ops/test_metrics_catalog.py). Panels for the active controller, ISR
changes and transactions are added here when those families exist.
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "grafana" / "dashboards"

# Must match dashboards/grafana/provisioning/datasources/kactor.yml.
DATASOURCE = {"type": "prometheus", "uid": "kactor-prometheus"}
SCHEMA_VERSION = 39  # Grafana 10.4 / 11

# The selector every broker-level query starts from: the scrape job plus the variables.
SEL = 'job="kactor", cluster=~"$cluster", instance=~"$instance"'
# The selector for the recording rules' series (kactor:*): each rule already reads only
# job="kactor" and aggregates `by (cluster, instance)`, so its output has no job label and
# SEL would match nothing.
RULE_SEL = 'cluster=~"$cluster", instance=~"$instance"'
RATE = "$__rate_interval"


def variable(name, label, query, hide=0):
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-var"},
        "refresh": 2,  # on time range change: brokers come and go
        "includeAll": True,
        "multi": True,
        # ".*" (not Grafana's OR of the values) so series without the label, e.g. a
        # Prometheus that sets no `cluster` label, still match "All".
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": hide,
        "options": [],
    }


# The partition layer's families (kactor_partitions*, kactor_partition_*,
# kactor_purgatory_size): on once a broker built from this tree exports them (tests/ops checks
# a live scrape).
PARTITION_PANELS = True

# The group coordinator's families (kactor_groups, kactor_group_*).
GROUP_PANELS = True

# The transaction coordinator's and producer-id manager's families (kactor_transaction*,
# kactor_producer_id*).
TXN_PANELS = True

CLUSTER_VAR = variable("cluster", "Cluster",
                       'label_values(kactor_network_bytes_in_total{job="kactor"}, cluster)')
INSTANCE_VAR = variable("instance", "Broker",
                        'label_values(kactor_network_bytes_in_total{job="kactor", '
                        'cluster=~"$cluster"}, instance)')
# Every hosted partition has a log size, so this lists every topic, produced to or not.
TOPIC_VAR = variable("topic", "Topic",
                     'label_values(kactor_partition_log_size_bytes{job="kactor", '
                     'cluster=~"$cluster", instance=~"$instance"}, topic)')

# Every group has a members gauge (0 when empty), so this lists every coordinated group.
GROUP_VAR = variable("group", "Consumer group",
                     'label_values(kactor_group_members{job="kactor", '
                     'cluster=~"$cluster", instance=~"$instance"}, group)')


def target(expr, legend="", ref="A", instant=False):
    t = {"refId": ref, "datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
         "range": not instant, "instant": instant}
    return t


def timeseries(title, targets, unit="short", description="", stack=False, w=12, h=8):
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                           "showPoints": "never",
                           "stacking": {"mode": "normal" if stack else "none", "group": "A"}},
            },
            "overrides": [],
        },
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                       "calcs": ["mean", "max", "lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "_size": (w, h),
    }


def stat(title, expr, unit="short", description="", thresholds=None, w=4, h=4):
    steps = thresholds or [{"color": "green", "value": None}]
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": [target(expr, instant=True)],
        "fieldConfig": {
            "defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": [],
        },
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "value", "graphMode": "area", "textMode": "auto"},
        "_size": (w, h),
    }


def text(title, content, w=24, h=3):
    return {"type": "text", "title": title, "options": {"mode": "markdown", "content": content},
            "_size": (w, h)}


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_size": (24, 1)}


def layout(panels):
    """Assigns ids and grid positions left to right, wrapping at 24 columns."""
    x = y = row_h = 0
    out = []
    for i, p in enumerate(panels, start=1):
        w, h = p.pop("_size")
        if p["type"] == "row" or x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p = {"id": i, "gridPos": {"h": h, "w": w, "x": x, "y": y}, **p}
        out.append(p)
        if p["type"] == "row":
            y += h
        else:
            x += w
            row_h = max(row_h, h)
    return out


def dashboard(uid, title, description, panels, variables, tags):
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["kactor", "kafka"] + tags,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "timezone": "",
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard"}]},
        "links": [{"type": "dashboards", "tags": ["kactor"], "asDropdown": False,
                   "title": "kactor dashboards", "includeVars": True, "keepTime": True}],
        "templating": {"list": variables},
        "panels": layout(panels),
    }


def overview():
    s = SEL
    panels = [
        row("Brokers"),
        stat("Brokers up", f"sum(up{{{s}}})",
             description="Brokers Prometheus can scrape (job=\"kactor\")."),
        stat("Brokers down", f"count(up{{{s}}} == 0) or vector(0)",
             thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        stat("Open connections", f"sum(kactor_network_connections{{{s}}})"),
        stat("Requests / s", f"sum(rate(kactor_network_requests_total{{{s}}}[{RATE}]))",
             unit="reqps"),
        stat("Error responses / s",
             f"sum(rate(kactor_network_request_errors_total{{{s}}}[{RATE}])) or vector(0)",
             unit="reqps",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Latency SLO burn rate (1h)",
             f"max(kactor:request_slow_ratio:rate1h{{{RULE_SEL}}}) / 0.01",
             description="How fast the 1% budget of requests slower than 100 ms (Fetch, "
                         "JoinGroup, SyncGroup excluded) is spent; 1 = exactly on budget. "
                         "Needs the recording rules in dashboards/prometheus/kactor.rules.yml.",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 6},
                         {"color": "red", "value": 14.4}]),
        row("Throughput"),
        timeseries("Bytes in / out", [
            target(f"sum by (instance) (rate(kactor_network_bytes_in_total{{{s}}}[{RATE}]))",
                   "{{instance}} in", "A"),
            target(f"-sum by (instance) (rate(kactor_network_bytes_out_total{{{s}}}[{RATE}]))",
                   "{{instance}} out", "B"),
        ], unit="Bps", w=24,
            description="Request bytes read (up) and response bytes written (down, negated), "
                        "size prefixes included. Per-topic bytes arrive with the partition "
                        "metrics."),
        row("Requests"),
        timeseries("Request rate by API", [target(
            f"sum by (api) (rate(kactor_network_requests_total{{{s}}}[{RATE}]))", "{{api}}")],
            unit="reqps"),
        timeseries("Errors by API and code", [target(
            f"sum by (api, error) (rate(kactor_network_request_errors_total{{{s}}}[{RATE}]))",
            "{{api}} {{error}}")], unit="reqps",
            description="Responses whose top-level error code was not NONE."),
        timeseries("Request latency p50 by API", [target(
            "histogram_quantile(0.5, sum by (le, api) (rate("
            f"kactor_network_request_duration_seconds_bucket{{{s}}}[{RATE}])))", "{{api}}")],
            unit="s", description="From the request frame being read to its response being "
                                  "queued for writing."),
        timeseries("Request latency p99 by API", [target(
            "histogram_quantile(0.99, sum by (le, api) (rate("
            f"kactor_network_request_duration_seconds_bucket{{{s}}}[{RATE}])))", "{{api}}")],
            unit="s"),
        timeseries("Slow-request ratio (SLO: ≤ 1% over 100 ms)", [
            target(f"kactor:request_slow_ratio:rate5m{{{RULE_SEL}}}", "{{instance}} 5m", "A"),
            target(f"kactor:request_slow_ratio:rate1h{{{RULE_SEL}}}", "{{instance}} 1h", "B"),
        ], unit="percentunit", w=24),
        row("Connections"),
        timeseries("Open connections by listener", [target(
            f"sum by (instance, listener) (kactor_network_connections{{{s}}})",
            "{{instance}} {{listener}}")]),
        timeseries("Connections accepted / refused / closed", [
            target(f"sum by (listener) (rate(kactor_network_connections_accepted_total{{{s}}}"
                   f"[{RATE}]))", "accepted {{listener}}", "A"),
            target(f"sum by (listener) (rate(kactor_network_connections_refused_total{{{s}}}"
                   f"[{RATE}]))", "refused {{listener}}", "B"),
            target(f"sum by (reason) (rate(kactor_network_connections_closed_total{{{s}}}"
                   f"[{RATE}]))", "closed: {{reason}}", "C"),
        ], unit="cps", description="Refused: max.connections reached. Closed: the broker "
                                   "closed the connection for a protocol violation."),
        timeseries("Authentication (SASL, TLS)", [
            target(f"sum by (listener, result) (rate(kactor_network_authentications_total{{{s}}}"
                   f"[{RATE}]))", "SASL {{listener}} {{result}}", "A"),
            target(f"sum by (listener, result) (rate(kactor_network_tls_handshakes_total{{{s}}}"
                   f"[{RATE}]))", "TLS {{listener}} {{result}}", "B"),
        ], unit="cps", description="SASL authentications and re-authentications and TLS "
                                   "handshakes per second. A rise in failures is a client "
                                   "with a wrong password or certificate, or someone guessing."),
        timeseries("Authorization denials by API", [target(
            f"sum by (api) (rate(kactor_authorization_denials_total{{{s}}}[{RATE}]))",
            "{{api}}")],
            unit="ops", description="Authorization checks the ACLs denied (authorizer.class."
                                    "name): one per refused resource of a request, each also "
                                    "logged by the kafka.authorizer.logger target. A rise "
                                    "after a deploy is a client missing an ACL."),
        timeseries("Request memory pool (queued.max.request.bytes)", [
            target(f"sum by (instance, listeners) "
                   f"(kactor_network_request_memory_pool_used_bytes{{{s}}})",
                   "{{instance}} {{listeners}} used", "A"),
            # An unbounded pool reports 2^63-1 available (Kafka's Long.MAX_VALUE); leave it out.
            target(f"sum by (instance, listeners) "
                   f"(kactor_network_request_memory_pool_available_bytes{{{s}}} < 2^62)",
                   "{{instance}} {{listeners}} available", "B"),
        ], unit="bytes", description="Request bytes read and not yet handled, out of "
                                     "queued.max.request.bytes (Kafka's MemoryPoolUsed / "
                                     "MemoryPoolAvailable). While available is at or below 0 "
                                     "no connection reads a new request. Broker and controller "
                                     "listeners have a pool each; nothing is counted when the "
                                     "pool is unbounded (the default)."),
        timeseries("Request queue (queued.max.requests)", [target(
            f"sum by (instance, listeners) (kactor_network_request_queue_size{{{s}}})",
            "{{instance}} {{listeners}}")],
            description="Requests read and not yet handled, across every connection of a "
                        "listener kind (Kafka's RequestQueueSize). At queued.max.requests no "
                        "connection reads another request until one is handled."),
        row("Client quotas"),
        stat("Throttled connections", f"sum(kactor_quota_throttled_channels{{{s}}})",
             description="Connections muted right now because their client went over a "
                         "producer_byte_rate / consumer_byte_rate quota (Kafka's delay queue "
                         "size)."),
        timeseries("Quota byte rate by client", [target(
            f"sum by (quota_type, user, client_id) (rate(kactor_quota_bytes_total{{{s}}}"
            f"[{RATE}]))", "{{quota_type}} user={{user}} client={{client_id}}")],
            unit="Bps", w=10,
            description="Bytes counted against quotas (Kafka's byte-rate), per sensor: the "
                        "user and/or client id the applying quota groups clients by (empty "
                        "where the level does not apply). Only recorded once a quota of the "
                        "type exists."),
        timeseries("Average throttle time by client", [target(
            f"sum by (quota_type, user, client_id) "
            f"(rate(kactor_quota_throttle_time_seconds_total{{{s}}}[{RATE}])) / "
            f"sum by (quota_type, user, client_id) "
            f"(rate(kactor_quota_throttled_responses_total{{{s}}}[{RATE}]))",
            "{{quota_type}} user={{user}} client={{client_id}}")], unit="s", w=10,
            description="Mean throttle time of throttled responses (Kafka's throttle-time): "
                        "how far over its quota a client pushes."),
        text("Coming with the broker's next metric families",
             ("Replica fetcher lag (exported in clusters only)"
              if PARTITION_PANELS else
              "Partitions, log size, under-replicated / offline partitions, ISR changes, the "
              "active controller")
             + (", the last stable offset" if TXN_PANELS else " and transactions")
             + " get their panels when the broker exports them (see "
             "`dashboards/build_dashboards.py`). Panels only ever query families a running "
             "broker exports; `tests/ops` checks it."),
    ]
    variables = [CLUSTER_VAR, INSTANCE_VAR]
    if PARTITION_PANELS:
        at = next(i for i, p in enumerate(panels) if p.get("title") == "Throughput")
        panels[at:at] = partition_overview_panels()
        variables.append(TOPIC_VAR)
    if GROUP_PANELS:
        at = next(i for i, p in enumerate(panels) if p.get("title") == "Connections")
        panels[at:at] = group_overview_panels()
        variables.append(GROUP_VAR)
    if TXN_PANELS:
        at = next(i for i, p in enumerate(panels) if p.get("title") == "Connections")
        panels[at:at] = transaction_overview_panels()
    return dashboard("kactor-overview", "kactor / Broker overview",
                     "Throughput, requests, latency, errors, partitions and connections of "
                     "kactor brokers.", panels, variables, ["overview"])


def partition_overview_panels():
    """Partition counts and health, per-topic throughput, log size, purgatory."""
    s = SEL
    t = f'{SEL}, topic=~"$topic"'
    red_from_1 = [{"color": "green", "value": None}, {"color": "red", "value": 1}]
    return [
        row("Partitions"),
        stat("Partitions", f"sum(kactor_partitions{{{s}}})",
             description="Partition replicas hosted by the selected brokers."),
        stat("Leaders", f"sum(kactor_partitions_leader{{{s}}})"),
        stat("Under-replicated", f"sum(kactor_partitions_under_replicated{{{s}}})",
             description="Led partitions whose ISR is smaller than their replica set.",
             thresholds=red_from_1),
        stat("Offline", f"sum(kactor_partitions_offline{{{s}}})",
             description="Assigned replicas whose log could not be opened.",
             thresholds=red_from_1),
        stat("Log size", f"sum(kactor_partition_log_size_bytes{{{t}}})", unit="bytes",
             description="On-disk bytes of the selected topics' logs (refreshed at each "
                         "offset checkpoint, log.flush.offset.checkpoint.interval.ms)."),
        stat("Purgatory", f"sum(kactor_purgatory_size{{{s}}})",
             description="DelayedProduce (acks=all) and DelayedFetch (long poll) operations "
                         "waiting."),
        row("Topics"),
        timeseries("Messages in / s by topic", [target(
            f"sum by (topic) (rate(kactor_partition_messages_in_total{{{t}}}[{RATE}]))",
            "{{topic}}")], unit="ops", w=8),
        timeseries("Bytes in / s by topic", [target(
            f"sum by (topic) (rate(kactor_partition_bytes_in_total{{{t}}}[{RATE}]))",
            "{{topic}}")], unit="Bps", w=8,
            description="Record bytes appended by producers (batch bytes as stored)."),
        timeseries("Bytes out / s by topic", [target(
            f"sum by (topic) (rate(kactor_partition_bytes_out_total{{{t}}}[{RATE}]))",
            "{{topic}}")], unit="Bps", w=8,
            description="Record bytes returned by fetches, consumers and followers."),
        timeseries("Log size by topic", [target(
            f"sum by (topic) (kactor_partition_log_size_bytes{{{t}}})", "{{topic}}")],
            unit="bytes"),
        timeseries("Partitions and leaders by broker", [
            target(f"sum by (instance) (kactor_partitions{{{s}}})",
                   "{{instance}} partitions", "A"),
            target(f"sum by (instance) (kactor_partitions_leader{{{s}}})",
                   "{{instance}} leaders", "B"),
            target(f"sum by (instance) (kactor_partitions_under_replicated{{{s}}})",
                   "{{instance}} under-replicated", "C"),
            target(f"sum by (instance) (kactor_partitions_offline{{{s}}})",
                   "{{instance}} offline", "D"),
        ], description="Leaders spread evenly = balanced load; any under-replicated or "
                       "offline partition needs attention."),
        timeseries("Purgatory by operation", [target(
            f"sum by (instance, operation) (kactor_purgatory_size{{{s}}})",
            "{{instance}} {{operation}}")], w=24),
        row("Replication"),
        stat("Under min ISR", f"sum(kactor_partitions_under_min_isr{{{s}}})",
             description="Led partitions whose ISR is below the effective "
                         "min.insync.replicas: acks=all writes are refused and the high "
                         "watermark does not move.",
             thresholds=red_from_1),
        stat("At min ISR", f"sum(kactor_partitions_at_min_isr{{{s}}})",
             description="Led partitions exactly at min.insync.replicas: one more lost "
                         "replica and acks=all writes stop.",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Offline partitions", f"sum(kactor_controller_offline_partitions{{{s}}})",
             description="Partitions without a leader, as the active controller sees them "
                         "(other controllers report 0).",
             thresholds=red_from_1),
        stat("Preferred-leader imbalance",
             f"sum(kactor_controller_preferred_replica_imbalance{{{s}}})",
             description="Partitions not led by their first replica; "
                         "auto.leader.rebalance.enable moves them back every "
                         "leader.imbalance.check.interval.seconds."),
        stat("Active brokers", f"sum(kactor_controller_active_brokers{{{s}}})",
             description="Registered, unfenced brokers (active controller)."),
        stat("Fenced brokers", f"sum(kactor_controller_fenced_brokers{{{s}}})",
             description="Registered brokers the controller fenced (session expired, "
                         "shut down, or catching up after a start).",
             thresholds=red_from_1),
        timeseries("ISR shrinks / expands per s", [
            target(f"sum by (instance) (rate(kactor_isr_shrinks_total{{{s}}}[{RATE}]))",
                   "{{instance}} shrinks", "A"),
            target(f"sum by (instance) (rate(kactor_isr_expands_total{{{s}}}[{RATE}]))",
                   "{{instance}} expands", "B"),
        ], unit="ops", description="ISR changes this broker's leaders proposed and the "
                                   "controller committed. Steady shrink/expand churn means "
                                   "followers keep falling behind replica.lag.time.max.ms."),
        timeseries("Replication bytes in / s", [target(
            f"sum by (instance) (rate(kactor_replication_bytes_in_total{{{s}}}[{RATE}]))",
            "{{instance}}")], unit="Bps",
            description="Bytes followers on each broker appended from their leaders."),
        timeseries("Partitions by controller view", [
            target(f"sum(kactor_controller_partitions{{{s}}})", "partitions", "A"),
            target(f"sum(kactor_controller_topics{{{s}}})", "topics", "B"),
            target(f"max(kactor_controller_active{{{s}}})", "an active controller (1)", "C"),
        ], w=24, description="The metadata the active controller holds; 'an active "
                             "controller' drops to 0 while the quorum has no leader."),
        row("Log cleaner"),
        stat("Max dirty ratio", f"max(kactor_log_cleaner_max_dirty_ratio{{{s}}})",
             unit="percentunit",
             description="The largest share of not-yet-cleaned bytes among compacted logs at "
                         "the cleaner's last round (Kafka's max-dirty-percent). A log is "
                         "cleaned once it passes its min.cleanable.dirty.ratio."),
        stat("Since last cleaner run",
             f"time() - max(kactor_log_cleaner_last_run_timestamp_seconds{{{s}}})", unit="s",
             description="Seconds since a cleaner last looked for work (Kafka's "
                         "time-since-last-run-ms); it looks every log.cleaner.backoff.ms.",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 300}]),
        stat("Uncleanable partitions",
             f"sum(kactor_log_cleaner_uncleanable_partitions{{{s}}})",
             description="Compacted logs a cleaning failed on; they grow until the broker "
                         "restarts or the partition moves (see the broker log).",
             thresholds=red_from_1),
        stat("Offset map use", f"max(kactor_log_cleaner_buffer_utilization_ratio{{{s}}})",
             unit="percentunit",
             description="Share of the offset map (log.cleaner.dedupe.buffer.size / "
                         "log.cleaner.threads) the last cleaning filled. Near the load factor "
                         "(0.9) a cleaning stops early and needs more rounds."),
        stat("Cleanings (1h)",
             f"sum(increase(kactor_log_cleaner_cleanings_total{{{s}}}[1h]))"),
        timeseries("Bytes cleaned / s", [
            target(f"sum by (instance) (rate(kactor_log_cleaner_bytes_read_total{{{s}}}"
                   f"[{RATE}]))", "{{instance}} read", "A"),
            target(f"sum by (instance) (rate(kactor_log_cleaner_bytes_written_total{{{s}}}"
                   f"[{RATE}]))", "{{instance}} written", "B"),
        ], unit="Bps", w=24,
            description="Segment bytes the cleaner read and rewrote, and what it wrote back; "
                        "the gap is what compaction removed."),
    ]


def group_overview_panels():
    """Consumer groups (kactor_groups, kactor_group_*): counts by state and type, members,
    rebalances, offset commits, committed offsets and consumer lag."""
    s = SEL
    g = f'{SEL}, group=~"$group"'
    lag = f'{g}, topic=~"$topic"' if PARTITION_PANELS else g
    return [
        row("Consumer groups"),
        stat("Groups", f"sum(kactor_groups{{{s}}})",
             description="Groups coordinated by the selected brokers, any state or type."),
        stat("Members", f"sum(kactor_group_members{{{g}}})"),
        stat("Rebalances (range)", f"sum(increase(kactor_group_rebalances_total{{{s}}}"
             "[$__range])) or vector(0)",
             description="New classic generations and KIP-848 group epochs in the time range.",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 10}]),
        stat("Offset commits / s", f"sum(rate(kactor_group_offset_commits_total{{{s}}}"
             f"[{RATE}])) or vector(0)", unit="ops"),
        stat("Total consumer lag", f"sum(kactor_group_consumer_lag{{{lag}}})",
             description="Records produced but not yet committed, all selected groups.",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1000},
                         {"color": "red", "value": 100000}]),
        stat("Max partition lag", f"max(kactor_group_consumer_lag{{{lag}}})",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1000},
                         {"color": "red", "value": 100000}]),
        timeseries("Groups by state and type", [target(
            f"sum by (state, type) (kactor_groups{{{s}}})", "{{type}} {{state}}")],
            stack=True, w=8,
            description="classic (JoinGroup/SyncGroup) and consumer (KIP-848) groups by state: "
                        "a rising PreparingRebalance / CompletingRebalance band is groups stuck "
                        "rebalancing."),
        timeseries("Members by group", [target(
            f"sum by (group) (kactor_group_members{{{g}}})", "{{group}}")], w=8),
        timeseries("Rebalances / s by type", [target(
            f"sum by (type) (rate(kactor_group_rebalances_total{{{s}}}[{RATE}]))",
            "{{type}}")], unit="ops", w=8,
            description="A steady rate means members keep joining and leaving (session "
                        "timeouts, max.poll.interval.ms exceeded, crash loops)."),
        timeseries("Offset commits / s by API", [target(
            f"sum by (api) (rate(kactor_group_offset_commits_total{{{s}}}[{RATE}]))",
            "{{api}}")], unit="ops", w=8,
            description="Partition offsets committed (counted once durable): OffsetCommit "
                        "from consumers, TxnOffsetCommit from transactional producers."),
        timeseries("Consumption rate by group and topic", [target(
            f"sum by (group, topic) (deriv(kactor_group_committed_offset{{{lag}}}[5m]))",
            "{{group}} {{topic}}")], unit="ops", w=8,
            description="How fast each group's committed offsets advance (records per second)."),
        timeseries("Consumer lag by group", [target(
            f"sum by (group) (kactor_group_consumer_lag{{{lag}}})", "{{group}}")], w=8,
            description="High watermark minus committed offset, summed over the group's "
                        "partitions (each exported by the partition's leader)."),
        timeseries("Top 10 lagging partitions", [target(
            f"topk(10, max by (group, topic, partition) (kactor_group_consumer_lag{{{lag}}}))",
            "{{group}} {{topic}}-{{partition}}")], w=24),
        *share_group_panels(),
    ]


def share_group_panels():
    """Share groups (KIP-932, kactor_share_*): records delivered to share consumers, the ones
    still locked to a consumer, redeliveries and lock expiries. Members are in the group
    panels above (type="share")."""
    s = SEL
    return [
        row("Share groups"),
        stat("Share members", f'sum(kactor_group_members{{{s}, type="share"}}) or vector(0)'),
        stat("Share sessions", f"sum(kactor_share_sessions{{{s}}})",
             description="Open ShareFetch sessions (one per member and broker it fetches from)."),
        stat("Records in flight", f"sum(kactor_share_records_in_flight{{{s}}})",
             description="Delivered to a share consumer and not yet acknowledged: each holds a "
                         "lock of group.share.record.lock.duration.ms."),
        stat("Deliveries / s", f"sum(rate(kactor_share_records_acquired_total{{{s}}}"
             f"[{RATE}])) or vector(0)", unit="ops"),
        stat("Redeliveries / s", f"sum(rate(kactor_share_records_redelivered_total{{{s}}}"
             f"[{RATE}])) or vector(0)", unit="ops",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Lock expiries / s", f"sum(rate(kactor_share_lock_releases_total{{{s}}}"
             f"[{RATE}])) or vector(0)", unit="ops",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        timeseries("Share deliveries / s", [
            target(f"sum(rate(kactor_share_records_acquired_total{{{s}}}[{RATE}]))",
                   "delivered"),
            target(f"sum(rate(kactor_share_records_redelivered_total{{{s}}}[{RATE}]))",
                   "redelivered", ref="B"),
            target(f"sum(rate(kactor_share_lock_releases_total{{{s}}}[{RATE}]))",
                   "released by lock expiry or dropped session", ref="C")],
            unit="ops", w=12,
            description="Redeliveries follow releases, lock expiries and dropped sessions; a "
                        "record delivered group.share.delivery.count.limit times is archived."),
        timeseries("Share records in flight and partitions", [
            target(f"sum(kactor_share_records_in_flight{{{s}}})", "records in flight"),
            target(f"sum(kactor_share_partitions{{{s}}})", "share-partitions", ref="B"),
            target(f"sum(kactor_share_sessions{{{s}}})", "sessions", ref="C")], w=12),
    ]


def transaction_overview_panels():
    """Transactions (kactor_transaction*, kactor_producer_id*): Kafka's transaction coordinator
    and producer-id manager. Each broker reports the `__transaction_state` partitions it
    coordinates, so sums over brokers are cluster totals."""
    s = SEL
    return [
        row("Transactions"),
        stat("Open transactions", f"sum(kactor_transactions_open{{{s}}})",
             description="Begun and not yet complete: Ongoing, PrepareCommit, PrepareAbort, "
                         "PrepareEpochFence. Each holds back the last stable offset of the "
                         "partitions it wrote to, so read_committed consumers wait on it."),
        stat("Commits / s", f"sum(rate(kactor_transaction_commits_total{{{s}}}[{RATE}]))",
             unit="ops"),
        stat("Aborts / s", f"sum(rate(kactor_transaction_aborts_total{{{s}}}[{RATE}]))"
             " or vector(0)", unit="ops",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Producer ids / s", f"sum(rate(kactor_producer_ids_generated_total{{{s}}}"
             f"[{RATE}]))", unit="ops",
             description="InitProducerId answers: idempotent producers starting and "
                         "transactional ids initialising. A high steady rate is producers "
                         "being re-created."),
        stat("Failed marker appends (range)", "sum(increase(kactor_transaction_markers_total"
             f'{{{s}, result="failed"}}[$__range])) or vector(0)',
             description="Commit/abort markers the coordinator could not append yet (retried); "
                         "a transaction stays in PrepareCommit/PrepareAbort until they land.",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Coordinator partitions", f"sum(kactor_transaction_coordinator_partitions{{{s}}})",
             description="__transaction_state partitions whose coordinator is loaded "
                         "(transaction.state.log.num.partitions across the cluster when all "
                         "are up)."),
        timeseries("Commits and aborts / s", [
            target(f"sum(rate(kactor_transaction_commits_total{{{s}}}[{RATE}]))", "commits",
                   "A"),
            target(f"sum by (reason) (rate(kactor_transaction_aborts_total{{{s}}}[{RATE}]))",
                   "aborts: {{reason}}", "B"),
        ], unit="ops", w=8,
            description="Aborts by reason: client (EndTxn abort), timeout "
                        "(transaction.timeout.ms), fenced (a new producer instance took the "
                        "transactional id)."),
        timeseries("Open transactions by broker", [target(
            f"sum by (instance) (kactor_transactions_open{{{s}}})", "{{instance}}")], w=8),
        timeseries("Transactional ids by state", [target(
            f"sum by (state) (kactor_transaction_ids{{{s}}})", "{{state}}")], stack=True, w=8,
            description="Transactional ids the coordinators hold, by Kafka's state name "
                        "(Empty, Ongoing, PrepareCommit, CompleteCommit, ...)."),
        timeseries("Transaction markers / s by result", [target(
            f"sum by (result) (rate(kactor_transaction_markers_total{{{s}}}[{RATE}]))",
            "{{result}}")], unit="ops", w=12),
        timeseries("Producer ids and id blocks", [
            target(f"sum by (instance) (rate(kactor_producer_ids_generated_total{{{s}}}"
                   f"[{RATE}]))", "{{instance}} ids / s", "A"),
            target(f"sum by (instance) (increase(kactor_producer_id_blocks_total{{{s}}}"
                   "[1h]))", "{{instance}} blocks / h", "B"),
        ], w=12, description="Producer ids handed out, and the id blocks (1000 ids each) "
                             "each broker had to ask the controller for."),
        timeseries("Last stable offset lag (top 10 partitions)", [target(
            f"topk(10, max by (topic, partition) "
            f"(kactor_partition_last_stable_offset_lag{{{s}}}))", "{{topic}}-{{partition}}")],
            w=12, description="High watermark minus last stable offset of led partitions "
                              "(Kafka's LastStableOffsetLag): records read_committed consumers "
                              "cannot see yet because a transaction is still open. A lag that "
                              "keeps growing is a hanging transaction (kafka-transactions "
                              "find-hanging)."),
        timeseries("Producers with state by topic", [target(
            f"sum by (topic) (kactor_partition_producers{{{s}}})", "{{topic}}")], w=12,
            description="Producer ids the led partitions keep sequence state for, until "
                        "producer.id.expiration.ms after their last write."),
    ]


def actors():
    a = f'{SEL}, actor=~"$actor"'
    actor_var = variable("actor", "Actor type",
                         'label_values(kactor_actor_messages_handled_total{job="kactor", '
                         'cluster=~"$cluster", instance=~"$instance"}, actor)')
    panels = [
        row("Load"),
        timeseries("Mailbox depth", [target(
            f"max by (instance, actor) (kactor_actor_mailbox_depth{{{a}}})",
            "{{actor}} {{instance}}")],
            description="Messages sent to an actor type but not yet handled, all its "
                        "instances on one broker together. A growing line is a backlog."),
        timeseries("Messages handled / s", [target(
            f"sum by (actor) (rate(kactor_actor_messages_handled_total{{{a}}}[{RATE}]))",
            "{{actor}}")], unit="ops"),
        timeseries("Busy time (handler seconds per second)", [target(
            f"sum by (instance, actor) (rate(kactor_actor_handle_duration_seconds_sum{{{a}}}"
            f"[{RATE}]))", "{{actor}} {{instance}}")], unit="percentunit",
            description="Share of one thread spent inside this actor type's handlers: "
                        "Kafka's request-handler idle ratio, inverted and per actor type. "
                        "Near the arbiter count means the pool is saturated."),
        timeseries("Mean handle time", [target(
            f"sum by (actor) (rate(kactor_actor_handle_duration_seconds_sum{{{a}}}[{RATE}]))"
            f" / sum by (actor) (rate(kactor_actor_handle_duration_seconds_count{{{a}}}"
            f"[{RATE}]))", "{{actor}}")], unit="s"),
        row("Handle time percentiles"),
        timeseries("Handle time p50", [target(
            "histogram_quantile(0.5, sum by (le, actor) (rate("
            f"kactor_actor_handle_duration_seconds_bucket{{{a}}}[{RATE}])))", "{{actor}}")],
            unit="s", w=8),
        timeseries("Handle time p99", [target(
            "histogram_quantile(0.99, sum by (le, actor) (rate("
            f"kactor_actor_handle_duration_seconds_bucket{{{a}}}[{RATE}])))", "{{actor}}")],
            unit="s", w=8),
        timeseries("Handle time p99.9", [target(
            "histogram_quantile(0.999, sum by (le, actor) (rate("
            f"kactor_actor_handle_duration_seconds_bucket{{{a}}}[{RATE}])))", "{{actor}}")],
            unit="s", w=8),
        row("Supervision"),
        timeseries("Restarts", [target(
            f"sum by (instance, actor) (increase(kactor_actor_restarts_total{{{a}}}[5m]))",
            "{{actor}} {{instance}}")], unit="short",
            description="Supervisor restarts per 5 minutes: the actor's handler failed and it "
                        "was restarted from its persisted state."),
        timeseries("Messages refused (mailbox full)", [target(
            f"sum by (instance, actor) (rate(kactor_actor_messages_refused_total{{{a}}}"
            f"[{RATE}]))", "{{actor}} {{instance}}")], unit="ops",
            description="Messages a sender could not queue because the actor's bounded "
                        "mailbox was full (try_send). Requests wait for room instead; a "
                        "non-zero line means an actor is slower than what feeds it."),
        stat("Restarts in range", f"sum(increase(kactor_actor_restarts_total{{{a}}}"
             "[$__range])) or vector(0)",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1},
                         {"color": "red", "value": 4}], w=6, h=8),
        stat("Stuck handlers", "sum(kactor_actor_stuck_handlers{" + SEL + "}) or vector(0)",
             thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
             w=6, h=8,
             description="Handlers holding their thread for more than 5 s now (the broker "
                         "log names the actor and message)."),
        stat("Deepest mailbox", f"max(kactor_actor_mailbox_depth{{{a}}})",
             thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 100},
                         {"color": "red", "value": 1000}], w=6, h=8),
    ]
    return dashboard("kactor-actors", "kactor / Actors",
                     "Per actor type: mailbox depth, handle-time percentiles, messages/s, "
                     "supervisor restarts.", panels,
                     [CLUSTER_VAR, INSTANCE_VAR, actor_var], ["actors"])


DASHBOARDS = {"kactor-overview.json": overview, "kactor-actors.json": actors}


def render():
    return {name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
            for name, build in DASHBOARDS.items()}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text_ in render().items():
        (OUT / name).write_text(text_)
        print(f"wrote {OUT / name}", file=sys.stderr)


if __name__ == "__main__":
    main()
