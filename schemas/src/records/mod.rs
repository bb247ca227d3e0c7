//! Record batch v2 (Kafka's `DefaultRecordBatch` / `DefaultRecord` / `MemoryRecords`): the unit
//! the produce path validates and the log stores, byte for byte as the client sent it.

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
    validate_batch_with, AppendOrigin, ValidatedBatch, ValidationOptions,
};
