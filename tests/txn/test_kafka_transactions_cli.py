"""`kafka-transactions` (Kafka 4.4.0 tools) against the broker, checked on its output (#6)."""
import pytest
from confluent_kafka import Producer

from harness.clients import create_topic


def test_describe_producers_lists_the_idempotent_producer(broker, cli, topic_name):
    create_topic(broker, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for _ in range(10):
        p.produce(topic_name, value=b"x")
    assert p.flush(30) == 0
    out = cli.run("transactions", "describe-producers", "--topic", topic_name,
                  "--partition", "0").stdout
    lines = [l.split() for l in out.strip().splitlines()]
    assert lines[0][:4] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                            "LastSequence"]
    assert len(lines) == 2, out
    row = lines[1]
    assert row[1] == "0", "epoch 0 for an idempotent producer"
    assert row[3] == "9", "ten records in sequence 0..9"
    assert row[5] == "None", "no open transaction"
