"""Brokers under test: kactor (target/release/kactor) or, with KACTOR_TEST_TARGET=kafka, the
reference Apache Kafka 4.4.0 broker run from the jars in .cache/kafka-libs.

Both are single nodes in combined mode (broker + controller, one-voter quorum) on free loopback
ports, with a fresh data dir, their output captured to a log file, and stopped by PID."""
import atexit
import base64
import os
import random
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from . import wire

ROOT = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("KACTOR_TEST_TARGET", "kactor")
KAFKA_LIBS = Path(os.environ.get("KAFKA_LIBS", ROOT / ".cache" / "kafka-libs"))
JAVA_DIR = ROOT / "tests" / "java"


def kactor_bin():
    if os.environ.get("KACTOR_BIN"):
        return Path(os.environ["KACTOR_BIN"])
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target_dir / "release" / "kactor"


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


_EPHEMERAL = _ephemeral_range()
_HANDED_OUT = set()


def free_port():
    """A free loopback port below the kernel's ephemeral range. A port the kernel hands out
    (bind to 0) is one it may also give an outgoing connection before the broker binds it:
    with several nodes connecting to each other that happened (a controller failed to start
    with EADDRINUSE). Ports are not handed out twice in one test process."""
    low = 20000
    high = min(_EPHEMERAL[0], 32768) - 1
    for _ in range(200):
        port = random.randint(low, high)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high}")


def random_cluster_id():
    """A Kafka cluster id as `Uuid.randomUuid()` makes it: a random version-4 UUID in URL-safe
    base64 without padding (22 chars), drawn again while its text starts with '-' (about 1 in
    64), which `kafka-storage format -t` / `kactor format` would read as an option. (A version-4
    UUID is never one of the ids Kafka reserves, zero and the metadata topic's 1.)"""
    while True:
        u = uuid.uuid4()
        text = base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java_cmd(main_class, args, log4j="log4j2-cli.properties", heap="512m", quick=True):
    """A `java` command line running `main_class` from the Kafka 4.4.0 jars."""
    cmd = ["java", f"-Xmx{heap}", "-Djava.awt.headless=true",
           f"-Dlog4j2.configurationFile={JAVA_DIR / log4j}"]
    if quick:
        # The tools are short-lived: C1 only and the serial GC start fastest on 2 cores.
        cmd += ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k"]
    return cmd + ["-cp", f"{KAFKA_LIBS}/*", main_class] + [str(a) for a in args]


_LIVE = set()


@atexit.register
def _kill_leftovers():
    # Brokers run in their own session (so a Ctrl-C to pytest doesn't race the fixtures'
    # orderly stop); if pytest exits without tearing one down, don't leave it running.
    for proc in list(_LIVE):
        if proc.poll() is None:
            proc.kill()


class BrokerError(RuntimeError):
    pass


class Broker:
    """One broker process. Ports and data dir are fixed at construction so that `restart()`
    (after `stop()` or `kill9()`) comes back on the same address with the same data."""

    node_id = 1
    # Extra `kafka-storage format` arguments (e.g. `--feature share.version=0`).
    kafka_format_args = ()
    # Per-node format arguments both targets take (ClusterNode: --standalone, ...).
    format_args = ()

    def __init__(self, workdir, target=TARGET, overrides=None, name="broker", binary=None,
                 env=None):
        self.target = target
        self.binary = binary
        # Extra environment for the broker process (e.g. KACTOR_FAULT_INJECTION=1).
        self.env = dict(env or {})
        self.name = name
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / f"{name}.log"
        self.config_path = self.workdir / "server.properties"
        self.port = free_port()
        self.controller_port = free_port()
        self.http_port = free_port()
        self.host = "127.0.0.1"
        self.overrides = dict(overrides or {})
        self.proc = None
        self.starts = 0
        self.cluster_id = random_cluster_id()
        self._formatted = False

    # ---- addresses ---------------------------------------------------------------------
    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self):
        return f"http://{self.host}:{self.http_port}/metrics"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    # ---- configuration -----------------------------------------------------------------
    def base_config(self):
        cfg = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
                         f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.target == "kactor":
            cfg["kactor.http.address"] = f"{self.host}:{self.http_port}"
        return cfg

    def write_config(self):
        cfg = self.base_config()
        if self.target == "kafka":
            # Kafka has no --override: fold the overrides into the file.
            cfg.update(self.overrides)
        with open(self.config_path, "w") as f:
            f.write("# generated by tests/harness/broker.py\n")
            for k, v in cfg.items():
                f.write(f"{k}={v}\n")

    def command(self):
        if self.target == "kactor":
            cmd = [str(self.binary or kactor_bin()), "start", "--config", str(self.config_path)]
            for k, v in self.overrides.items():
                cmd += ["--override", f"{k}={v}"]
            return cmd
        return java_cmd("kafka.Kafka", [self.config_path], log4j="log4j2-broker.properties",
                        heap="1g", quick=False)

    def _format_kafka(self):
        cmd = java_cmd("kafka.tools.StorageTool",
                       # --cluster-id=ID: one token, so no id can be mistaken for a flag.
                       ["format", f"--cluster-id={self.cluster_id}", "-c", self.config_path,
                        "--ignore-formatted", *self.kafka_format_args, *self.format_args])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        with open(self.log_path, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}\n")
        if out.returncode != 0:
            raise BrokerError(f"kafka-storage format failed: {out.stderr or out.stdout}")

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self, timeout=90):
        if self.is_running():
            raise BrokerError(f"{self.name} already running (pid {self.pid})")
        self.write_config()
        if self.target == "kafka" and not self._formatted:
            self._format_kafka()
            self._formatted = True
        if self.target == "kactor" and not kactor_bin().exists():
            raise BrokerError(f"{kactor_bin()} not built (run cargo build --release)")
        self.starts += 1
        log = open(self.log_path, "a")
        log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n")
        log.flush()
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        # Fault injection only where a test asks for it, not from the developer's shell.
        env.pop("KACTOR_FAULT_INJECTION", None)
        env.update(self.env)
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir, env=env,
                                     start_new_session=True)
        log.close()
        _LIVE.add(self.proc)
        self.wait_ready(timeout)
        return self

    @property
    def ready_port(self):
        """The listener whose ApiVersions answer means the node is up: the client listener."""
        return self.port

    def wait_ready(self, timeout=90):
        """Ready = ApiVersions v0 answers with error NONE on `ready_port`."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError(f"{self.name} exited with {self.proc.returncode} during start-up;"
                                  f" log tail:\n{self.log_tail()}")
            try:
                _, err, apis, _ = wire.api_versions(self.ready_port, 0, timeout=2,
                                                    host=self.host)
                if err == 0 and apis:
                    return
                last = f"ApiVersions error {err}"
            except (OSError, ValueError, ConnectionError) as e:
                last = e
            time.sleep(0.2)
        raise BrokerError(f"{self.name} not ready after {timeout}s ({last}); log tail:\n"
                          f"{self.log_tail()}")

    def is_running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=30):
        """SIGTERM, then SIGKILL after `timeout` s. Returns the exit code (None if never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill9(self):
        """SIGKILL: the crash the restart suites recover from."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout=120):
        """Start again on the same ports and data dir (stopping first if still running)."""
        if self.is_running():
            self.stop()
        return self.start(timeout)

    # ---- inspection --------------------------------------------------------------------
    def rss_bytes(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise BrokerError("no VmRSS")

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines=60):
        return "\n".join(self.log_text().splitlines()[-lines:])

    def partition_dir(self, topic, partition=0):
        return self.data_dir / f"{topic}-{partition}"

    def __repr__(self):
        return f"<Broker {self.name} {self.target} {self.bootstrap} pid={self.pid}>"


def running(broker):
    """Starts `broker` for a `with` block (a module- or session-scoped fixture) and stops it
    after, even when the start fails half-way."""
    class _Running:
        def __enter__(self):
            broker.start()
            return broker

        def __exit__(self, *exc):
            broker.stop()
            return False
    return _Running()


def use_shared(broker, request):
    """A shared broker handed to one test: restarted if an earlier test left it dead, and its
    log attached to this test's failure report (what conftest's `broker` fixture does)."""
    if not broker.is_running():
        broker.restart()
    request.node._kactor_brokers = getattr(request.node, "_kactor_brokers", []) + [broker]
    return broker
