//! Idempotent and transactional appends through the partition core (in memory and over the real
//! storage engine): retries answered with their original offsets and never appended twice,
//! sequence and epoch errors with Kafka's codes, producer state surviving a restart (from the
//! `.snapshot` written at close, or by replaying the log after a crash), and the LSO.

use bytes::Bytes;
use kactor_actors::log::{Log, LogConfig};
use kactor_actors::partition::core::{
    IsolationLevel, MemoryLog, Partition, PartitionAssignment, PartitionConfig, PartitionLog,
    ReadParams, TopicPartition,
};
use kactor_actors::partition::DiskLog;
use kactor_actors::producer::partition::TxnMarker;
use kactor_protocol::records::{BatchBuilder, BatchHeader};

const NOW: i64 = 1_700_000_000_000;

fn batch(pid: i64, epoch: i16, seq: i32, n: i32, txn: bool) -> Bytes {
    let mut b = BatchBuilder::new(0)
        .producer(pid, epoch, seq)
        .transactional(txn);
    for i in 0..n {
        b.append(NOW, None, Some(format!("r{seq}-{i}").as_bytes()), &[])
            .unwrap();
    }
    b.build().unwrap()
}

fn leader<L: PartitionLog>(log: L) -> Partition<L> {
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        1,
        log,
        PartitionConfig::default(),
        NOW,
    );
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        },
        NOW,
    )
    .unwrap();
    p
}

/// (base offset, last offset) or the error code. A transactional batch is verified first
/// (KIP-890), as the leader's Produce path does.
fn produce<L: PartitionLog>(p: &mut Partition<L>, b: &Bytes) -> Result<(i64, i64), i16> {
    let h = BatchHeader::parse(b).unwrap();
    if h.is_transactional() {
        if let Ok(guard) = p.maybe_start_transaction_verification(
            h.producer_id,
            h.base_sequence,
            h.producer_epoch,
            false,
            NOW,
        ) {
            let _ = p.confirm_transaction_verification(h.producer_id, guard);
        }
    }
    p.append_as_leader(b, -1, NOW)
        .map(|o| (o.base_offset, o.last_offset))
        .map_err(|e| e.code())
}

fn base_offsets<L: PartitionLog>(p: &mut Partition<L>, isolation: IsolationLevel) -> Vec<i64> {
    let out = p
        .read(&ReadParams {
            fetch_offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            isolation,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            replica_id: -1,
        })
        .unwrap();
    let bytes = out.records.to_bytes().unwrap();
    let mut v = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        v.push(h.base_offset);
        pos += h.total_size();
    }
    v
}

#[test]
fn retries_get_original_offsets_and_are_not_appended_again() {
    let mut p = leader(MemoryLog::new());
    assert_eq!(produce(&mut p, &batch(1, 0, 0, 3, false)), Ok((0, 2)));
    assert_eq!(produce(&mut p, &batch(1, 0, 3, 2, false)), Ok((3, 4)));
    assert_eq!(produce(&mut p, &batch(1, 0, 0, 3, false)), Ok((0, 2)));
    assert_eq!(p.log_end_offset(), 5);
    assert_eq!(
        base_offsets(&mut p, IsolationLevel::ReadUncommitted),
        vec![0, 3]
    );
}

#[test]
fn sequence_and_epoch_errors_carry_kafkas_codes() {
    let mut p = leader(MemoryLog::new());
    produce(&mut p, &batch(1, 2, 0, 1, false)).unwrap();
    // OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH; nothing appended.
    assert_eq!(produce(&mut p, &batch(1, 2, 5, 1, false)), Err(45));
    assert_eq!(produce(&mut p, &batch(1, 1, 1, 1, false)), Err(47));
    assert_eq!(p.log_end_offset(), 1);
    // Producers without an id are untouched by all this.
    let plain = BatchBuilder::new(0);
    let mut plain = plain;
    plain.append(NOW, None, Some(b"x"), &[]).unwrap();
    assert_eq!(produce(&mut p, &plain.build().unwrap()), Ok((1, 1)));
}

#[test]
fn an_open_transaction_holds_the_last_stable_offset() {
    let mut p = leader(MemoryLog::new());
    produce(&mut p, &batch(1, 0, 0, 2, false)).unwrap();
    produce(&mut p, &batch(2, 0, 0, 2, true)).unwrap();
    produce(&mut p, &batch(1, 0, 2, 1, false)).unwrap();
    assert_eq!(p.high_watermark(), 5);
    assert_eq!(p.last_stable_offset(), 2);
    assert_eq!(base_offsets(&mut p, IsolationLevel::ReadCommitted), vec![0]);
    assert_eq!(
        base_offsets(&mut p, IsolationLevel::ReadUncommitted),
        vec![0, 2, 4]
    );
}

fn open_disk(dir: &std::path::Path, clean: bool) -> Partition<DiskLog> {
    let log = Log::open(dir, LogConfig::default(), 0, 0, clean, NOW).unwrap();
    leader(DiskLog::new(log))
}

#[test]
fn producer_state_survives_a_clean_restart_through_the_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    {
        let mut p = open_disk(&dir, false);
        produce(&mut p, &batch(7, 0, 0, 2, false)).unwrap();
        produce(&mut p, &batch(7, 0, 2, 2, false)).unwrap();
        p.write_producer_snapshot().unwrap();
        p.flush(NOW).unwrap();
    }
    assert!(dir.join("00000000000000000004.snapshot").exists());
    let mut p = open_disk(&dir, true);
    assert_eq!(produce(&mut p, &batch(7, 0, 2, 2, false)), Ok((2, 3)));
    assert_eq!(produce(&mut p, &batch(7, 0, 9, 1, false)), Err(45));
    assert_eq!(produce(&mut p, &batch(7, 0, 4, 1, false)), Ok((4, 4)));
}

#[test]
fn producer_state_is_rebuilt_from_the_log_without_a_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    {
        let mut p = open_disk(&dir, false);
        produce(&mut p, &batch(7, 0, 0, 2, false)).unwrap();
        produce(&mut p, &batch(8, 0, 0, 1, true)).unwrap();
        p.flush(NOW).unwrap();
        // Dropped without a snapshot: as after kill -9.
    }
    let mut p = open_disk(&dir, false);
    assert_eq!(produce(&mut p, &batch(7, 0, 0, 2, false)), Ok((0, 1)));
    // The open transaction came back too.
    assert_eq!(p.last_stable_offset(), 2);
}

fn marker(pid: i64, epoch: i16, commit: bool) -> TxnMarker {
    TxnMarker {
        producer_id: pid,
        producer_epoch: epoch,
        commit,
        coordinator_epoch: 0,
    }
}

fn read_committed<L: PartitionLog>(p: &mut Partition<L>) -> (Vec<i64>, Vec<(i64, i64)>) {
    let out = p
        .read(&ReadParams {
            fetch_offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            isolation: IsolationLevel::ReadCommitted,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            replica_id: -1,
        })
        .unwrap();
    let bytes = out.records.to_bytes().unwrap();
    let mut v = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        v.push(h.base_offset);
        pos += h.total_size();
    }
    let aborted = out
        .aborted_transactions
        .iter()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    (v, aborted)
}

#[test]
fn markers_release_the_lso_and_aborted_transactions_reach_read_committed_fetches() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    let mut p = open_disk(&dir, false);
    produce(&mut p, &batch(1, 0, 0, 2, true)).unwrap(); // 0..1, aborted below
    produce(&mut p, &batch(2, 0, 0, 1, true)).unwrap(); // 2, committed below
    assert_eq!(p.last_stable_offset(), 0);
    let abort = p.append_txn_marker(&marker(1, 0, false), NOW).unwrap();
    assert_eq!(abort.base_offset, 3);
    // Producer 2's transaction still holds the LSO.
    assert_eq!(p.last_stable_offset(), 2);
    p.append_txn_marker(&marker(2, 0, true), NOW).unwrap();
    assert_eq!(p.last_stable_offset(), 5);
    let (batches, aborted) = read_committed(&mut p);
    assert_eq!(batches, vec![0, 2, 3, 4]);
    assert_eq!(aborted, vec![(1, 0)]);
    // The aborted transaction is in the segment's .txnindex.
    assert!(dir.join("00000000000000000000.txnindex").exists());
    // A marker from a fenced epoch is refused with INVALID_PRODUCER_EPOCH.
    produce(&mut p, &batch(3, 4, 0, 1, true)).unwrap();
    assert_eq!(
        p.append_txn_marker(&marker(3, 3, true), NOW)
            .unwrap_err()
            .code(),
        47
    );
}
