"""`replication-offset-checkpoint` (issue #26): a broker keeps each partition's high watermark
across a restart, clean or `kill -9`, instead of starting it at its log end.

Records a leader has and its ISR does not are above the high watermark: consumers must not see
them, because the next leader may not have them. Here the leader of a two-replica topic with
`min.insync.replicas=2` takes acks=1 writes while its follower is paused: they are appended and
acknowledged, but the high watermark stays where both replicas were (under its minimum ISR the
partition commits nothing, KIP-966). The leader then restarts while the follower is still
paused. A broker that forgot the high watermark would lead again with it at the log end and
hand those records to consumers. With it, the restarted leader's high watermark is below the
start of its new epoch, so ListOffsets for the latest offset answers OFFSET_NOT_AVAILABLE and a
consumer reads only the committed records. Kafka 4.4 runs the same cluster
(KACTOR_TEST_TARGET=kafka), formatted without eligible leader replicas (KIP-966), which kactor
does not implement yet: with them Kafka keeps the partition leaderless until the paused
follower, its only eligible replica, returns, and the restarted leader never leads."""
import os
import signal
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import Cluster, wait_until

OVERRIDES = {
    "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "2000",
    # Checkpoint often, so the kill -9 below does not wait Kafka's default 5 s.
    "replica.high.watermark.checkpoint.interval.ms": "200",
}


def produce(node, topic, values, acks):
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": acks,
                  "enable.idempotence": False, "message.timeout.ms": 20000})
    acked = []
    for v in values:
        p.produce(topic, v, partition=0,
                  on_delivery=lambda e, m: acked.append((e, m.offset() if e is None else None)))
    p.flush(30)
    assert [e for e, _ in acked] == [None] * len(values), acked
    return [o for _, o in acked]


def state(node, topic):
    """(leader, isr) of partition 0 as `node` answers Metadata."""
    t = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10) \
        .topics.get(topic)
    p = t.partitions.get(0) if t and t.error is None else None
    return (p.leader, sorted(p.isrs)) if p else None


def high_watermark(node, topic):
    """The high watermark a consumer's ListOffsets (latest, read_uncommitted) gets."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"{topic}-hw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def latest_offset_error(node, topic):
    """The error code of ListOffsets(latest) for partition 0, or None if it answered."""
    try:
        high_watermark(node, topic)
        return None
    except KafkaException as e:
        return e.args[0].code()


def committed_values(node, topic, seconds=3):
    """Everything a consumer can read from partition 0 within `seconds`."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"{topic}-read",
                  "enable.auto.commit": False})
    got = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def checkpointed(node, topic):
    """The high watermark the node's `replication-offset-checkpoint` holds for `topic`-0."""
    try:
        lines = (node.data_dir / "replication-offset-checkpoint").read_text().splitlines()
    except FileNotFoundError:
        return None
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines
    found = [int(line.split()[2]) for line in lines[2:] if line.split()[:2] == [topic, "0"]]
    return found[0] if found else None


def check_restarted_leader(node, topic):
    """`node` leads the partition again with the checkpointed high watermark (2), below its new
    epoch's start: the latest offset is not available and only the committed records can be
    read."""
    wait_until(lambda: (lambda s: s if s and s[0] == node.node_id else None)(
        state(node, topic)), 90, f"{node.name} leading {topic} again")
    code = wait_until(lambda: latest_offset_error(node, topic), 30, "ListOffsets' answer")
    assert code == KafkaError.OFFSET_NOT_AVAILABLE, code
    assert committed_values(node, topic) == [b"0", b"1"]


def test_the_high_watermark_survives_clean_and_crash_restarts(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=2, overrides=OVERRIDES,
                      kafka_format_args=("--feature", "eligible.leader.replicas.version=0")
                      ).start(timeout=180)
    topic = topic_name
    leader, follower = cluster.node(2), cluster.node(3)
    try:
        a = AdminClient({"bootstrap.servers": leader.bootstrap})  # alive until the result
        a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[2, 3]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
        wait_until(lambda: state(leader, topic) == (2, [2, 3]) or None, 60, "both in sync")
        assert produce(leader, topic, [b"0", b"1"], acks="all") == [0, 1]
        assert high_watermark(leader, topic) == 2

        # The follower stops; the leader appends acks=1 writes, and once the follower has left
        # the ISR the partition is under its minimum: the high watermark stays at 2.
        os.kill(follower.pid, signal.SIGSTOP)
        assert produce(leader, topic, [b"2", b"3"], acks="1") == [2, 3]
        wait_until(lambda: state(leader, topic) == (2, [2]) or None, 60, "the ISR shrunk")
        assert high_watermark(leader, topic) == 2
        wait_until(lambda: checkpointed(leader, topic) == 2 or None, 30, "checkpoint at 2")

        # A clean restart writes the checkpoint on the way down; the leader comes back with it.
        leader.stop()
        assert checkpointed(leader, topic) == 2
        leader.start(timeout=120)
        check_restarted_leader(leader, topic)

        # kill -9 after the periodic checkpoint: the same, from the checkpoint on disk.
        assert produce(leader, topic, [b"4"], acks="1") == [4]
        time.sleep(1)  # several checkpoint intervals
        assert checkpointed(leader, topic) == 2
        leader.kill9()
        leader.start(timeout=120)
        check_restarted_leader(leader, topic)

        # The follower comes back and catches up: everything the leader has commits.
        os.kill(follower.pid, signal.SIGCONT)
        wait_until(lambda: high_watermark(leader, topic) == 5 or None, 90,
                   "the high watermark at the log end once both replicas have it")
        wait_until(lambda: checkpointed(leader, topic) == 5 or None, 30, "checkpoint at 5")
        assert committed_values(leader, topic) == [b"0", b"1", b"2", b"3", b"4"]
    finally:
        if follower.is_running():
            os.kill(follower.pid, signal.SIGCONT)
        cluster.stop()
