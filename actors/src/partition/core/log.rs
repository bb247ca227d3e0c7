//! What a partition needs from its local log (the slice of Kafka's `UnifiedLog` that
//! `Partition` calls), as a trait so the partition core is testable without disk and the storage
//! engine (`crate::log`) plugs in through an adapter. `MemoryLog` is the in-memory
//! implementation used by the core's tests.

use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;
use kactor_protocol::records::{BatchHeader, BATCH_HEADER_LEN};

/// Batches read from a log: in memory, or a range of a segment file the network layer sends
/// with `sendfile` (maps 1:1 onto `kactor_protocol::codec::Records`).
#[derive(Debug, Clone)]
pub enum LogSlice {
    Memory(Bytes),
    File {
        file: Arc<File>,
        position: u64,
        len: u32,
    },
}

impl LogSlice {
    pub fn len(&self) -> usize {
        match self {
            LogSlice::Memory(b) => b.len(),
            LogSlice::File { len, .. } => *len as usize,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes themselves (tests, TLS listeners).
    pub fn to_bytes(&self) -> std::io::Result<Bytes> {
        match self {
            LogSlice::Memory(b) => Ok(b.clone()),
            LogSlice::File {
                file,
                position,
                len,
            } => {
                use std::os::unix::fs::FileExt;
                let mut v = vec![0u8; *len as usize];
                file.read_exact_at(&mut v, *position)?;
                Ok(Bytes::from(v))
            }
        }
    }
}

/// A timestamp lookup result (Kafka's `FileRecords.TimestampAndOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
}

/// One read from the log: whole batches starting at the batch containing the start offset.
#[derive(Debug, Clone)]
pub struct LogRead {
    pub records: LogSlice,
    /// First offset of the first returned batch (may be below the requested offset).
    pub first_batch_offset: Option<i64>,
}

/// Facts about an append the log may index (Kafka's `LogAppendInfo` subset the log needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedBatches {
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub records_count: u64,
}

pub type LogResult<T> = Result<T, String>;

/// fsync work taken out of a log so it can run on a blocking thread while the partition keeps
/// serving (Kafka's flushes run on the scheduler, not the request threads).
pub trait FlushWork: Send + 'static {
    fn run(&self) -> LogResult<()>;
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

/// The partition's local log. Every method is synchronous: the partition actor owns the log and
/// is the only caller.
pub trait PartitionLog: Send + 'static {
    fn log_start_offset(&self) -> i64;
    /// First offset still on local disk; equals the log start offset without tiered storage.
    fn local_log_start_offset(&self) -> i64 {
        self.log_start_offset()
    }
    fn log_end_offset(&self) -> i64;
    /// Appends batches whose offsets and leader epochs are already assigned.
    fn append(&mut self, batches: Bytes, info: &AppendedBatches) -> LogResult<()>;
    /// Appends a follower's batches as the leader wrote them. Unlike [`Self::append`], a batch
    /// over the topic's `max.message.bytes` is taken (Kafka's `ignoreRecordSize` for
    /// replication): the leader accepted it, perhaps before the limit was lowered.
    fn append_as_follower(&mut self, batches: Bytes, info: &AppendedBatches) -> LogResult<()> {
        self.append(batches, info)
    }
    /// Appends one batch given as its (rewritten) 61-byte header and the bytes after it, so a
    /// produce request carrying several partitions' batches in one buffer needs no copy of the
    /// batch to patch its header. The default joins the two (a copy); a disk log writes them
    /// with one vectored write.
    fn append_split(
        &mut self,
        header: &[u8; BATCH_HEADER_LEN],
        body: Bytes,
        info: &AppendedBatches,
    ) -> LogResult<()> {
        let mut joined = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
        joined.extend_from_slice(header);
        joined.extend_from_slice(&body);
        self.append(Bytes::from(joined), info)
    }
    /// Reads the bytes from the batch containing `start_offset` on, at most `max_bytes` unless
    /// `min_one_batch` (then at least the first batch), never including a batch that reaches
    /// `max_offset` (exclusive) or beyond. `max_bytes` may end inside a later batch: the read
    /// then ends with part of it, as Kafka's log reads do (readers skip a partial trailing
    /// batch); a first batch that does not fit whole makes the read empty.
    fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> LogResult<LogRead>;
    /// The first batch whose max timestamp is >= `timestamp`, with the offset of the first record
    /// at or after it (Kafka's `fetchOffsetByTimestamp` for a real timestamp).
    fn offset_for_timestamp(&self, timestamp: i64) -> LogResult<Option<TimestampOffset>>;
    /// The record with the largest timestamp (the last one if several), for ListOffsets -3.
    fn max_timestamp_offset(&self) -> LogResult<Option<TimestampOffset>>;
    /// Moves the log start offset forward (DeleteRecords, retention); never backwards.
    fn advance_log_start_offset(&mut self, offset: i64) -> LogResult<()>;
    /// Follower truncation (Kafka's `UnifiedLog.truncateTo`): removes every batch at or past
    /// `offset` (a batch straddling it goes whole) and the epoch cache entries from there.
    fn truncate_to(&mut self, offset: i64) -> LogResult<()>;
    /// Empties the log and restarts it at `offset` (a follower behind the leader's log start).
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> LogResult<()>;
    /// Records that `epoch` starts at `start_offset` (Kafka's `LeaderEpochFileCache.assign`).
    fn assign_epoch_start_offset(&mut self, epoch: i32, start_offset: i64) -> LogResult<()>;
    /// The leader epoch cache, oldest first: (epoch, start offset).
    fn epoch_entries(&self) -> Vec<(i32, i64)>;
    /// Forces appended data to disk up to the end of the log.
    fn flush(&mut self) -> LogResult<()>;
    /// Offset below which everything is known to be on disk.
    fn recovery_point(&self) -> i64;
    /// Bytes the log occupies.
    fn size_bytes(&self) -> u64;
    /// Retention by time and size (Kafka's `deleteOldSegments`); returns segments removed.
    /// Only segments wholly below `high_watermark` may go.
    fn enforce_retention(
        &mut self,
        _now_ms: i64,
        _high_watermark: i64,
        _retention_ms: i64,
        _retention_bytes: i64,
    ) -> LogResult<usize> {
        Ok(0)
    }
    /// Removes the log from disk (the partition is deleted or moved away).
    fn delete(&mut self) -> LogResult<()>;
    /// Closes and opens the log again from what is on disk, recovering above the recovery
    /// point as after a crash (a partition restarted after a caught panic). Logs that are not
    /// on disk have nothing to reread.
    fn reopen(&mut self) -> LogResult<()> {
        Ok(())
    }
    /// Hands the concrete log back to whoever created it (clean shutdown closes it).
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
    /// The topic's configuration changed (topic-level names → values in force).
    fn update_config(&mut self, _effective: &std::collections::BTreeMap<String, String>) {}
    /// Prepares an fsync of everything below `up_to` for a blocking thread; `None` when
    /// nothing needs it or the log flushes inline (then [`PartitionLog::flush`] is used).
    fn prepare_flush(&mut self, _up_to: i64) -> Option<Box<dyn FlushWork>> {
        None
    }
    /// Records a finished [`FlushWork`] (advances the recovery point).
    fn complete_flush(&mut self, _work: Box<dyn FlushWork>) {}
    /// An append rolled a segment: the offset to flush up to soon (Kafka flushes a rolled
    /// segment right away, off the append path).
    fn take_roll_flush(&mut self) -> Option<i64> {
        None
    }
    /// Where producer-state `.snapshot` files live (`crate::producer`); `None`: not kept.
    fn producer_snapshot_dir(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// Records an aborted transaction in the `.txnindex` (read_committed fetches skip it).
    fn append_aborted_txn(&mut self, _txn: crate::log::AbortedTxn) -> LogResult<()> {
        Ok(())
    }
    /// Aborted transactions overlapping `[start_offset, upper_bound_offset)`.
    fn collect_aborted_transactions(
        &self,
        _start_offset: i64,
        _upper_bound_offset: i64,
    ) -> Vec<crate::log::AbortedTxn> {
        Vec::new()
    }
    /// What the log cleaner reads of a compacted log (`crate::log::cleaner`); `None` for logs
    /// that are not on disk.
    fn cleaner_view(
        &mut self,
        _last_stable_offset: i64,
        _producers: std::collections::HashMap<i64, crate::log::cleaner::LastRecord>,
    ) -> LogResult<Option<crate::log::cleaner::LogView>> {
        Ok(None)
    }
    /// Swaps a cleaning's segments in; returns how many were (a changed log refuses them).
    fn replace_with_cleaned(
        &mut self,
        cleaned: &[crate::log::cleaner::CleanedSegment],
        _generation: u64,
    ) -> LogResult<usize> {
        for c in cleaned {
            crate::log::cleaner::discard_cleaned(c);
        }
        Ok(0)
    }
}

/// An in-memory log: a list of batches. Used by tests and as a stand-in storage.
#[derive(Debug, Default)]
pub struct MemoryLog {
    batches: Vec<(BatchHeader, Bytes)>,
    log_start_offset: i64,
    log_end_offset: i64,
    epochs: Vec<(i32, i64)>,
    recovery_point: i64,
    pub deleted: bool,
}

impl MemoryLog {
    pub fn new() -> Self {
        Self::default()
    }
}

impl PartitionLog for MemoryLog {
    fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    fn append(&mut self, batches: Bytes, info: &AppendedBatches) -> LogResult<()> {
        let mut pos = 0;
        while pos < batches.len() {
            let h = BatchHeader::parse(&batches[pos..]).map_err(|e| e.to_string())?;
            let end = pos + h.total_size();
            self.batches.push((h, batches.slice(pos..end)));
            pos = end;
        }
        self.log_end_offset = info.last_offset + 1;
        Ok(())
    }
    fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> LogResult<LogRead> {
        let mut out = Vec::new();
        let mut first = None;
        let mut budget = max_bytes;
        for (h, b) in &self.batches {
            if h.last_offset() < start_offset {
                continue;
            }
            if h.last_offset() >= max_offset || out.len() >= budget {
                break;
            }
            if first.is_none() {
                if min_one_batch {
                    budget = budget.max(b.len());
                } else if b.len() > budget {
                    // A first batch cut short is no batch at all (Kafka answers empty).
                    break;
                }
                first = Some(h.base_offset);
            }
            out.extend_from_slice(b);
        }
        out.truncate(budget);
        if out.is_empty() {
            first = None;
        }
        Ok(LogRead {
            records: LogSlice::Memory(Bytes::from(out)),
            first_batch_offset: first,
        })
    }
    fn offset_for_timestamp(&self, timestamp: i64) -> LogResult<Option<TimestampOffset>> {
        // Batch granularity is enough for the in-memory stand-in; the storage engine scans records.
        for (h, _) in &self.batches {
            if h.max_timestamp >= timestamp && h.last_offset() >= self.log_start_offset {
                return Ok(Some(TimestampOffset {
                    timestamp: h.max_timestamp,
                    offset: h.base_offset.max(self.log_start_offset),
                    leader_epoch: Some(h.partition_leader_epoch).filter(|e| *e >= 0),
                }));
            }
        }
        Ok(None)
    }
    fn max_timestamp_offset(&self) -> LogResult<Option<TimestampOffset>> {
        let mut best: Option<TimestampOffset> = None;
        for (h, _) in &self.batches {
            if h.last_offset() < self.log_start_offset {
                continue;
            }
            if best.is_none_or(|b| h.max_timestamp >= b.timestamp) {
                best = Some(TimestampOffset {
                    timestamp: h.max_timestamp,
                    offset: h.last_offset(),
                    leader_epoch: Some(h.partition_leader_epoch).filter(|e| *e >= 0),
                });
            }
        }
        Ok(best)
    }
    fn advance_log_start_offset(&mut self, offset: i64) -> LogResult<()> {
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.batches.retain(|(h, _)| h.last_offset() >= offset);
        }
        Ok(())
    }
    fn truncate_to(&mut self, offset: i64) -> LogResult<()> {
        if offset >= self.log_end_offset {
            return Ok(());
        }
        self.batches.retain(|(h, _)| h.last_offset() < offset);
        self.epochs.retain(|(_, start)| *start < offset);
        self.log_end_offset = offset;
        self.log_start_offset = self.log_start_offset.min(offset);
        self.recovery_point = self.recovery_point.min(offset);
        Ok(())
    }
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> LogResult<()> {
        self.batches.clear();
        self.epochs.clear();
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        Ok(())
    }
    fn assign_epoch_start_offset(&mut self, epoch: i32, start_offset: i64) -> LogResult<()> {
        match self.epochs.last() {
            Some((e, _)) if *e >= epoch => {}
            _ => self.epochs.push((epoch, start_offset)),
        }
        Ok(())
    }
    fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs.clone()
    }
    fn flush(&mut self) -> LogResult<()> {
        self.recovery_point = self.log_end_offset;
        Ok(())
    }
    fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    fn size_bytes(&self) -> u64 {
        self.batches.iter().map(|(_, b)| b.len() as u64).sum()
    }
    fn delete(&mut self) -> LogResult<()> {
        self.batches.clear();
        self.deleted = true;
        Ok(())
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// Lets a partition own its log as a trait object (the actor doesn't know the concrete storage).
impl PartitionLog for Box<dyn PartitionLog> {
    fn log_start_offset(&self) -> i64 {
        (**self).log_start_offset()
    }
    fn local_log_start_offset(&self) -> i64 {
        (**self).local_log_start_offset()
    }
    fn log_end_offset(&self) -> i64 {
        (**self).log_end_offset()
    }
    fn append(&mut self, batches: Bytes, info: &AppendedBatches) -> LogResult<()> {
        (**self).append(batches, info)
    }
    fn append_split(
        &mut self,
        header: &[u8; BATCH_HEADER_LEN],
        body: Bytes,
        info: &AppendedBatches,
    ) -> LogResult<()> {
        (**self).append_split(header, body, info)
    }
    fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> LogResult<LogRead> {
        (**self).read(start_offset, max_bytes, max_offset, min_one_batch)
    }
    fn offset_for_timestamp(&self, timestamp: i64) -> LogResult<Option<TimestampOffset>> {
        (**self).offset_for_timestamp(timestamp)
    }
    fn max_timestamp_offset(&self) -> LogResult<Option<TimestampOffset>> {
        (**self).max_timestamp_offset()
    }
    fn advance_log_start_offset(&mut self, offset: i64) -> LogResult<()> {
        (**self).advance_log_start_offset(offset)
    }
    fn truncate_to(&mut self, offset: i64) -> LogResult<()> {
        (**self).truncate_to(offset)
    }
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> LogResult<()> {
        (**self).truncate_fully_and_start_at(offset)
    }
    fn append_as_follower(&mut self, batches: Bytes, info: &AppendedBatches) -> LogResult<()> {
        (**self).append_as_follower(batches, info)
    }
    fn assign_epoch_start_offset(&mut self, epoch: i32, start_offset: i64) -> LogResult<()> {
        (**self).assign_epoch_start_offset(epoch, start_offset)
    }
    fn epoch_entries(&self) -> Vec<(i32, i64)> {
        (**self).epoch_entries()
    }
    fn flush(&mut self) -> LogResult<()> {
        (**self).flush()
    }
    fn recovery_point(&self) -> i64 {
        (**self).recovery_point()
    }
    fn size_bytes(&self) -> u64 {
        (**self).size_bytes()
    }
    fn enforce_retention(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> LogResult<usize> {
        (**self).enforce_retention(now_ms, high_watermark, retention_ms, retention_bytes)
    }
    fn delete(&mut self) -> LogResult<()> {
        (**self).delete()
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        <dyn PartitionLog>::into_any(*self)
    }
    fn update_config(&mut self, effective: &std::collections::BTreeMap<String, String>) {
        (**self).update_config(effective)
    }
    fn prepare_flush(&mut self, up_to: i64) -> Option<Box<dyn FlushWork>> {
        (**self).prepare_flush(up_to)
    }
    fn complete_flush(&mut self, work: Box<dyn FlushWork>) {
        (**self).complete_flush(work)
    }
    fn take_roll_flush(&mut self) -> Option<i64> {
        (**self).take_roll_flush()
    }
    // The defaulted methods must be forwarded too: a missing one silently falls back to the
    // trait's no-op for every partition the broker runs (it holds logs as `Box<dyn ..>`).
    fn producer_snapshot_dir(&self) -> Option<std::path::PathBuf> {
        (**self).producer_snapshot_dir()
    }
    fn append_aborted_txn(&mut self, txn: crate::log::AbortedTxn) -> LogResult<()> {
        (**self).append_aborted_txn(txn)
    }
    fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<crate::log::AbortedTxn> {
        (**self).collect_aborted_transactions(start_offset, upper_bound_offset)
    }
    fn cleaner_view(
        &mut self,
        last_stable_offset: i64,
        producers: std::collections::HashMap<i64, crate::log::cleaner::LastRecord>,
    ) -> LogResult<Option<crate::log::cleaner::LogView>> {
        (**self).cleaner_view(last_stable_offset, producers)
    }
    fn replace_with_cleaned(
        &mut self,
        cleaned: &[crate::log::cleaner::CleanedSegment],
        generation: u64,
    ) -> LogResult<usize> {
        (**self).replace_with_cleaned(cleaned, generation)
    }
}
