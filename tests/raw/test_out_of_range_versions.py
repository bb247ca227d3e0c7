"""Requests at versions outside what the broker serves, over raw TCP.

Checked against Apache Kafka 4.4.0 (KACTOR_TEST_TARGET=kafka): its SocketServer rejects a
request header whose version the ApiVersionManager does not enable and closes the connection
without any response — for versions above an API's maximum, below its minimum, and for Produce
v0-v2, which 4.4 still advertises (so librdkafka keeps compression on, KIP-896) but no longer
parses. Only ApiVersions has a fallback answer (KIP-511, tests/raw/test_api_versions.py)."""
import pytest

from harness import wire

API_FETCH = 1
API_LIST_OFFSETS = 2


def produce_old_request(version, topic, correlation_id):
    # Produce v0-v2 body: acks, timeout, topics (no transactional_id before v3).
    batch = wire.record_batch([(b"k", b"v")])
    body = wire.i16(1) + wire.i32(5000)
    body += (wire.i32(1) + wire.string(topic) + wire.i32(1) + wire.i32(0)
             + wire.i32(len(batch)) + batch)
    return wire.frame(wire.request_header_v1(wire.API_PRODUCE, version, correlation_id) + body)


def fetch_old_request(version, correlation_id):
    # replica_id, max_wait_ms, min_bytes, no topics.
    body = wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(0)
    return wire.frame(wire.request_header_v1(API_FETCH, version, correlation_id) + body)


def assert_closed_without_response(port, request):
    with wire.connect(port) as s:
        s.sendall(request)
        try:
            data = s.recv(4)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        assert data == b"", f"expected a closed connection, got {data!r}"


def assert_still_served(port):
    corr, err, apis, _ = wire.api_versions(port, 3)
    assert (corr, err) == (42, 0)
    return apis


@pytest.mark.parametrize("version", [0, 1, 2])
def test_removed_produce_versions_close_the_connection(broker, topic_name, version):
    # Still advertised from v0, as Kafka 4.4 does ...
    assert assert_still_served(broker.port)[wire.API_PRODUCE][0] == 0
    # ... but a v0-v2 request is not parsed: no response, the connection is closed.
    assert_closed_without_response(broker.port, produce_old_request(version, topic_name, 3))
    assert_still_served(broker.port)


def test_produce_above_max_closes_the_connection(broker):
    hi = assert_still_served(broker.port)[wire.API_PRODUCE][1]
    req = wire.frame(wire.request_header_v2(wire.API_PRODUCE, hi + 1, 4) + b"\x00" * 16)
    assert_closed_without_response(broker.port, req)
    assert_still_served(broker.port)


@pytest.mark.parametrize("version", [0, 3])
def test_fetch_below_min_closes_the_connection(broker, version):
    # Fetch v0-v3 were removed in Kafka 4.0 (KIP-896) and are not advertised.
    assert assert_still_served(broker.port)[API_FETCH][0] == 4
    assert_closed_without_response(broker.port, fetch_old_request(version, 5))
    assert_still_served(broker.port)


def test_list_offsets_v0_closes_the_connection(broker):
    assert assert_still_served(broker.port)[API_LIST_OFFSETS][0] == 1
    req = wire.frame(wire.request_header_v1(API_LIST_OFFSETS, 0, 6) + wire.i32(-1) + wire.i32(0))
    assert_closed_without_response(broker.port, req)


def test_metadata_above_max_closes_but_v0_is_answered(broker):
    hi = assert_still_served(broker.port)[wire.API_METADATA][1]
    req = wire.frame(wire.request_header_v2(wire.API_METADATA, hi + 1, 7) + b"\x00" * 8)
    assert_closed_without_response(broker.port, req)
    # The lowest advertised version on the same kind of connection is served normally.
    with wire.connect(broker.port) as s:
        s.sendall(wire.frame(wire.request_header_v1(wire.API_METADATA, 0, 8) + wire.i32(0)))
        r = wire.Reader(wire.recv_frame(s))
        assert r.i32() == 8
        assert r.i32() >= 1  # brokers
