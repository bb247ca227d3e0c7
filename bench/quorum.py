#!/usr/bin/env python3
"""KRaft quorum benchmark (issue #25 evidence; not a test): a kactor cluster and an Apache
Kafka 4.4.0 cluster of the same shape, one after the other on this machine: three
`process.roles=controller` processes and two `process.roles=broker` processes on loopback,
with Kafka's default quorum timeouts (election 1 s, fetch 2 s).

    .venv/bin/python bench/quorum.py [--target both|kactor|kafka] [--topics 20] \\
        [--failovers 3] [--out FILE]

Measures, per implementation:
  1. CreateTopics to visible on every broker: a 1-partition topic is created through broker
     A (confluent-kafka AdminClient) and the clock runs until a Metadata request to each
     broker shows it with a leader (raw Metadata v1, polled every 5 ms). `--topics` topics,
     one after another; median and p95.
  2. Controller failover: `kill -9` of the active controller; the clock runs until a survivor
     answers DescribeQuorum with a new leader (polled every 20 ms). The killed controller is
     restarted and caught up between rounds. `--failovers` rounds; median and max.
  3. Resident memory (VmRSS) of each controller and broker at the end.
Not measured yet: metadata log replay / snapshot load at 100k records (kactor writes no
metadata snapshots yet).

Load is bounded: loopback only, every wait has a wall-clock limit, and a run takes a few
minutes. Prints a markdown table with kactor/Kafka ratios."""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import wire  # noqa: E402
from harness.cluster import Cluster, create_topic, describe_quorum_v0, wait_until  # noqa: E402

TIMEOUTS = {"controller.quorum.election.timeout.ms": "1000",
            "controller.quorum.fetch.timeout.ms": "2000"}


def visible(port, topic):
    with wire.connect(port, timeout=5) as s:
        _, topics = wire.parse_metadata_v1_response(
            wire.roundtrip(s, wire.metadata_v1_request([topic])))
    got = topics.get(topic)
    return got is not None and got[0] == 0 and len(got[1]) == 1


def create_to_visible(cluster, n):
    brokers = cluster.brokers
    out = []
    for i in range(n):
        topic = f"bench-visible-{i}"
        start = time.monotonic()
        create_topic(brokers[0], topic)
        pending = {b.port for b in brokers}
        deadline = start + 30
        while pending and time.monotonic() < deadline:
            pending = {p for p in pending if not visible(p, topic)}
            if pending:
                time.sleep(0.005)
        if pending:
            raise RuntimeError(f"{topic} not visible on every broker within 30 s")
        out.append((time.monotonic() - start) * 1000)
    return out


def leader_of(nodes):
    for n in nodes:
        try:
            err, perr, leader, epoch = describe_quorum_v0(n.controller_port, timeout=1)
        except (OSError, ValueError, ConnectionError):
            continue
        if err == 0 and perr == 0 and leader >= 0:
            return leader, epoch
    return None


def failovers(cluster, rounds):
    out = []
    for _ in range(rounds):
        leader, _ = wait_until(lambda: leader_of(cluster.controllers), 30, "a leader")
        old = cluster.node(leader)
        survivors = [n for n in cluster.controllers if n is not old]
        old.kill9()
        start = time.monotonic()
        while time.monotonic() - start < 30:
            got = leader_of(survivors)
            if got is not None and got[0] != leader:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("no new leader within 30 s")
        out.append((time.monotonic() - start) * 1000)
        old.start(timeout=180)
        time.sleep(3)  # the restarted voter catches up before the next round
    return out


def rss_mib(node):
    return node.rss_bytes() / (1 << 20)


def run(target, topics, rounds):
    with tempfile.TemporaryDirectory(prefix=f"bench-quorum-{target}-") as d:
        cluster = Cluster(Path(d), controllers=3, brokers=2, target=target, overrides=TIMEOUTS)
        t0 = time.monotonic()
        cluster.start(timeout=240)
        wait_until(lambda: leader_of(cluster.controllers), 60, "a leader")
        started = time.monotonic() - t0
        try:
            visible_ms = create_to_visible(cluster, topics)
            failover_ms = failovers(cluster, rounds)
            rss_c = [rss_mib(n) for n in cluster.controllers]
            rss_b = [rss_mib(n) for n in cluster.brokers]
        finally:
            cluster.stop()
    return {
        "start_s": started,
        "visible_ms": visible_ms,
        "failover_ms": failover_ms,
        "controller_rss": statistics.mean(rss_c),
        "broker_rss": statistics.mean(rss_b),
    }


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="both", choices=["both", "kactor", "kafka"])
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    targets = ["kactor", "kafka"] if args.target == "both" else [args.target]
    res = {}
    for t in targets:
        print(f"running {t} ...", file=sys.stderr)
        res[t] = run(t, args.topics, args.failovers)
    rows = [
        ("cluster start to elected leader (s)", lambda r: r["start_s"]),
        ("CreateTopics to visible on both brokers, median (ms)",
         lambda r: statistics.median(r["visible_ms"])),
        ("CreateTopics to visible on both brokers, p95 (ms)", lambda r: p95(r["visible_ms"])),
        ("controller failover after kill -9, median (ms)",
         lambda r: statistics.median(r["failover_ms"])),
        ("controller failover after kill -9, max (ms)", lambda r: max(r["failover_ms"])),
        ("controller RSS, mean of 3 (MiB)", lambda r: r["controller_rss"]),
        ("broker RSS, mean of 2 (MiB)", lambda r: r["broker_rss"]),
    ]
    lines = ["| metric | " + " | ".join(targets) + (" | kactor/Kafka |" if len(targets) == 2
                                                       else " |"),
             "|---|" + "---:|" * (len(targets) + (1 if len(targets) == 2 else 0))]
    for name, f in rows:
        vals = [f(res[t]) for t in targets]
        cells = [f"{v:.1f}" for v in vals]
        if len(vals) == 2:
            cells.append(f"{vals[0] / vals[1]:.2f}x" if vals[1] else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"3 controllers + 2 brokers per implementation, {args.topics} topics, "
                 f"{args.failovers} failovers; raw failover ms: "
                 + "; ".join(f"{t} {[round(x) for x in res[t]['failover_ms']]}" for t in targets))
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
