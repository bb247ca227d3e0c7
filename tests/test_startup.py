"""Start-up as a client sees it (issue #7's "start to first produce"): a freshly started broker
takes an acks=all produce to a topic that the producer's own Metadata request auto-creates,
and the Metadata answers around it are ones Kafka 4.4 gives: an auto-created topic is either
UNKNOWN_TOPIC_OR_PARTITION without partitions (Kafka 4.4 answers so while the creation is in
flight; LEADER_NOT_AVAILABLE was ZooKeeper mode's answer) or already listed with a live leader
(kactor waits briefly for the creation before answering; Kafka answers so to a request arriving
a moment later). No timings are asserted: the benchmark measures them (scripts/bench,
bench/RESULTS.md)."""
import struct

from confluent_kafka import Producer

from harness import wire

UNKNOWN_TOPIC_OR_PARTITION = 3


def metadata_v4(port, topics, allow_auto_create):
    """Metadata v4 (AllowAutoTopicCreation, no tagged fields) → (brokers, topics) with
    brokers {node_id: (host, port)} and topics {name: (error, {partition: (error, leader)})}."""
    body = struct.pack(">i", len(topics)) + b"".join(wire.string(t) for t in topics)
    body += struct.pack(">?", allow_auto_create)
    req = wire.request_header_v1(3, 4, 11) + body
    with wire.connect(port) as s:
        s.sendall(wire.frame(req))
        r = wire.Reader(wire.recv_frame(s))
    assert r.i32() == 11  # correlation id
    r.i32()  # throttle_time_ms
    brokers = {}
    for _ in range(r.i32()):
        node, host, bport = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers[node] = (host, bport)
    r.string()  # cluster id
    r.i32()  # controller id
    out = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()  # is_internal
        parts = {}
        for _ in range(r.i32()):
            perr, index, leader = r.i16(), r.i32(), r.i32()
            for _ in range(2):  # replicas, isr (offline replicas came in v5)
                for _ in range(r.i32()):
                    r.i32()
            parts[index] = (perr, leader)
        out[name] = (err, parts)
    return brokers, out


def assert_kafka_auto_create_answer(brokers, answer):
    err, parts = answer
    if err == UNKNOWN_TOPIC_OR_PARTITION:
        assert parts == {}
    else:
        assert err == 0
        assert parts, "an existing topic lists its partitions"
        for perr, leader in parts.values():
            assert (perr, leader in brokers) == (0, True)


def test_fresh_broker_acks_first_produce_to_auto_created_topic(broker_factory):
    b = broker_factory(name="startup")
    delivered = []
    # librdkafka with its defaults, as an application would start.
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    p.produce("first-produce", b"first",
              on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(60) == 0
    assert delivered == [(None, 0)]
    # The topic now exists, led by the broker (asked without auto-creation).
    brokers, topics = metadata_v4(b.port, ["first-produce"], allow_auto_create=False)
    assert topics["first-produce"] == (0, {0: (0, b.node_id)})
    assert b.node_id in brokers


def test_auto_creating_metadata_answer_is_one_kafka_gives(broker):
    brokers, topics = metadata_v4(broker.port, ["auto-created-by-metadata"],
                                  allow_auto_create=True)
    assert_kafka_auto_create_answer(brokers, topics["auto-created-by-metadata"])
    # Asked again once created, it has a leader (Kafka's answer after the creation).
    for _ in range(200):
        brokers, topics = metadata_v4(broker.port, ["auto-created-by-metadata"],
                                      allow_auto_create=True)
        if topics["auto-created-by-metadata"][0] == 0:
            break
    assert topics["auto-created-by-metadata"] == (0, {0: (0, broker.node_id)})
