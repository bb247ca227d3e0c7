//! The controller's inputs and outputs, in the controller's terms: the parts of the admin and
//! broker-lifecycle requests it acts on (Kafka's `CreateTopicsRequestData` etc. after the
//! broker-side handler has checked versions and authorization). The API handlers translate
//! wire structs to these and back.

use kactor_protocol::metadata::register_broker_record::{BrokerEndpoint, BrokerFeature};
use kactor_protocol::Uuid;

use super::errors::ApiError;

/// One topic of a CreateTopics request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreatableTopic {
    pub name: String,
    /// -1: `num.partitions`.
    pub num_partitions: i32,
    /// -1: `default.replication.factor`.
    pub replication_factor: i16,
    /// Manual assignment: (partition index, broker ids). Empty: the controller places replicas.
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Config overrides; a null value is an error, as in Kafka.
    pub configs: Vec<(String, Option<String>)>,
}

/// A config of a created topic as CreateTopics v5+ reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopicConfig {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub config_source: i8,
    pub is_sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopicResult {
    pub name: String,
    pub topic_id: Uuid,
    pub error: ApiError,
    /// -1 on error.
    pub num_partitions: i32,
    /// -1 on error.
    pub replication_factor: i16,
    pub configs: Vec<CreatedTopicConfig>,
}

/// A topic to delete, by name or by id (DeleteTopics v6+ allows ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicRef {
    Name(String),
    Id(Uuid),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletableTopicResult {
    pub name: Option<String>,
    pub topic_id: Uuid,
    pub error: ApiError,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsTopic {
    pub name: String,
    /// The new total partition count.
    pub count: i32,
    /// Replica lists for the new partitions only, or None for controller placement.
    pub assignments: Option<Vec<Vec<i32>>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsTopicResult {
    pub name: String,
    pub error: ApiError,
}

/// Kafka's `AlterConfigOp.OpType` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterConfigOp {
    Set,
    Delete,
    Append,
    Subtract,
}

impl AlterConfigOp {
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(AlterConfigOp::Set),
            1 => Some(AlterConfigOp::Delete),
            2 => Some(AlterConfigOp::Append),
            3 => Some(AlterConfigOp::Subtract),
            _ => None,
        }
    }
}

/// One resource of an IncrementalAlterConfigs request. `resource_type` is Kafka's id (2 topic,
/// 4 broker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncrementalAlterConfigsResource {
    pub resource_type: i8,
    pub resource_name: String,
    pub ops: Vec<(String, AlterConfigOp, Option<String>)>,
}

/// One resource of a (legacy, whole-set) AlterConfigs request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigsResource {
    pub resource_type: i8,
    pub resource_name: String,
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigsResourceResult {
    pub resource_type: i8,
    pub resource_name: String,
    pub error: ApiError,
}

/// A BrokerRegistration request.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    pub cluster_id: String,
    pub incarnation_id: Uuid,
    pub listeners: Vec<BrokerEndpoint>,
    pub features: Vec<BrokerFeature>,
    pub rack: Option<String>,
    pub log_dirs: Vec<Uuid>,
    pub previous_broker_epoch: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistrationReply {
    pub error: ApiError,
    pub broker_epoch: i64,
}

/// A BrokerHeartbeat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerHeartbeat {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shut_down: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerHeartbeatReply {
    pub error: ApiError,
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// Kafka's `FeatureUpdate.UpgradeType` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    /// An id Kafka does not define: refused per feature, as Kafka's controller does.
    Unknown,
}

impl UpgradeType {
    pub fn from_id(id: i8) -> Self {
        match id {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureUpdate {
    pub feature: String,
    pub max_version_level: i16,
    pub upgrade_type: UpgradeType,
}

/// UpdateFeatures' outcome: Kafka applies all the updates or none, and reports the first
/// failure for the whole request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateFeaturesReply {
    pub error: ApiError,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocateProducerIdsReply {
    pub error: ApiError,
    pub producer_id_start: i64,
    pub producer_id_len: i32,
}

/// ElectLeaders' election type (the request's `ElectionType`; v0 requests are PREFERRED).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

impl ElectionType {
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// One topic's ElectLeaders results: (partition index, outcome) in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicElectionResult {
    pub topic: String,
    pub partitions: Vec<(i32, ApiError)>,
}

/// One topic of an AlterPartitionReassignments request: (partition index, target replicas)
/// in request order; None cancels the partition's reassignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignableTopic {
    pub name: String,
    pub partitions: Vec<(i32, Option<Vec<i32>>)>,
}

/// One topic's AlterPartitionReassignments results: (partition index, outcome) in request
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignableTopicResult {
    pub name: String,
    pub partitions: Vec<(i32, ApiError)>,
}

/// One proposed ISR member of an AlterPartition request: v3's `NewIsrWithEpochs` entry, or a
/// v2 `NewIsr` id with epoch -1 (not checked), as Kafka widens v2 requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsrMember {
    pub broker_id: i32,
    /// -1: unknown, the registration's epoch is not compared.
    pub broker_epoch: i64,
}

/// One partition of an AlterPartition request: the ISR its leader wants, against the leader and
/// partition epochs it last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionPartition {
    pub partition_index: i32,
    pub leader_epoch: i32,
    pub new_isr: Vec<IsrMember>,
    /// 0 recovered, 1 recovering (from an unclean election); other values are invalid.
    pub leader_recovery_state: i8,
    pub partition_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionTopic {
    pub topic_id: Uuid,
    pub partitions: Vec<AlterPartitionPartition>,
}

/// An AlterPartition request (v2+: topics by id), sent by a partition leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartition {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub topics: Vec<AlterPartitionTopic>,
}

/// One partition's answer: on success the partition's state after the change (or its current
/// state when nothing changed); on error only the index and code, the rest zero as Kafka
/// leaves them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlterPartitionPartitionReply {
    pub partition_index: i32,
    pub error_code: i16,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub leader_recovery_state: i8,
    pub partition_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionTopicReply {
    pub topic_id: Uuid,
    pub partitions: Vec<AlterPartitionPartitionReply>,
}

/// AlterPartition's answer: a top-level error (then no topics), or one row per requested
/// partition in request order. The wire has no error messages; `error.message` is for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionReply {
    pub error: ApiError,
    pub topics: Vec<AlterPartitionTopicReply>,
}

impl AlterPartitionReply {
    pub fn failed(error: ApiError) -> Self {
        AlterPartitionReply {
            error,
            topics: Vec::new(),
        }
    }
}
