//! KRaft (Kafka's `KafkaRaftClient` / `KafkaRaftManager`): the `__cluster_metadata-0` log, the
//! `quorum-state` file, elections and the high watermark. The controller appends record
//! batches through it; committed batches go to every registered listener (the controller and
//! the metadata publisher). Third step of the "Metadata change" path.
//!
//! `core` is the whole protocol as a pure state machine (Kafka 4.4's quorum states, pre-vote,
//! Fetch-driven replication, snapshots, KIP-853 voters), checked by a deterministic simulation
//! (`core/sim.rs`); `actor` is its shell over the on-disk log and the peer connections
//! (`peer`), with the RPCs served on the controller listener by `apis`.

pub mod actor;
pub mod apis;
pub mod batch;
pub mod core;

pub mod messages;
pub mod peer;
pub mod quorum_state;
pub mod snapshot;
pub mod wire;

pub use actor::{RaftActor, RaftActorConfig, RaftRequest, METADATA_PARTITION_DIR};
pub use messages::{
    AppendGate, AppendMetadataRecords, AppendedBatch, DescribeQuorumState,
    MetadataBatchesCommitted, QuorumInfo, QuorumReplicaInfo, RaftError, RaftLeaderChanged,
    RegisterRaftListener,
};
