"""`queued.max.request.bytes` over the wire: one pool of request bytes shared by the client
connections. A connection that has read a request's size prefix takes that many bytes from the
pool before reading the body; while the pool has nothing left, other connections are not read
(Kafka mutes them) until the bytes come back once a request has been handled.

Kafka's pool is non-strict (SocketServer builds its SimpleMemoryPool with strict=false): a
request gets its bytes whenever the pool has any byte left, so only a pool drained to zero
stops other connections; the scenario below drains it with one request exactly the pool's size.
A request larger than the pool cannot happen: Kafka refuses to start unless
queued.max.request.bytes >= socket.request.max.bytes. Both checked against Apache Kafka 4.4.0
with KACTOR_TEST_TARGET=kafka."""
import re
import threading
import time
import urllib.request

import pytest

from harness import wire
from harness.broker import BrokerError

POOL_BYTES = 2 * 1024 * 1024


def produce_frame(size, correlation_id):
    """A Produce v3 frame (to a topic nobody created) whose body is exactly `size` bytes."""
    value_len = size
    for _ in range(10):
        batch = wire.record_batch([(None, b"v" * value_len)])
        f = wire.produce_v3_request("memory-pool-none", 0, batch, correlation_id=correlation_id)
        if len(f) - 4 == size:
            return f
        value_len += size - (len(f) - 4)
    raise AssertionError(f"cannot build a {size}-byte produce frame")


def send_in_background(sock, data):
    """sendall in a thread: a broker that stops reading leaves it blocked on a full socket."""
    t = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
    t.start()
    return t


def answered_within(sock, seconds):
    """The correlation id of the next response, or None if none arrives in `seconds`."""
    sock.settimeout(seconds)
    try:
        return wire.Reader(wire.recv_frame(sock)).i32()
    except TimeoutError:
        return None


def pool_gauges(broker):
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in ("used", "available"):
        m = re.search(rf'^kactor_network_request_memory_pool_{name}_bytes\{{listeners="broker"\}} '
                      r"(\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else None
    return out


@pytest.fixture
def pooled_broker(broker_factory):
    return broker_factory(name="mempool", overrides={
        "queued.max.request.bytes": str(POOL_BYTES),
        "socket.request.max.bytes": str(POOL_BYTES),
    })


def test_a_drained_pool_stops_reading_other_connections_until_bytes_come_back(pooled_broker):
    b = pooled_broker
    big = produce_frame(POOL_BYTES, correlation_id=1)
    other = produce_frame(1024 * 1024, correlation_id=2)
    with wire.connect(b.port) as a, wire.connect(b.port) as c:
        # A announces a request the size of the whole pool and stalls half-way through it.
        a.sendall(big[:POOL_BYTES // 2])
        time.sleep(0.5)
        if b.target == "kactor":
            assert pool_gauges(b) == {"used": POOL_BYTES, "available": 0}
        # B's complete request is not read while A holds every byte of the pool.
        sender = send_in_background(c, other)
        assert answered_within(c, 1.5) is None, "B answered while the pool was drained"
        # A finishes; its request is handled, its bytes come back, B is read and answered.
        a.sendall(big[POOL_BYTES // 2:])
        assert answered_within(a, 15) == 1
        assert answered_within(c, 15) == 2
        sender.join(15)
        assert not sender.is_alive()
    if b.target == "kactor":
        deadline = time.monotonic() + 10
        while pool_gauges(b)["used"] != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool_gauges(b) == {"used": 0, "available": POOL_BYTES}


def test_a_request_that_stalls_in_a_pool_with_bytes_left_does_not_stop_others(pooled_broker):
    """Non-strict: half the pool taken still leaves bytes, so a request larger than what is
    left is read at once (the pool dips below zero by it)."""
    b = pooled_broker
    half = produce_frame(POOL_BYTES // 2 + 1024, correlation_id=3)
    other = produce_frame(1024 * 1024, correlation_id=4)
    with wire.connect(b.port) as a, wire.connect(b.port) as c:
        a.sendall(half[:1024])
        time.sleep(0.5)
        sender = send_in_background(c, other)
        assert answered_within(c, 15) == 4
        sender.join(15)
        a.sendall(half[1024:])
        assert answered_within(a, 15) == 3


def test_a_pool_smaller_than_the_largest_request_refuses_to_start(broker_factory):
    b = broker_factory(name="mempool-small", start=False, overrides={
        "queued.max.request.bytes": str(POOL_BYTES),
        "socket.request.max.bytes": str(POOL_BYTES + 1),
    })
    with pytest.raises(BrokerError):
        b.start(timeout=60)
    log = b.log_text()
    assert "queued.max.request.bytes" in log
    assert "must be larger or equal to socket.request.max.bytes" in log
