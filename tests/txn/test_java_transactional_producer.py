"""A Java transactional producer against the broker (#6): `kafka-producer-perf-test` from the
Kafka 4.4.0 jars with --transactional-id (kafka-clients 4.4: transaction version 2 when the
broker offers it: an epoch bump per transaction, EndTxn v5), read back by the Java console
consumer under read_committed and read_uncommitted and by librdkafka."""
import re
import uuid

import pytest
from confluent_kafka import Producer

from harness.cli import KafkaCli
from harness.clients import create_topic
from harness.txn import read_partitions, txn_producer, values

N = 3000


def test_producer_perf_test_transactions_read_back_exactly_once(broker, cli, topic_name):
    create_topic(broker, topic_name, partitions=2)
    txn_id = f"perf-{uuid.uuid4().hex[:8]}"
    out = cli.run("producer-perf-test", "--bootstrap-server", broker.bootstrap,
                  "--topic", topic_name, "--num-records", N, "--throughput", 6000,
                  "--payload-monotonic", "--transactional-id", txn_id,
                  "--transaction-duration-ms", 100, "--command-property", "linger.ms=5",
                  timeout=180).stdout
    assert f"{N} records sent" in out, out
    # An aborted transaction (librdkafka) on top: read_committed must drop it.
    p = txn_producer(broker, f"abort-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    for i in range(200):
        p.produce(topic_name, value=f"aborted{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)

    committed = read_partitions(broker, topic_name, 2, "read_committed", timeout=60)
    got = sorted(int(v) for vs in values(committed).values() for v in vs)
    assert got == list(range(N)), f"{len(got)} records read for {N} sent"

    def console(isolation):
        r = cli.run("console-consumer", "--topic", topic_name, "--from-beginning",
                    "--isolation-level", isolation, "--timeout-ms", 8000,
                    "--max-messages", N + 200, timeout=120, check=False)
        return [l for l in r.stdout.splitlines() if l]

    java_committed = console("read_committed")
    assert sorted(int(v) for v in java_committed) == list(range(N))
    java_all = console("read_uncommitted")
    assert len(java_all) == N + 200
    assert sum(v.startswith("aborted") for v in java_all) == 200

    lines = cli.run("transactions", "describe", "--transactional-id", txn_id).stdout.splitlines()
    d = dict(zip(*[[c.strip() for c in l.rstrip("\t").split("\t")] for l in lines[:2]]))
    assert d["TransactionState"] == "CompleteCommit", d
    # Throttled to ~0.5 s: about five 100 ms transactions. kafka-clients 4.4 uses the
    # transaction version the broker finalized: at 2 (the default of Kafka 4.4 and kactor,
    # KIP-890) every EndTxn bumps the producer epoch; at 1 only InitProducerId does.
    features = cli.run("features", "describe").stdout
    level = int(re.search(r"Feature: transaction.version\s.*?FinalizedVersionLevel: (\d+)",
                          features).group(1))
    if level >= 2:
        assert int(d["ProducerEpoch"]) >= 2, f"no epoch bump per transaction (TV2): {d}"
    else:
        assert int(d["ProducerEpoch"]) == 0, f"TV1 bumps the epoch only at init: {d}"


def finalized_transaction_version(cli):
    features = cli.run("features", "describe").stdout
    return int(re.search(r"Feature: transaction.version\s.*?FinalizedVersionLevel: (\d+)",
                         features).group(1))


def perf_test_epoch(broker, cli, topic, n=300):
    """A throttled transactional producer-perf-test (a few 100 ms transactions); returns the
    producer epoch its transactional id ends at."""
    txn_id = f"perf-{uuid.uuid4().hex[:8]}"
    out = cli.run("producer-perf-test", "--bootstrap-server", broker.bootstrap,
                  "--topic", topic, "--num-records", n, "--throughput", 1000,
                  "--payload-monotonic", "--transactional-id", txn_id,
                  "--transaction-duration-ms", 100, timeout=180).stdout
    assert f"{n} records sent" in out, out
    lines = cli.run("transactions", "describe", "--transactional-id", txn_id).stdout.splitlines()
    d = dict(zip(*[[c.strip() for c in l.rstrip("\t").split("\t")] for l in lines[:2]]))
    assert d["TransactionState"] == "CompleteCommit", d
    return int(d["ProducerEpoch"])


def test_transaction_version_downgrade_and_upgrade(broker_factory, topic_name):
    # kafka-features: a cluster at transaction.version 1 serves TV1 clients (epoch fixed across
    # transactions, explicit AddPartitionsToTxn); back at 2 they bump the epoch per transaction.
    b = broker_factory()
    cli = KafkaCli(b)
    create_topic(b, topic_name, partitions=2)
    assert finalized_transaction_version(cli) == 2
    out = cli.run("features", "downgrade", "--feature", "transaction.version=1").stdout
    assert "transaction.version was downgraded to 1" in out, out
    assert finalized_transaction_version(cli) == 1
    assert perf_test_epoch(b, cli, topic_name) == 0
    out = cli.run("features", "upgrade", "--feature", "transaction.version=2").stdout
    assert "transaction.version was upgraded to 2" in out, out
    assert finalized_transaction_version(cli) == 2
    assert perf_test_epoch(b, cli, topic_name) >= 2
    committed = read_partitions(b, topic_name, 2, "read_committed", timeout=60)
    assert len([v for vs in values(committed).values() for v in vs]) == 600


def test_unthrottled_transactional_producer_keeps_sequence_order(broker, cli, topic_name):
    # Five produce requests in flight per connection, short transactions: a request waiting
    # for the leader's add-partition round trip must not be overtaken by the next one of the
    # same producer (OUT_OF_ORDER_SEQUENCE_NUMBER would end the producer).
    create_topic(broker, topic_name, partitions=2)
    n = 50000
    out = cli.run("producer-perf-test", "--bootstrap-server", broker.bootstrap,
                  "--topic", topic_name, "--num-records", n, "--throughput", -1,
                  "--record-size", 100, "--transactional-id", f"fast-{uuid.uuid4().hex[:8]}",
                  "--transaction-duration-ms", 10, "--command-property", "linger.ms=1",
                  timeout=300).stdout
    assert f"{n} records sent" in out, out
    committed = read_partitions(broker, topic_name, 2, "read_committed", timeout=120)
    assert sum(len(vs) for vs in values(committed).values()) == n
