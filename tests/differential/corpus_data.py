"""Cases: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DescribeProducers."""
from harness import schema_codec as sc

from .corpus_topics import UNKNOWN_ID, topic
from .engine import case

TS = 1_700_000_000_000
RECS = [(b"k1", b"v1"), (b"k2", b"v2"), (None, b"v3", [("h", b"x")])]


def produce(c, name, batch, version=11, acks=-1, partition=0, txn=None, topic_id=None,
            label=None, check=True):
    td = {"PartitionData": [{"Index": partition, "Records": batch}]}
    if version >= 13:
        td["TopicId"] = topic_id
    else:
        td["Name"] = name
    return c.call("Produce", version, {"TransactionalId": txn, "Acks": acks, "TimeoutMs": 10000,
                                       "TopicData": [td]}, check=check, label=label,
                  acks_zero=acks == 0)


# ---- Produce -------------------------------------------------------------------------------

@case("Produce", "v11-ok")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS))
    produce(c, t, sc.record_batch(RECS, timestamp=TS), label="second batch")


@case("Produce", "v13-by-topic-id")
def _(c):
    t = topic(c)
    tid = c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS), version=13, topic_id=tid)


@case("Produce", "v13-unknown-topic-id")
def _(c):
    produce(c, None, sc.record_batch(RECS, timestamp=TS), version=13, topic_id=UNKNOWN_ID)


@case("Produce", "v3-ok")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS), version=3)


@case("Produce", "v11-unknown-topic")
def _(c):
    produce(c, topic(c), sc.record_batch(RECS, timestamp=TS))


@case("Produce", "v11-unknown-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS), partition=5)


@case("Produce", "v11-corrupt-crc")
def _(c):
    t = topic(c)
    c.create_topic(t)
    b = bytearray(sc.record_batch(RECS, timestamp=TS))
    b[17] ^= 0xFF  # inside the CRC
    produce(c, t, bytes(b))


@case("Produce", "v11-invalid-acks")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS), acks=2)


@case("Produce", "v11-acks-zero-then-fetch")
def _(c):
    """acks=0: no response; the records are there."""
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS), acks=0, check=False)
    c.wait_for("acks=0 write visible", lambda: (
        (r := c.call("ListOffsets", 9, lo_body(t, [(0, -1)])))["Topics"][0]["Partitions"][0]
        ["Offset"] == 3, r))
    fetch(c, t, 0)


@case("Produce", "v11-acks-one")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS), acks=1)


@case("Produce", "v11-null-records")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.timeout = 3.0  # Kafka 4.4.0 does not answer: don't wait the default 15 s
    produce(c, t, None)


@case("Produce", "v11-empty-records")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, b"")


@case("Produce", "v11-truncated-batch")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS)[:-5])


@case("Produce", "v11-non-zero-base-offset")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS, base_offset=42))


@case("Produce", "v11-log-append-time")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"message.timestamp.type": "LogAppendTime"})
    produce(c, t, sc.record_batch(RECS, timestamp=TS))
    fetch(c, t, 0)


@case("Produce", "v11-timestamp-out-of-range")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"message.timestamp.before.max.ms": "3600000"})
    produce(c, t, sc.record_batch(RECS, timestamp=TS))


@case("Produce", "v11-record-too-large")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"max.message.bytes": "100"})
    produce(c, t, sc.record_batch([(b"k", b"x" * 200)], timestamp=TS))


@case("Produce", "v11-compacted-null-key")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"cleanup.policy": "compact"})
    produce(c, t, sc.record_batch([(None, b"v")], timestamp=TS))


@case("Produce", "v11-idempotent")
def _(c):
    t = topic(c)
    c.create_topic(t)
    pid, epoch = c.init_producer()
    b0 = sc.record_batch(RECS, timestamp=TS, producer_id=pid, producer_epoch=epoch,
                         base_sequence=0)
    produce(c, t, b0)
    produce(c, t, b0, label="duplicate")
    b5 = sc.record_batch(RECS, timestamp=TS, producer_id=pid, producer_epoch=epoch,
                         base_sequence=5)
    produce(c, t, b5, label="sequence gap")


@case("Produce", "v11-idempotent-unknown-producer")
def _(c):
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS, producer_id=987654, producer_epoch=0,
                                  base_sequence=3))


@case("Produce", "v11-transactional-not-in-txn")
def _(c):
    t = topic(c)
    c.create_topic(t)
    txn = f"d-{c.slug}"
    pid, epoch = c.init_producer(txn)
    produce(c, t, sc.record_batch(RECS, timestamp=TS, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=0, transactional=True), txn=txn)


@case("Produce", "v11-gzip-then-fetch")
def _(c):
    """A gzip batch: the broker keeps it compressed (compression.type producer); the fetched
    batch header is compared (the compressed bytes are whatever each broker stored)."""
    t = topic(c)
    c.create_topic(t)
    produce(c, t, sc.record_batch(RECS, timestamp=TS, gzip=True))
    fetch(c, t, 0)


@case("Produce", "v11-gzip-topic-recompresses")
def _(c):
    """compression.type=gzip on the topic, an uncompressed batch sent: stored gzip."""
    t = topic(c)
    c.create_topic(t, configs={"compression.type": "gzip"})
    produce(c, t, sc.record_batch(RECS, timestamp=TS))
    fetch(c, t, 0, label="fetched")


@case("Produce", "v11-two-topics")
def _(c):
    t1, t2 = topic(c, "-a"), topic(c, "-b")
    c.create_topic(t1)
    c.create_topic(t2)
    b = sc.record_batch(RECS, timestamp=TS)
    c.call("Produce", 11, {"TransactionalId": None, "Acks": -1, "TimeoutMs": 10000,
                           "TopicData": [
                               {"Name": t1, "PartitionData": [{"Index": 0, "Records": b}]},
                               {"Name": t2, "PartitionData": [{"Index": 0, "Records": b}]},
                               {"Name": topic(c, "-c"), "PartitionData": [
                                   {"Index": 0, "Records": b}]}]}, check=True)


@case("Produce", "v11-duplicate-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    b = sc.record_batch(RECS, timestamp=TS)
    c.call("Produce", 11, {"TransactionalId": None, "Acks": -1, "TimeoutMs": 10000,
                           "TopicData": [{"Name": t, "PartitionData": [
                               {"Index": 0, "Records": b}, {"Index": 0, "Records": b}]}]},
           check=True)


# ---- Fetch ---------------------------------------------------------------------------------

def fetch_body(name_or_id, offset, partition=0, max_bytes=1 << 20, isolation=0, version=16,
               epoch=-1, session=0, session_epoch=-1, max_wait=0, min_bytes=0,
               log_start=-1, last_fetched_epoch=-1):
    t = {"Partitions": [{"Partition": partition, "CurrentLeaderEpoch": epoch,
                         "FetchOffset": offset, "LastFetchedEpoch": last_fetched_epoch,
                         "LogStartOffset": log_start, "PartitionMaxBytes": max_bytes}]}
    if version >= 13:
        t["TopicId"] = name_or_id
    else:
        t["Topic"] = name_or_id
    return {"ReplicaId": -1, "MaxWaitMs": max_wait, "MinBytes": min_bytes,
            "MaxBytes": 50 << 20, "IsolationLevel": isolation, "SessionId": session,
            "SessionEpoch": session_epoch, "Topics": [t], "ForgottenTopicsData": [],
            "RackId": ""}


def fetch(c, name_or_id, offset, version=None, label=None, **kw):
    if version is None:
        version = 16 if isinstance(name_or_id, sc.Uuid) else 12
    return c.call("Fetch", version, fetch_body(name_or_id, offset, version=version, **kw),
                  check=True, label=label)


def seeded(c, batches=2, **create_kw):
    t = topic(c)
    tid = c.create_topic(t, **create_kw)
    c.produce(t, RECS, batches=batches)
    return t, tid


@case("Fetch", "v16-from-zero")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0)


@case("Fetch", "v12-by-name")
def _(c):
    t, _ = seeded(c)
    fetch(c, t, 0, version=12)


@case("Fetch", "v4-by-name")
def _(c):
    t, _ = seeded(c)
    fetch(c, t, 0, version=4)


@case("Fetch", "v16-mid-batch-offset")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 4)


@case("Fetch", "v16-at-end")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 6)


@case("Fetch", "v16-out-of-range")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 100)


@case("Fetch", "v16-negative-offset")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, -5)


@case("Fetch", "v16-unknown-topic-id")
def _(c):
    fetch(c, UNKNOWN_ID, 0)


@case("Fetch", "v12-unknown-topic")
def _(c):
    fetch(c, topic(c), 0, version=12)


@case("Fetch", "v16-unknown-partition")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0, partition=3)


@case("Fetch", "v16-partition-max-bytes-cuts-batch")
def _(c):
    """PartitionMaxBytes smaller than the first batch: the first batch whole (KIP-74), and the
    size of what follows."""
    t, tid = seeded(c, batches=3)
    fetch(c, tid, 0, max_bytes=100)


@case("Fetch", "v16-partition-max-bytes-cuts-second-batch")
def _(c):
    t, tid = seeded(c, batches=3)
    fetch(c, tid, 0, max_bytes=200)


@case("Fetch", "v16-response-max-bytes-below-first-batch")
def _(c):
    """MaxBytes (the whole response) below the first batch: that batch is still returned."""
    t, tid = seeded(c, batches=3)
    body = fetch_body(tid, 0, version=16)
    body["MaxBytes"] = 10
    c.call("Fetch", 16, body, check=True)


@case("Fetch", "v16-fenced-leader-epoch")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0, epoch=5)


@case("Fetch", "v16-old-leader-epoch")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0, epoch=0)


@case("Fetch", "v16-diverging-epoch")
def _(c):
    """LastFetchedEpoch newer than the log's: a diverging epoch is answered."""
    t, tid = seeded(c)
    fetch(c, tid, 6, last_fetched_epoch=3)


@case("Fetch", "v16-read-committed")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0, isolation=1)


@case("Fetch", "v16-read-committed-open-txn")
def _(c):
    """An open transaction: read_committed stops at the last stable offset."""
    t, tid = seeded(c, batches=1)
    txn = f"d-{c.slug}"
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0]})
    c.produce(t, RECS, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
              base_sequence=0, transactional=True)
    fetch(c, tid, 0, isolation=1, label="read_committed")
    fetch(c, tid, 0, isolation=0, label="read_uncommitted")


@case("Fetch", "v16-aborted-transaction")
def _(c):
    t, tid = seeded(c, batches=1)
    txn = f"d-{c.slug}"
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0]})
    c.produce(t, RECS, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
              base_sequence=0, transactional=True)
    c.call("EndTxn", 4, {"TransactionalId": txn, "ProducerId": pid, "ProducerEpoch": epoch,
                         "Committed": False})
    c.wait_for("abort marker written", lambda: (
        (r := c.call("ListOffsets", 9, lo_body(t, [(0, -1)], isolation=1)))
        ["Topics"][0]["Partitions"][0]["Offset"] == 7, r))
    fetch(c, tid, 0, isolation=1, label="read_committed")


@case("Fetch", "v16-session-new")
def _(c):
    """SessionEpoch 0 opens a fetch session (a session id is given back)."""
    t, tid = seeded(c)
    r = fetch(c, tid, 0, session_epoch=0, label="open session")
    sid = r["SessionId"]
    fetch(c, tid, 6, session=sid, session_epoch=1, label="incremental")
    fetch(c, tid, 6, session=sid, session_epoch=7, label="wrong session epoch")


@case("Fetch", "v16-unknown-session")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0, session=123456, session_epoch=3)


@case("Fetch", "v16-min-bytes-wait")
def _(c):
    """MinBytes not reached within MaxWaitMs: an empty answer after the wait."""
    t, tid = seeded(c)
    fetch(c, tid, 6, min_bytes=1, max_wait=200)


@case("Fetch", "v16-after-delete-records")
def _(c):
    t, tid = seeded(c)
    c.call("DeleteRecords", 2, {"Topics": [{"Name": t, "Partitions": [
        {"PartitionIndex": 0, "Offset": 4}]}], "TimeoutMs": 30000})
    fetch(c, tid, 0, label="below log start")
    fetch(c, tid, 4, label="at log start")


@case("Fetch", "v16-duplicate-partition")
def _(c):
    t, tid = seeded(c)
    body = fetch_body(tid, 0, version=16)
    body["Topics"][0]["Partitions"] *= 2
    c.call("Fetch", 16, body, check=True)


@case("Fetch", "v18-replica-state")
def _(c):
    t, tid = seeded(c)
    body = fetch_body(tid, 0, version=18)
    c.call("Fetch", 18, body, check=True)


@case("Fetch", "v16-high-isolation-level")
def _(c):
    t, tid = seeded(c)
    fetch(c, tid, 0, isolation=3)


# ---- ListOffsets ---------------------------------------------------------------------------

def lo_body(name, parts, isolation=0, epoch=-1):
    return {"ReplicaId": -1, "IsolationLevel": isolation, "TimeoutMs": 30000,
            "Topics": [{"Name": name, "Partitions": [
                {"PartitionIndex": p, "CurrentLeaderEpoch": epoch, "Timestamp": ts}
                for p, ts in parts]}]}


def lo(c, name, parts, version=11, label=None, **kw):
    return c.call("ListOffsets", version, lo_body(name, parts, **kw), check=True, label=label)


@case("ListOffsets", "v11-latest-earliest")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -1)])
    lo(c, t, [(0, -2)], label="earliest")


@case("ListOffsets", "v11-max-timestamp")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, RECS, timestamp=TS)
    c.produce(t, RECS, timestamp=TS + 5000)
    c.produce(t, RECS, timestamp=TS + 1000)
    lo(c, t, [(0, -3)])


@case("ListOffsets", "v11-by-timestamp")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, RECS, timestamp=TS)
    c.produce(t, RECS, timestamp=TS + 5000)
    lo(c, t, [(0, TS + 1)])
    lo(c, t, [(0, TS + 999999)], label="after the last")


@case("ListOffsets", "v11-earliest-local")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -4)])


@case("ListOffsets", "v11-latest-tiered")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -5)])


@case("ListOffsets", "v11-earliest-pending-upload")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -6)])


@case("ListOffsets", "v11-unknown-timestamp-code")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -9)])


@case("ListOffsets", "v11-unknown-topic")
def _(c):
    lo(c, topic(c), [(0, -1)])


@case("ListOffsets", "v11-unknown-partition")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(4, -1)])


@case("ListOffsets", "v11-duplicate-partition")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -1), (0, -2)])


@case("ListOffsets", "v11-fenced-epoch")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, -1)], epoch=9)


@case("ListOffsets", "v11-read-committed-open-txn")
def _(c):
    t, _ = seeded(c, batches=1)
    txn = f"d-{c.slug}"
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0]})
    c.produce(t, RECS, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
              base_sequence=0, transactional=True)
    lo(c, t, [(0, -1)], isolation=1, label="read_committed")
    lo(c, t, [(0, -1)], isolation=0, label="read_uncommitted")


@case("ListOffsets", "v1-latest")
def _(c):
    t, _ = seeded(c)
    c.call("ListOffsets", 1, {"ReplicaId": -1, "Topics": [{"Name": t, "Partitions": [
        {"PartitionIndex": 0, "Timestamp": -1}]}]}, check=True)


@case("ListOffsets", "v5-by-timestamp")
def _(c):
    t, _ = seeded(c)
    lo(c, t, [(0, TS)], version=5)


@case("ListOffsets", "v11-empty-topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    lo(c, t, [(0, -1)])
    lo(c, t, [(0, -3)], label="max timestamp")
    lo(c, t, [(0, TS)], label="by timestamp")


# ---- OffsetForLeaderEpoch ------------------------------------------------------------------

def ofle(c, name, parts, version=4, replica=-1, label=None):
    body = {"Topics": [{"Topic": name, "Partitions": [
        {"Partition": p, "CurrentLeaderEpoch": cur, "LeaderEpoch": le}
        for p, cur, le in parts]}]}
    if version >= 3:
        body["ReplicaId"] = replica
    return c.call("OffsetForLeaderEpoch", version, body, check=True, label=label)


@case("OffsetForLeaderEpoch", "v4-current-epoch")
def _(c):
    t, _ = seeded(c)
    ofle(c, t, [(0, -1, 0)])


@case("OffsetForLeaderEpoch", "v4-future-epoch")
def _(c):
    t, _ = seeded(c)
    ofle(c, t, [(0, -1, 5)])


@case("OffsetForLeaderEpoch", "v4-fenced-current-epoch")
def _(c):
    t, _ = seeded(c)
    ofle(c, t, [(0, 3, 0)])


@case("OffsetForLeaderEpoch", "v4-unknown-topic-partition")
def _(c):
    t, _ = seeded(c)
    ofle(c, t, [(2, -1, 0)])
    ofle(c, topic(c, "-missing"), [(0, -1, 0)], label="unknown topic")


@case("OffsetForLeaderEpoch", "v4-empty-log")
def _(c):
    t = topic(c)
    c.create_topic(t)
    ofle(c, t, [(0, -1, 0)])


@case("OffsetForLeaderEpoch", "v2-current-epoch")
def _(c):
    t, _ = seeded(c)
    ofle(c, t, [(0, -1, 0)], version=2)


@case("OffsetForLeaderEpoch", "v4-replica-id-follower")
def _(c):
    """A follower's request (ReplicaId 1) on a single-node cluster."""
    t, _ = seeded(c)
    ofle(c, t, [(0, -1, 0)], replica=1)


# ---- DescribeProducers ---------------------------------------------------------------------

@case("DescribeProducers", "idempotent-producer")
def _(c):
    t = topic(c)
    c.create_topic(t)
    pid, epoch = c.init_producer()
    c.produce(t, RECS, producer_id=pid, producer_epoch=epoch, base_sequence=0, timestamp=TS)
    c.call("DescribeProducers", 0, {"Topics": [{"Name": t, "PartitionIndexes": [0]}]},
           check=True)


@case("DescribeProducers", "transactional-open")
def _(c):
    t = topic(c)
    c.create_topic(t)
    txn = f"d-{c.slug}"
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0]})
    c.produce(t, RECS, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
              base_sequence=0, transactional=True, timestamp=TS)
    c.call("DescribeProducers", 0, {"Topics": [{"Name": t, "PartitionIndexes": [0]}]},
           check=True)


@case("DescribeProducers", "no-producers")
def _(c):
    t, _ = seeded(c)
    c.call("DescribeProducers", 0, {"Topics": [{"Name": t, "PartitionIndexes": [0]}]},
           check=True)


@case("DescribeProducers", "unknown-topic-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("DescribeProducers", 0, {"Topics": [
        {"Name": t, "PartitionIndexes": [3]},
        {"Name": topic(c, "-missing"), "PartitionIndexes": [0]}]}, check=True)
