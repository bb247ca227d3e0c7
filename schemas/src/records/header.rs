//! The fixed 61-byte record batch v2 header (the header fields of Kafka's `DefaultRecordBatch`):
//! parse, CRC check, and the two in-place rewrites the leader does on append (base offset,
//! partition leader epoch), which lie before the CRC'd range.

use thiserror::Error;

/// base offset (8) + batch length (4): the part of a batch the length does not count.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the whole v2 header, up to and including the records count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Byte offset of the CRC field; the CRC-32C covers everything after it (attributes..end).
pub const CRC_OFFSET: usize = 17;
pub(crate) const ATTRIBUTES_OFFSET: usize = 21;
pub(crate) const MAX_TIMESTAMP_OFFSET: usize = 35;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;

/// Attribute bits of a v2 batch (Kafka's `DefaultRecordBatch`).
pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub const CONTROL_FLAG_MASK: i16 = 0x20;
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

/// Header values a producer leaves unset (Kafka's `RecordBatch.NO_*`).
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;
pub const MAGIC_V2: i8 = 2;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecordError {
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    #[error("invalid batch length {0}")]
    InvalidLength(i32),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("unknown compression codec {0}")]
    UnknownCompression(i16),
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error("compression error: {0}")]
    Compression(String),
    #[error("decompressed records exceed the limit of {limit} bytes")]
    DecompressedTooLarge { limit: usize },
    #[error("record batch of {size} bytes exceeds the maximum of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// Records the topic's key or timestamp rules refuse (Kafka's `RecordValidationException`),
    /// every one of the batch.
    #[error("{} records refused by the topic's rules", .0.len())]
    Rejected(Vec<super::validate::RecordFault>),
}

impl RecordError {
    /// The Kafka error code a produce response carries for this failure, following the exception
    /// Kafka's produce path raises: `CorruptRecordException` (CORRUPT_MESSAGE, 2) for integrity
    /// failures, `InvalidRecordException` (INVALID_RECORD, 87) for well-formed but invalid
    /// batches, `RecordTooLargeException` (MESSAGE_TOO_LARGE, 10) for size limits.
    pub fn error_code(&self) -> i16 {
        match self {
            RecordError::Truncated { .. }
            | RecordError::InvalidLength(_)
            | RecordError::CrcMismatch { .. }
            | RecordError::Compression(_)
            | RecordError::UnknownCompression(_) => 2,
            RecordError::UnsupportedMagic(_)
            | RecordError::InvalidRecord(_)
            | RecordError::DecompressedTooLarge { .. } => 87,
            RecordError::TooLarge { .. } => 10,
            RecordError::InvalidTimestamp(_) => 32,
            // Kafka's `processRecordErrors`: any timestamp fault makes it INVALID_TIMESTAMP.
            RecordError::Rejected(faults) if faults.iter().any(|f| f.kind.is_timestamp()) => 32,
            RecordError::Rejected(_) => 87,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// The codec id stored in attribute bits 0–2.
    pub fn id(self) -> i16 {
        self as i16
    }

    /// The producer's `compression.type` names (the topic config spells `None` "uncompressed"
    /// and adds "producer"; mapping those is the caller's business).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Parses a codec name as `compression.type` spells it (`uncompressed` is the topic
    /// config's name for none; `producer` is not a codec and yields `None`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" | "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    pub fn from_attributes(attributes: i16) -> Result<Self, RecordError> {
        Ok(match attributes & 0x07 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(RecordError::UnknownCompression(other)),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The decoded fixed header of one v2 batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

impl BatchHeader {
    /// Parses the header at the start of `buf`. Checks only what the header alone can tell
    /// (length, magic); use [`verify_crc`] on the whole batch for integrity.
    pub fn parse(buf: &[u8]) -> Result<Self, RecordError> {
        if buf.len() < BATCH_HEADER_LEN {
            // The magic byte sits at offset 16; report it if we have it, since an old-format
            // batch is shorter than a v2 header and "truncated" would mislead.
            if buf.len() > 16 && buf[16] as i8 != MAGIC_V2 {
                return Err(RecordError::UnsupportedMagic(buf[16] as i8));
            }
            return Err(RecordError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        }
        let magic = buf[16] as i8;
        if magic != MAGIC_V2 {
            return Err(RecordError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(buf, 8);
        if (batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(RecordError::InvalidLength(batch_length));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length,
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic,
            crc: be_i32(buf, CRC_OFFSET) as u32,
            attributes: be_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            records_count: be_i32(buf, 57),
        })
    }

    /// Bytes the batch occupies in a log or a produce request, including [`LOG_OVERHEAD`].
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn compression(&self) -> Result<Compression, RecordError> {
        Compression::from_attributes(self.attributes)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & 0x08 != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
    /// KIP-98 "delete horizon" flag set by the cleaner on batches carrying tombstones.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & 0x40 != 0
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
}

/// Verifies the CRC-32C of one complete batch (`batch` spans exactly `total_size()` bytes).
pub fn verify_crc(batch: &[u8]) -> Result<(), RecordError> {
    let header = BatchHeader::parse(batch)?;
    let size = header.total_size();
    if batch.len() < size {
        return Err(RecordError::Truncated {
            needed: size,
            available: batch.len(),
        });
    }
    let computed = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..size]);
    if computed != header.crc {
        return Err(RecordError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// CRC-32C of one complete batch's attributes..end range, i.e. the value its CRC field must hold.
pub fn compute_crc(batch: &[u8]) -> Result<u32, RecordError> {
    let header = BatchHeader::parse(batch)?;
    let size = header.total_size();
    if batch.len() < size {
        return Err(RecordError::Truncated {
            needed: size,
            available: batch.len(),
        });
    }
    Ok(crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..size]))
}

/// Recomputes and stores the CRC after an in-place change inside the CRC'd range.
pub fn write_crc(batch: &mut [u8]) -> Result<(), RecordError> {
    let crc = compute_crc(batch)?;
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Rewrites the base offset in place; outside the CRC'd range, so the CRC stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites the partition leader epoch in place; outside the CRC'd range too.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}
