//! The transaction coordinator's state machine (Kafka's `TransactionCoordinator`): every error
//! path of InitProducerId / AddPartitionsToTxn / EndTxn, fencing, timeouts, transaction
//! version 2 epoch bumps, and `__transaction_state` replay rebuilding the same state.

use kactor_actors::txn::core::{
    codes, InitDecision, MarkerJob, Transit, TxnCoordinatorConfig, TxnCoordinatorCore, TxnMetadata,
    TxnState,
};
use kactor_actors::txn::log::{decode, encode_key, encode_value};

const T: i64 = 1_000_000;

/// Runs the core and keeps every committed record, as `__transaction_state` would.
struct Harness {
    core: TxnCoordinatorCore,
    log: Vec<(bytes::Bytes, Option<bytes::Bytes>)>,
    next_pid: i64,
}

impl Harness {
    fn new() -> Self {
        Harness {
            core: TxnCoordinatorCore::new(TxnCoordinatorConfig::default()),
            log: Vec::new(),
            next_pid: 1000,
        }
    }

    fn commit(&mut self, t: &Transit) -> Option<MarkerJob> {
        self.log.push((
            encode_key(&t.target.transactional_id).unwrap(),
            Some(encode_value(&t.target).unwrap()),
        ));
        self.core.complete_write(t, true)
    }

    /// InitProducerId as the actor drives it: fetch an id when asked, write, answer.
    fn init(&mut self, id: &str, expected: (i64, i16), tv: i16) -> Result<(i64, i16, i16), i16> {
        let mut fresh = None;
        loop {
            match self
                .core
                .init_producer_id(id, 60_000, expected, tv, fresh, T)
                .map_err(|e| e.code())?
            {
                InitDecision::NeedProducerId => {
                    self.next_pid += 1;
                    fresh = Some(self.next_pid);
                }
                InitDecision::Write(t, r) => {
                    if let Some(job) = self.commit(&t) {
                        // A fenced open transaction is aborted right away.
                        assert!(!job.commit);
                        let done = self.core.markers_written(id, T).unwrap();
                        self.commit(&done);
                    }
                    return Ok((r.producer_id, r.producer_epoch, r.error));
                }
            }
        }
    }

    fn add(&mut self, id: &str, pid: i64, epoch: i16, parts: &[(&str, i32)]) -> Result<bool, i16> {
        let parts: Vec<(String, i32)> = parts.iter().map(|(t, p)| (t.to_string(), *p)).collect();
        match self
            .core
            .add_partitions(id, pid, epoch, &parts, T)
            .map_err(|e| e.code())?
        {
            Some(t) => {
                self.commit(&t);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// EndTxn: answers after the Prepare write; returns the marker job.
    fn end(
        &mut self,
        id: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<Option<MarkerJob>, i16> {
        match self
            .core
            .end_txn(id, pid, epoch, commit, T)
            .map_err(|e| e.code())?
        {
            Some(t) => Ok(self.commit(&t)),
            None => Ok(None),
        }
    }

    fn finish_markers(&mut self, id: &str) {
        let t = self.core.markers_written(id, T).expect("prepared");
        assert!(self.commit(&t).is_none());
    }

    fn state(&self, id: &str) -> TxnState {
        self.core.get(id).unwrap().state
    }
}

#[test]
fn init_hands_out_an_id_then_bumps_the_epoch() {
    let mut h = Harness::new();
    let (pid, epoch, err) = h.init("tx", (-1, -1), 0).unwrap();
    assert_eq!((epoch, err), (0, codes::NONE));
    assert_eq!(h.state("tx"), TxnState::Empty);
    let (pid2, epoch2, _) = h.init("tx", (-1, -1), 0).unwrap();
    assert_eq!((pid2, epoch2), (pid, 1));
}

#[test]
fn invalid_timeout_and_concurrent_requests() {
    let mut h = Harness::new();
    assert_eq!(
        h.core
            .init_producer_id("tx", 900_001, (-1, -1), 0, Some(1), T)
            .unwrap_err()
            .code(),
        codes::INVALID_TRANSACTION_TIMEOUT
    );
    let InitDecision::Write(t, _) = h
        .core
        .init_producer_id("tx", 1000, (-1, -1), 0, Some(1), T)
        .unwrap()
    else {
        panic!()
    };
    // The write is in flight: anything else on this id must wait.
    assert_eq!(
        h.core
            .init_producer_id("tx", 1000, (-1, -1), 0, Some(2), T)
            .unwrap_err()
            .code(),
        codes::CONCURRENT_TRANSACTIONS
    );
    // A failed write leaves nothing behind.
    assert!(h.core.complete_write(&t, false).is_none());
    assert!(h.core.get("tx").is_none());
}

#[test]
fn add_partitions_checks_the_producer_and_is_idempotent() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", (-1, -1), 0).unwrap();
    assert_eq!(
        h.add("nope", pid, epoch, &[("a", 0)]),
        Err(codes::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        h.add("tx", pid + 1, epoch, &[("a", 0)]),
        Err(codes::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        h.add("tx", pid, epoch + 1, &[("a", 0)]),
        Err(codes::PRODUCER_FENCED)
    );
    assert_eq!(h.add("tx", pid, epoch, &[("a", 0), ("a", 1)]), Ok(true));
    assert_eq!(h.state("tx"), TxnState::Ongoing);
    assert_eq!(h.add("tx", pid, epoch, &[("a", 1)]), Ok(false), "no write");
    assert_eq!(h.add("tx", pid, epoch, &[("b", 0)]), Ok(true));
    let verified = h
        .core
        .verify_partitions("tx", pid, epoch, &[("a".into(), 0), ("c".into(), 0)])
        .unwrap();
    assert_eq!(verified[0].1, codes::NONE);
    assert_eq!(verified[1].1, codes::INVALID_TXN_STATE);
}

#[test]
fn commit_goes_through_prepare_markers_and_complete() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", (-1, -1), 0).unwrap();
    h.add("tx", pid, epoch, &[("a", 0), ("b", 2)]).unwrap();
    let job = h.end("tx", pid, epoch, true).unwrap().unwrap();
    assert!(job.commit);
    assert_eq!(job.producer_epoch, epoch, "TV1 keeps the epoch");
    assert_eq!(
        job.partitions,
        vec![("a".to_string(), 0), ("b".to_string(), 2)]
    );
    assert_eq!(h.state("tx"), TxnState::PrepareCommit);
    // While markers are out, the same end is still in progress, the other is invalid.
    assert_eq!(
        h.end("tx", pid, epoch, true),
        Err(codes::CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        h.add("tx", pid, epoch, &[("c", 0)]),
        Err(codes::CONCURRENT_TRANSACTIONS)
    );
    h.finish_markers("tx");
    assert_eq!(h.state("tx"), TxnState::CompleteCommit);
    assert!(h.core.get("tx").unwrap().partitions.is_empty());
    // A retried commit is fine; an abort of a committed transaction is not.
    assert_eq!(h.end("tx", pid, epoch, true), Ok(None));
    assert_eq!(
        h.end("tx", pid, epoch, false),
        Err(codes::INVALID_TXN_STATE)
    );
    // EndTxn on an Empty transaction (TV1) is invalid too.
    let (pid, epoch, _) = h.init("tx2", (-1, -1), 0).unwrap();
    assert_eq!(
        h.end("tx2", pid, epoch, true),
        Err(codes::INVALID_TXN_STATE)
    );
}

#[test]
fn a_new_producer_instance_fences_the_old_one_and_aborts_its_transaction() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", (-1, -1), 0).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    // Re-init while Ongoing: epoch bumped, open transaction aborted, client told to retry.
    let (pid2, epoch2, err) = h.init("tx", (-1, -1), 0).unwrap();
    assert_eq!(err, codes::CONCURRENT_TRANSACTIONS);
    assert_eq!((pid2, epoch2), (pid, epoch + 1));
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
    // The old instance is fenced.
    assert_eq!(
        h.add("tx", pid, epoch, &[("a", 0)]),
        Err(codes::PRODUCER_FENCED)
    );
    assert_eq!(h.end("tx", pid, epoch, true), Err(codes::PRODUCER_FENCED));
    // The retry gets a clean epoch.
    let (_, epoch3, err) = h.init("tx", (-1, -1), 0).unwrap();
    assert_eq!((epoch3, err), (epoch + 2, codes::NONE));
    // KIP-360: a client claiming an id/epoch it never had is fenced.
    assert_eq!(h.init("tx", (pid, 77), 0), Err(codes::PRODUCER_FENCED));
}

#[test]
fn timed_out_transactions_are_fenced_and_aborted() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", (-1, -1), 0).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    assert!(h.core.abort_timed_out(T + 59_999).is_empty());
    let aborts = h.core.abort_timed_out(T + 60_000);
    assert_eq!(aborts.len(), 1);
    let job = h.commit(&aborts[0]).unwrap();
    assert!(!job.commit);
    assert_eq!(job.producer_epoch, epoch + 1);
    h.finish_markers("tx");
    assert_eq!(h.end("tx", pid, epoch, true), Err(codes::PRODUCER_FENCED));
}

#[test]
fn transaction_version_2_bumps_the_epoch_at_every_end() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", (-1, -1), 2).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    let job = h.end("tx", pid, epoch, true).unwrap().unwrap();
    assert_eq!(
        job.producer_epoch,
        epoch + 1,
        "markers carry the bumped epoch"
    );
    assert_eq!(job.transaction_version, 2);
    h.finish_markers("tx");
    // A retry of the end with the old epoch succeeds; the next transaction uses the new one.
    assert_eq!(h.end("tx", pid, epoch, true), Ok(None));
    assert_eq!(h.add("tx", pid, epoch + 1, &[("a", 0)]), Ok(true));
    // An abort with nothing added is allowed in TV2 (and bumps again).
    let job = h.end("tx", pid, epoch + 1, false).unwrap().unwrap();
    h.finish_markers("tx");
    assert_eq!(job.producer_epoch, epoch + 2);
    let (_, e, _) = h.init("tx", (-1, -1), 2).unwrap();
    let job = h.end("tx", pid, e, false).unwrap().unwrap();
    assert!(job.partitions.is_empty());
    h.finish_markers("tx");
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
}

#[test]
fn replaying_the_transaction_log_rebuilds_the_same_state() {
    let mut h = Harness::new();
    let (p1, e1, _) = h.init("a", (-1, -1), 0).unwrap();
    h.add("a", p1, e1, &[("t", 0), ("u", 1)]).unwrap();
    let (p2, e2, _) = h.init("b", (-1, -1), 2).unwrap();
    h.add("b", p2, e2, &[("t", 1)]).unwrap();
    h.end("b", p2, e2, false).unwrap();
    let (p3, e3, _) = h.init("c", (-1, -1), 0).unwrap();
    h.add("c", p3, e3, &[("t", 2)]).unwrap();
    h.end("c", p3, e3, true).unwrap();
    h.finish_markers("c");

    let mut replayed = TxnCoordinatorCore::new(TxnCoordinatorConfig::default());
    for (k, v) in &h.log {
        let (id, m) = decode(k, v.as_ref()).unwrap();
        replayed.replay(&id, m);
    }
    // Kafka does not persist the previous epoch; everything else must match.
    let norm = |m: &TxnMetadata| TxnMetadata {
        last_producer_epoch: -1,
        ..m.clone()
    };
    let live: Vec<_> = h.core.transactions().map(norm).collect();
    let back: Vec<_> = replayed.transactions().map(norm).collect();
    assert_eq!(live, back);
    // "b" was loaded mid-abort: its markers are owed again.
    let owed = replayed.pending_marker_jobs();
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].transactional_id, "b");
    assert!(!owed[0].commit);
    // A tombstone removes the id.
    replayed.replay("a", None);
    assert!(replayed.get("a").is_none());
}

#[test]
fn list_filters_by_state_producer_and_duration() {
    let mut h = Harness::new();
    let (p1, e1, _) = h.init("a", (-1, -1), 0).unwrap();
    h.add("a", p1, e1, &[("t", 0)]).unwrap();
    let (p2, _, _) = h.init("b", (-1, -1), 0).unwrap();
    let names = |v: Vec<&TxnMetadata>| -> Vec<String> {
        v.into_iter().map(|m| m.transactional_id.clone()).collect()
    };
    assert_eq!(names(h.core.list(&[], &[], -1, T)), vec!["a", "b"]);
    assert_eq!(
        names(h.core.list(&["Ongoing".into()], &[], -1, T)),
        vec!["a"]
    );
    assert_eq!(names(h.core.list(&[], &[p2], -1, T)), vec!["b"]);
    assert_eq!(names(h.core.list(&[], &[], 5_000, T + 4_999)).len(), 0);
    assert_eq!(names(h.core.list(&[], &[], 5_000, T + 5_000)), vec!["a"]);
}

#[test]
fn end_txn_v5_makes_a_transaction_version_2_end_whatever_init_said() {
    let mut h = Harness::new();
    // Initialised as a classic producer, ended with EndTxn v5 (KIP-890 client).
    let (pid, epoch, _) = h.init("tx", (-1, -1), 0).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    let t = h
        .core
        .end_txn_versioned("tx", pid, epoch, true, Some(2), T)
        .unwrap()
        .unwrap();
    assert_eq!(t.target.producer_epoch, epoch + 1, "TV2 bumps at the end");
    assert_eq!(
        t.target.client_transaction_version, 2,
        "persisted with the end"
    );
    let job = h.commit(&t).unwrap();
    assert_eq!(job.producer_epoch, epoch + 1);
    h.finish_markers("tx");
    // EndTxn v4 and older (Some(0)) on a classic id keeps the epoch.
    let (pid, epoch, _) = h.init("classic", (-1, -1), 0).unwrap();
    h.add("classic", pid, epoch, &[("a", 1)]).unwrap();
    let t = h
        .core
        .end_txn_versioned("classic", pid, epoch, false, Some(0), T)
        .unwrap()
        .unwrap();
    assert_eq!(t.target.producer_epoch, epoch);
}

#[test]
fn idle_finished_ids_expire_and_open_ones_do_not() {
    let mut h = Harness::new();
    let expiration = 1_000;
    let (pid, epoch, _) = h.init("idle", (-1, -1), 0).unwrap();
    let (pid2, epoch2, _) = h.init("open", (-1, -1), 0).unwrap();
    h.add("open", pid2, epoch2, &[("t", 0)]).unwrap();
    // Not idle long enough yet.
    assert!(h
        .core
        .begin_expiration(T + expiration - 1, expiration)
        .is_empty());
    // Empty and idle: expires; Ongoing never does (Kafka's isExpirationAllowed).
    let ids = h.core.begin_expiration(T + expiration, expiration);
    assert_eq!(ids, vec!["idle".to_string()]);
    // While the tombstone is being written the id is busy.
    assert_eq!(
        h.core
            .add_partitions("idle", pid, epoch, &[("t".into(), 0)], T + expiration)
            .unwrap_err()
            .code(),
        codes::CONCURRENT_TRANSACTIONS
    );
    // A failed tombstone write keeps the id.
    h.core.complete_expiration("idle", false);
    assert!(h.core.get("idle").is_some());
    let ids = h.core.begin_expiration(T + expiration, expiration);
    assert_eq!(ids, vec!["idle".to_string()]);
    h.core.complete_expiration("idle", true);
    assert!(h.core.get("idle").is_none());
    assert!(h.core.get("open").is_some());
    // A tombstone replayed removes the id as well.
    let mut replayed = TxnCoordinatorCore::new(TxnCoordinatorConfig::default());
    for (k, v) in &h.log {
        let (id, m) = decode(k, v.as_ref()).unwrap();
        replayed.replay(&id, m);
    }
    replayed.replay("idle", None);
    assert!(replayed.get("idle").is_none());
    assert!(replayed.get("open").is_some());
}
