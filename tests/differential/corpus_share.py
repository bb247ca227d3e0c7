"""Cases: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups of a
share group (KIP-932 share groups): the requests Kafka answers the same way whatever the timing
of its share-state initialization, and the refusals."""
from harness import schema_codec as sc

from .corpus_topics import topic
from .engine import case

MEMBER = "AAAAAAAAAAAAAAAAAAAABA"  # a member id chosen by the client
OTHER = "AAAAAAAAAAAAAAAAAAAABQ"


def share_group(c, suffix=""):
    return f"sg.{c.slug}{suffix}"


def sgh(g, member, epoch, topics=None, rack=None):
    return {"GroupId": g, "MemberId": member, "MemberEpoch": epoch, "RackId": rack,
            "SubscribedTopicNames": topics}


def joined(c):
    """A share group with one member subscribed to a fresh topic. The join's assignment is
    not compared: both assign once the share-partition state is initialized, which may or may
    not have happened by a given heartbeat."""
    g, t = share_group(c), topic(c)
    c.coordinator(g)
    c.create_topic(t)
    c.wait_848_topic(t)
    r = c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, 0, [t]))
    return g, t, r


def fetch(g, member, epoch, topic_id=None, acks=()):
    topics = [] if topic_id is None else [{"TopicId": topic_id, "Partitions": [
        {"PartitionIndex": 0, "AcknowledgementBatches": list(acks)}]}]
    return {"GroupId": g, "MemberId": member, "ShareSessionEpoch": epoch, "MaxWaitMs": 0,
            "MinBytes": 1, "MaxBytes": 1 << 20, "MaxRecords": 10, "BatchSize": 10,
            "Topics": topics, "ForgottenTopicsData": []}


def ack(g, member, epoch, topic_id, first, last, kind=1):
    return {"GroupId": g, "MemberId": member, "ShareSessionEpoch": epoch, "Topics": [
        {"TopicId": topic_id, "Partitions": [{"PartitionIndex": 0, "AcknowledgementBatches": [
            {"FirstOffset": first, "LastOffset": last, "AcknowledgeTypes": [kind]}]}]}]}


# ---- ShareGroupHeartbeat ----------------------------------------------------------------------

@case("ShareGroupHeartbeat", "v1-empty-member-id")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("ShareGroupHeartbeat", 1, sgh(g, "", 0, [topic(c)]), check=True)


@case("ShareGroupHeartbeat", "v1-join-without-subscription")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, 0, None), check=True)


@case("ShareGroupHeartbeat", "v1-unknown-group")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, 5), check=True)


@case("ShareGroupHeartbeat", "v1-invalid-epoch")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, -2, [topic(c)]), check=True)


@case("ShareGroupHeartbeat", "v1-blank-rack")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, 0, [topic(c)], rack=" "), check=True)


@case("ShareGroupHeartbeat", "v1-unknown-member")
def _(c):
    g, t, _ = joined(c)
    c.call("ShareGroupHeartbeat", 1, sgh(g, OTHER, 3), check=True, label="unknown member")


@case("ShareGroupHeartbeat", "v1-leave")
def _(c):
    g, t, _ = joined(c)
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, -1), check=True, label="leave")
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, -1), check=True, label="leave again")


@case("ShareGroupHeartbeat", "v1-consumer-group-id")
def _(c):
    """A KIP-848 consumer group's id is not a share group's."""
    g, t = share_group(c), topic(c)
    c.coordinator(g)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 1, {
        "GroupId": g, "MemberId": OTHER, "MemberEpoch": 0, "InstanceId": None, "RackId": None,
        "RebalanceTimeoutMs": 45000, "SubscribedTopicNames": [t], "SubscribedTopicRegex": None,
        "ServerAssignor": None, "TopicPartitions": []})
    c.call("ShareGroupHeartbeat", 1, sgh(g, MEMBER, 0, [t]), check=True)


# ---- ShareGroupDescribe -----------------------------------------------------------------------

@case("ShareGroupDescribe", "v1-unknown-and-empty-ids")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("ShareGroupDescribe", 1, {"GroupIds": [g, ""], "IncludeAuthorizedOperations": False},
           check=True)


@case("ShareGroupDescribe", "v1-classic-group")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.commit(g, "t", {0: 1})
    c.call("ShareGroupDescribe", 1, {"GroupIds": [g], "IncludeAuthorizedOperations": True},
           check=True)


# ---- ShareFetch / ShareAcknowledge --------------------------------------------------------------

@case("ShareFetch", "v1-no-session")
def _(c):
    g = share_group(c)
    c.call("ShareFetch", 1, fetch(g, MEMBER, 5), check=True)


@case("ShareFetch", "v2-no-session")
def _(c):
    g = share_group(c)
    c.call("ShareFetch", 2, fetch(g, MEMBER, 5), check=True)


@case("ShareFetch", "v1-null-group")
def _(c):
    c.call("ShareFetch", 1, fetch(None, MEMBER, 0), check=True)


@case("ShareFetch", "v1-empty-member-id")
def _(c):
    c.call("ShareFetch", 1, fetch(share_group(c), "", 0), check=True)


@case("ShareFetch", "v1-acks-on-opening-epoch")
def _(c):
    tid = c.create_topic(topic(c))
    body = fetch(share_group(c), MEMBER, 0, tid,
                 acks=[{"FirstOffset": 0, "LastOffset": 0, "AcknowledgeTypes": [1]}])
    c.call("ShareFetch", 1, body, check=True)


@case("ShareFetch", "v2-renew-with-max-records")
def _(c):
    body = fetch(share_group(c), MEMBER, 0)
    body["IsRenewAck"] = True
    c.call("ShareFetch", 2, body, check=True)


@case("ShareAcknowledge", "v1-opening-epoch")
def _(c):
    tid = c.create_topic(topic(c))
    c.call("ShareAcknowledge", 1, ack(share_group(c), MEMBER, 0, tid, 0, 0),
           check=True)


@case("ShareAcknowledge", "v1-no-session")
def _(c):
    tid = c.create_topic(topic(c))
    c.call("ShareAcknowledge", 1, ack(share_group(c), MEMBER, 1, tid, 0, 0),
           check=True)


@case("ShareAcknowledge", "v2-no-session")
def _(c):
    tid = c.create_topic(topic(c))
    c.call("ShareAcknowledge", 2, ack(share_group(c), MEMBER, 1, tid, 0, 0),
           check=True)


# ---- DescribeShareGroupOffsets ------------------------------------------------------------------

@case("DescribeShareGroupOffsets", "v1-unknown-group")
def _(c):
    t = topic(c)
    c.create_topic(t)
    g = share_group(c)
    c.coordinator(g)
    c.call("DescribeShareGroupOffsets", 1, {"Groups": [
        {"GroupId": g, "Topics": [{"TopicName": t, "Partitions": [0]}]},
        {"GroupId": g + "-all", "Topics": None}]}, check=True)


@case("DescribeShareGroupOffsets", "v0-unknown-topic")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("DescribeShareGroupOffsets", 0, {"Groups": [
        {"GroupId": g, "Topics": [{"TopicName": topic(c), "Partitions": [0, 1]}]}]},
        check=True)


# ---- AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups ---------------------------

def alter(g, offsets):
    """offsets: {topic: {partition: start offset}}"""
    return {"GroupId": g, "Topics": [
        {"TopicName": t, "Partitions": [{"PartitionIndex": p, "StartOffset": o}
                                        for p, o in ps.items()]}
        for t, ps in offsets.items()]}


def delete_offsets(g, topics):
    return {"GroupId": g, "Topics": [{"TopicName": t} for t in topics]}


def described(c, g, t, partitions, label):
    c.call("DescribeShareGroupOffsets", 1, {"Groups": [
        {"GroupId": g, "Topics": [{"TopicName": t, "Partitions": partitions}]}]},
        check=True, label=label)


@case("AlterShareGroupOffsets", "v0-creates-the-group")
def _(c):
    """An unknown group is created (Empty) with state for the valid partitions; unknown topics
    and partitions are refused one by one; the share coordinator then has the new start offset."""
    g, t = share_group(c), topic(c)
    c.create_topic(t, 2)
    c.wait_848_topic(t)
    c.coordinator(g)
    c.call("AlterShareGroupOffsets", 0,
           alter(g, {t: {0: 3, 1: 0, 5: 1}, topic(c, "-missing"): {0: 1}}), check=True)
    described(c, g, t, [0, 1], "after")
    c.call("ShareGroupDescribe", 1, {"GroupIds": [g], "IncludeAuthorizedOperations": False},
           check=True, label="group")


@case("AlterShareGroupOffsets", "v0-not-empty")
def _(c):
    g, t, _ = joined(c)
    c.call("AlterShareGroupOffsets", 0, alter(g, {t: {0: 0}}), check=True)
    c.call("DeleteShareGroupOffsets", 0, delete_offsets(g, [t]), check=True, label="delete")
    c.call("DeleteGroups", 2, {"GroupsNames": [g]}, check=True, label="delete-group")


@case("AlterShareGroupOffsets", "v0-not-a-share-group")
def _(c):
    g, t = share_group(c, "-classic"), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    c.call("OffsetCommit", 9, {"GroupId": g, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
                               "GroupInstanceId": None, "RetentionTimeMs": -1, "Topics": [
                                   {"Name": t, "Partitions": [
                                       {"PartitionIndex": 0, "CommittedOffset": 1,
                                        "CommittedLeaderEpoch": -1,
                                        "CommittedMetadata": ""}]}]})
    c.call("AlterShareGroupOffsets", 0, alter(g, {t: {0: 0}}), check=True)
    c.call("DeleteShareGroupOffsets", 0, delete_offsets(g, [t]), check=True, label="delete")


@case("DeleteShareGroupOffsets", "v0-unknown-group")
def _(c):
    g = share_group(c)
    c.coordinator(g)
    c.call("DeleteShareGroupOffsets", 0, delete_offsets(g, [topic(c)]), check=True)


@case("DeleteShareGroupOffsets", "v0-deletes-state")
def _(c):
    """A topic with state is deleted; one the group never had state for, and an unknown topic,
    are refused; the deleted partitions then read as never initialized."""
    g, t, other = share_group(c), topic(c), topic(c, "-other")
    c.create_topic(t)
    c.create_topic(other)
    c.wait_848_topic(t)
    c.wait_848_topic(other)
    c.coordinator(g)
    c.call("AlterShareGroupOffsets", 0, alter(g, {t: {0: 2}}), check=True, label="alter")
    c.call("DeleteShareGroupOffsets", 0, delete_offsets(g, [t, other, topic(c, "-missing")]),
           check=True)
    described(c, g, t, [0], "after")
    c.call("DeleteShareGroupOffsets", 0, delete_offsets(g, [t]), check=True, label="again")


@case("DeleteGroups", "v2-share-group-with-state")
def _(c):
    g, t = share_group(c), topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.coordinator(g)
    c.call("AlterShareGroupOffsets", 0, alter(g, {t: {0: 4}}), check=True, label="alter")
    c.call("DeleteGroups", 2, {"GroupsNames": [g]}, check=True)
    described(c, g, t, [0], "state-after")
    c.call("ShareGroupDescribe", 1, {"GroupIds": [g], "IncludeAuthorizedOperations": False},
           check=True, label="group-after")


# ---- The share coordinator's state APIs (83-87) ------------------------------------------------
# What a share-partition leader sends the coordinator of `group:topicId:partition` in
# __share_group_state. The group needs no members: the coordinator keeps state per key.

def state_key(c, partitions=1):
    """A fresh group and topic, the topic's id, and the share coordinator found and loaded."""
    g, t = share_group(c), topic(c)
    tid = c.create_topic(t, partitions)
    c.coordinator(f"{g}:{tid}:0", key_type=2)
    return g, tid


def parts(tid, **fields):
    return [{"TopicId": tid, "Partitions": [dict({"Partition": 0}, **fields)]}]


def batch(first, last, state, count):
    return {"FirstOffset": first, "LastOffset": last, "DeliveryState": state,
            "DeliveryCount": count}


def write(g, tid, leader_epoch=1, state_epoch=0, start=-1, batches=()):
    return {"GroupId": g, "Topics": parts(tid, StateEpoch=state_epoch, LeaderEpoch=leader_epoch,
                                           StartOffset=start, DeliveryCompleteCount=-1,
                                           StateBatches=list(batches))}


@case("ReadShareGroupState", "uninitialized")
def _(c):
    g, tid = state_key(c)
    c.call("ReadShareGroupState", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=0)},
           check=True)
    c.call("WriteShareGroupState", 1, write(g, tid), check=True)
    c.call("ReadShareGroupStateSummary", 1, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=0)},
           check=True)


@case("InitializeShareGroupState", "unknown-partition")
def _(c):
    g, tid = state_key(c)
    c.call("InitializeShareGroupState", 0, {"GroupId": g, "Topics": [
        {"TopicId": tid, "Partitions": [{"Partition": 5, "StateEpoch": 0, "StartOffset": 0}]}]},
        check=True)
    c.call("ReadShareGroupState", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=-1)},
           check=True)


@case("WriteShareGroupState", "initialize-write-read-delete")
def _(c):
    g, tid = state_key(c)
    c.call("InitializeShareGroupState", 0, {"GroupId": g, "Topics": parts(
        tid, StateEpoch=0, StartOffset=-1)}, check=True)
    c.call("ReadShareGroupState", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=2)},
           check=True)
    # Offsets 0-9 delivered once; then 0-3 acknowledged, 4 released, 9 archived; start 2.
    c.call("WriteShareGroupState", 1, write(g, tid, 2, start=0,
                                            batches=[batch(0, 9, 0, 1)]), check=True)
    c.call("WriteShareGroupState", 0, write(g, tid, 2, start=2, batches=[
        batch(0, 3, 2, 1), batch(4, 4, 0, 2), batch(9, 9, 4, 1)]), check=True)
    c.call("ReadShareGroupState", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=2)},
           check=True)
    c.call("ReadShareGroupStateSummary", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=2)},
           check=True)
    # An older leader is fenced; so is an older state epoch once a newer one initialized.
    c.call("WriteShareGroupState", 1, write(g, tid, 1), check=True)
    c.call("ReadShareGroupState", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=1)},
           check=True)
    c.call("InitializeShareGroupState", 0, {"GroupId": g, "Topics": parts(
        tid, StateEpoch=3, StartOffset=7)}, check=True)
    c.call("WriteShareGroupState", 1, write(g, tid, 2, state_epoch=1), check=True)
    c.call("ReadShareGroupState", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=2)},
           check=True)
    c.call("DeleteShareGroupState", 0, {"GroupId": g, "Topics": parts(tid)}, check=True)
    c.call("ReadShareGroupStateSummary", 1, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=0)},
           check=True)
    c.call("DeleteShareGroupState", 0, {"GroupId": g, "Topics": parts(tid)}, check=True)


@case("DeleteShareGroupState", "negative-partition")
def _(c):
    g, tid = state_key(c)
    c.call("DeleteShareGroupState", 0, {"GroupId": g, "Topics": [
        {"TopicId": tid, "Partitions": [{"Partition": -1}]}]}, check=True)
    c.call("WriteShareGroupState", 1, write(g, tid, leader_epoch=-1), check=True)


@case("ReadShareGroupStateSummary", "fresh-key-and-unknown-topic")
def _(c):
    g, tid = state_key(c)
    c.call("ReadShareGroupStateSummary", 0, {"GroupId": g, "Topics": parts(tid, LeaderEpoch=0)},
           check=True)
    c.call("ReadShareGroupStateSummary", 1, {"GroupId": g, "Topics": [
        {"TopicId": sc.Uuid(b"\x05" * 16), "Partitions": [{"Partition": 0, "LeaderEpoch": 0}]}]},
        check=True)
