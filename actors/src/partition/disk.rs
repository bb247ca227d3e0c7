//! The partition's log on disk: [`PartitionLog`] over the storage engine's `crate::log::Log`
//! (Kafka's `UnifiedLog`). Opening logs across `log.dirs` (the log-opening half of Kafka's
//! `LogManager`) is [`super::log_dirs::LogDirsFactory`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use kactor_protocol::records::BATCH_HEADER_LEN;

use super::actor::now_ms;
use super::core::log::{
    AppendedBatches, FlushWork, LogRead, LogResult, LogSlice, PartitionLog, TimestampOffset,
};
use crate::log::{self as storage, Log, LogConfig};

/// The storage engine's config for a topic: its defaults, overridden by every topic-level
/// setting in force. A value the engine rejects is logged and skipped (the controller validates
/// configs on the way in; a bad one must not keep a partition offline).
pub fn log_config(effective: &BTreeMap<String, String>) -> LogConfig {
    let mut config = LogConfig::default();
    for (name, value) in effective {
        if !storage::LOG_CONFIG_NAMES.contains(&name.as_str()) {
            continue;
        }
        if let Err(e) = config.set(name, value) {
            tracing::warn!(config = %name, value = %value, error = %e, "ignoring topic config");
        }
    }
    config
}

/// A prepared fsync of a disk log (runs on a blocking thread).
struct DiskFlush(storage::FlushTask);

impl FlushWork for DiskFlush {
    fn run(&self) -> LogResult<()> {
        self.0.run().map_err(|e| e.to_string())
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// A partition log in a log dir.
pub struct DiskLog {
    log: Option<Log>,
    /// A rolled segment's base offset waiting for its flush.
    roll_flush: Option<i64>,
    /// How long a deleted partition's renamed directory stays (`file.delete.delay.ms`).
    file_delete_delay_ms: i64,
}

impl DiskLog {
    pub fn new(log: Log) -> Self {
        let file_delete_delay_ms = log.config().file_delete_delay_ms;
        DiskLog {
            log: Some(log),
            roll_flush: None,
            file_delete_delay_ms,
        }
    }
    fn log(&self) -> &Log {
        self.log
            .as_ref()
            .expect("log present until deleted or closed")
    }
    fn log_mut(&mut self) -> &mut Log {
        self.log
            .as_mut()
            .expect("log present until deleted or closed")
    }
    pub fn into_log(self) -> Option<Log> {
        self.log
    }
    /// An append's outcome as the partition core takes it: a rolled segment is noted for its
    /// flush.
    fn appended(
        &mut self,
        appended: Result<storage::AppendInfo, storage::LogError>,
    ) -> LogResult<()> {
        let info = appended.map_err(|e| e.to_string())?;
        self.note_roll(info.rolled_at);
        Ok(())
    }
    fn note_roll(&mut self, rolled_at: Option<i64>) {
        if let Some(rolled_at) = rolled_at {
            // Kafka flushes a rolled segment right away, but off the append path: the partition
            // takes this and runs the fsync (up to a whole segment) on the blocking pool, and
            // writes the producer snapshot named by the roll offset.
            self.roll_flush = Some(self.roll_flush.map_or(rolled_at, |r| r.max(rolled_at)));
        }
    }
}

impl PartitionLog for DiskLog {
    fn reopen(&mut self) -> LogResult<()> {
        let log = self.log.take().ok_or("the log is closed")?;
        let dir = log.dir().to_path_buf();
        let config = log.config().clone();
        let (log_start_offset, recovery_point) = (log.log_start_offset(), log.recovery_point());
        // Dropped, not closed: nothing more is written into files whose tail may be torn.
        drop(log);
        let log = Log::open(
            &dir,
            config,
            log_start_offset,
            recovery_point,
            false,
            now_ms(),
        )
        .map_err(|e| format!("{}: {e}", dir.display()))?;
        self.log = Some(log);
        self.roll_flush = None;
        Ok(())
    }

    fn log_start_offset(&self) -> i64 {
        self.log().log_start_offset()
    }
    fn log_end_offset(&self) -> i64 {
        self.log().log_end_offset()
    }
    fn append(&mut self, batches: Bytes, _info: &AppendedBatches) -> LogResult<()> {
        let appended = self.log_mut().append(&batches, now_ms());
        self.appended(appended)
    }
    fn append_as_follower(&mut self, batches: Bytes, _info: &AppendedBatches) -> LogResult<()> {
        let appended = self.log_mut().append_as_follower(&batches, now_ms());
        self.appended(appended)
    }
    fn append_split(
        &mut self,
        header: &[u8; BATCH_HEADER_LEN],
        body: Bytes,
        _info: &AppendedBatches,
    ) -> LogResult<()> {
        // One pwritev of the header copy and the request's own bytes (storage's vectored
        // append), instead of joining them into a copy of the batch.
        let appended = self.log_mut().append_vectored(header, &body, now_ms());
        self.appended(appended)
    }
    fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> LogResult<LogRead> {
        let max_bytes = max_bytes.min(u32::MAX as usize) as u32;
        let info = self
            .log()
            .read(start_offset, max_bytes, Some(max_offset), min_one_batch)
            .map_err(|e| e.to_string())?;
        let records = match info.records {
            Some(s) => LogSlice::File {
                file: s.file,
                position: s.position,
                len: s.len,
            },
            None => LogSlice::Memory(Bytes::new()),
        };
        Ok(LogRead {
            records,
            first_batch_offset: info.first_batch_base_offset,
        })
    }
    fn offset_for_timestamp(&self, timestamp: i64) -> LogResult<Option<TimestampOffset>> {
        let found = self
            .log()
            .fetch_offset_by_timestamp(timestamp)
            .map_err(|e| e.to_string())?;
        Ok(found.map(|t| TimestampOffset {
            timestamp: t.timestamp,
            offset: t.offset,
            leader_epoch: t.leader_epoch,
        }))
    }
    fn max_timestamp_offset(&self) -> LogResult<Option<TimestampOffset>> {
        self.offset_for_timestamp(storage::MAX_TIMESTAMP)
    }
    fn advance_log_start_offset(&mut self, offset: i64) -> LogResult<()> {
        self.log_mut()
            .maybe_increment_log_start_offset(offset)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn truncate_to(&mut self, offset: i64) -> LogResult<()> {
        self.log_mut()
            .truncate_to(offset, now_ms())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> LogResult<()> {
        self.log_mut()
            .truncate_fully_and_start_at(offset, now_ms())
            .map_err(|e| e.to_string())
    }
    fn assign_epoch_start_offset(&mut self, epoch: i32, start_offset: i64) -> LogResult<()> {
        // Kafka records a new leader epoch when the replica becomes leader, before any batch,
        // so OffsetForLeaderEpoch answers for an epoch that has not written yet.
        self.log_mut()
            .assign_epoch_start_offset(epoch, start_offset)
            .map_err(|e| e.to_string())
    }
    fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.log()
            .leader_epoch_cache()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }
    fn flush(&mut self) -> LogResult<()> {
        let leo = self.log().log_end_offset();
        self.log_mut()
            .flush(leo, now_ms())
            .map_err(|e| e.to_string())
    }
    fn recovery_point(&self) -> i64 {
        self.log().recovery_point()
    }
    fn size_bytes(&self) -> u64 {
        self.log().size()
    }
    fn enforce_retention(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        _retention_ms: i64,
        _retention_bytes: i64,
    ) -> LogResult<usize> {
        // The storage engine applies retention.ms / retention.bytes from its own config, which
        // update_config keeps in step with the partition's.
        let log = self.log_mut();
        let n = log
            .delete_old_segments(now_ms, high_watermark)
            .map_err(|e| e.to_string())?;
        log.purge_deleted_segments(now_ms)
            .map_err(|e| e.to_string())?;
        Ok(n)
    }
    fn delete(&mut self) -> LogResult<()> {
        let Some(log) = self.log.take() else {
            return Ok(());
        };
        let renamed = log.rename_for_deletion().map_err(|e| e.to_string())?;
        // Kafka removes a deleted partition's directory after file.delete.delay.ms; the rename
        // already hid it from the next start's load, so a crash before removal loses nothing.
        let delay = Duration::from_millis(self.file_delete_delay_ms.max(0) as u64);
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            if let Err(e) = storage::remove_log_dir(&renamed) {
                tracing::warn!(dir = %renamed.display(), error = %e, "removing deleted log failed");
            }
        });
        Ok(())
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
    fn prepare_flush(&mut self, up_to: i64) -> Option<Box<dyn FlushWork>> {
        let task = self.log.as_mut()?.prepare_flush(up_to)?;
        Some(Box::new(DiskFlush(task)))
    }
    fn complete_flush(&mut self, work: Box<dyn FlushWork>) {
        let Ok(done) = work.into_any().downcast::<DiskFlush>() else {
            return;
        };
        if let Some(log) = self.log.as_mut() {
            log.complete_flush(&done.0, now_ms());
        }
    }
    fn take_roll_flush(&mut self) -> Option<i64> {
        self.roll_flush.take()
    }
    fn producer_snapshot_dir(&self) -> Option<PathBuf> {
        self.log.as_ref().map(|l| l.dir().to_path_buf())
    }
    fn append_aborted_txn(&mut self, txn: storage::AbortedTxn) -> LogResult<()> {
        self.log_mut()
            .append_aborted_txn(txn)
            .map_err(|e| e.to_string())
    }
    fn collect_aborted_transactions(&self, start: i64, upper: i64) -> Vec<storage::AbortedTxn> {
        self.log().collect_aborted_transactions(start, upper)
    }
    fn cleaner_view(
        &mut self,
        last_stable_offset: i64,
        producers: std::collections::HashMap<i64, storage::cleaner::LastRecord>,
    ) -> LogResult<Option<storage::cleaner::LogView>> {
        let Some(log) = self.log.as_mut() else {
            return Ok(None);
        };
        let view = log
            .cleaner_view(last_stable_offset, producers)
            .map_err(|e| e.to_string())?;
        // Handed over with this view: the cleaner manager pulls the checkpoint back.
        log.take_truncation();
        Ok(Some(view))
    }
    fn replace_with_cleaned(
        &mut self,
        cleaned: &[storage::cleaner::CleanedSegment],
        generation: u64,
    ) -> LogResult<usize> {
        let Some(log) = self.log.as_mut() else {
            for c in cleaned {
                storage::cleaner::discard_cleaned(c);
            }
            return Ok(0);
        };
        log.replace_with_cleaned(cleaned, generation, now_ms())
            .map_err(|e| e.to_string())
    }
    fn update_config(&mut self, effective: &BTreeMap<String, String>) {
        let config = log_config(effective);
        self.file_delete_delay_ms = config.file_delete_delay_ms;
        if let Some(log) = self.log.as_mut() {
            log.update_config(config);
        }
    }
}

/// The log-dir factory under its older name: one implementation walks `log.dirs`
/// ([`super::log_dirs::LogDirsFactory`], which also keeps `__cluster_metadata-0` out and
/// handles stray logs).
pub type DiskLogFactory = super::log_dirs::LogDirsFactory;
