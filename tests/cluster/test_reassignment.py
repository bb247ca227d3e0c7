"""Partition reassignment across broker processes (issue #26 item 4), with Kafka's own tool.

One controller and three brokers (2, 3, 4); a topic with one partition on [2, 3], replication
factor 2, led by 2. While an idempotent acks=all producer writes to it, `kafka-reassign-partitions
--execute --throttle` moves the partition to [4, 3]: broker 4 starts following, catches up, the
leader admits it to the ISR, which completes the reassignment, and leadership leaves broker 2
(no longer a replica) for 4. `--verify` is polled until it reports completion (and clears the
throttles). Then every acknowledged record is read back, once, from the new replicas, whose
copies are identical; `kafka-topics --describe` shows the new replicas and ISR; broker 2 has
deleted its copy. Kafka 4.4 runs the same cluster from its jars (KACTOR_TEST_TARGET=kafka)."""
import json
import time

from confluent_kafka.admin import AdminClient, NewTopic

from harness.cli import run_tool
from harness.cluster import Cluster, consume_numbers, segment_bytes, wait_until
from harness.load import NumberedLoad

RATE = 50_000_000  # --throttle, bytes/s: high enough not to slow the test


def describe(bootstrap, topic):
    """(leader, replicas, isr) of partition 0 as `kafka-topics --describe` prints them."""
    out = run_tool("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    for line in out.stdout.splitlines():
        if "Partition: 0" in line:
            fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
            return (int(fields["Leader"]), [int(x) for x in fields["Replicas"].split(",")],
                    sorted(int(x) for x in fields["Isr"].split(",")))
    raise AssertionError(f"no partition 0 in:\n{out.stdout}")


def test_reassign_partitions_moves_a_partition_under_load(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides={
        "broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "500",
    }).start(timeout=180)
    try:
        two, three, four = (cluster.node(i) for i in (2, 3, 4))
        bootstrap = three.bootstrap
        a = AdminClient({"bootstrap.servers": bootstrap})
        a.create_topics([NewTopic(topic_name, num_partitions=1, replica_assignment=[[2, 3]],
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic_name].result(30)
        wait_until(lambda: describe(bootstrap, topic_name) == (2, [2, 3], [2, 3]), 60,
                   "the partition led by 2 with 2 and 3 in sync")

        producer = NumberedLoad(bootstrap, topic_name)
        wait_until(lambda: len(producer.acked) >= 2000, 60, "records acknowledged")

        plan = tmp_path / "reassign.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [4, 3]}]}))
        started = time.monotonic()
        out = run_tool("reassign-partitions", "--bootstrap-server", bootstrap,
                       "--reassignment-json-file", str(plan), "--execute",
                       "--throttle", str(RATE))
        assert "Successfully started partition reassignment" in out.stdout, out.stdout
        # The throttles the tool set, as DescribeConfigs reports them.
        configs = run_tool("configs", "--bootstrap-server", bootstrap, "--describe",
                           "--entity-type", "topics", "--entity-name", topic_name).stdout
        assert "leader.replication.throttled.replicas=0:2,0:3" in configs, configs
        assert "follower.replication.throttled.replicas=0:4" in configs, configs
        broker_configs = run_tool("configs", "--bootstrap-server", bootstrap, "--describe",
                                  "--entity-type", "brokers", "--entity-name", "4").stdout
        assert f"leader.replication.throttled.rate={RATE}" in broker_configs, broker_configs
        assert f"follower.replication.throttled.rate={RATE}" in broker_configs, broker_configs

        def completed():
            v = run_tool("reassign-partitions", "--bootstrap-server", bootstrap,
                         "--reassignment-json-file", str(plan), "--verify").stdout
            return v if f"Reassignment of partition {topic_name}-0 is completed" in v else None
        verified = wait_until(completed, 60, "the reassignment completed")
        print(f"reassignment completed {time.monotonic() - started:.1f}s after --execute")
        assert "Clearing broker-level throttles" in verified, verified
        assert f"Clearing topic-level throttles on topic {topic_name}" in verified, verified

        # A few more records through the new leader, then stop.
        count = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= count + 1000, 60,
                   f"records after the move (sent {producer.sent}, errors {producer.errors[:3]})")
        producer.stop()
        assert not producer.errors, producer.errors[:3]
        acked = sorted(producer.acked)
        assert acked == list(range(len(acked))), "acknowledged numbers with gaps"

        # 4 took over from 2, which is no longer a replica; both new replicas in sync.
        assert describe(bootstrap, topic_name) == (4, [4, 3], [3, 4])
        assert "No partition reassignments found." in run_tool(
            "reassign-partitions", "--bootstrap-server", bootstrap, "--list").stdout
        # Every acknowledged record once, read from the new leader; the new replicas hold the
        # same bytes.
        assert producer.sent == len(acked)
        got = consume_numbers(three, topic_name, 1, len(acked), timeout=60)
        assert got == acked, (len(got), len(acked))
        wait_until(lambda: segment_bytes(three, topic_name) == segment_bytes(four, topic_name),
                   30, "broker 4's copy identical to broker 3's")
        # Broker 2 deleted its replica (Kafka renames the directory for deletion at once).
        wait_until(lambda: not two.partition_dir(topic_name, 0).exists(), 30,
                   "broker 2's partition directory gone")
        # The throttles are gone again.
        configs = run_tool("configs", "--bootstrap-server", bootstrap, "--describe",
                           "--entity-type", "topics", "--entity-name", topic_name).stdout
        assert "throttled" not in configs, configs
    finally:
        cluster.stop()
