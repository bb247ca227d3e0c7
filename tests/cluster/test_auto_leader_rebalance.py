"""auto.leader.rebalance.enable (issue #26, elections): after a broker comes back and catches
up, the active controller gives it back the partitions it is the preferred (first) replica of,
on its own, within leader.imbalance.check.interval.seconds; nobody runs kafka-leader-election.

One controller and three brokers, six partitions with replication factor 3 spread by the
controller; the broker that led partition 0 is killed with SIGKILL, so its leaderships move
when its session times out, and restarted. Kafka 4.4 runs the same cluster from its jars
(KACTOR_TEST_TARGET=kafka)."""
import time

from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import Cluster, partition_states, produce_and_consume, wait_until

PARTITIONS = 6
CHECK_INTERVAL_S = 3


def balanced(node, topic, ids):
    s = partition_states(node, topic)
    ok = s and len(s) == PARTITIONS and all(
        leader == replicas[0] and isr == ids for leader, replicas, isr in s.values())
    return s if ok else None


def test_leadership_returns_to_preferred_replicas_by_itself(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides={
        "broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "500",
        "leader.imbalance.check.interval.seconds": str(CHECK_INTERVAL_S),
    }).start(timeout=180)
    try:
        brokers = cluster.brokers
        ids = sorted(b.node_id for b in brokers)
        a = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        a.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=3)],
                        operation_timeout=30)[topic_name].result(30)
        initial = wait_until(lambda: balanced(brokers[1], topic_name, ids), 60,
                             "every partition led by its first replica, all in sync")
        victim = cluster.node(initial[0][0])
        preferred = sorted(p for p, (_, replicas, _) in initial.items()
                           if replicas[0] == victim.node_id)
        survivors = [b for b in brokers if b is not victim]

        victim.kill9()
        moved = wait_until(lambda: (lambda s: s if s and all(
            s[p][0] != victim.node_id for p in preferred) else None)(
                partition_states(survivors[0], topic_name)), 60,
            "leadership moved off the killed broker")
        assert all(moved[p][0] in [b.node_id for b in survivors] for p in preferred), moved

        victim.start(timeout=120)
        t0 = time.monotonic()
        back = wait_until(lambda: balanced(survivors[0], topic_name, ids),
                          30 + 3 * CHECK_INTERVAL_S, "leadership back on the preferred replicas")
        print(f"preferred leaders restored {time.monotonic() - t0:.1f}s after the restart")
        assert all(back[p][0] == victim.node_id for p in preferred), back
        # The restored leaders serve.
        got = produce_and_consume(survivors[0], survivors[1], topic_name, PARTITIONS, 600)
        assert got == list(range(600))
    finally:
        cluster.stop()
