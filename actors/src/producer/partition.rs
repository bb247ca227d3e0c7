//! The producer-state steps of the partition's paths (the producer-state parts of Kafka's
//! `UnifiedLog.append`, `loadProducerState` and `close`), as functions the partition core calls
//! so its own code only gains one call per path.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use kactor_protocol::records::{
    batches, end_transaction_marker_batch, BatchHeader, EndTransactionMarker,
};

use super::snapshot;
use super::state::{
    AppendCheck, AppendOrigin, BatchMetadata, ProducerAppend, ProducerBatch, ProducerStateConfig,
    ProducerStateError, ProducerStateManager,
};
use crate::partition::core::log::PartitionLog;
use crate::partition::core::AppendOutcome;

/// Bytes read per step when replaying the log at open.
const REPLAY_READ_BYTES: usize = 1 << 20;
/// How many snapshots a partition keeps (older ones describe offsets recovery no longer starts at).
const SNAPSHOTS_KEPT: usize = 2;

/// One commit/abort marker a partition leader writes for WriteTxnMarkers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// Builds the marker's control batch at `offset` and checks it against the table.
pub fn prepare_marker(
    m: &ProducerStateManager,
    marker: &TxnMarker,
    offset: i64,
    leader_epoch: i32,
    now_ms: i64,
) -> Result<(Bytes, ProducerAppend), ProducerStateError> {
    let end = if marker.commit {
        EndTransactionMarker::commit(marker.coordinator_epoch)
    } else {
        EndTransactionMarker::abort(marker.coordinator_epoch)
    };
    let records = end_transaction_marker_batch(
        offset,
        now_ms,
        leader_epoch,
        marker.producer_id,
        marker.producer_epoch,
        end,
    )
    .expect("a marker batch always encodes");
    let batch = ProducerBatch {
        producer_id: marker.producer_id,
        producer_epoch: marker.producer_epoch,
        base_sequence: -1,
        last_sequence: -1,
        first_offset: offset,
        last_offset: offset,
        max_timestamp: now_ms,
        is_transactional: true,
        marker: Some(end),
    };
    match m.check_append(&batch, AppendOrigin::Coordinator)? {
        AppendCheck::Append(u) => Ok((records, u)),
        // Markers are never compared as duplicates; keep the type total.
        AppendCheck::Duplicate(_) => Ok((records, ProducerAppend::none(offset))),
    }
}

/// The producer-state check of one validated leader append (one batch, offsets assigned):
/// duplicate, append-then-apply, or the error to answer.
pub fn check_leader_append(
    m: &ProducerStateManager,
    records: &Bytes,
) -> Result<AppendCheck, ProducerStateError> {
    check_leader_append_from(m, records, AppendOrigin::Client)
}

/// [`check_leader_append`] for an append of the given origin: `Coordinator` for records a
/// coordinator writes on a producer's behalf (the group coordinator's TxnOffsetCommit records,
/// Kafka's `AppendOrigin.COORDINATOR`), which carry the producer's id and epoch but no
/// sequence, so they are neither sequence-checked nor deduplicated.
pub fn check_leader_append_from(
    m: &ProducerStateManager,
    records: &Bytes,
    origin: AppendOrigin,
) -> Result<AppendCheck, ProducerStateError> {
    match BatchHeader::parse(records) {
        Ok(h) => m.check_append(&ProducerBatch::from_header(&h), origin),
        // Validation already parsed this header; nothing to track if it somehow can't be.
        Err(_) => Ok(AppendCheck::Append(ProducerAppend::none(-1))),
    }
}

/// The Produce answer for a retried batch (Kafka answers NONE with the original offsets).
pub fn duplicate_outcome(
    d: &BatchMetadata,
    log_start_offset: i64,
    high_watermark: i64,
    leader_epoch: i32,
) -> AppendOutcome {
    AppendOutcome {
        base_offset: d.first_offset(),
        last_offset: d.last_offset,
        // Kafka's `UnifiedLog.append` answers a duplicate with the original batch's max
        // timestamp as LogAppendTime, whatever the topic's timestamp type.
        log_append_time_ms: d.timestamp,
        log_start_offset,
        records_count: 0,
        bytes: 0,
        high_watermark,
        high_watermark_advanced: false,
        leader_epoch,
    }
}

/// Rebuilds the table when a partition opens (Kafka's `loadProducerState`): the newest snapshot
/// at or below the log end (`dir` given: a disk log), then every batch after it. Snapshots above
/// the log end (a truncated tail) are deleted.
pub fn rebuild_from_log<L: PartitionLog + ?Sized>(
    log: &L,
    dir: Option<&Path>,
    config: ProducerStateConfig,
    now_ms: i64,
) -> ProducerStateManager {
    let mut m = ProducerStateManager::new(config);
    let log_start = log.log_start_offset();
    let log_end = log.log_end_offset();
    m.truncate_fully_and_start_at(log_start);
    let mut from = log_start;
    if let Some(dir) = dir {
        if let Err(e) = snapshot::delete_snapshots_after(dir, log_end) {
            tracing::warn!(error = %e, "cannot delete producer snapshots past the log end");
        }
        match snapshot::latest_snapshot(dir, log_end) {
            Ok(Some((offset, entries))) if offset >= log_start => {
                m.load_snapshot(entries, offset, now_ms);
                from = offset;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot list producer snapshots"),
        }
    }
    while from < log_end {
        let read = match log.read(from, REPLAY_READ_BYTES, log_end, true) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, offset = from, "producer state replay stopped");
                break;
            }
        };
        let bytes = match read.records.to_bytes() {
            Ok(b) if !b.is_empty() => b,
            _ => break,
        };
        let before = from;
        for batch in batches(bytes) {
            let Ok(batch) = batch else { break };
            let h = batch.header;
            if h.last_offset() < from {
                continue;
            }
            match ProducerBatch::from_batch(&batch.data) {
                Ok(Some(b)) => {
                    m.replay_batch(&b);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "unreadable batch in producer replay"),
            }
            from = h.next_offset();
        }
        if from == before {
            break;
        }
    }
    m.update_map_end_offset(log_end);
    m.remove_expired_producers(now_ms);
    m
}

/// Writes the snapshot Kafka takes on close (fsynced), named by the table's end offset, and
/// keeps only the newest few.
pub fn write_snapshot(
    m: &mut ProducerStateManager,
    dir: &Path,
    log_end_offset: i64,
) -> Result<(), String> {
    take_snapshot(m, dir, log_end_offset, true).map(|_| ())
}

/// The snapshot of a segment roll, written on the append path without its fsync; returns the
/// file, which the rolled segment's flush fsyncs first (Kafka's `roll`: `takeSnapshot(false)`,
/// then `flushProducerStateSnapshot` in the scheduled flush).
pub fn write_roll_snapshot(
    m: &mut ProducerStateManager,
    dir: &Path,
    rolled_at: i64,
) -> Result<PathBuf, String> {
    take_snapshot(m, dir, rolled_at, false)
}

/// Kafka's `takeSnapshot(sync)`: the table as of `end_offset`, then the retention of old files.
fn take_snapshot(
    m: &mut ProducerStateManager,
    dir: &Path,
    end_offset: i64,
    sync: bool,
) -> Result<PathBuf, String> {
    m.update_map_end_offset(end_offset);
    let write = if sync {
        snapshot::write_snapshot
    } else {
        snapshot::write_snapshot_unsynced
    };
    let path = write(dir, m.map_end_offset(), &m.entries()).map_err(|e| e.to_string())?;
    snapshot::retain_newest(dir, SNAPSHOTS_KEPT).map_err(|e| e.to_string())?;
    Ok(path)
}
