"""kactor and Apache Kafka 4.4 nodes in one cluster (issue #25): the path for moving a running
Kafka cluster to kactor one node at a time. Each case runs real processes of both on loopback,
with a real client producing and consuming through the mixed cluster.

(a) Kafka brokers under a kactor controller quorum: Kafka registers (BrokerRegistration,
    heartbeats), observes the metadata log, and forwards admin requests in an Envelope.
(b) kactor brokers under a Kafka controller: kactor registers, replays Kafka's records and
    forwards admin requests to Kafka's controller listener.
(c) one controller quorum of kactor and Kafka voters: Vote / BeginQuorumEpoch / Fetch across
    implementations; it elects, replicates and survives `kill -9` of its leader.

Kafka 4.4 formats its clusters with share.version 2, streams.version 1 and
eligible.leader.replicas.version 1 finalized; kactor implements none of those behaviours, so
its nodes cannot join such a cluster (the controller refuses the registration with
UNSUPPORTED_VERSION, as Kafka would refuse a broker without them). The Kafka nodes here are
formatted with those features at 0, as a cluster must be before a kactor node joins it
(`kafka-storage format --feature ...`, or `kafka-features downgrade` on a running cluster).

Mixed by construction, these run the same whatever KACTOR_TEST_TARGET says."""
import pytest

from harness.broker import TARGET
from harness.cli import run_tool
from harness.cluster import (Cluster, consume_numbers, create_topic, describe_quorum_v0,
                             failover_bound_s, partition_leaders, produce_and_consume,
                             registered_brokers, segment_bytes, wait_until)

pytestmark = pytest.mark.skipif(TARGET != "kactor", reason="mixes both targets itself")

KAFKA_FEATURES = ("--feature", "share.version=0", "--feature", "streams.version=0",
                  "--feature", "eligible.leader.replicas.version=0")
TIMEOUTS = {"controller.quorum.election.timeout.ms": "1000",
            "controller.quorum.fetch.timeout.ms": "2000"}


def mixed(tmp_path, controllers, brokers, targets):
    c = Cluster(tmp_path, controllers=controllers, brokers=brokers, target="kactor",
                targets=targets, overrides=TIMEOUTS, kafka_format_args=KAFKA_FEATURES)
    return c.start(timeout=180)


def check_topic_across(cluster, topic, partitions=4, records=400):
    """Creates `topic` through the first broker, checks that its partitions are spread over
    every broker and agreed on by all, then produces through the first broker and consumes
    through the last: every record exactly once."""
    brokers = cluster.brokers
    create_topic(brokers[0], topic, partitions)
    leaders = wait_until(lambda: (lambda m: m if m and len(m) == partitions
                                  and min(m.values()) >= 0 else None)(
        partition_leaders(brokers[0], topic)), 30, f"{topic} with leaders")
    assert set(leaders.values()) == {b.node_id for b in brokers}, leaders
    for b in brokers:
        wait_until(lambda: partition_leaders(b, topic) == leaders, 30,
                   f"{b.name} ({b.target}) agrees on {topic}")
    seen = produce_and_consume(brokers[0], brokers[-1], topic, partitions, records)
    assert seen == list(range(records)), f"{len(seen)} records read, {len(set(seen))} distinct"
    return leaders


def test_a_kafka_broker_under_a_kactor_quorum(tmp_path, topic_name):
    # Controllers 1-3: kactor; broker 4: Kafka 4.4; broker 5: kactor.
    cluster = mixed(tmp_path, 3, 2, {4: "kafka"})
    try:
        leader, _, _ = cluster.wait_for_leader(30)
        assert cluster.node(leader).target == "kactor"
        wait_until(lambda: registered_brokers(cluster.brokers[1]) == [4, 5], 60,
                   "the Kafka and the kactor broker registered")
        # Created through the Kafka broker: an Envelope to the kactor controller.
        check_topic_across(cluster, topic_name)
        # DescribeQuorum to the Kafka broker: it forwards it in an Envelope too.
        err, perr, described_leader, _ = describe_quorum_v0(cluster.brokers[0].port)
        assert (err, perr, described_leader) == (0, 0, leader)
        status = run_tool("metadata-quorum", "--bootstrap-server", cluster.brokers[0].bootstrap,
                          "describe", "--status", timeout=60).stdout
        observers = next(x for x in status.splitlines() if x.startswith("CurrentObservers"))
        assert '"id": 4' in observers and '"id": 5' in observers, status
    finally:
        cluster.stop()


def test_b_a_kactor_broker_under_a_kafka_controller(tmp_path, topic_name):
    # Controller 1: Kafka 4.4; broker 2: kactor; broker 3: Kafka 4.4.
    cluster = mixed(tmp_path, 1, 2, {1: "kafka", 3: "kafka"})
    try:
        wait_until(lambda: registered_brokers(cluster.brokers[0]) == [2, 3], 60,
                   "the kactor and the Kafka broker registered")
        # Created through the kactor broker: forwarded to Kafka's controller listener.
        check_topic_across(cluster, topic_name)
    finally:
        cluster.stop()


def test_c_a_mixed_controller_quorum_survives_its_leaders_death(tmp_path, topic_name):
    # Voters 1: kactor, 2 and 3: Kafka 4.4; broker 4: kactor.
    cluster = mixed(tmp_path, 3, 1, {2: "kafka", 3: "kafka"})
    try:
        leader, epoch, _ = cluster.wait_for_leader(30)
        broker = cluster.brokers[0]
        wait_until(lambda: registered_brokers(broker) == [4], 60, "broker 4 registered")
        check_topic_across(cluster, f"{topic_name}-0")
        leaders = [cluster.node(leader).target]
        # Failovers until both implementations have led (elections are random: at most three
        # rounds); the killed leader comes back as a follower and catches up each time.
        rounds = 0
        while rounds < 3 and (rounds == 0 or len(set(leaders)) < 2):
            rounds += 1
            round_ = rounds
            old = cluster.node(leader)
            old.kill9()
            survivors = [n for n in cluster.controllers if n is not old]
            leader, new_epoch, took = cluster.wait_for_leader(
                failover_bound_s(int(TIMEOUTS["controller.quorum.fetch.timeout.ms"]),
                                 int(TIMEOUTS["controller.quorum.election.timeout.ms"])),
                exclude=(old.node_id,), nodes=survivors)
            assert new_epoch > epoch
            epoch = new_epoch
            leaders.append(cluster.node(leader).target)
            print(f"round {round_}: {old.name} ({old.target}) killed; {leader} "
                  f"({cluster.node(leader).target}) leads epoch {epoch} after {took:.1f}s")
            check_topic_across(cluster, f"{topic_name}-{round_}")
            old.start(timeout=120)
            wait_until(lambda: caught_up(broker, old.node_id), 60,
                       f"{old.name} caught up as a follower")
        # Every topic is still there, as every node replays the log both wrote.
        for round_ in range(rounds + 1):
            assert partition_leaders(broker, f"{topic_name}-{round_}") is not None
        print(f"leaders over the test: {leaders}")
    finally:
        cluster.stop()


def caught_up(broker, node_id):
    out = run_tool("metadata-quorum", "--bootstrap-server", broker.bootstrap, "describe",
                   "--replication", timeout=60).stdout
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    voters = [r for r in rows if r[-1] in ("Leader", "Follower")]
    return (any(r[0] == str(node_id) and r[-1] == "Follower" for r in voters)
            and all(r[3] == "0" for r in voters))


def isr_of(node, topic):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (x.leader, sorted(x.isrs)) for p, x in t.partitions.items()}


def test_d_replication_between_kactor_and_kafka_brokers(tmp_path, topic_name):
    """Issue #26: a Kafka 4.4 broker follows a kactor leader and a kactor broker follows a Kafka
    leader, byte for byte; leadership fails over from kactor to Kafka, and the restarted kactor
    broker catches up from the Kafka leader and rejoins the ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic
    # Controller 1: kactor; broker 2: kactor; broker 3: Kafka 4.4.
    cluster = Cluster(tmp_path, controllers=1, brokers=2, target="kactor", targets={3: "kafka"},
                      overrides={**TIMEOUTS, "broker.session.timeout.ms": "4000",
                                 "broker.heartbeat.interval.ms": "500"},
                      kafka_format_args=KAFKA_FEATURES).start(timeout=180)
    try:
        kactor_b, kafka_b = cluster.brokers
        assert (kactor_b.target, kafka_b.target) == ("kactor", "kafka")
        wait_until(lambda: registered_brokers(kactor_b) == [2, 3], 60, "both brokers registered")
        admin = AdminClient({"bootstrap.servers": kactor_b.bootstrap})  # held until done
        # Partition 0 led by kactor (Kafka follows), partition 1 led by Kafka (kactor follows).
        admin.create_topics([NewTopic(topic_name, num_partitions=2,
                                      replica_assignment=[[2, 3], [3, 2]])],
                            operation_timeout=30)[topic_name].result(30)
        in_sync = {0: (2, [2, 3]), 1: (3, [2, 3])}
        wait_until(lambda: isr_of(kactor_b, topic_name) == in_sync, 60, "both in every ISR")
        seen = produce_and_consume(kactor_b, kafka_b, topic_name, 2, 2000)
        assert seen == list(range(2000))
        for p in (0, 1):
            wait_until(lambda: segment_bytes(kactor_b, topic_name, p) ==
                       segment_bytes(kafka_b, topic_name, p) != b"", 30,
                       f"partition {p}: the kactor and the Kafka replica hold the same bytes")

        # kill -9 the kactor broker: Kafka leads both, writes go on.
        kactor_b.kill9()
        wait_until(lambda: isr_of(kafka_b, topic_name) == {0: (3, [3]), 1: (3, [3])}, 60,
                   "Kafka leads both partitions alone")
        from confluent_kafka import Producer
        prod = Producer({"bootstrap.servers": kafka_b.bootstrap, "acks": "all"})
        errors = []
        for i in range(2000, 3000):
            prod.produce(topic_name, value=b"%d" % i, partition=i % 2,
                         on_delivery=lambda e, m: errors.append(e) if e else None)
        assert prod.flush(30) == 0 and not errors, errors[:3]
        assert consume_numbers(kafka_b, topic_name, 2, 3000) == list(range(3000))
        # The kactor broker comes back, follows the Kafka leader and rejoins both ISRs.
        kactor_b.start(timeout=120)
        wait_until(lambda: isr_of(kafka_b, topic_name) == {0: (3, [2, 3]), 1: (3, [2, 3])},
                   60, "kactor back in both ISRs")
        for p in (0, 1):
            wait_until(lambda: segment_bytes(kactor_b, topic_name, p) ==
                       segment_bytes(kafka_b, topic_name, p), 30,
                       f"partition {p}: kactor caught up byte for byte")
    finally:
        cluster.stop()
