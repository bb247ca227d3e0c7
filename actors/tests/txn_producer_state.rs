//! The producer-state table (Kafka's `ProducerStateManager`) against Kafka 4.4's rules: every
//! error path of the idempotent append, transactions and markers, LSO, expiry, snapshots.

use bytes::Bytes;
use kactor_actors::producer::snapshot::{self, snapshot_file};
use kactor_actors::producer::{
    AppendCheck, AppendOrigin, ProducerBatch, ProducerStateConfig, ProducerStateManager,
};
use kactor_protocol::errors;
use kactor_protocol::records::{end_transaction_marker_batch, BatchBuilder, EndTransactionMarker};

/// A data batch of `n` records at `offset` with sequences from `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, offset: i64, n: i32, txn: bool, ts: i64) -> Bytes {
    let mut b = BatchBuilder::new(offset)
        .producer(pid, epoch, seq)
        .transactional(txn);
    for i in 0..n {
        b.append(ts, None, Some(format!("v{i}").as_bytes()), &[])
            .unwrap();
    }
    b.build().unwrap()
}

fn desc(bytes: &Bytes) -> ProducerBatch {
    ProducerBatch::from_batch(bytes).unwrap().unwrap()
}

/// Checks and applies as the leader does; returns the duplicate's offsets if any. A
/// transactional batch is verified first (KIP-890), as the leader's Produce path does.
fn append(m: &mut ProducerStateManager, bytes: &Bytes) -> Result<Option<(i64, i64)>, i16> {
    let b = desc(bytes);
    if b.is_transactional {
        if let Ok(guard) = m.maybe_start_transaction_verification(
            b.producer_id,
            b.base_sequence,
            b.producer_epoch,
            false,
            0,
        ) {
            let _ = m.confirm_verification(b.producer_id, guard);
        }
    }
    match m.check_append(&b, AppendOrigin::Client) {
        Ok(AppendCheck::Duplicate(d)) => Ok(Some((d.first_offset(), d.last_offset))),
        Ok(AppendCheck::Append(u)) => {
            m.apply(u);
            Ok(None)
        }
        Err(e) => Err(e.code()),
    }
}

fn marker(
    m: &mut ProducerStateManager,
    pid: i64,
    epoch: i16,
    offset: i64,
    commit: bool,
    coordinator_epoch: i32,
) -> Result<Option<kactor_actors::producer::CompletedTxn>, i16> {
    let mk = if commit {
        EndTransactionMarker::commit(coordinator_epoch)
    } else {
        EndTransactionMarker::abort(coordinator_epoch)
    };
    let bytes = end_transaction_marker_batch(offset, 1000, 0, pid, epoch, mk).unwrap();
    match m.check_append(&desc(&bytes), AppendOrigin::Coordinator) {
        Ok(AppendCheck::Append(u)) => Ok(m.apply(u)),
        Ok(AppendCheck::Duplicate(_)) => panic!("markers are never duplicates"),
        Err(e) => Err(e.code()),
    }
}

#[test]
fn in_order_batches_are_accepted_and_a_retry_gets_its_original_offsets() {
    let mut m = ProducerStateManager::default();
    assert_eq!(append(&mut m, &batch(7, 0, 0, 0, 3, false, 10)), Ok(None));
    assert_eq!(append(&mut m, &batch(7, 0, 3, 3, 2, false, 11)), Ok(None));
    // The retry of the first batch arrives with fresh offsets but is recognised by sequences.
    assert_eq!(
        append(&mut m, &batch(7, 0, 0, 5, 3, false, 10)),
        Ok(Some((0, 2)))
    );
    assert_eq!(
        append(&mut m, &batch(7, 0, 3, 5, 2, false, 11)),
        Ok(Some((3, 4)))
    );
    assert_eq!(m.producer(7).unwrap().last_seq(), 4);
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let mut m = ProducerStateManager::default();
    for i in 0..6 {
        append(&mut m, &batch(1, 0, i, i as i64, 1, false, 1)).unwrap();
    }
    // Batch 0 fell out of the window: its retry is now out of order, not a duplicate.
    assert_eq!(
        append(&mut m, &batch(1, 0, 0, 6, 1, false, 1)),
        Err(errors::OUT_OF_ORDER_SEQUENCE_NUMBER)
    );
    assert_eq!(
        append(&mut m, &batch(1, 0, 1, 6, 1, false, 1)),
        Ok(Some((1, 1)))
    );
}

#[test]
fn a_gap_or_a_repeat_that_is_no_duplicate_is_out_of_order() {
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 0, 0, 0, 2, false, 1)).unwrap();
    assert_eq!(
        append(&mut m, &batch(1, 0, 5, 2, 1, false, 1)),
        Err(errors::OUT_OF_ORDER_SEQUENCE_NUMBER)
    );
    // Overlapping but not the same range.
    assert_eq!(
        append(&mut m, &batch(1, 0, 1, 2, 1, false, 1)),
        Err(errors::OUT_OF_ORDER_SEQUENCE_NUMBER)
    );
    // A rejected batch changes nothing: the right next sequence still works.
    assert_eq!(append(&mut m, &batch(1, 0, 2, 2, 1, false, 1)), Ok(None));
}

#[test]
fn an_unknown_producer_may_start_at_any_sequence() {
    // Since KIP-360 the broker accepts a producer whose state is gone (expired or deleted).
    let mut m = ProducerStateManager::default();
    assert_eq!(append(&mut m, &batch(9, 3, 42, 0, 1, false, 1)), Ok(None));
    assert_eq!(append(&mut m, &batch(9, 3, 43, 1, 1, false, 1)), Ok(None));
}

#[test]
fn epochs_older_are_fenced_and_new_epochs_restart_at_zero() {
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 5, 0, 0, 1, false, 1)).unwrap();
    assert_eq!(
        append(&mut m, &batch(1, 4, 1, 1, 1, false, 1)),
        Err(errors::INVALID_PRODUCER_EPOCH)
    );
    assert_eq!(
        append(&mut m, &batch(1, 6, 3, 1, 1, false, 1)),
        Err(errors::OUT_OF_ORDER_SEQUENCE_NUMBER)
    );
    assert_eq!(append(&mut m, &batch(1, 6, 0, 1, 1, false, 1)), Ok(None));
    // The old epoch's batches are forgotten: no duplicate across epochs.
    assert_eq!(
        append(&mut m, &batch(1, 5, 0, 2, 1, false, 1)),
        Err(errors::INVALID_PRODUCER_EPOCH)
    );
}

#[test]
fn sequences_wrap_at_i32_max() {
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 0, i32::MAX - 1, 0, 2, false, 1)).unwrap();
    assert_eq!(m.producer(1).unwrap().last_seq(), i32::MAX);
    assert_eq!(append(&mut m, &batch(1, 0, 0, 2, 1, false, 1)), Ok(None));
}

#[test]
fn replication_skips_sequence_checks() {
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 0, 0, 0, 1, false, 1)).unwrap();
    let gap = desc(&batch(1, 0, 10, 1, 1, false, 1));
    assert!(matches!(
        m.check_append(&gap, AppendOrigin::Replication),
        Ok(AppendCheck::Append(_))
    ));
}

#[test]
fn transactions_bound_the_lso_and_markers_complete_them() {
    let mut m = ProducerStateManager::default();
    // Producer 1 opens a transaction at 0, producer 2 at 2.
    append(&mut m, &batch(1, 0, 0, 0, 2, true, 1)).unwrap();
    append(&mut m, &batch(2, 0, 0, 2, 1, true, 1)).unwrap();
    assert_eq!(m.first_unstable_offset(), Some(0));
    assert_eq!(m.last_stable_offset(3), 0);
    // A plain write from a producer inside a transaction is refused.
    assert_eq!(
        append(&mut m, &batch(1, 0, 2, 3, 1, false, 1)),
        Err(errors::INVALID_TXN_STATE)
    );
    // Producer 1 aborts at 3: the index entry's LSO is producer 2's open transaction.
    let done = marker(&mut m, 1, 0, 3, false, 0).unwrap().unwrap();
    assert!(done.is_aborted);
    assert_eq!((done.first_offset, done.last_offset), (0, 3));
    assert_eq!(done.aborted_txn().last_stable_offset, 2);
    // Until the high watermark passes the marker, the completed txn still holds the LSO.
    assert_eq!(m.first_unstable_offset(), Some(0));
    m.on_high_watermark_updated(4);
    assert_eq!(m.first_unstable_offset(), Some(2));
    // Producer 2 commits at 4.
    let done = marker(&mut m, 2, 0, 4, true, 0).unwrap().unwrap();
    assert!(!done.is_aborted);
    assert_eq!(done.last_stable_offset, 5);
    m.on_high_watermark_updated(5);
    assert_eq!(m.first_unstable_offset(), None);
    assert_eq!(m.last_stable_offset(5), 5);
}

#[test]
fn a_marker_without_data_completes_nothing_and_old_coordinators_are_fenced() {
    let mut m = ProducerStateManager::default();
    assert_eq!(marker(&mut m, 1, 0, 0, true, 3), Ok(None));
    assert_eq!(
        marker(&mut m, 1, 0, 1, true, 2),
        Err(errors::TRANSACTION_COORDINATOR_FENCED)
    );
    // A marker from an older producer epoch is refused.
    append(&mut m, &batch(1, 2, 0, 2, 1, true, 1)).unwrap();
    assert_eq!(
        marker(&mut m, 1, 1, 3, true, 3),
        Err(errors::INVALID_PRODUCER_EPOCH)
    );
}

#[test]
fn transaction_version_2_marker_bumps_the_epoch() {
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 0, 0, 0, 1, true, 1)).unwrap();
    // KIP-890: the coordinator writes the marker with the bumped epoch.
    assert!(marker(&mut m, 1, 1, 1, true, 0).unwrap().is_some());
    assert_eq!(m.producer(1).unwrap().producer_epoch, 1);
    // The next transaction uses the new epoch from sequence 0; the old epoch is fenced.
    assert_eq!(append(&mut m, &batch(1, 1, 0, 2, 1, true, 1)), Ok(None));
    assert_eq!(
        append(&mut m, &batch(1, 0, 1, 3, 1, true, 1)),
        Err(errors::INVALID_PRODUCER_EPOCH)
    );
}

#[test]
fn idle_producers_expire_unless_in_a_transaction() {
    let mut m = ProducerStateManager::new(ProducerStateConfig {
        producer_id_expiration_ms: 1000,
        ..Default::default()
    });
    append(&mut m, &batch(1, 0, 0, 0, 1, false, 100)).unwrap();
    append(&mut m, &batch(2, 0, 0, 1, 1, true, 100)).unwrap();
    assert_eq!(m.remove_expired_producers(1099), 0);
    assert_eq!(m.remove_expired_producers(1100), 1);
    assert!(m.producer(1).is_none());
    assert!(m.producer(2).is_some());
    // An expired producer comes back at any sequence.
    assert_eq!(append(&mut m, &batch(1, 0, 7, 2, 1, false, 2000)), Ok(None));
}

#[test]
fn snapshot_round_trips_in_kafkas_layout_and_restores_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 3, 0, 0, 4, false, 500)).unwrap();
    append(&mut m, &batch(2, 0, 0, 4, 2, true, 600)).unwrap();
    let path = snapshot::write_snapshot(dir.path(), m.map_end_offset(), &m.entries()).unwrap();
    assert_eq!(path, snapshot_file(dir.path(), 6));
    assert!(path.ends_with("00000000000000000006.snapshot"));
    let raw = std::fs::read(&path).unwrap();
    // version 1, crc, 2 entries of 46 bytes each.
    assert_eq!(&raw[..2], &[0, 1]);
    assert_eq!(raw.len(), 2 + 4 + 4 + 2 * 46);
    assert_eq!(
        u32::from_be_bytes(raw[2..6].try_into().unwrap()),
        crc32c::crc32c(&raw[6..])
    );

    let (offset, entries) = snapshot::latest_snapshot(dir.path(), i64::MAX)
        .unwrap()
        .unwrap();
    assert_eq!(offset, 6);
    let mut r = ProducerStateManager::default();
    r.load_snapshot(entries, offset, 700);
    assert_eq!(r.map_end_offset(), 6);
    assert_eq!(r.first_unstable_offset(), Some(4));
    // The last batch is remembered: its retry is a duplicate, the next sequence continues.
    assert_eq!(
        append(&mut r, &batch(1, 3, 0, 6, 4, false, 500)),
        Ok(Some((0, 3)))
    );
    assert_eq!(append(&mut r, &batch(1, 3, 4, 6, 1, false, 700)), Ok(None));
}

/// A roll's snapshot is written without its fsync (the roll's flush syncs it later): it holds
/// the same bytes as a synced one, a torn one (a crash before that flush) is passed over for
/// the previous snapshot, and syncing one that a newer roll's retention already deleted is no
/// error.
#[test]
fn a_roll_snapshot_is_the_same_file_unsynced_and_a_torn_one_is_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 0, 0, 0, 3, false, 1)).unwrap();
    let synced = snapshot::write_snapshot(dir.path(), 3, &m.entries()).unwrap();
    let unsynced = snapshot::write_snapshot_unsynced(dir.path(), 9, &m.entries()).unwrap();
    assert_eq!(unsynced, snapshot_file(dir.path(), 9));
    assert_eq!(
        std::fs::read(&synced).unwrap(),
        std::fs::read(&unsynced).unwrap()
    );
    snapshot::sync_snapshot(&unsynced).unwrap();

    let raw = std::fs::read(&unsynced).unwrap();
    std::fs::write(&unsynced, &raw[..raw.len() / 2]).unwrap();
    let (offset, _) = snapshot::latest_snapshot(dir.path(), 10).unwrap().unwrap();
    assert_eq!(
        offset, 3,
        "the torn roll snapshot gives way to the previous one"
    );
    assert!(!unsynced.exists());
    snapshot::sync_snapshot(&unsynced).unwrap();
}

#[test]
fn corrupt_snapshots_are_skipped_for_the_previous_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = ProducerStateManager::default();
    append(&mut m, &batch(1, 0, 0, 0, 1, false, 1)).unwrap();
    snapshot::write_snapshot(dir.path(), 1, &m.entries()).unwrap();
    let p = snapshot::write_snapshot(dir.path(), 5, &m.entries()).unwrap();
    let mut raw = std::fs::read(&p).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 0xff;
    std::fs::write(&p, raw).unwrap();
    let (offset, _) = snapshot::latest_snapshot(dir.path(), 10).unwrap().unwrap();
    assert_eq!(offset, 1);
    assert!(!p.exists(), "the corrupt snapshot is deleted");
    // Snapshots above the log end are not used.
    assert!(snapshot::latest_snapshot(dir.path(), 0).unwrap().is_none());
}

#[test]
fn replaying_the_log_rebuilds_the_same_state() {
    let mut live = ProducerStateManager::default();
    let mut log = Vec::new();
    let data = [
        batch(1, 0, 0, 0, 2, false, 1),
        batch(2, 0, 0, 2, 1, true, 2),
        batch(1, 0, 2, 3, 1, false, 3),
    ];
    for b in &data {
        append(&mut live, b).unwrap();
        log.push(b.clone());
    }
    let mk = end_transaction_marker_batch(4, 5, 0, 2, 0, EndTransactionMarker::abort(0)).unwrap();
    let u = live
        .check_append(&desc(&mk), AppendOrigin::Coordinator)
        .unwrap();
    let AppendCheck::Append(u) = u else { panic!() };
    live.apply(u);
    log.push(mk);

    let mut replayed = ProducerStateManager::default();
    let mut aborted = Vec::new();
    for b in &log {
        if let Some(t) = replayed.replay_batch(&desc(b)) {
            aborted.push(t.aborted_txn());
        }
    }
    assert_eq!(replayed.entries(), live.entries());
    assert_eq!(replayed.map_end_offset(), 5);
    assert_eq!(aborted.len(), 1);
    assert_eq!(aborted[0].first_offset, 2);
    assert_eq!(aborted[0].last_offset, 4);
}

#[test]
fn coordinator_writes_without_sequences_join_the_transaction_and_are_never_duplicates() {
    // The group coordinator appends a transactional producer's offset commits to
    // __consumer_offsets with the producer's id/epoch and no sequence (-1), origin Coordinator:
    // each is appended (never taken for a retry of the previous one) and the marker ends them.
    // The first one of each transaction needs the verification TxnOffsetCommit's leader check
    // confirmed (KIP-890, as Kafka holds AppendOrigin.COORDINATOR to it).
    let mut m = ProducerStateManager::default();
    let verify = |m: &mut ProducerStateManager| {
        let guard = m
            .maybe_start_transaction_verification(9, -1, 0, false, 0)
            .unwrap();
        m.confirm_verification(9, guard).unwrap();
    };
    let coordinator = |m: &mut ProducerStateManager, bytes: &Bytes| {
        match kactor_actors::producer::partition::check_leader_append_from(
            m,
            bytes,
            AppendOrigin::Coordinator,
        ) {
            Ok(AppendCheck::Append(u)) => {
                m.apply(u);
                Ok(())
            }
            Ok(AppendCheck::Duplicate(_)) => Err("taken for a duplicate"),
            Err(e) if e.code() == errors::INVALID_TXN_STATE => Err("not verified"),
            Err(_) => Err("refused"),
        }
    };
    assert_eq!(
        coordinator(&mut m, &batch(9, 0, -1, 0, 1, true, 10)),
        Err("not verified")
    );
    verify(&mut m);
    assert_eq!(
        coordinator(&mut m, &batch(9, 0, -1, 0, 1, true, 10)),
        Ok(())
    );
    assert_eq!(
        coordinator(&mut m, &batch(9, 0, -1, 1, 1, true, 11)),
        Ok(())
    );
    assert_eq!(m.ongoing_txns().collect::<Vec<_>>(), vec![(0, 9)]);
    let done = marker(&mut m, 9, 0, 2, false, 0).unwrap().unwrap();
    assert!(done.is_aborted);
    assert_eq!((done.first_offset, done.last_offset), (0, 2));
    // The next transaction of the same producer starts again without sequences, verified again:
    // the marker cleared the first one's guard.
    assert_eq!(
        coordinator(&mut m, &batch(9, 0, -1, 3, 1, true, 12)),
        Err("not verified")
    );
    verify(&mut m);
    assert_eq!(
        coordinator(&mut m, &batch(9, 0, -1, 3, 1, true, 12)),
        Ok(())
    );
    assert_eq!(m.ongoing_txns().collect::<Vec<_>>(), vec![(3, 9)]);
}
