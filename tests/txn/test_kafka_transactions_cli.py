"""`kafka-transactions` (Kafka 4.4.0 tools) against the broker, checked on its output (#6)."""
import time
import uuid

from confluent_kafka import Producer

from harness.cli import KafkaCli
from harness.clients import create_topic
from harness.txn import (Script, init_producer_id, list_offsets, produce_v3, producer_batch,
                         read_partitions, txn_producer, values)


def test_describe_producers_lists_the_idempotent_producer(broker, cli, topic_name):
    create_topic(broker, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for _ in range(10):
        p.produce(topic_name, value=b"x")
    assert p.flush(30) == 0
    out = cli.run("transactions", "describe-producers", "--topic", topic_name,
                  "--partition", "0").stdout
    lines = [l.split() for l in out.strip().splitlines()]
    assert lines[0][:4] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                            "LastSequence"]
    assert len(lines) == 2, out
    row = lines[1]
    assert row[1] == "0", "epoch 0 for an idempotent producer"
    assert row[3] == "9", "ten records in sequence 0..9"
    assert row[5] == "None", "no open transaction"


def table(out):
    """The tool's tab-separated table: (header, [row, ...]) with cells stripped."""
    lines = [l for l in out.splitlines() if l.strip()]
    rows = [[c.strip() for c in l.rstrip("\t").split("\t")] for l in lines]
    return rows[0], rows[1:]


def tid(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_list_and_describe_show_committed_and_open_transactions(broker, cli, topic_name):
    create_topic(broker, topic_name, partitions=2)
    done_id, open_id = tid("cli-done"), tid("cli-open")
    done = txn_producer(broker, done_id)
    done.begin_transaction()
    done.produce(topic_name, value=b"x", partition=0)
    done.commit_transaction(30)
    ongoing = txn_producer(broker, open_id, conf={"transaction.timeout.ms": 60000})
    ongoing.begin_transaction()
    ongoing.produce(topic_name, value=b"y", partition=0)
    ongoing.produce(topic_name, value=b"y", partition=1)
    ongoing.flush(30)

    head, rows = table(cli.run("transactions", "list").stdout)
    assert head == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    by_id = {r[0]: r for r in rows}
    assert by_id[done_id][1] == "1" and by_id[done_id][3] == "CompleteCommit", rows
    assert by_id[open_id][1] == "1" and by_id[open_id][3] == "Ongoing", rows
    assert by_id[done_id][2] != by_id[open_id][2], "two producers, two producer ids"

    head, rows = table(cli.run("transactions", "describe", "--transactional-id", open_id).stdout)
    assert head == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions"]
    (row,) = rows
    d = dict(zip(head, row))
    assert d["TransactionalId"] == open_id and d["TransactionState"] == "Ongoing"
    assert d["TransactionTimeoutMs"] == "60000"
    assert d["ProducerId"] == by_id[open_id][2]
    assert sorted(d["TopicPartitions"].split(",")) == [f"{topic_name}-0", f"{topic_name}-1"]
    assert int(d["CurrentTransactionStartTimeMs"]) > 0 and int(d["TransactionDurationMs"]) >= 0

    ongoing.commit_transaction(30)
    _, rows = table(cli.run("transactions", "describe", "--transactional-id", open_id).stdout)
    d = dict(zip(head, rows[0]))
    assert d["TransactionState"] == "CompleteCommit" and d["TopicPartitions"] == ""

    r = cli.run("transactions", "describe", "--transactional-id", tid("never-used"), check=False)
    assert r.returncode != 0
    assert "could not be found" in r.stderr, r.stderr


def test_abort_ends_the_open_transaction_of_a_killed_producer(broker, cli, topic_name, tmp_path):
    create_topic(broker, topic_name)
    # A long transaction timeout: the coordinator must not abort it before the tool does.
    hanger = Script("txn_hanger.py", broker.bootstrap, topic_name, 1, tid("cli-hung"), 3, 120000,
                    log_path=tmp_path / "hanger.stderr")
    with hanger:
        hanger.wait_line("open", timeout=60)
        hanger.kill9()
    plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(4):
        plain.produce(topic_name, value=f"plain{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    # The dead producer's transaction pins the LSO at its first offset.
    assert list_offsets(broker, topic_name, 1, "read_committed") == {0: 0}
    assert read_partitions(broker, topic_name, 1, "read_committed")[0] == []

    head, rows = table(cli.run("transactions", "describe-producers", "--topic", topic_name,
                               "--partition", "0").stdout)
    by_start = {dict(zip(head, r))["CurrentTransactionStartOffset"]: dict(zip(head, r))
                for r in rows}
    assert "0" in by_start, rows
    assert by_start["0"]["LastSequence"] == "2"

    cli.run("transactions", "abort", "--topic", topic_name, "--partition", "0",
            "--start-offset", "0")

    head, rows = table(cli.run("transactions", "describe-producers", "--topic", topic_name,
                               "--partition", "0").stdout)
    assert all(dict(zip(head, r))["CurrentTransactionStartOffset"] == "None" for r in rows), rows
    # 3 aborted records, 4 plain ones, then the abort marker at 7.
    assert list_offsets(broker, topic_name, 1, "read_committed") == {0: 8}
    assert values(read_partitions(broker, topic_name, 1, "read_committed")[0]) == \
        [f"plain{i}".encode() for i in range(4)]
    assert len(read_partitions(broker, topic_name, 1, "read_uncommitted")[0]) == 7


def test_find_hanging_reports_a_transaction_unknown_to_the_coordinator(broker_factory,
                                                                      topic_name):
    # Verification off: the broker accepts a transactional batch for a partition that was never
    # added to a transaction, as brokers before KIP-890 did; that is how transactions hang.
    b = broker_factory({"transaction.partition.verification.enable": "false"})
    cli = KafkaCli(b)
    create_topic(b, topic_name)
    head, rows = table(cli.run("transactions", "find-hanging", "--broker-id", "1").stdout)
    assert head == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                    "StartOffset", "LastTimestamp", "Duration(min)"]
    assert rows == [], "nothing hangs on a fresh broker"

    err, pid, epoch = init_producer_id(b.port)  # an idempotent id: no transactional.id behind it
    assert err == 0
    # 30 minutes old: past find-hanging's default 15-minute maximum transaction timeout.
    old_ms = int(time.time() * 1000) - 30 * 60 * 1000
    batch = producer_batch([b"h0", b"h1"], pid, epoch, 0, old_ms)
    assert produce_v3(b.port, topic_name, 0, batch, transactional_id="ghost") == (0, 0)
    plain = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    plain.produce(topic_name, value=b"after", partition=0)
    assert plain.flush(30) == 0
    assert list_offsets(b, topic_name, 1, "read_committed") == {0: 0}

    head, rows = table(cli.run("transactions", "find-hanging", "--broker-id", "1").stdout)
    assert len(rows) == 1, rows
    d = dict(zip(head, rows[0]))
    assert (d["Topic"], d["Partition"], d["ProducerId"], d["ProducerEpoch"], d["StartOffset"]) \
        == (topic_name, "0", str(pid), str(epoch), "0")
    assert int(d["LastTimestamp"]) == old_ms
    assert int(d["Duration(min)"]) >= 29

    cli.run("transactions", "abort", "--topic", topic_name, "--partition", "0",
            "--start-offset", "0")
    _, rows = table(cli.run("transactions", "find-hanging", "--broker-id", "1").stdout)
    assert rows == []
    assert list_offsets(b, topic_name, 1, "read_committed") == {0: 4}
    assert values(read_partitions(b, topic_name, 1, "read_committed")[0]) == [b"after"]


def test_list_filters_by_transactional_id_pattern(broker, cli, topic_name):
    create_topic(broker, topic_name)
    tag = uuid.uuid4().hex[:8]
    for name in (f"pat-{tag}-a", f"pat-{tag}-b", f"other-{tag}"):
        p = txn_producer(broker, name)
        p.begin_transaction()
        p.produce(topic_name, value=name.encode(), partition=0)
        p.commit_transaction(30)
    # ListTransactions v2 (KIP-1152) carries the regular expression to the broker.
    _, rows = table(cli.run("transactions", "list", "--transactional-id-pattern",
                            f"pat-{tag}-.*").stdout)
    assert sorted(r[0] for r in rows) == [f"pat-{tag}-a", f"pat-{tag}-b"]
    _, rows = table(cli.run("transactions", "list", "--transactional-id-pattern",
                            f"other-{tag}").stdout)
    assert [r[0] for r in rows] == [f"other-{tag}"]
