"""Dynamic KRaft quorums (KIP-853) with separate controller and broker processes, driven by the
real `kafka-metadata-quorum` tool and raw AddRaftVoter / RemoveRaftVoter requests:

- one controller formatted `--standalone` and a broker, two controllers formatted
  `--no-initial-controllers` that start later as observers and join with `add-controller`;
  the three voters replicate, elect a new leader when the leader is killed, and shrink to two
  with `remove-controller`;
- with `controller.quorum.auto.join.enable`, the two `--no-initial-controllers` controllers
  become voters by themselves;
- three controllers formatted with one `--initial-controllers` list elect a leader and
  describe their directory ids;
- bad voter changes get Kafka 4.4's error codes: DUPLICATE_VOTER (126), VOTER_NOT_FOUND (127),
  NOT_LEADER_OR_FOLLOWER (6) at a follower controller, INCONSISTENT_CLUSTER_ID (104),
  INVALID_REQUEST (42); a broker forwards both requests to the active controller.

Every node names the controllers with `controller.quorum.bootstrap.servers`, none with
`controller.quorum.voters`. Kafka 4.4 runs the same tests (KACTOR_TEST_TARGET=kafka)."""
import json
import socket
import struct

import pytest

from harness import schema_codec as sc
from harness.cli import run_tool
from harness.cluster import (Cluster, ClusterNode, create_topic, failover_bound_s, produce_and_consume,
                             random_directory_id, wait_until)

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
OVERRIDES = {
    "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
    "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
}
API_ADD_RAFT_VOTER = 80
API_REMOVE_RAFT_VOTER = 81
SCHEMAS = sc.Schemas.from_dir()


def quorum(controller, *args, config=None, check=True):
    """kafka-metadata-quorum against one controller listener (--bootstrap-controller)."""
    opts = ["--bootstrap-controller", f"{controller.host}:{controller.controller_port}"]
    if config is not None:
        opts += ["--command-config", str(config)]
    return run_tool("metadata-quorum", *opts, *args, timeout=60, check=check)


def status(controller):
    """(leader id, voters, observers) from `describe --status`: voters as {id: (directory id,
    endpoints)}, observers as the set of their ids."""
    out = quorum(controller, "describe", "--status").stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    voters = {v["id"]: (v["directoryId"], v.get("endpoints"))
              for v in json.loads(fields["CurrentVoters"])}
    observers = {o["id"] for o in json.loads(fields["CurrentObservers"])}
    return int(fields["LeaderId"]), voters, observers


def replication(controller):
    """Node id -> (directory id, status) from `describe --replication`."""
    out = quorum(controller, "describe", "--replication").stdout
    rows = [line.split() for line in out.strip().splitlines()]
    assert rows[0][:2] == ["NodeId", "DirectoryId"] and rows[0][-1] == "Status", out
    return {int(r[0]): (r[1], r[-1]) for r in rows[1:]}


def endpoint(node):
    return [f"CONTROLLER://{node.host}:{node.controller_port}"]


def roundtrip(port, api_key, version, body):
    """One raw request on a fresh connection; the decoded response body."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(sc.encode_request(SCHEMAS, api_key, version, body, 7))
        head = s.recv(4, socket.MSG_WAITALL)
        payload = s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    return sc.decode_response(SCHEMAS, api_key, version, payload)[1]


def add_voter(port, node, directory_id=None, cluster_id=None, listener="CONTROLLER"):
    """AddRaftVoter v1 (what Kafka 4.4's Admin sends) for `node`'s controller listener."""
    return roundtrip(port, API_ADD_RAFT_VOTER, 1, {
        "ClusterId": cluster_id, "TimeoutMs": 30000, "VoterId": node.node_id,
        "VoterDirectoryId": sc.Uuid(directory_id or node.directory_id()),
        "Listeners": [{"Name": listener, "Host": node.host, "Port": node.controller_port}],
        "AckWhenCommitted": True})


def remove_voter(port, voter_id, directory_id, cluster_id=None):
    return roundtrip(port, API_REMOVE_RAFT_VOTER, 0, {
        "ClusterId": cluster_id, "VoterId": voter_id, "VoterDirectoryId": sc.Uuid(directory_id)})


@pytest.fixture
def standalone(tmp_path):
    """Controller 1 formatted --standalone and broker 4 running; controllers 2 and 3
    formatted --no-initial-controllers, not started."""
    c = Cluster(tmp_path, controllers=3, brokers=1, dynamic=True, overrides=OVERRIDES,
                format_args={1: ["--standalone"], 2: ["--no-initial-controllers"],
                             3: ["--no-initial-controllers"]},
                deferred=(2, 3)).start()
    yield c
    c.stop()


def test_standalone_grows_to_three_voters_fails_over_and_shrinks(standalone, topic_name):
    c = standalone
    c1, broker = c.node(1), c.node(4)
    leader, epoch, _ = c.wait_for_leader(30)
    assert leader == 1
    assert status(c1)[1] == {1: (c1.directory_id(), endpoint(c1))}

    # Two controllers join as observers, then become voters one at a time.
    c.start(nodes=(2, 3))
    wait_until(lambda: {2, 3, 4} <= status(c1)[2], 30, "controllers 2 and 3 observe")
    for n in (c.node(2), c.node(3)):
        out = quorum(c1, "add-controller", config=n.config_path).stdout
        assert out.strip() == (f"Added controller {n.node_id} with directory id "
                               f"{n.directory_id()} and endpoints: {endpoint(n)[0]}"), out
    leader_id, voters, observers = status(c1)
    assert leader_id == 1 and voters == {n.node_id: (n.directory_id(), endpoint(n))
                                         for n in c.controllers}, voters
    assert observers == {4}, observers
    rows = wait_until(
        lambda: (lambda r: r if [r[i][1] for i in (1, 2, 3, 4)]
                 == ["Leader", "Follower", "Follower", "Observer"] else None)(replication(c1)),
        30, "1 leads, 2 and 3 follow, 4 observes")
    assert {i: d for i, (d, _) in rows.items()} == {n.node_id: n.directory_id()
                                                     for n in c.nodes}, rows

    # The broker serves topics through the three-voter quorum.
    create_topic(broker, f"{topic_name}-a")
    assert produce_and_consume(broker, broker, f"{topic_name}-a", 1, 20) == list(range(20))

    # kill -9 of the leader: 2 and 3 elect one of themselves; writes go on.
    c1.kill9()
    survivors = [c.node(2), c.node(3)]
    new_leader, new_epoch, took = c.wait_for_leader(
        failover_bound_s(FETCH_TIMEOUT_MS, ELECTION_TIMEOUT_MS), exclude=(1,), nodes=survivors)
    assert new_leader in (2, 3) and new_epoch > epoch
    print(f"new leader {new_leader} (epoch {new_epoch}) {took:.1f}s after kill -9 of 1")
    create_topic(broker, f"{topic_name}-b")
    assert produce_and_consume(broker, broker, f"{topic_name}-b", 1, 20) == list(range(20))

    # The dead controller 1 (not the leader) leaves the voter set: two voters remain, and
    # they still commit.
    lead = c.node(new_leader)
    other = next(n for n in survivors if n is not lead)
    out = quorum(lead, "remove-controller", "--controller-id", "1",
                 "--controller-directory-id", c1.directory_id()).stdout
    assert out.strip() == f"Removed KRaft controller 1 with directory id {c1.directory_id()}"
    leader_id, voters, _ = status(lead)
    assert leader_id == new_leader
    assert voters == {n.node_id: (n.directory_id(), endpoint(n)) for n in survivors}, voters
    rows = replication(other)
    assert rows[new_leader][1] == "Leader" and rows[other.node_id][1] == "Follower", rows
    create_topic(broker, f"{topic_name}-c")
    assert produce_and_consume(broker, broker, f"{topic_name}-c", 1, 5) == list(range(5))


class AutoJoinNode(ClusterNode):
    """Controllers with `controller.quorum.auto.join.enable` (a broker refuses to start with
    it, on both targets)."""

    def base_config(self):
        cfg = super().base_config()
        if self.is_controller:
            cfg["controller.quorum.auto.join.enable"] = "true"
        return cfg


def test_controllers_join_by_themselves_with_auto_join(tmp_path, topic_name):
    c = Cluster(tmp_path, controllers=3, brokers=1, dynamic=True, overrides=OVERRIDES,
                node_class=AutoJoinNode,
                format_args={1: ["--standalone"], 2: ["--no-initial-controllers"],
                             3: ["--no-initial-controllers"]}).start()
    try:
        c1, broker = c.node(1), c.node(4)
        assert c.wait_for_leader(30)[0] == 1
        # Each asks the leader once per fetch timeout; the leader adds one at a time.
        want = {n.node_id: (n.directory_id(), endpoint(n)) for n in c.controllers}
        wait_until(lambda: status(c1)[1] == want or None, 60, "three voters")
        # The broker never asks: it stays an observer.
        assert status(c1)[2] == {4}
        create_topic(broker, topic_name)
        assert produce_and_consume(broker, broker, topic_name, 1, 10) == list(range(10))
    finally:
        c.stop()


@pytest.fixture(scope="module")
def initial(tmp_path_factory):
    """Controllers 1-3 formatted with one --initial-controllers list, broker 4."""
    c = Cluster(tmp_path_factory.mktemp("initial"), controllers=3, brokers=1, dynamic=True,
                overrides=OVERRIDES)
    c.directory_ids = {n.node_id: random_directory_id() for n in c.controllers}
    for n in c.controllers:
        n.format_args = ("--initial-controllers", c.initial_controllers(c.directory_ids))
    c.start()
    yield c
    c.stop()


def test_initial_controllers_elect_with_their_directory_ids(initial):
    c = initial
    leader, _, _ = c.wait_for_leader(30)
    assert leader in (1, 2, 3)
    for n in c.controllers:
        assert n.directory_id() == c.directory_ids[n.node_id], n.name
    leader_id, voters, _ = status(c.node(leader))
    assert leader_id == leader
    assert voters == {n.node_id: (c.directory_ids[n.node_id], endpoint(n))
                      for n in c.controllers}, voters
    rows = wait_until(
        lambda: (lambda r: r if sorted(s for i, (_, s) in r.items() if i != 4)
                 == ["Follower", "Follower", "Leader"] else None)(replication(c.node(leader))),
        30, "one leader, two followers")
    assert rows[leader][1] == "Leader", rows


def test_bad_voter_changes_get_kafkas_errors(initial):
    c = initial
    leader_id, _, _ = c.wait_for_leader(30)
    leader = c.node(leader_id)
    follower = next(n for n in c.controllers if n is not leader)
    broker = c.node(4)
    dup_prefix = (f"The voter id for ReplicaKey(id={follower.node_id}, directoryId="
                  f"{follower.directory_id()}) is already part of the set of voters [")

    # Adding a voter that already is one: at the leader, and forwarded by a broker.
    for port in (leader.controller_port, broker.port):
        r = add_voter(port, follower)
        assert r["ErrorCode"] == 126 and r["ErrorMessage"].startswith(dup_prefix), (port, r)
    out = quorum(leader, "add-controller", config=follower.config_path, check=False)
    assert out.returncode == 1, out
    assert "org.apache.kafka.common.errors.DuplicateVoterException: " + dup_prefix in out.stderr

    # Removing a voter that is not one: unknown id, or a known id with another directory.
    unknown = random_directory_id()
    for port, voter_id, dir_id in ((leader.controller_port, 7, unknown),
                                   (broker.port, 7, unknown),
                                   (leader.controller_port, follower.node_id, unknown)):
        r = remove_voter(port, voter_id, dir_id)
        assert r["ErrorCode"] == 127, (port, r)
        assert r["ErrorMessage"].startswith(
            f"Cannot remove voter ReplicaKey(id={voter_id}, directoryId={dir_id}) from the set"
            " of voters ["), r
    out = quorum(leader, "remove-controller", "--controller-id", "7",
                 "--controller-directory-id", unknown, check=False)
    assert out.returncode == 1, out
    assert "org.apache.kafka.common.errors.VoterNotFoundException: Cannot remove voter" \
        in out.stderr, out.stderr

    # A follower controller does not take voter changes.
    assert add_voter(follower.controller_port, follower) == {
        "ThrottleTimeMs": 0, "ErrorCode": 6, "ErrorMessage": ""}
    assert remove_voter(follower.controller_port, 7, unknown) == {
        "ThrottleTimeMs": 0, "ErrorCode": 6, "ErrorMessage": ""}

    # Another cluster's id, and a voter without a directory id.
    other = "AAAAAAAAAAAAAAAAAAAAAA"
    mismatch = f'The given id "{other}" doesn\'t match the cluster id "{c.cluster_id}"'
    r = add_voter(leader.controller_port, follower, cluster_id=other)
    assert (r["ErrorCode"], r["ErrorMessage"]) == (104, mismatch), r
    r = remove_voter(leader.controller_port, follower.node_id, follower.directory_id(),
                     cluster_id=other)
    assert (r["ErrorCode"], r["ErrorMessage"]) == (104, mismatch), r
    r = add_voter(leader.controller_port, follower, directory_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert (r["ErrorCode"], r["ErrorMessage"]) == (
        42, "Add voter request didn't include a valid voter"), r
    # No endpoint on the listener the quorum talks on: the voter could not be reached.
    r = add_voter(leader.controller_port, follower, listener="OTHER")
    assert (r["ErrorCode"], r["ErrorMessage"]) == (
        42, "Add voter request didn't include the endpoint (Endpoints(endpoints={ListenerName("
            f"OTHER)={follower.host}/<unresolved>:{follower.controller_port}}})) for the default "
            "listener ListenerName(CONTROLLER)"), r

    # None of it changed the voters.
    assert set(status(leader)[1]) == {1, 2, 3}
