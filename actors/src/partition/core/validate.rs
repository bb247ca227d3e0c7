//! Leader-side append validation and offset assignment (Kafka's `ProduceRequest.validateRecords`,
//! the checks in `UnifiedLog.analyzeAndValidateRecords` and `LogValidator`): header checks and
//! CRC without decompressing, then offsets and the leader epoch rewritten in the header,
//! LogAppendTime stamped, and recompression only when the topic's codec differs.

use bytes::{Bytes, BytesMut};
use kactor_protocol::records::{
    recompress, set_base_offset, set_log_append_time, set_max_timestamp,
    set_partition_leader_epoch, validate_batch_with, AppendOrigin, BatchHeader, Compression,
    RecordError, RecordFault, RecordFaultKind, TimestampType, ValidationOptions, BATCH_HEADER_LEN,
    LOG_OVERHEAD, MAGIC_V2,
};

use super::config::{PartitionConfig, TopicCompression};
use super::error::{PartitionError, RecordErrorDetail};
use super::TopicPartition;

/// The bytes of a validated batch, ready to append.
#[derive(Debug, Clone)]
pub enum AppendPayload {
    /// The batch in one buffer: the request's own (its only user) or a rewritten copy.
    Whole(Bytes),
    /// The batch's rewritten header and the untouched rest, still in the request buffer that
    /// other partitions' batches share (a produce request for several partitions): only the
    /// 61 header bytes were copied.
    Split {
        header: [u8; BATCH_HEADER_LEN],
        body: Bytes,
    },
}

impl AppendPayload {
    pub fn len(&self) -> usize {
        match self {
            AppendPayload::Whole(b) => b.len(),
            AppendPayload::Split { body, .. } => BATCH_HEADER_LEN + body.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The batch's (rewritten) header bytes.
    pub fn header(&self) -> &[u8] {
        match self {
            AppendPayload::Whole(b) => &b[..BATCH_HEADER_LEN.min(b.len())],
            AppendPayload::Split { header, .. } => header,
        }
    }
    /// The batch in one buffer (joins a split one: a copy; for tests and callers that need it).
    pub fn to_bytes(&self) -> Bytes {
        match self {
            AppendPayload::Whole(b) => b.clone(),
            AppendPayload::Split { header, body } => {
                let mut joined = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
                joined.extend_from_slice(header);
                joined.extend_from_slice(body);
                joined.freeze()
            }
        }
    }
}

/// One produce payload after validation: ready to append.
#[derive(Debug, Clone)]
pub struct ValidatedAppend {
    pub records: AppendPayload,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub records_count: u64,
    /// The broker time stamped on the batch, or -1 for CreateTime topics.
    pub log_append_time_ms: i64,
}

fn invalid(message: impl Into<String>) -> PartitionError {
    PartitionError::InvalidRecord(message.into())
}

/// What Kafka's messages about refused records name: the partition and the accepted
/// timestamp range (computed as Kafka does, wrapping where a bound is near `i64::MAX`).
struct Wording<'a> {
    tp: &'a TopicPartition,
    min_timestamp: i64,
    max_timestamp: i64,
}

impl Wording<'_> {
    fn fault(&self, f: &RecordFault) -> RecordErrorDetail {
        let message = match &f.kind {
            RecordFaultKind::MissingKey => format!(
                "Compacted topic cannot accept message without key in topic partition {}",
                self.tp
            ),
            RecordFaultKind::TimestampOutOfRange { timestamp, offset } => format!(
                "Timestamp {timestamp} of message with offset {offset} is out of range. The \
                 timestamp should be within [{}, {}]",
                self.min_timestamp, self.max_timestamp
            ),
            RecordFaultKind::LogAppendTimeFromProducer {
                offset,
                timestamp,
                key_len,
                value_len,
            } => format!(
                "Invalid timestamp type in message DefaultRecord(offset={offset}, \
                 timestamp={timestamp}, key={key_len} bytes, value={value_len} bytes). Producer \
                 should not set timestamp type to LogAppendTime."
            ),
        };
        RecordErrorDetail {
            batch_index: f.batch_index,
            message: Some(message),
        }
    }

    /// Kafka's `LogValidator.processRecordErrors`: the whole batch fails, naming every record.
    fn rejected(&self, faults: &[RecordFault]) -> PartitionError {
        let record_errors: Vec<RecordErrorDetail> = faults.iter().map(|f| self.fault(f)).collect();
        let timestamp = faults.iter().any(|f| f.kind.is_timestamp());
        let message = if timestamp {
            "One or more records have been rejected due to invalid timestamp".to_string()
        } else {
            let first: Vec<String> = record_errors
                .iter()
                .take(3)
                .map(|e| {
                    format!(
                        "RecordError(batchIndex={}, message='{}')",
                        e.batch_index,
                        e.message.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            format!(
                "One or more records have been rejected due to {} record errors in total, and \
                 only showing the first three errors at most: [{}]",
                record_errors.len(),
                first.join(", ")
            )
        };
        PartitionError::RecordsRejected {
            timestamp,
            message,
            record_errors,
        }
    }

    fn error(&self, e: RecordError) -> PartitionError {
        match e {
            RecordError::Rejected(faults) => self.rejected(&faults),
            other => from_record_error(other),
        }
    }
}

fn from_record_error(e: RecordError) -> PartitionError {
    match e {
        RecordError::TooLarge { size, max } => PartitionError::MessageTooLarge { size, max },
        RecordError::InvalidTimestamp(m) => PartitionError::InvalidTimestamp(m),
        RecordError::Compression(m) => PartitionError::UndecodableRecords(m),
        other if other.error_code() == kactor_protocol::errors::INVALID_RECORD => {
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

/// Kafka's `ProduceRequest.validateRecords`, which the Produce handler runs before any other
/// check of a partition's records: exactly one v2 batch, and zstd only from Produce v7 (the
/// partition checks the same shape again, for appends that do not come through the handler).
pub fn check_produce_records(records: &[u8], version: i16) -> Result<(), PartitionError> {
    let header = single_batch(records)?;
    if version < 7 && header.compression() == Ok(Compression::Zstd) {
        return Err(PartitionError::UnsupportedCompressionType(format!(
            "Produce requests with version {version} are not allowed to use ZStandard compression"
        )));
    }
    Ok(())
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

/// How far a produced compressed batch may inflate while its records are checked. Kafka walks
/// every record of a compressed batch with no such bound; kactor reads them from a streaming
/// decoder (memory stays near one record), so the bound only caps the CPU a crafted batch can
/// cost: at zstd's speed, a fraction of a second.
const PRODUCE_DECOMPRESSION_LIMIT: usize = 256 << 20;

/// Validates `tp`'s produce payload and assigns offsets from `next_offset`.
pub fn validate_and_assign(
    tp: &TopicPartition,
    records: Bytes,
    next_offset: i64,
    leader_epoch: i32,
    cfg: &PartitionConfig,
    now_ms: i64,
    origin: AppendOrigin,
) -> Result<ValidatedAppend, PartitionError> {
    let header = single_batch(&records)?;
    // Offsets are the leader's to assign; Kafka refuses a client batch that claims any (v2
    // batches only, checked before size and CRC).
    if origin == AppendOrigin::Client && header.base_offset != 0 {
        return Err(invalid(format!(
            "The baseOffset of the record batch in the append to {tp} should be 0, but it is {}",
            header.base_offset
        )));
    }
    let wording = Wording {
        tp,
        min_timestamp: now_ms.wrapping_sub(cfg.timestamp_before_max_ms),
        max_timestamp: now_ms.wrapping_add(cfg.timestamp_after_max_ms),
    };
    let opts = ValidationOptions {
        origin,
        max_batch_size: cfg.max_message_bytes,
        topic_timestamp_type: cfg.timestamp_type,
        timestamp_bounds: Some((
            now_ms.saturating_sub(cfg.timestamp_before_max_ms),
            now_ms.saturating_add(cfg.timestamp_after_max_ms),
        )),
        compacted: cfg.cleanup_compact,
        inspect_compressed: Some(PRODUCE_DECOMPRESSION_LIMIT),
    };
    let v = validate_batch_with(&records, &opts).map_err(|e| wording.error(e))?;

    let log_append_time = cfg.timestamp_type == TimestampType::LogAppendTime;
    // Base offset and leader epoch lie before the CRC'd range; stamping LogAppendTime or
    // correcting the max timestamp changes bytes inside it, and the new CRC needs the batch in
    // one buffer.
    let header_only = !log_append_time
        && (!v.records_checked
            || (header.timestamp_type() == TimestampType::CreateTime
                && header.max_timestamp == v.max_timestamp));
    let mut buf = match needs_recompression(cfg.compression, v.compression) {
        // The header is rewritten below: in place when this payload is the only user of its
        // buffer (the request frame); else other partitions' payloads in the same frame may
        // still be read, so the rewrite goes into a copy of the header alone when it stays
        // there, or of the whole batch.
        None => match records.try_into_mut() {
            Ok(unique) => unique,
            Err(shared) if header_only => {
                let mut h = [0u8; BATCH_HEADER_LEN];
                h.copy_from_slice(&shared[..BATCH_HEADER_LEN]);
                set_base_offset(&mut h, next_offset);
                set_partition_leader_epoch(&mut h, leader_epoch);
                let last_offset = next_offset + v.last_offset_delta as i64;
                return Ok(ValidatedAppend {
                    records: AppendPayload::Split {
                        header: h,
                        body: shared.slice(BATCH_HEADER_LEN..),
                    },
                    first_offset: next_offset,
                    last_offset,
                    max_timestamp: v.max_timestamp,
                    offset_of_max_timestamp: last_offset,
                    records_count: v.records_count as u64,
                    log_append_time_ms: -1,
                });
            }
            Err(shared) => BytesMut::from(&shared[..]),
        },
        Some(target) => {
            BytesMut::from(&recompress(&records, target).map_err(from_record_error)?[..])
        }
    };
    set_base_offset(&mut buf, next_offset);
    set_partition_leader_epoch(&mut buf, leader_epoch);
    let (log_append_time_ms, max_timestamp) = if log_append_time {
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
        records: AppendPayload::Whole(buf.freeze()),
        first_offset: next_offset,
        last_offset,
        max_timestamp,
        offset_of_max_timestamp: last_offset,
        records_count: v.records_count as u64,
        log_append_time_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::testing::batch;
    use kactor_protocol::records::verify_crc;

    fn assign(records: Bytes, cfg: &PartitionConfig) -> ValidatedAppend {
        let tp = TopicPartition::new("t", 0);
        validate_and_assign(&tp, records, 40, 7, cfg, 1_000, AppendOrigin::Client).unwrap()
    }

    #[test]
    fn a_shared_request_buffer_is_split_not_copied() {
        let original = batch(&[b"a", b"bc"], 1_000);
        let frame = Bytes::from([original.to_vec(), original.to_vec()].concat());
        let slice = frame.slice(..original.len());
        let v = assign(slice, &PartitionConfig::default());
        let AppendPayload::Split { header, body } = &v.records else {
            panic!("expected a split payload, got {:?}", v.records);
        };
        // The body is the request's own memory, not a copy.
        assert_eq!(body.as_ptr(), frame[BATCH_HEADER_LEN..].as_ptr());
        assert_eq!(&header[8..12], &original[8..12]);
        let joined = v.records.to_bytes();
        let h = BatchHeader::parse(&joined).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (40, 7));
        assert_eq!(&joined[16..], &original[16..]);
        verify_crc(&joined).unwrap();
        assert_eq!(v.records.len(), original.len());
        assert_eq!((v.first_offset, v.last_offset), (40, 41));
    }

    fn refuse(records: Bytes, cfg: &PartitionConfig) -> PartitionError {
        let tp = TopicPartition::new("t", 3);
        validate_and_assign(&tp, records, 40, 7, cfg, 10_000, AppendOrigin::Client).unwrap_err()
    }

    #[test]
    fn a_client_batch_must_start_at_offset_zero() {
        let mut b = batch(&[b"a"], 1_000).to_vec();
        b[..8].copy_from_slice(&42i64.to_be_bytes());
        let e = refuse(Bytes::from(b), &PartitionConfig::default());
        assert_eq!(e.code(), kactor_protocol::errors::INVALID_RECORD);
        assert_eq!(e.produce_error_message(), None);
        assert!(e.produce_reports_log_start_offset());
    }

    #[test]
    fn every_refused_record_is_named_in_kafkas_words() {
        // `batch` writes keyless records: all four fail on a compacted topic.
        let compacted = PartitionConfig {
            cleanup_compact: true,
            ..PartitionConfig::default()
        };
        let e = refuse(batch(&[b"a", b"b", b"c", b"d"], 9_000), &compacted);
        assert_eq!(e.code(), kactor_protocol::errors::INVALID_RECORD);
        let key_message =
            "Compacted topic cannot accept message without key in topic partition t-3";
        assert_eq!(
            e.record_errors()
                .iter()
                .map(|r| (r.batch_index, r.message.as_deref().unwrap()))
                .collect::<Vec<_>>(),
            (0..4).map(|i| (i, key_message)).collect::<Vec<_>>()
        );
        let shown = format!("RecordError(batchIndex=0, message='{key_message}')");
        assert_eq!(
            e.produce_error_message().unwrap(),
            format!(
                "One or more records have been rejected due to 4 record errors in total, and \
                 only showing the first three errors at most: [{shown}, {}, {}]",
                shown.replace("=0,", "=1,"),
                shown.replace("=0,", "=2,")
            )
        );

        // Timestamps 1_000 and 1_001 against now 10_000 with 8_999 ms allowed in the past:
        // only the first is too old; any timestamp fault makes it INVALID_TIMESTAMP.
        let bounded = PartitionConfig {
            timestamp_before_max_ms: 8_999,
            ..PartitionConfig::default()
        };
        let e = refuse(batch(&[b"a", b"b"], 1_000), &bounded);
        assert_eq!(e.code(), kactor_protocol::errors::INVALID_TIMESTAMP);
        assert_eq!(
            e.produce_error_message().as_deref(),
            Some("One or more records have been rejected due to invalid timestamp")
        );
        assert_eq!(e.record_errors().len(), 1);
        assert_eq!(
            e.record_errors()[0].message.as_deref(),
            Some(
                "Timestamp 1000 of message with offset 0 is out of range. The timestamp should \
                 be within [1001, 3610000]"
            )
        );
    }

    #[test]
    fn a_unique_buffer_is_rewritten_in_place() {
        let v = assign(batch(&[b"a"], 1_000), &PartitionConfig::default());
        assert!(matches!(v.records, AppendPayload::Whole(_)));
        assert_eq!(
            BatchHeader::parse(v.records.header()).unwrap().base_offset,
            40
        );
    }

    #[test]
    fn rewrites_inside_the_crc_range_still_copy_the_whole_batch() {
        // LogAppendTime changes attributes and max timestamp, which the CRC covers.
        let cfg = PartitionConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..PartitionConfig::default()
        };
        let original = batch(&[b"a"], 1_000);
        let _frame_holder = original.clone();
        let v = assign(original, &cfg);
        let AppendPayload::Whole(b) = &v.records else {
            panic!("expected a whole payload");
        };
        assert_eq!(BatchHeader::parse(b).unwrap().max_timestamp, 1_000);
        assert_eq!(v.log_append_time_ms, 1_000);
        verify_crc(b).unwrap();
    }
}
