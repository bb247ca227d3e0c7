"""min.insync.replicas above the replication factor (issue #26 review): Kafka caps the minimum
by the number of replicas (`effectiveMinIsr`), so a one-replica topic under a broker or topic
minimum of 2 or 3 still takes acks=all writes. The shipped config/broker.properties sets
min.insync.replicas=2, so every replication-factor-1 topic depends on this."""
from confluent_kafka import Producer

from harness.clients import create_topic


def test_acks_all_on_one_replica_with_a_higher_minimum(broker, topic_name):
    create_topic(broker, topic_name, config={"min.insync.replicas": "3"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                  "message.timeout.ms": 10000})
    results = []
    for i in range(10):
        p.produce(topic_name, value=b"%d" % i, on_delivery=lambda e, m: results.append(e))
    assert p.flush(20) == 0
    assert results == [None] * 10, results
