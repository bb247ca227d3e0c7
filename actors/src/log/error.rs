//! Errors of the storage engine (Kafka's `KafkaStorageException`, `OffsetOutOfRangeException`,
//! `RecordTooLargeException`, `CorruptRecordException`, ...). The partition maps them to wire
//! error codes in the one place that owns that mapping.

use std::io;
use std::path::PathBuf;

use kactor_protocol::records::RecordError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LogError {
    /// Any I/O failure: the log dir is unusable (Kafka marks the dir offline).
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// A fetch or truncation target outside `[log_start_offset, log_end_offset]`.
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// A batch that cannot be parsed (bad magic, length, truncated).
    #[error("corrupt record batch: {0}")]
    CorruptRecord(#[from] RecordError),
    /// A batch larger than `max.message.bytes` (RECORD_TOO_LARGE).
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: usize, max: i32 },
    /// A batch larger than `segment.bytes` (RECORD_BATCH_TOO_LARGE): it could never fit a segment.
    #[error("record batch of {size} bytes exceeds segment.bytes {segment_bytes}")]
    RecordBatchTooLarge { size: usize, segment_bytes: i32 },
    /// Offsets that go backwards: the caller assigned them wrong (Kafka's
    /// `UnexpectedAppendOffsetException` / `InvalidOffsetException`).
    #[error("invalid append offsets: {0}")]
    InvalidOffset(String),
    /// A file whose content cannot be trusted and cannot be repaired automatically.
    #[error("corrupt {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A checkpoint or properties file in an unknown format.
    #[error("malformed {path}: {reason}")]
    Malformed { path: PathBuf, reason: String },
    /// An invalid topic-level configuration value.
    #[error("invalid value {value:?} for configuration {name}: {reason}")]
    InvalidConfig {
        name: String,
        value: String,
        reason: String,
    },
    /// The directory name is not `<topic>-<partition>`.
    #[error("not a partition directory: {0}")]
    NotAPartitionDir(PathBuf),
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;
