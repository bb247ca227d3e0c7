"""A second broker pointed at a running broker's data dir is refused before it touches anything
(Kafka's `.lock` in every log dir and the metadata dir), and the first broker keeps serving
with its files intact."""
import os
import time

import pytest
from confluent_kafka import Producer

from harness.broker import Broker, BrokerError
from harness.clients import consume_all, create_topic


def _produce(broker, topic, values):
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, v.encode())
    assert p.flush(30) == 0


def _files(dir_):
    """Every file under the data dir with its size and modification time."""
    out = {}
    for root, _, names in os.walk(dir_):
        for n in names:
            p = os.path.join(root, n)
            st = os.stat(p)
            out[os.path.relpath(p, dir_)] = (st.st_size, st.st_mtime_ns)
    return out


def test_second_broker_on_the_same_data_dir_is_refused(broker_factory, tmp_path, topic_name,
                                                        target):
    first = broker_factory(name="first")
    create_topic(first, topic_name)
    _produce(first, topic_name, [f"a{i}" for i in range(20)])
    partition_dir = first.partition_dir(topic_name, 0)
    before = _files(partition_dir)

    second = Broker(tmp_path / "second", name="second")
    second.data_dir = first.data_dir
    second.cluster_id = first.cluster_id
    second._formatted = True  # the dir is formatted already: Kafka's format would be a no-op
    t0 = time.monotonic()
    with pytest.raises(BrokerError):
        second.start(timeout=120)
    assert time.monotonic() - t0 < 120
    log = second.log_text()
    if target == "kactor":
        assert "failed to acquire the lock" in log and str(first.data_dir) in log, log[-2000:]
    else:
        assert "Failed to acquire lock" in log, log[-2000:]

    # Nothing the first broker owns was written by the second: no clean-shutdown marker, no
    # rebuilt or truncated index. (The metadata log and the checkpoints are the first broker's
    # own to write meanwhile; the quiet partition's files are not.)
    assert not os.path.exists(os.path.join(first.data_dir, ".kafka_cleanshutdown"))
    assert _files(partition_dir) == before

    # The first broker still takes writes and serves everything it acknowledged.
    _produce(first, topic_name, [f"b{i}" for i in range(20)])
    got = [m.value().decode() for m in consume_all(first, topic_name, 40)]
    assert got == [f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)]
    assert first.is_running()
