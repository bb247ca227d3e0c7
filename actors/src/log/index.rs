//! Sparse, memory-mapped segment indexes (Kafka's `AbstractIndex`, `OffsetIndex`, `TimeIndex`).
//!
//! `.index`: 8-byte entries (relative offset u32, position u32), big-endian. `.timeindex`: 12-byte
//! entries (timestamp i64, relative offset u32). Both are preallocated to `segment.index.bytes`
//! while their segment is active and trimmed to their entries when it rolls or closes, so a
//! cleanly closed index's length is exactly its entry count times the entry size.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{Advice, MmapMut, MmapOptions};

/// Timestamp of "no entry" (Kafka's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// The file, its mapping and the number of entries in use.
#[derive(Debug)]
struct IndexFile {
    path: PathBuf,
    file: Arc<File>,
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    max_entries: usize,
    /// Bytes from the start known to have disk blocks behind them (see [`IndexFile::push`]).
    reserved: u64,
    /// The file's length was not a whole number of entries when opened (a torn write or a
    /// damaged file: Kafka's sanity check rejects such an index).
    partial_entry: bool,
}

/// Granularity of block reservation: one page of the mapping.
const RESERVE_CHUNK: u64 = 4096;

/// Allocates disk blocks for `[offset, offset + len)` of `file` without changing its length
/// (`fallocate` with `FALLOC_FL_KEEP_SIZE`), so readers and recovery see only written entries.
/// File systems without fallocate keep the sparse behaviour.
fn reserve_blocks(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor we own; no memory is passed.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(err),
    }
}

fn round_down(n: u64, multiple: usize) -> u64 {
    n - n % multiple as u64
}

impl IndexFile {
    /// Opens or creates. A new (or empty) file is preallocated to `preallocate` bytes when given
    /// (an active segment's index) and stays empty otherwise (an inactive segment's, opened
    /// lazily); an existing one keeps its length, and every whole entry in it is counted (the
    /// caller trims the count to the valid prefix).
    fn open(path: &Path, entry_size: usize, preallocate: Option<i32>) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut len = file.metadata()?.len();
        let partial_entry = len % entry_size as u64 != 0;
        let created = len == 0;
        if let (true, Some(max_index_bytes)) = (created, preallocate) {
            len = round_down(max_index_bytes.max(0) as u64, entry_size);
            file.set_len(len)?;
        }
        let mut index = IndexFile {
            path: path.to_path_buf(),
            file: Arc::new(file),
            mmap: None,
            entry_size,
            // A new file holds no entries: not even a scan of its (sparse) pages is needed.
            entries: if created {
                0
            } else {
                (len / entry_size as u64) as usize
            },
            max_entries: 0,
            reserved: 0,
            partial_entry,
        };
        index.remap(len)?;
        Ok(index)
    }

    fn remap(&mut self, len: u64) -> io::Result<()> {
        self.mmap = None;
        self.mmap = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is private to this struct and the file is ours alone: nothing
            // else in the process truncates it while mapped (every `set_len` goes through
            // `resize`, which drops the mapping first), so accesses stay within the file.
            let map = unsafe { MmapOptions::new().len(len as usize).map_mut(&*self.file)? };
            // No readahead on a fault: entries are appended a page at a time and looked up by
            // binary search, and the readahead of a fault on an index file with little in it
            // brought in (zeroed) up to the device's `read_ahead_kb` of it: 8 MiB of each
            // 10 MiB index on this VM's disk, so 128 MiB of page cache for 8 new partitions
            // holding a few KiB of entries, and as much zeroing on the produce path.
            map.advise(Advice::Random)?;
            Some(map)
        };
        self.max_entries = len as usize / self.entry_size;
        self.entries = self.entries.min(self.max_entries);
        Ok(())
    }

    fn entry(&self, i: usize) -> &[u8] {
        let m = self.mmap.as_ref().expect("index entry within the mapping");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Writes the next entry through the mapping. The file is sparse, and a store into a page
    /// with no disk block behind it raises SIGBUS when the file system is full, so each page
    /// gets its blocks reserved (fallocate) before its first entry: a full disk is then an
    /// ENOSPC error here, once per page, instead of a signal that kills the broker.
    fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        debug_assert_eq!(bytes.len(), self.entry_size);
        let at = self.entries * self.entry_size;
        let end = (at + self.entry_size) as u64;
        if end > self.reserved {
            // From the mark, or the page holding the entry if the mark is behind it, to the
            // page boundary past the entry. A failure leaves the mark: the next push asks again.
            let from = self
                .reserved
                .max(round_down(at as u64, RESERVE_CHUNK as usize));
            let to = end.div_ceil(RESERVE_CHUNK) * RESERVE_CHUNK;
            reserve_blocks(&self.file, from, to - from)?;
            self.reserved = to;
        }
        let m = self.mmap.as_mut().expect("index not full");
        m[at..at + self.entry_size].copy_from_slice(bytes);
        self.entries += 1;
        Ok(())
    }

    fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    /// Sets the file length (rounded down to whole entries), remapping. Kafka's `resize`.
    fn resize(&mut self, new_len: i64) -> io::Result<()> {
        let new_len = round_down(new_len.max(0) as u64, self.entry_size);
        let cur = self.file.metadata()?.len();
        if new_len == cur && (self.mmap.is_some() || new_len == 0) {
            self.max_entries = new_len as usize / self.entry_size;
            return Ok(());
        }
        self.mmap = None;
        self.file.set_len(new_len)?;
        self.partial_entry = false;
        // Shrinking frees the blocks past the new end; growing adds holes.
        self.reserved = self.reserved.min(new_len);
        self.remap(new_len)
    }

    fn trim_to_valid_size(&mut self) -> io::Result<()> {
        self.resize((self.entries * self.entry_size) as i64)
    }

    fn flush(&self) -> io::Result<()> {
        match &self.mmap {
            Some(m) => m.flush(),
            None => Ok(()),
        }
    }

    fn rename(&mut self, to: &Path) -> io::Result<()> {
        std::fs::rename(&self.path, to)?;
        self.path = to.to_path_buf();
        Ok(())
    }

    /// Binary search for the last entry whose key is <= `target` (keys non-decreasing).
    fn largest_lower_bound(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        if self.entries == 0 || key(self.entry(0)) > target {
            return None;
        }
        super::stats::add_index_probe();
        let (mut lo, mut hi) = (0usize, self.entries - 1);
        while lo < hi {
            super::stats::add_index_probe();
            let mid = lo + (hi - lo).div_ceil(2);
            if key(self.entry(mid)) <= target {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

/// An offset-index entry: absolute offset and the byte position of the batch it points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

/// A time-index entry: a timestamp and an offset at or after which it is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

/// `.index`: offset -> file position, for the last offset of an indexed batch.
#[derive(Debug)]
pub struct OffsetIndex {
    base_offset: i64,
    inner: IndexFile,
}

pub const OFFSET_ENTRY_SIZE: usize = 8;
pub const TIME_ENTRY_SIZE: usize = 12;

impl OffsetIndex {
    /// Opens or creates, preallocating a new file to `max_index_bytes` (an active segment's).
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: i32) -> io::Result<Self> {
        Self::open_with(path, base_offset, Some(max_index_bytes))
    }

    /// Opens at the length found (an inactive segment's index, mapped on first use); a missing
    /// file is created empty.
    pub fn open_existing(path: &Path, base_offset: i64) -> io::Result<Self> {
        Self::open_with(path, base_offset, None)
    }

    fn open_with(path: &Path, base_offset: i64, preallocate: Option<i32>) -> io::Result<Self> {
        let mut index = OffsetIndex {
            base_offset,
            inner: IndexFile::open(path, OFFSET_ENTRY_SIZE, preallocate)?,
        };
        index.inner.entries = index.valid_prefix();
        Ok(index)
    }

    /// The file held bytes after its last whole entry when opened.
    pub fn has_partial_entry(&self) -> bool {
        self.inner.partial_entry
    }

    /// Entries up to the first that breaks the invariants (strictly increasing offsets and
    /// positions, the first position past the segment start). A crash can leave the zeros of
    /// preallocation after the last real entry: they end the index here.
    fn valid_prefix(&self) -> usize {
        let mut prev: Option<(u32, u32)> = None;
        for i in 0..self.inner.entries {
            let e = self.inner.entry(i);
            let (rel, pos) = (be_u32(e), be_u32(&e[4..]));
            let ok = match prev {
                None => pos > 0,
                Some((prel, ppos)) => rel > prel && pos > ppos,
            };
            if !ok || rel > i32::MAX as u32 {
                return i;
            }
            prev = Some((rel, pos));
        }
        self.inner.entries
    }

    fn parse(&self, i: usize) -> OffsetPosition {
        let e = self.inner.entry(i);
        OffsetPosition {
            offset: self.base_offset + be_u32(e) as i64,
            position: be_u32(&e[4..]),
        }
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
    pub fn entries(&self) -> usize {
        self.inner.entries
    }
    pub fn max_entries(&self) -> usize {
        self.inner.max_entries
    }
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }
    pub fn file(&self) -> &Arc<File> {
        &self.inner.file
    }
    pub fn entry(&self, i: usize) -> OffsetPosition {
        self.parse(i)
    }

    /// The last entry, or `(base_offset, 0)` when empty.
    pub fn last_entry(&self) -> OffsetPosition {
        if self.inner.entries == 0 {
            OffsetPosition {
                offset: self.base_offset,
                position: 0,
            }
        } else {
            self.parse(self.inner.entries - 1)
        }
    }

    /// The largest entry with offset <= `target`, or `(base_offset, 0)`.
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let rel = target - self.base_offset;
        match self.inner.largest_lower_bound(rel, |e| be_u32(e) as i64) {
            Some(i) => self.parse(i),
            None => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
        }
    }

    /// The largest entry with position <= `position`, or `(base_offset, 0)`.
    pub fn lookup_by_position(&self, position: u64) -> OffsetPosition {
        match self
            .inner
            .largest_lower_bound(position as i64, |e| be_u32(&e[4..]) as i64)
        {
            Some(i) => self.parse(i),
            None => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
        }
    }

    /// Appends; the offset must be above the last entry's and within relative range.
    pub fn append(&mut self, offset: i64, position: u32) -> io::Result<()> {
        let rel = offset - self.base_offset;
        if !(0..=i32::MAX as i64).contains(&rel) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("offset {offset} out of index range"),
            ));
        }
        if self.inner.entries > 0 {
            let last = self.last_entry().offset;
            if offset <= last {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("offset {offset} not above the last index entry {last}"),
                ));
            }
        }
        if self.is_full() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "offset index is full",
            ));
        }
        let mut e = [0u8; OFFSET_ENTRY_SIZE];
        e[..4].copy_from_slice(&(rel as u32).to_be_bytes());
        e[4..].copy_from_slice(&position.to_be_bytes());
        self.inner.push(&e)
    }

    /// Removes every entry with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = match self
            .inner
            .largest_lower_bound(offset - self.base_offset, |e| be_u32(e) as i64)
        {
            None => 0,
            Some(i) if self.parse(i).offset == offset => i,
            Some(i) => i + 1,
        };
        self.inner.entries = keep;
    }

    pub fn reset(&mut self) {
        self.inner.entries = 0;
    }
    pub fn resize(&mut self, max_index_bytes: i32) -> io::Result<()> {
        self.inner.resize(max_index_bytes as i64)
    }
    pub fn trim_to_valid_size(&mut self) -> io::Result<()> {
        self.inner.trim_to_valid_size()
    }
    pub fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    pub fn rename(&mut self, to: &Path) -> io::Result<()> {
        self.inner.rename(to)
    }
    /// File length in bytes (preallocated or trimmed).
    pub fn file_len(&self) -> usize {
        self.inner.max_entries * OFFSET_ENTRY_SIZE
    }
}

/// `.timeindex`: timestamp -> the offset from which that timestamp is reached.
#[derive(Debug)]
pub struct TimeIndex {
    base_offset: i64,
    inner: IndexFile,
}

impl TimeIndex {
    /// Opens or creates, preallocating a new file to `max_index_bytes` (an active segment's).
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: i32) -> io::Result<Self> {
        Self::open_with(path, base_offset, Some(max_index_bytes))
    }

    /// Opens at the length found (an inactive segment's index, mapped on first use); a missing
    /// file is created empty.
    pub fn open_existing(path: &Path, base_offset: i64) -> io::Result<Self> {
        Self::open_with(path, base_offset, None)
    }

    fn open_with(path: &Path, base_offset: i64, preallocate: Option<i32>) -> io::Result<Self> {
        let mut index = TimeIndex {
            base_offset,
            inner: IndexFile::open(path, TIME_ENTRY_SIZE, preallocate)?,
        };
        index.inner.entries = index.valid_prefix();
        Ok(index)
    }

    /// The file held bytes after its last whole entry when opened.
    pub fn has_partial_entry(&self) -> bool {
        self.inner.partial_entry
    }

    /// Entries while timestamps strictly increase and offsets do not decrease; preallocated zeros
    /// after a crash end the index.
    fn valid_prefix(&self) -> usize {
        let mut prev: Option<(i64, u32)> = None;
        for i in 0..self.inner.entries {
            let e = self.inner.entry(i);
            let (ts, rel) = (be_i64(e), be_u32(&e[8..]));
            let ok = match prev {
                None => ts >= 0 && !(ts == 0 && rel == 0),
                Some((pts, prel)) => ts > pts && rel >= prel,
            };
            if !ok || rel > i32::MAX as u32 {
                return i;
            }
            prev = Some((ts, rel));
        }
        self.inner.entries
    }

    fn parse(&self, i: usize) -> TimestampOffset {
        let e = self.inner.entry(i);
        TimestampOffset {
            timestamp: be_i64(e),
            offset: self.base_offset + be_u32(&e[8..]) as i64,
        }
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }
    pub fn entries(&self) -> usize {
        self.inner.entries
    }
    pub fn file(&self) -> &Arc<File> {
        &self.inner.file
    }
    pub fn entry(&self, i: usize) -> TimestampOffset {
        self.parse(i)
    }

    /// Kafka keeps the last slot free for the entry written when the segment rolls.
    pub fn is_full(&self) -> bool {
        self.inner.entries + 1 >= self.inner.max_entries
    }

    /// The last entry, or `(NO_TIMESTAMP, base_offset)` when empty.
    pub fn last_entry(&self) -> TimestampOffset {
        if self.inner.entries == 0 {
            TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: self.base_offset,
            }
        } else {
            self.parse(self.inner.entries - 1)
        }
    }

    /// The largest entry with timestamp <= `timestamp`, or `(NO_TIMESTAMP, base_offset)`.
    pub fn lookup(&self, timestamp: i64) -> TimestampOffset {
        match self.inner.largest_lower_bound(timestamp, be_i64) {
            Some(i) => self.parse(i),
            None => TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: self.base_offset,
            },
        }
    }

    /// Appends if `timestamp` is above the last entry's (Kafka's `maybeAppend`).
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> io::Result<()> {
        if !skip_full_check && self.is_full() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "time index is full",
            ));
        }
        let last = self.last_entry();
        if self.inner.entries > 0 && offset < last.offset {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "time index offset {offset} below the last entry's {}",
                    last.offset
                ),
            ));
        }
        if timestamp > last.timestamp {
            if self.inner.entries >= self.inner.max_entries {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "time index has no room",
                ));
            }
            let rel = offset - self.base_offset;
            let mut e = [0u8; TIME_ENTRY_SIZE];
            e[..8].copy_from_slice(&timestamp.to_be_bytes());
            e[8..].copy_from_slice(&(rel as u32).to_be_bytes());
            self.inner.push(&e)?;
        }
        Ok(())
    }

    /// Removes every entry with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let mut keep = self.inner.entries;
        while keep > 0 && self.parse(keep - 1).offset >= offset {
            keep -= 1;
        }
        self.inner.entries = keep;
    }

    pub fn reset(&mut self) {
        self.inner.entries = 0;
    }
    pub fn resize(&mut self, max_index_bytes: i32) -> io::Result<()> {
        self.inner.resize(max_index_bytes as i64)
    }
    pub fn trim_to_valid_size(&mut self) -> io::Result<()> {
        self.inner.trim_to_valid_size()
    }
    pub fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    pub fn rename(&mut self, to: &Path) -> io::Result<()> {
        self.inner.rename(to)
    }
    pub fn file_len(&self) -> usize {
        self.inner.max_entries * TIME_ENTRY_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `path` in the page cache (mincore over a fresh read-only mapping).
    fn resident_pages(path: &Path) -> usize {
        let file = File::open(path).unwrap();
        // SAFETY: a read-only mapping of a file nothing truncates during the test.
        let map = unsafe { MmapOptions::new().map(&file).unwrap() };
        let page = 4096;
        let mut vec = vec![0u8; map.len().div_ceil(page)];
        // SAFETY: `vec` has one byte per page of the mapping, as mincore(2) requires.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr() as *mut libc::c_void,
                map.len(),
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        vec.iter().filter(|b| *b & 1 == 1).count()
    }

    #[test]
    fn a_new_index_brings_in_only_the_pages_its_entries_touch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let time_path = dir.path().join("00000000000000000000.timeindex");
        let max = 10 << 20;
        let mut idx = OffsetIndex::open(&path, 0, max).unwrap();
        let mut time = TimeIndex::open(&time_path, 0, max).unwrap();
        // 600 entries: two pages of the offset index (8 bytes each), two of the time index (12).
        for i in 1..=600i64 {
            idx.append(i * 10, (i * 4096) as u32).unwrap();
            time.maybe_append(1000 + i, i * 10, false).unwrap();
        }
        assert_eq!(idx.lookup(3000).offset, 3000);
        for p in [&path, &time_path] {
            let pages = resident_pages(p);
            assert!(
                pages <= 4,
                "{} has {pages} pages in memory for 2 written",
                p.display()
            );
        }
    }

    #[test]
    fn offset_index_append_lookup_truncate_trim_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80, "preallocated");
        assert_eq!(idx.entries(), 0);
        assert_eq!(
            idx.lookup(150),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        for i in 1..=5u32 {
            idx.append(100 + 10 * i as i64, 1000 * i).unwrap();
        }
        assert!(idx.append(150, 9000).is_err(), "offsets must increase");
        assert_eq!(
            idx.lookup(99),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(125),
            OffsetPosition {
                offset: 120,
                position: 2000
            }
        );
        assert_eq!(
            idx.lookup(150),
            OffsetPosition {
                offset: 150,
                position: 5000
            }
        );
        assert_eq!(
            idx.lookup(1_000_000),
            OffsetPosition {
                offset: 150,
                position: 5000
            }
        );
        assert_eq!(idx.lookup_by_position(3500).offset, 130);
        idx.truncate_to(140);
        assert_eq!(idx.entries(), 3);
        idx.truncate_to(135);
        assert_eq!(idx.entries(), 3);
        idx.trim_to_valid_size().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
        drop(idx);
        let idx = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(idx.entries(), 3);
        assert_eq!(
            idx.last_entry(),
            OffsetPosition {
                offset: 130,
                position: 3000
            }
        );
    }

    #[test]
    fn offset_index_full_and_preallocated_zeros_are_not_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&path, 0, 20).unwrap(); // rounds down to 2 entries
        idx.append(1, 10).unwrap();
        assert!(!idx.is_full());
        idx.append(2, 20).unwrap();
        assert!(idx.is_full());
        assert!(idx.append(3, 30).is_err());
        drop(idx);
        // Untrimmed after a "crash": the file has room for 2 entries and holds 2; zeros after
        // them would be ignored, as this shows with a bigger preallocation.
        let path2 = dir.path().join("1.index");
        let mut idx = OffsetIndex::open(&path2, 0, 800).unwrap();
        idx.append(5, 100).unwrap();
        drop(idx);
        let idx = OffsetIndex::open(&path2, 0, 800).unwrap();
        assert_eq!(idx.entries(), 1);
    }

    #[test]
    fn time_index_maybe_append_and_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.timeindex");
        let mut idx = TimeIndex::open(&path, 10, 12 * 4).unwrap();
        idx.maybe_append(-1, 10, false).unwrap();
        assert_eq!(idx.entries(), 0, "NO_TIMESTAMP is never indexed");
        idx.maybe_append(1000, 12, false).unwrap();
        idx.maybe_append(1000, 15, false).unwrap();
        assert_eq!(idx.entries(), 1, "equal timestamps are not appended");
        idx.maybe_append(2000, 20, false).unwrap();
        assert!(
            idx.maybe_append(3000, 19, false).is_err(),
            "offsets may not go back"
        );
        idx.maybe_append(3000, 25, false).unwrap();
        assert!(idx.is_full(), "last slot reserved for the roll");
        assert!(idx.maybe_append(4000, 30, false).is_err());
        idx.maybe_append(4000, 30, true).unwrap();
        assert_eq!(
            idx.lookup(500),
            TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: 10
            }
        );
        assert_eq!(
            idx.lookup(2500),
            TimestampOffset {
                timestamp: 2000,
                offset: 20
            }
        );
        idx.truncate_to(25);
        assert_eq!(
            idx.last_entry(),
            TimestampOffset {
                timestamp: 2000,
                offset: 20
            }
        );
        idx.trim_to_valid_size().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
    }
}
