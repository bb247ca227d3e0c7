"""Metadata snapshots (issue #25, KIP-630): every node writes its metadata image as a
`.checkpoint` snapshot once `metadata.log.max.record.bytes.between.snapshots` of records were
committed since the last one, deletes the log below a snapshot when `metadata.max.retention.bytes`
is exceeded, loads the latest snapshot at start instead of replaying the log from offset 0, and a
voter that fell behind the leader's log start catches up by FetchSnapshot.

The snapshots are read with Kafka's own `kafka-dump-log --cluster-metadata-decoder`. Kafka 4.4
runs the same tests from its jars (KACTOR_TEST_TARGET=kafka); its metadata segments go below
8 MiB only through its internal `internal.metadata.log.segment.bytes`, which kactor honours too."""
import re

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from harness.broker import TARGET
from harness.cli import run_tool
from harness.cluster import (Cluster, admin, create_topic, registered_brokers, topic_config,
                             topic_names, wait_until)

OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "2000",
    "metadata.max.retention.bytes": "3000",
    "metadata.log.segment.bytes": str(8 * 1024 * 1024),
    "internal.metadata.log.segment.bytes": "4096",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
}
SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def metadata_dir(node):
    return node.data_dir / "__cluster_metadata-0"


def snapshots(node):
    """(end offset, epoch) of each complete snapshot file, ascending."""
    found = []
    for p in metadata_dir(node).iterdir():
        m = SNAPSHOT_NAME.match(p.name)
        if m and int(m.group(1)) > 0:  # not the bootstrap checkpoint `kafka-storage` writes
            found.append((int(m.group(1)), int(m.group(2))))
    return sorted(found)


def first_segment(node):
    bases = [int(m.group(1)) for p in metadata_dir(node).iterdir()
             if (m := SEGMENT_NAME.match(p.name))]
    return min(bases) if bases else None


def snapshot_records(node, offset_epoch):
    """The snapshot as Kafka's dump tool decodes it (JSON payload lines)."""
    path = metadata_dir(node) / f"{offset_epoch[0]:020d}-{offset_epoch[1]:010d}.checkpoint"
    out = run_tool("dump-log", "--cluster-metadata-decoder", "--files", str(path),
                   timeout=60).stdout
    assert "SnapshotHeader" in out and "SnapshotFooter" in out, out
    return out


def set_retention(node, topic, value):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)])
    a = admin(node)
    a.incremental_alter_configs([res])[res].result(30)


def quorum_replication(node):
    """Node id -> log end offset from `kafka-metadata-quorum describe --replication`."""
    out = run_tool("metadata-quorum", "--bootstrap-server", node.bootstrap, "describe",
                   "--replication", timeout=60).stdout
    rows = {}
    for line in out.strip().splitlines()[1:]:
        cols = line.split()
        rows[int(cols[0])] = int(cols[2])
    return rows


@pytest.fixture
def single(tmp_path):
    c = Cluster(tmp_path, size=1, overrides=OVERRIDES).start(timeout=120)
    yield c
    c.stop()


def test_snapshots_are_written_cleaned_behind_and_loaded_at_restart(single, topic_name):
    node = single.nodes[0]
    names = [f"{topic_name}-{i}" for i in range(8)]
    for name in names:
        create_topic(node, name, 3)
    set_retention(node, names[0], "4242000")

    # A snapshot past the last change, holding it, and the log's first segment deleted.
    def newest_with_everything():
        snaps = snapshots(node)
        if not snaps:
            return None
        dump = snapshot_records(node, snaps[-1])
        ok = all(f'"name":"{n}"' in dump for n in names) and '"value":"4242000"' in dump
        return snaps[-1] if ok else None

    snap = wait_until(newest_with_everything, 90, "a snapshot with every topic and the config")
    dump = snapshot_records(node, snap)
    assert dump.index('"metadata.version"') < dump.index("TOPIC_RECORD"), dump
    assert dump.count("PARTITION_RECORD") >= 3 * len(names), dump
    wait_until(lambda: (first_segment(node) or 0) > 0, 120,
               "the metadata log's first segment deleted below a snapshot")

    # kill -9 and restart: everything is back, from the snapshot and the log after it.
    node.kill9()
    node.start()
    wait_until(lambda: set(names) <= topic_names(node), 60, "every topic after the restart")
    assert topic_config(node, names[0], "retention.ms") == "4242000"
    create_topic(node, f"{topic_name}-after", 1)
    wait_until(lambda: f"{topic_name}-after" in topic_names(node), 30, "a topic created after")


@pytest.fixture
def trio(tmp_path):
    c = Cluster(tmp_path, size=3, overrides=OVERRIDES).start(timeout=180)
    yield c
    c.stop()


def test_a_voter_behind_the_log_start_catches_up_by_snapshot(trio, topic_name):
    leader_id, _, _ = trio.wait_for_leader(60)
    leader = trio.node(leader_id)
    victim = next(n for n in trio.nodes if n.node_id != leader_id)
    create_topic(leader, f"{topic_name}-before", 1)
    wait_until(lambda: f"{topic_name}-before" in topic_names(victim), 30, "the victim follows")
    victim.kill9()
    victim_end = quorum_replication(leader)[victim.node_id]
    # New partitions go to live brokers only once the victim is fenced.
    wait_until(lambda: victim.node_id not in registered_brokers(leader), 60, "the victim fenced")

    # While it is down the others snapshot and delete the log it would need.
    names = [f"{topic_name}-{i}" for i in range(12)]
    for name in names:
        create_topic(leader, name, 2)
    wait_until(lambda: (first_segment(leader) or 0) > victim_end, 150,
               f"the leader's metadata log start past the victim's end ({victim_end})")

    victim.start(timeout=120)
    wait_until(lambda: set(names) <= topic_names(victim), 90,
               "the restarted voter serves every topic created while it was down")
    # It holds the leader's state from a snapshot past where it stopped, and follows on.
    assert any(s[0] > victim_end for s in snapshots(victim)), snapshots(victim)
    create_topic(leader, f"{topic_name}-after", 1)
    wait_until(lambda: f"{topic_name}-after" in topic_names(victim), 30, "it follows after")
    wait_until(lambda: (lambda r: abs(r[victim.node_id] - r[leader_id]) <= 5)(
        quorum_replication(leader)), 30, "the victim's log end next to the leader's")


# Formatted as a cluster must be before a kactor node joins it (see test_interop.py).
KAFKA_FEATURES = ("--feature", "share.version=0", "--feature", "streams.version=0",
                  "--feature", "eligible.leader.replicas.version=0")


@pytest.mark.skipif(TARGET != "kactor", reason="mixes both targets itself")
def test_snapshots_cross_between_kactor_and_kafka_voters(tmp_path, topic_name):
    """Voters 1 and 3 kactor, 2 Kafka 4.4, broker 4 kactor. A voter of the implementation the
    leader is not is killed, the leader's log start passes its end, and it catches up from the
    other implementation's snapshot by FetchSnapshot."""
    cluster = Cluster(tmp_path, controllers=3, brokers=1, target="kactor", targets={2: "kafka"},
                      overrides=OVERRIDES, kafka_format_args=KAFKA_FEATURES).start(timeout=180)
    try:
        leader_id, _, _ = cluster.wait_for_leader(60)
        leader = cluster.node(leader_id)
        broker = cluster.brokers[0]
        victim = next(n for n in cluster.controllers if n.target != leader.target)
        create_topic(broker, f"{topic_name}-before", 1)
        wait_until(lambda: (lambda r: r.get(victim.node_id, -1) >= r.get(leader_id, 0) - 5)(
            quorum_replication(broker)), 30, "the victim follows")
        victim.kill9()
        victim_end = quorum_replication(broker)[victim.node_id]
        names = [f"{topic_name}-{i}" for i in range(12)]
        for name in names:
            create_topic(broker, name, 1)
        wait_until(lambda: (first_segment(leader) or 0) > victim_end, 150,
                   f"the {leader.target} leader's log start past the victim's end ({victim_end})")
        victim.start(timeout=120)
        wait_until(lambda: any(s[0] > victim_end for s in snapshots(victim)), 90,
                   f"the {victim.target} voter holds a snapshot past where it stopped")
        wait_until(lambda: (lambda r: abs(r[victim.node_id] - r[leader_id]) <= 5)(
            quorum_replication(broker)), 60, f"the {victim.target} voter caught up")
        # Its state holds what was created while it was down: its own next snapshot (idle
        # no-op records fill the 2000 bytes between snapshots in seconds), read by Kafka's
        # decoder, names every topic.
        wait_until(lambda: all(f'"name":"{n}"' in snapshot_records(victim, snapshots(victim)[-1])
                               for n in names), 90,
                   f"a snapshot of the {victim.target} voter with every topic")
        print(f"{victim.name} ({victim.target}) caught up from {leader.name} ({leader.target})")
    finally:
        cluster.stop()
