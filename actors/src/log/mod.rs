//! The storage engine (Kafka's `UnifiedLog`, `LocalLog`, `LogSegment`, `OffsetIndex`,
//! `TimeIndex`, `TransactionIndex`, `LeaderEpochFileCache`, `LogManager`), in Kafka's on-disk
//! format so `kafka-dump-log --files` reads our segments. Plain Rust, no actix: the
//! PartitionActor owns one [`Log`]; the LogManagerActor owns a [`LogDir`] per `log.dirs` entry.
//!
//! # Using it (for the partition and log-manager actors)
//!
//! **Open.** `LogDir::load(path, |tp| config_for(tp), now_ms)` returns the dir, every
//! `<topic>-<partition>` [`Log`] in it (recovered as needed) and the `-delete` dirs left to
//! remove. It reads `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` and the
//! `.kafka_cleanshutdown` marker (present = skip recovery), and consumes the marker. A new
//! partition: `log_dir.create_log(&tp, config, now_ms)`. A single log can be opened directly with
//! `Log::open(dir, config, log_start_offset, recovery_point, had_clean_shutdown, now_ms)`;
//! `log.recovery_report()` says what recovery did. `log.assign_topic_id(id)` writes
//! `partition.metadata`.
//!
//! **Append.** `log.append(&records, now_ms) -> AppendInfo`: `records` are whole v2 batches whose
//! base offsets (and partition leader epochs) the caller already set with
//! `kactor_protocol::records::{set_base_offset, set_partition_leader_epoch}`, starting at or after
//! `log.log_end_offset()`. CRCs are the caller's job; sizes (`max.message.bytes`,
//! `segment.bytes`) and offset order are checked here (`LogError::RecordTooLarge`,
//! `RecordBatchTooLarge`, `InvalidOffset`). The log rolls by itself on Kafka's conditions;
//! `AppendInfo::rolled_at` asks the caller to schedule `flush(rolled_at)`, and
//! `AppendInfo::flush_needed` reports `flush.messages` reached. Every batch's leader epoch goes
//! into the leader epoch cache (`leader-epoch-checkpoint`). `log.roll(now_ms)` forces a roll.
//! `log.append_vectored(&header, body, now_ms)` appends one batch given as its rewritten 61-byte
//! header (`[u8; BATCH_HEADER_LEN]`) and the rest of the request's bytes, in one `pwritev`, so
//! the leader need not copy a batch to patch its base offset / epoch. Either way, one write
//! syscall per append and no allocation.
//!
//! **Read.** `log.read(start_offset, max_bytes, max_offset, min_one_message) -> FetchDataInfo`
//! returns `records: Option<FileSlice>` (file, position, len) of whole batches, starting with
//! the batch containing `start_offset` (it may begin before it; clients skip). `max_offset` is the
//! exclusive upper bound the caller chooses: the high watermark for consumers, the LSO for
//! read_committed, `None` for followers (log end). High watermark bookkeeping is the caller's.
//! Out of `[log_start_offset, log_end_offset]`: `LogError::OffsetOutOfRange`.
//! `log.collect_aborted_transactions(start, upper)` for read_committed; `log.append_aborted_txn`.
//!
//! **Indexes.** Only the active segment's indexes are mapped at open; an inactive segment's are
//! mapped by the first lookup that needs them (Kafka's `LazyIndex`), sanity-checked then, and
//! rebuilt from the batch headers if they fail. `LogSegment::offset_index()` /
//! `time_index()` / `max_timestamp_so_far()` return `io::Result` for that reason. A lookup is a
//! binary search of the index plus at most one `index.interval.bytes` of `.log` headers read;
//! [`LookupStats`] counts both per thread.
//!
//! **Lookups.** `log.fetch_offset_by_timestamp(ts)` for ListOffsets (`EARLIEST_TIMESTAMP`,
//! `LATEST_TIMESTAMP`, `MAX_TIMESTAMP`, `EARLIEST_LOCAL_TIMESTAMP` or a timestamp);
//! `log.end_offset_for_epoch(epoch)` for OffsetForLeaderEpoch; `log_start_offset()`,
//! `log_end_offset()`, `log_end_offset_metadata()`, `offset_metadata(offset)`.
//!
//! **Truncate.** `log.truncate_to(offset, now_ms)` (followers after OffsetForLeaderEpoch),
//! `log.truncate_fully_and_start_at(offset, now_ms)`, `log.maybe_increment_log_start_offset(o)`
//! (DeleteRecords; check `o <= high watermark` first).
//!
//! **Retention.** Periodically `log.delete_old_segments(now_ms, high_watermark)` (retention.ms,
//! retention.bytes, log start offset; renames to `.deleted`), then
//! `log.purge_deleted_segments(now_ms)` removes files after `file.delete.delay.ms`. Topic
//! deletion: `log.rename_for_deletion()` -> `<topic>-<p>.<uuid>-delete`, later
//! `remove_log_dir(path)`.
//!
//! **Flush.** Kafka's default leaves flushing to the OS. `log.flush_due(now_ms)` tells whether
//! `flush.messages`/`flush.ms` ask for one. `log.prepare_flush(up_to) -> Option<FlushTask>`;
//! run `task.run()` on the blocking pool (it owns its file handles); then
//! `log.complete_flush(&task, now_ms)` advances the recovery point, which never passes data that
//! was not fsynced. `log.flush(up_to, now_ms)` does all three inline.
//!
//! **Checkpoints and shutdown.** `log_dir.checkpoint(logs)` writes recovery points and start
//! offsets (Kafka does it every `log.flush.offset.checkpoint.interval.ms`);
//! `log_dir.write_replication_offsets(&hws)` the high watermarks;
//! `log_dir.shutdown(logs, broker_epoch, now_ms)` flushes, checkpoints, closes (indexes trimmed)
//! and writes `.kafka_cleanshutdown`. `MetaProperties::{read, write}` for `meta.properties`.
//!
//! **Compaction.** [`cleaner`] is the log cleaner's pure core: `log.cleaner_view(lso,
//! producers)` for it to read, `log.replace_with_cleaned(&cleaned, generation, now_ms)` to swap
//! its output in. Recovery honours its `.cleaned`/`.swap` protocol (a `.log.swap`, with its
//! `.txnindex.swap`, replaces the segments it covers; `.cleaned` is discarded). Producer-state
//! `.snapshot` files (`SNAPSHOT_SUFFIX`) are left alone here, except those of retired segments.

mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod epoch;
pub mod error;
pub mod index;
pub mod manager;
pub mod segment;
pub mod stats;
pub mod testing;
#[cfg(test)]
mod tests;
pub mod txn_index;
pub mod unified;

use std::io;
use std::os::unix::fs::FileExt;

pub use batch::{BatchInfo, InvalidTail, SCAN_CHUNK};
pub use checkpoint::{MetaProperties, TopicPartition};
pub use config::{CleanupPolicy, LogConfig, MessageTimestampType, LOG_CONFIG_NAMES};
pub use epoch::{EpochEntry, LeaderEpochFileCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub use error::LogError;
pub use kactor_protocol::codec::FileSlice;
pub use kactor_protocol::Uuid;
/// Former name of the topic id type, kept for existing callers: it is `kactor_protocol::Uuid`.
pub use kactor_protocol::Uuid as Uuid16;
pub use manager::LogDir;
pub use segment::{LogSegment, TimestampAndOffset};
pub use stats::LookupStats;
pub use txn_index::AbortedTxn;
pub use unified::{
    delete_dir_name, remove_log_dir, AppendInfo, FetchDataInfo, FlushTask, Log, LogOffsetMetadata,
    PendingDeletion, RecoveryReport, EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP, MAX_TIMESTAMP,
};

/// Copies a slice's bytes into memory (tests, TLS listeners, followers in-process).
pub fn read_slice(slice: &FileSlice) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; slice.len as usize];
    slice.file.read_exact_at(&mut buf, slice.position)?;
    Ok(buf)
}
