"""A KRaft quorum of three combined nodes in three processes (issue #25): they elect one leader,
replicate the metadata log, agree on topics created through any of them, survive `kill -9` of
the leader, and take the killed node back.

Kafka 4.4 runs the same shape from its jars (KACTOR_TEST_TARGET=kafka)."""
import time

import pytest

from harness.cli import run_tool
from harness.cluster import (Cluster, failover_bound_s, metadata_topics, produce_and_consume,
                             wait_until)

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000


def topics_on(node):
    return metadata_topics(node.port)


def replication_rows(bootstrap):
    out = run_tool("metadata-quorum", "--bootstrap-server", bootstrap, "describe",
                   "--replication", timeout=60).stdout
    lines = [line.split() for line in out.strip().splitlines()]
    assert lines[0][:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"], out
    return {int(r[0]): (int(r[2]), int(r[3]), r[-1]) for r in lines[1:]}, out


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, size=3, overrides={
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
    }).start()
    yield c
    c.stop()


def test_three_voters_elect_replicate_and_survive_the_leaders_death(cluster, topic_name):
    leader, epoch, _ = cluster.wait_for_leader(30)
    assert leader in (1, 2, 3) and epoch >= 1

    # kafka-metadata-quorum through a node that is not the leader: one leader, three voters,
    # each with its log end offset and lag.
    follower = next(n for n in cluster.nodes if n.node_id != leader)
    status = run_tool("metadata-quorum", "--bootstrap-server", follower.bootstrap, "describe",
                      "--status", timeout=60).stdout
    assert f"LeaderId:               {leader}" in status, status
    assert all(f'"id": {i}' in status for i in (1, 2, 3)), status
    rows, out = wait_until(
        lambda: (lambda r: r if all(lag == 0 for _, lag, _ in r[0].values()) else None)(
            replication_rows(follower.bootstrap)),
        30, "every voter caught up")
    assert sorted(rows) == [1, 2, 3], out
    assert [s for _, (_, _, s) in sorted(rows.items())].count("Leader") == 1, out
    assert rows[leader][2] == "Leader", out

    # A topic created through a follower is seen by every node.
    before = f"{topic_name}-before"
    run_tool("topics", "--bootstrap-server", follower.bootstrap, "--create", "--topic", before,
             "--partitions", "3", timeout=60)
    for n in cluster.nodes:
        wait_until(lambda: topics_on(n).get(before) == 3, 15, f"{before} on {n.name}")
    # A producer to a topic nobody created, through a follower: the node asks the active
    # controller in the other process to create it (auto.create.topics.enable).
    auto = f"{topic_name}-auto"
    assert produce_and_consume(follower, follower, auto, 1, 50) == list(range(50))

    # kill -9 the leader: the two others elect a new one within a few election timeouts.
    old = cluster.node(leader)
    old.kill9()
    survivors = [n for n in cluster.nodes if n is not old]
    new_leader, new_epoch, took = cluster.wait_for_leader(
        failover_bound_s(FETCH_TIMEOUT_MS, ELECTION_TIMEOUT_MS), exclude=(leader,),
        nodes=survivors)
    assert new_leader != leader and new_epoch > epoch
    print(f"new leader {new_leader} (epoch {new_epoch}) {took:.1f}s after kill -9 of {leader}")

    # What was committed before is still there, and the new leader takes new writes.
    for n in survivors:
        assert topics_on(n).get(before) == 3, n.name
    after = f"{topic_name}-after"
    run_tool("topics", "--bootstrap-server", survivors[0].bootstrap, "--create", "--topic",
             after, "--partitions", "2", timeout=60)
    for n in survivors:
        wait_until(lambda: topics_on(n).get(after) == 2, 15, f"{after} on {n.name}")

    # The killed node comes back as a follower and catches up with both topics.
    old.start()
    wait_until(lambda: topics_on(old).get(before) == 3 and topics_on(old).get(after) == 2,
               30, f"topics on the restarted {old.name}")
    rows, out = wait_until(
        lambda: (lambda r: r if r[0].get(leader, (0, 1, ""))[1] == 0 else None)(
            replication_rows(survivors[0].bootstrap)),
        30, f"{old.name} caught up")
    assert rows[new_leader][2] == "Leader" and rows[leader][2] == "Follower", out
