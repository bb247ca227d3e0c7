//! Transactions over the storage the broker really uses (`DiskLogFactory`, logs held as
//! `Box<dyn PartitionLog>`): an aborted transaction reaches the `.txnindex`, read_committed
//! reads report it, and a clean shutdown leaves a producer-state snapshot. (A version of this
//! path over `MemoryLog` passed while the boxed disk log dropped all three on the floor.)

mod common;

use common::txn::verify_txn;
use kactor_actors::partition::core::{IsolationLevel, ReadParams};
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::{disk_registry, leader_change, now_ms};
use kactor_actors::producer::partition::TxnMarker;
use kactor_protocol::records::BatchBuilder;
use kactor_protocol::Uuid;

fn txn_batch(pid: i64, epoch: i16, seq: i32) -> bytes::Bytes {
    let mut b = BatchBuilder::new(0)
        .producer(pid, epoch, seq)
        .transactional(true);
    // Now: a timestamp older than segment.ms would roll a segment before the marker.
    b.append(now_ms(), None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

fn read_committed() -> ReadRecords {
    ReadRecords {
        scope: Default::default(),
        params: ReadParams {
            fetch_offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            isolation: IsolationLevel::ReadCommitted,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            replica_id: -1,
        },
        isr_eligible: false,
        replica_epoch: -1,
    }
}

fn files_with_suffix(dir: &std::path::Path, suffix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect()
}

#[actix_rt::test]
async fn aborted_transactions_reach_the_txn_index_and_read_committed_reads() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().to_path_buf()];
    let registry = disk_registry(&dirs);
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader_change("t", Uuid([4; 16]), 0, 0)],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let addr = table.borrow().get("t", 0).unwrap().addr.clone();

    // Offset 0: producer 7's transactional batch; offset 1: its abort marker.
    verify_txn(&addr, 7, 0, 0).await;
    addr.send(AppendRecords {
        records: txn_batch(7, 0, 0),
        required_acks: -1,
    })
    .await
    .unwrap()
    .unwrap();
    addr.send(AppendTxnMarker {
        marker: TxnMarker {
            producer_id: 7,
            producer_epoch: 0,
            commit: false,
            coordinator_epoch: 0,
        },
    })
    .await
    .unwrap()
    .unwrap();

    let r = addr.send(read_committed()).await.unwrap().unwrap();
    assert_eq!(r.last_stable_offset, 2, "data at 0, abort marker at 1");
    let aborted: Vec<(i64, i64)> = r
        .aborted_transactions
        .iter()
        .map(|t| (t.producer_id, t.first_offset))
        .collect();
    assert_eq!(
        aborted,
        vec![(7, 0)],
        "read_committed consumers need the aborted range to skip it"
    );

    let part_dir = dir.path().join("t-0");
    let txn_index = part_dir.join(format!("{:020}.txnindex", 0));
    let len = std::fs::metadata(&txn_index)
        .map(|m| m.len())
        .unwrap_or_default();
    assert_eq!(len, 34, "one 34-byte aborted-transaction entry on disk");

    // The broker's clean shutdown writes the producer-state snapshot.
    registry.send(ShutdownReplicas).await.unwrap().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while files_with_suffix(&part_dir, ".snapshot").is_empty()
        && std::time::Instant::now() < deadline
    {
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        files_with_suffix(&part_dir, ".snapshot"),
        vec![format!("{:020}.snapshot", 2)],
        "a producer snapshot at the log end offset"
    );
}

#[actix_rt::test]
async fn a_segment_roll_writes_a_producer_snapshot_and_leadership_records_its_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().to_path_buf()];
    let registry = disk_registry(&dirs);
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader_change("r", Uuid([5; 16]), 0, 3)],
        })
        .await
        .unwrap();
    let part_dir = dir.path().join("r-0");
    // The new leader epoch is checkpointed before any batch (OffsetForLeaderEpoch needs it).
    let checkpoint = std::fs::read_to_string(part_dir.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(
        checkpoint.lines().collect::<Vec<_>>(),
        vec!["0", "1", "3 0"]
    );

    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let addr = table.borrow().get("r", 0).unwrap().addr.clone();
    // Idempotent batches: the first stamped in 2023, the next now, more than segment.ms (7
    // days) after it, so the segment rolls at the second (Kafka's time-based roll compares
    // the incoming batch's timestamp with the segment's first).
    let now = now_ms();
    for seq in 0..3 {
        let ts = if seq == 0 { 1_700_000_000_000 } else { now };
        let mut b = BatchBuilder::new(0).producer(11, 0, seq);
        b.append(ts, None, Some(&[b'x'; 60]), &[]).unwrap();
        addr.send(AppendRecords {
            records: b.build().unwrap(),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    }
    let logs = files_with_suffix(&part_dir, ".log");
    assert!(logs.len() >= 2, "segment.ms rolled: {logs:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while files_with_suffix(&part_dir, ".snapshot").is_empty()
        && std::time::Instant::now() < deadline
    {
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let snapshots = files_with_suffix(&part_dir, ".snapshot");
    assert!(
        !snapshots.is_empty(),
        "a roll takes a producer snapshot named by the roll offset: {snapshots:?}"
    );
    let mut roll_offsets: Vec<String> = logs.iter().map(|l| l.replace(".log", "")).collect();
    roll_offsets.sort();
    for s in &snapshots {
        assert!(
            roll_offsets.contains(&s.replace(".snapshot", "")),
            "{s} is named by a segment base offset {roll_offsets:?}"
        );
    }
}

#[actix_rt::test]
async fn last_stable_offset_lag_and_producer_gauges_follow_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let registry = disk_registry(&[dir.path().to_path_buf()]);
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader_change("lso-gauges", Uuid([6; 16]), 0, 0)],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let addr = table.borrow().get("lso-gauges", 0).unwrap().addr.clone();
    let m = kactor_actors::partition::metrics::partition_metrics();
    let lag = || {
        m.last_stable_offset_lag
            .with_label_values(&["lso-gauges", "0"])
            .get()
    };
    let producers = || m.producers.with_label_values(&["lso-gauges", "0"]).get();

    // Two producers' open transactions (offsets 0 and 1): read_committed is held at 0.
    for pid in [11, 12] {
        verify_txn(&addr, pid, 0, 0).await;
        addr.send(AppendRecords {
            records: txn_batch(pid, 0, 0),
            required_acks: -1,
        })
        .await
        .unwrap()
        .unwrap();
    }
    assert_eq!((lag(), producers()), (2, 2));
    // Producer 11 commits (marker at 2): the LSO moves to producer 12's first offset.
    let marker = |producer_id| AppendTxnMarker {
        marker: TxnMarker {
            producer_id,
            producer_epoch: 0,
            commit: true,
            coordinator_epoch: 0,
        },
    };
    addr.send(marker(11)).await.unwrap().unwrap();
    assert_eq!(lag(), 2, "high watermark 3, LSO 1");
    addr.send(marker(12)).await.unwrap().unwrap();
    assert_eq!((lag(), producers()), (0, 2));
}
