"""What a new follower must take from its leader as it is (issue #26 review): a replica added
by reassignment copies a log whose start offset DeleteRecords moved into the middle of a batch,
and a batch larger than the topic's max.message.bytes (lowered after the batch was written).

Kafka's rules: an empty follower log that the leader's first batch starts below begins at that
batch's base offset (`Partition.appendRecordsToFollowerOrFutureReplica` catches the unexpected
append offset and restarts the log there), and follower appends ignore the record size limit.
Either refusal would be a storage failure taking the new replica's log dir offline, with every
other partition in it.

One controller and two brokers (2, 3); both topics start on broker 2 alone and are reassigned to
[2, 3]. Kafka 4.4 runs the same cluster from its jars (KACTOR_TEST_TARGET=kafka)."""
import json

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                  NewTopic)

from harness.cli import run_tool
from harness.cluster import Cluster, consume_numbers, segment_bytes, wait_until

BIG = 200_000  # bytes in one record: over the lowered limit


def isr(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return sorted(t.partitions[0].isrs)


def test_a_new_replica_copies_a_mid_batch_start_and_an_oversized_batch(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=2, overrides={
        "broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "500",
    }).start(timeout=180)
    try:
        two, three = cluster.node(2), cluster.node(3)
        bootstrap = two.bootstrap
        a = AdminClient({"bootstrap.servers": bootstrap})
        trimmed, big = f"{topic_name}-trimmed", f"{topic_name}-big"
        futures = a.create_topics([
            NewTopic(trimmed, num_partitions=1, replica_assignment=[[2]]),
            NewTopic(big, num_partitions=1, replica_assignment=[[2]],
                     config={"max.message.bytes": "1000000"}),
        ], operation_timeout=30)
        for f in futures.values():
            f.result(30)

        # Ten records in one batch (linger, one flush, once the producer knows the leader),
        # then one record of 200 kB.
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "acks": "all",
                      "message.max.bytes": 1_000_000})
        p.list_topics(trimmed, timeout=10)
        for i in range(10):
            p.produce(trimmed, value=str(i).encode(), partition=0)
        p.produce(big, value=b"x" * BIG, partition=0)
        assert p.flush(30) == 0

        # The leader's log start offset moves inside the batch [0, 9].
        deleted = a.delete_records([TopicPartition(trimmed, 0, 5)])
        low = list(deleted.values())[0].result(30)
        assert low.low_watermark == 5
        # The big batch is now over the topic's limit.
        limit = ConfigResource("topic", big, incremental_configs=[ConfigEntry(
            "max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])
        a.incremental_alter_configs([limit])[limit].result(30)

        plan = tmp_path / "reassign.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [2, 3]} for t in (trimmed, big)]}))
        out = run_tool("reassign-partitions", "--bootstrap-server", bootstrap,
                       "--reassignment-json-file", str(plan), "--execute")
        assert "Successfully started partition reassignment" in out.stdout, out.stdout
        for t in (trimmed, big):
            wait_until(lambda: isr(bootstrap, t) == [2, 3], 60, f"broker 3 in sync for {t}")

        # Broker 3 holds the leader's bytes from the batch holding the log start offset on:
        # that batch whole, from its base offset (below 5: the start is inside it).
        for t in (trimmed, big):
            wait_until(lambda: segment_bytes(three, t) and
                       segment_bytes(two, t).endswith(segment_bytes(three, t)), 30,
                       f"broker 3's copy of {t} the tail of broker 2's")
        first_base = int.from_bytes(segment_bytes(three, trimmed)[:8], "big")
        assert first_base < 5, first_base
        # Its log dir is still online: it leads a new partition and acknowledges acks=all.
        fresh = f"{topic_name}-fresh"
        a.create_topics([NewTopic(fresh, num_partitions=1, replica_assignment=[[3, 2]])],
                        operation_timeout=30)[fresh].result(30)
        q = Producer({"bootstrap.servers": three.bootstrap, "acks": "all",
                      "message.timeout.ms": 20000})
        errors = []
        for i in range(100):
            q.produce(fresh, value=str(i).encode(), on_delivery=lambda e, m: errors.append(e))
        assert q.flush(30) == 0
        assert errors == [None] * 100, errors[:3]
        assert consume_numbers(three, fresh, 1, 100) == list(range(100))

        # Broker 2 stops: broker 3 takes over and serves what is left after the deletion.
        two.stop(timeout=60)
        wait_until(lambda: isr(three.bootstrap, trimmed) == [3], 60, "broker 3 leading alone")
        assert consume_numbers(three, trimmed, 1, 5) == list(range(5, 10))
    finally:
        cluster.stop()
