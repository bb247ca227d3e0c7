"""One fault run: a broker with two data log dirs (one on a small tmpfs for the disk-full
nemesis, the KRaft metadata log in a third dir so a full data disk is not a metadata fault),
a workload, the nemesis for `seconds`, a drain and final reads once healed, then the checkers.

Everything lands in `outdir`: history.jsonl (the history, its first line the run's meta:
seed, workload, target, ...), result.json (figures and anomalies) and broker/broker.log."""
import json
import random
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

from harness.broker import Broker

from . import checkers, workloads
from .history import INFO, OK, History, summary
from .nemesis import FAULTS, Nemesis, SmallDisk

QUEUE_PARTITIONS = 4
COPIER_PARTITIONS = 4
COPIERS = 2


class Run:
    def __init__(self, workload, seconds, seed, target, outdir, faults=FAULTS, rate=None):
        self.workload, self.seconds, self.seed = workload, seconds, seed
        self.target, self.outdir = target, Path(outdir)
        self.faults = faults
        self.rate = rate or (300 if workload == "queue" else 150)
        self.name = f"faults-{workload}-{seed}"
        self.history = History({"seed": seed, "workload": workload, "target": target,
                                "fault_seconds": seconds, "faults": list(faults),
                                "rate": self.rate})
        self.stop_writes = threading.Event()
        self.stop_reads = threading.Event()
        self.broker = None

    @property
    def bootstrap(self):
        return self.broker.bootstrap

    def execute(self):
        """Runs everything; returns the result dict (also written to result.json)."""
        started = time.monotonic()
        self.outdir.mkdir(parents=True, exist_ok=True)
        bdir = self.outdir / "broker"
        disk = SmallDisk(bdir / "small-disk", size="128m")
        self.history.meta["disk_full_possible"] = disk.mounted
        if not disk.mounted:
            self.history.meta["disk_full_skipped"] = disk.error
        log_dirs = [str(disk.path / "logs")] if disk.mounted else []
        log_dirs.append(str(bdir / "data"))
        self.broker = Broker(bdir, target=self.target, name="broker", overrides={
            "log.dirs": ",".join(log_dirs), "metadata.log.dir": str(bdir / "metadata"),
            "group.initial.rebalance.delay.ms": "0"})
        nemesis = Nemesis(self.broker, self.history, random.Random(self.seed), disk=disk,
                          faults=self.faults)
        threads = []
        try:
            self.broker.start(timeout=180)
            if self.workload == "queue":
                threads = self._queue()
            else:
                threads = self._copier()
            for t in threads:
                t.start()
            fault_start = time.monotonic()
            nemesis.run(self.seconds)
            fault_time = time.monotonic() - fault_start
            self.stop_writes.set()
            for t in threads:
                if isinstance(t, workloads.Writer):
                    t.join(150)
            nemesis.check_alive()
            self._drain(threads)
            self.stop_reads.set()
            joined_by = time.monotonic() + 60
            for t in threads:
                t.join(max(0.1, joined_by - time.monotonic()))
            self._record_stuck(threads)
            self._final_reads()
            nemesis.check_alive()
        finally:
            self.stop_writes.set()
            self.stop_reads.set()
            if self.broker.is_running():
                self.broker.stop()
            disk.close()
            hist = self.history.save(self.outdir / "history.jsonl")
        ops = self.history.snapshot()
        anomalies = checkers.check_all(ops)
        result = {
            "seed": self.seed, "workload": self.workload, "target": self.target,
            "fault_seconds": round(fault_time, 1),
            "total_seconds": round(time.monotonic() - started, 1),
            "faults": nemesis.counts,
            "restart_seconds_max": round(max(nemesis.restart_seconds, default=0), 1),
            "operations": summary(ops), "ops_total": len(ops),
            "anomalies": anomalies, "anomaly_counts": _counts(anomalies),
            "history": str(hist), "broker_log": str(self.broker.log_path),
            "disk_full_possible": self.history.meta["disk_full_possible"],
            "disk_full_skipped": self.history.meta.get("disk_full_skipped"),
        }
        with open(self.outdir / "result.json", "w") as f:
            json.dump(result, f, indent=1)
        return result

    # ---- workloads ---------------------------------------------------------------------
    def _queue(self):
        self.topic = f"{self.name}-q"
        workloads.create_topics(self.bootstrap, {self.topic: QUEUE_PARTITIONS})
        parts = list(range(QUEUE_PARTITIONS))
        group = f"{self.name}-group"
        return ([workloads.Writer(self, f"producer-{i}", self.topic, parts, self.rate / 2)
                 for i in range(2)]
                + [workloads.QueueConsumer(self, f"consumer-{i}", self.topic, group)
                   for i in range(2)])

    def _copier(self):
        self.src, self.dst = f"{self.name}-in", f"{self.name}-out"
        workloads.create_topics(self.bootstrap, {self.src: COPIER_PARTITIONS,
                                                 self.dst: COPIER_PARTITIONS})
        parts = list(range(COPIER_PARTITIONS))
        group = f"{self.name}-copiers"
        return ([workloads.Writer(self, "producer-0", self.src, parts, self.rate)]
                + [workloads.Copier(self, f"copier-{i}", self.src, self.dst,
                                    parts[i::COPIERS], group) for i in range(COPIERS)]
                + [workloads.Verifier(self, self.dst, parts)])

    def _drain(self, threads, timeout=120):
        """Readers keep going until they got everything acknowledged (queue) or the copiers
        caught up, bounded by `timeout`; a shortfall is then the checkers' to report."""
        deadline = time.monotonic() + timeout
        if self.workload == "queue":
            while time.monotonic() < deadline:
                ops = self.history.snapshot()
                acked = {op["value"] for op in ops if op["f"] == "send" and op["type"] == OK}
                polled = {op["value"] for op in ops if op["f"] == "poll"}
                if acked <= polled:
                    break
                time.sleep(1)
        else:
            copiers = [t for t in threads if isinstance(t, workloads.Copier)]
            while time.monotonic() < deadline and any(t.is_alive() for t in copiers):
                time.sleep(1)
            # The verifier catches up with what the copiers committed.
            time.sleep(3)

    def _record_stuck(self, threads):
        """A client thread still running after it was told to stop: where it is stuck goes
        into the history (a liveness problem for the checkers to report)."""
        frames = sys._current_frames()
        for t in threads:
            if t.is_alive():
                stack = "".join(traceback.format_stack(frames.get(t.ident))) \
                    if t.ident in frames else "?"
                self.history.record(t.name, INFO, "stuck", stack=stack[-3000:])

    def _final_reads(self):
        if self.workload == "queue":
            workloads.read_topic(self, self.topic, range(QUEUE_PARTITIONS), "read_uncommitted",
                                 "queue")
        else:
            workloads.read_topic(self, self.src, range(COPIER_PARTITIONS), "read_uncommitted",
                                 "input")
            workloads.read_topic(self, self.dst, range(COPIER_PARTITIONS), "read_committed",
                                 "output")


def _counts(anomalies):
    out = {}
    for a in anomalies:
        out[a["kind"]] = out.get(a["kind"], 0) + 1
    return out


def describe(result, limit=5):
    """A few lines for a test failure or the console: figures, then the first anomalies."""
    lines = [f"{result['workload']} on {result['target']}, seed {result['seed']}: "
             f"{result['fault_seconds']}s of faults {result['faults']}, "
             f"{result['ops_total']} history entries {result['operations']}, "
             f"anomalies {result['anomaly_counts'] or 'none'}"]
    if not result.get("disk_full_possible", True):
        lines.append(f"  no disk-full faults: cannot mount a tmpfs ({result.get('disk_full_skipped')})")
    for a in result["anomalies"][:limit]:
        text = json.dumps(a)
        lines.append("  " + (text if len(text) < 600 else text[:600] + "..."))
    lines.append(f"  history: {result['history']}; broker log: {result['broker_log']}")
    return "\n".join(lines)


def keep(result, outdir, into):
    """Copies a run's directory (history, result, broker logs; not the data) to `into`."""
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    src = Path(outdir)
    for name in ("history.jsonl", "result.json"):
        if (src / name).exists():
            shutil.copy2(src / name, into / name)
    for log in (src / "broker").glob("*.log"):
        shutil.copy2(log, into / log.name)
    return into
