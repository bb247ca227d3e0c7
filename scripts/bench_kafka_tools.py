#!/usr/bin/env python3
"""Benchmark (not a test): kafka-producer-perf-test / kafka-consumer-perf-test from the Kafka
4.4.0 jars against a freshly started broker (kactor, or Apache Kafka with --target kafka):
1 KiB records at acks=1 and acks=all; prints records/s, MB/s, latency percentiles, idle RSS and
start-up-to-ready time. Run through scripts/bench-kafka-tools, which sets up the venv and jars."""
import argparse
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from harness.broker import Broker  # noqa: E402
from harness.cli import run_tool  # noqa: E402
from harness.clients import create_topic  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default=os.environ.get("KACTOR_TEST_TARGET", "kactor"))
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--skip-consumer", action="store_true",
                    help="consumer-perf-test needs consumer groups (#5)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kactor-bench-") as d:
        b = Broker(d, target=args.target, name="bench")
        t0 = time.monotonic()
        b.start(timeout=180)
        ready = time.monotonic() - t0
        time.sleep(2)
        idle_rss = b.rss_bytes()
        print(f"target={args.target} startup_to_ready_s={ready:.2f} idle_rss_mib={idle_rss / 2**20:.1f}")
        try:
            for acks in ("1", "all"):
                topic = f"bench-acks-{acks}"
                create_topic(b, topic)
                out = run_tool("producer-perf-test", "--topic", topic,
                               "--num-records", args.records, "--record-size", args.record_size,
                               "--throughput", "-1", "--producer-props",
                               f"bootstrap.servers={b.bootstrap}", f"acks={acks}",
                               "linger.ms=5", "batch.size=65536", timeout=1800).stdout
                final = out.strip().splitlines()[-1]
                print(f"produce acks={acks}: {final}")
                if not args.skip_consumer:
                    out = run_tool("consumer-perf-test", "--bootstrap-server", b.bootstrap,
                                   "--topic", topic, "--num-records", args.records,
                                   "--timeout", "60000", timeout=1800).stdout
                    print(f"consume acks={acks} topic:\n{out.strip()}")
            print(f"rss_after_mib={b.rss_bytes() / 2**20:.1f}")
        finally:
            rc = b.stop()
            print(f"stopped rc={rc}; broker log: {b.log_path} (removed with the temp dir)")


if __name__ == "__main__":
    main()
