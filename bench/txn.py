"""Transactional produce throughput vs plain idempotent produce (issue #6 benchmark; not a
test).

    .venv/bin/python bench/txn.py --target kactor   [--records N] [--size BYTES]
    .venv/bin/python bench/txn.py --target kafka    (Apache Kafka 4.4.0 from .cache/kafka-libs)
    .venv/bin/python bench/txn.py --bootstrap HOST:PORT   (a broker that is already running)
    ... --java   also the Java producer (kafka-producer-perf-test from the 4.4.0 jars, which
                 uses transaction version 2: no AddPartitionsToTxn, the leader adds the
                 partition, an epoch bump per transaction) with 10 ms and 100 ms transactions

With --target it starts a fresh single-node broker through the test harness (KACTOR_BIN picks
the kactor binary), on 127.0.0.1 only, and stops it afterwards.

For each mode (idempotent; transactional with 100 and 1000 records per transaction) it creates
a fresh 1-partition topic, produces N records of BYTES bytes with confluent-kafka (librdkafka),
and prints records/s and MB/s. Transactions are committed one after the other (begin, produce
K records, commit), as a consume-transform-produce loop would. Run it against kactor and Apache
Kafka on the same machine and compare ratios, not absolute numbers.
"""
import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def topic(admin, name):
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        if t and t.error is None and all(p.leader >= 0 for p in t.partitions.values()):
            return name
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} not ready")


def run(bootstrap, mode, per_txn, n, size):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = topic(admin, f"bench-{mode}-{per_txn}-{uuid.uuid4().hex[:6]}")
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1000000}
    if mode == "txn":
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex}"
    p = Producer(conf)
    value = b"x" * size
    if mode == "txn":
        p.init_transactions(60)
    # Warm-up outside the timing: connections, metadata, producer id (and for Apache Kafka the
    # JIT) are not what is measured.
    for _ in range(3):
        if mode == "txn":
            p.begin_transaction()
        for _ in range(max(per_txn, 1000)):
            p.produce(name, value=value)
        if mode == "txn":
            p.commit_transaction(60)
        else:
            assert p.flush(60) == 0
    start = time.monotonic()
    sent = 0
    while sent < n:
        k = min(per_txn, n - sent) if mode == "txn" else n
        if mode == "txn":
            p.begin_transaction()
        for _ in range(k):
            while True:
                try:
                    p.produce(name, value=value)
                    break
                except BufferError:
                    p.poll(0.01)
        if mode == "txn":
            p.commit_transaction(60)
        else:
            assert p.flush(120) == 0
        sent += k
    elapsed = time.monotonic() - start
    return n / elapsed, n * size / elapsed / 1e6


def measure(bootstrap, records, size):
    for mode, per_txn in [("idempotent", 0), ("txn", 100), ("txn", 1000)]:
        rps, mbps = run(bootstrap, mode, per_txn, records, size)
        label = "idempotent" if mode == "idempotent" else f"txn x{per_txn}"
        print(f"{label:>14}: {rps:10.0f} records/s {mbps:8.2f} MB/s", flush=True)


def measure_java(broker, records, size):
    """kafka-producer-perf-test (kafka-clients 4.4, TV2 when the broker finalizes it):
    idempotent, then transactions of 10 ms and 100 ms (--transaction-duration-ms)."""
    import re
    from harness.cli import KafkaCli

    cli = KafkaCli(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for label, duration in (("java idempotent", None), ("java txn 10ms", 10),
                            ("java txn 100ms", 100)):
        name = topic(admin, f"txnbench-java-{uuid.uuid4().hex[:8]}")
        args = ["--bootstrap-server", broker.bootstrap, "--topic", name, "--num-records",
                records, "--record-size", size, "--throughput", -1,
                "--command-property", "linger.ms=5", "--command-property", "acks=all"]
        if duration:
            args += ["--transactional-id", f"bench-{uuid.uuid4().hex[:8]}",
                     "--transaction-duration-ms", duration]
        out = cli.run("producer-perf-test", *args, timeout=600).stdout
        m = re.findall(r"records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", out)
        rps, mbps = map(float, m[-1])
        print(f"{label:>16}: {rps:10.0f} records/s {mbps:8.2f} MB/s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap")
    where.add_argument("--target", choices=["kactor", "kafka"])
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--java", action="store_true")
    a = ap.parse_args()
    if a.bootstrap:
        measure(a.bootstrap, a.records, a.size)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from harness.broker import Broker

    b = Broker(tempfile.mkdtemp(prefix=f"txnbench-{a.target}-"), target=a.target, name="bench")
    b.start()
    try:
        print(f"{a.target} at {b.bootstrap}", flush=True)
        measure(b.bootstrap, a.records, a.size)
        if a.java:
            measure_java(b, a.records, a.size)
    finally:
        b.stop()


if __name__ == "__main__":
    main()
