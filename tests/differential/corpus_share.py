"""Cases: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge,
DescribeShareGroupOffsets (KIP-932 share groups): the requests Kafka answers the same way
whatever the timing of its share-state initialization, and the refusals."""
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
    not compared: Kafka assigns once the share-partition state is initialized, kactor at once."""
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
