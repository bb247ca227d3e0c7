"""sarama (Go; github.com/IBM/sarama v1.61.1) against the broker.

The Go module in clients/sarama builds `sarama-driver`, which runs one bounded scenario per call
(ClusterAdmin, Sync/AsyncProducer per codec and acks, idempotence, partition consumers,
ConsumerGroup with each assignor, static membership, transactions, error paths) and prints
what sarama observed as one JSON object; these tests assert on it. The driver is built once per
session into .cache/sarama/, keyed by a hash of go.mod, go.sum and the .go files, so it is
rebuilt only when they change; `go build` fetches the modules through the Go module proxy
itself on a fresh machine.

sarama picks request versions from Config.Version, not from the broker (ApiVersions only caps
them). The driver sets Config.Version = sarama.V4_0_0_0 ("4.0.0"), what a current user sets;
with it sarama sends Produce v10, Fetch v12, ListOffsets v6, Metadata v11, FindCoordinator v3,
JoinGroup v8, SyncGroup v5, Heartbeat v4, LeaveGroup v5, OffsetCommit v8, OffsetFetch v8,
DescribeGroups v5, ListGroups v5, CreateTopics v7, DeleteTopics v6, DescribeConfigs v4,
AlterConfigs v2, IncrementalAlterConfigs v1, CreatePartitions v3, DeleteRecords v2,
InitProducerId v4, AddPartitionsToTxn v3, AddOffsetsToTxn v3, EndTxn v3, TxnOffsetCommit v3.
sarama's default Version (V2_8_0_0; JoinGroup v7, LeaveGroup v4, OffsetFetch v7, otherwise
mostly the same) asks for nothing Kafka 4.0 removed (KIP-896), so the default-version tests
pass against Kafka 4.4; they pin that. sarama.MaxVersion (4.3.1) is covered once as well. A
Config.Version of 0.10.x does ask for removed versions: test_old_config_version_refused pins
how both brokers refuse it.

Byte fields in the JSON (keys, values, header values) are base64, null for a null field.
Errors are {"name": Kafka's error name, "code": ..., "text": sarama's message}; an error that
sarama raised itself (no broker error code) is named SARAMA_* or CLIENT_ERROR.
SARAMA_LOG=info (or debug) passes sarama.Logger through to stderr, shown with a failure.
"""
import base64
import os
import uuid
from pathlib import Path

import pytest

from harness.broker import Broker, running, use_shared
from harness.drivers import build_go_driver, run_driver

DRIVER_SRC = Path(__file__).resolve().parent / "sarama"


# ---- the driver ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def sarama_driver():
    return build_go_driver("sarama-driver", DRIVER_SRC, "sarama")


def run(driver, scenario, broker, timeout=60, **flags):
    """Run one scenario and return its JSON (see harness.drivers.run_driver)."""
    return run_driver(driver, scenario, broker, timeout, os.environ.get("SARAMA_LOG", "none"),
                      flags, stderr_tail=20000)


_CACHE = {}


def run_once(driver, scenario, broker, **flags):
    """run(), but once per (scenario, broker run): several tests assert on different parts of
    one scenario's answer."""
    key = (scenario, broker.bootstrap, broker.starts, tuple(sorted(flags)))
    if key not in _CACHE:
        _CACHE[key] = run(driver, scenario, broker, **flags)
    return _CACHE[key]


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def text(v):
    return base64.b64decode(v).decode()


def err_name(e):
    return None if e is None else e["name"]


def group_name(topic_name):
    return "g-" + topic_name


# ---- a broker with stricter limits ----------------------------------------------------------

STRICT = {"auto.create.topics.enable": "false", "message.max.bytes": "4096",
          # Abort timed-out transactions within half a second (default: every 10 s).
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def _strict(tmp_path_factory):
    # One per module rather than broker_factory's one per test: a Kafka start costs seconds.
    with running(Broker(tmp_path_factory.mktemp("sarama-strict"), overrides=STRICT,
                        name="strict")) as b:
        yield b


@pytest.fixture
def strict_broker(_strict, request):
    """A broker (shared by this module) with auto topic creation off, a 4 KiB
    message.max.bytes and a fast timed-out-transaction check; its log is attached to failures
    like the shared broker's."""
    return use_shared(_strict, request)


# ---- ClusterAdmin --------------------------------------------------------------------------

CREATE_CONFIGS = "retention.ms=3600000,cleanup.policy=compact,max.message.bytes=200000"


def admin_run(driver, broker):
    return run_once(driver, "admin", broker, topic="sarama-admin-" + uuid.uuid4().hex[:6],
                    partitions=3, configs=CREATE_CONFIGS)


def cfg(value, source):
    """A described, writable, non-sensitive config entry (sarama derives `default` from the
    source)."""
    return {"value": value, "source": source, "default": source == "Default",
            "read_only": False, "sensitive": False}


def test_admin_create_list_describe(sarama_driver, broker):
    r = admin_run(sarama_driver, broker)
    t = r["describe"]["topics"]
    (topic,) = [n for n in t if not n.endswith(("-missing", "-v"))]
    assert r["cluster"] == {"error": None, "controller": 1,
                            "brokers": [{"id": 1, "addr": broker.bootstrap}]}
    assert r["create"] is None
    assert err_name(r["create_again"]) == "TOPIC_ALREADY_EXISTS"
    assert r["create_again"]["text"].endswith(f"Topic '{topic}' already exists.")
    # Validate-only creates nothing.
    assert r["create_validate_only"] is None
    assert err_name(t[topic + "-v"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert err_name(r["create_bad_config_value"]) == "INVALID_CONFIG"
    assert err_name(r["create_unknown_config"]) == "INVALID_CONFIG"
    assert r["create_unknown_config"]["text"].endswith("Unknown topic config name: no.such.config")
    assert err_name(r["create_bad_replication"]) == "INVALID_REPLICATION_FACTOR"
    assert err_name(r["create_zero_partitions"]) == "INVALID_PARTITIONS"
    assert err_name(r["create_invalid_name"]) == "INVALID_TOPIC_EXCEPTION"
    assert err_name(r["create_bad_assignment"]) == "INVALID_REPLICA_ASSIGNMENT"
    assert (r["create_with_assignment"], r["delete_with_assignment"]) == (None, None)

    # ListTopics: Metadata for every topic plus one DescribeConfigs for all of them; sarama
    # keeps only the non-default entries.
    lt = r["list_topics"]
    assert lt["error"] is None and topic in lt["names"]
    assert lt["topic"] == {
        "partitions": 3, "replication_factor": 1,
        "assignment": {"0": [1], "1": [1], "2": [1]},
        # min.insync.replicas is a cluster-level dynamic default on a KRaft cluster.
        "configs": {"retention.ms": "3600000", "cleanup.policy": "compact",
                    "max.message.bytes": "200000", "min.insync.replicas": "1"}}

    d = t[topic]
    assert d["error"] is None and d["internal"] is False
    assert d["id"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert sorted(d["partitions"]) == ["0", "1", "2"]
    for p in d["partitions"].values():
        assert p == {"leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1], "offline": [],
                     "error": None}
    missing = t[topic + "-missing"]
    assert err_name(missing["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert missing["partitions"] == {}


def test_admin_describe_and_alter_configs(sarama_driver, broker):
    r = admin_run(sarama_driver, broker)
    c = r["configs"]
    assert c["error"] is None
    c = c["configs"]
    assert c["retention.ms"] == cfg("3600000", "Topic")
    assert c["cleanup.policy"] == cfg("compact", "Topic")
    assert c["max.message.bytes"] == cfg("200000", "Topic")
    assert c["segment.bytes"] == cfg("1073741824", "Default")
    assert c["compression.type"] == cfg("producer", "Default")
    assert c["min.insync.replicas"] == cfg("1", "DynamicDefaultBroker")
    assert len(c) >= 30
    assert err_name(r["configs_unknown_topic"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"

    # Named keys with synonyms: the override, and the broker config a default comes from.
    s = r["configs_synonyms"]
    assert s["error"] is None and sorted(s["configs"]) == ["retention.ms", "segment.bytes"]
    assert s["configs"]["retention.ms"]["synonyms"] == [
        {"name": "retention.ms", "value": "3600000", "source": "Topic"}]
    assert s["configs"]["segment.bytes"]["synonyms"] == [
        {"name": "log.segment.bytes", "value": "1073741824", "source": "Default"}]

    b = r["broker_configs"]
    assert b["error"] is None
    bc = b["configs"]
    assert bc["message.max.bytes"] == cfg("1048588", "Default")
    for key, value in (("num.partitions", "1"), ("node.id", "1"),
                       ("offsets.topic.replication.factor", "1")):
        assert bc[key] == {"value": value, "source": "StaticBroker", "default": False,
                           "read_only": True, "sensitive": False}, key
    assert bc["auto.create.topics.enable"] == {"value": "true", "source": "Default",
                                               "default": True, "read_only": True,
                                               "sensitive": False}

    # AlterConfigs replaces the whole set: the keys it doesn't name go back to their defaults.
    assert r["alter"] is None
    a = r["configs_after_alter"]["configs"]
    assert a["retention.ms"] == cfg("7200000", "Topic")
    assert a["segment.ms"] == cfg("600000", "Topic")
    assert a["cleanup.policy"] == cfg("delete", "Default")
    assert a["max.message.bytes"] == cfg("1048588", "Default")
    assert err_name(r["alter_invalid_value"]) == "INVALID_CONFIG"
    assert err_name(r["alter_unknown_topic"]) == "UNKNOWN_TOPIC_OR_PARTITION"

    # IncrementalAlterConfigs touches only what it names.
    assert r["incremental_alter"] is None
    i = r["configs_after_incremental"]["configs"]
    assert i["cleanup.policy"] == cfg("compact", "Topic")
    assert i["retention.ms"] == cfg("604800000", "Default")
    assert i["segment.ms"] == cfg("600000", "Topic")
    assert r["incremental_validate_only"] is None
    assert r["configs_final"]["configs"]["segment.ms"] == cfg("600000", "Topic")
    assert err_name(r["incremental_invalid_value"]) == "INVALID_CONFIG"
    assert err_name(r["incremental_unknown_key"]) == "INVALID_CONFIG"
    assert r["incremental_unknown_key"]["text"].endswith(
        "Unknown topic config name: no.such.config")
    assert err_name(r["incremental_unknown_topic"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_admin_partitions_records_delete(sarama_driver, broker):
    r = admin_run(sarama_driver, broker)
    assert r["create_partitions"] is None
    grown = r["describe_after_grow"]["topics"]
    (topic,) = grown
    assert sorted(grown[topic]["partitions"], key=int) == ["0", "1", "2", "3", "4"]
    assert all(p["leader"] == 1 for p in grown[topic]["partitions"].values())
    assert err_name(r["shrink_partitions"]) == "INVALID_PARTITIONS"
    assert r["create_partitions_validate_only"] is None
    assert err_name(r["create_partitions_unknown_topic"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert err_name(r["create_partitions_bad_assignment"]) == "INVALID_REPLICA_ASSIGNMENT"

    # DeleteRecords on a plain topic (ten records at offsets 0..9).
    assert r["produce"] is None and r["produce_offsets"] == list(range(10))

    def at(key):
        p = r[key]["0"]
        assert p["error"] is None, (key, p)
        return p["offset"]

    assert (at("earliest"), at("latest")) == (0, 10)
    assert r["delete_records"] is None
    assert at("earliest_after_delete") == 4
    assert err_name(r["delete_records_past_end"]) == "OFFSET_OUT_OF_RANGE"
    assert r["delete_records_to_hwm"] is None  # -1: up to the high watermark
    assert (at("earliest_after_hwm_delete"), at("latest_after_delete")) == (10, 10)
    # ListOffsets by timestamp: the first offset whose timestamp is at or after it.
    base = r["base"]
    assert (r["after_3500"]["0"]["offset"], r["after_3500"]["0"]["timestamp"]) == (4, base + 4000)
    assert (r["after_7500"]["0"]["offset"], r["after_7500"]["0"]["timestamp"]) == \
        (7, base + 100_000)
    assert (r["after_all"]["0"]["offset"], r["after_all"]["0"]["error"]) == (-1, None)
    # A compacted topic refuses keyless records and DeleteRecords.
    assert err_name(r["produce_keyless_to_compacted"]) == "INVALID_RECORD"
    assert err_name(r["delete_records_compacted"]) == "POLICY_VIOLATION"
    assert r["delete_records_topic"] is None

    assert r["delete"] is None
    gone = r["describe_after_delete"]["topics"][topic]
    assert err_name(gone["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert err_name(r["delete_again"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_list_offsets_max_timestamp_needs_v7(sarama_driver, broker):
    r = admin_run(sarama_driver, broker)
    m = r["max_timestamp"]["0"]
    assert err_name(m["error"]) == "UNSUPPORTED_VERSION" and m["error"]["code"] == 35
    assert (m["offset"], m["timestamp"], m["leader_epoch"]) == (-1, -1, -1)


def test_admin_error_messages(sarama_driver, broker):
    r = admin_run(sarama_driver, broker)
    prefix = "kafka server: Request was for a topic or partition that does not exist on this broker"
    assert r["configs_unknown_topic"]["error"]["text"] == prefix
    assert r["create_partitions_unknown_topic"]["text"] == prefix
    assert r["create_bad_replication"]["text"].endswith(
        "only 1 broker(s) are registered or some brokers have all their log directories "
        "cordoned.")


def extras_run(driver, broker):
    return run_once(driver, "admin-extras", broker, topic="sarama-extras-" + uuid.uuid4().hex[:6])


def test_admin_log_dirs_and_unknown_group(sarama_driver, broker):
    r = extras_run(sarama_driver, broker)
    ld = r["log_dirs"]
    assert ld["error"] is None
    (d,) = ld["1"]
    assert (d["path"], d["error"]) == (str(broker.data_dir), None)
    assert d["partitions"] == {p: {"size": 0, "offset_lag": 0, "is_temporary": False}
                               for p in ("0", "1")}
    # A group that never existed: DescribeGroups v5 says Dead without an error, OffsetFetch
    # returns nothing, DeleteGroups and OffsetDelete say GROUP_ID_NOT_FOUND.
    u = r["describe_unknown_group"]
    assert (u["error"], u["state"], u["protocol_type"], u["protocol"], u["members"]) == \
        (None, "Dead", "", "", [])
    assert r["offsets_unknown_group"] == {"error": None, "version": 8, "offsets": {}}
    assert err_name(r["delete_unknown_group"]) == "GROUP_ID_NOT_FOUND"
    assert err_name(r["delete_offset_unknown_group"]) == "GROUP_ID_NOT_FOUND"
    assert r["list_unknown_group"]["found"] is False
    # By timestamp on an empty partition: -1, no error.
    e = r["offset_for_time_empty"]["0"]
    assert (e["offset"], e["timestamp"], e["error"]) == (-1, -1, None)


def test_admin_dynamic_broker_config(sarama_driver, broker):
    r = extras_run(sarama_driver, broker)
    assert r["broker_alter"] is None
    assert r["broker_after_alter"]["log.retention.bytes"] == {
        "value": "1073741824", "source": "DynamicBroker", "sensitive": False}
    # A topic without its own retention.bytes inherits the broker's dynamic value.
    assert r["topic_after_broker_alter"]["retention.bytes"] == {
        "value": "1073741824", "source": "DynamicBroker", "sensitive": False}
    assert r["broker_alter_delete"] is None
    assert r["broker_after_delete"]["log.retention.bytes"] == {
        "value": "-1", "source": "Default", "sensitive": False}
    assert err_name(r["broker_alter_read_only"]) == "INVALID_REQUEST"


def test_admin_read_only_broker_config_message(sarama_driver, broker):
    r = extras_run(sarama_driver, broker)
    assert r["broker_alter_read_only"]["text"].endswith(
        "Cannot update these configs dynamically: [log.dirs]")


def test_admin_custom_broker_config(sarama_driver, broker):
    r = extras_run(sarama_driver, broker)
    assert r["broker_alter_unknown_key"] is None
    c = r["broker_after_unknown_key"]["no.such.broker.config"]
    assert (c["source"], c["value"], c["sensitive"]) == ("DynamicBroker", "", True)
    assert r["broker_alter_unknown_key_delete"] is None


def test_admin_acls_without_authorizer(sarama_driver, broker):
    r = extras_run(sarama_driver, broker)
    assert err_name(r["list_acls"]) == "SECURITY_DISABLED"
    assert r["list_acls"]["text"].endswith("No Authorizer is configured on the broker")
    assert err_name(r["create_acl"]) == "SECURITY_DISABLED"


def test_admin_scram_quotas_reassignments_elections(sarama_driver, broker):
    r = extras_run(sarama_driver, broker)
    assert r["describe_scram"] == {"error": None, "users": 0}
    assert r["describe_quotas"] == {"error": None, "entries": 0}
    assert r["list_reassignments"] == {"error": None, "topics": 0}
    el = r["elect_leaders"]
    assert el["error"] is None
    ((key, e),) = [(k, v) for k, v in el.items() if k != "error"]
    assert key.endswith("/0") and err_name(e) == "ELECTION_NOT_NEEDED"


# ---- produce / consume ---------------------------------------------------------------------

def sample(n, partitions, base):
    """The records sarama-driver's sampleMessages produces (produce.go), as (partition, key,
    value, headers, timestamp) with base64 byte fields."""
    out = []
    for i in range(n):
        key = None if i % 10 == 3 else f"key-{i % 17}".encode()
        value = {5: None, 6: b""}.get(i % 10, (f"value-{i}-" * (1 + i % 7)).encode())
        headers = [["idx", b64(str(i).encode())], ["bin", b64(b"\x00\x01\xff")]]
        if i % 4 == 0:
            headers.append(["nil", None])
        out.append((i % partitions, b64(key), b64(value), headers, base + i))
    return out


def check_round_trip(r, n, partitions=2, log_append=False):
    produced = r["produced"]
    assert len(produced) == n
    assert [p["error"] for p in produced] == [None] * n
    assert r["close"] is None
    expected = sample(n, partitions, r["base"])
    # Offsets are dense from 0 in each partition, in send order.
    per_part = {}
    for i, p in enumerate(produced):
        assert p["partition"] == expected[i][0]
        per_part.setdefault(p["partition"], []).append(p["offset"])
    for part, offs in per_part.items():
        assert offs == list(range(len(offs))), part
    assert {p: e["offset"] for p, e in r["end"].items()} == \
        {str(p): len(o) for p, o in per_part.items()}

    for part in range(partitions):
        c = r["consumed"][str(part)]
        assert c["errors"] is None and "consume_error" not in c
        assert [m["offset"] for m in c["messages"]] == per_part[part]
    consumed = {(m["partition"], m["offset"]): m
                for c in r["consumed"].values() for m in c["messages"]}
    for i, (part, key, value, headers, ts) in enumerate(expected):
        m = consumed[(part, produced[i]["offset"])]
        assert (m["key"], m["value"], m["headers"]) == (key, value, headers), i
        if log_append:
            assert r["before_ms"] - 1000 <= m["timestamp"] <= r["after_ms"] + 1000, i
        else:
            assert m["timestamp"] == ts, i


MATRIX = [("sync", "all", "none"), ("async", "1", "none"),
          ("sync", "1", "gzip"), ("async", "all", "gzip"),
          ("sync", "all", "snappy"), ("async", "1", "snappy"),
          ("sync", "1", "lz4"), ("async", "all", "lz4"),
          ("sync", "all", "zstd"), ("async", "1", "zstd")]


@pytest.mark.parametrize("producer,acks,codec", MATRIX,
                         ids=[f"{p}-acks{a}-{c}" for p, a, c in MATRIX])
def test_produce_consume_round_trip(sarama_driver, broker, topic_name, producer, acks, codec):
    r = run(sarama_driver, "produce-consume", broker, topic=topic_name, partitions=2, count=60,
            producer=producer, acks=acks, codec=codec)
    check_round_trip(r, 60)


@pytest.mark.parametrize("producer,codec", [("sync", "zstd"), ("async", "gzip")])
def test_idempotent_producer_round_trip(sarama_driver, broker, topic_name, producer, codec):
    """Producer.Idempotent (Net.MaxOpenRequests=1, acks=all): InitProducerId, then sequenced
    batches; every record lands once, in order."""
    r = run(sarama_driver, "produce-consume", broker, topic=topic_name, partitions=2, count=200,
            producer=producer, codec=codec, idempotent=True)
    check_round_trip(r, 200)


def test_log_append_time_topic(sarama_driver, broker, topic_name):
    r = run(sarama_driver, "produce-consume", broker, topic=topic_name, partitions=2, count=20,
            codec="gzip", configs="message.timestamp.type=LogAppendTime")
    check_round_trip(r, 20, log_append=True)


@pytest.mark.parametrize("version", ["default", "4.3.1"])
def test_produce_consume_other_versions(sarama_driver, broker, topic_name, version):
    """sarama's default Config.Version (V2_8_0_0: Produce v9, Fetch v12, ...) and its
    MaxVersion (V4_3_1_0) work the same, idempotent producer included."""
    r = run(sarama_driver, "produce-consume", broker, topic=topic_name, partitions=2, count=60,
            codec="lz4", idempotent=True, version=version)
    check_round_trip(r, 60)


def test_fetch_limits_smaller_than_batches(sarama_driver, broker, topic_name):
    """Consumer.Fetch.Default and Fetch.MaxBytes of 1 KiB against 20 kB batches: each fetch
    still returns the first batch whole (KIP-74), so sarama reads everything in order."""
    r = run(sarama_driver, "fetch-limits", broker, topic=topic_name)
    assert r["produce"] == [None] * 11
    assert r["errors"] is None
    assert r["offsets"] == list(range(210))
    assert r["b64_sizes"] == [len(b64(b"a" * 20_000))] * 10 + \
        [len(b64(b"small-000-" + b"x" * 90))] * 200


# ---- consumer groups -----------------------------------------------------------------------

RANGE_SPLIT = {"range": ([0, 1], [2, 3]), "roundrobin": ([0, 2], [1, 3])}


def check_group(r, topic, strategy, parts=4, per_part=10):
    assert r["a_alone"] is True, r["a"]
    assert r["split"] is True, (r["a"], r["b"])
    a, b = r["a"], r["b"]
    assert a["sessions"][0]["claims"] == list(range(parts))
    assert a["sessions"][0]["generation"] == 1
    claims_a, claims_b = r["claims_a"], r["claims_b"]
    if strategy in RANGE_SPLIT:
        # sarama's range and roundrobin assignors order members by member id; the broker makes
        # it "<client id>-<uuid>", so sarama-a sorts first.
        assert (claims_a, claims_b) == RANGE_SPLIT[strategy]
    assert sorted(claims_a + claims_b) == list(range(parts))
    assert len(claims_a) == len(claims_b) == parts // 2
    # Eager assignors rebalance once when b joins; cooperative-sticky twice (revoke, assign).
    assert r["generation_a"] == r["generation_b"] == \
        (3 if strategy == "cooperative-sticky" else 2)

    assert r["produce_1"] is None and r["consumed_1"] == parts * per_part
    for m, claims in ((a, claims_a), (b, claims_b)):
        assert m["errors"] is None
        assert m["offsets"] == {str(p): list(range(per_part)) for p in claims}
    assert (r["commit_a"], r["commit_b"]) == (True, True)
    offs = r["offsets_1"]
    assert offs["error"] is None
    owner = {p: "sarama-a" for p in claims_a} | {p: "sarama-b" for p in claims_b}
    assert offs["offsets"] == {
        f"{topic}/{p}": {"offset": per_part, "metadata": "by-" + owner[p], "leader_epoch": -1,
                         "error": None} for p in range(parts)}
    # Named partitions: a partition without a commit (here one that doesn't exist) is -1.
    assert r["offsets_1_named"]["offsets"] == {
        f"{topic}/0": offs["offsets"][f"{topic}/0"],
        f"{topic}/{parts}": {"offset": -1, "metadata": "", "leader_epoch": -1, "error": None}}

    d = r["describe_stable"]
    assert (d["error"], d["state"], d["protocol_type"], d["protocol"]) == \
        (None, "Stable", "consumer", strategy)
    assert [m["client_id"] for m in d["members"]] == ["sarama-a", "sarama-b"]
    for m, claims, sess in zip(d["members"], (claims_a, claims_b), (a, b)):
        assert m["member_id"] == sess["sessions"][-1]["member_id"]
        assert m["member_id"].startswith(m["client_id"] + "-")
        assert (m["client_host"], m["instance_id"]) == ("/127.0.0.1", None)
        assert m["subscribed"] == [topic]
        assert m["assigned"] == claims
    assert r["list_stable"] == {"error": None, "found": True, "protocol_type": "consumer"}
    # Operator actions are refused while members are active.
    assert err_name(r["delete_group_active"]) == "NON_EMPTY_GROUP"
    assert err_name(r["delete_offset_active"]) == "GROUP_SUBSCRIBED_TO_TOPIC"
    assert r["alter_offsets_active"]["error"] is None
    assert {k: err_name(v) for k, v in r["alter_offsets_active"]["partitions"].items()} == \
        {f"{topic}/0": "UNKNOWN_MEMBER_ID"}

    assert (r["close_a"], r["close_b"]) == (None, None)
    e = r["describe_empty"]
    assert (e["error"], e["state"], e["protocol_type"], e["protocol"], e["members"]) == \
        (None, "Empty", "consumer", "", [])
    assert r["list_empty"] == {"error": None, "found": True, "protocol_type": "consumer"}

    # c resumes exactly at the commits: only the second round, each partition from offset 10.
    assert r["produce_2"] is None and r["c_alone"] is True
    assert r["consumed_2"] == parts * per_part
    c = r["c"]
    assert c["errors"] is None
    assert c["offsets"] == {str(p): list(range(per_part, 2 * per_part)) for p in range(parts)}
    assert c["sessions"][0]["generation"] > r["generation_a"]
    assert r["commit_c"] is True and r["close_c"] is None
    assert {k: (v["offset"], v["metadata"]) for k, v in r["offsets_2"]["offsets"].items()} == \
        {f"{topic}/{p}": (2 * per_part, "by-sarama-c") for p in range(parts)}

    # Operator actions on the empty group.
    assert r["alter_offsets_empty"] == {"error": None, "partitions": {f"{topic}/0": None}}
    assert r["delete_offset_empty"] is None
    big = r["alter_offsets_big_metadata"]["partitions"][f"{topic}/2"]
    assert err_name(big) == "OFFSET_METADATA_TOO_LARGE"
    o3 = r["offsets_3"]["offsets"]
    assert sorted(o3) == [f"{topic}/0", f"{topic}/2", f"{topic}/3"]
    assert (o3[f"{topic}/0"]["offset"], o3[f"{topic}/0"]["metadata"]) == (3, "reset by admin")
    assert o3[f"{topic}/2"]["offset"] == 2 * per_part
    assert r["delete_group"] is None
    assert r["list_deleted"]["found"] is False
    dd = r["describe_deleted"]
    assert (dd["error"], dd["state"], dd["members"]) == (None, "Dead", [])
    assert r["offsets_deleted"] == {"error": None, "version": 8, "offsets": {}}
    assert err_name(r["delete_group_again"]) == "GROUP_ID_NOT_FOUND"


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_consumer_group(sarama_driver, broker, topic_name, strategy):
    """sarama.NewConsumerGroup: a joins alone, b joins and the group splits; records are read
    once each by their partition's owner, MarkMessage'd and committed (session.Commit); a
    restarted member resumes at the commits; the admin views and actions around it."""
    r = run(sarama_driver, "group", broker, topic=topic_name, group=group_name(topic_name),
            partitions=4, count=40, strategy=strategy)
    check_group(r, topic_name, strategy)


@pytest.mark.parametrize("version", ["default", "4.3.1"])
def test_consumer_group_other_versions(sarama_driver, broker, topic_name, version):
    """sarama's default Config.Version (V2_8_0_0: JoinGroup v7, LeaveGroup v4, OffsetFetch v7)
    and its MaxVersion (V4_3_1_0)."""
    r = run(sarama_driver, "group", broker, topic=topic_name, group=group_name(topic_name),
            partitions=4, count=40, strategy="range", version=version)
    if version == "default":
        # OffsetFetch v7 (V2_8) answers per topic, not per group: same blocks.
        for k in ("offsets_1", "offsets_1_named", "offsets_2", "offsets_3", "offsets_deleted"):
            assert r[k]["version"] == 7
            r[k]["version"] = 8
    check_group(r, topic_name, "range")


def test_consumer_group_static_member(sarama_driver, broker, topic_name):
    """Consumer.Group.InstanceId: closing doesn't leave; a new instance with the same id replaces
    the member without a rebalance (same generation) and resumes at the commits; the operator
    removes it by instance id (LeaveGroup v3); a third instance that goes away is removed when
    its 6 s session times out."""
    r = run(sarama_driver, "group-static", broker, topic=topic_name,
            group=group_name(topic_name), partitions=2, count=20, expire=True)
    assert r["produce_1"] is None and r["produce_2"] is None
    first, second = r["first"], r["second"]
    for i, inst in enumerate((first, second)):
        assert inst["joined"] is True and inst["consumed"] == 20 and inst["commit"] is True
        assert inst["close"] is None and inst["member"]["errors"] is None
        assert inst["generation"] == 1
        (s,) = inst["member"]["sessions"]
        assert s["member_id"].startswith("sarama-static-1-")
        assert inst["member"]["offsets"] == {p: list(range(10 * i, 10 * i + 10)) for p in "01"}
        for when in ("describe_before_close", "describe_after_close"):
            d = inst[when]
            assert (d["state"], d["protocol"]) == ("Stable", "range"), when
            (m,) = d["members"]
            assert (m["instance_id"], m["member_id"], m["assigned"]) == \
                ("sarama-static-1", s["member_id"], [0, 1]), when
    assert first["member"]["sessions"][0]["member_id"] != \
        second["member"]["sessions"][0]["member_id"]
    assert {k: v["offset"] for k, v in r["offsets"]["offsets"].items()} == \
        {f"{topic_name}/0": 20, f"{topic_name}/1": 20}
    rm = r["remove_member"]
    assert rm == {"error": None, "version": 3, "members": [
        {"member_id": "", "instance_id": "sarama-static-1", "error": None}]}
    d = r["describe_after_remove"]
    assert (d["state"], d["members"]) == ("Empty", [])
    (unknown,) = r["remove_unknown_member"]["members"]
    assert err_name(unknown["error"]) == "UNKNOWN_MEMBER_ID"

    third = r["third"]
    assert r["produce_3"] is None
    assert third["joined"] is True and third["consumed"] == 20
    # Removing the member completes a rebalance to an empty generation 2; the third instance
    # forms generation 3.
    assert third["generation"] == 3
    assert third["member"]["offsets"] == {p: list(range(20, 30)) for p in "01"}
    assert third["describe_after_close"]["state"] == "Stable"
    # Measured from the close; the last heartbeat was at most 300 ms earlier.
    assert 5000 <= r["expired_after_ms"] <= 9000, r["expired_after_ms"]
    e = r["describe_after_expiry"]
    assert (e["state"], e["members"], e["protocol_type"]) == ("Empty", [], "consumer")


def test_consumer_group_protocol_selection(sarama_driver, broker, topic_name):
    """The coordinator picks the assignor every member supports (a: sticky, range; b: roundrobin,
    range -> range) and refuses a member that shares none (c: cooperative-sticky) with
    INCONSISTENT_GROUP_PROTOCOL, leaving the group as it was."""
    r = run(sarama_driver, "group-protocols", broker, topic=topic_name,
            group=group_name(topic_name))
    assert r["a_alone"] is True and r["describe_a"]["protocol"] == "sticky"
    assert r["split"] is True
    ab = r["describe_ab"]
    assert (ab["state"], ab["protocol"]) == ("Stable", "range")
    assert [m["assigned"] for m in ab["members"]] == [[0], [1]]
    c = r["c"]
    assert c["sessions"] is None and c["claimed"] is None
    assert [err_name(e["consume"]) for e in c["errors"][:1]] == ["INCONSISTENT_GROUP_PROTOCOL"]
    assert r["describe_after_c"] == ab


# ---- transactions --------------------------------------------------------------------------

def values(read):
    return [(m["offset"], text(m["value"])) for m in read["messages"]]


def check_txn(r):
    assert r["transactional"] is True and r["status_initial"] == "ProducerTxnStateReady"
    for label in ("txn1", "txn2", "txn3", "txn4_open"):
        x = r[label]
        assert x["begin"] is None and x.get("end") is None, label
        assert x["status_before_end"] == "ProducerTxnStateInTransaction", label
    assert r["txn4_open"]["status"] == "ProducerTxnStateInTransaction"
    # Each transaction's records, then one control record (offsets 5, 11, 15).
    assert [p["offset"] for p in r["txn1"]["produce"]] == [0, 1, 2, 3, 4]
    assert [p["offset"] for p in r["txn2"]["produce"]] == [6, 7, 8, 9, 10]
    assert [p["offset"] for p in r["txn3"]["produce"]] == [12, 13, 14]
    assert [p["offset"] for p in r["txn4_open"]["produce"]] == [16, 17]

    # With txn4 open: the high watermark is past it, the last stable offset stops at its start.
    assert r["hwm_open"]["0"]["offset"] == 18
    assert r["lso_open"]["0"]["offset"] == 16
    committed = [(i, f"commit1-{i}") for i in range(5)] + \
        [(12 + i, f"commit2-{i}") for i in range(3)]
    rc = r["read_committed_open"]
    assert rc["errors"] is None and values(rc) == committed
    ru = r["read_uncommitted_open"]
    assert ru["errors"] is None
    assert values(ru) == committed[:5] + [(6 + i, f"abort-{i}") for i in range(5)] + \
        committed[5:] + [(16, "open-0"), (17, "open-1")]

    assert r["txn4_abort"] is None
    assert (r["hwm"]["0"]["offset"], r["lso"]["0"]["offset"]) == (19, 19)
    assert values(r["read_committed"]) == committed

    # A new instance with the same transactional id fences the old one.
    new = r["txn_new_instance"]
    assert (new["begin"], new["end"], new["status"]) == (None, None, "ProducerTxnStateReady")
    assert [(p["offset"], p["error"]) for p in new["produce"]] == [(19, None)]
    zombie = r["txn_fenced_instance"]
    assert err_name(zombie["produce"][0]["error"]) == "PRODUCER_FENCED"
    assert err_name(zombie["end"]) == "PRODUCER_FENCED"
    assert "ProducerTxnStateFatalError" in zombie["status"]
    assert values(r["read_committed_after_fence"]) == committed + [(19, "new-0")]
    assert r["close_new"] is None


@pytest.mark.parametrize("version", ["4.0.0", "default"])
def test_transactions_commit_abort_read_committed(sarama_driver, broker, topic_name, version):
    """Producer.Transaction.ID: committed, aborted, committed and an open transaction; a
    read_committed consumer (Consumer.IsolationLevel = ReadCommitted) sees only committed
    records and stops at the last stable offset; a second producer with the same id fences the
    first (PRODUCER_FENCED)."""
    r = run(sarama_driver, "txn", broker, topic=topic_name, txn_id="txn-" + topic_name,
            version=version)
    check_txn(r)


def test_transaction_timeout_aborted_by_coordinator(sarama_driver, strict_broker, topic_name):
    """Producer.Transaction.Timeout = 1 s, the transaction left open: the coordinator aborts it
    (writing the abort marker) and fences the producer, whose CommitTxn then fails; a new
    producer with the same transactional id carries on."""
    r = run(sarama_driver, "txn-timeout", strict_broker, topic=topic_name,
            txn_id="tt-" + topic_name)
    o = r["open"]
    assert (o["begin"], [(p["offset"], p["error"]) for p in o["produce"]]) == (None, [(0, None)])
    # Record at 0, abort marker at 1.
    assert (r["hwm"]["0"]["offset"], r["lso"]["0"]["offset"]) == (2, 2)
    assert r["aborted_after_ms"] <= 5000
    assert err_name(r["commit_after_timeout"]) == "PRODUCER_FENCED"
    assert "ProducerTxnStateFatalError" in r["status_after_commit"]
    assert values(r["read_committed"]) == []
    assert values(r["read_uncommitted"]) == [(0, "doomed-0")]
    new = r["new_instance"]
    assert (new["begin"], new["end"]) == (None, None)
    assert values(r["read_committed_after"]) == [(2, "after-0")]
    assert r["close_new"] is None


def test_transactional_consume_transform_produce(sarama_driver, broker, topic_name):
    """AddMessageToTxn: the input offsets are committed for a group inside the transactions that
    write the output (AddOffsetsToTxn + TxnOffsetCommit at CommitTxn); an aborted round leaves
    neither output nor offsets."""
    r = run(sarama_driver, "txn-etl", broker, topic=topic_name, topic2=topic_name + "-out",
            group=group_name(topic_name), txn_id="etl-" + topic_name, count=20)
    assert r["produce_input"] is None and r["input"] == 20
    key = f"{topic_name}/0"
    for label, offset in (("round1", 8), ("round2_aborted", 8), ("round3", 20)):
        x = r[label]
        assert (x["begin"], x["end"], x["errors"], x["status"]) == \
            (None, None, None, "ProducerTxnStateReady"), label
        o = x["offsets"]
        assert o["error"] is None, label
        assert (o["offsets"][key]["offset"], o["offsets"][key]["error"]) == (offset, None), label
    out = r["output"]
    assert out["errors"] is None
    # Output offsets: round 1 at 0-7 (marker 8), the aborted round at 9-13 (marker 14), round 3
    # at 15-26 (marker 27).
    assert values(out) == [(i, f"ITEM-{i}") for i in range(8)] + \
        [(15 + i, f"ITEM-{8 + i}") for i in range(12)]
    assert [text(m["key"]) for m in out["messages"]] == [str(i) for i in range(20)]
    assert [o for o, _ in values(r["output_uncommitted"])] == \
        list(range(8)) + list(range(9, 14)) + list(range(15, 27))
    assert r["output_end"]["0"]["offset"] == 28
    # A group used only through transactions has no members and no protocol type.
    d = r["describe_group"]
    assert (d["state"], d["protocol_type"], d["members"]) == ("Empty", "", [])


# ---- error paths ---------------------------------------------------------------------------

def check_unknown(r, topic):
    assert err_name(r["produce"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert r["produce"]["code"] == 3
    assert (r["partition"], r["offset"]) == (-1, -1)
    assert err_name(r["topic_after"]["topics"][topic]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_produce_unknown_topic_auto_create_disabled(sarama_driver, strict_broker, topic_name):
    """auto.create.topics.enable=false: sarama's metadata request asks for creation (its
    default Metadata.AllowAutoTopicCreation=true), the broker refuses, SendMessage fails."""
    r = run(sarama_driver, "produce-unknown", strict_broker, topic=topic_name)
    check_unknown(r, topic_name)


def test_produce_unknown_topic_client_no_auto_create(sarama_driver, broker, topic_name):
    """Metadata.AllowAutoTopicCreation=false on a broker that would create topics."""
    r = run(sarama_driver, "produce-unknown", broker, topic=topic_name, auto_create=False)
    check_unknown(r, topic_name)


def test_produce_auto_creates_topic(sarama_driver, broker, topic_name):
    r = run(sarama_driver, "produce-unknown", broker, topic=topic_name)
    assert (r["produce"], r["partition"], r["offset"]) == (None, 0, 0)
    t = r["topic_after"]["topics"][topic_name]
    assert t["error"] is None and list(t["partitions"]) == ["0"]  # num.partitions=1


def check_too_large(r, limit, source):
    assert r["max_message_bytes"] == {"value": str(limit), "source": source}
    big = r["big"]
    assert err_name(big["error"]) == "MESSAGE_TOO_LARGE" and big["error"]["code"] == 10
    assert (big["partition"], big["offset"]) == (-1, -1)
    # The producer carries on after the rejected batch.
    assert (r["small"]["error"], r["small"]["offset"]) == (None, 0)
    assert r["end"]["0"]["offset"] == 1


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_record_too_large_topic_limit(sarama_driver, broker, topic_name, idempotent):
    r = run(sarama_driver, "too-large", broker, topic=topic_name,
            configs="max.message.bytes=2000", size=5000, idempotent=idempotent or None)
    check_too_large(r, 2000, "Topic")


def test_record_too_large_broker_limit(sarama_driver, strict_broker, topic_name):
    r = run(sarama_driver, "too-large", strict_broker, topic=topic_name, size=8000, codec="zstd")
    check_too_large(r, 4096, "StaticBroker")


@pytest.mark.parametrize("version", ["0.10.2.0", "0.10.0.0"])
def test_old_config_version_refused(sarama_driver, broker, topic_name, version):
    """sarama configured for an old Kafka keeps its requests at what Config.Version allows, so
    it asks for versions Kafka 4.0 removed (KIP-896): 0.10.2 sends Produce v2 and Fetch v3,
    0.10.0 also ListOffsets v0. The broker closes the connection (sarama sees EOF) instead of
    answering; a sarama user must raise Config.Version (the default, 2.8, works)."""
    r = run(sarama_driver, "old-version", broker, topic=topic_name, version=version)
    assert r["produce_current"] is None
    assert r["produce_old"] == {"name": "CLIENT_ERROR", "text": "EOF"}
    assert r["produce_old_offset"] == -1
    c = r["consume_old"]
    assert c["offsets"] == []
    eof = {"name": "CLIENT_ERROR", "text": "EOF"}
    if version == "0.10.2.0":
        # ListOffsets v1 still works: the partition consumer starts, its fetches fail.
        assert (c["consume_error"], c["first_fetch_error"]) == (None, eof)
    else:
        assert (c["consume_error"], c["first_fetch_error"]) == (eof, None)
    assert r["end"]["0"]["offset"] == 3  # nothing written by the old client


def test_fetch_offset_out_of_range(sarama_driver, broker, topic_name):
    r = run(sarama_driver, "fetch-out-of-range", broker, topic=topic_name,
            group=group_name(topic_name))
    assert (r["produce_1"], r["produce_2"], r["delete_records"]) == (None, None, None)
    # ConsumePartition checks a start offset against ListOffsets (earliest/latest) itself.
    assert err_name(r["consume_past_end"]) == "OFFSET_OUT_OF_RANGE"
    assert err_name(r["consume_below_start"]) == "OFFSET_OUT_OF_RANGE"
    # The broker's own answer: a Fetch at 5 after the log start moved to 8. sarama hands the
    # error to the user and stops the partition consumer; nothing below 8 leaks.
    f = r["fetch_after_delete"]
    assert f["messages"] == []
    assert err_name(f["error"]) == "OFFSET_OUT_OF_RANGE" and f["error"]["code"] == 1
    assert r["consume_oldest"] == {"offsets": [8, 9], "errors": None}
    # A group committed below the log start: sarama (ResetInvalidOffsets) restarts at oldest.
    assert r["commit_stale"] == {"error": None, "partitions": {f"{topic_name}/0": None}}
    assert r["group_close"] is None
    g = r["group"]
    assert g["errors"] is None and g["offsets"] == {"0": [8, 9]}
