"""Replica fetchers in incremental fetch sessions (KIP-227, issue #26), seen on the wire.

One controller and three brokers; every broker advertises a proxy in front of its listener,
so followers fetch through it and the proxy decodes each Fetch and its answer (`schemas/`).
A topic of 6 partitions, RF 3, takes acks=all writes. Then, with nothing written:

- every follower fetch is incremental (a session id, an epoch above 0), names no partition
  and is answered with none: the leader keeps each follower's partition set;
- each fetcher connection sends at most one fetch per `replica.fetch.wait.max.ms` (500 ms)
  and a few more: a fetch that the leader answers at once, over and over, is a busy loop.

The topic is then deleted and created again under the same name (new topic id): acks=all
writes to the new topic succeed and the quiet cluster is quiet again (no session keeps the
deleted partitions, whose errors would end every long poll at once). Last, one broker is killed and restarted: its followers'
sessions died with it, they open new ones and the cluster is quiet again.

Kafka 4.4 runs the same cluster (KACTOR_TEST_TARGET=kafka)."""
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import (Cluster, ClusterNode, metadata_topics, partition_states,
                             wait_until)
from harness.proxy import FetchSpy

OVERRIDES = {"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "500"}
PARTITIONS = 6
QUIET_S = 4.0
WAIT_MAX_S = 0.5


class SpiedNode(ClusterNode):
    """A broker whose advertised listener is a FetchSpy in front of its own."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spy = FetchSpy(self.port) if self.is_broker else None

    def base_config(self):
        cfg = super().base_config()
        if self.spy:
            cfg["advertised.listeners"] = f"PLAINTEXT://{self.host}:{self.spy.port}"
        return cfg


def produce(node, topic, count):
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5})
    errors = []
    for i in range(count):
        p.produce(topic, b"v%d" % i, partition=i % PARTITIONS,
                  on_delivery=lambda e, m: errors.append(e))
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == [None] * count, [e for e in errors if e][:3]


def create(node, topic):
    a = AdminClient({"bootstrap.servers": node.bootstrap})
    a.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)


def fully_replicated(node, topic):
    states = partition_states(node, topic)
    return states if states and len(states) == PARTITIONS and all(
        len(isr) == 3 and leader >= 0 for leader, _, isr in states.values()) else None


def settled(cluster):
    """True once every fetcher connection's fetches of the last second named and got no
    partition: the last records are replicated and every follower has heard the high
    watermark they moved (a follower lists a partition again when its high watermark moves,
    since Fetch v18 carries it)."""
    since = time.monotonic() - 2 * WAIT_MAX_S - 0.2
    recent = [f for n in cluster.brokers for f in n.spy.replica_fetches(since=since)]
    return bool(recent) and all(f["listed"] == 0 and f["answered"] == 0 for f in recent)


def quiet_window(cluster):
    """The follower fetches every spy saw during QUIET_S seconds with nothing written."""
    wait_until(lambda: settled(cluster), 20, "follower fetches with nothing to say")
    started = time.monotonic()
    time.sleep(QUIET_S)
    return {n.node_id: [f for f in n.spy.replica_fetches(since=started)
                        if f["at"] <= started + QUIET_S]
            for n in cluster.brokers}


def assert_quiet(window, connections_at_least=6):
    connections = 0
    for leader, fetches in window.items():
        for f in fetches:
            assert f["error"] == 0, (leader, f)
            assert f["session_id"] != 0 and f["epoch"] > 0, \
                f"a follower fetch from broker {f['replica']} to {leader} is not incremental: {f}"
            assert f["listed"] == 0 and f["answered"] == 0, \
                f"a quiet follower fetch to {leader} named or got partitions: {f}"
        per_conn = {}
        for f in fetches:
            per_conn[f["conn"]] = per_conn.get(f["conn"], 0) + 1
        connections += len(per_conn)
        bound = QUIET_S / WAIT_MAX_S + 3
        assert all(n <= bound for n in per_conn.values()), \
            f"follower fetches to broker {leader} in {QUIET_S} s: {per_conn} (bound {bound})"
    # Each fetcher connection was seen (with leaders spread, every broker fetches from both
    # others).
    assert connections >= connections_at_least, window


def test_followers_fetch_in_incremental_sessions(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides=OVERRIDES,
                      node_class=SpiedNode).start(timeout=180)
    try:
        node = cluster.brokers[0]
        create(node, topic_name)
        wait_until(lambda: fully_replicated(node, topic_name), 60, "the topic fully replicated")
        produce(node, topic_name, 600)
        assert_quiet(quiet_window(cluster))

        # The same name, a new topic id. A leader whose sessions kept the deleted partitions
        # would answer their errors to every follower fetch at once: the quiet window after the
        # re-creation checks that none does.
        a = AdminClient({"bootstrap.servers": node.bootstrap})
        a.delete_topics([topic_name])[topic_name].result(30)
        # Asked for all topics: a Metadata request naming the topic would create it again
        # (auto.create.topics.enable).
        wait_until(lambda: topic_name not in metadata_topics(node.port) or None, 60,
                   "the topic deleted")
        create(node, topic_name)
        wait_until(lambda: fully_replicated(node, topic_name), 60,
                   "the re-created topic fully replicated")
        produce(node, topic_name, 300)
        assert_quiet(quiet_window(cluster))

        # A leader process dies: its sessions with it.
        victim = cluster.brokers[1]
        victim.kill9()
        victim.start()
        wait_until(lambda: fully_replicated(node, topic_name), 90,
                   "every replica back in sync after the restart")
        produce(node, topic_name, 300)
        # The restarted broker leads nothing now: it fetches from both others, they from each
        # other.
        assert_quiet(quiet_window(cluster), connections_at_least=4)
    finally:
        cluster.stop()
        for n in cluster.nodes:
            if n.spy:
                n.spy.close()
