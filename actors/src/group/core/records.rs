//! The `__consumer_offsets` records a shard writes and replays (Kafka's
//! `GroupCoordinatorRecordHelpers` record kinds), as plain values. A `None` value is a tombstone.
//! `group::codec` turns them into Kafka's key/value bytes and back.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kactor_protocol::Uuid;

/// `(topic id, partitions)` lists as stored in KIP-848 records, sorted for determinism.
pub type TopicPartitions = Vec<(Uuid, Vec<i32>)>;

/// A committed offset (`OffsetCommitValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Explicit expiry (OffsetCommit v2–v4 retention time); written as value version 1.
    pub expire_timestamp_ms: Option<i64>,
    /// Written only at value version 4+; zero when unknown.
    pub topic_id: Uuid,
}

/// A topic's name and partitions in `ShareGroupStatePartitionMetadataValue`.
pub type NamedPartitions = (String, BTreeSet<i32>);

/// `ShareGroupStatePartitionMetadataValue`: the share-partitions whose state the group
/// coordinator asked the share coordinator to create (initializing), that it knows exist
/// (initialized: only these are assigned and described), and the topics whose state it is
/// deleting. Keyed by topic id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareStatePartitions {
    pub initializing: BTreeMap<Uuid, NamedPartitions>,
    pub initialized: BTreeMap<Uuid, NamedPartitions>,
    pub deleting: BTreeMap<Uuid, String>,
}

/// One classic member in `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's chosen protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group's state (`GroupMetadataValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<GroupMetadataMember>,
}

/// What a member that joined a consumer group through the classic protocol (JoinGroup) offered
/// (`ConsumerGroupMemberMetadataValue.ClassicMemberMetadata`): its session timeout and its
/// (protocol name, subscription metadata) list in preference order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub supported_protocols: Vec<(String, Bytes)>,
}

/// A KIP-848 member's subscription (`ConsumerGroupMemberMetadataValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set only for members using the classic protocol (a mixed group, KIP-848 migration).
    pub classic_member_metadata: Option<ClassicMemberMetadata>,
}

/// A KIP-848 member's current assignment (`ConsumerGroupCurrentMemberAssignmentValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerCurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// `MemberState` code: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    pub state: i8,
    pub assigned_partitions: TopicPartitions,
    pub partitions_pending_revocation: TopicPartitions,
    /// The member epoch at which each held partition was assigned (Kafka 4.4's tagged
    /// `AssignmentEpochs`): commits from an older epoch are still accepted for partitions
    /// assigned no later than that epoch.
    pub assignment_epochs: BTreeMap<(Uuid, i32), i32>,
}

/// A resolved regular expression subscription (`ConsumerGroupRegularExpressionValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegularExpressionValue {
    pub topics: Vec<String>,
    pub version: i64,
    pub timestamp_ms: i64,
}

/// One `__consumer_offsets` record: key fields plus an optional value (None = tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorRecord {
    /// Record type 1 (type 0, the legacy key, is read as the same thing).
    OffsetCommit {
        group_id: String,
        topic: String,
        partition: i32,
        value: Option<OffsetCommitValue>,
    },
    /// Record type 2.
    GroupMetadata {
        group_id: String,
        value: Option<GroupMetadataValue>,
    },
    /// Record type 3: the group epoch and the subscribed topics' metadata hash.
    ConsumerGroupMetadata {
        group_id: String,
        value: Option<(i32, i64)>,
    },
    /// Record type 4: Kafka 4.4 only writes its tombstone (the hash replaced it).
    ConsumerGroupPartitionMetadata { group_id: String },
    /// Record type 5.
    ConsumerGroupMemberMetadata {
        group_id: String,
        member_id: String,
        value: Option<ConsumerMemberMetadataValue>,
    },
    /// Record type 6: the target assignment epoch and when it was computed.
    ConsumerGroupTargetAssignmentMetadata {
        group_id: String,
        value: Option<(i32, i64)>,
    },
    /// Record type 7.
    ConsumerGroupTargetAssignmentMember {
        group_id: String,
        member_id: String,
        value: Option<TopicPartitions>,
    },
    /// Record type 8.
    ConsumerGroupCurrentMemberAssignment {
        group_id: String,
        member_id: String,
        value: Option<ConsumerCurrentAssignmentValue>,
    },
    /// Record type 11: a share group's epoch and the subscribed topics' metadata hash.
    ShareGroupMetadata {
        group_id: String,
        value: Option<(i32, i64)>,
    },
    /// Record type 15: which share-partitions of the group have state at the share coordinator.
    ShareGroupStatePartitionMetadata {
        group_id: String,
        value: Option<ShareStatePartitions>,
    },
    /// Record type 16.
    ConsumerGroupRegularExpression {
        group_id: String,
        regex: String,
        value: Option<RegularExpressionValue>,
    },
}

impl CoordinatorRecord {
    /// The group this record belongs to.
    pub fn group_id(&self) -> &str {
        match self {
            CoordinatorRecord::OffsetCommit { group_id, .. }
            | CoordinatorRecord::GroupMetadata { group_id, .. }
            | CoordinatorRecord::ConsumerGroupMetadata { group_id, .. }
            | CoordinatorRecord::ConsumerGroupPartitionMetadata { group_id }
            | CoordinatorRecord::ConsumerGroupMemberMetadata { group_id, .. }
            | CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata { group_id, .. }
            | CoordinatorRecord::ConsumerGroupTargetAssignmentMember { group_id, .. }
            | CoordinatorRecord::ConsumerGroupCurrentMemberAssignment { group_id, .. }
            | CoordinatorRecord::ShareGroupMetadata { group_id, .. }
            | CoordinatorRecord::ShareGroupStatePartitionMetadata { group_id, .. }
            | CoordinatorRecord::ConsumerGroupRegularExpression { group_id, .. } => group_id,
        }
    }

    /// Kafka's record type (the key's int16 prefix).
    pub fn record_type(&self) -> i16 {
        match self {
            CoordinatorRecord::OffsetCommit { .. } => 1,
            CoordinatorRecord::GroupMetadata { .. } => 2,
            CoordinatorRecord::ConsumerGroupMetadata { .. } => 3,
            CoordinatorRecord::ConsumerGroupPartitionMetadata { .. } => 4,
            CoordinatorRecord::ConsumerGroupMemberMetadata { .. } => 5,
            CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata { .. } => 6,
            CoordinatorRecord::ConsumerGroupTargetAssignmentMember { .. } => 7,
            CoordinatorRecord::ConsumerGroupCurrentMemberAssignment { .. } => 8,
            CoordinatorRecord::ShareGroupMetadata { .. } => 11,
            CoordinatorRecord::ShareGroupStatePartitionMetadata { .. } => 15,
            CoordinatorRecord::ConsumerGroupRegularExpression { .. } => 16,
        }
    }

    /// Whether this record deletes its key.
    pub fn is_tombstone(&self) -> bool {
        match self {
            CoordinatorRecord::OffsetCommit { value, .. } => value.is_none(),
            CoordinatorRecord::GroupMetadata { value, .. } => value.is_none(),
            CoordinatorRecord::ConsumerGroupMetadata { value, .. } => value.is_none(),
            CoordinatorRecord::ConsumerGroupPartitionMetadata { .. } => true,
            CoordinatorRecord::ConsumerGroupMemberMetadata { value, .. } => value.is_none(),
            CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata { value, .. } => {
                value.is_none()
            }
            CoordinatorRecord::ConsumerGroupTargetAssignmentMember { value, .. } => value.is_none(),
            CoordinatorRecord::ConsumerGroupCurrentMemberAssignment { value, .. } => {
                value.is_none()
            }
            CoordinatorRecord::ShareGroupMetadata { value, .. } => value.is_none(),
            CoordinatorRecord::ShareGroupStatePartitionMetadata { value, .. } => value.is_none(),
            CoordinatorRecord::ConsumerGroupRegularExpression { value, .. } => value.is_none(),
        }
    }
}
