"""Several processes forming one cluster on loopback, each with its own ports and data dir, all
formatted with one cluster id (`kactor format` / `kafka-storage format`), against either target
(KACTOR_TEST_TARGET). Either N combined (broker + controller) nodes, or separate controller and
broker processes (`process.roles=controller` / `=broker`, as Kafka's production layout);
`controller.quorum.voters` names every controller, or (dynamic quorums, KIP-853)
`controller.quorum.bootstrap.servers` lists controller listeners and each node's `format_args`
(`--standalone`, `--initial-controllers ...`, `--no-initial-controllers`) seed the voter set.

    cluster = Cluster(tmp_path, size=3).start()              # nodes 1-3 combined
    cluster = Cluster(tmp_path, controllers=3, brokers=3)    # controllers 1-3, brokers 4-6
    leader, epoch = cluster.quorum_leader()
    cluster.nodes[0].kill9(); cluster.nodes[0].start()
    cluster.stop()
    cluster = Cluster(tmp_path, controllers=3, brokers=1, dynamic=True,
                      format_args={1: ["--standalone"], 2: ["--no-initial-controllers"]},
                      deferred=(2,)).start()   # node 2 joins later: cluster.start(nodes=[2])
"""
import subprocess
import threading
import time

from . import wire
from .broker import TARGET, Broker, BrokerError, kactor_bin, random_cluster_id

# A directory id (`--initial-controllers`) is a Uuid as a cluster id is: base64url, 22 chars.
random_directory_id = random_cluster_id

API_DESCRIBE_QUORUM = 55
METADATA_TOPIC = "__cluster_metadata"


class ClusterNode(Broker):
    """One node of a cluster: the cluster decides the roles, the voters and the cluster id."""

    def __init__(self, cluster, node_id, workdir, target, roles=("broker", "controller")):
        name = {("broker", "controller"): "node", ("controller",): "controller",
                ("broker",): "broker"}[tuple(roles)]
        super().__init__(workdir, target=target, overrides=cluster.overrides,
                         name=f"{name}{node_id}")
        self.node_id = node_id
        self.roles = tuple(roles)
        self.cluster = cluster
        self.cluster_id = cluster.cluster_id
        # Extra format arguments for both `kactor format` and `kafka-storage format`.
        self.format_args = ()

    @property
    def is_broker(self):
        return "broker" in self.roles

    @property
    def is_controller(self):
        return "controller" in self.roles

    def base_config(self):
        cfg = super().base_config()
        cfg["process.roles"] = ",".join(self.roles)
        if self.cluster.bootstrap_servers is not None:
            cfg.pop("controller.quorum.voters", None)
            cfg["controller.quorum.bootstrap.servers"] = self.cluster.bootstrap_servers
        else:
            cfg["controller.quorum.voters"] = self.cluster.voters
        if not self.is_broker:
            cfg["listeners"] = f"CONTROLLER://{self.host}:{self.controller_port}"
            for key in ("advertised.listeners", "inter.broker.listener.name"):
                cfg.pop(key, None)
        if not self.is_controller:
            cfg["listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        return cfg

    @property
    def ready_port(self):
        # A controller has no client listener: ready once its controller listener answers.
        return self.port if self.is_broker else self.controller_port

    def start(self, timeout=90):
        if self.target == "kactor" and not self._formatted:
            self.write_config()
            cmd = [str(self.binary or kactor_bin()), "format", "-c", str(self.config_path),
                   f"--cluster-id={self.cluster_id}", "--ignore-formatted"]
            for k, v in self.overrides.items():
                cmd += ["--override", f"{k}={v}"]
            cmd += list(self.format_args)
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                raise BrokerError(f"kactor format failed: {out.stderr or out.stdout}")
            self._formatted = True
        return super().start(timeout)

    def directory_id(self):
        """The `directory.id` format wrote into this node's meta.properties (base64url)."""
        for line in (self.data_dir / "meta.properties").read_text().splitlines():
            if line.startswith("directory.id="):
                return line.split("=", 1)[1].strip()
        raise BrokerError(f"{self.name}: no directory.id in meta.properties")


class Cluster:
    def __init__(self, workdir, size=3, target=TARGET, overrides=None, controllers=None,
                 brokers=None, targets=None, kafka_format_args=(), node_class=None,
                 dynamic=False, bootstrap_controllers=None, format_args=None, deferred=()):
        """`size` combined nodes, or (when `controllers` is given) that many controller-only
        nodes numbered from 1 and `brokers` broker-only nodes numbered after them. `targets`
        maps node ids to another target than `target` (kactor and Kafka nodes in one
        cluster). `node_class` (a ClusterNode subclass) adds listeners or settings per node.

        `dynamic`: every node gets `controller.quorum.bootstrap.servers` (the controller
        listeners of `bootstrap_controllers`, default all controllers) instead of
        `controller.quorum.voters`; `format_args` maps node ids to format arguments (passed to
        `kactor format` and `kafka-storage format` alike). `deferred` node ids are left out of
        `start()`; start them later with `cluster.start(nodes=[i, ...])`."""
        self.target = target
        self.overrides = dict(overrides or {})
        self.cluster_id = random_cluster_id()
        self.nodes = []
        if controllers is None:
            layout = [("broker", "controller")] * size
        else:
            layout = [("controller",)] * controllers + [("broker",)] * (brokers or 0)
        for i, roles in enumerate(layout, start=1):
            node_target = (targets or {}).get(i, target)
            self.nodes.append((node_class or ClusterNode)(self, i, workdir / f"node{i}",
                                                          node_target, roles))
            self.nodes[-1].kafka_format_args = tuple(kafka_format_args)
        self.voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}"
                               for n in self.nodes if n.is_controller)
        self.bootstrap_servers = None
        if dynamic:
            ids = bootstrap_controllers or [n.node_id for n in self.nodes if n.is_controller]
            self.bootstrap_servers = ",".join(
                f"{self.node(i).host}:{self.node(i).controller_port}" for i in ids)
        for i, args in (format_args or {}).items():
            self.node(i).format_args = tuple(args)
        self.deferred = set(deferred)

    @property
    def controllers(self):
        return [n for n in self.nodes if n.is_controller]

    @property
    def brokers(self):
        return [n for n in self.nodes if n.is_broker]

    def node(self, node_id):
        return next(n for n in self.nodes if n.node_id == node_id)

    def initial_controllers(self, directory_ids):
        """The `--initial-controllers` value for every controller: ID@HOST:PORT:DIRECTORY_ID,
        `directory_ids` mapping node ids to base64url Uuids (see random_directory_id)."""
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}:{directory_ids[n.node_id]}"
                        for n in self.controllers)

    def start(self, timeout=120, nodes=None):
        """Starts every node but the deferred ones (or the node ids in `nodes`) at once (each
        waits for a quorum before it serves clients)."""
        errors = []

        def run(n):
            try:
                n.start(timeout)
            except Exception as e:  # noqa: BLE001 - reported below with the node's name
                errors.append(f"{n.name}: {e}")

        chosen = [n for n in self.nodes if n.node_id not in self.deferred] if nodes is None \
            else [self.node(i) for i in nodes]
        threads = [threading.Thread(target=run, args=(n,)) for n in chosen]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise BrokerError("; ".join(errors))
        return self

    def stop(self):
        # Broker-only nodes first, all at once, while the controllers are still up: a broker's
        # controlled shutdown needs a controller quorum, and without one it waits about 9 s
        # before it gives up. Then every other node at once, so that no combined node loses
        # its quorum to the ones stopped before it.
        for group in ([n for n in self.nodes if not n.is_controller],
                      [n for n in self.nodes if n.is_controller]):
            threads = [threading.Thread(target=n.stop, kwargs={"timeout": 20}) for n in group]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    def running(self):
        return [n for n in self.nodes if n.is_running()]

    def quorum_leader(self, nodes=None):
        """(leader id, epoch) from the first running node's controller listener that answers
        DescribeQuorum as leader (a follower may refuse with NOT_LEADER_OR_FOLLOWER), or None."""
        for n in nodes or self.running():
            if not n.is_controller:
                continue
            try:
                err, perr, leader, epoch = describe_quorum_v0(n.controller_port)
            except (OSError, ValueError, ConnectionError):
                continue
            if err == 0 and perr == 0 and leader >= 0:
                return leader, epoch
        return None

    def wait_for_leader(self, timeout, exclude=(), nodes=None):
        """Polls until a leader outside `exclude` is known; returns (leader, epoch, seconds)."""
        start = time.monotonic()
        deadline = start + timeout
        while time.monotonic() < deadline:
            got = self.quorum_leader(nodes)
            if got is not None and got[0] not in exclude:
                return got[0], got[1], time.monotonic() - start
            time.sleep(0.1)
        raise AssertionError(f"no quorum leader outside {exclude} within {timeout}s")


def failover_bound_s(fetch_timeout_ms, election_timeout_ms, rounds=4):
    """How long a liveness check gives the survivors of a killed quorum leader to elect a new
    one. Followers notice after the fetch timeout; their deadlines run from the last fetch, so
    under load two of them turn prospective within milliseconds of each other, grant each
    other's pre-vote and split the real vote. Each further round waits a random election
    timeout in [t, 2t). `rounds` such rounds plus scheduling slack on a loaded 2-core runner;
    a broken election (no leader at all) still fails it. Seen in CI: 5 s was too short once
    in ~30 runs (one split round plus load), locally 2.0-3.5 s."""
    return (fetch_timeout_ms + rounds * 2 * election_timeout_ms) / 1000 + 3


def describe_quorum_v0(port, timeout=5.0):
    """One DescribeQuorum v0 round trip (flexible from v0) for `__cluster_metadata-0`;
    returns (error_code, partition error_code, leader_id, leader_epoch)."""
    body = (wire.uvarint(2) + wire.compact_string(METADATA_TOPIC)
            + wire.uvarint(2) + wire.i32(0) + wire.uvarint(0)  # partition 0, no tags
            + wire.uvarint(0)  # topic tags
            + wire.uvarint(0))  # request tags
    req = wire.frame(wire.request_header_v2(API_DESCRIBE_QUORUM, 0, 9) + body)
    with wire.connect(port, timeout=timeout) as s:
        s.sendall(req)
        r = wire.Reader(wire.recv_frame(s))
    r.i32()  # correlation id
    r.skip_tags()  # response header v1
    err = r.i16()
    if r.uvarint() - 1 < 1:
        return err, err, -1, -1
    r.compact_string()
    if r.uvarint() - 1 < 1:
        return err, err, -1, -1
    r.i32()  # partition index
    perr, leader, epoch = r.i16(), r.i32(), r.i32()
    return err, perr, leader, epoch


def metadata_topics(port, timeout=5.0):
    """Topic name -> partition count from a Metadata v1 request for all topics."""
    with wire.connect(port, timeout=timeout) as s:
        _, topics = wire.parse_metadata_v1_response(
            wire.roundtrip(s, wire.metadata_v1_request(None)))
    return {name: len(parts) for name, (err, parts) in topics.items() if err == 0}


def coordinator_partition(key, partitions):
    """abs(String.hashCode) % partitions: the `__consumer_offsets` / `__transaction_state`
    partition whose leader coordinates a group or a transactional id."""
    h = 0
    for ch in key:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h) % partitions


def wait_until(check, timeout, what):
    """Polls `check` until it returns something truthy (returned); errors while a node starts
    or fails over count as 'not yet'. Raises AssertionError with the last result after
    `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - reported on timeout
            last = e
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout}s (last: {last!r})")


def admin(node):
    """confluent-kafka's AdminClient on `node`. Keep it referenced while its futures are
    pending: a collected handle fails them."""
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": node.bootstrap})


def topic_names(node):
    return set(admin(node).list_topics(timeout=10).topics)


def topic_config(node, topic, key):
    """The value `node` describes for a topic config (DescribeConfigs)."""
    from confluent_kafka.admin import ConfigResource
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    a = admin(node)
    return a.describe_configs([res])[res].result(30)[key].value


def create_topic(node, name, partitions=1, timeout=30):
    """CreateTopics through `node` (replication factor 1) with confluent-kafka's AdminClient."""
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": node.bootstrap})  # referenced until the result
    a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                    operation_timeout=timeout)[name].result(timeout)


def registered_brokers(node):
    """Ids of the brokers `node` lists in Metadata (registered and unfenced), sorted."""
    from confluent_kafka.admin import AdminClient
    return sorted(AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(
        timeout=10).brokers)


def partition_states(node, topic):
    """Partition -> (leader, replicas in assignment order, sorted ISR) as `node` answers
    Metadata, or None while the topic is unknown."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (x.leader, list(x.replicas), sorted(x.isrs)) for p, x in t.partitions.items()}


def leader_and_isr(node, topic, partition=0):
    """(leader, sorted ISR) of one partition as `node` answers Metadata, or None."""
    state = (partition_states(node, topic) or {}).get(partition)
    return (state[0], state[2]) if state else None


def segment_bytes(node, topic, partition=0):
    """The bytes of every `.log` segment of one replica on `node`, in offset order."""
    d = node.partition_dir(topic, partition)
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def partition_leaders(node, topic):
    """Partition -> leader id as `node` answers Metadata, or None while the topic is unknown."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: x.leader for p, x in t.partitions.items()}


def produce_and_consume(producer_node, consumer_node, topic, partitions, count, timeout=30):
    """Produces `count` numbered records (acks=all, round-robin over the partitions) through
    one node and reads every partition from offset 0 through another; returns the numbers read
    (sorted), so a caller can check for loss and duplicates."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": producer_node.bootstrap, "acks": "all"})
    failed = []
    for i in range(count):
        p.produce(topic, value=b"%d" % i, partition=i % partitions,
                  on_delivery=lambda e, m: failed.append(e) if e else None)
    left = p.flush(timeout)
    assert left == 0 and not failed, f"{left} unsent, errors {failed[:3]}"
    return consume_numbers(consumer_node, topic, partitions, count, timeout)


def consume_numbers(node, topic, partitions, count, timeout=30):
    """Reads up to `count` records from every partition of `topic` from offset 0 through
    `node` (no group), each value a decimal number; returns the numbers, sorted."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"{topic}-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen = []
    try:
        c.assign([TopicPartition(topic, q, 0) for q in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(seen) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append(int(m.value()))
    finally:
        c.close()
    return sorted(seen)
