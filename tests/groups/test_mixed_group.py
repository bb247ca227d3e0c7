"""A consumer group with members of both protocols (KIP-848 online migration,
`group.consumer.migration.policy=bidirectional`, the default): a classic member (JoinGroup /
SyncGroup / Heartbeat) and a KIP-848 member (ConsumerGroupHeartbeat) in one group split a
topic and both consume; when the KIP-848 member leaves (or is SIGKILLed and times out), the
group goes back to classic and the classic member gets every partition; when the classic
member dies, the KIP-848 member takes everything and the group stays a consumer group."""
import time

import pytest

from harness.cli import KafkaCli
from harness.clients import admin, create_topic
from groups.helpers import FAST_GROUP_BROKER, Member, produce, spread, table, wait_for


def describe_group_type(broker, group):
    """The group's type as ListGroups reports it ("classic" / "consumer"), or None."""
    a = admin(broker)  # kept alive until the result is in: a dropped client cancels it
    listed = a.list_consumer_groups(request_timeout=30).result(30)
    for g in listed.valid:
        if g.group_id == group:
            return g.type.name.lower()
    return None


def test_classic_and_consumer_members_share_a_group(broker_factory, topic_name):
    b = broker_factory(FAST_GROUP_BROKER, name="mixed")
    create_topic(b, topic_name, partitions=6)
    group = f"g-{topic_name}"
    members = []
    try:
        # The classic member starts alone: a classic group.
        classic = Member(b, group, topic_name, "classic")
        members.append(classic)
        wait_for(lambda: classic.assignment == frozenset(range(6)), 60,
                 "the classic member to own every partition", members)
        assert describe_group_type(b, group) == "classic"

        # A KIP-848 member joins: the group is upgraded to a consumer group and the
        # partitions are split between the two.
        modern = Member(b, group, topic_name, "consumer")
        members.append(modern)
        wait_for(lambda: spread([classic, modern], 6), 60,
                 "the two members to split 6 partitions", members)
        assert sorted(len(m.assignment) for m in members) == [3, 3]
        assert describe_group_type(b, group) == "consumer"

        # Both consume their own partitions.
        produce(b, topic_name, [5] * 6)
        wait_for(lambda: len(classic.messages()) + len(modern.messages()) == 30, 60,
                 "both members to read everything", members)
        for m in (classic, modern):
            parts = {p for p, _ in m.messages()}
            assert parts and parts <= m.assignment

        # kafka-consumer-groups lists both members of the consumer group, 3 partitions each,
        # and every partition's offset committed at the log end.
        cli = KafkaCli(b)
        out = cli.run("consumer-groups", "--describe", "--members", "--verbose",
                      "--group", group).stdout
        rows = [r for r in table(out) if r["GROUP"] == group]
        assert sorted(int(r["#PARTITIONS"]) for r in rows) == [3, 3], out
        # UPGRADED: whether the member uses the consumer protocol (KIP-1099 MemberType).
        assert sorted(r["UPGRADED"] for r in rows) == ["false", "true"], out
        assert len({r["CURRENT-EPOCH"] for r in rows}) == 1, out
        out = cli.run("consumer-groups", "--describe", "--group", group).stdout
        rows = [r for r in table(out) if r["GROUP"] == group]
        assert sorted((int(r["PARTITION"]), int(r["CURRENT-OFFSET"]), int(r["LAG"]))
                      for r in rows) == [(p, 5, 0) for p in range(6)], out
        assert len({r["CONSUMER-ID"] for r in rows}) == 2, out

        # The KIP-848 member leaves: only a classic member is left, the group is downgraded
        # and the classic member takes everything back.
        modern.stop()
        wait_for(lambda: classic.assignment == frozenset(range(6)), 60,
                 "the classic member to get every partition back", members)
        wait_for(lambda: describe_group_type(b, group) == "classic", 30,
                 "the group to be classic again", members)
        time.sleep(1)
        assert classic.proc.poll() is None, classic.stderr()
    finally:
        for m in members:
            m.stop()


@pytest.mark.parametrize("killed", ["classic", "consumer"])
def test_mixed_group_member_killed(broker_factory, topic_name, killed):
    """SIGKILL one member of a mixed group: after its session timeout (6 s) the survivor owns
    every partition, and the group's type follows the survivor's protocol (a lone classic
    member downgrades the group to classic)."""
    b = broker_factory(FAST_GROUP_BROKER, name="mixed-kill")
    create_topic(b, topic_name, partitions=6)
    group = f"g-{topic_name}"
    members = {}
    try:
        members["classic"] = Member(b, group, topic_name, "classic")
        wait_for(lambda: members["classic"].assignment == frozenset(range(6)), 60,
                 "the classic member to own every partition", list(members.values()))
        members["consumer"] = Member(b, group, topic_name, "consumer")
        wait_for(lambda: spread(list(members.values()), 6), 60,
                 "the two members to split 6 partitions", list(members.values()))
        survivor = members["consumer" if killed == "classic" else "classic"]
        killed_at = time.monotonic()
        members[killed].kill9()
        wait_for(lambda: survivor.assignment == frozenset(range(6)), 60,
                 "the survivor to own every partition", [survivor])
        assert time.monotonic() - killed_at > 4  # the session timeout, not a leave
        want_type = "classic" if killed == "consumer" else "consumer"
        wait_for(lambda: describe_group_type(b, group) == want_type, 30,
                 f"the group to be {want_type}", [survivor])
    finally:
        for m in members.values():
            m.stop()
