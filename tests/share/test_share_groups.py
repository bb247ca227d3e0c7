"""Share groups (KIP-932: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, ShareGroupDescribe,
DescribeShareGroupOffsets) through real clients: Apache Kafka 4.4.0's KafkaShareConsumer (one
JVM per consumer, tests/share/ShareDriver.java), the kafka-share-groups and
kafka-console-share-consumer tools, and raw requests for the error cases.

One broker for the module, with the share timeouts lowered so that lock expiry and member
timeouts fit in a test: acquisition locks of LOCK_MS (Kafka 4.4 takes 1 s and up once
group.share.min.record.lock.duration.ms is lowered too), a delivery count limit of 3 (Kafka 4.4
takes 2 to 10), a share session timeout of 6 s with 1 s heartbeats. Every group sets share.auto.offset.reset=earliest on itself
(Admin incrementalAlterConfigs on the GROUP resource, or kafka-configs) before consuming, as
users must: the default, latest, would skip what the tests produce first."""
import re
import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Producer

from harness import schema_codec as sc
from harness.broker import KAFKA_LIBS, Broker, use_shared
from harness.cli import KafkaCli
from harness.clients import create_topic
from groups.helpers import table
from share.share_driver import ShareConsumerProc, compile_driver



LOCK_MS = 8000
DELIVERY_LIMIT = 3
SHARE_OVERRIDES = {
    "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
    # group.share.record.lock.duration.ms must lie within [min, max]; Kafka's min defaults to
    # 15 s and may itself go down to 1 s.
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
}
EARLIEST = {"share.auto.offset.reset": "earliest"}

# Error codes (org.apache.kafka.common.protocol.Errors, 4.4.0).
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79


# ---- fixtures -------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def driver_classes(tmp_path_factory):
    return compile_driver(tmp_path_factory.mktemp("share-driver-classes"))


@pytest.fixture(scope="module")
def _share_broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("share-broker"), overrides=SHARE_OVERRIDES, name="share")
    try:
        b.start()
        yield b
    finally:
        b.stop()


@pytest.fixture
def sbroker(_share_broker, request):
    return use_shared(_share_broker, request)


@pytest.fixture
def consumers(driver_classes, tmp_path):
    """consumers(broker, name, group, topic, **args) -> a started ShareConsumerProc; every one
    still running at teardown is SIGKILLed."""
    made = []

    def make(broker, name, group, topic, **args):
        args = {"bootstrap": broker.bootstrap, "group": group, "topic": topic,
                "max_seconds": 90, **args}
        c = ShareConsumerProc(driver_classes, tmp_path, name, args)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill()


# ---- helpers --------------------------------------------------------------------------------

def produce_each(broker, topic, values):
    """One record per batch (a flush after each), so that a fetch's record limit is not
    rounded up to a whole multi-record batch."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v.encode(), partition=0)
        assert p.flush(30) == 0


def committed_ok(consumer):
    """Offsets whose acknowledgement the broker confirmed (the acknowledgement commit callback
    reported no error), by partition."""
    ok = set()
    for e in consumer.of("ack_committed"):
        if e["error"] is None:
            ok |= {(e["partition"], o) for o in e["offsets"]}
    return ok


def acks(consumer, kind, confirmed=True):
    """(partition, offset, value) of the records `consumer` acknowledged as `kind`; with
    `confirmed`, only those the broker confirmed."""
    ok = committed_ok(consumer) if confirmed else None
    return [(e["partition"], e["offset"], e["value"]) for e in consumer.of("ack")
            if e["type"] == kind and (ok is None or (e["partition"], e["offset"]) in ok)]


def deliveries(consumer, value):
    return [e["deliveryCount"] for e in consumer.records() if e["value"] == value]


def accepted_values(consumer):
    return {v for _, _, v in acks(consumer, "ACCEPT")}


def wait_until(predicate, timeout, what, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    dump = "\n\n".join(f"--- {p.name}\n{p.describe()}\n{p.stderr()[-2000:]}" for p in procs)
    raise AssertionError(f"{what} not reached within {timeout}s\n{dump}")


def no_errors(*procs):
    for p in procs:
        assert p.errors() == [], f"{p.name} reported errors:\n{p.describe()}"


# ---- a. several consumers share one partition -----------------------------------------------

def test_consumers_share_one_partition(sbroker, consumers, topic_name):
    """Three members on a one-partition topic: every record is accepted exactly once across
    them, and more than one member gets records. Kafka's simple assignor gives the single
    partition to every member of a share group, and the broker hands out records per fetch;
    with two records per poll, 20 ms of work per record and one record per batch, all three
    take part (seen: 20/21/19, 16/41/3). Records are produced in rounds until two members have
    some, so the weaker property never rests on timing alone."""
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    cs = [consumers(sbroker, f"m{i}", group, topic_name, group_config=EARLIEST,
                    config={"max.poll.records": "2"}, delay_ms=20) for i in range(3)]
    for c in cs:
        c.wait_for(lambda c: c.of("started"), 60, "start")
    produced = []
    deadline = time.monotonic() + 60
    while len(produced) < 200 and time.monotonic() < deadline:
        batch = [f"v{len(produced) + i}" for i in range(10)]
        produce_each(sbroker, topic_name, batch)
        produced += batch
        time.sleep(0.3)
        if len(produced) >= 60 and sum(1 for c in cs if c.records()) >= 2:
            break
    wait_until(lambda: set().union(*(accepted_values(c) for c in cs)) == set(produced), 60,
               "every record accepted", cs)
    for c in cs:
        assert c.stop() == 0
    no_errors(*cs)

    # Exactly once: no offset's acceptance confirmed to two members (or twice to one).
    confirmed = [a for c in cs for a in acks(c, "ACCEPT")]
    offsets = [o for _, o, _ in confirmed]
    assert sorted(offsets) == list(range(len(produced))), "an offset accepted twice or never"
    assert sorted(v for _, _, v in confirmed) == sorted(produced)
    # Offsets follow production order on the one partition.
    assert all(v == f"v{o}" for _, o, v in confirmed)
    busy = [c.name for c in cs if c.records()]
    assert len(busy) >= 2, f"only {busy} received records"
    # Nothing was released or timed out, so nothing was delivered twice.
    assert all(e["deliveryCount"] == 1 for c in cs for e in c.records())


# ---- b. RELEASE: redelivered with delivery count 2 -------------------------------------------

def test_released_record_is_redelivered(sbroker, consumers, topic_name):
    create_topic(sbroker, topic_name)
    values = ["a0", "a1", "r-once", "a3", "a4"]
    produce_each(sbroker, topic_name, values)
    # commit=poll: the acknowledgements ride on the next ShareFetch, not ShareAcknowledge.
    c = consumers(sbroker, "c", f"g-{topic_name}", topic_name, group_config=EARLIEST,
                  rules=[{"match": "^r-", "type": "RELEASE", "max_delivery": 1}],
                  commit="poll")
    c.wait_for(lambda c: accepted_values(c) == set(values), 60, "all values accepted")
    assert c.stop() == 0
    no_errors(c)

    assert deliveries(c, "r-once") == [1, 2]
    assert [(o, v) for _, o, v in acks(c, "RELEASE")] == [(2, "r-once")]
    # The redelivery is the same record (same offset), accepted the second time.
    redelivered = [e for e in c.records() if e["value"] == "r-once"]
    assert {e["offset"] for e in redelivered} == {2}
    assert sorted(o for _, o, _ in acks(c, "ACCEPT")) == [0, 1, 2, 3, 4]
    for v in ("a0", "a1", "a3", "a4"):
        assert deliveries(c, v) == [1]


# ---- c. REJECT: never delivered again --------------------------------------------------------

def test_rejected_record_is_never_redelivered(sbroker, consumers, topic_name):
    create_topic(sbroker, topic_name)
    produce_each(sbroker, topic_name, ["g0", "bad", "g2"])
    c = consumers(sbroker, "c", f"g-{topic_name}", topic_name, group_config=EARLIEST,
                  rules=[{"match": "^bad", "type": "REJECT"}])
    c.wait_for(lambda c: accepted_values(c) == {"g0", "g2"} and acks(c, "REJECT"), 60,
               "g0, g2 accepted and bad rejected")
    # Records after the rejected one keep flowing; the rejected one doesn't come back (a
    # released one comes back on the very next fetch: test_released_record_is_redelivered).
    produce_each(sbroker, topic_name, ["after"])
    c.wait_for(lambda c: "after" in accepted_values(c), 30, "'after' accepted")
    time.sleep(2)
    assert c.stop() == 0
    no_errors(c)
    assert deliveries(c, "bad") == [1]
    assert [(o, v) for _, o, v in acks(c, "REJECT")] == [(1, "bad")]

    # A new member of the group: nothing left for it.
    c2 = consumers(sbroker, "c2", f"g-{topic_name}", topic_name, idle_ms=3000,
                   idle_from_start=True)
    assert c2.wait_exit(60) == 0
    assert c2.records() == []


# ---- d. the delivery count limit archives a poison record ------------------------------------

def test_delivery_count_limit_archives_poison_record(sbroker, consumers, topic_name):
    """group.share.delivery.count.limit=3: a record released on every delivery is delivered
    three times (counts 1, 2, 3) and then archived, never delivered again."""
    create_topic(sbroker, topic_name)
    produce_each(sbroker, topic_name, ["poison", "ok1", "ok2"])
    c = consumers(sbroker, "c", f"g-{topic_name}", topic_name, group_config=EARLIEST,
                  rules=[{"match": "^poison", "type": "RELEASE"}], commit="async")
    c.wait_for(lambda c: len(acks(c, "RELEASE")) >= DELIVERY_LIMIT
               and {"ok1", "ok2"} <= accepted_values(c), 60,
               f"poison released {DELIVERY_LIMIT} times")
    produce_each(sbroker, topic_name, ["after"])
    c.wait_for(lambda c: "after" in accepted_values(c), 30, "'after' accepted")
    time.sleep(2)
    assert c.stop() == 0
    no_errors(c)
    assert deliveries(c, "poison") == list(range(1, DELIVERY_LIMIT + 1))
    assert [o for _, o, _ in acks(c, "RELEASE")] == [0] * DELIVERY_LIMIT
    assert deliveries(c, "ok1") == [1] and deliveries(c, "ok2") == [1]


# ---- e. acquisition locks ---------------------------------------------------------------------

def test_unacknowledged_records_return_after_lock_timeout(sbroker, consumers, topic_name):
    """A live member that acquired records and never acknowledges them (its connection stays
    open, it keeps heartbeating): the records go to another member only when the acquisition
    lock expires, LOCK_MS after they were acquired, with delivery count 2."""
    create_topic(sbroker, topic_name)
    values = [f"h{i}" for i in range(5)]
    produce_each(sbroker, topic_name, values)
    group = f"g-{topic_name}"
    holder = consumers(sbroker, "holder", group, topic_name, group_config=EARLIEST,
                       end="hold")
    holder.wait_for(lambda c: c.of("holding"), 60, "records held")
    held = {e["value"] for e in holder.records()}
    acquired_at = min(e["t"] for e in holder.records()) / 1000
    assert held == set(values)
    other = consumers(sbroker, "other", group, topic_name)
    other.wait_for(lambda c: accepted_values(c) == held, LOCK_MS / 1000 + 45,
                   "held records taken over")
    assert holder.alive(), "the holder must keep its connection for this test"
    got = {e["value"]: e for e in other.records()}
    assert {v: e["deliveryCount"] for v, e in got.items()} == {v: 2 for v in held}
    # Not before the lock ran out: the holder printed its records after acquiring them, so
    # this lower bound is a little under LOCK_MS.
    first = min(e["t"] for e in got.values()) / 1000
    assert first - acquired_at >= LOCK_MS / 1000 - 1.0, f"taken over after {first - acquired_at}s"
    assert other.stop() == 0
    no_errors(holder, other)


def test_killed_consumer_records_go_to_another(sbroker, consumers, topic_name):
    """A member SIGKILLed with records acquired: another member gets them, with delivery count
    2, at the latest once the acquisition lock expires. (Kafka 4.4 releases a session's
    acquired records as soon as its connection closes, well before the lock times out.)"""
    create_topic(sbroker, topic_name)
    values = [f"k{i}" for i in range(5)]
    produce_each(sbroker, topic_name, values)
    group = f"g-{topic_name}"
    victim = consumers(sbroker, "victim", group, topic_name, group_config=EARLIEST,
                       end="hold")
    victim.wait_for(lambda c: c.of("holding"), 60, "records held")
    assert {e["value"] for e in victim.records()} == set(values)
    assert all(e["deliveryCount"] == 1 for e in victim.records())
    other = consumers(sbroker, "other", group, topic_name, mode="implicit")
    other.wait_for(lambda c: c.of("started"), 60, "start")
    victim.kill()
    killed_at = time.time()
    other.wait_for(lambda c: accepted_values(c) == set(values), LOCK_MS / 1000 + 30,
                   "victim's records taken over")
    got = {e["value"]: e for e in other.records()}
    assert {v: e["deliveryCount"] for v, e in got.items()} == {v: 2 for v in values}
    latest = max(e["t"] for e in got.values()) / 1000
    assert latest - killed_at <= LOCK_MS / 1000 + 10
    assert other.stop() == 0
    no_errors(other)


def test_close_releases_unacknowledged_records(sbroker, consumers, topic_name):
    """A member that closes with records acquired and unacknowledged gives them back at once
    (its share session ends): another member, already fetching, gets them long before the
    acquisition lock would have run out, as their second delivery."""
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    other = consumers(sbroker, "other", group, topic_name, group_config=EARLIEST)
    other.wait_for(lambda c: c.of("started"), 60, "start")
    quitter = consumers(sbroker, "quitter", group, topic_name, end="close_unacked")
    quitter.wait_for(lambda c: c.of("started"), 60, "start")
    time.sleep(2)  # both joined (1 s heartbeats)
    produced = []
    deadline = time.monotonic() + 30
    while not quitter.records() and len(produced) < 60 and time.monotonic() < deadline:
        v = f"q{len(produced)}"
        produce_each(sbroker, topic_name, [v])
        produced.append(v)
        time.sleep(0.3)
    quitter.wait_for(lambda c: c.of("closed"), 30, "quitter closed")
    assert quitter.wait_exit(30) == 0
    no_errors(quitter)
    dropped = {e["value"] for e in quitter.records()}
    assert dropped, "the quitter never got a record"
    closed_at = quitter.of("closed")[0]["t"] / 1000
    other.wait_for(lambda c: accepted_values(c) == set(produced), 30, "everything accepted")
    assert other.stop() == 0
    no_errors(other)
    got = {}
    for e in other.records():
        got.setdefault(e["value"], []).append(e)
    for v in dropped:
        assert [e["deliveryCount"] for e in got[v]] == [2], got[v]
        assert got[v][0]["t"] / 1000 - closed_at < LOCK_MS / 1000 - 2, "released only by the lock"
    for v in set(produced) - dropped:
        assert [e["deliveryCount"] for e in got[v]] == [1], got[v]
    assert sorted(o for _, o, _ in acks(other, "ACCEPT")) == list(range(len(produced)))


# ---- f. kafka-share-groups --------------------------------------------------------------------

def state_rows(out):
    """Rows of `--describe --state`: GROUP, COORDINATOR (ID), STATE, #MEMBERS (the coordinator
    cell is "host:port  (id)", with spaces)."""
    rows = []
    for line in out.splitlines():
        m = re.match(r"^(\S+)\s+(\S+:\d+)\s+\((\d+)\)\s+(\S+)\s+(\d+)\s*$", line)
        if m:
            rows.append({"GROUP": m[1], "COORDINATOR": m[2], "ID": int(m[3]),
                         "STATE": m[4], "#MEMBERS": int(m[5])})
    return rows


def test_kafka_share_groups_cli(sbroker, consumers, topic_name):
    cli = KafkaCli(sbroker)
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    out = cli.run("configs", "--alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", "share.auto.offset.reset=earliest").stdout
    assert f"Completed updating config for group {group}." in out
    out = cli.run("configs", "--describe", "--entity-type", "groups", "--entity-name",
                  group).stdout
    assert f"Dynamic configs for group {group} are:" in out
    assert "share.auto.offset.reset=earliest" in out

    produce_each(sbroker, topic_name, [f"v{i}" for i in range(5)])
    c = consumers(sbroker, "cli-member", group, topic_name)
    c.wait_for(lambda c: len(accepted_values(c)) == 5, 60, "5 accepted")

    # Active group.
    assert group in cli.run("share-groups", "--list").stdout.split()
    listed = table(cli.run("share-groups", "--list", "--state").stdout)
    assert {"GROUP": group, "STATE": "Stable"} in listed
    stable = table(cli.run("share-groups", "--list", "--state", "Stable").stdout)
    assert {"GROUP": group, "STATE": "Stable"} in stable

    rows = [r for r in state_rows(cli.run("share-groups", "--describe", "--group", group,
                                          "--state").stdout)]
    assert rows == [{"GROUP": group, "COORDINATOR": sbroker.bootstrap, "ID": 1,
                     "STATE": "Stable", "#MEMBERS": 1}]

    members = cli.run("share-groups", "--describe", "--group", group, "--members").stdout
    header = members.strip().splitlines()[0].split()
    assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                      "ASSIGNMENT"], members
    rows = table(members)
    assert len(rows) == 1, members
    m = rows[0]
    assert m["GROUP"] == group and m["CLIENT-ID"] == "cli-member", members
    assert m["#PARTITIONS"] == "1" and m["ASSIGNMENT"] == f"{topic_name}:0", members
    assert m["HOST"].startswith("/127.0.0.1"), members
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", m["CONSUMER-ID"]), members

    for args in (("--describe", "--group", group),
                 ("--describe", "--group", group, "--offsets")):
        rows = table(cli.run("share-groups", *args).stdout)
        assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["LAG"]) for r in rows] == [
            (group, topic_name, "0", "0")], rows
        assert 0 <= int(rows[0]["START-OFFSET"]) <= 5

    # Empty group: the member closed, three more records wait.
    assert c.stop() == 0
    no_errors(c)
    produce_each(sbroker, topic_name, ["w0", "w1", "w2"])
    rows = state_rows(cli.run("share-groups", "--describe", "--group", group, "--state").stdout)
    assert rows == [{"GROUP": group, "COORDINATOR": sbroker.bootstrap, "ID": 1,
                     "STATE": "Empty", "#MEMBERS": 0}]
    out = cli.run("share-groups", "--describe", "--group", group, "--members")
    # Said on stderr, with nothing on stdout.
    assert out.stdout.strip() == ""
    assert f"Share group '{group}' has no active members." in out.stderr
    assert {"GROUP": group, "STATE": "Empty"} in table(
        cli.run("share-groups", "--list", "--state").stdout)
    rows = table(cli.run("share-groups", "--describe", "--group", group).stdout)
    assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["LAG"]) for r in rows] == [
        (group, topic_name, "0", "3")], rows

    missing = f"no-such-{topic_name}"
    out = cli.run("share-groups", "--describe", "--group", missing, check=False)
    assert (f"Error: Executing share group command failed due to org.apache.kafka.common."
            f"errors.GroupIdNotFoundException: Group {missing} not found.") in out.stdout


# ---- g. kafka-console-share-consumer ----------------------------------------------------------

def test_console_share_consumer_max_messages(sbroker, topic_name):
    cli = KafkaCli(sbroker)
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    cli.run("configs", "--alter", "--entity-type", "groups", "--entity-name", group,
            "--add-config", "share.auto.offset.reset=earliest")
    values = [f"line-{i}" for i in range(7)]
    produce_each(sbroker, topic_name, values)
    out = cli.run("console-share-consumer", "--topic", topic_name, "--group", group,
                  "--max-messages", "7", "--timeout-ms", "60000",
                  "--formatter-property", "print.offset=true",
                  "--formatter-property", "print.delivery=true", timeout=120)
    lines = out.stdout.splitlines()
    assert len(lines) == 7, out.stdout
    # DefaultMessageFormatter: "Offset:N\tDelivery:N\tvalue".
    got = sorted(lines, key=lambda l: int(l.split("\t")[0].split(":")[1]))
    assert got == [f"Offset:{i}\tDelivery:1\tline-{i}" for i in range(7)], out.stdout
    assert "Processed a total of 7 messages" in out.stderr
    # The console consumer acknowledged what it printed (implicit mode): no lag left.
    rows = table(cli.run("share-groups", "--describe", "--group", group).stdout)
    assert [(r["TOPIC"], r["LAG"]) for r in rows] == [(topic_name, "0")], rows


# ---- h. share-group state survives a broker restart -------------------------------------------

@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_state_survives_restart(broker_factory, consumers, topic_name, how):
    """Accepted and rejected records stay consumed across a restart (graceful or a crash): a
    new member afterwards gets exactly the records nobody acknowledged, as first deliveries."""
    b = broker_factory(SHARE_OVERRIDES, name="share-restart")
    create_topic(b, topic_name)
    group = f"g-{topic_name}"
    first = [f"v{i}" for i in range(5)]
    produce_each(b, topic_name, first)
    c1 = consumers(b, "before", group, topic_name, group_config=EARLIEST,
                   rules=[{"match": "^v2$", "type": "REJECT"}])
    c1.wait_for(lambda c: len(accepted_values(c)) == 4 and acks(c, "REJECT"), 60,
                "4 accepted, v2 rejected")
    assert c1.stop() == 0
    no_errors(c1)
    second = [f"v{i}" for i in range(5, 9)]
    produce_each(b, topic_name, second)

    if how == "sigkill":
        b.kill9()
    b.restart()

    c2 = consumers(b, "after", group, topic_name, mode="implicit", idle_ms=4000)
    assert c2.wait_exit(90) == 0
    no_errors(c2)
    got = [(e["offset"], e["value"], e["deliveryCount"]) for e in c2.records()]
    # Only what was never acknowledged: nothing accepted or rejected before the restart.
    assert sorted(got) == [(5 + i, v, 1) for i, v in enumerate(second)], got


# ---- i. bad input on the wire -----------------------------------------------------------------

class RawShare:
    """Raw requests encoded with Kafka 4.4.0's own schemas (from kafka-clients-4.4.0.jar, so this
    doesn't depend on schemas/messages having the share APIs yet)."""

    schemas = None

    def __init__(self, port):
        if RawShare.schemas is None:
            RawShare.schemas = sc.Schemas.from_jar(KAFKA_LIBS / "kafka-clients-4.4.0.jar")
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.corr = 0

    def call(self, api_key, version, body):
        self.corr += 1
        self.sock.sendall(sc.encode_request(self.schemas, api_key, version, body, self.corr,
                                            client_id="share-raw"))
        size = struct.unpack(">i", self._read(4))[0]
        corr, resp = sc.decode_response(self.schemas, api_key, version, self._read(size))
        assert corr == self.corr
        return resp

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def close(self):
        self.sock.close()


def new_member_id():
    # Share-group member ids are made by the client: a UUID, written as Kafka writes Uuids.
    return str(sc.Uuid(uuid.uuid4().bytes))


def find_coordinator(raw, group, deadline_s=30):
    """FindCoordinator until the group's coordinator is up, as a client does before its first
    heartbeat (the first call creates __consumer_offsets)."""
    deadline = time.monotonic() + deadline_s
    while True:
        r = raw.call(10, 4, {"Key": "", "KeyType": 0, "CoordinatorKeys": [group]})
        c = r["Coordinators"][0]
        if c["ErrorCode"] == 0:
            return c
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def heartbeat(raw, group, member, epoch, topics=None):
    return raw.call(SHARE_GROUP_HEARTBEAT, 1, {
        "GroupId": group, "MemberId": member, "MemberEpoch": epoch, "RackId": None,
        "SubscribedTopicNames": topics})


def share_fetch(raw, version, group, member, epoch, topic_id=None):
    topics = [] if topic_id is None else [{"TopicId": topic_id, "Partitions": [
        {"PartitionIndex": 0, "AcknowledgementBatches": []}]}]
    return raw.call(SHARE_FETCH, version, {
        "GroupId": group, "MemberId": member, "ShareSessionEpoch": epoch, "MaxWaitMs": 100,
        "MinBytes": 1, "MaxBytes": 1 << 20, "MaxRecords": 10, "BatchSize": 10,
        "Topics": topics, "ForgottenTopicsData": []})


def share_ack(raw, group, member, epoch, topic_id, first, last, kind=1):
    return raw.call(SHARE_ACKNOWLEDGE, 1, {
        "GroupId": group, "MemberId": member, "ShareSessionEpoch": epoch,
        "Topics": [{"TopicId": topic_id, "Partitions": [{"PartitionIndex": 0,
                    "AcknowledgementBatches": [{"FirstOffset": first, "LastOffset": last,
                                                "AcknowledgeTypes": [kind]}]}]}]})


def topic_id_of(raw_port, topic):
    """The topic's id from Metadata v12 (raw, with the repo's own schemas)."""
    schemas = sc.Schemas.from_dir()
    with socket.create_connection(("127.0.0.1", raw_port), timeout=15) as s:
        s.sendall(sc.encode_request(schemas, 3, 12, {
            "Topics": [{"TopicId": sc.ZERO_UUID, "Name": topic}],
            "AllowAutoTopicCreation": False}, 1))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        _, body = sc.decode_response(schemas, 3, 12, s.recv(size, socket.MSG_WAITALL))
    return body["Topics"][0]["TopicId"]


def test_share_group_heartbeat_errors(sbroker, topic_name):
    create_topic(sbroker, topic_name)
    group = f"g-{topic_name}"
    raw = RawShare(sbroker.port)
    try:
        find_coordinator(raw, group)
        # An empty member id: the client must make one.
        r = heartbeat(raw, group, "", 0, [topic_name])
        assert (r["ErrorCode"], r["ErrorMessage"], r["MemberId"], r["Assignment"]) == (
            INVALID_REQUEST, None, None, None), r
        # A member at epoch 5 of a group that doesn't exist.
        stranger = new_member_id()
        r = heartbeat(raw, group, stranger, 5)
        assert (r["ErrorCode"], r["ErrorMessage"]) == (
            GROUP_ID_NOT_FOUND, f"Share group {group} not found."), r

        member = new_member_id()
        r = heartbeat(raw, group, member, 0, [topic_name])
        assert r["ErrorCode"] == 0, r
        assert r["MemberId"] == member and r["MemberEpoch"] >= 1
        assert r["HeartbeatIntervalMs"] == 1000
        # Kafka gives the assignment with a later heartbeat (once the share-partition state is
        # initialized, group.share.assignment.interval.ms later); kactor with the join.
        deadline = time.monotonic() + 20
        epochs = [r["MemberEpoch"]]  # each distinct epoch the member was given, in order
        while not (r["Assignment"] and r["Assignment"]["TopicPartitions"]):
            r = heartbeat(raw, group, member, epochs[-1])
            assert r["ErrorCode"] == 0, r
            if r["MemberEpoch"] != epochs[-1]:
                epochs.append(r["MemberEpoch"])
            assert time.monotonic() < deadline, "no assignment within 20 s"
            time.sleep(0.5)
        tp = r["Assignment"]["TopicPartitions"]
        assert [p["Partitions"] for p in tp] == [[0]]
        assert tp[0]["TopicId"] == topic_id_of(sbroker.port, topic_name)
        # A second member bumps the group epoch: the first moves to it at its next heartbeat
        # (so it has a previous epoch on both brokers).
        other = new_member_id()
        assert heartbeat(raw, group, other, 0, [topic_name])["ErrorCode"] == 0
        while True:
            r = heartbeat(raw, group, member, epochs[-1])
            assert r["ErrorCode"] == 0, r
            if r["MemberEpoch"] != epochs[-1]:
                epochs.append(r["MemberEpoch"])
                break
            assert time.monotonic() < deadline + 20, "no new epoch within 20 s"
            time.sleep(0.5)
        epoch = epochs[-1]
        previous = epochs[-2]

        # Now the group exists: an unknown member at epoch 5.
        r = heartbeat(raw, group, stranger, 5)
        assert (r["ErrorCode"], r["ErrorMessage"]) == (
            UNKNOWN_MEMBER_ID, f"Member {stranger} is not a member of group {group}."), r
        # An epoch ahead of the coordinator's.
        r = heartbeat(raw, group, member, epoch + 3)
        assert (r["ErrorCode"], r["ErrorMessage"], r["MemberId"], r["MemberEpoch"]) == (
            FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({epoch + 3}) than the one "
            f"known by the group coordinator ({epoch}). The member must abandon all its "
            f"partitions and rejoin.", None, 0), r
        # The previous epoch is tolerated (a response lost on the way back); an older one is
        # fenced. (Kafka: join at epoch 2, the assignment at 3, so both cases occur.)
        if previous >= 1:
            r = heartbeat(raw, group, member, previous)
            assert (r["ErrorCode"], r["MemberEpoch"]) == (0, epoch), r
        stale = [e for e in range(1, epoch) if e != previous]
        if stale:
            r = heartbeat(raw, group, member, stale[-1])
            assert (r["ErrorCode"], r["ErrorMessage"]) == (
                FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({stale[-1]}) than the "
                f"one known by the group coordinator ({epoch}), and it does not match the "
                f"previous member epoch ({previous}). The member must abandon all its "
                f"partitions and rejoin."), r
        # Leaving.
        assert heartbeat(raw, group, other, -1)["ErrorCode"] == 0
        r = heartbeat(raw, group, member, -1)
        assert (r["ErrorCode"], r["MemberId"], r["MemberEpoch"]) == (0, member, -1), r
    finally:
        raw.close()


def test_share_fetch_and_acknowledge_errors(sbroker, topic_name):
    create_topic(sbroker, topic_name)
    produce_each(sbroker, topic_name, ["x0", "x1"])
    group = f"g-{topic_name}"
    tid = topic_id_of(sbroker.port, topic_name)
    raw = RawShare(sbroker.port)
    try:
        # No share session for this member: epoch 5 (a session continuation) is refused, on
        # both versions, with no partitions in the answer.
        for version in (1, 2):
            r = share_fetch(raw, version, group, new_member_id(), 5, tid)
            assert (r["ErrorCode"], r["ErrorMessage"], r["Responses"]) == (
                SHARE_SESSION_NOT_FOUND, None, []), r
        r = share_ack(raw, group, new_member_id(), 1, tid, 0, 0)
        assert (r["ErrorCode"], r["Responses"]) == (SHARE_SESSION_NOT_FOUND, []), r
        # ShareAcknowledge can't open a session (epoch 0 is for ShareFetch).
        r = share_ack(raw, group, new_member_id(), 0, tid, 0, 0)
        assert (r["ErrorCode"], r["Responses"]) == (INVALID_SHARE_SESSION_EPOCH, []), r

        # A real member opens a session (epoch 0), then acknowledges offsets it never acquired.
        member = new_member_id()
        r = heartbeat(raw, group, member, 0, [topic_name])
        assert r["ErrorCode"] == 0, r
        r = share_fetch(raw, 1, group, member, 0, tid)
        assert r["ErrorCode"] == 0, r
        assert r["AcquisitionLockTimeoutMs"] == LOCK_MS
        [topic] = r["Responses"]
        assert topic["TopicId"] == tid
        assert [p["PartitionIndex"] for p in topic["Partitions"]] == [0]
        assert topic["Partitions"][0]["ErrorCode"] == 0
        # A wrong next epoch for the open session.
        r = share_fetch(raw, 1, group, member, 7)
        assert (r["ErrorCode"], r["Responses"]) == (INVALID_SHARE_SESSION_EPOCH, []), r

        r = share_ack(raw, group, member, 1, tid, 100, 101)
        assert r["ErrorCode"] == 0, r
        [topic] = r["Responses"]
        [part] = topic["Partitions"]
        assert (part["PartitionIndex"], part["ErrorCode"], part["ErrorMessage"]) == (
            0, INVALID_RECORD_STATE,
            "Batch record not found. The request batch offsets are not found in the cache."), r
        heartbeat(raw, group, member, -1)
    finally:
        raw.close()
