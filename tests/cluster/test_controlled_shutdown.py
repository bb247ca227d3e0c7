"""Controlled shutdown (issue #26, elections; the rolling restarts of #32): a broker stopped
with SIGTERM first has the controller move its leaderships to other in-sync replicas and stops
only once every live broker knows the new leaders, so producers fail over while it is still
up instead of waiting out its session timeout (set long here, 20 s, to tell the two apart).
It comes back (registering at once: it was fenced on the way out), catches up, rejoins the
ISRs, and a preferred election gives its partitions back.

One controller and three brokers, replication factor 3, min.insync.replicas=2; an idempotent
acks=all producer runs throughout. Kafka 4.4 runs the same cluster from its jars
(KACTOR_TEST_TARGET=kafka): every assertion holds for both."""
import time

from confluent_kafka.admin import AdminClient, NewTopic

from harness.cli import KafkaCli
from harness.cluster import Cluster, consume_numbers, partition_states, wait_until
from harness.load import NumberedLoad

PARTITIONS = 3


def test_sigterm_moves_leaders_before_the_broker_stops(tmp_path, topic_name):
    run(tmp_path, topic_name, restart=False)


def test_sigterm_then_restart_and_rejoin(tmp_path, topic_name):
    run(tmp_path, topic_name, restart=True)


def run(tmp_path, topic_name, restart):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides={
        "broker.session.timeout.ms": "20000", "broker.heartbeat.interval.ms": "500",
        "offsets.topic.replication.factor": "3",
    }).start(timeout=180)
    try:
        brokers = cluster.brokers
        ids = sorted(b.node_id for b in brokers)
        a = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        a.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=3,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic_name].result(30)
        initial = wait_until(lambda: (lambda s: s if s and all(
            isr == ids for _, _, isr in s.values()) else None)(
                partition_states(brokers[1], topic_name)), 60, "every replica in sync")
        victim = cluster.node(initial[0][0])
        led = sorted(p for p, (leader, _, _) in initial.items() if leader == victim.node_id)
        survivors = [b for b in brokers if b is not victim]

        with NumberedLoad(survivors[0].bootstrap, topic_name, partitions=PARTITIONS,
                          limit=200_000, message_timeout_ms=60000, pause_every=50) as load:
            wait_until(lambda: len(load.acked) >= 2000, 60, "the producer under way")
            t0 = time.monotonic()
            code = victim.stop(timeout=60)
            print(f"SIGTERM to exit: {time.monotonic() - t0:.1f}s")
            # A clean exit: kactor returns 0, the JVM 143 (128 + SIGTERM) after its hooks ran.
            assert code in (0, 143), f"exit code {code}"
            # The moment it is gone, the survivors already name new leaders for what it led,
            # and it has left every ISR: the controller moved them before approving the stop.
            after = partition_states(survivors[0], topic_name)
            for p in led:
                leader, _, isr = after[p]
                assert leader in [b.node_id for b in survivors], after
                assert victim.node_id not in isr, after
            before_restart = len(load.acked)
            wait_until(lambda: len(load.acked) >= before_restart + 2000, 60,
                       "the producer going on without the victim")

            if restart:
                victim.start(timeout=120)
                wait_until(lambda: (lambda s: s if s and all(
                    isr == ids for _, _, isr in s.values()) else None)(
                        partition_states(survivors[0], topic_name)), 90,
                    "the restarted broker back in every ISR")
                n = len(load.acked)
                wait_until(lambda: len(load.acked) >= n + 2000, 60, "the producer after the restart")
                # Preferred election gives the first replica its leadership back; the
                # producer follows it without a stall.
                KafkaCli(survivors[1]).run("leader-election", "--election-type", "PREFERRED",
                                           "--all-topic-partitions", timeout=60, check=False)
                back = wait_until(lambda: (lambda s: s if s and all(
                    s[p][0] == s[p][1][0] for p in s) else None)(
                        partition_states(survivors[0], topic_name)),
                    60, "every partition led by its preferred replica")
                assert all(back[p][0] == victim.node_id for p in led), back
                n = len(load.acked)
                wait_until(lambda: len(load.acked) >= n + 2000, 60,
                           "the producer after the election")
        assert not load.errors, load.errors[:3]
        acked = sorted(load.acked)
        assert len(acked) == len(set(acked))
        read = consume_numbers(survivors[1], topic_name, PARTITIONS, load.sent, timeout=90)
        assert set(acked) <= set(read), "acknowledged records lost"
        assert len(read) == len(set(read)), "records duplicated"
    finally:
        cluster.stop()
