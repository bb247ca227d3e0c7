//! Record batch v2 (Kafka's `DefaultRecordBatch` / `DefaultRecord` / `MemoryRecords`): the unit
//! the produce path validates and the log stores, byte for byte as the client sent it.
//!
//! The leader's produce path never inflates or copies a batch unless the topic's codec differs:
//!
//! ```
//! use kactor_protocol::records::*;
//!
//! // What a producer sends (built here; normally a slice of the Produce request).
//! let mut b = BatchBuilder::new(0).producer(7, 0, 0).compression(Compression::Lz4);
//! b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[("trace", Some(b"1"))]).unwrap();
//! let sent = b.build().unwrap();
//!
//! let info = validate_batch(&sent).unwrap(); // size, magic, CRC, counts, producer fields
//! assert_eq!((info.records_count, info.producer_id), (1, 7));
//! let mut stored = sent.to_vec();
//! set_base_offset(&mut stored, 1000); // offset assignment: outside the CRC
//! set_partition_leader_epoch(&mut stored, 3);
//! verify_crc(&stored).unwrap();
//! let stored = recompress(&stored, Compression::Zstd).unwrap(); // only if compression.type differs
//!
//! // Reading: batches back to back, records as slices (or one inflated buffer).
//! for batch in batches(stored) {
//!     let batch = batch.unwrap();
//!     for record in batch.records().unwrap() {
//!         let record = record.unwrap();
//!         assert_eq!(record.offset(batch.header.base_offset), 1000);
//!         assert_eq!(record.value.as_deref(), Some(&b"v"[..]));
//!     }
//! }
//! ```

mod batch;
mod builder;
mod compression;
mod control;
mod header;
mod record;
mod validate;
pub mod varint;

pub use batch::{batches, BatchIter, RecordBatch, RecordIter};
pub use builder::{control_record_batch, end_transaction_marker_batch, BatchBuilder};
pub use compression::{compress, decompress, DEFAULT_DECOMPRESSION_LIMIT};
pub use control::{
    ControlRecordType, EndTransactionMarker, CONTROL_RECORD_KEY_VERSION,
    END_TXN_MARKER_VALUE_VERSION,
};
pub use header::{
    compute_crc, set_base_offset, set_partition_leader_epoch, verify_crc, write_crc, BatchHeader,
    Compression, RecordError, TimestampType, BATCH_HEADER_LEN, COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK, CRC_OFFSET, DELETE_HORIZON_FLAG_MASK, LOG_OVERHEAD, MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
};
pub(crate) use header::{ATTRIBUTES_OFFSET, MAX_TIMESTAMP_OFFSET};
pub use record::{Header, Record};
pub use validate::{
    recompress, recompress_with_limit, set_log_append_time, set_max_timestamp, validate_batch,
    validate_batch_with, AppendOrigin, RecordFault, RecordFaultKind, ValidatedBatch,
    ValidationOptions,
};
