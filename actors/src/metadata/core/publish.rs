//! What this node must do after a committed delta (Kafka's `BrokerMetadataPublisher` /
//! `ReplicaManager.applyDelta` inputs, computed from `TopicsDelta.localChanges`): which local
//! replicas become leader or follower, which are deleted, and which configs changed.

use std::collections::BTreeMap;

use kactor_protocol::Uuid;

use super::image::{ConfigResource, ConfigResourceType, MetadataChanges, MetadataImage};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalPartitionChangeKind {
    /// This node is the partition's leader (new, or the leader epoch / ISR changed).
    BecomeLeader,
    /// This node hosts a replica led by another broker, or by no one (`leader_id` -1: the
    /// partition is offline, e.g. while this broker re-registers after a restart; a
    /// BecomeLeader with a higher leader epoch follows once it is unfenced).
    BecomeFollower,
    /// This node no longer hosts the replica (topic deleted or reassigned away): stop it and
    /// delete its log.
    Delete,
}

/// One local replica's new state, everything a partition needs to act on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPartitionChange {
    pub kind: LocalPartitionChangeKind,
    pub topic_name: String,
    pub topic_id: Uuid,
    pub partition_index: i32,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The topic's config overrides (name → value); defaults come from the broker config.
    pub config_overrides: BTreeMap<String, String>,
}

/// A topic whose config overrides changed; hosted partitions of it must re-read their config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfigChange {
    pub topic_name: String,
    pub topic_id: Uuid,
    pub config_overrides: BTreeMap<String, String>,
}

/// Dynamic broker configs after a change (Kafka's `DynamicConfigPublisher` input): the
/// cluster-wide default entity (`""`) and this broker's own entity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrokerConfigChange {
    pub cluster_default: BTreeMap<String, String>,
    pub this_broker: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocalChanges {
    pub partitions: Vec<LocalPartitionChange>,
    pub topic_configs: Vec<TopicConfigChange>,
    pub broker_configs: Option<BrokerConfigChange>,
}

impl LocalChanges {
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty() && self.topic_configs.is_empty() && self.broker_configs.is_none()
    }
}

/// Computes the local consequences of `changes`, which turned `old` into `new`.
pub fn local_changes(
    old: &MetadataImage,
    new: &MetadataImage,
    changes: &MetadataChanges,
    node_id: i32,
) -> LocalChanges {
    let mut out = LocalChanges::default();
    for (topic_id, index) in &changes.changed_partitions {
        let Some(topic) = new.topics.get(topic_id) else {
            continue;
        };
        let Some(p) = topic.partitions.get(index) else {
            continue;
        };
        let was_replica = old
            .topics
            .get(topic_id)
            .and_then(|t| t.partitions.get(index))
            .is_some_and(|p| p.replicas.contains(&node_id));
        let kind = if p.replicas.contains(&node_id) {
            if p.leader == node_id {
                LocalPartitionChangeKind::BecomeLeader
            } else {
                LocalPartitionChangeKind::BecomeFollower
            }
        } else if was_replica {
            LocalPartitionChangeKind::Delete
        } else {
            continue;
        };
        out.partitions.push(LocalPartitionChange {
            kind,
            topic_name: topic.name.clone(),
            topic_id: *topic_id,
            partition_index: *index,
            leader_id: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            config_overrides: new.config_overrides(&ConfigResource::topic(&topic.name)),
        });
    }
    for (topic_id, topic) in &changes.deleted_topics {
        // A topic created and deleted within one delta was never in `old`; its replicas were
        // never started, but deleting them is harmless and keeps the rule simple.
        for (index, p) in &topic.partitions {
            if p.replicas.contains(&node_id) {
                out.partitions.push(LocalPartitionChange {
                    kind: LocalPartitionChangeKind::Delete,
                    topic_name: topic.name.clone(),
                    topic_id: *topic_id,
                    partition_index: *index,
                    leader_id: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    config_overrides: BTreeMap::new(),
                });
            }
        }
    }
    let mut broker_changed = false;
    for resource in &changes.changed_configs {
        match resource.resource_type {
            ConfigResourceType::Topic => {
                if let Some(topic) = new.topics.get_by_name(&resource.name) {
                    out.topic_configs.push(TopicConfigChange {
                        topic_name: topic.name.clone(),
                        topic_id: topic.id,
                        config_overrides: new.config_overrides(resource),
                    });
                }
            }
            ConfigResourceType::Broker
                if resource.name.is_empty() || resource.name == node_id.to_string() =>
            {
                broker_changed = true;
            }
            _ => {}
        }
    }
    if broker_changed {
        out.broker_configs = Some(broker_configs(new, node_id));
    }
    out
}

/// The dynamic broker configs this node should run with, from an image.
pub fn broker_configs(image: &MetadataImage, node_id: i32) -> BrokerConfigChange {
    BrokerConfigChange {
        cluster_default: image.config_overrides(&ConfigResource::broker("")),
        this_broker: image.config_overrides(&ConfigResource::broker(&node_id.to_string())),
    }
}
