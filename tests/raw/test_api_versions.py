"""ApiVersions over raw TCP (Kafka's ApiVersionsRequest/Response, KIP-511): the handshake every
client does first, checked byte by byte from Python."""
import pytest

from harness import wire

# The key APIs #4 serves, with the version ranges Kafka 4.4.0 advertises for them.
KAFKA_44_RANGES = {
    0: (0, 13),    # Produce (4.4 still advertises 0 though v0-v2 are gone, KIP-896)
    1: (4, 18),    # Fetch
    3: (0, 13),    # Metadata
    18: (0, 5),    # ApiVersions
}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_api_versions_each_version(broker, version):
    corr, err, apis, throttle = wire.api_versions(broker.port, version)
    assert corr == 42
    assert err == wire.ERR_NONE
    assert apis[wire.API_API_VERSIONS] == (0, 5)
    assert throttle == 0


def test_api_versions_ranges_match_kafka_4_4(broker):
    _, err, apis, _ = wire.api_versions(broker.port, 4)
    assert err == 0
    for key, (lo, hi) in KAFKA_44_RANGES.items():
        if key in apis:
            assert apis[key] == (lo, hi), f"api key {key}"
    assert 0 in apis and 1 in apis and 3 in apis, sorted(apis)


def test_kip511_unsupported_version_falls_back_to_v0(broker):
    """A too-new ApiVersions request gets UNSUPPORTED_VERSION in a v0-encoded body that still
    lists the broker's ranges, so the client can retry with a version both sides know."""
    with wire.connect(broker.port) as s:
        s.sendall(wire.api_versions_request(127, correlation_id=9))
        corr, err, apis, _ = wire.parse_api_versions_response(wire.recv_frame(s), 0)
    assert corr == 9
    assert err == wire.ERR_UNSUPPORTED_VERSION
    assert apis.get(wire.API_API_VERSIONS) == (0, 5)


def test_many_requests_pipelined_answered_in_order(broker):
    with wire.connect(broker.port) as s:
        s.sendall(b"".join(wire.api_versions_request(v % 6, correlation_id=100 + v)
                           for v in range(20)))
        for v in range(20):
            corr, err, _, _ = wire.parse_api_versions_response(wire.recv_frame(s), v % 6)
            assert (corr, err) == (100 + v, 0)
