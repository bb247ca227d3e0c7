"""Checks of the test harness itself (no broker needed): the wire encoders against known
vectors, the generated broker config, the Kafka 4.4.0 tool classes, and the kactor binary."""
import subprocess
import zipfile

import pytest

from harness import wire
from harness.broker import KAFKA_LIBS, Broker, kactor_bin, random_cluster_id
from harness.cli import MAIN_CLASSES


def test_crc32c_known_vector():
    # RFC 3720 / iSCSI check value for "123456789"
    assert wire.crc32c(b"123456789") == 0xE3069283


def test_varints():
    assert wire.uvarint(0) == b"\x00"
    assert wire.uvarint(300) == b"\xac\x02"
    assert wire.varint(-1) == b"\x01"
    assert wire.varint(1) == b"\x02"
    r = wire.Reader(wire.uvarint(123456))
    assert r.uvarint() == 123456


def test_api_versions_v0_request_bytes():
    # size, api key 18, version 0, correlation id 1, client id "kactor-tests"
    assert wire.api_versions_request(0, correlation_id=1) == (
        b"\x00\x00\x00\x16" b"\x00\x12" b"\x00\x00" b"\x00\x00\x00\x01" b"\x00\x0ckactor-tests")


def test_record_batch_crc_covers_attributes_onward():
    batch = wire.record_batch([(b"k", b"v")], timestamp_ms=1000)
    assert batch[16] == 2  # magic
    crc = int.from_bytes(batch[17:21], "big")
    assert crc == wire.crc32c(batch[21:])
    bad = wire.record_batch([(b"k", b"v")], timestamp_ms=1000, corrupt_crc=True)
    assert bad[21:] == batch[21:] and bad[17:21] != batch[17:21]


def test_generated_config_is_single_node_combined_mode(tmp_path):
    b = Broker(tmp_path, overrides={"num.partitions": "3"})
    b.write_config()
    cfg = dict(line.split("=", 1) for line in b.config_path.read_text().splitlines()
               if line and not line.startswith("#"))
    assert cfg["process.roles"] == "broker,controller"
    assert cfg["controller.quorum.voters"] == f"1@127.0.0.1:{b.controller_port}"
    assert cfg["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{b.port}"
    assert cfg["log.dirs"] == str(b.data_dir)
    if b.target == "kactor":
        assert cfg["kactor.http.address"] == f"127.0.0.1:{b.http_port}"
        assert "--override" in b.command() and "num.partitions=3" in b.command()
    assert len(random_cluster_id()) == 22


def test_kafka_tool_classes_present():
    if not KAFKA_LIBS.exists():
        pytest.skip("Kafka jars not installed (scripts/test installs them)")
    names = set()
    for jar in KAFKA_LIBS.glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as z:
            names.update(z.namelist())
    for main in list(MAIN_CLASSES.values()) + ["kafka.Kafka"]:
        assert main.replace(".", "/") + ".class" in names, main


def test_kactor_version(target):
    if target != "kactor":
        pytest.skip("kactor binary only")
    out = subprocess.run([str(kactor_bin()), "version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "0.1.0" in out.stdout


def test_cutting_proxy_forwards_then_cuts():
    import socket
    import threading
    from harness.proxy import CuttingProxy

    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen(4)

    def serve():
        while True:
            try:
                c, _ = echo.accept()
            except OSError:
                return
            with c:
                try:
                    while True:
                        d = c.recv(4096)
                        if not d:
                            break
                        c.sendall(d)
                except OSError:
                    pass  # the proxy's cut resets this side too

    threading.Thread(target=serve, daemon=True).start()
    with CuttingProxy(echo.getsockname()[1], cut_after_bytes=10) as p:
        s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
        s.sendall(b"hello")
        assert wire.recv_exact(s, 5) == b"hello"
        s.sendall(b"0123456789")  # crosses the 10-byte budget: cut
        assert wire.wait_closed(s, timeout=5)
        assert p.cuts == 1
    echo.close()


def test_prometheus_helper_scrapes_itself(tmp_path):
    import shutil
    from harness.prometheus import Prometheus

    if not shutil.which("prometheus"):
        pytest.skip("prometheus not installed (scripts/test installs it)")
    p = Prometheus(tmp_path, targets=[])
    # scrape the server itself: a target that certainly exports metrics
    p.config_path.write_text(p.config_path.read_text().replace(
        "targets: []", f'targets: ["127.0.0.1:{p.port}"]'))
    with p:
        result = p.wait_for('up{job="kactor"}', lambda r: r and r[0]["value"][1] == "1")
        assert result[0]["metric"]["instance"] == f"127.0.0.1:{p.port}"
