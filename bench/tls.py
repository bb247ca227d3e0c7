"""Benchmark (not a test): TLS throughput and handshake rate, kactor beside Apache Kafka 4.4 on
this machine (issue #28).

For each broker in turn, on the same ports and disk: a single node with a PLAINTEXT and an SSL
listener (PEM key store made with openssl), then
  - Kafka's producer-perf-test over SSL and over PLAINTEXT (1 KiB records, acks=1),
  - Kafka's consumer-perf-test over SSL reading them back,
  - TLS handshakes per second: new connections, each a TLS 1.3 handshake and one ApiVersions.
Prints a markdown table with kactor/Kafka ratios.

    .venv/bin/python bench/tls.py [--records 1000000] [--handshake-seconds 10]
"""
import argparse
import re
import socket
import ssl
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import wire  # noqa: E402
from harness.broker import Broker, free_port  # noqa: E402
from harness.cli import run_tool  # noqa: E402
from harness.security import make_certs  # noqa: E402


def start(target, work, certs):
    ssl_port = free_port()
    b = Broker(work / target, target=target)
    h = b.host
    b.overrides = {
        "listeners": f"PLAINTEXT://{h}:{b.port},SSL://{h}:{ssl_port},"
                     f"CONTROLLER://{h}:{b.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{h}:{b.port},SSL://{h}:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
    }
    b.start()
    return b, ssl_port


def perf(tool, args, props):
    out = run_tool(tool, *args, *props, timeout=900).stdout
    return out


def produce(b, port, topic, records, ssl_props):
    run_tool("topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", topic,
             "--partitions", "3", "--replication-factor", "1")
    props = ["--producer.config", str(ssl_props)] if ssl_props else []
    out = perf("producer-perf-test", ["--topic", topic, "--num-records", str(records),
                                      "--record-size", "1024", "--throughput", "-1",
                                      "--producer-props", f"bootstrap.servers=127.0.0.1:{port}",
                                      "acks=1", "linger.ms=5", "batch.size=65536"], props)
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    return float(re.search(r"\(([\d.]+) MB/sec\)", last).group(1))


def consume(port, topic, records, ssl_props):
    out = perf("consumer-perf-test", ["--bootstrap-server", f"127.0.0.1:{port}", "--topic",
                                      topic, "--messages", str(records), "--timeout", "60000"],
               ["--command-config", str(ssl_props)])
    row = [line for line in out.splitlines() if line and line[0].isdigit()][-1].split(",")
    return float(row[3])  # MB.sec


def handshakes(port, cafile, seconds):
    ctx = ssl.create_default_context(cafile=str(cafile))
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(wire.api_versions_request(0))
                wire.recv_frame(s)
        n += 1
    return n / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--handshake-seconds", type=float, default=10)
    ap.add_argument("--brokers", default="kactor,kafka")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kactor-tls-bench-"))
    certs = work / "certs"
    certs.mkdir()
    make_certs(certs)
    props = work / "ssl.properties"
    props.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                     f"ssl.truststore.location={certs / 'ca.pem'}\n")
    results = {}
    for target in args.brokers.split(","):
        b, ssl_port = start(target, work, certs)
        try:
            r = {}
            r["produce SSL MB/s"] = produce(b, ssl_port, "tls", args.records, props)
            r["produce PLAINTEXT MB/s"] = produce(b, b.port, "plain", args.records, None)
            r["consume SSL MB/s"] = consume(ssl_port, "tls", args.records, props)
            r["TLS handshakes/s"] = handshakes(ssl_port, certs / "ca.pem",
                                               args.handshake_seconds)
            results[target] = r
            print(target, r, flush=True)
        finally:
            b.stop()
    if len(results) == 2:
        print("\n| metric | kactor | Kafka 4.4 | kactor/Kafka |\n|---|---|---|---|")
        for k in results["kactor"]:
            a, c = results["kactor"][k], results["kafka"][k]
            print(f"| {k} | {a:.1f} | {c:.1f} | {a / c:.2f}x |")


if __name__ == "__main__":
    main()
