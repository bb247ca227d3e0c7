"""Cases: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
WriteTxnMarkers, DescribeTransactions, ListTransactions."""
from harness import schema_codec as sc

from .corpus_data import RECS, TS, produce
from .corpus_topics import topic
from .engine import case


def txn_id(c, suffix=""):
    return f"x.{c.slug}{suffix}"


def open_txn(c, partitions=1, produce=True):
    """A transaction with one record batch written to this case's topic: (txn, t, pid, epoch)."""
    t = topic(c)
    c.create_topic(t, partitions=partitions)
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0]})
    if produce:
        c.produce(t, RECS, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                  base_sequence=0, transactional=True, timestamp=TS)
    return txn, t, pid, epoch


def end_txn(c, txn, pid, epoch, commit=True, version=4, check=True, label=None):
    return c.call("EndTxn", version, {"TransactionalId": txn, "ProducerId": pid,
                                      "ProducerEpoch": epoch, "Committed": commit},
                  check=check, label=label)


# ---- InitProducerId ------------------------------------------------------------------------

def ipi(c, txn, timeout=60000, pid=-1, epoch=-1, version=5, label=None):
    return c.call("InitProducerId", version, {"TransactionalId": txn,
                                              "TransactionTimeoutMs": timeout,
                                              "ProducerId": pid, "ProducerEpoch": epoch},
                  check=True, label=label)


@case("InitProducerId", "v5-idempotent")
def _(c):
    c.coordinator("x", key_type=1)  # the transaction log exists on both
    ipi(c, None)


@case("InitProducerId", "v5-transactional")
def _(c):
    txn = txn_id(c)
    c.coordinator(txn, key_type=1)
    r = ipi(c, txn)
    ipi(c, txn, label="again (epoch bump)")
    ipi(c, txn, pid=r["ProducerId"], epoch=r["ProducerEpoch"], label="with stale epoch")


@case("InitProducerId", "v5-timeout-too-large")
def _(c):
    txn = txn_id(c)
    c.coordinator(txn, key_type=1)
    ipi(c, txn, timeout=10_000_000)


@case("InitProducerId", "v5-timeout-zero")
def _(c):
    txn = txn_id(c)
    c.coordinator(txn, key_type=1)
    ipi(c, txn, timeout=0)


@case("InitProducerId", "v5-empty-transactional-id")
def _(c):
    c.coordinator("x", key_type=1)
    ipi(c, "")


@case("InitProducerId", "v5-unknown-producer-id-with-epoch")
def _(c):
    txn = txn_id(c)
    c.coordinator(txn, key_type=1)
    ipi(c, txn)
    ipi(c, txn, pid=424242, epoch=3, label="someone else's producer id")


@case("InitProducerId", "v5-ongoing-transaction")
def _(c):
    """A new InitProducerId while a transaction is open: the old one is aborted."""
    txn, t, pid, epoch = open_txn(c)

    def done():
        r = c.call("InitProducerId", 5, {"TransactionalId": txn,
                                         "TransactionTimeoutMs": 60000,
                                         "ProducerId": -1, "ProducerEpoch": -1})
        return r["ErrorCode"] != 51, r  # CONCURRENT_TRANSACTIONS while it aborts
    c.check("InitProducerId v5 (after retries)", c.wait_for("init after abort", done))


@case("InitProducerId", "v0-transactional")
def _(c):
    txn = txn_id(c)
    c.coordinator(txn, key_type=1)
    ipi(c, txn, version=0)


# ---- AddPartitionsToTxn --------------------------------------------------------------------

@case("AddPartitionsToTxn", "v3-ok")
def _(c):
    t = topic(c)
    c.create_topic(t, partitions=2)
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0, 1]}, check=True)


@case("AddPartitionsToTxn", "v3-unknown-partition")
def _(c):
    t = topic(c)
    c.create_topic(t)
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0, 4], topic(c, "-missing"): [0]}, check=True)


@case("AddPartitionsToTxn", "v3-fenced-epoch")
def _(c):
    t = topic(c)
    c.create_topic(t)
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch + 3, {t: [0]}, check=True)


@case("AddPartitionsToTxn", "v3-wrong-producer-id")
def _(c):
    t = topic(c)
    c.create_topic(t)
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid + 1000, epoch, {t: [0]}, check=True)


@case("AddPartitionsToTxn", "v3-unknown-transactional-id")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.coordinator(txn_id(c), key_type=1)
    c.add_partitions(txn_id(c), 5, 0, {t: [0]}, check=True)


@case("AddPartitionsToTxn", "v5-verify-only")
def _(c):
    """The broker-to-coordinator form (v4+): verify-only for a partition already added."""
    txn, t, pid, epoch = open_txn(c, produce=False)
    c.call("AddPartitionsToTxn", 5, {"Transactions": [
        {"TransactionalId": txn, "ProducerId": pid, "ProducerEpoch": epoch, "VerifyOnly": True,
         "Topics": [{"Name": t, "Partitions": [0, 1]}]}]}, check=True)


@case("AddPartitionsToTxn", "v0-ok")
def _(c):
    t = topic(c)
    c.create_topic(t)
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    c.add_partitions(txn, pid, epoch, {t: [0]}, check=True, version=0)


# ---- AddOffsetsToTxn / TxnOffsetCommit -----------------------------------------------------

@case("AddOffsetsToTxn", "v4-ok")
def _(c):
    txn, t, pid, epoch = open_txn(c, produce=False)
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": f"g.{c.slug}"},
           check=True)


@case("AddOffsetsToTxn", "v4-fenced-epoch")
def _(c):
    txn, t, pid, epoch = open_txn(c, produce=False)
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch + 2, "GroupId": f"g.{c.slug}"},
           check=True)


@case("AddOffsetsToTxn", "v4-empty-group-id")
def _(c):
    txn, t, pid, epoch = open_txn(c, produce=False)
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": ""}, check=True)


@case("AddOffsetsToTxn", "v0-ok")
def _(c):
    txn, t, pid, epoch = open_txn(c, produce=False)
    c.call("AddOffsetsToTxn", 0, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": f"g.{c.slug}"},
           check=True)


def toc_body(txn, g, pid, epoch, t, offsets, generation=-1, member=""):
    return {"TransactionalId": txn, "GroupId": g, "ProducerId": pid, "ProducerEpoch": epoch,
            "GenerationIdOrMemberEpoch": generation, "MemberId": member,
            "GroupInstanceId": None,
            "Topics": [{"Name": t, "Partitions": [
                {"PartitionIndex": p, "CommittedOffset": o, "CommittedLeaderEpoch": -1,
                 "CommittedMetadata": ""} for p, o in offsets.items()]}]}


@case("TxnOffsetCommit", "v5-ok-then-commit")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    g = f"g.{c.slug}"
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": g})
    c.call("TxnOffsetCommit", 5, toc_body(txn, g, pid, epoch, t, {0: 3}), check=True)
    end_txn(c, txn, pid, epoch, commit=True, check=False)

    def visible():
        r = c.call("OffsetFetch", 9, {"Groups": [{"GroupId": g, "Topics": None}],
                                      "RequireStable": True})
        return r["Groups"][0]["ErrorCode"] == 0 and r["Groups"][0]["Topics"], r
    c.check("OffsetFetch v9 after commit", c.wait_for("offsets committed", visible))


@case("TxnOffsetCommit", "v6-by-topic-id-then-commit")
def _(c):
    # v6 names topics by id (franz-go sends it): the offsets must land under that topic.
    txn, t, pid, epoch = open_txn(c)
    g = f"g.{c.slug}"
    tid = c.create_topic(f"{t}-in")
    c.coordinator(g)
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": g})
    body = toc_body(txn, g, pid, epoch, t, {0: 7})
    body["Topics"][0] = {"TopicId": tid, "Partitions": body["Topics"][0]["Partitions"]}
    c.call("TxnOffsetCommit", 6, body, check=True)
    end_txn(c, txn, pid, epoch, commit=True, check=False)

    def visible():
        r = c.call("OffsetFetch", 9, {"Groups": [{"GroupId": g, "Topics": None}],
                                      "RequireStable": True})
        return r["Groups"][0]["ErrorCode"] == 0 and r["Groups"][0]["Topics"], r
    c.check("OffsetFetch v9 after commit", c.wait_for("offsets committed", visible))


@case("TxnOffsetCommit", "v5-without-add-offsets")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    c.coordinator(f"g.{c.slug}")
    c.call("TxnOffsetCommit", 5, toc_body(txn, f"g.{c.slug}", pid, epoch, t, {0: 3}),
           check=True)


@case("TxnOffsetCommit", "v5-unknown-partition")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    g = f"g.{c.slug}"
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": g})
    c.call("TxnOffsetCommit", 5, toc_body(txn, g, pid, epoch, t, {7: 3}), check=True)


@case("TxnOffsetCommit", "v5-wrong-member")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    g = f"g.{c.slug}"
    c.join_classic(g)
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": g})
    c.call("TxnOffsetCommit", 5, toc_body(txn, g, pid, epoch, t, {0: 3}, generation=9,
                                          member="ghost"), check=True)


@case("TxnOffsetCommit", "v0-ok")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    g = f"g.{c.slug}"
    c.call("AddOffsetsToTxn", 4, {"TransactionalId": txn, "ProducerId": pid,
                                  "ProducerEpoch": epoch, "GroupId": g})
    c.call("TxnOffsetCommit", 0, toc_body(txn, g, pid, epoch, t, {0: 3}), check=True)


# ---- EndTxn --------------------------------------------------------------------------------

@case("EndTxn", "v4-commit")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch, commit=True)


@case("EndTxn", "v4-abort")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch, commit=False)


@case("EndTxn", "v5-commit-bumps-epoch")
def _(c):
    """v5+ (transaction version 2): the answer carries the producer id and the bumped epoch."""
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch, commit=True, version=5)


@case("EndTxn", "v4-no-transaction")
def _(c):
    txn = txn_id(c)
    pid, epoch = c.init_producer(txn)
    end_txn(c, txn, pid, epoch, commit=True)


@case("EndTxn", "v4-fenced-epoch")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch + 4, commit=True)


@case("EndTxn", "v4-wrong-producer-id")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid + 77, epoch, commit=True)


@case("EndTxn", "v4-commit-after-abort")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch, commit=False, label="abort")

    def settled():
        r = c.call("DescribeTransactions", 0, {"TransactionalIds": [txn]})
        return r["TransactionStates"][0]["TransactionState"] == "CompleteAbort", r
    c.wait_for("abort completes", settled)
    end_txn(c, txn, pid, epoch, commit=True, label="commit")


@case("EndTxn", "v4-unknown-transactional-id")
def _(c):
    c.coordinator(txn_id(c), key_type=1)
    end_txn(c, txn_id(c), 5, 0, commit=True)


@case("EndTxn", "v0-commit")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch, commit=True, version=0)


# ---- WriteTxnMarkers (inter-broker; a client may send it) ---------------------------------

@case("WriteTxnMarkers", "v1-unknown-producer")
def _(c):
    t = topic(c)
    c.create_topic(t)
    c.call("WriteTxnMarkers", 1, {"Markers": [
        {"ProducerId": 999999, "ProducerEpoch": 0, "TransactionResult": True,
         "Topics": [{"Name": t, "PartitionIndexes": [0]}], "CoordinatorEpoch": 0}]},
        check=True)


@case("WriteTxnMarkers", "v1-unknown-topic")
def _(c):
    c.call("WriteTxnMarkers", 1, {"Markers": [
        {"ProducerId": 999999, "ProducerEpoch": 0, "TransactionResult": False,
         "Topics": [{"Name": topic(c), "PartitionIndexes": [0]}], "CoordinatorEpoch": 0}]},
        check=True)


# ---- DescribeTransactions / ListTransactions -----------------------------------------------

@case("DescribeTransactions", "ongoing")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    c.call("DescribeTransactions", 0, {"TransactionalIds": [txn]}, check=True)


@case("DescribeTransactions", "empty-state")
def _(c):
    txn = txn_id(c)
    c.init_producer(txn)
    c.call("DescribeTransactions", 0, {"TransactionalIds": [txn]}, check=True)


@case("DescribeTransactions", "after-commit")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    end_txn(c, txn, pid, epoch, commit=True, check=False)

    def settled():
        r = c.call("DescribeTransactions", 0, {"TransactionalIds": [txn]})
        return r["TransactionStates"][0]["TransactionState"] == "CompleteCommit", r
    c.check("DescribeTransactions v0", c.wait_for("commit completes", settled))


@case("DescribeTransactions", "unknown-and-empty-id")
def _(c):
    c.coordinator(txn_id(c), key_type=1)
    c.call("DescribeTransactions", 0, {"TransactionalIds": [txn_id(c), ""]}, check=True)


def _own(r, prefix):
    r["TransactionStates"] = sorted(
        (x for x in r["TransactionStates"] if x["TransactionalId"].startswith(prefix)),
        key=lambda x: x["TransactionalId"])
    return r


@case("ListTransactions", "v2-own")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    r = c.call("ListTransactions", 2, {"StateFilters": [], "ProducerIdFilters": []})
    c.check("ListTransactions v2 (this case's)", _own(r, txn))


@case("ListTransactions", "v2-state-filter")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    r = c.call("ListTransactions", 2, {"StateFilters": ["Ongoing", "NoSuchState"],
                                       "ProducerIdFilters": []})
    c.check("ListTransactions v2 Ongoing (this case's)", _own(r, txn))


@case("ListTransactions", "v2-pattern")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    c.call("ListTransactions", 2, {"StateFilters": [], "ProducerIdFilters": [],
                                   "TransactionalIdPattern": "^" + txn.replace(".", "\\.")},
           check=True)


@case("ListTransactions", "v2-invalid-pattern")
def _(c):
    c.coordinator(txn_id(c), key_type=1)
    c.call("ListTransactions", 2, {"StateFilters": [], "ProducerIdFilters": [],
                                   "TransactionalIdPattern": "(unclosed"}, check=True)


@case("ListTransactions", "v1-duration-filter")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    r = c.call("ListTransactions", 1, {"StateFilters": [], "ProducerIdFilters": [],
                                       "DurationFilter": 3_600_000})
    c.check("ListTransactions v1 older than an hour (this case's)", _own(r, txn))


@case("ListTransactions", "v0-producer-id-filter")
def _(c):
    txn, t, pid, epoch = open_txn(c)
    r = c.call("ListTransactions", 0, {"StateFilters": [], "ProducerIdFilters": [pid]})
    c.check("ListTransactions v0 by producer id (this case's)", _own(r, txn))


# ---- last: a case that writes into __consumer_offsets (on a broker that accepts it, nothing
# after it should depend on that partition's contents)

@case("Produce", "v11-internal-topic")
def _(c):
    """A client writing to __consumer_offsets (keyed, so compaction rules don't reject it)."""
    c.coordinator("d-produce-internal")
    produce(c, "__consumer_offsets", sc.record_batch([(b"junk-key", b"junk")], timestamp=TS))
