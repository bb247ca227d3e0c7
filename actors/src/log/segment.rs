//! One log segment (Kafka's `LogSegment`): `<base offset>.log` plus its `.index`, `.timeindex` and
//! `.txnindex`. Appends batches with caller-assigned offsets, indexes one batch every
//! `index.interval.bytes`, reads by offset into zero-copy file slices, truncates, recovers.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::UNIX_EPOCH;

use super::batch::{
    record_offsets_and_timestamps, validate_batches, BatchInfo, HeaderScanner, InvalidTail,
};
use super::config::LogConfig;
use super::index::{OffsetIndex, TimeIndex, TimestampOffset, NO_TIMESTAMP};
use super::txn_index::{AbortedTxn, TransactionIndex};
use super::FileSlice;

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
pub const DELETED_SUFFIX: &str = ".deleted";
pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";

/// `<dir>/<20-digit base offset><suffix>`, Kafka's file naming.
pub fn segment_file(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}{suffix}"))
}

/// What an append needs from the segment to decide whether to roll first (Kafka's `RollParams`).
#[derive(Debug, Clone, Copy)]
pub struct RollParams {
    pub max_segment_ms: i64,
    pub max_segment_bytes: i32,
    pub max_timestamp_in_messages: i64,
    pub max_offset_in_messages: i64,
    pub messages_size: u64,
    pub now_ms: i64,
}

/// A timestamp and the offset of the record that has it (ListOffsets answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
    /// Partition leader epoch of the batch holding the record, if it has one.
    pub leader_epoch: Option<i32>,
}

/// A segment's two sparse indexes and what they imply, mapped together (Kafka keeps a
/// `LazyIndex` per file; one lazy unit is enough here: every lookup needs the offset index and
/// every timestamp question needs both).
#[derive(Debug)]
struct SegmentIndexes {
    offset: OffsetIndex,
    time: TimeIndex,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    max_timestamp_so_far: i64,
    offset_of_max_timestamp_so_far: i64,
}

impl SegmentIndexes {
    fn new(offset: OffsetIndex, time: TimeIndex, index_interval_bytes: u64) -> Self {
        let last_time = time.last_entry();
        SegmentIndexes {
            offset,
            time,
            index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: last_time.timestamp,
            offset_of_max_timestamp_so_far: last_time.offset,
        }
    }

    fn reset(&mut self, base_offset: i64) {
        self.offset.reset();
        self.time.reset();
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp_so_far = NO_TIMESTAMP;
        self.offset_of_max_timestamp_so_far = base_offset;
    }

    /// Kafka 4's per-batch index step, shared by append, recovery and rebuild.
    #[inline]
    fn index_batch(&mut self, position: u64, b: &BatchInfo) -> io::Result<()> {
        let last_offset = b.header.last_offset();
        if b.header.max_timestamp > self.max_timestamp_so_far {
            self.max_timestamp_so_far = b.header.max_timestamp;
            self.offset_of_max_timestamp_so_far = last_offset;
        }
        // A full index only makes lookups scan further: a rebuild can need more entries than the
        // appends did (after a reopen the interval restarts), and must not fail because of it.
        if self.bytes_since_last_index_entry > self.index_interval_bytes
            && !self.offset.is_full()
            && !self.time.is_full()
        {
            self.offset.append(last_offset, position as u32)?;
            self.time.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                false,
            )?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += b.size as u64;
        Ok(())
    }

    /// Kafka's `onBecomeInactiveSegment` for the indexes: the final max timestamp entry, then
    /// both files trimmed to their entries.
    fn finish_inactive(&mut self) -> io::Result<()> {
        // A trimmed (or rebuilt-full) time index gets one slot for the final entry.
        let needed = (self.time.entries() + 1) * super::index::TIME_ENTRY_SIZE;
        if self.time.file_len() < needed {
            self.time.resize(needed as i32)?;
        }
        self.time.maybe_append(
            self.max_timestamp_so_far,
            self.offset_of_max_timestamp_so_far,
            true,
        )?;
        self.offset.trim_to_valid_size()?;
        self.time.trim_to_valid_size()
    }
}

#[derive(Debug)]
pub struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    file: Arc<File>,
    size: u64,
    offset_index_path: PathBuf,
    time_index_path: PathBuf,
    /// Kafka's `LazyIndex`: an inactive segment found at open maps its indexes on the first
    /// lookup that needs them, so opening a log of thousands of segments maps nothing but the
    /// active segment's. `OnceLock` lets `&self` lookups load them; every change to them goes
    /// through `&mut self` (`get_mut`), so no reader can hold a mapping while it is replaced or
    /// dropped.
    indexes: OnceLock<SegmentIndexes>,
    max_index_bytes: i32,
    index_interval_bytes: u64,
    txn_index: TransactionIndex,
    /// Max timestamp of the segment's first batch: `segment.ms` counts from it (or from
    /// `created_ms` when batches carry no timestamps).
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
    roll_jitter_ms: i64,
    /// An index file was missing when a non-empty segment was opened: it must be rebuilt.
    missing_index: bool,
}

fn invalid_data(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// `pwritev(2)` of every byte of `parts` at `position`, retrying short writes: one syscall per
/// append in practice, with no copy to join a rewritten header to its body.
fn write_all_vectored_at(file: &File, parts: &[&[u8]], mut position: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const MAX_PARTS: usize = 4;
    assert!(parts.len() <= MAX_PARTS, "at most {MAX_PARTS} parts");
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_PARTS];
    let mut n = 0;
    for p in parts.iter().filter(|p| !p.is_empty()) {
        iov[n] = libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        };
        n += 1;
    }
    let mut first = 0;
    while first < n {
        // SAFETY: `iov[first..n]` describe live, initialized slices borrowed from `parts` for
        // the duration of the call; pwritev only reads them.
        let written = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov[first..n].as_ptr(),
                (n - first) as libc::c_int,
                position as libc::off_t,
            )
        };
        if written < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let mut left = written as usize;
        position += left as u64;
        while first < n && left >= iov[first].iov_len {
            left -= iov[first].iov_len;
            first += 1;
        }
        if left > 0 {
            // SAFETY: `left < iov_len`, so the advanced pointer stays inside the same slice.
            iov[first].iov_base = unsafe { (iov[first].iov_base as *mut u8).add(left) } as *mut _;
            iov[first].iov_len -= left;
        }
    }
    Ok(())
}

impl LogSegment {
    /// Opens (or creates) the segment's files with its indexes mapped now, preallocated to
    /// `segment.index.bytes` if new: for a new or the active segment. Index contents are taken
    /// as found (valid prefix); call [`LogSegment::indexes_look_valid`] /
    /// [`LogSegment::recover`] to decide whether to trust them.
    pub fn open(dir: &Path, base_offset: i64, config: &LogConfig, now_ms: i64) -> io::Result<Self> {
        let seg = Self::open_lazy(dir, base_offset, config, now_ms)?;
        let ix = seg.open_indexes(true)?;
        let _ = seg.indexes.set(ix);
        Ok(seg)
    }

    /// Opens an existing segment without touching its index files beyond checking that they
    /// exist (Kafka's `LazyIndex`): they are mapped, and checked, by the first lookup.
    pub fn open_lazy(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> io::Result<Self> {
        let log_path = segment_file(dir, base_offset, LOG_SUFFIX);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)?;
        let mut size = file.metadata()?.len();
        if size == 0 && config.preallocate {
            // Kafka's `preallocate`: a new segment file gets its full `segment.bytes` length up
            // front (sparse, as Kafka's `setLength`), so appends never extend the file; the
            // logical size stays 0 and the file is trimmed when the segment rolls or closes.
            // An untrimmed file found after a crash is as long as it was preallocated, and
            // recovery cuts the zeros after the last valid batch.
            file.set_len(config.segment_bytes.max(0) as u64)?;
            size = 0;
        }
        let offset_index_path = segment_file(dir, base_offset, INDEX_SUFFIX);
        let time_index_path = segment_file(dir, base_offset, TIME_INDEX_SUFFIX);
        let missing_index = size > 0 && !(offset_index_path.exists() && time_index_path.exists());
        let txn_index = TransactionIndex::open(&segment_file(dir, base_offset, TXN_INDEX_SUFFIX))?;
        Ok(LogSegment {
            base_offset,
            log_path,
            file: Arc::new(file),
            size,
            offset_index_path,
            time_index_path,
            indexes: OnceLock::new(),
            max_index_bytes: config.segment_index_bytes,
            index_interval_bytes: config.index_interval_bytes.max(0) as u64,
            txn_index,
            rolling_based_timestamp: None,
            created_ms: now_ms,
            roll_jitter_ms: config.random_segment_jitter(),
            missing_index,
        })
    }

    /// Opens and maps both index files as they are (valid prefix), preallocating new files for
    /// an active segment.
    fn open_indexes(&self, preallocate: bool) -> io::Result<SegmentIndexes> {
        let (offset, time) = if preallocate {
            (
                OffsetIndex::open(
                    &self.offset_index_path,
                    self.base_offset,
                    self.max_index_bytes,
                )?,
                TimeIndex::open(
                    &self.time_index_path,
                    self.base_offset,
                    self.max_index_bytes,
                )?,
            )
        } else {
            (
                OffsetIndex::open_existing(&self.offset_index_path, self.base_offset)?,
                TimeIndex::open_existing(&self.time_index_path, self.base_offset)?,
            )
        };
        Ok(SegmentIndexes::new(offset, time, self.index_interval_bytes))
    }

    /// The lazy load: maps the indexes found on disk, and if they fail the sanity check (a
    /// missing file, a partial entry, a last entry that points nowhere) rebuilds them from the
    /// batch headers instead of trusting them.
    fn load_indexes(&self) -> io::Result<SegmentIndexes> {
        let mut ix = self.open_indexes(false)?;
        if self.missing_index || !self.indexes_sane(&ix, None) {
            tracing::warn!(
                segment = %self.log_path.display(),
                "index failed its sanity check on first use, rebuilding it"
            );
            self.rebuild_into(&mut ix)?;
            ix.finish_inactive()?;
        }
        Ok(ix)
    }

    /// The indexes, mapped on first use.
    fn indexes(&self) -> io::Result<&SegmentIndexes> {
        if let Some(ix) = self.indexes.get() {
            return Ok(ix);
        }
        let ix = self.load_indexes()?;
        // A concurrent first use may have won: its mapping stays, ours is dropped unused.
        Ok(self.indexes.get_or_init(|| ix))
    }

    fn indexes_mut(&mut self) -> io::Result<&mut SegmentIndexes> {
        if self.indexes.get().is_none() {
            let ix = self.load_indexes()?;
            let _ = self.indexes.set(ix);
        }
        Ok(self.indexes.get_mut().expect("loaded above"))
    }

    /// Whether the indexes are mapped (tests; an inactive segment found at open is not until
    /// its first lookup).
    pub fn indexes_loaded(&self) -> bool {
        self.indexes.get().is_some()
    }

    /// Unmaps an inactive segment's indexes (they were trimmed and stay valid on disk); the next
    /// lookup maps them again. `&mut self`: no lookup can be using the mapping.
    pub fn unload_indexes(&mut self) {
        if self.indexes.take().is_some() {
            // Mapping them created or rebuilt any missing file.
            self.missing_index = false;
        }
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }
    /// The offset index (mapped now if it was not yet).
    pub fn offset_index(&self) -> io::Result<&OffsetIndex> {
        Ok(&self.indexes()?.offset)
    }
    /// The time index (mapped now if it was not yet).
    pub fn time_index(&self) -> io::Result<&TimeIndex> {
        Ok(&self.indexes()?.time)
    }
    pub fn offset_index_path(&self) -> &Path {
        &self.offset_index_path
    }
    pub fn time_index_path(&self) -> &Path {
        &self.time_index_path
    }
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    /// The largest record timestamp (from the time index's last entry for an inactive segment,
    /// which maps its indexes, as Kafka's `maxTimestampSoFar` loads its lazy time index).
    pub fn max_timestamp_so_far(&self) -> io::Result<i64> {
        Ok(self.indexes()?.max_timestamp_so_far)
    }
    pub fn offset_of_max_timestamp_so_far(&self) -> io::Result<i64> {
        Ok(self.indexes()?.offset_of_max_timestamp_so_far)
    }

    /// Kafka's `largestTimestamp`: the max record timestamp, or the file's mtime when no batch
    /// carries a timestamp (retention.ms then counts from the last write).
    pub fn largest_timestamp(&self) -> io::Result<i64> {
        let max = self.max_timestamp_so_far()?;
        if max >= 0 {
            return Ok(max);
        }
        Ok(self
            .file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0))
    }

    pub fn can_convert_to_relative_offset(&self, offset: i64) -> bool {
        let rel = offset - self.base_offset;
        (0..=i32::MAX as i64).contains(&rel)
    }

    /// Appends `records` (whole batches; `batches[i].position` relative to `records`) at the end.
    /// Indexes every batch that starts more than `index.interval.bytes` after the last indexed one.
    pub fn append(
        &mut self,
        largest_offset: i64,
        batches: &[BatchInfo],
        records: &[u8],
    ) -> io::Result<()> {
        self.append_parts(largest_offset, batches, &[records])
    }

    /// [`LogSegment::append`] of the concatenation of `parts` (at most 4), written with one
    /// `pwritev`: the batches' bytes on disk are exactly those of the joined parts.
    pub fn append_parts(
        &mut self,
        largest_offset: i64,
        batches: &[BatchInfo],
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len == 0 {
            return Ok(());
        }
        if !self.can_convert_to_relative_offset(largest_offset) {
            return Err(invalid_data(format!(
                "offset {largest_offset} out of range for segment {}",
                self.base_offset
            )));
        }
        let start = self.size;
        let end = start + len as u64;
        // The file system allocates the blocks at writeback, not here. Reserving them ahead
        // (fallocate every 1 MiB) saved ext4's per-page bookkeeping, 0.16 against 0.21 CPU s
        // per GiB written, but with it end-to-end latency stalled for 50-370 ms within a second
        // of each segment roll, while the rolled segment's flush was writing it back, and
        // without it it did not: an fallocate allocates blocks then and there, in the journal
        // the flush is filling.
        match parts {
            [one] => self.file.write_all_at(one, start)?,
            _ => write_all_vectored_at(&self.file, parts, start)?,
        }
        if start == 0 && self.rolling_based_timestamp.is_none() {
            self.rolling_based_timestamp = batches.first().map(|b| b.header.max_timestamp);
        }
        let ix = self.indexes_mut()?;
        for b in batches {
            ix.index_batch(start + b.position, b)?;
        }
        self.size = end;
        Ok(())
    }

    /// Kafka's `shouldRoll`: size, time (with this segment's jitter), either index full, or an
    /// offset the index could not store relative to the base.
    pub fn should_roll(&mut self, p: &RollParams) -> io::Result<bool> {
        if self.size > (p.max_segment_bytes as i64 - p.messages_size as i64).max(0) as u64
            || !self.can_convert_to_relative_offset(p.max_offset_in_messages)
        {
            return Ok(true);
        }
        let reached_roll_ms = self.time_waited_for_roll(p.now_ms, p.max_timestamp_in_messages)?
            > p.max_segment_ms - self.roll_jitter_ms;
        let ix = self.indexes()?;
        Ok((self.size > 0 && reached_roll_ms) || ix.offset.is_full() || ix.time.is_full())
    }

    fn time_waited_for_roll(&mut self, now_ms: i64, message_timestamp: i64) -> io::Result<i64> {
        if self.rolling_based_timestamp.is_none() && self.size > 0 {
            let mut scan = HeaderScanner::new(&self.file, 0, self.size);
            self.rolling_based_timestamp = scan.next_batch()?.map(|b| b.header.max_timestamp);
        }
        match self.rolling_based_timestamp {
            Some(ts) if ts >= 0 => Ok(message_timestamp - ts),
            _ => Ok(now_ms - self.created_ms),
        }
    }

    /// The first batch whose last offset is >= `offset`, scanning from the index entry below it:
    /// a binary search of the index, then at most one index interval of batch headers.
    pub fn translate_offset(
        &self,
        offset: i64,
        starting_position: u64,
    ) -> io::Result<Option<BatchInfo>> {
        let from = (self.indexes()?.offset.lookup(offset).position as u64).max(starting_position);
        let mut scan = HeaderScanner::new(&self.file, from, self.size);
        while let Some(b) = scan.next_batch()? {
            if b.header.last_offset() >= offset {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    /// Byte position of the first batch with last offset >= `offset`, or the segment size.
    pub fn position_of(&self, offset: i64) -> io::Result<u64> {
        Ok(self
            .translate_offset(offset, 0)?
            .map_or(self.size, |b| b.position))
    }

    /// The bytes from the batch containing `start_offset` on, at most `max_size` of them (with
    /// `min_one_message`, at least that first batch) and never past `max_position`. A raw file
    /// range, as Kafka's `LogSegment.read` slices it: when `max_size` ends inside a later batch
    /// the range ends there too (a partial trailing batch, which readers skip); one that cannot
    /// hold the first batch whole is empty. `None` when no batch in this segment reaches
    /// `start_offset`.
    pub fn read(
        &self,
        start_offset: i64,
        max_size: u32,
        max_position: u64,
        min_one_message: bool,
    ) -> io::Result<Option<(BatchInfo, FileSlice)>> {
        let Some(first) = self.translate_offset(start_offset, 0)? else {
            return Ok(None);
        };
        let max_position = max_position.min(self.size);
        let start = first.position;
        let budget = if min_one_message {
            (max_size as u64).max(first.size as u64)
        } else {
            max_size as u64
        };
        // A first batch cut short is no batch at all: Kafka's `ReplicaManager.readFromLog`
        // answers empty then (`firstEntryIncomplete`, Fetch v3+), so a later partition of a
        // nearly spent response gets nothing rather than a fragment.
        let end = if budget < first.size as u64 {
            start
        } else {
            max_position.min(start + budget).max(start)
        };
        Ok(Some((
            first,
            FileSlice {
                file: self.file.clone(),
                position: start,
                len: (end - start) as u32,
            },
        )))
    }

    /// The offset after the last batch (the base offset when empty).
    pub fn read_next_offset(&self) -> io::Result<i64> {
        let from = self.indexes()?.offset.last_entry().position as u64;
        let mut scan = HeaderScanner::new(&self.file, from, self.size);
        let mut next = self.base_offset;
        while let Some(b) = scan.next_batch()? {
            next = b.header.next_offset();
        }
        if next == self.base_offset && from > 0 {
            return Err(invalid_data(format!(
                "no batch at index position {from} of {}",
                self.log_path.display()
            )));
        }
        Ok(next)
    }

    /// Kafka's index sanity check, plus the successor's base offset when known: whole entries
    /// only, the last offset entry pointing at a batch that ends at its offset, time entries
    /// inside the segment's range.
    fn indexes_sane(&self, ix: &SegmentIndexes, next_segment_base: Option<i64>) -> bool {
        if ix.offset.has_partial_entry() || ix.time.has_partial_entry() {
            return false;
        }
        let oi = &ix.offset;
        if oi.entries() > 0 {
            let last = oi.last_entry();
            if last.position as u64 >= self.size
                || next_segment_base.is_some_and(|n| last.offset >= n)
            {
                return false;
            }
            // The entry must point at a batch ending at that offset.
            let mut scan = HeaderScanner::new(&self.file, last.position as u64, self.size);
            match scan.next_batch() {
                Ok(Some(b)) if b.header.last_offset() == last.offset => {}
                _ => return false,
            }
        }
        let ti = &ix.time;
        if ti.entries() > 0 {
            let last = ti.last_entry();
            if next_segment_base.is_some_and(|n| last.offset >= n) || last.offset < self.base_offset
            {
                return false;
            }
        }
        true
    }

    /// Consistency check of the indexes found on disk against this segment and its successor's
    /// base offset (or `None` for the last segment), for segments below the recovery point after
    /// an unclean shutdown. Maps the indexes as found; a `false` means: recover from here.
    pub fn indexes_look_valid(&mut self, next_segment_base: Option<i64>) -> io::Result<bool> {
        if self.missing_index {
            return Ok(false);
        }
        if self.indexes.get().is_none() {
            let ix = self.open_indexes(false)?;
            let _ = self.indexes.set(ix);
        }
        let ix = self.indexes.get().expect("set above");
        Ok(self.indexes_sane(ix, next_segment_base))
    }

    /// Resets `ix` and fills it from the batch headers, trusting the data (bytes below the
    /// recovery point). The files are grown to `segment.index.bytes` for the rebuild.
    fn rebuild_into(&self, ix: &mut SegmentIndexes) -> io::Result<()> {
        ix.reset(self.base_offset);
        ix.offset.resize(self.max_index_bytes)?;
        ix.time.resize(self.max_index_bytes)?;
        let mut scan = HeaderScanner::new(&self.file, 0, self.size);
        let mut prev_next = self.base_offset;
        let mut valid_end = 0;
        while let Some(b) = scan.next_batch()? {
            if b.header.base_offset < prev_next
                || !self.can_convert_to_relative_offset(b.header.last_offset())
            {
                break;
            }
            prev_next = b.header.next_offset();
            ix.index_batch(b.position, &b)?;
            valid_end = b.end();
        }
        if valid_end != self.size {
            return Err(invalid_data(format!(
                "{} is unreadable past byte {valid_end} of {} below the recovery point",
                self.log_path.display(),
                self.size
            )));
        }
        Ok(())
    }

    /// Rebuilds `.index`/`.timeindex` from the batch headers, trusting the data (used for
    /// segments below the recovery point whose indexes are missing or inconsistent).
    pub fn rebuild_indexes(&mut self) -> io::Result<()> {
        let mut ix = match self.indexes.take() {
            Some(ix) => ix,
            None => self.open_indexes(true)?,
        };
        self.missing_index = false;
        let rebuilt = self.rebuild_into(&mut ix);
        let _ = self.indexes.set(ix);
        rebuilt
    }

    /// Kafka's `LogSegment.recover`: validates every batch (size, magic, CRC, offsets), rebuilds
    /// both indexes, truncates the file after the last valid batch. Returns the bytes cut.
    pub fn recover(&mut self) -> io::Result<(u64, Option<InvalidTail>)> {
        self.missing_index = false;
        let mut ix = match self.indexes.take() {
            Some(ix) => ix,
            None => self.open_indexes(true)?,
        };
        ix.reset(self.base_offset);
        // Room for every entry the data needs (an inactive segment's files were trimmed); the
        // caller trims again if the segment stays inactive.
        ix.offset.resize(self.max_index_bytes)?;
        ix.time.resize(self.max_index_bytes)?;
        let ix = {
            let _ = self.indexes.set(ix);
            self.indexes.get_mut().expect("set above")
        };
        let file = self.file.clone();
        let mut batches = Vec::new();
        let (valid_bytes, why) =
            validate_batches(&file, self.size, self.base_offset, |b| batches.push(*b))?;
        for b in &batches {
            ix.index_batch(b.position, b)?;
        }
        let next_offset = batches
            .last()
            .map_or(self.base_offset, |b| b.header.next_offset());
        let truncated = self.size - valid_bytes;
        if truncated > 0 {
            self.cut_file(valid_bytes)?;
        }
        // Kafka rebuilds the txn index from producer state; until that exists, keep the entries
        // that still lie inside the recovered data.
        self.txn_index.truncate_to(next_offset)?;
        self.rolling_based_timestamp = batches.first().map(|b| b.header.max_timestamp);
        Ok((truncated, why))
    }

    /// Kafka's `LogSegment.truncateTo`: drops every batch whose last offset is >= `offset` (a batch
    /// straddling `offset` goes entirely). Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<u64> {
        let position = self.position_of(offset)?;
        let ix = self.indexes_mut()?;
        ix.offset.truncate_to(offset);
        ix.time.truncate_to(offset);
        ix.bytes_since_last_index_entry = 0;
        // The max timestamp: the last time index entry, raised by any batch after it.
        let last = ix.time.last_entry();
        ix.max_timestamp_so_far = last.timestamp;
        ix.offset_of_max_timestamp_so_far = last.offset;
        self.txn_index.truncate_to(offset)?;
        let removed = self.size - position;
        if removed > 0 {
            self.cut_file(position)?;
        }
        if self.size == 0 {
            self.rolling_based_timestamp = None;
        }
        self.load_max_timestamp()?;
        Ok(removed)
    }

    /// Loads the exact max timestamp of a segment reopened without recovery (its time index can
    /// lack the last batches' maximum when it was not closed cleanly).
    pub fn load_max_timestamp(&mut self) -> io::Result<()> {
        // Every index point also recorded the max timestamp so far in the time index, so only
        // the batches after the last offset index entry can raise it (a bounded scan, even when
        // all batches share one timestamp and the time index holds a single entry).
        let file = self.file.clone();
        let size = self.size;
        let ix = self.indexes_mut()?;
        let from = ix.offset.last_entry().position as u64;
        let mut scan = HeaderScanner::new(&file, from, size);
        while let Some(b) = scan.next_batch()? {
            if b.header.max_timestamp > ix.max_timestamp_so_far {
                ix.max_timestamp_so_far = b.header.max_timestamp;
                ix.offset_of_max_timestamp_so_far = b.header.last_offset();
            }
        }
        Ok(())
    }

    /// Kafka's `findOffsetByTimestamp`: the first record at or after `starting_offset` whose
    /// timestamp is >= `timestamp`.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: i64,
    ) -> io::Result<Option<TimestampAndOffset>> {
        let ix = self.indexes()?;
        let TimestampOffset { offset, .. } = ix.time.lookup(timestamp);
        let position = ix.offset.lookup(offset.max(starting_offset)).position as u64;
        let mut scan = HeaderScanner::new(&self.file, position, self.size);
        while let Some(b) = scan.next_batch()? {
            if b.header.max_timestamp < timestamp || b.header.last_offset() < starting_offset {
                continue;
            }
            for (rec_offset, rec_ts) in self.batch_records(&b)? {
                if rec_ts >= timestamp && rec_offset >= starting_offset {
                    return Ok(Some(TimestampAndOffset {
                        timestamp: rec_ts,
                        offset: rec_offset,
                        leader_epoch: leader_epoch_of(&b),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// The record holding this segment's max timestamp (ListOffsets MAX_TIMESTAMP, KIP-734).
    pub fn find_max_timestamp_record(&self) -> io::Result<Option<TimestampAndOffset>> {
        let max = self.max_timestamp_so_far()?;
        if max < 0 {
            return Ok(None);
        }
        let mut scan = HeaderScanner::new(&self.file, 0, self.size);
        while let Some(b) = scan.next_batch()? {
            if b.header.max_timestamp == max {
                let offset = self
                    .batch_records(&b)?
                    .into_iter()
                    .find(|&(_, ts)| ts == max)
                    .map_or(b.header.last_offset(), |(o, _)| o);
                return Ok(Some(TimestampAndOffset {
                    timestamp: max,
                    offset,
                    leader_epoch: leader_epoch_of(&b),
                }));
            }
        }
        Ok(None)
    }

    /// Offsets and timestamps of a batch's records. If the records cannot be decoded (e.g. a
    /// codec the log does not carry), the batch's first offset stands for all of them: a
    /// consumer then starts a little early rather than skipping data.
    fn batch_records(&self, b: &BatchInfo) -> io::Result<Vec<(i64, i64)>> {
        let mut data = vec![0u8; b.size as usize];
        self.file.read_exact_at(&mut data, b.position)?;
        Ok(record_offsets_and_timestamps(&data)
            .unwrap_or_else(|_| vec![(b.header.base_offset, b.header.max_timestamp)]))
    }

    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> io::Result<()> {
        self.txn_index.append(txn)
    }

    /// Kafka's `onBecomeInactiveSegment`: records the final max timestamp and trims the indexes.
    /// Indexes never mapped were finished when their segment rolled or closed: nothing to do.
    pub fn on_become_inactive(&mut self) -> io::Result<()> {
        if let Some(ix) = self.indexes.get_mut() {
            ix.finish_inactive()?;
        }
        self.trim_log_file()
    }

    /// Cuts a preallocated log file back to the bytes written (Kafka's `FileRecords.trim`).
    fn trim_log_file(&mut self) -> io::Result<()> {
        let meta = self.file.metadata()?;
        if meta.len() > self.size {
            // A truncate stamps the file as modified now; retention of batches without
            // timestamps goes by that time (Kafka's `lastModified`), so the segment keeps the
            // time of its last write.
            let modified = meta.modified();
            self.file.set_len(self.size)?;
            if let Ok(t) = modified {
                self.file.set_modified(t)?;
            }
        }
        Ok(())
    }

    /// Cuts the log file, and the segment's size, to `len` bytes.
    fn cut_file(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.size = len;
        Ok(())
    }

    /// Preallocates the indexes again (the segment became, or stays, the active one).
    pub fn resize_indexes(&mut self, max_index_bytes: i32) -> io::Result<()> {
        let ix = self.indexes_mut()?;
        ix.offset.resize(max_index_bytes)?;
        ix.time.resize(max_index_bytes)
    }

    pub fn trim_indexes(&mut self) -> io::Result<()> {
        if let Some(ix) = self.indexes.get_mut() {
            ix.offset.trim_to_valid_size()?;
            ix.time.trim_to_valid_size()?;
        }
        Ok(())
    }

    /// fsync of data and indexes (on the caller's thread: run it on a blocking pool).
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.sync_data()?;
        if let Some(ix) = self.indexes.get() {
            ix.offset.flush()?;
            ix.time.flush()?;
        }
        self.txn_index.flush()
    }

    /// The files to fsync for this segment, for a flush on another thread. Indexes never mapped
    /// were not written by this process: only their segment's data can need the fsync.
    pub fn flush_handles(&self) -> Vec<Arc<File>> {
        let mut v = vec![self.file.clone()];
        if let Some(ix) = self.indexes.get() {
            v.push(ix.offset.file().clone());
            v.push(ix.time.file().clone());
        }
        v
    }

    /// Renames every file of the segment, e.g. adding `.deleted`. Open handles stay valid, so
    /// in-flight zero-copy reads finish. Index files never mapped are renamed by path.
    pub fn change_file_suffixes(&mut self, old_suffix: &str, new_suffix: &str) -> io::Result<()> {
        let rename = |p: &Path| -> PathBuf {
            let s = p.to_string_lossy();
            let stem = s.strip_suffix(old_suffix).unwrap_or(&s);
            PathBuf::from(format!("{stem}{new_suffix}"))
        };
        let to = rename(&self.log_path);
        std::fs::rename(&self.log_path, &to)?;
        self.log_path = to;
        let offset_to = rename(&self.offset_index_path);
        let time_to = rename(&self.time_index_path);
        match self.indexes.get_mut() {
            Some(ix) => {
                ix.offset.rename(&offset_to)?;
                ix.time.rename(&time_to)?;
            }
            None => {
                for (from, to) in [
                    (&self.offset_index_path, &offset_to),
                    (&self.time_index_path, &time_to),
                ] {
                    match std::fs::rename(from, to) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                }
            }
        }
        self.offset_index_path = offset_to;
        self.time_index_path = time_to;
        let to = rename(self.txn_index.path());
        self.txn_index.rename(&to)
    }

    /// Paths of every file the segment has on disk.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut v = vec![self.log_path.clone()];
        for p in [
            &self.offset_index_path,
            &self.time_index_path,
            self.txn_index.path(),
        ] {
            if p.exists() {
                v.push(p.to_path_buf());
            }
        }
        v
    }

    /// Kafka's `close`: last time index entry, indexes trimmed.
    pub fn close(mut self) -> io::Result<()> {
        self.on_become_inactive()
    }
}

fn leader_epoch_of(b: &BatchInfo) -> Option<i32> {
    (b.header.partition_leader_epoch >= 0).then_some(b.header.partition_leader_epoch)
}
