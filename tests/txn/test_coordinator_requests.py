"""The transaction coordinator one raw request at a time (#23): EndTxn, InitProducerId,
AddPartitionsToTxn and AddOffsetsToTxn answered for stale, current and next producer epochs in
each transaction state, at every version whose answer differs. Each expectation was read off
Apache Kafka 4.4.0 (transaction.version 2, its default) with these same requests."""
import time
import uuid

import pytest
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer.transaction import (AddOffsetsToTxnRequest,
                                                 AddPartitionsToTxnRequest, EndTxnRequest,
                                                 InitProducerIdRequest)

from harness import wire
from harness.clients import create_topic
from harness.txn import Rpc

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_AUTHORIZATION_FAILED = 29
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120


@pytest.fixture
def rpc(broker):
    with Rpc(broker.port) as r:
        yield r


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def find_coordinator(rpc, tid):
    """FindCoordinator(TRANSACTION) until it answers (it creates __transaction_state)."""
    r = rpc.until(FindCoordinatorRequest, 4, lambda r: r.coordinators[0].error_code,
                  key_type=1, coordinator_keys=[tid])
    assert r.coordinators[0].error_code == NONE


def init(rpc, tid, version=5, held=None, timeout_ms=60000, retry=True):
    """InitProducerId; `held` is the (producer id, epoch) a v3+ client names. Busy answers are
    retried unless `retry=False`. Returns (error, producer id, epoch)."""
    fields = dict(transactional_id=tid, transaction_timeout_ms=timeout_ms)
    if version >= 3:
        fields["producer_id"], fields["producer_epoch"] = held or (-1, -1)
    if retry:
        r = rpc.until(InitProducerIdRequest, version, lambda r: r.error_code, **fields)
    else:
        r = rpc(InitProducerIdRequest, version, **fields)
    return r.error_code, r.producer_id, r.producer_epoch


def fresh(rpc, prefix):
    """A new transactional id, initialised: (id, producer id, epoch 0)."""
    tid = unique(prefix)
    find_coordinator(rpc, tid)
    err, pid, epoch = init(rpc, tid)
    assert (err, epoch) == (NONE, 0)
    return tid, pid, epoch


def end(rpc, tid, pid, epoch, commit, version=5):
    """EndTxn: (error, producer id, epoch); v4 and older carry no producer, (error, None, None)."""
    r = rpc(EndTxnRequest, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
            committed=commit)
    if version < 5:
        return r.error_code, None, None
    return r.error_code, r.producer_id, r.producer_epoch


def add(rpc, tid, pid, epoch, partitions, version=3):
    """AddPartitionsToTxn v0-3: sorted [(topic, partition, error)]."""
    topics = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    r = rpc(AddPartitionsToTxnRequest, version, v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=t, partitions=ps) for t, ps in topics.items()])
    return sorted((t.name, p.partition_index, p.partition_error_code)
                  for t in r.results_by_topic_v3_and_below for p in t.results_by_partition)


def add_batch(rpc, transactions, version=4):
    """AddPartitionsToTxn v4+ (the brokers' form): `transactions` are (id, producer id, epoch,
    verify_only, [(topic, partition)]); returns sorted [(id, topic, partition, error)]."""
    body = []
    for tid, pid, epoch, verify_only, partitions in transactions:
        topics = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        body.append(AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
            topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in topics.items()]))
    r = rpc(AddPartitionsToTxnRequest, version, transactions=body)
    assert r.error_code == NONE
    return sorted((x.transactional_id, t.name, p.partition_index, p.partition_error_code)
                  for x in r.results_by_transaction for t in x.topic_results
                  for p in t.results_by_partition)


def add_offsets(rpc, tid, pid, epoch, group="g", version=3):
    return rpc(AddOffsetsToTxnRequest, version, transactional_id=tid, producer_id=pid,
               producer_epoch=epoch, group_id=group).error_code


def describe(rpc, tid):
    """DescribeTransactions: (error, state, producer id, epoch)."""
    s = rpc(DescribeTransactionsRequest, 0, transactional_ids=[tid]).transaction_states[0]
    return s.error_code, s.transaction_state, s.producer_id, s.producer_epoch


def settled(rpc, tid, timeout=20):
    """The state once no end is in progress (markers written): (state, producer id, epoch)."""
    deadline = time.monotonic() + timeout
    while True:
        err, state, pid, epoch = describe(rpc, tid)
        assert err == NONE
        if state not in ("PrepareCommit", "PrepareAbort") or time.monotonic() > deadline:
            return state, pid, epoch
        time.sleep(0.1)


def completed(rpc, tid, pid, epoch, topic, commit):
    """A KIP-890 transaction on `topic`-0, ended and settled: returns the epoch after it."""
    assert add(rpc, tid, pid, epoch, [(topic, 0)]) == [(topic, 0, NONE)]
    assert end(rpc, tid, pid, epoch, commit) == (NONE, pid, epoch + 1)
    assert settled(rpc, tid) == ("CompleteCommit" if commit else "CompleteAbort", pid, epoch + 1)
    return epoch + 1


# ---- EndTxn ------------------------------------------------------------------------------------

# Kafka's KIP-890 table: EndTxn v5 after a completed (or no) transaction. "retry" sends the epoch
# just before the current one (the previous end's), "current" the current one. An abort at the
# current epoch is a new, empty transaction's abort (franz-go sends one whenever a consumer is
# revoked mid-transaction): NONE with the epoch bumped. Cells: (error, epoch bumped?).
END_AFTER = {
    ("CompleteCommit", "commit", "retry"): (NONE, False),
    ("CompleteCommit", "commit", "current"): (INVALID_TXN_STATE, False),
    ("CompleteCommit", "abort", "retry"): (INVALID_TXN_STATE, False),
    ("CompleteCommit", "abort", "current"): (NONE, True),
    ("CompleteAbort", "commit", "retry"): (INVALID_TXN_STATE, False),
    ("CompleteAbort", "commit", "current"): (INVALID_TXN_STATE, False),
    ("CompleteAbort", "abort", "retry"): (NONE, False),
    ("CompleteAbort", "abort", "current"): (NONE, True),
    ("Empty", "commit", "current"): (INVALID_TXN_STATE, False),
    ("Empty", "abort", "current"): (NONE, True),
}


@pytest.mark.parametrize("before,request_kind,epoch_kind", sorted(END_AFTER))
def test_end_txn_v5_after_a_completed_or_empty_transaction(broker, rpc, topic_name, before,
                                                           request_kind, epoch_kind):
    create_topic(broker, topic_name)
    tid, pid, epoch = fresh(rpc, "end")
    if before != "Empty":
        epoch = completed(rpc, tid, pid, epoch, topic_name, before == "CompleteCommit")
    sent = epoch - 1 if epoch_kind == "retry" else epoch
    code, bumped = END_AFTER[(before, request_kind, epoch_kind)]
    got = end(rpc, tid, pid, sent, request_kind == "commit")
    now = epoch + 1 if bumped else epoch
    if code == NONE:
        # v5 answers the producer the client continues with: the current one for a retry.
        assert got == (NONE, pid, now)
    else:
        assert got == (code, -1, -1)
    after = "CompleteAbort" if bumped else before
    assert settled(rpc, tid) == (after, pid, now)
    if bumped:
        # The session goes on at the new epoch.
        epoch = completed(rpc, tid, pid, now, topic_name, True)
        assert settled(rpc, tid) == ("CompleteCommit", pid, epoch)


def test_end_txn_v5_fences_every_other_epoch(broker, rpc, topic_name):
    create_topic(broker, topic_name)
    # Empty at epoch 0: the epoch before (-1 here, as any older) and after are fenced.
    tid, pid, epoch = fresh(rpc, "fence")
    for e in (epoch - 1, epoch + 1):
        for commit in (True, False):
            assert end(rpc, tid, pid, e, commit) == (PRODUCER_FENCED, -1, -1)
    assert end(rpc, tid, pid + 1000, epoch, False) == (INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert end(rpc, unique("unknown"), pid, epoch, False) == \
        (INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert end(rpc, "", pid, epoch, False) == (INVALID_REQUEST, -1, -1)
    # Ongoing: only the current epoch ends it (the one before is no retry of anything).
    assert add(rpc, tid, pid, epoch, [(topic_name, 0)]) == [(topic_name, 0, NONE)]
    for e in (epoch - 1, epoch + 1):
        assert end(rpc, tid, pid, e, True) == (PRODUCER_FENCED, -1, -1)
    assert settled(rpc, tid) == ("Ongoing", pid, epoch)
    assert end(rpc, tid, pid, epoch, True) == (NONE, pid, epoch + 1)
    # Completed: an epoch ahead of the current one is fenced too.
    assert settled(rpc, tid) == ("CompleteCommit", pid, epoch + 1)
    for commit in (True, False):
        assert end(rpc, tid, pid, epoch + 2, commit) == (PRODUCER_FENCED, -1, -1)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_end_txn_before_v5_keeps_the_epoch(broker, rpc, topic_name, version):
    """EndTxn v0-4 (no KIP-890): only the current epoch, no empty abort, a completed end of
    the same kind is its retry; a fenced epoch is INVALID_PRODUCER_EPOCH below v2."""
    create_topic(broker, topic_name)
    fenced = INVALID_PRODUCER_EPOCH if version < 2 else PRODUCER_FENCED
    tid, pid, epoch = fresh(rpc, "classic")
    assert end(rpc, tid, pid, epoch, False, version)[0] == INVALID_TXN_STATE
    assert end(rpc, tid, pid, epoch + 1, False, version)[0] == fenced
    for commit in (True, False):
        tid, pid, epoch = fresh(rpc, "classic")
        assert add(rpc, tid, pid, epoch, [(topic_name, 0)]) == [(topic_name, 0, NONE)]
        assert end(rpc, tid, pid, epoch, commit, version)[0] == NONE
        state = "CompleteCommit" if commit else "CompleteAbort"
        assert settled(rpc, tid) == (state, pid, epoch)
        assert end(rpc, tid, pid, epoch, commit, version)[0] == NONE
        assert end(rpc, tid, pid, epoch, not commit, version)[0] == INVALID_TXN_STATE
        assert end(rpc, tid, pid, epoch + 1, commit, version)[0] == fenced
        assert settled(rpc, tid) == (state, pid, epoch)


def test_end_txn_versions_mixed_on_one_id(broker, rpc, topic_name):
    """Each EndTxn is judged at its own version's rules, whatever ended the id before."""
    create_topic(broker, topic_name)
    # A KIP-890 commit, then v4 ends: the epoch before the bump is fenced, the new one is the
    # committed transaction's retry.
    tid, pid, epoch = fresh(rpc, "mixed")
    epoch = completed(rpc, tid, pid, epoch, topic_name, True)
    assert end(rpc, tid, pid, epoch - 1, True, 4)[0] == PRODUCER_FENCED
    assert end(rpc, tid, pid, epoch, True, 4)[0] == NONE
    assert end(rpc, tid, pid, epoch, False, 4)[0] == INVALID_TXN_STATE
    # A v4 commit, then v5 ends: no retry epoch exists, the current one aborts anew.
    tid, pid, epoch = fresh(rpc, "mixed")
    assert add(rpc, tid, pid, epoch, [(topic_name, 0)]) == [(topic_name, 0, NONE)]
    assert end(rpc, tid, pid, epoch, True, 4)[0] == NONE
    assert settled(rpc, tid) == ("CompleteCommit", pid, epoch)
    assert end(rpc, tid, pid, epoch, True) == (INVALID_TXN_STATE, -1, -1)
    assert end(rpc, tid, pid, epoch, False) == (NONE, pid, epoch + 1)
    assert settled(rpc, tid) == ("CompleteAbort", pid, epoch + 1)


def test_requests_after_a_timed_out_transaction(broker_factory, topic_name):
    """The coordinator's own abort of a timed-out transaction bumps the epoch like a client's
    KIP-890 abort: the producer's epoch is then the retry epoch (its abort answers NONE, its
    commit INVALID_TXN_STATE, InitProducerId with it gets the current epoch unbumped) and the
    new one starts the next transaction."""
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    create_topic(b, topic_name)
    with Rpc(b.port) as rpc:
        ids = []
        for _ in range(4):
            tid = unique("timeout")
            find_coordinator(rpc, tid)
            err, pid, epoch = init(rpc, tid, timeout_ms=1000)
            assert (err, epoch) == (NONE, 0)
            assert add(rpc, tid, pid, epoch, [(topic_name, 0)]) == [(topic_name, 0, NONE)]
            ids.append((tid, pid))
        deadline = time.monotonic() + 60
        for tid, pid in ids:
            while describe(rpc, tid)[1] != "CompleteAbort" and time.monotonic() < deadline:
                time.sleep(0.2)
            assert describe(rpc, tid) == (NONE, "CompleteAbort", pid, 1)
        (t0, p0), (t1, p1), (t2, p2), (t3, p3) = ids
        assert end(rpc, t0, p0, 0, False) == (NONE, p0, 1)
        assert end(rpc, t0, p0, 0, True) == (INVALID_TXN_STATE, -1, -1)
        assert end(rpc, t0, p0, 1, False) == (NONE, p0, 2)
        assert end(rpc, t1, p1, 1, True) == (INVALID_TXN_STATE, -1, -1)
        assert init(rpc, t2, 5, (p2, 0)) == (NONE, p2, 1)
        assert describe(rpc, t2) == (NONE, "Empty", p2, 1)
        assert add(rpc, t3, p3, 0, [(topic_name, 0)]) == [(topic_name, 0, PRODUCER_FENCED)]
        assert add(rpc, t3, p3, 1, [(topic_name, 0)]) == [(topic_name, 0, NONE)]


# ---- InitProducerId ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [3, 4, 5])
def test_init_producer_id_with_the_producer_the_client_holds(broker, rpc, version):
    """KIP-360: a v3+ client names the producer it holds. Its current epoch is bumped, the epoch
    it held before is a retry answered without a bump, any other is fenced (PRODUCER_FENCED,
    INVALID_PRODUCER_EPOCH below v4); both fields or neither."""
    fenced = INVALID_PRODUCER_EPOCH if version < 4 else PRODUCER_FENCED
    tid, pid, epoch = fresh(rpc, "held")
    assert init(rpc, tid, version, (pid, epoch)) == (NONE, pid, epoch + 1)
    assert init(rpc, tid, version, (pid, epoch)) == (NONE, pid, epoch + 1)
    for e in (epoch + 2, epoch + 7):
        assert init(rpc, tid, version, (pid, e)) == (fenced, -1, -1)
    assert init(rpc, tid, version, (pid + 77, epoch)) == (fenced, -1, -1)
    assert init(rpc, tid, version, (-1, 3), retry=False) == (INVALID_REQUEST, -1, -1)
    assert init(rpc, tid, version, (pid, -1), retry=False) == (INVALID_REQUEST, -1, -1)
    # Without a held producer the epoch is bumped and the one before forgotten.
    assert init(rpc, tid, version) == (NONE, pid, epoch + 2)
    assert init(rpc, tid, version, (pid, epoch + 1)) == (fenced, -1, -1)
    assert describe(rpc, tid) == (NONE, "Empty", pid, epoch + 2)


def test_init_producer_id_request_checks(broker, rpc):
    tid, pid, epoch = fresh(rpc, "checks")
    assert init(rpc, "", retry=False) == (INVALID_REQUEST, -1, -1)
    for timeout_ms in (0, -5, 900001):
        assert init(rpc, tid, timeout_ms=timeout_ms, retry=False) == \
            (INVALID_TRANSACTION_TIMEOUT, -1, -1)
    # An id the coordinator does not know starts at epoch 0, whatever the client held.
    other = unique("unknown")
    find_coordinator(rpc, other)
    err, other_pid, other_epoch = init(rpc, other, 5, (pid, 3))
    assert (err, other_epoch) == (NONE, 0) and other_pid != pid
    # The idempotent form checks the held producer's fields the same way, ignores the rest.
    r = rpc(InitProducerIdRequest, 4, transactional_id=None, transaction_timeout_ms=60000,
            producer_id=-1, producer_epoch=3)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_REQUEST, -1, -1)
    r = rpc(InitProducerIdRequest, 4, transactional_id=None, transaction_timeout_ms=-1,
            producer_id=5, producer_epoch=3)
    assert (r.error_code, r.producer_epoch) == (NONE, 0) and r.producer_id >= 0
    assert describe(rpc, "") == (INVALID_REQUEST, "", 0, 0)
    assert describe(rpc, unique("unknown")) == (TRANSACTIONAL_ID_NOT_FOUND, "", 0, 0)


def test_init_producer_id_fences_an_open_transaction(broker, rpc, topic_name):
    """An open transaction is aborted whatever epoch the new client names (only its producer id
    is checked); the fencing epoch is never handed out: CONCURRENT_TRANSACTIONS with -1/-1, and
    the retry gets the epoch after it."""
    create_topic(broker, topic_name)
    for held in (None, "current", "stale"):
        tid, pid, epoch = fresh(rpc, "open")
        assert init(rpc, tid, 5, (pid, epoch)) == (NONE, pid, epoch + 1)
        epoch += 1
        assert add(rpc, tid, pid, epoch, [(topic_name, 0)]) == [(topic_name, 0, NONE)]
        named = {None: None, "current": (pid, epoch), "stale": (pid, epoch - 1)}[held]
        assert init(rpc, tid, 3, named, retry=False) == (CONCURRENT_TRANSACTIONS, -1, -1)
        assert settled(rpc, tid) == ("CompleteAbort", pid, epoch + 1)
        # The retry: with the epoch it named (the last one now) no new bump, else one more.
        want = epoch + 1 if held == "current" else epoch + 2
        if held == "stale":
            # The stale epoch is neither the current nor the last one any more.
            assert init(rpc, tid, 3, named) == (INVALID_PRODUCER_EPOCH, -1, -1)
            assert init(rpc, tid, 3) == (NONE, pid, want)
        else:
            assert init(rpc, tid, 3, named) == (NONE, pid, want)
        assert describe(rpc, tid) == (NONE, "Empty", pid, want)
    # A producer id the transaction was not opened with is fenced, nothing is aborted.
    tid, pid, epoch = fresh(rpc, "open")
    assert add(rpc, tid, pid, epoch, [(topic_name, 0)]) == [(topic_name, 0, NONE)]
    assert init(rpc, tid, 5, (pid + 5, epoch), retry=False) == (PRODUCER_FENCED, -1, -1)
    assert describe(rpc, tid) == (NONE, "Ongoing", pid, epoch)


def test_init_producer_id_after_a_kip_890_end(broker, rpc, topic_name):
    """The end bumped the epoch: the epoch before it is the last one (answered without a bump),
    the new one is current (bumped)."""
    create_topic(broker, topic_name)
    tid, pid, epoch = fresh(rpc, "after")
    after = completed(rpc, tid, pid, epoch, topic_name, True)
    assert init(rpc, tid, 5, (pid, epoch)) == (NONE, pid, after)
    assert init(rpc, tid, 5, (pid, after)) == (NONE, pid, after + 1)
    assert init(rpc, tid, 5, (pid, after)) == (NONE, pid, after + 1)
    assert describe(rpc, tid) == (NONE, "Empty", pid, after + 1)


def test_init_producer_id_v6_is_not_served(broker, rpc):
    """v6 (KIP-939 two-phase commit) is Kafka 4.4's unstable latest version: not advertised, and
    a request at it closes the connection."""
    _, err, apis, _ = wire.api_versions(broker.port, 3)
    assert err == 0 and apis[22] == (0, 5)
    tid = unique("v6")
    find_coordinator(rpc, tid)
    with pytest.raises(ConnectionError):
        init(rpc, tid, 6, retry=False)


# ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions_refuses_the_whole_request_for_an_unknown_partition(broker, rpc,
                                                                          topic_name, version):
    """One unknown topic or partition (or, from a client, an internal topic) fails the whole
    request before the coordinator sees it: the failing partitions with their error, the
    others OPERATION_NOT_ATTEMPTED; nothing is added, whatever the epoch."""
    create_topic(broker, topic_name, partitions=2)
    missing = unique("no-such-topic")
    fenced = INVALID_PRODUCER_EPOCH if version < 2 else PRODUCER_FENCED
    tid, pid, epoch = fresh(rpc, "add")
    cases = [
        ([(topic_name, 0), (missing, 0)],
         [(topic_name, 0, OPERATION_NOT_ATTEMPTED), (missing, 0, UNKNOWN_TOPIC_OR_PARTITION)]),
        ([(topic_name, 0), (topic_name, 7)],
         [(topic_name, 0, OPERATION_NOT_ATTEMPTED), (topic_name, 7, UNKNOWN_TOPIC_OR_PARTITION)]),
        ([(missing, 1)], [(missing, 1, UNKNOWN_TOPIC_OR_PARTITION)]),
        ([(topic_name, 1), ("__consumer_offsets", 0)],
         sorted([(topic_name, 1, OPERATION_NOT_ATTEMPTED),
                 ("__consumer_offsets", 0, TOPIC_AUTHORIZATION_FAILED)])),
    ]
    for e in (epoch, epoch + 3):
        for partitions, want in cases:
            assert add(rpc, tid, pid, e, partitions, version) == sorted(want)
    assert describe(rpc, tid) == (NONE, "Empty", pid, epoch)
    # Known partitions are checked by the coordinator.
    assert add(rpc, tid, pid, epoch + 3, [(topic_name, 0)], version) == \
        [(topic_name, 0, fenced)]
    assert add(rpc, tid, pid + 9, epoch, [(topic_name, 0)], version) == \
        [(topic_name, 0, INVALID_PRODUCER_ID_MAPPING)]
    assert add(rpc, "", pid, epoch, [(topic_name, 0)], version) == \
        [(topic_name, 0, INVALID_REQUEST)]
    assert add(rpc, tid, pid, epoch, [(topic_name, 0), (topic_name, 1)], version) == \
        [(topic_name, 0, NONE), (topic_name, 1, NONE)]
    assert describe(rpc, tid) == (NONE, "Ongoing", pid, epoch)


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_batches_and_verification(broker, rpc, topic_name, version):
    """v4+ (brokers): each transaction of a batch is judged alone, the unknown-partition rule
    included (internal topics are allowed); verify-only answers NONE for partitions in the
    transaction and TRANSACTION_ABORTABLE for the others, without adding them."""
    create_topic(broker, topic_name, partitions=2)
    missing = unique("no-such-topic")
    # __consumer_offsets exists once a group coordinator was looked up.
    rpc.until(FindCoordinatorRequest, 4, lambda r: r.coordinators[0].error_code, key_type=0,
              coordinator_keys=[unique("group")])
    (t1, p1, e1), (t2, p2, e2), (t3, p3, e3) = (fresh(rpc, "b") for _ in range(3))
    got = add_batch(rpc, [(t1, p1, e1, False, [(topic_name, 0), ("__consumer_offsets", 0)]),
                          (t2, p2, e2, False, [(topic_name, 1), (missing, 0)]),
                          (t3, p3, e3 + 1, False, [(topic_name, 0)])], version)
    assert got == sorted([(t1, topic_name, 0, NONE), (t1, "__consumer_offsets", 0, NONE),
                          (t2, topic_name, 1, OPERATION_NOT_ATTEMPTED),
                          (t2, missing, 0, UNKNOWN_TOPIC_OR_PARTITION),
                          (t3, topic_name, 0, PRODUCER_FENCED)])
    assert [describe(rpc, t)[1] for t in (t1, t2, t3)] == ["Ongoing", "Empty", "Empty"]

    def verify(tid, pid, epoch, partitions):
        return add_batch(rpc, [(tid, pid, epoch, True, partitions)], version)

    assert verify(t1, p1, e1, [(topic_name, 0), (topic_name, 1)]) == \
        [(t1, topic_name, 0, NONE), (t1, topic_name, 1, TRANSACTION_ABORTABLE)]
    assert verify(t1, p1, e1, [(topic_name, 0), (missing, 0)]) == \
        sorted([(t1, topic_name, 0, OPERATION_NOT_ATTEMPTED),
                (t1, missing, 0, UNKNOWN_TOPIC_OR_PARTITION)])
    assert verify(t1, p1, e1 + 1, [(topic_name, 0)]) == [(t1, topic_name, 0, PRODUCER_FENCED)]
    assert verify(t1, p1 + 9, e1, [(topic_name, 0)]) == \
        [(t1, topic_name, 0, INVALID_PRODUCER_ID_MAPPING)]
    assert verify(t2, p2, e2, [(topic_name, 0)]) == [(t2, topic_name, 0, TRANSACTION_ABORTABLE)]
    other = unique("unknown")
    assert verify(other, p2, e2, [(topic_name, 0)]) == \
        [(other, topic_name, 0, INVALID_PRODUCER_ID_MAPPING)]
    assert verify("", p2, e2, [(topic_name, 0)]) == [("", topic_name, 0, INVALID_REQUEST)]
    assert add_batch(rpc, [("", p2, e2, False, [(topic_name, 0)])], version) == \
        [("", topic_name, 0, INVALID_REQUEST)]
    assert [describe(rpc, t)[1] for t in (t1, t2)] == ["Ongoing", "Empty"]
    # After the end nothing is in the transaction any more.
    assert end(rpc, t1, p1, e1, True) == (NONE, p1, e1 + 1)
    assert settled(rpc, t1) == ("CompleteCommit", p1, e1 + 1)
    assert verify(t1, p1, e1 + 1, [(topic_name, 0)]) == \
        [(t1, topic_name, 0, TRANSACTION_ABORTABLE)]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_add_offsets_to_txn_checks(broker, rpc, topic_name, version):
    fenced = INVALID_PRODUCER_EPOCH if version < 2 else PRODUCER_FENCED
    tid, pid, epoch = fresh(rpc, "offsets")
    assert add_offsets(rpc, tid, pid, epoch + 3, version=version) == fenced
    assert add_offsets(rpc, tid, pid + 9, epoch, version=version) == INVALID_PRODUCER_ID_MAPPING
    assert add_offsets(rpc, unique("unknown"), pid, epoch, version=version) == \
        INVALID_PRODUCER_ID_MAPPING
    assert add_offsets(rpc, "", pid, epoch, version=version) == INVALID_REQUEST
    assert add_offsets(rpc, tid, pid, epoch, version=version) == NONE
    assert describe(rpc, tid)[1] == "Ongoing"
