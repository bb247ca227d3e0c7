//! MetadataPublisherActor's mailbox and the notifications it publishes (Kafka's
//! `MetadataPublisher.onMetadataUpdate` consumers: `BrokerMetadataPublisher` →
//! `ReplicaManager.applyDelta`, `DynamicConfigPublisher`).

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;

use crate::runtime::MeteredRecipient;

use super::core::{LocalPartitionChange, MetadataImage, TopicConfigChange};

/// Sent by MetadataPublisherActor to each partition-changes subscriber (the replica manager)
/// after every committed delta that touches this node's replicas or their topics' configs, and
/// with no changes for every newer image otherwise (the subscriber publishes each image to the
/// request handlers once it has applied it, Kafka's order); the first one after subscribing
/// lists every hosted replica. Lost, a partition would not become leader (clients see
/// NOT_LEADER_OR_FOLLOWER) or keep serving a deleted topic.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct PartitionsChanged {
    /// The image these changes lead to.
    pub image: Arc<MetadataImage>,
    /// Per replica: become leader / become follower / delete, with topic name and id,
    /// partition index, leader id and epoch, partition epoch, replicas, ISR and the topic's
    /// config overrides.
    pub partitions: Vec<LocalPartitionChange>,
    /// Topics whose config overrides changed (their hosted partitions must reload config).
    pub topic_configs: Vec<TopicConfigChange>,
}

/// Sent by MetadataPublisherActor to each broker-config subscriber when the dynamic broker
/// configs (cluster default `""` or this broker's id) change; the first one after subscribing
/// carries the current values. Lost, a dynamic config change would not apply until restart.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct BrokerConfigsChanged {
    pub cluster_default: BTreeMap<String, String>,
    pub this_broker: BTreeMap<String, String>,
}

/// Sent by the topology / replica manager: subscribe to [`PartitionsChanged`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct SubscribePartitionChanges {
    pub subscriber: MeteredRecipient<PartitionsChanged>,
}

/// Sent by the topology / config owner: subscribe to [`BrokerConfigsChanged`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct SubscribeBrokerConfigChanges {
    pub subscriber: MeteredRecipient<BrokerConfigsChanged>,
}

/// Query: the current image (request handlers normally read the watch channel instead).
#[derive(Debug, Message)]
#[rtype(result = "Arc<MetadataImage>")]
pub struct GetMetadataImage;
