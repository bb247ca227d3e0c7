#!/usr/bin/env python3
"""Side-by-side benchmark of kactor and Apache Kafka 4.4.0 (issue #7), run by scripts/bench.

Both brokers run one after the other on the same data directory, the same ports and the same
flush policy (log.flush.interval.messages = Long.MAX: neither fsyncs per request), single node
in combined mode; Kafka with the heap and GC flags kafka-server-start.sh gives it. The load is
bench/ (kactor-bench, librdkafka via the rdkafka crate) for every scenario, plus Kafka's own
ProducerPerformance / ConsumerPerformance for reference; the machine's ceilings (loopback TCP,
librdkafka's mock broker) are measured in the same run. Prints a markdown report and writes
it to bench/RESULTS.md (or --out).

Broker start/stop and the Kafka command lines come from tests/harness (the test engineer's
harness); this file only adds fixed ports, Kafka's default JVM flags and /proc sampling."""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness.broker import Broker, BrokerError, java_cmd, random_cluster_id  # noqa: E402
from harness.cli import MAIN_CLASSES  # noqa: E402

LONG_MAX = "9223372036854775807"
# The same broker settings for both: Kafka's defaults made explicit where they decide
# durability or batching, so that neither side fsyncs per request.
COMMON_OVERRIDES = {
    "log.flush.interval.messages": LONG_MAX,
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
}
# kafka-server-start.sh (KAFKA_HEAP_OPTS) and kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_JVM_DEFAULTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                      "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                      "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
# Fixed, so both brokers serve on the same ports; away from 9092/19092, which tests and
# other engineers' brokers use on a shared machine (--port-base moves them).
# Below Linux's ephemeral range (32768-60999): a port in it can be taken by any outgoing
# connection's local end (Kafka's own controller clients included), and the broker then fails
# to bind.
PORTS = {"client": 29092, "controller": 29093, "http": 29094}
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1 << 20


# ---------------------------------------------------------------------------------------------
# Brokers
# ---------------------------------------------------------------------------------------------
class BenchBroker(Broker):
    """A harness Broker on fixed ports, with Kafka's production JVM flags, that notes the
    wall-clock time of its launch and leaves readiness to the first-produce probe."""

    def __init__(self, workdir, target):
        super().__init__(workdir, target=target, overrides=COMMON_OVERRIDES, name=target)
        self.port, self.controller_port, self.http_port = (
            PORTS["client"], PORTS["controller"], PORTS["http"])
        self.launched_at = None
        # A cluster id that starts with '-' reads as an option to kafka-storage's parser.
        while self.cluster_id.startswith("-"):
            self.cluster_id = random_cluster_id()

    def command(self):
        # start() calls command() for its log line and then for Popen: the last call is the
        # closest observable point to the exec.
        self.launched_at = time.time()
        if self.target == "kafka":
            log4j = ROOT / "tests" / "java" / "log4j2-broker.properties"
            return (["java"] + KAFKA_JVM_DEFAULTS
                    + [f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{kafka_libs()}/*",
                       "kafka.Kafka", str(self.config_path)])
        return super().command()

    def wait_ready(self, timeout=90):
        # Readiness is measured by `kactor-bench first-produce` right after start().
        if self.proc.poll() is not None:
            raise BrokerError(f"{self.name} exited during start-up:\n{self.log_tail()}")

    def proc_status(self, key):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return None

    def cpu_seconds(self):
        """utime + stime of the broker process (all its threads), from /proc/<pid>/stat."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        return (int(fields[11]) + int(fields[12])) / CLK_TCK


def kafka_libs():
    return Path(os.environ.get("KAFKA_LIBS", ROOT / ".cache" / "kafka-libs"))


def ports_free():
    for p in PORTS.values():
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


# ---------------------------------------------------------------------------------------------
# The load tool
# ---------------------------------------------------------------------------------------------
def load_bin():
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return Path(os.environ.get("KACTOR_BENCH_BIN", target_dir / "release" / "kactor-bench"))


def tool(*args, timeout=300, stderr_to=None):
    """Runs kactor-bench; returns its JSON result, or {"error": ...} if it failed. With
    `stderr_to`, the tool's stderr (librdkafka's log lines under `-X debug=...`) is also saved
    there."""
    cmd = [str(load_bin())] + [str(a) for a in args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if stderr_to is not None:
            Path(stderr_to).write_text(out.stderr)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout}s"}
    if out.returncode != 0:
        # anyhow's "Error: ..." and its causes, without a backtrace if one is enabled.
        lines = out.stderr.strip().splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith("Error:")), None)
        if start is None:
            msg = lines[-1] if lines else f"exit {out.returncode}"
        else:
            msg = " ".join(ln.strip() for ln in lines[start:]
                           if ln.strip()).split("Stack backtrace:")[0].strip()
        return {"error": msg[:300]}
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"unparseable output: {out.stdout[-200:]!r}"}


def log(msg):
    print(f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr,
          flush=True)


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------
def size_label(size):
    """A record size as scenario names spell it: 100B, 1KiB."""
    return "1KiB" if size == 1024 else f"{size}B"


class Produce:
    def __init__(self, size, acks, partitions, producers):
        self.size, self.acks, self.partitions, self.producers = size, acks, partitions, producers

    @property
    def name(self):
        return (f"produce {size_label(self.size)} acks={self.acks} p={self.partitions} "
                f"x{self.producers}")

    @property
    def topic(self):
        return f"bench-{self.size}-acks{self.acks}-p{self.partitions}-x{self.producers}"


def is_consumed(p):
    """The consumer scenarios: one per record size and partition count of the single acks=1
    producer scenarios."""
    return p.producers == 1 and p.acks == "1"


# Bytes of values each consume scenario reads (the same on both brokers).
# 2 GiB in quick mode: with the batch consume API a read of 512 MiB took 0.4-1.2 s, short
# enough for a scheduling hiccup to move the figure by a third.
CONSUME_MIB = {"smoke": 64, "quick": 2048, "full": 4096}
# The consume data set is written with linger.ms=1000, so every batch closes full (librdkafka's
# batch.size, 1,000,000 B: 9,082 records of 100 B) whatever the broker's ack speed, and both
# brokers' logs hold the same batches (checked: 592 batches of ~998 KB on each for 512 MiB of
# 100 B values). A producer scenario's own data is not used: its record count follows the
# broker's speed (in 4 s kactor wrote 3.7 M records of 100 B, Kafka 1.0 M on a busy machine,
# so the two consumers read different amounts), and its batching follows the ack timing.
FILL_LINGER_MS = 1000
# The fetch round trip's loopback floor is measured for responses of these sizes: one
# partition's worth of librdkafka's max.partition.fetch.bytes (the p=1 consumers), and eight
# (p=8); other sizes are interpolated between them.
FETCH_FLOOR_SIZES = (1 << 20, 8 << 20)
# Kafka's default socket.send.buffer.bytes, which both brokers run with (neither broker's
# settings here change it).
BROKER_SEND_BUFFER = 102400


def fetch_floor_us(mib, ceilings):
    """The loopback floor of a fetch round trip carrying `mib` MiB (see `kactor-bench
    fetch-floor`), on the line through the two measured sizes."""
    pts = [(size / MIB, get(ceilings, "fetch_floor", size, "rtt", "mean_us"))
           for size in FETCH_FLOOR_SIZES]
    if any(us is None for _, us in pts):
        return None
    (x0, y0), (x1, y1) = pts
    return max(y0 + (y1 - y0) * (mib - x0) / (x1 - x0), 0.0)


def consume_ceiling(r, ceilings):
    """How much faster than `r` a consumer of this client could read from any broker. The
    client keeps one fetch in flight, so a cycle is the round trip plus the client's own
    time, and the most a broker could take out is its round trip above the loopback floor for
    a response of that size: a server that only sends a file with the brokers' socket send
    buffer (`fetch-floor`, same run). A broker at that floor would read at cycle / (cycle -
    (rtt - floor)) times `r`'s rate. Generous: the floor is measured with the machine
    otherwise idle, while during a run the client's other thread competes for the cores."""
    cyc = get(r, "fetch_cycle")
    if not cyc or not r.get("mib_per_s"):
        return None
    floor = fetch_floor_us(r["mib_per_s"] * cyc["cycle_us"] / 1e6, ceilings)
    if floor is None:
        return None
    return cyc["cycle_us"] / max(cyc["cycle_us"] - max(cyc["rtt_us"] - floor, 0), 1e-9)


def consume_records(mib, size):
    return mib * MIB // size


def consume_topic(p):
    return f"bench-read-{p.size}-p{p.partitions}"


def consume_name(p):
    return p.name.replace("produce", "consume")


def plan(mode, only):
    if mode == "smoke":
        prods = [Produce(1024, "1", 1, 1), Produce(100, "all", 1, 1)]
        durations = {"produce": 2.0, "consume": 10.0, "e2e": 3.0, "mock": 1.0, "tcp": 0.5,
                     "warmup": 0}
    else:
        prods = [Produce(s, a, p, x) for s in (100, 1024) for a in ("1", "all")
                 for p in (1, 8) for x in (1, 4)]
        if mode == "quick":
            prods = [p for p in prods if p.producers == 1 and (p.partitions == 1 or p.acks == "1")]
            durations = {"produce": 4.0, "consume": 30.0, "e2e": 6.0, "mock": 2.0, "tcp": 1.0,
                         "warmup": 5.0}
        else:
            durations = {"produce": 8.0, "consume": 60.0, "e2e": 12.0, "mock": 3.0, "tcp": 2.0,
                         "warmup": 10.0}
    consumes = [p for p in prods if is_consumed(p)]
    durations["consume_mib"] = CONSUME_MIB[mode]
    if only:
        rx = re.compile(only)
        prods = [p for p in prods if rx.search(p.name)]
        # A consume scenario writes its own data set first, so it needs no producer
        # scenario; a filter naming its producer ('100B acks=1 p=1') still selects it.
        consumes = [p for p in consumes if rx.search(p.name) or rx.search(consume_name(p))]
    e2e = [(1024, a) for a in ("1", "all")
           if any(p.size == 1024 and p.acks == a and p.partitions == 1 and p.producers == 1
                  for p in prods)] or ([(prods[0].size, prods[0].acks)] if prods else [])
    if mode == "smoke":
        e2e = e2e[:1]
    return prods, consumes, e2e, durations


def max_records(size):
    # Bounds each scenario's disk use to 1 GiB whatever the broker's speed (16 scenarios fill
    # up to 16 GiB per broker; the first full run at 2 GiB each hit ENOSPC on a shared disk).
    return min(20_000_000, (1 << 30) // size)


# The fastest end-to-end maximum measured on this machine was 579k/s (1 KiB, kactor); the disk
# estimate assumes it for the calibration run and half of it for each timed e2e run.
E2E_DISK_RATE = 600_000


def disk_need(prods, consumes, e2es, durations):
    """An upper estimate of one broker run's data directory at its peak: each producer scenario
    at its record bound, every consumer data set, the e2e runs at E2E_DISK_RATE, and the
    largest memory prime (written next to the data directory, then deleted). Records are
    counted with 20 bytes of framing besides the value (a v2 record without key or headers
    takes 7-11, plus its share of the batch header). Each broker run starts on an empty
    directory, so this is also the whole run's need."""
    def on_disk(records, size):
        return records * (size + 20)
    need = sum(on_disk(max_records(p.size), p.size) for p in prods)
    need += sum(on_disk(consume_records(durations["consume_mib"], p.size), p.size)
                for p in consumes)
    need += sum(on_disk(int(E2E_DISK_RATE * 1.5 * durations["e2e"]), size) for size, _ in e2es)
    return need + (4 << 30)


def disk_warning(datadir, need):
    """A line for the log and the report when the data directory's file system has less free
    space than `need`: a broker that hits ENOSPC fails the rest of its run (a full run with
    the e2e calibration ran out of 43 GB free)."""
    d = Path(datadir)
    while not d.exists():
        d = d.parent
    free = shutil.disk_usage(d).free
    if free >= need:
        return None
    return (f"{d} has {free / 1e9:.0f} GB free, and a run of this plan may write up to "
            f"{need / 1e9:.0f} GB: a broker that runs out of space fails its remaining "
            "scenarios (KACTOR_BENCH_DATA moves the data)")


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------
def run_tcp(durations, tcp_sizes):
    res = {}
    for ws in tcp_sizes:
        res[ws] = tool("tcp", "--write-size", ws, "--duration-s", durations["tcp"])
        log(f"tcp {ws} B writes: {res[ws].get('mib_per_s')} MiB/s")
    return res


def run_fetch_floor(durations):
    """The fetch round trip's loopback floor (see consume_ceiling), once per round."""
    res = {}
    for size in FETCH_FLOOR_SIZES:
        res[size] = tool("fetch-floor", "--response-size", size, "--send-buffer",
                         BROKER_SEND_BUFFER, "--duration-s", durations["tcp"])
        log(f"fetch floor {size >> 20} MiB: {get(res[size], 'rtt', 'mean_us')} µs")
    return res


def run_mock(prods, durations):
    """librdkafka's mock broker for every producer scenario: once per round, so the ceiling
    meets the same machine weather as the brokers it bounds."""
    res = {}
    for p in prods:
        r = tool("produce", "--mock", "--topic", p.topic, "--partitions", p.partitions,
                 "--record-size", p.size, "--acks", p.acks, "--producers", p.producers,
                 "--duration-s", durations["mock"], "--max-records", max_records(p.size))
        res[p.name] = r
        log(f"mock {p.name}: {r.get('records_per_s', r.get('error'))} rec/s")
    return res


def java_perf(b, topic, records, timeout=180):
    """Kafka's kafka-producer-perf-test then kafka-consumer-perf-test (reference figures)."""
    out = {}
    cmd = java_cmd(MAIN_CLASSES["producer-perf-test"],
                   ["--topic", topic, "--num-records", records, "--record-size", 1024,
                    "--throughput", -1, "--producer-props", f"bootstrap.servers={b.bootstrap}",
                    "acks=1"], heap="256m", quick=False)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        last = (p.stdout.strip().splitlines() or [""])[-1]
        m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                      r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
                      r"(\d+) ms 99.9th", last)
        out["producer"] = ({"records_per_s": float(m[1]), "mb_per_s": float(m[2]),
                            "avg_ms": float(m[3]), "max_ms": float(m[4]), "p50_ms": int(m[5]),
                            "p99_ms": int(m[7]), "p999_ms": int(m[8])}
                           if m else {"error": (p.stderr.strip() or last)[-300:]})
    except subprocess.TimeoutExpired:
        out["producer"] = {"error": f"timed out after {timeout}s"}
    cmd = java_cmd(MAIN_CLASSES["consumer-perf-test"],
                   ["--bootstrap-server", b.bootstrap, "--topic", topic, "--num-records", records,
                    "--timeout", 30000], heap="256m", quick=False)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rows = [ln for ln in p.stdout.splitlines() if ln and ln[0].isdigit()]
        if p.returncode == 0 and rows:
            cols = [c.strip() for c in rows[-1].split(",")]
            # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
            # nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
            out["consumer"] = {"mb_per_s": float(cols[3]), "records_per_s": float(cols[5]),
                               "records": int(cols[4]), "fetch_mb_per_s": float(cols[8])}
        else:
            out["consumer"] = {"error": (p.stderr.strip() or p.stdout.strip())[-300:]}
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        out["consumer"] = {"error": str(e)[:300]}
    return out


# Where this VM's guest reports free pages to the host (free page reporting: the host takes
# back their memory; see `settle`).
PAGE_REPORTING = Path("/sys/module/page_reporting/parameters/reported_kib")


def reporting_quiet():
    """Waits until the guest has stopped reporting free memory to the host: no report for 3 s
    (it reports in passes a second or two apart), at most 120 s. Returns what it saw, for the
    log; without free page reporting it returns at once."""
    if not PAGE_REPORTING.exists():
        return "no free page reporting"
    t0 = time.time()
    first = last = int(PAGE_REPORTING.read_text())
    quiet_since = t0
    while time.time() - t0 < 120 and time.time() - quiet_since < 3.0:
        time.sleep(0.1)
        now = int(PAGE_REPORTING.read_text())
        if now != last:
            last, quiet_since = now, time.time()
    return f"{(last - first) >> 10} MiB reported to the host, quiet after {time.time() - t0:.1f} s"


def drop_page_cache():
    """Empties the page cache of clean pages (`vm.drop_caches` = 1, after `settle`'s sync).
    Returns what it did, for the log; without root it does nothing."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
    except OSError as e:
        return f"page cache not dropped ({e.strerror})"
    return "page cache dropped"


def settle(datadir=None, will_write=0, drop_cache=False):
    """Writes back every dirty page (sync(2)) before a timed scenario, outside its window: the
    kernel starts background writeback, and then throttles writers, once enough of the page
    cache is dirty, so without it a scenario's figure depended on how many GiB the scenarios
    before it had written (the same acks=all scenario measured 586k rec/s in third place and
    941k alone), for either broker.

    Then, for a scenario that writes, primes guest memory: on this VM a page the guest has not
    touched for a while is no longer backed by the host, and the first write into it costs
    several times more (`dd` of 3 GiB into the page cache: 650-680 MB/s with the guest's
    memory idle for 30 s, 2.6-4.5 GB/s right after another 3 GiB file was deleted; perf showed
    the broker's copy into the page cache at 3x its usual cost per byte). Which scenario met
    cold memory depended on timing, so figures swung by 2-3x between runs, for either broker.
    Writing and deleting `will_write` bytes just before the clock starts gives a scenario backed
    pages, as a dedicated broker host has, in most rounds (see `prime_bytes`).

    `drop_cache` is for a scenario that writes for a while and measures latency. The guest
    reports free memory to the host in bursts (128-192 MiB per 100 ms), and a burst during a
    run can stall the run for 100-400 ms. The guest frees, and so reports, memory all the time
    once the page cache has filled it with earlier scenarios' logs: each new page comes from
    reclaiming an old one. In a kactor round after the full matrix, every e2e stall over
    100 ms overlapped a burst, and 5 of the 6 bursts came with a stall, while a fresh broker,
    on memory with nothing to reclaim, had none (p99 3-6 ms). A broker host that does not give
    memory back to a hypervisor has no such bursts. So the clean page cache is dropped, the
    prime's memory is written and freed, and after each the run waits until the guest has
    finished reporting (`reporting_quiet`): the run starts with free memory and nothing left
    to report. The price: the guest reports the prime's own memory too (3.3-3.5 GiB after a
    4 GiB prime), so an e2e run writes into pages the host must back again, and later in a run
    both brokers meet stalls of that kind (40 ms to 2.5 s, 8-12 s into a 12 s run, on a VM where
    1 MiB page-cache writes at 250 MiB/s took over 5 ms 89 times in 3,000 with no broker
    running). Not waiting after the prime brought the reporting bursts back into the runs."""
    os.sync()
    if drop_cache:
        log(f"{drop_page_cache()}; {reporting_quiet()}")
    if datadir is None or will_write <= 0:
        return
    scratch = Path(datadir).parent / ".bench-prime"
    block = b"\0" * MIB
    try:
        with open(scratch, "wb") as f:
            for _ in range(will_write // MIB + 1):
                f.write(block)
    finally:
        scratch.unlink(missing_ok=True)
    if drop_cache:
        log(f"primed; {reporting_quiet()}")


def prime_bytes(log_bytes):
    """How much guest memory `settle` primes for a scenario that writes `log_bytes` to the log.
    The page cache is not the only taker of free memory during the scenario: the load tool's
    buffers (VmHWM 143 MiB for a 1 KiB producer against kactor) and the index files draw from
    it too, so a prime of the log's size alone could leave the end of a scenario on cold
    memory. It does not remove every slow round: of the 48 rounds of the 1 KiB producer
    scenarios, those at 1.7x or more the broker CPU per GB of the same broker's best round of
    the scenario were 6 in the full run at 3b07317 (prime = log bytes; Kafka 3, kactor 3) and
    3 at 2db6c64 (this prime; all Kafka's). Capped at 4 GiB: writing it takes up to ~10 s on
    cold memory."""
    return min(int(log_bytes * 1.25) + (256 << 20), 4 << 30)


def warm_up(b, seconds):
    """Untimed load before the first scenario: 100 B and 1 KiB records produced for `seconds`
    each over 8 partitions, then read back. Kafka's JVM interprets the produce and fetch paths
    until the JIT has compiled them, so without it the first scenarios measured a cold Kafka
    (its 100 B acks=1 run, first in line, came out slower than the acks=all run after it).
    kactor gets the same, so both start the timed scenarios having done the same work."""
    done = {}
    if not seconds:
        return done
    for size in (100, 1024):
        topic = f"bench-warmup-{size}"
        w = tool("produce", "--bootstrap", b.bootstrap, "--topic", topic, "--partitions", 8,
                 "--record-size", size, "--acks", "1", "--producers", 1,
                 "--duration-s", seconds, "--max-records", max_records(size) // 4)
        n = w.get("records") or 0
        if n:
            tool("consume", "--bootstrap", b.bootstrap, "--topic", topic, "--expect", n,
                 "--duration-s", 60)
        done[size] = n
    log(f"{b.name}: warmed up with {done} records")
    return done


# The end-to-end maximum is measured with at most this many bytes of records sent and not yet
# consumed: room for several full 1 MB batches and fetches in flight. Against kactor (1 KiB,
# 6 s runs, acks=1 / all) 8 MiB gave 333-579k/s; 2 MiB 265-270k/s, 32 MiB 299-337k/s and
# 128 MiB 274-297k/s (at 128 MiB the consumer was 0.4 s behind at p50: the run measured a
# backlog again).
E2E_MAX_UNCONSUMED_BYTES = 8 << 20


def e2e_prime(rate, size, durations):
    """The memory prime before an e2e run at `rate` records/s (see `prime_bytes`)."""
    return prime_bytes(int(rate * durations["e2e"] * (size + 80)))


def e2e_rate(b, res, size, acks, durations, datadir, linger, e2e_max):
    """The e2e scenario's fixed rate: half of the first broker's (Kafka's) maximum, measured on
    it before its first e2e run. With `--e2e-basis pipeline` (the default) the maximum is the
    end-to-end one: the e2e tool's producer and consumer running together, as in the timed run,
    the producer held to what the consumer keeps up with (E2E_MAX_UNCONSUMED_BYTES), and the
    consumer's rate over the run taken. With `--e2e-basis producer` it is the producer-only
    scenario's rate; on 2 cores, half of that leaves no room for the consumer, and both
    brokers' e2e latencies came out as backlog (at 340k/s: p50 1.5 s on Kafka and 0.3 s on
    kactor, p99 2-4 s on both)."""
    produced = res["produce"].get(Produce(size, acks, 1, 1).name, {}).get("records_per_s")
    if E2E_BASIS["basis"] == "producer":
        e2e_max[(size, acks)] = {"basis": "producer", "target": b.name, "max": produced}
        return round(produced * 0.5) if produced else 1000
    settle(datadir, e2e_prime(produced or 1e6, size, durations), drop_cache=True)
    r = tool("e2e", "--bootstrap", b.bootstrap, "--topic", f"bench-e2e-max-{size}-{acks}",
             "--record-size", size, "--acks", acks,
             "--max-unconsumed", max(1, E2E_MAX_UNCONSUMED_BYTES // size),
             "--duration-s", durations["e2e"], "--linger-ms", linger,
             timeout=durations["e2e"] + 120)
    mx = r.get("received_rate")
    e2e_max[(size, acks)] = {"basis": "pipeline", "target": b.name, "max": mx,
                             "error": r.get("error")}
    log(f"{b.name} e2e {size}B acks={acks} end-to-end max: {mx or r.get('error')}")
    return round(mx * 0.5) if mx else 1000


# `--e2e-basis`: what the e2e rate is half of (see e2e_rate).
E2E_BASIS = {"basis": "pipeline"}


# `--e2e-debug`: librdkafka debug contexts for the e2e tool's producer and consumer, and the
# directory their logs go to.
E2E_DEBUG = {"contexts": None, "dir": None}


def e2e_debug_args(target, size, acks):
    """The e2e tool's extra arguments and its log file under `--e2e-debug` (else none). The log
    lines carry the Unix time and the e2e result its `start_unix_s`, so a stall in the
    timeline can be matched to the Produce and Fetch requests around it."""
    if not E2E_DEBUG["contexts"]:
        return [], None
    d = Path(E2E_DEBUG["dir"])
    d.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%H%M%S")
    return (["-X", f"debug={E2E_DEBUG['contexts']}"],
            d / f"e2e-{target}-{size}B-acks{acks}-{stamp}.log")


def run_broker(target, prods, consumes, e2es, durations, datadir, e2e_rates, java_tools,
               e2e_linger, e2e_max):
    """Everything measured against one broker; returns a dict of results (never raises for a
    scenario failure: the failure is recorded in its cell)."""
    res = {"target": target, "produce": {}, "consume": {}, "e2e": {}, "loadavg_start":
           os.getloadavg()}
    if datadir.exists():
        shutil.rmtree(datadir)
    b = BenchBroker(datadir, target)
    try:
        b.start()
        fp = tool("first-produce", "--bootstrap", b.bootstrap, "--topic", "bench-first",
                  "--since-unix-us", int(b.launched_at * 1e6), "--timeout-s", 90, timeout=120)
        res["first_produce"] = fp
        if "error" in fp:
            res["fatal"] = f"no first produce: {fp['error']}"
            return res
        log(f"{target}: first produce after {fp['start_to_first_produce_ms']:.0f} ms")
        time.sleep(3)
        res["idle_rss"] = b.proc_status("VmRSS")
        res["warmup"] = warm_up(b, durations["warmup"])
        cpu_total, bytes_total = 0.0, 0
        for p in prods:
            if not b.is_running():
                raise BrokerError(f"{target} died:\n{b.log_tail(20)}")
            # What the scenario may write at most, plus its indexes and batch overhead.
            settle(datadir, prime_bytes(max_records(p.size) * (p.size + 80)))
            c0 = b.cpu_seconds()
            r = tool("produce", "--bootstrap", b.bootstrap, "--topic", p.topic,
                     "--partitions", p.partitions, "--record-size", p.size, "--acks", p.acks,
                     "--producers", p.producers, "--duration-s", durations["produce"],
                     "--max-records", max_records(p.size))
            cpu = b.cpu_seconds() - c0
            r["broker_cpu_s"] = round(cpu, 3)
            if "error" not in r and r.get("bytes"):
                # Topic creation is inside the window; it is small next to the load.
                r["cpu_s_per_gb"] = round(cpu / (r["bytes"] / 1e9), 3)
                cpu_total += cpu
                bytes_total += r["bytes"]
            res["produce"][p.name] = r
            log(f"{target} {p.name}: {r.get('records_per_s', r.get('error'))} rec/s, "
                f"{r.get('mib_per_s')} MiB/s, cpu {cpu:.1f}s")
        res["cpu_s_per_gb"] = round(cpu_total / (bytes_total / 1e9), 3) if bytes_total else None
        for p in consumes:
            n, topic = consume_records(durations["consume_mib"], p.size), consume_topic(p)
            fill = tool("produce", "--bootstrap", b.bootstrap, "--topic", topic,
                        "--partitions", p.partitions, "--record-size", p.size, "--acks", "1",
                        "--producers", 1, "--duration-s", 600, "--max-records", n,
                        "-X", f"linger.ms={FILL_LINGER_MS}", timeout=700)
            if fill.get("records") != n:
                res["consume"][consume_name(p)] = {
                    "error": f"writing the data set: {fill.get('error') or fill.get('records')}"
                             f" of {n} records"}
                continue
            settle()
            c0 = b.cpu_seconds()
            r = tool("consume", "--bootstrap", b.bootstrap, "--topic", topic,
                     "--expect", n, "--duration-s", durations["consume"])
            r["broker_cpu_s"] = round(b.cpu_seconds() - c0, 3)
            res["consume"][consume_name(p)] = r
            log(f"{target} consume {topic}: {r.get('records_per_s', r.get('error'))} rec/s")
        for size, acks in e2es:
            rate = e2e_rates.get((size, acks))
            if not rate:
                rate = e2e_rates[(size, acks)] = e2e_rate(
                    b, res, size, acks, durations, datadir, e2e_linger, e2e_max)
            settle(datadir, e2e_prime(rate, size, durations), drop_cache=True)
            debug, log_to = e2e_debug_args(target, size, acks)
            r = tool("e2e", "--bootstrap", b.bootstrap, "--topic", f"bench-e2e-{size}-{acks}",
                     "--record-size", size, "--acks", acks, "--rate", rate,
                     "--duration-s", durations["e2e"], "--linger-ms", e2e_linger, *debug,
                     timeout=durations["e2e"] + 120, stderr_to=log_to)
            res["e2e"][(size, acks)] = r
            log(f"{target} e2e {size}B acks={acks} @ {rate}/s: {r.get('latency', r.get('error'))}")
        if java_tools and prods:
            topic = "bench-javaperf"
            tool("create-topic", "--bootstrap", b.bootstrap, "--topic", topic)
            res["java"] = java_perf(b, topic, 300_000 if durations["produce"] < 8 else 600_000)
            log(f"{target} java perf tools: {res['java']}")
        res["peak_rss"] = b.proc_status("VmHWM")
    except (BrokerError, OSError) as e:
        res["fatal"] = str(e)[:500]
        log(f"{target}: {res['fatal']}")
    finally:
        if b.proc is not None and b.proc.poll() is not None and "fatal" not in res:
            res["fatal"] = f"exited with rc {b.proc.returncode} during the run; later cells failed"
        res["stop_rc"] = b.stop()
        res["loadavg_end"] = os.getloadavg()
        res["log_tail"] = b.log_tail(15)
    return res


def median_pick(results, *key):
    """Of one scenario's results over the rounds, the one whose `key` is the median (the lower
    one for an even count), with every round's value under "rounds" in round order (None for
    a round that failed), so the report can show the spread and pair the brokers' rounds."""
    ok = [r for r in results if r and "error" not in r and get(r, *key) is not None]
    if not ok:
        return next((r for r in reversed(results) if r), None)
    ok.sort(key=lambda r: get(r, *key))
    pick = dict(ok[(len(ok) - 1) // 2])
    pick["rounds"] = [get(r, *key) if r and "error" not in r else None for r in results]
    return pick


def median_low(values):
    vals = sorted(v for v in values if v is not None)
    return vals[(len(vals) - 1) // 2] if vals else None


def merge_rounds(runs):
    """One broker's rounds folded into the shape of a single run: each scenario is its median
    round; each e2e percentile is the median of that percentile over the rounds."""
    m = {"target": runs[0]["target"], "rounds": len(runs),
         "loadavg_start": runs[0].get("loadavg_start")}
    for sect in ("produce", "consume"):
        names = list(dict.fromkeys(n for r in runs for n in r.get(sect, {})))
        m[sect] = {n: median_pick([get(r, sect, n) for r in runs], "records_per_s")
                   for n in names}
    for n, cell in m["produce"].items():
        if cell:
            cell["cpu_rounds"] = [get(r, "produce", n, "cpu_s_per_gb") for r in runs]
    m["e2e"] = {}
    for key in dict.fromkeys(k for r in runs for k in r.get("e2e", {})):
        rs = [get(r, "e2e", key) for r in runs]
        pick = median_pick(rs, "latency", "p99_us")
        if pick and "error" not in pick:
            ok = [r for r in rs if r and "error" not in r]
            for part in ("latency", "produce_latency"):
                pick[part] = {k: median_low(get(r, part, k) for r in ok)
                              for k in (get(pick, part) or {})}
        m["e2e"][key] = pick
    m["cpu_s_per_gb"] = median_low(r.get("cpu_s_per_gb") for r in runs)
    m["idle_rss"] = median_low(r.get("idle_rss") for r in runs)
    m["peak_rss"] = max((r["peak_rss"] for r in runs if r.get("peak_rss")), default=None)
    fp = median_pick([r.get("first_produce") for r in runs], "start_to_first_produce_ms")
    if fp:
        m["first_produce"] = fp
    java = next((r["java"] for r in runs if r.get("java")), None)
    if java:
        m["java"] = java
    failed = [f"round {i + 1}: {r['fatal']}" for i, r in enumerate(runs) if "fatal" in r]
    if failed and len(failed) == len(runs):
        m["fatal"] = failed[-1]
    elif failed:
        m["round_failures"] = failed
    return m


def merge_mock(rounds):
    names = dict.fromkeys(n for r in rounds for n in r)
    return {n: median_pick([r.get(n) for r in rounds], "records_per_s") for n in names}


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def fmt_rate(r):
    if not r:
        return "–"
    if "error" in r:
        return "failed"
    return f"{r['records_per_s']:,.0f} ({r['mib_per_s']:.1f} MiB/s)"


def ratio(a, b, invert=False):
    if a is None or b is None or b == 0 or a == 0:
        return "–"
    return f"{(b / a if invert else a / b):.2f}×"


def get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, "
            f"Linux {platform.release()}")


def git_rev():
    # KACTOR_REV names the commit the kactor binary was built from when it is not the
    # working tree's HEAD (e.g. a clean export of a commit).
    if os.environ.get("KACTOR_REV"):
        return os.environ["KACTOR_REV"]
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def col(res, target):
    return res.get(target) or {}


def cpu_rounds(cell):
    """A producer cell's broker CPU seconds per GB, each round (the median round's alone when
    the cell has no rounds)."""
    vals = (cell or {}).get("cpu_rounds") or [get(cell, "cpu_s_per_gb")]
    return " · ".join("–" if v is None else f"{v:.2f}" for v in vals)


def e2e_rate_text(fixed, maxima):
    """Where the e2e rates came from (see e2e_rate)."""
    if fixed:
        return f"The rate is fixed by `--e2e-rate {fixed}`."
    if not maxima:
        return "No e2e rate was measured."
    first = next(iter(maxima.values()))
    who = "Apache Kafka" if first["target"] == "kafka" else first["target"]
    figures = ", ".join(
        f"{size_label(size)} acks={acks}: "
        + (f"{m['max']:,.0f}/s" if m.get("max") else f"not measured ({m.get('error')})")
        for (size, acks), m in maxima.items())
    if first["basis"] == "producer":
        return (f"Each rate is 50% of {who}'s producer-only maximum (its first round of the "
                f"p=1 x1 producer scenario; `--e2e-basis producer`): {figures}.")
    return (f"Each rate is 50% of {who}'s end-to-end maximum, measured in its first round just "
            "before its e2e runs: the e2e tool's producer and consumer running together, as in "
            f"the timed runs, the producer held to at most {E2E_MAX_UNCONSUMED_BYTES >> 20} MiB "
            f"of records not yet consumed, and the consumer's rate taken: {figures}. 50% of the "
            "producer-only maximum (`--e2e-basis producer`) leaves the consumer no room on "
            "2 cores: both brokers fell behind (p99 2-4 s), so the latencies measured the "
            "backlog.")


def report(args, res, ceilings, prods, consumes, e2es, e2e_rates, t_start, load_start):
    K, R = col(res, "kafka"), col(res, "kactor")

    def pending(r):
        if not r:
            return "not run"
        return f"pending ({r['fatal'][:120]})" if "fatal" in r else None

    out = []
    w = out.append
    w("# kactor vs Apache Kafka 4.4.0 — benchmark results\n")
    w(f"- Date: {t_start:%Y-%m-%d %H:%M} UTC; command: `scripts/bench {' '.join(args.argv)}`"
      f" (mode {args.mode}); kactor commit {git_rev()}")
    w(f"- Machine: {machine()}")
    w(f"- Load average (1/5/15 min) at start: {' / '.join(f'{x:.2f}' for x in load_start)}; "
      + "; ".join(f"{t} run {' / '.join(f'{x:.2f}' for x in col(res, t).get('loadavg_start', ()))}"
                  for t in ("kafka", "kactor") if col(res, t))
      + (" — **the machine was shared with other work: absolute figures are noisy**"
         if load_start[0] >= 3 else ""))
    w("- Both brokers: single node, combined mode (broker+controller), same data dir and ports, "
      "`log.flush.interval.messages=Long.MAX` (no fsync per request); every timed scenario "
      "starts after a sync(2), so none inherits the page-cache writeback of the ones before it, "
      "and one that writes starts right after a scratch file of its size (x1.25, plus 256 MiB "
      "for the client's buffers) was written and deleted: on this VM, page-cache writes into "
      "guest memory left idle for a while run several times slower (host backing; `dd` of "
      "3 GiB: 650 MB/s cold, 2.6-4.5 GB/s right after a delete), which otherwise hit whichever "
      "scenario met cold memory; it still happens now and then (see the CPU per GB by "
      "scenario). Before an e2e run the clean page cache is also dropped (as root), and after "
      "the drop and after the scratch file the run waits until the guest has stopped "
      "reporting freed memory to the host (free page reporting): a report burst during a run "
      "stalled it for 100-400 ms, and once earlier scenarios' logs fill the page cache every "
      "new page is a reclaimed one, so bursts came every few seconds. "
      + (f"Before the first scenario each broker is warmed up alike "
         f"({args.durations['warmup']:.0f} s of 100 B and of 1 KiB records over 8 partitions, "
         "read back), so Kafka's JIT has compiled its produce and fetch paths. "
         if args.durations.get("warmup") else "") +
      "Kafka: "
      f"`{' '.join(KAFKA_JVM_DEFAULTS[:2])}` G1 (kafka-server-start.sh defaults).")
    w("- Load: kactor-bench (librdkafka 2.12.1 via rdkafka 0.38), linger.ms=5, no compression, "
      "no idempotence, records without keys spread round-robin over the partitions; "
      f"{args.durations['produce']:.0f} s per producer scenario, one record in 16 timed for "
      "the latency columns (a clock read per record cost the client a fifth of its CPU on this "
      "VM); consumers take records in batches (`rd_kafka_consume_batch_queue`, what "
      "confluent-kafka-python's `consume(n)` calls) with librdkafka's "
      "defaults except `fetch.queue.backoff.ms=10` (default 1000: librdkafka stops fetching a "
      "partition for 1 s whenever its local queue holds 100,000 records, which at 100 B is "
      "~50 ms of work for the application; with the default, 100 B consumer figures mostly "
      "counted those pauses, for either broker). Ratios are kactor / Kafka "
      "(for latency, CPU and memory lower is better, so the ratio shown is kactor / Kafka too).")
    if args.rounds > 1:
        w(f"- {args.rounds} rounds: every scenario ran {args.rounds} times on each broker, the "
          "brokers alternating (Kafka then kactor, kactor then Kafka, ...), each run on a "
          "freshly started broker with an empty data dir, and the mock broker once per round. "
          "A cell shows the broker's median round (for e2e, each percentile's median over the "
          "rounds); the ratio is of the medians, and 'per round' pairs each round's kactor "
          "figure with the same round's Kafka figure, so the spread is there to see.")
    w("- client cores: CPU seconds the load tool used in the timed window per second (this "
      "machine has 2 cores; near 2 minus the broker's share, the client is the limit).")
    if getattr(args, "disk_warning", None):
        w(f"- **Disk: {args.disk_warning}.**")
    for t, r in (("kactor", R), ("Apache Kafka", K)):
        if pending(r):
            w(f"- **{t}: {pending(r)}**")
        for f in r.get("round_failures", []):
            w(f"- **{t}, {f[:160]}**")
    w("")

    # --only 'consume ...' runs no producer scenario.
    if prods:
        w("## Producer throughput (records/s, MiB/s of values)\n")
        w("| scenario | Apache Kafka | kactor | kactor / Kafka | per round | "
          "mock broker (ceiling) | kactor / mock | p99 ms Kafka | p99 ms kactor | "
          "client cores Kafka / kactor / mock |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for p in prods:
            k, r = get(K, "produce", p.name), get(R, "produce", p.name)
            m = ceilings["mock"].get(p.name)
            w(f"| {p.name} | {fmt_rate(k)} | {fmt_rate(r)} | "
              f"{ratio(get(r, 'records_per_s'), get(k, 'records_per_s'))} | {per_round(k, r)} | "
              f"{fmt_rate(m)} | {ratio(get(r, 'records_per_s'), get(m, 'records_per_s'))} | "
              f"{ms(get(k, 'latency', 'p99_us'))} | {ms(get(r, 'latency', 'p99_us'))} | "
              f"{cores(k, r, m)} |")
        w("")
    if prods:
        w("## Broker CPU seconds per GB written, by scenario\n")
        w("Each round's figure, in round order. A round far above the broker's others is one "
          "whose writes met slow guest memory: in such windows perf showed the broker's copy "
          "into the page cache (`copy_folio_from_iter_atomic` under `pwrite64`) take 64-84% of "
          "its partition thread, against 8-36% otherwise, and a 1 MiB `pwrite64` take 5-8 ms; "
          "on this VM, writes into memory freed more than ~10 s earlier run at 0.4-0.7 GB/s, "
          "against 4-5 GB/s into memory just freed. It hits either broker, whichever scenario "
          "meets it, and slows that round's throughput with it.\n")
        w("| scenario | Apache Kafka | kactor | kactor / Kafka (median rounds) |")
        w("|---|---|---|---|")
        for p in prods:
            k, r = get(K, "produce", p.name), get(R, "produce", p.name)
            kv, rv = get(k, "cpu_s_per_gb"), get(r, "cpu_s_per_gb")
            w(f"| {p.name} | {cpu_rounds(k)} | {cpu_rounds(r)} | {ratio(rv, kv)} |")
        w("")
    if consumes:
        w("## Consumer throughput (one consumer reading a prepared data set)\n")
        w(f"Each broker first gets the same data set: {args.durations['consume_mib']} MiB of "
          "values (e.g. "
          f"{consume_records(args.durations['consume_mib'], 100):,} records of 100 B) written "
          f"by one acks=1 producer with linger.ms={FILL_LINGER_MS}, so every batch closes full "
          "and both logs hold the same batches. "
          "Timed from assignment (no consumer group) to the last record, with the connection "
          "to each partition leader already open (librdkafka opens it lazily, 0.5-1 s after "
          "the bootstrap metadata whatever the broker; a watermark query before the clock "
          "starts opens it); the wait for the first record (ListOffsets, first Fetch) is "
          "included and also shown apart. `fetch.queue.backoff.ms=10`: see Load above. "
          "The fetch cycle is the time between the client's fetch requests while records "
          "flow (librdkafka keeps one in flight), and the round trip its part from request "
          "written to response read (librdkafka's statistics); a broker can shorten only the "
          "round trip, and not below the loopback floor for a response of that size: a "
          "server that only answers each request from a file by sendfile, through the same "
          "socket send buffer as the brokers (Kafka's default `socket.send.buffer.bytes`, "
          "100 KiB; machine ceilings below). 'any broker' is Kafka's figure with its round "
          "trip cut to that floor: the most a broker could read at with this client on this "
          "machine.\n")
        w("| scenario | Apache Kafka | kactor | kactor / Kafka | per round | "
          "first record ms Kafka | first record ms kactor | client cores Kafka / kactor | "
          "fetch cycle / round trip µs Kafka | kactor | any broker / Kafka |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for p in consumes:
            n = p.name.replace("produce", "consume")
            k, r = get(K, "consume", n), get(R, "consume", n)
            fk, fr = get(k, "ms_to_first_record"), get(r, "ms_to_first_record")
            w(f"| {n} | {fmt_rate(k)}{incomplete(k)} | {fmt_rate(r)}{incomplete(r)} | "
              f"{ratio(get(r, 'records_per_s'), get(k, 'records_per_s'))} | "
              f"{per_round(k, r)} | "
              f"{f'{fk:.0f}' if fk else '–'} | {f'{fr:.0f}' if fr else '–'} | "
              f"{cores(k, r)} | {fetch_cycle(k)} | {fetch_cycle(r)} | "
              f"{f'{c:.2f}×' if (c := consume_ceiling(k, ceilings)) else '–'} |")
        w("")
    if e2es:
        w("## End-to-end latency at a fixed rate (µs from scheduled send to consume; "
          f"linger.ms={args.e2e_linger_ms})\n")
        w(e2e_rate_text(getattr(args, "e2e_rate", None), getattr(args, "e2e_max", {})) + "\n")
        w("| scenario | metric | Apache Kafka | kactor | kactor / Kafka |")
        w("|---|---|---|---|---|")
        for key in e2es:
            size, acks = key
            k, r = get(K, "e2e", key), get(R, "e2e", key)
            rate = e2e_rates.get(key)
            label = (f"{size_label(size)} acks={acks} p=1 @ "
                     + (f"{rate:,}/s" if rate else "?"))
            for metric, name in (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"),
                                 ("max_us", "max")):
                kv, rv = get(k, "latency", metric), get(r, "latency", metric)
                w(f"| {label} | {name} | {us(kv, k)} | {us(rv, r)} | {ratio(rv, kv)} |")
            kv, rv = get(k, "produce_latency", "p50_us"), get(r, "produce_latency", "p50_us")
            w(f"| {label} | p50 scheduled send → ack (µs) | "
              f"{us(kv, k)} | {us(rv, r)} | {ratio(rv, kv)} |")
            w(f"| {label} | received / sent | {recv(k)} | {recv(r)} | |")
        w("")
    w("## Broker resources\n")
    w("| metric | Apache Kafka | kactor | kactor / Kafka |")
    w("|---|---|---|---|")
    rows = [
        ("CPU seconds per GB written (all producer scenarios)", K.get("cpu_s_per_gb"),
         R.get("cpu_s_per_gb"), lambda v: f"{v:.2f}"),
        ("idle RSS (MiB, 3 s after first produce)", mib(K.get("idle_rss")),
         mib(R.get("idle_rss")), lambda v: f"{v:.1f}"),
        ("peak RSS (MiB, VmHWM)", mib(K.get("peak_rss")), mib(R.get("peak_rss")),
         lambda v: f"{v:.1f}"),
        ("start to first produce (ms; acks=all, topic auto-created)",
         get(K, "first_produce", "start_to_first_produce_ms"),
         get(R, "first_produce", "start_to_first_produce_ms"), lambda v: f"{v:.0f}"),
        ("start to listener accepting (ms)",
         get(K, "first_produce", "start_to_listening_ms"),
         get(R, "first_produce", "start_to_listening_ms"), lambda v: f"{v:.0f}"),
    ]
    for name, kv, rv, f in rows:
        w(f"| {name} | {f(kv) if kv is not None else '–'} | {f(rv) if rv is not None else '–'} "
          f"| {ratio(rv, kv)} |")
    w("")
    if get(K, "java") or get(R, "java"):
        w("## Reference: Kafka's own perf tools (1 KiB, acks=1, Java client defaults)\n")
        w("| tool | Apache Kafka | kactor | kactor / Kafka |")
        w("|---|---|---|---|")
        kp, rp = get(K, "java", "producer"), get(R, "java", "producer")
        w(f"| kafka-producer-perf-test records/s (MB/s) | {jp(kp)} | {jp(rp)} | "
          f"{ratio(get(rp, 'records_per_s'), get(kp, 'records_per_s'))} |")
        w(f"| kafka-producer-perf-test p99 / p99.9 ms | {jl(kp)} | {jl(rp)} | |")
        kc, rc = get(K, "java", "consumer"), get(R, "java", "consumer")
        w(f"| kafka-consumer-perf-test records/s (MB/s) | {jp(kc)} | {jp(rc)} | "
          f"{ratio(get(rc, 'records_per_s'), get(kc, 'records_per_s'))} |")
        w("")
    w("## Machine ceilings (same run)\n")
    w("| ceiling | value |")
    w("|---|---|")
    for ws, r in ceilings["tcp"].items():
        v = f"{r['mib_per_s']:,.0f} MiB/s ({r['writes_per_s']:,.0f} writes/s)" \
            if "error" not in r else "failed"
        w(f"| loopback TCP, {ws} B writes (one connection) | {v} |")
    for size, r in ceilings.get("fetch_floor", {}).items():
        v = (f"{r['rtt']['mean_us']:,.0f} µs mean, {r['rtt']['p50_us']:,} µs p50"
             if "error" not in r else "failed")
        w(f"| fetch round trip floor, {size >> 20} MiB response by sendfile, 100 KiB send "
          f"buffer | {v} |")
    w("| librdkafka mock broker (`test.mock.num.brokers`) | see the producer table |")
    w("")
    w(targets(K, R, prods, consumes, e2es, ceilings))
    errs = [(t, n, get(v, "error") or get(v, "first_error"))
            for t, c in (("kafka", K), ("kactor", R))
            for sect in ("produce", "consume", "e2e") for n, v in (c.get(sect) or {}).items()
            if get(v, "error") or get(v, "first_error")]
    if errs:
        w("## Errors seen\n")
        for t, n, e in errs[:20]:
            w(f"- {t} {n}: {e}")
        w("")
    return "\n".join(out)


def targets(K, R, prods, consumes, e2es, ceilings):
    """The issue's targets, checked against this run's figures."""
    lines = ["## Targets (issue #7)\n", "| target | measured | met |", "|---|---|---|"]

    def row(name, value, ok):
        lines.append(f"| {name} | {value} | {'–' if ok is None else ('yes' if ok else 'no')} |")

    def prod_ratio(size, acks):
        rs = [(get(R, "produce", p.name, "records_per_s"), get(K, "produce", p.name,
                                                                "records_per_s"))
              for p in prods if p.size == size and p.acks == acks]
        rs = [r / k for r, k in rs if r and k]
        return min(rs) if rs else None

    for size, need in ((1024, 1.5), (100, 2.0)):
        for acks in ("1", "all"):
            v = prod_ratio(size, acks)
            row(f"producer {size} B acks={acks} ≥ {need}× Kafka (worst scenario)",
                f"{v:.2f}×" if v else "–", None if v is None else v >= need)
    cr = [get(R, "consume", n, "records_per_s") / get(K, "consume", n, "records_per_s")
          for n in (p.name.replace("produce", "consume") for p in consumes)
          if get(R, "consume", n, "records_per_s") and get(K, "consume", n, "records_per_s")]
    row("consumer ≥ 1.5× Kafka (worst)", f"{min(cr):.2f}×" if cr else "–",
        None if not cr else min(cr) >= 1.5)
    for metric, need in (("p99_us", 0.5), ("p999_us", 0.25)):
        rs = [get(R, "e2e", k, "latency", metric) / get(K, "e2e", k, "latency", metric)
              for k in e2es if get(R, "e2e", k, "latency", metric)
              and get(K, "e2e", k, "latency", metric)]
        row(f"e2e {metric[:-3].replace('p999', 'p99.9')} ≤ {need}× Kafka (worst)",
            f"{max(rs):.2f}×" if rs else "–", None if not rs else max(rs) <= need)
    kc, rc = K.get("cpu_s_per_gb"), R.get("cpu_s_per_gb")
    row("CPU per GB ≤ 0.5× Kafka", f"{rc / kc:.2f}×" if kc and rc else "–",
        None if not (kc and rc) else rc / kc <= 0.5)
    idle = mib(R.get("idle_rss"))
    row("idle RSS ≤ 30 MiB", f"{idle:.1f} MiB" if idle else "–", None if not idle else idle <= 30)
    fp = get(R, "first_produce", "start_to_first_produce_ms")
    row("start to first produce ≤ 100 ms", f"{fp:.0f} ms" if fp else "–",
        None if not fp else fp <= 100)
    ms_ = [get(R, "produce", p.name, "records_per_s") / get(ceilings, "mock", p.name,
                                                             "records_per_s")
           for p in prods if p.size == 1024 and get(R, "produce", p.name, "records_per_s")
           and get(ceilings, "mock", p.name, "records_per_s")]
    row("producer 1 KiB ≥ 70% of the mock-broker ceiling (worst)",
        f"{min(ms_):.0%}" if ms_ else "–", None if not ms_ else min(ms_) >= 0.7)
    # What the producer targets can be held against: the mock broker answers from inside the
    # client and writes nothing, so no broker driven by this client on this machine can lead
    # Kafka by more than the mock does.
    for size in (100, 1024):
        cs = [get(ceilings, "mock", p.name, "records_per_s") / get(K, "produce", p.name,
                                                                   "records_per_s")
              for p in prods if p.size == size and get(K, "produce", p.name, "records_per_s")
              and get(ceilings, "mock", p.name, "records_per_s")]
        if cs:
            row(f"(ceiling) mock broker / Kafka at {size} B: the most any broker could show",
                f"{min(cs):.2f}–{max(cs):.2f}×", None)
    # The consumer's counterpart: Kafka's fetch cycle with its round trip cut to the loopback
    # floor (see consume_ceiling).
    cs = [c for p in consumes
          if (c := consume_ceiling(get(K, "consume", consume_name(p)), ceilings))]
    if cs:
        row("(ceiling) consumer: Kafka's fetch cycle with its round trip cut to the loopback "
            "floor, / Kafka: the most any broker could show",
            f"{min(cs):.2f}–{max(cs):.2f}×", None)
    lines.append("")
    return "\n".join(lines)


def fetch_cycle(r):
    c = get(r, "fetch_cycle")
    return f"{c['cycle_us']:,.0f} / {c['rtt_us']:,.0f}" if c else "–"


def per_round(k, r):
    """kactor / Kafka for each round, from the two brokers' runs of the same round."""
    kv, rv = get(k, "rounds"), get(r, "rounds")
    if not kv or not rv or len(kv) < 2:
        return "–"
    return " · ".join(f"{b / a:.2f}" if a and b else "–" for a, b in zip(kv, rv))


def cores(*results):
    return " / ".join(f"{c:.2f}" if (c := get(x, "client_cores")) is not None else "–"
                      for x in results)


def ms(v):
    return f"{v / 1000:.1f}" if v is not None else "–"


def us(v, r):
    if r and "error" in r:
        return "failed"
    return f"{v:,}" if v is not None else "–"


def mib(v):
    return v / MIB if v else None


def recv(r):
    if not r or "error" in r:
        return "–"
    return f"{r['received']:,} / {r['sent']:,}"


def incomplete(r):
    if r and "error" not in r and not r.get("complete", True):
        return f" (incomplete: {r['records']:,}/{r['expected']:,})"
    return ""


def jp(r):
    if not r:
        return "–"
    if "error" in r:
        return "failed: " + r["error"].splitlines()[0][:60]
    return f"{r['records_per_s']:,.0f} ({r['mb_per_s']:.1f})"


def jl(r):
    if not r or "error" in r:
        return "–"
    return f"{r['p99_ms']} / {r['p999_ms']}"


# ---------------------------------------------------------------------------------------------
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--smoke", dest="mode", action="store_const", const="smoke",
                   help="≈10 s of load per broker, 2 producer scenarios (CI)")
    g.add_argument("--quick", dest="mode", action="store_const", const="quick",
                   help="fewer, shorter scenarios")
    ap.set_defaults(mode="full")
    ap.add_argument("--only", help="regex over scenario names, e.g. '1KiB acks=1'")
    ap.add_argument("--brokers", default="kafka,kactor",
                    help="which brokers, in order (Kafka first sets the e2e rate)")
    ap.add_argument("--no-java-tools", action="store_true",
                    help="skip kafka-producer/consumer-perf-test")
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--e2e-rate", type=int, help="fixed e2e rate instead of 50%% of Kafka's max")
    ap.add_argument("--e2e-basis", choices=("pipeline", "producer"), default="pipeline",
                    help="the max the e2e rate is 50%% of: Kafka's end-to-end max (producer "
                         "and consumer together, the producer held to what the consumer keeps "
                         "up with) or its producer-only max, which on 2 cores leaves the "
                         "consumer no room (both brokers fall behind: p99 2-4 s)")
    ap.add_argument("--e2e-linger-ms", type=int, default=1,
                    help="producer linger in the e2e scenario (0 falls behind 50%% of the max "
                         "rate on 2 cores: the client, not the broker, would set the latency)")
    ap.add_argument("--e2e-debug", metavar="CONTEXTS",
                    help="librdkafka debug contexts for the e2e clients (e.g. fetch,protocol: "
                         "each Produce and Fetch request's send time and rtt); the logs go to "
                         "--e2e-debug-dir")
    ap.add_argument("--e2e-debug-dir", default=str(ROOT / ".cache" / "bench-e2e-logs"),
                    help="where --e2e-debug writes one log per e2e run")
    ap.add_argument("--out", help="where to write the report ('-' for nowhere; default "
                    "bench/RESULTS.md, except --smoke, which only prints)")
    ap.add_argument("--json", help="also dump the raw results here")
    ap.add_argument("--rounds", type=int,
                    help="times each broker runs every scenario, alternating brokers; the "
                         "report shows the median round (default: 3, --smoke 1)")
    ap.add_argument("--port-base", type=int, default=PORTS["client"],
                    help="client port; controller and HTTP take the next two")
    args = ap.parse_args(argv)
    PORTS.update(client=args.port_base, controller=args.port_base + 1, http=args.port_base + 2)
    args.argv = argv
    E2E_DEBUG.update(contexts=args.e2e_debug, dir=args.e2e_debug_dir)
    E2E_BASIS.update(basis=args.e2e_basis)
    if args.out is None:
        args.out = "-" if args.mode == "smoke" else str(ROOT / "bench" / "RESULTS.md")
    if not load_bin().exists():
        sys.exit(f"{load_bin()} missing: build with `cargo build --release -p kactor-bench`")
    if not ports_free():
        sys.exit(f"ports {sorted(PORTS.values())} are in use on 127.0.0.1")
    prods, consumes, e2es, durations = plan(args.mode, args.only)
    if args.rounds is None:
        args.rounds = 1 if args.mode == "smoke" else 3
    args.rounds = max(1, args.rounds)
    args.durations = durations
    if args.mode == "smoke" or args.no_java_tools:
        java_tools = False
    else:
        java_tools = True
    t_start = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()
    log(f"mode {args.mode}: {len(prods)} producer, {len(consumes)} consumer, {len(e2es)} e2e "
        f"scenarios; load average {load_start[0]:.2f}")
    tcp_sizes = sorted({p.size for p in prods} | {65536})
    ceilings = {"tcp": {} if args.no_ceilings else run_tcp(durations, tcp_sizes), "mock": {},
                "fetch_floor": {}}
    e2e_rates = {k: args.e2e_rate for k in e2es} if args.e2e_rate else {}
    # Filled by the first broker's first round (see e2e_rate), for the report.
    args.e2e_max = {}
    # KACTOR_BENCH_DATA puts the brokers' data elsewhere (e.g. /tmp), so two runs on one
    # machine (with different --port-base) do not share a directory.
    datadir = Path(os.environ.get("KACTOR_BENCH_DATA", ROOT / ".cache" / "bench-data"))
    args.disk_warning = disk_warning(datadir, disk_need(prods, consumes, e2es, durations))
    if args.disk_warning:
        log(f"warning: {args.disk_warning}")
    order = [t.strip() for t in args.brokers.split(",") if t.strip()]
    runs = {t: [] for t in order}
    mocks, floors = [], []
    for i in range(args.rounds):
        # Alternating order (A B, B A, A B, ...): a drift in the machine over the run (memory
        # backing, another guest's load) then weighs on both brokers alike, where running all
        # of Kafka and then all of kactor charged it to one side. The same scenario swung by up
        # to 2-3x between single runs on this VM, for either broker.
        for target in (order if i % 2 == 0 else order[::-1]):
            log(f"==== round {i + 1}/{args.rounds}: {target}")
            # Kafka's own perf tools are a reference only: the first round runs them.
            runs[target].append(run_broker(target, prods, consumes, e2es, durations, datadir,
                                           e2e_rates, java_tools and i == 0,
                                           args.e2e_linger_ms, args.e2e_max))
        if not args.no_ceilings:
            mocks.append(run_mock(prods, durations))
            if consumes:
                floors.append(run_fetch_floor(durations))
    res = {t: merge_rounds(rs) for t, rs in runs.items()}
    ceilings["mock"] = merge_mock(mocks)
    # The floor is measured once per round, like the mock broker; its median round counts.
    ceilings["fetch_floor"] = {size: median_pick([f.get(size) for f in floors], "rtt", "mean_us")
                               for size in FETCH_FLOOR_SIZES if floors}
    shutil.rmtree(datadir, ignore_errors=True)
    text = report(args, res, ceilings, prods, consumes, e2es, e2e_rates, t_start, load_start)
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text + "\n")
        log(f"written to {args.out}")
    if args.json:
        def keys(o):
            if isinstance(o, dict):
                return {("-".join(map(str, k)) if isinstance(k, tuple) else str(k)): keys(v)
                        for k, v in o.items()}
            if isinstance(o, list):
                return [keys(v) for v in o]
            return o
        Path(args.json).write_text(json.dumps(keys({"results": res, "rounds": runs,
                                                    "ceilings": ceilings}),
                                              default=str, indent=1))
    bad = [t for t in res if "fatal" in res[t]]
    return 1 if bad and args.mode == "smoke" else 0


if __name__ == "__main__":
    sys.exit(main())
