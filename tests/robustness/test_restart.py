"""Crash recovery: `kill -9` the broker while a producer is mid-stream, restart it on the same
data dir, and every acknowledged record (acks=1) is there at its acknowledged offset, in order;
topics and their configs come back from the metadata log."""
import time

from confluent_kafka import Producer

from harness.clients import admin, consume_all, create_topic, topic_config, wait_topic

TOPIC = "crash-me"


def test_kill9_during_production_then_restart(broker_factory):
    b = broker_factory(name="crash")
    create_topic(b, TOPIC, partitions=2, config={"retention.ms": "7200000",
                                                 "cleanup.policy": "delete"})
    create_topic(b, "untouched", partitions=1, config={"max.message.bytes": "500000"})

    acked = {0: [], 1: []}  # partition -> [(offset, value)] in ack order
    failed = []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.partition()].append((msg.offset(), msg.value()))
        else:
            failed.append(err)

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "enable.idempotence": False,
                  "linger.ms": 2, "batch.num.messages": 100, "message.timeout.ms": 4000,
                  "max.in.flight.requests.per.connection": 1,
                  "reconnect.backoff.max.ms": 500})
    i = 0
    killed_at = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        p.produce(TOPIC, value=f"r{i:07d}".encode(), partition=i % 2, on_delivery=on_delivery)
        i += 1
        p.poll(0)
        if killed_at is None and sum(map(len, acked.values())) >= 3000:
            b.kill9()  # with records still in flight
            killed_at = i
        if killed_at is not None and i >= killed_at + 500:
            break
    p.flush(15)
    assert killed_at is not None, "never reached 3000 acks before the kill"
    n_acked = sum(map(len, acked.values()))
    assert n_acked >= 3000

    b.restart()
    wait_topic(b, TOPIC, 2)
    for part, records in acked.items():
        last_offset = max(o for o, _ in records)
        msgs = consume_all(b, TOPIC, last_offset + 1, partition=part, timeout=60)
        by_offset = {m.offset(): m.value() for m in msgs}
        # Every acknowledged record is at its acknowledged offset...
        missing = [(o, v) for o, v in records if by_offset.get(o) != v]
        assert not missing, f"partition {part}: {len(missing)} acked records lost, e.g. {missing[:3]}"
        # ...and acknowledgements came in offset order, so consumption order = produce order.
        offsets = [o for o, _ in records]
        assert offsets == sorted(offsets)
        assert [m.offset() for m in msgs] == list(range(len(msgs)))

    # Topics and their configs come back from the metadata log.
    a = admin(b)
    md = a.list_topics(timeout=10)
    assert {TOPIC, "untouched"} <= set(md.topics)
    assert len(md.topics[TOPIC].partitions) == 2
    assert topic_config(b, TOPIC, "retention.ms") == "7200000"
    assert topic_config(b, "untouched", "max.message.bytes") == "500000"

    # And the restarted broker takes new writes after the recovered ones.
    p2 = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": False})
    offs = []
    p2.produce(TOPIC, b"after", partition=0, on_delivery=lambda e, m: offs.append((e, m.offset())))
    p2.flush(15)
    assert offs and offs[0][0] is None and offs[0][1] == len(consume_all(b, TOPIC, 10**9, 0, timeout=3)) - 1


def test_clean_restart_keeps_topics(broker_factory):
    b = broker_factory(name="clean")
    create_topic(b, "keep", partitions=3, config={"segment.bytes": "1048576"})
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": False})
    for i in range(30):
        p.produce("keep", f"m{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0
    b.stop()
    b.restart()
    wait_topic(b, "keep", 3)
    assert topic_config(b, "keep", "segment.bytes") == "1048576"
    for part in range(3):
        vals = [m.value() for m in consume_all(b, "keep", 10, partition=part)]
        assert vals == [f"m{i}".encode() for i in range(part, 30, 3)]


def test_first_metadata_after_a_restart_lists_every_topic(broker_factory):
    """The first Metadata a restarted broker answers already has every topic and partition
    with its leader, as Kafka's BrokerServer only opens its client listeners once the initial
    metadata has been published to its replica manager. kactor opened them when the broker
    was caught up with the metadata log but before the replica manager served that image:
    for a few hundred milliseconds Metadata listed no topics, and librdkafka failed the
    queued messages with "Unknown partition" (found by the fault harness, issue #30)."""
    from harness import wire
    b = broker_factory(name="first-md")
    names = [f"restart-md-{i}" for i in range(3)]
    for n in names:
        create_topic(b, n, partitions=8)

    def first_metadata(timeout=90):
        """Polls the port every few ms: the first answered Metadata (all topics)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if b.proc.poll() is not None:
                raise AssertionError(f"exited with {b.proc.returncode}")
            try:
                with wire.connect(b.port, timeout=5) as sock:
                    _, topics = wire.parse_metadata_v1_response(
                        wire.roundtrip(sock, wire.metadata_v1_request(None)))
                    return topics
            except (OSError, ConnectionError, ValueError):
                time.sleep(0.005)
        raise AssertionError("no Metadata answer")

    for attempt in range(3):
        b.kill9()
        b.wait_ready = lambda timeout=90: None  # we poll ourselves, faster
        b.start()
        topics = first_metadata()
        del b.wait_ready
        for n in names:
            err, parts = topics.get(n, (None, {}))
            assert err == 0 and sorted(parts) == list(range(8)), \
                f"restart {attempt}: {n} in the first Metadata: {topics.get(n)}; " \
                f"topics {sorted(topics)}"
            assert all(e == 0 and leader == 1 for e, leader in parts.values()), parts
        b.wait_ready()
