"""Controllers and brokers as separate processes (issue #25): three `process.roles=controller`
nodes form the quorum, three `process.roles=broker` nodes register with it, replicate the
metadata log as observers, host the partitions the controller places on them, and forward admin
writes to the active controller. `kill -9` of the active controller under a CreateTopics /
IncrementalAlterConfigs load loses no acknowledged change.

Kafka 4.4 runs the same layout from its jars (KACTOR_TEST_TARGET=kafka)."""
import threading
import time

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from harness.cli import run_tool
from harness.cluster import (Cluster, admin, consume_numbers, create_topic, failover_bound_s,
                             partition_leaders, produce_and_consume, registered_brokers,
                             topic_config, topic_names, wait_until)

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
LOAD_SECONDS = 12


def retention_ms(node, topic):
    return int(topic_config(node, topic, "retention.ms"))


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, controllers=3, brokers=3, overrides={
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
    }).start(timeout=180)
    yield c
    c.stop()


def test_brokers_register_host_partitions_and_serve_clients(cluster, topic_name):
    leader, _, _ = cluster.wait_for_leader(30)
    assert leader in (1, 2, 3)
    brokers = cluster.brokers
    wait_until(lambda: registered_brokers(brokers[0]) == [4, 5, 6],
               60, "brokers 4, 5, 6 registered and unfenced")

    # The quorum through a broker: three voters, and the brokers as observers.
    status = run_tool("metadata-quorum", "--bootstrap-server", brokers[0].bootstrap, "describe",
                      "--status", timeout=60).stdout
    assert f"LeaderId:               {leader}" in status, status
    voters = next(line for line in status.splitlines() if line.startswith("CurrentVoters"))
    observers = next(line for line in status.splitlines() if line.startswith("CurrentObservers"))
    assert all(f'"id": {i}' in voters for i in (1, 2, 3)), status
    assert all(f'"id": {i}' in observers for i in (4, 5, 6)), status
    out = wait_until(
        lambda: (lambda o: o if all(f"{i} " in o for i in (4, 5, 6)) else None)(
            run_tool("metadata-quorum", "--bootstrap-server", brokers[1].bootstrap, "describe",
                     "--replication", timeout=60).stdout),
        30, "observers in --replication")
    rows = {int(r.split()[0]): r.split()[-1] for r in out.strip().splitlines()[1:]}
    assert rows[leader] == "Leader", out
    assert {rows[i] for i in (4, 5, 6)} == {"Observer"}, out

    # A topic created through a broker is placed on all three, each hosting its own partitions.
    create_topic(brokers[2], topic_name, 6)
    leaders = wait_until(lambda: (lambda m: m if m and len(m) == 6 and min(m.values()) >= 0
                                  else None)(partition_leaders(brokers[0], topic_name)),
                         30, "six partitions with leaders")
    assert set(leaders.values()) == {4, 5, 6}, leaders
    for b in brokers:
        wait_until(lambda: partition_leaders(b, topic_name) == leaders, 15,
                   f"{b.name} agrees on the leaders")
        # Metadata may run ahead of the log's creation by a moment (Kafka's does).
        mine = {p for p, lead in leaders.items() if lead == b.node_id}
        wait_until(lambda: all(b.partition_dir(topic_name, p).exists() for p in mine), 15,
                   f"{b.name} hosts {sorted(mine)}")
        assert not any(b.partition_dir(topic_name, p).exists() for p in set(leaders) - mine)

    # A real client produces through one broker and reads every record back through another.
    seen = produce_and_consume(brokers[0], brokers[2], topic_name, 6, 600)
    assert seen == list(range(600))

    # A producer to a topic nobody created: the broker has the active controller create it
    # (auto.create.topics.enable, num.partitions 1), as Kafka's brokers do.
    auto = f"{topic_name}-auto"
    assert produce_and_consume(brokers[1], brokers[0], auto, 1, 50) == list(range(50))

    # `kafka-cluster unregister` through a broker reaches the active controller (UnregisterBroker
    # is forwarded like the other admin writes).
    brokers[2].stop()
    out = run_tool("cluster", "unregister", "--bootstrap-server", brokers[0].bootstrap,
                   "--id", "6", timeout=60)
    assert out.stdout.strip() == "Broker 6 is no longer registered.", out.stdout


def test_kill9_of_the_active_controller_under_admin_load(cluster, topic_name):
    leader, epoch, _ = cluster.wait_for_leader(30)
    brokers = cluster.brokers
    wait_until(lambda: registered_brokers(brokers[0]) == [4, 5, 6],
               60, "brokers registered")
    create_topic(brokers[0], topic_name)

    # Load: topics created one after another, and retention.ms of one topic raised step by
    # step, both through the brokers; only answers without error count as acknowledged.
    created, altered, stop = [], [], threading.Event()
    clients = [admin(b) for b in brokers]

    def create_loop():
        i = 0
        while not stop.is_set() and i < 2000:
            name = f"{topic_name}-load-{i}"
            try:
                clients[i % 3].create_topics(
                    [NewTopic(name, num_partitions=1, replication_factor=1)],
                    operation_timeout=10, request_timeout=15)[name].result(20)
                created.append(name)
            except Exception:  # noqa: BLE001 - not acknowledged: may or may not exist
                pass
            i += 1

    def alter_loop():
        i = 0
        while not stop.is_set() and i < 2000:
            value = 1_000_000 + i
            res = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
                ConfigEntry("retention.ms", str(value),
                            incremental_operation=AlterConfigOpType.SET)])
            try:
                clients[(i + 1) % 3].incremental_alter_configs(
                    [res], request_timeout=15)[res].result(20)
                altered.append(value)
            except Exception:  # noqa: BLE001 - not acknowledged
                pass
            i += 1

    threads = [threading.Thread(target=create_loop), threading.Thread(target=alter_loop)]
    for t in threads:
        t.start()
    try:
        time.sleep(LOAD_SECONDS / 3)
        before = (len(created), len(altered))
        old = cluster.node(leader)
        old.kill9()
        survivors = [n for n in cluster.controllers if n is not old]
        new_leader, new_epoch, took = cluster.wait_for_leader(
            failover_bound_s(FETCH_TIMEOUT_MS, ELECTION_TIMEOUT_MS), exclude=(leader,),
            nodes=survivors)
        print(f"new leader {new_leader} (epoch {new_epoch}) {took:.2f}s after kill -9 of "
              f"{leader}; acknowledged before the kill: {before}")
        assert new_epoch > epoch
        time.sleep(2 * LOAD_SECONDS / 3)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert len(created) > before[0] and len(altered) > before[1], \
        "the new leader took admin writes"

    # Every acknowledged change is on every broker.
    for b in brokers:
        wait_until(lambda: not set(created) - topic_names(b), 30,
                   f"every acknowledged topic on {b.name}")
    for b in brokers:
        assert retention_ms(b, topic_name) == altered[-1], b.name

    # The killed controller comes back as a follower and catches up.
    old.start()
    wait_until(
        lambda: (lambda o: o if [line.split()[-1] for line in o.strip().splitlines()[1:]
                                 if line.split()[0] == str(leader)] == ["Follower"]
                 and all(line.split()[3] == "0" for line in o.strip().splitlines()[1:]
                         if line.split()[-1] in ("Leader", "Follower")) else None)(
            run_tool("metadata-quorum", "--bootstrap-server", brokers[0].bootstrap,
                     "describe", "--replication", timeout=60).stdout),
        60, f"controller {leader} caught up as a follower")


def test_kill9_of_a_broker_fences_it_and_its_records_survive(tmp_path, topic_name):
    """A broker killed with -9 is fenced after broker.session.timeout.ms: its partitions have
    no leader (replication factor 1: no other replica may lead) while the other broker's keep
    theirs. Restarted, it registers again, leads its partitions again, and every record
    acknowledged before the kill is read back."""
    cluster = Cluster(tmp_path, controllers=1, brokers=2, overrides={
        "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
    }).start(timeout=180)
    try:
        survivor, victim = cluster.brokers
        create_topic(survivor, topic_name, 4)
        leaders = wait_until(lambda: (lambda m: m if m and min(m.values()) >= 0 else None)(
            partition_leaders(survivor, topic_name)), 30, "leaders")
        assert set(leaders.values()) == {survivor.node_id, victim.node_id}, leaders
        assert produce_and_consume(survivor, victim, topic_name, 4, 200) == list(range(200))

        victim.kill9()
        fenced = wait_until(lambda: (lambda m: m if m and victim.node_id not in m.values()
                                     else None)(partition_leaders(survivor, topic_name)),
                            30, f"{victim.name} fenced")
        assert fenced == {p: (l if l == survivor.node_id else -1) for p, l in leaders.items()}

        victim.start(timeout=120)
        wait_until(lambda: partition_leaders(survivor, topic_name) == leaders, 60,
                   "the restarted broker leads its partitions again")
        # Nothing acknowledged is lost or doubled (the reader asks for more than was written).
        assert consume_numbers(victim, topic_name, 4, 201, timeout=15) == list(range(200))
    finally:
        cluster.stop()
