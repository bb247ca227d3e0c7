"""The transaction coordinator end to end (#6) with confluent-kafka (librdkafka): FindCoordinator
(TRANSACTION) creating `__transaction_state` on demand, InitProducerId with a transactional id,
AddPartitionsToTxn, EndTxn commit and abort with markers, read_committed vs read_uncommitted
consumers, fencing of a zombie producer, and offsets committed inside a transaction
(AddOffsetsToTxn + TxnOffsetCommit)."""
import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from harness.clients import admin, consume_all, create_topic
from harness.wire import api_versions


def txn_producer(broker, txn_id, **extra):
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
            "transaction.timeout.ms": 60000, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(60)
    return p


def produce_txn(p, topic, values, commit=True):
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v)
    if commit:
        p.commit_transaction(60)
    else:
        # abort_transaction purges records not yet sent: send them first, so the abort has
        # something to abort.
        assert p.flush(30) == 0
        p.abort_transaction(60)


def read(broker, topic, isolation, expected, timeout=20):
    return [m.value() for m in consume_all(broker, topic, expected, timeout=timeout,
                                           extra={"isolation.level": isolation})]


def read_exactly(broker, topic, isolation, expected):
    """All `expected` records, then nothing more for a moment (one extra requested)."""
    got = read(broker, topic, isolation, len(expected) + 1, timeout=6)
    assert got == expected, f"{isolation}: {got}"


def test_transaction_apis_are_advertised(broker):
    _, err, apis, _ = api_versions(broker.port, 3)
    assert err == 0
    # Kafka 4.4's ranges: AddPartitionsToTxn 0-5, AddOffsetsToTxn 0-4, EndTxn 0-5,
    # TxnOffsetCommit 0-6, DescribeTransactions 0, ListTransactions 0-2.
    for key, rng in {24: (0, 5), 25: (0, 4), 26: (0, 5), 28: (0, 6), 65: (0, 0),
                     66: (0, 2)}.items():
        assert apis.get(key) == rng, f"api {key}: {apis.get(key)}"


def test_committed_transactions_are_read_at_both_isolation_levels(broker, topic_name):
    create_topic(broker, topic_name)
    p = txn_producer(broker, f"txn-{topic_name}")
    produce_txn(p, topic_name, [b"c1-%d" % i for i in range(10)], commit=True)
    produce_txn(p, topic_name, [b"c2-%d" % i for i in range(3)], commit=True)
    committed = [b"c1-%d" % i for i in range(10)] + [b"c2-%d" % i for i in range(3)]
    read_exactly(broker, topic_name, "read_committed", committed)
    read_exactly(broker, topic_name, "read_uncommitted", committed)
    # 13 records + 2 commit markers: the end offset counts the markers.
    assert end_offset(broker, topic_name) == 15


def test_aborted_records_are_skipped_by_read_committed(broker, topic_name):
    create_topic(broker, topic_name)
    p = txn_producer(broker, f"txn-{topic_name}")
    produce_txn(p, topic_name, [b"c1-%d" % i for i in range(10)], commit=True)
    produce_txn(p, topic_name, [b"a-%d" % i for i in range(5)], commit=False)
    produce_txn(p, topic_name, [b"c2-%d" % i for i in range(3)], commit=True)
    committed = [b"c1-%d" % i for i in range(10)] + [b"c2-%d" % i for i in range(3)]
    everything = ([b"c1-%d" % i for i in range(10)] + [b"a-%d" % i for i in range(5)]
                  + [b"c2-%d" % i for i in range(3)])
    read_exactly(broker, topic_name, "read_uncommitted", everything)
    read_exactly(broker, topic_name, "read_committed", committed)
    # 18 records + 3 markers.
    assert end_offset(broker, topic_name) == 21
    # A zombie's transaction, aborted when a new instance fences it, is skipped too.
    txn_id = f"txn-zombie-{topic_name}"
    old = txn_producer(broker, txn_id)
    old.begin_transaction()
    old.produce(topic_name, value=b"zombie")
    assert old.flush(30) == 0
    new = txn_producer(broker, txn_id)
    produce_txn(new, topic_name, [b"fresh"], commit=True)
    read_exactly(broker, topic_name, "read_committed", committed + [b"fresh"])


def end_offset(broker, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_open_transaction_is_invisible_to_read_committed_until_commit(broker, topic_name):
    create_topic(broker, topic_name)
    p = txn_producer(broker, f"txn-{topic_name}")
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, value=b"open-%d" % i)
    assert p.flush(30) == 0
    # The records are in the log but the transaction is open: the LSO holds them back.
    assert read(broker, topic_name, "read_uncommitted", 4) == [b"open-%d" % i for i in range(4)]
    assert read(broker, topic_name, "read_committed", 1, timeout=4) == []
    p.commit_transaction(60)
    assert read(broker, topic_name, "read_committed", 4) == [b"open-%d" % i for i in range(4)]


def test_new_producer_instance_fences_the_old_one_and_aborts_its_transaction(broker,
                                                                               topic_name):
    create_topic(broker, topic_name)
    txn_id = f"txn-{topic_name}"
    old = txn_producer(broker, txn_id)
    old.begin_transaction()
    old.produce(topic_name, value=b"zombie")
    assert old.flush(30) == 0
    new = txn_producer(broker, txn_id)
    produce_txn(new, topic_name, [b"fresh"], commit=True)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(30)
    err = e.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    got = read(broker, topic_name, "read_uncommitted", 2)
    assert got == [b"zombie", b"fresh"]


def test_find_coordinator_creates_transaction_state_like_kafka(broker, topic_name):
    txn_producer(broker, f"txn-{topic_name}")
    a = admin(broker)
    md = a.list_topics("__transaction_state", timeout=10)
    t = md.topics["__transaction_state"]
    assert t.error is None
    assert len(t.partitions) == 50, "transaction.state.log.num.partitions default"
    res = a.describe_configs([ConfigResource("topic", "__transaction_state")])
    configs = list(res.values())[0].result(30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["compression.type"].value == "uncompressed"
    assert configs["unclean.leader.election.enable"].value == "false"


def _consume_group(broker, group, topic, n):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m)
    assert len(got) == n, f"{len(got)} of {n} consumed"
    return c, got


def _committed(broker, group, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
            except KafkaException as e:
                # UNSTABLE_OFFSET_COMMIT while markers land: retry.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def test_send_offsets_to_transaction_commits_offsets_only_with_the_transaction(broker,
                                                                                 topic_name):
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker, src)
    create_topic(broker, dst)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce(src, value=b"in-%d" % i)
    assert plain.flush(30) == 0
    group = f"g-{topic_name}"
    consumer, msgs = _consume_group(broker, group, src, 10)
    p = txn_producer(broker, f"txn-{topic_name}")
    try:
        # An aborted consume-transform-produce round leaves no offsets behind.
        p.begin_transaction()
        for m in msgs[:5]:
            p.produce(dst, value=m.value().replace(b"in", b"out"))
        p.send_offsets_to_transaction([TopicPartition(src, 0, 5)],
                                      consumer.consumer_group_metadata(), 30)
        assert p.flush(30) == 0
        p.abort_transaction(60)
        assert _committed(broker, group, src) < 0, "aborted offsets must not be committed"
        # A committed round commits the offsets with the records.
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, value=m.value().replace(b"in", b"out"))
        p.send_offsets_to_transaction([TopicPartition(src, 0, 10)],
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(60)
    finally:
        consumer.close()
    assert _committed(broker, group, src) == 10
    read_exactly(broker, dst, "read_committed", [b"out-%d" % i for i in range(10)])


def test_transaction_metrics(broker, topic_name, target):
    if target != "kactor":
        pytest.skip("kactor's own metric families")
    create_topic(broker, topic_name)
    p = txn_producer(broker, f"txn-{topic_name}")
    produce_txn(p, topic_name, [b"x"], commit=True)
    produce_txn(p, topic_name, [b"y"], commit=False)
    p.begin_transaction()
    p.produce(topic_name, value=b"open")
    assert p.flush(30) == 0

    def scrape():
        with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
            return r.read().decode()

    def value(text, name, labels=""):
        m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    deadline = time.monotonic() + 20
    while True:
        text = scrape()
        # Gauges are refreshed each second; counters move when CompleteCommit/Abort is written.
        if ((value(text, "kactor_transactions_open") or 0) >= 1
                and (value(text, "kactor_transaction_commits_total") or 0) >= 1
                and (value(text, "kactor_transaction_aborts_total", '{reason="client"}') or 0)
                >= 1):
            break
        assert time.monotonic() < deadline, text[-3000:]
        time.sleep(0.5)
    assert (value(text, "kactor_transaction_ids", '{state="Ongoing"}') or 0) >= 1
    assert (value(text, "kactor_transaction_coordinator_partitions") or 0) == 50
    assert (value(text, "kactor_producer_ids_generated_total") or 0) >= 1
    p.commit_transaction(60)
