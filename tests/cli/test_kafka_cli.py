"""The Apache Kafka 4.4.0 command-line tools against the broker, each checked on its output.

Each test batches its tool runs: every invocation is a JVM start (1.5-4 s on 2 cores)."""
import json
import re
import socket
import time

import pytest
from confluent_kafka import Producer

from harness.cli import KafkaCli
from harness.clients import create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce_n(broker, topic, n, base_ts=None, partition=0):
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=partition,
                  timestamp=(base_ts + i) if base_ts else 0)
    assert p.flush(30) == 0


def test_kafka_topics_create_list_describe_alter_delete(cli, topic_name):
    out = cli.run("topics", "--create", "--topic", topic_name, "--partitions", "2",
                  "--replication-factor", "1", "--config", "retention.ms=3600000").stdout
    assert f"Created topic {topic_name}." in out

    assert topic_name in cli.run("topics", "--list").stdout.split()

    out = cli.run("topics", "--describe", "--topic", topic_name).stdout
    head = out.splitlines()[0]
    assert f"Topic: {topic_name}\tTopicId: " in head
    assert "PartitionCount: 2\tReplicationFactor: 1" in head
    assert "retention.ms=3600000" in head
    for p in (0, 1):
        assert f"Topic: {topic_name}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" in out

    cli.run("topics", "--alter", "--topic", topic_name, "--partitions", "3")
    out = cli.run("topics", "--describe", "--topic", topic_name).stdout
    assert "PartitionCount: 3" in out
    assert f"Partition: 2\tLeader: 1\tReplicas: 1\tIsr: 1" in out

    cli.run("topics", "--delete", "--topic", topic_name)
    for _ in range(20):
        if topic_name not in cli.run("topics", "--list").stdout.split():
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"{topic_name} still listed after --delete")


def test_kafka_topics_create_existing_fails(cli, broker, topic_name):
    create_topic(broker, topic_name)
    out = cli.run("topics", "--create", "--topic", topic_name, check=False)
    assert out.returncode != 0
    assert "TopicExistsException" in out.stdout + out.stderr
    assert f"Topic '{topic_name}' already exists" in out.stdout + out.stderr


def test_kafka_configs_topic(cli, broker, topic_name):
    create_topic(broker, topic_name, config={"retention.ms": "3600000"})
    out = cli.run("configs", "--describe", "--entity-type", "topics",
                  "--entity-name", topic_name).stdout
    assert f"Dynamic configs for topic {topic_name} are:" in out
    assert ("retention.ms=3600000 sensitive=false "
            "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}") in out

    out = cli.run("configs", "--alter", "--entity-type", "topics", "--entity-name", topic_name,
                  "--add-config", "cleanup.policy=compact,max.message.bytes=65536",
                  "--delete-config", "retention.ms").stdout
    assert f"Completed updating config for topic {topic_name}." in out

    out = cli.run("configs", "--describe", "--entity-type", "topics",
                  "--entity-name", topic_name).stdout
    assert ("cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
            "cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}") in out
    assert ("max.message.bytes=65536 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
            "max.message.bytes=65536, DEFAULT_CONFIG:message.max.bytes=1048588}") in out
    assert "retention.ms" not in out


def test_kafka_configs_broker_and_entity_default(cli):
    out = cli.run("configs", "--alter", "--entity-type", "brokers", "--entity-name", "1",
                  "--add-config", "log.cleaner.threads=2").stdout
    assert "Completed updating config for broker 1." in out
    out = cli.run("configs", "--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "log.retention.ms=86400000").stdout
    assert "Completed updating default config for brokers in the cluster." in out
    try:
        out = cli.run("configs", "--describe", "--entity-type", "brokers",
                      "--entity-name", "1").stdout
        assert "Dynamic configs for broker 1 are:" in out
        assert ("log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                "log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}") in out

        out = cli.run("configs", "--describe", "--entity-type", "brokers",
                      "--entity-default").stdout
        assert "Default configs for brokers in the cluster are:" in out
        assert ("log.retention.ms=86400000 sensitive=false "
                "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400000}") in out

        out = cli.run("configs", "--describe", "--entity-type", "brokers", "--entity-name", "1",
                      "--all").stdout
        assert "All configs for broker 1 are:" in out
        assert re.search(r"^  log\.retention\.ms=86400000 sensitive=false synonyms=\{"
                         r"DYNAMIC_DEFAULT_BROKER_CONFIG:log\.retention\.ms=86400000", out, re.M)
        assert re.search(r"^  num\.partitions=1 sensitive=false synonyms=\{"
                         r"STATIC_BROKER_CONFIG:num\.partitions=1, DEFAULT_CONFIG:num\.partitions=1\}",
                         out, re.M), out[:3000]
    finally:
        # The shared broker must not keep these for other tests.
        cli.run("configs", "--alter", "--entity-type", "brokers", "--entity-name", "1",
                "--delete-config", "log.cleaner.threads")
        cli.run("configs", "--alter", "--entity-type", "brokers", "--entity-default",
                "--delete-config", "log.retention.ms")


def test_kafka_configs_per_broker_keys_and_secrets(cli, broker_factory):
    """listeners and the security keys are dynamic for one broker only, as Kafka has them; a
    stored password is never described back. A private broker: the values stay in its metadata
    log."""
    b = broker_factory()
    c = KafkaCli(b)
    out = c.run("configs", "--alter", "--entity-type", "brokers", "--entity-default",
                "--add-config", f"listeners=PLAINTEXT://127.0.0.1:{b.port}", check=False)
    assert out.returncode != 0
    assert ("Cannot update these configs at default cluster level, broker id must be "
            "specified: [listeners]") in out.stdout + out.stderr
    # Keystore secrets change only under a listener prefix.
    out = c.run("configs", "--alter", "--entity-type", "brokers", "--entity-name", "1",
                "--add-config", "ssl.key.password=s3cret-value", check=False)
    assert out.returncode != 0
    assert ("These security configs can be dynamically updated only per-listener using the "
            "listener prefix: [ssl.key.password]") in out.stdout + out.stderr
    out = c.run("configs", "--alter", "--entity-type", "brokers", "--entity-name", "1",
                "--add-config", "sasl.jaas.config=s3cret-value").stdout
    assert "Completed updating config for broker 1." in out
    out = c.run("configs", "--describe", "--entity-type", "brokers", "--entity-name", "1").stdout
    assert "sasl.jaas.config=null sensitive=true" in out, out
    assert "s3cret-value" not in out
    out = c.run("configs", "--describe", "--entity-type", "brokers", "--entity-name", "1",
                "--all").stdout
    assert "s3cret-value" not in out


def test_kafka_configs_broker_values_are_checked(cli):
    """A dynamic broker value is checked before it is stored: its type and bounds, and a thread
    pool may at most double or halve in one step (messages as Kafka 4.4.0's)."""
    def alter(config):
        out = cli.run("configs", "--alter", "--entity-type", "brokers", "--entity-default",
                      "--add-config", config, check=False)
        return out.returncode, out.stdout + out.stderr

    rc, text = alter("num.io.threads=abc")
    assert rc == 1
    assert ("InvalidRequestException: Invalid value abc for configuration num.io.threads: "
            "Not a number of type INT") in text
    rc, text = alter("num.network.threads=20")
    assert rc == 1
    assert ("Dynamic thread count update validation failed for num.network.threads=20, value "
            "should not be greater than double the current value 3") in text
    out = cli.run("configs", "--describe", "--entity-type", "brokers", "--entity-default")
    assert "num.io.threads" not in out.stdout and "num.network.threads" not in out.stdout


def test_kafka_acls_without_an_authorizer(cli):
    """Neither broker has an authorizer configured: kafka-acls reports that security is off
    (SECURITY_DISABLED), for listing and for adding alike."""
    out = cli.run("acls", "--list", check=False)
    assert "No Authorizer is configured on the broker" in out.stdout + out.stderr
    out = cli.run("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                  "--topic", "t", check=False)
    assert "No Authorizer is configured on the broker" in out.stdout + out.stderr


def test_leader_election_reassignments_and_quotas(cli, topic_name):
    """kafka-leader-election, kafka-reassign-partitions --list and the quota/SCRAM side of
    kafka-configs on a single node, where every partition is led by its preferred replica, no
    reassignment runs and no quota or credential has been set (outputs read off Kafka 4.4.0)."""
    cli.run("topics", "--create", "--topic", topic_name, "--partitions", "2")
    out = cli.run("leader-election", "--election-type", "PREFERRED", "--topic", topic_name,
                  "--partition", "1")
    assert out.stdout.strip() == f"Valid replica already elected for partitions {topic_name}-1"
    # Over all partitions, those that need no election are left out of the answer.
    out = cli.run("leader-election", "--election-type", "UNCLEAN", "--all-topic-partitions")
    assert out.stdout.strip() == ""
    out = cli.run("leader-election", "--election-type", "PREFERRED", "--topic", "no-such-topic",
                  "--partition", "0", check=False)
    assert out.returncode == 1
    assert "UnknownTopicOrPartitionException: No such topic as no-such-topic" in out.stdout
    assert "1 replica(s) could not be elected" in out.stderr
    out = cli.run("reassign-partitions", "--list")
    assert out.stdout.strip() == "No partition reassignments found."
    for entity_type in ("clients", "users", "ips"):
        out = cli.run("configs", "--describe", "--entity-type", entity_type)
        assert out.stdout.strip() == "", (entity_type, out.stdout)


def test_kafka_configs_groups(cli, topic_name):
    """Group configs (`--entity-type groups`, KIP-848): set, listed, described with their
    sources and synonyms, refused out of the broker's range, deleted (outputs as Kafka 4.4.0's)."""
    group = f"g-{topic_name}"

    def configs(*args, check=True):
        return cli.run("configs", "--entity-type", "groups", *args, check=check)

    out = configs("--describe", "--entity-name", group)
    assert out.stdout.strip() == \
        f"The group '{group}' doesn't exist and doesn't have dynamic config."
    out = configs("--alter", "--entity-name", group, "--add-config",
                  "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest")
    assert out.stdout.strip() == f"Completed updating config for group {group}."
    out = configs("--describe", "--entity-name", group)
    assert out.stdout.startswith(f"Dynamic configs for group {group} are:\n")
    assert ("  consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
            "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms"
            "=45000}\n") in out.stdout
    assert ("  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
            "share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}"
            "\n") in out.stdout
    # Without a name: every group that has configs (ListConfigResources).
    assert f"Dynamic configs for group {group} are:" in configs("--describe").stdout
    out = configs("--describe", "--entity-name", group, "--all")
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("  ")]
    assert len(lines) == 21, out.stdout
    assert ("  consumer.heartbeat.interval.ms=5000 sensitive=false synonyms={DEFAULT_CONFIG:"
            "group.consumer.heartbeat.interval.ms=5000}") in lines
    out = configs("--alter", "--entity-name", group, "--add-config",
                  "consumer.heartbeat.interval.ms=60000", check=False)
    assert out.returncode == 1
    assert ("InvalidConfigurationException: consumer.heartbeat.interval.ms must be in the range "
            "5000 to 15000 inclusive.") in out.stdout + out.stderr
    out = configs("--alter", "--entity-name", group, "--add-config", "no.such.key=1",
                  check=False)
    assert "Unknown group config name: no.such.key" in out.stdout + out.stderr
    configs("--alter", "--entity-name", group, "--delete-config",
            "consumer.session.timeout.ms,share.auto.offset.reset")
    out = configs("--describe", "--entity-name", group)
    assert out.stdout.strip() == \
        f"The group '{group}' doesn't exist and doesn't have dynamic config."


def test_kafka_configs_client_metrics(cli, topic_name):
    """Client metrics subscriptions (`--entity-type client-metrics`, KIP-714): stored as Kafka
    renders them, described with their sources, listed without a name, checked with Kafka's
    messages and deleted (outputs as Kafka 4.4.0's)."""
    sub = f"cm-{topic_name}"

    def configs(*args, check=True):
        return cli.run("configs", "--entity-type", "client-metrics", *args, check=check)

    out = configs("--describe", "--entity-name", sub)
    assert out.stdout.strip() == \
        f"The client-metric '{sub}' doesn't exist and doesn't have dynamic config."
    out = configs("--alter", "--entity-name", sub, "--add-config",
                  "metrics=[org.apache.kafka.producer., org.apache.kafka.consumer.],"
                  "interval.ms=05000,match=[client_id=abc.*,client_software_name=kafka-python]")
    assert out.stdout.strip() == f"Completed updating config for client-metric {sub}."
    out = configs("--describe", "--entity-name", sub)
    assert out.stdout == (
        f"Dynamic configs for client-metric {sub} are:\n"
        "  interval.ms=5000 sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:"
        "interval.ms=5000}\n"
        "  match=client_id=abc.*,client_software_name=kafka-python sensitive=false synonyms={"
        "DYNAMIC_CLIENT_METRICS_CONFIG:match=client_id=abc.*,client_software_name=kafka-python}\n"
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer. sensitive=false "
        "synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:metrics=org.apache.kafka.producer.,"
        "org.apache.kafka.consumer.}\n")
    # Without a name: every subscription (ListConfigResources).
    assert f"Dynamic configs for client-metric {sub} are:" in configs("--describe").stdout
    for bad, message in [
        ("interval.ms=99", "InvalidRequestException: Invalid value 99 for interval.ms, interval "
                           "must be between 100 and 3600000 (1 hour)"),
        ("match=[client_id]", "InvalidConfigurationException: Illegal client matching pattern: "
                              "client_id"),
        ("colour=blue", "InvalidRequestException: Unknown client metrics configuration: colour"),
    ]:
        out = configs("--alter", "--entity-name", sub, "--add-config", bad, check=False)
        assert out.returncode == 1 and message in out.stdout + out.stderr, (bad, out.stderr)
    configs("--alter", "--entity-name", sub, "--delete-config", "interval.ms,match")
    out = configs("--describe", "--entity-name", sub, "--all")
    assert out.stdout == (
        f"All configs for client-metric {sub} are:\n"
        "  interval.ms=300000 sensitive=false synonyms={}\n"
        "  match= sensitive=false synonyms={}\n"
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer. sensitive=false "
        "synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:metrics=org.apache.kafka.producer.,"
        "org.apache.kafka.consumer.}\n")
    configs("--alter", "--entity-name", sub, "--delete-config", "metrics")
    out = configs("--describe", "--entity-name", sub)
    assert out.stdout.strip() == \
        f"The client-metric '{sub}' doesn't exist and doesn't have dynamic config."


# A logger that logs every accepted connection at DEBUG, and what that line says.
ACCEPTOR_LOGGER = {
    "kactor": ("kactor_actors.network.socket_server", "accepted connection"),
    "kafka": ("kafka.network.DataPlaneAcceptor", "Accepted connection from"),
}


def test_kafka_configs_broker_loggers(broker_factory, target):
    """Broker loggers (`--entity-type broker-loggers`): described with their levels, changed at
    run time (a DEBUG line appears in the broker's log once its logger is set to DEBUG, and no
    more after the level is deleted), bad changes refused with Kafka 4.4.0's messages. A
    private broker: its levels and its log are the test's own."""
    b = broker_factory(name="loggers")
    c = KafkaCli(b)
    logger, debug_line = ACCEPTOR_LOGGER[target]

    def loggers(*args, check=True):
        return c.run("configs", "--entity-type", "broker-loggers", *args, check=check)

    def level_of(name):
        out = loggers("--describe", "--entity-name", "1").stdout
        assert out.startswith("Dynamic configs for broker-logger 1 are:\n"), out[:200]
        levels = dict(re.findall(r"^  (\S+)=(\S+) sensitive=false synonyms=\{\}$", out, re.M))
        return levels.get(name)

    def accepted():
        return b.log_text().count(debug_line)

    def connect():
        with socket.create_connection(("127.0.0.1", b.port), timeout=5):
            time.sleep(0.3)

    assert (level_of("root"), level_of(logger)) == ("INFO", "INFO")
    connect()
    assert accepted() == 0
    out = loggers("--alter", "--entity-name", "1", "--add-config", f"{logger}=DEBUG")
    assert out.stdout.strip() == "Completed updating config for broker-logger 1."
    assert level_of(logger) == "DEBUG"
    before = accepted()
    connect()
    deadline = time.monotonic() + 10
    while accepted() == before:
        assert time.monotonic() < deadline, "no DEBUG line after the level was set"
        time.sleep(0.2)
    loggers("--alter", "--entity-name", "1", "--delete-config", logger)
    time.sleep(0.5)
    after = accepted()
    connect()
    time.sleep(1)
    assert accepted() == after, "DEBUG lines still logged after the level was deleted"
    assert level_of(logger) == "INFO"

    for args, message in [
        (("--add-config", f"{logger}=debug"),
         f"Cannot set the log level of {logger} to debug as it is not a supported log level. "
         "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
        # The tool looks the logger up first.
        (("--add-config", "no.such.logger=DEBUG"), "Invalid broker logger(s): no.such.logger"),
        (("--delete-config", "root"), "Removing the log level of the root logger is not allowed"),
    ]:
        out = loggers("--alter", "--entity-name", "1", *args, check=False)
        assert out.returncode == 1 and message in out.stdout + out.stderr, (args, out.stderr)
    out = loggers("--describe", "--entity-name", "2")
    assert out.stdout.strip() == \
        "The broker-logger '2' doesn't exist and doesn't have dynamic config."


def test_kafka_configs_scram_users_survive_a_restart(broker_factory):
    """SCRAM credentials set with kafka-configs (AlterUserScramCredentials) are described by
    mechanism and iteration count, kept in the metadata log across a restart, and deleted per
    mechanism (outputs as Kafka 4.4.0's)."""
    b = broker_factory(name="scram")
    cli = KafkaCli(b)

    def users(*args, check=True):
        return cli.run("configs", "--entity-type", "users", *args, check=check)

    # Both mechanisms in one request name the user twice, which Kafka refuses as a whole.
    out = users("--alter", "--entity-name", "alice", "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                "SCRAM-SHA-512=[password=alice-secret]", check=False)
    assert "A user credential cannot be altered twice in the same request" in out.stderr
    for mechanism in ("SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
                      "SCRAM-SHA-512=[password=alice-secret]"):
        out = users("--alter", "--entity-name", "alice", "--add-config", mechanism)
        assert out.stdout.strip() == "Completed updating config for user alice."
    b.restart()
    out = users("--describe", "--entity-name", "alice")
    prefix = "SCRAM credential configs for user-principal 'alice' are "
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith(prefix)]
    # Kafka lists the mechanisms in a hash map's order.
    assert sorted(line[len(prefix):].split(", ")) == \
        ["SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096"]
    users("--alter", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-512")
    out = users("--describe", "--entity-name", "alice")
    assert prefix + "SCRAM-SHA-256=iterations=8192\n" in out.stdout
    out = users("--describe", "--entity-name", "bob")
    assert "SCRAM credential" not in out.stdout


# Broker keys a user looks for, with Kafka 4.4.0's defaults as `kafka-configs --describe
# --entity-type brokers --entity-name 1 --all` lists them (read off the reference broker).
KAFKA_BROKER_DEFAULTS = {
    "log.retention.hours": "168",
    "log.roll.hours": "168",
    "log.retention.check.interval.ms": "300000",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "log.cleaner.threads": "1",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "num.io.threads": "8",
    "num.network.threads": "3",
    "num.recovery.threads.per.data.dir": "2",
    "background.threads": "10",
    "socket.request.max.bytes": "104857600",
    "socket.send.buffer.bytes": "102400",
    "max.connection.creation.rate": "2147483647",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.coordinator.threads": "4",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.retention.minutes": "10080",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "producer.id.expiration.ms": "86400000",
    "delete.records.purgatory.purge.interval.requests": "1",
}


def test_kafka_configs_broker_all_lists_kafkas_keys_and_defaults(cli):
    out = cli.run("configs", "--describe", "--entity-type", "brokers", "--entity-name", "1",
                  "--all").stdout
    missing = [f"{k}={v}" for k, v in KAFKA_BROKER_DEFAULTS.items()
               if f"\n  {k}={v} sensitive=false synonyms={{DEFAULT_CONFIG:{k}={v}}}\n" not in out]
    assert not missing, missing
    # A value given at start-up is STATIC_BROKER_CONFIG, followed by Kafka's own default.
    assert ("\n  offsets.topic.replication.factor=1 sensitive=false synonyms={"
            "STATIC_BROKER_CONFIG:offsets.topic.replication.factor=1, "
            "DEFAULT_CONFIG:offsets.topic.replication.factor=3}\n") in out
    assert ("\n  transaction.state.log.min.isr=1 sensitive=false synonyms={"
            "STATIC_BROKER_CONFIG:transaction.state.log.min.isr=1, "
            "DEFAULT_CONFIG:transaction.state.log.min.isr=2}\n") in out
    # Kafka has no default for node.id: no DEFAULT_CONFIG synonym.
    assert "\n  node.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:node.id=1}\n" in out


def test_broker_configs_read_only_as_kafka(broker):
    """DescribeConfigs' read_only as Kafka 4.4.0 reports it: false for its dynamic broker keys
    (the primary broker synonym of each topic config, thread pools, cleaner, connection
    limits), true for the rest, including the .hours/.minutes fallbacks of the .ms keys."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1")
    entries = list(admin.describe_configs([res], request_timeout=30).values())[0].result(30)
    dynamic = ["log.retention.ms", "log.roll.ms", "log.segment.bytes", "message.max.bytes", "min.insync.replicas",
               "log.cleaner.threads", "num.io.threads", "num.network.threads",
               "compression.gzip.level", "max.connections"]
    static = ["node.id", "process.roles", "log.dirs", "num.partitions",
              "offsets.topic.replication.factor", "socket.request.max.bytes",
              "log.retention.hours", "log.retention.minutes", "log.roll.hours",
              "log.flush.scheduler.interval.ms"]
    assert [k for k in dynamic if entries[k].is_read_only] == []
    assert [k for k in static if not entries[k].is_read_only] == []


def console_consume(cli, topic, n, *props):
    args = ["--topic", topic, "--partition", "0", "--offset", "earliest", "--max-messages", str(n),
            "--timeout-ms", "30000"]
    for p in props:
        args += ["--formatter-property", p]
    return cli.run("console-consumer", *args)


def test_console_producer_consumer_keys_and_headers(cli, broker, topic_name):
    create_topic(broker, topic_name)
    lines = "h1:v1,h2:v2\tk1\tval1\nh1:x\tk2\tval2\nh3:z\tk3\tval3\n"
    cli.run("console-producer", "--topic", topic_name, "--reader-property", "parse.key=true",
            "--reader-property", "parse.headers=true",
            "--command-property", "enable.idempotence=false", input=lines)
    out = console_consume(cli, topic_name, 3, "print.key=true", "print.headers=true",
                          "print.offset=true", "print.partition=true")
    assert out.stdout.splitlines() == [
        "Partition:0\tOffset:0\th1:v1,h2:v2\tk1\tval1",
        "Partition:0\tOffset:1\th1:x\tk2\tval2",
        "Partition:0\tOffset:2\th3:z\tk3\tval3",
    ]
    assert "Processed a total of 3 messages" in out.stderr


def test_java_producer_each_codec_then_dump_log(cli, broker, topic_name):
    """The Java KafkaProducer (console producer) with every codec; the Java consumer reads them
    back and kafka-dump-log finds one batch per codec in the segment the broker wrote."""
    create_topic(broker, topic_name)
    for codec in CODECS:
        cli.run("console-producer", "--topic", topic_name, "--compression-codec", codec,
                "--reader-property", "parse.key=true",
                "--command-property", "enable.idempotence=false",
                "--command-property", "linger.ms=50",
                input=f"{codec}-a\tfirst {codec}\n{codec}-b\tsecond {codec}\n")
    out = console_consume(cli, topic_name, 10, "print.key=true", "print.offset=true")
    expected = []
    for i, codec in enumerate(CODECS):
        expected += [f"Offset:{2 * i}\t{codec}-a\tfirst {codec}",
                     f"Offset:{2 * i + 1}\t{codec}-b\tsecond {codec}"]
    assert out.stdout.splitlines() == expected

    seg = broker.partition_dir(topic_name) / "00000000000000000000.log"
    assert seg.exists(), sorted(p.name for p in broker.partition_dir(topic_name).iterdir())
    dump = cli.run("dump-log", "--files", seg, "--print-data-log").stdout
    batches = [l for l in dump.splitlines() if l.startswith("baseOffset:")]
    # Same producer codec as the topic's default (compression.type=producer): kept as sent.
    assert [re.search(r"compresscodec: (\w+)", b).group(1) for b in batches] == CODECS
    assert all("isvalid: true" in b and "magic: 2" in b for b in batches)
    assert [re.search(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+)", b).groups()
            for b in batches] == [(str(2 * i), str(2 * i + 1), "2") for i in range(5)]
    assert "| offset: 0 CreateTime: " in dump and "key: none-a payload: first none" in dump
    assert "key: zstd-b payload: second zstd" in dump


def test_get_offsets_and_delete_records(cli, broker, topic_name, tmp_path):
    create_topic(broker, topic_name)
    base_ts = int(time.time() * 1000) - 100_000
    produce_n(broker, topic_name, 10, base_ts=base_ts)

    assert cli.run("get-offsets", "--topic", topic_name).stdout.split() == [f"{topic_name}:0:10"]
    assert cli.run("get-offsets", "--topic", topic_name, "--time", "earliest").stdout.split() \
        == [f"{topic_name}:0:0"]
    # By timestamp: the first offset whose timestamp is >= the one asked for.
    assert cli.run("get-offsets", "--topic", topic_name, "--time", str(base_ts + 5)).stdout.split() \
        == [f"{topic_name}:0:5"]

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "offset": 4}]}))
    out = cli.run("delete-records", "--offset-json-file", spec).stdout
    assert "Records delete operation completed:" in out
    assert f"partition: {topic_name}-0\tlow_watermark: 4" in out

    assert cli.run("get-offsets", "--topic", topic_name, "--time", "earliest").stdout.split() \
        == [f"{topic_name}:0:4"]


def test_log_dirs(cli, broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    produce_n(broker, topic_name, 5)
    out = cli.run("log-dirs", "--describe", "--topic-list", topic_name).stdout
    assert "Received log directory information from brokers 1" in out
    doc = json.loads(out.strip().splitlines()[-1])
    (b,) = doc["brokers"]
    assert b["broker"] == 1
    (d,) = b["logDirs"]
    assert d["error"] is None
    assert d["logDir"] == str(broker.data_dir)
    parts = {p["partition"]: p for p in d["partitions"]}
    assert sorted(parts) == [f"{topic_name}-0", f"{topic_name}-1"]
    assert parts[f"{topic_name}-0"]["size"] > 0
    assert parts[f"{topic_name}-1"]["size"] == 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())


def test_broker_api_versions(cli, broker):
    out = cli.run("broker-api-versions").stdout
    assert out.startswith(f"127.0.0.1:{broker.port} (id: 1 rack: null isFenced: false) -> (")
    for line in ["Produce(0): 0 to 13 [usable: 13]", "Fetch(1): 4 to 18 [usable: 18]",
                 "Metadata(3): 0 to 13 [usable: 13]", "ApiVersions(18): 0 to 5 [usable: 5]",
                 "CreateTopics(19): 2 to 7 [usable: 7]", "DeleteTopics(20): 1 to 6 [usable: 6]",
                 "DescribeConfigs(32): 1 to 4 [usable: 4]",
                 "DescribeQuorum(55): 0 to 2 [usable: 2]"]:
        assert f"\t{line}" in out, line


def test_metadata_quorum_describe(cli, broker):
    out = cli.run("metadata-quorum", "describe", "--status").stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))
    assert fields["LeaderId"] == "1"
    assert int(fields["LeaderEpoch"]) >= 1
    assert int(fields["HighWatermark"]) > 0
    assert fields["MaxFollowerLag"] == "0"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", fields["ClusterId"])
    voters = json.loads(fields["CurrentVoters"])
    assert [v["id"] for v in voters] == [1]
    assert voters[0]["endpoints"] == [f"CONTROLLER://127.0.0.1:{broker.controller_port}"]
    assert fields["CurrentObservers"] == "[]"

    out = cli.run("metadata-quorum", "describe", "--replication").stdout
    rows = [l.split() for l in out.strip().splitlines()]
    assert rows[0][:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"]
    assert rows[1][0] == "1" and rows[1][-1] == "Leader" and rows[1][3] == "0"


def metadata_records(cli, broker, record_type):
    """The payloads of `record_type` records in the broker's metadata log, as kafka-dump-log
    decodes them."""
    seg = broker.data_dir / "__cluster_metadata-0" / "00000000000000000000.log"
    dump = cli.run("dump-log", "--cluster-metadata-decoder", "--files", seg).stdout
    return [json.loads(m.group(1))["data"] for m in
            re.finditer(r"payload: (\{.*\})$", dump, re.M)
            if json.loads(m.group(1))["type"] == record_type]


def test_kafka_cluster_unregister(broker_factory, topic_name):
    """kafka-cluster unregister (UnregisterBroker): an unknown id is refused with
    BROKER_ID_NOT_REGISTERED; a registered one, even the live broker itself (Kafka 4.4 does not
    check), is removed with an UnregisterBrokerRecord after it loses its leaderships. A private
    broker: what becomes of it afterwards differs (Kafka's broker stays unregistered, kactor's
    registers again)."""
    b = broker_factory(name="unregister")
    c = KafkaCli(b)
    create_topic(b, topic_name)
    out = c.run("cluster", "unregister", "--id", "5", check=False)
    assert out.returncode == 1
    assert ("BrokerIdNotRegisteredException: Broker ID 5 is not currently registered"
            in out.stderr)
    out = c.run("cluster", "unregister", "--id", "1")
    assert out.stdout.strip() == "Broker 1 is no longer registered."
    (registration,) = metadata_records(c, b, "REGISTER_BROKER_RECORD")[:1]
    deadline = time.monotonic() + 10
    while not (gone := metadata_records(c, b, "UNREGISTER_BROKER_RECORD")):
        assert time.monotonic() < deadline, "no UnregisterBrokerRecord in the metadata log"
        time.sleep(0.5)
    assert gone[0] == {"brokerId": 1, "brokerEpoch": registration["brokerEpoch"]}
    leaderless = [r for r in metadata_records(c, b, "PARTITION_CHANGE_RECORD")
                  if r.get("leader") == -1]
    assert leaderless, "the partition it led was not left leaderless"


def quorum_high_watermark(cli):
    out = cli.run("metadata-quorum", "describe", "--status").stdout
    return int(re.search(r"^HighWatermark:\s+(\d+)$", out, re.M).group(1))


def test_metadata_high_watermark_moves_while_idle(cli, broker_factory):
    """The active controller appends a NoOpRecord every metadata.max.idle.interval.ms (500 by
    default), so the high watermark of an idle cluster keeps moving; 0 turns that off."""
    first = quorum_high_watermark(cli)
    time.sleep(3)
    # At least 3 s (plus a JVM start) at 500 ms a record.
    assert quorum_high_watermark(cli) - first >= 5

    quiet = KafkaCli(broker_factory(overrides={"metadata.max.idle.interval.ms": "0"}))
    # Let start-up settle (the broker registers and is unfenced in its first seconds).
    time.sleep(2)
    first = quorum_high_watermark(quiet)
    time.sleep(3)
    assert quorum_high_watermark(quiet) == first


def features_table(cli):
    """kafka-features describe as {feature: (SupportedMin, SupportedMax, FinalizedLevel)}."""
    out = cli.run("features", "describe").stdout
    return {name: rest for name, *rest in re.findall(
        r"^Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
        r"FinalizedVersionLevel: (\S+)", out, re.M)}


# Kafka 4.4.0's supported range of every feature its release version 4.4 sets.
KAFKA_FEATURE_RANGES = {
    "eligible.leader.replicas.version": ("0", "1"),
    "group.version": ("0", "1"),
    "kraft.version": ("0", "1"),
    "metadata.version": ("3.3-IV3", "4.4-IV2"),
    "share.version": ("0", "2"),
    "streams.version": ("0", "1"),
    "transaction.version": ("0", "2"),
}


def test_kafka_features_upgrade_to_release_version(broker_factory):
    """kafka-features upgrade --release-version 4.4 on a node formatted with static voters:
    every feature of the release is accepted, kraft.version goes 0 -> 1 with Raft's
    KRaftVersion and KRaftVoters control records (KIP-853) naming this voter by its directory
    id, which DescribeQuorum reports from then on, and the level survives a restart. Refusals
    with Kafka 4.4.0's messages. A private broker: its features change."""
    b = broker_factory(name="features")
    c = KafkaCli(b)
    before = features_table(c)
    assert {f: tuple(v[:2]) for f, v in before.items()} == KAFKA_FEATURE_RANGES
    assert before["kraft.version"][2] == "0"
    release = ["eligible.leader.replicas.version was upgraded to 1.",
               "group.version was upgraded to 1.", "kraft.version was upgraded to 1.",
               "metadata.version was upgraded to 33.", "share.version was upgraded to 2.",
               "streams.version was upgraded to 1.", "transaction.version was upgraded to 2."]
    out = c.run("features", "upgrade", "--release-version", "4.4", "--dry-run")
    assert out.stdout.splitlines() == [line.replace(" was upgraded ", " can be upgraded ")
                                       for line in release]
    out = c.run("features", "upgrade", "--release-version", "4.4")
    assert out.stdout.splitlines() == release
    after = features_table(c)
    assert {f: v[2] for f, v in after.items()} == {
        "eligible.leader.replicas.version": "1", "group.version": "1", "kraft.version": "1",
        "metadata.version": "4.4-IV2", "share.version": "2", "streams.version": "1",
        "transaction.version": "2"}

    directory_id = re.search(r"^directory\.id=(\S+)$",
                             (b.data_dir / "meta.properties").read_text(), re.M).group(1)
    seg = b.data_dir / "__cluster_metadata-0" / "00000000000000000000.log"
    dump = c.run("dump-log", "--files", seg, "--print-data-log").stdout
    assert re.search(r'KRaftVersion \{"version":0,"kRaftVersion":1\}$', dump, re.M), dump[-2000:]
    voters = json.loads(re.search(r"KRaftVoters (\{.*\})$", dump, re.M).group(1))
    assert voters == {"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": directory_id,
        "endpoints": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": b.controller_port}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}
    out = c.run("metadata-quorum", "describe", "--status").stdout
    (voter,) = json.loads(re.search(r"^CurrentVoters:\s+(.*)$", out, re.M).group(1))
    assert voter["directoryId"] == directory_id

    b.restart()
    assert features_table(c)["kraft.version"][2] == "1"
    for args, message in [
        (("downgrade", "--feature", "kraft.version=0"),
         "Invalid update version 0 for feature kraft.version. Can't downgrade the version of "
         "this feature."),
        (("downgrade", "--feature", "metadata.version=32"),
         "Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the "
         "requested downgrade because it might delete metadata information."),
        (("upgrade", "--feature", "foo.version=1"),
         "Invalid update version 1 for feature foo.version. Local controller 1 does not "
         "support this feature."),
        (("upgrade", "--feature", "share.version=3"),
         "Invalid update version 3 for feature share.version. Local controller 1 only "
         "supports versions 0-2"),
    ]:
        out = c.run("features", *args, check=False)
        assert out.returncode == 1, (args, out.stdout)
        assert ("The update failed for all features since the following feature had an "
                f"error: {message}") in out.stdout, (args, out.stdout)


def test_producer_perf_test_smoke(cli, broker, topic_name):
    """kafka-producer-perf-test runs against the broker (scripts/bench-kafka-tools uses it
    at scale; here only that it completes and reports)."""
    create_topic(broker, topic_name)
    out = cli.run("producer-perf-test", "--topic", topic_name, "--num-records", "2000",
                  "--record-size", "1024", "--throughput", "-1", "--producer-props",
                  f"bootstrap.servers={broker.bootstrap}", "acks=1", "enable.idempotence=false").stdout
    final = out.strip().splitlines()[-1]
    assert re.match(r"2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency",
                    final), final
    assert cli.run("get-offsets", "--topic", topic_name).stdout.split() == [f"{topic_name}:0:2000"]
