"""The share coordinator's own storage (__share_group_state), driven with the state APIs a
share-partition leader sends (InitializeShareGroupState, WriteShareGroupState,
ReadShareGroupState): the state survives a kill -9, and records every key's latest snapshot
supersedes are deleted from the partition (Kafka's prune job), so the topic stays bounded.

The broker writes a snapshot on every write (share.coordinator.snapshot.update.records.per.snapshot
= 0), prunes every 500 ms and snapshots keys nobody writes every second (the internal
share.coordinator.state.topic.prune.interval.ms and ...cold.partition.snapshot.interval.ms).
Runs against both kactor and Kafka 4.4."""
import time

from differential.client import Client
from harness.cluster import coordinator_partition, wait_until

OVERRIDES = {
    "share.coordinator.snapshot.update.records.per.snapshot": "0",
    "share.coordinator.state.topic.prune.interval.ms": "500",
    "share.coordinator.cold.partition.snapshot.interval.ms": "1000",
}
STATE_TOPIC = "__share_group_state"
WRITES = 30


def earliest(c, partition):
    r = c.call("ListOffsets", 9, {"ReplicaId": -1, "IsolationLevel": 0, "Topics": [
        {"Name": STATE_TOPIC, "Partitions": [
            {"PartitionIndex": partition, "CurrentLeaderEpoch": -1, "Timestamp": -2}]}]})
    p = r["Topics"][0]["Partitions"][0]
    assert p["ErrorCode"] == 0, r
    return p["Offset"]


def read_state(c, group, tid):
    r = c.call("ReadShareGroupState", 0, {"GroupId": group, "Topics": [
        {"TopicId": tid, "Partitions": [{"Partition": 0, "LeaderEpoch": 1}]}]})
    return r["Results"][0]["Partitions"][0]


def test_state_is_pruned_and_survives_kill9(broker_factory, topic_name):
    b = broker_factory(OVERRIDES, name="share-state")
    c = Client(b.target, b.port)
    group = f"g-{topic_name}"
    tid = c.create_topic(topic_name)
    key = f"{group}:{tid}:0"
    c.coordinator(key, key_type=2)
    partition = coordinator_partition(key, 50)

    # A key in the same partition written once, first: its snapshot would hold pruning back
    # for good if it were never snapshotted again.
    idle = next(g for g in (f"idle{i}-{topic_name}" for i in range(10_000))
                if coordinator_partition(f"{g}:{tid}:0", 50) == partition)
    idle_init = c.call("InitializeShareGroupState", 0, {"GroupId": idle, "Topics": [
        {"TopicId": tid, "Partitions": [{"Partition": 0, "StateEpoch": 0, "StartOffset": 7}]}]})
    assert idle_init["Results"][0]["Partitions"][0]["ErrorCode"] == 0, idle_init

    init = c.call("InitializeShareGroupState", 0, {"GroupId": group, "Topics": [
        {"TopicId": tid, "Partitions": [{"Partition": 0, "StateEpoch": 0, "StartOffset": 0}]}]})
    assert init["Results"][0]["Partitions"][0]["ErrorCode"] == 0, init
    # A share-partition whose start offset moves up one record per write, the record after it
    # delivered twice and released.
    for i in range(1, WRITES + 1):
        w = c.call("WriteShareGroupState", 1, {"GroupId": group, "Topics": [
            {"TopicId": tid, "Partitions": [{
                "Partition": 0, "StateEpoch": 0, "LeaderEpoch": 1, "StartOffset": i,
                "DeliveryCompleteCount": -1, "StateBatches": [
                    {"FirstOffset": i, "LastOffset": i, "DeliveryState": 0,
                     "DeliveryCount": 2}]}]}]})
        assert w["Results"][0]["Partitions"][0]["ErrorCode"] == 0, w

    # Every write was a snapshot: all but the last (and other keys' latest, none here) are
    # superseded and deleted by the prune job.
    low = wait_until(lambda: (lambda e: e if e >= WRITES else None)(earliest(c, partition)),
                     30, f"{STATE_TOPIC}-{partition} pruned")

    b.kill9()
    b.restart()
    c = Client(b.target, b.port)
    c.coordinator(key, key_type=2)
    deadline = time.monotonic() + 30
    while True:
        got = read_state(c, group, tid)
        if got["ErrorCode"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got["ErrorCode"] == 0, got
    assert (got["StartOffset"], got["StateBatches"]) == (WRITES, [
        {"FirstOffset": WRITES, "LastOffset": WRITES, "DeliveryState": 0,
         "DeliveryCount": 2}]), got
    # A kill -9 may lose the moved log start offset (it is checkpointed periodically), which
    # brings superseded records back: harmless, and pruned again from the reloaded state.
    wait_until(lambda: earliest(c, partition) >= low, 30, "pruned again after the restart")
    # A clean restart keeps the moved log start: the shard loads from there.
    b.restart()
    c = Client(b.target, b.port)
    c.coordinator(key, key_type=2)
    assert earliest(c, partition) >= low
    assert read_state(c, group, tid)["StartOffset"] == WRITES
    # The idle key's state went through its fresh snapshots intact.
    summary = c.call("ReadShareGroupStateSummary", 1, {"GroupId": idle, "Topics": [
        {"TopicId": tid, "Partitions": [{"Partition": 0, "LeaderEpoch": 0}]}]})
    assert summary["Results"][0]["Partitions"][0]["StartOffset"] == 7, summary
