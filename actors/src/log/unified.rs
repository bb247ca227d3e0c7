//! One partition's log (Kafka's `UnifiedLog` + `LocalLog` + `LogLoader`): the ordered segments
//! of `<log.dir>/<topic>-<partition>/`, the log start / end offsets, the recovery point, the
//! leader epoch cache, crash recovery on open, retention and truncation.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kactor_protocol::records::{BatchHeader, RecordError, BATCH_HEADER_LEN};
use tracing::{info, warn};

use super::batch::BatchInfo;
use super::checkpoint::{
    fsync_dir, read_partition_metadata, uuid_hex, write_partition_metadata, TopicPartition,
};
use super::config::LogConfig;
use super::epoch::LeaderEpochFileCache;
use super::error::{LogError, Result};
use super::segment::{
    segment_file, LogSegment, RollParams, TimestampAndOffset, CLEANED_SUFFIX, DELETED_SUFFIX,
    INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use super::txn_index::AbortedTxn;
use super::FileSlice;
use kactor_protocol::Uuid;

/// ListOffsets special timestamps (Kafka's `ListOffsetsRequest`).
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;

/// Suffix of a partition directory renamed for asynchronous deletion.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
pub const FUTURE_DIR_SUFFIX: &str = "-future";
pub const STRAY_DIR_SUFFIX: &str = "-stray";

/// An offset with where it lives (Kafka's `LogOffsetMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsetMetadata {
    pub message_offset: i64,
    pub segment_base_offset: i64,
    pub relative_position: u64,
}

/// Result of [`Log::append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub batch_count: usize,
    pub valid_bytes: usize,
    pub log_end_offset: i64,
    /// The append rolled a new segment: schedule `flush(new segment base)` on the blocking pool,
    /// as Kafka flushes a rolled segment right away.
    pub rolled_at: Option<i64>,
    /// `flush.messages` reached: run a flush now.
    pub flush_needed: bool,
}

/// Result of [`Log::read`]: the slice to send and where the read started.
#[derive(Debug, Clone)]
pub struct FetchDataInfo {
    pub fetch_offset_metadata: LogOffsetMetadata,
    /// Whole batches; `None` (or an empty slice) when nothing is readable below the bound.
    pub records: Option<FileSlice>,
    /// First offset of the first batch in `records` (may be below the fetch offset).
    pub first_batch_base_offset: Option<i64>,
}

impl FetchDataInfo {
    pub fn size(&self) -> u32 {
        self.records.as_ref().map_or(0, |s| s.len)
    }
}

/// Files renamed with `.deleted`, to be removed once `file.delete.delay.ms` has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDeletion {
    pub due_ms: i64,
    pub paths: Vec<PathBuf>,
}

/// fsync work prepared by [`Log::prepare_flush`] for a blocking thread: holds its own file
/// handles, so the log stays usable (and appendable) while it runs.
#[derive(Debug)]
pub struct FlushTask {
    pub up_to: i64,
    files: Vec<Arc<fs::File>>,
    /// The log directory, when a segment created since the recovery point is flushed (its
    /// directory entry must be durable too); `None` otherwise, as Kafka's `LocalLog.flush`.
    dir: Option<PathBuf>,
}

impl FlushTask {
    /// fsyncs the data and index files of the segments covering `[recovery point, up_to)`, then
    /// the directory if any of them is new. Call [`Log::complete_flush`] with the task afterwards.
    pub fn run(&self) -> io::Result<()> {
        for f in &self.files {
            f.sync_data()?;
        }
        match &self.dir {
            Some(dir) => fsync_dir(dir),
            None => Ok(()),
        }
    }

    /// Whether the task fsyncs the log directory (a new segment is among its files).
    pub fn syncs_dir(&self) -> bool {
        self.dir.is_some()
    }
}

/// What [`Log::open`] found and did, for logging and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments_recovered: usize,
    pub bytes_truncated: u64,
    pub segments_dropped_after_corruption: usize,
    pub indexes_rebuilt: usize,
    pub stray_files_removed: usize,
    pub swaps_completed: usize,
}

#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    topic_partition: TopicPartition,
    config: LogConfig,
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
    recovery_point: i64,
    last_flush_ms: i64,
    epoch_cache: LeaderEpochFileCache,
    topic_id: Option<Uuid>,
    pending_deletions: Vec<PendingDeletion>,
    recovery_report: RecoveryReport,
    /// The batches of the append in progress, kept between appends so the append path does not
    /// allocate.
    scratch: Vec<BatchInfo>,
    /// Bumped by every truncation: a cleaning made from an older view is not swapped in.
    generation: u64,
    /// The lowest offset truncated to since the cleaner last took it: its checkpoint must not
    /// stay above it (Kafka's `maybeTruncateCheckpoint`).
    truncated_to: Option<i64>,
}

fn parse_base_offset(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

impl Log {
    /// Opens (creating if needed) the log in `dir` (named `<topic>-<partition>`).
    ///
    /// `recovery_point` and `log_start_offset` come from the log dir's checkpoints (0 if absent).
    /// Without a clean shutdown every segment from the one holding the recovery point on is
    /// re-validated batch by batch; a torn or corrupt tail is cut, and segments after it dropped.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        log_start_offset: i64,
        recovery_point: i64,
        had_clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Log> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let topic_partition = TopicPartition::from_dir_name(name)
            .ok_or_else(|| LogError::NotAPartitionDir(dir.to_path_buf()))?;
        fs::create_dir_all(dir)?;
        let mut report = RecoveryReport::default();
        Self::remove_temp_files_and_complete_swaps(dir, &config, now_ms, &mut report)?;

        // Every remaining .log is a segment.
        let mut segments = BTreeMap::new();
        let mut names: Vec<String> = fs::read_dir(dir)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        for name in &names {
            if let Some(base) = parse_base_offset(name, LOG_SUFFIX) {
                // Indexes are mapped on first use (Kafka's LazyIndex); the active segment's, and
                // those recovery checks, are mapped below.
                segments.insert(base, LogSegment::open_lazy(dir, base, &config, now_ms)?);
            }
        }
        // Index files without a log are leftovers of a deletion that did not finish.
        for name in &names {
            for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
                if let Some(base) = parse_base_offset(name, suffix) {
                    if !segments.contains_key(&base) {
                        fs::remove_file(dir.join(name))?;
                        report.stray_files_removed += 1;
                    }
                }
            }
        }

        let mut log = Log {
            dir: dir.to_path_buf(),
            topic_partition,
            config,
            segments,
            log_start_offset,
            log_end_offset: 0,
            recovery_point,
            last_flush_ms: now_ms,
            epoch_cache: LeaderEpochFileCache::open(dir)?,
            topic_id: read_partition_metadata(dir)?,
            pending_deletions: Vec::new(),
            recovery_report: RecoveryReport::default(),
            scratch: Vec::new(),
            generation: 0,
            truncated_to: None,
        };
        log.load(had_clean_shutdown, now_ms, &mut report)?;
        if report != RecoveryReport::default() {
            info!(partition = %log.topic_partition, ?report, "log loaded with repairs");
        }
        log.recovery_report = report;
        Ok(log)
    }

    /// Kafka's `removeTempFilesAndCollectSwapFiles` + swap completion: stray `.deleted` and
    /// `.cleaned` files go; a `.log.swap` (a cleaner or split result that was about to replace
    /// segments) replaces the segments it covers, as the interrupted swap would have.
    fn remove_temp_files_and_complete_swaps(
        dir: &Path,
        config: &LogConfig,
        now_ms: i64,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let mut swaps = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.ends_with(DELETED_SUFFIX)
                || name.ends_with(CLEANED_SUFFIX)
                || name.ends_with(".tmp")
            {
                fs::remove_file(entry.path())?;
                report.stray_files_removed += 1;
            } else if let Some(stem) = name.strip_suffix(SWAP_SUFFIX) {
                if let Some(base) = parse_base_offset(stem, LOG_SUFFIX) {
                    swaps.push(base);
                } else if parse_base_offset(stem, TXN_INDEX_SUFFIX).is_some() {
                    // Goes in with its `.log.swap` below (the aborted transactions the cleaned
                    // segment keeps cannot be rebuilt from its data alone).
                } else {
                    // Index swaps are rebuilt from the swapped-in log instead.
                    fs::remove_file(entry.path())?;
                    report.stray_files_removed += 1;
                }
            }
        }
        swaps.sort();
        for base in swaps {
            let swap_path = PathBuf::from(format!(
                "{}{SWAP_SUFFIX}",
                segment_file(dir, base, LOG_SUFFIX).display()
            ));
            // Find the swap segment's offset range by reading it where it lies.
            let file = fs::File::open(&swap_path)?;
            let size = file.metadata()?.len();
            let (_, _) = (size, &file);
            let mut last_next = base;
            let (valid, _) = super::batch::validate_batches(&file, size, base, |b| {
                last_next = b.header.next_offset()
            })?;
            drop(file);
            if valid == 0 && size > 0 {
                // Unreadable swap: the originals are intact, keep them.
                fs::remove_file(&swap_path)?;
                report.stray_files_removed += 1;
                continue;
            }
            for entry in fs::read_dir(dir)? {
                let entry = entry?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                for suffix in [
                    LOG_SUFFIX,
                    INDEX_SUFFIX,
                    TIME_INDEX_SUFFIX,
                    TXN_INDEX_SUFFIX,
                ] {
                    if let Some(b) = parse_base_offset(&name, suffix) {
                        if b >= base && b < last_next.max(base + 1) {
                            fs::remove_file(entry.path())?;
                        }
                    }
                }
            }
            fs::rename(&swap_path, segment_file(dir, base, LOG_SUFFIX))?;
            let txn_swap = PathBuf::from(format!(
                "{}{SWAP_SUFFIX}",
                segment_file(dir, base, TXN_INDEX_SUFFIX).display()
            ));
            if txn_swap.exists() {
                fs::rename(&txn_swap, segment_file(dir, base, TXN_INDEX_SUFFIX))?;
            }
            report.swaps_completed += 1;
            let _ = (config, now_ms);
        }
        // A `.txnindex.swap` whose `.log.swap` was refused or never written is stale.
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(SWAP_SUFFIX) {
                fs::remove_file(entry.path())?;
                report.stray_files_removed += 1;
            }
        }
        Ok(())
    }

    fn load(
        &mut self,
        had_clean_shutdown: bool,
        now_ms: i64,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        // Segments wholly below the recovery point were fsynced: trust the data, check indexes.
        let mut recover_from = if had_clean_shutdown {
            i64::MAX
        } else {
            self.segments
                .range(..=self.recovery_point)
                .next_back()
                .map_or(i64::MIN, |(b, _)| *b)
        };
        // After a clean shutdown the indexes were trimmed and flushed by close: each is checked
        // when first mapped (and rebuilt then if it fails). After an unclean one, those below
        // the recovery point are checked now, and unmapped again once they pass.
        for (i, base) in bases.iter().enumerate() {
            if had_clean_shutdown || *base >= recover_from {
                break;
            }
            let next = bases.get(i + 1).copied();
            let seg = self.segments.get_mut(base).expect("listed");
            if !seg.indexes_look_valid(next)? {
                // Never trust an inconsistent index: re-validate from this segment on, which
                // rebuilds its indexes and cuts whatever does not check out.
                warn!(partition = %self.topic_partition, base, "inconsistent or missing index, recovering from here");
                recover_from = *base;
                break;
            }
            if next.is_some() {
                seg.on_become_inactive()?;
                seg.unload_indexes();
            }
        }
        // Unflushed segments: full validation; the first invalid byte ends the log.
        let to_recover: Vec<i64> = bases
            .iter()
            .copied()
            .filter(|b| *b >= recover_from)
            .collect();
        let mut cut = false;
        for base in to_recover {
            if cut {
                let seg = self.segments.remove(&base).expect("listed");
                for p in seg.paths() {
                    fs::remove_file(p)?;
                }
                report.segments_dropped_after_corruption += 1;
                continue;
            }
            let seg = self.segments.get_mut(&base).expect("listed");
            let (truncated, why) = seg.recover()?;
            report.segments_recovered += 1;
            report.indexes_rebuilt += 1;
            if truncated > 0 {
                warn!(partition = %self.topic_partition, base, truncated, ?why, "truncated invalid tail during recovery");
                report.bytes_truncated += truncated;
                cut = true;
            }
        }
        if recover_from != i64::MAX {
            self.recovery_point = self.recovery_point.min(recover_from.max(0));
        }

        if self.segments.is_empty() {
            let base = self.log_start_offset.max(0);
            self.segments.insert(
                base,
                LogSegment::open(&self.dir, base, &self.config, now_ms)?,
            );
        }
        // Inactive segments are trimmed; the active one gets its preallocated indexes back.
        let last_base = *self.segments.keys().next_back().expect("non-empty");
        for (base, seg) in self.segments.iter_mut() {
            if *base == last_base {
                seg.resize_indexes(self.config.segment_index_bytes)?;
                seg.load_max_timestamp()?;
            } else {
                seg.on_become_inactive()?;
            }
        }
        self.log_end_offset = self.active_segment().read_next_offset()?;
        let first_base = *self.segments.keys().next().expect("non-empty");
        self.log_start_offset = self.log_start_offset.max(first_base);
        if self.log_start_offset > self.log_end_offset {
            // The checkpointed start is past every byte we have (data lost with the crash or
            // DeleteRecords beyond it): start the log there, empty.
            let lso = self.log_start_offset;
            self.truncate_fully_and_start_at(lso, now_ms)?;
        }
        self.recovery_point = if had_clean_shutdown {
            self.log_end_offset
        } else {
            self.recovery_point.min(self.log_end_offset)
        };
        self.epoch_cache.truncate_from_end(self.log_end_offset)?;
        self.epoch_cache
            .truncate_from_start(self.log_start_offset)?;
        Ok(())
    }

    // ---- accessors ----

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// New config (AlterConfigs); takes effect for the next roll / append / retention run.
    pub fn update_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// The offset the next appended batch must start at or after.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    pub fn log_end_offset_metadata(&self) -> LogOffsetMetadata {
        let active = self.active_segment();
        LogOffsetMetadata {
            message_offset: self.log_end_offset,
            segment_base_offset: active.base_offset(),
            relative_position: active.size(),
        }
    }
    /// Everything below this offset is fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery_report
    }
    pub fn segments(&self) -> impl Iterator<Item = &LogSegment> {
        self.segments.values()
    }
    pub fn number_of_segments(&self) -> usize {
        self.segments.len()
    }
    pub fn active_segment(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has a segment")
    }
    fn active_segment_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has a segment")
    }
    /// Total bytes of all segments (Kafka's `size`).
    pub fn size(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }
    pub fn leader_epoch_cache(&self) -> &LeaderEpochFileCache {
        &self.epoch_cache
    }
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epoch_cache.latest_epoch()
    }
    pub fn topic_id(&self) -> Option<Uuid> {
        self.topic_id
    }
    /// Writes `partition.metadata` (once per topic id, as Kafka does on becoming leader/follower).
    pub fn assign_topic_id(&mut self, topic_id: Uuid) -> Result<()> {
        if self.topic_id != Some(topic_id) {
            write_partition_metadata(&self.dir, topic_id)?;
            self.topic_id = Some(topic_id);
        }
        Ok(())
    }
    /// Messages appended since the recovery point (Kafka's `unflushedMessages`).
    pub fn unflushed_messages(&self) -> i64 {
        self.log_end_offset - self.recovery_point
    }

    // ---- append ----

    /// Appends `records`: one or more whole v2 batches back to back, offsets already assigned
    /// (the leader rewrote base offsets / epochs; a follower appends the leader's bytes). The
    /// first batch must start at or after the log end offset and offsets must increase.
    ///
    /// The caller has checked CRCs (the leader while validating a produce, the follower in its
    /// fetcher); the log checks structure, sizes and offsets. Rolls first if the active segment
    /// meets any of Kafka's roll conditions. Every batch's partition leader epoch is recorded in
    /// the leader epoch cache.
    pub fn append(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo> {
        self.append_checked(records, &[records], true, now_ms)
    }

    /// [`Log::append`] for a follower: batches over `max.message.bytes` are taken, as Kafka's
    /// replication appends ignore the record size (the leader accepted them, perhaps under an
    /// older limit); every other check applies.
    pub fn append_as_follower(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo> {
        self.append_checked(records, &[records], false, now_ms)
    }

    /// [`Log::append`] of one batch given as its 61-byte header and the rest, written with one
    /// `pwritev(2)`: the file holds exactly the bytes of `header` followed by `body`. For the
    /// leader's produce path: it rewrites the base offset and partition leader epoch in a copy
    /// of the header (both lie before the CRC'd range, so the CRC stays valid) and passes the
    /// request's bytes after the header as `body`, instead of copying the whole batch to patch
    /// 12 bytes of it.
    ///
    /// `header` must parse as a v2 batch header whose length field makes the batch exactly
    /// `BATCH_HEADER_LEN + body.len()` bytes; every check of [`Log::append`] applies.
    pub fn append_vectored(
        &mut self,
        header: &[u8; BATCH_HEADER_LEN],
        body: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let h = BatchHeader::parse(header)?;
        if h.total_size() != BATCH_HEADER_LEN + body.len() {
            return Err(LogError::CorruptRecord(RecordError::InvalidRecord(
                format!(
                    "batch header says {} bytes, header and body hold {}",
                    h.total_size(),
                    BATCH_HEADER_LEN + body.len()
                ),
            )));
        }
        self.append_checked(header, &[header, body], true, now_ms)
    }

    /// [`Log::append_parts`] with the reused batch list (no allocation per append).
    fn append_checked(
        &mut self,
        first: &[u8],
        parts: &[&[u8]],
        check_record_size: bool,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let mut batches = std::mem::take(&mut self.scratch);
        batches.clear();
        let result = self.append_parts(&mut batches, first, parts, check_record_size, now_ms);
        self.scratch = batches;
        result
    }

    /// Checks and appends the batches of `parts` joined. `first` holds at least the first
    /// batch's header; with more than one part, `parts` is exactly one batch (its header in
    /// `first == parts[0]`), otherwise `first` is the whole of `parts[0]`.
    fn append_parts(
        &mut self,
        batches: &mut Vec<BatchInfo>,
        first: &[u8],
        parts: &[&[u8]],
        check_record_size: bool,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let total_len: usize = parts.iter().map(|p| p.len()).sum();
        let mut pos = 0usize;
        let mut expected = self.log_end_offset;
        let mut max_timestamp = -1i64;
        let mut offset_of_max = -1i64;
        let max_message_bytes = self.config.max_message_bytes.max(0) as usize;
        let segment_bytes = self.config.segment_bytes.max(0) as usize;
        while pos < total_len {
            // Multi-part appends are one batch: its header is `first`. A single part holds the
            // batches back to back.
            let header = BatchHeader::parse(if pos == 0 { first } else { &first[pos..] })?;
            let size = header.total_size();
            if pos + size > total_len {
                return Err(LogError::CorruptRecord(RecordError::Truncated {
                    needed: size,
                    available: total_len - pos,
                }));
            }
            if check_record_size && size > max_message_bytes {
                return Err(LogError::RecordTooLarge {
                    size,
                    max: self.config.max_message_bytes,
                });
            }
            if size > segment_bytes {
                return Err(LogError::RecordBatchTooLarge {
                    size,
                    segment_bytes: self.config.segment_bytes,
                });
            }
            if header.last_offset_delta < 0 || header.base_offset < expected {
                return Err(LogError::InvalidOffset(format!(
                    "batch [{}, {}] appended at log end offset / next offset {expected}",
                    header.base_offset,
                    header.last_offset()
                )));
            }
            if header.max_timestamp > max_timestamp {
                max_timestamp = header.max_timestamp;
                offset_of_max = header.last_offset();
            }
            expected = header.next_offset();
            batches.push(BatchInfo {
                position: pos as u64,
                size: size as u32,
                header,
            });
            pos += size;
        }
        let (Some(first_batch), Some(last_batch)) = (batches.first(), batches.last()) else {
            return Err(LogError::InvalidOffset("no batches to append".into()));
        };
        let first_offset = first_batch.header.base_offset;
        let last_offset = last_batch.header.last_offset();

        let params = RollParams {
            max_segment_ms: self.config.segment_ms,
            max_segment_bytes: self.config.segment_bytes,
            max_timestamp_in_messages: max_timestamp,
            max_offset_in_messages: last_offset,
            messages_size: total_len as u64,
            now_ms,
        };
        let mut rolled_at = None;
        if self.active_segment_mut().should_roll(&params)? {
            // Kafka rolls at the batch's first offset, unless that is below the log end offset.
            rolled_at = Some(self.roll_at(first_offset, now_ms)?);
        }
        let active = self.active_segment_mut();
        if !active.can_convert_to_relative_offset(last_offset) {
            return Err(LogError::InvalidOffset(format!(
                "append of [{first_offset}, {last_offset}] spans more than 2^31 offsets"
            )));
        }
        active.append_parts(last_offset, batches, parts)?;
        self.log_end_offset = last_offset + 1;
        for b in batches.iter() {
            if b.header.partition_leader_epoch >= 0 {
                self.epoch_cache
                    .assign(b.header.partition_leader_epoch, b.header.base_offset)?;
            }
        }
        Ok(AppendInfo {
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp: offset_of_max,
            batch_count: batches.len(),
            valid_bytes: total_len,
            log_end_offset: self.log_end_offset,
            rolled_at,
            flush_needed: self.unflushed_messages() >= self.config.flush_messages,
        })
    }

    /// Records that leader `epoch` starts at `start_offset` (Kafka's
    /// `UnifiedLog.assignEpochStartOffset`, called on becoming leader): the epoch is in the
    /// cache, and OffsetForLeaderEpoch answers for it, before its first batch is appended.
    pub fn assign_epoch_start_offset(&mut self, epoch: i32, start_offset: i64) -> Result<()> {
        self.epoch_cache.assign(epoch, start_offset)?;
        Ok(())
    }

    /// Records an aborted transaction in the `.txnindex` of the segment holding its last offset
    /// (called by the partition when it writes an ABORT marker).
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> Result<()> {
        let seg = self
            .segments
            .range_mut(..=txn.last_offset)
            .next_back()
            .map(|(_, s)| s)
            .ok_or_else(|| {
                LogError::InvalidOffset(format!("no segment for offset {}", txn.last_offset))
            })?;
        seg.append_aborted_txn(txn)?;
        Ok(())
    }

    /// Aborted transactions overlapping `[start_offset, upper_bound_offset)` (read_committed).
    pub fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTxn> {
        let from = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in self
            .segments
            .range(from..upper_bound_offset.max(from))
            .map(|(_, s)| s)
        {
            seg.txn_index()
                .collect_aborted(start_offset, upper_bound_offset, &mut out);
        }
        out
    }

    /// Rolls a new active segment now (Kafka's `roll()`), at the log end offset.
    pub fn roll(&mut self, now_ms: i64) -> Result<i64> {
        let leo = self.log_end_offset;
        self.roll_at(leo, now_ms)
    }

    fn roll_at(&mut self, expected_next_offset: i64, now_ms: i64) -> Result<i64> {
        let new_offset = expected_next_offset.max(self.log_end_offset);
        let active_base = self.active_segment().base_offset();
        if active_base == new_offset && self.active_segment().size() == 0 {
            // Already an empty segment there: nothing to roll.
            return Ok(new_offset);
        }
        if self.segments.contains_key(&new_offset) || new_offset < active_base {
            return Err(LogError::InvalidOffset(format!(
                "cannot roll a segment at {new_offset}"
            )));
        }
        // Leftover files at the new name (a segment deleted by truncation earlier) must go first.
        for suffix in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let p = segment_file(&self.dir, new_offset, suffix);
            if p.exists() {
                fs::remove_file(p)?;
            }
        }
        self.active_segment_mut().on_become_inactive()?;
        let seg = LogSegment::open(&self.dir, new_offset, &self.config, now_ms)?;
        self.segments.insert(new_offset, seg);
        Ok(new_offset)
    }

    // ---- read ----

    /// Reads whole batches starting with the one containing `start_offset`: at most `max_bytes`
    /// (but always the first batch with `min_one_message`), never reaching `max_offset` (the high
    /// watermark or last stable offset for consumers; `None` = up to the log end, for followers).
    /// `start_offset` outside `[log_start_offset, log_end_offset]` is OffsetOutOfRange.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u32,
        max_offset: Option<i64>,
        min_one_message: bool,
    ) -> Result<FetchDataInfo> {
        if start_offset > self.log_end_offset || start_offset < self.log_start_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let empty = |seg: &LogSegment, pos: u64| FetchDataInfo {
            fetch_offset_metadata: LogOffsetMetadata {
                message_offset: start_offset,
                segment_base_offset: seg.base_offset(),
                relative_position: pos,
            },
            records: None,
            first_batch_base_offset: None,
        };
        let max_offset = max_offset
            .unwrap_or(self.log_end_offset)
            .min(self.log_end_offset);
        if start_offset == self.log_end_offset || start_offset >= max_offset {
            let active = self.active_segment();
            return Ok(empty(active, active.size()));
        }
        let from = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut iter = self.segments.range(from..).peekable();
        while let Some((base, seg)) = iter.next() {
            if *base >= max_offset {
                break;
            }
            let next_base = iter.peek().map(|(b, _)| **b);
            // Whole segment when the bound lies beyond it (or is the log end); else stop at the
            // batch holding the bound.
            let max_position = if next_base.is_some_and(|n| n <= max_offset)
                || max_offset == self.log_end_offset
            {
                seg.size()
            } else {
                seg.position_of(max_offset)?
            };
            if let Some((first, slice)) =
                seg.read(start_offset, max_bytes, max_position, min_one_message)?
            {
                let meta = LogOffsetMetadata {
                    message_offset: start_offset,
                    segment_base_offset: *base,
                    relative_position: first.position,
                };
                let has_data = slice.len > 0;
                return Ok(FetchDataInfo {
                    fetch_offset_metadata: meta,
                    first_batch_base_offset: has_data.then_some(first.header.base_offset),
                    records: Some(slice),
                });
            }
        }
        let active = self.active_segment();
        Ok(empty(active, active.size()))
    }

    /// Where `offset` lives (for callers caching the high watermark's position).
    pub fn offset_metadata(&self, offset: i64) -> Result<LogOffsetMetadata> {
        if offset == self.log_end_offset {
            return Ok(self.log_end_offset_metadata());
        }
        let (base, seg) =
            self.segments
                .range(..=offset)
                .next_back()
                .ok_or(LogError::OffsetOutOfRange {
                    offset,
                    log_start_offset: self.log_start_offset,
                    log_end_offset: self.log_end_offset,
                })?;
        Ok(LogOffsetMetadata {
            message_offset: offset,
            segment_base_offset: *base,
            relative_position: seg.position_of(offset)?,
        })
    }

    /// ListOffsets: EARLIEST (-2), LATEST (-1, the log end; the caller caps it at the high
    /// watermark / LSO), MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4), or the first record with a
    /// timestamp >= `timestamp`. `None` when no record qualifies.
    pub fn fetch_offset_by_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>> {
        let epoch_at = |offset: i64| self.epoch_cache.epoch_for_offset(offset);
        match timestamp {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Ok(Some(TimestampAndOffset {
                timestamp: -1,
                offset: self.log_start_offset,
                leader_epoch: epoch_at(self.log_start_offset),
            })),
            LATEST_TIMESTAMP => Ok(Some(TimestampAndOffset {
                timestamp: -1,
                offset: self.log_end_offset,
                leader_epoch: self.epoch_cache.latest_epoch(),
            })),
            MAX_TIMESTAMP => {
                // The first segment holding the largest timestamp (maps every segment's
                // indexes, as Kafka's lazy time indexes are loaded by this query too).
                let mut best: Option<(&LogSegment, i64)> = None;
                for seg in self.segments.values() {
                    let max = seg.max_timestamp_so_far()?;
                    if max >= 0 && best.is_none_or(|(_, b)| max > b) {
                        best = Some((seg, max));
                    }
                }
                match best {
                    Some((seg, _)) => Ok(seg.find_max_timestamp_record()?),
                    None => Ok(None),
                }
            }
            ts if ts < 0 => Ok(None),
            ts => {
                for seg in self.segments.values() {
                    if seg.max_timestamp_so_far()? < ts {
                        continue;
                    }
                    if let Some(found) = seg.find_offset_by_timestamp(ts, self.log_start_offset)? {
                        return Ok(Some(found));
                    }
                }
                Ok(None)
            }
        }
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)` per Kafka's rules.
    pub fn end_offset_for_epoch(&self, leader_epoch: i32) -> (i32, i64) {
        self.epoch_cache
            .end_offset_for(leader_epoch, self.log_end_offset)
    }

    // ---- truncation and log start offset ----

    /// Follower truncation: removes every batch with an offset >= `target_offset` (a batch
    /// straddling it goes whole) and sets the log end offset to `target_offset`. Returns whether
    /// anything changed. Below the first segment it empties the log and restarts it there.
    pub fn truncate_to(&mut self, target_offset: i64, now_ms: i64) -> Result<bool> {
        if target_offset < 0 {
            return Err(LogError::InvalidOffset(format!(
                "cannot truncate to {target_offset}"
            )));
        }
        if target_offset >= self.log_end_offset {
            return Ok(false);
        }
        self.generation += 1;
        self.note_truncation(target_offset);
        let first_base = *self.segments.keys().next().expect("non-empty");
        if target_offset < first_base {
            self.truncate_fully_and_start_at(target_offset, now_ms)?;
            return Ok(true);
        }
        let doomed: Vec<i64> = self
            .segments
            .range(target_offset + 1..)
            .map(|(b, _)| *b)
            .collect();
        self.remove_and_delete_segments(&doomed, now_ms)?;
        let config_index_bytes = self.config.segment_index_bytes;
        let active = self.active_segment_mut();
        active.truncate_to(target_offset)?;
        active.resize_indexes(config_index_bytes)?;
        self.log_end_offset = target_offset;
        self.recovery_point = self.recovery_point.min(target_offset);
        self.log_start_offset = self.log_start_offset.min(target_offset);
        self.epoch_cache.truncate_from_end(target_offset)?;
        Ok(true)
    }

    /// Removes all data and restarts the log empty at `new_offset` (a follower far behind, or a
    /// replica rebuilt from scratch).
    pub fn truncate_fully_and_start_at(&mut self, new_offset: i64, now_ms: i64) -> Result<()> {
        self.generation += 1;
        self.note_truncation(new_offset);
        let all: Vec<i64> = self.segments.keys().copied().collect();
        // Open the new segment first so the log is never without one.
        let new_files_clash = all.contains(&new_offset);
        if new_files_clash {
            self.remove_and_delete_segments(&all, now_ms)?;
        }
        for suffix in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let p = segment_file(&self.dir, new_offset, suffix);
            if p.exists() {
                fs::remove_file(p)?;
            }
        }
        let seg = LogSegment::open(&self.dir, new_offset, &self.config, now_ms)?;
        if !new_files_clash {
            self.remove_and_delete_segments(&all, now_ms)?;
        }
        self.segments.insert(new_offset, seg);
        self.log_end_offset = new_offset;
        self.log_start_offset = new_offset;
        self.recovery_point = new_offset;
        self.epoch_cache.clear()?;
        Ok(())
    }

    /// DeleteRecords (and segment deletion): moves the log start offset up to `new_start`
    /// (the caller checked it against the high watermark). Whole segments below it are removed
    /// by the next [`Log::delete_old_segments`]. Returns whether it moved.
    pub fn maybe_increment_log_start_offset(&mut self, new_start: i64) -> Result<bool> {
        if new_start > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: new_start,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if new_start <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = new_start;
        self.epoch_cache.truncate_from_start(new_start)?;
        Ok(true)
    }

    // ---- retention ----

    /// Kafka's `deleteOldSegments`: with `cleanup.policy=delete`, segments past `retention.ms`
    /// (by their largest timestamp) or beyond `retention.bytes`; always, segments wholly below
    /// the log start offset. Only segments entirely below `high_watermark` go. Deleted segments
    /// are renamed `.deleted` now and removed by [`Log::purge_deleted_segments`] after
    /// `file.delete.delay.ms`. Returns the number of segments deleted.
    pub fn delete_old_segments(&mut self, now_ms: i64, high_watermark: i64) -> Result<usize> {
        let mut deleted = 0;
        if self.config.cleanup_policy.delete {
            let retention_ms = self.config.retention_ms;
            if retention_ms >= 0 {
                deleted += self.delete_segments_while(now_ms, high_watermark, |seg, _, _| {
                    Ok(now_ms - seg.largest_timestamp()? > retention_ms)
                })?;
            }
            let retention_bytes = self.config.retention_bytes;
            let size = self.size() as i64;
            if retention_bytes >= 0 && size >= retention_bytes {
                let mut diff = size - retention_bytes;
                deleted += self.delete_segments_while(now_ms, high_watermark, |seg, _, _| {
                    if diff - seg.size() as i64 >= 0 {
                        diff -= seg.size() as i64;
                        Ok(true)
                    } else {
                        Ok(false)
                    }
                })?;
            }
        }
        let lso = self.log_start_offset;
        deleted += self.delete_segments_while(now_ms, high_watermark, |_, next, _| {
            Ok(next.is_some_and(|n| n <= lso))
        })?;
        Ok(deleted)
    }

    /// Deletes the oldest segments while `predicate(segment, next segment base)` holds and the
    /// segment lies wholly below the high watermark; never an empty active segment.
    fn delete_segments_while(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        mut predicate: impl FnMut(&LogSegment, Option<i64>, i64) -> io::Result<bool>,
    ) -> Result<usize> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut doomed = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            let seg = &self.segments[base];
            let next = bases.get(i + 1).copied();
            let upper = next.unwrap_or(self.log_end_offset);
            let last_and_empty = next.is_none() && seg.size() == 0;
            if high_watermark >= upper && !last_and_empty && predicate(seg, next, now_ms)? {
                doomed.push(*base);
            } else {
                break;
            }
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if doomed.len() == bases.len() {
            // Deleting the active segment: Kafka rolls first so the log keeps a segment.
            self.roll(now_ms)?;
        }
        self.remove_and_delete_segments(&doomed, now_ms)?;
        let first = *self.segments.keys().next().expect("rolled above");
        if first > self.log_start_offset {
            self.maybe_increment_log_start_offset(first.min(self.log_end_offset))?;
        }
        Ok(doomed.len())
    }

    /// Removes segments from the log, renames their files `.deleted`, schedules removal.
    fn remove_and_delete_segments(&mut self, bases: &[i64], now_ms: i64) -> Result<()> {
        self.retire_segments(bases, None, now_ms)
    }

    /// Removes `.deleted` files whose delay has passed. Returns how many files were removed.
    pub fn purge_deleted_segments(&mut self, now_ms: i64) -> Result<usize> {
        let mut removed = 0;
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending_deletions) {
            if p.due_ms <= now_ms {
                for path in &p.paths {
                    match fs::remove_file(path) {
                        Ok(()) => removed += 1,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            } else {
                keep.push(p);
            }
        }
        self.pending_deletions = keep;
        Ok(removed)
    }

    pub fn pending_deletions(&self) -> &[PendingDeletion] {
        &self.pending_deletions
    }

    // ---- cleaning ----

    fn note_truncation(&mut self, offset: i64) {
        self.truncated_to = Some(self.truncated_to.map_or(offset, |t| t.min(offset)));
    }

    /// The lowest offset the log was truncated to since the last call (for the cleaner, which
    /// pulls its checkpoint back to it).
    pub fn take_truncation(&mut self) -> Option<i64> {
        self.truncated_to.take()
    }

    /// What the cleaner reads of this log now (see [`super::cleaner`]): the inactive segments'
    /// file handles and facts, every aborted transaction, and the bounds it must respect.
    /// `last_stable_offset` and `active_producers` come from the partition, which owns them.
    /// Segment timestamps are read (mapping indexes) only when the compaction lags need them.
    pub fn cleaner_view(
        &self,
        last_stable_offset: i64,
        active_producers: std::collections::HashMap<i64, super::cleaner::LastRecord>,
    ) -> Result<super::cleaner::LogView> {
        let need_largest = self.config.min_compaction_lag_ms > 0;
        let need_first = self.config.max_compaction_lag_ms < i64::MAX;
        let active_base = self.active_segment().base_offset();
        let mut segments = Vec::new();
        let mut aborted = Vec::new();
        for (base, seg) in &self.segments {
            aborted.extend_from_slice(seg.txn_index().entries());
            if *base == active_base {
                continue;
            }
            let len_of = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
            let first_batch_timestamp = if need_first {
                let mut scan = super::batch::HeaderScanner::new(seg.file(), 0, seg.size());
                scan.next_batch()?.map(|b| b.header.max_timestamp)
            } else {
                None
            };
            segments.push(super::cleaner::SegmentView {
                base_offset: *base,
                size: seg.size(),
                file: seg.file().clone(),
                offset_index_bytes: len_of(seg.offset_index_path()),
                time_index_bytes: len_of(seg.time_index_path()),
                largest_timestamp: if need_largest {
                    seg.largest_timestamp()?
                } else {
                    -1
                },
                first_batch_timestamp,
                last_modified: seg.file().metadata().and_then(|m| m.modified()).ok(),
            });
        }
        Ok(super::cleaner::LogView {
            dir: self.dir.clone(),
            topic_partition: self.topic_partition.clone(),
            config: self.config.clone(),
            segments,
            active_base_offset: active_base,
            active_size: self.active_segment().size(),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            last_stable_offset,
            aborted,
            generation: self.generation,
            active_producers,
            truncated_to: self.truncated_to,
        })
    }

    /// Swaps cleaned segments in (Kafka's `replaceSegments`), each only if the segments it was
    /// made from are still here unchanged and inactive and the log was not truncated since its
    /// view; otherwise its files are removed. The order is Kafka's, so that a crash at any point
    /// leaves a state recovery completes or discards: `.cleaned` → `.swap` (recovery completes a
    /// swap), old segments renamed `.deleted` (removed after `file.delete.delay.ms`), then the
    /// `.swap` suffix dropped. Returns how many were swapped in.
    pub fn replace_with_cleaned(
        &mut self,
        cleaned: &[super::cleaner::CleanedSegment],
        generation: u64,
        now_ms: i64,
    ) -> Result<usize> {
        // Earlier cleanings' `.deleted` files whose delay has passed go now, so a compacted
        // log's disk use follows its cleanings, not only the retention check.
        self.purge_deleted_segments(now_ms)?;
        let mut swapped = 0;
        for c in cleaned {
            let active_base = self.active_segment().base_offset();
            let unchanged = generation == self.generation
                && !c.replaces.is_empty()
                && c.replaces.iter().all(|(base, size)| {
                    *base < active_base
                        && self.segments.get(base).is_some_and(|s| s.size() == *size)
                });
            if !unchanged {
                warn!(partition = %self.topic_partition, base = c.base_offset, "log changed during cleaning, dropping the cleaned segment");
                super::cleaner::discard_cleaned(c);
                continue;
            }
            self.swap_in(c, now_ms)?;
            swapped += 1;
        }
        Ok(swapped)
    }

    fn swap_in(&mut self, c: &super::cleaner::CleanedSegment, now_ms: i64) -> Result<()> {
        let strip = |p: &Path, from: &str, to: &str| -> PathBuf {
            let s = p.to_string_lossy();
            PathBuf::from(format!("{}{to}", s.strip_suffix(from).unwrap_or(&s)))
        };
        // 1. The cleaned files become the swap files.
        let log_swap = strip(&c.log_path, CLEANED_SUFFIX, SWAP_SUFFIX);
        fs::rename(&c.log_path, &log_swap)?;
        let txn_swap = match &c.txn_index_path {
            Some(p) => {
                let to = strip(p, CLEANED_SUFFIX, SWAP_SUFFIX);
                fs::rename(p, &to)?;
                Some(to)
            }
            None => None,
        };
        fsync_dir(&self.dir)?;
        // 2. The old segments leave the log, renamed `.deleted`; producer snapshots at bases that
        //    no segment starts at any more go with them.
        let old: Vec<i64> = c.replaces.iter().map(|(b, _)| *b).collect();
        self.retire_segments(&old, Some(c.base_offset), now_ms)?;
        // 3. The swap files take the segment's names; the indexes are built from the data.
        let log_final = strip(&log_swap, SWAP_SUFFIX, "");
        fs::rename(&log_swap, &log_final)?;
        if let Some(t) = txn_swap {
            fs::rename(&t, strip(&t, SWAP_SUFFIX, ""))?;
        }
        fsync_dir(&self.dir)?;
        let mut seg = LogSegment::open_lazy(&self.dir, c.base_offset, &self.config, now_ms)?;
        seg.rebuild_indexes()?;
        seg.on_become_inactive()?;
        seg.flush()?;
        seg.unload_indexes();
        self.segments.insert(c.base_offset, seg);
        Ok(())
    }

    /// Removes segments from the log, renames their files `.deleted`, schedules removal. Segments
    /// replaced by a cleaned one at `kept_base` keep the producer snapshot there.
    fn retire_segments(
        &mut self,
        bases: &[i64],
        kept_base: Option<i64>,
        now_ms: i64,
    ) -> Result<()> {
        let mut paths = Vec::new();
        for base in bases {
            if let Some(mut seg) = self.segments.remove(base) {
                seg.change_file_suffixes("", DELETED_SUFFIX)?;
                paths.extend(seg.paths());
            }
            // Kafka's producer state drops the snapshot taken at a deleted segment's base too
            // (`removeAndMarkSnapshotForDeletion`); the producer-state manager owns the rest.
            let snapshot = segment_file(&self.dir, *base, SNAPSHOT_SUFFIX);
            if Some(*base) != kept_base && snapshot.exists() {
                let to = PathBuf::from(format!("{}{DELETED_SUFFIX}", snapshot.display()));
                fs::rename(&snapshot, &to)?;
                paths.push(to);
            }
        }
        if !paths.is_empty() {
            self.pending_deletions.push(PendingDeletion {
                due_ms: now_ms + self.config.file_delete_delay_ms,
                paths,
            });
        }
        Ok(())
    }

    // ---- flush ----

    /// `flush.messages` / `flush.ms` say a flush is due (Kafka's flush scheduler and append check).
    pub fn flush_due(&self, now_ms: i64) -> bool {
        self.unflushed_messages() > 0
            && (self.unflushed_messages() >= self.config.flush_messages
                || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms)
    }

    /// Prepares an fsync of everything below `up_to` (clamped to the log end) that is above the
    /// recovery point. `None` if there is nothing to do.
    pub fn prepare_flush(&mut self, up_to: i64) -> Option<FlushTask> {
        let up_to = up_to.min(self.log_end_offset);
        if up_to <= self.recovery_point {
            return None;
        }
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut files = Vec::new();
        let mut new_segment = false;
        for (base, seg) in self.segments.range(from..up_to) {
            files.extend(seg.flush_handles());
            new_segment |= *base >= self.recovery_point;
        }
        Some(FlushTask {
            up_to,
            files,
            dir: new_segment.then(|| self.dir.clone()),
        })
    }

    /// After [`FlushTask::run`] succeeded: the recovery point moves to the task's `up_to`.
    pub fn complete_flush(&mut self, task: &FlushTask, now_ms: i64) {
        if task.up_to > self.recovery_point {
            self.recovery_point = task.up_to.min(self.log_end_offset);
            self.last_flush_ms = now_ms;
        }
    }

    /// Synchronous flush up to `up_to` (exclusive) on the calling thread.
    pub fn flush(&mut self, up_to: i64, now_ms: i64) -> Result<()> {
        if let Some(task) = self.prepare_flush(up_to) {
            task.run()?;
            self.complete_flush(&task, now_ms);
        }
        Ok(())
    }

    // ---- close / delete ----

    /// Clean close: final time index entry, indexes trimmed. Does not fsync: callers flush
    /// first (LogDir::shutdown does), as Kafka's shutdown does.
    pub fn close(self) -> Result<()> {
        for (_, seg) in self.segments {
            seg.close()?;
        }
        Ok(())
    }

    /// Topic deletion: renames the directory to Kafka's
    /// `<topic>-<partition>.<uuid without dashes>-delete` and returns the new path; the caller
    /// removes it (with [`remove_log_dir`]) after `file.delete.delay.ms`.
    pub fn rename_for_deletion(self) -> Result<PathBuf> {
        let parent = self.dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = delete_dir_name(&self.topic_partition);
        let to = parent.join(name);
        for (_, seg) in self.segments {
            drop(seg);
        }
        fs::rename(&self.dir, &to)?;
        fsync_dir(&parent)?;
        Ok(to)
    }
}

/// Kafka's `logDeleteDirName`: `<topic>-<partition>.<uuid hex>-delete`, the topic cut so the
/// whole name fits in 255 bytes.
pub fn delete_dir_name(tp: &TopicPartition) -> String {
    let suffix = format!(
        "-{}.{}{}",
        tp.partition,
        uuid_hex(&Uuid::random()),
        DELETE_DIR_SUFFIX
    );
    let keep = tp.topic.len().min(255 - suffix.len());
    let mut cut = keep;
    while !tp.topic.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{}", &tp.topic[..cut], suffix)
}

/// Removes a directory renamed by [`Log::rename_for_deletion`].
pub fn remove_log_dir(path: &Path) -> io::Result<()> {
    fs::remove_dir_all(path)
}
