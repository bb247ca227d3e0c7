"""Consume-transform-produce worker for test_consume_transform_produce.py (run as a child
process so the test can SIGKILL it at any point).

    ctp_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS

Reads INPUT (read_committed, partitions 0..PARTITIONS-1 assigned by hand from the group's
committed offsets), writes `out-<value>` to OUTPUT and commits the consumed positions inside the
same transaction (send_offsets_to_transaction). Small transactions, with a short pause inside
each, so a kill usually lands in the middle of one. Prints `ready` after init_transactions,
`committed <n>` after each commit (n = records in it) and `done` once its committed positions
reach the input's end offsets; then exits 0."""
import random
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def main():
    bootstrap, input_topic, output_topic, group, txn_id, parts = sys.argv[1:7]
    parts = int(parts)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 2, "transaction.timeout.ms": 30000})
    # Fences any previous incarnation with this transactional.id and aborts its open transaction.
    producer.init_transactions(60)
    tps = [TopicPartition(input_topic, p) for p in range(parts)]
    # Offsets committed by the previous incarnations (require_stable: waits out pending ones).
    # On a fresh broker __consumer_offsets may still be loading: retry what is retriable.
    deadline = time.monotonic() + 60
    while True:
        try:
            start = consumer.committed(tps, timeout=30)
            break
        except KafkaException as e:
            if not e.args[0].retriable() and e.args[0].code() not in (
                    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    KafkaError.COORDINATOR_NOT_AVAILABLE) or time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    consumer.assign([TopicPartition(input_topic, tp.partition, tp.offset if tp.offset >= 0 else 0)
                     for tp in start])
    ends = {}
    for tp in tps:
        _, high = consumer.get_watermark_offsets(tp, timeout=30)
        ends[tp.partition] = high
    print("ready", flush=True)
    positions = {tp.partition: (tp.offset if tp.offset >= 0 else 0) for tp in start}
    while any(positions[p] < ends[p] for p in positions):
        msgs = consumer.consume(num_messages=random.randint(1, 15), timeout=0.5)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(output_topic, key=m.value(), value=b"out-" + m.value())
        producer.poll(0)
        time.sleep(random.uniform(0.0, 0.03))
        new_pos = dict(positions)
        for m in msgs:
            new_pos[m.partition()] = max(new_pos[m.partition()], m.offset() + 1)
        offsets = [TopicPartition(input_topic, p, o) for p, o in new_pos.items()]
        try:
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
        except KafkaException as e:
            if e.args[0].txn_requires_abort():
                producer.abort_transaction(30)
                # Re-read what the aborted transaction consumed.
                for p, o in positions.items():
                    consumer.seek(TopicPartition(input_topic, p, o))
                print(f"aborted {len(msgs)}", flush=True)
                continue
            raise
        positions = new_pos
        print(f"committed {len(msgs)}", flush=True)
    print("done", flush=True)
    consumer.close()


if __name__ == "__main__":
    main()
