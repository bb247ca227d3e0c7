"""A background idempotent acks=all producer writing 0, 1, 2, ... (round-robin over the
partitions) until stopped, at most `limit` records or `seconds`: the load the cluster tests
run while they stop, move or restart brokers. It keeps the numbers acknowledged and every
error (a fatal producer error ends the load and is kept too), for loss and duplicate checks."""
import threading
import time

from confluent_kafka import Producer


class NumberedLoad:
    def __init__(self, bootstrap, topic, partitions=1, limit=400_000, seconds=240,
                 message_timeout_ms=30000, pause_every=10):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                           "enable.idempotence": True, "linger.ms": 5,
                           "message.timeout.ms": message_timeout_ms})
        self.topic, self.partitions = topic, partitions
        self.limit, self.seconds, self.pause_every = limit, seconds, pause_every
        self.acked, self.errors, self.sent = [], [], 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def done(self, err, msg):
        if err:
            self.errors.append(err)
        else:
            self.acked.append(int(msg.value()))

    def run(self):
        try:
            self.loop()
        except Exception as e:  # noqa: BLE001 - a fatal producer error ends the load
            self.errors.append(e)

    def loop(self):
        deadline = time.monotonic() + self.seconds
        while (self.sent < self.limit and not self.stopped.is_set()
               and time.monotonic() < deadline):
            try:
                self.p.produce(self.topic, value=b"%d" % self.sent,
                               partition=self.sent % self.partitions, on_delivery=self.done)
                self.sent += 1
            except BufferError:
                self.p.poll(0.05)
                continue
            self.p.poll(0)
            if self.sent % self.pause_every == 0:
                time.sleep(0.005)  # a steady stream, not a flood
        self.p.flush(60)

    def stop(self):
        self.stopped.set()
        self.thread.join(90)
        assert not self.thread.is_alive(), "producer did not finish"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
