"""confluent-kafka (librdkafka 2.x) against the broker: produce with keys, headers and
timestamps under every codec and acks level with idempotence off, read back record for record."""
import time

import pytest
from confluent_kafka import Producer, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka.admin import NewPartitions

from harness.clients import admin, consume_all, create_topic, wait_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 200


def produce(broker, topic, records, **conf):
    """Produce `records` [(key, value, headers, ts)] and return the delivery reports."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False,
                  "linger.ms": 5, **conf})
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg.offset() if msg is not None else None))

    for key, value, headers, ts in records:
        p.produce(topic, value=value, key=key, headers=headers, timestamp=ts or 0,
                  on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(30) == 0, "undelivered messages"
    return reports


def sample_records(n, base_ts):
    return [(f"key-{i}".encode(), f"value-{i}-".encode() * (1 + i % 7),
             [("idx", str(i).encode()), ("h2", b"\x00\x01binary")], base_ts + i)
            for i in range(n)]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, topic_name, codec, acks):
    create_topic(broker, topic_name)
    base_ts = int(time.time() * 1000) - 60_000
    records = sample_records(N, base_ts)
    reports = produce(broker, topic_name, records, **{"compression.type": codec, "acks": acks})
    assert [e for e, _ in reports if e is not None] == []
    if acks != "0":
        # acks>=1: the broker tells each record's offset, contiguous from 0 in produce order.
        assert [o for _, o in reports] == list(range(N))
    msgs = consume_all(broker, topic_name, N)
    assert len(msgs) == N
    for i, (m, (key, value, headers, ts)) in enumerate(zip(msgs, records)):
        assert m.offset() == i
        assert m.key() == key
        assert m.value() == value
        assert m.headers() == headers
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, ts)


def test_null_key_and_value_and_empty_headers(broker, topic_name):
    create_topic(broker, topic_name)
    reports = produce(broker, topic_name, [(None, b"v", None, None), (b"k", None, None, None),
                                           (b"", b"", [], None)], acks="all")
    assert [o for _, o in reports] == [0, 1, 2]
    msgs = consume_all(broker, topic_name, 3)
    assert [(m.key(), m.value()) for m in msgs] == [(None, b"v"), (b"k", None), (b"", b"")]
    assert [m.headers() for m in msgs] == [None, None, None]


def test_log_append_time_topic(broker, topic_name):
    create_topic(broker, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(broker, topic_name, [(b"k", b"v", None, 1000)], acks="1")
    after = int(time.time() * 1000)
    (m,) = consume_all(broker, topic_name, 1)
    kind, ts = m.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= ts <= after + 1000


def test_keys_spread_over_partitions_in_order(broker, topic_name):
    create_topic(broker, topic_name, partitions=3)
    records = [(f"k{i % 10}".encode(), str(i).encode(), None, None) for i in range(300)]
    produce(broker, topic_name, records, acks="all")
    seen = {}
    for part in range(3):
        msgs = consume_all(broker, topic_name, 1000, partition=part, timeout=3)
        for m in msgs:
            seen.setdefault(m.key(), []).append(int(m.value()))
    # Same key → same partition → produce order preserved per key.
    assert sorted(k for k in seen) == sorted({r[0] for r in records})
    for key, values in seen.items():
        assert values == sorted(values)
    assert sum(len(v) for v in seen.values()) == 300


def test_metadata_and_create_partitions(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    a = admin(broker)  # keep the handle alive until its futures complete
    md = a.list_topics(timeout=10)
    assert md.brokers[1].port == broker.port
    assert md.controller_id == 1
    assert sorted(md.topics[topic_name].partitions) == [0, 1]
    fut = a.create_partitions([NewPartitions(topic_name, 4)])[topic_name]
    fut.result(30)
    wait_topic(broker, topic_name, 4)


def test_create_existing_topic_fails(broker, topic_name):
    from confluent_kafka import KafkaError, KafkaException
    create_topic(broker, topic_name)
    with pytest.raises(KafkaException) as exc:
        create_topic(broker, topic_name)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_produce_to_unknown_partition_fails(broker, topic_name):
    from confluent_kafka import KafkaError
    create_topic(broker, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False,
                  "message.timeout.ms": 5000})
    errors = []
    p.produce(topic_name, b"x", partition=7, on_delivery=lambda e, m: errors.append(e))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError._UNKNOWN_PARTITION


def test_commit_to_unknown_partition_fails(broker, topic_name):
    """OffsetCommit naming a partition the topic does not have: the broker answers
    UNKNOWN_TOPIC_OR_PARTITION for it (librdkafka fails the commit with it) and stores the
    partition that exists; nothing is stored for the other."""
    from confluent_kafka import (Consumer, KafkaError, KafkaException, TopicPartition,
                                 OFFSET_INVALID)
    create_topic(broker, topic_name)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-" + topic_name,
                  "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 3)]
        # OffsetFetch first: librdkafka retries it until the group coordinator has loaded
        # (a synchronous commit would report NOT_COORDINATOR instead).
        c.committed(wanted, timeout=30)
        with pytest.raises(KafkaException) as exc:
            c.commit(offsets=[TopicPartition(topic_name, 0, 5),
                              TopicPartition(topic_name, 3, 7)], asynchronous=False)
        assert exc.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        got = c.committed(wanted, timeout=30)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 5), (3, OFFSET_INVALID)]
    finally:
        c.close()
