"""Small helpers over confluent-kafka (librdkafka) shared by the suites."""
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker, name, partitions=1, config=None, timeout=30):
    """CreateTopics via the AdminClient; waits until Metadata shows every partition with a
    leader so producers don't race the broker's own metadata propagation."""
    a = admin(broker)
    futs = a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                     config=dict(config or {}))], operation_timeout=timeout)
    futs[name].result(timeout)
    wait_topic(broker, name, partitions, timeout)
    return name


def wait_topic(broker, name, partitions=1, timeout=30):
    a = admin(broker)
    deadline = time.monotonic() + timeout
    while True:
        md = a.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values())):
            return md
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} not ready: {t and t.error}")
        time.sleep(0.2)


def consume_all(broker, topic, expected, partition=0, timeout=30, extra=None):
    """Read `expected` messages from `topic`/`partition` from the beginning, without a group
    (assign, no commits). Returns confluent Message objects in offset order."""
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": "kactor-tests-unused",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    conf.update(extra or {})
    c = Consumer(conf)
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
        return out
    finally:
        c.close()


def poll_values(consumer, count, timeout=60):
    """Polls a subscribed consumer until `count` values (decoded) or `timeout` seconds; a
    message carrying an error fails the test."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append(m.value().decode())
    return got


def topic_config(broker, topic, key):
    from confluent_kafka.admin import ConfigResource
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    a = admin(broker)  # the futures fail if the client handle is collected first
    cfg = a.describe_configs([res])[res].result(30)
    return cfg[key].value
