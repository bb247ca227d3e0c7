"""Share-partition state kept by a share coordinator on another broker (issue #29): the leader of
a topic partition sends ReadShareGroupState / WriteShareGroupState to the broker leading the
share key's `__share_group_state` partition, so a `kill -9` of the partition leader loses
no acknowledgement: afterwards only the record nobody acknowledged is delivered again.

One controller and two brokers; raw requests (ShareGroupHeartbeat, ShareFetch,
ShareAcknowledge, ReadShareGroupStateSummary) so each goes to the broker meant. Runs against
kactor and Kafka 4.4 alike."""
import time

import pytest

from differential.client import Client
from harness.cluster import (Cluster, create_topic, partition_leaders, registered_brokers,
                             wait_until)

MEMBER = "AAAAAAAAAAAAAAAAAAAABA"
LATER = "AAAAAAAAAAAAAAAAAAAABQ"
RECORDS = 5
RESET_PAUSE_S = 3


def find(c, key, key_type):
    """The node id coordinating `key` (FindCoordinator v6), waiting while there is none."""
    def found():
        r = c.call("FindCoordinator", 6, {"KeyType": key_type, "CoordinatorKeys": [key]})
        co = r["Coordinators"][0]
        return co["ErrorCode"] == 0, co
    return c.wait_for(f"coordinator of {key}", found, timeout=60)["NodeId"]


def fetch(c, group, member, epoch, tid):
    return c.call("ShareFetch", 1, {
        "GroupId": group, "MemberId": member, "ShareSessionEpoch": epoch, "MaxWaitMs": 500,
        "MinBytes": 1, "MaxBytes": 1 << 20, "MaxRecords": 100, "BatchSize": 100,
        "Topics": [{"TopicId": tid, "Partitions": [
            {"PartitionIndex": 0, "AcknowledgementBatches": []}]}],
        "ForgottenTopicsData": []})


def acquire_all(c, group, member, tid, want, timeout=60):
    """Fetches (a new session) until `want` offsets are acquired; returns (offsets with their
    delivery counts, the next session epoch)."""
    got, epoch = {}, 0
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        r = fetch(c, group, member, epoch, tid)
        assert r["ErrorCode"] == 0, r
        epoch += 1
        for t in r["Responses"]:
            for p in t["Partitions"]:
                for a in p["AcquiredRecords"]:
                    for o in range(a["FirstOffset"], a["LastOffset"] + 1):
                        got[o] = a["DeliveryCount"]
    return got, epoch


def join(c, group, member, topic):
    def joined():
        r = c.call("ShareGroupHeartbeat", 1, {
            "GroupId": group, "MemberId": member, "MemberEpoch": 0, "RackId": None,
            "SubscribedTopicNames": [topic]})
        return r["ErrorCode"] == 0, r
    c.wait_for(f"{member} joins {group}", joined, timeout=60)


def two_brokers_and_a_topic(cluster, topic_name):
    """Brokers registered and a one-partition topic led: (brokers by id, the topic's leader,
    the other broker, a client of the leader, the topic id)."""
    brokers = {b.node_id: b for b in cluster.brokers}
    wait_until(lambda: registered_brokers(cluster.brokers[0]) == sorted(brokers), 60,
               "brokers registered")
    create_topic(cluster.brokers[0], topic_name)
    leader_id = wait_until(
        lambda: (lambda m: m[0] if m and m.get(0, -1) >= 0 else None)(
            partition_leaders(cluster.brokers[0], topic_name)), 30, "a leader")
    leader = brokers[leader_id]
    other = next(b for i, b in brokers.items() if i != leader_id)
    cl = Client(leader.target, leader.port)
    return brokers, leader, other, cl, cl.wait_topic(topic_name)


def test_acknowledgements_survive_the_leaders_kill9(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=2).start(timeout=180)
    try:
        brokers, leader, other, cl, tid = two_brokers_and_a_topic(cluster, topic_name)

        # A group whose share key is coordinated by the other broker.
        for i in range(200):
            group = f"g{i}-{topic_name}"
            if find(cl, f"{group}:{tid}:0", 2) == other.node_id:
                break
        else:
            raise AssertionError("no group id whose share state lives on the other broker")
        r = cl.call("IncrementalAlterConfigs", 1, {"Resources": [
            {"ResourceType": 32, "ResourceName": group, "Configs": [
                {"Name": "share.auto.offset.reset", "ConfigOperation": 0,
                 "Value": "earliest"}]}], "ValidateOnly": False})
        assert r["Responses"][0]["ErrorCode"] == 0, r
        for n in range(RECORDS):
            cl.produce(topic_name, [(b"k", f"v{n}".encode())])

        gc = brokers[find(cl, group, 0)]
        join(Client(gc.target, gc.port), group, MEMBER, topic_name)
        got, epoch = acquire_all(cl, group, MEMBER, tid, RECORDS)
        assert got == {o: 1 for o in range(RECORDS)}, got
        # Accept 0-2, reject 3; 4 stays acquired.
        r = cl.call("ShareAcknowledge", 1, {
            "GroupId": group, "MemberId": MEMBER, "ShareSessionEpoch": epoch, "Topics": [
                {"TopicId": tid, "Partitions": [{"PartitionIndex": 0, "AcknowledgementBatches": [
                    {"FirstOffset": 0, "LastOffset": 2, "AcknowledgeTypes": [1]},
                    {"FirstOffset": 3, "LastOffset": 3, "AcknowledgeTypes": [3]}]}]}]})
        codes = [p["ErrorCode"] for t in r["Responses"] for p in t["Partitions"]]
        assert r["ErrorCode"] == 0 and codes == [0], r

        # The other broker's share coordinator has it: 0-3 are done with. (kactor writes the
        # start offset moved past them; Kafka writes start 0 with 4 offsets completed.)
        co = Client(other.target, other.port)
        summary = co.call("ReadShareGroupStateSummary", 1, {"GroupId": group, "Topics": [
            {"TopicId": tid, "Partitions": [{"Partition": 0, "LeaderEpoch": 0}]}]})
        part = summary["Results"][0]["Partitions"][0]
        assert part["ErrorCode"] == 0, summary
        assert part["StartOffset"] + part["DeliveryCompleteCount"] == 4, summary

        leader.kill9()
        leader.start()
        cl = Client(leader.target, leader.port)
        gc = brokers[find(cl, group, 0)]
        join(Client(gc.target, gc.port), group, LATER, topic_name)
        got, _ = acquire_all(cl, group, LATER, tid, 1)
        # Only offset 4 comes back; what was accepted or rejected does not.
        assert sorted(got) == [4], got
    finally:
        cluster.stop()


@pytest.mark.kafka_defect(
    "Kafka 4.4.0's partition leader keeps its cached share-partition after a reset made by the "
    "group coordinator on another broker: the next member gets nothing (start offset still past "
    "the acknowledged records) for at least a minute")
def test_reset_at_a_coordinator_on_another_broker(tmp_path, topic_name):
    """kafka-share-groups --reset-offsets through the group coordinator on one broker while the
    partition is led by the other: the leader, whose copy of the share-partition is now stale,
    must not deliver from it. The next member reads from the reset offset, every record a first
    delivery."""
    cluster = Cluster(tmp_path, controllers=1, brokers=2).start(timeout=180)
    try:
        brokers, leader, other, cl, tid = two_brokers_and_a_topic(cluster, topic_name)
        for i in range(200):
            group = f"g{i}-{topic_name}"
            if find(cl, group, 0) == other.node_id:
                break
        else:
            raise AssertionError("no group id coordinated by the other broker")
        co = Client(other.target, other.port)
        r = co.call("IncrementalAlterConfigs", 1, {"Resources": [
            {"ResourceType": 32, "ResourceName": group, "Configs": [
                {"Name": "share.auto.offset.reset", "ConfigOperation": 0,
                 "Value": "earliest"}]}], "ValidateOnly": False})
        assert r["Responses"][0]["ErrorCode"] == 0, r
        for n in range(RECORDS):
            cl.produce(topic_name, [(b"k", f"v{n}".encode())])

        join(co, group, MEMBER, topic_name)
        got, epoch = acquire_all(cl, group, MEMBER, tid, RECORDS)
        assert got == {o: 1 for o in range(RECORDS)}, got
        # Accept everything and close the share session with the same request.
        r = cl.call("ShareAcknowledge", 1, {
            "GroupId": group, "MemberId": MEMBER, "ShareSessionEpoch": -1, "Topics": [
                {"TopicId": tid, "Partitions": [{"PartitionIndex": 0, "AcknowledgementBatches": [
                    {"FirstOffset": 0, "LastOffset": RECORDS - 1,
                     "AcknowledgeTypes": [1]}]}]}]})
        codes = [p["ErrorCode"] for t in r["Responses"] for p in t["Partitions"]]
        assert r["ErrorCode"] == 0 and codes == [0], r
        r = co.call("ShareGroupHeartbeat", 1, {
            "GroupId": group, "MemberId": MEMBER, "MemberEpoch": -1, "RackId": None,
            "SubscribedTopicNames": None})
        assert r["ErrorCode"] == 0, r

        # The group is empty: reset it to offset 1 at its coordinator (a few seconds later, as
        # someone running kafka-share-groups would; kactor drops its copy at once).
        time.sleep(RESET_PAUSE_S)
        def altered():
            r = co.call("AlterShareGroupOffsets", 0, {"GroupId": group, "Topics": [
                {"TopicName": topic_name, "Partitions": [
                    {"PartitionIndex": 0, "StartOffset": 1}]}]})
            return r["ErrorCode"] == 0, r
        r = co.wait_for("the reset", altered, timeout=30)
        assert [p["ErrorCode"] for t in r["Responses"] for p in t["Partitions"]] == [0], r

        join(co, group, LATER, topic_name)
        got, _ = acquire_all(cl, group, LATER, tid, RECORDS - 1)
        assert got == {o: 1 for o in range(1, RECORDS)}, got
    finally:
        cluster.stop()
