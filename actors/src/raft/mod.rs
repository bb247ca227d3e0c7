//! KRaft (Kafka's `KafkaRaftClient` / `KafkaRaftManager`): the `__cluster_metadata-0` log, the
//! `quorum-state` file, elections and the high watermark. The controller appends record
//! batches through it; committed batches go to every registered listener (the controller and
//! the metadata publisher). Third step of the "Metadata change" path.

pub mod actor;
pub mod batch;
pub mod core;

pub mod messages;
pub mod quorum_state;

pub use actor::{RaftActor, RaftActorConfig, METADATA_PARTITION_DIR};
pub use messages::{
    AppendMetadataRecords, AppendedBatch, DescribeQuorumState, MetadataBatchesCommitted,
    QuorumInfo, QuorumReplicaInfo, RaftError, RaftLeaderChanged, RegisterRaftListener,
};
