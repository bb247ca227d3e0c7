"""Cluster nodes in network namespaces, for network partitions (issue #26).

Every node runs in a namespace of its own (`ip netns exec`), with one address on a private
/24. A veth pair joins each namespace to a bridge in the test's namespace, which holds the
subnet's .1, so the test process reaches every node. `isolate(node)` takes the node's link to
the bridge down: the node then reaches nobody and nobody reaches it, and only a process
started inside its namespace (`run_inside`) still talks to it. `heal(node)` brings the link
back. The namespaces, links and bridge are named after the test process and removed by
`close()`. Needs root (CAP_NET_ADMIN); `NetnsTopology.available()` says whether this machine
allows it."""
import os
import subprocess

from harness.cluster import ClusterNode


def _ip(*args, check=True):
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out


class NetnsTopology:
    def __init__(self, subnet_octet=None):
        tag = os.getpid() % 10000
        self.prefix = f"kt{tag}"
        # A /24 in 10.213.0.0/16 picked from the pid, so two runs on one machine do not share.
        self.subnet = f"10.213.{subnet_octet if subnet_octet is not None else tag % 250 + 1}"
        self.bridge = f"{self.prefix}br"
        self.namespaces = {}  # node id -> namespace name
        self._bridge_up = False

    @staticmethod
    def available():
        """(True, "") if namespaces and veth links can be made here, else (False, why)."""
        probe = f"ktprobe{os.getpid() % 10000}"
        out = _ip("netns", "add", probe, check=False)
        if out.returncode != 0:
            return False, f"ip netns add: {out.stderr.strip()}"
        try:
            link = _ip("link", "add", f"{probe}a", "type", "veth", "peer", "name",
                       f"{probe}b", check=False)
            if link.returncode != 0:
                return False, f"ip link add veth: {link.stderr.strip()}"
            _ip("link", "del", f"{probe}a", check=False)
            return True, ""
        finally:
            _ip("netns", "del", probe, check=False)

    def address(self, node_id):
        return f"{self.subnet}.{node_id + 1}"

    def _ensure_bridge(self):
        if self._bridge_up:
            return
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        self._bridge_up = True

    def add(self, node_id):
        """A namespace for `node_id` with its address, joined to the bridge."""
        self._ensure_bridge()
        ns = f"{self.prefix}n{node_id}"
        outer, inner = f"{self.prefix}v{node_id}", f"{self.prefix}i{node_id}"
        _ip("netns", "add", ns)
        self.namespaces[node_id] = ns
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "addr", "add", f"{self.address(node_id)}/24", "dev", inner)
        _ip("-n", ns, "link", "set", inner, "up")
        return ns

    def isolate(self, node_id):
        _ip("link", "set", f"{self.prefix}v{node_id}", "down")

    def heal(self, node_id):
        _ip("link", "set", f"{self.prefix}v{node_id}", "up")

    def run_inside(self, node_id, cmd, timeout):
        """Runs `cmd` inside the node's namespace; returns the CompletedProcess."""
        return subprocess.run(["ip", "netns", "exec", self.namespaces[node_id], *cmd],
                              capture_output=True, text=True, timeout=timeout)

    def close(self):
        for node_id, ns in self.namespaces.items():
            _ip("link", "del", f"{self.prefix}v{node_id}", check=False)
            _ip("netns", "del", ns, check=False)
        self.namespaces = {}
        if self._bridge_up:
            _ip("link", "del", self.bridge, check=False)
            self._bridge_up = False


def netns_node_class(topology):
    """A ClusterNode class whose nodes live in `topology`'s namespaces."""

    class NetnsNode(ClusterNode):
        def __init__(self, cluster, node_id, workdir, target, roles=("broker", "controller")):
            super().__init__(cluster, node_id, workdir, target, roles)
            topology.add(node_id)
            self.host = topology.address(node_id)
            self.namespace = topology.namespaces[node_id]

        def command(self):
            # `ip netns exec` execs the node in place: its pid is the node's, so signals and
            # exit codes are the node's own.
            return ["ip", "netns", "exec", self.namespace, *super().command()]

    return NetnsNode
