"""A full disk under the metadata log (`__cluster_metadata-0`): the node stops with a clear error
and a non-zero exit code instead of aborting or looping. Kafka 4.4.0 treats an I/O error on the
KRaft metadata log as fatal: "Error while appending records to __cluster_metadata-0", then
"Encountered fatal fault: Unexpected error in raft IO thread" (ProcessTerminatingFaultHandler)
and exit code 1 — checked against the reference broker with this test (KACTOR_TEST_TARGET=kafka).

The disk is a small tmpfs mounted for the test (we run as root in CI); the test is skipped
where mounting is not allowed."""
import os
import subprocess
import time

import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(path):
    """Takes every free byte of the file system holding `path`."""
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        # Page-size remainders too, so the next metadata page cannot be allocated.
        for size in (1 << 20, 4096):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(fd, chunk)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_full_metadata_log_disk_stops_the_node_cleanly(broker_factory, small_disk):
    data = small_disk / "data"
    b = broker_factory(overrides={"log.dirs": str(data)}, name="diskfull")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    fill(small_disk)
    # Broker config changes are metadata records only (no partition is created), so the
    # first write that fails is the metadata log's.
    outcome = None
    deadline = time.monotonic() + 120
    i = 0
    while time.monotonic() < deadline and b.is_running():
        i += 1
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("log.retention.ms", str(3_600_000 + i),
                        incremental_operation=AlterConfigOpType.SET)])
        try:
            list(admin.incremental_alter_configs([res], request_timeout=5).values())[0].result(10)
        except Exception as e:  # noqa: BLE001 - any failure: look at the process next
            outcome = repr(e)
            time.sleep(0.5)
    assert not b.is_running(), f"still running after {i} config writes on a full disk ({outcome})"
    code = b.proc.wait(30)
    log = b.log_text()
    # Stopped on purpose: not a signal (SIGABRT from a panic, SIGBUS), a plain error exit.
    assert code > 0, f"exit code {code}"
    if b.target == "kactor":
        assert code == 1
        assert "No space left on device" in log
        assert "KRaft metadata log" in log and "shutting down this node" in log
        assert "panicked" not in log


def _produce_codes(broker, topic, partitions):
    """One produce per partition on a raw connection: {partition: error code}."""
    from harness import wire
    codes = {}
    with wire.connect(broker.port, timeout=30) as sock:
        for p in partitions:
            batch = wire.record_batch([(None, b"after the disk filled")])
            _, rows = wire.parse_produce_v3_response(wire.roundtrip(
                sock, wire.produce_v3_request(topic, p, batch, acks=1, timeout_ms=10000)))
            codes[p] = rows[0][2]
    return codes


def test_partitions_created_on_a_full_log_dir_take_it_offline(broker_factory, small_disk,
                                                             tmp_path, topic_name):
    """Two log dirs, one of them full: CreateTopics succeeds (the metadata is fine), the
    partitions placed in the full dir cannot be created, and that dir goes offline: produce to
    them fails (KAFKA_STORAGE_ERROR here, as Kafka answers for a replica in an offline dir; or
    NOT_LEADER_OR_FOLLOWER once Kafka's controller has moved them), DescribeLogDirs reports the
    dir with KAFKA_STORAGE_ERROR, the partitions in the healthy dir keep working and the broker
    stays up. Before, kactor advertised the failed partitions and answered
    NOT_LEADER_OR_FOLLOWER until a restart, with no dir taken offline."""
    from differential.client import Client
    full, healthy = small_disk / "logs", tmp_path / "healthy-logs"
    b = broker_factory(name="jbod", overrides={
        "log.dirs": f"{full},{healthy}", "metadata.log.dir": str(tmp_path / "metadata")})
    fill(small_disk)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        in_full = sorted(int(d.name.rsplit("-", 1)[1]) for d in full.glob(f"{topic_name}-*"))
        if in_full:
            break
        time.sleep(0.2)
    assert in_full, "no partition was placed in the full dir"
    in_healthy = sorted(set(range(4)) - set(in_full))
    assert in_healthy, "no partition was placed in the healthy dir"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        codes = _produce_codes(b, topic_name, range(4))
        if all(codes[p] == 0 for p in in_healthy) and all(codes[p] != 0 for p in in_full):
            break
        time.sleep(0.5)
    assert all(codes[p] == 0 for p in in_healthy), codes
    assert all(codes[p] in (56, 6) for p in in_full), codes
    if b.target == "kactor":
        assert all(codes[p] == 56 for p in in_full), codes
    c = Client(b.target, b.port)
    try:
        r = c.call("DescribeLogDirs", 4, {"Topics": None})
    finally:
        c.close()
    errors = {d["LogDir"]: d["ErrorCode"] for d in r["Results"]}
    assert errors == {str(full): 56, str(healthy): 0}, errors
    assert b.is_running()
    if b.target == "kactor":
        assert "log dir failed" in b.log_text()


def test_a_single_full_log_dir_stops_the_node(broker_factory, small_disk, tmp_path, topic_name):
    """The only log dir fails: the node cannot serve any partition and stops with one clear
    line and a non-zero exit code, as Kafka halts when all its log dirs have failed."""
    b = broker_factory(name="onedir", overrides={
        "log.dirs": str(small_disk / "logs"), "metadata.log.dir": str(tmp_path / "metadata")})
    fill(small_disk)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    from confluent_kafka.admin import NewTopic
    try:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    except Exception:  # noqa: BLE001 - the node may be gone before it answers
        pass
    deadline = time.monotonic() + 60
    while b.is_running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not b.is_running(), "still running with its only log dir failed"
    code = b.proc.wait(30)
    assert code > 0, f"exit code {code}"
    if b.target == "kactor":
        log = b.log_text()
        assert "all log dirs have failed" in log, log[-3000:]
        assert "No space left on device" in log
        assert "panicked" not in log


def _produce_one(sock, topic, p, value):
    """Produce v3 acks=-1 of one record: (error code, base offset)."""
    from harness import wire
    batch = wire.record_batch([(None, value)])
    _, rows = wire.parse_produce_v3_response(wire.roundtrip(
        sock, wire.produce_v3_request(topic, p, batch, acks=-1, timeout_ms=10000)))
    return rows[0][2], rows[0][3]


def test_a_data_log_dir_filling_under_writes_loses_nothing_acknowledged(
        broker_factory, small_disk, tmp_path, topic_name):
    """Issue #30's disk-full evidence: partitions already written in both of two log dirs, the
    disk under one of them fills while records keep coming. Produce to a partition there gets
    KAFKA_STORAGE_ERROR (Kafka 4.4 answers that for the failed append too, then
    NOT_LEADER_OR_FOLLOWER once its controller has taken the replica's leadership away), the
    healthy dir keeps acknowledging, the process stays up; with space freed and a restart
    every acknowledged record is where it was acknowledged and all partitions take writes."""
    from confluent_kafka.admin import NewTopic
    from harness import wire
    from harness.txn import read_partitions
    full, healthy = small_disk / "logs", tmp_path / "healthy-logs"
    b = broker_factory(name="filling", overrides={
        "log.dirs": f"{full},{healthy}", "metadata.log.dir": str(tmp_path / "metadata")})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(30)
    deadline = time.monotonic() + 60
    acked = {}  # (partition, offset) -> value
    codes = {}
    with wire.connect(b.port, timeout=30) as sock:
        while time.monotonic() < deadline:  # the first writes, once every partition leads
            codes = {p: _produce_one(sock, topic_name, p, b"before-%d" % p) for p in range(4)}
            if all(c == 0 for c, _ in codes.values()):
                break
            time.sleep(0.3)
        assert all(c == 0 for c, _ in codes.values()), codes
        for p, (_, off) in codes.items():
            acked[(p, off)] = b"before-%d" % p
        in_full = sorted(int(d.name.rsplit("-", 1)[1]) for d in full.glob(f"{topic_name}-*"))
        in_healthy = sorted(set(range(4)) - set(in_full))
        assert in_full and in_healthy, (in_full, in_healthy)
        fill(small_disk)
        seen = {p: [] for p in range(4)}
        i = 0
        deadline = time.monotonic() + 60
        # Until every partition in the full dir refused a write (a record may still fit in a
        # page already allocated) and then a few more rounds.
        rounds_after = 0
        while time.monotonic() < deadline and rounds_after < 5:
            for p in range(4):
                i += 1
                value = b"during-%d" % i
                code, off = _produce_one(sock, topic_name, p, value)
                seen[p].append(code)
                if code == 0:
                    acked[(p, off)] = value
            if all(any(c != 0 for c in seen[p]) for p in in_full):
                rounds_after += 1
    print(f"codes after the disk filled (full dir {in_full}): "
          f"{ {p: sorted(set(seen[p])) for p in seen} }")
    assert b.is_running(), "the broker stopped with a healthy log dir left"
    for p in in_healthy:
        assert set(seen[p]) == {0}, f"healthy partition {p}: {seen[p]}"
    for p in in_full:
        failures = [c for c in seen[p] if c != 0]
        assert failures, f"partition {p} in the full dir never refused a write"
        assert set(failures) <= {56, 6}, f"partition {p}: {seen[p]}"
        # The write that hit the full disk gets KAFKA_STORAGE_ERROR on both brokers.
        assert failures[0] == 56, f"partition {p}: first failure {failures[0]}"
        if b.target == "kactor":
            assert set(failures) == {56}, seen[p]
        # Once refused, never acknowledged again before the restart (the dir is offline).
        first = seen[p].index(failures[0])
        assert set(seen[p][first:]) == set(failures), seen[p]
    (small_disk / "filler").unlink()
    b.stop()
    b.restart()
    got = read_partitions(b, topic_name, 4, isolation="read_uncommitted", timeout=60)
    at = {(p, off): v for p, recs in got.items() for off, _, v in recs}
    missing = {k: v for k, v in acked.items() if at.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost or changed: " \
                        f"{sorted(missing.items())[:10]}"
    with wire.connect(b.port, timeout=30) as sock:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            after = {p: _produce_one(sock, topic_name, p, b"after")[0] for p in range(4)}
            if set(after.values()) == {0}:
                break
            time.sleep(0.3)
    assert set(after.values()) == {0}, after
