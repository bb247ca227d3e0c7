//! Messages to the `SharePartitionManagerActor`. Each is answered at once from the core; a lost
//! message fails the one request that sent it (the client retries its ShareFetch).

use actix::Message;

use super::core::{AcquiredRange, FetchPlan, Limits, PartitionAcks, ReadBatches, TopicIdPartition};

/// ShareFetch step one: session, piggybacked acknowledgements, where to read.
#[derive(Message, Debug)]
#[rtype(result = "Result<FetchPlan, super::core::RequestError>")]
pub struct BeginShareFetch {
    pub group: String,
    pub member: String,
    pub epoch: i32,
    pub partitions: Vec<PartitionAcks>,
    pub forgotten: Vec<TopicIdPartition>,
    pub limits: Limits,
}

/// ShareFetch step two: acquire what was read.
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, Vec<AcquiredRange>)>")]
pub struct AcquireRecords {
    pub group: String,
    pub member: String,
    pub reads: Vec<ReadBatches>,
    pub max_records: usize,
    pub limits: Limits,
}

/// A long-polled ShareFetch reading again: where to read now.
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, Option<i64>)>")]
pub struct NextFetchOffsets {
    pub group: String,
    pub partitions: Vec<TopicIdPartition>,
}

/// ShareAcknowledge.
#[derive(Message, Debug)]
#[rtype(result = "Result<super::core::AckResults, super::core::RequestError>")]
pub struct AcknowledgeRecords {
    pub group: String,
    pub member: String,
    pub epoch: i32,
    pub partitions: Vec<PartitionAcks>,
    pub limits: Limits,
}

/// A ShareFetch that acquired nothing parks here (beside its purgatory watch on the high
/// watermarks): `done` fires when records of `group` may have become deliverable in one of
/// `partitions` (acknowledged, released, locks expired, a session dropped), or at once when
/// one already has something to acquire below the high watermark the fetch saw.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct WatchShareRecords {
    pub group: String,
    /// (topic id, partition, high watermark the fetch saw)
    pub partitions: Vec<(kactor_protocol::Uuid, i32, i64)>,
    pub limits: Limits,
    pub done: tokio::sync::oneshot::Sender<()>,
}

/// Before reading share-partitions the manager has no state for: load them from their share
/// coordinator. Answers, per partition, where to read (None: no start offset yet, use
/// `share.auto.offset.reset`) or that the coordinator cannot answer now (read nothing).
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, Option<Option<i64>>)>")]
pub struct LoadSharePartitions {
    pub group: String,
    pub partitions: Vec<TopicIdPartition>,
}

/// After acknowledgements: write these share-partitions' state, answered once written (the
/// client is told its acknowledgements stuck only then).
#[derive(Message, Debug)]
#[rtype(result = "Vec<(TopicIdPartition, Result<(), super::core::RequestError>)>")]
pub struct PersistShareState {
    pub group: String,
    pub partitions: Vec<TopicIdPartition>,
}

/// The group coordinator made these share-partitions' state again (AlterShareGroupOffsets) or
/// deleted it (DeleteShareGroupOffsets, DeleteGroups): the copies here are stale, and the
/// next fetch loads them afresh.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ForgetShareState {
    pub group: String,
    pub partitions: Vec<(kactor_protocol::Uuid, i32)>,
}
