"""kafka-consumer-groups (4.4.0) and the Java console consumer against the group coordinator,
each checked on its output. JVM start-up dominates, so each test batches a few calls."""
import datetime
import re
import time

import pytest

from harness.clients import create_topic
from groups.helpers import Member, commit, committed, produce, table, wait_for

LOG_END = [10, 20, 30]


def setup_group(broker, topic):
    """A 3-partition topic with LOG_END records and an empty group that committed 4, 5, 6."""
    create_topic(broker, topic, partitions=3)
    base = int(time.time() * 1000) - 3_600_000
    produce(broker, topic, LOG_END, timestamps=lambda i: base + 1000 * i)
    group = f"g-{topic}"
    commit(broker, group, topic, [4, 5, 6])
    return group, base


def rows_of(rows, group):
    return sorted((r for r in rows if r["GROUP"] == group), key=lambda r: int(r["PARTITION"]))


def test_list_and_describe(broker, cli, topic_name):
    empty, _ = setup_group(broker, topic_name)
    # An active classic member and an active KIP-848 member in two more groups, each having
    # read (and committed) everything.
    classic, kip848 = f"classic-{topic_name}", f"kip848-{topic_name}"
    members = [Member(broker, classic, topic_name, "classic"),
               Member(broker, kip848, topic_name, "consumer")]
    try:
        wait_for(lambda: all(len(m.messages()) == sum(LOG_END) for m in members), 90,
                 "both members to read everything", members)

        listed = cli.run("consumer-groups", "--list").stdout.split()
        assert {empty, classic, kip848} <= set(listed)

        groups = ("--group", empty, "--group", classic, "--group", kip848)
        default = cli.run("consumer-groups", "--describe", *groups).stdout
        offsets = cli.run("consumer-groups", "--describe", "--offsets", *groups).stdout
        for out in (default, offsets):
            rows = table(out)
            assert [(r["TOPIC"], int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]),
                     int(r["LAG"]), r["CONSUMER-ID"]) for r in rows_of(rows, empty)] == [
                (topic_name, 4, 10, 6, "-"), (topic_name, 5, 20, 15, "-"),
                (topic_name, 6, 30, 24, "-")]
            for g in (classic, kip848):
                got = rows_of(rows, g)
                assert [(int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"]))
                        for r in got] == [(10, 10, 0), (20, 20, 0), (30, 30, 0)]
                # The one member owns every partition: one consumer id, not "-".
                assert len({r["CONSUMER-ID"] for r in got}) == 1
                assert got[0]["CONSUMER-ID"] != "-"

        verbose = cli.run("consumer-groups", "--describe", "--members", "--verbose",
                          *groups).stdout
        rows = table(verbose)
        for g in (classic, kip848):
            [r] = [r for r in rows if r["GROUP"] == g]
            assert int(r["#PARTITIONS"]) == 3
            assignment = r.get("ASSIGNMENT") or r.get("CURRENT-ASSIGNMENT")
            assert assignment == f"{topic_name}:0,1,2" or assignment == f"{topic_name}(0,1,2)"
            assert r["HOST"].startswith("/127.0.0.1")
        assert [r for r in rows if r["GROUP"] == empty] == []  # no members to list

        state = cli.run("consumer-groups", "--describe", "--state", *groups).stdout
        lines = {ln.split()[0]: ln.split() for ln in state.splitlines()
                 if ln.split() and ln.split()[0] in (empty, classic, kip848)}
        assert "Empty" in lines[empty] and lines[empty][-1] == "0"
        assert "Stable" in lines[classic] and lines[classic][-1] == "1"
        assert "range" in lines[classic]
        assert "Stable" in lines[kip848] and lines[kip848][-1] == "1"
        assert "uniform" in lines[kip848]
        for words in lines.values():
            assert f"({broker.node_id})" in words
    finally:
        for m in members:
            m.stop()


def new_offsets(out, group):
    return [int(r["NEW-OFFSET"]) for r in rows_of(table(out), group)]


def test_reset_offsets(broker, cli, topic_name):
    group, base = setup_group(broker, topic_name)
    reset = ("--reset-offsets", "--group", group, "--topic", topic_name)

    out = cli.run("consumer-groups", *reset, "--to-earliest", "--dry-run").stdout
    assert new_offsets(out, group) == [0, 0, 0]
    assert committed(broker, group, topic_name, 3) == [4, 5, 6]  # a dry run changes nothing

    cases = [
        (("--to-earliest",), [0, 0, 0]),
        (("--to-latest",), LOG_END),
        (("--shift-by", "-3"), [7, 17, 27]),
        (("--to-offset", "5"), [5, 5, 5]),
        # Record i of every partition has timestamp base + i s: the first record at or after
        # base + 3 s is offset 3.
        (("--to-datetime", datetime.datetime.fromtimestamp(
            (base + 3000) / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
          + "Z"), [3, 3, 3]),
        (("--shift-by", "100"), LOG_END),  # shifting past the end clamps to the log end
    ]
    before = [4, 5, 6]
    for how, want in cases:
        # --dry-run prints the plan and changes nothing; --execute applies the same plan.
        out = cli.run("consumer-groups", *reset, *how, "--dry-run").stdout
        assert new_offsets(out, group) == want, (how, out)
        assert committed(broker, group, topic_name, 3) == before, how
        out = cli.run("consumer-groups", *reset, *how, "--execute").stdout
        assert new_offsets(out, group) == want, (how, out)
        assert committed(broker, group, topic_name, 3) == want, how
        before = want


def test_delete_offsets_and_group(broker, cli, topic_name):
    group, _ = setup_group(broker, topic_name)
    out = cli.run("consumer-groups", "--delete-offsets", "--group", group,
                  "--topic", f"{topic_name}:0").stdout
    rows = table(out, first="TOPIC")
    assert [(r["TOPIC"], r["PARTITION"], r["STATUS"]) for r in rows] == [
        (topic_name, "0", "Successful")]
    assert committed(broker, group, topic_name, 3) == [-1001, 5, 6]

    out = cli.run("consumer-groups", "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert committed(broker, group, topic_name, 3) == [-1001, -1001, -1001]
    out = cli.run("consumer-groups", "--list").stdout.split()
    assert group not in out


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_console_consumer_group(broker, cli, topic_name, protocol):
    create_topic(broker, topic_name, partitions=3)
    produce(broker, topic_name, [5, 5, 5])
    group = f"java-{topic_name}"
    out = cli.run("console-consumer", "--topic", topic_name, "--group", group,
                  "--from-beginning", "--max-messages", "15", "--timeout-ms", "60000",
                  "--command-property", f"group.protocol={protocol}").stdout
    values = [w for w in out.split() if re.fullmatch(r"\d-\d", w)]
    assert sorted(values) == sorted(f"{p}-{i}" for p in range(3) for i in range(5))
    # The console consumer commits on close: the group has consumed everything.
    rows = rows_of(table(cli.run("consumer-groups", "--describe", "--group", group).stdout),
                   group)
    assert [(int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"]))
            for r in rows] == [(5, 5, 0)] * 3
