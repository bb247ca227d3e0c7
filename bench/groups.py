#!/usr/bin/env python3
"""Group coordinator benchmark (issue #5 evidence; not a test): kactor side by side with
Apache Kafka 4.4.0 (the jars in .cache/kafka-libs), one after the other on this machine.

    KACTOR_BIN=/work/target-groups/release/kactor \\
        .venv/bin/python bench/groups.py [--target both|kactor|kafka] [--seconds 10] \\
        [--threads 1,8] [--members 10] [--rounds 3] [--out FILE]

Measures, per broker:
  1. Offset commits per second through one coordinator: `--seconds` of synchronous
     OffsetCommit calls (confluent-kafka `Consumer.commit(asynchronous=False)`) against ONE
     group id (so one `__consumer_offsets` partition, one coordinator shard), from 1 client
     and from 8 concurrent clients (one Consumer each, simple commits with generation -1,
     each on its own partition), each commit carrying 1 partition; and from 1 client with
     up to 64 asynchronous commits in flight (the coordinator's throughput, not one RTT).
  2. Rebalance time of a 10-member group, both protocols (`group.protocol=classic`, range
     assignor, eager; `=consumer`, KIP-848 with the broker's uniform assignor): 9 members are
     stable on a 20-partition topic, a 10th member subscribes, and the clock runs from its
     subscribe() until every member owns a disjoint non-empty share covering all 20
     partitions (each member's view, from its own rebalance callbacks). Repeated `--rounds`
     times (the 10th member closes and the 9 re-stabilize between rounds); median and max.
Both brokers get the same group settings: classic members heartbeat every 1 s
(heartbeat.interval.ms, session 6 s) and KIP-848 members are told to every 1 s
(group.consumer.heartbeat.interval.ms), since a rebalance is noticed on the next heartbeat;
group.initial.rebalance.delay.ms keeps Kafka's default (it only delays an empty group's
first rebalance, which is outside the measured window).

Load is bounded: loopback only (127.0.0.1), every phase has a wall-clock limit, and the
whole run takes a few minutes. Prints a markdown table with kactor/Kafka ratios."""
import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: E402

from harness.broker import Broker  # noqa: E402
from harness.clients import create_topic  # noqa: E402

GROUP_OVERRIDES = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
}
PHASE_LIMIT_S = 120


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# 1. Offset commits
# ---------------------------------------------------------------------------------------------
def commit_loop(bootstrap, group, topic, partition, seconds, counts, idx, start_evt):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        # Warm up: find the coordinator, first commit (may create __consumer_offsets).
        deadline = time.monotonic() + 60
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, partition, 0)], asynchronous=False)
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        start_evt.wait(60)
        n, offset = 0, 1
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
            n += 1
            offset += 1
        counts[idx] = n
    finally:
        c.close()


def bench_pipelined_commits(broker, topic, seconds, window=64):
    """One client, asynchronous commits with at most `window` outstanding (completions counted
    by the on_commit callback): the coordinator's throughput rather than one round trip."""
    done = [0, 0]  # completed, failed

    def on_commit(err, _parts):
        done[0] += 1
        if err is not None:
            done[1] += 1

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-commits-pipelined",
                  "enable.auto.commit": False, "on_commit": on_commit})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        base = done[0]
        issued, offset = 0, 1
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            if issued - (done[0] - base) < window:
                c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=True)
                issued += 1
                offset += 1
            else:
                c.poll(0.001)
        while done[0] - base < issued and time.monotonic() < end + PHASE_LIMIT_S:
            c.poll(0.01)
        elapsed = time.monotonic() - t0
        if done[1]:
            log(f"  {done[1]} pipelined commits failed")
        return (done[0] - base - done[1]) / elapsed
    finally:
        c.close()


def bench_commits(broker, topic, threads, seconds):
    group = f"bench-commits-{threads}"
    counts = [0] * threads
    start_evt = threading.Event()
    ts = [threading.Thread(target=commit_loop, args=(broker.bootstrap, group, topic, i % 20,
                                                     seconds, counts, i, start_evt))
          for i in range(threads)]
    for t in ts:
        t.start()
    time.sleep(2)  # every client warmed up
    t0 = time.monotonic()
    start_evt.set()
    for t in ts:
        t.join(seconds + PHASE_LIMIT_S)
    elapsed = max(time.monotonic() - t0, seconds)
    return sum(counts) / elapsed


# ---------------------------------------------------------------------------------------------
# 2. Rebalance time
# ---------------------------------------------------------------------------------------------
class BenchMember:
    """A consumer polled by its own thread; `owned` follows its rebalance callbacks."""

    def __init__(self, bootstrap, group, topic, protocol):
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                "enable.auto.commit": False, "auto.offset.reset": "latest"}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
        self.c = Consumer(conf)
        self.owned = set()
        self.lock = threading.Lock()
        self.running = True
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _assign(self, _c, parts):
        with self.lock:
            self.owned.update(p.partition for p in parts)

    def _revoke(self, _c, parts):
        with self.lock:
            self.owned.difference_update(p.partition for p in parts)

    def start(self):
        self.c.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke,
                         on_lost=self._revoke)
        self.thread.start()

    def _run(self):
        while self.running:
            self.c.poll(0.02)

    def share(self):
        with self.lock:
            return frozenset(self.owned)

    def close(self):
        self.running = False
        self.thread.join(10)
        self.c.close()


def stable(members, partitions):
    shares = [m.share() for m in members]
    if any(not s for s in shares):
        return False
    return sum(map(len, shares)) == partitions and frozenset().union(*shares) == frozenset(
        range(partitions))


def wait_stable(members, partitions, limit=PHASE_LIMIT_S):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if stable(members, partitions):
            return time.monotonic()
        time.sleep(0.005)
    raise RuntimeError(f"{len(members)} members did not stabilize within {limit}s: "
                       f"{[sorted(m.share()) for m in members]}")


def bench_rebalance(broker, topic, partitions, protocol, n_members, rounds):
    group = f"bench-rebalance-{protocol}"
    base = [BenchMember(broker.bootstrap, group, topic, protocol) for _ in range(n_members - 1)]
    times = []
    try:
        for m in base:
            m.start()
        wait_stable(base, partitions)
        time.sleep(2)
        for r in range(rounds):
            joiner = BenchMember(broker.bootstrap, group, topic, protocol)
            t0 = time.monotonic()
            joiner.start()
            t1 = wait_stable(base + [joiner], partitions)
            times.append(t1 - t0)
            log(f"  {protocol} round {r + 1}: {times[-1] * 1000:.0f} ms")
            time.sleep(1)
            joiner.close()
            wait_stable(base, partitions)
            time.sleep(2)
    finally:
        for m in base:
            m.close()
    return times


# ---------------------------------------------------------------------------------------------
def run_target(target, args):
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-groups-{target}-"))
    b = Broker(workdir, target=target, overrides=GROUP_OVERRIDES, name=target)
    log(f"{target}: starting")
    b.start()
    res = {}
    try:
        topic = "bench-groups"
        create_topic(b, topic, partitions=20)
        for n in args.threads:
            rate = bench_commits(b, topic, n, args.seconds)
            res[f"commits/s, {n} client{'s' if n > 1 else ''}"] = rate
            log(f"{target}: {n} client(s): {rate:.0f} commits/s")
        rate = bench_pipelined_commits(b, topic, args.seconds)
        res["commits/s, 1 client pipelined (64 in flight)"] = rate
        log(f"{target}: pipelined: {rate:.0f} commits/s")
        for protocol in ("classic", "consumer"):
            times = bench_rebalance(b, topic, 20, protocol, args.members, args.rounds)
            res[f"{protocol}: join -> stable, median ms"] = statistics.median(times) * 1000
            res[f"{protocol}: join -> stable, max ms"] = max(times) * 1000
    finally:
        b.stop()
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="both", choices=["both", "kactor", "kafka"])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", default="1,8")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",")]
    targets = ["kactor", "kafka"] if args.target == "both" else [args.target]
    results = {t: run_target(t, args) for t in targets}

    keys = list(next(iter(results.values())).keys())
    lines = ["| measure | " + " | ".join(targets) + (" | kactor/Kafka |" if len(targets) == 2
                                                       else " |"),
             "|---" * (len(targets) + 1 + (len(targets) == 2)) + "|"]
    for k in keys:
        row = [f"{results[t][k]:.0f}" for t in targets]
        if len(targets) == 2 and results["kafka"][k]:
            row.append(f"{results['kactor'][k] / results['kafka'][k]:.2f}")
        lines.append(f"| {k} | " + " | ".join(row) + " |")
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    main()
