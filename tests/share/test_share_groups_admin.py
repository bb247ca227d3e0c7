"""Share-group administration (KIP-932) through Apache Kafka 4.4.0's kafka-share-groups tool and
real share consumers: --reset-offsets (AlterShareGroupOffsets, API 91), --delete-offsets
(DeleteShareGroupOffsets, API 92), --delete (DeleteGroups on a share group, which deletes its
share state) and --describe (DescribeShareGroupOffsets from the persisted state), including
across a broker restart.

Every expected line is what kafka-share-groups 4.4.0 prints against Apache Kafka 4.4.0: the
tables are fixed-width (`%-Ns` columns, N = max(15, longest value) for GROUP and TOPIC, 10 for
PARTITION, 13 for START-OFFSET), each line starting with a newline. What a consumer gets after
an admin change is checked by offset, value and delivery count: a reset or deleted state hands
records out again as first deliveries.

Fixtures (the broker with lowered share timeouts, the compiled ShareDriver, `consumers`) come
from test_share_groups.py. A record's share state is only written once it is acknowledged, so
a group's START-OFFSET right after consuming is not asserted (Kafka 4.4 reports 0 there while
LAG is 0); LAG and what a new consumer receives are."""
import time
from datetime import datetime, timezone

from confluent_kafka import Producer

from groups.helpers import table
from harness.cli import KafkaCli
from harness.clients import create_topic
from share.test_share_groups import (  # noqa: F401  (fixtures are found by name)
    EARLIEST, SHARE_OVERRIDES, _share_broker, accepted_values, consumers, driver_classes,
    no_errors, produce_each, sbroker)


# ---- expected output -------------------------------------------------------------------------

def _w(*values):
    return max(15, *(len(v) for v in values))


def reset_table(group, topic, rows):
    """--reset-offsets (dry run and execute print the same): GROUP TOPIC PARTITION NEW-OFFSET."""
    g, t = _w(group), _w(topic)
    out = f"\n{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET"
    for partition, offset in rows:
        out += f"\n{group:<{g}} {topic:<{t}} {partition:<10} {offset}"
    return out + "\n"


def offsets_table(group, topic, rows):
    """--describe (offsets): GROUP TOPIC PARTITION START-OFFSET LAG."""
    g, t = _w(group), _w(topic)
    out = f"\n{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} {'START-OFFSET':<13} LAG"
    for partition, start, lag in rows:
        out += f"\n{group:<{g}} {topic:<{t}} {partition:<10} {start:<13} {lag}"
    return out + "\n"


def status_table(rows):
    """--delete-offsets: TOPIC STATUS, one row per topic in name order."""
    t = _w(*(topic for topic, _ in rows))
    out = f"\n{'TOPIC':<{t}} STATUS"
    for topic, status in sorted(rows):
        out += f"\n{topic:<{t}} {status}"
    return out + "\n"


# ---- helpers ---------------------------------------------------------------------------------

def share_groups(cli, *args, check=True):
    return cli.run("share-groups", *args, check=check)


def describe(cli, group):
    out = share_groups(cli, "--describe", "--group", group)
    assert out.stderr == "", out.stderr
    return out.stdout


def describe_settled(cli, group, topic, rows):
    """`--describe` once every record up to `end` was acknowledged: LAG 0, in the exact table.
    rows: (partition, first offset consumed, end). START-OFFSET is `first` on Kafka 4.4 (its
    share-partition writes the acknowledgement with the start offset the range began at, and
    reports the acknowledged records as delivery-complete until a later write moves it) or
    `end` on kactor (the start offset moves in the same write); both read the same lag and
    redeliver nothing after a restart."""
    out = describe(cli, group)
    for starts in ({r[0]: r[1] for r in rows}, {r[0]: r[2] for r in rows}):
        if out == offsets_table(group, topic, [(p, starts[p], 0) for p, _, _ in rows]):
            return
    raise AssertionError(f"{out!r} is not {rows} settled")


def reset(cli, group, topic, *spec, mode="--execute"):
    out = share_groups(cli, "--reset-offsets", "--group", group, "--topic", topic, *spec, mode)
    return out.stdout


def listed_states(cli):
    return {r["GROUP"]: r["STATE"] for r in table(share_groups(cli, "--list", "--state").stdout)}


def produce_at(broker, topic, values, timestamps):
    """One record per batch with the given CreateTime timestamps (ms)."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for v, ts in zip(values, timestamps):
        p.produce(topic, value=v.encode(), partition=0, timestamp=ts)
        assert p.flush(30) == 0


def consume_all(consumers, broker, name, group, topic, **args):
    """A consumer that stops 4 s after its last record; returns (offset, value, deliveryCount)
    of what it received, in order."""
    c = consumers(broker, name, group, topic, mode="implicit", idle_ms=4000, **args)
    assert c.wait_exit(90) == 0
    no_errors(c)
    return [(e["offset"], e["value"], e["deliveryCount"]) for e in c.records()]


def consume_then_leave(consumers, broker, group, topic, count, name="first"):
    """A member with share.auto.offset.reset=earliest accepts `count` records and closes,
    leaving the group Empty."""
    c = consumers(broker, name, group, topic, group_config=EARLIEST)
    c.wait_for(lambda c: len(accepted_values(c)) == count, 60, f"{count} accepted")
    assert c.stop() == 0
    no_errors(c)
    return c


def five_consumed(sbroker, consumers, topic_name):
    """A fresh topic with five records, all accepted by a member of `g-<topic>` that then
    left: (cli, group, values)."""
    cli = KafkaCli(sbroker)
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    values = [f"v{i}" for i in range(5)]
    produce_each(sbroker, topic_name, values)
    consume_then_leave(consumers, sbroker, group, topic_name, 5)
    return cli, group, values


def firsts(values, start=0):
    """(offset, value, 1) for values produced from offset `start`: first deliveries."""
    return [(start + i, v, 1) for i, v in enumerate(values)]


# ---- 1. reset: dry run, then execute ----------------------------------------------------------

def test_reset_to_earliest_dry_run_then_execute(sbroker, consumers, topic_name):
    cli, group, values = five_consumed(sbroker, consumers, topic_name)

    before = describe(cli, group)
    rows = table(before)
    assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["LAG"]) for r in rows] == [
        (group, topic_name, "0", "0")], before

    # A dry run prints the plan and changes nothing.
    assert reset(cli, group, topic_name, "--to-earliest", mode="--dry-run") == reset_table(
        group, topic_name, [(0, 0)])
    assert describe(cli, group) == before
    # Executing prints the same table; the records are all available again.
    assert reset(cli, group, topic_name, "--to-earliest") == reset_table(
        group, topic_name, [(0, 0)])
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 0, 5)])

    # The reset dropped the acknowledged state: every record again, each a first delivery.
    assert consume_all(consumers, sbroker, "again", group, topic_name) == firsts(values)
    describe_settled(cli, group, topic_name, [(0, 0, 5)])


def test_reset_to_offset_datetime_and_latest(sbroker, consumers, topic_name):
    cli = KafkaCli(sbroker)
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    values = [f"v{i}" for i in range(5)]
    # CreateTimes one second apart, a minute ago, so --to-datetime has a known answer.
    base = (int(time.time() * 1000) // 1000 - 60) * 1000
    produce_at(sbroker, topic_name, values, [base + 1000 * i for i in range(5)])
    consume_then_leave(consumers, sbroker, group, topic_name, 5)

    assert reset(cli, group, topic_name, "--to-offset", "3") == reset_table(
        group, topic_name, [(0, 3)])
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 3, 2)])
    assert consume_all(consumers, sbroker, "from3", group, topic_name) == firsts(
        values[3:], 3)

    # Beyond the log end: the tool clamps to the latest offset and says so (a log4j WARN).
    out = share_groups(cli, "--reset-offsets", "--group", group, "--topic", topic_name,
                       "--to-offset", "30", "--execute")
    assert out.stdout == reset_table(group, topic_name, [(0, 5)])
    assert (f"WARN New offset (30) is higher than latest offset for topic partition "
            f"{topic_name}-0. Value will be set to 5.") in out.stderr
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 5, 0)])

    # The first record whose timestamp is at or after 2.5 s past the first one: offset 3.
    when = datetime.fromtimestamp((base + 2500) / 1000, timezone.utc)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}"
    assert reset(cli, group, topic_name, "--to-datetime", stamp) == reset_table(
        group, topic_name, [(0, 3)])
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 3, 2)])

    # --to-latest skips what is waiting; a new member gets only what comes after.
    produce_each(sbroker, topic_name, ["w0", "w1"])
    assert reset(cli, group, topic_name, "--to-latest") == reset_table(
        group, topic_name, [(0, 7)])
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 7, 0)])
    produce_each(sbroker, topic_name, ["x0", "x1"])
    assert consume_all(consumers, sbroker, "latest", group, topic_name) == firsts(
        ["x0", "x1"], 7)


# ---- 2. a group with a member: reset, delete-offsets and delete are refused --------------------

def test_admin_refused_while_group_has_members(sbroker, consumers, topic_name):
    cli = KafkaCli(sbroker)
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    produce_each(sbroker, topic_name, [f"v{i}" for i in range(5)])
    c = consumers(sbroker, "member", group, topic_name, group_config=EARLIEST)
    c.wait_for(lambda c: len(accepted_values(c)) == 5, 60, "5 accepted")

    # The tool checks the group's state first: exit 1, the reason on stderr.
    for mode in ("--dry-run", "--execute"):
        out = share_groups(cli, "--reset-offsets", "--group", group, "--topic", topic_name,
                           "--to-earliest", mode, check=False)
        assert (out.returncode, out.stdout, out.stderr) == (
            1, "", f"Share group '{group}' is not empty.\n"), out
    # The broker refuses the offset deletion (NON_EMPTY_GROUP); the tool exits 0.
    out = share_groups(cli, "--delete-offsets", "--group", group, "--topic", topic_name)
    assert out.stdout == ("\nError: The group is not empty.\n" + status_table(
        [(topic_name, "Error: The group is not empty.")])), out
    # --delete checks the listed state client-side.
    out = share_groups(cli, "--delete", "--group", group)
    assert out.stdout == (
        "\nError: Deletion of some share groups failed:\n"
        f"* Group '{group}' could not be deleted due to: org.apache.kafka.common.errors."
        f"GroupNotEmptyException: Share group '{group}' is not EMPTY.\n"), out

    assert c.stop() == 0
    no_errors(c)
    # Nothing was reset or deleted: the group is there with everything acknowledged.
    assert listed_states(cli).get(group) == "Empty"
    rows = table(describe(cli, group))
    assert [(r["TOPIC"], r["PARTITION"], r["LAG"]) for r in rows] == [
        (topic_name, "0", "0")], rows


# ---- 3. reset creates a group that does not exist ----------------------------------------------

def test_reset_creates_unknown_group(sbroker, consumers, topic_name):
    """Two partitions, three records each; the group is made by the reset."""
    cli = KafkaCli(sbroker)
    create_topic(sbroker, topic_name, partitions=2)
    group = f"g-{topic_name}"
    p = Producer({"bootstrap.servers": sbroker.bootstrap, "linger.ms": 0})
    for i in range(3):
        for partition in (0, 1):
            p.produce(topic_name, value=f"p{partition}-{i}".encode(), partition=partition)
            assert p.flush(30) == 0

    def plan(out):
        # The tool prints the plan's rows in hash-map order: compare them as a set.
        lines = out.split("\n")
        return lines[:2], sorted(lines[2:])

    expected = plan(reset_table(group, topic_name, [(0, 1), (1, 1)]))
    # A dry run for an unknown group plans the reset but creates nothing.
    assert plan(reset(cli, group, topic_name, "--to-offset", "1", mode="--dry-run")) == expected
    assert group not in share_groups(cli, "--list").stdout.split()
    # Executing creates it: Empty, with the offsets set.
    assert plan(reset(cli, group, topic_name, "--to-offset", "1")) == expected
    assert group in share_groups(cli, "--list").stdout.splitlines()
    assert listed_states(cli).get(group) == "Empty"
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 1, 2), (1, 1, 2)])

    # No group config, so share.auto.offset.reset is latest; the reset offsets win over it.
    c = consumers(sbroker, "c", group, topic_name, mode="implicit", idle_ms=4000)
    assert c.wait_exit(90) == 0
    no_errors(c)
    got = sorted((e["partition"], e["offset"], e["value"], e["deliveryCount"])
                 for e in c.records())
    assert got == [(q, i, f"p{q}-{i}", 1) for q in (0, 1) for i in (1, 2)], got
    describe_settled(cli, group, topic_name, [(0, 1, 3), (1, 1, 3)])


# ---- 4. delete-offsets -------------------------------------------------------------------------

def test_delete_offsets(sbroker, consumers, topic_name):
    cli, group, values = five_consumed(sbroker, consumers, topic_name)
    other = f"{topic_name}-other"
    create_topic(sbroker, other)

    # A topic the group never consumed, and one that does not exist: per-topic errors, exit 0.
    missing = f"{topic_name}-missing"
    out = share_groups(cli, "--delete-offsets", "--group", group, "--topic", other)
    assert out.stdout == status_table(
        [(other, "Error: There is no offset information to delete.")]), out
    out = share_groups(cli, "--delete-offsets", "--group", group, "--topic", missing)
    assert out.stdout == status_table(
        [(missing, "Error: This server does not host this topic-partition.")]), out
    # A group that does not exist: the group error, then on every row.
    nosuch = f"no-such-{group}"
    out = share_groups(cli, "--delete-offsets", "--group", nosuch, "--topic", topic_name)
    assert out.stdout == (f"\nError: Group {nosuch} not found.\n" + status_table(
        [(topic_name, f"Error: Group {nosuch} not found.")])), out

    out = share_groups(cli, "--delete-offsets", "--group", group, "--topic", topic_name)
    assert out.stdout == status_table([(topic_name, "Successful")]), out
    assert describe(cli, group) == f"\nShare group '{group}' has no offset information.\n"
    # --all-topics means the topics the group has state for: none now, so no plan at all.
    out = share_groups(cli, "--reset-offsets", "--group", group, "--all-topics",
                       "--to-earliest", "--dry-run")
    assert (out.stdout, out.stderr) == ("\n", ""), out
    # The group itself stays (Empty); a second deletion has nothing to delete.
    assert listed_states(cli).get(group) == "Empty"
    out = share_groups(cli, "--delete-offsets", "--group", group, "--topic", topic_name)
    assert out.stdout == status_table(
        [(topic_name, "Error: There is no offset information to delete.")]), out

    # The group config (earliest) still applies: a new member starts over from offset 0.
    assert consume_all(consumers, sbroker, "again", group, topic_name) == firsts(values)
    describe_settled(cli, group, topic_name, [(0, 0, 5)])


# ---- 5. delete the group -----------------------------------------------------------------------

def test_delete_share_group(sbroker, consumers, topic_name):
    cli, group, values = five_consumed(sbroker, consumers, topic_name)

    out = share_groups(cli, "--delete", "--group", group)
    assert out.stdout == f"Deletion of requested share groups ('{group}') was successful.\n"
    assert group not in share_groups(cli, "--list").stdout.split()
    out = share_groups(cli, "--describe", "--group", group)
    assert out.stdout == (f"\nError: Executing share group command failed due to org.apache."
                          f"kafka.common.errors.GroupIdNotFoundException: Group {group} not "
                          f"found.\n"), out
    # Deleting again: the tool no longer lists it as a share group.
    out = share_groups(cli, "--delete", "--group", group)
    assert out.stdout == (
        "\nError: Deletion of some share groups failed:\n"
        f"* Group '{group}' could not be deleted due to: org.apache.kafka.common.errors."
        f"GroupIdNotFoundException: Group '{group}' is not a share group.\n"), out

    # The group's dynamic config is not part of the group: it survives the deletion.
    out = cli.run("configs", "--describe", "--entity-type", "groups", "--entity-name", group)
    assert out.stdout.splitlines()[:2] == [
        f"Dynamic configs for group {group} are:",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}"], out
    # So a new group of the same name starts over from the earliest offset, every record a
    # first delivery: the acknowledged state went with the group.
    assert consume_all(consumers, sbroker, "reborn", group, topic_name) == firsts(values)
    assert listed_states(cli).get(group) == "Empty"
    describe_settled(cli, group, topic_name, [(0, 0, 5)])


# ---- 6. an Empty group's state survives a restart ----------------------------------------------

def test_empty_group_state_survives_restart(broker_factory, consumers, topic_name):
    b = broker_factory(SHARE_OVERRIDES, name="share-admin-restart")
    cli = KafkaCli(b)
    create_topic(b, topic_name)
    group = f"g-{topic_name}"
    values = [f"v{i}" for i in range(6)]
    produce_each(b, topic_name, values[:5])
    consume_then_leave(consumers, b, group, topic_name, 5)
    # An altered offset and a record nobody has seen yet.
    assert reset(cli, group, topic_name, "--to-offset", "2") == reset_table(
        group, topic_name, [(0, 2)])
    produce_each(b, topic_name, values[5:])
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 2, 4)])

    b.restart()

    assert listed_states(cli).get(group) == "Empty"
    assert describe(cli, group) == offsets_table(group, topic_name, [(0, 2, 4)])
    # --all-topics --to-current reads the same persisted state back as a plan.
    out = share_groups(cli, "--reset-offsets", "--group", group, "--all-topics",
                       "--to-current", "--dry-run")
    assert out.stdout == reset_table(group, topic_name, [(0, 2)]), out
    assert consume_all(consumers, b, "after", group, topic_name) == firsts(values[2:], 2)
