"""`producer.id.expiration.ms` / `producer.id.expiration.check.interval.ms`: a partition forgets
an idle producer's state (what DescribeProducers lists) once it has been idle that long, checked
on that interval; a producer with a transaction open there is kept until the transaction ends.
`producer.id.expiration.ms` is a dynamic broker config: set with kafka-configs, it reaches the
existing partitions. The same answers from Kafka 4.4.0 (where the check interval is an internal
key a properties file may still set)."""
import time

from confluent_kafka import Producer

from harness import wire
from harness.cli import KafkaCli
from harness.clients import create_topic
from harness.txn import txn_producer

API_DESCRIBE_PRODUCERS = 61
FAST_CHECK = {"producer.id.expiration.check.interval.ms": "300"}


def describe_producers(port, topic, partition):
    """DescribeProducers v0 (flexible) for one partition: {producer_id: current txn start
    offset (-1: none)}. Raises on a partition error."""
    body = wire.uvarint(2) + wire.compact_string(topic)
    body += wire.uvarint(2) + wire.i32(partition) + wire.uvarint(0)  # topic tags
    body += wire.uvarint(0)  # request tags
    with wire.connect(port, timeout=30) as s:
        s.sendall(wire.frame(wire.request_header_v2(API_DESCRIBE_PRODUCERS, 0, 61) + body))
        r = wire.Reader(wire.recv_frame(s))
    r.i32()  # correlation id
    r.skip_tags()  # response header v1
    r.i32()  # throttle
    assert r.uvarint() - 1 == 1
    r.compact_string()
    assert r.uvarint() - 1 == 1
    assert r.i32() == partition
    err, message = r.i16(), r.compact_string()
    assert err == 0, (err, message)
    out = {}
    for _ in range(r.uvarint() - 1):
        producer_id = r.i64()
        r.i32()  # epoch
        r.i32()  # last sequence
        r.i64()  # last timestamp
        r.i32()  # coordinator epoch
        out[producer_id] = r.i64()
        r.skip_tags()
    return out


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def idempotent_writes(broker, topic, partition, n=5):
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for _ in range(n):
        p.produce(topic, value=b"x", partition=partition)
    assert p.flush(30) == 0


def test_idle_producers_expire_but_not_with_a_transaction_open(broker_factory, topic_name):
    b = broker_factory({"producer.id.expiration.ms": "2000", **FAST_CHECK})
    create_topic(b, topic_name, partitions=2)
    ongoing = txn_producer(b, f"expiry-{topic_name}", conf={"transaction.timeout.ms": 60000})
    ongoing.begin_transaction()
    ongoing.produce(topic_name, value=b"t", partition=1)
    ongoing.flush(30)
    txn_written = time.monotonic()
    state = wait_for(lambda: describe_producers(b.port, topic_name, 1), 30,
                     "the transactional producer's state")
    (txn_pid, txn_start), = state.items()
    assert txn_start >= 0, "its transaction is open on the partition"

    idempotent_writes(b, topic_name, 0)
    assert len(describe_producers(b.port, topic_name, 0)) == 1, "the idempotent producer"
    wait_for(lambda: describe_producers(b.port, topic_name, 0) == {}, 20,
             "the idle idempotent producer to expire")

    # Well past expiry (2 s) and several checks (0.3 s) later, the open transaction keeps it.
    time.sleep(max(0.0, txn_written + 3.5 - time.monotonic()))
    assert describe_producers(b.port, topic_name, 1) == {txn_pid: txn_start}
    # Once the transaction ends (its marker), the producer is idle and expires too.
    ongoing.commit_transaction(30)
    wait_for(lambda: describe_producers(b.port, topic_name, 1) == {}, 20,
             "the transactional producer to expire after its commit")


def test_expiration_follows_the_dynamic_broker_config(broker_factory, topic_name):
    b = broker_factory(dict(FAST_CHECK))
    cli = KafkaCli(b)
    create_topic(b, topic_name)
    idempotent_writes(b, topic_name, 0)
    (pid,) = describe_producers(b.port, topic_name, 0)
    # The default (one day) keeps it through many checks.
    time.sleep(2.5)
    assert list(describe_producers(b.port, topic_name, 0)) == [pid]
    alter = ["configs", "--alter", "--entity-type", "brokers", "--entity-default"]
    cli.run(*alter, "--add-config", "producer.id.expiration.ms=2000")
    wait_for(lambda: describe_producers(b.port, topic_name, 0) == {}, 20,
             "the existing partition to apply the new expiration")
