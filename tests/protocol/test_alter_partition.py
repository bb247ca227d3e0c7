"""AlterPartition on the controller listener (issue #26): a partition leader changing its ISR.

The leader is played by the test: brokers 2 and 3 register with the node's controller over its
controller listener (BrokerRegistration, BrokerHeartbeat), so they hold real broker epochs, and
a topic is created with its one partition on [2, 3, 1], which makes broker 2 its leader. The
test then sends AlterPartition as broker 2 and checks every answer exactly: the request-level
refusals, each per-partition error in Kafka 4.4's order, an ISR shrink and expansion with the
partition epoch moving, a no-op, the ineligible members, and a fenced leader epoch after
leadership moves to broker 1 (the node itself). Played brokers keep the partition's state in the
test's hands: real Kafka brokers would shrink and expand the ISR on their own schedule.

Raw requests through the schema codec, against both targets; the answers are the same (Kafka's
controller also fails over on an unparsable leader recovery state, which kactor does not copy;
the answer to the request is the same)."""
import os
import time

import pytest

from differential.client import Client
from harness.broker import free_port
from harness.cluster import wait_until

NONE, UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_OR_PARTITION = 0, -1, 3
NOT_CONTROLLER, INVALID_REQUEST, FENCED_LEADER_EPOCH, STALE_BROKER_EPOCH = 41, 42, 74, 77
INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_ID, INELIGIBLE_REPLICA = 95, 100, 107
ALTER_PARTITION = 56

# Feature ranges wide enough for whatever Kafka 4.4's format finalizes.
FEATURES = [("metadata.version", 7, 40), ("kraft.version", 0, 1), ("group.version", 0, 1),
            ("transaction.version", 0, 2), ("share.version", 0, 2), ("streams.version", 0, 1),
            ("eligible.leader.replicas.version", 0, 1)]


class PlayedBroker:
    """A broker id registered by the test, heartbeating when told to."""

    def __init__(self, c, cluster_id, broker_id):
        self.c, self.id = c, broker_id
        r = c.call("BrokerRegistration", 4, {
            "BrokerId": broker_id, "ClusterId": cluster_id, "IncarnationId": os.urandom(16),
            # Nothing listens there: the node, a follower of broker 2, fetches in vain.
            "Listeners": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": free_port(),
                           "SecurityProtocol": 0}],
            "Features": [{"Name": n, "MinSupportedVersion": lo, "MaxSupportedVersion": hi}
                         for n, lo, hi in FEATURES],
            "Rack": None, "IsMigratingZkBroker": False, "LogDirs": [os.urandom(16)],
            "PreviousBrokerEpoch": -1})
        assert r["ErrorCode"] == NONE, r
        self.epoch = r["BrokerEpoch"]

    def beat(self, want_fence=False, allowed=(NONE,)):
        r = self.c.call("BrokerHeartbeat", 1, {
            "BrokerId": self.id, "BrokerEpoch": self.epoch, "CurrentMetadataOffset": 1 << 40,
            "WantFence": want_fence, "WantShutDown": False, "OfflineLogDirs": []})
        assert r["ErrorCode"] in allowed, r
        return r


def node_cluster_id(b):
    for line in open(b.data_dir / "meta.properties"):
        if line.startswith("cluster.id="):
            return line.strip().split("=", 1)[1]
    raise AssertionError("no cluster.id in meta.properties")


def proposal(leader_epoch, partition_epoch, isr, version=3, epochs=None, index=0, lrs=0):
    """One partition of an AlterPartition request; v3 members carry `epochs[id]` (default -1)."""
    p = {"PartitionIndex": index, "LeaderEpoch": leader_epoch, "LeaderRecoveryState": lrs,
         "PartitionEpoch": partition_epoch}
    if version >= 3:
        p["NewIsrWithEpochs"] = [{"BrokerId": b, "BrokerEpoch": (epochs or {}).get(b, -1)}
                                 for b in isr]
    else:
        p["NewIsr"] = list(isr)
    return p


def answer(leader, leader_epoch, isr, partition_epoch, index=0):
    return {"PartitionIndex": index, "ErrorCode": NONE, "LeaderId": leader,
            "LeaderEpoch": leader_epoch, "Isr": isr, "LeaderRecoveryState": 0,
            "PartitionEpoch": partition_epoch}


def refused(code, index=0):
    return {"PartitionIndex": index, "ErrorCode": code, "LeaderId": 0, "LeaderEpoch": 0,
            "Isr": [], "LeaderRecoveryState": 0, "PartitionEpoch": 0}


@pytest.fixture
def setup(broker_factory, topic_name):
    b = broker_factory(name="alterp")
    ctl = Client(b.target, b.controller_port)
    adm = Client(b.target, b.port)
    wait_until(lambda: any(x["BrokerId"] == 1 for x in adm.call("DescribeCluster", 1, {
        "IncludeClusterAuthorizedOperations": False, "EndpointType": 1}).get("Brokers", [])),
        60, "the node registered")
    cid = node_cluster_id(b)
    two, three = PlayedBroker(ctl, cid, 2), PlayedBroker(ctl, cid, 3)
    for pb in (two, three):
        wait_until(lambda pb=pb: not pb.beat()["IsFenced"], 30, f"broker {pb.id} unfenced")
    r = adm.call("CreateTopics", 7, {
        "Topics": [{"Name": topic_name, "NumPartitions": -1, "ReplicationFactor": -1,
                    "Assignments": [{"PartitionIndex": 0, "BrokerIds": [2, 3, 1]}],
                    "Configs": []}],
        "timeoutMs": 30000, "validateOnly": False})
    t = r["Topics"][0]
    assert t["ErrorCode"] == NONE, r
    yield b, ctl, adm, two, three, t["TopicId"]
    ctl.close()
    adm.close()


def alter(ctl, sender, epoch, topic_id, partitions, version=3):
    return ctl.call("AlterPartition", version, {
        "BrokerId": sender, "BrokerEpoch": epoch,
        "Topics": [{"TopicId": topic_id, "Partitions": partitions}]})


def rows(r):
    assert r["ErrorCode"] == NONE, r
    return r["Topics"][0]["Partitions"]


def described_isr(adm, topic):
    r = adm.call("DescribeTopicPartitions", 0, {
        "Topics": [{"Name": topic}], "ResponsePartitionLimit": 10, "Cursor": None})
    p = r["Topics"][0]["Partitions"][0]
    return p["LeaderId"], p["LeaderEpoch"], p["IsrNodes"]


def test_api_versions_offer_alter_partition_on_the_controller_listener_only(setup):
    _, ctl, adm, *_ = setup
    ranges = {}
    for name, c in (("controller", ctl), ("broker", adm)):
        r = c.call("ApiVersions", 3, {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})
        ranges[name] = [(k["MinVersion"], k["MaxVersion"]) for k in r["ApiKeys"]
                        if k["ApiKey"] == ALTER_PARTITION]
    assert ranges == {"controller": [(2, 3)], "broker": []}, ranges


def test_alter_partition_answers_as_kafka(setup, topic_name):
    _, ctl, adm, two, three, tid = setup
    e2, e3 = two.epoch, three.epoch
    for pb in (two, three):
        pb.beat()
    wait_until(lambda: described_isr(adm, topic_name) == (2, 0, [2, 3, 1]), 30,
               "partition led by broker 2 with all three in sync")

    # Request level: nothing to do is answered at once; a sender at another epoch, or not
    # registered at all, is refused as a whole.
    r = ctl.call("AlterPartition", 3, {"BrokerId": 42, "BrokerEpoch": 7, "Topics": []})
    assert (r["ErrorCode"], r["Topics"]) == (NONE, []), r
    for sender, epoch in ((2, e2 + 1), (42, e2)):
        r = alter(ctl, sender, epoch, tid, [proposal(0, 0, [2, 3])])
        assert (r["ErrorCode"], r["Topics"]) == (STALE_BROKER_EPOCH, []), r

    # Per partition, in Kafka's order.
    unknown = bytes(range(1, 17))
    r = alter(ctl, 2, e2, unknown, [proposal(0, 0, [2, 3]), proposal(0, 0, [2], index=4)])
    assert r["Topics"] == [{"TopicId": unknown, "Partitions": [
        refused(UNKNOWN_TOPIC_ID), refused(UNKNOWN_TOPIC_ID, index=4)]}], r
    cases = [
        ("no such partition", 2, proposal(0, 0, [2, 3], index=5), UNKNOWN_TOPIC_OR_PARTITION),
        ("leader epoch ahead", 2, proposal(1, 0, [2, 3]), NOT_CONTROLLER),
        ("partition epoch ahead", 2, proposal(0, 1, [2, 3]), NOT_CONTROLLER),
        ("not the leader", 3, proposal(0, 0, [2, 3]), INVALID_REQUEST),
        ("leader left out", 2, proposal(0, 0, [3, 1]), INVALID_REQUEST),
        ("empty ISR", 2, proposal(0, 0, []), INVALID_REQUEST),
        ("not a replica", 2, proposal(0, 0, [2, 3, 7]), INVALID_REQUEST),
        ("duplicate member", 2, proposal(0, 0, [2, 2, 3]), INVALID_REQUEST),
        ("recovering with two in sync", 2, proposal(0, 0, [2, 3], lrs=1), INVALID_REQUEST),
        ("recovered back to recovering", 2, proposal(0, 0, [2], lrs=1), INVALID_REQUEST),
        ("member at another broker epoch", 2, proposal(0, 0, [2, 3], epochs={3: e3 + 5}),
         INELIGIBLE_REPLICA),
    ]
    for what, sender, p, code in cases:
        r = alter(ctl, sender, {2: e2, 3: e3}[sender], tid, [p])
        got = rows(r)
        assert got == [refused(code, index=p["PartitionIndex"])], (what, r)

    # Shrink (v2, bare ids): the new state, the partition epoch moved, the leader's did not.
    r = alter(ctl, 2, e2, tid, [proposal(0, 0, [2, 3], version=2)], version=2)
    assert rows(r) == [answer(2, 0, [2, 3], 1)], r
    # The old partition epoch is stale now; the same ISR again changes nothing.
    assert rows(alter(ctl, 2, e2, tid, [proposal(0, 0, [2, 3])])) == [
        refused(INVALID_UPDATE_VERSION)]
    assert rows(alter(ctl, 2, e2, tid, [proposal(0, 1, [2, 3])])) == [answer(2, 0, [2, 3], 1)]
    # Expand (v3, with the members' epochs; node 1's as the controller knows it: -1).
    r = alter(ctl, 2, e2, tid, [proposal(0, 1, [2, 3, 1], epochs={2: e2, 3: e3})])
    assert rows(r) == [answer(2, 0, [2, 3, 1], 2)], r
    wait_until(lambda: described_isr(adm, topic_name) == (2, 0, [2, 3, 1]), 30,
               "brokers see the expanded ISR")

    # Broker 3 fenced: the controller takes it out of the ISR; proposing it back is refused.
    for pb in (two, three):
        pb.beat()
    assert three.beat(want_fence=True)["IsFenced"]
    wait_until(lambda: described_isr(adm, topic_name) == (2, 0, [2, 1]), 30,
               "broker 3 out of the ISR")
    assert rows(alter(ctl, 2, e2, tid, [proposal(0, 3, [2, 3, 1])])) == [
        refused(INELIGIBLE_REPLICA)]

    # Broker 2 fenced too: leadership moves to the node; broker 2's old leader epoch is fenced
    # (checked before who leads).
    assert two.beat(want_fence=True)["IsFenced"]
    wait_until(lambda: described_isr(adm, topic_name) == (1, 1, [1]), 30, "node 1 leads")
    assert rows(alter(ctl, 2, e2, tid, [proposal(0, 4, [2, 1])])) == [
        refused(FENCED_LEADER_EPOCH)]
    assert rows(alter(ctl, 2, e2, tid, [proposal(1, 4, [1])])) == [refused(INVALID_REQUEST)]


def test_an_unknown_leader_recovery_state_fails_the_request(setup, topic_name):
    """Kafka's controller cannot parse it and throws: the whole request is answered
    UNKNOWN_SERVER_ERROR and nothing is written (a valid change before it in the same request
    included). Kafka's controller then also fails over; kactor's does not."""
    _, ctl, adm, two, three, tid = setup
    for pb in (two, three):
        pb.beat()
    wait_until(lambda: described_isr(adm, topic_name) == (2, 0, [2, 3, 1]), 30,
               "partition led by broker 2")
    r = alter(ctl, 2, two.epoch, tid, [proposal(0, 0, [2, 3]), proposal(0, 0, [2], lrs=2)])
    assert (r["ErrorCode"], r["Topics"]) == (UNKNOWN_SERVER_ERROR, []), r
    # Nothing was written: the first proposal still applies at partition epoch 0. (A failed-over
    # Kafka controller answers NOT_CONTROLLER until it leads again.)
    deadline = time.monotonic() + 30
    while True:
        for pb in (two, three):
            pb.beat(allowed=(NONE, NOT_CONTROLLER))
        r = alter(ctl, 2, two.epoch, tid, [proposal(0, 0, [2, 3])])
        if r["ErrorCode"] != NOT_CONTROLLER or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert rows(r) == [answer(2, 0, [2, 3], 1)], r
