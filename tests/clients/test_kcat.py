"""kcat (librdkafka's command-line client): metadata listing, produce and consume."""
import json
import subprocess

import pytest

from harness.clients import create_topic


def kcat(broker, *args, input=None, timeout=60):
    out = subprocess.run(["kcat", "-b", broker.bootstrap, *args], input=input,
                         capture_output=True, timeout=timeout)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out.stdout.decode()


def test_kcat_list_metadata(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    out = kcat(broker, "-L", "-t", topic_name)
    assert "1 brokers:" in out
    assert f"broker 1 at 127.0.0.1:{broker.port}" in out
    assert f'topic "{topic_name}" with 2 partitions:' in out
    assert "partition 0, leader 1, replicas: 1, isrs: 1" in out
    md = json.loads(kcat(broker, "-L", "-J", "-t", topic_name))
    assert [b["id"] for b in md["brokers"]] == [1]
    (t,) = md["topics"]
    assert t["topic"] == topic_name and len(t["partitions"]) == 2


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume(broker, topic_name, codec):
    create_topic(broker, topic_name)
    lines = "".join(f"key{i}:value {i}\n" for i in range(50))
    kcat(broker, "-P", "-t", topic_name, "-p", "0", "-K:", "-z", codec,
         "-H", "origin=kcat", "-X", "enable.idempotence=false", input=lines.encode())
    out = kcat(broker, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e",
               "-f", "%o|%k|%s|%h\n")
    rows = out.splitlines()
    assert rows == [f"{i}|key{i}|value {i}|origin=kcat" for i in range(50)]


def test_kcat_consume_from_offset_and_count(broker, topic_name):
    create_topic(broker, topic_name)
    kcat(broker, "-P", "-t", topic_name, "-p", "0", input="".join(f"m{i}\n" for i in range(20)).encode())
    out = kcat(broker, "-C", "-t", topic_name, "-p", "0", "-o", "15", "-c", "3", "-f", "%o:%s\n")
    assert out.splitlines() == ["15:m15", "16:m16", "17:m17"]
