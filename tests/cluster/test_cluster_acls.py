"""ACLs across a three-node cluster (issue #28 with #25): ACLs created through one node are
controller writes, forwarded to the active controller, and every node enforces them from its
own copy of the metadata log; removing them through another node takes the access away on all
three. The client is alice over SASL_PLAINTEXT; the nodes' own PLAINTEXT and CONTROLLER
listeners stay User:ANONYMOUS, a super user, as a KRaft cluster with a PLAINTEXT controller
listener needs.

Kafka 4.4 runs the same cluster from its jars (KACTOR_TEST_TARGET=kafka)."""
import pytest

from harness import schema_codec as sc
from harness.broker import TARGET, free_port
from harness.cli import run_tool
from harness.cluster import Cluster, ClusterNode, create_topic, wait_until
from harness.security import AUTHORIZER, AUTHZ_PLAIN_JAAS, sasl_plain_client

TOPIC_AUTHORIZATION_FAILED = 29


class AclNode(ClusterNode):
    """A node with the authorizer on; a broker also gets a SASL_PLAINTEXT (PLAIN) client
    listener beside PLAINTEXT."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.sasl_port = free_port()

    def base_config(self):
        cfg = super().base_config()
        h = self.host
        if self.is_broker:
            listeners = [f"PLAINTEXT://{h}:{self.port}",
                         f"SASL_PLAINTEXT://{h}:{self.sasl_port}"]
            if self.is_controller:
                listeners.append(f"CONTROLLER://{h}:{self.controller_port}")
            cfg["listeners"] = ",".join(listeners)
            cfg["advertised.listeners"] = (f"PLAINTEXT://{h}:{self.port},"
                                           f"SASL_PLAINTEXT://{h}:{self.sasl_port}")
        cfg["listener.security.protocol.map"] = (
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT")
        cfg["sasl.enabled.mechanisms"] = "PLAIN"
        cfg["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = AUTHZ_PLAIN_JAAS
        cfg["authorizer.class.name"] = AUTHORIZER
        cfg["super.users"] = "User:admin;User:ANONYMOUS"
        return cfg


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, size=3, node_class=AclNode).start(timeout=180)
    yield c
    c.stop()


def metadata_error(node, topic):
    """alice's Metadata answer for one topic on `node`: its error code."""
    client = sasl_plain_client(node.sasl_port)
    try:
        r = client.call("Metadata", 12, {
            "Topics": [{"TopicId": sc.ZERO_UUID, "Name": topic}], "AllowAutoTopicCreation": False,
            "IncludeTopicAuthorizedOperations": False})
        assert isinstance(r, dict), r
        (t,) = r["Topics"]
        return t["ErrorCode"]
    finally:
        client.close()


def acls(node, *args):
    return run_tool("acls", "--bootstrap-server", node.bootstrap, *args, timeout=60)


def test_acls_are_cluster_wide(cluster, topic_name):
    leader, _, _ = cluster.wait_for_leader(30)
    others = [n for n in cluster.nodes if n.node_id != leader]
    create_topic(cluster.nodes[0], topic_name, partitions=3)
    for n in cluster.nodes:
        wait_until(lambda n=n: metadata_error(n, topic_name) == TOPIC_AUTHORIZATION_FAILED,
                   30, f"alice refused {topic_name} on {n.name}")

    # Added through a node whose controller is not the active one: forwarded.
    acls(others[0], "--add", "--allow-principal", "User:alice", "--operation", "Describe",
         "--topic", topic_name)
    for n in cluster.nodes:
        wait_until(lambda n=n: metadata_error(n, topic_name) == 0, 30,
                   f"alice allowed {topic_name} on {n.name}")
        listed = acls(n, "--list", "--topic", topic_name).stdout
        assert "User:alice" in listed and "DESCRIBE" in listed, (n.name, listed)

    # A prefixed DENY added through the other follower wins everywhere.
    acls(others[1], "--add", "--deny-principal", "User:alice", "--operation", "Describe",
         "--topic", topic_name[:3], "--resource-pattern-type", "prefixed")
    for n in cluster.nodes:
        wait_until(lambda n=n: metadata_error(n, topic_name) == TOPIC_AUTHORIZATION_FAILED,
                   30, f"deny applies on {n.name}")

    # Removed through the leader's node: the allow alone is left, on every node.
    acls(cluster.node(leader), "--remove", "--force", "--deny-principal", "User:alice",
         "--operation", "Describe", "--topic", topic_name[:3],
         "--resource-pattern-type", "prefixed")
    for n in cluster.nodes:
        wait_until(lambda n=n: metadata_error(n, topic_name) == 0, 30,
                   f"deny removed on {n.name}")


# Kafka 4.4 clusters that a kactor node joins are formatted without the features kactor does
# not implement (see test_interop.py).
KAFKA_FEATURES = ("--feature", "share.version=0", "--feature", "streams.version=0",
                  "--feature", "eligible.leader.replicas.version=0")


@pytest.mark.skipif(TARGET != "kactor", reason="mixes both targets itself")
@pytest.mark.parametrize("controller", ["kactor", "kafka"])
def test_acls_in_a_mixed_cluster(tmp_path, topic_name, controller):
    """One controller of either kind, a kactor broker and a Kafka broker: ACLs added through
    either broker (Kafka forwards CreateAcls in an Envelope, kactor as itself) are records both
    kinds of broker read and enforce."""
    broker_kinds = {2: "kactor", 3: "kafka"}
    targets = {1: controller, **broker_kinds}
    c = Cluster(tmp_path, controllers=1, brokers=2, target="kactor", targets=targets,
                kafka_format_args=KAFKA_FEATURES, node_class=AclNode).start(timeout=180)
    try:
        kactor_broker, kafka_broker = c.node(2), c.node(3)
        create_topic(kactor_broker, topic_name, partitions=2)
        for b in c.brokers:
            wait_until(lambda b=b: metadata_error(b, topic_name) == TOPIC_AUTHORIZATION_FAILED,
                       30, f"alice refused {topic_name} on {b.name} ({b.target})")
        acls(kafka_broker, "--add", "--allow-principal", "User:alice", "--operation", "Read",
             "--topic", topic_name)
        for b in c.brokers:
            wait_until(lambda b=b: metadata_error(b, topic_name) == 0, 30,
                       f"Kafka-added ACL on {b.name} ({b.target})")
        acls(kactor_broker, "--add", "--deny-principal", "User:alice", "--operation", "All",
             "--topic", topic_name)
        for b in c.brokers:
            wait_until(lambda b=b: metadata_error(b, topic_name) == TOPIC_AUTHORIZATION_FAILED,
                       30, f"kactor-added DENY on {b.name} ({b.target})")
        listed = acls(kafka_broker, "--list", "--topic", topic_name).stdout
        assert "DENY" in listed and "ALLOW" in listed, listed
    finally:
        c.stop()
