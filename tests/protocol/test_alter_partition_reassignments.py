"""AlterPartitionReassignments and ListPartitionReassignments answered field by field
(issue #26 item 4), against both targets.

One node (broker 1 + controller) and two brokers played by the test over the controller
listener (registered and heartbeating, as in test_alter_partition.py), so that a reassignment
can name brokers that exist without a second process: a played broker never fetches, so a
reassignment adding one stays under way until the test cancels it. Every answer is asserted
literally, the same on Kafka 4.4 and kactor: the refusals with their codes and messages (unknown
topic or partition, an empty, duplicated or unregistered target, cancelling none, a replication
factor change refused by v1's flag), an empty request, a reassignment under way as
ListPartitionReassignments shows it, its cancellation, and a reordering that completes at once;
and the broker throttle rate `kafka-reassign-partitions --throttle` sets, checked and described
as Kafka does."""
import pytest

from differential.client import Client
from harness.cluster import wait_until
from protocol.test_alter_partition import PlayedBroker, node_cluster_id

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 0, 3, 42
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT = 38, 39
NO_REASSIGNMENT_IN_PROGRESS = 85


@pytest.fixture
def setup(broker_factory, topic_name):
    b = broker_factory(name="reassign")
    ctl = Client(b.target, b.controller_port)
    adm = Client(b.target, b.port)
    wait_until(lambda: any(x["BrokerId"] == 1 for x in adm.call("DescribeCluster", 1, {
        "IncludeClusterAuthorizedOperations": False, "EndpointType": 1}).get("Brokers", [])),
        60, "the node registered")
    cid = node_cluster_id(b)
    played = [PlayedBroker(ctl, cid, 2), PlayedBroker(ctl, cid, 3)]
    for pb in played:
        wait_until(lambda pb=pb: not pb.beat()["IsFenced"], 30, f"broker {pb.id} unfenced")
    # Partition 0 on [1, 2], partition 1 on [1, 3]: the node leads both, all in sync.
    r = adm.call("CreateTopics", 7, {
        "Topics": [{"Name": topic_name, "NumPartitions": -1, "ReplicationFactor": -1,
                    "Assignments": [{"PartitionIndex": 0, "BrokerIds": [1, 2]},
                                    {"PartitionIndex": 1, "BrokerIds": [1, 3]}],
                    "Configs": []}],
        "timeoutMs": 30000, "validateOnly": False})
    assert r["Topics"][0]["ErrorCode"] == NONE, r
    yield adm, played
    ctl.close()
    adm.close()


def alter(adm, topics, version=1, allow=True):
    body = {"TimeoutMs": 30000, "Topics": [
        {"Name": name, "Partitions": [{"PartitionIndex": i, "Replicas": replicas}
                                      for i, replicas in parts]}
        for name, parts in topics]}
    if version >= 1:
        body["AllowReplicationFactorChange"] = allow
    return adm.call("AlterPartitionReassignments", version, body)


def answered(topics, allow=True):
    """The answer Kafka gives when the controller took the request: per partition (index,
    code, message)."""
    return {"ThrottleTimeMs": 0, "AllowReplicationFactorChange": allow, "ErrorCode": NONE,
            "ErrorMessage": None, "Responses": [
                {"Name": name, "Partitions": [
                    {"PartitionIndex": i, "ErrorCode": code, "ErrorMessage": message}
                    for i, code, message in parts]}
                for name, parts in topics]}


def listed(adm, topics=None):
    body = {"TimeoutMs": 30000, "Topics": None if topics is None else [
        {"Name": name, "PartitionIndexes": indexes} for name, indexes in topics]}
    r = adm.call("ListPartitionReassignments", 0, body)
    assert (r["ErrorCode"], r["ErrorMessage"]) == (NONE, None), r
    return r["Topics"]


def replicas_of(adm, topic):
    r = adm.call("DescribeTopicPartitions", 0, {
        "Topics": [{"Name": topic}], "ResponsePartitionLimit": 10, "Cursor": None})
    return {p["PartitionIndex"]: (p["LeaderId"], p["ReplicaNodes"], p["IsrNodes"])
            for p in r["Topics"][0]["Partitions"]}


def test_refusals_answer_as_kafka(setup, topic_name):
    adm, played = setup
    r = alter(adm, [
        ("no-such-topic", [(0, [1])]),
        (topic_name, [(7, [1]), (0, []), (0, [9, 2, 2]), (0, [9, 1]), (0, None)]),
    ])
    assert r == answered([
        ("no-such-topic", [(0, UNKNOWN_TOPIC_OR_PARTITION,
                            "Unable to find a topic named no-such-topic.")]),
        (topic_name, [
            (7, UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic_name}:7."),
            (0, INVALID_REPLICA_ASSIGNMENT,
             "The manual partition assignment includes an empty replica list."),
            # Ascending order: the repeated 2 is found before the unknown 9.
            (0, INVALID_REPLICA_ASSIGNMENT,
             "The manual partition assignment includes the broker 2 more than once."),
            (0, INVALID_REPLICA_ASSIGNMENT,
             "The manual partition assignment includes broker 9, but no such broker is "
             "registered."),
            (0, NO_REASSIGNMENT_IN_PROGRESS, None),
        ]),
    ]), r
    # v1 with the flag off refuses a change of replication factor; v0 has no flag.
    r = alter(adm, [(topic_name, [(0, [1, 2, 3]), (1, [3])])], allow=False)
    assert r == answered([(topic_name, [
        (0, INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
        (1, INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1"),
    ])], allow=False), r
    # Nothing asked: answered at once, with the response's defaults.
    r = alter(adm, [])
    assert r == {"ThrottleTimeMs": 0, "AllowReplicationFactorChange": True, "ErrorCode": NONE,
                 "ErrorMessage": "", "Responses": []}, r
    assert listed(adm) == []


def test_reassignment_under_way_is_listed_replaced_and_cancelled(setup, topic_name):
    adm, played = setup

    def beat():  # keeps 2 and 3 registered and unfenced
        for pb in played:
            pb.beat()
    beat()
    # [1, 2] -> [3, 1]: broker 3 (played, never fetching) is added and stays out of the ISR,
    # so the reassignment stays under way; 2, being removed, stays meanwhile.
    r = alter(adm, [(topic_name, [(0, [3, 1])])], version=0)
    assert r == {"ThrottleTimeMs": 0, "ErrorCode": NONE, "ErrorMessage": None, "Responses": [
        {"Name": topic_name, "Partitions": [
            {"PartitionIndex": 0, "ErrorCode": NONE, "ErrorMessage": None}]}]}, r
    under_way = [{"Name": topic_name, "Partitions": [
        {"PartitionIndex": 0, "Replicas": [3, 1, 2], "AddingReplicas": [3],
         "RemovingReplicas": [2]}]}]
    wait_until(lambda: listed(adm) == under_way, 30, "the reassignment listed")
    assert listed(adm, [(topic_name, [0, 1, 5]), ("no-such-topic", [0])]) == under_way
    assert listed(adm, [(topic_name, [1])]) == []
    # (The broker's metadata may lag the controller's answer a moment.)
    wait_until(lambda: replicas_of(adm, topic_name)[0] == (1, [3, 1, 2], [1, 2]), 30,
               "the broker sees the replicas under way")
    beat()
    # Back to [2, 1] while under way (the replication factor compared is the target's): 3 is
    # now the one removed, but the request adds no replica, so the list of replicas being
    # added stays as it was, and the reassignment waits for 3 to be in sync, as in Kafka 4.4.
    r = alter(adm, [(topic_name, [(0, [2, 1])])], allow=False)
    assert r == answered([(topic_name, [(0, NONE, None)])], allow=False), r
    wait_until(lambda: listed(adm) == [{"Name": topic_name, "Partitions": [
        {"PartitionIndex": 0, "Replicas": [2, 1, 3], "AddingReplicas": [3],
         "RemovingReplicas": [3]}]}], 30, "the second target listed")
    # Cancelling reverts what is under way: the replica being added leaves the replicas (and
    # would leave the ISR); the others keep their order.
    r = alter(adm, [(topic_name, [(0, None)])])
    assert r == answered([(topic_name, [(0, NONE, None)])]), r
    wait_until(lambda: listed(adm) == [], 30, "nothing under way")
    wait_until(lambda: replicas_of(adm, topic_name)[0] == (1, [2, 1], [1, 2]), 30,
               "the broker sees the reverted replicas")
    r = alter(adm, [(topic_name, [(0, None)])])
    assert r == answered([(topic_name, [(0, NO_REASSIGNMENT_IN_PROGRESS, None)])]), r


def test_reordering_in_sync_replicas_completes_at_once(setup, topic_name):
    adm, played = setup
    for pb in played:
        pb.beat()
    assert replicas_of(adm, topic_name)[1] == (1, [1, 3], [1, 3])
    r = alter(adm, [(topic_name, [(1, [3, 1])])])
    assert r == answered([(topic_name, [(1, NONE, None)])]), r
    wait_until(lambda: replicas_of(adm, topic_name)[1][1] == [3, 1], 30, "the new order")
    assert listed(adm) == []
    # The leader stays where it is (a preferred election would move it to 3).
    assert replicas_of(adm, topic_name)[1] == (1, [3, 1], [1, 3])


def test_replication_throttle_rates_are_broker_configs(broker_factory):
    """The broker configs `kafka-reassign-partitions --throttle` writes: checked as LONG >= 0,
    described as LONG (not secret) once set, and nowhere before."""
    b = broker_factory(name="throttle")
    adm = Client(b.target, b.port)

    def set_rate(value, validate_only=False):
        r = adm.call("IncrementalAlterConfigs", 1, {
            "Resources": [{"ResourceType": 4, "ResourceName": "1", "Configs": [
                {"Name": "leader.replication.throttled.rate", "ConfigOperation": 0,
                 "Value": value}]}], "ValidateOnly": validate_only})
        return [(x["ErrorCode"], x["ErrorMessage"]) for x in r["Responses"]]

    def described():
        r = adm.call("DescribeConfigs", 4, {"Resources": [
            {"ResourceType": 4, "ResourceName": "1", "ConfigurationKeys": None}],
            "IncludeSynonyms": True, "IncludeDocumentation": False})
        return [c for c in r["Results"][0]["Configs"] if "throttled" in c["Name"]]

    assert described() == []
    name = "leader.replication.throttled.rate"
    assert set_rate("-1", validate_only=True) == [
        (INVALID_REQUEST, f"Invalid value -1 for configuration {name}: Value must be at least 0")]
    assert set_rate("abc", validate_only=True) == [
        (INVALID_REQUEST, f"Invalid value abc for configuration {name}: Not a number of type LONG")]
    assert set_rate("100") == [(NONE, None)]
    # (The broker applies the change a moment after the controller's answer.)
    wait_until(described, 30, "the rate described")
    assert described() == [{
        "Name": name, "Value": "100", "ReadOnly": False, "ConfigSource": 2,
        "IsSensitive": False, "Synonyms": [{"Name": name, "Value": "100", "Source": 2}],
        "ConfigType": 5, "Documentation": None}]
    adm.close()
