"""Log compaction (#27) with a real client, against kactor and Apache Kafka 4.4 alike: a
compacted topic whose segments roll every 100 ms, cleaned with a 1% dirty ratio and a 2 s
delete.retention.ms. Keyed updates, tombstones, a committed and an aborted transaction go in;
once the cleaner has run, reading from the beginning gives the latest value of every key at the
offset it was produced at, no aborted record, and, after delete.retention.ms and another
cleaning, no trace of the deleted keys. Both brokers must pass the same assertions."""
import re
import time
import uuid

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaException, Producer,
                             TopicPartition)

from harness.cli import run_tool
from harness.clients import create_topic, wait_topic
from harness.txn import txn_producer

DELETE_RETENTION_MS = 2000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "1048576",  # Kafka 4's minimum; segments roll on segment.ms instead
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
    "file.delete.delay.ms": "1000",
}
BROKER = {"log.cleaner.backoff.ms": "200"}


def read_all(broker, topic, timeout=30):
    """Every record of partition 0 from the beginning (read_uncommitted, so removed aborted
    data would show): [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert not m.error(), m.error()
            key = m.key().decode() if m.key() is not None else None
            value = m.value().decode() if m.value() is not None else None
            out.append((m.offset(), key, value))
        assert out and out[-1][0] >= high - 1, f"read {len(out)} records, high watermark {high}"
        return out
    finally:
        c.close()


class Writer:
    """Keyed produces, one flushed batch per call; remembers each record's offset."""

    def __init__(self, broker, topic):
        self.topic = topic
        self.p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        self.offsets = {}  # (key, value) -> offset

    def send(self, kvs):
        def on_delivery(err, msg):
            assert err is None, err
            v = msg.value().decode() if msg.value() is not None else None
            self.offsets[(msg.key().decode(), v)] = msg.offset()

        for k, v in kvs:
            self.p.produce(self.topic, key=k, value=v, partition=0, on_delivery=on_delivery)
        assert self.p.flush(30) == 0
        # The next write lands in a new segment (segment.ms), so this one can be cleaned.
        time.sleep(0.15)


def wait_for(what, check, timeout=90):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last read: {last}")


def latest(records):
    out = {}
    for _, k, v in records:
        out[k] = v
    return out


def test_compaction_keeps_latest_values_drops_deletes_and_aborted_data(broker_factory):
    broker = broker_factory(overrides=BROKER)
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, config=TOPIC_CONFIG)
    w = Writer(broker, topic)
    keys = [f"k{i:02d}" for i in range(20)]
    for rnd in range(8):
        w.send([(k, f"r{rnd}-{k}") for k in keys])

    # A committed transaction rewrites k10, an aborted one tries k11.
    for commit, key in ((True, "k10"), (False, "k11")):
        p = txn_producer(broker, f"compact-txn-{uuid.uuid4().hex[:6]}")
        p.begin_transaction()
        p.produce(topic, key=key, value="txn-committed" if commit else "txn-aborted",
                  partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    time.sleep(0.15)
    deleted = keys[:5]
    w.send([(k, None) for k in deleted])
    w.send([("z", "1")])  # rolls the segment holding the tombstones
    produced = sum(1 for _ in w.offsets) + 2
    last_offset = w.offsets[("z", "1")]

    expected = {k: f"r7-{k}" for k in keys[5:]}
    expected["k10"] = "txn-committed"
    expected["z"] = "1"

    def first_clean():
        # Done once a cleaning covered the tombstones: the values they delete are gone (that
        # cleaning also stamped the tombstones' delete horizon, delete.retention.ms from then).
        recs = read_all(broker, topic)
        old_values = any(k in deleted and v is not None for _, k, v in recs)
        aborted = any(v == "txn-aborted" for _, _, v in recs)
        return len(recs) < produced and not old_values and not aborted, recs

    recs = wait_for("the first cleaning", first_clean)
    values = latest(recs)
    # Deleted keys are tombstones or gone, never an older value.
    assert all(values.get(k) is None for k in deleted), values
    assert {k: v for k, v in values.items() if k not in deleted} == expected

    # After delete.retention.ms, more updates make the log dirty again; the next cleaning
    # drops the tombstones.
    time.sleep(DELETE_RETENTION_MS / 1000 + 0.5)
    w.send([(k, f"late-{k}") for k in keys[15:]])
    w.send([("z", "2")])
    for k in keys[15:]:
        expected[k] = f"late-{k}"
    expected["z"] = "2"
    final_last = w.offsets[("z", "2")]

    def tombstones_gone():
        recs = read_all(broker, topic)
        keys_seen = {k for _, k, _ in recs}
        superseded = any(v == f"r7-{k}" for _, k, v in recs if k in keys[15:])
        return not (keys_seen & set(deleted)) and not superseded, recs

    recs = wait_for("the tombstones to go", tombstones_gone)
    offsets = [o for o, _, _ in recs]
    assert offsets == sorted(set(offsets)), "offsets strictly increasing"
    assert offsets[-1] == final_last > last_offset, "the last offset is kept"
    assert latest(recs) == expected
    # Every survivor sits at the offset it was produced at: nothing renumbered.
    for o, k, v in recs:
        if (k, v) in w.offsets:
            assert w.offsets[(k, v)] == o, (k, v, o)
    # One record per key, except what the active segment holds (z=2 and the z=1 it shadows).
    per_key = {}
    for _, k, _ in recs:
        per_key[k] = per_key.get(k, 0) + 1
    assert all(n == 1 for k, n in per_key.items() if k != "z"), per_key
    assert not any(v == "txn-aborted" for _, _, v in recs)

    # The cleaned segments are in Kafka's format: kafka-dump-log reads every one, and the
    # records it lists are the ones consumed (the tombstones' keys and aborted data gone).
    segs = sorted(str(p) for p in broker.partition_dir(topic, 0).glob("*.log"))
    out = run_tool("dump-log", "--files", ",".join(segs), "--print-data-log").stdout
    dumped = re.findall(r"offset: (\d+) .*?key: (\S+)", out)
    data = [(int(o), k) for o, k in dumped if k.startswith(("k", "z"))]
    assert data == [(o, k) for o, k, _ in recs], out[-3000:]

    # The first dirty offset is checkpointed in Kafka's format (version 0, count, then
    # `topic partition offset`): past the cleaned part, at most the active segment's start.
    lines = (broker.data_dir / "cleaner-offset-checkpoint").read_text().split("\n")
    assert lines[0] == "0" and int(lines[1]) == len([x for x in lines[2:] if x.strip()])
    [checkpointed] = [int(x.split()[2]) for x in lines[2:] if x.startswith(f"{topic} 0 ")]
    assert final_last - 1 <= checkpointed <= final_last, (checkpointed, final_last)

    # A crash and restart change nothing that was read.
    broker.kill9()
    broker.restart()
    wait_topic(broker, topic, timeout=60)

    def reread():
        try:
            return True, read_all(broker, topic)
        except KafkaException as e:  # the partition may still be loading
            return False, e

    assert wait_for("the log after a restart", reread, timeout=60) == recs
