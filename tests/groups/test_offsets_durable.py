"""Committed offsets are records in __consumer_offsets: they survive a broker kill -9 and are
replayed on restart, for a classic (simple-commit) group and a KIP-848 group."""
import pytest

from harness.clients import create_topic
from groups.helpers import FAST_GROUP_BROKER, Member, commit, committed, produce, wait_for


def test_committed_offsets_survive_kill9(broker_factory, topic_name):
    b = broker_factory(FAST_GROUP_BROKER, name="durable")
    create_topic(b, topic_name, partitions=2)
    produce(b, topic_name, [5, 5])
    classic, kip848 = f"classic-{topic_name}", f"kip848-{topic_name}"
    commit(b, classic, topic_name, [3, 4])
    m = Member(b, kip848, topic_name, "consumer")
    try:
        wait_for(lambda: len(m.messages()) == 10, 60, "the KIP-848 member to read all", [m])
    finally:
        m.stop()
    assert committed(b, classic, topic_name, 2) == [3, 4]
    assert committed(b, kip848, topic_name, 2, "consumer") == [5, 5]

    b.kill9()
    b.restart()
    assert committed(b, classic, topic_name, 2) == [3, 4]
    assert committed(b, kip848, topic_name, 2, "consumer") == [5, 5]

    # And the group resumes there: nothing is re-read after the restart.
    produce(b, topic_name, [1, 0])
    m = Member(b, kip848, topic_name, "consumer")
    try:
        wait_for(lambda: m.messages(), 60, "the member to read the new record", [m])
        assert m.messages()[0] == (0, 5)
    finally:
        m.stop()
