"""Replication throttles (KIP-73, issue #26 item 4): `kafka-reassign-partitions --throttle`
bounds how fast a new replica copies the log.

One controller and two brokers; a topic on broker 2 alone holds 2 MB. The partition is
reassigned to [2, 3] twice over, once unthrottled and once with `--throttle 100000` (100 kB/s,
which the tool sets as `leader/follower.replication.throttled.rate` on both brokers, with the
topic's `*.replication.throttled.replicas`). Copying 2 MB takes well under a second
unthrottled. Throttled, a rate measured over 11 one-second windows lets about the first
megabyte through (the rate is taken over at least 10 s) and the rest at 100 kB/s, so the copy
cannot finish within 5 s; it finishes, the ISR grows and `--verify` clears the throttles.
Kafka 4.4 runs the same cluster (KACTOR_TEST_TARGET=kafka)."""
import json
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cli import run_tool
from harness.cluster import Cluster, leader_and_isr, wait_until

OVERRIDES = {"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "500"}
RATE = 100_000
RECORD = 10_000
COUNT = 200


def fill(node, topic):
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "1", "linger.ms": 5,
                  "compression.type": "none"})
    errors = []
    for i in range(COUNT):
        p.produce(topic, (b"%06d" % i) * (RECORD // 6), partition=0,
                  on_delivery=lambda e, m: errors.append(e))
        p.poll(0)
    p.flush(60)
    assert errors == [None] * COUNT, [e for e in errors if e][:3]


def reassign(tmp_path, node, topic, throttle=None):
    """Moves `topic`-0 from [2] to [2, 3]; returns the seconds until broker 3 was in sync."""
    plan = tmp_path / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3]}]}))
    args = ["--bootstrap-server", node.bootstrap, "--reassignment-json-file", str(plan)]
    started = time.monotonic()
    out = run_tool("reassign-partitions", *args, "--execute",
                   *(["--throttle", str(throttle)] if throttle else []))
    assert "Successfully started partition reassignment" in out.stdout, out.stdout
    wait_until(lambda: (leader_and_isr(node, topic) or (None, None))[1] == [2, 3] or None, 120,
               "broker 3 in sync")
    elapsed = time.monotonic() - started

    def completed():
        v = run_tool("reassign-partitions", *args, "--verify").stdout
        return v if f"Reassignment of partition {topic}-0 is completed" in v else None
    verified = wait_until(completed, 60, "the reassignment completed")
    if throttle:
        assert "Clearing broker-level throttles" in verified, verified
    return elapsed


def test_a_throttled_reassignment_copies_no_faster_than_its_throttle(tmp_path, topic_name):
    cluster = Cluster(tmp_path, controllers=1, brokers=2, overrides=OVERRIDES).start(timeout=180)
    try:
        two = cluster.node(2)
        a = AdminClient({"bootstrap.servers": two.bootstrap})  # alive until the result
        fast, slow = f"{topic_name}-free", f"{topic_name}-throttled"
        for t in (fast, slow):
            a.create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[2]])])[t] \
                .result(30)
            fill(two, t)

        unthrottled = reassign(tmp_path, two, fast)
        throttled = reassign(tmp_path, two, slow, throttle=RATE)
        print(f"2 MB copied: unthrottled {unthrottled:.1f} s, at {RATE} B/s {throttled:.1f} s")
        assert throttled >= 5, f"throttled to {RATE} B/s, 2 MB took only {throttled:.1f} s"
        # The throttles are gone again, and the copies are whole.
        configs = run_tool("configs", "--bootstrap-server", two.bootstrap, "--describe",
                           "--entity-type", "brokers", "--entity-name", "3").stdout
        assert "throttled.rate" not in configs, configs
    finally:
        cluster.stop()
