"""Replication under faults (issue #26): an idempotent acks=all producer writes numbered
records while a nemesis kills brokers with -9 or freezes them with SIGSTOP, one at a time, and
brings them back. Afterwards a checker reads every partition and asserts: every acknowledged
record is there (0 lost), none twice (0 duplicates), each partition in the order it was
written, and every replica's segments identical to the leader's.

Short in CI (KACTOR_FAULT_SECONDS, default 30); `scripts/replication-faults` runs it for
minutes. Kafka 4.4 runs the same history from its jars (KACTOR_TEST_TARGET=kafka)."""
import os
import random
import signal
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import Cluster, wait_until

PARTITIONS = 3
FAULT_SECONDS = float(os.environ.get("KACTOR_FAULT_SECONDS", "30"))
MAX_RECORDS = 2_000_000


def isr_full(node, topic, ids):
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != PARTITIONS:
        return False
    return all(p.leader >= 0 and sorted(p.isrs) == sorted(ids) for p in t.partitions.values())


def read_all(node, topic, timeout=120):
    """Every record of every partition, from offset 0 to the end, in offset order."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"{topic}-checker",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    ends = {}
    for p in range(PARTITIONS):
        _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends[p] = high
    out = {p: [] for p in range(PARTITIONS)}
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and any(
                (out[p] and out[p][-1][0] + 1 < ends[p]) or (not out[p] and ends[p] > 0)
                for p in range(PARTITIONS)):
            m = c.poll(0.5)
            if m is not None and not m.error():
                out[m.partition()].append((m.offset(), int(m.value())))
    finally:
        c.close()
    return out, ends


def segments(node, topic, p):
    d = node.partition_dir(topic, p)
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def test_no_acknowledged_record_lost_or_duplicated_under_kill_and_pause(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides={
        "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "5000",
    }).start(timeout=180)
    rng = random.Random(int(os.environ.get("KACTOR_FAULT_SEED", "26")))
    try:
        brokers = cluster.brokers
        ids = [b.node_id for b in brokers]
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})  # held until done
        admin.create_topics(
            [NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=3,
                      config={"min.insync.replicas": "2"})],
            operation_timeout=30)[topic_name].result(30)
        wait_until(lambda: isr_full(brokers[0], topic_name, ids), 60, "replicas in sync")

        acked, failed, stop = {}, [], threading.Event()
        bootstrap = ",".join(b.bootstrap for b in brokers)

        def produce_loop():
            p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                          "enable.idempotence": True, "message.timeout.ms": 30000,
                          "linger.ms": 5})

            def done(err, msg):
                if err:
                    failed.append((int(msg.value()), err.str()))
                else:
                    acked[int(msg.value())] = msg.partition()
            i = 0
            while not stop.is_set() and i < MAX_RECORDS:
                try:
                    p.produce(topic_name, value=b"%d" % i, partition=i % PARTITIONS,
                              on_delivery=done)
                    i += 1
                except BufferError:
                    p.poll(0.05)
                    continue
                if i % 100 == 0:
                    p.poll(0)
                    time.sleep(0.01)
            p.flush(60)

        producer = threading.Thread(target=produce_loop)
        producer.start()
        faults = []
        try:
            deadline = time.monotonic() + FAULT_SECONDS
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(1.0, 3.0))
                victim = rng.choice(brokers)
                if rng.random() < 0.5:
                    faults.append(f"kill -9 {victim.node_id}")
                    victim.kill9()
                    time.sleep(rng.uniform(0.5, 4.0))
                    victim.start(timeout=120)
                else:
                    faults.append(f"SIGSTOP {victim.node_id}")
                    os.kill(victim.pid, signal.SIGSTOP)
                    time.sleep(rng.uniform(0.5, 5.0))
                    os.kill(victim.pid, signal.SIGCONT)
                # Heal before the next fault: at most one broker down at a time, so the ISR
                # can stay at min.insync.replicas and writes keep being acknowledged.
                wait_until(lambda: isr_full(brokers[0], topic_name, ids), 90,
                           f"ISR full again after {faults[-1]}")
        finally:
            stop.set()
            producer.join(120)
        print(f"faults: {faults}; acknowledged {len(acked)}, failed {len(failed)}")
        assert len(acked) > 1000, "too few writes were acknowledged to check anything"

        wait_until(lambda: isr_full(brokers[0], topic_name, ids), 90, "ISR full at the end")
        records, ends = read_all(brokers[1], topic_name)
        values = [v for p in records for _, v in records[p]]
        lost = sorted(set(acked) - set(values))
        dups = len(values) - len(set(values))
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:10]}"
        assert dups == 0, f"{dups} duplicates"
        for p, recs in records.items():
            vals = [v for _, v in recs]
            assert vals == sorted(vals), f"partition {p} out of order"
            assert all(acked.get(v, p) == p for v in vals), f"a record in the wrong partition {p}"
        # Every replica converged on the same bytes.
        wait_until(lambda: all(len({segments(b, topic_name, p) for b in brokers}) == 1
                               for p in range(PARTITIONS)), 60, "replicas identical")
    finally:
        cluster.stop()
