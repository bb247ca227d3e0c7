"""Hostile and broken input on the client listener: each case gets the right error or a closed
connection, the broker says so in its log, and other clients keep being served."""
import random
import socket
import time

import pytest

from harness import wire
from harness.clients import create_topic


@pytest.fixture
def bystander(broker):
    """A client connected before the bad input, which must keep being served afterwards."""
    s = wire.connect(broker.port)
    yield s
    s.close()


def assert_still_served(broker, bystander, corr=77):
    bystander.sendall(wire.api_versions_request(3, correlation_id=corr))
    c, err, apis, _ = wire.parse_api_versions_response(wire.recv_frame(bystander), 3)
    assert (c, err) == (corr, 0)
    # and new connections are accepted too
    assert wire.api_versions(broker.port, 0)[1] == 0


def assert_logged_peer(broker, sock_port, timeout=5):
    """The broker's log names the offending connection (its client-side port), so an operator
    can tell who sent the bad bytes."""
    needle = f"127.0.0.1:{sock_port}"
    deadline = time.monotonic() + timeout
    while needle not in broker.log_text():
        if time.monotonic() > deadline:
            pytest.fail(f"no log line names the peer {needle}; log tail:\n{broker.log_tail(20)}")
        time.sleep(0.2)


def test_2gib_length_prefix_closes_connection(broker, bystander):
    with wire.connect(broker.port) as s:
        s.sendall(wire.i32(0x7FFFFFFF) + b"\x00" * 16)  # 2 GiB - 1, far over socket.request.max.bytes
        port = s.getsockname()[1]
        assert wire.wait_closed(s), "oversize frame left the connection open"
    assert_logged_peer(broker, port)
    assert_still_served(broker, bystander)


def test_negative_length_prefix_closes_connection(broker, bystander):
    with wire.connect(broker.port) as s:
        s.sendall(wire.i32(-5) + b"\x00" * 16)
        port = s.getsockname()[1]
        assert wire.wait_closed(s)
    assert_logged_peer(broker, port)
    assert_still_served(broker, bystander)


def test_truncated_frame_then_eof(broker, bystander):
    with wire.connect(broker.port) as s:
        req = wire.api_versions_request(0, correlation_id=5)
        s.sendall(req[:len(req) - 3])  # length prefix promises 3 more bytes than arrive
        s.shutdown(socket.SHUT_WR)
        assert wire.wait_closed(s), "broker kept a half-closed truncated connection"
    # No log line required here: a client hanging up mid-request is an ordinary disconnect.
    assert_still_served(broker, bystander)


def test_garbage_bytes_close_connection(broker, bystander):
    rnd = random.Random(4)
    garbage = bytes(rnd.randrange(256) for _ in range(200))
    with wire.connect(broker.port) as s:
        # a plausible small length so the broker reads and must parse the garbage header
        s.sendall(wire.i32(len(garbage)) + garbage)
        port = s.getsockname()[1]
        assert wire.wait_closed(s)
    assert_logged_peer(broker, port)
    assert_still_served(broker, bystander)


def test_unknown_api_key_closes_connection(broker, bystander):
    with wire.connect(broker.port) as s:
        s.sendall(wire.frame(wire.request_header_v1(9999, 0, 11) + b"\x00" * 8))
        port = s.getsockname()[1]
        assert wire.wait_closed(s)
    assert_logged_peer(broker, port)
    assert_still_served(broker, bystander)


def test_unsupported_version_of_other_api_closes_connection(broker, bystander):
    # Metadata v99: unlike ApiVersions (KIP-511) there is no fallback encoding to answer in.
    with wire.connect(broker.port) as s:
        s.sendall(wire.frame(wire.request_header_v2(wire.API_METADATA, 99, 12) + b"\x00" * 8))
        port = s.getsockname()[1]
        assert wire.wait_closed(s)
    assert_logged_peer(broker, port)
    assert_still_served(broker, bystander)


def test_unsupported_api_versions_version_gets_kip511_answer(broker, bystander):
    with wire.connect(broker.port) as s:
        s.sendall(wire.api_versions_request(99, correlation_id=13))
        corr, err, apis, _ = wire.parse_api_versions_response(wire.recv_frame(s), 0)
        assert (corr, err) == (13, wire.ERR_UNSUPPORTED_VERSION)
        assert wire.API_API_VERSIONS in apis
    assert_still_served(broker, bystander)


def test_batch_with_wrong_crc_is_corrupt_message(broker, bystander, topic_name):
    create_topic(broker, topic_name)
    with wire.connect(broker.port) as s:
        bad = wire.record_batch([(b"k", b"v")], corrupt_crc=True)
        s.sendall(wire.produce_v3_request(topic_name, 0, bad, acks=1, correlation_id=21))
        corr, parts = wire.parse_produce_v3_response(wire.recv_frame(s))
        assert corr == 21
        assert [(t, p, e) for t, p, e, _ in parts] == [(topic_name, 0, wire.ERR_CORRUPT_MESSAGE)]
        # the same connection keeps working: a good batch is appended at offset 0
        good = wire.record_batch([(b"k", b"v")])
        s.sendall(wire.produce_v3_request(topic_name, 0, good, acks=1, correlation_id=22))
        corr, parts = wire.parse_produce_v3_response(wire.recv_frame(s))
        assert (corr, [(e, off) for _, _, e, off in parts]) == (22, [(0, 0)])
    assert_still_served(broker, bystander)


def test_100_oversize_prefixes_rss_bounded(broker, bystander, target):
    """100 connections each announce a 2 GiB request; the size cap is checked before any
    allocation, so the broker's RSS barely moves (measured for kactor only: the JVM's heap
    sizing says nothing about that)."""
    before = broker.rss_bytes()
    socks = []
    try:
        for _ in range(100):
            s = wire.connect(broker.port)
            s.sendall(wire.i32(0x7FFFFFFF) + b"\x01" * 1024)
            socks.append(s)
        time.sleep(1.0)
        peak = broker.rss_bytes()
        closed = sum(wire.wait_closed(s, timeout=10) for s in socks)
    finally:
        for s in socks:
            s.close()
    assert closed == 100
    assert_still_served(broker, bystander)
    if target == "kactor":
        assert peak - before < 64 * 1024 * 1024, f"RSS grew {(peak - before) >> 20} MiB"


def test_huge_partition_counts_are_refused_and_the_broker_stays_up(broker, bystander, target,
                                                                     topic_name):
    """CreateTopics / CreatePartitions asking for up to 2^31-1 partitions: Kafka refuses more
    than 10,000 new partitions per request with POLICY_VIOLATION before placing anything (it
    used to abort kactor with a 51 GB allocation in replica placement)."""
    from kafka import KafkaAdminClient
    from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    before = broker.rss_bytes()
    many = "Excessively large number of partitions per request."
    try:
        def create(topics, validate_only):
            t = CreateTopicsRequest.CreatableTopic
            r = a._manager.run(a._manager.send, CreateTopicsRequest(
                version=5, timeout_ms=30000, validate_only=validate_only,
                topics=[t(name=n, num_partitions=p, replication_factor=1, assignments=[],
                          configs=[]) for n, p in topics]))
            return [(t.name, t.error_code, t.error_message) for t in r.topics]

        for validate_only in (True, False):
            assert create([(topic_name, 2**31 - 1)], validate_only) == \
                [(topic_name, 44, many)]
            assert create([(topic_name + "-a", 5_001), (topic_name + "-b", 5_000)],
                          validate_only) == [(topic_name + "-a", 44, many),
                                             (topic_name + "-b", 44, many)]
        create_topic(broker, topic_name)
        r = a._manager.run(a._manager.send, CreatePartitionsRequest(
            version=1, timeout_ms=30000, validate_only=False,
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(
                name=topic_name, count=2**31 - 1, assignments=None)]))
        assert [(t.name, t.error_code, t.error_message) for t in r.results] == [
            (topic_name, 44, "Excessively large number of additional partitions per request.")]
    finally:
        a.close()
    assert_still_served(broker, bystander)
    if target == "kactor":
        assert broker.rss_bytes() - before < 64 * 1024 * 1024
