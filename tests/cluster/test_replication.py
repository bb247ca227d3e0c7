"""Replication across broker processes (issue #26): followers fetch from their leaders, the ISR
grows and shrinks through AlterPartition, the high watermark waits for the ISR, and a leader
killed with -9 hands over to an in-sync follower without losing an acknowledged record.

One controller and three brokers, replication factor 3, min.insync.replicas=2. Kafka 4.4 runs
the same cluster from its jars (KACTOR_TEST_TARGET=kafka): every assertion holds for both."""
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import (Cluster, consume_numbers, coordinator_partition, segment_bytes,
                             wait_until)

PARTITIONS = 3


def admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap})


def partition_states_of(node, topic):
    md = admin(node).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (x.leader, sorted(x.isrs)) for p, x in t.partitions.items()}


def partition_states(node, topic):
    """Partition -> (leader, replicas, isr) as `node` answers Metadata, or None."""
    md = admin(node).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (x.leader, sorted(x.replicas), sorted(x.isrs)) for p, x in t.partitions.items()}


def all_in_sync(node, topic, brokers):
    states = partition_states(node, topic)
    ok = states and len(states) == PARTITIONS and all(
        leader >= 0 and isr == sorted(brokers) for leader, _, isr in states.values())
    return states if ok else None


def produce(node, topic, numbers, timeout=60):
    """Idempotent acks=all producer; returns the numbers acknowledged and the errors."""
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 20000})
    acked, errors = [], []

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            acked.append(int(msg.value()))
    for i in numbers:
        p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS, on_delivery=done)
        p.poll(0)
    p.flush(timeout)
    return acked, errors


def consume_in_group(node, topic, group, count, timeout=60):
    """Reads `count` records as a member of `group` (FindCoordinator, JoinGroup, SyncGroup,
    OffsetCommit: the group coordinator and `__consumer_offsets` on a broker-only node); returns
    the numbers, sorted."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(seen) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append(int(m.value()))
        if seen:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return sorted(seen)


def replicas_identical(brokers, topic):
    for p in range(PARTITIONS):
        copies = {segment_bytes(b, topic, p) for b in brokers}
        if len(copies) != 1 or not next(iter(copies)):
            return False
    return True


def test_replicas_follow_fail_over_and_catch_up(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "10000",
        # The group's coordinator partition must survive the broker the test kills.
        "offsets.topic.replication.factor": "3",
    }).start(timeout=180)
    try:
        brokers = cluster.brokers
        ids = [b.node_id for b in brokers]
        a = admin(brokers[0])
        a.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=3,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic_name].result(30)
        states = wait_until(lambda: all_in_sync(brokers[1], topic_name, ids), 60,
                            "every replica in sync")
        assert all(replicas == sorted(ids) for _, replicas, _ in states.values()), states

        # acks=all through one broker, read back through another: every record once.
        acked, errors = produce(brokers[0], topic_name, range(0, 3000))
        assert not errors and sorted(acked) == list(range(3000)), errors[:3]
        assert consume_numbers(brokers[2], topic_name, PARTITIONS, 3000) == list(range(3000))
        # The followers hold the leader's bytes, batch for batch.
        wait_until(lambda: replicas_identical(brokers, topic_name), 30,
                   "every replica's segments identical")

        # A consumer group reads the first 3000 and commits: its coordinator partition (in
        # __consumer_offsets, replicated three ways) is what the test kills next.
        group = f"{topic_name}-g"
        assert consume_in_group(brokers[1], topic_name, group, 3000) == list(range(3000))
        coordinator = wait_until(lambda: (lambda s: s and s.get(coordinator_partition(group, 50)))(
            partition_states_of(brokers[1], "__consumer_offsets")), 30, "the group's coordinator")

        # kill -9 the group coordinator's broker: in-sync followers take over its partitions
        # (data and __consumer_offsets), writes go on.
        victim_id = coordinator[0]
        victim = cluster.node(victim_id)
        victim.kill9()
        killed_at = time.monotonic()
        survivors = [b for b in brokers if b is not victim]
        moved = wait_until(lambda: (lambda s: s if s and all(
            lead not in (-1, victim_id) for lead, _, _ in s.values()) else None)(
                partition_states(survivors[0], topic_name)), 60, "leaders moved off the victim")
        assert all(victim_id not in isr for _, _, isr in moved.values()), moved
        print(f"leaders moved {time.monotonic() - killed_at:.1f}s after kill -9")
        acked2, errors2 = produce(survivors[0], topic_name, range(3000, 4000))
        assert not errors2 and sorted(acked2) == list(range(3000, 4000)), errors2[:3]
        assert consume_numbers(survivors[1], topic_name, PARTITIONS, 4000) == list(range(4000))
        # The group goes on from its committed offsets under the new coordinator.
        t0 = time.monotonic()
        assert consume_in_group(survivors[0], topic_name, group, 1000) == list(range(3000, 4000))
        print(f"group resumed under the new coordinator in {time.monotonic() - t0:.1f}s")

        # The victim comes back, catches up from the new leaders and rejoins every ISR.
        victim.start(timeout=120)
        wait_until(lambda: all_in_sync(survivors[0], topic_name, ids), 60,
                   "the restarted broker back in every ISR")
        wait_until(lambda: replicas_identical(brokers, topic_name), 30,
                   "the restarted broker's segments identical to the leaders'")
        assert consume_numbers(victim, topic_name, PARTITIONS, 4000) == list(range(4000))

        # With two of three brokers gone the ISR is one replica, below min.insync.replicas:
        # acks=all is refused (nothing acknowledged), acks=1 still works.
        alone = survivors[0]
        for b in brokers:
            if b is not alone:
                b.kill9()
        wait_until(lambda: (lambda s: s if s and all(
            isr == [alone.node_id] for _, _, isr in s.values()) else None)(
                partition_states(alone, topic_name)), 60, "ISR down to the last broker")
        p = Producer({"bootstrap.servers": alone.bootstrap, "acks": "all",
                      "message.timeout.ms": 3000})
        failed = []
        p.produce(topic_name, value=b"refused", partition=0,
                  on_delivery=lambda e, m: failed.append(e))
        p.flush(10)
        assert failed and failed[0] is not None, "acks=all below min.insync.replicas succeeded"
        assert failed[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), \
            failed[0]
    finally:
        cluster.stop()
