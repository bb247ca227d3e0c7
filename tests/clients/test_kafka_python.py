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
