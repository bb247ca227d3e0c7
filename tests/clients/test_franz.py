"""franz-go (Go; github.com/twmb/franz-go v1.22.3, kadm v1.20.0) against the broker.

The Go module in clients/franz builds `franz-driver`, which runs one bounded scenario per call
(admin, offsets, produce/consume per codec, classic and KIP-848 groups, transactions, error
paths) and prints what franz-go observed as one JSON object; these tests assert on it. The
driver is built once per session into .cache/franz/, keyed by a hash of go.mod, go.sum and the
.go files, so it is rebuilt only when they change; `go build` fetches the modules through the
Go module proxy itself on a fresh machine.

Byte fields in the JSON (keys, values, header values) are base64, null for a null field.
FRANZ_LOG=debug (or info, warn) passes franz-go's own log through: every request it writes
and reads, with the version (`wrote Produce v13`), shown with a failing test's output.
"""
import base64
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from harness.broker import Broker, running, use_shared
from harness.drivers import build_go_driver, run_driver

DRIVER_SRC = Path(__file__).resolve().parent / "franz"

# franz-go's wire ids for the record batch codec (RecordAttrs.CompressionType).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4,
             "default": 2}  # franz-go's default preference is snappy, falling back to none


# ---- the driver ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def franz_driver():
    return build_go_driver("franz-driver", DRIVER_SRC, "franz-go")


def run(driver, scenario, broker, timeout=60, **flags):
    """Run one scenario and return its JSON (see harness.drivers.run_driver)."""
    return run_driver(driver, scenario, broker, timeout, os.environ.get("FRANZ_LOG", "none"),
                      flags)


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def err_name(e):
    return None if e is None else e["name"]


def group_name(topic_name):
    return "g-" + topic_name


# ---- a broker with stricter limits ----------------------------------------------------------

STRICT = {"auto.create.topics.enable": "false", "message.max.bytes": "4096"}


@pytest.fixture(scope="module")
def _strict(tmp_path_factory):
    with running(Broker(tmp_path_factory.mktemp("franz-strict"), overrides=STRICT,
                        name="strict")) as b:
        yield b


@pytest.fixture
def strict_broker(_strict, request):
    """A broker (shared by this module) with auto topic creation off and a 4 KiB
    message.max.bytes; its log is attached to failures like the shared broker's."""
    return use_shared(_strict, request)


# ---- admin ---------------------------------------------------------------------------------

CREATE_CONFIGS = "retention.ms=3600000,cleanup.policy=compact,max.message.bytes=200000"


def test_admin_topic_lifecycle(franz_driver, broker, topic_name):
    r = run(franz_driver, "admin", broker, topic=topic_name, partitions=3, configs=CREATE_CONFIGS)
    c = r["create"]
    assert c["error"] is None
    assert c["partitions"] == 3 and c["replication_factor"] == 1
    assert c["id"] != base64.b64encode(bytes(16)).decode()
    for key, value in [("retention.ms", "3600000"), ("cleanup.policy", "compact"),
                       ("max.message.bytes", "200000")]:
        assert c["configs"][key] == {"value": value, "source": "DYNAMIC_TOPIC_CONFIG"}
    assert err_name(r["create_again"]) == "TOPIC_ALREADY_EXISTS"

    assert topic_name in r["list_all"]["topics"]
    d = r["describe"]["topic"]
    assert d["error"] is None and d["id"] == c["id"] and d["internal"] is False
    assert sorted(d["partitions"]) == ["0", "1", "2"]
    for p in d["partitions"].values():
        assert (p["leader"], p["replicas"], p["isr"], p["error"]) == (1, [1], [1], None)
        assert p["leader_epoch"] == 0

    cfg = r["configs"]
    assert cfg["error"] is None
    assert cfg["configs"]["retention.ms"]["value"] == "3600000"
    assert cfg["configs"]["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert cfg["configs"]["cleanup.policy"] == {
        "value": "compact", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False}
    assert cfg["configs"]["segment.bytes"] == {"value": "1073741824", "source": "DEFAULT_CONFIG",
                                               "sensitive": False}
    assert cfg["configs"]["min.insync.replicas"]["value"] == "1"
    # Every topic config Kafka describes, no more, no less.
    assert set(cfg["configs"]) == set(c["configs"]) and len(cfg["configs"]) >= 30

    assert r["alter"] == [{"name": topic_name, "error": None}]
    after = r["configs_after_alter"]["configs"]
    assert after["retention.ms"] == {"value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG",
                                     "sensitive": False}
    assert after["cleanup.policy"] == {"value": "delete", "source": "DEFAULT_CONFIG",
                                       "sensitive": False}
    assert after["segment.ms"] == {"value": "600000", "source": "DYNAMIC_TOPIC_CONFIG",
                                   "sensitive": False}
    assert after["max.message.bytes"]["value"] == "200000"  # untouched by the incremental alter
    (bad,) = r["alter_invalid_value"]
    assert err_name(bad["error"]) == "INVALID_CONFIG"
    (missing,) = r["alter_unknown_topic"]
    assert err_name(missing["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert err_name(r["configs_unknown_topic"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"

    assert r["create_partitions"] is None
    grown = r["describe_after_grow"]["topic"]["partitions"]
    assert sorted(grown, key=int) == ["0", "1", "2", "3", "4"]
    assert all(p["leader"] == 1 for p in grown.values())
    assert err_name(r["shrink_partitions"]) == "INVALID_PARTITIONS"

    assert r["delete"] is None
    assert err_name(r["describe_after_delete"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert err_name(r["delete_again"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_admin_create_topic_response_config_sources(franz_driver, broker, topic_name):
    r = run(franz_driver, "admin", broker, topic=topic_name, partitions=1, configs=CREATE_CONFIGS)
    created = r["create"]["configs"]
    described = r["configs"]["configs"]
    # The sources CreateTopics reports are the ones DescribeConfigs reports for the same topic.
    mismatched = {k: (v["source"], described[k]["source"]) for k, v in created.items()
                  if v["source"] != described[k]["source"]}
    assert mismatched == {}
    assert created["compression.type"] == {"value": "producer", "source": "DEFAULT_CONFIG"}
    assert created["segment.bytes"] == {"value": "1073741824", "source": "DEFAULT_CONFIG"}


def test_list_offsets_and_delete_records(franz_driver, broker, topic_name):
    r = run(franz_driver, "offsets", broker, topic=topic_name)
    base = r["base"]
    assert [p["offset"] for p in r["produce"]] == list(range(10))
    assert all(p["error"] is None for p in r["produce"])

    def one(listed):
        assert list(listed) == ["0"], listed
        return listed["0"]

    assert one(r["start"])["offset"] == 0
    assert one(r["end"])["offset"] == 10
    assert one(r["committed_lso"])["offset"] == 10
    def at(key):
        return one(r[key])["offset"], one(r[key])["timestamp"]

    assert at("max_timestamp") == (7, base + 100_000)
    assert at("after_3500") == (4, base + 4000)
    assert at("after_7500") == (7, base + 100_000)
    assert at("after_base") == (0, base)
    for key in ("start", "end", "max_timestamp", "after_3500"):
        assert one(r[key])["error"] is None
        assert one(r[key])["leader_epoch"] == 0
    # No record at or after the timestamp: offset and timestamp -1, no error.
    raw = r["raw_after_all"]
    assert (raw["offset"], raw["timestamp"], raw["error"]) == (-1, -1, None)

    assert r["delete_records"] == {"0": {"low_watermark": 3, "error": None}}
    assert one(r["start_after_delete"])["offset"] == 3
    assert at("after_base_after_delete") == (3, base + 3000)
    assert err_name(one(r["delete_records_past_end"])["error"]) == "OFFSET_OUT_OF_RANGE"
    assert err_name(r["unknown_topic"]["-1"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_cluster_metadata_and_log_dirs(franz_driver, broker, topic_name, target):
    r = run(franz_driver, "cluster", broker, topic=topic_name)
    assert r["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    assert r["controller"] == 1
    assert r["list_brokers"] == {"count": 1, "error": None}
    assert len(r["cluster_id"]) == 22
    if target == "kafka":
        assert r["cluster_id"] == broker.cluster_id
    assert r["produce"] is None
    (d,) = r["log_dirs"]
    assert (d["broker"], d["dir"], d["error"]) == (1, str(broker.data_dir), None)
    assert 0 < d["usable_bytes"] <= d["total_bytes"]
    # Ten uncompressed 1000-byte records in one batch: 61-byte batch header + 10 x 1009.
    assert d["partitions"] == {"0": {"size": 10151, "offset_lag": 0, "is_future": False},
                               "1": {"size": 0, "offset_lag": 0, "is_future": False}}

    cfg = r["broker_configs"]
    assert cfg["error"] is None
    c = cfg["configs"]
    static = {"num.partitions": "1", "node.id": "1", "offsets.topic.replication.factor": "1",
              "log.dirs": str(broker.data_dir), "process.roles": "broker,controller",
              "group.initial.rebalance.delay.ms": "0"}
    for key, value in static.items():
        assert c[key] == {"value": value, "source": "STATIC_BROKER_CONFIG", "sensitive": False}, key
    defaults = {"message.max.bytes": "1048588", "log.retention.hours": "168",
                "auto.create.topics.enable": "true", "log.segment.bytes": "1073741824",
                "group.consumer.heartbeat.interval.ms": "5000",
                "transaction.max.timeout.ms": "900000"}
    for key, value in defaults.items():
        assert c[key] == {"value": value, "source": "DEFAULT_CONFIG", "sensitive": False}, key
    assert c["min.insync.replicas"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"


def test_describe_broker_configs_key_set(franz_driver, broker, topic_name):
    r = run(franz_driver, "cluster", broker, topic=topic_name)
    c = r["broker_configs"]["configs"]
    assert c["broker.id"] == {"value": "1", "source": "STATIC_BROKER_CONFIG", "sensitive": False}
    for key in ("metrics.num.samples", "quota.window.num", "kafka.metrics.reporters",
                "sasl.enabled.mechanisms", "ssl.protocol", "remote.log.storage.system.enable",
                "group.share.heartbeat.interval.ms", "group.streams.heartbeat.interval.ms",
                "delegation.token.max.lifetime.ms", "principal.builder.class"):
        assert key in c, key
    # kactor describes its own keys too (the metrics endpoint and log settings, and the producer
    # expiry check, which Kafka keeps internal); nothing else beyond Kafka's 350.
    extra = {"kactor.http.address", "kactor.log.format", "kactor.log.level",
             "producer.id.expiration.check.interval.ms"}
    assert len([k for k in c if k not in extra]) == 350


# ---- produce / consume ---------------------------------------------------------------------

N = 100


def sample(n, base):
    """The records franz-driver's sampleRecords produces (produce.go), as (key, value, headers,
    timestamp) with base64 byte fields."""
    out = []
    for i in range(n):
        key = None if i % 10 == 3 else f"key-{i % 17}".encode()
        value = {5: None, 6: b""}.get(i % 10, (f"value-{i}-" * (1 + i % 7)).encode())
        headers = [["idx", b64(str(i).encode())], ["bin", b64(b"\x00\x01\xff")]]
        if i % 4 == 0:
            headers.append(["nil", None])
        out.append((b64(key), b64(value), headers, base + i))
    return out


@pytest.mark.parametrize("codec", ["default", "none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_round_trip(franz_driver, broker, topic_name, codec):
    r = run(franz_driver, "produce-consume", broker, topic=topic_name, partitions=2, count=N,
            codec=codec)
    expected = sample(N, r["base"])
    produced = r["produce"]
    assert [p["error"] for p in produced] == [None] * N
    # Idempotent by default: one producer id, epoch 0, for every record.
    pids = {p["producer_id"] for p in produced}
    assert len(pids) == 1 and pids.pop() >= 0
    assert {p["producer_epoch"] for p in produced} == {0}
    # Offsets are dense from 0 in each partition, in produce order.
    per_part = {}
    for p in sorted(produced, key=lambda p: p["timestamp"]):
        per_part.setdefault(p["partition"], []).append(p["offset"])
    assert sorted(per_part) == [0, 1]
    for part, offs in per_part.items():
        assert offs == list(range(len(offs))), part

    assert r["fetch_errors"] is None
    consumed = {(c["partition"], c["offset"]): c for c in r["consumed"]}
    assert len(r["consumed"]) == N and len(consumed) == N
    # Results arrive per partition, not in produce order; each record's timestamp is its index.
    by_index = {p["timestamp"] - r["base"]: p for p in produced}
    assert sorted(by_index) == list(range(N))
    for i, (key, value, headers, ts) in enumerate(expected):
        p = by_index[i]
        c = consumed[(p["partition"], p["offset"])]
        assert (c["key"], c["value"], c["headers"], c["timestamp"]) == (key, value, headers, ts)
        assert c["timestamp_type"] == 0
        assert c["codec"] == CODEC_IDS[codec]
        assert c["producer_id"] == p["producer_id"] and c["producer_epoch"] == 0
        assert c["transactional"] is False
        assert c["leader_epoch"] == 0


def test_fetch_limits_smaller_than_batches(franz_driver, broker, topic_name):
    """1 KiB fetch limits against 20 kB batches and a 20 kB batch of small records: each fetch
    still returns the first batch whole (KIP-74), so franz-go reads everything in order."""
    r = run(franz_driver, "fetch-limits", broker, topic=topic_name)
    assert r["produce"] == [None] * 11
    assert r["fetch_errors"] is None
    assert r["offsets"] == list(range(210))
    assert r["sizes"] == [20_000] * 10 + [len("small-000-") + 90] * 200
    assert (r["first_small"], r["last_small"]) == ("small-000", "small-199")


def test_idempotent_producer_across_broker_restart(franz_driver, broker_factory, topic_name):
    """The broker restarts (SIGTERM, start on the same data) while franz-go's idempotent producer
    is mid-stream: the producer reconnects and carries on with its producer id and sequence
    numbers, and the partition holds every record once, in order."""
    b = broker_factory(name="restart")
    n = 600
    proc = subprocess.Popen([str(franz_driver), "produce-restart", "--bootstrap", b.bootstrap,
                             "--topic", topic_name, "--count", str(n), "--timeout", "150s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress, started = [], threading.Event()

    def read_progress():
        for line in proc.stderr:
            progress.append(line)
            if line.startswith("delivered"):
                started.set()

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    try:
        assert started.wait(60), f"no progress from the driver: {progress[-20:]}"
        b.stop()
        b.start()
        stdout = proc.stdout.read()
        proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(10)
    r = json.loads(stdout.strip().splitlines()[-1])
    assert "error" not in r, (r, progress[-20:])
    assert b.starts == 2
    assert (r["delivered"], r["produce_errors"]) == (n, None), progress[-20:]
    # One producer id throughout: the restart did not force a new one.
    assert len(r["producer_ids"]) == 1, r["producer_ids"]
    assert r["fetch_errors"] is None
    assert r["values"] == list(range(n))
    assert r["offsets"] == list(range(n))


def test_produce_acks_and_log_append_time(franz_driver, broker, topic_name):
    r = run(franz_driver, "produce-modes", broker, topic=topic_name, topic2=topic_name + "-lat")
    assert [(p["offset"], p["error"]) for p in r["acks1"]] == [(i, None) for i in range(5)]
    assert [p["error"] for p in r["acks0"]] == [None] * 5
    assert [p["offset"] for p in r["log_append"]] == [0, 1, 2]
    assert r["fetch_errors"] is None
    plain = [c for c in r["consumed"] if c["topic"] == topic_name]
    assert [(c["offset"], base64.b64decode(c["value"]).decode()) for c in plain] == \
        [(i, f"acks1-{i}") for i in range(5)] + [(5 + i, f"acks0-{i}") for i in range(5)]
    # Without idempotence the batches carry no producer id.
    assert {(c["producer_id"], c["producer_epoch"]) for c in plain} == {(-1, -1)}
    assert [c["timestamp"] for c in plain] == [1_000_000 + i for i in range(5)] * 2
    lat = [c for c in r["consumed"] if c["topic"] == topic_name + "-lat"]
    assert [c["offset"] for c in lat] == [0, 1, 2]
    for c in lat:
        assert c["timestamp_type"] == 1
        assert r["before_ms"] - 1000 <= c["timestamp"] <= r["after_ms"] + 1000


# ---- consumer groups -----------------------------------------------------------------------

def check_group_run(r, topic_name, parts=4, per_part=10):
    """What must hold for any protocol: a took every partition alone, the group split 2/2 when
    b joined, each member read exactly its partitions' records once, the commits are what
    FetchOffsets returns, and c resumed from them."""
    assert r["produce_1"] is None and r["produce_2"] is None
    assert r["a_alone"] is True, r["a"]
    assert r["a_b_split"] is True, (r["a"], r["b"])
    owned_a, owned_b = r["owned_a"], r["owned_b"]
    assert sorted(owned_a + owned_b) == list(range(parts))
    assert r["consumed_1"] == parts * per_part
    for m, owned in (("a", owned_a), ("b", owned_b)):
        assert sorted(int(p) for p in r[m]["offsets"]) == owned, m
        for p, offs in r[m]["offsets"].items():
            assert offs == list(range(per_part)), (m, p)
    assert r["commit_a"] is None and r["commit_b"] is None
    assert {p: (o["offset"], o["error"]) for p, o in r["fetch_offsets_1"]["offsets"].items()} == \
        {str(p): (per_part, None) for p in range(parts)}
    assert r["poll_errors"] is None

    assert r["describe_empty"]["state"] == "Empty"
    assert r["describe_empty"]["members"] == []
    assert r["list_stable"]["found"] and r["list_stable"]["state"] == "Stable"
    assert r["list_empty"]["found"] and r["list_empty"]["state"] == "Empty"
    assert r["list_stable"]["protocol_type"] == "consumer"

    # c resumes exactly at the commits: only the second round, each partition from offset 10.
    assert r["consumed_2"] == parts * per_part
    assert {p: offs for p, offs in r["c"]["offsets"].items()} == \
        {str(p): list(range(per_part, 2 * per_part)) for p in range(parts)}
    assert r["commit_c"] is None
    assert {p: o["offset"] for p, o in r["fetch_offsets_2"]["offsets"].items()} == \
        {str(p): 2 * per_part for p in range(parts)}

    # Operator actions: refused while members are active, accepted once the group is empty.
    assert err_name(r["admin_commit_active"]["0"]) == "UNKNOWN_MEMBER_ID"
    assert err_name(r["delete_group_active"]) == "NON_EMPTY_GROUP"
    assert r["admin_commit_empty"] == {"0": None}
    assert r["delete_offsets"] is None
    offs3 = r["fetch_offsets_3"]["offsets"]
    assert sorted(offs3) == ["0", "2", "3"]
    assert (offs3["0"]["offset"], offs3["0"]["metadata"], offs3["0"]["leader_epoch"]) == \
        (3, "reset by admin", -1)
    assert offs3["2"]["offset"] == 20
    assert r["delete_group"] is None
    assert r["list_deleted"] == {"found": False}
    assert r["fetch_offsets_deleted"] == {"offsets": {}}
    assert err_name(r["delete_group_again"]) == "GROUP_ID_NOT_FOUND"


def test_group_autocommit_defaults(franz_driver, broker, topic_name):
    """The plainest franz-go group consumer (autocommit on): closing it commits what it read."""
    r = run(franz_driver, "group-autocommit", broker, topic=topic_name,
            group=group_name(topic_name), partitions=3, count=30)
    assert r["produce"] is None and r["fetch_errors"] is None
    assert r["consumed"] == 30
    ends = {p: e["offset"] for p, e in r["end"].items()}
    assert sum(ends.values()) == 30
    assert {p: o["offset"] for p, o in r["fetch_offsets"]["offsets"].items()} == \
        {p: e for p, e in ends.items() if e > 0}


def test_classic_group_cooperative_sticky(franz_driver, broker, topic_name):
    r = run(franz_driver, "group", broker, topic=topic_name, group=group_name(topic_name),
            partitions=4, count=40)
    check_group_run(r, topic_name)
    d = r["describe_stable"]
    assert d["error"] is None
    assert (d["state"], d["protocol_type"], d["protocol"]) == \
        ("Stable", "consumer", "cooperative-sticky")
    members = {m["client_id"]: m for m in d["members"]}
    assert sorted(members) == ["franz-a", "franz-b"]
    assert members["franz-a"]["assigned"] == r["owned_a"]
    assert members["franz-b"]["assigned"] == r["owned_b"]
    assert all(m["subscribed"] == [topic_name] for m in members.values())
    assert all(m["member_id"].startswith(m["client_id"] + "-") for m in members.values())
    assert r["list_stable"]["type"] == "classic"
    assert r["lag"] == {"total": 0, "error": None}
    # franz-go commits its member id as the offset metadata, and the record's leader epoch.
    owner = "franz-a" if 0 in r["owned_a"] else "franz-b"
    first = r["fetch_offsets_1"]["offsets"]["0"]
    assert (first["metadata"], first["leader_epoch"]) == (members[owner]["member_id"], 0)
    assert r["describe_deleted"]["state"] == "Dead"
    assert err_name(r["describe_deleted"]["error"]) == "GROUP_ID_NOT_FOUND"


def test_classic_group_static_member_restart(franz_driver, broker, topic_name):
    """kgo.InstanceID: closing doesn't leave; a restarted instance with the same id replaces the
    member without a rebalance (same generation, same assignment) and resumes at its commits."""
    r = run(franz_driver, "group-static", broker, topic=topic_name, group=group_name(topic_name),
            partitions=2, count=20)
    assert r["produce_1"] is None and r["produce_2"] is None
    first, second = r["first"], r["second"]
    for inst in (first, second):
        assert inst["joined"] is True and inst["consumed"] == 20 and inst["commit"] is None
        assert inst["poll_errors"] is None
        assert inst["member_id"].startswith("franz-static-1-")
        for when in ("describe_before_close", "describe_after_close"):
            d = inst[when]
            assert d["state"] == "Stable", when
            (m,) = d["members"]
            assert (m["instance_id"], m["member_id"], m["assigned"]) == \
                ("franz-static-1", inst["member_id"], [0, 1]), when
    assert first["member_id"] != second["member_id"]
    assert first["generation"] == second["generation"] == 1
    assert sum(len(v) for v in first["member"]["offsets"].values()) == 20
    # The second instance starts exactly where the first committed.
    for p, offs in second["member"]["offsets"].items():
        assert offs[0] == first["member"]["offsets"][p][-1] + 1, p
    ends = {p: o["offset"] for p, o in r["fetch_offsets"]["offsets"].items()}
    assert sum(ends.values()) == 40
    assert all(o["error"] is None for o in r["fetch_offsets"]["offsets"].values())


@pytest.mark.parametrize("regex", [False, True], ids=["topics", "regex"])
def test_consumer_group_kip848(franz_driver, broker, topic_name, regex):
    """kgo.ServerSideBalancer: the KIP-848 protocol (ConsumerGroupHeartbeat), broker-side
    "uniform" assignor. The regex variant subscribes with SubscribedTopicRegex, resolved by the
    broker."""
    r = run(franz_driver, "group", broker, topic=topic_name, group=group_name(topic_name),
            partitions=4, count=40, protocol="consumer", regex=regex or None, timeout=70)
    check_group_run(r, topic_name)
    d = r["describe_stable"]
    assert d["error"] is None
    assert (d["state"], d["assignor"]) == ("Stable", "uniform")
    assert d["epoch"] == d["assignment_epoch"]
    members = {m["client_id"]: m for m in d["members"]}
    assert sorted(members) == ["franz-a", "franz-b"]
    assert members["franz-a"]["assigned"] == r["owned_a"]
    assert members["franz-b"]["assigned"] == r["owned_b"]
    for m in members.values():
        assert m["member_type"] == 1  # consumer protocol, not classic
        assert m["member_epoch"] == d["epoch"]
        assert m["subscribed"] == (None if regex else [topic_name])
    assert r["list_stable"]["type"] == "consumer"
    # Classic-protocol tools don't see a consumer group.
    assert err_name(r["describe_classic_api"]["error"]) == "GROUP_ID_NOT_FOUND"
    assert err_name(r["lag"]["error"]) == "GROUP_ID_NOT_FOUND"
    assert err_name(r["describe_deleted"]["error"]) == "GROUP_ID_NOT_FOUND"


def cgh(franz_driver, broker, topic_name):
    return run(franz_driver, "cgh-join", broker, topic=topic_name, group=group_name(topic_name),
               partitions=3)


def test_kip848_lone_member_join_and_leave(franz_driver, broker, topic_name):
    r = cgh(franz_driver, broker, topic_name)
    j = r["join"]
    assert j["error"] is None and j["assignment"] == [0, 1, 2]
    assert j["heartbeat_interval_ms"] == 5000
    assert r["describe_joined"]["state"] == "Stable"
    assert r["describe_joined"]["members"][0]["assigned"] == [0, 1, 2]
    assert r["describe_joined"]["members"][0]["member_epoch"] == j["member_epoch"]
    # The next heartbeat: same epoch, assignment unchanged so not repeated (null).
    assert r["heartbeat"] == dict(j, assignment=None)
    assert (r["leave"]["error"], r["leave"]["member_epoch"]) == (None, -1)
    assert r["describe_left"]["state"] == "Empty"
    assert r["describe_left"]["epoch"] == r["describe_joined"]["epoch"] + 1


def test_kip848_first_join_epoch(franz_driver, broker, topic_name):
    r = cgh(franz_driver, broker, topic_name)
    assert r["join"]["member_epoch"] == 2
    assert (r["describe_joined"]["epoch"], r["describe_joined"]["assignment_epoch"]) == (2, 2)


def test_kip848_empty_group_assignment_epoch(franz_driver, broker, topic_name):
    r = cgh(franz_driver, broker, topic_name)
    left = r["describe_left"]
    assert left["state"] == "Empty"
    assert left["assignment_epoch"] == left["epoch"]


def test_kip848_describe_unknown_group(franz_driver, broker, topic_name):
    r = cgh(franz_driver, broker, topic_name)
    u = r["describe_unknown_raw"]
    assert err_name(u["error"]) == "GROUP_ID_NOT_FOUND"
    assert u["error_message"] == f"Group {group_name(topic_name)}-never-created not found."
    assert (u["state"], u["epoch"], u["assignment_epoch"], u["members"]) == ("", 0, 0, 0)


def test_group_configs(franz_driver, broker, topic_name):
    r = run(franz_driver, "group-config", broker, group=group_name(topic_name))
    assert r["set_session_timeout"] is None and r["set_share_reset"] is None
    assert err_name(r["set_unknown_key"]) == "INVALID_CONFIG"
    assert r["set_unknown_key"]["message"] == "Unknown group config name: no.such.group.config"
    d = r["describe"]
    assert d["error"] is None
    c = d["configs"]
    assert c["consumer.session.timeout.ms"] == {"value": "50000", "source": "GROUP_CONFIG"}
    assert c["share.auto.offset.reset"] == {"value": "earliest", "source": "GROUP_CONFIG"}
    assert c["consumer.heartbeat.interval.ms"] == {"value": "5000", "source": "DEFAULT_CONFIG"}
    assert len(c) == 21


def test_share_group(franz_driver, broker, topic_name):
    r = run(franz_driver, "share", broker, topic=topic_name, group=group_name(topic_name), count=10)
    assert r["group_config"] is None and r["produce"] is None
    assert r["poll_errors"] is None
    assert sorted(r["offsets"]) == list(range(10))
    assert r["flush_acks"] is None
    assert r["describe"] == {"error": None, "state": "Empty", "assignor": "simple"}
    # Every record accepted: nothing left to deliver (the persisted start offset trails).
    so = r["share_offsets"]
    assert so["error"] is None and list(so["offsets"]) == ["0"]
    assert (so["offsets"]["0"]["lag"], so["offsets"]["0"]["error"]) == (0, None)


# ---- transactions --------------------------------------------------------------------------

def values(records):
    return [(r["offset"], base64.b64decode(r["value"]).decode()) for r in records]


def test_transactions_commit_abort_read_committed(franz_driver, broker, topic_name):
    txn_id = "txn-" + topic_name
    r = run(franz_driver, "txn", broker, topic=topic_name, txn_id=txn_id)
    for label in ("txn1", "txn2", "txn3", "txn4_open"):
        assert r[label]["begin"] is None and r[label].get("end") is None, label
    # Each transaction's records, then one control record (offsets 5, 11, 15, 18).
    assert [p["offset"] for p in r["txn1"]["produce"]] == [0, 1, 2, 3, 4]
    assert [p["offset"] for p in r["txn2"]["produce"]] == [6, 7, 8, 9, 10]
    assert [p["offset"] for p in r["txn3"]["produce"]] == [12, 13, 14]
    assert [p["offset"] for p in r["txn4_open"]["produce"]] == [16, 17]
    pid = r["txn1"]["produce"][0]["producer_id"]
    assert pid >= 0
    # franz-go bumps the epoch at every EndTxn (KIP-890 part 2), one producer id throughout.
    for label, epoch in (("txn1", 0), ("txn2", 1), ("txn3", 2), ("txn4_open", 3)):
        ids = {(p["producer_id"], p["producer_epoch"]) for p in r[label]["produce"]}
        assert ids == {(pid, epoch)}, label

    d = r["describe_after_commit"]
    assert (d["error"], d["state"], d["producer_id"], d["timeout_ms"]) == \
        (None, "CompleteCommit", pid, 30000)
    assert r["list_after_commit"] == {"found": True, "state": "CompleteCommit", "producer_id": pid}
    d = r["describe_open"]
    assert (d["state"], d["topics"]) == ("Ongoing", {topic_name: [0]})
    prod = r["producers_open"]["0"]
    assert prod["error"] is None
    assert [(p["producer_id"], p["producer_epoch"], p["last_sequence"],
             p["current_txn_start_offset"]) for p in prod["producers"]] == [(pid, 3, 1, 16)]

    # With txn4 open: the high watermark is past it, the last stable offset stops at its start.
    assert r["end_open"]["0"]["offset"] == 18
    assert r["lso_open"]["0"]["offset"] == 16
    committed = [(i, f"commit1-{i}") for i in range(5)] + \
        [(12 + i, f"commit2-{i}") for i in range(3)]
    assert values(r["read_committed_open"]["records"]) == committed
    assert values(r["read_uncommitted_open"]["records"]) == \
        committed[:5] + [(6 + i, f"abort-{i}") for i in range(5)] + committed[5:] + \
        [(16, "open-0"), (17, "open-1")]
    assert all(rec["transactional"] for rec in r["read_uncommitted_open"]["records"])

    assert r["txn4_abort"] is None
    assert r["describe_final"]["state"] == "CompleteAbort"
    assert r["end"]["0"]["offset"] == 19 and r["lso"]["0"]["offset"] == 19
    assert values(r["read_committed"]["records"]) == committed

    # A new instance with the same transactional id fences the old one.
    new = r["txn_new_instance"]
    assert (new["begin"], new["end"]) == (None, None)
    assert [(p["offset"], p["error"], p["producer_id"]) for p in new["produce"]] == \
        [(19, None, pid)]
    zombie = r["txn_fenced_instance"]
    assert err_name(zombie["produce"][0]["error"]) == "INVALID_PRODUCER_EPOCH"
    assert err_name(zombie["end"]) == "PRODUCER_FENCED"
    assert values(r["read_committed_after_fence"]["records"]) == committed + [(19, "new-0")]


def test_group_transact_session(franz_driver, broker, topic_name):
    """Consume-transform-produce, exactly once: input offsets are committed inside the
    transactions that write the output (TxnOffsetCommit), eight records per transaction."""
    r = run(franz_driver, "txn-session", broker, topic=topic_name, topic2=topic_name + "-out",
            group=group_name(topic_name), txn_id="etl-" + topic_name, count=20)
    assert r["produce_input"] is None
    assert r["processed"] == 20
    rounds = r["rounds"]
    assert all(x.get("committed") and x["end"] is None and x["produce"] is None
               for x in rounds), rounds
    assert sum(x["records"] for x in rounds) == 20 and len(rounds) >= 3
    offs = r["fetch_offsets"]["offsets"]
    assert list(offs) == ["0"]
    assert (offs["0"]["offset"], offs["0"]["leader_epoch"], offs["0"]["error"]) == (20, 0, None)
    out = r["output"]["records"]
    assert r["output"]["fetch_errors"] is None
    pairs = [(base64.b64decode(o["key"]).decode(), base64.b64decode(o["value"]).decode())
             for o in out]
    assert pairs == [(str(i), f"ITEM-{i}") for i in range(20)]
    # Data offsets skip one control record per transaction; the end is past the last marker.
    assert len({o["offset"] for o in out}) == 20
    assert r["output_end"]["0"]["offset"] == 20 + len(rounds)


# ---- error paths ---------------------------------------------------------------------------

def test_produce_unknown_topic_without_auto_create_option(franz_driver, broker, topic_name):
    """franz-go asks Metadata not to create topics unless AllowAutoTopicCreation is set: even on
    a broker with auto.create.topics.enable=true the record fails with
    UNKNOWN_TOPIC_OR_PARTITION and no topic appears."""
    r = run(franz_driver, "produce-unknown", broker, topic=topic_name)
    (p,) = r["produce"]
    assert err_name(p["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert p["error"]["code"] == 3
    assert err_name(r["topic_after"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_produce_auto_creates_topic(franz_driver, broker, topic_name):
    r = run(franz_driver, "produce-unknown", broker, topic=topic_name, auto_create=True)
    (p,) = r["produce"]
    assert (p["error"], p["partition"], p["offset"]) == (None, 0, 0)
    assert r["topic_after"] == {"error": None, "partitions": 1}  # num.partitions=1


def test_produce_unknown_topic_auto_create_disabled(franz_driver, strict_broker, topic_name):
    r = run(franz_driver, "produce-unknown", strict_broker, topic=topic_name, auto_create=True)
    (p,) = r["produce"]
    assert err_name(p["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert err_name(r["topic_after"]["error"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_fetch_offset_out_of_range(franz_driver, broker, topic_name):
    r = run(franz_driver, "fetch-out-of-range", broker, topic=topic_name)
    assert r["produce"] is None
    for case in ("past_end_no_reset", "below_start_no_reset"):
        res = r[case]
        assert res["offsets"] == [], case
        errs = [(e["partition"], err_name(e["error"]), e["error"]["code"])
                for e in res["fetch_errors"]]
        assert errs == [(0, "OFFSET_OUT_OF_RANGE", 1)], case
    # With franz-go's default reset policy the client lists offsets and resumes at the start.
    assert r["past_end_default_reset"] == {"offsets": [0, 1, 2, 3, 4], "fetch_errors": None}
    assert r["delete_records"] == {"0": {"low_watermark": 3, "error": None}}
    assert r["below_start_default_reset"] == {"offsets": [3, 4], "fetch_errors": None}


def check_too_large(r, limit, source):
    assert r["max_message_bytes"] == {"value": str(limit), "source": source}
    (big,) = r["big"]
    assert err_name(big["error"]) == "MESSAGE_TOO_LARGE" and big["error"]["code"] == 10
    assert big["offset"] == -1
    # The idempotent producer carries on after the rejected batch.
    (small,) = r["small"]
    assert (small["error"], small["offset"]) == (None, 0)
    assert r["end"]["0"]["offset"] == 1


def test_record_too_large_topic_limit(franz_driver, broker, topic_name):
    r = run(franz_driver, "too-large", broker, topic=topic_name,
            configs="max.message.bytes=2000", size=5000)
    check_too_large(r, 2000, "DYNAMIC_TOPIC_CONFIG")


def test_record_too_large_broker_limit(franz_driver, strict_broker, topic_name):
    r = run(franz_driver, "too-large", strict_broker, topic=topic_name, size=8000)
    check_too_large(r, 4096, "STATIC_BROKER_CONFIG")
