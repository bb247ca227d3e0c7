"""The checkers are tested on planted histories: a clean queue and copier history passes, and a
loss, a duplicate, a reordering, an aborted read, an uncommitted read, a skipped record and
offsets going backwards are each caught (and nothing else is reported for them). No broker."""
import json

from faults import checkers
from faults.history import FAIL, INFO, OK, History, load

T, IN, OUT, G = "q", "in", "out", "g"


def queue_history(values_by_partition=None):
    """Two producers, one consumer group that read and committed everything, a final read."""
    h = History()
    parts = values_by_partition or {0: ["producer-0:0", "producer-1:0", "producer-0:1"],
                                    1: ["producer-1:1", "producer-0:2", "producer-1:2"]}
    for p, vals in parts.items():
        for o, v in enumerate(vals):
            inv = h.invoke(v.split(":")[0], "send", topic=T, value=v)
            h.complete(inv, OK, partition=p, offset=o)
    h.record("consumer-0", OK, "assign", group=G, partitions=[[T, 0, None], [T, 1, None]])
    for p, vals in parts.items():
        for o, v in enumerate(vals):
            h.record("consumer-0", OK, "poll", group=G, topic=T, partition=p, offset=o, value=v,
                     isolation="read_uncommitted")
    inv = h.invoke("consumer-0", "commit", group=G,
                   offsets={f"{T}/{p}": len(v) for p, v in parts.items()})
    h.complete(inv, OK)
    h.record("consumer-0", OK, "committed", group=G,
             offsets={f"{T}/{p}": len(v) for p, v in parts.items()})
    read(h, "queue", T, "read_uncommitted", parts)
    return h


def read(h, role, topic, iso, parts):
    h.record("reader", OK, "read", role=role, topic=topic, isolation=iso,
             records={str(p): [[o, v] for o, v in enumerate(vals)] for p, vals in parts.items()})


def kinds(h):
    return sorted(a["kind"] for a in checkers.check_all(h.snapshot()))


def test_a_clean_queue_history_passes():
    assert checkers.check_all(queue_history().snapshot()) == []


def test_an_acknowledged_value_missing_from_the_log_is_lost():
    h = queue_history()
    inv = h.invoke("producer-0", "send", topic=T, value="producer-0:9")
    h.complete(inv, OK, partition=0, offset=3)
    # Also never polled: the group could not have read it either.
    assert kinds(h) == ["lost", "unread"]
    lost = checkers.check_lost(h.snapshot())[0]
    assert lost["value"] == "producer-0:9" and lost["offset"] == 3


def test_an_unacknowledged_value_may_be_missing_and_a_failed_one_too():
    h = queue_history()
    for outcome in (INFO, FAIL):
        inv = h.invoke("producer-0", "send", topic=T, value=f"producer-0:{outcome}")
        h.complete(inv, outcome, error="timed out")
    assert kinds(h) == []


def test_a_value_twice_in_the_log_is_a_duplicate():
    h = queue_history({0: ["producer-0:0", "producer-0:1", "producer-0:1"]})
    found = checkers.check_duplicates(h.snapshot())
    assert [a["kind"] for a in found] == ["duplicate"]
    assert found[0]["value"] == "producer-0:1" and found[0]["positions"] == [[0, 1], [0, 2]]
    # Twice in a row from one writer: the order checker sees it too.
    assert "out-of-order" in kinds(h)


def test_redelivery_of_the_same_position_is_not_a_duplicate():
    h = queue_history()
    h.record("consumer-1", OK, "assign", group=G, partitions=[[T, 0, 0]])
    h.record("consumer-1", OK, "poll", group=G, topic=T, partition=0, offset=0,
             value="producer-0:0", isolation="read_uncommitted")
    assert kinds(h) == []


def test_a_writer_reordered_within_a_partition_is_caught():
    h = queue_history({0: ["producer-0:1", "producer-0:0"], 1: ["producer-1:0"]})
    found = checkers.check_order(h.snapshot())
    assert [a["kind"] for a in found] == ["out-of-order"]
    assert found[0]["earlier"] == [0, "producer-0:1"] and found[0]["later"] == [1, "producer-0:0"]


def test_an_acknowledged_offset_holding_another_value_is_moved():
    h = queue_history()
    ops = h.snapshot()
    ops[1] = dict(ops[1], offset=2)  # producer-0:0 acknowledged at offset 2, found at 0
    assert [a["kind"] for a in checkers.check_lost(ops)] == ["moved"]


def test_a_consumer_going_backwards_without_reassignment_is_caught():
    h = queue_history()
    h.record("consumer-0", OK, "poll", group=G, topic=T, partition=1, offset=1,
             value="producer-0:2", isolation="read_uncommitted")
    found = checkers.check_offsets(h.snapshot())
    assert [a["kind"] for a in found] == ["offset-backwards"]
    assert (found[0]["previous"], found[0]["next"]) == (2, 1)


def test_a_committed_offset_answered_below_an_acknowledged_commit_is_caught():
    h = queue_history()
    h.record("consumer-1", OK, "committed", group=G, offsets={f"{T}/0": 1, f"{T}/1": 3})
    found = checkers.check_offsets(h.snapshot())
    assert [a["kind"] for a in found] == ["committed-backwards"]
    assert found[0]["partition"] == f"{T}/0" and found[0]["acknowledged"] == 3


def test_committing_past_a_record_never_delivered_is_a_skip():
    h = History()
    vals = [f"producer-0:{i}" for i in range(5)]
    for o, v in enumerate(vals):
        h.complete(h.invoke("producer-0", "send", topic=T, value=v), OK, partition=0, offset=o)
    h.record("consumer-0", OK, "assign", group=G, partitions=[[T, 0, None]])
    for o in (0, 1, 3, 4):  # offset 2 never delivered
        h.record("consumer-0", OK, "poll", group=G, topic=T, partition=0, offset=o,
                 value=vals[o], isolation="read_uncommitted")
    h.complete(h.invoke("consumer-0", "commit", group=G, offsets={f"{T}/0": 5}), OK)
    read(h, "queue", T, "read_uncommitted", {0: vals})
    found = checkers.check_all(h.snapshot())
    assert sorted(a["kind"] for a in found) == ["skip", "unread"]
    skip = [a for a in found if a["kind"] == "skip"][0]
    assert skip["first"] == [2] and skip["committed"] == 5


# ---- the copier ------------------------------------------------------------------------

def copier_history(abort_second=True):
    """Input in:0..3 on one partition; txn 1 copies 0-1 and commits, txn 2 copies 2-3 and is
    aborted, txn 3 copies 2-3 again and commits."""
    h = History()
    vals = [f"producer-0:{i}" for i in range(4)]
    for o, v in enumerate(vals):
        h.complete(h.invoke("producer-0", "send", topic=IN, value=v), OK, partition=0, offset=o)
    h.record("copier-0", OK, "assign", group=G, partitions=[[IN, 0, 0]])
    out = []
    plan = [("copier-0#1", [0, 1], OK), ("copier-0#2", [2, 3], FAIL), ("copier-0#3", [2, 3], OK)]
    if not abort_second:
        plan = [plan[0], ("copier-0#3", [2, 3], OK)]
    for txn, offs, outcome in plan:
        if outcome == FAIL:
            pass
        for o in offs:
            h.record("copier-0", OK, "poll", group=G, topic=IN, partition=0, offset=o,
                     value=vals[o], isolation="read_committed")
        outputs = [f"copy({vals[o]})@{txn}" for o in offs]
        inv = h.invoke("copier-0", "txn", txn=txn, group=G,
                       inputs=[[IN, 0, o, vals[o]] for o in offs], outputs=outputs,
                       offsets={f"{IN}/0": offs[-1] + 1})
        h.complete(inv, outcome)
        out += [(v, outcome) for v in outputs]
        if outcome == FAIL:
            h.record("copier-0", OK, "assign", group=G, partitions=[[IN, 0, offs[0]]])
    read(h, "input", IN, "read_uncommitted", {0: vals})
    read(h, "output", OUT, "read_committed", {0: [v for v, o in out if o == OK]})
    return h, out


def test_a_clean_copier_history_passes():
    h, _ = copier_history()
    assert checkers.check_all(h.snapshot()) == []


def test_an_aborted_copy_visible_to_read_committed_is_caught():
    h, out = copier_history()
    aborted = [v for v, o in out if o == FAIL]
    h.record("verifier", OK, "poll", group=None, topic=OUT, partition=0, offset=2,
             value=aborted[0], isolation="read_committed")
    found = checkers.check_all(h.snapshot())
    assert [a["kind"] for a in found] == ["aborted-read"]
    assert found[0]["txn"] == "copier-0#2"


def test_a_copy_read_before_its_commit_was_asked_is_uncommitted():
    h, out = copier_history()
    ops = h.snapshot()
    i = next(n for n, op in enumerate(ops) if op["f"] == "txn" and op.get("txn") == "copier-0#3")
    early = dict(ops[0], process="verifier", type=OK, f="poll", group=None, topic=OUT,
                 partition=0, offset=2, value="copy(producer-0:2)@copier-0#3",
                 isolation="read_committed", time=ops[i]["time"] - 1e-3)
    ops.insert(i, early)
    assert [a["kind"] for a in checkers.check_all(ops)] == ["uncommitted-read"]


def test_a_copy_made_twice_or_never_is_caught():
    h, out = copier_history()
    ops = h.snapshot()
    final = ops[-1]
    recs = final["records"]["0"]
    final = dict(final, records={"0": recs[:1] + recs[2:] + [[len(recs), recs[-1][1]]]})
    found = checkers.check_exactly_once(ops[:-1] + [final])
    assert sorted(a["kind"] for a in found) == ["duplicate-copy", "lost-copy"]
    lost = [a for a in found if a["kind"] == "lost-copy"][0]
    assert lost["first"] == [[0, 1, "producer-0:1"]]


def test_an_aborted_copy_in_the_final_read_is_caught():
    h, out = copier_history()
    ops = h.snapshot()
    final = ops[-1]
    aborted = [v for v, o in out if o == FAIL]
    final = dict(final, records={"0": final["records"]["0"] + [[9, aborted[0]]]})
    found = checkers.check_all(ops[:-1] + [final])
    assert "aborted-read" in [a["kind"] for a in found]
    assert "duplicate-copy" in [a["kind"] for a in found]


def test_history_round_trips_through_json_lines(tmp_path):
    h, _ = copier_history()
    h.meta["seed"] = 7
    path = h.save(tmp_path / "history.jsonl")
    meta, ops = load(path)
    assert meta == {"seed": 7}
    assert ops == json.loads(json.dumps(h.snapshot()))
    assert checkers.check_all(ops) == []


def test_a_consumer_left_without_partitions_is_reported_until_the_harness_stops_it():
    h = queue_history()
    # consumer-1 lost its partitions at t=10, kept polling (errors) and was never assigned again;
    # consumer-0 was revoked at t=20 and assigned again at t=25; both were stopped at t=500,
    # and closing revoked consumer-0 once more.
    extra = [
        ("consumer-1", OK, "assign", {"group": G, "partitions": [[T, 1, None]]}, 5),
        ("consumer-1", OK, "revoke", {"group": G, "partitions": [[T, 1]], "lost": True,
                                      "member": "consumer-1-abc"}, 10),
        ("consumer-1", INFO, "client-error", {"group": G, "error": "1/1 brokers are down"}, 11),
        ("consumer-0", OK, "revoke", {"group": G, "partitions": [[T, 0]], "lost": False}, 20),
        ("consumer-0", OK, "assign", {"group": G, "partitions": [[T, 0, None]]}, 25),
        ("consumer-0", OK, "stop", {"group": G}, 500),
        ("consumer-0", OK, "revoke", {"group": G, "partitions": [[T, 0]], "lost": False}, 501),
        ("consumer-1", OK, "stop", {"group": G}, 500),
    ]
    for process, type_, f, fields, t in extra:
        op = h.record(process, type_, f, **fields)
        op["time"] = t
    found = checkers.check_unassigned(h.snapshot())
    assert [(a["kind"], a["process"], a["since"], a["lost"], a["member"], a["errors_since"])
            for a in found] == [("member-unassigned", "consumer-1", 10, True,
                                 "consumer-1-abc", 1)]
    assert found[0]["seconds"] == 490
    # Stopped soon after its revoke, it is the harness's doing: nothing to report.
    for op in h.snapshot():
        if op["process"] == "consumer-1" and op["f"] == "stop":
            op["time"] = 10 + checkers.UNASSIGNED_S - 1
    assert checkers.check_unassigned(h.snapshot()) == []
