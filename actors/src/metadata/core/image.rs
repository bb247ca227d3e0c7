//! The metadata image (Kafka's `MetadataImage` with its `FeaturesImage`, `ClusterImage`,
//! `TopicsImage`, `ConfigurationsImage`, `ProducerIdsImage`) and record replay (Kafka's
//! `MetadataDelta.replay`). Replaying the same records always yields the same image, whether
//! the records come from the controller that wrote them or from the log after a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kactor_protocol::metadata::register_broker_record::{BrokerEndpoint, BrokerFeature};
use kactor_protocol::Uuid;
use thiserror::Error;

use super::records::api_key::ABORT_TRANSACTION;
use super::records::MetadataRecord;

/// Feature names Kafka finalizes (Kafka's `Feature` / `MetadataVersion`).
pub const METADATA_VERSION_FEATURE: &str = "metadata.version";
/// Finalized by a KRaftVersionRecord in a Raft control batch, not a FeatureLevelRecord.
pub const KRAFT_VERSION_FEATURE: &str = "kraft.version";

/// Kafka's `ConfigResource.Type` ids as they appear in `ConfigRecord.resource_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigResourceType {
    Topic,
    Broker,
    BrokerLogger,
    Group,
    ClientMetrics,
    Unknown(i8),
}

impl ConfigResourceType {
    pub fn id(self) -> i8 {
        match self {
            ConfigResourceType::Topic => 2,
            ConfigResourceType::Broker => 4,
            ConfigResourceType::BrokerLogger => 8,
            ConfigResourceType::ClientMetrics => 16,
            ConfigResourceType::Group => 32,
            ConfigResourceType::Unknown(id) => id,
        }
    }
    pub fn from_id(id: i8) -> Self {
        match id {
            2 => ConfigResourceType::Topic,
            4 => ConfigResourceType::Broker,
            8 => ConfigResourceType::BrokerLogger,
            16 => ConfigResourceType::ClientMetrics,
            32 => ConfigResourceType::Group,
            other => ConfigResourceType::Unknown(other),
        }
    }
}

/// A config entity: a topic by name, a broker by id string, or the cluster-wide broker
/// default (`Broker` with an empty name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigResource {
    pub resource_type: ConfigResourceType,
    pub name: String,
}

impl ConfigResource {
    pub fn topic(name: &str) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: name.to_string(),
        }
    }
    pub fn broker(name: &str) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: name.to_string(),
        }
    }
    pub fn group(name: &str) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Group,
            name: name.to_string(),
        }
    }
    pub fn client_metrics(name: &str) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::ClientMetrics,
            name: name.to_string(),
        }
    }
}

/// One partition's state (Kafka's `PartitionRegistration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistration {
    pub replicas: Vec<i32>,
    pub directories: Vec<Uuid>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
    pub leader: i32,
    pub leader_recovery_state: i8,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionRegistration>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicsImage {
    pub by_id: BTreeMap<Uuid, Arc<TopicImage>>,
    pub by_name: BTreeMap<String, Uuid>,
}

impl TopicsImage {
    pub fn get_by_name(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.by_name.get(name).and_then(|id| self.by_id.get(id))
    }
    pub fn get(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.by_id.get(id)
    }
}

/// A broker's registration (Kafka's `BrokerRegistration`).
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerRegistration {
    pub id: i32,
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub listeners: Vec<BrokerEndpoint>,
    pub supported_features: Vec<BrokerFeature>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    pub log_dirs: Vec<Uuid>,
}

impl BrokerRegistration {
    /// The controller let this broker go at the end of its controlled shutdown (Kafka fences
    /// it then, `SHUTDOWN_NOW`); it stays so until it registers again.
    pub fn shut_down(&self) -> bool {
        self.fenced && self.in_controlled_shutdown
    }
}

/// Where an image was read up to in the metadata log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provenance {
    /// Offset of the last record applied, -1 for the empty image.
    pub last_offset: i64,
    /// Leader epoch of the batch holding that record.
    pub last_epoch: i32,
}

impl Default for Provenance {
    fn default() -> Self {
        Provenance {
            last_offset: -1,
            last_epoch: -1,
        }
    }
}

/// An immutable view of the whole cluster metadata. Request handlers hold an
/// `Arc<MetadataImage>` and read it without locks; only the publisher builds new ones.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetadataImage {
    pub provenance: Provenance,
    /// Finalized feature levels, including `metadata.version`.
    pub features: BTreeMap<String, i16>,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: TopicsImage,
    /// Non-default config values per resource.
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// First producer id not yet handed out (Kafka's `ProducerIdsImage.nextProducerId`).
    pub next_producer_id: i64,
    /// SCRAM credentials by user and mechanism id (Kafka's `ScramImage`).
    pub scram_credentials: BTreeMap<String, BTreeMap<i8, ScramCredential>>,
    /// Controllers that registered (ControllerRegistration, KIP-919): their listeners and
    /// supported features, as the last `RegisterControllerRecord` of each said.
    pub controllers: BTreeMap<
        i32,
        kactor_protocol::metadata::register_controller_record::RegisterControllerRecord,
    >,
    /// Client quotas by entity (Kafka's `ClientQuotasImage`): each entity's quota keys and
    /// values, only entities with at least one value.
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
    /// ACLs by id (Kafka's `AclsImage`), indexed for authorization; shared between images
    /// until an ACL record changes them.
    pub acls: Arc<crate::authorization::acls::AclImage>,
    /// Records of types the image does not model (delegation tokens, ...
    /// as a Kafka controller in a mixed cluster may write them), in commit order, so that a
    /// snapshot of this image loses nothing another node needs.
    pub unmodeled: Vec<MetadataRecord>,
}

/// A client quota entity (Kafka's `ClientQuotaEntity`): entity type (`user`, `client-id`,
/// `ip`) to name, `None` naming the type's default entity.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// One user's SCRAM credential for one mechanism (`UserScramCredentialRecord`): what a SCRAM
/// server needs to check a client's proof without knowing the password (RFC 5802).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: bytes::Bytes,
    pub stored_key: bytes::Bytes,
    pub server_key: bytes::Bytes,
    pub iterations: i32,
}

/// What one replay step changed, accumulated over a batch (the parts of Kafka's
/// `MetadataDelta` publishers look at).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetadataChanges {
    /// Partitions created or changed, by topic id and index.
    pub changed_partitions: BTreeSet<(Uuid, i32)>,
    /// Topics removed, with their last state (so replicas can be stopped and deleted).
    pub deleted_topics: BTreeMap<Uuid, Arc<TopicImage>>,
    pub changed_configs: BTreeSet<ConfigResource>,
    pub changed_brokers: BTreeSet<i32>,
    pub features_changed: bool,
    /// Some client quota was set or removed.
    pub client_quotas_changed: bool,
}

impl MetadataChanges {
    pub fn is_empty(&self) -> bool {
        *self == MetadataChanges::default()
    }
}

/// A record that contradicts the image: the log is corrupt or was written by a broken
/// controller; serving on would mean serving wrong metadata.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ReplayError {
    #[error("partition record for unknown topic id {0}")]
    UnknownTopic(Uuid),
    #[error("partition change for unknown partition {0}-{1}")]
    UnknownPartition(Uuid, i32),
    #[error("topic {name} ({id}) already exists")]
    DuplicateTopic { name: String, id: Uuid },
    #[error("registration change for unknown broker {0}")]
    UnknownBroker(i32),
}

/// `PartitionChangeRecord.leader` value meaning "leader unchanged".
pub const NO_LEADER_CHANGE: i32 = -2;

impl MetadataImage {
    pub fn metadata_version(&self) -> Option<i16> {
        self.features.get(METADATA_VERSION_FEATURE).copied()
    }

    /// Config overrides of one resource (empty if none).
    pub fn config_overrides(&self, resource: &ConfigResource) -> BTreeMap<String, String> {
        self.configs.get(resource).cloned().unwrap_or_default()
    }

    /// Applies one record in place, noting what changed in `changes`.
    pub fn replay(
        &mut self,
        record: &MetadataRecord,
        changes: &mut MetadataChanges,
    ) -> Result<(), ReplayError> {
        match record {
            MetadataRecord::FeatureLevel(r) => {
                // Level 0 means "not finalized": Kafka removes the feature.
                if r.feature_level == 0 {
                    self.features.remove(&r.name);
                } else {
                    self.features.insert(r.name.clone(), r.feature_level);
                }
                changes.features_changed = true;
            }
            MetadataRecord::RegisterBroker(r) => {
                self.brokers.insert(
                    r.broker_id,
                    BrokerRegistration {
                        id: r.broker_id,
                        epoch: r.broker_epoch,
                        incarnation_id: r.incarnation_id,
                        listeners: r.end_points.clone(),
                        supported_features: r.features.clone(),
                        rack: r.rack.clone(),
                        fenced: r.fenced,
                        in_controlled_shutdown: r.in_controlled_shutdown,
                        log_dirs: r.log_dirs.clone(),
                    },
                );
                changes.changed_brokers.insert(r.broker_id);
            }
            MetadataRecord::UnregisterBroker(r) => {
                self.brokers.remove(&r.broker_id);
                changes.changed_brokers.insert(r.broker_id);
            }
            MetadataRecord::FenceBroker(r) => {
                self.broker_mut(r.id)?.fenced = true;
                changes.changed_brokers.insert(r.id);
            }
            MetadataRecord::UnfenceBroker(r) => {
                self.broker_mut(r.id)?.fenced = false;
                changes.changed_brokers.insert(r.id);
            }
            MetadataRecord::BrokerRegistrationChange(r) => {
                let b = self.broker_mut(r.broker_id)?;
                // Kafka's BrokerRegistrationFencingChange / InControlledShutdownChange:
                // 1 = set, -1 = clear, 0 = unchanged.
                match r.fenced {
                    1 => b.fenced = true,
                    -1 => b.fenced = false,
                    _ => {}
                }
                if r.in_controlled_shutdown == 1 {
                    b.in_controlled_shutdown = true;
                }
                if !r.log_dirs.is_empty() {
                    b.log_dirs = r.log_dirs.clone();
                }
                changes.changed_brokers.insert(r.broker_id);
            }
            MetadataRecord::Topic(r) => {
                if let Some(existing) = self.topics.by_name.get(&r.name) {
                    if *existing != r.topic_id {
                        return Err(ReplayError::DuplicateTopic {
                            name: r.name.clone(),
                            id: r.topic_id,
                        });
                    }
                }
                self.topics.by_name.insert(r.name.clone(), r.topic_id);
                self.topics.by_id.insert(
                    r.topic_id,
                    Arc::new(TopicImage {
                        name: r.name.clone(),
                        id: r.topic_id,
                        partitions: BTreeMap::new(),
                    }),
                );
            }
            MetadataRecord::Partition(r) => {
                let topic = self
                    .topics
                    .by_id
                    .get_mut(&r.topic_id)
                    .ok_or(ReplayError::UnknownTopic(r.topic_id))?;
                Arc::make_mut(topic).partitions.insert(
                    r.partition_id,
                    PartitionRegistration {
                        replicas: r.replicas.clone(),
                        directories: r.directories.clone(),
                        isr: r.isr.clone(),
                        removing_replicas: r.removing_replicas.clone(),
                        adding_replicas: r.adding_replicas.clone(),
                        elr: r.eligible_leader_replicas.clone().unwrap_or_default(),
                        last_known_elr: r.last_known_elr.clone().unwrap_or_default(),
                        leader: r.leader,
                        leader_recovery_state: r.leader_recovery_state,
                        leader_epoch: r.leader_epoch,
                        partition_epoch: r.partition_epoch,
                    },
                );
                changes
                    .changed_partitions
                    .insert((r.topic_id, r.partition_id));
            }
            MetadataRecord::PartitionChange(r) => {
                let topic = self
                    .topics
                    .by_id
                    .get_mut(&r.topic_id)
                    .ok_or(ReplayError::UnknownTopic(r.topic_id))?;
                let p = Arc::make_mut(topic)
                    .partitions
                    .get_mut(&r.partition_id)
                    .ok_or(ReplayError::UnknownPartition(r.topic_id, r.partition_id))?;
                merge_partition_change(p, r);
                changes
                    .changed_partitions
                    .insert((r.topic_id, r.partition_id));
            }
            MetadataRecord::RemoveTopic(r) => {
                let topic = self
                    .topics
                    .by_id
                    .remove(&r.topic_id)
                    .ok_or(ReplayError::UnknownTopic(r.topic_id))?;
                self.topics.by_name.remove(&topic.name);
                // A topic's configs die with it (Kafka's ConfigurationsDelta.deleteTopicConfigs).
                let resource = ConfigResource::topic(&topic.name);
                if self.configs.remove(&resource).is_some() {
                    changes.changed_configs.insert(resource);
                }
                changes
                    .changed_partitions
                    .retain(|(id, _)| *id != r.topic_id);
                changes.deleted_topics.insert(r.topic_id, topic);
            }
            MetadataRecord::Config(r) => {
                let resource = ConfigResource {
                    resource_type: ConfigResourceType::from_id(r.resource_type),
                    name: r.resource_name.clone(),
                };
                let entry = self.configs.entry(resource.clone()).or_default();
                match &r.value {
                    Some(v) => {
                        entry.insert(r.name.clone(), v.clone());
                    }
                    None => {
                        entry.remove(&r.name);
                    }
                }
                if entry.is_empty() {
                    self.configs.remove(&resource);
                }
                changes.changed_configs.insert(resource);
            }
            MetadataRecord::ProducerIds(r) => {
                self.next_producer_id = r.next_producer_id;
            }
            MetadataRecord::UserScramCredential(r) => {
                self.scram_credentials
                    .entry(r.name.clone())
                    .or_default()
                    .insert(
                        r.mechanism,
                        ScramCredential {
                            salt: r.salt.clone(),
                            stored_key: r.stored_key.clone(),
                            server_key: r.server_key.clone(),
                            iterations: r.iterations,
                        },
                    );
            }
            MetadataRecord::RemoveUserScramCredential(r) => {
                if let Some(user) = self.scram_credentials.get_mut(&r.name) {
                    user.remove(&r.mechanism);
                    if user.is_empty() {
                        self.scram_credentials.remove(&r.name);
                    }
                }
            }
            MetadataRecord::RegisterController(r) => {
                self.controllers.insert(r.controller_id, r.clone());
            }
            MetadataRecord::ClientQuota(r) => {
                // A repeated entity type keeps its last name, as Kafka's map of the record's
                // components does.
                let entity: QuotaEntity = r
                    .entity
                    .iter()
                    .map(|e| (e.entity_type.clone(), e.entity_name.clone()))
                    .collect();
                if r.remove {
                    if let Some(values) = self.client_quotas.get_mut(&entity) {
                        values.remove(&r.key);
                        if values.is_empty() {
                            self.client_quotas.remove(&entity);
                        }
                    }
                } else {
                    self.client_quotas
                        .entry(entity)
                        .or_default()
                        .insert(r.key.clone(), r.value);
                }
                changes.client_quotas_changed = true;
            }
            MetadataRecord::AccessControlEntry(r) => {
                Arc::make_mut(&mut self.acls).insert(
                    r.id,
                    crate::authorization::acls::StandardAcl::from_record(r),
                );
            }
            MetadataRecord::RemoveAccessControlEntry(r) => {
                // Kafka's AclsDelta refuses to remove an ACL it does not have; a log that does
                // is wrong, but nothing it names is left to protect, so replay goes on.
                if Arc::make_mut(&mut self.acls).remove(&r.id).is_none() {
                    tracing::warn!(id = %r.id, "RemoveAccessControlEntryRecord for an unknown ACL");
                }
            }
            // An AbortTransactionRecord ends a metadata transaction, like EndTransaction: it
            // carries no state, and a stray one in a snapshot would confuse its readers.
            MetadataRecord::Other { api_key, .. } if *api_key == ABORT_TRANSACTION => {}
            MetadataRecord::Other { .. } => self.unmodeled.push(record.clone()),
            MetadataRecord::NoOp(_)
            | MetadataRecord::BeginTransaction(_)
            | MetadataRecord::EndTransaction(_) => {}
        }
        Ok(())
    }

    /// Applies the kraft.version a committed KRaftVersionRecord (a Raft control record)
    /// finalizes; it is listed with the other features, as Kafka's FeaturesImage lists it.
    pub fn replay_kraft_version(&mut self, level: i16, changes: &mut MetadataChanges) {
        if level == 0 {
            self.features.remove(KRAFT_VERSION_FEATURE);
        } else {
            self.features
                .insert(KRAFT_VERSION_FEATURE.to_string(), level);
        }
        changes.features_changed = true;
    }

    fn broker_mut(&mut self, id: i32) -> Result<&mut BrokerRegistration, ReplayError> {
        self.brokers
            .get_mut(&id)
            .ok_or(ReplayError::UnknownBroker(id))
    }

    /// Replays a committed batch onto a copy of `self` (Kafka's delta-then-apply).
    pub fn apply_batch<'a>(
        &self,
        records: impl IntoIterator<Item = &'a MetadataRecord>,
        last_offset: i64,
        epoch: i32,
    ) -> Result<(MetadataImage, MetadataChanges), ReplayError> {
        let mut next = self.clone();
        let mut changes = MetadataChanges::default();
        for r in records {
            next.replay(r, &mut changes)?;
        }
        next.provenance = Provenance {
            last_offset,
            last_epoch: epoch,
        };
        Ok((next, changes))
    }
}

/// Kafka's `PartitionRegistration.merge`: absent fields keep their value, a leader change bumps
/// the leader epoch, and every change bumps the partition epoch.
pub(crate) fn merge_partition_change(
    p: &mut PartitionRegistration,
    r: &kactor_protocol::metadata::PartitionChangeRecord,
) {
    if let Some(isr) = &r.isr {
        p.isr = isr.clone();
    }
    if let Some(replicas) = &r.replicas {
        p.replicas = replicas.clone();
    }
    if let Some(v) = &r.removing_replicas {
        p.removing_replicas = v.clone();
    }
    if let Some(v) = &r.adding_replicas {
        p.adding_replicas = v.clone();
    }
    if let Some(v) = &r.directories {
        p.directories = v.clone();
    }
    if let Some(v) = &r.eligible_leader_replicas {
        p.elr = v.clone();
    }
    if let Some(v) = &r.last_known_elr {
        p.last_known_elr = v.clone();
    }
    if r.leader != NO_LEADER_CHANGE {
        p.leader = r.leader;
        p.leader_epoch += 1;
    }
    if r.leader_recovery_state != -1 {
        p.leader_recovery_state = r.leader_recovery_state;
    }
    p.partition_epoch += 1;
}
