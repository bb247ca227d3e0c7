#!/usr/bin/env python3
"""Replica fetch sessions benchmark (issue #26 item 1; not a test): what an idle cluster's
replication costs with many partitions, with and without incremental fetch sessions (KIP-227).

One controller and three brokers on loopback, each broker behind a decoding proxy
(tests/harness/proxy.py FetchSpy) that its followers fetch through; a topic of `--partitions`
partitions, replication factor 3. Once every replica is in sync and the follower fetches have
nothing left to say, nothing is written for `--seconds` s, and the benchmark reports:

  - follower fetches per second, and request / response bytes per fetch;
  - the CPU seconds the three broker processes used (utime + stime from /proc).

Runs: `kactor` (sessions), `kactor-sessionless` (the same binary with
`max.incremental.fetch.session.cache.slots=0`, so every leader answers a follower's full fetch
without a session and followers keep sending full fetches, as before sessions) and `kafka`
(Apache Kafka 4.4.0 from the jars).

    .venv/bin/python bench/fetch_sessions.py [--partitions 600] [--seconds 20] \\
        [--runs kactor,kactor-sessionless,kafka]
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness.cluster import Cluster, partition_states, wait_until  # noqa: E402
from test_replica_fetch_sessions import OVERRIDES, SpiedNode, settled  # noqa: E402

TOPIC = "bench-fetch-sessions"


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(name, partitions, seconds):
    target = "kafka" if name == "kafka" else "kactor"
    overrides = dict(OVERRIDES)
    if name == "kactor-sessionless":
        overrides["max.incremental.fetch.session.cache.slots"] = "0"
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp), controllers=1, brokers=3, overrides=overrides,
                          node_class=SpiedNode, target=target).start(timeout=180)
        try:
            node = cluster.brokers[0]
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic(TOPIC, partitions, 3)])[TOPIC].result(60)

            def in_sync():
                s = partition_states(node, TOPIC)
                return s and len(s) == partitions and all(
                    len(isr) == 3 and lead >= 0 for lead, _, isr in s.values())
            wait_until(in_sync, 180, "every replica in sync")
            # Sessionless fetches name every partition each time: "settled" only for sessions.
            if name != "kactor-sessionless":
                wait_until(lambda: settled(cluster), 60, "quiet follower fetches")
            else:
                time.sleep(5)
            pids = [b.pid for b in cluster.brokers]
            cpu0 = sum(cpu_seconds(p) for p in pids)
            started = time.monotonic()
            time.sleep(seconds)
            cpu = sum(cpu_seconds(p) for p in pids) - cpu0
            fetches = [f for b in cluster.brokers for f in b.spy.replica_fetches(since=started)
                       if f["at"] <= started + seconds]
        finally:
            cluster.stop()
            for n in cluster.nodes:
                if n.spy:
                    n.spy.close()
    n = max(len(fetches), 1)
    return {
        "fetches/s": len(fetches) / seconds,
        "request B/fetch": sum(f["request_bytes"] for f in fetches) / n,
        "response B/fetch": sum(f["response_bytes"] for f in fetches) / n,
        "broker CPU s": cpu,
        "incremental": sum(1 for f in fetches if f["epoch"] > 0) / n,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", default="kactor,kactor-sessionless,kafka")
    args = ap.parse_args()
    results = {}
    for name in args.runs.split(","):
        results[name] = run(name, args.partitions, args.seconds)
        print(name, results[name], flush=True)
    cols = ["fetches/s", "request B/fetch", "response B/fetch", "broker CPU s", "incremental"]
    print(f"\n{args.partitions} partitions, RF 3, 3 brokers, idle for {args.seconds:g} s\n")
    print("| run | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, r in results.items():
        print(f"| {name} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
