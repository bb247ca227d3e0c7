"""Transactions across broker processes (issue #26, coordinators follow leadership): the
transaction coordinator runs on one broker and the transaction's partitions are led by all of
them, so the leaders ask the coordinator over the inter-broker listener before appending
(KIP-890 AddPartitionsToTxn v4+) and the coordinator writes its commit/abort markers to leaders
on other brokers (WriteTxnMarkers). Then the coordinator's broker is killed with -9: the
producer finds the new coordinator and goes on, nothing committed is lost and nothing aborted is
read.

One controller and three brokers, every internal topic replicated three ways. Kafka 4.4 runs
the same cluster from its jars (KACTOR_TEST_TARGET=kafka): every assertion holds for both."""
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cli import KafkaCli
from harness.cluster import Cluster, coordinator_partition, wait_until
from harness.txn import read_partitions, txn_producer, values, wait_stable

PARTITIONS = 6
STATE_PARTITIONS = 5
JAVA_RECORDS = 2000


def leaders(node, topic):
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: x.leader for p, x in t.partitions.items()}


def run_txn(producer, topic, values_, commit):
    producer.begin_transaction()
    for v in values_:
        producer.produce(topic, value=v, partition=int(v.split(b"-")[1]) % PARTITIONS)
    if commit:
        producer.commit_transaction(60)
    else:
        # Sent first, so the aborted records are in the logs (librdkafka drops what it has
        # not sent yet when a transaction aborts).
        assert producer.flush(30) == 0
        producer.abort_transaction(60)


def test_transactions_span_brokers_and_survive_coordinator_kill(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
        "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    }).start(timeout=180)
    try:
        brokers = cluster.brokers
        a = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        a.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=3,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic_name].result(30)
        spread = wait_until(lambda: (lambda l: l if l and len(set(l.values())) == 3
                                     and -1 not in l.values() else None)(
            leaders(brokers[0], topic_name)), 60, "partition leaders on all three brokers")

        txn_id = f"{topic_name}-txn"
        p = txn_producer(brokers[1], txn_id, conf={"transaction.timeout.ms": 30000})
        coordinator = wait_until(lambda: (lambda l: l and l.get(
            coordinator_partition(txn_id, STATE_PARTITIONS)))(leaders(brokers[1], "__transaction_state")),
            30, "the transaction coordinator")
        # The transaction touches partitions led by every broker, the coordinator's included.
        assert set(spread.values()) == {b.node_id for b in brokers}, spread

        committed, aborted = [], []
        n = 0
        for round_ in range(6):
            batch = [b"v-%d" % (n + i) for i in range(PARTITIONS * 4)]
            n += len(batch)
            commit = round_ != 2
            run_txn(p, topic_name, batch, commit)
            (committed if commit else aborted).extend(batch)

        # Exactly-once hand-off: offsets committed inside a transaction reach the group only
        # with the commit (a marker in __consumer_offsets, whose leader may be elsewhere).
        group = f"{topic_name}-g"
        p.begin_transaction()
        batch = [b"v-%d" % (n + i) for i in range(PARTITIONS)]
        n += len(batch)
        for v in batch:
            p.produce(topic_name, value=v, partition=int(v.split(b"-")[1]) % PARTITIONS)
        meta = Consumer({"bootstrap.servers": brokers[0].bootstrap, "group.id": group})
        try:
            p.send_offsets_to_transaction(
                [TopicPartition(topic_name, q, 7) for q in range(PARTITIONS)],
                meta.consumer_group_metadata(), 30)
        finally:
            meta.close()
        p.commit_transaction(60)
        committed.extend(batch)

        # Every partition's last stable offset reaches its high watermark: each leader got
        # its marker, wherever the coordinator is.
        wait_stable(brokers[2], topic_name, PARTITIONS, timeout=60)
        got = values(read_partitions(brokers[2], topic_name, PARTITIONS))
        read = sorted(v for vs in got.values() for v in vs)
        assert read == sorted(committed), (len(read), len(committed))
        everything = values(read_partitions(brokers[0], topic_name, PARTITIONS,
                                            isolation="read_uncommitted"))
        assert sorted(v for vs in everything.values() for v in vs) == sorted(committed + aborted)
        c = Consumer({"bootstrap.servers": brokers[2].bootstrap, "group.id": group})
        try:
            offsets = c.committed([TopicPartition(topic_name, q) for q in range(PARTITIONS)],
                                  timeout=30)
        finally:
            c.close()
        assert [o.offset for o in offsets] == [7] * PARTITIONS, offsets

        # A Java producer (kafka-clients 4.4, transaction version 2: the partition leaders
        # add each partition to the transaction at the coordinator themselves, KIP-890).
        java_topic = f"{topic_name}-java"
        a.create_topics([NewTopic(java_topic, num_partitions=PARTITIONS, replication_factor=3,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[java_topic].result(30)
        java_txn = f"{topic_name}-java-txn"
        out = KafkaCli(brokers[2]).run(
            "producer-perf-test", "--bootstrap-server", brokers[2].bootstrap,
            "--topic", java_topic, "--num-records", JAVA_RECORDS, "--throughput", 4000,
            "--payload-monotonic", "--transactional-id", java_txn,
            "--transaction-duration-ms", 100, "--command-property", "linger.ms=5",
            timeout=180).stdout
        assert f"{JAVA_RECORDS} records sent" in out, out
        wait_stable(brokers[0], java_topic, PARTITIONS, timeout=60)
        got = values(read_partitions(brokers[0], java_topic, PARTITIONS))
        assert sorted(int(v) for vs in got.values() for v in vs) == list(range(JAVA_RECORDS))

        # kill -9 the coordinator's broker between transactions: the state partition's
        # in-sync follower takes over, the producer finds it and goes on.
        victim = cluster.node(coordinator)
        victim.kill9()
        killed_at = time.monotonic()
        survivors = [b for b in brokers if b is not victim]
        for round_ in range(3):
            batch = [b"w-%d" % (n + i) for i in range(PARTITIONS * 2)]
            n += len(batch)
            commit = round_ != 1
            run_txn(p, topic_name, batch, commit)
            (committed if commit else aborted).extend(batch)
        print(f"transactions went on {time.monotonic() - killed_at:.1f}s after the kill")
        p.flush(10)

        wait_stable(survivors[0], topic_name, PARTITIONS, timeout=60)
        got = values(read_partitions(survivors[1], topic_name, PARTITIONS))
        read = sorted(v for vs in got.values() for v in vs)
        assert len(read) == len(set(read)), "a committed record read twice"
        assert read == sorted(committed), (len(read), len(committed))
    finally:
        cluster.stop()
