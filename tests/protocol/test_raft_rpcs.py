"""KRaft's own RPCs on the controller listener with bad input (issue #25): a wrong cluster id, a
stale epoch, a request from a voter id that is not this node's, a Fetch past the log end, a
snapshot that does not exist. Each gets Kafka 4.4's answer (one intentional difference: Kafka
4.4.0 fails on its own SNAPSHOT_NOT_FOUND answer, see below), and the quorum (leader, epoch,
high watermark) is unchanged by everything but a well-formed vote at a higher epoch. Raw
requests through the schema codec, against both targets."""
import pytest

from differential.client import Client
from harness.cluster import wait_until

TOPIC = "__cluster_metadata"
# Kafka's fixed topic id of the metadata log (Uuid.METADATA_TOPIC_ID).
METADATA_TOPIC_ID = bytes(15) + b"\x01"
ZERO_UUID = bytes(16)
UNKNOWN_SERVER_ERROR, NONE, INVALID_REQUEST, FENCED_LEADER_EPOCH = -1, 0, 42, 74
INCONSISTENT_CLUSTER_ID, SNAPSHOT_NOT_FOUND, INVALID_VOTER_KEY = 104, 98, 125
UNSUPPORTED_VERSION = 35


@pytest.fixture
def node(broker_factory):
    """A node of its own: the last case moves its quorum to another epoch."""
    b = broker_factory(name="raft")
    for line in open(b.data_dir / "meta.properties"):
        if line.startswith("cluster.id="):
            b.formatted_cluster_id = line.strip().split("=", 1)[1]
    c = Client(b.target, b.controller_port)
    yield b, c
    c.close()


def quorum(c):
    """(leader, epoch, high watermark) from DescribeQuorum."""
    r = c.call("DescribeQuorum", 2, {"Topics": [{"TopicName": TOPIC,
                                                 "Partitions": [{"PartitionIndex": 0}]}]})
    p = r["Topics"][0]["Partitions"][0]
    return p["LeaderId"], p["LeaderEpoch"], p["HighWatermark"]


def vote(c, cluster_id, epoch, last_offset, voter_id=1, candidate_epoch=None, partition=0):
    part = {"PartitionIndex": partition, "ReplicaEpoch": candidate_epoch, "ReplicaId": 42,
            "ReplicaDirectoryId": ZERO_UUID, "VoterDirectoryId": ZERO_UUID,
            "LastOffsetEpoch": epoch, "LastOffset": last_offset, "PreVote": False}
    return c.call("Vote", 2, {"ClusterId": cluster_id, "VoterId": voter_id,
                              "Topics": [{"TopicName": TOPIC, "Partitions": [part]}]})


def only_partition(r):
    return r["Topics"][0]["Partitions"][0]


def test_bad_quorum_requests_get_kafkas_errors_and_change_nothing(node):
    b, c = node
    cid = b.formatted_cluster_id
    leader, epoch, hw = wait_until(lambda: (lambda q: q if q[0] == 1 else None)(quorum(c)), 30,
                                   "node 1 leads")

    # A snapshot the leader does not have.
    r = c.call("FetchSnapshot", 1, {
        "ClusterId": cid, "ReplicaId": 42, "MaxBytes": 1000,
        "Topics": [{"Name": TOPIC, "Partitions": [{
            "Partition": 0, "CurrentLeaderEpoch": epoch,
            "SnapshotId": {"EndOffset": hw + 5, "Epoch": epoch}, "Position": 0}]}]})
    if b.target == "kafka":
        # Kafka 4.4.0 fails to serialize its own SNAPSHOT_NOT_FOUND answer (a
        # NullPointerException on the absent UnalignedRecords, logged by ControllerApis) and
        # answers UNKNOWN_SERVER_ERROR; kactor answers what Kafka means to.
        assert (r["ErrorCode"], r["Topics"]) == (UNKNOWN_SERVER_ERROR, []), r
    else:
        assert r["ErrorCode"] == NONE
        assert only_partition(r)["ErrorCode"] == SNAPSHOT_NOT_FOUND, r

    # A Fetch past the log end in the leader's epoch: told where its log diverges.
    r = c.call("Fetch", 17, {
        "ClusterId": cid, "ReplicaState": {"ReplicaId": 42, "ReplicaEpoch": -1},
        "MaxWaitMs": 0, "MinBytes": 0, "MaxBytes": 1 << 20, "IsolationLevel": 0,
        "SessionId": 0, "SessionEpoch": -1,
        "Topics": [{"TopicId": METADATA_TOPIC_ID, "Partitions": [{
            "Partition": 0, "CurrentLeaderEpoch": epoch, "FetchOffset": hw + 1000,
            "LastFetchedEpoch": epoch, "LogStartOffset": -1, "PartitionMaxBytes": 1 << 20,
            "ReplicaDirectoryId": ZERO_UUID}]}],
        "ForgottenTopicsData": [], "RackId": ""})
    assert r["ErrorCode"] == NONE
    p = r["Responses"][0]["Partitions"][0]
    assert p["ErrorCode"] == NONE, p
    assert p["DivergingEpoch"]["Epoch"] == epoch and p["DivergingEpoch"]["EndOffset"] >= hw, p
    assert not p["Records"], p

    # The wrong cluster: the error alone.
    r = vote(c, "AAAAAAAAAAAAAAAAAAAAAA", epoch, hw + 100, candidate_epoch=epoch + 1)
    assert (r["ErrorCode"], r["Topics"]) == (INCONSISTENT_CLUSTER_ID, []), r
    # A partition the metadata log is not.
    r = vote(c, cid, epoch, hw + 100, candidate_epoch=epoch + 1, partition=3)
    assert (r["ErrorCode"], r["Topics"]) == (INVALID_REQUEST, []), r
    # A candidate whose last epoch is not older than the epoch it asks for.
    r = vote(c, cid, epoch, hw + 100, candidate_epoch=epoch - 1)
    p = only_partition(r)
    assert (r["ErrorCode"], p["ErrorCode"], p["VoteGranted"]) == (NONE, INVALID_REQUEST, False)
    assert (p["LeaderId"], p["LeaderEpoch"]) == (1, epoch), r
    # A vote meant for another voter id (in the current epoch: at a higher one Kafka first
    # moves to that epoch, then refuses).
    r = vote(c, cid, 0, 0, candidate_epoch=epoch, voter_id=7)
    p = only_partition(r)
    assert (r["ErrorCode"], p["ErrorCode"], p["VoteGranted"]) == (NONE, INVALID_VOTER_KEY, False)
    # BeginQuorumEpoch from a leader of an older epoch.
    r = c.call("BeginQuorumEpoch", 1, {
        "ClusterId": cid, "VoterId": 1,
        "Topics": [{"TopicName": TOPIC, "Partitions": [{
            "PartitionIndex": 0, "VoterDirectoryId": ZERO_UUID, "LeaderId": 42,
            "LeaderEpoch": epoch - 1}]}],
        "LeaderEndpoints": [{"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": 1}]})
    assert (r["ErrorCode"], only_partition(r)["ErrorCode"]) == (NONE, FENCED_LEADER_EPOCH), r

    # None of it moved the quorum.
    now = quorum(c)
    assert now[:2] == (1, epoch) and now[2] >= hw, now

    # A well-formed vote at a higher epoch from a replica with a longer log is granted, by
    # Kafka too (KIP-853: a voter does not refuse candidates outside its voter set); the node
    # then leads again in a later epoch once no such leader appears.
    r = vote(c, cid, epoch, hw + 100, candidate_epoch=epoch + 1)
    p = only_partition(r)
    assert (r["ErrorCode"], p["ErrorCode"], p["VoteGranted"]) == (NONE, NONE, True), r
    assert p["LeaderEpoch"] == epoch + 1


def test_a_broker_without_the_finalized_features_is_refused(node):
    """BrokerRegistration whose metadata.version range misses the finalized level: refused with
    UNSUPPORTED_VERSION, and no broker 42 appears."""
    b, c = node
    wait_until(lambda: quorum(c)[0] == 1, 30, "node 1 leads")
    r = c.call("BrokerRegistration", 4, {
        "BrokerId": 42, "ClusterId": b.formatted_cluster_id, "IncarnationId": bytes(range(16)),
        "Listeners": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": 1,
                       "SecurityProtocol": 0}],
        "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1,
                      "MaxSupportedVersion": 5}],
        "Rack": None, "IsMigratingZkBroker": False, "LogDirs": [bytes(range(16, 32))],
        "PreviousBrokerEpoch": -1})
    assert r["ErrorCode"] == UNSUPPORTED_VERSION, r
    d = c.call("DescribeCluster", 1, {"IncludeClusterAuthorizedOperations": False,
                                      "EndpointType": 1})
    assert 42 not in [x["BrokerId"] for x in d["Brokers"]], d
