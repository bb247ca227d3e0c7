//! The log cleaner's pure core (Kafka's `LogCleaner` / `Cleaner` / `LogCleanerManager`), for
//! `cleanup.policy=compact` logs. No actors and no clock: callers pass `now_ms`.
//!
//! A round: the log's owner hands out a [`LogView`] (`Log::cleaner_view`: the inactive
//! segments' file handles and facts, the aborted transactions, the producers' last records);
//! [`select::log_to_clean`] measures its dirty ratio against the `cleaner-offset-checkpoint`
//! offset, [`select::filthiest`] picks the log to clean; [`clean::clean_log`] builds the offset
//! map over the dirty range (bounded by the cleaner's share of `log.cleaner.dedupe.buffer.size`)
//! and rewrites every segment before the map's end into `<base>.log.cleaned` files, grouping
//! small segments; the owner then swaps them in with `Log::replace_with_cleaned`, which renames
//! them `.swap`, retires the old segments (`.deleted`) and drops the suffix, in Kafka's order so
//! that recovery finishes or discards each intermediate state. The checkpoint moves to the
//! returned end offset ([`write_cleaner_checkpoint`]).
//!
//! What is kept (Kafka's rules): the latest record of every key; records past the map's end;
//! tombstones until their batch's delete horizon (`delete.retention.ms` after the cleaning that
//! first saw them, stamped in the batch's base timestamp with the delete-horizon attribute);
//! no record of an aborted transaction; commit and abort markers until their transaction has no
//! batch left, then until their own horizon; the batch holding a live producer's last sequence
//! (and the last batch of the round) even when emptied, as an empty batch with the same offsets
//! and producer fields. Offsets are never renumbered.

pub mod clean;
pub mod offset_map;
pub mod select;
#[cfg(test)]
mod tests;
pub mod txn;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

pub use clean::{clean_log, discard_cleaned};
pub use offset_map::OffsetMap;
pub use select::{filthiest, log_to_clean, LogToClean};

use super::checkpoint::{read_offset_checkpoint, write_offset_checkpoint, TopicPartition};
use super::config::LogConfig;
use super::error::Result;
use super::AbortedTxn;

/// Kafka's per-log-dir file of first dirty offsets.
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// Reads `<dir>/cleaner-offset-checkpoint` (empty when absent).
pub fn read_cleaner_checkpoint(dir: &Path) -> Result<BTreeMap<TopicPartition, i64>> {
    read_offset_checkpoint(&dir.join(CLEANER_OFFSET_CHECKPOINT))
}

/// Writes `<dir>/cleaner-offset-checkpoint` atomically (version 0, count, `topic partition
/// offset` lines, as Kafka's `OffsetCheckpointFile`).
pub fn write_cleaner_checkpoint(dir: &Path, offsets: &BTreeMap<TopicPartition, i64>) -> Result<()> {
    write_offset_checkpoint(&dir.join(CLEANER_OFFSET_CHECKPOINT), offsets)?;
    Ok(())
}

/// A live producer's last record, from the partition's producer state (Kafka's `LastRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRecord {
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// One inactive segment as the cleaner sees it.
#[derive(Debug, Clone)]
pub struct SegmentView {
    pub base_offset: i64,
    pub size: u64,
    pub file: Arc<File>,
    pub offset_index_bytes: u64,
    pub time_index_bytes: u64,
    /// Largest record timestamp (only filled when `min.compaction.lag.ms` needs it; else -1).
    pub largest_timestamp: i64,
    /// The first batch's max timestamp (when `max.compaction.lag.ms` is set).
    pub first_batch_timestamp: Option<i64>,
    pub last_modified: Option<SystemTime>,
}

/// What a cleaning reads of one log, taken by its owner at one instant.
#[derive(Debug, Clone)]
pub struct LogView {
    pub dir: PathBuf,
    pub topic_partition: TopicPartition,
    pub config: LogConfig,
    /// The inactive segments, oldest first.
    pub segments: Vec<SegmentView>,
    pub active_base_offset: i64,
    pub active_size: u64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Never cleaned past (Kafka: the LSO, itself at most the high watermark).
    pub last_stable_offset: i64,
    /// Every aborted transaction of the log's `.txnindex` files.
    pub aborted: Vec<AbortedTxn>,
    /// Changes when the log is truncated: a cleaning of an older generation is not swapped in.
    pub generation: u64,
    pub active_producers: HashMap<i64, LastRecord>,
    /// The log was truncated to this offset since the last view: a checkpoint above it is
    /// pulled back to it ([`checkpoint_after_truncation`]).
    pub truncated_to: Option<i64>,
}

/// Kafka's `maybeTruncateCheckpoint`: data above a truncation point is new, hence dirty.
pub fn checkpoint_after_truncation(
    checkpoint: Option<i64>,
    truncated_to: Option<i64>,
) -> Option<i64> {
    match (checkpoint, truncated_to) {
        (Some(c), Some(t)) if c > t => Some(t),
        _ => checkpoint,
    }
}

impl LogView {
    pub fn size(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum::<u64>() + self.active_size
    }
}

/// A cleaned segment waiting to replace the segments it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanedSegment {
    pub base_offset: i64,
    /// `(base offset, size)` of each segment it replaces, checked again at the swap.
    pub replaces: Vec<(i64, u64)>,
    pub log_path: PathBuf,
    pub txn_index_path: Option<PathBuf>,
    pub size: u64,
}

/// Figures of one cleaning (Kafka's `CleanerStats`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanerStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub map_bytes_read: u64,
    pub map_messages_read: u64,
    pub messages_read: u64,
    pub invalid_messages_read: u64,
    pub messages_written: u64,
    pub buffer_utilization: f64,
}

/// The result of [`clean_log`].
#[derive(Debug, Clone)]
pub struct CleanOutcome {
    /// The first offset not cleaned: the log's next checkpoint once swapped in.
    pub end_offset: i64,
    pub cleaned: Vec<CleanedSegment>,
    pub generation: u64,
    pub stats: CleanerStats,
}

/// Broker-level cleaner settings (Kafka's `CleanerConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    pub enable: bool,
    pub threads: usize,
    pub dedupe_buffer_size: u64,
    pub io_buffer_load_factor: f64,
    pub backoff_ms: i64,
    /// `log.cleaner.io.max.bytes.per.second`, shared by the cleaners (each gets its share).
    pub max_io_bytes_per_second: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 * 1024 * 1024,
            io_buffer_load_factor: 0.9,
            backoff_ms: 15_000,
            max_io_bytes_per_second: f64::MAX,
        }
    }
}

impl CleanerConfig {
    /// Reads Kafka's broker keys, keeping defaults for absent or unparseable ones.
    pub fn from_broker_config(c: &BTreeMap<String, String>) -> Self {
        let d = Self::default();
        fn get<T: std::str::FromStr>(c: &BTreeMap<String, String>, k: &str, d: T) -> T {
            c.get(k).and_then(|v| v.trim().parse().ok()).unwrap_or(d)
        }
        CleanerConfig {
            enable: get(c, "log.cleaner.enable", d.enable),
            threads: get(c, "log.cleaner.threads", d.threads),
            dedupe_buffer_size: get(c, "log.cleaner.dedupe.buffer.size", d.dedupe_buffer_size),
            io_buffer_load_factor: get(
                c,
                "log.cleaner.io.buffer.load.factor",
                d.io_buffer_load_factor,
            ),
            backoff_ms: get(c, "log.cleaner.backoff.ms", d.backoff_ms),
            max_io_bytes_per_second: get(
                c,
                "log.cleaner.io.max.bytes.per.second",
                d.max_io_bytes_per_second,
            ),
        }
    }

    /// One cleaner's map memory: its share of the dedupe buffer, at most 2 GiB (Kafka's cap).
    pub fn map_memory_per_thread(&self) -> usize {
        let per = self.dedupe_buffer_size / self.threads.max(1) as u64;
        per.min(i32::MAX as u64) as usize
    }

    /// Keys a map of `slots` may take before a round stops its dirty range there.
    /// At least one, and below the slot count: a round always makes progress (Kafka refuses
    /// to start a cleaner whose map cannot hold one key) and probing always finds a free slot.
    pub fn max_desired_entries(&self, slots: usize) -> usize {
        ((slots as f64 * self.io_buffer_load_factor) as usize)
            .min(slots.saturating_sub(1))
            .max(1)
    }
}

/// The cleaner's I/O throttle (Kafka's `Throttler` as the cleaner uses it): bytes are counted
/// over periods of at least `CHECK_INTERVAL_MS`; a period that went faster than the rate asks
/// for a sleep long enough to bring it down to the rate. Pure: the caller passes the time and
/// does the sleeping.
#[derive(Debug, Clone)]
pub struct Throttler {
    bytes_per_second: f64,
    period_start_ms: i64,
    observed: u64,
}

impl Throttler {
    /// Kafka's cleaner checks every 300 ms.
    pub const CHECK_INTERVAL_MS: i64 = 300;

    pub fn new(bytes_per_second: f64, now_ms: i64) -> Self {
        Throttler {
            bytes_per_second,
            period_start_ms: now_ms,
            observed: 0,
        }
    }

    /// Counts `bytes` at `now_ms`; returns how long to sleep (0: go on).
    pub fn observe(&mut self, bytes: u64, now_ms: i64) -> u64 {
        self.observed += bytes;
        let elapsed = now_ms - self.period_start_ms;
        if elapsed <= Self::CHECK_INTERVAL_MS || self.observed == 0 {
            return 0;
        }
        let rate = self.observed as f64 * 1000.0 / elapsed as f64;
        let sleep = if rate > self.bytes_per_second {
            (self.observed as f64 * 1000.0 / self.bytes_per_second - elapsed as f64).max(0.0) as u64
        } else {
            0
        };
        self.period_start_ms = now_ms + sleep as i64;
        self.observed = 0;
        sleep
    }
}
