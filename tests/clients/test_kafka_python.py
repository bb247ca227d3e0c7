"""kafka-python (pure-Python client) against the broker: the same round trip as the librdkafka
suite, through an independent protocol implementation."""
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
N = 100


def create_topic(broker, name, partitions=1):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kactor-tests")
    try:
        a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        a.close()


def consume(broker, topic, expected, timeout=30):
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=2000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                out.extend(batch)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, topic_name, codec, acks):
    create_topic(broker, topic_name)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, compression_type=codec,
                      enable_idempotence=False, linger_ms=5)
    base_ts = int(time.time() * 1000) - 30_000
    futures = []
    for i in range(N):
        futures.append(p.send(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode() * (i % 5 + 1),
                              headers=[("i", str(i).encode())], timestamp_ms=base_ts + i,
                              partition=0))
    p.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    p.close(10)
    if acks != 0:
        assert [m.offset for m in metas] == list(range(N))
    msgs = consume(broker, topic_name, N)
    assert len(msgs) == N
    for i, m in enumerate(msgs):
        assert m.offset == i
        assert m.key == f"k{i}".encode()
        assert m.value == f"v{i}".encode() * (i % 5 + 1)
        assert list(m.headers) == [("i", str(i).encode())]
        assert m.timestamp == base_ts + i
        assert m.timestamp_type == 0  # CreateTime


def test_admin_lists_and_describes(broker, topic_name):
    create_topic(broker, topic_name, partitions=3)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert topic_name in a.list_topics()
        (desc,) = a.describe_topics([topic_name])
        assert desc["error_code"] == 0
        assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2], desc
        assert all(p["leader_id"] == 1 for p in desc["partitions"])
        cluster = a.describe_cluster()
        assert [b.get("broker_id", b.get("node_id")) for b in cluster["brokers"]] == [1], cluster
    finally:
        a.close()


# ---- cluster administration: elections, reassignments, quotas, SCRAM users --------------------
# kafka-python's own encodings of ElectLeaders, ListPartitionReassignments, DescribeClientQuotas
# and DescribeUserScramCredentials; every answer below was read off Apache Kafka 4.4.0 first.

def send_raw(admin, request):
    return admin._manager.run(admin._manager.send, request)


NOT_NEEDED = (84, "Leader election not needed for topic partition.")


def election_rows(resp):
    return [(t.topic, p.partition_id, p.error_code, p.error_message)
            for t in resp.replica_election_results for p in t.partition_result]


def test_elect_leaders_and_reassignments(broker, topic_name):
    from kafka.protocol.admin import ElectLeadersRequest as EL
    create_topic(broker, topic_name, partitions=2)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        def elect(election_type, tps, version=2):
            return send_raw(a, EL(election_type=election_type, version=version, timeout_ms=10000,
                                  topic_partitions=None if tps is None else [
                                      EL.TopicPartitions(topic=t, partitions=ps) for t, ps in tps]))
        # A single node already leads every partition it hosts: nothing to elect, for either
        # type; unknown names are reported per partition; duplicates are answered twice.
        for election_type in (0, 1):
            r = elect(election_type, [(topic_name, [0, 1, 1]), ("no-such-topic", [0]),
                                      (topic_name, [9])])
            assert r.error_code == 0
            assert election_rows(r) == [
                (topic_name, 0, *NOT_NEEDED), (topic_name, 1, *NOT_NEEDED),
                (topic_name, 1, *NOT_NEEDED),
                ("no-such-topic", 0, 3, "No such topic as no-such-topic"),
                (topic_name, 9, 3, f"No such partition as {topic_name}-9")]
        # All partitions: those already led by their preferred replica are left out.
        r = elect(0, None)
        assert (r.error_code, election_rows(r)) == (0, [])
        # v0 has no type field and means PREFERRED.
        assert election_rows(elect(0, [(topic_name, [1])], version=0)) == \
            [(topic_name, 1, *NOT_NEEDED)]
        r = elect(7, [(topic_name, [0])])
        assert r.error_code == 42
        assert election_rows(r) == [(topic_name, 0, 42, "Unknown election type 7")]

        assert a.list_partition_reassignments() == {}
        assert a.list_partition_reassignments(
            [TopicPartition(topic_name, 0), TopicPartition("no-such-topic", 0)]) == {}
    finally:
        a.close()


def test_describe_client_quotas_filters(broker):
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as DQ
    C = DQ.ComponentData
    cases = [
        ([], (0, [])),
        ([C(entity_type="user", match_type=0, match="bob")], (0, [])),
        ([C(entity_type="client-id", match_type=1, match=None),
          C(entity_type="user", match_type=2, match=None)], (0, [])),
        ([C(entity_type="", match_type=2, match=None)], (42, "Invalid empty entity type.")),
        ([C(entity_type="user", match_type=2, match=None)] * 2,
         (42, "Entity type user cannot appear more than once in the filter.")),
        ([C(entity_type="topic", match_type=2, match=None)], (35, "Unsupported entity type topic")),
        ([C(entity_type="user", match_type=0, match=None)],
         (42, "Request specified MATCH_TYPE_EXACT, but set match string to null.")),
        ([C(entity_type="user", match_type=1, match="x")],
         (42, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")),
        ([C(entity_type="user", match_type=2, match="x")],
         (42, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")),
        ([C(entity_type="user", match_type=5, match=None)], (42, "Unknown match type 5")),
        ([C(entity_type="ip", match_type=2, match=None),
          C(entity_type="client-id", match_type=2, match=None)],
         (42, "Invalid entity filter component combination. IP filter component should not "
              "be used with user or clientId filter component.")),
    ]
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        for version in (0, 1):
            for components, (code, detail) in cases:
                r = send_raw(a, DQ(components=components, strict=False, version=version))
                got = (r.error_code, r.entries if code == 0 else r.error_message)
                assert got == (code, detail), (version, components)
    finally:
        a.close()


def test_user_scram_credentials(broker_factory):
    """AlterUserScramCredentials / DescribeUserScramCredentials with Kafka 4.4's rules: bounds
    on iterations, known mechanisms, a user's first failure decides and a user named again after
    a valid entry is refused as a whole; each answer was read off Apache Kafka 4.4.0."""
    from kafka.protocol.admin import AlterUserScramCredentialsRequest as AS
    from kafka.protocol.admin import DescribeUserScramCredentialsRequest as DS
    b = broker_factory(name="scram")
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    pw = b"\x01" * 32

    def alter(deletions=(), upsertions=()):
        r = send_raw(a, AS(
            deletions=[AS.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
            upsertions=[AS.ScramCredentialUpsertion(name=n, mechanism=m, iterations=i,
                                                    salt=b"salt", salted_password=pw)
                        for n, m, i in upsertions]))
        # Kafka answers in a hash map's order.
        return sorted((x.user, x.error_code, x.error_message) for x in r.results)

    def describe(names=None):
        r = send_raw(a, DS(users=None if names is None else [DS.UserName(name=n) for n in names]))
        assert r.error_code == 0
        return sorted((x.user, x.error_code, x.error_message or None,
                       sorted((c.mechanism, c.iterations) for c in x.credential_infos))
                      for x in r.results)

    dup = (92, "A user credential cannot be altered twice in the same request")
    missing = (91, "Attempt to delete a user credential that does not exist")
    try:
        assert describe() == [] and describe([]) == []
        assert alter(upsertions=[("alice", 1, 8192), ("bob", 1, 1000), ("carol", 2, 20000),
                                 ("dave", 3, 8192), ("", 1, 8192)]) == [
            ("", 93, "Username must not be empty"),
            ("alice", 0, None), ("bob", 93, "Too few iterations"),
            ("carol", 93, "Too many iterations"), ("dave", 33, "Unknown SCRAM mechanism")]
        assert alter(upsertions=[("alice", 2, 4096)]) == [("alice", 0, None)]
        # Named twice after a valid entry: refused as a whole; after a failure: the failure.
        assert alter(deletions=[("alice", 1), ("alice", 2)]) == [("alice", *dup)]
        assert alter(deletions=[("zed", 1)], upsertions=[("zed", 1, 8192)]) == \
            [("zed", *missing)]
        assert alter(deletions=[("q", 9)]) == [("q", 33, "Unknown SCRAM mechanism")]
        assert describe() == [("alice", 0, None, [(1, 8192), (2, 4096)])]
        assert describe(["alice", "nobody", "nobody"]) == [
            ("alice", 0, None, [(1, 8192), (2, 4096)]),
            ("nobody", 92, "Cannot describe SCRAM credentials for the same user twice in a "
                           "single request: nobody", [])]
        assert alter(deletions=[("alice", 1)]) == [("alice", 0, None)]
        assert describe(["alice", "bob"]) == [
            ("alice", 0, None, [(2, 4096)]),
            ("bob", 91, "Attempt to describe a user credential that does not exist: bob", [])]
    finally:
        a.close()


def test_list_config_resources(broker, topic_name):
    """ListConfigResources v1 (KIP-1142): every topic, the registered brokers and the groups
    that have configs; v0 (ListClientMetricsResources) lists client-metrics resources only."""
    from kafka.protocol.admin.configs import ListConfigResourcesRequest as LCR
    create_topic(broker, topic_name)
    group = f"g-{topic_name}"
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        from kafka.admin import ConfigResource, ConfigResourceType
        a.alter_configs([ConfigResource(ConfigResourceType.GROUP, group,
                                        configs={"consumer.heartbeat.interval.ms": "6000"})],
                        incremental=True)

        def listed(types, version=1):
            kw = {} if version == 0 else {"resource_types": types}
            r = send_raw(a, LCR(version=version, **kw))
            return r.error_code, {(x.resource_name, getattr(x, "resource_type", 16))
                                  for x in r.config_resources}

        code, everything = listed([])
        assert code == 0
        assert {(topic_name, 2), ("1", 4), (group, 32)} <= everything
        code, groups = listed([32])
        assert code == 0 and (group, 32) in groups and {t for _, t in groups} == {32}
        code, topics = listed([2])
        assert (topic_name, 2) in topics and {t for _, t in topics} == {2}
        assert listed([16]) == (0, set())
        assert listed([], version=0) == (0, set())
        assert listed([99]) == (35, set())
    finally:
        a.close()


# ---- configs of resources the CLIs reach through raw requests -------------------------------

def incremental_alter(admin, resource_type, name, ops, validate_only=False):
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as IA
    r = send_raw(admin, IA(version=1, validate_only=validate_only, resources=[
        IA.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=[
            IA.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v)
            for k, op, v in ops])]))
    (x,) = r.responses
    return x.error_code, x.error_message


def legacy_alter(admin, resource_type, name, configs):
    from kafka.protocol.admin import AlterConfigsRequest as AC
    r = send_raw(admin, AC(version=1, validate_only=False, resources=[
        AC.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=[
            AC.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs])]))
    (x,) = r.responses
    return x.error_code, x.error_message


def describe_configs(admin, resource_type, name, keys=None, version=4, synonyms=True,
                     docs=True):
    from kafka.protocol.admin import DescribeConfigsRequest as DC
    r = send_raw(admin, DC(version=version, include_synonyms=synonyms,
                           include_documentation=docs, resources=[
                               DC.DescribeConfigsResource(resource_type=resource_type,
                                                          resource_name=name,
                                                          configuration_keys=keys)]))
    (x,) = r.results
    return x.error_code, x.error_message, [
        (c.name, c.value, c.read_only, c.config_source, c.is_sensitive,
         [(s.name, s.value, s.source) for s in c.synonyms], c.config_type, c.documentation)
        for c in x.configs]


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def test_client_metrics_subscriptions(broker_factory):
    """Client metrics resources (type 16) through IncrementalAlterConfigs, AlterConfigs,
    DescribeConfigs and ListConfigResources v0/v1, with Kafka 4.4.0's checks, stored forms,
    sources, types and docs (each answer read off Kafka 4.4.0). A private broker: the listing
    must hold only this test's subscriptions."""
    from kafka.protocol.admin.configs import ListConfigResourcesRequest as LCR
    b = broker_factory(name="client-metrics")
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    CM = 16
    try:
        assert describe_configs(a, CM, "") == \
            (42, "Client metrics subscription name must not be empty", [])
        assert describe_configs(a, CM, "none-set") == (0, "", [
            ("interval.ms", "300000", False, 5, False, [], 3,
             "Metrics push interval in milliseconds"),
            ("match", "", False, 5, False, [], 7, "Client match criteria"),
            ("metrics", "", False, 5, False, [], 7, "Telemetry metric name prefix list")])
        assert incremental_alter(a, CM, "s1", [("metrics", SET, " b. , a., b. "),
                                               ("interval.ms", SET, "+0500")]) == (0, None)
        assert describe_configs(a, CM, "s1", ["metrics", "interval.ms", "nope"]) == (0, "", [
            ("interval.ms", "500", False, 7, False, [("interval.ms", "500", 7)], 3,
             "Metrics push interval in milliseconds"),
            ("metrics", "b.,a.", False, 7, False, [("metrics", "b.,a.", 7)], 7,
             "Telemetry metric name prefix list")])
        assert describe_configs(a, CM, "s1", ["metrics"], version=1, synonyms=False)[2] == \
            [("metrics", "b.,a.", False, 7, False, [], 0, "")]
        not_list = "Can't {} to key metrics because its type is not LIST."
        assert incremental_alter(a, CM, "s1", [("metrics", APPEND, "c.")]) == \
            (40, not_list.format("APPEND"))
        assert incremental_alter(a, CM, "s1", [("metrics", SUBTRACT, "a.")]) == \
            (40, not_list.format("SUBTRACT"))
        assert incremental_alter(a, CM, "s1", [("metrics", SET, "a.,,b.")]) == \
            (40, "Configuration 'metrics' values must not be empty.")
        assert incremental_alter(a, CM, "s1", [("interval.ms", SET, "1e3")]) == \
            (40, "Invalid value 1e3 for configuration interval.ms: Not a number of type INT")
        assert incremental_alter(a, CM, "s1", [("match", SET, "client_id=(a")]) == \
            (40, "Illegal client matching pattern: client_id=(a")
        assert incremental_alter(a, CM, "", [("metrics", SET, "x")]) == \
            (42, "Subscription name can't be empty")
        # Deleting a key nothing set succeeds.
        assert incremental_alter(a, CM, "s1", [("nope", DELETE, None)]) == (0, None)
        # Legacy AlterConfigs replaces the whole set, with the same checks.
        assert legacy_alter(a, CM, "s2", [("interval.ms", "50")]) == (42, (
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 "
            "(1 hour)"))
        assert legacy_alter(a, CM, "s2", [("match", "client_software_name=kafka-.*")]) == \
            (0, None)
        assert describe_configs(a, CM, "s2", ["match"])[2][0][1] == "client_software_name=kafka-.*"

        def listed(version, types=()):
            kw = {} if version == 0 else {"resource_types": list(types)}
            r = send_raw(a, LCR(version=version, **kw))
            return r.error_code, sorted(x.resource_name for x in r.config_resources)

        assert listed(0) == (0, ["s1", "s2"])
        assert listed(1, [CM]) == (0, ["s1", "s2"])
        assert incremental_alter(a, CM, "s1", [("metrics", DELETE, None),
                                               ("interval.ms", DELETE, None)]) == (0, None)
        assert listed(0) == (0, ["s2"])
    finally:
        a.close()


def test_broker_logger_requests(broker_factory):
    """BROKER_LOGGER resources (type 8) through raw requests, with Kafka 4.4.0's checks, codes
    and messages (each read off Kafka 4.4.0): the resource is this node, the root logger
    cannot lose its level, levels are Kafka's upper-case names, APPEND/SUBTRACT and legacy
    AlterConfigs are refused. A private broker: levels are changed."""
    from kafka.protocol.admin.configs import ListConfigResourcesRequest as LCR
    b = broker_factory(name="loggers")
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    BL = 8
    try:
        assert describe_configs(a, BL, "1", ["root", "no.such.logger"]) == \
            (0, "", [("root", "INFO", False, 6, False, [], 0, "")])
        assert describe_configs(a, BL, "1", ["root"], version=1, synonyms=False, docs=False) \
            == (0, "", [("root", "INFO", False, 6, False, [], 0, "")])
        everything = describe_configs(a, BL, "1", [])[2]
        assert ("root", "INFO", False, 6, False, [], 0, "") in everything
        assert len(everything) > 20
        assert describe_configs(a, BL, "2")[:2] == \
            (42, "Unexpected broker id, expected 1 but received 2")
        assert describe_configs(a, BL, "")[:2] == (42, "Broker id must not be empty")
        assert describe_configs(a, BL, "x")[:2] == \
            (42, "Broker id must be an integer, but it is: x")

        assert incremental_alter(a, BL, "1", [("root", SET, "WARN")]) == (0, None)
        assert describe_configs(a, BL, "1", ["root"])[2][0][1] == "WARN"
        assert incremental_alter(a, BL, "1", [("root", SET, "INFO")], validate_only=True) == \
            (0, None)
        assert describe_configs(a, BL, "1", ["root"])[2][0][1] == "WARN"
        assert incremental_alter(a, BL, "1", [("root", SET, "INFO")]) == (0, None)
        assert incremental_alter(a, BL, "1", [("no.such.logger", SET, "DEBUG")]) == \
            (40, "Logger no.such.logger does not exist!")
        assert incremental_alter(a, BL, "1", [("no.such.logger", DELETE, None)]) == \
            (40, "Logger no.such.logger does not exist!")
        assert incremental_alter(a, BL, "1", [("root", SET, "OFF")]) == (40, (
            "Cannot set the log level of root to OFF as it is not a supported log level. "
            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"))
        assert incremental_alter(a, BL, "1", [("root", DELETE, None)]) == \
            (42, "Removing the log level of the root logger is not allowed")
        assert incremental_alter(a, BL, "1", [("root", APPEND, "INFO")]) == \
            (42, "APPEND operation is not allowed for the BROKER_LOGGER resource")
        assert incremental_alter(a, BL, "1", [("root", SUBTRACT, "INFO")]) == \
            (42, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource")
        assert incremental_alter(a, BL, "1", [("root", 7, "INFO")]) == \
            (42, "Unknown operation type 7 is not allowed for the BROKER_LOGGER resource")
        assert incremental_alter(a, BL, "1", [("root", SET, "INFO"), ("root", DELETE, None)]) \
            == (42, "Error due to duplicate config keys")
        assert incremental_alter(a, BL, "x", [("a", SET, None), ("b", SET, None)]) == \
            (42, "Null value not supported for : a, b")
        assert incremental_alter(a, BL, "2", [("root", SET, "INFO")]) == \
            (42, "Unexpected node id. Expected 1, but received 2")
        assert incremental_alter(a, BL, "x", [("root", SET, "INFO")]) == \
            (42, "Node id must be an integer, but it is: x")
        assert legacy_alter(a, BL, "1", [("root", "INFO")]) == (42, "Unknown resource type 8")
        r = send_raw(a, LCR(version=1, resource_types=[BL]))
        assert (r.error_code, [(x.resource_name, x.resource_type) for x in r.config_resources]) \
            == (0, [("1", BL)])
    finally:
        a.close()
