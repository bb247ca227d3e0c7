"""A KIP-848 member that joins right after its topic was created gets its partitions in its
first heartbeat response (#24: kactor's group shards learnt of new topics from a 50 ms poll of
the partition table, so the first heartbeat came back empty and the partitions arrived one
heartbeat interval, 5 s, later; Kafka answers within the same round).

The client test runs against both brokers; the wire test pins the exact round on kactor, whose
shards read the partition table the Metadata answer came from (Kafka's group coordinator
follows its own copy of the metadata image, so the very first response can miss a topic there
by a few milliseconds, which its clients cover with the next heartbeat)."""
import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import NewTopic

from differential.client import Client
from harness.clients import admin, wait_topic

# A heartbeat interval far longer than a join takes: an assignment that waits for a second
# heartbeat cannot arrive in time.
HEARTBEAT_MS = 10_000


@pytest.fixture
def slow_heartbeat_broker(broker_factory):
    return broker_factory(name="first-heartbeat", overrides={
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "group.consumer.max.heartbeat.interval.ms": str(HEARTBEAT_MS)})


def test_a_real_consumer_is_assigned_in_its_first_round(slow_heartbeat_broker, topic_name):
    b = slow_heartbeat_broker
    # The coordinator is up before the topic exists, so that the join measures the topic.
    warm = Client(b.target, b.port)
    warm.coordinator(f"warm-{topic_name}")
    warm.close()
    a = admin(b)
    a.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(30)
    wait_topic(b, topic_name, partitions=3)

    assigned_at = []
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic_name}",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    start = time.monotonic()
    c.subscribe([topic_name], on_assign=lambda _c, tps: assigned_at.append(
        (time.monotonic() - start, sorted(tp.partition for tp in tps))))
    try:
        deadline = start + 3 * HEARTBEAT_MS / 1000
        while not any(parts for _, parts in assigned_at) and time.monotonic() < deadline:
            c.poll(0.1)
    finally:
        c.close()
    first = next(((t, parts) for t, parts in assigned_at if parts), None)
    assert first is not None, f"never assigned: {assigned_at}"
    took, parts = first
    assert parts == [0, 1, 2]
    assert took < HEARTBEAT_MS / 1000 * 0.8, (
        f"assigned after {took:.1f} s: a heartbeat interval ({HEARTBEAT_MS} ms) late")


def test_the_first_heartbeat_response_carries_the_assignment(broker, topic_name, target):
    if target != "kactor":
        pytest.skip("Kafka's coordinator may answer the very first round before its metadata "
                    "image has the topic (see the module doc)")
    c = Client(target, broker.port)
    try:
        group = f"g-{topic_name}"
        c.coordinator(group)
        c.create_topic(topic_name, partitions=3)
        c.wait_served(topic_name, partitions=3)
        r = c.call("ConsumerGroupHeartbeat", 1, {
            "GroupId": group, "MemberId": uuid.uuid4().hex[:22], "MemberEpoch": 0,
            "InstanceId": None, "RackId": None, "RebalanceTimeoutMs": 30000,
            "SubscribedTopicNames": [topic_name], "SubscribedTopicRegex": None,
            "ServerAssignor": None, "TopicPartitions": []})
        assert r["ErrorCode"] == 0, r
        parts = sorted(p for tp in (r["Assignment"] or {}).get("TopicPartitions", [])
                       for p in tp["Partitions"])
        assert parts == [0, 1, 2], f"first heartbeat response: {r}"
    finally:
        c.close()
