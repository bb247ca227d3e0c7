//! The shard's inputs and outputs, in the coordinator's own terms (Kafka's `*RequestData` /
//! `*ResponseData` fields the group coordinator reads or writes). The network handlers convert
//! wire messages of any version to these and back; `api_version` is kept where Kafka's
//! behaviour depends on it.

use std::collections::BTreeMap;

use bytes::Bytes;
use kactor_protocol::errors::{with_default_message, CodedError};
use kactor_protocol::Uuid;

use super::records::{CoordinatorRecord, TopicPartitions};

/// Correlates a request with its (possibly delayed) response; chosen by the caller.
pub type RequestId = u64;

/// What the shard knows of the cluster's topics (from the broker's metadata image).
#[derive(Debug, Clone, Default)]
pub struct TopicsView {
    by_name: BTreeMap<String, (Uuid, i32)>,
    by_id: BTreeMap<Uuid, String>,
    /// The metadata image's offset the view was taken at (Kafka's `MetadataImage.version()`,
    /// what resolved regexes record); not part of equality: views compare by their topics.
    pub version: i64,
}

impl PartialEq for TopicsView {
    fn eq(&self, other: &Self) -> bool {
        self.by_name == other.by_name
    }
}

impl TopicsView {
    pub fn new() -> Self {
        Self::default()
    }
    /// Whether `other` has a topic name this view lacks.
    pub fn lacks_a_topic_of(&self, other: &TopicsView) -> bool {
        other.by_name.keys().any(|n| !self.by_name.contains_key(n))
    }
    /// Adds or replaces a topic.
    pub fn upsert(&mut self, name: &str, id: Uuid, num_partitions: i32) {
        if let Some((old, _)) = self.by_name.insert(name.to_string(), (id, num_partitions)) {
            self.by_id.remove(&old);
        }
        self.by_id.insert(id, name.to_string());
    }
    pub fn remove(&mut self, name: &str) {
        if let Some((id, _)) = self.by_name.remove(name) {
            self.by_id.remove(&id);
        }
    }
    pub fn id_of(&self, name: &str) -> Option<Uuid> {
        self.by_name.get(name).map(|(id, _)| *id)
    }
    pub fn name_of(&self, id: &Uuid) -> Option<&str> {
        self.by_id.get(id).map(String::as_str)
    }
    pub fn num_partitions(&self, name: &str) -> Option<i32> {
        self.by_name.get(name).map(|(_, n)| *n)
    }
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// A group's own settings (group configs, `kafka-configs --entity-type groups`) that the
/// coordinator applies; None: the broker's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupConfigOverrides {
    /// `consumer.session.timeout.ms`
    pub consumer_session_timeout_ms: Option<i32>,
    /// `consumer.heartbeat.interval.ms`
    pub consumer_heartbeat_interval_ms: Option<i32>,
    /// `consumer.assignment.interval.ms`
    pub consumer_assignment_interval_ms: Option<i32>,
}

/// The group configs set in the metadata image, by group id (groups with none are absent).
pub type GroupConfigsView = BTreeMap<String, GroupConfigOverrides>;

// ---------------------------------------------------------------------------------------------
// Classic protocol

#[derive(Debug, Clone, PartialEq, Default)]
pub struct JoinGroupInput {
    pub api_version: i16,
    pub group_id: String,
    pub session_timeout_ms: i32,
    /// v0 has none: callers pass the session timeout, as Kafka does.
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    /// (name, metadata) in the client's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub reason: Option<String>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponseMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupOutput {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    /// Only the leader gets the members (with their metadata for the chosen protocol).
    pub members: Vec<JoinGroupResponseMember>,
}

impl JoinGroupOutput {
    pub fn error(error_code: i16, member_id: &str) -> Self {
        JoinGroupOutput {
            error_code,
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncGroupInput {
    pub api_version: i16,
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupOutput {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncGroupOutput {
    pub fn error(error_code: i16) -> Self {
        SyncGroupOutput {
            error_code,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct HeartbeatInput {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaveGroupMemberInput {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeaveGroupInput {
    pub group_id: String,
    /// v0–v2 carry one member id: callers pass it as a single entry.
    pub members: Vec<LeaveGroupMemberInput>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupMemberOutput {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveGroupOutput {
    /// v0–v2 report the first member's error here when this is NONE.
    pub error_code: i16,
    pub members: Vec<LeaveGroupMemberOutput>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_metadata: Bytes,
    pub member_assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub group_state: String,
    pub group_type: String,
}

// ---------------------------------------------------------------------------------------------
// Offsets

#[derive(Debug, Clone, PartialEq, Default)]
pub struct CommitPartitionInput {
    pub partition_index: i32,
    pub committed_offset: i64,
    pub committed_leader_epoch: i32,
    pub committed_metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct CommitTopicInput {
    pub name: String,
    /// Zero when the request names topics (before v10).
    pub topic_id: Uuid,
    pub partitions: Vec<CommitPartitionInput>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommitInput {
    pub api_version: i16,
    pub group_id: String,
    pub generation_id_or_member_epoch: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v2–v4 only; -1 means the broker's retention.
    pub retention_time_ms: i64,
    pub topics: Vec<CommitTopicInput>,
}

impl Default for OffsetCommitInput {
    fn default() -> Self {
        OffsetCommitInput {
            api_version: 9,
            group_id: String::new(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: Vec::new(),
        }
    }
}

/// A transactional commit (TxnOffsetCommit): pending until the transaction's marker.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnOffsetCommitInput {
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<CommitTopicInput>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitTopicOutput {
    pub name: String,
    pub topic_id: Uuid,
    /// (partition, error code)
    pub partitions: Vec<(i32, i16)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct OffsetFetchGroupInput {
    pub group_id: String,
    /// v9+: the KIP-848 member asking, or None (admin / classic clients).
    pub member_id: Option<String>,
    pub member_epoch: i32,
    /// (topic, partitions); None = every committed offset of the group.
    pub topics: Option<Vec<(String, Vec<i32>)>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub partition_index: i32,
    pub committed_offset: i64,
    pub committed_leader_epoch: i32,
    pub metadata: String,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedGroup {
    pub group_id: String,
    pub error_code: i16,
    /// (topic, partitions), sorted by topic then partition when all offsets were asked for.
    pub topics: Vec<(String, Vec<FetchedPartition>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteOutput {
    pub error_code: i16,
    /// (topic, [(partition, error code)])
    pub topics: Vec<(String, Vec<(i32, i16)>)>,
}

// ---------------------------------------------------------------------------------------------
// KIP-848 consumer protocol

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerGroupHeartbeatInput {
    pub api_version: i16,
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// None when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// Owned partitions; None when unchanged.
    pub topic_partitions: Option<TopicPartitions>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupHeartbeatOutput {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Present when the member must (re)learn its assignment.
    pub assignment: Option<TopicPartitions>,
}

impl ConsumerGroupHeartbeatOutput {
    pub fn error(error_code: i16, message: impl Into<String>) -> Self {
        ConsumerGroupHeartbeatOutput {
            error_code,
            error_message: Some(message.into()),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// (topic id, topic name, partitions)
    pub assignment: Vec<(Uuid, String, Vec<i32>)>,
    pub target_assignment: Vec<(Uuid, String, Vec<i32>)>,
    /// Whether the member joined through the classic protocol (a mixed group).
    pub uses_classic_protocol: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedConsumerMember>,
}

impl DescribedConsumerGroup {
    /// A group answered with an error only: the other fields keep the schema's defaults.
    pub fn error(code: i16, group_id: &str) -> Self {
        DescribedConsumerGroup {
            error_code: code,
            error_message: None,
            group_id: group_id.to_string(),
            group_state: String::new(),
            group_epoch: 0,
            assignment_epoch: 0,
            assignor_name: String::new(),
            members: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// KIP-932 share groups

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareGroupHeartbeatInput {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// The same fields as a KIP-848 heartbeat's answer (the assignment is present when the member
/// joined, resubscribed or its assignment changed).
pub type ShareGroupHeartbeatOutput = ConsumerGroupHeartbeatOutput;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedShareMember {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    /// (topic id, topic name, partitions)
    pub assignment: Vec<(Uuid, String, Vec<i32>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedShareGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedShareMember>,
}

impl DescribedShareGroup {
    pub fn error(code: i16, message: Option<String>, group_id: &str) -> Self {
        DescribedShareGroup {
            error_code: code,
            error_message: message,
            group_id: group_id.to_string(),
            group_state: String::new(),
            group_epoch: 0,
            assignment_epoch: 0,
            assignor_name: String::new(),
            members: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// Every request the shard handles.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupRequest {
    JoinGroup(JoinGroupInput),
    SyncGroup(SyncGroupInput),
    Heartbeat(HeartbeatInput),
    LeaveGroup(LeaveGroupInput),
    OffsetCommit(OffsetCommitInput),
    TxnOffsetCommit(TxnOffsetCommitInput),
    OffsetFetch {
        groups: Vec<OffsetFetchGroupInput>,
        require_stable: bool,
    },
    OffsetDelete {
        group_id: String,
        topics: Vec<(String, Vec<i32>)>,
    },
    DescribeGroups {
        api_version: i16,
        group_ids: Vec<String>,
    },
    ListGroups {
        states_filter: Vec<String>,
        types_filter: Vec<String>,
    },
    DeleteGroups {
        group_ids: Vec<String>,
    },
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatInput),
    ConsumerGroupDescribe {
        group_ids: Vec<String>,
    },
    ShareGroupHeartbeat(ShareGroupHeartbeatInput),
    ShareGroupDescribe {
        group_ids: Vec<String>,
    },
    /// The share coordinator answered a [`ShareStateInit`]: the partitions' state exists
    /// (`succeeded`) and they may be assigned, or it does not and they are asked for again.
    ShareStateInitialized {
        group_id: String,
        partitions: Vec<(Uuid, i32)>,
        succeeded: bool,
        /// The [`ShareStateInit::asked_at_ms`] of the request answered: a failure of a request
        /// older than the partitions' latest one (an alter asked again meanwhile) is ignored.
        asked_at_ms: i64,
    },
    /// AlterShareGroupOffsets: (topic name, [(partition, start offset)]).
    AlterShareGroupOffsets {
        group_id: String,
        topics: Vec<(String, Vec<(i32, i64)>)>,
    },
    /// DeleteShareGroupOffsets, first step: which share-partitions' state to delete.
    DeleteShareGroupOffsets {
        group_id: String,
        topics: Vec<String>,
    },
    /// The share coordinator deleted these topics' state (DeleteShareGroupOffsets, DeleteGroups).
    ShareStateDeleted {
        group_id: String,
        topics: Vec<Uuid>,
    },
    /// The share-partitions with initialized state (DescribeShareGroupOffsets for all topics).
    ShareStatePartitions {
        group_id: String,
    },
    /// DeleteGroups of a share group, first step: the group must be empty; every share-partition
    /// with state is marked deleting and returned, to be deleted before the group is.
    DeleteShareGroupState {
        group_id: String,
    },
}

/// Share-partitions whose state the group coordinator asks the share coordinator to create
/// (Kafka's `InitializeShareGroupStateParameters`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareStateInit {
    pub group_id: String,
    /// When the shard asked (its clock): identifies the request in its answer.
    pub asked_at_ms: i64,
    pub state_epoch: i32,
    /// (topic id, partition, start offset: -1 leaves it to `share.auto.offset.reset`)
    pub partitions: Vec<(Uuid, i32, i64)>,
}

/// One partition's outcome: (partition, error code, error message).
pub type PartitionOutcome = (i32, i16, Option<String>);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlterShareOffsetsOutput {
    pub error: Option<CodedError>,
    /// (topic name, topic id, partitions' outcomes)
    pub topics: Vec<(String, Uuid, Vec<PartitionOutcome>)>,
    pub initialize: Option<ShareStateInit>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeleteShareOffsetsOutput {
    pub error: Option<CodedError>,
    /// Topics refused: (topic name, topic id, error code, error message)
    pub refused: Vec<(String, Uuid, i16, String)>,
    /// Topics whose state to delete: (topic name, topic id, partitions)
    pub delete: Vec<(String, Uuid, Vec<i32>)>,
}

/// Every response the shard produces (one per request, possibly later than the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupResponse {
    JoinGroup(JoinGroupOutput),
    SyncGroup(SyncGroupOutput),
    Heartbeat {
        error_code: i16,
    },
    LeaveGroup(LeaveGroupOutput),
    OffsetCommit {
        topics: Vec<CommitTopicOutput>,
    },
    TxnOffsetCommit {
        topics: Vec<CommitTopicOutput>,
    },
    OffsetFetch {
        groups: Vec<FetchedGroup>,
    },
    OffsetDelete(OffsetDeleteOutput),
    DescribeGroups {
        groups: Vec<DescribedGroup>,
    },
    ListGroups {
        error_code: i16,
        groups: Vec<ListedGroup>,
    },
    /// (group id, error code)
    DeleteGroups {
        results: Vec<(String, i16)>,
    },
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatOutput),
    ConsumerGroupDescribe {
        groups: Vec<DescribedConsumerGroup>,
    },
    /// The answer, and the share-partitions to initialize before they can be assigned.
    ShareGroupHeartbeat(ShareGroupHeartbeatOutput, Option<ShareStateInit>),
    ShareGroupDescribe {
        groups: Vec<DescribedShareGroup>,
    },
    Done,
    AlterShareGroupOffsets(AlterShareOffsetsOutput),
    DeleteShareGroupOffsets(DeleteShareOffsetsOutput),
    /// (topic id, topic name, partitions), or the error code.
    ShareStatePartitions(Result<Vec<(Uuid, String, Vec<i32>)>, i16>),
    /// (topic id, partitions) to delete, or the error code.
    DeleteShareGroupState(Result<Vec<(Uuid, Vec<i32>)>, i16>),
}

/// What one step of the shard produced: records to append to `__consumer_offsets` and the
/// responses that may be sent once those records are committed (all of them, or none on an
/// append failure).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Output {
    pub records: Vec<CoordinatorRecord>,
    pub responses: Vec<(RequestId, GroupResponse)>,
}

impl Output {
    pub fn respond(&mut self, id: RequestId, response: GroupResponse) {
        self.responses.push((id, response));
    }
    pub fn merge(&mut self, other: Output) {
        self.records.extend(other.records);
        self.responses.extend(other.responses);
    }
}

impl GroupRequest {
    /// The response to this request when the whole of it fails with `code` (coordinator
    /// loading, moved, or the write failed).
    pub fn error_response(&self, code: i16) -> GroupResponse {
        match self {
            GroupRequest::JoinGroup(r) => {
                GroupResponse::JoinGroup(JoinGroupOutput::error(code, &r.member_id))
            }
            GroupRequest::SyncGroup(_) => GroupResponse::SyncGroup(SyncGroupOutput::error(code)),
            GroupRequest::Heartbeat(_) => GroupResponse::Heartbeat { error_code: code },
            GroupRequest::LeaveGroup(_) => GroupResponse::LeaveGroup(LeaveGroupOutput {
                error_code: code,
                members: Vec::new(),
            }),
            GroupRequest::OffsetCommit(r) => GroupResponse::OffsetCommit {
                topics: commit_errors(&r.topics, code),
            },
            GroupRequest::TxnOffsetCommit(r) => GroupResponse::TxnOffsetCommit {
                topics: commit_errors(&r.topics, code),
            },
            GroupRequest::OffsetFetch { groups, .. } => GroupResponse::OffsetFetch {
                groups: groups
                    .iter()
                    .map(|g| FetchedGroup {
                        group_id: g.group_id.clone(),
                        error_code: code,
                        topics: Vec::new(),
                    })
                    .collect(),
            },
            GroupRequest::OffsetDelete { .. } => GroupResponse::OffsetDelete(OffsetDeleteOutput {
                error_code: code,
                topics: Vec::new(),
            }),
            GroupRequest::DescribeGroups { group_ids, .. } => GroupResponse::DescribeGroups {
                groups: group_ids
                    .iter()
                    .map(|g| DescribedGroup {
                        error_code: code,
                        error_message: None,
                        group_id: g.clone(),
                        group_state: String::new(),
                        protocol_type: String::new(),
                        protocol_data: String::new(),
                        members: Vec::new(),
                    })
                    .collect(),
            },
            GroupRequest::ListGroups { .. } => GroupResponse::ListGroups {
                error_code: code,
                groups: Vec::new(),
            },
            GroupRequest::DeleteGroups { group_ids } => GroupResponse::DeleteGroups {
                results: group_ids.iter().map(|g| (g.clone(), code)).collect(),
            },
            GroupRequest::ConsumerGroupHeartbeat(_) => {
                GroupResponse::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatOutput {
                    error_code: code,
                    ..Default::default()
                })
            }
            GroupRequest::ConsumerGroupDescribe { group_ids } => {
                GroupResponse::ConsumerGroupDescribe {
                    groups: group_ids
                        .iter()
                        .map(|g| DescribedConsumerGroup::error(code, g))
                        .collect(),
                }
            }
            GroupRequest::ShareGroupHeartbeat(_) => GroupResponse::ShareGroupHeartbeat(
                ShareGroupHeartbeatOutput {
                    error_code: code,
                    ..Default::default()
                },
                None,
            ),
            GroupRequest::ShareGroupDescribe { group_ids } => GroupResponse::ShareGroupDescribe {
                groups: group_ids
                    .iter()
                    .map(|g| DescribedShareGroup::error(code, None, g))
                    .collect(),
            },
            GroupRequest::ShareStateInitialized { .. } | GroupRequest::ShareStateDeleted { .. } => {
                GroupResponse::Done
            }
            GroupRequest::AlterShareGroupOffsets { .. } => {
                GroupResponse::AlterShareGroupOffsets(AlterShareOffsetsOutput {
                    error: Some(with_default_message(code)),
                    ..Default::default()
                })
            }
            GroupRequest::DeleteShareGroupOffsets { .. } => {
                GroupResponse::DeleteShareGroupOffsets(DeleteShareOffsetsOutput {
                    error: Some(with_default_message(code)),
                    ..Default::default()
                })
            }
            GroupRequest::ShareStatePartitions { .. } => {
                GroupResponse::ShareStatePartitions(Err(code))
            }
            GroupRequest::DeleteShareGroupState { .. } => {
                GroupResponse::DeleteShareGroupState(Err(code))
            }
        }
    }
}

fn commit_errors(topics: &[CommitTopicInput], code: i16) -> Vec<CommitTopicOutput> {
    topics
        .iter()
        .map(|t| CommitTopicOutput {
            name: t.name.clone(),
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| (p.partition_index, code))
                .collect(),
        })
        .collect()
}

impl GroupResponse {
    /// This response turned into a failure with `code`, for a write that did not commit.
    pub fn into_error(self, code: i16) -> GroupResponse {
        match self {
            GroupResponse::JoinGroup(r) => {
                GroupResponse::JoinGroup(JoinGroupOutput::error(code, &r.member_id))
            }
            GroupResponse::SyncGroup(_) => GroupResponse::SyncGroup(SyncGroupOutput::error(code)),
            GroupResponse::Heartbeat { .. } => GroupResponse::Heartbeat { error_code: code },
            GroupResponse::LeaveGroup(_) => GroupResponse::LeaveGroup(LeaveGroupOutput {
                error_code: code,
                members: Vec::new(),
            }),
            GroupResponse::OffsetCommit { mut topics } => {
                for t in &mut topics {
                    for p in &mut t.partitions {
                        p.1 = code;
                    }
                }
                GroupResponse::OffsetCommit { topics }
            }
            GroupResponse::TxnOffsetCommit { mut topics } => {
                for t in &mut topics {
                    for p in &mut t.partitions {
                        p.1 = code;
                    }
                }
                GroupResponse::TxnOffsetCommit { topics }
            }
            GroupResponse::OffsetFetch { mut groups } => {
                for g in &mut groups {
                    g.error_code = code;
                    g.topics.clear();
                }
                GroupResponse::OffsetFetch { groups }
            }
            GroupResponse::OffsetDelete(_) => GroupResponse::OffsetDelete(OffsetDeleteOutput {
                error_code: code,
                topics: Vec::new(),
            }),
            GroupResponse::DescribeGroups { mut groups } => {
                for g in &mut groups {
                    g.error_code = code;
                }
                GroupResponse::DescribeGroups { groups }
            }
            GroupResponse::ListGroups { .. } => GroupResponse::ListGroups {
                error_code: code,
                groups: Vec::new(),
            },
            GroupResponse::DeleteGroups { results } => GroupResponse::DeleteGroups {
                results: results.into_iter().map(|(g, _)| (g, code)).collect(),
            },
            GroupResponse::ConsumerGroupHeartbeat(_) => {
                GroupResponse::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatOutput {
                    error_code: code,
                    ..Default::default()
                })
            }
            GroupResponse::ConsumerGroupDescribe { mut groups } => {
                for g in &mut groups {
                    g.error_code = code;
                }
                GroupResponse::ConsumerGroupDescribe { groups }
            }
            GroupResponse::ShareGroupHeartbeat(..) => GroupResponse::ShareGroupHeartbeat(
                ShareGroupHeartbeatOutput {
                    error_code: code,
                    ..Default::default()
                },
                None,
            ),
            GroupResponse::Done => GroupResponse::Done,
            GroupResponse::AlterShareGroupOffsets(_) => {
                GroupResponse::AlterShareGroupOffsets(AlterShareOffsetsOutput {
                    error: Some(with_default_message(code)),
                    ..Default::default()
                })
            }
            GroupResponse::DeleteShareGroupOffsets(_) => {
                GroupResponse::DeleteShareGroupOffsets(DeleteShareOffsetsOutput {
                    error: Some(with_default_message(code)),
                    ..Default::default()
                })
            }
            GroupResponse::ShareStatePartitions(_) => {
                GroupResponse::ShareStatePartitions(Err(code))
            }
            GroupResponse::DeleteShareGroupState(_) => {
                GroupResponse::DeleteShareGroupState(Err(code))
            }
            GroupResponse::ShareGroupDescribe { mut groups } => {
                for g in &mut groups {
                    g.error_code = code;
                }
                GroupResponse::ShareGroupDescribe { groups }
            }
        }
    }
}
