//! Walking the record batches of a segment file (Kafka's `FileRecords.batchesFrom` /
//! `FileLogInputStream`): headers only for reads and lookups, whole batches with CRC for recovery.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use kactor_protocol::records::{
    decompress, verify_crc, BatchHeader, Compression, RecordError, BATCH_HEADER_LEN,
    DEFAULT_DECOMPRESSION_LIMIT, LOG_OVERHEAD, MAGIC_V2,
};

/// What the log needs to know about one stored batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub position: u64,
    pub size: u32,
    pub header: BatchHeader,
}

impl BatchInfo {
    pub fn end(&self) -> u64 {
        self.position + self.size as u64
    }
}

/// Reads batch headers from `[start, end)` of a file through a small buffer, so walking an
/// index interval of small batches costs one or two `pread`s instead of one per batch.
pub struct HeaderScanner<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
    buf_len: usize,
}

/// Bytes read per header `pread`: one page, a few small batches' headers.
pub const SCAN_CHUNK: usize = 4096;

impl<'a> HeaderScanner<'a> {
    pub fn new(file: &'a File, start: u64, end: u64) -> Self {
        HeaderScanner {
            file,
            pos: start,
            end,
            buf: vec![0; SCAN_CHUNK],
            buf_start: 0,
            buf_len: 0,
        }
    }

    /// The next complete batch's header. `Ok(None)` at the end or before a batch cut short by
    /// `end` (a torn tail is the recovery's business, readers just stop there). A header that
    /// cannot be parsed is an error: the data below the recovery point is trusted.
    pub fn next_batch(&mut self) -> io::Result<Option<BatchInfo>> {
        if self.pos + BATCH_HEADER_LEN as u64 > self.end {
            return Ok(None);
        }
        let pos = self.pos;
        let in_buf = pos >= self.buf_start
            && pos + BATCH_HEADER_LEN as u64 <= self.buf_start + self.buf_len as u64;
        if !in_buf {
            let want = SCAN_CHUNK.min((self.end - pos) as usize);
            self.file.read_exact_at(&mut self.buf[..want], pos)?;
            super::stats::add_log_bytes_read(want);
            self.buf_start = pos;
            self.buf_len = want;
        }
        let at = (pos - self.buf_start) as usize;
        let header = BatchHeader::parse(&self.buf[at..at + BATCH_HEADER_LEN])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let size = header.total_size() as u64;
        if pos + size > self.end {
            return Ok(None);
        }
        self.pos = pos + size;
        Ok(Some(BatchInfo {
            position: pos,
            size: size as u32,
            header,
        }))
    }
}

/// Why recovery stopped before the end of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidTail {
    Truncated,
    Corrupt(RecordError),
    BadOffset(String),
}

/// Reads `[0, size)` sequentially in large chunks, fully validating every batch (size, magic, CRC,
/// offsets increasing and within a segment's relative range). Calls `on_batch` for each valid one
/// and returns the number of valid bytes plus why it stopped early, if it did.
pub fn validate_batches(
    file: &File,
    size: u64,
    segment_base_offset: i64,
    mut on_batch: impl FnMut(&BatchInfo),
) -> io::Result<(u64, Option<InvalidTail>)> {
    let mut reader = ChunkReader {
        file,
        size,
        buf: Vec::new(),
        buf_start: 0,
    };
    let mut pos = 0u64;
    let mut prev_next_offset = segment_base_offset;
    // Up to and including the magic byte: enough to size the batch and tell its format.
    const PREFIX: usize = LOG_OVERHEAD + 5;
    loop {
        if pos == size {
            return Ok((pos, None));
        }
        if pos + PREFIX as u64 > size {
            return Ok((pos, Some(InvalidTail::Truncated)));
        }
        let prefix = reader.bytes(pos, PREFIX)?;
        let batch_length = i32::from_be_bytes(prefix[8..12].try_into().expect("4 bytes"));
        let magic = prefix[16] as i8;
        if magic != MAGIC_V2 {
            return Ok((
                pos,
                Some(InvalidTail::Corrupt(RecordError::UnsupportedMagic(magic))),
            ));
        }
        if (batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Ok((
                pos,
                Some(InvalidTail::Corrupt(RecordError::InvalidLength(
                    batch_length,
                ))),
            ));
        }
        let need = LOG_OVERHEAD + batch_length as usize;
        if pos + need as u64 > size {
            return Ok((pos, Some(InvalidTail::Truncated)));
        }
        let batch = reader.bytes(pos, need)?;
        if let Err(e) = verify_crc(batch) {
            return Ok((pos, Some(InvalidTail::Corrupt(e))));
        }
        let header = BatchHeader::parse(batch).expect("checked by verify_crc");
        if header.last_offset_delta < 0
            || header.base_offset < prev_next_offset
            || header.last_offset() - segment_base_offset > i32::MAX as i64
        {
            let reason = format!(
                "batch [{}, {}] after offset {} in segment {}",
                header.base_offset,
                header.last_offset(),
                prev_next_offset,
                segment_base_offset
            );
            return Ok((pos, Some(InvalidTail::BadOffset(reason))));
        }
        prev_next_offset = header.next_offset();
        on_batch(&BatchInfo {
            position: pos,
            size: need as u32,
            header,
        });
        pos += need as u64;
    }
}

/// Sequential reads in 1 MiB chunks; a batch larger than a chunk gets a buffer of its own size.
struct ChunkReader<'a> {
    file: &'a File,
    size: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl ChunkReader<'_> {
    const CHUNK: usize = 1 << 20;

    /// `len` bytes at `pos`; the caller checked `pos + len <= size`.
    fn bytes(&mut self, pos: u64, len: usize) -> io::Result<&[u8]> {
        let covered =
            pos >= self.buf_start && pos + len as u64 <= self.buf_start + self.buf.len() as u64;
        if !covered {
            let want = len.max(Self::CHUNK).min((self.size - pos) as usize);
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, pos)?;
            self.buf_start = pos;
        }
        let at = (pos - self.buf_start) as usize;
        Ok(&self.buf[at..at + len])
    }
}

/// Offsets and timestamps of the records of one batch (`data` = the whole batch), for
/// ListOffsets by timestamp and max-timestamp lookups. Decompresses when needed.
pub fn record_offsets_and_timestamps(data: &[u8]) -> Result<Vec<(i64, i64)>, RecordError> {
    let header = BatchHeader::parse(data)?;
    let payload = &data[BATCH_HEADER_LEN..header.total_size().min(data.len())];
    let inflated;
    let mut buf: &[u8] = match header.compression()? {
        Compression::None => payload,
        codec => {
            inflated = decompress(codec, payload, DEFAULT_DECOMPRESSION_LIMIT)?;
            &inflated
        }
    };
    let log_append_time =
        header.timestamp_type() == kactor_protocol::records::TimestampType::LogAppendTime;
    let mut out = Vec::with_capacity(header.records_count.max(0) as usize);
    for _ in 0..header.records_count.max(0) {
        let len = read_varlong(&mut buf)?;
        if len < 0 || len as usize > buf.len() {
            return Err(RecordError::InvalidRecord(format!("record length {len}")));
        }
        let mut rec = &buf[..len as usize];
        buf = &buf[len as usize..];
        if rec.is_empty() {
            return Err(RecordError::InvalidRecord("empty record".into()));
        }
        rec = &rec[1..]; // attributes
        let ts_delta = read_varlong(&mut rec)?;
        let offset_delta = read_varlong(&mut rec)?;
        let ts = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(ts_delta)
        };
        out.push((header.base_offset + offset_delta, ts));
    }
    Ok(out)
}

fn read_varlong(buf: &mut &[u8]) -> Result<i64, RecordError> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let Some((&b, rest)) = buf.split_first() else {
            return Err(RecordError::InvalidRecord("truncated varint".into()));
        };
        *buf = rest;
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    Err(RecordError::InvalidRecord("varint too long".into()))
}
