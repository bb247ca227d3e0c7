"""KIP-890 on the partition leader, over the raw wire (#6): a transactional Produce for a
partition the transaction never added. Produce < v12 (transaction version 1 clients, which
send AddPartitionsToTxn themselves) is verified and refused with INVALID_TXN_STATE; Produce
v12+ (transaction version 2) makes the leader add the partition to the transaction, and a
stale epoch is refused with INVALID_PRODUCER_EPOCH. Same answers from Kafka 4.4.0."""
import time
import uuid

from harness import wire
from harness.clients import create_topic
from harness.txn import init_producer_id, produce_v3, producer_batch, txn_producer

API_PRODUCE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48


def compact_bytes(b):
    return wire.uvarint(len(b) + 1) + b


def produce_v12(port, topic, partition, batch, transactional_id, acks=-1):
    """Produce v12 (flexible) with one batch; returns (error_code, base_offset, message)."""
    body = wire.compact_string(transactional_id) + wire.i16(acks) + wire.i32(30000)
    body += wire.uvarint(2) + wire.compact_string(topic)
    body += wire.uvarint(2) + wire.i32(partition) + compact_bytes(batch) + wire.uvarint(0)
    body += wire.uvarint(0)  # topic tags
    body += wire.uvarint(0)  # request tags
    with wire.connect(port, timeout=30) as s:
        s.sendall(wire.frame(wire.request_header_v2(API_PRODUCE, 12, 21) + body))
        r = wire.Reader(wire.recv_frame(s))
    r.i32()  # correlation id
    r.skip_tags()  # response header v1
    assert r.uvarint() - 1 == 1
    r.compact_string()
    assert r.uvarint() - 1 == 1
    r.i32()  # index
    err, base = r.i16(), r.i64()
    r.i64()  # log append time
    r.i64()  # log start offset
    for _ in range(r.uvarint() - 1):  # record errors
        r.i32()
        r.compact_string()
        r.skip_tags()
    message = r.compact_string()
    return err, base, message


def new_transactional_id(broker, prefix):
    """A transactional id with a producer id, on a broker whose __transaction_state exists."""
    warm = txn_producer(broker, f"warm-{uuid.uuid4().hex[:8]}")  # creates the state topic
    warm.flush(1)
    tid = f"{prefix}-{uuid.uuid4().hex[:8]}"
    err, pid, epoch = init_producer_id(broker.port, tid)
    assert err == 0, err
    return tid, pid, epoch


def describe(cli, tid):
    lines = cli.run("transactions", "describe", "--transactional-id", tid).stdout.splitlines()
    return dict(zip(*[[c.strip() for c in l.rstrip("\t").split("\t")] for l in lines[:2]]))


def test_v3_produce_for_a_partition_never_added_is_refused(broker, cli, topic_name):
    create_topic(broker, topic_name)
    tid, pid, epoch = new_transactional_id(broker, "raw-v3")
    batch = producer_batch([b"x0", b"x1"], pid, epoch, 0, int(time.time() * 1000))
    err, base = produce_v3(broker.port, topic_name, 0, batch, transactional_id=tid)
    assert (err, base) == (INVALID_TXN_STATE, -1)
    # Nothing was appended, and the transaction did not start.
    assert describe(cli, tid)["TransactionState"] == "Empty"


def test_v12_produce_adds_the_partition_to_the_transaction(broker, cli, topic_name):
    create_topic(broker, topic_name, partitions=2)
    tid, pid, epoch = new_transactional_id(broker, "raw-v12")
    now = int(time.time() * 1000)
    err, base, _ = produce_v12(broker.port, topic_name, 1,
                               producer_batch([b"y0"], pid, epoch, 0, now), tid)
    assert (err, base) == (0, 0)
    d = describe(cli, tid)
    assert d["TransactionState"] == "Ongoing", d
    assert d["TopicPartitions"] == f"{topic_name}-1", d
    # The next batch of the same transaction needs no coordinator round trip and lands too.
    err, base, _ = produce_v12(broker.port, topic_name, 1,
                               producer_batch([b"y1"], pid, epoch, 1, now), tid)
    assert (err, base) == (0, 1)
    # A batch at an epoch the coordinator does not hold, for the other partition: the
    # coordinator answers PRODUCER_FENCED, the leader INVALID_PRODUCER_EPOCH, nothing is added.
    err, base, _ = produce_v12(broker.port, topic_name, 0,
                               producer_batch([b"z"], pid, epoch + 1, 0, now), tid)
    assert (err, base) == (INVALID_PRODUCER_EPOCH, -1)
    assert describe(cli, tid)["TopicPartitions"] == f"{topic_name}-1"


def _produce_until(broker, topic, tid, pid, epoch, want, timeout=15):
    """Sends the same Produce v3 until it is answered `want`: a dynamic config change reaches
    the partitions through the metadata log, a moment after kafka-configs returns."""
    deadline = time.time() + timeout
    while True:
        batch = producer_batch([b"d0"], pid, epoch, 0, int(time.time() * 1000))
        got = produce_v3(broker.port, topic, 0, batch, transactional_id=tid)
        if got[0] == want[0] or time.time() > deadline:
            return got
        time.sleep(0.2)


def test_verification_follows_the_dynamic_broker_config(broker, cli, topic_name):
    """`transaction.partition.verification.enable` is a dynamic broker config: switched off
    with kafka-configs, a verify-only (v3) Produce for a partition never added is appended
    unverified, as Kafka does; switched back on, it is refused again."""
    create_topic(broker, topic_name)
    create_topic(broker, topic_name + "-b")
    tid, pid, epoch = new_transactional_id(broker, "dyn-off")
    alter = ["configs", "--alter", "--entity-type", "brokers", "--entity-default"]
    cli.run(*alter, "--add-config", "transaction.partition.verification.enable=false")
    try:
        assert _produce_until(broker, topic_name, tid, pid, epoch, (0, 0)) == (0, 0)
    finally:
        cli.run(*alter, "--delete-config", "transaction.partition.verification.enable")
    tid, pid, epoch = new_transactional_id(broker, "dyn-on")
    got = _produce_until(broker, topic_name + "-b", tid, pid, epoch, (INVALID_TXN_STATE, -1))
    assert got == (INVALID_TXN_STATE, -1)
    assert describe(cli, tid)["TransactionState"] == "Empty"
