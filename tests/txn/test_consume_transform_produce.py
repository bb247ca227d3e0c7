"""Exactly-once consume-transform-produce (#6): a worker process (ctp_worker.py) reads an input
topic, writes transformed records to an output topic and commits its input offsets in the same
transaction (send_offsets_to_transaction). The test SIGKILLs it at random points and restarts it
with the same transactional.id; at the end a read_committed consumer of the output sees every
input id exactly once."""
import random
import time
import uuid

from confluent_kafka import ConsumerGroupTopicPartitions, Producer

from harness.clients import admin, create_topic
from harness.txn import Script, read_partitions

N = 2000
IN_PARTS = 3
OUT_PARTS = 2
KILLS = 4


def test_killed_and_restarted_worker_outputs_every_input_exactly_once(broker, topic_name,
                                                                      tmp_path):
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    input_topic, output_topic = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker, input_topic, partitions=IN_PARTS)
    create_topic(broker, output_topic, partitions=OUT_PARTS)
    ids = [f"id{i:05d}" for i in range(N)]
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "linger.ms": 5})
    for i, v in enumerate(ids):
        p.produce(input_topic, value=v.encode(), partition=i % IN_PARTS)
    assert p.flush(30) == 0

    group = f"ctp-{uuid.uuid4().hex[:8]}"
    txn_id = f"ctp-{uuid.uuid4().hex[:8]}"
    args = (broker.bootstrap, input_topic, output_topic, group, txn_id, IN_PARTS)
    log = tmp_path / "worker.stderr"
    deadline = time.monotonic() + 200
    kills = 0
    for _ in range(KILLS):
        with Script("ctp_worker.py", *args, log_path=log) as w:
            w.wait_line("committed", timeout=90)
            time.sleep(rng.uniform(0.3, 1.5))
            if w.proc.poll() is not None:
                break  # finished the whole input before the kill: no more kills possible
            w.kill9()
            kills += 1
        assert time.monotonic() < deadline, "worker runs took too long"
    assert kills >= 2, f"the worker finished before being killed twice (seed {seed})"
    with Script("ctp_worker.py", *args, log_path=log) as w:
        w.wait_line("done", timeout=max(30, deadline - time.monotonic()))
        assert w.wait(30) == 0, w.stderr_tail()

    out = read_partitions(broker, output_topic, OUT_PARTS, "read_committed", timeout=60)
    got = [v for part in out.values() for _, _, v in part]
    dups = sorted({v for v in got if got.count(v) > 1})[:10] if len(got) != len(set(got)) else []
    assert not dups, f"duplicated outputs (seed {seed}, {kills} kills): {dups}"
    assert sorted(got) == sorted(b"out-" + v.encode() for v in ids), \
        f"{len(got)} outputs for {N} inputs (seed {seed}, {kills} kills)"
    # Each output record's key is its input id: the transform kept the pairing.
    assert all(v == b"out-" + k for part in out.values() for _, k, v in part)

    # The input offsets were committed inside the transactions: the group is at the end.
    a = admin(broker)
    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    committed = {tp.partition: tp.offset for tp in res.topic_partitions
                 if tp.topic == input_topic}
    want = {q: len(range(q, N, IN_PARTS)) for q in range(IN_PARTS)}
    assert committed == want
