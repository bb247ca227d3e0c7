"""Real consumer groups with confluent-kafka, both protocols (classic JoinGroup/SyncGroup and
KIP-848 ConsumerGroupHeartbeat): partitions split, re-spread, move off a SIGKILLed member,
resume at the committed offset, and static members rejoin without a rebalance."""
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from harness.clients import create_topic
from groups.helpers import FAST_GROUP_BROKER, Member, produce, spread, wait_for

PROTOCOLS = ["classic", "consumer"]


@pytest.fixture
def fast_broker(broker_factory):
    return broker_factory(FAST_GROUP_BROKER, name="groups")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_split_respread_and_sigkill(fast_broker, topic_name, protocol):
    create_topic(fast_broker, topic_name, partitions=6)
    group = f"g-{topic_name}"
    members = []
    try:
        a = Member(fast_broker, group, topic_name, protocol)
        b = Member(fast_broker, group, topic_name, protocol)
        members += [a, b]
        wait_for(lambda: spread([a, b], 6), 60, "two members to split 6 partitions", members)

        c = Member(fast_broker, group, topic_name, protocol)
        members.append(c)
        wait_for(lambda: spread([a, b, c], 6), 60, "a third member to get a share", members)
        # Range (classic) and uniform (KIP-848) both balance 6 partitions over 3 members.
        assert sorted(len(m.assignment) for m in (a, b, c)) == [2, 2, 2]

        c_parts = c.assignment
        killed_at = time.monotonic()
        c.kill9()
        wait_for(lambda: spread([a, b], 6), 60, "the killed member's partitions to move",
                 members)
        # They move only once the session timeout (6 s) notices the member is gone; a
        # leave would have moved them at once.
        assert time.monotonic() - killed_at > 4
        assert c_parts <= a.assignment | b.assignment
    finally:
        for m in members:
            m.stop()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_restart_resumes_at_committed_offset(fast_broker, topic_name, protocol):
    # Short session timeouts: the killed member's partition is free in seconds, not 45 s.
    broker = fast_broker
    create_topic(broker, topic_name, partitions=1)
    produce(broker, topic_name, [10])
    group = f"g-{topic_name}"
    first = Member(broker, group, topic_name, protocol, **{"max.msgs": 4})
    try:
        wait_for(lambda: len(first.messages()) == 4, 60, "the first member to read 4 records",
                 [first])
        time.sleep(0.5)
    finally:
        first.kill9()  # every record it printed was committed before it was printed
    read = first.messages()
    assert read == [(0, 0), (0, 1), (0, 2), (0, 3)]
    committed = 4

    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "group.protocol": protocol, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    c = Consumer(conf)
    try:
        assert c.committed([TopicPartition(topic_name, 0)], timeout=30)[0].offset == committed
    finally:
        c.close()

    second = Member(broker, group, topic_name, protocol)
    try:
        wait_for(lambda: second.messages(), 60, "the restarted member to read", [second])
        assert second.messages()[0] == (0, committed)
        wait_for(lambda: second.messages()[-1] == (0, 9), 30, "the rest", [second])
        offsets = [o for _, o in second.messages()]
        assert offsets == list(range(committed, 10))
    finally:
        second.stop()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_static_member_rejoins_without_rebalance(fast_broker, topic_name, protocol):
    create_topic(fast_broker, topic_name, partitions=6)
    group = f"g-{topic_name}"
    members = []
    try:
        a = Member(fast_broker, group, topic_name, protocol, **{"group.instance.id": "a"})
        b = Member(fast_broker, group, topic_name, protocol, **{"group.instance.id": "b"})
        members += [a, b]
        wait_for(lambda: spread([a, b], 6), 60, "two static members to split", members)
        time.sleep(2)  # let any follow-up rebalance settle before taking the baseline
        a_parts, b_parts, a_events = a.assignment, b.assignment, len(a.events)

        # Restart b well within the session timeout. Closing a static member does not leave
        # the group (classic: no LeaveGroup; KIP-848: a leave with epoch -2 that keeps its
        # assignment for the same instance id).
        b.stop()
        b2 = Member(fast_broker, group, topic_name, protocol, **{"group.instance.id": "b"})
        members.append(b2)
        wait_for(lambda: b2.assignment == b_parts, 30, "b to get its partitions back", members)
        time.sleep(3)
        # a saw nothing: no revocation, no new assignment.
        assert a.events[a_events:] == []
        assert a.assignment == a_parts
        assert b2.assignment == b_parts
    finally:
        for m in members:
            m.stop()


def test_group_config_session_timeout_applies_to_kip848_members(broker_factory, topic_name):
    """A group's own consumer.session.timeout.ms (kafka-configs --entity-type groups) replaces
    the broker's for its KIP-848 members: a SIGKILLed member's partitions move after the
    group's 3 s, not the broker's 30 s."""
    from harness.cli import KafkaCli
    b = broker_factory({
        "group.consumer.min.session.timeout.ms": "2000",
        "group.consumer.session.timeout.ms": "30000",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "1000",
    }, name="group-config")
    create_topic(b, topic_name, partitions=4)
    group = f"g-{topic_name}"
    KafkaCli(b).run("configs", "--alter", "--entity-type", "groups", "--entity-name", group,
                    "--add-config", "consumer.session.timeout.ms=3000")
    members = []
    try:
        a = Member(b, group, topic_name, "consumer")
        c = Member(b, group, topic_name, "consumer")
        members += [a, c]
        wait_for(lambda: spread([a, c], 4), 60, "two members to split 4 partitions", members)
        killed_at = time.monotonic()
        c.kill9()
        wait_for(lambda: spread([a], 4), 60, "the killed member's partitions to move", members)
        elapsed = time.monotonic() - killed_at
        assert 2 < elapsed < 20, elapsed
    finally:
        for m in members:
            m.stop()
