"""Cases: Metadata, CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, ListConfigResources, DescribeLogDirs,
ElectLeaders, ListPartitionReassignments, AlterPartitionReassignments, DeleteRecords."""
from harness import schema_codec as sc
from harness.schema_codec import ZERO_UUID, Uuid

from .client import SCHEMAS
from .engine import case

UNKNOWN_ID = Uuid(bytes(range(1, 17)))


def topic(c, suffix=""):
    return f"d.{c.slug}{suffix}"


def creatable(name, partitions=1, rf=1, configs=None, assignments=None):
    return {"Name": name, "NumPartitions": partitions, "ReplicationFactor": rf,
            "Assignments": assignments or [],
            "Configs": [{"Name": k, "Value": v} for k, v in (configs or {}).items()]}


def create(c, topics, version=7, validate_only=False, check=True, label=None):
    body = {"Topics": topics, "timeoutMs": 30000}
    if version >= 1:
        body["validateOnly"] = validate_only
    return c.call("CreateTopics", version, body, check=check, label=label)


# ---- Metadata ------------------------------------------------------------------------------

def md_topics(*names):
    return [{"TopicId": ZERO_UUID, "Name": n} for n in names]


@case("Metadata", "v13-topic")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=3)
    c.call("Metadata", 13, {"Topics": md_topics(t), "AllowAutoTopicCreation": False,
                            "IncludeTopicAuthorizedOperations": False}, check=True)


@case("Metadata", "v13-two-topics-order")
def _(c):
    """Two topics asked for, in reverse name order: the answer's order."""
    a, b = topic(c, "-a"), topic(c, "-b")
    c.create_topic(a)
    c.create_topic(b, partitions=2)
    c.call("Metadata", 13, {"Topics": md_topics(b, a, topic(c, "-missing")),
                            "AllowAutoTopicCreation": False}, check=True)


@case("Metadata", "v12-null-client-id")
def _(c):
    """A request header with a null client id."""
    t = topic(c)
    c.create_topic(t)
    frame = sc.encode_request(SCHEMAS, 3, 12, {"Topics": md_topics(t),
                                              "AllowAutoTopicCreation": False}, 5,
                              client_id=None)
    c.call_raw(frame, decode_as=(3, 12), label="Metadata v12 (null client id)")


@case("Metadata", "v13-by-topic-id")
def _(c):
    t = topic(c)
    tid = c.create_topic(t)
    c.call("Metadata", 12, {"Topics": [{"TopicId": tid, "Name": None}],
                            "AllowAutoTopicCreation": False,
                            "IncludeTopicAuthorizedOperations": False}, check=True)


@case("Metadata", "v12-unknown-topic-id")
def _(c):
    c.call("Metadata", 12, {"Topics": [{"TopicId": UNKNOWN_ID, "Name": None}],
                            "AllowAutoTopicCreation": False,
                            "IncludeTopicAuthorizedOperations": False}, check=True)


@case("Metadata", "v13-no-topics")
def _(c):
    c.call("Metadata", 13, {"Topics": [], "AllowAutoTopicCreation": False}, check=True)


@case("Metadata", "v13-unknown-topic")
def _(c):
    c.call("Metadata", 13, {"Topics": md_topics(topic(c)), "AllowAutoTopicCreation": False},
           check=True)


@case("Metadata", "v13-auto-create")
def _(c):
    """AllowAutoTopicCreation with auto.create.topics.enable=true (the default). The answer to
    the creating request itself is not compared: Kafka creates the topic asynchronously and
    answers either UNKNOWN_TOPIC_OR_PARTITION (usually) or the new topic, by timing, where
    kactor always answers the created topic."""
    t = topic(c)
    c.call("Metadata", 13, {"Topics": md_topics(t), "AllowAutoTopicCreation": True})
    c.wait_topic(t)
    c.call("Metadata", 13, {"Topics": md_topics(t), "AllowAutoTopicCreation": False},
           check=True, label="Metadata v13 after auto-create")


@case("Metadata", "v13-illegal-name")
def _(c):
    c.call("Metadata", 13, {"Topics": md_topics("bad/name"), "AllowAutoTopicCreation": True},
           check=True)


@case("Metadata", "v13-empty-name")
def _(c):
    c.call("Metadata", 13, {"Topics": md_topics(""), "AllowAutoTopicCreation": False},
           check=True)


@case("Metadata", "v13-duplicate-topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("Metadata", 13, {"Topics": md_topics(t, t), "AllowAutoTopicCreation": False},
           check=True)


@case("Metadata", "v13-authorized-operations")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("Metadata", 13, {"Topics": md_topics(t), "AllowAutoTopicCreation": False,
                            "IncludeTopicAuthorizedOperations": True}, check=True)


@case("Metadata", "v8-cluster-authorized-operations")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("Metadata", 8, {"Topics": [{"Name": t}], "AllowAutoTopicCreation": False,
                           "IncludeClusterAuthorizedOperations": True,
                           "IncludeTopicAuthorizedOperations": True}, check=True)


@case("Metadata", "v0-topic")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=2)
    c.call("Metadata", 0, {"Topics": [{"Name": t}]}, check=True)


@case("Metadata", "v1-null-topics-internal")
def _(c):
    """All topics (v1 null): only the internal topics' rows are kept for comparison, since the
    rest depends on what earlier cases created."""
    c.coordinator("d-md-internal")  # makes sure __consumer_offsets exists on both
    r = c.call("Metadata", 1, {"Topics": None})
    r["Topics"] = [t for t in r["Topics"] if t["Name"].startswith("__")]
    r["Topics"].sort(key=lambda t: t["Name"])
    for t in r["Topics"]:
        t["Partitions"] = t["Partitions"][:1]
    c.check("Metadata v1 (internal topics, first partition)", r)


@case("Metadata", "v4-auto-create-off-by-request")
def _(c):
    c.call("Metadata", 4, {"Topics": [{"Name": topic(c)}], "AllowAutoTopicCreation": False},
           check=True)


# ---- CreateTopics --------------------------------------------------------------------------

@case("CreateTopics", "v7-ok")
def _(c):
    create(c, [creatable(topic(c), 2, configs={"cleanup.policy": "compact"})])


@case("CreateTopics", "v7-already-exists")
def _(c):
    t = topic(c)
    c.create_topic(t)
    create(c, [creatable(t)])


@case("CreateTopics", "v7-validate-only")
def _(c):
    create(c, [creatable(topic(c), 3)], validate_only=True)


@case("CreateTopics", "v7-invalid-partitions")
def _(c):
    create(c, [creatable(topic(c), 0)])


@case("CreateTopics", "v7-invalid-partitions-negative")
def _(c):
    create(c, [creatable(topic(c), -5)])


@case("CreateTopics", "v7-defaults")
def _(c):
    """NumPartitions and ReplicationFactor -1: the broker defaults."""
    create(c, [creatable(topic(c), -1, -1)])


@case("CreateTopics", "v7-replication-factor-too-high")
def _(c):
    create(c, [creatable(topic(c), 1, 3)])


@case("CreateTopics", "v7-replication-factor-zero")
def _(c):
    create(c, [creatable(topic(c), 1, 0)])


@case("CreateTopics", "v7-illegal-name")
def _(c):
    create(c, [creatable("bad/name")])


@case("CreateTopics", "v7-empty-name")
def _(c):
    create(c, [creatable("")])


@case("CreateTopics", "v7-name-dot")
def _(c):
    create(c, [creatable(".")])


@case("CreateTopics", "v7-name-too-long")
def _(c):
    create(c, [creatable("x" * 250)])


@case("CreateTopics", "v7-internal-name")
def _(c):
    create(c, [creatable("__consumer_offsets")])


@case("CreateTopics", "v7-duplicate-in-request")
def _(c):
    t = topic(c)
    create(c, [creatable(t), creatable(t)])


@case("CreateTopics", "v7-unknown-config")
def _(c):
    create(c, [creatable(topic(c), configs={"no.such.config": "1"})])


@case("CreateTopics", "v7-invalid-config-value")
def _(c):
    create(c, [creatable(topic(c), configs={"retention.ms": "soon"})])


@case("CreateTopics", "v7-null-config-value")
def _(c):
    create(c, [creatable(topic(c), configs={"retention.ms": None})])


@case("CreateTopics", "v7-assignments")
def _(c):
    create(c, [creatable(topic(c), -1, -1, assignments=[
        {"PartitionIndex": 0, "BrokerIds": [1]}, {"PartitionIndex": 1, "BrokerIds": [1]}])])


@case("CreateTopics", "v7-assignments-with-count")
def _(c):
    """Assignments together with a partition count: INVALID_REQUEST."""
    create(c, [creatable(topic(c), 2, -1, assignments=[
        {"PartitionIndex": 0, "BrokerIds": [1]}])])


@case("CreateTopics", "v7-assignment-unknown-broker")
def _(c):
    create(c, [creatable(topic(c), -1, -1, assignments=[
        {"PartitionIndex": 0, "BrokerIds": [7]}])])


@case("CreateTopics", "v7-assignment-gap")
def _(c):
    create(c, [creatable(topic(c), -1, -1, assignments=[
        {"PartitionIndex": 1, "BrokerIds": [1]}])])


@case("CreateTopics", "v7-mixed-ok-and-error")
def _(c):
    create(c, [creatable(topic(c, "-a")), creatable("bad name"), creatable(topic(c, "-b"), 2)])


@case("CreateTopics", "v4-ok")
def _(c):
    create(c, [creatable(topic(c))], version=4)


@case("CreateTopics", "v2-already-exists")
def _(c):
    t = topic(c)
    c.create_topic(t)
    create(c, [creatable(t)], version=2)


# ---- DeleteTopics --------------------------------------------------------------------------

@case("DeleteTopics", "v6-by-name")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("DeleteTopics", 6, {"Topics": [{"Name": t, "TopicId": ZERO_UUID}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-by-id")
def _(c):
    t = topic(c)
    tid = c.create_topic(t)
    c.call("DeleteTopics", 6, {"Topics": [{"Name": None, "TopicId": tid}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-unknown-name")
def _(c):
    c.call("DeleteTopics", 6, {"Topics": [{"Name": topic(c), "TopicId": ZERO_UUID}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-unknown-id")
def _(c):
    c.call("DeleteTopics", 6, {"Topics": [{"Name": None, "TopicId": UNKNOWN_ID}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-name-and-id")
def _(c):
    t = topic(c)
    tid = c.create_topic(t)
    c.call("DeleteTopics", 6, {"Topics": [{"Name": t, "TopicId": tid}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-neither-name-nor-id")
def _(c):
    c.call("DeleteTopics", 6, {"Topics": [{"Name": None, "TopicId": ZERO_UUID}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-duplicate")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("DeleteTopics", 6, {"Topics": [{"Name": t, "TopicId": ZERO_UUID},
                                          {"Name": t, "TopicId": ZERO_UUID}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v6-internal")
def _(c):
    c.coordinator("d-del-internal")
    c.call("DeleteTopics", 6, {"Topics": [{"Name": "__consumer_offsets",
                                           "TopicId": ZERO_UUID}],
                               "TimeoutMs": 30000}, check=True)


@case("DeleteTopics", "v3-names")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("DeleteTopics", 3, {"TopicNames": [t, topic(c, "-missing")], "TimeoutMs": 30000},
           check=True)


@case("DeleteTopics", "v6-then-metadata")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("DeleteTopics", 6, {"Topics": [{"Name": t, "TopicId": ZERO_UUID}],
                               "TimeoutMs": 30000})

    def gone():
        m = c.call("Metadata", 13, {"Topics": md_topics(t), "AllowAutoTopicCreation": False})
        return m["Topics"][0]["ErrorCode"] == 3, m
    c.check("Metadata v13 after delete", c.wait_for("topic deleted", gone))


# ---- CreatePartitions ----------------------------------------------------------------------

def cp(c, topics, version=3, validate_only=False):
    return c.call("CreatePartitions", version, {"Topics": topics, "TimeoutMs": 30000,
                                                "ValidateOnly": validate_only}, check=True)


@case("CreatePartitions", "v3-grow")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 3, "Assignments": None}])


@case("CreatePartitions", "v3-validate-only")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 3, "Assignments": None}], validate_only=True)


@case("CreatePartitions", "v3-same-count")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=2)
    cp(c, [{"Name": t, "Count": 2, "Assignments": None}])


@case("CreatePartitions", "v3-shrink")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=2)
    cp(c, [{"Name": t, "Count": 1, "Assignments": None}])


@case("CreatePartitions", "v3-unknown-topic")
def _(c):
    cp(c, [{"Name": topic(c), "Count": 2, "Assignments": None}])


@case("CreatePartitions", "v3-duplicate")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 2, "Assignments": None},
           {"Name": t, "Count": 3, "Assignments": None}])


@case("CreatePartitions", "v3-assignments")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 3, "Assignments": [{"BrokerIds": [1]}, {"BrokerIds": [1]}]}])


@case("CreatePartitions", "v3-assignments-wrong-count")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 3, "Assignments": [{"BrokerIds": [1]}]}])


@case("CreatePartitions", "v3-assignment-unknown-broker")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 2, "Assignments": [{"BrokerIds": [5]}]}])


@case("CreatePartitions", "v0-grow")
def _(c):
    t = topic(c)
    c.create_topic(t)
    cp(c, [{"Name": t, "Count": 2, "Assignments": None}], version=0)


# ---- DescribeTopicPartitions ---------------------------------------------------------------

def dtp(c, names, limit=2000, cursor=None, label=None):
    return c.call("DescribeTopicPartitions", 0, {
        "Topics": [{"Name": n} for n in names], "ResponsePartitionLimit": limit,
        "Cursor": cursor}, check=True, label=label)


@case("DescribeTopicPartitions", "topic")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=3)
    dtp(c, [t])


@case("DescribeTopicPartitions", "unknown-topic")
def _(c):
    dtp(c, [topic(c)])


@case("DescribeTopicPartitions", "paged")
def _(c):
    t1, t2 = topic(c, "-a"), topic(c, "-b")
    c.create_topic(t1, partitions=3)
    c.create_topic(t2, partitions=2)
    r = dtp(c, [t1, t2], limit=2)
    if r.get("NextCursor"):
        dtp(c, [t1, t2], limit=2, cursor=r["NextCursor"], label="page 2")


@case("DescribeTopicPartitions", "cursor-unknown-topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dtp(c, [t], cursor={"TopicName": topic(c, "-zz"), "PartitionIndex": 0})


@case("DescribeTopicPartitions", "limit-zero")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dtp(c, [t], limit=0)


@case("DescribeTopicPartitions", "empty-name")
def _(c):
    dtp(c, [""])


@case("DescribeTopicPartitions", "duplicate")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dtp(c, [t, t])


# ---- DescribeConfigs -----------------------------------------------------------------------

TOPIC, BROKER, BROKER_LOGGER, GROUP, CLIENT_METRICS = 2, 4, 8, 32, 16


def dc(c, resources, version=4, synonyms=False, docs=False, label=None):
    return c.call("DescribeConfigs", version, {
        "Resources": [{"ResourceType": t, "ResourceName": n, "ConfigurationKeys": k}
                      for t, n, k in resources],
        "IncludeSynonyms": synonyms, "IncludeDocumentation": docs}, check=True, label=label)


@case("DescribeConfigs", "topic-all")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"retention.ms": "123456", "cleanup.policy": "compact"})
    dc(c, [(TOPIC, t, None)])


@case("DescribeConfigs", "topic-keys-synonyms")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"retention.ms": "123456"})
    dc(c, [(TOPIC, t, ["retention.ms", "segment.bytes", "min.insync.replicas"])],
       synonyms=True)


@case("DescribeConfigs", "topic-documentation")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dc(c, [(TOPIC, t, ["retention.ms", "cleanup.policy"])], docs=True)


@case("DescribeConfigs", "topic-unknown-key")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dc(c, [(TOPIC, t, ["no.such.config"])])


@case("DescribeConfigs", "topic-unknown")
def _(c):
    dc(c, [(TOPIC, topic(c), None)])


@case("DescribeConfigs", "topic-illegal-name")
def _(c):
    dc(c, [(TOPIC, "bad/name", None)])


@case("DescribeConfigs", "topic-empty-name")
def _(c):
    dc(c, [(TOPIC, "", None)])


@case("DescribeConfigs", "broker-keys")
def _(c):
    dc(c, [(BROKER, "1", ["num.partitions", "log.retention.hours", "log.retention.ms",
                          "auto.create.topics.enable", "message.max.bytes"])], synonyms=True)


@case("DescribeConfigs", "broker-default-resource")
def _(c):
    """The cluster-wide default resource (empty name)."""
    dc(c, [(BROKER, "", ["num.partitions", "log.retention.ms"])])


@case("DescribeConfigs", "broker-unknown-id")
def _(c):
    dc(c, [(BROKER, "7", ["num.partitions"])])


@case("DescribeConfigs", "broker-non-numeric")
def _(c):
    dc(c, [(BROKER, "abc", ["num.partitions"])])


@case("DescribeConfigs", "broker-logger")
def _(c):
    dc(c, [(BROKER_LOGGER, "1", ["root"])])


@case("DescribeConfigs", "group")
def _(c):
    dc(c, [(GROUP, "d-dc-group", ["consumer.session.timeout.ms",
                                  "consumer.heartbeat.interval.ms"])])


@case("DescribeConfigs", "unknown-resource-type")
def _(c):
    dc(c, [(99, "x", None)])


@case("DescribeConfigs", "v1-topic-keys")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"retention.ms": "123456"})
    dc(c, [(TOPIC, t, ["retention.ms", "cleanup.policy"])], version=1, synonyms=True)


@case("DescribeConfigs", "duplicate-resource")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dc(c, [(TOPIC, t, ["retention.ms"]), (TOPIC, t, ["retention.ms"])])


def dc_settled(c, rtype, name, keys, want):
    """DescribeConfigs once the altered values are visible ({key: value}); Kafka applies an
    alteration through its metadata log, a moment after answering the Alter request."""
    def settled():
        r = c.call("DescribeConfigs", 4, {"Resources": [
            {"ResourceType": rtype, "ResourceName": name, "ConfigurationKeys": keys}]})
        vals = {x["Name"]: x["Value"] for x in r["Results"][0]["Configs"]}
        return all(vals.get(k) == v for k, v in want.items()), r
    c.check("DescribeConfigs v4", c.wait_for("configs applied", settled))


# ---- AlterConfigs / IncrementalAlterConfigs ------------------------------------------------

def ac(c, resources, version=2, validate_only=False):
    return c.call("AlterConfigs", version, {
        "Resources": [{"ResourceType": t, "ResourceName": n,
                       "Configs": [{"Name": k, "Value": v} for k, v in cfg.items()]}
                      for t, n, cfg in resources], "ValidateOnly": validate_only}, check=True)


def iac(c, resources, version=1, validate_only=False, label=None):
    return c.call("IncrementalAlterConfigs", version, {
        "Resources": [{"ResourceType": t, "ResourceName": n,
                       "Configs": [{"Name": k, "ConfigOperation": op, "Value": v}
                                   for k, op, v in cfg]}
                      for t, n, cfg in resources], "ValidateOnly": validate_only},
        check=True, label=label)


@case("AlterConfigs", "v2-topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    ac(c, [(TOPIC, t, {"retention.ms": "7777"})])
    dc_settled(c, TOPIC, t, ["retention.ms"], {"retention.ms": "7777"})


@case("AlterConfigs", "v2-unknown-topic")
def _(c):
    ac(c, [(TOPIC, topic(c), {"retention.ms": "7777"})])


@case("AlterConfigs", "v2-invalid-value")
def _(c):
    t = topic(c)
    c.create_topic(t)
    ac(c, [(TOPIC, t, {"retention.ms": "soon"})])


@case("AlterConfigs", "v2-unknown-key")
def _(c):
    t = topic(c)
    c.create_topic(t)
    ac(c, [(TOPIC, t, {"no.such.config": "1"})])


@case("AlterConfigs", "v2-validate-only")
def _(c):
    t = topic(c)
    c.create_topic(t)
    ac(c, [(TOPIC, t, {"retention.ms": "5555"})], validate_only=True)
    dc(c, [(TOPIC, t, ["retention.ms"])])


@case("AlterConfigs", "v0-broker-read-only")
def _(c):
    ac(c, [(BROKER, "1", {"log.dirs": "/tmp/x"})], version=0, validate_only=True)


@case("AlterConfigs", "v2-duplicate-resource")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.timeout = 3.0  # Kafka 4.4.0 does not answer: don't wait the default 15 s
    ac(c, [(TOPIC, t, {"retention.ms": "1"}), (TOPIC, t, {"retention.ms": "2"})])


@case("IncrementalAlterConfigs", "v1-set-delete")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("retention.ms", 0, "4444"), ("segment.ms", 0, "600000")])])
    iac(c, [(TOPIC, t, [("retention.ms", 1, None)])], label="delete")
    dc_settled(c, TOPIC, t, ["retention.ms", "segment.ms"],
               {"retention.ms": "604800000", "segment.ms": "600000"})


@case("IncrementalAlterConfigs", "v1-append-subtract")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("cleanup.policy", 2, "compact")])])
    iac(c, [(TOPIC, t, [("cleanup.policy", 3, "delete")])], label="subtract")
    dc_settled(c, TOPIC, t, ["cleanup.policy"], {"cleanup.policy": "compact"})


@case("IncrementalAlterConfigs", "v1-append-non-list")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("retention.ms", 2, "5")])])


@case("IncrementalAlterConfigs", "v1-unknown-operation")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("retention.ms", 9, "5")])])


@case("IncrementalAlterConfigs", "v1-duplicate-key")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("retention.ms", 0, "5"), ("retention.ms", 0, "6")])])


@case("IncrementalAlterConfigs", "v1-unknown-topic")
def _(c):
    iac(c, [(TOPIC, topic(c), [("retention.ms", 0, "5")])])


@case("IncrementalAlterConfigs", "v1-invalid-value")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("min.insync.replicas", 0, "-3")])])


@case("IncrementalAlterConfigs", "v1-broker-dynamic-validate")
def _(c):
    iac(c, [(BROKER, "1", [("log.cleaner.threads", 0, "2")])], validate_only=True)


@case("IncrementalAlterConfigs", "v1-broker-read-only")
def _(c):
    iac(c, [(BROKER, "1", [("log.dirs", 0, "/tmp/x")])], validate_only=True)


@case("IncrementalAlterConfigs", "v1-group")
def _(c):
    iac(c, [(GROUP, "d-iac-group", [("consumer.session.timeout.ms", 0, "50000")])])
    dc_settled(c, GROUP, "d-iac-group", ["consumer.session.timeout.ms"],
               {"consumer.session.timeout.ms": "50000"})


@case("IncrementalAlterConfigs", "v1-group-out-of-range")
def _(c):
    iac(c, [(GROUP, "d-iac-group2", [("consumer.session.timeout.ms", 0, "1")])])


@case("IncrementalAlterConfigs", "v0-topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    iac(c, [(TOPIC, t, [("retention.ms", 0, "3333")])], version=0)


# ---- ListConfigResources -------------------------------------------------------------------

@case("ListConfigResources", "v1-topics")
def _(c):
    t = topic(c)
    c.create_topic(t)
    r = c.call("ListConfigResources", 1, {"ResourceTypes": [TOPIC]})
    r["ConfigResources"] = sorted((x for x in r["ConfigResources"]
                                   if x["ResourceName"] == t),
                                  key=lambda x: x["ResourceName"])
    c.check("ListConfigResources v1 (this case's topic)", r)


@case("ListConfigResources", "v1-brokers")
def _(c):
    c.call("ListConfigResources", 1, {"ResourceTypes": [BROKER]}, check=True)


@case("ListConfigResources", "v1-unknown-type")
def _(c):
    c.call("ListConfigResources", 1, {"ResourceTypes": [99]}, check=True)


@case("ListConfigResources", "v0-client-metrics")
def _(c):
    c.call("ListConfigResources", 0, {}, check=True)


# ---- DescribeLogDirs -----------------------------------------------------------------------

@case("DescribeLogDirs", "v5-topic")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=2)
    c.produce(t, [(b"k", b"v")])
    c.call("DescribeLogDirs", 5, {"Topics": [{"Topic": t, "Partitions": [0, 1, 7]}]},
           check=True)


@case("DescribeLogDirs", "v5-unknown-topic")
def _(c):
    c.call("DescribeLogDirs", 5, {"Topics": [{"Topic": topic(c), "Partitions": [0]}]},
           check=True)


@case("DescribeLogDirs", "v1-topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("DescribeLogDirs", 1, {"Topics": [{"Topic": t, "Partitions": [0]}]}, check=True)


# ---- ElectLeaders --------------------------------------------------------------------------

@case("ElectLeaders", "v2-preferred")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ElectLeaders", 2, {"ElectionType": 0, "TopicPartitions": [
        {"Topic": t, "Partitions": [0]}], "TimeoutMs": 30000}, check=True)


@case("ElectLeaders", "v2-unclean")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ElectLeaders", 2, {"ElectionType": 1, "TopicPartitions": [
        {"Topic": t, "Partitions": [0]}], "TimeoutMs": 30000}, check=True)


@case("ElectLeaders", "v2-unknown-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ElectLeaders", 2, {"ElectionType": 0, "TopicPartitions": [
        {"Topic": t, "Partitions": [5]}, {"Topic": topic(c, "-missing"), "Partitions": [0]}],
        "TimeoutMs": 30000}, check=True)


@case("ElectLeaders", "v2-invalid-type")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ElectLeaders", 2, {"ElectionType": 5, "TopicPartitions": [
        {"Topic": t, "Partitions": [0]}], "TimeoutMs": 30000}, check=True)


@case("ElectLeaders", "v0-preferred")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ElectLeaders", 0, {"TopicPartitions": [{"Topic": t, "Partitions": [0]}],
                               "TimeoutMs": 30000}, check=True)


@case("ElectLeaders", "v2-duplicate")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ElectLeaders", 2, {"ElectionType": 0, "TopicPartitions": [
        {"Topic": t, "Partitions": [0, 0]}], "TimeoutMs": 30000}, check=True)


# ---- ListPartitionReassignments ------------------------------------------------------------

@case("ListPartitionReassignments", "topic")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("ListPartitionReassignments", 0, {"TimeoutMs": 30000, "Topics": [
        {"Name": t, "PartitionIndexes": [0]}]}, check=True)


@case("ListPartitionReassignments", "all")
def _(c):
    c.call("ListPartitionReassignments", 0, {"TimeoutMs": 30000, "Topics": None}, check=True)


@case("ListPartitionReassignments", "unknown-topic")
def _(c):
    c.call("ListPartitionReassignments", 0, {"TimeoutMs": 30000, "Topics": [
        {"Name": topic(c), "PartitionIndexes": [0]}]}, check=True)


# ---- AlterPartitionReassignments -----------------------------------------------------------

def apr(c, t, replicas, version=0, allow_rf_change=None):
    body = {"TimeoutMs": 30000, "Topics": [
        {"Name": t, "Partitions": [{"PartitionIndex": 0, "Replicas": replicas}]}]}
    if allow_rf_change is not None:
        body["AllowReplicationFactorChange"] = allow_rf_change
    return c.call("AlterPartitionReassignments", version, body, check=True)


@case("AlterPartitionReassignments", "unknown-topic")
def _(c):
    apr(c, topic(c), [1])


@case("AlterPartitionReassignments", "unregistered-broker")
def _(c):
    """A target naming a broker that never registered: INVALID_REPLICA_ASSIGNMENT."""
    t = topic(c)
    c.create_topic(t)
    apr(c, t, [9999])


@case("AlterPartitionReassignments", "duplicate-and-empty")
def _(c):
    t = topic(c)
    c.create_topic(t)
    apr(c, t, [9999, 9999])
    apr(c, t, [], version=1, allow_rf_change=False)


@case("AlterPartitionReassignments", "cancel-none")
def _(c):
    """Cancelling (null replicas) where nothing moves: NO_REASSIGNMENT_IN_PROGRESS."""
    t = topic(c)
    c.create_topic(t)
    apr(c, t, None)


# ---- DeleteRecords -------------------------------------------------------------------------

def dr(c, topics, version=2, label=None):
    return c.call("DeleteRecords", version, {
        "Topics": [{"Name": t, "Partitions": [{"PartitionIndex": p, "Offset": o}
                                              for p, o in parts]}
                   for t, parts in topics], "TimeoutMs": 30000}, check=True, label=label)


@case("DeleteRecords", "v2-ok")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 5)
    dr(c, [(t, [(0, 3)])])


@case("DeleteRecords", "v2-to-high-watermark")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 5)
    dr(c, [(t, [(0, -1)])])


@case("DeleteRecords", "v2-beyond-high-watermark")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 2)
    dr(c, [(t, [(0, 10)])])


@case("DeleteRecords", "v2-below-start")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 5)
    dr(c, [(t, [(0, 4)])])
    dr(c, [(t, [(0, 2)])], label="below the new start")


@case("DeleteRecords", "v2-negative-offset")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dr(c, [(t, [(0, -7)])])


@case("DeleteRecords", "v2-unknown-topic-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    dr(c, [(t, [(4, 0)]), (topic(c, "-missing"), [(0, 0)])])


@case("DeleteRecords", "v2-duplicate-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 3)
    dr(c, [(t, [(0, 1), (0, 2)])])


@case("DeleteRecords", "v2-duplicate-partition-last-wins")
def _(c):
    """The offset named last is the one applied (here the lower one)."""
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 3)
    dr(c, [(t, [(0, 2), (0, 1)])])


@case("DeleteRecords", "v2-internal-topic")
def _(c):
    c.coordinator("d-dr-internal")
    dr(c, [("__consumer_offsets", [(0, 0)])])


@case("DeleteRecords", "v0-ok")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.produce(t, [(b"k", b"v")] * 3)
    dr(c, [(t, [(0, 1)])], version=0)


@case("CreateTopics", "v7-min-isr-above-replication-factor")
def _(c):
    create(c, [creatable(topic(c), 1, 1, configs={"min.insync.replicas": "2"})])


@case("CreatePartitions", "v3-internal-topic")
def _(c):
    c.coordinator("d-cp-internal")
    cp(c, [{"Name": "__consumer_offsets", "Count": 60, "Assignments": None}],
       validate_only=True)


@case("AlterConfigs", "v2-broker-dynamic-validate")
def _(c):
    ac(c, [(BROKER, "1", {"log.cleaner.threads": "2"})], validate_only=True)


@case("IncrementalAlterConfigs", "v1-cluster-default-validate")
def _(c):
    """The cluster-wide broker default resource (empty name)."""
    iac(c, [(BROKER, "", [("log.retention.ms", 0, "86400000")])], validate_only=True)


@case("DeleteRecords", "v2-compacted-topic")
def _(c):
    t = topic(c)
    c.create_topic(t, configs={"cleanup.policy": "compact"})
    c.produce(t, [(b"k", b"v")] * 3)
    dr(c, [(t, [(0, 2)])])
