//! The partition replica (Kafka's `Partition` + `UnifiedLog` leader paths and `ReplicaManager`):
//! `core` is the pure state machine, `actor` the `PartitionActor` that owns one replica,
//! `registry` the `ReplicaManagerActor` that hosts them, and `apis` the request handlers for
//! Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and DescribeLogDirs.

pub mod core;
pub mod testing;
