//! Leader-side append validation and offset assignment (Kafka's `ProduceRequest.validateRecords`,
//! the checks in `UnifiedLog.analyzeAndValidateRecords` and `LogValidator`): header checks and
//! CRC without decompressing, then offsets and the leader epoch rewritten in the header,
//! LogAppendTime stamped, and recompression only when the topic's codec differs.

use bytes::{Bytes, BytesMut};
use kactor_protocol::records::{
    set_base_offset, set_partition_leader_epoch, verify_crc, BatchHeader, Compression, RecordError,
    TimestampType, LOG_OVERHEAD, MAGIC_V2,
};

use super::config::{PartitionConfig, TopicCompression};
use super::error::PartitionError;

/// Attribute bit for LogAppendTime and the header offsets we rewrite when stamping it.
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const ATTRIBUTES_AT: usize = 21;
const MAX_TIMESTAMP_AT: usize = 35;
const CRC_AT: usize = 17;

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

/// Client batches must be self-consistent before we trust their header (`LogValidator`).
fn check_client_batch(h: &BatchHeader) -> Result<(), PartitionError> {
    let count_from_offsets = h.last_offset_delta as i64 + 1;
    if count_from_offsets <= 0 {
        return Err(invalid(format!(
            "Batch has an invalid offset range: [{}, {}]",
            h.base_offset,
            h.last_offset()
        )));
    }
    if h.records_count <= 0 {
        return Err(invalid(format!(
            "Invalid reported count for record batch: {}",
            h.records_count
        )));
    }
    if count_from_offsets != h.records_count as i64 {
        return Err(invalid(format!(
            "Inconsistent batch offset range [{}, {}] and count of records {}",
            h.base_offset,
            h.last_offset(),
            h.records_count
        )));
    }
    if h.is_control() {
        return Err(invalid("Clients are not allowed to write control records"));
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(invalid(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            h.base_sequence, h.producer_id
        )));
    }
    Ok(())
}

/// Kafka's CreateTime bounds, checked on the batch's max timestamp (the records engineer's
/// record-level validation checks each record).
fn check_timestamps(
    h: &BatchHeader,
    cfg: &PartitionConfig,
    now_ms: i64,
) -> Result<(), PartitionError> {
    if cfg.timestamp_type != TimestampType::CreateTime
        || h.timestamp_type() != TimestampType::CreateTime
    {
        return Ok(());
    }
    for ts in [h.base_timestamp, h.max_timestamp] {
        if ts < 0 {
            continue;
        }
        let too_old = now_ms.saturating_sub(ts) > cfg.timestamp_before_max_ms;
        let too_new = ts.saturating_sub(now_ms) > cfg.timestamp_after_max_ms;
        if too_old || too_new {
            return Err(PartitionError::InvalidTimestamp(format!(
                "Timestamp {ts} of message is out of range. The timestamp should be within [{}, {}]",
                now_ms.saturating_sub(cfg.timestamp_before_max_ms),
                now_ms.saturating_add(cfg.timestamp_after_max_ms)
            )));
        }
    }
    Ok(())
}

/// Sets the LogAppendTime attribute and max timestamp, then the CRC they are covered by.
fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attrs =
        i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
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
    records: &Bytes,
    next_offset: i64,
    leader_epoch: i32,
    cfg: &PartitionConfig,
    now_ms: i64,
) -> Result<ValidatedAppend, PartitionError> {
    let header = single_batch(records)?;
    check_client_batch(&header)?;
    if header.total_size() > cfg.max_message_bytes {
        return Err(PartitionError::MessageTooLarge {
            size: header.total_size(),
            max: cfg.max_message_bytes,
        });
    }
    verify_crc(records).map_err(|e| PartitionError::CorruptMessage(e.to_string()))?;
    let codec = header
        .compression()
        .map_err(|e| PartitionError::CorruptMessage(e.to_string()))?;
    check_timestamps(&header, cfg, now_ms)?;

    let mut buf = match needs_recompression(cfg.compression, codec) {
        None => BytesMut::from(&records[..]),
        Some(target) => BytesMut::from(&recompress(records, target)?[..]),
    };
    set_base_offset(&mut buf, next_offset);
    set_partition_leader_epoch(&mut buf, leader_epoch);
    let log_append_time_ms = if cfg.timestamp_type == TimestampType::LogAppendTime {
        stamp_log_append_time(&mut buf, now_ms);
        now_ms
    } else {
        -1
    };
    let last_offset = next_offset + header.last_offset_delta as i64;
    let max_timestamp = if log_append_time_ms >= 0 {
        now_ms
    } else {
        header.max_timestamp
    };
    Ok(ValidatedAppend {
        records: buf.freeze(),
        first_offset: next_offset,
        last_offset,
        max_timestamp,
        offset_of_max_timestamp: last_offset,
        records_count: header.records_count as u64,
        log_append_time_ms,
    })
}

/// Rewrites the batch with `target` (the records codec's job; wired to it once it exports one).
fn recompress(_records: &Bytes, target: Compression) -> Result<Bytes, PartitionError> {
    Err(PartitionError::Storage(format!(
        "recompression to {} is not available yet",
        target.name()
    )))
}
