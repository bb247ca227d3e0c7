"""A transactional Produce whose batches name more than one producer, over the raw wire: Kafka
4.4's ReplicaManager refuses the whole request with INVALID_PRODUCER_ID_MAPPING ("Transactional
records contained more than one producer ID") before asking the transaction coordinator, and
appends nothing. Same answer from Kafka 4.4.0."""
import time
import uuid

from harness import wire
from harness.clients import create_topic
from harness.txn import init_producer_id, list_offsets, producer_batch, txn_producer

API_PRODUCE = 0
INVALID_PRODUCER_ID_MAPPING = 49


def produce_v3_two_partitions(port, topic, batches, transactional_id):
    """Produce v3 with one batch per partition (partition i gets batches[i]); returns
    {partition: (error_code, base_offset)}."""
    body = wire.string(transactional_id) + wire.i16(-1) + wire.i32(30000)
    body += wire.i32(1) + wire.string(topic) + wire.i32(len(batches))
    for partition, batch in enumerate(batches):
        body += wire.i32(partition) + wire.i32(len(batch)) + batch
    with wire.connect(port, timeout=30) as s:
        s.sendall(wire.frame(wire.request_header_v1(API_PRODUCE, 3, 31) + body))
        _, parts = wire.parse_produce_v3_response(wire.recv_frame(s))
    return {p: (err, base) for _, p, err, base in parts}


def test_transactional_batches_of_two_producers_are_refused_whole(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    warm = txn_producer(broker, f"warm-{uuid.uuid4().hex[:8]}")  # creates the state topic
    warm.flush(1)
    ids = []
    for _ in range(2):
        tid = f"two-pids-{uuid.uuid4().hex[:8]}"
        err, pid, epoch = init_producer_id(broker.port, tid)
        assert err == 0, err
        ids.append((tid, pid, epoch))
    (tid, pid_a, epoch_a), (_, pid_b, epoch_b) = ids
    assert pid_a != pid_b
    now = int(time.time() * 1000)
    answer = produce_v3_two_partitions(
        broker.port,
        topic_name,
        [producer_batch([b"a"], pid_a, epoch_a, 0, now),
         producer_batch([b"b"], pid_b, epoch_b, 0, now)],
        tid,
    )
    assert answer == {0: (INVALID_PRODUCER_ID_MAPPING, -1), 1: (INVALID_PRODUCER_ID_MAPPING, -1)}
    assert list_offsets(broker, topic_name, 2, isolation="read_uncommitted") == {0: 0, 1: 0}
