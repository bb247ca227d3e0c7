"""Transactions from a second client implementation (#6): kafka-python's transactional producer
commits and aborts, and kafka-python's consumer with isolation_level=read_committed reads only
the committed records (librdkafka's view is checked too)."""
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from harness.clients import create_topic
from harness.txn import read_partitions, values


def test_kafka_python_commit_and_abort(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap,
                      transactional_id=f"kpy-{uuid.uuid4().hex[:8]}")
    try:
        p.init_transactions()
        for t, commit in ((0, True), (1, False), (2, True)):
            p.begin_transaction()
            for i in range(4):
                p.send(topic_name, value=f"t{t}-{i}".encode(), partition=i % 2)
            p.flush(30)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close(10)
    want = {q: [f"t{t}-{i}".encode() for t in (0, 2) for i in range(4) if i % 2 == q]
            for q in range(2)}
    assert values(read_partitions(broker, topic_name, 2, "read_committed")) == want

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic_name, q) for q in range(2)]
        c.assign(tps)
        c.seek_to_beginning()
        got = {q: [] for q in range(2)}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 8 and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=500).items():
                got[tp.partition] += [m.value for m in msgs]
        # Nothing more: the aborted transaction and the markers are skipped, not delayed.
        for tp, msgs in c.poll(timeout_ms=1000).items():
            got[tp.partition] += [m.value for m in msgs]
        assert got == want
        # Each partition: 2+2+2 records and three markers.
        assert c.end_offsets(tps) == {tps[0]: 9, tps[1]: 9}
    finally:
        c.close()
