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

from . import wire

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


# ---- raw wire: a transaction the coordinator never heard of ----------------------------------
# Real clients always register partitions with the coordinator first; a "hanging" transaction
# (open on a partition, unknown to the coordinator: what `kafka-transactions find-hanging`
# looks for) needs a transactional batch written directly, on a broker started with
# transaction.partition.verification.enable=false.

API_PRODUCE = 0
API_INIT_PRODUCER_ID = 22


def init_producer_id(port, transactional_id=None, timeout_ms=60000, retry_s=30):
    """InitProducerId v0 on a fresh connection; returns (error_code, producer_id, epoch).
    Retries the retriable answers of a broker still starting (COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS) for `retry_s`."""
    body = wire.string(transactional_id) + wire.i32(timeout_ms)
    req = wire.frame(wire.request_header_v1(API_INIT_PRODUCER_ID, 0, 11) + body)
    deadline = time.monotonic() + retry_s
    while True:
        with wire.connect(port, timeout=30) as s:
            s.sendall(req)
            r = wire.Reader(wire.recv_frame(s))
        r.i32()  # correlation id
        r.i32()  # throttle
        out = (r.i16(), r.i64(), r.i16())
        if out[0] not in (14, 15, 16, 51) or time.monotonic() > deadline:
            return out
        time.sleep(0.3)


def producer_batch(records, producer_id, producer_epoch, base_sequence, timestamp_ms,
                   transactional=True):
    """A v2 record batch carrying producer id/epoch/sequence (attributes bit 4 = transactional).
    `records` is a list of values (bytes)."""
    recs = b""
    for delta, value in enumerate(records):
        body = wire.i8(0) + wire.varint(0) + wire.varint(delta) + wire.varint(-1)
        body += wire.varint(len(value)) + value + wire.varint(0)
        recs += wire.varint(len(body)) + body
    attributes = 0x10 if transactional else 0
    after_crc = (wire.i16(attributes) + wire.i32(len(records) - 1) + wire.i64(timestamp_ms)
                 + wire.i64(timestamp_ms) + wire.i64(producer_id) + wire.i16(producer_epoch)
                 + wire.i32(base_sequence) + wire.i32(len(records)) + recs)
    after_length = wire.i32(0) + wire.i8(2) + wire.u32(wire.crc32c(after_crc)) + after_crc
    return wire.i64(0) + wire.i32(len(after_length)) + after_length


def produce_v3(port, topic, partition, batch, transactional_id=None, acks=-1):
    """Produce v3 with one batch on a fresh connection; returns (error_code, base_offset)."""
    body = wire.string(transactional_id) + wire.i16(acks) + wire.i32(30000)
    body += wire.i32(1) + wire.string(topic) + wire.i32(1) + wire.i32(partition)
    body += wire.i32(len(batch)) + batch
    with wire.connect(port, timeout=30) as s:
        s.sendall(wire.frame(wire.request_header_v1(API_PRODUCE, 3, 12) + body))
        _, parts = wire.parse_produce_v3_response(wire.recv_frame(s))
    (_, _, err, base), = parts
    return err, base


# ---- raw wire: the transactional APIs one request at a time ----------------------------------
# kafka-python's generated request/response classes (kafka.protocol.*) encode every version of
# InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and FindCoordinator; `Rpc` sends
# them on one connection so a test can walk a transactional id through each state and read the
# coordinator's exact answers (error, producer id, epoch).

# Errors a transaction coordinator answers while it is busy or still loading: retried by
# `Rpc.init` and `Rpc.until` (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
# NOT_COORDINATOR, CONCURRENT_TRANSACTIONS).
BUSY = (14, 15, 16, 51)


class Rpc:
    """One connection to `port`; `rpc(RequestClass, version, **fields)` returns the decoded
    response. Use as a context manager."""

    def __init__(self, port, timeout=30):
        self.sock = wire.connect(port, timeout=timeout)
        self.correlation = 0

    def __call__(self, request_class, version, **fields):
        self.correlation += 1
        req = request_class(version=version, **fields)
        req.with_header(correlation_id=self.correlation, client_id="kactor-tests")
        self.sock.sendall(req.encode(header=True, framed=True))
        payload = wire.recv_frame(self.sock)
        response_class = _response_class(request_class)
        resp = response_class.decode(payload, version=version, header=True)
        assert resp.header.correlation_id == self.correlation
        return resp

    def until(self, request_class, version, code_of, timeout=30, **fields):
        """Sends the request again while `code_of(response)` is a BUSY code (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            resp = self(request_class, version, **fields)
            if code_of(resp) not in BUSY or time.monotonic() > deadline:
                return resp
            time.sleep(0.2)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _response_class(request_class):
    import importlib
    module = importlib.import_module(request_class.__module__)
    return getattr(module, request_class.__name__.replace("Request", "Response"))
