"""Cases: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, DeleteGroups, OffsetCommit, OffsetFetch, OffsetDelete, ConsumerGroupHeartbeat,
ConsumerGroupDescribe."""
import time

from .client import consumer_protocol_metadata
from .corpus_topics import UNKNOWN_ID, topic
from .engine import case


def group(c, suffix=""):
    return f"g.{c.slug}{suffix}"


# ---- FindCoordinator -----------------------------------------------------------------------

@case("FindCoordinator", "v6-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("FindCoordinator", 6, {"KeyType": 0, "CoordinatorKeys": [g]}, check=True)


@case("FindCoordinator", "v6-empty-group-id")
def _(c):
    c.coordinator(group(c))
    c.call("FindCoordinator", 6, {"KeyType": 0, "CoordinatorKeys": [""]}, check=True)


@case("FindCoordinator", "v6-batch")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("FindCoordinator", 6, {"KeyType": 0, "CoordinatorKeys": [g + "-a", g + "-b"]},
           check=True)


@case("FindCoordinator", "v6-transaction")
def _(c):
    c.coordinator(f"d-{c.slug}", key_type=1)
    c.call("FindCoordinator", 6, {"KeyType": 1, "CoordinatorKeys": [f"d-{c.slug}"]},
           check=True)


@case("FindCoordinator", "v6-transaction-empty-id")
def _(c):
    c.coordinator(f"d-{c.slug}", key_type=1)
    c.call("FindCoordinator", 6, {"KeyType": 1, "CoordinatorKeys": [""]}, check=True)


@case("FindCoordinator", "v6-invalid-key-type")
def _(c):
    c.call("FindCoordinator", 6, {"KeyType": 7, "CoordinatorKeys": ["x"]}, check=True)


@case("FindCoordinator", "v6-share-key-type")
def _(c):
    c.call("FindCoordinator", 6, {"KeyType": 2, "CoordinatorKeys": ["g:topicid:0"]},
           check=True)


@case("FindCoordinator", "v3-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("FindCoordinator", 3, {"Key": g, "KeyType": 0}, check=True)


@case("FindCoordinator", "v0-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("FindCoordinator", 0, {"Key": g}, check=True)


@case("FindCoordinator", "v3-empty-group-id")
def _(c):
    c.coordinator(group(c))
    c.call("FindCoordinator", 3, {"Key": "", "KeyType": 0}, check=True)


# ---- classic groups: JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------

def join_req(g, member="", instance=None, protocol_type="consumer", protocols=None,
             session=30000, rebalance=60000, topics=("t",)):
    meta = consumer_protocol_metadata(list(topics))
    return {"GroupId": g, "SessionTimeoutMs": session, "RebalanceTimeoutMs": rebalance,
            "MemberId": member, "GroupInstanceId": instance, "ProtocolType": protocol_type,
            "Protocols": protocols if protocols is not None else [
                {"Name": "range", "Metadata": meta}], "Reason": None}


@case("JoinGroup", "v9-member-id-required-then-join")
def _(c):
    g = group(c)
    c.coordinator(g)
    r = c.call("JoinGroup", 9, join_req(g), check=True, label="first join")
    c.call("JoinGroup", 9, join_req(g, member=r["MemberId"]), check=True, label="second join")


@case("JoinGroup", "v9-static-member")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 9, join_req(g, instance="i-1"), check=True)


@case("JoinGroup", "v5-join")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 5, join_req(g), check=True)


@case("JoinGroup", "v3-join")
def _(c):
    """v3 and below: no MEMBER_ID_REQUIRED round."""
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 3, join_req(g), check=True)


@case("JoinGroup", "v9-unknown-member")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 9, join_req(g, member="not-a-member"), check=True)


@case("JoinGroup", "v9-session-timeout-too-low")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 9, join_req(g, session=10), check=True)


@case("JoinGroup", "v9-session-timeout-too-high")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 9, join_req(g, session=10_000_000), check=True)


@case("JoinGroup", "v9-empty-group-id")
def _(c):
    c.coordinator(group(c))
    c.call("JoinGroup", 9, join_req(""), check=True)


@case("JoinGroup", "v9-no-protocols")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 9, join_req(g, protocols=[]), check=True)


@case("JoinGroup", "v9-empty-protocol-type")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("JoinGroup", 9, join_req(g, protocol_type=""), check=True)


@case("JoinGroup", "v9-inconsistent-protocol-type")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("JoinGroup", 9, join_req(g, protocol_type="connect"), check=True)


@case("JoinGroup", "v9-consumer-group-conflict")
def _(c):
    """A classic join to a group that is a KIP-848 consumer group with a member."""
    g = group(c)
    c.coordinator(g)
    t = topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, "m-848", 0, [t]))
    c.call("JoinGroup", 9, join_req(g, protocols=[
        {"Name": "range", "Metadata": consumer_protocol_metadata([t])}]), check=True)


@case("SyncGroup", "v5-leader")
def _(c):
    g = group(c)
    c.coordinator(g)
    r = c.call("JoinGroup", 9, join_req(g))
    r = c.call("JoinGroup", 9, join_req(g, member=r["MemberId"]))
    c.call("SyncGroup", 5, {"GroupId": g, "GenerationId": r["GenerationId"],
                            "MemberId": r["MemberId"], "GroupInstanceId": None,
                            "ProtocolType": "consumer", "ProtocolName": "range",
                            "Assignments": [{"MemberId": r["MemberId"],
                                             "Assignment": b"\x00\x01assign"}]}, check=True)


@case("SyncGroup", "v5-wrong-generation")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("SyncGroup", 5, {"GroupId": g, "GenerationId": gen + 5, "MemberId": member,
                            "ProtocolType": "consumer", "ProtocolName": "range",
                            "Assignments": []}, check=True)


@case("SyncGroup", "v5-unknown-member")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("SyncGroup", 5, {"GroupId": g, "GenerationId": gen, "MemberId": "ghost",
                            "ProtocolType": "consumer", "ProtocolName": "range",
                            "Assignments": []}, check=True)


@case("SyncGroup", "v5-inconsistent-protocol")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g, sync=False)
    c.call("SyncGroup", 5, {"GroupId": g, "GenerationId": gen, "MemberId": member,
                            "ProtocolType": "consumer", "ProtocolName": "roundrobin",
                            "Assignments": []}, check=True)


@case("SyncGroup", "v5-unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("SyncGroup", 5, {"GroupId": g, "GenerationId": 1, "MemberId": "m",
                            "ProtocolType": "consumer", "ProtocolName": "range",
                            "Assignments": []}, check=True)


@case("SyncGroup", "v2-leader")
def _(c):
    g = group(c)
    c.coordinator(g)
    r = c.call("JoinGroup", 2, join_req(g))
    c.call("SyncGroup", 2, {"GroupId": g, "GenerationId": r["GenerationId"],
                            "MemberId": r["MemberId"],
                            "Assignments": [{"MemberId": r["MemberId"],
                                             "Assignment": b"a"}]}, check=True)


@case("Heartbeat", "v4-ok")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("Heartbeat", 4, {"GroupId": g, "GenerationId": gen, "MemberId": member},
           check=True)


@case("Heartbeat", "v4-wrong-generation")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("Heartbeat", 4, {"GroupId": g, "GenerationId": gen + 1, "MemberId": member},
           check=True)


@case("Heartbeat", "v4-unknown-member")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("Heartbeat", 4, {"GroupId": g, "GenerationId": gen, "MemberId": "ghost"},
           check=True)


@case("Heartbeat", "v4-unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("Heartbeat", 4, {"GroupId": g, "GenerationId": 1, "MemberId": "m"}, check=True)


@case("Heartbeat", "v4-during-sync")
def _(c):
    """Joined but not synced: the group is CompletingRebalance."""
    g = group(c)
    member, gen = c.join_classic(g, sync=False)
    c.call("Heartbeat", 4, {"GroupId": g, "GenerationId": gen, "MemberId": member},
           check=True)


@case("Heartbeat", "v0-ok")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("Heartbeat", 0, {"GroupId": g, "GenerationId": gen, "MemberId": member},
           check=True)


@case("Heartbeat", "v4-consumer-group")
def _(c):
    """A classic heartbeat to a KIP-848 group."""
    g = group(c)
    c.coordinator(g)
    t = topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, "m-848", 0, [t]))
    c.call("Heartbeat", 4, {"GroupId": g, "GenerationId": 1, "MemberId": "m-848"},
           check=True)


@case("LeaveGroup", "v5-member")
def _(c):
    g = group(c)
    member, gen = c.join_classic(g)
    c.call("LeaveGroup", 5, {"GroupId": g, "Members": [
        {"MemberId": member, "GroupInstanceId": None, "Reason": "diff"}]}, check=True)


@case("LeaveGroup", "v5-unknown-member")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("LeaveGroup", 5, {"GroupId": g, "Members": [
        {"MemberId": "ghost", "GroupInstanceId": None}]}, check=True)


@case("LeaveGroup", "v5-static-member")
def _(c):
    g = group(c)
    c.join_classic(g, instance_id="i-1")
    c.call("LeaveGroup", 5, {"GroupId": g, "Members": [
        {"MemberId": "", "GroupInstanceId": "i-1"}, {"MemberId": "", "GroupInstanceId": "i-9"}]},
        check=True)


@case("LeaveGroup", "v5-unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("LeaveGroup", 5, {"GroupId": g, "Members": [{"MemberId": "m"}]}, check=True)


@case("LeaveGroup", "v5-no-members")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("LeaveGroup", 5, {"GroupId": g, "Members": []}, check=True)


@case("LeaveGroup", "v2-member")
def _(c):
    g = group(c)
    member, _ = c.join_classic(g)
    c.call("LeaveGroup", 2, {"GroupId": g, "MemberId": member}, check=True)


# ---- DescribeGroups / ListGroups / DeleteGroups -------------------------------------------

@case("DescribeGroups", "v6-stable")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("DescribeGroups", 6, {"Groups": [g], "IncludeAuthorizedOperations": False},
           check=True)


@case("DescribeGroups", "v6-authorized-operations")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("DescribeGroups", 6, {"Groups": [g], "IncludeAuthorizedOperations": True},
           check=True)


@case("DescribeGroups", "v6-unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("DescribeGroups", 6, {"Groups": [g]}, check=True)


@case("DescribeGroups", "v6-empty-group-id")
def _(c):
    c.coordinator(group(c))
    c.call("DescribeGroups", 6, {"Groups": [""]}, check=True)


@case("DescribeGroups", "v6-empty-after-commit")
def _(c):
    g = group(c)
    t = topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 1})
    c.call("DescribeGroups", 6, {"Groups": [g]}, check=True)


@case("DescribeGroups", "v6-consumer-group")
def _(c):
    """A KIP-848 group described with the classic API."""
    g = group(c)
    c.coordinator(g)
    t = topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, "m-848", 0, [t]))
    c.call("DescribeGroups", 6, {"Groups": [g]}, check=True)


@case("DescribeGroups", "v0-stable")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("DescribeGroups", 0, {"Groups": [g]}, check=True)


def _own_groups(r, prefix):
    r["Groups"] = sorted((x for x in r["Groups"] if x["GroupId"].startswith(prefix)),
                         key=lambda x: x["GroupId"])
    return r


@case("ListGroups", "v5-own")
def _(c):
    g = group(c)
    c.join_classic(g + "-classic")
    c.create_topic(topic(c))
    c.commit(g + "-simple", topic(c), {0: 1})
    r = c.call("ListGroups", 5, {"StatesFilter": [], "TypesFilter": []})
    c.check("ListGroups v5 (this case's groups)", _own_groups(r, g))


@case("ListGroups", "v5-filters")
def _(c):
    g = group(c)
    c.join_classic(g + "-classic")
    r = c.call("ListGroups", 5, {"StatesFilter": ["Stable"], "TypesFilter": ["classic"]})
    c.check("ListGroups v5 stable classic", _own_groups(r, g))
    r = c.call("ListGroups", 5, {"StatesFilter": ["Empty"], "TypesFilter": []})
    c.check("ListGroups v5 empty", _own_groups(r, g))


@case("ListGroups", "v5-type-consumer")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.coordinator(g + "-848")
    c.call("ConsumerGroupHeartbeat", 1, cgh(g + "-848", MEMBER, 0, [t]))
    c.join_classic(g + "-classic")
    r = c.call("ListGroups", 5, {"StatesFilter": [], "TypesFilter": ["consumer"]})
    c.check("ListGroups v5 consumer (this case's)", _own_groups(r, g))


@case("ListGroups", "v5-unknown-filters")
def _(c):
    r = c.call("ListGroups", 5, {"StatesFilter": ["NoSuchState"], "TypesFilter": ["nosuch"]})
    c.check("ListGroups v5", r)


@case("ListGroups", "v0-own")
def _(c):
    g = group(c)
    c.join_classic(g)
    r = c.call("ListGroups", 0, {})
    c.check("ListGroups v0 (this case's groups)", _own_groups(r, g))


@case("DeleteGroups", "v3-empty-group")
def _(c):
    g = group(c)
    t = topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 1})
    c.call("DeleteGroups", 3, {"GroupsNames": [g]}, check=True)
    c.call("OffsetFetch", 9, {"Groups": [{"GroupId": g, "Topics": None}]}, check=True)


@case("DeleteGroups", "v3-non-empty")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("DeleteGroups", 3, {"GroupsNames": [g]}, check=True)


@case("DeleteGroups", "v3-unknown")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("DeleteGroups", 3, {"GroupsNames": [g, ""]}, check=True)


@case("DeleteGroups", "v3-duplicate")
def _(c):
    g = group(c)
    t = topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 1})
    c.call("DeleteGroups", 3, {"GroupsNames": [g, g]}, check=True)


@case("DeleteGroups", "v0-empty-group")
def _(c):
    g = group(c)
    t = topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 1})
    c.call("DeleteGroups", 0, {"GroupsNames": [g]}, check=True)


# ---- OffsetCommit / OffsetFetch / OffsetDelete --------------------------------------------

def oc_body(g, topics, member="", generation=-1, instance=None, version=9, ids=None):
    out = []
    for name, parts in topics.items():
        t = {"Partitions": [{"PartitionIndex": p, "CommittedOffset": o,
                             "CommittedLeaderEpoch": -1, "CommittedMetadata": "m"}
                            for p, o in parts.items()]}
        if version >= 10:
            t["TopicId"] = (ids or {}).get(name, name)
        else:
            t["Name"] = name
        out.append(t)
    return {"GroupId": g, "GenerationIdOrMemberEpoch": generation, "MemberId": member,
            "GroupInstanceId": instance, "RetentionTimeMs": -1, "Topics": out}


def oc(c, g, topics, version=9, label=None, **kw):
    return c.call("OffsetCommit", version, oc_body(g, topics, version=version, **kw),
                  check=True, label=label)


def of(c, g, topics=None, version=9, label=None, require_stable=False):
    body = {"Groups": [{"GroupId": g, "MemberId": None, "MemberEpoch": -1,
                        "Topics": None if topics is None else [
                            {"Name": n, "PartitionIndexes": ps} for n, ps in topics.items()]}],
            "RequireStable": require_stable}
    return c.call("OffsetFetch", version, body, check=True, label=label)


@case("OffsetCommit", "v9-simple")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t, partitions=2)
    c.coordinator(g)
    oc(c, g, {t: {0: 5, 1: 7}})
    of(c, g, {t: [0, 1]})


@case("OffsetCommit", "v9-unknown-topic")
def _(c):
    g = group(c)
    c.coordinator(g)
    oc(c, g, {topic(c, "-missing"): {0: 5}})


@case("OffsetCommit", "v9-unknown-partition")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    oc(c, g, {t: {3: 5}})


@case("OffsetCommit", "v10-by-topic-id")
def _(c):
    g, t = group(c), topic(c)
    tid = c.create_topic(t)
    c.coordinator(g)
    oc(c, g, {t: {0: 4}}, version=10, ids={t: tid})


@case("OffsetCommit", "v10-unknown-topic-id")
def _(c):
    g = group(c)
    c.coordinator(g)
    oc(c, g, {"x": {0: 4}}, version=10, ids={"x": UNKNOWN_ID})


@case("OffsetCommit", "v9-classic-member")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    member, gen = c.join_classic(g)
    oc(c, g, {t: {0: 3}}, member=member, generation=gen)


@case("OffsetCommit", "v9-illegal-generation")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    member, gen = c.join_classic(g)
    oc(c, g, {t: {0: 3}}, member=member, generation=gen + 3)


@case("OffsetCommit", "v9-unknown-member")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    member, gen = c.join_classic(g)
    oc(c, g, {t: {0: 3}}, member="ghost", generation=gen)


@case("OffsetCommit", "v9-simple-to-active-group")
def _(c):
    """Generation -1 (a simple consumer) committing to a group with members."""
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.join_classic(g)
    oc(c, g, {t: {0: 3}})


@case("OffsetCommit", "v9-empty-group-id")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.coordinator(group(c))
    oc(c, "", {t: {0: 3}})


@case("OffsetCommit", "v9-metadata-too-large")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    body = oc_body(g, {t: {0: 3}})
    body["Topics"][0]["Partitions"][0]["CommittedMetadata"] = "x" * 5000
    c.call("OffsetCommit", 9, body, check=True)


@case("OffsetCommit", "v9-negative-offset")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    oc(c, g, {t: {0: -5}})
    of(c, g, {t: [0]})


@case("OffsetCommit", "v9-consumer-group-member")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.coordinator(g)
    r = c.call("ConsumerGroupHeartbeat", 1, cgh(g, "m-848", 0, [t]))
    oc(c, g, {t: {0: 2}}, member="m-848", generation=r["MemberEpoch"])
    oc(c, g, {t: {0: 2}}, member="m-848", generation=r["MemberEpoch"] + 4, label="stale epoch")


@case("OffsetCommit", "v2-simple")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    oc(c, g, {t: {0: 8}}, version=2)


@case("OffsetCommit", "v9-duplicate-partition")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    body = oc_body(g, {t: {0: 3}})
    body["Topics"][0]["Partitions"] *= 2
    c.call("OffsetCommit", 9, body, check=True)


@case("OffsetFetch", "v9-all-topics")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t, partitions=2)
    c.commit(g, t, {0: 1, 1: 2})
    of(c, g, None)


@case("OffsetFetch", "v9-unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    of(c, g, {topic(c): [0]})
    of(c, g, None, label="all topics")


@case("OffsetFetch", "v9-unknown-topic-partition")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 1})
    of(c, g, {t: [0, 5], topic(c, "-missing"): [0]})


@case("OffsetFetch", "v9-multiple-groups")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.commit(g + "-a", t, {0: 1})
    c.commit(g + "-b", t, {0: 2})
    c.call("OffsetFetch", 9, {"Groups": [
        {"GroupId": g + "-a", "Topics": [{"Name": t, "PartitionIndexes": [0]}]},
        {"GroupId": g + "-b", "Topics": None}], "RequireStable": False}, check=True)


@case("OffsetFetch", "v10-by-topic-id")
def _(c):
    g, t = group(c), topic(c)
    tid = c.create_topic(t)
    c.commit(g, t, {0: 4})
    c.call("OffsetFetch", 10, {"Groups": [{"GroupId": g, "MemberId": None, "MemberEpoch": -1,
                                           "Topics": [{"TopicId": tid,
                                                       "PartitionIndexes": [0]}]}]},
           check=True)
    c.call("OffsetFetch", 10, {"Groups": [{"GroupId": g, "Topics": None}]}, check=True,
           label="all topics")


@case("OffsetFetch", "v10-unknown-topic-id")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 4})
    c.call("OffsetFetch", 10, {"Groups": [{"GroupId": g, "Topics": [
        {"TopicId": UNKNOWN_ID, "PartitionIndexes": [0]}]}]}, check=True)


@case("OffsetFetch", "v9-require-stable-open-txn")
def _(c):
    """A transactional offset commit pending: RequireStable gets UNSTABLE_OFFSET_COMMIT."""
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.coordinator(g)
    txn = f"d-{c.slug}"
    pid, epoch = c.init_producer(txn)
    c.call("AddOffsetsToTxn", 3, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": g})
    c.call("TxnOffsetCommit", 3, {"TransactionalId": txn, "GroupId": g, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "Topics": [
                                      {"Name": t, "Partitions": [
                                          {"PartitionIndex": 0, "CommittedOffset": 9,
                                           "CommittedMetadata": ""}]}]})
    of(c, g, {t: [0]}, require_stable=True, label="require stable")
    of(c, g, {t: [0]}, require_stable=False, label="not require stable")


@case("OffsetFetch", "v7-single-group")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 3})
    c.call("OffsetFetch", 7, {"GroupId": g, "Topics": [{"Name": t, "PartitionIndexes": [0]}],
                              "RequireStable": False}, check=True)


@case("OffsetFetch", "v1-single-group")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 3})
    c.call("OffsetFetch", 1, {"GroupId": g, "Topics": [{"Name": t, "PartitionIndexes": [0]}]},
           check=True)


@case("OffsetFetch", "v9-member-epoch-check")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.coordinator(g)
    r = c.call("ConsumerGroupHeartbeat", 1, cgh(g, "m-848", 0, [t]))
    c.call("OffsetFetch", 9, {"Groups": [{"GroupId": g, "MemberId": "m-848",
                                          "MemberEpoch": r["MemberEpoch"] + 5,
                                          "Topics": None}]}, check=True)


@case("OffsetDelete", "ok")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t, partitions=2)
    c.commit(g, t, {0: 1, 1: 2})
    c.call("OffsetDelete", 0, {"GroupId": g, "Topics": [
        {"Name": t, "Partitions": [{"PartitionIndex": 0}]}]}, check=True)
    of(c, g, None)


@case("OffsetDelete", "unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("OffsetDelete", 0, {"GroupId": g, "Topics": [
        {"Name": topic(c), "Partitions": [{"PartitionIndex": 0}]}]}, check=True)


@case("OffsetDelete", "subscribed-topic")
def _(c):
    """The classic group is Stable and subscribed to the topic: GROUP_SUBSCRIBED_TO_TOPIC."""
    g, t = group(c), topic(c)
    c.create_topic(t)
    member, gen = c.join_classic(g, topics=(t,))
    c.commit(g, t, {0: 1}, member=member, generation=gen)
    c.call("OffsetDelete", 0, {"GroupId": g, "Topics": [
        {"Name": t, "Partitions": [{"PartitionIndex": 0}]}]}, check=True)


@case("OffsetDelete", "unknown-topic-partition")
def _(c):
    g, t = group(c), topic(c)
    c.create_topic(t)
    c.commit(g, t, {0: 1})
    c.call("OffsetDelete", 0, {"GroupId": g, "Topics": [
        {"Name": t, "Partitions": [{"PartitionIndex": 4}]},
        {"Name": topic(c, "-missing"), "Partitions": [{"PartitionIndex": 0}]}]}, check=True)


@case("OffsetDelete", "empty-group-id")
def _(c):
    c.coordinator(group(c))
    c.call("OffsetDelete", 0, {"GroupId": "", "Topics": []}, check=True)


# ---- KIP-848: ConsumerGroupHeartbeat / ConsumerGroupDescribe ------------------------------

def cgh(g, member, epoch, topics=None, instance=None, rebalance=45000, assignor=None,
        regex=None, owned=None):
    return {"GroupId": g, "MemberId": member, "MemberEpoch": epoch, "InstanceId": instance,
            "RackId": None, "RebalanceTimeoutMs": rebalance,
            "SubscribedTopicNames": topics, "SubscribedTopicRegex": regex,
            "ServerAssignor": assignor,
            # A (re-)join must send an empty owned list, not null.
            "TopicPartitions": owned if owned is not None else ([] if epoch == 0 else None)}


MEMBER = "AAAAAAAAAAAAAAAAAAAAAw"  # a member id chosen by the client (v1, KIP-1082)


def joined_848(c, topics, partitions=2):
    g = group(c)
    c.coordinator(g)
    for t in topics:
        c.create_topic(t, partitions=partitions)
        c.wait_848_topic(t)
    r = c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, topics), check=True,
               label="join")
    return g, r


@case("ConsumerGroupHeartbeat", "v1-join")
def _(c):
    joined_848(c, [topic(c)])


@case("ConsumerGroupHeartbeat", "v1-join-then-heartbeat")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    owned = None
    if r.get("Assignment"):
        owned = [{"TopicId": tp["TopicId"], "Partitions": tp["Partitions"]}
                 for tp in r["Assignment"]["TopicPartitions"]]
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, r["MemberEpoch"], [t], owned=owned),
           check=True, label="heartbeat")


@case("ConsumerGroupHeartbeat", "v1-leave")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, -1), check=True, label="leave")


@case("ConsumerGroupHeartbeat", "v1-fenced-epoch")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, r["MemberEpoch"] + 10, [t]),
           check=True, label="future epoch")


@case("ConsumerGroupHeartbeat", "v1-unknown-member")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, "AAAAAAAAAAAAAAAAAAAABw", 3, [t]),
           check=True, label="unknown member")


@case("ConsumerGroupHeartbeat", "v1-empty-member-id")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, "", 0, [topic(c)]), check=True)


@case("ConsumerGroupHeartbeat", "v0-server-member-id")
def _(c):
    """v0: the server gives the member id."""
    g = group(c)
    c.coordinator(g)
    t = topic(c)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 0, cgh(g, "", 0, [t]), check=True)


@case("ConsumerGroupHeartbeat", "v1-empty-group-id")
def _(c):
    c.coordinator(group(c))
    c.call("ConsumerGroupHeartbeat", 1, cgh("", MEMBER, 0, [topic(c)]), check=True)


@case("ConsumerGroupHeartbeat", "v1-join-without-subscription")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, None), check=True)


@case("ConsumerGroupHeartbeat", "v1-negative-rebalance-timeout")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, [topic(c)], rebalance=-5),
           check=True)


@case("ConsumerGroupHeartbeat", "v1-unknown-assignor")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, [topic(c)], assignor="nope"),
           check=True)


@case("ConsumerGroupHeartbeat", "v1-regex")
def _(c):
    t = topic(c)
    g = group(c)
    c.coordinator(g)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, None, regex=t.replace(".", "\\.")),
           check=True)


def beat_until(c, g, member, epoch, topics=None, regex=None, owned=None, want=None,
               timeout=10.0):
    """Heartbeats (full requests, as a client re-sending its subscription) until `want(r)`
    holds, then returns that response; the ones before are not compared (how many it takes
    is timing)."""
    def beat():
        r = c.call("ConsumerGroupHeartbeat", 1, {
            **cgh(g, member, epoch, topics, regex=regex, owned=owned)})
        return want(r), r
    return c.wait_for(f"{g} {member}", beat, timeout=timeout, interval=0.2)


def owned_of(r):
    return [{"TopicId": tp["TopicId"], "Partitions": tp["Partitions"]}
            for tp in (r.get("Assignment") or {}).get("TopicPartitions", [])]


@case("ConsumerGroupHeartbeat", "v1-regex-resolved")
def _(c):
    """A regex join is answered at once with nothing; the regex is resolved off the request
    (a group epoch bump) and a later heartbeat brings the epoch and the partitions."""
    t = topic(c)
    g = group(c)
    c.coordinator(g)
    c.create_topic(t, partitions=2)
    c.wait_848_topic(t)
    regex = t.replace(".", "\\.")
    r = c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, None, regex=regex),
               check=True, label="join")
    r = beat_until(c, g, MEMBER, r["MemberEpoch"], regex=regex, owned=[],
                   want=lambda r: r.get("Assignment") is not None
                   and any(tp["Partitions"] for tp in r["Assignment"]["TopicPartitions"]))
    c.check("resolved", r)
    c.call("ConsumerGroupDescribe", 1, {"GroupIds": [g]}, check=True)


@case("ConsumerGroupHeartbeat", "v1-regex-internal-topic")
def _(c):
    """A regex naming __consumer_offsets: whether internal topics are resolved."""
    g = group(c)
    c.coordinator(g)
    regex = "__consumer_offsets"
    r = c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, None, regex=regex),
               check=True, label="join")
    # The resolution bumps the group epoch; the next heartbeat is assigned at it.
    r = beat_until(c, g, MEMBER, r["MemberEpoch"], regex=regex, owned=[],
                   want=lambda r: r["MemberEpoch"] > 1)
    if isinstance(r, dict) and r.get("Assignment"):
        # 50 partitions: compare how many, not the list.
        r["Assignment"] = {"partitions assigned": sum(
            len(tp["Partitions"]) for tp in r["Assignment"]["TopicPartitions"])}
    c.check("resolved", r)


@case("ConsumerGroupHeartbeat", "v1-assignment-interval")
def _(c):
    """Kafka 4.4 computes a group's target assignment at most once per
    group.consumer.assignment.interval.ms (1 s): a second member joining right after the
    first is at the old target epoch with nothing; past the interval its heartbeat gets the
    new target, the first member revokes, then the second is given the released partition."""
    t = topic(c)
    g, r1 = joined_848(c, [t], partitions=2)
    m2 = "AAAAAAAAAAAAAAAAAAAABA"
    r2 = c.call("ConsumerGroupHeartbeat", 1, cgh(g, m2, 0, [t]), check=True,
                label="second joins")
    time.sleep(1.2)
    r2 = c.call("ConsumerGroupHeartbeat", 1, cgh(g, m2, r2["MemberEpoch"], [t], owned=[]),
                check=True, label="second after the interval")
    r1 = c.call("ConsumerGroupHeartbeat", 1,
                cgh(g, MEMBER, r1["MemberEpoch"], [t], owned=owned_of(r1)),
                check=True, label="first asked to revoke")
    kept = owned_of(r1)
    r1 = c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, r1["MemberEpoch"], [t], owned=kept),
                check=True, label="first revoked")
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, m2, r2["MemberEpoch"], [t], owned=[]),
           check=True, label="second given the released partition")
    c.call("ConsumerGroupDescribe", 1, {"GroupIds": [g]}, check=True)


@case("ConsumerGroupHeartbeat", "v1-invalid-regex")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, None, regex="(unclosed"),
           check=True)


@case("ConsumerGroupHeartbeat", "v1-classic-group-conflict")
def _(c):
    """A KIP-848 join to a classic group that has a member."""
    g = group(c)
    t = topic(c)
    c.create_topic(t, partitions=2)
    c.wait_848_topic(t)
    c.join_classic(g, topics=(t,))
    r = c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, [t]))
    # Which of the two partitions each member gets follows the order of the (random) member
    # ids: compare how many the new member is given.
    if isinstance(r, dict) and r.get("Assignment"):
        r["Assignment"] = {"partitions assigned": sum(
            len(tp["Partitions"]) for tp in r["Assignment"]["TopicPartitions"])}
    c.check("ConsumerGroupHeartbeat v1", r)


@case("ConsumerGroupHeartbeat", "v1-static-member")
def _(c):
    t = topic(c)
    g = group(c)
    c.coordinator(g)
    c.create_topic(t)
    c.wait_848_topic(t)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, MEMBER, 0, [t], instance="i-1"), check=True)


@case("ConsumerGroupHeartbeat", "v1-two-members")
def _(c):
    """A second member joins: epochs and the (empty until revoked) assignment."""
    t = topic(c)
    g, r = joined_848(c, [t], partitions=2)
    c.call("ConsumerGroupHeartbeat", 1, cgh(g, "AAAAAAAAAAAAAAAAAAAABA", 0, [t]),
           check=True, label="second member joins")


@case("ConsumerGroupDescribe", "v1-one-member")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    c.call("ConsumerGroupDescribe", 1, {"GroupIds": [g], "IncludeAuthorizedOperations": False},
           check=True)


@case("ConsumerGroupDescribe", "v1-authorized-operations")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    c.call("ConsumerGroupDescribe", 1, {"GroupIds": [g], "IncludeAuthorizedOperations": True},
           check=True)


@case("ConsumerGroupDescribe", "v1-unknown-group")
def _(c):
    g = group(c)
    c.coordinator(g)
    c.call("ConsumerGroupDescribe", 1, {"GroupIds": [g, ""]}, check=True)


@case("ConsumerGroupDescribe", "v1-classic-group")
def _(c):
    g = group(c)
    c.join_classic(g)
    c.call("ConsumerGroupDescribe", 1, {"GroupIds": [g]}, check=True)


@case("ConsumerGroupDescribe", "v0-one-member")
def _(c):
    t = topic(c)
    g, r = joined_848(c, [t])
    c.call("ConsumerGroupDescribe", 0, {"GroupIds": [g]}, check=True)

