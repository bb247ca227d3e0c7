#!/usr/bin/env python3
"""Replication benchmark (issue #26 evidence; not a test): a kactor cluster and an Apache Kafka
4.4.0 cluster of the same shape, one after the other on this machine: one controller and three
brokers on loopback, a topic with replication factor 3, min.insync.replicas=2, six partitions,
the same broker settings (broker.session.timeout.ms=4000, heartbeat 500 ms).

    .venv/bin/python bench/replication.py [--target both|kactor|kafka] [--records 200000] \\
        [--size 1024] [--failovers 2] [--out FILE]

Measures, per implementation, with confluent-kafka (librdkafka) idempotent acks=all producers:
  1. Throughput: `--records` records of `--size` bytes as fast as the producer sends them
     (linger.ms=5); records/s and MB/s acknowledged, and the CPU seconds the three broker
     processes used per GB acknowledged (utime + stime from /proc).
  2. Latency: 2,000 records/s for 10 s (linger.ms=0), each timed from produce() to its
     delivery report; p50, p99, p99.9.
  3. Failover: one record every 10 ms to the partition led by the broker that is then killed
     with -9; the time from the kill to the first record sent after it being acknowledged.
     `--failovers` rounds (the killed broker restarts and rejoins the ISR between rounds).
Load is bounded (record counts and wall-clock limits), loopback only. Prints a markdown table
with kactor/Kafka ratios."""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness.cluster import Cluster, wait_until  # noqa: E402

PARTITIONS = 6
OVERRIDES = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500"}
TOPIC = "bench-replication"


def states(node):
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None or len(t.partitions) != PARTITIONS:
        return None
    return {p: (x.leader, sorted(x.isrs)) for p, x in t.partitions.items()}


def in_sync(node, ids):
    s = states(node)
    return s if s and all(lead >= 0 and isr == sorted(ids) for lead, isr in s.values()) else None


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(bootstrap, brokers, records, size):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 262144, "queue.buffering.max.kbytes": 262144})
    value = b"x" * size
    acked = [0]
    errors = []

    def done(err, _):
        if err:
            errors.append(err)
        else:
            acked[0] += 1
    cpu0 = sum(cpu_seconds(b.pid) for b in brokers)
    start = time.monotonic()
    i = 0
    while i < records and time.monotonic() - start < 300:
        try:
            p.produce(TOPIC, value=value, partition=i % PARTITIONS, on_delivery=done)
            i += 1
        except BufferError:
            p.poll(0.01)
    p.flush(120)
    elapsed = time.monotonic() - start
    cpu = sum(cpu_seconds(b.pid) for b in brokers) - cpu0
    if errors:
        raise RuntimeError(f"{len(errors)} records failed: {errors[:3]}")
    gb = acked[0] * size / 1e9
    return {"records_s": acked[0] / elapsed, "mb_s": acked[0] * size / 1e6 / elapsed,
            "cpu_per_gb": cpu / gb}


def latency(bootstrap, rate=2000, seconds=10, size=1024):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 0})
    lat = []
    value = b"y" * size

    def cb(sent):
        return lambda err, _: lat.append((time.monotonic() - sent) * 1000) if not err else None
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        due = start + n / rate
        now = time.monotonic()
        if now < due:
            p.poll(min(due - now, 0.001))
            continue
        p.produce(TOPIC, value=value, partition=n % PARTITIONS, on_delivery=cb(now))
        n += 1
        p.poll(0)
    p.flush(60)
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * (len(lat) - 1)))]  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "p999": pick(0.999)}


def failover(cluster, ids):
    brokers = cluster.brokers
    s = wait_until(lambda: in_sync(brokers[0], ids), 90, "in sync")
    leader = s[0][0]
    victim = cluster.node(leader)
    survivor = next(b for b in brokers if b is not victim)
    p = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0, "message.timeout.ms": 60000})
    acked_after = []
    kill_at = [None]
    stop = threading.Event()

    def send():
        i = 0
        while not stop.is_set() and i < 20000:
            sent = time.monotonic()
            after = kill_at[0] is not None and sent > kill_at[0]
            p.produce(TOPIC, value=b"f", partition=0, on_delivery=(
                lambda err, _, a=after: acked_after.append(time.monotonic())
                if a and not err else None))
            p.poll(0)
            time.sleep(0.01)
            i += 1
        p.flush(60)
    t = threading.Thread(target=send)
    t.start()
    time.sleep(2)
    victim.kill9()
    kill_at[0] = time.monotonic()
    deadline = kill_at[0] + 60
    while not acked_after and time.monotonic() < deadline:
        time.sleep(0.01)
    took = (acked_after[0] - kill_at[0]) * 1000 if acked_after else float("nan")
    stop.set()
    t.join(90)
    victim.start(timeout=180)
    wait_until(lambda: in_sync(survivor, ids), 120, "the victim back in sync")
    return took


def run(target, records, size, rounds):
    with tempfile.TemporaryDirectory(prefix=f"bench-repl-{target}-") as d:
        cluster = Cluster(Path(d), controllers=1, brokers=3, target=target,
                          overrides=OVERRIDES).start(timeout=240)
        try:
            brokers = cluster.brokers
            ids = [b.node_id for b in brokers]
            admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                          config={"min.insync.replicas": "2"})],
                                operation_timeout=30)[TOPIC].result(30)
            wait_until(lambda: in_sync(brokers[0], ids), 60, "replicas in sync")
            bootstrap = ",".join(b.bootstrap for b in brokers)
            tp = throughput(bootstrap, brokers, records, size)
            lat = latency(bootstrap, size=size)
            fo = [failover(cluster, ids) for _ in range(rounds)]
        finally:
            cluster.stop()
    return {**tp, **lat, "failover_ms": fo}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="both", choices=["both", "kactor", "kafka"])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--failovers", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    targets = ["kactor", "kafka"] if args.target == "both" else [args.target]
    res = {}
    for t in targets:
        print(f"running {t} ...", file=sys.stderr)
        res[t] = run(t, args.records, args.size, args.failovers)
    rows = [
        ("acks=all throughput (records/s)", "records_s"),
        ("acks=all throughput (MB/s)", "mb_s"),
        ("broker CPU per GB acknowledged, 3 brokers (s)", "cpu_per_gb"),
        ("produce latency p50 at 2k/s (ms)", "p50"),
        ("produce latency p99 at 2k/s (ms)", "p99"),
        ("produce latency p99.9 at 2k/s (ms)", "p999"),
    ]
    lines = ["| metric | " + " | ".join(targets) + (" | kactor/Kafka |" if len(targets) == 2
                                                       else " |"),
             "|---|" + "---:|" * (len(targets) + (1 if len(targets) == 2 else 0))]
    for name, key in rows + [("leader kill -9 to acknowledged again, median (ms)", None)]:
        vals = [res[t][key] if key else statistics.median(res[t]["failover_ms"])
                for t in targets]
        cells = [f"{v:.1f}" for v in vals]
        if len(vals) == 2:
            cells.append(f"{vals[0] / vals[1]:.2f}x" if vals[1] else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"1 controller + 3 brokers per implementation, RF 3, min.insync.replicas 2, "
                 f"{PARTITIONS} partitions, {args.records} records of {args.size} B; raw "
                 "failover ms: " + "; ".join(
                     f"{t} {[round(x) for x in res[t]['failover_ms']]}" for t in targets))
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
