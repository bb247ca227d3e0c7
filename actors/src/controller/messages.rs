//! QuorumControllerActor's mailbox: one message per controller operation (Kafka's
//! `Controller` interface: createTopics, deleteTopics, createPartitions,
//! incrementalAlterConfigs, legacyAlterConfigs, registerBroker, processBrokerHeartbeat,
//! alterPartition, unregisterBroker, updateFeatures, allocateProducerIds, electLeaders, alterUserScramCredentials). Each
//! answers once its records are committed.

use actix::prelude::*;

use super::core::requests::*;

/// A controller answer, with the metadata offset that made it true: a handler that wants the
/// local image to reflect it waits for the published image to reach `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed<R> {
    pub response: R,
    /// Offset of the last record written for this request (or of the last write it had to
    /// wait for); -1 if none.
    pub offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// This node is not the active controller (or lost leadership before the commit):
    /// answer NOT_CONTROLLER so the client retries.
    #[error("this node is not the active controller")]
    NotController,
    /// The records could not be written.
    #[error("metadata write failed: {0}")]
    WriteFailed(String),
}

pub type ControllerReply<R> = Result<Committed<R>, ControllerError>;

/// Sent by the CreateTopics handler (and Metadata auto-creation). Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<CreatableTopicResult>>")]
pub struct CreateTopics {
    pub topics: Vec<CreatableTopic>,
    pub validate_only: bool,
}

/// Sent by the DeleteTopics handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<DeletableTopicResult>>")]
pub struct DeleteTopics {
    pub topics: Vec<TopicRef>,
}

/// Sent by the CreatePartitions handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<CreatePartitionsTopicResult>>")]
pub struct CreatePartitions {
    pub topics: Vec<CreatePartitionsTopic>,
    pub validate_only: bool,
}

/// Sent by the IncrementalAlterConfigs handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<AlterConfigsResourceResult>>")]
pub struct IncrementalAlterConfigs {
    pub resources: Vec<IncrementalAlterConfigsResource>,
    pub validate_only: bool,
}

/// Sent by the (legacy) AlterConfigs handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<AlterConfigsResourceResult>>")]
pub struct AlterConfigs {
    pub resources: Vec<AlterConfigsResource>,
    pub validate_only: bool,
}

/// Sent by a broker's lifecycle actor (or the BrokerRegistration API). Lost: the broker retries.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<BrokerRegistrationReply>")]
pub struct RegisterBroker {
    pub registration: BrokerRegistration,
}

/// Sent by the ControllerRegistration API (another controller announcing itself). Lost: that
/// controller retries.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<super::core::errors::ApiError>")]
pub struct RegisterController {
    pub record: kactor_protocol::metadata::RegisterControllerRecord,
}

/// Sent by a broker's lifecycle actor every `broker.heartbeat.interval.ms`. Lost: one missed
/// heartbeat; the session survives until `broker.session.timeout.ms`.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<BrokerHeartbeatReply>")]
pub struct ProcessBrokerHeartbeat {
    pub heartbeat: BrokerHeartbeat,
}

/// Sent by the AlterPartition API: a partition leader (on any broker) changing its ISR. Lost:
/// the leader retries with the epochs it knows.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<AlterPartitionReply>")]
pub struct ProcessAlterPartition {
    pub request: AlterPartition,
}

/// Sent by the UnregisterBroker handler (`kafka-cluster unregister`). Lost: the client times
/// out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<super::core::errors::ApiError>")]
pub struct UnregisterBroker {
    pub broker_id: i32,
}

/// Sent by the UpdateFeatures handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<UpdateFeaturesReply>")]
pub struct UpdateFeatures {
    pub updates: Vec<FeatureUpdate>,
    pub validate_only: bool,
}

/// Sent by a broker's producer-id manager (InitProducerId path). Lost: the caller retries.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<AllocateProducerIdsReply>")]
pub struct AllocateProducerIds {
    pub broker_id: i32,
    pub broker_epoch: i64,
}

/// Sent by the ElectLeaders handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<TopicElectionResult>>")]
pub struct ElectLeaders {
    pub election: ElectionType,
    /// (topic, partition indexes) as requested; None: every partition.
    pub partitions: Option<Vec<(String, Vec<i32>)>>,
}

/// Sent by the AlterPartitionReassignments handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<ReassignableTopicResult>>")]
pub struct AlterPartitionReassignments {
    pub topics: Vec<ReassignableTopic>,
    /// KIP-860 (v1): false refuses targets that change a partition's replication factor.
    pub allow_replication_factor_change: bool,
}

/// Sent by the AlterUserScramCredentials handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<(String, super::core::errors::ApiError)>>")]
pub struct AlterUserScramCredentials {
    pub deletions: Vec<super::core::scram::ScramDeletion>,
    pub upsertions: Vec<super::core::scram::ScramUpsertion>,
}

/// Sent by the AlterClientQuotas handler. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(
    result = "ControllerReply<Vec<(super::core::client_quotas::EntityComponents, super::core::errors::ApiError)>>"
)]
pub struct AlterClientQuotas {
    pub alterations: Vec<super::core::client_quotas::QuotaAlteration>,
    pub validate_only: bool,
    /// Ip entity names that neither parse as an address nor resolve (looked up by the handler).
    pub unresolvable: std::collections::BTreeSet<String>,
}

/// Sent by the CreateAcls handler: the ACLs to add, already parsed. Lost: the client times
/// out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<super::core::errors::ApiError>>")]
pub struct CreateAcls {
    pub acls: Vec<crate::authorization::acls::StandardAcl>,
}

/// Sent by the DeleteAcls handler: one result per filter. Lost: the client times out.
#[derive(Debug, Message)]
#[rtype(result = "ControllerReply<Vec<super::core::acls::DeleteAclsResult>>")]
pub struct DeleteAcls {
    pub filters: Vec<crate::authorization::acls::AclFilter>,
}
