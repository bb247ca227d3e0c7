//! Partition-level failures and their Kafka error codes (Kafka's `Errors` for the exceptions
//! `Partition` / `UnifiedLog` / `ReplicaManager` raise on the produce, fetch and offset paths).

use thiserror::Error;

/// Why one record inside a rejected batch is invalid (Kafka's `RecordError`: the record's index
/// in its batch and a message), returned in the produce response's `record_errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordErrorDetail {
    pub batch_index: i32,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PartitionError {
    #[error("this broker is not the leader of the partition")]
    NotLeaderOrFollower,
    #[error("request leader epoch {requested} is older than the current {current}")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    #[error("request leader epoch {requested} is newer than the current {current}")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("corrupt record batch: {0}")]
    CorruptMessage(String),
    /// A compressed records section its codec cannot read (garbage, a truncated stream): Kafka's
    /// validator meets an unexpected exception there and answers UNKNOWN_SERVER_ERROR.
    #[error("cannot decompress the record batch: {0}")]
    UndecodableRecords(String),
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    /// Records the topic's key or timestamp rules refuse (Kafka's `RecordValidationException`):
    /// INVALID_TIMESTAMP if a timestamp is at fault, else INVALID_RECORD. The produce response
    /// carries the message and a row per refused record.
    #[error("{message}")]
    RecordsRejected {
        timestamp: bool,
        message: String,
        record_errors: Vec<RecordErrorDetail>,
    },
    #[error("unsupported compression type: {0}")]
    UnsupportedCompressionType(String),
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    #[error("invalid required acks {0}")]
    InvalidRequiredAcks(i16),
    #[error("ISR size {isr} is below min.insync.replicas {min_isr}")]
    NotEnoughReplicas { isr: usize, min_isr: usize },
    #[error("offset not available yet: {0}")]
    OffsetNotAvailable(String),
    #[error("policy violation: {0}")]
    PolicyViolation(String),
    #[error("log storage failure: {0}")]
    Storage(String),
    /// The replica went offline earlier (its log dir failed, or it was given up after
    /// repeated panics): KAFKA_STORAGE_ERROR like `Storage`, but not a new I/O failure to
    /// report.
    #[error("replica offline: {0}")]
    ReplicaOffline(String),
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// Idempotence / transaction rules (`crate::producer`).
    #[error(transparent)]
    ProducerState(#[from] crate::producer::ProducerStateError),
}

impl PartitionError {
    /// The one mapping from partition failures to the wire's error codes.
    pub fn code(&self) -> i16 {
        use kactor_protocol::errors::*;
        match self {
            PartitionError::NotLeaderOrFollower => NOT_LEADER_OR_FOLLOWER,
            PartitionError::FencedLeaderEpoch { .. } => FENCED_LEADER_EPOCH,
            PartitionError::UnknownLeaderEpoch { .. } => UNKNOWN_LEADER_EPOCH,
            PartitionError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
            PartitionError::CorruptMessage(_) => CORRUPT_MESSAGE,
            PartitionError::UndecodableRecords(_) => UNKNOWN_SERVER_ERROR,
            PartitionError::InvalidRecord(_) => INVALID_RECORD,
            PartitionError::RecordsRejected {
                timestamp: true, ..
            } => INVALID_TIMESTAMP,
            PartitionError::RecordsRejected { .. } => INVALID_RECORD,
            PartitionError::UnsupportedCompressionType(_) => UNSUPPORTED_COMPRESSION_TYPE,
            PartitionError::MessageTooLarge { .. } => MESSAGE_TOO_LARGE,
            PartitionError::InvalidTimestamp(_) => INVALID_TIMESTAMP,
            PartitionError::InvalidRequiredAcks(_) => INVALID_REQUIRED_ACKS,
            PartitionError::NotEnoughReplicas { .. } => NOT_ENOUGH_REPLICAS,
            PartitionError::OffsetNotAvailable(_) => OFFSET_NOT_AVAILABLE,
            PartitionError::PolicyViolation(_) => POLICY_VIOLATION,
            PartitionError::Storage(_) | PartitionError::ReplicaOffline(_) => KAFKA_STORAGE_ERROR,
            PartitionError::UnknownTopicOrPartition => UNKNOWN_TOPIC_OR_PARTITION,
            PartitionError::ProducerState(e) => e.code(),
        }
    }

    /// Per-record errors for the produce response (empty unless records were refused).
    pub fn record_errors(&self) -> &[RecordErrorDetail] {
        match self {
            PartitionError::RecordsRejected { record_errors, .. } => record_errors,
            _ => &[],
        }
    }

    /// The message a produce response carries: Kafka sends one only for refused records
    /// (its `hasCustomErrorMessage`), null for every other failure.
    pub fn produce_error_message(&self) -> Option<String> {
        match self {
            PartitionError::RecordsRejected { message, .. } => Some(message.clone()),
            _ => None,
        }
    }

    /// Whether a failed produce reports the partition's log start offset. Kafka's
    /// `ReplicaManager.appendToLocalLog` answers -1 for the failures it expects (unknown or
    /// moved partition, size limits, corruption, storage) and the log start offset for every
    /// other one (refused records, producer state, min ISR, ...).
    pub fn produce_reports_log_start_offset(&self) -> bool {
        !matches!(
            self,
            PartitionError::UnknownTopicOrPartition
                | PartitionError::NotLeaderOrFollower
                | PartitionError::MessageTooLarge { .. }
                | PartitionError::CorruptMessage(_)
                | PartitionError::Storage(_)
                | PartitionError::ReplicaOffline(_)
        )
    }
}
