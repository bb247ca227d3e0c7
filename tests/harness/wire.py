"""Raw Kafka wire helpers: just enough of the protocol to probe a broker byte by byte.

Used for readiness (ApiVersions), the bad-input suite (oversize prefixes, truncated frames,
unknown keys, unsupported versions, a record batch with a wrong CRC) and KIP-511 checks. Encodings
follow the Kafka 4.4.0 protocol facts (request header v1/v2, ApiVersions v0-v4, Produce v3,
record batch v2)."""
import socket
import struct
import time
import zlib  # noqa: F401  (kept for callers that want gzip payloads)

API_PRODUCE = 0
API_METADATA = 3
API_API_VERSIONS = 18

ERR_NONE = 0
ERR_CORRUPT_MESSAGE = 2
ERR_UNSUPPORTED_VERSION = 35


# ---- primitive encoders -------------------------------------------------------------------

def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def u32(v):
    return struct.pack(">I", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def uvarint(v):
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(v):
    # zig-zag, as record fields use
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


# ---- CRC-32C (Castagnoli), needed for record batch v2 -------------------------------------

def _crc32c_table():
    poly = 0x82F63B78
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---- requests ------------------------------------------------------------------------------

def request_header_v1(api_key, api_version, correlation_id, client_id="kactor-tests"):
    return i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)


def request_header_v2(api_key, api_version, correlation_id, client_id="kactor-tests"):
    # v2 = v1 + empty tagged fields; client_id stays a (non-compact) nullable string.
    return request_header_v1(api_key, api_version, correlation_id, client_id) + uvarint(0)


def frame(payload):
    return i32(len(payload)) + payload


def api_versions_request(version, correlation_id=1, software=("kactor-tests", "0.1"),
                         cluster_id=None, node_id=-1):
    """ApiVersions request frame; v3+ is flexible and carries client software name/version,
    v5+ also the cluster id and node id the client means to reach."""
    if version >= 3:
        body = compact_string(software[0]) + compact_string(software[1])
        if version >= 5:
            body += compact_string(cluster_id) + i32(node_id)
        body += uvarint(0)
        return frame(request_header_v2(API_API_VERSIONS, version, correlation_id) + body)
    return frame(request_header_v1(API_API_VERSIONS, version, correlation_id))


def encode_records(records):
    """The records section of a v2 batch for `records`, a list of (key, value)."""
    recs = b""
    for delta, (key, value) in enumerate(records):
        body = i8(0) + varint(0) + varint(delta)
        body += varint(-1) if key is None else varint(len(key)) + key
        body += varint(-1) if value is None else varint(len(value)) + value
        body += varint(0)  # headers
        recs += varint(len(body)) + body
    return recs


def compress(codec, data):
    """`data` compressed as Kafka frames it: codec 0 none, 1 gzip, 2 snappy (xerial), 3 lz4 (frame),
    4 zstd."""
    from kafka import codec as kc
    return {0: bytes, 1: kc.gzip_encode, 2: kc.snappy_encode, 3: kc.lz4_encode,
            4: kc.zstd_encode}[codec](data)


def record_batch(records, base_offset=0, timestamp_ms=None, corrupt_crc=False, codec=0,
                 records_section=None, count=None):
    """A v2 record batch, no producer id. `records` is a list of (key, value); `codec` (0-4)
    compresses them. `records_section` replaces the (compressed) records bytes and `count` the
    declared record count, to build batches whose payload disagrees with their header."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    recs = encode_records(records)
    if codec:
        recs = compress(codec, recs)
    if records_section is not None:
        recs = records_section
    n = len(records) if count is None else count
    # attributes .. records: the part the CRC covers
    after_crc = (i16(codec) + i32(n - 1) + i64(ts) + i64(ts) + i64(-1) + i16(-1)
                 + i32(-1) + i32(n) + recs)
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    after_length = i32(0) + i8(2) + u32(crc) + after_crc  # partition leader epoch, magic, crc
    return i64(base_offset) + i32(len(after_length)) + after_length


def produce_v3_request(topic, partition, batch, acks=1, timeout_ms=5000, correlation_id=7,
                       version=3):
    """Produce v3 to v8 (one request body shape; zstd needs v7+)."""
    assert 3 <= version <= 8
    body = string(None) + i16(acks) + i32(timeout_ms)
    body += i32(1) + string(topic) + i32(1) + i32(partition) + i32(len(batch)) + batch
    return frame(request_header_v1(API_PRODUCE, version, correlation_id) + body)


def metadata_v1_request(topics, correlation_id=3):
    """Metadata v1 for `topics` (None = all topics). v1 has no allow_auto_topic_creation flag:
    a broker with auto.create.topics.enable creates the unknown names it is asked for."""
    body = i32(-1) if topics is None else i32(len(topics)) + b"".join(string(t) for t in topics)
    return frame(request_header_v1(API_METADATA, 1, correlation_id) + body)


# ---- responses -----------------------------------------------------------------------------

class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("short response")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def compact_string(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def remaining(self):
        return len(self.data) - self.pos


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def recv_frame(sock):
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def parse_api_versions_response(payload, version):
    """Returns (correlation_id, error_code, {api_key: (min, max)}, throttle_ms).

    The response header is always v0 for ApiVersions (no tagged fields), even when the body is
    flexible, so clients can read it before they know the broker's versions."""
    r = Reader(payload)
    corr = r.i32()
    err = r.i16()
    apis = {}
    flexible = version >= 3
    n = r.uvarint() - 1 if flexible else r.i32()
    for _ in range(max(n, 0)):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        apis[key] = (lo, hi)
        if flexible:
            r.skip_tags()
    throttle = r.i32() if version >= 1 and r.remaining() >= 4 else 0
    return corr, err, apis, throttle


def parse_produce_v3_response(payload, version=3):
    """Returns (correlation_id, [(topic, partition, error_code, base_offset)]) of a Produce v3
    to v8 response (v8's error message is left out; see parse_produce_response)."""
    corr, rows = parse_produce_response(payload, version)
    return corr, [row[:4] for row in rows]


def parse_produce_response(payload, version):
    """Returns (correlation_id, [(topic, partition, error_code, base_offset, error_message)])
    of a Produce v3 to v8 response (the message is None below v8)."""
    r = Reader(payload)
    corr = r.i32()
    out = []
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            partition, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log_append_time
            message = None
            if version >= 5:
                r.i64()  # log_start_offset
            if version >= 8:
                for _ in range(r.i32()):  # record_errors: batch index, message
                    r.i32(), r.string()
                message = r.string()
            out.append((topic, partition, err, base, message))
    return corr, out


def parse_metadata_v1_response(payload):
    """Returns (correlation_id, {topic: (error_code, {partition: (error_code, leader)})})."""
    r = Reader(payload)
    corr = r.i32()
    for _ in range(r.i32()):  # brokers: node_id, host, port, rack
        r.i32(), r.string(), r.i32(), r.string()
    r.i32()  # controller_id
    topics = {}
    for _ in range(r.i32()):
        err, name, _internal = r.i16(), r.string(), r.i8()
        parts = {}
        for _ in range(r.i32()):
            perr, index, leader = r.i16(), r.i32(), r.i32()
            for _ in range(2):  # replicas, isr
                for _ in range(r.i32()):
                    r.i32()
            parts[index] = (perr, leader)
        topics[name] = (err, parts)
    return corr, topics


def roundtrip(sock, request):
    sock.sendall(request)
    return recv_frame(sock)


def connect(port, host="127.0.0.1", timeout=5.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.settimeout(timeout)
    return s


def api_versions(port, version=0, timeout=5.0, host="127.0.0.1"):
    """One ApiVersions round trip on a fresh connection."""
    with connect(port, host=host, timeout=timeout) as s:
        s.sendall(api_versions_request(version, correlation_id=42))
        return parse_api_versions_response(recv_frame(s), version)


def wait_closed(sock, timeout=10.0):
    """True if the peer closes (EOF or reset) within `timeout`; any bytes it sends are drained."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
            if not data:
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False
