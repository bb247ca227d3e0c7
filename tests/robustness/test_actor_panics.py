"""Supervision under load (#24): every actor type is made to panic in turn while idempotent
producers, a consumer group and a transactional producer run, against the release broker
started with `KACTOR_FAULT_INJECTION=1` (it arms panics through
`POST /debug/panic?actor=NAME&count=N` on the metrics port, an endpoint a broker started without
that variable does not have).

What must hold, as the runtime promises (docs/architecture.md, "Restarts and failures"):
- the broker keeps serving; each panic is counted in `kactor_actor_restarts_total{actor}`;
- every acknowledged record is in the log exactly once, every committed transaction's records
  are read exactly once with read_committed, nothing of an aborted one;
- no `kactor_actor_mailbox_depth` is ever negative and all are 0 once the load stops;
- past the restart intensity a partition is taken offline (KAFKA_STORAGE_ERROR) and the rest of
  the broker keeps serving; a panic in an actor the process cannot run without stops the
  process with one fatal line and exit code 1.

kactor only: Kafka has no actors to panic."""
import re
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from harness import wire
from harness.broker import Broker
from harness.clients import create_topic

pytestmark = pytest.mark.timeout(300)

# Restarted on a panic (OnPanic::Restart), in the order the test panics them.
RESTARTED = [
    "PartitionActor",
    "PurgatoryActor",
    "GroupCoordinatorActor",
    "TransactionCoordinatorActor",
    "ProducerIdManagerActor",
    "QuorumControllerActor",
    "MetadataPublisherActor",
    "LogManagerActor",
    "GroupCoordinatorManagerActor",
    "TransactionCoordinatorManagerActor",
    "BrokerLifecycleActor",
]
# Stopped for good on a panic (its client reconnects).
STOPPED = ["ConnectionActor"]


@pytest.fixture
def fi_broker(tmp_path, target):
    if target != "kactor":
        pytest.skip("kactor only: Kafka has no actors to panic")
    made = []

    def make(overrides=None):
        b = Broker(tmp_path / f"fi-{len(made)}", overrides=overrides, name="fault-injection",
                   env={"KACTOR_FAULT_INJECTION": "1"})
        made.append(b)
        b.start()
        return b

    yield make
    for b in made:
        b.stop()


def arm(broker, actor, count=1, stall_ms=None):
    stall = f"&stall_ms={stall_ms}" if stall_ms else ""
    req = urllib.request.Request(
        f"http://{broker.host}:{broker.http_port}/debug/panic?actor={actor}&count={count}{stall}",
        method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200, resp.read()


SAMPLE = re.compile(r'^(kactor_actor_\w+)\{actor="(\w+)"\} (\S+)$')


def actor_metrics(broker):
    """{(family, actor): value} for the per-actor families."""
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def restarts(metrics, actor):
    return metrics.get(("kactor_actor_restarts_total", actor), 0.0)


def negative_depths(metrics):
    return {a: v for (f, a), v in metrics.items() if f == "kactor_actor_mailbox_depth" and v < 0}


class Workload:
    """Idempotent produce, a consumer group and transactions, until stopped."""

    def __init__(self, broker, topic, txn_topic):
        self.broker, self.topic, self.txn_topic = broker, topic, txn_topic
        self.stop = threading.Event()
        self.acked, self.failed, self.fatal = [], [], []
        self.committed, self.aborted = [], []
        self.group_seen = set()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._produce, self._group, self._transactions)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(90)
        assert not any(t.is_alive() for t in self.threads), "a workload thread hung"

    def _produce(self):
        p = Producer({"bootstrap.servers": self.broker.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000})

        def done(err, msg):
            (self.failed if err else self.acked).append(
                (msg.value().decode(), str(err) if err else None))

        i = 0
        while not self.stop.is_set() and i < 200_000:
            try:
                p.produce(self.topic, value=str(i).encode(), key=str(i % 7).encode(),
                          on_delivery=done)
                i += 1
            except BufferError:
                pass
            p.poll(0.002)
        remaining = p.flush(120)
        if remaining:
            self.fatal.append(f"producer: {remaining} records undelivered after 120 s")

    def _group(self):
        c = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": "panics",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        c.subscribe([self.topic])
        try:
            # Keeps reading for a while after the producers stop, to catch up.
            deadline = None
            while True:
                if self.stop.is_set() and deadline is None:
                    deadline = time.monotonic() + 30
                if deadline and time.monotonic() > deadline:
                    break
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.group_seen.add(m.value().decode())
        finally:
            c.close()

    def _transactions(self):
        p = Producer({"bootstrap.servers": self.broker.bootstrap,
                      "transactional.id": "panics-txn", "transaction.timeout.ms": 30000})
        try:
            p.init_transactions(60)
        except KafkaException as e:
            self.fatal.append(f"init_transactions: {e}")
            return
        n = 0
        while not self.stop.is_set() and n < 5_000:
            values = [f"t{n}-{k}" for k in range(5)]
            n += 1
            try:
                p.begin_transaction()
                for v in values:
                    p.produce(self.txn_topic, value=v.encode())
                p.commit_transaction(60)
                self.committed.extend(values)
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(60)
                        self.aborted.extend(values)
                    except KafkaException as e2:
                        self.fatal.append(f"abort_transaction: {e2}")
                        return
                elif err.retriable():
                    # The commit's outcome is unknown to the client: resolved below by what
                    # read_committed returns; neither list gets these values.
                    time.sleep(0.2)
                    try:
                        p.commit_transaction(60)
                        self.committed.extend(values)
                    except KafkaException as e2:
                        self.fatal.append(f"commit retry: {e2}")
                        return
                else:
                    self.fatal.append(f"transaction: {e}")
                    return
            time.sleep(0.05)


def read_all(broker, topic, partitions, isolation="read_uncommitted"):
    """Every value in the topic, read from offset 0 to the end offsets at the time of the call."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"check-{topic}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    try:
        ends = {}
        for p in range(partitions):
            _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values, done = [], {p for p, hi in ends.items() if hi == 0}
        deadline = time.monotonic() + 60
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                # read_committed stops short of the end at control records: the position
                # tells when a partition is finished.
                for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]):
                    if tp.offset >= ends[tp.partition]:
                        done.add(tp.partition)
                continue
            if m.error():
                continue
            values.append(m.value().decode())
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        assert len(done) == partitions, f"{topic}: read did not reach the end offsets {ends}"
        return values
    finally:
        c.close()


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def create_with_retries(broker, topic, timeout=30):
    """CreateTopics, retried while the controller answers NOT_CONTROLLER (a restarted
    controller resigns and replays before it is active again; Kafka's Java admin client
    retries that error, librdkafka's does not)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return create_topic(broker, topic, partitions=1)
        except KafkaException as e:
            if "NOT_CONTROLLER" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_each_actor_type_panics_under_load_and_nothing_is_lost(fi_broker, topic_name):
    # The log manager's work is timer-driven: a short retention check gives it work to panic in.
    b = fi_broker({"log.retention.check.interval.ms": "500"})
    topic, txn_topic = topic_name, f"{topic_name}-txn"
    create_topic(b, topic, partitions=3)
    create_topic(b, txn_topic, partitions=2)
    negatives = {}
    with Workload(b, topic, txn_topic) as load:
        wait_for(lambda: len(load.acked) > 200 and load.committed and load.group_seen, 60,
                 "the workload to get going")
        for n, actor in enumerate(RESTARTED + STOPPED):
            before = actor_metrics(b)
            arm(b, actor)
            # A new topic on every step: the controller, Raft, the publisher, the registry and
            # the log manager see messages even when the workload alone sends them none.
            create_with_retries(b, f"{topic}-step{n}")
            # And a new idempotent producer: InitProducerId reaches the producer id manager.
            side = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
            side.produce(f"{topic}-step{n}", value=b"poke")
            assert side.flush(60) == 0, f"the poke after panicking {actor} was not delivered"
            if actor in STOPPED:
                wait_for(lambda: f"{actor} panicked handling" in b.log_text(), 30,
                         f"a {actor} panic")
            else:
                wait_for(lambda: restarts(actor_metrics(b), actor) >= restarts(before, actor) + 1,
                         30, f"{actor} to be restarted")
            m = actor_metrics(b)
            negatives.update(negative_depths(m))
            assert b.is_running(), f"the broker died after {actor} panicked:\n{b.log_tail()}"
        acked_before_stop = len(load.acked)
        time.sleep(2)  # the workload runs on after the last restart
        assert len(load.acked) > acked_before_stop, "produce stopped making progress"

    assert not load.fatal, load.fatal
    assert not negatives, f"negative mailbox depths: {negatives}"
    # Every acknowledged record is in the log, exactly once.
    acked = [v for v, _ in load.acked]
    logged = read_all(b, topic, 3)
    dupes = {v for v in logged if logged.count(v) > 1} if len(logged) != len(set(logged)) else set()
    assert not dupes, f"{len(dupes)} records written twice, e.g. {sorted(dupes)[:5]}"
    lost = set(acked) - set(logged)
    assert not lost, f"{len(lost)} acknowledged records missing, e.g. {sorted(lost)[:5]}"
    # The consumer group, through coordinator restarts, saw every acknowledged record.
    unseen = set(acked) - load.group_seen
    assert not unseen, f"the group never consumed {len(unseen)} records, e.g. {sorted(unseen)[:5]}"
    # Transactions: committed exactly once, aborted never.
    committed = read_all(b, txn_topic, 2, isolation="read_committed")
    assert len(committed) == len(set(committed)), "a committed record read twice"
    assert set(load.committed) <= set(committed), (
        f"committed but not read: {sorted(set(load.committed) - set(committed))[:5]}")
    assert not set(load.aborted) & set(committed), "records of an aborted transaction were read"
    # Once idle, every mailbox is empty again.
    def queued():
        return {a: v for (f, a), v in actor_metrics(b).items()
                if f == "kactor_actor_mailbox_depth" and v != 0}
    deadline = time.monotonic() + 15
    while queued() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not queued(), f"mailboxes not empty once idle: {queued()}"
    print(f"acked {len(acked)} records, {len(load.committed)} committed transactional records, "
          f"{len(load.aborted)} aborted; restarts: "
          + ", ".join(f"{a} {restarts(actor_metrics(b), a):.0f}" for a in RESTARTED))


def _produce_error(port, topic):
    batch = wire.record_batch([(None, b"v")])
    with wire.connect(port, timeout=30) as sock:
        sock.sendall(wire.produce_v3_request(topic, 0, batch, acks=1, timeout_ms=5000))
        _, rows = wire.parse_produce_v3_response(wire.recv_frame(sock))
    return rows[0][2]


def test_restarts_past_the_intensity_take_the_partition_offline(fi_broker, topic_name):
    b = fi_broker()
    create_topic(b, topic_name, partitions=1)
    assert _produce_error(b.port, topic_name) == 0
    # Ten restarts a minute are tolerated; the eleventh panic escalates: the replica goes
    # offline, as a partition in a failed log dir does.
    arm(b, "PartitionActor", 11)
    codes = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        codes.append(_produce_error(b.port, topic_name))
        if codes[-1] == 56:
            break
    assert codes[-1] == 56, f"produce errors while panicking: {codes}"  # KAFKA_STORAGE_ERROR
    assert restarts(actor_metrics(b), "PartitionActor") == 10
    assert "taking the partition offline" in b.log_text(), b.log_tail()
    # It stays offline; the rest of the broker serves on.
    time.sleep(1)
    assert _produce_error(b.port, topic_name) == 56
    other = f"{topic_name}-other"
    create_topic(b, other, partitions=1)
    assert _produce_error(b.port, other) == 0
    assert b.is_running()


def test_a_panic_in_an_essential_actor_stops_the_process_with_one_fatal_line(fi_broker,
                                                                              topic_name):
    b = fi_broker()
    arm(b, "RaftActor")
    # Creating a topic appends to the metadata log: Raft handles it and panics.
    try:
        create_topic(b, topic_name, partitions=1, timeout=10)
    except Exception:  # noqa: BLE001 - the broker is going away under the request
        pass
    wait_for(lambda: not b.is_running(), 30, "the process to exit")
    assert b.proc.returncode == 1, b.log_tail()
    assert "kactor: fatal: RaftActor panicked handling" in b.log_text(), b.log_tail()


def stuck_gauge(broker):
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("kactor_actor_stuck_handlers "):
                return float(line.split()[1])
    raise AssertionError("kactor_actor_stuck_handlers is not exported")


def test_a_stuck_handler_is_reported_with_its_actor_and_message(fi_broker, topic_name):
    b = fi_broker()
    assert stuck_gauge(b) == 0
    # The next CreateTopics holds the controller's thread for 7 s (the report comes after 5).
    arm(b, "QuorumControllerActor", stall_ms=7000)
    create_with_retries(b, topic_name, timeout=60)
    log = b.log_text()
    assert re.search(r"QuorumControllerActor has been handling \S*CreateTopics for 5\.\d s", log), (
        b.log_tail())
    assert re.search(r"QuorumControllerActor finished handling \S*CreateTopics after 7\.\d s", log), (
        b.log_tail())
    assert stuck_gauge(b) == 0
    assert b.is_running()


def test_without_the_switch_there_is_no_fault_injection_endpoint(broker, target):
    if target != "kactor":
        pytest.skip("kactor only")
    req = urllib.request.Request(
        f"http://{broker.host}:{broker.http_port}/debug/panic?actor=PartitionActor",
        method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            status = resp.status
    except urllib.error.HTTPError as e:
        status = e.code
    assert status in (404, 405), (
        f"POST /debug/panic answered {status} without KACTOR_FAULT_INJECTION=1")
