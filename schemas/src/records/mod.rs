//! Record batch v2 (Kafka's `DefaultRecordBatch` / `DefaultRecord` / `MemoryRecords`): the unit
//! the produce path validates and the log stores, byte for byte as the client sent it.

mod header;

pub use header::{
    set_base_offset, set_partition_leader_epoch, verify_crc, BatchHeader, Compression,
    RecordError, TimestampType, BATCH_HEADER_LEN, CRC_OFFSET, LOG_OVERHEAD, MAGIC_V2,
};
