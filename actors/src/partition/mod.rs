//! The partition replica (Kafka's `Partition` + `UnifiedLog` leader paths and `ReplicaManager`):
//! `core` is the pure state machine, `actor` the `PartitionActor` that owns one replica,
//! `registry` the `ReplicaManagerActor` that hosts them, and `apis` the request handlers for
//! Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and DescribeLogDirs.

/// A numeric broker setting, or `default` when it is absent or does not parse (the broker's
/// config was validated at start-up; dynamic values arrive validated by the controller).
pub fn broker_num(
    config: &std::collections::BTreeMap<String, String>,
    key: &str,
    default: i64,
) -> i64 {
    config
        .get(key)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(default)
}

pub mod actor;
pub mod apis;
pub mod core;
pub mod disk;
pub mod fetch_session;
pub mod fetcher;
pub mod fetcher_manager;
pub mod fetcher_session;
pub mod log_cleaner;
pub mod log_dirs;
pub mod log_manager;
pub mod messages;
pub mod metrics;
pub mod registry;
pub mod replay;
pub mod replication_quota;
pub mod startup;
pub mod testing;

pub use self::actor::{PartitionActor, PurgatoryLink};
pub use self::disk::{DiskLog, DiskLogFactory};
pub use self::registry::{
    HostedReplica, LogFactory, MemoryLogFactory, PartitionTable, PartitionTableReader,
    ReplicaManagerActor,
};
