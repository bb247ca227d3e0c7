//! Produce-path checks and rewrites for v2 batches (the magic-v2 facts of Kafka's
//! `LogValidator`, `ProduceRequest.validateRecords` and `UnifiedLog.analyzeAndValidateRecords`,
//! plus `DefaultRecordBatch.setMaxTimestamp`). Compressed batches are checked by header and CRC
//! only unless the caller opts in to walking their records
//! ([`ValidationOptions::inspect_compressed`], which the produce path does, as Kafka does):
//! they are read from a streaming decoder one record at a time, never inflated whole.

use bytes::Bytes;

use std::io::Read;

use super::compression::{compress, decompress, decompressing_reader, DEFAULT_DECOMPRESSION_LIMIT};
use super::record::{parse_raw_record, skim_record};
use super::{
    verify_crc, write_crc, BatchHeader, Compression, RecordError, TimestampType, ATTRIBUTES_OFFSET,
    BATCH_HEADER_LEN, COMPRESSION_CODEC_MASK, LOG_OVERHEAD, MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
};

/// Who is appending, which decides how strict validation is (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: all checks, including "no control batches" and "at least one record".
    Client,
    /// The broker's own coordinators (transaction markers, group offsets): control batches allowed.
    Coordinator,
    /// A follower copying the leader's log, or the Raft log: integrity checks only (the cleaner
    /// leaves empty batches behind, so counts are not checked).
    Replication,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationOptions {
    pub origin: AppendOrigin,
    /// `message.max.bytes` / `max.message.bytes`: the largest batch accepted, in bytes.
    pub max_batch_size: usize,
    /// The topic's `message.timestamp.type`.
    pub topic_timestamp_type: TimestampType,
    /// For CreateTime topics: the accepted record timestamp range `[now - before.max.ms,
    /// now + after.max.ms]`; records with no timestamp (-1) are exempt, as in Kafka.
    pub timestamp_bounds: Option<(i64, i64)>,
    /// `cleanup.policy=compact`: every record needs a key.
    pub compacted: bool,
    /// When set, the records of compressed batches are read from a streaming decoder (which may
    /// inflate them to this many bytes in all) and checked like uncompressed ones. When unset,
    /// compressed batches get header and CRC checks only; their timestamp bounds are then
    /// checked on the header's base and max timestamps and a compacted topic's key rule is not
    /// checked.
    pub inspect_compressed: Option<usize>,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions {
            origin: AppendOrigin::Client,
            max_batch_size: usize::MAX,
            topic_timestamp_type: TimestampType::CreateTime,
            timestamp_bounds: None,
            compacted: false,
            inspect_compressed: None,
        }
    }
}

/// What the partition needs from a batch that passed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidatedBatch {
    pub size_in_bytes: usize,
    pub records_count: i32,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    /// When the records were walked, the largest record timestamp actually present (Kafka
    /// rewrites the header's max timestamp to it for CreateTime topics; see
    /// [`set_max_timestamp`]); otherwise the header's value.
    pub max_timestamp: i64,
    pub timestamp_type: TimestampType,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    pub compression: Compression,
    /// True when the records were walked: uncompressed batches, or compressed ones with
    /// [`ValidationOptions::inspect_compressed`], for non-replication origins.
    pub records_checked: bool,
}

fn invalid(msg: impl Into<String>) -> RecordError {
    RecordError::InvalidRecord(msg.into())
}

/// Validates a producer's records for one partition (produce v3+: exactly one v2 batch).
pub fn validate_batch(batch: &[u8]) -> Result<ValidatedBatch, RecordError> {
    validate_batch_with(batch, &ValidationOptions::default())
}

/// Validates exactly one v2 batch spanning all of `batch` under `opts`.
pub fn validate_batch_with(
    batch: &[u8],
    opts: &ValidationOptions,
) -> Result<ValidatedBatch, RecordError> {
    let header = BatchHeader::parse(batch)?;
    let size = header.total_size();
    if batch.len() < size {
        return Err(RecordError::Truncated {
            needed: size,
            available: batch.len(),
        });
    }
    if batch.len() > size {
        return Err(invalid(
            "produce records must hold exactly one record batch",
        ));
    }
    if size > opts.max_batch_size {
        return Err(RecordError::TooLarge {
            size,
            max: opts.max_batch_size,
        });
    }
    verify_crc(batch)?;
    let compression = header.compression()?;
    let count = header.records_count;

    if opts.origin == AppendOrigin::Client {
        let count_from_offsets = i64::from(header.last_offset_delta) + 1;
        if count_from_offsets <= 0 {
            return Err(invalid(format!(
                "batch has an invalid last offset delta {}",
                header.last_offset_delta
            )));
        }
        if count <= 0 {
            return Err(invalid(format!(
                "invalid reported count for record batch: {count}"
            )));
        }
        if count_from_offsets != i64::from(count) {
            return Err(invalid(format!(
                "inconsistent last offset delta {} and count of records {count}",
                header.last_offset_delta
            )));
        }
        if header.is_control() {
            return Err(invalid("clients are not allowed to write control records"));
        }
        if header.has_producer_id() && header.base_sequence < 0 {
            return Err(invalid(format!(
                "invalid sequence number {} in record batch with producer id {}",
                header.base_sequence, header.producer_id
            )));
        }
    }

    let leader_validated = opts.origin != AppendOrigin::Replication;
    // Only the broker sets LogAppendTime. Kafka checks it per record: on a LogAppendTime topic
    // every record fails, on a CreateTime topic only records without a timestamp do.
    if leader_validated
        && count > 0
        && header.timestamp_type() == TimestampType::LogAppendTime
        && opts.topic_timestamp_type == TimestampType::LogAppendTime
    {
        return Err(lat_from_producer());
    }

    let mut max_timestamp = header.max_timestamp;
    let records_checked =
        leader_validated && (compression == Compression::None || opts.inspect_compressed.is_some());
    if records_checked {
        if count < 0 || i64::from(count) - 1 != i64::from(header.last_offset_delta) {
            return Err(invalid(format!(
                "last offset delta {} does not match record count {count}",
                header.last_offset_delta
            )));
        }
        let payload = &batch[BATCH_HEADER_LEN..];
        max_timestamp = match (compression, opts.inspect_compressed) {
            (Compression::None, _) => walk_records(payload, &header, opts)?,
            (codec, limit) => walk_compressed_records(
                codec,
                payload,
                &header,
                opts,
                limit.unwrap_or(DEFAULT_DECOMPRESSION_LIMIT),
            )?,
        };
    } else if leader_validated
        && opts.topic_timestamp_type == TimestampType::CreateTime
        && count > 0
    {
        if let Some(bounds) = opts.timestamp_bounds {
            check_timestamp(header.base_timestamp, bounds)?;
            check_timestamp(header.max_timestamp, bounds)?;
        }
    }

    Ok(ValidatedBatch {
        size_in_bytes: size,
        records_count: count,
        last_offset_delta: header.last_offset_delta,
        base_timestamp: header.base_timestamp,
        max_timestamp,
        timestamp_type: header.timestamp_type(),
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        base_sequence: header.base_sequence,
        is_transactional: header.is_transactional(),
        is_control: header.is_control(),
        compression,
        records_checked,
    })
}

fn lat_from_producer() -> RecordError {
    RecordError::InvalidTimestamp("producer should not set timestamp type to LogAppendTime".into())
}

/// Whether a record timestamp is acceptable under the topic's bounds (no timestamp always is).
#[inline]
fn within(timestamp: i64, (min, max): (i64, i64)) -> bool {
    timestamp == super::NO_TIMESTAMP || (min..=max).contains(&timestamp)
}

fn check_timestamp(timestamp: i64, (min, max): (i64, i64)) -> Result<(), RecordError> {
    if !within(timestamp, (min, max)) {
        return Err(RecordError::InvalidTimestamp(format!(
            "timestamp {timestamp} is out of range; it should be within [{min}, {max}]"
        )));
    }
    Ok(())
}

/// Checks every record of an uncompressed records section: offset deltas exactly 0..count-1,
/// each record's length consistent with its fields, nothing left over, plus the topic's key and
/// timestamp rules. Returns the max record timestamp.
///
/// Two passes only for a bad batch: [`walk_records_fast`] accepts or refuses without detail,
/// and a refusal is walked again by [`walk_records_detailed`], which names the fault. The
/// detailed walk decides; the fast one only spares valid batches its cost.
fn walk_records(
    payload: &[u8],
    header: &BatchHeader,
    opts: &ValidationOptions,
) -> Result<i64, RecordError> {
    match walk_records_fast(payload, header, opts) {
        Some(max_timestamp) => Ok(max_timestamp),
        None => walk_records_detailed(payload, header, opts),
    }
}

/// [`walk_records_detailed`]'s rules, answering only valid (`Some(max timestamp)`) or not.
fn walk_records_fast(
    payload: &[u8],
    header: &BatchHeader,
    opts: &ValidationOptions,
) -> Option<i64> {
    let bounds = match opts.topic_timestamp_type {
        TimestampType::CreateTime => opts.timestamp_bounds,
        TimestampType::LogAppendTime => None,
    };
    let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    let mut pos = 0;
    let mut max_timestamp = i64::MIN;
    for expected in 0..header.records_count {
        let r = skim_record(payload, &mut pos)?;
        if r.offset_delta != expected || (opts.compacted && !r.has_key) {
            return None;
        }
        let timestamp = header.base_timestamp.wrapping_add(r.timestamp_delta);
        if timestamp == super::NO_TIMESTAMP && log_append_time {
            return None;
        }
        if bounds.is_some_and(|b| !within(timestamp, b)) {
            return None;
        }
        max_timestamp = max_timestamp.max(timestamp);
    }
    if pos != payload.len() {
        return None;
    }
    Some(if header.records_count > 0 {
        max_timestamp
    } else {
        header.max_timestamp
    })
}

fn walk_records_detailed(
    payload: &[u8],
    header: &BatchHeader,
    opts: &ValidationOptions,
) -> Result<i64, RecordError> {
    let mut pos = 0;
    let mut max_timestamp = i64::MIN;
    for expected in 0..header.records_count {
        if pos >= payload.len() {
            return Err(too_few_records(header, expected));
        }
        max_timestamp = max_timestamp.max(check_record(payload, &mut pos, expected, header, opts)?);
    }
    if pos != payload.len() {
        return Err(invalid(format!(
            "{} bytes left after the batch's last record",
            payload.len() - pos
        )));
    }
    Ok(batch_max_timestamp(header, max_timestamp))
}

/// The records of a compressed batch, read from a streaming decoder under
/// [`walk_records_detailed`]'s rules, one record in memory at a time; the section may inflate
/// to `limit` bytes in all. A stream the codec cannot read is a [`RecordError::Compression`].
fn walk_compressed_records(
    codec: Compression,
    payload: &[u8],
    header: &BatchHeader,
    opts: &ValidationOptions,
    limit: usize,
) -> Result<i64, RecordError> {
    let mut stream = RecordStream::new(decompressing_reader(codec, payload, limit)?, limit);
    let mut max_timestamp = i64::MIN;
    for expected in 0..header.records_count {
        let Some(record) = stream.next_record()? else {
            return Err(too_few_records(header, expected));
        };
        max_timestamp = max_timestamp.max(check_record(record, &mut 0, expected, header, opts)?);
    }
    if stream.next_record()?.is_some() {
        return Err(invalid("records left after the batch's last record"));
    }
    Ok(batch_max_timestamp(header, max_timestamp))
}

fn too_few_records(header: &BatchHeader, found: i32) -> RecordError {
    invalid(format!(
        "batch declares {} records but holds {found}",
        header.records_count
    ))
}

/// The max timestamp of a walked batch: an empty batch (coordinator origin) keeps the header's.
fn batch_max_timestamp(header: &BatchHeader, walked_max: i64) -> i64 {
    if header.records_count > 0 {
        walked_max
    } else {
        header.max_timestamp
    }
}

/// Checks the record at `*pos` (the `expected`-th of the batch) against its own length prefix
/// and the topic's key and timestamp rules; returns its timestamp.
fn check_record(
    buf: &[u8],
    pos: &mut usize,
    expected: i32,
    header: &BatchHeader,
    opts: &ValidationOptions,
) -> Result<i64, RecordError> {
    let r = parse_raw_record(buf, pos, false)?;
    if r.offset_delta != expected {
        return Err(invalid(format!(
            "record has offset delta {} where {expected} was expected",
            r.offset_delta
        )));
    }
    if opts.compacted && r.key.is_none() {
        return Err(invalid("compacted topic cannot accept message without key"));
    }
    let timestamp = header.base_timestamp.wrapping_add(r.timestamp_delta);
    if timestamp == super::NO_TIMESTAMP && header.timestamp_type() == TimestampType::LogAppendTime {
        return Err(lat_from_producer());
    }
    if opts.topic_timestamp_type == TimestampType::CreateTime {
        if let Some(bounds) = opts.timestamp_bounds {
            check_timestamp(timestamp, bounds)?;
        }
    }
    Ok(timestamp)
}

/// Whole records (length prefix and body) from a decompressing reader. Reads ahead in chunks
/// and keeps only the bytes of records not yet returned, so memory stays near one record
/// however far the section inflates.
struct RecordStream<R> {
    reader: R,
    buf: Vec<u8>,
    /// Where the next record starts in `buf`.
    start: usize,
    end_of_stream: bool,
    inflated: usize,
    limit: usize,
}

/// How much a refill asks the decoder for at least.
const STREAM_CHUNK: usize = 64 * 1024;

impl<R: Read> RecordStream<R> {
    fn new(reader: R, limit: usize) -> Self {
        RecordStream {
            reader,
            buf: Vec::new(),
            start: 0,
            end_of_stream: false,
            inflated: 0,
            limit,
        }
    }

    /// The next record's bytes, or None when the stream ends between records.
    fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError> {
        use super::varint::{read_unsigned_checked, zigzag_decode_i32};
        loop {
            let available = &self.buf[self.start..];
            let mut p = 0;
            match read_unsigned_checked(available, &mut p, 5) {
                Some(v) => {
                    let len = zigzag_decode_i32(v as u32);
                    if len < 0 {
                        return Err(invalid(format!("negative record length {len}")));
                    }
                    let size = p + len as usize;
                    if available.len() >= size {
                        let record = self.start..self.start + size;
                        self.start += size;
                        return Ok(Some(&self.buf[record]));
                    }
                }
                None if available.len() >= 5 => {
                    return Err(invalid("invalid record length varint"));
                }
                None => {}
            }
            if self.end_of_stream {
                return match available.len() {
                    0 => Ok(None),
                    n => Err(invalid(format!("last record truncated after {n} bytes"))),
                };
            }
            self.refill()?;
        }
    }

    fn refill(&mut self) -> Result<(), RecordError> {
        self.buf.drain(..self.start);
        self.start = 0;
        let old = self.buf.len();
        self.buf.resize(old + STREAM_CHUNK, 0);
        let n = loop {
            match self.reader.read(&mut self.buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(RecordError::Compression(e.to_string())),
            }
        };
        self.buf.truncate(old + n);
        self.end_of_stream = n == 0;
        self.inflated += n;
        if self.inflated > self.limit {
            return Err(RecordError::DecompressedTooLarge { limit: self.limit });
        }
        Ok(())
    }
}

/// Sets the timestamp type and max timestamp, then recomputes the CRC (both lie in the CRC'd
/// range). A no-op when nothing changes, as in Kafka.
pub fn set_max_timestamp(
    batch: &mut [u8],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> Result<(), RecordError> {
    let header = BatchHeader::parse(batch)?;
    if batch.len() < header.total_size() {
        return Err(RecordError::Truncated {
            needed: header.total_size(),
            available: batch.len(),
        });
    }
    if header.timestamp_type() == timestamp_type && header.max_timestamp == max_timestamp {
        return Ok(());
    }
    let attributes = match timestamp_type {
        TimestampType::LogAppendTime => header.attributes | TIMESTAMP_TYPE_MASK,
        TimestampType::CreateTime => header.attributes & !TIMESTAMP_TYPE_MASK,
    };
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    write_crc(batch)
}

/// Stamps a batch with the broker's append time (topics with
/// `message.timestamp.type=LogAppendTime`): sets the timestamp-type bit and the max timestamp,
/// recomputes the CRC.
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) -> Result<(), RecordError> {
    set_max_timestamp(batch, TimestampType::LogAppendTime, timestamp)
}

/// Rebuilds a batch with its records compressed by `target` (for a topic whose
/// `compression.type` differs from the producer's). Base offset, leader epoch, producer fields,
/// flags, timestamps and every record byte are kept; only the codec, length and CRC change.
pub fn recompress(batch: &[u8], target: Compression) -> Result<Bytes, RecordError> {
    recompress_with_limit(batch, target, DEFAULT_DECOMPRESSION_LIMIT)
}

/// [`recompress`] with a caller-chosen cap on the decompressed records size.
pub fn recompress_with_limit(
    batch: &[u8],
    target: Compression,
    limit: usize,
) -> Result<Bytes, RecordError> {
    let header = BatchHeader::parse(batch)?;
    let size = header.total_size();
    if batch.len() < size {
        return Err(RecordError::Truncated {
            needed: size,
            available: batch.len(),
        });
    }
    verify_crc(batch)?;
    let source = header.compression()?;
    let inflated;
    let records: &[u8] = if source == Compression::None {
        &batch[BATCH_HEADER_LEN..size]
    } else {
        inflated = decompress(source, &batch[BATCH_HEADER_LEN..size], limit)?;
        &inflated
    };
    // Make sure what we re-encode is a well-formed record sequence matching the header.
    let mut pos = 0;
    for _ in 0..header.records_count.max(0) {
        if pos >= records.len() {
            return Err(invalid(
                "batch holds fewer records than its header declares",
            ));
        }
        parse_raw_record(records, &mut pos, false)?;
    }
    if pos != records.len() {
        return Err(invalid("bytes left after the batch's last record"));
    }
    let payload = compress(target, records)?;
    let total = BATCH_HEADER_LEN + payload.len();
    let batch_length = i32::try_from(total - LOG_OVERHEAD).map_err(|_| RecordError::TooLarge {
        size: total,
        max: i32::MAX as usize,
    })?;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let attributes = (header.attributes & !COMPRESSION_CODEC_MASK) | target.id();
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&payload);
    write_crc(&mut out)?;
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::varint::{write_varint, write_varlong};
    use crate::records::BatchBuilder;
    use rand::{Rng, SeedableRng};

    /// One record written field by field, each field possibly wrong in one of the ways the
    /// record format can be: a lying length, a null or negative count where none is allowed,
    /// bytes left inside the record, a wrong offset delta.
    fn raw_record(rng: &mut impl Rng, out: &mut Vec<u8>, offset_delta: i32) {
        let fault = |rng: &mut dyn rand::RngCore| rng.gen_ratio(1, 40);
        let mut body = vec![0u8]; // attributes
        write_varlong(&mut body, rng.gen_range(-5..400));
        let od = if fault(rng) {
            offset_delta + rng.gen_range(-2..3)
        } else {
            offset_delta
        };
        write_varint(&mut body, od);
        let field = |rng: &mut dyn rand::RngCore, body: &mut Vec<u8>, nullable: bool| {
            if nullable && rng.gen_bool(0.3) {
                write_varint(body, if rng.gen_bool(0.8) { -1 } else { -7 });
            } else {
                let len = rng.gen_range(0..90);
                let claimed = if fault(rng) {
                    len + rng.gen_range(1..4)
                } else {
                    len
                };
                write_varint(body, claimed);
                body.extend(std::iter::repeat_n(b'x', len as usize));
            }
        };
        field(rng, &mut body, true); // key
        field(rng, &mut body, true); // value
        let headers = rng.gen_range(0..3);
        let claimed = match rng.gen_range(0..60) {
            0 => -1,
            1 => headers + 1,
            2 => 1_000,
            _ => headers,
        };
        write_varint(&mut body, claimed);
        for _ in 0..headers {
            // A null header key is invalid; a null header value is fine.
            let null_key = fault(rng);
            field(rng, &mut body, null_key);
            field(rng, &mut body, true);
        }
        if fault(rng) {
            body.push(0); // a byte the record's fields do not account for
        }
        let len = body.len() as i32;
        write_varint(
            out,
            if fault(rng) {
                len + rng.gen_range(-2..3)
            } else {
                len
            },
        );
        out.extend(body);
    }

    /// The fast walk must accept exactly what the detailed walk accepts, with the same max
    /// timestamp, under every option it looks at.
    #[test]
    fn fast_walk_agrees_with_the_detailed_walk() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let options = [
            ValidationOptions::default(),
            ValidationOptions {
                compacted: true,
                ..Default::default()
            },
            ValidationOptions {
                timestamp_bounds: Some((1_000, 1_200)),
                ..Default::default()
            },
            ValidationOptions {
                topic_timestamp_type: TimestampType::LogAppendTime,
                timestamp_bounds: Some((0, 1)),
                ..Default::default()
            },
        ];
        let mut template = BatchBuilder::new(0);
        template.append(1_000, None, Some(b"v"), &[]).unwrap();
        let template = BatchHeader::parse(&template.build().unwrap()).unwrap();
        let (mut accepted, mut refused) = (0, 0);
        for round in 0..50_000 {
            let n = rng.gen_range(0..6);
            let mut records = Vec::new();
            for i in 0..n {
                raw_record(&mut rng, &mut records, i);
            }
            if rng.gen_ratio(1, 30) {
                records.push(rng.gen()); // trailing garbage after the last record
            }
            let header = BatchHeader {
                records_count: if rng.gen_ratio(1, 30) { n + 1 } else { n },
                ..template
            };
            let opts = &options[rng.gen_range(0..options.len())];
            let detailed = walk_records_detailed(&records, &header, opts);
            let fast = walk_records_fast(&records, &header, opts);
            assert_eq!(
                fast,
                detailed.as_ref().ok().copied(),
                "round {round}: {detailed:?}"
            );
            if fast.is_some() {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        // Both outcomes were exercised, many times.
        assert!(
            accepted > 5_000 && refused > 5_000,
            "{accepted} / {refused}"
        );
    }
}
