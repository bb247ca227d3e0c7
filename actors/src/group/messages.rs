//! Messages of the `GroupCoordinatorActor` (one shard per `__consumer_offsets` partition led).

use actix::Message;

use crate::runtime::MeteredRecipient;

use super::core::{GroupConfigsView, GroupRequest, GroupResponse, TopicsView};
use crate::partition::messages::{AppendCoordinatorRecords, DescribeReplica, ReadRecords};

/// Group API handler → shard: one group request (converted from any wire version). The
/// answer comes once its records are committed; a JoinGroup or SyncGroup may be parked for a
/// whole rebalance. Lost: the client's request times out and it retries.
#[derive(Message, Debug, Clone)]
#[rtype(result = "GroupResponse")]
pub struct HandleGroupRequest {
    pub request: GroupRequest,
}

/// Metadata publisher → shard: the cluster's topics changed (KIP-848 assignments, regex
/// subscriptions, topic ids in offset commits). Lost: assignments lag until the next change.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdateGroupTopics {
    pub topics: TopicsView,
    /// The partition table version the view was taken from: a shard that already refreshed
    /// from a newer table (at a heartbeat) ignores an older view.
    pub version: u64,
}

/// Manager → shard: the group configs in the metadata image changed (`kafka-configs
/// --entity-type groups`). Lost: members keep the previous session timeout and heartbeat
/// interval until the next change.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdateGroupConfigs {
    pub configs: GroupConfigsView,
}

/// Manager → shard: these topics were deleted from the metadata image (their ids are gone);
/// the shard tombstones every group's offsets for them. Lost: the offsets stay until they
/// expire, and a topic re-created under the name resumes its groups at the old positions.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct TopicsDeleted {
    pub topics: Vec<String>,
}

/// WriteTxnMarkers path → shard, after a commit/abort marker for `producer_id` was appended to
/// this shard's partition: its pending transactional offsets are committed or dropped. Lost:
/// they stay pending (UNSTABLE_OFFSET_COMMIT for require_stable fetches) until a reload.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct CompleteGroupTransaction {
    pub producer_id: i64,
    pub committed: bool,
}

/// Topology → shard: this broker no longer leads the partition. Parked requests are answered
/// NOT_COORDINATOR and the actor stops. Lost: the shard keeps answering until its writes fail.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct ResignGroupCoordinator;

/// Tests / metrics → shard: how it is doing.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "GroupCoordinatorStatus")]
pub struct DescribeGroupCoordinator;

#[derive(Debug, Clone, Copy, PartialEq, Eq, actix::MessageResponse)]
pub struct GroupCoordinatorStatus {
    pub loaded: bool,
    pub groups: usize,
    /// Writes appended but not yet committed (responses held back).
    pub pending_writes: usize,
    /// Offset after the last record replayed or written.
    pub next_offset: i64,
}

/// The shard's `__consumer_offsets` partition leader, as the shard uses it.
#[derive(Clone)]
pub struct CoordinatorPartition {
    pub append: MeteredRecipient<AppendCoordinatorRecords>,
    pub read: MeteredRecipient<ReadRecords>,
    pub describe: MeteredRecipient<DescribeReplica>,
    /// Where a write waits for the high watermark (the broker's purgatory); without one (a
    /// lone replica in tests) only a write the append itself committed succeeds.
    pub replication: Option<crate::runtime::MeteredAddr<crate::purgatory::PurgatoryActor>>,
}
