"""DescribeLogDirs v4 over the wire: each log dir reports its file system's total and usable
bytes (KIP-827), which AdminClient's LogDirDescription.totalBytes()/usableBytes() show. Both
brokers are checked against `os.statvfs` of the data dir they were given."""
import os

from harness import wire

API_DESCRIBE_LOG_DIRS = 35


def describe_log_dirs_v4(port):
    # Flexible request: header v2, body {topics: null (compact array -1 = varint 0), tags}.
    body = wire.uvarint(0) + wire.uvarint(0)
    payload = wire.request_header_v2(API_DESCRIBE_LOG_DIRS, 4, 11) + body
    with wire.connect(port) as s:
        s.sendall(wire.frame(payload))
        r = wire.Reader(wire.recv_frame(s))
    assert r.i32() == 11  # correlation id
    r.skip_tags()  # response header v1
    r.i32()  # throttle_time_ms
    top_error = r.i16()
    results = []
    for _ in range(r.uvarint() - 1):
        err = r.i16()
        log_dir = r.compact_string()
        for _ in range(r.uvarint() - 1):  # topics
            r.compact_string()
            for _ in range(r.uvarint() - 1):  # partitions
                r.i32(), r.i64(), r.i64(), r.i8()
                r.skip_tags()
            r.skip_tags()
        total, usable = r.i64(), r.i64()
        r.skip_tags()
        results.append((err, log_dir, total, usable))
    return top_error, results


def test_log_dirs_report_their_volume_sizes(broker):
    top_error, results = describe_log_dirs_v4(broker.port)
    assert top_error == 0
    assert results, "at least one log dir"
    for err, log_dir, total, usable in results:
        assert err == 0, log_dir
        st = os.statvfs(log_dir)
        expected_total = st.f_blocks * st.f_frsize
        assert total == expected_total, (log_dir, total, expected_total)
        # Free space moves while other tests write; it must be a real, plausible figure.
        assert 0 < usable <= total, (log_dir, usable, total)
        assert abs(usable - st.f_bavail * st.f_frsize) < max(total // 20, 1 << 30)
