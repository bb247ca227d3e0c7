#!/usr/bin/env python3
"""Share group benchmark (issue #29 evidence; not a test): KIP-932 delivery and acknowledgement
on ONE partition by 4 share consumers, kactor beside Apache Kafka 4.4.0 (the jars in
.cache/kafka-libs), one broker after the other on this machine.

    KACTOR_BIN=/path/to/kactor .venv/bin/python bench/share.py \\
        [--brokers kactor,kafka] [--records 200000] [--rounds 3] [--threads 4] \\
        [--batch-size 65536]

Per broker: a single node (tests/harness/broker.py, the same share settings on both: 1 s
heartbeats, everything else at its default: 2,000 in-flight record locks per share partition, 30
s acquisition locks, delivery count limit 5), one topic with 1 partition preloaded with
`--records` records of 1 KiB (Kafka's producer-perf-test, acks=1, linger.ms=5, batch.size
`--batch-size`, 64 KiB by default: about 63 records per batch; a share fetch acquires whole
batches up to the client's max.poll.records, 500).
Then one unmeasured warm-up round (Kafka's JIT) and `--rounds` measured rounds, each with a
fresh share group set to share.auto.offset.reset=earliest (IncrementalAlterConfigs on the GROUP
resource) before its first member joins, consumed by Kafka's own ShareConsumerPerformance
(bin/kafka-share-consumer-perf-test.sh) with `--threads` 4: 4 KafkaShareConsumers in one JVM,
all on the one partition, acknowledging implicitly (each poll accepts the previous poll's
records, the last ones by commitSync), until they have read `--records` between them. The perf
tool runs on the JVM's full JIT with 1 GiB of heap.

Measured per round, while the tool runs, by a sampler that asks the broker every 20 ms for the
group's share-partition start offset and lag (DescribeShareGroupOffsets v1, the request
kafka-share-groups --describe sends) and reads the broker's utime+stime from /proc/<pid>/stat:
  - ack window: from the first sample whose lag fell below `--records` (the first records were
    acknowledged) to the first sample with lag 0 (all acknowledged); records/s = records /
    window. The group join (heartbeat, assignment) is outside it. (Lag, not the start offset:
    Kafka's start offset can stay a few hundred records short with everything acknowledged.)
  - broker CPU seconds over that window, and per 1000 records;
  - the tool's own nMsg.sec (its clock starts before subscribe, so it includes the join) and
    the broker's CPU seconds over the whole tool run;
  - the perf tool's own CPU (getrusage of the child), to show whether the client is the limit.
Each round is then checked: kafka-share-groups --describe must show LAG 0 for the partition and
the tool must have read `--records` records (it stops at that count; more would mean
redeliveries, which are logged).
The median round is shown, with every round's records/s. Bounded: loopback only, each tool run
has a 300 s limit and a --timeout of 60 s without records. Prints a markdown table with
kactor/Kafka ratios."""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from differential.client import Client  # noqa: E402
from harness.broker import Broker, java_cmd, kactor_bin  # noqa: E402
from harness.cli import MAIN_CLASSES, KafkaCli  # noqa: E402

TOPIC = "bench-share"
# Both brokers: 1 s heartbeats (Kafka's floor is group.share.min.heartbeat.interval.ms, 5 s by
# default) so the join before the measured window is short; the rest at the defaults.
SHARE_OVERRIDES = {
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
}
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
TOOL_LIMIT_S = 300
SAMPLE_S = 0.02
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def perf(tool, args, timeout=TOOL_LIMIT_S):
    """A Kafka perf tool on the full JIT with 1 GiB of heap, bounded in time; returns (stdout,
    the tool's own CPU seconds from getrusage of the waited-for child)."""
    cmd = java_cmd(MAIN_CLASSES.get(tool, tool), args, heap="1g", quick=False)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"kafka-{tool} exited {out.returncode}\n$ {' '.join(cmd)}\n"
                           f"{out.stdout}\n{out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.stdout, out.stderr, cpu


def preload(b, records, batch_size):
    out, _, _ = perf("producer-perf-test", [
        "--topic", TOPIC, "--num-records", str(records), "--record-size", "1024",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap}",
        "acks=1", "linger.ms=5", f"batch.size={batch_size}"])
    return [line for line in out.splitlines() if "records sent" in line][-1]


def set_earliest(b, group):
    c = Client(b.target, b.port, timeout=30)
    try:
        r = c.call("IncrementalAlterConfigs", 1, {"Resources": [{
            "ResourceType": GROUP_RESOURCE, "ResourceName": group,
            "Configs": [{"Name": "share.auto.offset.reset", "ConfigOperation": 0,
                         "Value": "earliest"}]}], "ValidateOnly": False})
        err = r["Responses"][0]["ErrorCode"]
        if err:
            raise RuntimeError(f"IncrementalAlterConfigs on group {group}: {r}")
    finally:
        c.close()


class Sampler(threading.Thread):
    """Every SAMPLE_S: (time, share-partition start offset, lag, broker CPU seconds), from
    DescribeShareGroupOffsets v1 on its own connection and /proc/<pid>/stat."""

    def __init__(self, b, group):
        super().__init__(daemon=True)
        self.b, self.group = b, group
        self.samples = []
        self.errors = []
        self.stop_evt = threading.Event()

    def run(self):
        c = Client(self.b.target, self.b.port, timeout=10)
        body = {"Groups": [{"GroupId": self.group,
                            "Topics": [{"TopicName": TOPIC, "Partitions": [0]}]}]}
        try:
            while not self.stop_evt.is_set():
                t = time.monotonic()
                cpu = cpu_seconds(self.b.pid)
                start, lag = -1, -1
                try:
                    r = c.call("DescribeShareGroupOffsets", 1, body)
                    g = r["Groups"][0]
                    if g["ErrorCode"] == 0 and g["Topics"]:
                        p = g["Topics"][0]["Partitions"][0]
                        if p["ErrorCode"] == 0:
                            start, lag = p["StartOffset"], p["Lag"]
                    elif len(self.errors) < 5:
                        self.errors.append(g["ErrorCode"])
                except Exception as e:  # noqa: BLE001  the broker may be busy; keep sampling
                    if len(self.errors) < 5:
                        self.errors.append(repr(e))
                    c.close()
                self.samples.append((t, start, lag, cpu))
                self.stop_evt.wait(max(0.0, SAMPLE_S - (time.monotonic() - t)))
        finally:
            c.close()

    def stop(self):
        self.stop_evt.set()
        self.join(30)

    def window(self, records):
        """(first sample with a lag below `records`, first with lag 0), or None. Lag, not the
        start offset: Kafka's start offset may stay behind the last acknowledged batch (it
        answered start 19656, lag 0 for 20,000 records all acknowledged), its lag counts
        the records acknowledged beyond the start offset as done."""
        first = next((s for s in self.samples if s[1] >= 0 and 0 <= s[2] < records), None)
        last = next((s for s in self.samples if s[1] >= 0 and s[2] == 0), None)
        return (first, last) if first and last else None


def describe_lag(b, group):
    """kafka-share-groups --describe: {partition: (start offset, lag)} for TOPIC."""
    out = KafkaCli(b).run("share-groups", "--describe", "--group", group, timeout=120).stdout
    rows = {}
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next((x for x in lines if x and x[0] == "GROUP"), None)
    if header is None:
        raise RuntimeError(f"kafka-share-groups --describe --group {group}:\n{out}")
    for x in lines:
        if len(x) == len(header) and x[0] == group:
            r = dict(zip(header, x))
            if r["TOPIC"] == TOPIC:
                rows[int(r["PARTITION"])] = (r["START-OFFSET"], r["LAG"])
    return rows, out


def share_round(b, group, records, threads):
    set_earliest(b, group)
    os.sync()
    sampler = Sampler(b, group)
    sampler.start()
    cpu0 = cpu_seconds(b.pid)
    try:
        out, err, client_cpu = perf("share-consumer-perf-test", [
            "--bootstrap-server", b.bootstrap, "--topic", TOPIC, "--group", group,
            "--num-records", str(records), "--threads", str(threads), "--timeout", "60000",
            "--show-consumer-stats"])
        cpu1 = cpu_seconds(b.pid)
        # Until all acknowledgements show (the last ones go with the tool's commitSync).
        deadline = time.monotonic() + 10
        while sampler.window(records) is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    lines = out.splitlines()
    summary = [x for x in lines if x and x[0].isdigit()]
    if not summary or "WARNING" in out:
        raise RuntimeError(f"share-consumer-perf-test did not read {records} records:\n{out}\n"
                           f"{err[-3000:]}")
    # start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg,
    # fetch.time.ms
    row = [x.strip() for x in summary[-1].split(",")]
    tool_rate, read = float(row[4]), int(row[5])
    per_consumer = [int(m.group(1)) for x in lines if (m := re.match(
        r"Share consumer \d+ .*consumption metrics- .*, (\d+), \d+$", x))]
    if read != records:
        log(f"  group {group}: the tool read {read} records for {records} (redeliveries?)")
    win = sampler.window(records)
    if win is None:
        tail = sampler.samples[-3:]
        raise RuntimeError(f"group {group}: lag never reached 0 "
                           f"(last samples {tail}, errors {sampler.errors})\n{out}")
    (t0, _, _, c0), (t1, _, _, c1) = win
    lag_rows, lag_out = describe_lag(b, group)
    if lag_rows.get(0, (None, None))[1] != "0":
        raise RuntimeError(f"group {group}: lag is not 0 after the run:\n{lag_out}")
    window = t1 - t0
    return {
        "rate": records / window, "window_s": window, "cpu_window": c1 - c0,
        "cpu_per_1k_ms": (c1 - c0) / records * 1e6, "tool_rate": tool_rate,
        "cpu_run": cpu1 - cpu0, "client_cpu": client_cpu, "read": read,
        "per_consumer": per_consumer, "lag_row": lag_rows[0],
    }


def run_target(target, args):
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-share-{target}-"))
    overrides = dict(SHARE_OVERRIDES)
    if args.record_locks:
        overrides["group.share.partition.max.record.locks"] = str(args.record_locks)
    b = Broker(workdir, target=target, overrides=overrides, name=target)
    log(f"{target}: starting ({kactor_bin() if target == 'kactor' else 'Kafka 4.4.0'})")
    b.start()
    rounds = []
    try:
        c = Client(b.target, b.port, timeout=60)
        try:
            c.create_topic(TOPIC, partitions=1)
        finally:
            c.close()
        log(f"{target}: preload: {preload(b, args.records, args.batch_size)}")
        for i in range(args.rounds + 1):
            group = f"bench-share-{'warm' if i == 0 else i}"
            r = share_round(b, group, args.records, args.threads)
            log(f"{target}: {group}: {r['rate']:,.0f} records/s over {r['window_s']:.2f} s, "
                f"broker CPU {r['cpu_window']:.2f} s ({r['cpu_per_1k_ms']:.1f} ms/1000), "
                f"tool {r['tool_rate']:,.0f}/s, broker CPU whole run {r['cpu_run']:.2f} s, "
                f"client CPU {r['client_cpu']:.1f} s, read {r['read']} "
                f"{r['per_consumer']}, describe (start, lag) {r['lag_row']}, "
                f"load {os.getloadavg()[0]:.1f}")
            if i > 0:
                rounds.append(r)
    finally:
        b.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # the preload: 200 MB a broker
    return rounds


ROWS = [  # (label, key, format)
    ("records/s delivered+acknowledged (ack window)", "rate", "{:,.0f}"),
    ("ack window, s", "window_s", "{:.2f}"),
    ("broker CPU s over the ack window", "cpu_window", "{:.2f}"),
    ("broker CPU ms per 1000 records", "cpu_per_1k_ms", "{:.1f}"),
    ("tool's nMsg.sec (includes the group join)", "tool_rate", "{:,.0f}"),
    ("broker CPU s over the whole tool run", "cpu_run", "{:.2f}"),
    ("perf tool (client) CPU s", "client_cpu", "{:.1f}"),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", default="kactor,kafka")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    # 2048: one 1 KiB record per produce batch, so every acquisition and acknowledgement range
    # is one record long (many more, smaller ranges for the brokers' delivery state).
    ap.add_argument("--batch-size", type=int, default=65536, help="the preload's batch.size")
    ap.add_argument("--record-locks", type=int, default=0,
                    help="group.share.partition.max.record.locks on both brokers (default: "
                         "theirs, 2000; up to 4000 without raising the max)")
    args = ap.parse_args(argv)
    targets = args.brokers.split(",")
    print("kactor binary:", kactor_bin(), flush=True)
    print("load before:", os.getloadavg(), flush=True)
    t_start = time.monotonic()
    results = {t: run_target(t, args) for t in targets}
    print(f"\nwall time {time.monotonic() - t_start:.0f} s; load after: {os.getloadavg()}; "
          "command: bench/share.py " + " ".join(sys.argv[1:] if argv is None else argv))
    print(f"{args.records:,} records of 1 KiB on 1 partition (preload batch.size="
          f"{args.batch_size}), {args.threads} share consumers "
          f"(ShareConsumerPerformance --threads {args.threads}); median of {args.rounds} rounds\n")
    two = targets == ["kactor", "kafka"]
    head = "| measure | " + " | ".join(targets) + (" | kactor/Kafka |" if two else " |")
    lines = [head, "|---" * (len(targets) + 1 + two) + "|"]
    med = {t: {k: statistics.median(r[k] for r in results[t]) for _, k, _ in ROWS}
           for t in targets}
    for label, k, fmt in ROWS:
        row = [fmt.format(med[t][k]) for t in targets]
        if two:
            row.append(f"{med['kactor'][k] / med['kafka'][k]:.2f}" if med["kafka"][k] else "-")
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    lines.append("| rounds' records/s | " + " | ".join(
        " · ".join(f"{r['rate']:,.0f}" for r in results[t]) for t in targets)
        + (" | |" if two else " |"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
