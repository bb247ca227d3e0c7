//! The transaction coordinator's state machine (Kafka's `TransactionCoordinator`): every error
//! path of InitProducerId / AddPartitionsToTxn / EndTxn, fencing, timeouts, transaction
//! version 2 epoch bumps, and `__transaction_state` replay rebuilding the same state.

use kactor_actors::txn::core::{
    EndDecision, InitDecision, MarkerJob, TimeoutAbort, Transit, TxnCoordinatorConfig,
    TxnCoordinatorCore, TxnMetadata, TxnState,
};
use kactor_actors::txn::log::{decode, encode_key, encode_value};
use kactor_protocol::errors;

const T: i64 = 1_000_000;

/// EndTxn's outcome: the markers to write (None: nothing was written) and the producer id and
/// epoch the answer carries.
#[derive(Debug, PartialEq, Eq)]
struct Ended {
    job: Option<MarkerJob>,
    producer: (i64, i16),
}

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
    fn init(&mut self, id: &str, expected: Option<(i64, i16)>) -> Result<(i64, i16, i16), i16> {
        let mut fresh = None;
        loop {
            match self
                .core
                .init_producer_id(id, 60_000, expected, fresh, T)
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

    /// EndTxn before KIP-890 (v4 and older): answers after the Prepare write; returns the
    /// marker job.
    fn end(
        &mut self,
        id: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<Option<MarkerJob>, i16> {
        self.end_at(id, pid, epoch, commit, 0).map(|e| e.job)
    }

    /// EndTxn v5+ (KIP-890): the marker job and the producer id / epoch answered.
    fn end2(&mut self, id: &str, pid: i64, epoch: i16, commit: bool) -> Result<Ended, i16> {
        self.end_at(id, pid, epoch, commit, 2)
    }

    /// EndTxn as the actor drives it at transaction version `tv`.
    fn end_at(
        &mut self,
        id: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
        tv: i16,
    ) -> Result<Ended, i16> {
        let mut fresh = None;
        loop {
            match self
                .core
                .end_txn(id, (pid, epoch), commit, tv, fresh, T)
                .map_err(|e| e.code())?
            {
                EndDecision::NeedProducerId => {
                    self.next_pid += 1;
                    fresh = Some(self.next_pid);
                }
                EndDecision::Done(pid, epoch) => {
                    return Ok(Ended {
                        job: None,
                        producer: (pid, epoch),
                    })
                }
                EndDecision::Write(t) => {
                    let producer = t.target.completed_producer();
                    return Ok(Ended {
                        job: self.commit(&t),
                        producer,
                    });
                }
            }
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
    let (pid, epoch, err) = h.init("tx", None).unwrap();
    assert_eq!((epoch, err), (0, errors::NONE));
    assert_eq!(h.state("tx"), TxnState::Empty);
    let (pid2, epoch2, _) = h.init("tx", None).unwrap();
    assert_eq!((pid2, epoch2), (pid, 1));
}

#[test]
fn invalid_timeout_and_concurrent_requests() {
    let mut h = Harness::new();
    assert_eq!(
        h.core
            .init_producer_id("tx", 900_001, None, Some(1), T)
            .unwrap_err()
            .code(),
        errors::INVALID_TRANSACTION_TIMEOUT
    );
    let InitDecision::Write(t, _) = h
        .core
        .init_producer_id("tx", 1000, None, Some(1), T)
        .unwrap()
    else {
        panic!()
    };
    // The write is in flight: anything else on this id must wait.
    assert_eq!(
        h.core
            .init_producer_id("tx", 1000, None, Some(2), T)
            .unwrap_err()
            .code(),
        errors::CONCURRENT_TRANSACTIONS
    );
    // A failed write leaves nothing behind.
    assert!(h.core.complete_write(&t, false).is_none());
    assert!(h.core.get("tx").is_none());
}

#[test]
fn add_partitions_checks_the_producer_and_is_idempotent() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", None).unwrap();
    assert_eq!(
        h.add("nope", pid, epoch, &[("a", 0)]),
        Err(errors::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        h.add("tx", pid + 1, epoch, &[("a", 0)]),
        Err(errors::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        h.add("tx", pid, epoch + 1, &[("a", 0)]),
        Err(errors::PRODUCER_FENCED)
    );
    assert_eq!(h.add("tx", pid, epoch, &[("a", 0), ("a", 1)]), Ok(true));
    assert_eq!(h.state("tx"), TxnState::Ongoing);
    assert_eq!(h.add("tx", pid, epoch, &[("a", 1)]), Ok(false), "no write");
    assert_eq!(h.add("tx", pid, epoch, &[("b", 0)]), Ok(true));
    let verified = h
        .core
        .verify_partitions("tx", pid, epoch, &[("a".into(), 0), ("c".into(), 0)])
        .unwrap();
    assert_eq!(verified[0].1, errors::NONE);
    assert_eq!(verified[1].1, errors::TRANSACTION_ABORTABLE);
    // A wrong producer is refused whole, a transaction being ended is busy.
    assert_eq!(
        h.core
            .verify_partitions("tx", pid, epoch + 1, &[("a".into(), 0)])
            .unwrap_err()
            .code(),
        errors::PRODUCER_FENCED
    );
    h.end("tx", pid, epoch, true).unwrap();
    assert_eq!(
        h.core
            .verify_partitions("tx", pid, epoch, &[("a".into(), 0)])
            .unwrap_err()
            .code(),
        errors::CONCURRENT_TRANSACTIONS
    );
    h.finish_markers("tx");
    let verified = h
        .core
        .verify_partitions("tx", pid, epoch, &[("a".into(), 0)])
        .unwrap();
    assert_eq!(
        verified[0].1,
        errors::TRANSACTION_ABORTABLE,
        "none after the end"
    );
}

#[test]
fn commit_goes_through_prepare_markers_and_complete() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", None).unwrap();
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
        Err(errors::CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        h.add("tx", pid, epoch, &[("c", 0)]),
        Err(errors::CONCURRENT_TRANSACTIONS)
    );
    h.finish_markers("tx");
    assert_eq!(h.state("tx"), TxnState::CompleteCommit);
    assert!(h.core.get("tx").unwrap().partitions.is_empty());
    // A retried commit is fine; an abort of a committed transaction is not.
    assert_eq!(h.end("tx", pid, epoch, true), Ok(None));
    assert_eq!(h.state("tx"), TxnState::CompleteCommit);
    assert_eq!(
        h.end("tx", pid, epoch, false),
        Err(errors::INVALID_TXN_STATE)
    );
    // EndTxn on an Empty transaction (TV1) is invalid too.
    let (pid, epoch, _) = h.init("tx2", None).unwrap();
    assert_eq!(
        h.end("tx2", pid, epoch, true),
        Err(errors::INVALID_TXN_STATE)
    );
}

#[test]
fn a_new_producer_instance_fences_the_old_one_and_aborts_its_transaction() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", None).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    // Re-init while Ongoing: epoch bumped, open transaction aborted, client told to retry
    // (the fencing epoch is not handed out: Kafka answers -1/-1).
    let (pid2, epoch2, err) = h.init("tx", None).unwrap();
    assert_eq!(err, errors::CONCURRENT_TRANSACTIONS);
    assert_eq!((pid2, epoch2), (-1, -1));
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
    assert_eq!(h.core.get("tx").unwrap().producer_epoch, epoch + 1);
    // The old instance is fenced.
    assert_eq!(
        h.add("tx", pid, epoch, &[("a", 0)]),
        Err(errors::PRODUCER_FENCED)
    );
    assert_eq!(h.end("tx", pid, epoch, true), Err(errors::PRODUCER_FENCED));
    // The retry gets a clean epoch.
    let (_, epoch3, err) = h.init("tx", None).unwrap();
    assert_eq!((epoch3, err), (epoch + 2, errors::NONE));
    // KIP-360: a client claiming an id/epoch it never had is fenced.
    assert_eq!(h.init("tx", Some((pid, 77))), Err(errors::PRODUCER_FENCED));
}

#[test]
fn timed_out_transactions_are_fenced_and_aborted() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", None).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    assert!(h.core.abort_timed_out(T + 59_999).is_empty());
    let aborts = h.core.abort_timed_out(T + 60_000);
    let [TimeoutAbort::Write(abort)] = &aborts[..] else {
        panic!("{aborts:?}")
    };
    let job = h.commit(abort).unwrap();
    assert!(!job.commit);
    assert_eq!(job.producer_epoch, epoch + 1);
    h.finish_markers("tx");
    assert_eq!(h.end("tx", pid, epoch, true), Err(errors::PRODUCER_FENCED));
}

/// A transaction timing out at an exhausted epoch is fenced onto a fresh producer id, which
/// the producer continues with once the abort completes.
#[test]
fn a_timed_out_transaction_at_an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut h = Harness::new();
    let (pid, _, _) = h.init("tx", None).unwrap();
    let mut m = h.core.get("tx").unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    h.core.replay("tx", Some(m));
    h.add("tx", pid, i16::MAX - 1, &[("a", 0)]).unwrap();
    assert_eq!(
        h.core.abort_timed_out(T + 60_000),
        vec![TimeoutAbort::NeedProducerId("tx".into())]
    );
    let t = h
        .core
        .abort_timed_out_with("tx", Some(5_000), T + 60_000)
        .unwrap();
    let job = h.commit(&t).unwrap();
    assert_eq!((job.producer_id, job.producer_epoch), (pid, i16::MAX));
    h.finish_markers("tx");
    let m = h.core.get("tx").unwrap();
    assert_eq!((m.producer_id, m.producer_epoch), (5_000, 0));
    assert_eq!(m.state, TxnState::CompleteAbort);
}

#[test]
fn transaction_version_2_bumps_the_epoch_at_every_end() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", None).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    let ended = h.end2("tx", pid, epoch, true).unwrap();
    let job = ended.job.unwrap();
    assert_eq!(
        job.producer_epoch,
        epoch + 1,
        "markers carry the bumped epoch"
    );
    assert_eq!(job.transaction_version, 2);
    assert_eq!(ended.producer, (pid, epoch + 1), "v5 answers the new epoch");
    h.finish_markers("tx");
    // A retry of the end with the old epoch succeeds; the next transaction uses the new one.
    assert_eq!(
        h.end2("tx", pid, epoch, true),
        Ok(Ended {
            job: None,
            producer: (pid, epoch + 1)
        })
    );
    assert_eq!(h.add("tx", pid, epoch + 1, &[("a", 0)]), Ok(true));
    let job = h.end2("tx", pid, epoch + 1, false).unwrap().job.unwrap();
    h.finish_markers("tx");
    assert_eq!(job.producer_epoch, epoch + 2);
    // An abort with nothing added is allowed (and bumps again).
    let (_, e, _) = h.init("tx", None).unwrap();
    let job = h.end2("tx", pid, e, false).unwrap().job.unwrap();
    assert!(job.partitions.is_empty());
    h.finish_markers("tx");
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
}

/// Kafka's KIP-890 EndTxn table (TransactionCoordinator, "Retry" = the epoch just before the
/// current one): a completed end answers only its own retry; at the current epoch an abort
/// starts (and ends) a new, empty transaction and a commit has nothing to commit.
#[test]
fn transaction_version_2_end_after_a_completed_or_empty_transaction() {
    use errors::{INVALID_TXN_STATE as ITS, NONE, PRODUCER_FENCED as PF};
    // (state before, commit?, retry?) -> (error, epoch bumped?)
    let table = [
        (TxnState::CompleteCommit, true, true, NONE, false),
        (TxnState::CompleteCommit, true, false, ITS, false),
        (TxnState::CompleteCommit, false, true, ITS, false),
        (TxnState::CompleteCommit, false, false, NONE, true),
        (TxnState::CompleteAbort, true, true, ITS, false),
        (TxnState::CompleteAbort, true, false, ITS, false),
        (TxnState::CompleteAbort, false, true, NONE, false),
        (TxnState::CompleteAbort, false, false, NONE, true),
        (TxnState::Empty, true, true, PF, false),
        (TxnState::Empty, true, false, ITS, false),
        (TxnState::Empty, false, true, PF, false),
        (TxnState::Empty, false, false, NONE, true),
    ];
    for (i, (before, commit, retry, code, bumped)) in table.into_iter().enumerate() {
        let mut h = Harness::new();
        let id = format!("tx{i}");
        let (pid, mut epoch, _) = h.init(&id, None).unwrap();
        if before != TxnState::Empty {
            h.add(&id, pid, epoch, &[("a", 0)]).unwrap();
            h.end2(&id, pid, epoch, before == TxnState::CompleteCommit)
                .unwrap();
            h.finish_markers(&id);
            epoch += 1;
        }
        assert_eq!(h.state(&id), before);
        let sent = if retry { epoch - 1 } else { epoch };
        let case = format!("{before:?} commit={commit} retry={retry}");
        match h.end2(&id, pid, sent, commit) {
            Ok(ended) => {
                assert_eq!(code, NONE, "{case}");
                let now = if bumped { epoch + 1 } else { epoch };
                assert_eq!(ended.producer, (pid, now), "{case}");
                assert_eq!(ended.job.is_some(), bumped, "{case}");
                if let Some(job) = ended.job {
                    // Nothing was added: no marker to write, the abort completes at once.
                    assert!(!job.commit && job.partitions.is_empty(), "{case}");
                    h.finish_markers(&id);
                    assert_eq!(h.state(&id), TxnState::CompleteAbort, "{case}");
                }
            }
            Err(e) => assert_eq!(e, code, "{case}"),
        }
        assert_eq!(
            h.core.get(&id).unwrap().producer_epoch,
            if bumped { epoch + 1 } else { epoch },
            "{case}"
        );
    }
}

/// The epochs EndTxn v5 accepts per state: an open transaction only at its epoch, one being
/// ended only as the retry of that end, any other epoch (older, or ahead) is fenced.
#[test]
fn transaction_version_2_end_fences_every_other_epoch() {
    let mut h = Harness::new();
    let (pid, epoch, _) = h.init("tx", None).unwrap();
    h.init("tx", Some((pid, epoch))).unwrap();
    let epoch = epoch + 1;
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    for e in [epoch - 1, epoch + 1, epoch + 2] {
        assert_eq!(
            h.end2("tx", pid, e, true),
            Err(errors::PRODUCER_FENCED),
            "{e}"
        );
    }
    assert_eq!(
        h.end2("tx", pid + 1, epoch, true),
        Err(errors::INVALID_PRODUCER_ID_MAPPING)
    );
    h.end2("tx", pid, epoch, true).unwrap();
    // PrepareCommit at epoch + 1: the retry is in progress, the new epoch is fenced.
    assert_eq!(
        h.end2("tx", pid, epoch, true),
        Err(errors::CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        h.end2("tx", pid, epoch, false),
        Err(errors::INVALID_TXN_STATE)
    );
    assert_eq!(
        h.end2("tx", pid, epoch + 1, true),
        Err(errors::PRODUCER_FENCED)
    );
    h.finish_markers("tx");
    for e in [epoch - 1, epoch + 2] {
        assert_eq!(
            h.end2("tx", pid, e, true),
            Err(errors::PRODUCER_FENCED),
            "{e}"
        );
    }
    assert_eq!(h.end2("", pid, epoch, true), Err(errors::INVALID_REQUEST));
}

/// An end that exhausts the epoch moves the producer to a fresh id at epoch 0 once it
/// completes (EndTxn v5 answers the new id), and a retry with the old id and last epoch
/// is still recognised.
#[test]
fn transaction_version_2_end_at_an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut h = Harness::new();
    let (pid, _, _) = h.init("tx", None).unwrap();
    let mut m = h.core.get("tx").unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    h.core.replay("tx", Some(m));
    let last = i16::MAX - 1;
    h.add("tx", pid, last, &[("a", 0)]).unwrap();
    let ended = h.end2("tx", pid, last, true).unwrap();
    let job = ended.job.unwrap();
    assert_eq!((job.producer_id, job.producer_epoch), (pid, i16::MAX));
    let new_pid = h.next_pid;
    assert_ne!(new_pid, pid);
    assert_eq!(ended.producer, (new_pid, 0));
    h.finish_markers("tx");
    let m = h.core.get("tx").unwrap();
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.previous_producer_id),
        (new_pid, 0, pid)
    );
    // The retry of the end names the old producer.
    assert_eq!(
        h.end2("tx", pid, last, true),
        Ok(Ended {
            job: None,
            producer: (new_pid, 0)
        })
    );
    assert_eq!(h.add("tx", new_pid, 0, &[("a", 0)]), Ok(true));
}

/// InitProducerId with the producer a v3+ client holds (KIP-360, Kafka's
/// `prepareInitProducerIdTransit` / `prepareIncrementProducerEpoch`): its current epoch bumps,
/// the epoch it had before is a retry answered without a bump, any other is fenced; only the
/// producer id is checked for an open transaction, which is fenced.
#[test]
fn init_with_the_producer_the_client_holds() {
    let mut h = Harness::new();
    let (pid, e0, _) = h.init("tx", None).unwrap();
    assert_eq!(
        h.init("tx", Some((pid, e0))),
        Ok((pid, e0 + 1, errors::NONE))
    );
    assert_eq!(
        h.init("tx", Some((pid, e0))),
        Ok((pid, e0 + 1, errors::NONE))
    );
    assert_eq!(
        h.init("tx", Some((pid, e0 + 1))),
        Ok((pid, e0 + 2, errors::NONE))
    );
    for e in [e0, e0 + 3, 77] {
        assert_eq!(
            h.init("tx", Some((pid, e))),
            Err(errors::PRODUCER_FENCED),
            "{e}"
        );
    }
    assert_eq!(
        h.init("tx", Some((pid + 1, e0 + 2))),
        Err(errors::PRODUCER_FENCED)
    );
    // Without an expected producer the previous epoch is forgotten.
    assert_eq!(h.init("tx", None), Ok((pid, e0 + 3, errors::NONE)));
    assert_eq!(
        h.init("tx", Some((pid, e0 + 2))),
        Err(errors::PRODUCER_FENCED)
    );
    // An open transaction is fenced whatever epoch the client names.
    h.add("tx", pid, e0 + 3, &[("a", 0)]).unwrap();
    assert_eq!(
        h.init("tx", Some((pid, 0))),
        Ok((-1, -1, errors::CONCURRENT_TRANSACTIONS))
    );
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
    assert_eq!(h.core.get("tx").unwrap().producer_epoch, e0 + 4);
    // An unknown id starts at epoch 0 whatever the client held.
    let (_, e, err) = h.init("other", Some((12_345, 3))).unwrap();
    assert_eq!((e, err), (0, errors::NONE));
    assert_eq!(h.init("", None), Err(errors::INVALID_REQUEST));
}

/// A KIP-890 commit bumps the epoch (the one before becomes the last epoch): a client that
/// re-initialises with the epoch it had before the commit gets the current one without a
/// bump, as Kafka answers; with the current one it gets a bump.
#[test]
fn init_after_a_transaction_version_2_end() {
    let mut h = Harness::new();
    let (pid, e, _) = h.init("tx", None).unwrap();
    h.add("tx", pid, e, &[("a", 0)]).unwrap();
    h.end2("tx", pid, e, true).unwrap();
    h.finish_markers("tx");
    assert_eq!(h.init("tx", Some((pid, e))), Ok((pid, e + 1, errors::NONE)));
    assert_eq!(h.state("tx"), TxnState::Empty);
    assert_eq!(
        h.init("tx", Some((pid, e + 1))),
        Ok((pid, e + 2, errors::NONE))
    );
}

/// At an exhausted epoch InitProducerId moves to a new producer id at epoch 0, and a client
/// holding the old id at its last epoch is recognised afterwards.
#[test]
fn init_at_an_exhausted_epoch_rotates_the_producer_id() {
    let mut h = Harness::new();
    let (pid, _, _) = h.init("tx", None).unwrap();
    let mut m = h.core.get("tx").unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    h.core.replay("tx", Some(m));
    let (new_pid, e, err) = h.init("tx", Some((pid, i16::MAX - 1))).unwrap();
    assert_ne!(new_pid, pid);
    assert_eq!((e, err), (0, errors::NONE));
    let m = h.core.get("tx").unwrap();
    assert_eq!(
        (m.previous_producer_id, m.last_producer_epoch),
        (pid, i16::MAX - 1)
    );
    // The same request again (its answer lost): the new producer, no bump.
    assert_eq!(
        h.init("tx", Some((pid, i16::MAX - 1))),
        Ok((new_pid, 0, errors::NONE))
    );
}

#[test]
fn empty_transactional_ids_are_invalid_requests() {
    let mut h = Harness::new();
    assert_eq!(h.add("", 1, 0, &[("a", 0)]), Err(errors::INVALID_REQUEST));
    assert_eq!(h.end("", 1, 0, true), Err(errors::INVALID_REQUEST));
    assert_eq!(
        h.core
            .verify_partitions("", 1, 0, &[("a".into(), 0)])
            .unwrap_err()
            .code(),
        errors::INVALID_REQUEST
    );
}

#[test]
fn replaying_the_transaction_log_rebuilds_the_same_state() {
    let mut h = Harness::new();
    let (p1, e1, _) = h.init("a", None).unwrap();
    h.add("a", p1, e1, &[("t", 0), ("u", 1)]).unwrap();
    let (p2, e2, _) = h.init("b", None).unwrap();
    h.add("b", p2, e2, &[("t", 1)]).unwrap();
    h.end("b", p2, e2, false).unwrap();
    let (p3, e3, _) = h.init("c", None).unwrap();
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
    let (p1, e1, _) = h.init("a", None).unwrap();
    h.add("a", p1, e1, &[("t", 0)]).unwrap();
    let (p2, _, _) = h.init("b", None).unwrap();
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
    // The same id ended with EndTxn v5 (KIP-890 client), then v4 (classic).
    let (pid, epoch, _) = h.init("tx", None).unwrap();
    h.add("tx", pid, epoch, &[("a", 0)]).unwrap();
    let EndDecision::Write(t) = h
        .core
        .end_txn("tx", (pid, epoch), true, 2, None, T)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t.target.producer_epoch, epoch + 1, "TV2 bumps at the end");
    assert_eq!(
        t.target.client_transaction_version, 2,
        "persisted with the end"
    );
    let job = h.commit(&t).unwrap();
    assert_eq!(job.producer_epoch, epoch + 1);
    h.finish_markers("tx");
    let epoch = epoch + 1;
    h.add("tx", pid, epoch, &[("a", 1)]).unwrap();
    let EndDecision::Write(t) = h
        .core
        .end_txn("tx", (pid, epoch), false, 0, None, T)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(t.target.producer_epoch, epoch, "TV1 keeps the epoch");
    assert_eq!(t.target.client_transaction_version, 0);
}

#[test]
fn idle_finished_ids_expire_and_open_ones_do_not() {
    let mut h = Harness::new();
    let expiration = 1_000;
    let (pid, epoch, _) = h.init("idle", None).unwrap();
    let (pid2, epoch2, _) = h.init("open", None).unwrap();
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
        errors::CONCURRENT_TRANSACTIONS
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
