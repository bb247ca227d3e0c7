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
