"""kafkajs 2.2.4 (the Node.js client, its own protocol implementation) against the broker:
admin, producer (plain, idempotent, transactional), consumer groups and the errors a user
hits, each as a bounded scenario of tests/clients/kafkajs/driver.js reporting one JSON object.

kafkajs predates Kafka 4.0 but every API it uses still has a version Kafka 4.4 accepts; it
picks min(its max, the broker's max) from ApiVersions. The versions it ends up sending are
asserted below, so a broker advertising different ranges shows up as a changed request.

node_modules lives in .cache/kafkajs/<hash of package.json + package-lock.json>/, installed
with `npm ci` once per lockfile (shared across sessions), never in the source tree."""
import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from harness.clients import consume_all, create_topic, wait_topic
from harness.drivers import install_kafkajs

KJS_DIR = Path(__file__).resolve().parent / "kafkajs"
DRIVER = KJS_DIR / "driver.js"
KAFKAJS_VERSION = "2.2.4"

# The request versions kafkajs 2.2.4 settles on with a Kafka 4.4 broker (its own maxima: every
# one is still inside Kafka 4.4's advertised range).
CONSUMER_REQUESTS = {"ApiVersions v2", "Metadata v6", "Fetch v11", "ListOffsets v3",
                     "GroupCoordinator v2", "JoinGroup v5", "SyncGroup v3", "Heartbeat v3",
                     "OffsetFetch v4", "OffsetCommit v5", "LeaveGroup v3"}
TXN_REQUESTS = {"InitProducerId v1", "AddPartitionsToTxn v1", "AddOffsetsToTxn v1",
                "TxnOffsetCommit v1", "EndTxn v1", "Produce v7"}


# ---- installation ------------------------------------------------------------------------

@pytest.fixture(scope="session")
def kafkajs_modules():
    return install_kafkajs(KJS_DIR, KAFKAJS_VERSION)


def driver_cmd(scenario, broker, deadline=60, **args):
    cmd = ["node", str(DRIVER), scenario, "--bootstrap", broker.bootstrap,
           "--deadline-ms", str(deadline * 1000)]
    for k, v in args.items():
        cmd += [f"--{k.replace('_', '-')}", str(v).lower() if isinstance(v, bool) else str(v)]
    return cmd


def driver_env(modules):
    return dict(os.environ, NODE_PATH=str(modules), KAFKAJS_NO_PARTITIONER_WARNING="1")


@pytest.fixture
def kjs(kafkajs_modules):
    """kjs(scenario, broker, **args) -> the driver's JSON object. Keyword args become
    `--key value` (underscores to dashes, booleans to true/false)."""

    def run(scenario, broker, deadline=60, **args):
        cmd = driver_cmd(scenario, broker, deadline, **args)
        env = driver_env(kafkajs_modules)
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=deadline + 30)
        took = time.monotonic() - started
        # Shown by pytest only when the test fails: the command and kafkajs' WARN/ERROR log.
        print(f"$ {' '.join(cmd)}  ({took:.1f}s, exit {proc.returncode})")
        print("\n".join(proc.stderr.splitlines()[-60:]))
        lines = proc.stdout.strip().splitlines()
        assert lines, f"driver printed nothing (exit {proc.returncode})"
        res = json.loads(lines[-1])
        print("result:", json.dumps({k: v for k, v in res.items() if k != "logs"})[:4000])
        return res

    return run


def ok(res):
    assert res.get("error") is None and res["ok"], f"scenario failed: {res.get('error')}"
    return res


def failure(step):
    """An attempt() step expected to fail: returns (kafkajs error name, innermost Kafka error
    type, its code)."""
    assert step["ok"] is False, f"expected an error, got {step.get('value')}"
    err = step["error"]
    inner = err
    while inner.get("type") is None and (inner.get("cause") or inner.get("errors")):
        inner = inner.get("cause") or inner["errors"][0]
    return err["name"], step["rootType"], inner.get("code")


def by_partition(records):
    out = {}
    for r in records:
        out.setdefault((r["topic"], r["partition"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["offset"]) for k, v in out.items()}


# ---- admin -------------------------------------------------------------------------------

def test_admin_topic_lifecycle(broker, topic_name, kjs):
    r = ok(kjs("admin-topics", broker, topic=topic_name))
    assert r["created"] is True
    # TOPIC_ALREADY_EXISTS is how kafkajs learns the topic exists: createTopics resolves false.
    assert r["createdAgain"] == {"ok": True, "value": False}
    assert r["listed"] is True
    (md,) = r["metadata"]
    assert md["name"] == topic_name
    assert md["partitions"] == [{"partitionId": i, "leader": 1, "replicas": [1], "isr": [1],
                                 "partitionErrorCode": 0} for i in range(3)]
    cluster = r["cluster"]
    assert cluster["brokers"] == [{"nodeId": 1, "host": "127.0.0.1", "port": broker.port}]
    assert cluster["controller"] == 1
    assert isinstance(cluster["clusterId"], str) and len(cluster["clusterId"]) == 22

    # configSource: 1 DYNAMIC_TOPIC_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG.
    (before,) = r["configsBefore"]
    assert before["errorCode"] == 0 and before["resourceName"] == topic_name
    assert before["resourceType"] == 2
    cfg = before["configs"]
    assert cfg["retention.ms"] == {"value": "3600000", "isDefault": False, "readOnly": False,
                                   "configSource": 1, "isSensitive": False}
    assert cfg["max.message.bytes"]["value"] == "200000"
    assert cfg["max.message.bytes"]["configSource"] == 1
    assert cfg["cleanup.policy"] == {"value": "delete", "isDefault": True, "readOnly": False,
                                     "configSource": 5, "isSensitive": False}
    (bcfg,) = r["brokerConfigs"]
    assert bcfg["errorCode"] == 0 and bcfg["resourceName"] == "1"
    assert bcfg["configs"]["num.partitions"] == {"value": "1", "readOnly": True,
                                                 "configSource": 4}
    assert bcfg["configs"]["auto.create.topics.enable"] == {"value": "true", "readOnly": True,
                                                            "configSource": 5}

    assert [x["errorCode"] for x in r["alter"]["resources"]] == [0]
    after = r["configsAfter"][0]["configs"]
    assert after["retention.ms"]["value"] == "7200000"
    assert after["retention.ms"]["configSource"] == 1
    # AlterConfigs is a full replacement: what it doesn't name goes back to the default.
    assert after["max.message.bytes"] == {"value": "1048588", "isDefault": True,
                                          "readOnly": False, "configSource": 5,
                                          "isSensitive": False}
    assert failure(r["alterInvalid"]) == ("KafkaJSProtocolError", "INVALID_CONFIG", 40)
    assert failure(r["describeMissing"]) == ("KafkaJSProtocolError",
                                             "UNKNOWN_TOPIC_OR_PARTITION", 3)

    assert r["partitionsAfterGrow"] == [0, 1, 2, 3, 4]
    assert failure(r["shrink"]) == ("KafkaJSProtocolError", "INVALID_PARTITIONS", 37)
    assert r["listedAfterDelete"] is False
    # kafkajs retries UNKNOWN_TOPIC_OR_PARTITION on delete, then gives up.
    assert failure(r["deleteMissing"]) == ("KafkaJSNumberOfRetriesExceeded",
                                           "UNKNOWN_TOPIC_OR_PARTITION", 3)
    assert {"CreateTopics v3", "DeleteTopics v1", "CreatePartitions v1", "DescribeConfigs v2",
            "AlterConfigs v1", "Metadata v6"} <= set(r["requests"])


def test_admin_watermarks_timestamps_delete_records(broker, topic_name, kjs):
    create_topic(broker, topic_name, partitions=2)
    base_ts = int(time.time() * 1000) - 3_600_000
    r = ok(kjs("admin-offsets", broker, topic=topic_name, base_ts=base_ts))

    def offs(rows, key="offset"):
        return {x["partition"]: x[key] for x in rows}

    assert [(x["low"], x["high"]) for x in r["empty"]] == [(0, 0), (0, 0)]
    assert sorted((x["partition"], x["baseOffset"], x["errorCode"]) for x in r["sent"]) == [
        (0, 0, 0), (1, 0, 0)]
    assert [(x["partition"], x["low"], x["high"]) for x in r["offsets"]] == [(0, 0, 5), (1, 0, 3)]
    # Partition 0 holds timestamps base+0..4 s, partition 1 base+0..2 s. ListOffsets by time
    # gives the first offset at or after it; kafkajs maps "none" (-1) to the high watermark.
    bt = r["byTimestamp"]
    assert offs(bt["before"]) == {0: 0, 1: 0}
    assert offs(bt["exact2"]) == {0: 2, 1: 2}
    assert offs(bt["between2and3"]) == {0: 3, 1: 3}
    assert offs(bt["after"]) == {0: 5, 1: 3}
    assert [(x["partition"], x["low"], x["high"]) for x in r["afterDeleteRecords"]] == [
        (0, 2, 5), (1, 0, 3)]
    assert {"ListOffsets v3", "DeleteRecords v1"} <= set(r["requests"])


# ---- producer ----------------------------------------------------------------------------

def _produce(broker, topic_name, kjs):
    t1, t2 = topic_name, f"{topic_name}-b"
    create_topic(broker, t1, partitions=2)
    create_topic(broker, t2)
    base_ts = int(time.time() * 1000) - 600_000
    r = ok(kjs("produce", broker, topic=t1, topic2=t2, base_ts=base_ts))
    res = r["results"]
    # Kafka lists a response's topics and partitions in no particular order.
    assert {k: sorted((x["topic"], x["partition"], x["baseOffset"], x["errorCode"]) for x in v)
            for k, v in res.items()} == {
        "acksAll": [(t1, 0, 0, 0)],
        "acksLeader": [(t1, 0, 5, 0)],
        "gzip": [(t1, 0, 10, 0)],
        "nulls": [(t1, 0, 15, 0)],
        "sendBatch": [(t1, 1, 0, 0), (t2, 0, 0, 0)],
    }
    # CreateTime topics: no log-append time in the produce response.
    assert {x["logAppendTime"] for v in res.values() for x in v} == {"-1"}
    assert "Produce v7" in r["requests"]
    sent = {}
    for s in r["sent"]:
        sent.setdefault((s["topic"], s["partition"]), []).append(s)
    assert {k: len(v) for k, v in sent.items()} == {(t1, 0): 17, (t1, 1): 4, (t2, 0): 3}
    return t1, t2, sent


def _enc(s):
    return None if s is None else s.encode()


def test_produce_acks_gzip_headers_send_batch(broker, topic_name, kjs):
    """Records kafkajs produced, read back by librdkafka (groupless) field by field."""
    t1, t2, sent = _produce(broker, topic_name, kjs)
    for (topic, part), records in sent.items():
        msgs = consume_all(broker, topic, len(records), partition=part, timeout=20)
        assert len(msgs) == len(records), (topic, part)
        for offset, (m, s) in enumerate(zip(msgs, records)):
            assert m.offset() == offset
            assert m.key() == _enc(s["key"])
            assert m.value() == _enc(s["value"])
            expected_headers = [(k, v.encode()) for k, v in s.get("headers", {}).items()]
            assert m.headers() == (expected_headers or None)
            assert m.timestamp() == (TIMESTAMP_CREATE_TIME, int(s["timestamp"]))


def test_consume_each_message_auto_commit(broker, topic_name, kjs):
    t1, t2, sent = _produce(broker, topic_name, kjs)
    group = f"{topic_name}-g"
    r = ok(kjs("consume", broker, topic=f"{t1},{t2}", group=group, count=24, mode="eachMessage",
               commit="auto"))
    assert r["crashes"] == [] and not r.get("extra")
    got = by_partition(r["records"])
    assert set(got) == set(sent)
    for key, records in sent.items():
        rows = got[key]
        assert [x["offset"] for x in rows] == list(range(len(records)))
        for x, s in zip(rows, records):
            assert (x["key"], x["value"], x["headers"], x["timestamp"]) == (
                s["key"], s["value"], s.get("headers", {}), int(s["timestamp"]))
            # Not idempotent: the batches carry no producer id.
            assert x["producerId"] == -1 and x["inTransaction"] is False
    (join,) = r["joins"]
    assert join["isLeader"] is True
    assert join["memberAssignment"] == {t1: [0, 1], t2: [0]}
    assert r["committed"] == {t1: {"0": 17, "1": 4}, t2: {"0": 3}}
    # The member left on disconnect: the group is empty but still known.
    assert r["group"]["state"] == "Empty" and r["group"]["members"] == []
    assert r["group"]["protocolType"] == "consumer"
    assert CONSUMER_REQUESTS <= set(r["requests"])


def test_idempotent_producer_each_batch_manual_commit(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    base_ts = int(time.time() * 1000) - 600_000
    r = ok(kjs("idempotent", broker, topic=topic_name, base_ts=base_ts))
    assert [[(x["baseOffset"], x["errorCode"]) for x in res] for res in r["results"]] == [
        [(0, 0)], [(4, 0)], [(8, 0)]]
    assert {"InitProducerId v1", "Produce v7"} <= set(r["requests"])

    c = ok(kjs("consume", broker, topic=topic_name, group=f"{topic_name}-g", count=12,
               mode="eachBatch", commit="manual"))
    assert c["commitErrors"] == [] and c["crashes"] == []
    recs = c["records"]
    assert [x["offset"] for x in recs] == list(range(12))
    assert [x["value"] for x in recs] == [s["value"] for s in r["sent"]]
    assert [x["headers"] for x in recs] == [s["headers"] for s in r["sent"]]
    # One producer id for the three batches, epoch 0, sequences continuing across sends.
    pids = {x["producerId"] for x in recs}
    assert len(pids) == 1 and pids.pop() >= 0
    assert {x["producerEpoch"] for x in recs} == {0}
    assert [x["firstSequence"] for x in recs] == [0] * 4 + [4] * 4 + [8] * 4
    assert sum(b["size"] for b in c["batches"]) >= 12
    assert all(b["highWatermark"] == 12 for b in c["batches"])
    assert c["committed"] == {topic_name: {"0": 12}}


# ---- consumer groups ---------------------------------------------------------------------

def test_consumer_restart_resumes_from_committed_offsets(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    group = f"{topic_name}-g"
    ok(kjs("send-n", broker, topic=topic_name, count=10, prefix="a"))
    first = ok(kjs("consume", broker, topic=topic_name, group=group, count=10, commit="manual"))
    assert [x["value"] for x in first["records"]] == [f"a{i}" for i in range(10)]
    assert first["committed"] == {topic_name: {"0": 10}}
    ok(kjs("send-n", broker, topic=topic_name, count=5, prefix="b"))
    # fromBeginning would restart at 0 if the committed offset were lost.
    second = ok(kjs("consume", broker, topic=topic_name, group=group, count=5, commit="auto",
                    from_beginning=True, grace_ms=800))
    assert [(x["offset"], x["value"]) for x in second["records"]] == [
        (10 + i, f"b{i}") for i in range(5)]
    assert not second.get("extra")
    assert second["committed"] == {topic_name: {"0": 15}}


def test_two_consumers_split_partitions(broker, topic_name, kjs):
    create_topic(broker, topic_name, partitions=4)
    group = f"{topic_name}-g"
    r = ok(kjs("group-split", broker, topic=topic_name, group=group, per_partition=5))
    assert r["firstAlone"] is True, "the first member never got all 4 partitions"
    assert r["settled"] is True, "the two members never shared the partitions"
    running = r["running"]
    assert running["state"] == "Stable" and running["protocolType"] == "consumer"
    assert running["protocol"] == "RoundRobinAssigner"
    assignments = [m["assignment"][topic_name] for m in running["members"]]
    assert len(assignments) == 2
    assert sorted(p for a in assignments for p in a) == [0, 1, 2, 3]
    assert r["listed"] == [{"groupId": group, "protocolType": "consumer"}]
    assert sorted((x["partition"], x["baseOffset"]) for x in r["sent"]) == [
        (p, 0) for p in range(4)]
    assert r["allConsumed"] is True
    m0, m1 = r["members"]
    assert len(m0["joins"]) >= 2, "the first member was not rebalanced when the second joined"
    assert sorted(m0["assigned"] + m1["assigned"]) == [0, 1, 2, 3]
    seen = []
    for m in (m0, m1):
        assert m["crashes"] == []
        assert {x["partition"] for x in m["records"]} <= set(m["assigned"])
        seen += [(x["partition"], x["offset"]) for x in m["records"]]
    assert sorted(seen) == [(p, o) for p in range(4) for o in range(5)]
    assert r["committed"] == {topic_name: {str(p): 5 for p in range(4)}}
    assert r["afterStop"]["state"] == "Empty" and r["afterStop"]["members"] == []


def test_group_admin_operations(broker, topic_name, kjs):
    create_topic(broker, topic_name, partitions=2)
    group = f"{topic_name}-g"
    r = ok(kjs("group-admin", broker, topic=topic_name, group=group))
    assert sorted((x["partition"], x["baseOffset"]) for x in r["sent"]) == [(0, 0), (1, 0)]
    # A group nobody has used: no offsets, DescribeGroups answers Dead (not an error).
    assert r["unknownGroup"]["committed"] == {topic_name: {"0": -1, "1": -1}}
    assert r["unknownGroup"]["described"]["state"] == "Dead"
    assert r["unknownGroup"]["described"]["errorCode"] == 0
    assert r["firstRun"] == {"records": 6, "timedOut": False}
    assert r["committedAfterRun"] == {topic_name: {"0": 3, "1": 3}}
    assert r["described"]["state"] == "Empty"
    assert r["described"]["protocolType"] == "consumer"
    assert r["listed"] == [{"groupId": group, "protocolType": "consumer"}]

    assert r["holderJoined"] is True
    running = r["describedRunning"]
    assert running["state"] == "Stable" and running["protocol"] == "RoundRobinAssigner"
    (member,) = running["members"]
    assert member["clientId"] == "kactor-kafkajs-group-admin"
    assert member["clientHost"] == "/127.0.0.1"
    assert member["assignment"] == {topic_name: [0, 1]}
    (g,) = r["deleteWhileRunning"]["error"]["groups"]
    assert (g["groupId"], g["errorCode"], g["error"]["type"]) == (group, 68, "NON_EMPTY_GROUP")
    assert "current state: Stable" in r["resetWhileRunning"]["error"]["message"]

    assert r["resetOffsets"] == {"ok": True}
    # kafkajs commits its EARLIEST sentinel itself; the broker stores it as given.
    assert r["committedAfterReset"] == {topic_name: {"0": -2, "1": -2}}
    assert r["resumed"] == [[p, o] for p in (0, 1) for o in range(3)]
    assert r["deleted"] == {"ok": True, "value": [{"groupId": group, "errorCode": 0}]}
    assert r["listedAfterDelete"] == []
    assert r["describedAfterDelete"]["state"] == "Dead"
    assert r["committedAfterDelete"] == {topic_name: {"0": -1, "1": -1}}
    (g,) = r["deleteMissing"]["error"]["groups"]
    assert (g["errorCode"], g["error"]["type"]) == (69, "GROUP_ID_NOT_FOUND")
    assert {"DescribeGroups v2", "ListGroups v2", "DeleteGroups v1"} <= set(r["requests"])


# ---- transactions ------------------------------------------------------------------------

def test_transactions_commit_abort_read_committed(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    group = f"{topic_name}-g"
    r = ok(kjs("transactions", broker, topic=topic_name, group=group))
    # Every transaction ends with a control record: t1 0-2 (+3), t2 4-5 (+6), t3 7-8 (+9),
    # t4 10 (+11), t5 12 (+13).
    assert [(t["name"], t["end"], t["results"][0]["baseOffset"], t["results"][0]["errorCode"])
            for t in r["txns"]] == [("t1", "commit", 0, 0), ("t2", "abort", 4, 0),
                                    ("t3", "commit", 7, 0), ("t4", "commit", 10, 0),
                                    ("t5", "abort", 12, 0)]
    assert [(x["low"], x["high"]) for x in r["offsets"]] == [(0, 14)]
    # sendOffsets: committed with t4, discarded with t5.
    assert r["sentOffsetsCommitted"] == {topic_name: {"0": 4}}
    assert r["sentOffsetsAborted"] == {topic_name: {"0": -1}}
    assert r["readCommittedTimedOut"] is False
    rc = r["readCommitted"]
    assert [(x["offset"], x["value"]) for x in rc] == [
        (0, "c1"), (1, "c2"), (2, "c3"), (7, "c4"), (8, "c5"), (10, "c6")]
    assert all(x["inTransaction"] is True and x["producerEpoch"] == 0 for x in rc)
    assert len({x["producerId"] for x in rc}) == 1 and rc[0]["producerId"] >= 0
    assert r["readUncommittedTimedOut"] is False
    assert [(x["offset"], x["value"]) for x in r["readUncommitted"]] == [
        (0, "c1"), (1, "c2"), (2, "c3"), (4, "a1"), (5, "a2"), (7, "c4"), (8, "c5"),
        (10, "c6"), (12, "a3")]
    assert TXN_REQUESTS <= set(r["requests"])


def test_transaction_zombie_produce_is_fenced(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    r = ok(kjs("txn-fencing", broker, topic=topic_name))
    assert failure(r["produce"]) == ("KafkaJSProtocolError", "INVALID_PRODUCER_EPOCH", 47)
    # Each fence aborted the zombie's open transaction; only the live producer's record counts.
    assert [[x["baseOffset"] for x in s] for s in r["zombieSends"]] == [[0], [2]]
    assert [x["baseOffset"] for x in r["liveSend"]] == [4]
    assert [(x["low"], x["high"]) for x in r["offsets"]] == [(0, 6)]
    assert [(x["offset"], x["value"]) for x in r["readCommitted"]] == [(4, "live")]


def test_transaction_zombie_coordinator_requests_fail_with_invalid_producer_epoch(
        broker, topic_name, kjs):
    create_topic(broker, topic_name)
    r = ok(kjs("txn-fencing", broker, topic=topic_name))
    assert {"EndTxn v1", "AddPartitionsToTxn v1", "AddOffsetsToTxn v1"} <= set(r["requests"])
    for step in ("endTxn", "addPartitions", "addOffsets"):
        assert failure(r[step]) == ("KafkaJSProtocolError", "INVALID_PRODUCER_EPOCH", 47), step
    assert [(x["offset"], x["value"]) for x in r["readCommitted"]] == [(4, "live")]


# ---- errors a user hits ------------------------------------------------------------------

def test_produce_auto_creates_missing_topic(broker, topic_name, kjs):
    r = ok(kjs("send-one", broker, topic=topic_name, auto_create=True, check_topic=True))
    assert r["send"]["ok"] is True
    assert [(x["partition"], x["baseOffset"], x["errorCode"]) for x in r["send"]["value"]] == [
        (0, 0, 0)]
    assert r["topicListed"] is True
    wait_topic(broker, topic_name, partitions=1)  # num.partitions=1


def test_produce_to_missing_topic_with_auto_create_off(broker_factory, topic_name, kjs):
    b = broker_factory(overrides={"auto.create.topics.enable": "false"})
    # The producer asks for auto-creation (kafkajs' default); the broker refuses it.
    r = ok(kjs("send-one", b, topic=topic_name, auto_create=True, check_topic=True, retries=2))
    assert failure(r["send"]) == ("KafkaJSNumberOfRetriesExceeded",
                                  "UNKNOWN_TOPIC_OR_PARTITION", 3)
    assert r["send"]["error"]["retryCount"] == 2
    assert r["topicListed"] is False


def test_record_too_large(broker_factory, topic_name, kjs):
    b = broker_factory(overrides={"message.max.bytes": "10000"})
    small = f"{topic_name}-small"
    create_topic(b, topic_name)
    create_topic(b, small, config={"max.message.bytes": "2000"})

    def send(topic, size, gzip=False):
        return ok(kjs("send-one", b, topic=topic, size=size, gzip=gzip))["send"]

    # MESSAGE_TOO_LARGE is not retriable: kafkajs gives up on the first answer.
    assert failure(send(topic_name, 20000)) == ("KafkaJSProtocolError", "MESSAGE_TOO_LARGE", 10)
    assert [x["baseOffset"] for x in send(topic_name, 9000)["value"]] == [0]
    # The limit applies to the batch as stored, i.e. compressed.
    assert [x["baseOffset"] for x in send(topic_name, 20000, gzip=True)["value"]] == [1]
    assert failure(send(small, 5000)) == ("KafkaJSProtocolError", "MESSAGE_TOO_LARGE", 10)
    assert [x["baseOffset"] for x in send(small, 1000)["value"]] == [0]


@pytest.mark.parametrize("case", ["in-range", "past-end", "below-log-start"])
def test_fetch_offset_out_of_range(broker, topic_name, kjs, case):
    """consumer.seek to an offset outside [log start, high watermark): the Fetch answer is
    OFFSET_OUT_OF_RANGE and kafkajs resets to earliest (fromBeginning), logging it."""
    create_topic(broker, topic_name)
    args = {"in-range": dict(seek=3, count=2),
            "past-end": dict(seek=1000, count=5),
            "below-log-start": dict(seek=0, count=3, delete_before=2)}[case]
    r = ok(kjs("fetch-out-of-range", broker, topic=topic_name, group=f"{topic_name}-g",
               produce=5, **args))
    assert r["seeked"] is True and r["crashes"] == []
    low = args.get("delete_before", 0)
    assert [(x["low"], x["high"]) for x in r["offsets"]] == [(low, 5)]
    assert r["timedOut"] is False
    if case == "in-range":
        assert r["records"] == [3, 4]
        assert r["outOfRangeLogs"] == 0
    else:
        assert r["records"] == list(range(low, 5))
        assert r["outOfRangeLogs"] >= 1


def test_open_transaction_holds_back_read_committed(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    r = ok(kjs("open-txn", broker, topic=topic_name))
    # before @0, txn-1/txn-2 @1-2 (open), after @3 (non-transactional, behind the open txn).
    assert [x["baseOffset"] for x in r["sent"]] == [0, 1, 3]
    # kafkajs' admin ListOffsets is READ_COMMITTED: latest is the last stable offset.
    assert [(x["low"], x["high"]) for x in r["offsetsWhileOpen"]] == [(0, 1)]
    assert r["seenWhileOpen"] == [[0, "before"]]
    assert r["allSeen"] is True
    assert r["seenAfterCommit"] == [[0, "before"], [1, "txn-1"], [2, "txn-2"], [3, "after"]]
    assert [(x["low"], x["high"]) for x in r["offsetsAfterCommit"]] == [(0, 5)]
    assert "crash" not in r


def _txn_timeout(broker_factory, topic_name, kjs):
    # Kafka looks for expired transactions every 10 s by default; 500 ms keeps this short.
    b = broker_factory(overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    create_topic(b, topic_name)
    return ok(kjs("txn-timeout", b, topic=topic_name, txn_timeout_ms=1000, timeout_ms=20000))


def test_transaction_timeout_aborts_abandoned_transaction(broker_factory, topic_name, kjs):
    r = _txn_timeout(broker_factory, topic_name, kjs)
    assert [x["baseOffset"] for x in r["sentTxn"] + r["sentAfter"]] == [0, 1]
    # The broker's abort (marker @2) moves the last stable offset past the abandoned record.
    assert r["readTimedOut"] is False
    assert r["readCommitted"] == [[1, "after"]]
    assert [(x["low"], x["high"]) for x in r["offsets"]] == [(0, 3)]
    assert r["lateCommit"]["ok"] is False


def test_transaction_timeout_late_commit_fails_with_invalid_producer_epoch(
        broker_factory, topic_name, kjs):
    r = _txn_timeout(broker_factory, topic_name, kjs)
    assert failure(r["lateCommit"]) == ("KafkaJSProtocolError", "INVALID_PRODUCER_EPOCH", 47)


def test_deleted_topic_takes_group_offsets_along(broker, topic_name, kjs):
    group = f"{topic_name}-g"
    r = ok(kjs("topic-recreate", broker, topic=topic_name, group=group))
    assert r["firstRun"] == [[0, "old-0"], [1, "old-1"]]
    assert r["committedBefore"] == {topic_name: {"0": 2}}
    assert r["groupGone"] is True
    assert r["allOffsetsAfterDelete"] == []
    assert r["recreated"] is True
    assert [(x["low"], x["high"]) for x in r["offsetsAfterRecreate"]] == [(0, 0)]
    assert r["committedAfterRecreate"] == {topic_name: {"0": -1}}
    assert r["secondRun"] == [[0, "new-0"], [1, "new-1"], [2, "new-2"]]


# ---- fetch behaviour ---------------------------------------------------------------------

def test_log_append_time_topic(broker, topic_name, kjs):
    create_topic(broker, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    sent = ok(kjs("send-n", broker, topic=topic_name, count=3))["results"]
    after = int(time.time() * 1000)
    (res,) = sent
    assert res["baseOffset"] == 0
    append_time = int(res["logAppendTime"])
    assert before - 1000 <= append_time <= after + 1000
    r = ok(kjs("consume", broker, topic=topic_name, group=f"{topic_name}-g", count=3))
    # kafkajs takes a LogAppendTime record's timestamp from its batch's max timestamp.
    assert [(x["offset"], x["timestamp"]) for x in r["records"]] == [
        (i, append_time) for i in range(3)]


def test_fetch_returns_record_larger_than_max_bytes(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    for _ in range(3):
        ok(kjs("send-one", broker, topic=topic_name, size=5000))
    r = ok(kjs("consume", broker, topic=topic_name, group=f"{topic_name}-g", count=3,
               max_bytes_per_partition=1000, max_bytes=1000, timeout_ms=10000))
    # The first batch is returned whole even above both limits, so a consumer always progresses.
    assert [(x["offset"], len(x["value"])) for x in r["records"]] == [(i, 5000) for i in range(3)]
    assert r["crashes"] == []


def test_fetch_long_poll_waits_and_wakes_on_produce(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    r = ok(kjs("fetch-wait", broker, topic=topic_name, max_wait_ms=2000, idle_ms=3000))
    assert r["joined"] is True
    # Parked for maxWaitTimeInMs: about 1.5 Fetches in 3 s, not a busy loop.
    assert 0 < r["idleFetches"] <= 3, r["idleFetches"]
    assert r["received"] is True
    # A produce completes the parked Fetch instead of waiting out the 2 s.
    assert r["latencyMs"] < 1000, r["latencyMs"]


def test_acks_zero_produce(broker, topic_name, kjs):
    create_topic(broker, topic_name)
    r = ok(kjs("acks-zero", broker, topic=topic_name))
    # acks=0: no response, so no record metadata; a response anyway would be an unmatched one.
    assert r["acks0"] == [[], [], []]
    assert [x["baseOffset"] for x in r["acksAll"]] == [3]
    assert [x for x in r["logs"] if "without match" in x["message"]] == []
    c = ok(kjs("consume", broker, topic=topic_name, group=f"{topic_name}-g", count=4))
    assert [x["value"] for x in c["records"]] == ["z0", "z1", "z2", "last"]


# ---- broker configs ----------------------------------------------------------------------

def test_describe_broker_configs(broker, kjs):
    names = ["node.id", "message.max.bytes", "min.insync.replicas", "log.retention.ms",
             "log.retention.hours", "group.initial.rebalance.delay.ms", "compression.type"]
    r = ok(kjs("describe-configs", broker, type="broker", name="1", names=",".join(names)))
    assert r["errorCode"] == 0
    c = {k: (v["value"], v["configSource"], v["readOnly"], v["isDefault"])
         for k, v in r["configs"].items()}
    # configSource: 3 DYNAMIC_DEFAULT_BROKER_CONFIG (Kafka 4 stores min.insync.replicas as a
    # cluster default at format time), 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG.
    assert c == {
        "node.id": ("1", 4, True, False),
        "message.max.bytes": ("1048588", 5, False, True),
        "min.insync.replicas": ("1", 3, False, False),
        "log.retention.ms": (None, 5, False, True),
        "log.retention.hours": ("168", 5, True, True),
        "group.initial.rebalance.delay.ms": ("0", 4, True, False),
        "compression.type": ("producer", 5, False, True),
    }


def test_describe_broker_configs_kafka_keys(broker, kjs):
    names = ["broker.id", "metric.reporters", "sasl.enabled.mechanisms", "ssl.client.auth",
             "sasl.jaas.config", "listeners", "listener.security.protocol.map"]
    r = ok(kjs("describe-configs", broker, type="broker", name="1", names=",".join(names)))
    c = {k: (v["value"], v["configSource"], v["readOnly"], v["isSensitive"])
         for k, v in r["configs"].items()}
    assert c == {
        "broker.id": ("1", 4, True, False),
        "metric.reporters": ("org.apache.kafka.common.metrics.JmxReporter", 5, False, False),
        "sasl.enabled.mechanisms": ("GSSAPI", 5, False, False),
        "ssl.client.auth": ("none", 5, False, False),
        # Sensitive: the value is never returned.
        "sasl.jaas.config": (None, 5, False, True),
        "listeners": (f"PLAINTEXT://127.0.0.1:{broker.port},"
                      f"CONTROLLER://127.0.0.1:{broker.controller_port}", 4, False, False),
        "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", 4, False,
                                           False),
    }


# ---- failures and restarts ---------------------------------------------------------------

def _wait_for_line(proc, marker, timeout):
    """Read proc's stderr until a line containing `marker` (bounded); returns that line."""
    buf = b""
    deadline = time.monotonic() + timeout
    fd = proc.stderr.fileno()
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            for line in buf.decode(errors="replace").splitlines():
                if marker in line:
                    return line
        elif proc.poll() is not None:
            break
    raise AssertionError(f"no {marker!r} from {proc.args} within {timeout}s:\n"
                         f"{buf.decode(errors='replace')[-3000:]}")


def test_dead_member_expires_and_partitions_move(broker, topic_name, kjs, kafkajs_modules):
    """A member killed without LeaveGroup keeps its partitions until its session times out
    (6 s); then the rebalance completes and the survivor gets everything."""
    create_topic(broker, topic_name, partitions=2)
    group = f"{topic_name}-g"
    for part in (0, 1):
        ok(kjs("send-n", broker, topic=topic_name, count=3, partition=part, prefix=f"p{part}-"))
    victim = subprocess.Popen(driver_cmd("member", broker, group=group, topic=topic_name,
                                         run_ms=60000),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=driver_env(kafkajs_modules))
    try:
        line = _wait_for_line(victim, "GROUP_JOIN", 20)
        assert json.loads(line.split("GROUP_JOIN", 1)[1]) == {topic_name: [0, 1]}
    finally:
        victim.kill()
        victim.wait(10)
    started = time.monotonic()
    r = ok(kjs("consume", broker, topic=topic_name, group=group, count=6, commit="none",
               timeout_ms=30000))
    took = time.monotonic() - started
    assert sorted((x["partition"], x["offset"]) for x in r["records"]) == [
        (p, o) for p in (0, 1) for o in range(3)]
    assert r["joins"][-1]["memberAssignment"] == {topic_name: [0, 1]}
    # The rebalance waited for the dead member's session (6 s) rather than evicting it at once.
    assert 3 < took < 25, took


def test_committed_offsets_survive_broker_restart(broker_factory, topic_name, kjs):
    b = broker_factory()
    create_topic(b, topic_name)
    group = f"{topic_name}-g"
    ok(kjs("send-n", b, topic=topic_name, count=10, prefix="a"))
    first = ok(kjs("consume", b, topic=topic_name, group=group, count=10, commit="manual"))
    assert first["committed"] == {topic_name: {"0": 10}}
    b.restart()
    sent = ok(kjs("send-n", b, topic=topic_name, count=5, prefix="b"))
    assert [x["baseOffset"] for x in sent["results"]] == [10]
    second = ok(kjs("consume", b, topic=topic_name, group=group, count=5, commit="auto"))
    assert [(x["offset"], x["value"]) for x in second["records"]] == [
        (10 + i, f"b{i}") for i in range(5)]
    assert second["committed"] == {topic_name: {"0": 15}}
