"""Workloads: real clients writing and reading while the nemesis works, every operation
recorded in the run's History.

The clients are confluent-kafka, i.e. librdkafka: the most widely deployed Kafka client engine
outside the JVM (it sits under the Python, Go, .NET, C/C++ and many other clients), with its own
idempotence and transaction state machines whose retries under faults are what the checkers
judge; and it is already what the suites use (tests/harness/clients.py, tests/txn), so no new
dependency. Each client runs in its own thread; the GIL is released inside librdkafka calls.

queue   idempotent acks=all producers write unique values "<writer>:<seq>" round-robin to the
        partitions of one topic; consumers in one group poll and commit what they got; when the
        faults stop, the consumers drain everything and a reader takes the whole topic.
copier  an idempotent producer writes inputs; transactional copiers (read_committed consumer
        on their share of the input partitions, same-numbered output partition) produce
        "copy(<input>)@<txn>" and send the consumed offsets in the transaction, aborting about
        one in ten on purpose and rewinding to the committed offsets; a read_committed verifier
        follows the output while it is written; at the end the whole input and output are read.
"""
import logging
import os
import random
import threading
import time
import traceback

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from .checkers import tp_key
from .history import FAIL, INFO, OK

# librdkafka logs every refused connection during a restart to stderr: only critical lines.
QUIET = {"log_level": 2}
# Producer sends are bounded per run (in case a rate is mis-set) and by outstanding messages.
MAX_SENDS = 5_000_000
MAX_IN_FLIGHT = 2_000
# A copier that got nothing for this long while its input has records past its position.
STALL_S = 20


def create_topics(bootstrap, topics, timeout=120):
    """{name: partitions}; waits until every partition has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1)
                                for t, n in topics.items()], operation_timeout=60)
    for f in futs.values():
        f.result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        if all(t in md.topics and md.topics[t].error is None
               and len(md.topics[t].partitions) == n
               and all(p.leader >= 0 for p in md.topics[t].partitions.values())
               for t, n in topics.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topics {sorted(topics)} not ready")
        time.sleep(0.3)


def client_debug(run, process):
    """With KACTOR_FAULT_CLIENT_DEBUG=eos,protocol,... a client's librdkafka debug log goes to
    <run dir>/<process>.client.log (to see what it sent and got when it hangs)."""
    contexts = os.environ.get("KACTOR_FAULT_CLIENT_DEBUG")
    if not contexts:
        return None
    log = logging.getLogger(f"faults.{run.name}.{process}")
    if not log.handlers:
        handler = logging.FileHandler(run.outdir / f"{process}.client.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
        log.propagate = False
    return {"debug": contexts, "logger": log, "log_level": 7}


def _definite(err):
    """A commit error that means it was not applied (the member was fenced or rebalancing)."""
    return err.code() in (KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                          KafkaError.REBALANCE_IN_PROGRESS, KafkaError.FENCED_INSTANCE_ID,
                          KafkaError._NO_OFFSET)


class ClientThread(threading.Thread):
    """A client's thread: an exception escaping it is recorded (f "crash", an anomaly for the
    checkers: the workload stopped checking something) rather than lost in stderr."""

    def __init__(self, run, name):
        super().__init__(name=name, daemon=True)
        self.run_ = run

    def run(self):
        try:
            self.body()
        except Exception:  # noqa: BLE001 - recorded as an anomaly
            self.run_.history.record(self.name, INFO, "client-crash",
                                     error=traceback.format_exc()[-3000:])


class Writer(ClientThread):
    """An idempotent acks=all producer writing "<process>.<generation>:<seq>" at `rate`/s,
    round-robin over the partitions. A fatal idempotence error (the producer must be
    replaced) starts a new generation: a new writer as far as ordering goes."""

    def __init__(self, run, name, topic, partitions, rate):
        super().__init__(run, name)
        self.process, self.topic = name, topic
        self.partitions, self.rate = partitions, rate
        self.outstanding = 0
        self.fatal = None
        self.lock = threading.Lock()

    def _producer(self):
        def on_error(err):
            if err.fatal():
                self.fatal = err
        return Producer({"bootstrap.servers": self.run_.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                         "error_cb": on_error, **QUIET})

    def body(self):
        h, gen, seq = self.run_.history, 0, 0
        p = self._producer()
        interval = 1.0 / self.rate
        next_at = time.monotonic()

        def delivered(inv):
            def cb(err, msg):
                with self.lock:
                    self.outstanding -= 1
                if err is None:
                    h.complete(inv, OK, partition=msg.partition(), offset=msg.offset())
                else:
                    # Timed out, purged, fatal: it may be in the log or not.
                    h.complete(inv, INFO, error=err.str())
            return cb

        while not self.run_.stop_writes.is_set() and seq < MAX_SENDS:
            if self.fatal is not None:
                h.record(self.process, INFO, "producer-fatal", error=self.fatal.str())
                p.purge()
                p.flush(5)
                gen, self.fatal = gen + 1, None
                p = self._producer()
            if self.outstanding >= MAX_IN_FLIGHT:
                p.poll(0.05)
                continue
            value = f"{self.process}.{gen}:{seq}"
            part = self.partitions[seq % len(self.partitions)]
            inv = h.invoke(self.process, "send", topic=self.topic, value=value)
            try:
                with self.lock:
                    self.outstanding += 1
                p.produce(self.topic, value=value.encode(), partition=part,
                          on_delivery=delivered(inv))
            except (BufferError, KafkaException) as e:
                with self.lock:
                    self.outstanding -= 1
                h.complete(inv, FAIL, error=repr(e))
                p.poll(0.1)
                continue
            seq += 1
            p.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()
        left = p.flush(90)
        if left:
            p.purge()
            p.flush(5)


class Hung(Exception):
    """A client call still blocked well past the timeout it was given."""


def bounded(fn, *args, grace=30):
    """fn(*args, timeout) where the last argument is the call's own timeout; raises Hung if it
    has not returned `grace` seconds after that timeout (it keeps running in its thread)."""
    box = {}

    def call():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e
    t = threading.Thread(target=call, daemon=True, name=f"bounded-{fn.__name__}")
    t.start()
    t.join(args[-1] + grace)
    if t.is_alive():
        raise Hung(fn.__name__)
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _group_consumer(run, group, isolation, extra=None):
    conf = {"bootstrap.servers": run.bootstrap, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": isolation, "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 60000}
    conf.update(QUIET)
    conf.update(extra or {})
    return Consumer(conf)


class QueueConsumer(ClientThread):
    """A member of the queue's group: polls, records every record, commits what it got about
    every half second (and before a revocation), reads the committed offsets back after each
    assignment."""

    def __init__(self, run, name, topic, group):
        super().__init__(run, name)
        self.process, self.topic, self.group = name, topic, group
        self.pending = {}      # (topic, partition) -> next offset to commit
        self.to_check = []     # partitions whose committed offsets to read back

    def commit(self, c, keys=None):
        keys = [k for k in (keys or list(self.pending))]
        if not keys:
            return
        offsets = {tp_key(*k): self.pending[k] for k in keys}
        inv = self.run_.history.invoke(self.process, "commit", group=self.group,
                                       offsets=offsets)
        try:
            c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in
                              ((k, self.pending[k]) for k in keys)], asynchronous=False)
            self.run_.history.complete(inv, OK)
            for k in keys:
                if self.pending.get(k) == offsets[tp_key(*k)]:
                    del self.pending[k]
        except KafkaException as e:
            err = e.args[0]
            self.run_.history.complete(inv, FAIL if _definite(err) else INFO, error=err.str())

    def body(self):
        h = self.run_.history

        def on_error(err):
            h.record(self.process, INFO, "client-error", group=self.group, error=err.str(),
                     code=err.name(), fatal=err.fatal())

        # client.id prefixes the member ids the coordinator hands out: its logs name the
        # consumer.
        c = _group_consumer(self.run_, self.group, "read_committed",
                            {"error_cb": on_error, "client.id": self.process,
                             **(client_debug(self.run_, self.process) or {})})

        def on_assign(consumer, parts):
            h.record(self.process, OK, "assign", group=self.group, member=_member_id(consumer),
                     partitions=[[p.topic, p.partition, None] for p in parts])
            self.to_check = list(parts)

        def on_revoke(consumer, parts, lost=False):
            keys = [(p.topic, p.partition) for p in parts if (p.topic, p.partition) in
                    self.pending]
            if not lost:
                # A lost assignment is not committed, as a real application would not: the
                # member id is gone, and a synchronous commit there waits for a coordinator
                # (seen blocking for minutes while none was reachable) with the rebalance held
                # until this callback returns: the member cannot rejoin meanwhile.
                self.commit(consumer, keys)
            for p in parts:
                self.pending.pop((p.topic, p.partition), None)
            h.record(self.process, OK, "revoke", group=self.group, lost=lost,
                     member=_member_id(consumer),
                     partitions=[[p.topic, p.partition] for p in parts])

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke,
                    on_lost=lambda consumer, parts: on_revoke(consumer, parts, lost=True))
        last_commit = time.monotonic()
        try:
            while not self.run_.stop_reads.is_set():
                if self.to_check:
                    parts, self.to_check = self.to_check, []
                    read_committed_offsets(self.run_, c, self.process, self.group, parts)
                for m in c.consume(200, 0.5):
                    if m.error():
                        h.record(self.process, INFO, "consume-error", group=self.group,
                                 error=m.error().str(), code=m.error().name())
                        continue
                    h.record(self.process, OK, "poll", group=self.group, topic=m.topic(),
                             partition=m.partition(), offset=m.offset(),
                             value=m.value().decode(), isolation="read_committed")
                    self.pending[(m.topic(), m.partition())] = m.offset() + 1
                if time.monotonic() - last_commit > 0.5:
                    self.commit(c)
                    last_commit = time.monotonic()
            # Told to stop: whatever is revoked from here on is the harness's doing.
            h.record(self.process, OK, "stop", group=self.group)
            self.commit(c)
        finally:
            c.close()


def _member_id(c):
    """The member id the coordinator gave this consumer (None before its first JoinGroup)."""
    try:
        return c.memberid()
    except (KafkaException, RuntimeError):
        return None


def read_committed_offsets(run, c, process, group, parts):
    """What the broker says is committed for `parts`, recorded (f "committed")."""
    asked = run.history.now()
    try:
        got = c.committed([TopicPartition(p.topic, p.partition) for p in parts], timeout=10)
    except KafkaException as e:
        run.history.record(process, INFO, "committed", group=group, error=e.args[0].str())
        return None
    offsets = {tp_key(p.topic, p.partition): p.offset for p in got if p.error is None}
    run.history.record(process, OK, "committed", group=group, offsets=offsets,
                       invoked_at=asked)
    return {(p.topic, p.partition): p.offset for p in got if p.error is None}


class Copier(ClientThread):
    """consume (read_committed) -> transform -> produce + send offsets -> commit, with a
    manual assignment of `partitions` of the input; output partition = input partition."""

    def __init__(self, run, name, src, dst, partitions, group, abort_ratio=0.1):
        super().__init__(run, name)
        self.process, self.src, self.dst = name, src, dst
        self.partitions, self.group, self.abort_ratio = partitions, group, abort_ratio
        self.rng = random.Random(f"{run.seed}-{name}")
        self.n = 0
        self.positions = {}   # partition -> next input offset committed (as last known)
        self.abandoned = []   # producers replaced while a call of theirs still blocks

    def _conf(self):
        conf = {"bootstrap.servers": self.run_.bootstrap,
                "transactional.id": f"{self.run_.name}-{self.process}",
                "transaction.timeout.ms": 20000, "linger.ms": 5, "message.timeout.ms": 20000}
        conf.update(client_debug(self.run_, self.process) or QUIET)
        return conf

    def _producer(self):
        p = Producer(self._conf())
        deadline = time.monotonic() + 180
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise
                self.run_.history.record(self.process, INFO, "init-txn", error=e.args[0].str())
                if e.args[0].fatal():
                    p = Producer(self._conf())
                time.sleep(1)

    def rewind(self, c):
        """Back to the committed offsets (after an abort or an unknown outcome). Returns the
        consumer to use next: librdkafka's consumer sometimes never finds the coordinator again
        after a broker restart (committed() times out for minutes, on Kafka too), so after three
        failed tries it is replaced by a new one."""
        parts = [TopicPartition(self.src, p) for p in self.partitions]
        failures = 0
        while not self.run_.stop_reads.is_set():
            got = read_committed_offsets(self.run_, c, self.process, self.group, parts)
            if got is not None and all((self.src, q) in got for q in self.partitions):
                break
            failures += 1
            if failures % 3 == 0:
                self.run_.history.record(self.process, INFO, "new-consumer",
                                         reason=f"{failures} failed committed() calls")
                c.close()
                c = _group_consumer(self.run_, self.group, "read_committed")
            time.sleep(0.5)
        else:
            return c
        start = {p: (got[(self.src, p)] if got[(self.src, p)] >= 0 else OFFSET_BEGINNING)
                 for p in self.partitions}
        c.assign([TopicPartition(self.src, p, o) for p, o in start.items()])
        self.run_.history.record(self.process, OK, "assign", group=self.group,
                                 partitions=[[self.src, p, o] for p, o in start.items()])
        self.positions = {p: max(o, 0) for p, o in start.items()}
        return c

    def body(self):
        h = self.run_.history
        c = _group_consumer(self.run_, self.group, "read_committed",
                            client_debug(self.run_, self.process + "-consumer"))
        p = self._producer()
        c = self.rewind(c)
        last_progress = time.monotonic()
        try:
            while not self.run_.stop_reads.is_set():
                if self.run_.stop_writes.is_set() and self.caught_up(c):
                    break
                got = c.consume(300, 0.5)
                for m in got:
                    if m.error() and m.error().code() != KafkaError._PARTITION_EOF:
                        h.record(self.process, INFO, "consume-error", error=m.error().str())
                msgs = [m for m in got if not m.error()]
                if not msgs:
                    if time.monotonic() - last_progress > STALL_S and not self.caught_up(c):
                        # Records are there (high watermark past the position) and none came
                        # for a while: recorded, then a new consumer from the committed offsets.
                        h.record(self.process, INFO, "consumer-stall", positions={
                            str(tp.partition): tp.offset for tp in c.position(c.assignment())},
                            highs=self.highs(c))
                        c.close()
                        c = self.rewind(_group_consumer(
                            self.run_, self.group, "read_committed",
                            client_debug(self.run_, self.process + "-consumer")))
                        last_progress = time.monotonic()
                    continue
                last_progress = time.monotonic()
                for m in msgs:
                    h.record(self.process, OK, "poll", group=self.group, topic=m.topic(),
                             partition=m.partition(), offset=m.offset(),
                             value=m.value().decode(), isolation="read_committed")
                c, p = self.transact(c, p, msgs)
        finally:
            try:
                p.flush(10)
            finally:
                c.close()

    def highs(self, c):
        out = {}
        for q in self.partitions:
            try:
                out[str(q)] = c.get_watermark_offsets(TopicPartition(self.src, q), timeout=5,
                                                      cached=False)[1]
            except KafkaException as e:
                out[str(q)] = e.args[0].str()
        return out

    def caught_up(self, c):
        try:
            lows_highs = [c.get_watermark_offsets(TopicPartition(self.src, q), timeout=5,
                                                  cached=False) for q in self.partitions]
        except KafkaException:
            return False
        return all(self.positions.get(q, 0) >= hi for q, (_, hi) in
                   zip(self.partitions, lows_highs))

    def transact(self, c, p, msgs):
        """One transaction over `msgs`; returns the consumer and producer to use next (new
        ones after a fatal error, a hung call or a lost coordinator)."""
        h = self.run_.history
        self.n += 1
        txn = f"{self.process}#{self.n}"
        inputs = [[m.topic(), m.partition(), m.offset(), m.value().decode()] for m in msgs]
        outputs = [f"copy({v})@{txn}" for *_, v in inputs]
        nxt = {}
        for m in msgs:
            nxt[m.partition()] = m.offset() + 1
        offsets = {tp_key(self.src, q): o for q, o in nxt.items()}
        abort = self.rng.random() < self.abort_ratio
        inv = None
        commit_asked = False

        def record_start(decision):
            return h.invoke(self.process, "txn", txn=txn, group=self.group, inputs=inputs,
                            outputs=outputs, offsets=offsets, decision=decision)
        try:
            p.begin_transaction()
            for (_, part, _, _), out in zip(inputs, outputs):
                while True:
                    try:
                        p.produce(self.dst, value=out.encode(), partition=part)
                        break
                    except BufferError:
                        p.poll(0.1)
            bounded(p.send_offsets_to_transaction,
                    [TopicPartition(self.src, q, o) for q, o in nxt.items()],
                    c.consumer_group_metadata(), 30)
            inv = record_start("abort" if abort else "commit")
            if abort:
                bounded(p.abort_transaction, 30)
                h.complete(inv, FAIL, error="aborted on purpose")
                return self.rewind(c), p
            commit_asked = True
            for attempt in range(10):
                try:
                    bounded(p.commit_transaction, 30)
                    h.complete(inv, OK)
                    self.positions.update(nxt)
                    return c, p
                except KafkaException as e:
                    if e.args[0].retriable() and attempt < 9:
                        continue
                    raise
        except (KafkaException, Hung) as e:
            hung = isinstance(e, Hung)
            err = None if hung else e.args[0]
            if inv is None:
                # Never asked to commit: it can only abort (by timeout or by fencing).
                inv = record_start("abort")
            if hung:
                # librdkafka ignored the call's timeout (seen on Kafka and kactor alike after a
                # restart): the producer is left behind, still blocked in its thread (kept
                # referenced, as destroying it would block too), and fenced by the new one.
                h.record(self.process, INFO, "client-hang", call=str(e), txn=txn)
                self.abandoned.append(p)
                h.complete(inv, INFO if commit_asked else FAIL, error=f"hung in {e}")
                p = self._producer()  # fences the old one first: its transaction is settled
                return self.rewind(c), p
            if err.txn_requires_abort():
                try:
                    bounded(p.abort_transaction, 30)
                    h.complete(inv, FAIL, error=err.str())
                    return self.rewind(c), p
                except KafkaException as e2:
                    err = e2.args[0]
                except Hung as e2:
                    h.record(self.process, INFO, "client-hang", call=str(e2), txn=txn)
                    self.abandoned.append(p)
                    h.complete(inv, INFO if commit_asked else FAIL, error=f"hung in {e2}")
                    p = self._producer()  # fences the old one first: its transaction is settled
                    return self.rewind(c), p
            h.complete(inv, INFO if commit_asked else FAIL, error=err.str(), fatal=err.fatal())
            # Whatever state the producer is in, a new one with the same transactional.id
            # fences it and completes or aborts its transaction before it starts.
            try:
                p.purge()
            except KafkaException:
                pass
            self.abandoned.append(p)
            p = self._producer()
            return self.rewind(c), p


class Verifier(ClientThread):
    """A read_committed consumer following the whole output while it is written (no group
    offsets): an uncommitted or aborted copy it is handed is an anomaly."""

    def __init__(self, run, topic, partitions):
        super().__init__(run, "verifier")
        self.topic, self.partitions = topic, partitions

    def body(self):
        h = self.run_.history
        c = Consumer({"bootstrap.servers": self.run_.bootstrap, "group.id": "faults-verifier",
                      "enable.auto.commit": False, "isolation.level": "read_committed", **QUIET})
        c.assign([TopicPartition(self.topic, q, OFFSET_BEGINNING) for q in self.partitions])
        h.record("verifier", OK, "assign", group=None,
                 partitions=[[self.topic, q, 0] for q in self.partitions])
        try:
            while not self.run_.stop_reads.is_set():
                for m in c.consume(500, 0.5):
                    if m.error():
                        continue
                    h.record("verifier", OK, "poll", group=None, topic=m.topic(),
                             partition=m.partition(), offset=m.offset(),
                             value=m.value().decode(), isolation="read_committed")
        finally:
            c.close()


def read_topic(run, topic, partitions, isolation, role, timeout=180):
    """The whole topic from offset 0 to its end (high watermark, or the LSO under
    read_committed), recorded as one "read" operation."""
    c = Consumer({"bootstrap.servers": run.bootstrap, "group.id": "faults-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": isolation, **QUIET})
    records = {q: [] for q in partitions}
    eof = set()
    deadline = time.monotonic() + timeout
    try:
        c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in partitions])
        while len(eof) < len(partitions):
            if time.monotonic() > deadline:
                run.history.record("reader", FAIL, "read", role=role, topic=topic,
                                   isolation=isolation,
                                   error=f"no end of {sorted(set(partitions) - eof)}")
                raise AssertionError(f"final read of {topic}: no end of partitions "
                                     f"{sorted(set(partitions) - eof)} in {timeout}s")
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                records[m.partition()].append([m.offset(), m.value().decode()])
    finally:
        c.close()
    run.history.record("reader", OK, "read", role=role, topic=topic, isolation=isolation,
                       records={str(q): r for q, r in records.items()})
    return records
