"""Shared helpers of the group suite: subprocess members, producing, parsing
kafka-consumer-groups tables."""
import json
import os
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer

MEMBER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "member.py")

# Short session timeouts so a SIGKILLed member is noticed within seconds. KIP-848's are broker
# configs, with minimums of 45 s / 5 s by default, so the minimums are lowered too.
FAST_GROUP_BROKER = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
}


class Member:
    """One consumer process; `events` fills from its stdout in a background thread."""

    def __init__(self, broker, group, topic, protocol, **extra):
        self.proc = subprocess.Popen(
            [sys.executable, MEMBER, broker.bootstrap, group, topic, protocol,
             json.dumps(extra)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    @property
    def assignment(self):
        """The member's current partitions (a frozenset of ints), from its last event."""
        for ev in reversed(self.events):
            if "tps" in ev:
                return frozenset(p for _, p in ev["tps"])
        return frozenset()

    def count(self, kind):
        return sum(1 for ev in self.events if ev["ev"] == kind)

    def messages(self):
        return [(ev["p"], ev["o"]) for ev in self.events if ev["ev"] == "msg"]

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def stderr(self):
        try:
            return self.proc.stderr.read() if self.proc.poll() is not None else ""
        except ValueError:
            return ""


def wait_for(cond, timeout, what, members=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    state = [(sorted(m.assignment), m.events[-5:]) for m in members]
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; members: {state}")


def spread(members, partitions):
    """True when `members` own disjoint, non-empty sets covering range(partitions)."""
    sets = [m.assignment for m in members]
    if any(not s for s in sets):
        return False
    union = frozenset().union(*sets)
    return union == frozenset(range(partitions)) and sum(map(len, sets)) == partitions


def produce(broker, topic, per_partition, timestamps=None):
    """Produce `per_partition[p]` records to each partition p; values are "p-i". With
    `timestamps`, record i of every partition gets create time timestamps(i)."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for part, n in enumerate(per_partition):
        for i in range(n):
            kw = {"timestamp": timestamps(i)} if timestamps else {}
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part, **kw)
        p.poll(0)
    assert p.flush(30) == 0, "undelivered messages"


def table(output, first="GROUP"):
    """Parse one kafka-consumer-groups table: a list of dicts keyed by the header's columns.
    Cells never contain spaces in these tests (ids and hosts are single tokens)."""
    rows, header = [], None
    for line in output.splitlines():
        cells = line.split()
        if not cells:
            continue
        if cells[0] == first:  # each group's table repeats (or changes) the header
            header = cells
            continue
        if header and len(cells) == len(header):
            rows.append(dict(zip(header, cells)))
    return rows


def committed(broker, group, topic, partitions, protocol="classic"):
    """The group's committed offsets for partitions 0..n-1 (-1001 = none), via OffsetFetch."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "group.protocol": protocol, "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                tps = c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                  timeout=30)
                return [tp.offset for tp in tps]
            except KafkaException as e:
                # Right after a (re)start the coordinator may still be loading.
                if e.args[0].code() not in (14, 15, 16) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def commit(broker, group, topic, offsets, timeout=30):
    """Commit offsets[p] for each partition p outside any generation (a "simple" consumer).
    Retries while the coordinator is still coming up (the first commit on a fresh broker
    creates __consumer_offsets and may see NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, p, o) for p, o in enumerate(offsets)],
                         asynchronous=False)
                return
            except KafkaException as e:
                if not e.args[0].retriable() and e.args[0].code() not in (14, 15, 16):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()
