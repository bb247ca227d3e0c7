"""Helpers for the transaction suites (#6, tests/txn): transactional confluent-kafka producers,
reading whole partitions under either isolation level, ListOffsets per isolation level (the
last stable offset), and child processes running the client scripts in tests/txn/ (so a test
can SIGKILL a producer in the middle of a transaction)."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import (Consumer, IsolationLevel, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, OffsetSpec

TXN_DIR = Path(__file__).resolve().parents[1] / "txn"


def bootstrap_of(b):
    return b if isinstance(b, str) else b.bootstrap


def txn_producer(broker, transactional_id, init=True, timeout=60, conf=None):
    """A confluent-kafka transactional producer (extra librdkafka settings in `conf`), with
    `init_transactions` already called unless `init=False`. `transactional_id=None` and
    `init=False` give a plain (idempotent by `conf`) producer."""
    c = {"bootstrap.servers": bootstrap_of(broker), "linger.ms": 5}
    if transactional_id is not None:
        c["transactional.id"] = transactional_id
    c.update(conf or {})
    p = Producer(c)
    if init:
        p.init_transactions(timeout)
    return p


def read_partitions(broker, topic, partitions, isolation="read_committed", timeout=30):
    """Everything readable in `topic` partitions `partitions` (an int n means 0..n-1) from offset 0
    up to the end the broker reports (the high watermark, or the LSO for read_committed).
    Returns {partition: [(offset, key, value), ...]} in offset order."""
    if isinstance(partitions, int):
        partitions = list(range(partitions))
    c = Consumer({"bootstrap.servers": bootstrap_of(broker), "group.id": "kactor-txn-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "isolation.level": isolation})
    out = {p: [] for p in partitions}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_eof = set()
        deadline = time.monotonic() + timeout
        while len(at_eof) < len(partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: no end of partitions {sorted(set(partitions) - at_eof)}"
                                     f" within {timeout}s ({isolation})")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            at_eof.discard(m.partition())
            out[m.partition()].append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def values(records):
    """[(offset, key, value)] or {partition: [...]} -> the values (bytes), partition by partition."""
    if isinstance(records, dict):
        return {p: [v for _, _, v in rs] for p, rs in records.items()}
    return [v for _, _, v in records]


def list_offsets(broker, topic, partitions, isolation="read_committed", spec=None):
    """ListOffsets (latest unless `spec`) under an isolation level: read_committed answers the
    last stable offset, read_uncommitted the high watermark. Returns {partition: offset}."""
    if isinstance(partitions, int):
        partitions = list(range(partitions))
    level = (IsolationLevel.READ_COMMITTED if isolation == "read_committed"
             else IsolationLevel.READ_UNCOMMITTED)
    a = AdminClient({"bootstrap.servers": bootstrap_of(broker)})
    req = {TopicPartition(topic, p): (spec or OffsetSpec.latest()) for p in partitions}
    futs = a.list_offsets(req, isolation_level=level, request_timeout=30)
    return {tp.partition: f.result(30).offset for tp, f in futs.items()}


def wait_stable(broker, topic, partitions, timeout=60):
    """Wait until the last stable offset equals the high watermark on every partition (no open
    transaction left); returns the offsets. Raises with both maps if it never happens."""
    deadline = time.monotonic() + timeout
    while True:
        lso = list_offsets(broker, topic, partitions, "read_committed")
        hw = list_offsets(broker, topic, partitions, "read_uncommitted")
        if lso == hw:
            return hw
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: LSO {lso} still behind HW {hw} after {timeout}s")
        time.sleep(0.5)


class Script:
    """A client script from tests/txn/ run as a child process (own session, so SIGKILL hits only
    it). Its stdout lines are collected in `lines` by a reader thread; `wait_line(prefix)`
    blocks until one starts with `prefix`."""

    def __init__(self, name, *args, log_path=None):
        self.cmd = [sys.executable, "-u", str(TXN_DIR / name)] + [str(a) for a in args]
        self.log_path = log_path
        self.lines = []
        self._cond = threading.Condition()
        err = open(log_path, "a") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        if log_path:
            err.close()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_line(self, prefix, timeout=60, count=1):
        """Wait for the `count`-th stdout line starting with `prefix`; returns it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                hits = [l for l in self.lines if l.startswith(prefix)]
                if len(hits) >= count:
                    return hits[count - 1]
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"{self.cmd[2]} exited {self.proc.returncode} before "
                                         f"{prefix!r}; stdout tail: {self.lines[-10:]}; "
                                         f"stderr: {self.stderr_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.cmd[2]}: no {prefix!r} line within {timeout}s; "
                                         f"stdout tail: {self.lines[-10:]}")
                self._cond.wait(min(left, 0.5))

    def stderr_tail(self, n=20):
        if not self.log_path:
            return ""
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    def kill9(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(5)

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"{self.cmd[2]} still running after {timeout}s; stdout tail: "
                                 f"{self.lines[-10:]}; stderr: {self.stderr_tail()}") from None
        self._reader.join(5)
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill9()
