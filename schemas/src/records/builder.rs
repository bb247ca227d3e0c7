//! Building v2 batches (Kafka's `MemoryRecordsBuilder` and `MemoryRecords.withEndTransactionMarker`):
//! used by tests, by the broker for control markers and by the metadata log for its records.

use bytes::Bytes;

use super::compression::compress;
use super::control::{ControlRecordType, EndTransactionMarker};
use super::varint::{size_of_varint, size_of_varlong, write_varint, write_varlong};
use super::{
    write_crc, Compression, RecordError, TimestampType, BATCH_HEADER_LEN, CONTROL_FLAG_MASK,
    LOG_OVERHEAD, MAGIC_V2, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
};

/// Accumulates records and emits one v2 batch. Offsets deltas run 0, 1, 2, ... unless
/// [`BatchBuilder::append_with_offset_delta`] is used (compacted batches have gaps).
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    compression: Compression,
    log_append_time: Option<i64>,
    last_offset_delta_override: Option<i32>,
    records: Vec<u8>,
    count: i32,
    last_offset_delta: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// A non-idempotent, uncompressed, CreateTime batch starting at `base_offset`.
    pub fn new(base_offset: i64) -> Self {
        BatchBuilder {
            base_offset,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            compression: Compression::None,
            log_append_time: None,
            last_offset_delta_override: None,
            records: Vec::new(),
            count: 0,
            last_offset_delta: -1,
            base_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
        }
    }

    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }
    /// Marks the batch LogAppendTime with this max timestamp (record timestamps are kept).
    pub fn log_append_time(mut self, timestamp: i64) -> Self {
        self.log_append_time = Some(timestamp);
        self
    }
    /// Forces the header's last offset delta, e.g. for an empty batch the cleaner keeps to
    /// preserve producer state over an offset range whose records were removed.
    pub fn last_offset_delta(mut self, delta: i32) -> Self {
        self.last_offset_delta_override = Some(delta);
        self
    }

    /// The timestamp type the batch will carry.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.log_append_time.is_some() {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn record_count(&self) -> i32 {
        self.count
    }

    /// Appends a record at the next offset delta.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> Result<(), RecordError> {
        self.append_with_offset_delta(self.last_offset_delta + 1, timestamp, key, value, headers)
    }

    /// Appends a record at an explicit offset delta, which must exceed the previous one.
    pub fn append_with_offset_delta(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> Result<(), RecordError> {
        if offset_delta <= self.last_offset_delta {
            return Err(RecordError::InvalidRecord(format!(
                "offset delta {offset_delta} does not follow {}",
                self.last_offset_delta
            )));
        }
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        let timestamp_delta = timestamp.wrapping_sub(base_timestamp);
        let field_len = |b: Option<&[u8]>| match b {
            Some(b) => size_of_varint(b.len() as i32) + b.len(),
            None => 1,
        };
        let mut body_len = 1
            + size_of_varlong(timestamp_delta)
            + size_of_varint(offset_delta)
            + field_len(key)
            + field_len(value)
            + size_of_varint(headers.len() as i32);
        for (k, v) in headers {
            body_len += field_len(Some(k.as_bytes())) + field_len(*v);
        }
        if body_len > i32::MAX as usize {
            return Err(RecordError::InvalidRecord("record too large".into()));
        }
        let out = &mut self.records;
        out.reserve(body_len + 5);
        write_varint(out, body_len as i32);
        out.push(0); // record attributes: unused
        write_varlong(out, timestamp_delta);
        write_varint(out, offset_delta);
        write_bytes(out, key);
        write_bytes(out, value);
        write_varint(out, headers.len() as i32);
        for (k, v) in headers {
            write_bytes(out, Some(k.as_bytes()));
            write_bytes(out, *v);
        }
        self.count += 1;
        self.last_offset_delta = offset_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        Ok(())
    }

    /// Encodes the batch: header, (compressed) records, CRC-32C.
    pub fn build(self) -> Result<Bytes, RecordError> {
        let payload = compress(self.compression, &self.records)?;
        let total = BATCH_HEADER_LEN + payload.len();
        let batch_length =
            i32::try_from(total - LOG_OVERHEAD).map_err(|_| RecordError::TooLarge {
                size: total,
                max: i32::MAX as usize,
            })?;
        let mut attributes = self.compression.id();
        if self.transactional {
            attributes |= TRANSACTIONAL_FLAG_MASK;
        }
        if self.control {
            attributes |= CONTROL_FLAG_MASK;
        }
        let max_timestamp = match self.log_append_time {
            Some(ts) => {
                attributes |= TIMESTAMP_TYPE_MASK;
                ts
            }
            None => self.max_timestamp,
        };
        let last_offset_delta = self
            .last_offset_delta_override
            .unwrap_or(self.last_offset_delta.max(0));
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // CRC, filled below
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.unwrap_or(max_timestamp).to_be_bytes());
        out.extend_from_slice(&max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        debug_assert_eq!(out.len(), BATCH_HEADER_LEN);
        out.extend_from_slice(&payload);
        write_crc(&mut out)?;
        Ok(Bytes::from(out))
    }
}

fn write_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => write_varint(out, -1),
    }
}

/// A transactional control batch holding one commit/abort marker, as the partition leader writes
/// it on WriteTxnMarkers: uncompressed, CreateTime, no base sequence.
pub fn end_transaction_marker_batch(
    base_offset: i64,
    timestamp: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTransactionMarker,
) -> Result<Bytes, RecordError> {
    let mut b = BatchBuilder::new(base_offset)
        .partition_leader_epoch(partition_leader_epoch)
        .producer(producer_id, producer_epoch, NO_SEQUENCE)
        .transactional(true)
        .control(true);
    b.append(
        timestamp,
        Some(&marker.encode_key()),
        Some(&marker.encode_value()),
        &[],
    )?;
    b.build()
}

/// A non-transactional control batch holding one record of `control_type` (KRaft's
/// LeaderChange, SnapshotHeader/Footer, KRaftVersion, KRaftVoters), as the Raft leader writes it:
/// uncompressed, no producer id, `value` being the encoded control message.
pub fn control_record_batch(
    base_offset: i64,
    timestamp: i64,
    partition_leader_epoch: i32,
    control_type: ControlRecordType,
    value: &[u8],
) -> Result<Bytes, RecordError> {
    let mut b = BatchBuilder::new(base_offset)
        .partition_leader_epoch(partition_leader_epoch)
        .control(true);
    b.append(
        timestamp,
        Some(&control_type.encode_key()),
        Some(value),
        &[],
    )?;
    b.build()
}
