"""ACL authorization (issue #28 part 3), against kactor and Apache Kafka 4.4 with the same broker
config: `authorizer.class.name` = KRaft's StandardAuthorizer, super users admin and ANONYMOUS
(the PLAINTEXT and CONTROLLER listeners, used by the node itself and by the admin side of these
tests), and no access where no ACL matches (allow.everyone.if.no.acl.found=false).

- the `kafka-acls` CLI over the PLAINTEXT listener: add, list (all, by principal, by resource,
  MATCH), remove; literal and prefixed patterns; topic, group, cluster and transactional-id
  resources; allow and deny principals, hosts;
- every API as user alice over SASL_PLAINTEXT (PLAIN), raw requests from the schemas: the error
  codes Kafka answers where alice lacks the operation, side by side with resources where she has
  it (a table of cases, `CASES`), the authorized-operations bit fields, deny over allow,
  prefixed allow with a literal deny, the `User:*` wildcard, a host-restricted ACL;
- real clients (librdkafka): a producer without WRITE fails with TOPIC_AUTHORIZATION_FAILED;
  with WRITE, READ on the topic and READ on the group, records go through.

The ACLs and resources every test reads (`world`) are made once per module through the
PLAINTEXT listener, where the harness is a super user. Answers are compared by resource name:
Kafka's order within an answer often follows its hash maps, or puts the refused entries first or
last, and clients don't depend on it."""
import re
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from differential.client import Client, consumer_protocol_metadata
from harness import schema_codec as sc
from harness.cli import run_tool
from harness.clients import poll_values
from harness.security import AUTHZ_USERS, sasl_plain_client

# Error codes.
NONE, UNKNOWN_TOPIC, NOT_COORDINATOR_LOADING = 0, 3, 14
TOPIC_AUTHZ, GROUP_AUTHZ, CLUSTER_AUTHZ = 29, 30, 31
TXN_ID_AUTHZ, OPERATION_NOT_ATTEMPTED, GROUP_NOT_CONSUMER = 53, 55, 69
TXN_ID_NOT_FOUND = 105
# AuthorizedOperations when the client did not ask for them (Integer.MIN_VALUE).
OPS_OMITTED = -(1 << 31)

# The ACL wire enums (AclOperation, ResourceType, PatternType, AclPermissionType codes).
RESOURCE = {"TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN = {"LITERAL": 3, "PREFIXED": 4}
OP = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
      "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
PERMISSION = {"DENY": 2, "ALLOW": 3}


def ops_bits(*names):
    """An authorized-operations bit field: bit n set for the operation of code n."""
    return sum(1 << OP[n] for n in names)


def acl(resource, name, op, permission="ALLOW", pattern="LITERAL", principal="User:alice",
        host="*"):
    return {"ResourceType": RESOURCE[resource], "ResourceName": name,
            "ResourcePatternType": PATTERN[pattern], "Principal": principal, "Host": host,
            "Operation": OP[op], "PermissionType": PERMISSION[permission]}


# ---- the module's world: topics, groups and ACLs -------------------------------------------

RUN = uuid.uuid4().hex[:6]
TOPICS = ["granted", "secret", "readonly", "conflict", "pub-a", "pub-blocked", "everyone",
          "hosty"]
GROUPS = ["g-ok", "g-secret", "g-desc"]
WORLD_ACLS = [
    acl("TOPIC", "granted", "READ"), acl("TOPIC", "granted", "WRITE"),
    acl("TOPIC", "readonly", "READ"),
    # Deny wins over allow: WRITE on `conflict` is both allowed and denied.
    acl("TOPIC", "conflict", "WRITE"), acl("TOPIC", "conflict", "WRITE", "DENY"),
    # A prefixed allow with a literal deny under it.
    acl("TOPIC", "pub-", "WRITE", pattern="PREFIXED"),
    acl("TOPIC", "pub-blocked", "WRITE", "DENY"),
    acl("TOPIC", "everyone", "READ", principal="User:*"),
    acl("TOPIC", "hosty", "READ", host="127.0.0.2"),
    acl("TOPIC", "mine-", "CREATE", pattern="PREFIXED"),
    acl("TOPIC", "rc-", "READ", pattern="PREFIXED"), acl("TOPIC", "rc-", "WRITE",
                                                         pattern="PREFIXED"),
    acl("GROUP", "g-ok", "READ"), acl("GROUP", "g-desc", "DESCRIBE"),
    acl("GROUP", "rc-", "READ", pattern="PREFIXED"),
    acl("TRANSACTIONAL_ID", "tx-ok", "WRITE"),
]
ACL_ANY = {"ResourceTypeFilter": 1, "ResourceNameFilter": None, "PatternTypeFilter": 1,
           "PrincipalFilter": None, "HostFilter": None, "Operation": 1, "PermissionType": 1}


def _binding(a):
    return (a["ResourceType"], a["ResourceName"], a["ResourcePatternType"], a["Principal"],
            a["Host"], a["Operation"], a["PermissionType"])


def described_bindings(admin):
    r = admin.call("DescribeAcls", 3, ACL_ANY)
    assert r["ErrorCode"] == NONE, r
    return {(res["ResourceType"], res["ResourceName"], res["PatternType"], a["Principal"],
             a["Host"], a["Operation"], a["PermissionType"])
            for res in r["Resources"] for a in res["Acls"]}


def wait_acls(admin, bindings, present=True, timeout=20):
    """Until the broker's authorizer (DescribeAcls answers from it) has (or no longer has) every
    binding: CreateAcls returns once the controller committed them, the broker applies them when
    it reads the metadata log."""
    want = {_binding(a) for a in bindings}
    admin.wait_for("ACLs applied", lambda: (
        (want <= described_bindings(admin)) if present
        else not (want & described_bindings(admin)), None), timeout=timeout)


@pytest.fixture(scope="module")
def world(_authz):
    """The topics, groups (offsets committed by the admin) and ACLs of WORLD_ACLS, made over the
    PLAINTEXT listener; returns the admin's Client."""
    admin = Client(_authz.target, _authz.port)
    r = admin.call("CreateAcls", 3, {"Creations": WORLD_ACLS})
    assert [x["ErrorCode"] for x in r["Results"]] == [NONE] * len(WORLD_ACLS), r
    for t in TOPICS:
        admin.create_topic(t)
    for g in GROUPS:
        admin.commit(g, "granted", {0: 1})
    admin.commit("g-ok", "secret", {0: 1})
    admin.commit("g-ok", "readonly", {0: 1})
    wait_acls(admin, WORLD_ACLS)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def _alice(_authz, world):
    c = sasl_plain_client(_authz.sasl_plain_port, "alice")
    yield c
    c.close()


@pytest.fixture
def alice(authz, _alice):
    return _alice


# ---- 2a. the kafka-acls CLI -----------------------------------------------------------------

LISTED_RESOURCE = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*), "
                             r"patternType=(\w+)\)")
LISTED_ACL = re.compile(r"\(principal=(.+), host=(.+), operation=(\w+), "
                        r"permissionType=(\w+)\)")


def parse_acls(text):
    """The bindings kafka-acls prints (--list, --add, --remove), as (resource type, name,
    pattern, principal, host, operation, permission) tuples of its upper-case names."""
    out, resource = set(), None
    for line in text.splitlines():
        m = LISTED_RESOURCE.search(line)
        if m:
            resource = m.groups()
            continue
        m = LISTED_ACL.search(line)
        if m:
            assert resource is not None, text
            out.add(resource + m.groups())
    return out


def acls_cli(b, *args):
    return run_tool("acls", "--bootstrap-server", b.bootstrap, *args).stdout


def test_acls_cli_add_list_remove(authz, world):
    acls_cli(authz, "--add", "--allow-principal", "User:bob", "--operation", "Read",
             "--operation", "Describe", "--topic", "cli-t", "--group", "cli-g")
    acls_cli(authz, "--add", "--allow-principal", "User:bob", "--deny-principal", "User:carol",
             "--operation", "Write", "--topic", "cli-p", "--resource-pattern-type", "prefixed")
    acls_cli(authz, "--add", "--allow-principal", "User:bob", "--operation", "DescribeConfigs",
             "--cluster")
    acls_cli(authz, "--add", "--allow-principal", "User:bob", "--allow-host", "127.0.0.2",
             "--operation", "Write", "--transactional-id", "cli-tx")
    bob = {("TOPIC", "cli-t", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
           ("TOPIC", "cli-t", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
           ("GROUP", "cli-g", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
           ("GROUP", "cli-g", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
           ("TOPIC", "cli-p", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW"),
           ("CLUSTER", "kafka-cluster", "LITERAL", "User:bob", "*", "DESCRIBE_CONFIGS", "ALLOW"),
           ("TRANSACTIONAL_ID", "cli-tx", "LITERAL", "User:bob", "127.0.0.2", "WRITE", "ALLOW")}
    carol = {("TOPIC", "cli-p", "PREFIXED", "User:carol", "*", "WRITE", "DENY")}
    listed = parse_acls(acls_cli(authz, "--list"))
    world_listed = {("TOPIC" if a["ResourceType"] == 2 else "GROUP" if a["ResourceType"] == 3
                     else "TRANSACTIONAL_ID", a["ResourceName"],
                     "LITERAL" if a["ResourcePatternType"] == 3 else "PREFIXED", a["Principal"],
                     a["Host"], [k for k, v in OP.items() if v == a["Operation"]][0],
                     "ALLOW" if a["PermissionType"] == 3 else "DENY") for a in WORLD_ACLS}
    assert listed == bob | carol | world_listed
    assert parse_acls(acls_cli(authz, "--list", "--principal", "User:bob")) == bob
    assert parse_acls(acls_cli(authz, "--list", "--principal", "User:carol")) == carol
    # By resource: the literal pattern only; MATCH adds the prefixed patterns that cover it.
    assert parse_acls(acls_cli(authz, "--list", "--topic", "cli-t")) == {
        x for x in bob if x[1] == "cli-t"}
    assert parse_acls(acls_cli(authz, "--list", "--topic", "cli-pq", "--resource-pattern-type",
                               "match")) == {x for x in bob | carol if x[1] == "cli-p"}
    # The broker's own view (DescribeAcls) agrees with what the CLI printed.
    raw = described_bindings(world)
    assert (RESOURCE["TOPIC"], "cli-p", PATTERN["PREFIXED"], "User:carol", "*", OP["WRITE"],
            PERMISSION["DENY"]) in raw

    acls_cli(authz, "--remove", "--force", "--allow-principal", "User:bob", "--operation",
             "Read", "--topic", "cli-t")
    acls_cli(authz, "--remove", "--force", "--topic", "cli-p", "--resource-pattern-type",
             "prefixed")
    left = parse_acls(acls_cli(authz, "--list"))
    gone = {x for x in bob | carol if x[1] == "cli-p" or x[1:] == (
        "cli-t", "LITERAL", "User:bob", "*", "READ", "ALLOW")}
    assert left == (bob | carol | world_listed) - gone
    # Without principal or operation, --remove takes every ACL of the resources named.
    acls_cli(authz, "--remove", "--force", "--topic", "cli-t", "--group", "cli-g",
             "--transactional-id", "cli-tx", "--cluster")
    assert parse_acls(acls_cli(authz, "--list")) == world_listed


# ---- 2b. every API as alice: the table --------------------------------------------------------

def _codes(topics_key, name_key, parts_key, code_key="ErrorCode"):
    """{topic name: error code of its (single) partition} from a per-partition answer."""
    def summary(r):
        out = {}
        for t in r[topics_key]:
            for p in t[parts_key]:
                out[t[name_key]] = p[code_key]
        return out
    return summary


def _by(list_key, name_key, *fields):
    """{name: field or (fields...)} from a per-resource answer."""
    def summary(r):
        pick = (lambda x: x[fields[0]]) if len(fields) == 1 else (
            lambda x: tuple(x[f] for f in fields))
        return {x[name_key]: pick(x) for x in r[list_key]}
    return summary


def _top(*fields):
    return lambda r: r[fields[0]] if len(fields) == 1 else tuple(r[f] for f in fields)


def _top_and(list_key, code_key="ErrorCode"):
    """(top-level error, [per-entry errors])."""
    return lambda r: (r["ErrorCode"], [x[code_key] for x in r[list_key]])


BATCH = sc.record_batch([(b"k", b"v")])
TXN_BATCH = sc.record_batch([(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=0,
                            transactional=True)


def _produce(topics, batch=BATCH, transactional_id=None):
    return {"TransactionalId": transactional_id, "Acks": -1, "TimeoutMs": 10000,
            "TopicData": [{"Name": t, "PartitionData": [{"Index": 0, "Records": batch}]}
                          for t in topics]}


def _fetch(topics):
    return {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 0, "MaxBytes": 1 << 20,
            "IsolationLevel": 0, "SessionId": 0, "SessionEpoch": -1, "ForgottenTopicsData": [],
            "RackId": "", "Topics": [{"Topic": t, "Partitions": [
                {"Partition": 0, "CurrentLeaderEpoch": -1, "FetchOffset": 0,
                 "LastFetchedEpoch": -1, "LogStartOffset": -1, "PartitionMaxBytes": 1 << 20}]}
                for t in topics]}


def _topic_partitions(topics, key="PartitionIndexes"):
    return [{"Name": t, key: [0]} for t in topics]


def _configs(resources, alter=False):
    if alter:
        return {"ValidateOnly": True, "Resources": [
            {"ResourceType": rt, "ResourceName": n, "Configs": [
                {"Name": k, "ConfigOperation": 0, "Value": v}]} for rt, n, k, v in resources]}
    return {"IncludeSynonyms": False, "IncludeDocumentation": False, "Resources": [
        {"ResourceType": rt, "ResourceName": n, "ConfigurationKeys": None}
        for rt, n, _, _ in resources]}


# (ResourceType, name, a config key, a value): ConfigResource types 2 topic, 4 broker,
# 8 broker logger, 32 group.
CONFIG_RESOURCES = [(2, "secret", "retention.ms", "100000"),
                    (2, "granted", "retention.ms", "100000"),
                    (2, "nosuch", "retention.ms", "100000"),
                    (4, "1", "log.cleaner.threads", "2"),
                    (4, "", "log.cleaner.threads", "2"),
                    (8, "1", "kafka.server.KafkaApis", "DEBUG"),
                    (32, "g-ok", "consumer.session.timeout.ms", "50000")]
CONFIG_CODES = {"secret": TOPIC_AUTHZ, "granted": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ,
                # Broker and logger resources need DESCRIBE_CONFIGS / ALTER_CONFIGS on the
                # cluster; a group's configs need them on the group (READ does not imply them).
                "1": CLUSTER_AUTHZ, "": CLUSTER_AUTHZ, "g-ok": GROUP_AUTHZ}


def _config_codes(list_key):
    return lambda r: {(x["ResourceType"], x["ResourceName"]): x["ErrorCode"] for x in r[list_key]}


CONFIG_EXPECTED = {(rt, n): CONFIG_CODES[n] for rt, n, _, _ in CONFIG_RESOURCES}

JOIN = {"SessionTimeoutMs": 30000, "RebalanceTimeoutMs": 30000, "MemberId": "",
        "GroupInstanceId": None, "ProtocolType": "consumer", "Reason": None,
        "Protocols": [{"Name": "range", "Metadata": consumer_protocol_metadata(["granted"])}]}


def _commit(group, topics):
    return {"GroupId": group, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
            "GroupInstanceId": None, "Topics": [{"Name": t, "Partitions": [
                {"PartitionIndex": 0, "CommittedOffset": 1, "CommittedLeaderEpoch": -1,
                 "CommittedMetadata": ""}]} for t in topics]}


def _offset_fetch(r):
    """{group: (group error, {topic: partition error})}."""
    return {g["GroupId"]: (g["ErrorCode"], {t["Name"]: t["Partitions"][0]["ErrorCode"]
                                            for t in g["Topics"]}) for g in r["Groups"]}


SHARE_MEMBER = "AAAAAAAAAAAAAAAAAAAABA"


def _share_heartbeat(group, topics):
    return {"GroupId": group, "MemberId": SHARE_MEMBER, "MemberEpoch": 0, "RackId": None,
            "SubscribedTopicNames": topics}


def _share_fetch(group):
    return {"GroupId": group, "MemberId": SHARE_MEMBER, "ShareSessionEpoch": 0, "MaxWaitMs": 0,
            "MinBytes": 1, "MaxBytes": 1 << 20, "MaxRecords": 10, "BatchSize": 10,
            "Topics": [], "ForgottenTopicsData": []}


def _heartbeat(group, topics):
    return {"GroupId": group, "MemberId": "AAAAAAAAAAAAAAAAAAAAAQ", "MemberEpoch": 0,
            "RebalanceTimeoutMs": 45000, "SubscribedTopicNames": topics, "TopicPartitions": []}


# (id, api, version, request body, summary of the answer, expected summary). Unless the id says
# otherwise, `nosuch` does not exist, and Kafka answers it as it answers an existing topic
# alice may not see: no existence leaks to the unauthorized.
CASES = [
    # WRITE on the topic; the authorized topics of the same request are written. `pub-nosuch`
    # is covered by the prefixed WRITE: only then does Kafka say it does not exist.
    ("produce", "Produce", 11,
     _produce(["secret", "granted", "nosuch", "pub-a", "pub-nosuch", "readonly", "conflict",
               "pub-blocked"]),
     _codes("Responses", "Name", "PartitionResponses"),
     {"secret": TOPIC_AUTHZ, "granted": NONE, "nosuch": TOPIC_AUTHZ, "pub-a": NONE,
      "pub-nosuch": UNKNOWN_TOPIC, "readonly": TOPIC_AUTHZ, "conflict": TOPIC_AUTHZ,
      "pub-blocked": TOPIC_AUTHZ}),
    # A transactional batch needs WRITE on the transactional id first: the whole request fails
    # with 53 (every partition), even with a null transactional id (KafkaApis.handleProduce).
    ("produce-transactional-unauthorized-id", "Produce", 11,
     _produce(["granted", "secret"], TXN_BATCH, "tx-secret"),
     _codes("Responses", "Name", "PartitionResponses"),
     {"granted": TXN_ID_AUTHZ, "secret": TXN_ID_AUTHZ}),
    ("produce-transactional-null-id", "Produce", 11, _produce(["granted"], TXN_BATCH),
     _codes("Responses", "Name", "PartitionResponses"), {"granted": TXN_ID_AUTHZ}),
    # READ on the topic; WRITE (pub-a) does not imply READ. The top-level error stays NONE.
    ("fetch", "Fetch", 12, _fetch(["secret", "granted", "nosuch", "everyone", "hosty", "pub-a"]),
     lambda r: (r["ErrorCode"], _codes("Responses", "Topic", "Partitions")(r)),
     (NONE, {"secret": TOPIC_AUTHZ, "granted": NONE, "nosuch": TOPIC_AUTHZ, "everyone": NONE,
             "hosty": TOPIC_AUTHZ, "pub-a": TOPIC_AUTHZ})),
    # DESCRIBE, which READ, WRITE, DELETE and ALTER imply: pub-a's prefixed WRITE is enough.
    ("list-offsets", "ListOffsets", 9,
     {"ReplicaId": -1, "IsolationLevel": 0, "Topics": [
         {"Name": t, "Partitions": [{"PartitionIndex": 0, "CurrentLeaderEpoch": -1,
                                     "Timestamp": -1}]}
         for t in ["secret", "granted", "nosuch", "pub-a"]]},
     _codes("Topics", "Name", "Partitions"),
     {"secret": TOPIC_AUTHZ, "granted": NONE, "nosuch": TOPIC_AUTHZ, "pub-a": NONE}),
    ("offset-for-leader-epoch", "OffsetForLeaderEpoch", 4,
     {"ReplicaId": -1, "Topics": [
         {"Topic": t, "Partitions": [{"Partition": 0, "CurrentLeaderEpoch": -1,
                                      "LeaderEpoch": 0}]}
         for t in ["secret", "granted", "nosuch", "pub-a"]]},
     _codes("Topics", "Topic", "Partitions"),
     {"secret": TOPIC_AUTHZ, "granted": NONE, "nosuch": TOPIC_AUTHZ, "pub-a": NONE}),
    ("describe-topic-partitions", "DescribeTopicPartitions", 0,
     {"Topics": [{"Name": t} for t in ["granted", "secret", "nosuch"]],
      "ResponsePartitionLimit": 100, "Cursor": None},
     _by("Topics", "Name", "ErrorCode", "TopicAuthorizedOperations"),
     {"granted": (NONE, ops_bits("READ", "WRITE", "DESCRIBE")),
      "secret": (TOPIC_AUTHZ, OPS_OMITTED), "nosuch": (TOPIC_AUTHZ, OPS_OMITTED)}),
    # READ on the topic (pub-a: WRITE only).
    ("describe-producers", "DescribeProducers", 0,
     {"Topics": _topic_partitions(["granted", "secret", "nosuch", "readonly", "pub-a"])},
     _codes("Topics", "Name", "Partitions"),
     {"granted": NONE, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ, "readonly": NONE,
      "pub-a": TOPIC_AUTHZ}),
    # DELETE on the topic.
    ("delete-records", "DeleteRecords", 2,
     {"TimeoutMs": 10000, "Topics": [{"Name": t, "Partitions": [
         {"PartitionIndex": 0, "Offset": 0}]} for t in ["granted", "secret", "nosuch"]]},
     _codes("Topics", "Name", "Partitions"),
     {"granted": TOPIC_AUTHZ, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ}),
    ("delete-topics", "DeleteTopics", 6,
     {"TimeoutMs": 30000, "Topics": [{"Name": t, "TopicId": sc.ZERO_UUID}
                                     for t in ["granted", "secret", "nosuch"]]},
     _by("Responses", "Name", "ErrorCode"),
     {"granted": TOPIC_AUTHZ, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ}),
    # ALTER on the topic.
    ("create-partitions", "CreatePartitions", 3,
     {"TimeoutMs": 30000, "ValidateOnly": False, "Topics": [
         {"Name": t, "Count": 3, "Assignments": None} for t in ["granted", "secret", "nosuch"]]},
     _by("Results", "Name", "ErrorCode"),
     {"granted": TOPIC_AUTHZ, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ}),
    # CREATE on the topic or the cluster; existing topics alice may not create say 29 too.
    ("create-topics-unauthorized", "CreateTopics", 7,
     {"timeoutMs": 30000, "validateOnly": False, "Topics": [
         {"Name": t, "NumPartitions": 1, "ReplicationFactor": 1, "Assignments": [],
          "Configs": []} for t in [f"other-{RUN}", "granted", "secret"]]},
     _by("Topics", "Name", "ErrorCode"),
     {f"other-{RUN}": TOPIC_AUTHZ, "granted": TOPIC_AUTHZ, "secret": TOPIC_AUTHZ}),
    ("describe-configs", "DescribeConfigs", 4, _configs(CONFIG_RESOURCES),
     _config_codes("Results"), CONFIG_EXPECTED),
    ("incremental-alter-configs", "IncrementalAlterConfigs", 1,
     _configs(CONFIG_RESOURCES, alter=True), _config_codes("Responses"), CONFIG_EXPECTED),
    ("alter-configs", "AlterConfigs", 2,
     {"ValidateOnly": True, "Resources": [
         {"ResourceType": 2, "ResourceName": "granted", "Configs": [
             {"Name": "retention.ms", "Value": "100000"}]},
         {"ResourceType": 4, "ResourceName": "1", "Configs": []}]},
     _config_codes("Responses"), {(2, "granted"): TOPIC_AUTHZ, (4, "1"): CLUSTER_AUTHZ}),
    # DESCRIBE on the group (READ implies it); a group that doesn't exist is no different.
    ("find-coordinator-groups", "FindCoordinator", 6,
     {"KeyType": 0, "CoordinatorKeys": ["g-ok", "g-secret", "g-desc", "g-none"]},
     _by("Coordinators", "Key", "ErrorCode", "NodeId"),
     {"g-ok": (NONE, 1), "g-secret": (GROUP_AUTHZ, -1), "g-desc": (NONE, 1),
      "g-none": (GROUP_AUTHZ, -1)}),
    ("find-coordinator-v3", "FindCoordinator", 3, {"KeyType": 0, "Key": "g-secret"},
     _top("ErrorCode", "NodeId"), (GROUP_AUTHZ, -1)),
    # DESCRIBE on the transactional id (WRITE implies it).
    ("find-coordinator-transaction", "FindCoordinator", 6,
     {"KeyType": 1, "CoordinatorKeys": ["tx-secret", "tx-none"]},
     _by("Coordinators", "Key", "ErrorCode"), {"tx-secret": TXN_ID_AUTHZ,
                                               "tx-none": TXN_ID_AUTHZ}),
    # READ on the group: DESCRIBE (g-desc) is not enough to join.
    ("join-group", "JoinGroup", 9, dict(JOIN, GroupId="g-secret"),
     _top("ErrorCode", "GenerationId", "MemberId"), (GROUP_AUTHZ, -1, "")),
    ("join-group-describe-only", "JoinGroup", 9, dict(JOIN, GroupId="g-desc"),
     _top("ErrorCode"), GROUP_AUTHZ),
    ("sync-group", "SyncGroup", 5,
     {"GroupId": "g-secret", "GenerationId": 1, "MemberId": "m", "GroupInstanceId": None,
      "ProtocolType": "consumer", "ProtocolName": "range", "Assignments": []},
     _top("ErrorCode"), GROUP_AUTHZ),
    ("heartbeat", "Heartbeat", 4,
     {"GroupId": "g-secret", "GenerationId": 1, "MemberId": "m", "GroupInstanceId": None},
     _top("ErrorCode"), GROUP_AUTHZ),
    ("leave-group", "LeaveGroup", 5,
     {"GroupId": "g-secret", "Members": [{"MemberId": "m", "GroupInstanceId": None,
                                          "Reason": None}]},
     _top("ErrorCode"), GROUP_AUTHZ),
    # READ on the group for every partition (30 each), then READ on each topic (29).
    ("offset-commit-group", "OffsetCommit", 9, _commit("g-secret", ["granted"]),
     _codes("Topics", "Name", "Partitions"), {"granted": GROUP_AUTHZ}),
    ("offset-commit-topics", "OffsetCommit", 9,
     _commit("g-ok", ["granted", "secret", "nosuch", "pub-a", "readonly"]),
     _codes("Topics", "Name", "Partitions"),
     {"granted": NONE, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ, "pub-a": TOPIC_AUTHZ,
      "readonly": NONE}),
    # DESCRIBE on the group; all topics (Topics null) lists only those alice may DESCRIBE (the
    # admin committed g-ok's offsets of `secret` too), named topics answer 29 per partition.
    ("offset-fetch-all-topics", "OffsetFetch", 9,
     {"RequireStable": False, "Groups": [{"GroupId": g, "Topics": None}
                                         for g in ["g-ok", "g-secret", "g-desc"]]},
     _offset_fetch,
     {"g-ok": (NONE, {"granted": NONE, "readonly": NONE}), "g-secret": (GROUP_AUTHZ, {}),
      "g-desc": (NONE, {"granted": NONE})}),
    ("offset-fetch-named-topics", "OffsetFetch", 9,
     {"RequireStable": False, "Groups": [{"GroupId": "g-ok", "Topics": [
         {"Name": t, "PartitionIndexes": [0]} for t in ["granted", "secret", "nosuch"]]}]},
     _offset_fetch,
     {"g-ok": (NONE, {"granted": NONE, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ})}),
    ("offset-fetch-v7", "OffsetFetch", 7,
     {"GroupId": "g-secret", "Topics": None, "RequireStable": False},
     _top("ErrorCode", "Topics"), (GROUP_AUTHZ, [])),
    # DELETE on the group (READ is not enough) for OffsetDelete and DeleteGroups.
    ("offset-delete", "OffsetDelete", 0,
     {"GroupId": "g-ok", "Topics": [{"Name": "granted", "Partitions": [{"PartitionIndex": 0}]}]},
     _top("ErrorCode", "Topics"), (GROUP_AUTHZ, [])),
    ("delete-groups", "DeleteGroups", 2, {"GroupsNames": ["g-ok", "g-secret", "g-none"]},
     _by("Results", "GroupId", "ErrorCode"),
     {"g-ok": GROUP_AUTHZ, "g-secret": GROUP_AUTHZ, "g-none": GROUP_AUTHZ}),
    # DESCRIBE on the group; the authorized operations of those she may describe.
    ("describe-groups", "DescribeGroups", 5,
     {"Groups": ["g-ok", "g-secret", "g-desc", "g-none"], "IncludeAuthorizedOperations": True},
     _by("Groups", "GroupId", "ErrorCode", "GroupState", "AuthorizedOperations"),
     {"g-ok": (NONE, "Empty", ops_bits("READ", "DESCRIBE")),
      "g-secret": (GROUP_AUTHZ, "", OPS_OMITTED), "g-desc": (NONE, "Empty", ops_bits("DESCRIBE")),
      "g-none": (GROUP_AUTHZ, "", OPS_OMITTED)}),
    # Without DESCRIBE on the cluster, only the groups alice may DESCRIBE are listed.
    ("list-groups", "ListGroups", 5, {"StatesFilter": [], "TypesFilter": []},
     lambda r: (r["ErrorCode"], sorted(g["GroupId"] for g in r["Groups"]
                                       if g["GroupId"] in GROUPS)),
     (NONE, ["g-desc", "g-ok"])),
    # READ on the group, then DESCRIBE on every subscribed topic.
    ("consumer-group-heartbeat", "ConsumerGroupHeartbeat", 1, _heartbeat("g-secret", ["granted"]),
     _top("ErrorCode", "MemberId"), (GROUP_AUTHZ, None)),
    ("consumer-group-heartbeat-topic", "ConsumerGroupHeartbeat", 1,
     _heartbeat("g-ok", ["secret"]), _top("ErrorCode"), TOPIC_AUTHZ),
    ("consumer-group-describe", "ConsumerGroupDescribe", 0,
     {"GroupIds": ["g-secret", "g-ok"], "IncludeAuthorizedOperations": True},
     _by("Groups", "GroupId", "ErrorCode"),
     {"g-secret": GROUP_AUTHZ, "g-ok": GROUP_NOT_CONSUMER}),
    # Share groups: READ on the group (and DESCRIBE on subscribed topics) to take part,
    # DESCRIBE on the group and its topics to look at it.
    ("share-group-heartbeat", "ShareGroupHeartbeat", 1, _share_heartbeat("g-secret", ["granted"]),
     _top("ErrorCode", "MemberEpoch"), (GROUP_AUTHZ, 0)),
    ("share-group-heartbeat-topic", "ShareGroupHeartbeat", 1, _share_heartbeat("g-ok", ["secret"]),
     _top("ErrorCode"), TOPIC_AUTHZ),
    ("share-group-describe", "ShareGroupDescribe", 1,
     {"GroupIds": ["g-secret", "g-ok"], "IncludeAuthorizedOperations": True},
     _by("Groups", "GroupId", "ErrorCode"),
     {"g-secret": GROUP_AUTHZ, "g-ok": GROUP_NOT_CONSUMER}),
    ("share-fetch", "ShareFetch", 1, _share_fetch("g-secret"), _top("ErrorCode", "Responses"),
     (GROUP_AUTHZ, [])),
    ("share-acknowledge", "ShareAcknowledge", 1,
     {"GroupId": "g-secret", "MemberId": SHARE_MEMBER, "ShareSessionEpoch": 1, "Topics": []},
     _top("ErrorCode", "Responses"), (GROUP_AUTHZ, [])),
    ("describe-share-group-offsets", "DescribeShareGroupOffsets", 1,
     {"Groups": [{"GroupId": "g-secret", "Topics": None},
                 {"GroupId": "g-ok", "Topics": [{"TopicName": "secret", "Partitions": [0]},
                                                {"TopicName": "granted", "Partitions": [0]}]}]},
     lambda r: {g["GroupId"]: (g["ErrorCode"], {t["TopicName"]: [
         (p["ErrorCode"], p["StartOffset"]) for p in t["Partitions"]] for t in g["Topics"]})
         for g in r["Groups"]},
     {"g-secret": (GROUP_AUTHZ, {}),
      "g-ok": (NONE, {"secret": [(TOPIC_AUTHZ, -1)], "granted": [(NONE, -1)]})}),
    # The share coordinator's state APIs are for brokers: CLUSTER_ACTION.
    ("read-share-group-state", "ReadShareGroupState", 0,
     {"GroupId": "g-secret", "Topics": [{"TopicId": sc.Uuid(b"\x05" * 16), "Partitions": [
         {"Partition": 0, "LeaderEpoch": 0}]}]},
     lambda r: [(p["ErrorCode"], p["ErrorMessage"]) for t in r["Results"]
                for p in t["Partitions"]],
     [(CLUSTER_AUTHZ, "Cluster authorization failed.")]),
    ("write-share-group-state", "WriteShareGroupState", 1,
     {"GroupId": "g-ok", "Topics": [{"TopicId": sc.Uuid(b"\x05" * 16), "Partitions": [
         {"Partition": 0, "StateEpoch": 0, "LeaderEpoch": 0, "StartOffset": 0,
          "DeliveryCompleteCount": -1, "StateBatches": []},
         {"Partition": 1, "StateEpoch": 0, "LeaderEpoch": 0, "StartOffset": 0,
          "DeliveryCompleteCount": -1, "StateBatches": []}]}]},
     lambda r: [p["ErrorCode"] for t in r["Results"] for p in t["Partitions"]],
     [CLUSTER_AUTHZ, CLUSTER_AUTHZ]),
    # DESCRIBE on the transactional id.
    ("describe-transactions", "DescribeTransactions", 0,
     {"TransactionalIds": ["tx-secret", "tx-none"]},
     _by("TransactionStates", "TransactionalId", "ErrorCode"),
     {"tx-secret": TXN_ID_AUTHZ, "tx-none": TXN_ID_AUTHZ}),
    ("init-producer-id-transactional", "InitProducerId", 5,
     {"TransactionalId": "tx-secret", "TransactionTimeoutMs": 60000, "ProducerId": -1,
      "ProducerEpoch": -1}, _top("ErrorCode", "ProducerId"), (TXN_ID_AUTHZ, -1)),
    # The cluster resource: DESCRIBE / ALTER on it (or ALTER_CONFIGS, DESCRIBE_CONFIGS).
    ("describe-acls", "DescribeAcls", 3, ACL_ANY, _top("ErrorCode", "Resources"),
     (CLUSTER_AUTHZ, [])),
    ("create-acls", "CreateAcls", 3, {"Creations": [acl("TOPIC", "x", "ALL")]},
     lambda r: [x["ErrorCode"] for x in r["Results"]], [CLUSTER_AUTHZ]),
    ("delete-acls", "DeleteAcls", 3, {"Filters": [ACL_ANY]},
     lambda r: [(x["ErrorCode"], x["MatchingAcls"]) for x in r["FilterResults"]],
     [(CLUSTER_AUTHZ, [])]),
    ("describe-client-quotas", "DescribeClientQuotas", 1, {"Components": [], "Strict": False},
     _top("ErrorCode", "Entries"), (CLUSTER_AUTHZ, None)),
    ("alter-client-quotas", "AlterClientQuotas", 1,
     {"ValidateOnly": False, "Entries": [
         {"Entity": [{"EntityType": "user", "EntityName": "alice"}],
          "Ops": [{"Key": "producer_byte_rate", "Value": 1000.0, "Remove": False}]}]},
     lambda r: [x["ErrorCode"] for x in r["Entries"]], [CLUSTER_AUTHZ]),
    # The top-level error and one per user asked for, their names left empty (Kafka builds it
    # with DescribeUserScramCredentialsRequest.getErrorResponse, which copies no name).
    ("describe-user-scram-credentials", "DescribeUserScramCredentials", 0,
     {"Users": [{"Name": "alice"}, {"Name": "bob"}]}, _top_and("Results"),
     (CLUSTER_AUTHZ, [CLUSTER_AUTHZ, CLUSTER_AUTHZ])),
    ("describe-user-scram-credentials-all", "DescribeUserScramCredentials", 0, {"Users": []},
     _top_and("Results"), (CLUSTER_AUTHZ, [])),
    ("alter-user-scram-credentials", "AlterUserScramCredentials", 0,
     {"Deletions": [{"Name": "bob", "Mechanism": 1}], "Upsertions": []},
     _by("Results", "User", "ErrorCode"), {"bob": CLUSTER_AUTHZ}),
    ("describe-log-dirs", "DescribeLogDirs", 4, {"Topics": None}, _top_and("Results"),
     (CLUSTER_AUTHZ, [])),
    ("describe-log-dirs-topic", "DescribeLogDirs", 4,
     {"Topics": [{"Topic": "granted", "Partitions": [0]}]}, _top_and("Results"),
     (CLUSTER_AUTHZ, [])),
    ("elect-leaders", "ElectLeaders", 2,
     {"ElectionType": 0, "TimeoutMs": 10000,
      "TopicPartitions": [{"Topic": "granted", "Partitions": [0]}]},
     lambda r: (r["ErrorCode"], _codes("ReplicaElectionResults", "Topic", "PartitionResult")(r)),
     (CLUSTER_AUTHZ, {"granted": CLUSTER_AUTHZ})),
    ("elect-leaders-all", "ElectLeaders", 2,
     {"ElectionType": 0, "TimeoutMs": 10000, "TopicPartitions": None},
     _top_and("ReplicaElectionResults"), (CLUSTER_AUTHZ, [])),
    ("list-partition-reassignments", "ListPartitionReassignments", 0,
     {"TimeoutMs": 10000, "Topics": None}, _top_and("Topics"), (CLUSTER_AUTHZ, [])),
    ("alter-partition-reassignments", "AlterPartitionReassignments", 0,
     {"TimeoutMs": 10000, "Topics": [{"Name": "granted", "Partitions": [
         {"PartitionIndex": 0, "Replicas": None}]}]},
     lambda r: (r["ErrorCode"], _codes("Responses", "Name", "Partitions")(r)),
     (CLUSTER_AUTHZ, {"granted": CLUSTER_AUTHZ})),
    pytest.param(
        ("alter-replica-log-dirs", "AlterReplicaLogDirs", 2,
         {"Dirs": [{"Path": "/nonexistent",
                    "Topics": [{"Name": "granted", "Partitions": [0]}]}]},
         _codes("Results", "TopicName", "Partitions"), {"granted": CLUSTER_AUTHZ}),
        marks=pytest.mark.kactor_pending("kactor serves no AlterReplicaLogDirs (issue #32)"),
        id="alter-replica-log-dirs"),
    ("update-features", "UpdateFeatures", 1,
     {"timeoutMs": 10000, "FeatureUpdates": [], "ValidateOnly": True},
     _top_and("Results"), (CLUSTER_AUTHZ, [])),
    ("describe-quorum", "DescribeQuorum", 2,
     {"Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}]},
     _top("ErrorCode", "Topics"), (CLUSTER_AUTHZ, [])),
    ("list-config-resources", "ListConfigResources", 1, {"ResourceTypes": []},
     _top("ErrorCode", "ConfigResources"), (CLUSTER_AUTHZ, [])),
    ("describe-cluster", "DescribeCluster", 2,
     {"IncludeClusterAuthorizedOperations": True, "EndpointType": 1,
      "IncludeFencedBrokers": False},
     # Asked for and none granted: 0, not the "not asked" value.
     _top("ErrorCode", "ClusterAuthorizedOperations"), (NONE, 0)),
    ("describe-cluster-no-operations", "DescribeCluster", 2,
     {"IncludeClusterAuthorizedOperations": False, "EndpointType": 1,
      "IncludeFencedBrokers": False},
     _top("ErrorCode", "ClusterAuthorizedOperations"), (NONE, OPS_OMITTED)),
]


@pytest.mark.parametrize("case", CASES, ids=[
    c.id if hasattr(c, "id") else c[0] for c in CASES])
def test_api_as_alice(alice, case):
    _, api, version, body, summary, expected = case
    r = alice.call(api, version, body)
    assert isinstance(r, dict), r
    assert summary(r) == expected, r


# ---- 2b. Metadata, authorized operations, live changes, principals and hosts ----------------

def _metadata(c, names, version=12, auto=False, topic_ops=True, cluster_ops=False):
    body = {"Topics": None if names is None else [
        {"TopicId": sc.ZERO_UUID, "Name": n} for n in names],
        "AllowAutoTopicCreation": auto, "IncludeTopicAuthorizedOperations": topic_ops}
    if 8 <= version <= 10:
        body["IncludeClusterAuthorizedOperations"] = cluster_ops
    r = c.call("Metadata", version, body)
    assert isinstance(r, dict), r
    return r


TOPIC_OPS_ALL = ops_bits("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                         "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
CLUSTER_OPS_ALL = ops_bits("CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                           "ALTER_CONFIGS", "IDEMPOTENT_WRITE")


def test_metadata_shows_only_what_alice_may_describe(alice, world):
    names = ["secret", "granted", "nosuch", "readonly", "everyone", "hosty", f"mine-{RUN}",
             "pub-a", "conflict", "pub-blocked", "pub-nosuch"]
    r = _metadata(alice, names)
    got = {t["Name"]: (t["ErrorCode"], t["TopicAuthorizedOperations"], len(t["Partitions"]),
                       t["TopicId"].is_zero) for t in r["Topics"]}
    denied = (TOPIC_AUTHZ, OPS_OMITTED, 0, True)
    assert got == {
        # Existing or not, a topic alice may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, with
        # no partitions and a zero id; CREATE (mine-) does not imply DESCRIBE.
        "secret": denied, "nosuch": denied, "hosty": denied, f"mine-{RUN}": denied,
        "granted": (NONE, ops_bits("READ", "WRITE", "DESCRIBE"), 1, False),
        "readonly": (NONE, ops_bits("READ", "DESCRIBE"), 1, False),
        "everyone": (NONE, ops_bits("READ", "DESCRIBE"), 1, False),
        "pub-a": (NONE, ops_bits("WRITE", "DESCRIBE"), 1, False),
        # A DENY of WRITE removes WRITE only: the DESCRIBE that the allowed WRITE implies stays
        # (StandardAuthorizerData: implication applies to ALLOW ACLs, a DENY matches its own op).
        "conflict": (NONE, ops_bits("DESCRIBE"), 1, False),
        "pub-blocked": (NONE, ops_bits("DESCRIBE"), 1, False),
        # Only where alice may DESCRIBE it does she learn that a topic does not exist; its
        # authorized operations are still filled in, from the ACLs that would apply.
        "pub-nosuch": (UNKNOWN_TOPIC, ops_bits("WRITE", "DESCRIBE"), 0, True),
    }
    # Not asked for: the "omitted" value even where authorized.
    r = _metadata(alice, ["granted"], topic_ops=False)
    assert r["Topics"][0]["TopicAuthorizedOperations"] == OPS_OMITTED
    # All topics: the ones alice may not DESCRIBE are left out, without an error.
    listed = {t["Name"]: t["ErrorCode"] for t in _metadata(alice, None)["Topics"]
              if t["Name"] in TOPICS}
    assert listed == {t: NONE for t in ["granted", "readonly", "everyone", "pub-a", "conflict",
                                        "pub-blocked"]}
    # By topic id (v12+): no name given back.
    ids = {t["Name"]: t["TopicId"] for t in _metadata(world, ["secret", "granted"])["Topics"]}
    r = alice.call("Metadata", 12, {"Topics": [{"TopicId": ids[n], "Name": None}
                                               for n in ["secret", "granted"]],
                                    "AllowAutoTopicCreation": False})
    assert {t["TopicId"]: (t["Name"], t["ErrorCode"]) for t in r["Topics"]} == {
        ids["secret"]: (None, TOPIC_AUTHZ), ids["granted"]: ("granted", NONE)}


def test_metadata_v0_empty_list_is_all_topics(alice, world):
    """At v0 an empty topic list asks for every topic: alice sees only what she may describe,
    and a request whose every topic is refused lists nothing else."""
    r = alice.call("Metadata", 0, {"Topics": []})
    assert isinstance(r, dict), r
    listed = {t["Name"] for t in r["Topics"] if t["Name"] in TOPICS}
    assert "secret" not in listed and "granted" in listed, listed
    r = alice.call("Metadata", 0, {"Topics": [{"Name": "secret"}]})
    assert isinstance(r, dict), r
    assert [(t["Name"], t["ErrorCode"]) for t in r["Topics"]] == [("secret", TOPIC_AUTHZ)]


def test_metadata_auto_creation_needs_create(alice, world):
    # Auto-creation needs DESCRIBE first and then CREATE on the topic or the cluster: without
    # DESCRIBE (nosuch-auto) or with DESCRIBE but no CREATE (pub-auto, via the prefixed WRITE),
    # 29 and nothing is created.
    for version in (4, 12):
        r = _metadata(alice, ["nosuch-auto", "pub-auto"], version=version, auto=True,
                      topic_ops=version >= 8)
        assert {t["Name"]: t["ErrorCode"] for t in r["Topics"]} == {
            "nosuch-auto": TOPIC_AUTHZ, "pub-auto": TOPIC_AUTHZ}
    r = _metadata(world, ["nosuch-auto", "pub-auto"], topic_ops=False)
    assert {t["Name"]: t["ErrorCode"] for t in r["Topics"]} == {
        "nosuch-auto": UNKNOWN_TOPIC, "pub-auto": UNKNOWN_TOPIC}


def test_cluster_authorized_operations(alice, world):
    r = _metadata(alice, [], version=10, cluster_ops=True)
    assert r["ClusterAuthorizedOperations"] == 0
    r = _metadata(world, ["granted"], version=10, cluster_ops=True)
    assert r["ClusterAuthorizedOperations"] == CLUSTER_OPS_ALL
    assert r["Topics"][0]["TopicAuthorizedOperations"] == TOPIC_OPS_ALL
    r = world.call("DescribeCluster", 2, {"IncludeClusterAuthorizedOperations": True,
                                          "EndpointType": 1, "IncludeFencedBrokers": False})
    assert (r["ErrorCode"], r["ClusterAuthorizedOperations"]) == (NONE, CLUSTER_OPS_ALL)


def _fetch_codes(c, topics):
    r = c.call("Fetch", 12, _fetch(topics))
    assert isinstance(r, dict), r
    return _codes("Responses", "Topic", "Partitions")(r)


def _set_acls(admin, bindings, present=True):
    if present:
        r = admin.call("CreateAcls", 3, {"Creations": bindings})
        assert [x["ErrorCode"] for x in r["Results"]] == [NONE] * len(bindings), r
    else:
        filters = [{"ResourceTypeFilter": b["ResourceType"], "ResourceNameFilter":
                    b["ResourceName"], "PatternTypeFilter": b["ResourcePatternType"],
                    "PrincipalFilter": b["Principal"], "HostFilter": b["Host"],
                    "Operation": b["Operation"], "PermissionType": b["PermissionType"]}
                   for b in bindings]
        r = admin.call("DeleteAcls", 3, {"Filters": filters})
        assert [(x["ErrorCode"], len(x["MatchingAcls"])) for x in r["FilterResults"]] == [
            (NONE, 1)] * len(bindings), r
    wait_acls(admin, bindings, present)


def test_acl_changes_apply_to_open_connections(alice, world):
    """ACLs added and removed while alice's connection stays open: allow, then a deny over it
    wins, then removing the deny gives the access back, removing the allow takes it away."""
    topic = "secret"
    allow = acl("TOPIC", topic, "READ")
    deny = acl("TOPIC", topic, "READ", "DENY")
    assert _fetch_codes(alice, [topic]) == {topic: TOPIC_AUTHZ}
    _set_acls(world, [allow])
    assert _fetch_codes(alice, [topic]) == {topic: NONE}
    _set_acls(world, [deny])
    assert _fetch_codes(alice, [topic]) == {topic: TOPIC_AUTHZ}
    _set_acls(world, [deny], present=False)
    assert _fetch_codes(alice, [topic]) == {topic: NONE}
    _set_acls(world, [allow], present=False)
    assert _fetch_codes(alice, [topic]) == {topic: TOPIC_AUTHZ}


def test_prefixed_deny_beats_literal_allow(alice, world):
    """A DENY on a prefix covers a topic that has a literal ALLOW (the mirror of pub-blocked)."""
    deny = acl("TOPIC", "gran", "READ", "DENY", pattern="PREFIXED")
    _set_acls(world, [deny])
    try:
        assert _fetch_codes(alice, ["granted", "readonly"]) == {
            "granted": TOPIC_AUTHZ, "readonly": NONE}
    finally:
        _set_acls(world, [deny], present=False)
    assert _fetch_codes(alice, ["granted"]) == {"granted": NONE}


def test_wildcard_principal(authz, world):
    bob = sasl_plain_client(authz.sasl_plain_port, "bob")
    try:
        # User:* READ on `everyone` holds for bob, who has no ACL of his own.
        assert _fetch_codes(bob, ["everyone", "granted"]) == {
            "everyone": NONE, "granted": TOPIC_AUTHZ}
        listed = {t["Name"] for t in _metadata(bob, None)["Topics"] if t["Name"] in TOPICS}
        assert listed == {"everyone"}
    finally:
        bob.close()


def test_host_restricted_acl(authz, world):
    """alice may READ `hosty` from 127.0.0.2 only."""
    away = sasl_plain_client(authz.sasl_plain_port, "alice", source_host="127.0.0.2")
    home = sasl_plain_client(authz.sasl_plain_port, "alice", source_host="127.0.0.1")
    try:
        assert _fetch_codes(away, ["hosty"]) == {"hosty": NONE}
        assert _fetch_codes(home, ["hosty"]) == {"hosty": TOPIC_AUTHZ}
    finally:
        away.close()
        home.close()


def test_create_topics_with_prefixed_create(alice, world):
    name = f"mine-{RUN}"
    r = alice.call("CreateTopics", 7, {"timeoutMs": 30000, "validateOnly": False, "Topics": [
        {"Name": name, "NumPartitions": 2, "ReplicationFactor": 1, "Assignments": [],
         "Configs": []}]})
    t = r["Topics"][0]
    # Created, but alice may not DESCRIBE_CONFIGS it: partition count, replication factor and
    # configs are withheld (-1, -1, none) with TopicConfigErrorCode 29.
    assert (t["Name"], t["ErrorCode"], t["NumPartitions"], t["ReplicationFactor"],
            t["TopicConfigErrorCode"], t["Configs"]) == (name, NONE, -1, -1, TOPIC_AUTHZ, [])
    assert not t["TopicId"].is_zero
    assert world.wait_topic(name, partitions=2) == t["TopicId"]
    # Nor may she DESCRIBE what she created.
    assert _metadata(alice, [name])["Topics"][0]["ErrorCode"] == TOPIC_AUTHZ
    # Creating it again: she may CREATE, so she learns it exists.
    r = alice.call("CreateTopics", 7, {"timeoutMs": 30000, "validateOnly": True, "Topics": [
        {"Name": name, "NumPartitions": 1, "ReplicationFactor": 1, "Assignments": [],
         "Configs": []}]})
    assert r["Topics"][0]["ErrorCode"] == 36  # TOPIC_ALREADY_EXISTS


def _init_producer(c, txn):
    def ready():
        r = c.call("InitProducerId", 5, {"TransactionalId": txn, "TransactionTimeoutMs": 60000,
                                         "ProducerId": -1, "ProducerEpoch": -1})
        # The coordinator loading or finding its partition, or a previous transaction of the
        # same id still ending: retriable.
        return r["ErrorCode"] not in (NOT_COORDINATOR_LOADING, 15, 16, 51), r
    return c.wait_for(f"InitProducerId {txn}", ready, timeout=30)


def test_transactions_as_alice(authz, alice, world):
    # Idempotent producers: WRITE on any topic (alice) or IDEMPOTENT_WRITE on the cluster;
    # bob has neither and gets CLUSTER_AUTHORIZATION_FAILED.
    assert _init_producer(alice, None)["ErrorCode"] == NONE
    bob = sasl_plain_client(authz.sasl_plain_port, "bob")
    try:
        assert _init_producer(bob, None)["ErrorCode"] == CLUSTER_AUTHZ
    finally:
        bob.close()
    world.coordinator("tx-secret", key_type=1)
    alice.wait_for("tx-ok coordinator", lambda: (
        alice.call("FindCoordinator", 6, {"KeyType": 1, "CoordinatorKeys": ["tx-ok"]})
        ["Coordinators"][0]["ErrorCode"] == NONE, None), timeout=30)
    secret = _init_producer(world, "tx-secret")
    world.add_partitions("tx-secret", secret["ProducerId"], secret["ProducerEpoch"],
                         {"granted": [0]})
    mine = _init_producer(alice, "tx-ok")
    assert mine["ErrorCode"] == NONE
    pid, epoch = mine["ProducerId"], mine["ProducerEpoch"]

    def add(txn, p, e, topics):
        r = alice.call("AddPartitionsToTxn", 3, {
            "V3AndBelowTransactionalId": txn, "V3AndBelowProducerId": p,
            "V3AndBelowProducerEpoch": e,
            "V3AndBelowTopics": [{"Name": t, "Partitions": [0]} for t in topics]})
        return _codes("ResultsByTopicV3AndBelow", "Name", "ResultsByPartition",
                      "PartitionErrorCode")(r)
    # WRITE on every topic: one refused and the others are not attempted.
    assert add("tx-ok", pid, epoch, ["granted", "secret", "nosuch", "readonly"]) == {
        "granted": OPERATION_NOT_ATTEMPTED, "secret": TOPIC_AUTHZ, "nosuch": TOPIC_AUTHZ,
        "readonly": TOPIC_AUTHZ}
    assert add("tx-secret", secret["ProducerId"], secret["ProducerEpoch"], ["granted"]) == {
        "granted": TXN_ID_AUTHZ}
    assert add("tx-ok", pid, epoch, ["granted"]) == {"granted": NONE}
    # The group of AddOffsetsToTxn and TxnOffsetCommit needs READ.
    r = alice.call("AddOffsetsToTxn", 4, {"TransactionalId": "tx-ok", "ProducerId": pid,
                                          "ProducerEpoch": epoch, "GroupId": "g-secret"})
    assert r["ErrorCode"] == GROUP_AUTHZ
    r = alice.call("TxnOffsetCommit", 3, {
        "TransactionalId": "tx-ok", "GroupId": "g-secret", "ProducerId": pid,
        "ProducerEpoch": epoch, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
        "GroupInstanceId": None, "Topics": [{"Name": "granted", "Partitions": [
            {"PartitionIndex": 0, "CommittedOffset": 0, "CommittedLeaderEpoch": -1,
             "CommittedMetadata": ""}]}]})
    assert _codes("Topics", "Name", "Partitions")(r) == {"granted": GROUP_AUTHZ}
    r = alice.call("EndTxn", 4, {"TransactionalId": "tx-secret",
                                 "ProducerId": secret["ProducerId"],
                                 "ProducerEpoch": secret["ProducerEpoch"], "Committed": False})
    assert r["ErrorCode"] == TXN_ID_AUTHZ
    r = alice.call("DescribeTransactions", 0, {"TransactionalIds": ["tx-ok", "tx-secret"]})
    assert _by("TransactionStates", "TransactionalId", "ErrorCode", "TransactionState")(r) == {
        "tx-ok": (NONE, "Ongoing"), "tx-secret": (TXN_ID_AUTHZ, "")}
    # Both are ongoing; alice is shown the one she may DESCRIBE.
    body = {"StateFilters": [], "ProducerIdFilters": [], "DurationFilter": -1}
    r = alice.call("ListTransactions", 1, body)
    assert (r["ErrorCode"], [t["TransactionalId"] for t in r["TransactionStates"]]) == (
        NONE, ["tx-ok"])
    r = world.call("ListTransactions", 1, body)
    assert {t["TransactionalId"] for t in r["TransactionStates"]} >= {"tx-ok", "tx-secret"}
    r = alice.call("EndTxn", 4, {"TransactionalId": "tx-ok", "ProducerId": pid,
                                 "ProducerEpoch": epoch, "Committed": False})
    assert r["ErrorCode"] == NONE
    r = world.call("EndTxn", 4, {"TransactionalId": "tx-secret",
                                 "ProducerId": secret["ProducerId"],
                                 "ProducerEpoch": secret["ProducerEpoch"], "Committed": False})
    assert r["ErrorCode"] == NONE


# ---- 2c. real clients -----------------------------------------------------------------------

def _alice_conf(b):
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_plain_port}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice", "sasl.password": AUTHZ_USERS["alice"]}


def test_librdkafka_producer_without_write_fails(authz, world):
    errors = []
    p = Producer({**_alice_conf(authz), "message.timeout.ms": 10000})
    for i in range(3):
        p.produce("secret", f"v{i}".encode(),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3, errors


def test_librdkafka_produces_and_consumes_with_acls(authz, world):
    # rc-* topics: alice has READ and WRITE (prefixed); rc-* groups: READ.
    topic, group = f"rc-{RUN}", f"rc-g-{RUN}"
    world.create_topic(topic, partitions=2)
    n = 100
    errors = []
    p = Producer({**_alice_conf(authz), "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), key=str(i % 5).encode(),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(60) == 0
    assert errors == []
    c = Consumer({**_alice_conf(authz), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got = poll_values(c, n, 60)
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert sorted(got, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(n)]
    # The group's offsets, as the super user sees them: every record consumed and committed.
    r = world.call("OffsetFetch", 9, {"RequireStable": False, "Groups": [
        {"GroupId": group, "Topics": None}]})
    committed = {(t["Name"], p["PartitionIndex"]): p["CommittedOffset"]
                 for g in r["Groups"] for t in g["Topics"] for p in t["Partitions"]}
    assert sum(committed.values()) == n and set(committed) == {(topic, 0), (topic, 1)}


def test_consumer_group_describe_hides_groups_using_hidden_topics(alice, world):
    """KIP-848 groups: ConsumerGroupDescribe of a group whose member subscribes to a topic
    alice may not describe is TOPIC_AUTHORIZATION_FAILED (Kafka 4.4's response schema lists
    it), so member subscriptions and assignments do not leak topic names; a group on topics
    she may describe is shown with its member."""
    hidden, shown = f"g-cgd-hidden-{RUN}", f"g-cgd-shown-{RUN}"
    for group, topic in ((hidden, "secret"), (shown, "granted")):
        r = world.call("ConsumerGroupHeartbeat", 0, _heartbeat(group, [topic]))
        assert isinstance(r, dict) and r["ErrorCode"] == NONE, r
    grants = [acl("GROUP", hidden, "DESCRIBE"), acl("GROUP", shown, "DESCRIBE")]
    _set_acls(world, grants)
    try:
        r = alice.call("ConsumerGroupDescribe", 0, {"GroupIds": [hidden, shown],
                                                    "IncludeAuthorizedOperations": False})
        assert isinstance(r, dict), r
        got = {g["GroupId"]: (g["ErrorCode"], len(g["Members"])) for g in r["Groups"]}
        assert got == {hidden: (TOPIC_AUTHZ, 0), shown: (NONE, 1)}, r
    finally:
        _set_acls(world, grants, present=False)
