//! A whole v2 batch as a `Bytes` handle (Kafka's `DefaultRecordBatch`) and iteration over a
//! buffer of batches back to back (Kafka's `MemoryRecords` / `ByteBufferLogInputStream`).

use bytes::Bytes;

use super::compression::{decompress, DEFAULT_DECOMPRESSION_LIMIT};
use super::record::{parse_record, Record};
use super::{
    verify_crc, BatchHeader, Compression, RecordError, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
};

/// Bytes up to and including the magic byte: enough to size a batch and tell its format.
const HEADER_SIZE_UP_TO_MAGIC: usize = 17;

/// One complete batch: its parsed header and its bytes (exactly `header.total_size()` long).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    pub header: BatchHeader,
    pub data: Bytes,
}

impl RecordBatch {
    /// Takes the first batch of `buf`; the returned `data` is a slice of `buf` holding exactly
    /// that batch. Does not check the CRC (see [`RecordBatch::verify_crc`]).
    pub fn parse(buf: &Bytes) -> Result<Self, RecordError> {
        let header = BatchHeader::parse(buf)?;
        let size = header.total_size();
        if buf.len() < size {
            return Err(RecordError::Truncated {
                needed: size,
                available: buf.len(),
            });
        }
        Ok(RecordBatch {
            header,
            data: buf.slice(..size),
        })
    }

    pub fn size_in_bytes(&self) -> usize {
        self.data.len()
    }

    pub fn verify_crc(&self) -> Result<(), RecordError> {
        verify_crc(&self.data)
    }

    pub fn compression(&self) -> Result<Compression, RecordError> {
        self.header.compression()
    }

    /// The records section as stored (compressed or not), a slice of `data`.
    pub fn payload(&self) -> Bytes {
        self.data.slice(BATCH_HEADER_LEN..)
    }

    /// The records section uncompressed: a slice for uncompressed batches, otherwise a new buffer
    /// of at most `limit` bytes.
    pub fn uncompressed_payload(&self, limit: usize) -> Result<Bytes, RecordError> {
        match self.compression()? {
            Compression::None => Ok(self.payload()),
            codec => Ok(Bytes::from(decompress(
                codec,
                &self.data[BATCH_HEADER_LEN..],
                limit,
            )?)),
        }
    }

    /// Iterates the records, inflating a compressed batch into one new buffer of at most
    /// [`DEFAULT_DECOMPRESSION_LIMIT`] bytes.
    pub fn records(&self) -> Result<RecordIter, RecordError> {
        self.records_with_limit(DEFAULT_DECOMPRESSION_LIMIT)
    }

    /// Like [`RecordBatch::records`] with a caller-chosen cap on the decompressed size.
    pub fn records_with_limit(&self, limit: usize) -> Result<RecordIter, RecordError> {
        let payload = self.uncompressed_payload(limit)?;
        Ok(RecordIter::new(payload, self.header.records_count))
    }
}

/// Iterator over the records of one batch. Yields an error (then stops) on a malformed record,
/// on fewer records than the header's count, or on bytes left over after the last record.
#[derive(Debug, Clone)]
pub struct RecordIter {
    buf: Bytes,
    pos: usize,
    remaining: i64,
    done: bool,
}

impl RecordIter {
    fn new(buf: Bytes, count: i32) -> Self {
        RecordIter {
            buf,
            pos: 0,
            remaining: i64::from(count.max(0)),
            done: false,
        }
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            if self.pos != self.buf.len() {
                return Some(Err(RecordError::InvalidRecord(format!(
                    "{} bytes left after the batch's last record",
                    self.buf.len() - self.pos
                ))));
            }
            return None;
        }
        if self.pos >= self.buf.len() {
            self.done = true;
            return Some(Err(RecordError::InvalidRecord(format!(
                "batch ended with {} of its declared records missing",
                self.remaining
            ))));
        }
        self.remaining -= 1;
        match parse_record(&self.buf, &mut self.pos) {
            Ok(r) => Some(Ok(r)),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Iterates the batches of a MemoryRecords buffer (a produce request's or fetch response's
/// records field, or a log segment slice). Each batch is a zero-copy slice of `buf`.
pub fn batches(buf: Bytes) -> BatchIter {
    BatchIter { buf, done: false }
}

/// Iterator for [`batches`]. A trailing partial batch ends the iteration quietly, as a fetch
/// response cut at `max_bytes` may end with one; an impossible length or a non-v2 magic yields
/// an error and ends it.
#[derive(Debug, Clone)]
pub struct BatchIter {
    buf: Bytes,
    done: bool,
}

impl BatchIter {
    /// Bytes not consumed yet: after the iterator ends without error, the trailing partial batch.
    pub fn remaining(&self) -> &Bytes {
        &self.buf
    }
}

impl Iterator for BatchIter {
    type Item = Result<RecordBatch, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.buf.len() < HEADER_SIZE_UP_TO_MAGIC {
            return None;
        }
        let batch_length = i32::from_be_bytes(self.buf[8..12].try_into().expect("4 bytes"));
        if (batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            self.done = true;
            return Some(Err(RecordError::InvalidLength(batch_length)));
        }
        let magic = self.buf[16] as i8;
        if magic != MAGIC_V2 {
            self.done = true;
            return Some(Err(RecordError::UnsupportedMagic(magic)));
        }
        let size = LOG_OVERHEAD + batch_length as usize;
        if self.buf.len() < size {
            self.done = true;
            return None;
        }
        let data = self.buf.split_to(size);
        match BatchHeader::parse(&data) {
            Ok(header) => Some(Ok(RecordBatch { header, data })),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
