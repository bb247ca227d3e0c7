"""Envelope (API 58) on the controller listener, as a broker in another process sends it: the
forwarded request is served and its response comes back inside, header included; a request
that must not be forwarded, or an unreadable principal, is refused at the envelope level with
Kafka's error. Raw bytes against both targets."""
from harness import wire

ENVELOPE = 58
CREATE_TOPICS = 19
API_VERSIONS = 18
NONE, INVALID_REQUEST, PRINCIPAL_DESERIALIZATION_FAILURE = 0, 42, 97

# Kafka's DefaultPrincipalData v0 for User:ANONYMOUS, as Kafka 4.4 brokers serialize it.
ANONYMOUS = (wire.i16(0) + wire.compact_string("User") + wire.compact_string("ANONYMOUS")
             + wire.i8(0) + wire.uvarint(0))


def compact_bytes(b):
    return wire.uvarint(len(b) + 1) + b


def create_topics_v5(name, correlation_id):
    body = (wire.uvarint(2) + wire.compact_string(name) + wire.i32(1) + wire.i16(1)
            + wire.uvarint(1) + wire.uvarint(1) + wire.uvarint(0)  # no assignments/configs
            + wire.i32(30000) + wire.i8(0) + wire.uvarint(0))
    return wire.request_header_v2(CREATE_TOPICS, 5, correlation_id, "forwarded-client") + body


def envelope(inner, principal=ANONYMOUS, address=bytes([127, 0, 0, 1])):
    body = (compact_bytes(inner) + compact_bytes(principal) + compact_bytes(address)
            + wire.uvarint(0))
    return wire.frame(wire.request_header_v2(ENVELOPE, 0, 77) + body)


def send_envelope(port, request):
    """(envelope error code, inner response bytes or None)."""
    with wire.connect(port, timeout=30) as s:
        r = wire.Reader(wire.roundtrip(s, request))
    assert r.i32() == 77
    r.skip_tags()
    n = r.uvarint()
    data = None if n == 0 else r.take(n - 1)
    return r.i16(), data


def parse_create_topics_v5(data):
    """(correlation id, [(name, error code)]) from a CreateTopics v5 response with its header."""
    r = wire.Reader(data)
    correlation_id = r.i32()
    r.skip_tags()
    r.i32()  # throttle
    out = []
    for _ in range(r.uvarint() - 1):
        name = r.compact_string()
        err = r.i16()
        r.compact_string()  # message
        r.i32()
        r.i16()
        for _ in range(r.uvarint() - 1):  # the topic's configs
            r.compact_string()
            r.compact_string()
            r.i8()
            r.i8()
            r.i8()
            r.skip_tags()
        r.skip_tags()
        out.append((name, err))
    return correlation_id, out


def test_forwarded_create_topics_is_served_and_answered_inside(broker, topic_name):
    err, data = send_envelope(broker.controller_port,
                              envelope(create_topics_v5(topic_name, 4242)))
    assert err == NONE
    correlation_id, topics = parse_create_topics_v5(data)
    assert correlation_id == 4242
    assert topics == [(topic_name, NONE)]
    # The topic exists for clients of the broker listener.
    with wire.connect(broker.port) as s:
        _, md = wire.parse_metadata_v1_response(
            wire.roundtrip(s, wire.metadata_v1_request([topic_name])))
    assert md[topic_name][0] == NONE


def test_a_request_that_is_not_forwardable_is_refused(broker):
    inner = wire.request_header_v2(API_VERSIONS, 3, 5, "x") + (
        wire.compact_string("x") + wire.compact_string("1") + wire.uvarint(0))
    err, data = send_envelope(broker.controller_port, envelope(inner))
    assert (err, data) == (INVALID_REQUEST, None)


def test_an_unreadable_principal_is_refused(broker, topic_name):
    err, data = send_envelope(broker.controller_port,
                              envelope(create_topics_v5(topic_name, 1), principal=b"\x07junk"))
    assert (err, data) == (PRINCIPAL_DESERIALIZATION_FAILURE, None)
