"""A consumer group member outlives a stalled broker (issue #30).

The node (broker + controller in one process) is SIGSTOPped for longer than a broker session
(broker.session.timeout.ms, 9 s), as a GC pause or a frozen VM would, then resumed. Its clients
must come back: kactor's controller used to fence its own broker on the first session check
after SIGCONT, before that broker could heartbeat, so for a moment its Metadata answers listed
no broker at all. librdkafka (2.16) drops every broker a Metadata answer does not list, the
bootstrap ones included, and with no broker left it never connects again: the consumer stopped
for good. Kafka 4.4 passes the same test.

The consumer's librdkafka metadata log is read too: no Metadata answer may list zero brokers."""
import logging
import os
import signal
import threading
import time

from confluent_kafka import Consumer, Producer

from harness.clients import create_topic

PAUSES = 3
PAUSE_S = 10.5
RESUME_WITHIN_S = 40


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_consumer_comes_back_after_broker_pauses(broker_factory, topic_name):
    b = broker_factory(name="paused")
    create_topic(b, topic_name, partitions=2)
    stop = threading.Event()
    got = []  # monotonic time of each record received
    errors = []
    log = logging.getLogger(f"paused-consumer-{topic_name}")
    lines = _Lines()
    log.addHandler(lines)
    log.setLevel(logging.DEBUG)
    log.propagate = False

    def produce():
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "log_level": 2})
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic_name, f"v{i}".encode())
                i += 1
            except BufferError:
                pass
            p.poll(0.02)
        p.flush(5)

    def consume():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": topic_name,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                      "debug": "metadata", "logger": log, "log_level": 7})
        c.subscribe([topic_name])
        try:
            while not stop.is_set():
                for m in c.consume(100, 0.3):
                    if not m.error():
                        got.append(time.monotonic())
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=produce, daemon=True),
               threading.Thread(target=consume, daemon=True)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.2)
        assert got, "the consumer never received a record"
        for i in range(PAUSES):
            time.sleep(2)
            os.kill(b.pid, signal.SIGSTOP)
            try:
                time.sleep(PAUSE_S)
            finally:
                os.kill(b.pid, signal.SIGCONT)
            resumed = time.monotonic()
            while time.monotonic() < resumed + RESUME_WITHIN_S:
                if got[-1] > resumed + 0.5:
                    break
                time.sleep(0.2)
            empty = [line for line in lines.lines if " 0 brokers, " in line]
            assert got[-1] > resumed + 0.5, (
                f"pause {i + 1}: the consumer got nothing in the {RESUME_WITHIN_S} s after "
                f"SIGCONT; Metadata answers listing no broker: {empty[:3]}")
            assert not empty, f"pause {i + 1}: Metadata answers listed no broker: {empty[:3]}"
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert not errors, errors
