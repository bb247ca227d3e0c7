"""Idempotent producers (#6): producer ids from InitProducerId, the broker deduplicating retried
batches. A confluent-kafka producer with enable.idempotence=true talks to the broker through a
CuttingProxy that drops every connection after a few KiB: in-flight batches are retried on new
connections, and the log must still hold every record exactly once, in order, with no gaps. The
transactional variant does the same with commits in between."""
import time
import uuid

from confluent_kafka import KafkaException, Producer

from harness.clients import consume_all, create_topic
from harness.proxy import CuttingProxy
from harness.txn import (init_producer_id, produce_v3, producer_batch, read_partitions,
                         txn_producer)
from harness.wire import api_versions

N = 3000


def test_init_producer_id_is_advertised(broker):
    _, err, apis, _ = api_versions(broker.port, 3)
    assert err == 0
    assert 22 in apis, "InitProducerId (22) must be advertised for idempotent producers"
    assert apis[22] == (0, 5), "Kafka 4.4 advertises 0-5 (v6 is unstable)"


def test_idempotent_producer_gets_distinct_ids_and_delivers(broker, topic_name):
    create_topic(broker, topic_name)
    offsets = []
    for i in range(2):
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5})
        p.produce(topic_name, value=f"m{i}".encode(),
                  on_delivery=lambda err, msg: offsets.append((err, msg.offset())))
        assert p.flush(30) == 0
    assert [e for e, _ in offsets] == [None, None]
    assert [o for _, o in offsets] == [0, 1]
    msgs = consume_all(broker, topic_name, 2)
    assert [m.value() for m in msgs] == [b"m0", b"m1"]


def test_retries_through_cut_connections_leave_no_duplicates_and_no_gaps(broker_factory,
                                                                         topic_name):
    b = broker_factory(start=False)
    # Clients must keep going through the proxy after bootstrap: advertise the proxy's port.
    with CuttingProxy(b.port, cut_after_bytes=None) as proxy:
        b.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
        b.start()
        create_topic(b, topic_name)
        proxy.cut_after_bytes = 16 * 1024
        p = Producer({"bootstrap.servers": f"127.0.0.1:{proxy.port}",
                      "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                      "batch.num.messages": 50, "message.send.max.retries": 1000000,
                      "retry.backoff.ms": 20, "reconnect.backoff.ms": 10,
                      "reconnect.backoff.max.ms": 100, "message.timeout.ms": 120000})
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)

        for i in range(N):
            p.produce(topic_name, value=f"{i:06d}".encode() + b"x" * 200, on_delivery=on_delivery)
            p.poll(0)
        assert p.flush(120) == 0, "undelivered messages"
        assert errors == []
        assert proxy.cuts > 0, "the proxy never cut a connection: the test proved nothing"
        proxy.cut_after_bytes = None
        msgs = consume_all(b, topic_name, N + 1, timeout=20)
    ids = [int(m.value()[:6]) for m in msgs]
    assert len(ids) == N, f"{len(ids)} records for {N} sent: duplicates or losses"
    assert ids == list(range(N)), "records out of order or duplicated"
    assert [m.offset() for m in msgs] == list(range(N)), "gaps in the log"


def test_transactions_through_cut_connections_commit_every_record_once(broker_factory,
                                                                       topic_name):
    """The transactional variant: AddPartitionsToTxn, Produce and EndTxn all cross connections
    the proxy keeps cutting; every transaction the client commits is in the log exactly once."""
    n, per_txn = 1500, 100
    b = broker_factory(start=False)
    with CuttingProxy(b.port, cut_after_bytes=None) as proxy:
        b.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
        b.start()
        create_topic(b, topic_name)
        p = txn_producer(f"127.0.0.1:{proxy.port}", f"cut-{uuid.uuid4().hex[:8]}", conf={
            "linger.ms": 2, "batch.num.messages": 50, "retry.backoff.ms": 20,
            "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100,
            "message.timeout.ms": 120000, "transaction.timeout.ms": 120000})
        proxy.cut_after_bytes = 16 * 1024
        for start in range(0, n, per_txn):
            p.begin_transaction()
            for i in range(start, start + per_txn):
                p.produce(topic_name, value=f"{i:06d}".encode() + b"x" * 200, partition=0)
                p.poll(0)
            for _ in range(50):  # retriable EndTxn failures (a cut mid-request) are retried
                try:
                    p.commit_transaction(60)
                    break
                except KafkaException as e:
                    if not e.args[0].retriable():
                        raise
        assert proxy.cuts > 0, "the proxy never cut a connection: the test proved nothing"
        proxy.cut_after_bytes = None
        got = read_partitions(f"127.0.0.1:{proxy.port}", topic_name, 1, "read_committed",
                              timeout=60)[0]
    ids = [int(v[:6]) for _, _, v in got]
    assert len(ids) == n, f"{len(ids)} records for {n} committed: duplicates or losses"
    assert ids == list(range(n)), "records out of order or duplicated"


def test_broker_deduplicates_and_orders_raw_idempotent_batches(broker, topic_name):
    """The producer-state rules at the wire (Produce v3, one idempotent batch per request): a
    duplicate of a recent batch is answered with its original offset and not appended again, a
    sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, a new epoch starts again at sequence 0, and a
    batch from the old epoch is then refused."""
    create_topic(broker, topic_name)
    err, pid, epoch = init_producer_id(broker.port)
    assert err == 0 and pid >= 0 and epoch == 0
    now = int(time.time() * 1000)

    def send(seq, vals, ep=0):
        return produce_v3(broker.port, topic_name, 0,
                          producer_batch(vals, pid, ep, seq, now, transactional=False))

    assert send(0, [b"a", b"b", b"c"]) == (0, 0)
    assert send(0, [b"a", b"b", b"c"]) == (0, 0), "a retried batch gets its original offset"
    assert send(3, [b"d"]) == (0, 3)
    assert send(0, [b"a", b"b", b"c"]) == (0, 0), "still one of the last 5 batches"
    assert send(6, [b"x"])[0] == 45, "sequence 4-5 missing: OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert send(4, [b"e", b"f"]) == (0, 4)
    assert send(0, [b"g"], ep=1) == (0, 6), "a bumped epoch starts at sequence 0"
    assert send(6, [b"late"], ep=0)[0] == 47, "the old epoch is fenced: INVALID_PRODUCER_EPOCH"
    got = read_partitions(broker, topic_name, 1, "read_uncommitted")[0]
    assert [(o, v) for o, _, v in got] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"),
                                           (4, b"e"), (5, b"f"), (6, b"g")]
