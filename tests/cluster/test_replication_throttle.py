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
from test_replica_fetch_sessions import SpiedNode

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


def test_a_held_back_follower_waits_out_its_long_poll(tmp_path, topic_name):
    """Only the leader's throttle (`leader.replication.throttled.rate` on broker 2, the
    partition's leader replica throttled): while the quota is exceeded the leader answers the
    catching-up follower's fetch with nothing, and that fetch waits out
    replica.fetch.wait.max.ms (500 ms) even though a producer appends to the partition every
    20 ms. A held-back partition gives the long poll nothing to wait for; waking the fetch on
    each append would answer it empty 50 times a second. Counted on the wire by a proxy in
    front of the leader."""
    cluster = Cluster(tmp_path, controllers=1, brokers=2, overrides=OVERRIDES,
                      node_class=SpiedNode).start(timeout=180)
    try:
        two = cluster.node(2)
        a = AdminClient({"bootstrap.servers": two.bootstrap})  # alive until the result
        a.create_topics([NewTopic(topic_name, num_partitions=1, replica_assignment=[[2]])])[
            topic_name].result(30)
        fill(two, topic_name)
        run_tool("configs", "--bootstrap-server", two.bootstrap, "--alter", "--entity-type",
                 "brokers", "--entity-name", "2", "--add-config",
                 f"leader.replication.throttled.rate={RATE}")
        run_tool("configs", "--bootstrap-server", two.bootstrap, "--alter", "--entity-type",
                 "topics", "--entity-name", topic_name, "--add-config",
                 "leader.replication.throttled.replicas=[0:2]")
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [2, 3]}]}))
        run_tool("reassign-partitions", "--bootstrap-server", two.bootstrap,
                 "--reassignment-json-file", str(plan), "--execute")
        # The first megabyte or so passes before the rate over the window exceeds the quota.
        time.sleep(2)
        p = Producer({"bootstrap.servers": two.bootstrap, "acks": "1", "linger.ms": 0})
        window = 4.0
        started = time.monotonic()
        while time.monotonic() < started + window:
            p.produce(topic_name, b"x" * 100, partition=0)
            p.poll(0)
            time.sleep(0.02)
        ended = time.monotonic()
        assert p.flush(30) == 0
        fetches = [f for f in two.spy.replica_fetches(since=started)
                   if f["replica"] == 3 and f["at"] <= ended]
        assert leader_and_isr(two, topic_name)[1] == [2], "the copy ended before the window"
        print(f"follower fetches in {window} s of appends every 20 ms: {len(fetches)}")
        # The follower fetched all along (the proxy saw it) ...
        assert len(fetches) >= window / 0.5 / 2, f"only {len(fetches)} follower fetches seen"
        # ... but each of its fetches waited out its long poll.
        assert len(fetches) <= window / 0.5 + 4, \
            f"{len(fetches)} follower fetches in {window} s: woken by appends it may not read"
    finally:
        cluster.stop()
        for n in cluster.nodes:
            if n.spy:
                n.spy.close()
