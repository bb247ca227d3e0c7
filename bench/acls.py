"""Benchmark (not a test): the cost of ACL authorization, kactor beside Apache Kafka 4.4 on this
machine.

For each broker in turn, on the same ports and disk: a single node with a SASL_PLAINTEXT
listener (PLAIN, user alice) and KRaft's StandardAuthorizer (tests/harness/security.py's
`AuthzBroker`: super users admin and ANONYMOUS, the PLAINTEXT listener the bench sets up through;
no access where no ACL matches). As alice over SASL_PLAINTEXT:
  - produce (Kafka's producer-perf-test, 1 KiB records, acks=1) and consume (consumer-perf-test)
    with only the ACLs alice needs ('needed ACLs'): literal WRITE, DESCRIBE and READ on each
    bench topic and literal READ on the group, 4 ACLs in all for her on a topic;
  - the same produce and consume again with 2,000 unrelated ACLs added (1,000 literal, 1,000
    prefixed, on other topic and group names, for 250 other principals, a tenth of them DENY),
    so that the per-request decision cost against a larger ACL set shows; they are added
    (CreateAcls) before and deleted (DeleteAcls) after each such round, and the rounds alternate
    which set goes first, so neither set inherits the other's place in the run;
  - with --no-authorizer-run (default on): the same produce on a fresh node with the same
    listeners and no authorizer at all, so the authorizer's own cost on each broker shows.
Each row is run --rounds times, each on a topic of its own (3 partitions) written by that
round's produce and read back by its consume, each timed run after a sync(2); the median round
is shown, after one unmeasured warm-up produce per node (Kafka's JIT). The perf tools run with
the JVM's full JIT and 1 GiB of heap, not the harness's quick C1-only settings, so that the
client is less of a ceiling; consume figures are consumer-perf-test's fetch.* columns (after the
group join). Prints a markdown table with kactor/Kafka ratios.

    .venv/bin/python bench/acls.py [--records 300000] [--rounds 3] [--brokers kactor,kafka]
                                   [--batch-size 65536] [--no-no-authorizer-run]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from differential.client import Client  # noqa: E402
from harness.broker import java_cmd, kactor_bin  # noqa: E402
from harness.cli import MAIN_CLASSES, run_tool  # noqa: E402
from harness.security import (AUTHZ_USERS, AuthzBroker, SecureBroker,  # noqa: E402
                              make_certs)

GROUP = "bench-acl-group"
UNRELATED = 2000
# ACL wire enums (ResourceType, PatternType, AclOperation, AclPermissionType codes).
TOPIC, GROUP_RES = 2, 3
LITERAL, PREFIXED = 3, 4
READ, WRITE, DESCRIBE = 3, 4, 8
DENY, ALLOW = 2, 3


def start(cls, target, work, certs):
    b = cls(work / f"{target}-{cls.__name__}", certs, target=target, name=target)
    b.start()
    return b


def perf(tool, args):
    """Runs a Kafka perf tool with the full JIT (see the module doc), bounded in time."""
    cmd = java_cmd(MAIN_CLASSES.get(tool, tool), args, heap="1g", quick=False)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"kafka-{tool} exited {out.returncode}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def add_alice_acls(b, topics):
    """Alice's ACLs through the kafka-acls CLI on the PLAINTEXT listener (a super user): literal
    WRITE, DESCRIBE and READ on each bench topic, READ on the group."""
    run_tool("acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
             "User:alice", "--operation", "Write", "--operation", "Describe", "--operation",
             "Read", *[x for t in topics for x in ("--topic", t)])
    run_tool("acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
             "User:alice", "--operation", "Read", "--group", GROUP)


def topic_names(rounds):
    # The warm-up's, then per round: needed ACLs (a), 2,000 more ACLs (b), no authorizer (n).
    return ["acl-warm"] + [f"acl-{kind}-{i}" for kind in ("a", "b", "n") for i in range(rounds)]


def unrelated_acls():
    """1,000 literal and 1,000 prefixed bindings, half on topics and half on groups, for 250
    other principals, none matching alice or the bench's topics and group."""
    out = []
    ops = (READ, WRITE, DESCRIBE)
    for i in range(UNRELATED):
        prefixed = i >= UNRELATED // 2
        group = i % 2 == 1
        name = f"{'grp' if group else 'tp'}-{'pfx' if prefixed else 'lit'}-{i:05d}"
        out.append({"ResourceType": GROUP_RES if group else TOPIC,
                    "ResourceName": name + ("-" if prefixed else ""),
                    "ResourcePatternType": PREFIXED if prefixed else LITERAL,
                    "Principal": f"User:user{i % 250}", "Host": "*",
                    "Operation": READ if group else ops[i % 3],
                    "PermissionType": DENY if i % 10 == 9 else ALLOW})
    return out


ANY_FILTER = {"ResourceTypeFilter": 1, "ResourceNameFilter": None, "PatternTypeFilter": 1,
              "PrincipalFilter": None, "HostFilter": None, "Operation": 1, "PermissionType": 1}


def count_acls(b):
    admin = Client(b.target, b.port, timeout=60)
    try:
        r = admin.call("DescribeAcls", 3, ANY_FILTER)
        assert r["ErrorCode"] == 0, r
        return sum(len(res["Acls"]) for res in r["Resources"])
    finally:
        admin.close()


def wait_count(b, want, timeout=60):
    """CreateAcls and DeleteAcls return once the controller committed the change; wait until
    the broker's authorizer (which DescribeAcls answers from) holds exactly `want` ACLs."""
    deadline = time.monotonic() + timeout
    while (n := count_acls(b)) != want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{n} ACLs in the authorizer, expected {want}")
        time.sleep(0.2)


def add_unrelated_acls(b, base):
    admin = Client(b.target, b.port, timeout=60)
    try:
        acls = unrelated_acls()
        for i in range(0, len(acls), 500):
            r = admin.call("CreateAcls", 3, {"Creations": acls[i:i + 500]})
            bad = [x for x in r["Results"] if x["ErrorCode"] != 0]
            assert not bad, bad[:3]
    finally:
        admin.close()
    wait_count(b, base + UNRELATED)


def delete_unrelated_acls(b, base):
    admin = Client(b.target, b.port, timeout=60)
    try:
        filters = [dict(ANY_FILTER, PrincipalFilter=f"User:user{k}") for k in range(250)]
        r = admin.call("DeleteAcls", 3, {"Filters": filters})
        bad = [x for x in r["FilterResults"] if x["ErrorCode"] != 0]
        assert not bad, bad[:3]
        deleted = sum(len(x["MatchingAcls"]) for x in r["FilterResults"])
        assert deleted == UNRELATED, deleted
    finally:
        admin.close()
    wait_count(b, base)


def create_topics(b, topics):
    admin = Client(b.target, b.port, timeout=60)
    try:
        for t in topics:
            admin.create_topic(t, partitions=3)
    finally:
        admin.close()


def produce(port, topic, records, props, batch_size):
    out = perf("producer-perf-test", [
        "--topic", topic, "--num-records", str(records), "--record-size", "1024",
        "--throughput", "-1", "--producer.config", str(props), "--producer-props",
        f"bootstrap.servers=127.0.0.1:{port}", "acks=1", "linger.ms=5",
        f"batch.size={batch_size}"])
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\)", last)
    return float(m.group(1)), float(m.group(2))


def consume(port, topic, records, props):
    """records/s and MB/s of consumer-perf-test's fetch phase (after the group join, whose
    fixed cost would otherwise dominate a run of a few seconds)."""
    out = perf("consumer-perf-test", [
        "--bootstrap-server", f"127.0.0.1:{port}", "--topic", topic, "--group", GROUP,
        "--messages", str(records), "--timeout", "60000", "--command-config", str(props)])
    row = [line for line in out.splitlines() if line and line[0].isdigit()][-1].split(",")
    got = int(row[4])
    if got < records:
        raise RuntimeError(f"consumer-perf-test read {got} of {records}:\n{out}")
    # start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance ms, fetch ms, fetch.MB.sec,
    # fetch.nMsg.sec
    return float(row[9]), float(row[8])


def median_row(rounds):
    recs = statistics.median(r[0] for r in rounds)
    mbs = statistics.median(r[1] for r in rounds)
    return recs, mbs, [r[0] for r in rounds]


def timed(fn, *a):
    # Each timed run starts after a sync(2), so that none pays for the writeback of the
    # runs before it (see bench/RESULTS.md on this VM's page cache).
    os.sync()
    return fn(*a)


def run_broker(target, work, certs, props, args):
    r = {}
    b = start(AuthzBroker, target, work, certs)
    try:
        port = b.sasl_plain_port
        topics = topic_names(args.rounds)
        create_topics(b, topics)
        add_alice_acls(b, topics)
        produce(port, "acl-warm", args.records, props, args.batch_size)
        base = count_acls(b)
        runs = {k: [] for k in ("pa", "ca", "pb", "cb")}
        for i in range(args.rounds):
            # The rounds alternate which ACL set goes first, so neither inherits the other's
            # place in the run (page cache, the log's growth, the JIT).
            order = ("a", "b") if i % 2 == 0 else ("b", "a")
            for kind in order:
                if kind == "b":
                    add_unrelated_acls(b, base)
                runs["p" + kind].append(timed(produce, port, f"acl-{kind}-{i}", args.records,
                                              props, args.batch_size))
                runs["c" + kind].append(timed(consume, port, f"acl-{kind}-{i}", args.records,
                                              props))
                if kind == "b":
                    delete_unrelated_acls(b, base)
        r["produce, needed ACLs"] = median_row(runs["pa"])
        r["consume, needed ACLs"] = median_row(runs["ca"])
        r[f"produce, +{UNRELATED} unrelated ACLs"] = median_row(runs["pb"])
        r[f"consume, +{UNRELATED} unrelated ACLs"] = median_row(runs["cb"])
    finally:
        b.stop()
    if args.no_authorizer_run:
        # SecureBroker: the same listeners and PLAIN user alice (same password), no authorizer.
        b = start(SecureBroker, target, work, certs)
        try:
            port = b.sasl_plain_port
            create_topics(b, topic_names(args.rounds))
            produce(port, "acl-warm", args.records, props, args.batch_size)
            rounds = [timed(produce, port, f"acl-n-{i}", args.records, props,
                            args.batch_size) for i in range(args.rounds)]
            r["produce, no authorizer"] = median_row(rounds)
        finally:
            b.stop()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--brokers", default="kactor,kafka")
    # 2048: one 1 KiB record per batch, many more produce requests (and authorizer decisions)
    # per MB than the default's.
    ap.add_argument("--batch-size", type=int, default=65536, help="the producer's batch.size")
    ap.add_argument("--no-authorizer-run", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kactor-acl-bench-"))
    certs = work / "certs"
    certs.mkdir()
    make_certs(certs)
    props = work / "alice.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{AUTHZ_USERS["alice"]}";\n')
    print("kactor binary:", kactor_bin(), flush=True)
    results = {}
    t0 = time.monotonic()
    for target in args.brokers.split(","):
        results[target] = run_broker(target, work, certs, props, args)
        print(target, results[target], flush=True)
    print(f"\nwall time {time.monotonic() - t0:.0f} s; command: .venv/bin/python bench/acls.py "
          + " ".join(sys.argv[1:]))
    print(f"{args.records:,} records of 1 KiB per run, acks=1, linger.ms=5, "
          f"batch.size={args.batch_size}, 3 partitions; median of "
          f"{args.rounds} rounds (rounds' records/s in brackets)")
    if len(results) == 2:
        print("\n| scenario (as alice, SASL_PLAINTEXT PLAIN) | kactor records/s (MB/s) "
              "| Kafka 4.4 records/s (MB/s) | kactor/Kafka | kactor rounds | Kafka rounds |")
        print("|---|---|---|---|---|---|")
        for k in results["kactor"]:
            a, c = results["kactor"][k], results["kafka"][k]
            fmt = lambda xs: " · ".join(f"{x:,.0f}" for x in xs)  # noqa: E731
            print(f"| {k} | {a[0]:,.0f} ({a[1]:.1f}) | {c[0]:,.0f} ({c[1]:.1f}) "
                  f"| {a[0] / c[0]:.2f}x | {fmt(a[2])} | {fmt(c[2])} |")


if __name__ == "__main__":
    main()
