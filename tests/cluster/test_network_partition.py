"""A network partition cuts a partition leader off (issue #26's namespace evidence).

A controller and three brokers run each in a network namespace of its own with its own address
(tests/harness/netns.py). A topic with three replicas and `min.insync.replicas=2` takes acks=all
writes; then the leader's link goes down. A producer inside the leader's namespace (the only
place that still reaches it) keeps writing with acks=all: the leader appends, but nothing is
acknowledged, since its followers cannot fetch and the controller cannot be asked to shrink
the ISR. Meanwhile the controller fences the silent broker and elects a follower, which takes
and acknowledges writes from outside. After the heal the old leader follows again, truncating
what only it had. Stopped cleanly, the three replicas' segment files hold the same records at
the same offsets with the same epochs, every acknowledged record once, and none of the
records only the cut-off leader took. Kafka 4.4 runs the same (KACTOR_TEST_TARGET=kafka).

Needs root for namespaces; the test is skipped, saying why, where the machine does not allow
them."""
import json
import sys
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import schema_codec as sc
from harness.cluster import Cluster, segment_bytes, wait_until
from harness.cluster import leader_and_isr as state
from harness.netns import NetnsTopology, netns_node_class

OVERRIDES = {
    "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
}

# Runs in the cut-off leader's namespace: acks=all writes, and what each one got.
INSIDE_PRODUCER = """
import json, sys
from confluent_kafka import Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
              "retries": 0, "message.timeout.ms": 8000, "linger.ms": 0})
out = []
for i in range(n):
    p.produce(topic, b"cut-%d" % i, partition=0,
              on_delivery=lambda e, m: out.append(None if e is None else e.name()))
    p.poll(0)
p.flush(20)
print(json.dumps(out))
"""


def produce(node, topic, values):
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 30000})
    errors = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, m: errors.append(e))
        p.poll(0)
    p.flush(40)
    assert errors == [None] * len(values), errors


def replica_records(node, topic, live=False):
    """(offset, leader epoch, value) of every record in the replica's segment files. `live`:
    the node is running, so a batch being written may be cut short; it is skipped."""
    out = []
    for b in sc.decode_record_batches(segment_bytes(node, topic)):
        if live and "partial" in b:
            continue
        assert "records" in b, f"{node.name}: a batch the checker cannot read: {b}"
        for r in b["records"]:
            out.append((b["baseOffset"] + r["offsetDelta"], b["partitionLeaderEpoch"],
                        r["value"]))
    return out


def test_a_cut_off_leader_acknowledges_nothing_and_no_replica_diverges(tmp_path, topic_name):
    ok, why = NetnsTopology.available()
    if not ok:
        pytest.skip(f"network namespaces are not available here: {why}")
    topo = NetnsTopology()
    cluster = None
    try:
        cluster = Cluster(tmp_path, controllers=1, brokers=3, overrides=OVERRIDES,
                          node_class=netns_node_class(topo)).start(timeout=180)
        topic = topic_name
        leader, b3, b4 = cluster.node(2), cluster.node(3), cluster.node(4)
        admin = AdminClient({"bootstrap.servers": b3.bootstrap})  # alive until the result
        admin.create_topics([NewTopic(
            topic, num_partitions=1, replica_assignment=[[2, 3, 4]],
            config={"min.insync.replicas": "2"})])[topic].result(30)
        wait_until(lambda: state(b3, topic) == (2, [2, 3, 4]) or None, 60, "all in sync")
        before = [b"before-%d" % i for i in range(30)]
        produce(leader, topic, before)

        topo.isolate(leader.node_id)
        inside = {}

        def write_inside():
            out = topo.run_inside(leader.node_id, [sys.executable, "-c", INSIDE_PRODUCER,
                                                   leader.bootstrap, topic, "20"], timeout=60)
            inside["stdout"], inside["stderr"] = out.stdout, out.stderr

        writer = threading.Thread(target=write_inside)
        writer.start()
        # The majority side: the controller fences broker 2 and elects 3 or 4.
        new = wait_until(lambda: (lambda s: s if s and s[0] in (3, 4) else None)(
            state(b3, topic)), 60, "a new leader on the majority side")
        assert new[1] == [3, 4], new
        after = [b"after-%d" % i for i in range(30)]
        produce(b3, topic, after)
        writer.join(70)
        assert not writer.is_alive()
        results = json.loads(inside["stdout"].strip().splitlines()[-1]) if inside["stdout"] \
            else None
        assert results is not None and len(results) == 20, inside
        print("inside the cut-off namespace:", sorted(set(results)))
        assert all(r is not None for r in results), f"the cut-off leader acknowledged: {results}"

        # The cut-off leader did append them: the heal has something to truncate.
        assert [v for _, _, v in replica_records(leader, topic, live=True)
                if v.startswith(b"cut-")], "the cut-off leader appended nothing"

        topo.heal(leader.node_id)
        wait_until(lambda: (lambda s: s if s and s[1] == [2, 3, 4] else None)(
            state(b3, topic)), 90, "broker 2 back in the ISR")
        produce(b4, topic, [b"healed"])
        wait_until(lambda: (lambda s: s if s and s[1] == [2, 3, 4] else None)(
            state(b3, topic)), 60, "all in sync after the last write")
        cluster.stop()

        logs = {n.name: replica_records(n, topic) for n in (leader, b3, b4)}
        first = logs[leader.name]
        print("records per replica:", {k: len(v) for k, v in logs.items()},
              "epochs:", sorted({e for _, e, _ in first}))
        for name, records in logs.items():
            assert records == first, f"{name} diverged from {leader.name}"
        values = [v for _, _, v in first]
        acknowledged = before + after + [b"healed"]
        assert sorted(values) == sorted(acknowledged), \
            f"lost {set(acknowledged) - set(values)}, extra {set(values) - set(acknowledged)}"
        assert values[:30] == before
        assert [o for o, _, _ in first] == list(range(len(first)))
        assert not [v for v in values if v.startswith(b"cut-")]
    finally:
        if cluster is not None:
            cluster.stop()
        topo.close()
