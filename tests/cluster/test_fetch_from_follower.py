"""Fetch from follower (KIP-392, issue #26 item 5): consumers read from a replica in their rack.

Three brokers in racks a, b and c (`broker.rack`) with `replica.selector.class` set to Kafka's
RackAwareReplicaSelector hold one partition led by the broker in rack a. A consumer's Fetch
v11+ carries its rack (`client.rack`): the leader answers a consumer in rack b or c with no
records and the id of the in-sync follower there (PreferredReadReplica), and that follower
serves it up to its own high watermark. A consumer in the leader's rack, in a rack without a
replica, or without a rack reads from the leader; a fetch without client metadata (v10) is
refused by a follower. librdkafka, told its rack, then fetches from the follower (its
statistics name the broker it fetches from) and reads what is produced while it polls there;
the Java consumer, which keeps fetch sessions, does too while its preferred replica keeps
expiring.
Kafka 4.4 runs the same cluster (KACTOR_TEST_TARGET=kafka)."""
import json
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from differential.client import Client
from harness.cli import run_tool
from harness import schema_codec as sc
from harness.cluster import Cluster, ClusterNode, leader_and_isr, wait_until

RACKS = {2: "rack-a", 3: "rack-b", 4: "rack-c"}
OVERRIDES = {
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
    "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
}
NOT_LEADER_OR_FOLLOWER = 6


class RackNode(ClusterNode):
    def base_config(self):
        cfg = super().base_config()
        if self.is_broker:
            cfg["broker.rack"] = RACKS[self.node_id]
        return cfg


def produce(node, topic, values):
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 0})
    acked = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, m: acked.append(e))
        p.flush(30)  # one batch per record
    assert acked == [None] * len(values), acked


def fetch(node, topic, offset, rack=None, version=12):
    """One Fetch of partition 0 as a consumer: (error, preferred replica, high watermark,
    offsets of the records returned)."""
    body = {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 0, "MaxBytes": 1 << 20,
            "IsolationLevel": 0, "SessionId": 0, "SessionEpoch": -1,
            "Topics": [{"Topic": topic, "Partitions": [{
                "Partition": 0, "CurrentLeaderEpoch": -1, "FetchOffset": offset,
                "LastFetchedEpoch": -1, "LogStartOffset": -1, "PartitionMaxBytes": 1 << 20}]}],
            "ForgottenTopicsData": [], "RackId": rack or ""}
    c = Client(node.target, node.port)
    try:
        r = c.call("Fetch", version, body)
    finally:
        c.close()
    p = r["Responses"][0]["Partitions"][0]
    offsets = [b["baseOffset"] + i for b in sc.decode_record_batches(p["Records"])
               if "recordCount" in b for i in range(b["lastOffsetDelta"] + 1)]
    return (p["ErrorCode"], p.get("PreferredReadReplica", -1), p["HighWatermark"], offsets)


def test_consumers_fetch_from_the_in_sync_replica_of_their_rack(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides=OVERRIDES,
                      node_class=RackNode).start(timeout=180)
    topic = topic_name
    leader, in_b, in_c = cluster.node(2), cluster.node(3), cluster.node(4)
    try:
        a = AdminClient({"bootstrap.servers": leader.bootstrap})
        a.create_topics([NewTopic(topic, num_partitions=1,
                                  replica_assignment=[[2, 3, 4]])])[topic].result(30)
        wait_until(lambda: (leader_and_isr(leader, topic) or (None, None))[1] == [2, 3, 4]
                   or None, 60, "all three in sync")
        produce(leader, topic, [b"v%d" % i for i in range(10)])
        # Each follower has fetched from 10 once the leader's high watermark is there, and its
        # own high watermark follows on its next fetch.
        for node in (leader, in_b, in_c):
            wait_until(lambda n=node: fetch(n, topic, 0, rack=RACKS[n.node_id])[2] == 10 or None,
                       30, f"{node.name}'s high watermark at 10")

        # The leader names the follower of the consumer's rack and reads nothing.
        assert fetch(leader, topic, 0, rack="rack-b") == (0, 3, 10, [])
        assert fetch(leader, topic, 4, rack="rack-c") == (0, 4, 10, [])
        everything = (0, -1, 10, list(range(10)))
        for rack in ("rack-a", "rack-x", None):
            assert fetch(leader, topic, 0, rack=rack) == everything, rack
        # Before v11 a fetch has no client metadata: the leader reads, a follower refuses.
        assert fetch(leader, topic, 0, version=10) == everything
        assert fetch(in_b, topic, 0, version=10)[0] == NOT_LEADER_OR_FOLLOWER

        # The followers serve a consumer with client metadata, up to their high watermark.
        assert fetch(in_b, topic, 0, rack="rack-b") == everything
        assert fetch(in_c, topic, 7, rack="rack-c") == (0, -1, 10, [7, 8, 9])
        assert fetch(in_c, topic, 10, rack="rack-c") == (0, -1, 10, [])

        # librdkafka in rack c moves to broker 4 and keeps reading there.
        fetching_from = []

        def stats(raw):
            p = json.loads(raw).get("topics", {}).get(topic, {}).get("partitions", {}).get("0")
            if p:
                fetching_from.append(p.get("broker"))

        c = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": f"{topic}-c",
                      "client.rack": "rack-c", "enable.auto.commit": False,
                      "statistics.interval.ms": 200, "stats_cb": stats})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got = []
            deadline = time.monotonic() + 60
            while len(got) < 10 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
            assert got == [b"v%d" % i for i in range(10)]
            wait_until(lambda: (c.poll(0.1), 4 in fetching_from)[1] or None, 30,
                       "librdkafka fetching from broker 4")
            produce(leader, topic, [b"later-%d" % i for i in range(5)])
            deadline = time.monotonic() + 30
            while len(got) < 15 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
            assert got[10:] == [b"later-%d" % i for i in range(5)]
            assert fetching_from[-1] == 4, fetching_from[-10:]
        finally:
            c.close()

        # The Java consumer (kafka-console-consumer) keeps fetch sessions. With a short
        # metadata.max.age.ms its preferred replica expires every second and it asks the
        # leader again inside its session, which names the follower again (in an incremental
        # answer too, as Kafka's session cache counts a preferred replica as news).
        out = {}

        def java_consumer():
            out["run"] = run_tool(
                "console-consumer", "--bootstrap-server", leader.bootstrap, "--topic", topic,
                "--partition", "0", "--offset", "earliest", "--max-messages", "20",
                "--timeout-ms", "30000", "--command-property", "client.rack=rack-b",
                "--command-property", "metadata.max.age.ms=1000", timeout=90, check=False)

        reader = threading.Thread(target=java_consumer)
        reader.start()
        time.sleep(4)
        produce(leader, topic, [b"java-%d" % i for i in range(5)])
        reader.join(100)
        lines = out["run"].stdout.split()
        assert lines[-5:] == ["java-%d" % i for i in range(5)], out["run"].stderr[-2000:]
        assert len(lines) == 20, lines
    finally:
        cluster.stop()
