"""Transactions with a real client (#6): a confluent-kafka (librdkafka) transactional producer
commits and aborts; read_committed consumers see exactly the committed records in order,
read_uncommitted consumers see everything, every transaction ends with one control marker per
partition it touched, ListOffsets under read_committed stops at the last stable offset while
a transaction is open (also with transactions interleaved on one partition), and a dead
producer's transaction is aborted by the coordinator after transaction.timeout.ms."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from harness.clients import create_topic
from harness.txn import Script, list_offsets, read_partitions, txn_producer, values, wait_stable


def tid(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_committed_transaction_is_visible_to_both_isolation_levels(broker, topic_name):
    create_topic(broker, topic_name)
    p = txn_producer(broker, tid("commit"))
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, key=b"k", value=f"c{i}".encode(), partition=0)
    p.commit_transaction(30)
    want = [f"c{i}".encode() for i in range(10)]
    committed = read_partitions(broker, topic_name, 1, "read_committed")[0]
    uncommitted = read_partitions(broker, topic_name, 1, "read_uncommitted")[0]
    assert values(committed) == want
    assert values(uncommitted) == want
    assert [o for o, _, _ in committed] == list(range(10))
    # The commit marker takes offset 10: the high watermark and the LSO are both past it.
    assert list_offsets(broker, topic_name, 1, "read_uncommitted") == {0: 11}
    assert list_offsets(broker, topic_name, 1, "read_committed") == {0: 11}


def test_aborted_transaction_is_invisible_to_read_committed(broker, topic_name):
    create_topic(broker, topic_name)
    p = txn_producer(broker, tid("abort"))
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, value=f"a{i}".encode(), partition=0)
    p.flush(30)
    p.abort_transaction(30)
    # A committed record after the aborted transaction: read_committed must skip over the aborted
    # range (and its marker) and still reach it.
    p.begin_transaction()
    p.produce(topic_name, value=b"after", partition=0)
    p.commit_transaction(30)
    committed = read_partitions(broker, topic_name, 1, "read_committed")[0]
    uncommitted = read_partitions(broker, topic_name, 1, "read_uncommitted")[0]
    assert committed == [(11, None, b"after")], committed
    assert values(uncommitted) == [f"a{i}".encode() for i in range(10)] + [b"after"]
    assert [o for o, _, _ in uncommitted] == list(range(10)) + [11]
    assert list_offsets(broker, topic_name, 1, "read_committed") == {0: 13}


def test_mixed_commits_and_aborts_over_three_partitions(broker, topic_name):
    """Six transactions, each writing 7 records to each of 3 partitions; every other one aborted.
    Per partition the log is then [7 records, marker] x 6, so transaction t's record i sits at
    offset t*8+i; read_committed sees exactly the committed transactions' records, in order."""
    parts, per_txn, n_txn = 3, 7, 6
    create_topic(broker, topic_name, partitions=parts)
    p = txn_producer(broker, tid("mix"))
    outcome = {}
    for t in range(n_txn):
        p.begin_transaction()
        for i in range(per_txn):
            for part in range(parts):
                p.produce(topic_name, key=f"t{t}".encode(), value=f"t{t}-p{part}-{i}".encode(),
                          partition=part)
        if t % 2 == 0:
            p.commit_transaction(30)
            outcome[t] = "commit"
        else:
            p.flush(30)  # the records reach the log before the abort
            p.abort_transaction(30)
            outcome[t] = "abort"
    committed = read_partitions(broker, topic_name, parts, "read_committed")
    uncommitted = read_partitions(broker, topic_name, parts, "read_uncommitted")
    for part in range(parts):
        want_all = [(t * (per_txn + 1) + i, f"t{t}".encode(), f"t{t}-p{part}-{i}".encode())
                    for t in range(n_txn) for i in range(per_txn)]
        want_committed = [r for r in want_all if outcome[int(r[1][1:])] == "commit"]
        assert uncommitted[part] == want_all, f"partition {part}: read_uncommitted"
        assert committed[part] == want_committed, f"partition {part}: read_committed"
        assert not any(v.startswith(f"t{t}-".encode()) for _, _, v in committed[part]
                       for t in outcome if outcome[t] == "abort")
    end = n_txn * (per_txn + 1)
    assert list_offsets(broker, topic_name, parts, "read_uncommitted") == {q: end for q in range(parts)}
    assert list_offsets(broker, topic_name, parts, "read_committed") == {q: end for q in range(parts)}


def test_read_committed_stops_at_the_last_stable_offset_while_a_transaction_is_open(
        broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    plain = txn_producer(broker, None, init=False, conf={"enable.idempotence": True})
    for i in range(3):
        plain.produce(topic_name, value=f"before{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    p = txn_producer(broker, tid("lso"))
    p.begin_transaction()
    for i in range(5):
        p.produce(topic_name, value=f"open{i}".encode(), partition=0)
        p.produce(topic_name, value=f"open{i}".encode(), partition=1)
    p.flush(30)
    # Non-transactional records after the open transaction: above the LSO, so hidden too.
    for i in range(2):
        plain.produce(topic_name, value=f"later{i}".encode(), partition=0)
    assert plain.flush(30) == 0

    assert list_offsets(broker, topic_name, 2, "read_uncommitted") == {0: 10, 1: 5}
    assert list_offsets(broker, topic_name, 2, "read_committed") == {0: 3, 1: 0}, \
        "read_committed ListOffsets must answer the first offset of the open transaction"
    # librdkafka's watermark query (ListOffsets with the consumer's isolation level).
    for isolation, want in (("read_committed", 3), ("read_uncommitted", 10)):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm",
                      "isolation.level": isolation})
        try:
            assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=30) \
                == (0, want), isolation
        finally:
            c.close()
    seen = read_partitions(broker, topic_name, 2, "read_committed")
    assert values(seen) == {0: [b"before0", b"before1", b"before2"], 1: []}
    assert len(read_partitions(broker, topic_name, 2, "read_uncommitted")[0]) == 10

    p.commit_transaction(30)
    # The markers land at 10 (partition 0) and 5 (partition 1).
    assert wait_stable(broker, topic_name, 2, timeout=30) == {0: 11, 1: 6}
    seen = read_partitions(broker, topic_name, 2, "read_committed")
    assert values(seen) == {
        0: [f"before{i}".encode() for i in range(3)] + [f"open{i}".encode() for i in range(5)]
        + [b"later0", b"later1"],
        1: [f"open{i}".encode() for i in range(5)]}


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker, topic_name):
    create_topic(broker, topic_name)
    txn_id = tid("fence")
    old = txn_producer(broker, txn_id)
    old.begin_transaction()
    old.produce(topic_name, value=b"zombie", partition=0)
    old.flush(30)
    new = txn_producer(broker, txn_id)  # bumps the epoch and aborts the old open transaction
    new.begin_transaction()
    new.produce(topic_name, value=b"fresh", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.produce(topic_name, value=b"zombie2", partition=0)
        old.commit_transaction(30)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort(), e.value
    assert values(read_partitions(broker, topic_name, 1, "read_committed")[0]) == [b"fresh"]


def test_interleaved_transactions_on_one_partition(broker, topic_name):
    """Two producers' transactions interleave on one partition; A's is aborted, B's two are
    committed. read_committed must skip exactly A's records wherever they sit, and the LSO stays
    at A's first offset until A ends, even though B's later transactions have committed."""
    create_topic(broker, topic_name)
    a = txn_producer(broker, tid("inter-a"))
    b = txn_producer(broker, tid("inter-b"))
    a.begin_transaction()
    b.begin_transaction()
    for i in range(3):
        a.produce(topic_name, value=f"a{i}".encode(), partition=0)
        a.flush(30)
        b.produce(topic_name, value=f"b{i}".encode(), partition=0)
        b.flush(30)
    b.commit_transaction(30)  # marker at 6
    b.begin_transaction()
    b.produce(topic_name, value=b"b3", partition=0)
    b.commit_transaction(30)  # b3 at 7, marker at 8
    assert list_offsets(broker, topic_name, 1, "read_committed") == {0: 0}, \
        "A's open transaction (first offset 0) must hold the LSO"
    assert read_partitions(broker, topic_name, 1, "read_committed")[0] == []
    a.produce(topic_name, value=b"a3", partition=0)  # offset 9
    a.flush(30)
    a.abort_transaction(30)  # marker at 10
    assert wait_stable(broker, topic_name, 1, timeout=30) == {0: 11}
    got = read_partitions(broker, topic_name, 1, "read_committed")[0]
    assert [(o, v) for o, _, v in got] == [(1, b"b0"), (3, b"b1"), (5, b"b2"), (7, b"b3")]
    everything = read_partitions(broker, topic_name, 1, "read_uncommitted")[0]
    assert [(o, v) for o, _, v in everything] == [
        (0, b"a0"), (1, b"b0"), (2, b"a1"), (3, b"b1"), (4, b"a2"), (5, b"b2"), (7, b"b3"),
        (9, b"a3")]


def test_killed_producers_transaction_is_aborted_after_its_timeout(broker_factory, topic_name,
                                                                   tmp_path):
    # The coordinator looks for expired transactions every second instead of every 10 s.
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
    create_topic(b, topic_name, partitions=2)
    txn_id = tid("expire")
    with Script("txn_hanger.py", b.bootstrap, topic_name, 2, txn_id, 3, 4000,
                log_path=tmp_path / "hanger.stderr") as hanger:
        hanger.wait_line("open", timeout=60)
        started = time.monotonic()
        hanger.kill9()
    assert list_offsets(b, topic_name, 2, "read_committed") == {0: 0, 1: 0}
    # Aborted by the coordinator: a marker after the 3 records on each partition.
    assert wait_stable(b, topic_name, 2, timeout=40) == {0: 4, 1: 4}
    assert time.monotonic() - started >= 2, "aborted long before transaction.timeout.ms"
    assert read_partitions(b, topic_name, 2, "read_committed") == {0: [], 1: []}
    assert [len(v) for v in read_partitions(b, topic_name, 2, "read_uncommitted").values()] \
        == [3, 3]
    # The transactional.id carries on: the next producer initialises and commits.
    p = txn_producer(b, txn_id)
    p.begin_transaction()
    p.produce(topic_name, value=b"next", partition=1)
    p.commit_transaction(30)
    assert values(read_partitions(b, topic_name, 2, "read_committed")) == {0: [], 1: [b"next"]}
