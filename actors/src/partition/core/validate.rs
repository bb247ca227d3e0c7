//! Leader-side append validation and offset assignment (Kafka's `ProduceRequest.validateRecords`,
//! the checks in `UnifiedLog.analyzeAndValidateRecords` and `LogValidator`): header checks and
//! CRC without decompressing, then offsets and the leader epoch rewritten in the header,
//! LogAppendTime stamped, and recompression only when the topic's codec differs.

use bytes::{Bytes, BytesMut};
use kactor_protocol::records::{
    recompress, set_base_offset, set_log_append_time, set_max_timestamp,
    set_partition_leader_epoch, validate_batch_with, AppendOrigin, BatchHeader, Compression,
    RecordError, TimestampType, ValidationOptions, LOG_OVERHEAD, MAGIC_V2,
};

use super::config::{PartitionConfig, TopicCompression};
use super::error::PartitionError;

/// One produce payload after validation: ready to append.
#[derive(Debug, Clone)]
pub struct ValidatedAppend {
    pub records: Bytes,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub records_count: u64,
    /// The broker time stamped on the batch, or -1 for CreateTime topics.
    pub log_append_time_ms: i64,
}

fn invalid(message: impl Into<String>) -> PartitionError {
    PartitionError::InvalidRecord {
        message: message.into(),
        record_errors: Vec::new(),
    }
}

fn from_record_error(e: RecordError) -> PartitionError {
    match e {
        RecordError::TooLarge { size, max } => PartitionError::MessageTooLarge { size, max },
        RecordError::InvalidTimestamp(m) => PartitionError::InvalidTimestamp(m),
        other if other.error_code() == super::error::codes::INVALID_RECORD => {
            invalid(other.to_string())
        }
        other => PartitionError::CorruptMessage(other.to_string()),
    }
}

/// The batch's one header after the produce-level shape checks (exactly one v2 batch).
fn single_batch(records: &[u8]) -> Result<BatchHeader, PartitionError> {
    if records.len() < LOG_OVERHEAD {
        return Err(invalid(
            "Produce requests must have at least one record batch per partition",
        ));
    }
    if records.len() > 16 && records[16] as i8 != MAGIC_V2 {
        return Err(invalid(
            "Produce requests are only allowed to contain record batches with magic version 2",
        ));
    }
    let header = BatchHeader::parse(records).map_err(from_record_error)?;
    let size = header.total_size();
    if size > records.len() {
        // A batch cut short never parses as a batch in Kafka's iterator, which then sees none.
        return Err(invalid(
            "Produce requests must have at least one record batch per partition",
        ));
    }
    if size < records.len() {
        return Err(invalid(
            "Produce requests are only allowed to contain exactly one record batch per partition",
        ));
    }
    Ok(header)
}

/// Whether the topic's `compression.type` demands rewriting this batch.
pub fn needs_recompression(
    topic: TopicCompression,
    batch_codec: Compression,
) -> Option<Compression> {
    match topic {
        TopicCompression::Producer => None,
        TopicCompression::Codec(c) if c == batch_codec => None,
        TopicCompression::Codec(c) => Some(c),
    }
}

/// Validates one partition's produce payload and assigns offsets from `next_offset`.
pub fn validate_and_assign(
    records: Bytes,
    next_offset: i64,
    leader_epoch: i32,
    cfg: &PartitionConfig,
    now_ms: i64,
    origin: AppendOrigin,
) -> Result<ValidatedAppend, PartitionError> {
    single_batch(&records)?;
    let opts = ValidationOptions {
        origin,
        max_batch_size: cfg.max_message_bytes,
        topic_timestamp_type: cfg.timestamp_type,
        timestamp_bounds: Some((
            now_ms.saturating_sub(cfg.timestamp_before_max_ms),
            now_ms.saturating_add(cfg.timestamp_after_max_ms),
        )),
        compacted: cfg.cleanup_compact,
        inspect_compressed: None,
    };
    let v = validate_batch_with(&records, &opts).map_err(from_record_error)?;

    let mut buf = match needs_recompression(cfg.compression, v.compression) {
        // The header is rewritten below: in place when this payload is the only user of its
        // buffer (the request frame), else in a copy, since other partitions' payloads in the
        // same frame may still be read.
        None => records
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..])),
        Some(target) => {
            BytesMut::from(&recompress(&records, target).map_err(from_record_error)?[..])
        }
    };
    set_base_offset(&mut buf, next_offset);
    set_partition_leader_epoch(&mut buf, leader_epoch);
    let (log_append_time_ms, max_timestamp) = if cfg.timestamp_type == TimestampType::LogAppendTime
    {
        set_log_append_time(&mut buf, now_ms).map_err(from_record_error)?;
        (now_ms, now_ms)
    } else {
        // Kafka stores the largest record timestamp it saw, not what the producer claimed.
        if v.records_checked {
            set_max_timestamp(&mut buf, TimestampType::CreateTime, v.max_timestamp)
                .map_err(from_record_error)?;
        }
        (-1, v.max_timestamp)
    };
    let last_offset = next_offset + v.last_offset_delta as i64;
    Ok(ValidatedAppend {
        records: buf.freeze(),
        first_offset: next_offset,
        last_offset,
        max_timestamp,
        offset_of_max_timestamp: last_offset,
        records_count: v.records_count as u64,
        log_append_time_ms,
    })
}
