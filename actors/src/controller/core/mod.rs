//! The quorum controller's logic (Kafka's `QuorumController` with its
//! `ReplicationControlManager`, `ConfigurationControlManager`, `ClusterControlManager`,
//! `FeatureControlManager`, `ProducerIdControlManager`): a single-threaded state machine that
//! turns requests into metadata records plus a response. Pure: no actix, no I/O, time and
//! randomness come in from outside.
//!
//! The core applies the records it generates to its own image at once (so the next request sees
//! them, as Kafka's timeline structures do); the shell answers only after Raft commits them.

pub mod acls;
mod alter_partition;
pub mod broker_configs;
pub mod client_metrics_configs;
pub mod client_quotas;
mod elections;
pub mod errors;
pub mod group_configs;
mod partition_change;
mod reassignments;
pub mod requests;
pub mod scram;
pub mod topic_configs;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::metadata::register_broker_record::BrokerFeature;
use kactor_protocol::metadata::{
    BeginTransactionRecord, BrokerRegistrationChangeRecord, ConfigRecord, EndTransactionRecord,
    FeatureLevelRecord, NoOpRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, RegisterControllerRecord, RemoveTopicRecord, TopicRecord,
    UnregisterBrokerRecord,
};
use kactor_protocol::Uuid;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::metadata::core::image::NO_LEADER_CHANGE;
use crate::metadata::core::{
    ConfigResource, ConfigResourceType, MetadataChanges, MetadataImage, MetadataRecord,
    PartitionRegistration, ReplayError,
};
use crate::raft::core::KRaftVersionRange;
use errors::*;
use kactor_protocol::errors::*;
use requests::*;
use topic_configs::ConfigLayers;

/// `metadata.version` level of Kafka 4.4-IV2, the latest production level of Kafka 4.4.0
/// (`kafka-storage format` bootstraps it).
pub const LATEST_METADATA_VERSION: i16 = 33;
/// The first `metadata.version` with controller registrations (3.7-IV0).
pub const CONTROLLER_REGISTRATION_METADATA_VERSION: i16 = 15;
/// The lowest `metadata.version` Kafka 4.x supports (3.3-IV3).
pub const MINIMUM_METADATA_VERSION: i16 = 7;

/// Features this controller supports, as (name, min, max, level finalized at bootstrap), with
/// exactly Kafka 4.4.0's ranges (the same set ApiVersions advertises), so that
/// `kafka-features upgrade --release-version 4.4` and the other levels Kafka's tools set are
/// accepted. Bootstrap levels are those of Kafka 4.4's `kafka-storage format` with static
/// voters, except for the two features whose behaviour kactor does not implement:
/// streams.version (streams groups) and eligible.leader.replicas.version (KIP-966's ELR upkeep)
/// start unset. An admin may still finalize them; clients find streams groups through their
/// APIs (StreamsGroupHeartbeat, ...), which kactor never advertises, so they get the same
/// UNSUPPORTED_VERSION a Kafka broker without the feature answers, and DescribeTopicPartitions
/// keeps reporting empty ELR lists, a valid state. share.version starts at 2 as in Kafka: share
/// groups are served (level 2's dead-letter queue is not; see docs/compatibility.md).
/// `kraft.version` is finalized through a Raft control record, not a FeatureLevelRecord.
pub const SUPPORTED_FEATURES: &[(&str, i16, i16, i16)] = &[
    ("eligible.leader.replicas.version", 0, 1, 0),
    ("group.version", 0, 1, 1),
    (
        KRAFT_VERSION,
        KRaftVersionRange::UP_TO_1.min,
        KRaftVersionRange::UP_TO_1.max,
        0,
    ),
    (
        METADATA_VERSION,
        MINIMUM_METADATA_VERSION,
        LATEST_METADATA_VERSION,
        LATEST_METADATA_VERSION,
    ),
    ("share.version", 0, 2, 2),
    ("streams.version", 0, 1, 0),
    ("transaction.version", 0, 2, 2),
];

const METADATA_VERSION: &str = crate::metadata::core::image::METADATA_VERSION_FEATURE;
const KRAFT_VERSION: &str = crate::metadata::core::image::KRAFT_VERSION_FEATURE;

/// (feature, from level, needs feature, at least level): Kafka 4.4's feature dependencies
/// (`kafka-features feature-dependencies`).
const FEATURE_DEPENDENCIES: &[(&str, i16, &str, i16)] =
    &[("eligible.leader.replicas.version", 1, METADATA_VERSION, 23)];

/// The metadata.version levels (7..=33) whose records earlier levels cannot read (Kafka's
/// `MetadataVersion.didMetadataChange`): a downgrade across one of them is refused.
const METADATA_CHANGING_LEVELS: &[i16] = &[7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33];

/// Whether going from metadata.version `high` down to `low` crosses a level that changed the
/// metadata format (Kafka's `MetadataVersion.checkIfMetadataChanged`).
fn metadata_changed_between(low: i16, high: i16) -> bool {
    METADATA_CHANGING_LEVELS
        .iter()
        .any(|l| low < *l && *l <= high)
}

/// What one feature update writes.
#[derive(Debug)]
enum FeatureChange {
    None,
    /// A FeatureLevelRecord finalizing the feature at this level (0 removes it).
    Level(i16),
    /// kraft.version asked for with an upgrade (Raft writes it; the request waits on a
    /// NoOpRecord).
    KRaftVersion,
}

/// Producer ids are handed to brokers in blocks of this size (Kafka's
/// `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

/// Longest legal topic name (Kafka's `Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;
/// The most partitions one CreateTopics or CreatePartitions request may add (Kafka's
/// `QuorumController.MAX_RECORDS_PER_USER_OP`): checked before anything is placed or
/// allocated, so no request can make the controller build an unbounded batch.
pub const MAX_PARTITIONS_PER_REQUEST: i64 = 10_000;

/// Static settings of the controller (from server.properties).
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub node_id: i32,
    pub cluster_id: String,
    /// `num.partitions`
    pub num_partitions: i32,
    /// `default.replication.factor`
    pub default_replication_factor: i16,
    /// `min.insync.replicas`, written as the cluster default at bootstrap (Kafka 4 does this
    /// because ELR is on).
    pub min_insync_replicas: i32,
    /// `broker.session.timeout.ms`
    pub broker_session_timeout_ms: i64,
    /// `delete.topic.enable`
    pub delete_topic_enable: bool,
    /// `metadata.max.idle.interval.ms`: how often the active controller appends a NoOpRecord,
    /// so that the metadata high watermark keeps moving (brokers and `kafka-metadata-quorum`
    /// see the quorum alive); 0 disables it.
    pub max_idle_interval_ms: i64,
    /// `auto.leader.rebalance.enable` with `leader.imbalance.check.interval.seconds` (in ms):
    /// how often leadership goes back to preferred replicas; None: never.
    pub leader_imbalance_check_interval_ms: Option<i64>,
    /// `unclean.leader.election.interval.ms`: how often leaderless partitions of topics that
    /// allow it get an unclean election.
    pub unclean_leader_election_interval_ms: i64,
    /// The broker's static (server.properties) values, for config sources in responses.
    pub static_broker_configs: BTreeMap<String, String>,
    /// The node's broker config table: every key it defines, and whether Kafka lets it change
    /// at run time. Dynamic keys beyond [`topic_configs::is_dynamic_broker_config`] are ones
    /// kactor defines so that tools see Kafka's set (SSL, SASL, listeners, tiered storage,
    /// ...): stored as Kafka stores them, changing nothing in kactor. A key outside the table
    /// is a custom config, which Kafka stores like a dynamic one (plugins read them). Empty =
    /// no table: only `is_dynamic_broker_config` keys are accepted.
    pub broker_config_table: BTreeMap<String, bool>,
    /// The value check of each broker key that has one (its type and bounds, from the same
    /// table); dynamic values are checked against it before they are stored.
    pub broker_value_kinds: BTreeMap<String, topic_configs::ConfigType>,
    /// The node's effective broker values (static, else Kafka's default): the bounds and
    /// defaults of group configs, and the current size of the thread pools.
    pub broker_values: BTreeMap<String, String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            node_id: 1,
            cluster_id: String::new(),
            num_partitions: 1,
            default_replication_factor: 1,
            min_insync_replicas: 1,
            broker_session_timeout_ms: 9000,
            delete_topic_enable: true,
            max_idle_interval_ms: 500,
            leader_imbalance_check_interval_ms: Some(300_000),
            unclean_leader_election_interval_ms: 300_000,
            static_broker_configs: BTreeMap::new(),
            broker_config_table: BTreeMap::new(),
            broker_value_kinds: BTreeMap::new(),
            broker_values: BTreeMap::new(),
        }
    }
}

/// Records to append (atomically, in one batch) and the reply to send once they commit.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerResult<T> {
    pub records: Vec<MetadataRecord>,
    pub response: T,
}

impl<T> ControllerResult<T> {
    fn of(records: Vec<MetadataRecord>, response: T) -> Self {
        ControllerResult { records, response }
    }
}

/// The controller state machine.
#[derive(Debug)]
pub struct QuorumControllerCore {
    cfg: ControllerConfig,
    image: MetadataImage,
    /// Offset the next generated record will get; valid while active.
    next_offset: i64,
    /// Highest offset applied to `image` (committed or our own pending writes).
    applied_offset: i64,
    active: bool,
    /// Heartbeat deadlines (ms) of registered brokers; not persisted, like Kafka's
    /// `BrokerHeartbeatManager`: a new leader starts every live broker's session afresh.
    session_deadlines: BTreeMap<i32, i64>,
    /// Brokers this controller has heard from (registration or heartbeat) since it became
    /// active. Only their sessions can make a new incarnation a duplicate: a session started
    /// on activation is a grace period for fencing, not proof that the old process lives (after
    /// a single node restarts, its broker and controller come back together).
    heard_from: BTreeSet<i32>,
    /// Offset of each broker's RegisterBrokerRecord: a broker is caught up once its metadata
    /// offset reaches it.
    registration_offsets: BTreeMap<i32, i64>,
    /// The metadata offset each broker last reported in a heartbeat (Kafka's
    /// `BrokerHeartbeatState.metadataOffset`).
    metadata_offsets: BTreeMap<i32, i64>,
    /// Offset of the last record that moved a broker's leaderships away when it entered
    /// controlled shutdown: it may go once every active broker has caught up with it.
    controlled_shutdown_offsets: BTreeMap<i32, i64>,
    /// When `tick` last ran: a longer gap than [`STALL_MS`] means this controller was not
    /// running (see `tick`).
    last_tick_ms: Option<i64>,
    rng: StdRng,
}

/// A gap between two session checks longer than this (they run every 250 ms) means the
/// controller itself was stalled: a stopped process (SIGSTOP), a frozen VM, a blocked thread.
pub const STALL_MS: i64 = 2_000;

impl QuorumControllerCore {
    pub fn new(cfg: ControllerConfig, seed: u64) -> Self {
        QuorumControllerCore {
            cfg,
            image: MetadataImage::default(),
            next_offset: 0,
            applied_offset: -1,
            active: false,
            session_deadlines: BTreeMap::new(),
            heard_from: BTreeSet::new(),
            registration_offsets: BTreeMap::new(),
            metadata_offsets: BTreeMap::new(),
            controlled_shutdown_offsets: BTreeMap::new(),
            last_tick_ms: None,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// The controller's view, including records not yet committed.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Offset of the last record this controller generated or replayed.
    pub fn applied_offset(&self) -> i64 {
        self.applied_offset
    }

    /// Replays committed records (from the log, written by any leader). Records this controller
    /// wrote itself were applied when generated and are skipped.
    pub fn replay_committed(
        &mut self,
        base_offset: i64,
        records: &[MetadataRecord],
    ) -> Result<(), ReplayError> {
        let mut changes = MetadataChanges::default();
        for (i, r) in records.iter().enumerate() {
            let offset = base_offset + i as i64;
            if offset <= self.applied_offset {
                continue;
            }
            self.image.replay(r, &mut changes)?;
            if let MetadataRecord::RegisterBroker(reg) = r {
                self.registration_offsets.insert(reg.broker_id, offset);
            }
            self.applied_offset = offset;
        }
        Ok(())
    }

    /// Raft made this node leader; `next_offset` is where the next record will land (after the
    /// leader's own control record). Returns the bootstrap records when the log holds no
    /// metadata yet.
    pub fn activate(&mut self, next_offset: i64, now_ms: i64) -> Vec<MetadataRecord> {
        self.active = true;
        self.heard_from.clear();
        self.next_offset = next_offset;
        // Offsets up to here are control records or already replayed.
        self.applied_offset = self.applied_offset.max(next_offset - 1);
        self.session_deadlines = self
            .image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| (b.id, now_ms + self.cfg.broker_session_timeout_ms))
            .collect();
        if self.image.metadata_version().is_none() {
            let records = self.bootstrap_records();
            self.apply_own(&records);
            records
        } else {
            Vec::new()
        }
    }

    /// Raft lost leadership: pending writes may never commit, so the caller must rebuild this
    /// core from committed records (Kafka's `renounce` → revert to the last committed snapshot).
    pub fn deactivate(&mut self) {
        self.active = false;
    }

    /// What `kafka-storage format` writes, in a metadata transaction as Kafka 4.4's controller
    /// copies it into the log.
    pub fn bootstrap_records(&self) -> Vec<MetadataRecord> {
        let mut recs = vec![MetadataRecord::BeginTransaction(BeginTransactionRecord {
            name: Some("Bootstrap records".into()),
            ..Default::default()
        })];
        // metadata.version first: it decides how every later record is read.
        let mut features: Vec<_> = SUPPORTED_FEATURES
            .iter()
            .filter(|(name, _, _, default)| *default > 0 && *name != "kraft.version")
            .collect();
        features.sort_by_key(|(name, ..)| *name != "metadata.version");
        for (name, _, _, level) in features {
            recs.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: name.to_string(),
                feature_level: *level,
                ..Default::default()
            }));
        }
        recs.push(MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Broker.id(),
            resource_name: String::new(),
            name: "min.insync.replicas".into(),
            value: Some(self.cfg.min_insync_replicas.to_string()),
            ..Default::default()
        }));
        recs.push(MetadataRecord::EndTransaction(
            EndTransactionRecord::default(),
        ));
        recs
    }

    fn apply_own(&mut self, records: &[MetadataRecord]) {
        let mut changes = MetadataChanges::default();
        for r in records {
            // Generated from this very image, so replay cannot fail; a failure would be a bug
            // that must not be papered over.
            self.image
                .replay(r, &mut changes)
                .expect("controller generated a record its own image rejects");
            if let MetadataRecord::RegisterBroker(reg) = r {
                self.registration_offsets
                    .insert(reg.broker_id, self.next_offset);
            }
            self.applied_offset = self.next_offset;
            self.next_offset += 1;
        }
    }

    fn finish<T>(&mut self, records: Vec<MetadataRecord>, response: T) -> ControllerResult<T> {
        self.apply_own(&records);
        ControllerResult::of(records, response)
    }

    fn not_controller<T>(&self, response: T) -> Option<ControllerResult<T>> {
        if self.active {
            None
        } else {
            Some(ControllerResult::of(Vec::new(), response))
        }
    }

    fn new_topic_id(&mut self) -> Uuid {
        loop {
            let id = Uuid::random_with(&mut self.rng);
            if !self.image.topics.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    /// Whether `broker` can take new replicas or leadership: registered, unfenced and not
    /// shutting down (Kafka's `isActive`).
    fn is_usable(&self, broker: i32) -> bool {
        self.image
            .brokers
            .get(&broker)
            .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
    }

    /// Brokers that can take new replicas, in id order.
    fn usable_brokers(&self) -> Vec<i32> {
        self.image
            .brokers
            .keys()
            .copied()
            .filter(|id| self.is_usable(*id))
            .collect()
    }

    /// The directory a replica goes to: the broker's only log dir, or UNASSIGNED (zero) when it
    /// has several and will pick itself (Kafka's `DirectoryId.UNASSIGNED`).
    fn directories_for(&self, replicas: &[i32]) -> Vec<Uuid> {
        replicas
            .iter()
            .map(
                |id| match self.image.brokers.get(id).map(|b| &b.log_dirs[..]) {
                    Some([only]) => *only,
                    _ => Uuid::ZERO,
                },
            )
            .collect()
    }

    /// Striped placement (Kafka's `StripedReplicaPlacer` without racks): partition `p` starts at
    /// `start + p` and takes the next `rf` brokers round the ring.
    fn place(
        &mut self,
        brokers: &[i32],
        first_partition: i32,
        count: i32,
        rf: usize,
    ) -> Vec<Vec<i32>> {
        let n = brokers.len();
        let start = self.rng.gen_range(0..n);
        (0..count)
            .map(|i| {
                let p = (first_partition + i) as usize;
                (0..rf).map(|j| brokers[(start + p + j) % n]).collect()
            })
            .collect()
    }

    fn partition_record(&self, topic_id: Uuid, index: i32, replicas: Vec<i32>) -> PartitionRecord {
        // A new partition's leader is its first live replica; all live replicas are in sync.
        let live: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|id| self.image.brokers.get(id).is_some_and(|b| !b.fenced))
            .collect();
        PartitionRecord {
            partition_id: index,
            topic_id,
            directories: self.directories_for(&replicas),
            leader: live.first().copied().unwrap_or(-1),
            isr: if live.is_empty() {
                replicas.clone()
            } else {
                live
            },
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            ..Default::default()
        }
    }

    fn config_layers_for<'a>(
        &'a self,
        topic: &'a BTreeMap<String, String>,
        dynamic_broker: &'a BTreeMap<String, String>,
        dynamic_default: &'a BTreeMap<String, String>,
    ) -> ConfigLayers<'a> {
        ConfigLayers {
            topic,
            dynamic_broker,
            dynamic_default_broker: dynamic_default,
            static_broker: &self.cfg.static_broker_configs,
        }
    }

    // -----------------------------------------------------------------------------------------
    // CreateTopics

    pub fn create_topics(
        &mut self,
        topics: &[CreatableTopic],
        validate_only: bool,
    ) -> ControllerResult<Vec<CreatableTopicResult>> {
        let failed = |name: &str, e: ApiError| CreatableTopicResult {
            name: name.to_string(),
            topic_id: Uuid::ZERO,
            error: e,
            num_partitions: -1,
            replication_factor: -1,
            configs: Vec::new(),
        };
        // Kafka (ControllerApis.createTopics) drops every copy of a name the request holds more
        // than once before anything else and answers one INVALID_REQUEST row per such name,
        // after the other rows.
        let mut count = BTreeMap::<&str, usize>::new();
        for t in topics {
            *count.entry(t.name.as_str()).or_default() += 1;
        }
        let mut duplicates: Vec<&str> = Vec::new();
        for t in topics {
            if count[t.name.as_str()] > 1 && !duplicates.contains(&t.name.as_str()) {
                duplicates.push(&t.name);
            }
        }
        let duplicate_rows = || {
            duplicates
                .iter()
                .map(|n| failed(n, ApiError::new(INVALID_REQUEST, "Duplicate topic name.")))
        };
        let topics: Vec<&CreatableTopic> = topics
            .iter()
            .filter(|t| count[t.name.as_str()] == 1)
            .collect();
        if !self.active {
            let resp = topics
                .iter()
                .map(|t| failed(&t.name, ApiError::code(NOT_CONTROLLER)))
                .chain(duplicate_rows())
                .collect();
            return ControllerResult::of(Vec::new(), resp);
        }
        // Kafka's ReplicationControlManager.validateTotalNumberOfPartitions: every topic fails.
        let total: i64 = topics
            .iter()
            .map(|t| match (t.assignments.len(), t.num_partitions) {
                (0, -1) => i64::from(self.cfg.num_partitions),
                (0, n) => i64::from(n.max(0)),
                (assigned, _) => assigned as i64,
            })
            .sum();
        if total > MAX_PARTITIONS_PER_REQUEST {
            let e = ApiError::new(
                POLICY_VIOLATION,
                "Excessively large number of partitions per request.",
            );
            let resp = topics
                .iter()
                .map(|t| failed(&t.name, e.clone()))
                .chain(duplicate_rows())
                .collect();
            return ControllerResult::of(Vec::new(), resp);
        }
        let mut records = Vec::new();
        let mut results = Vec::new();
        // Names created earlier in this same request count as existing for later ones.
        let mut created_here: BTreeSet<String> = BTreeSet::new();
        for t in topics {
            match self.create_one_topic(t, &created_here) {
                Err(e) => results.push(failed(&t.name, e)),
                Ok((recs, result)) => {
                    if !validate_only {
                        created_here.insert(t.name.clone());
                        records.extend(recs);
                    }
                    // A validate-only success keeps the id it was given: Kafka answers a fresh
                    // id that no topic will ever have.
                    results.push(result);
                }
            }
        }
        results.extend(duplicate_rows());
        if validate_only {
            return ControllerResult::of(Vec::new(), results);
        }
        self.finish(records, results)
    }

    fn create_one_topic(
        &mut self,
        t: &CreatableTopic,
        created_here: &BTreeSet<String>,
    ) -> Result<(Vec<MetadataRecord>, CreatableTopicResult), ApiError> {
        validate_topic_name(&t.name)?;
        if self.image.topics.by_name.contains_key(&t.name) || created_here.contains(&t.name) {
            return Err(ApiError::new(
                TOPIC_ALREADY_EXISTS,
                format!("Topic '{}' already exists.", t.name),
            ));
        }
        // '.' and '_' collide in metric names (Kafka's Topic.hasCollision).
        let unified = unify(&t.name);
        if let Some(other) = self
            .image
            .topics
            .by_name
            .keys()
            .chain(created_here.iter())
            .find(|n| unify(n) == unified)
        {
            return Err(ApiError::new(
                INVALID_TOPIC_EXCEPTION,
                format!("Topic '{}' collides with existing topic: {}", t.name, other),
            ));
        }
        // Configs.
        let mut overrides = BTreeMap::new();
        for (name, value) in &t.configs {
            let Some(value) = value else {
                return Err(ApiError::new(
                    INVALID_CONFIG,
                    format!("Null value not supported for topic configs: {name}"),
                ));
            };
            let Some(def) = topic_configs::topic_config(name) else {
                return Err(ApiError::new(
                    INVALID_CONFIG,
                    format!("Unknown topic config name: {name}"),
                ));
            };
            topic_configs::validate_value(name, def.kind, value)
                .map_err(|m| ApiError::new(INVALID_CONFIG, m))?;
            overrides.insert(name.clone(), value.clone());
        }
        // Replica assignment.
        let usable = self.usable_brokers();
        let assignment: Vec<Vec<i32>> = if !t.assignments.is_empty() {
            if t.replication_factor != -1 {
                return Err(ApiError::new(
                    INVALID_REQUEST,
                    "A manual partition assignment was specified, but replication factor was not set to -1.",
                ));
            }
            if t.num_partitions != -1 {
                return Err(ApiError::new(
                    INVALID_REQUEST,
                    "A manual partition assignment was specified, but numPartitions was not set to -1.",
                ));
            }
            // In request order, as Kafka: each partition against the ones before it, then the
            // indexes must be exactly 0..n.
            let mut parts = BTreeMap::<i32, Vec<i32>>::new();
            let mut rf = None;
            for (p, replicas) in &t.assignments {
                if parts.contains_key(p) {
                    return Err(ApiError::new(
                        INVALID_REPLICA_ASSIGNMENT,
                        format!("Found multiple manual partition assignments for partition {p}"),
                    ));
                }
                self.validate_manual_replicas(*p, replicas, rf)?;
                rf = Some(replicas.len());
                parts.insert(*p, replicas.clone());
            }
            if parts.keys().copied().ne(0..parts.len() as i32) {
                return Err(ApiError::new(
                    INVALID_REPLICA_ASSIGNMENT,
                    "partitions should be a consecutive 0-based integer sequence",
                ));
            }
            parts.into_values().collect()
        } else {
            let num_partitions = match t.num_partitions {
                -1 => self.cfg.num_partitions,
                n if n <= 0 => {
                    return Err(ApiError::new(
                        INVALID_PARTITIONS,
                        "Number of partitions was set to an invalid non-positive value.",
                    ))
                }
                n => n,
            };
            let rf =
                match t.replication_factor {
                    -1 => self.cfg.default_replication_factor,
                    n if n <= 0 => return Err(ApiError::new(
                        INVALID_REPLICATION_FACTOR,
                        "Replication factor must be larger than 0, or -1 to use the default value.",
                    )),
                    n => n,
                };
            if rf as usize > usable.len() {
                return Err(ApiError::new(
                    INVALID_REPLICATION_FACTOR,
                    format!(
                        "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered or some brokers have all their log directories cordoned.",
                        usable.len()
                    ),
                ));
            }
            self.place(&usable, 0, num_partitions, rf as usize)
        };
        let topic_id = self.new_topic_id();
        let mut records = vec![MetadataRecord::Topic(TopicRecord {
            name: t.name.clone(),
            topic_id,
            ..Default::default()
        })];
        for (name, value) in &overrides {
            records.push(MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic.id(),
                resource_name: t.name.clone(),
                name: name.clone(),
                value: Some(value.clone()),
                ..Default::default()
            }));
        }
        for (i, replicas) in assignment.iter().enumerate() {
            records.push(MetadataRecord::Partition(self.partition_record(
                topic_id,
                i as i32,
                replicas.clone(),
            )));
        }
        let dyn_broker = self
            .image
            .config_overrides(&ConfigResource::broker(&self.cfg.node_id.to_string()));
        let dyn_default = self.image.config_overrides(&ConfigResource::broker(""));
        let configs = topic_configs::resolve_all(self.config_layers_for(
            &overrides,
            &dyn_broker,
            &dyn_default,
        ))
        .into_iter()
        .map(|c| CreatedTopicConfig {
            name: c.name.to_string(),
            value: Some(c.value),
            read_only: false,
            config_source: c.source,
            is_sensitive: false,
        })
        .collect();
        let result = CreatableTopicResult {
            name: t.name.clone(),
            topic_id,
            error: ApiError::NONE,
            num_partitions: assignment.len() as i32,
            replication_factor: assignment.first().map_or(0, |r| r.len() as i16),
            configs,
        };
        Ok((records, result))
    }

    /// Kafka's `validateManualPartitionAssignment` followed by its check that some replica is
    /// active, in Kafka's order and words: the replica list is not empty, each broker (in
    /// ascending id order) is registered and named once, the count matches `expected_rf`, and
    /// at least one replica is unfenced and not shutting down.
    fn validate_manual_replicas(
        &self,
        partition: i32,
        replicas: &[i32],
        expected_rf: Option<usize>,
    ) -> Result<(), ApiError> {
        let bad = |m: String| Err(ApiError::new(INVALID_REPLICA_ASSIGNMENT, m));
        if replicas.is_empty() {
            return bad("The manual partition assignment includes an empty replica list.".into());
        }
        let mut sorted = replicas.to_vec();
        sorted.sort_unstable();
        for (i, id) in sorted.iter().enumerate() {
            if !self.image.brokers.contains_key(id) {
                return bad(format!("The manual partition assignment includes broker {id}, but no such broker is registered."));
            }
            if i > 0 && sorted[i - 1] == *id {
                return bad(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
        }
        if let Some(rf) = expected_rf.filter(|rf| *rf != replicas.len()) {
            return bad(format!("The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).", replicas.len()));
        }
        if !replicas.iter().any(|id| self.is_usable(*id)) {
            return bad(format!("All brokers specified in the manual partition assignment for partition {partition} are fenced or in controlled shutdown."));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // DeleteTopics

    pub fn delete_topics(
        &mut self,
        topics: &[TopicRef],
    ) -> ControllerResult<Vec<DeletableTopicResult>> {
        let mut records = Vec::new();
        let mut results = Vec::new();
        let mut removed = BTreeSet::new();
        // A name whose topic is also named by its id: Kafka answers INVALID_REQUEST for the
        // name, nothing for the id, and deletes neither.
        let by_id: BTreeSet<Uuid> = topics
            .iter()
            .filter_map(|t| match t {
                TopicRef::Id(id) => Some(*id),
                TopicRef::Name(_) => None,
            })
            .collect();
        let clashing: BTreeSet<Uuid> = topics
            .iter()
            .filter_map(|t| match t {
                TopicRef::Name(n) => self.image.topics.by_name.get(n).copied(),
                TopicRef::Id(_) => None,
            })
            .filter(|id| by_id.contains(id))
            .collect();
        let checks_clashes = self.active && self.cfg.delete_topic_enable;
        for t in topics {
            if let (true, TopicRef::Id(id)) = (checks_clashes, t) {
                if clashing.contains(id) {
                    continue;
                }
            }
            let (name, id) = match t {
                TopicRef::Name(n) => (Some(n.clone()), self.image.topics.by_name.get(n).copied()),
                TopicRef::Id(id) => (
                    self.image.topics.get(id).map(|t| t.name.clone()),
                    self.image.topics.get(id).map(|_| *id),
                ),
            };
            let error = if !self.active {
                ApiError::code(NOT_CONTROLLER)
            } else if !self.cfg.delete_topic_enable {
                ApiError::new(TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            } else {
                match (t, id) {
                    (TopicRef::Name(_), Some(id)) if clashing.contains(&id) => ApiError::new(
                        INVALID_REQUEST,
                        "The provided topic name maps to an ID that was already supplied.",
                    ),
                    (TopicRef::Name(_), None) => ApiError::new(
                        UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition.",
                    ),
                    (TopicRef::Id(_), None) => {
                        ApiError::new(UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                    }
                    (_, Some(id)) => {
                        if removed.insert(id) {
                            records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                                topic_id: id,
                                ..Default::default()
                            }));
                        }
                        ApiError::NONE
                    }
                }
            };
            results.push(DeletableTopicResult {
                name: match t {
                    TopicRef::Name(n) => Some(n.clone()),
                    TopicRef::Id(_) => name,
                },
                topic_id: match t {
                    TopicRef::Id(i) => *i,
                    TopicRef::Name(_) => id.unwrap_or(Uuid::ZERO),
                },
                error,
            });
        }
        self.finish(records, results)
    }

    // -----------------------------------------------------------------------------------------
    // CreatePartitions

    pub fn create_partitions(
        &mut self,
        topics: &[CreatePartitionsTopic],
        validate_only: bool,
    ) -> ControllerResult<Vec<CreatePartitionsTopicResult>> {
        // As Kafka's ControllerApis.createPartitions: each name given more than once gets one
        // INVALID_REQUEST row, ahead of the others, and is left out of everything else.
        let mut count = BTreeMap::<&str, usize>::new();
        for t in topics {
            *count.entry(t.name.as_str()).or_default() += 1;
        }
        let mut results = Vec::new();
        for (i, t) in topics.iter().enumerate() {
            if count[t.name.as_str()] > 1 && !topics[..i].iter().any(|o| o.name == t.name) {
                results.push(CreatePartitionsTopicResult {
                    name: t.name.clone(),
                    error: ApiError::new(INVALID_REQUEST, "Duplicate topic name."),
                });
            }
        }
        let topics: Vec<&CreatePartitionsTopic> = topics
            .iter()
            .filter(|t| count[t.name.as_str()] == 1)
            .collect();
        // Kafka counts the partitions each existing topic would gain; every topic fails.
        let added: i64 = topics
            .iter()
            .filter_map(|t| {
                let current = self.image.topics.get_by_name(&t.name)?.partitions.len() as i64;
                Some((i64::from(t.count) - current).max(0))
            })
            .sum();
        if self.active && added > MAX_PARTITIONS_PER_REQUEST {
            let error = ApiError::new(
                POLICY_VIOLATION,
                "Excessively large number of additional partitions per request.",
            );
            results.extend(topics.iter().map(|t| CreatePartitionsTopicResult {
                name: t.name.clone(),
                error: error.clone(),
            }));
            return ControllerResult::of(Vec::new(), results);
        }
        let mut records = Vec::new();
        for t in topics {
            let error = if !self.active {
                ApiError::code(NOT_CONTROLLER)
            } else {
                match self.create_partitions_one(t) {
                    Ok(recs) => {
                        if !validate_only {
                            // Applied now so a later topic of this request sees the brokers'
                            // new load; topics are independent otherwise.
                            self.apply_own(&recs);
                            records.extend(recs);
                        }
                        ApiError::NONE
                    }
                    Err(e) => e,
                }
            };
            results.push(CreatePartitionsTopicResult {
                name: t.name.clone(),
                error,
            });
        }
        ControllerResult::of(records, results)
    }

    fn create_partitions_one(
        &mut self,
        t: &CreatePartitionsTopic,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let topic = self
            .image
            .topics
            .get_by_name(&t.name)
            .cloned()
            // Kafka sends no message with this one.
            .ok_or_else(|| ApiError::code(UNKNOWN_TOPIC_OR_PARTITION))?;
        let current = topic.partitions.len() as i32;
        if t.count < current {
            return Err(ApiError::new(
                INVALID_PARTITIONS,
                format!(
                    "The topic {} currently has {current} partition(s); {} would not be an increase.",
                    t.name, t.count
                ),
            ));
        }
        if t.count == current {
            return Err(ApiError::new(
                INVALID_PARTITIONS,
                format!("Topic already has {current} partition(s)."),
            ));
        }
        let add = t.count - current;
        let rf = topic
            .partitions
            .values()
            .next()
            .map_or(1, |p| p.replicas.len());
        let assignment = match &t.assignments {
            Some(a) => {
                if a.len() as i32 != add {
                    return Err(ApiError::new(
                        INVALID_REPLICA_ASSIGNMENT,
                        format!(
                            "Attempted to add {add} additional partition(s), but only {} assignment(s) were specified.",
                            a.len()
                        ),
                    ));
                }
                for (i, replicas) in a.iter().enumerate() {
                    self.validate_manual_replicas(current + i as i32, replicas, Some(rf))?;
                }
                a.clone()
            }
            None => {
                let usable = self.usable_brokers();
                if rf > usable.len() {
                    return Err(ApiError::new(
                        INVALID_REPLICATION_FACTOR,
                        format!(
                            "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered or some brokers have all their log directories cordoned.",
                            usable.len()
                        ),
                    ));
                }
                self.place(&usable, current, add, rf)
            }
        };
        Ok(assignment
            .into_iter()
            .enumerate()
            .map(|(i, replicas)| {
                MetadataRecord::Partition(self.partition_record(
                    topic.id,
                    current + i as i32,
                    replicas,
                ))
            })
            .collect())
    }

    // -----------------------------------------------------------------------------------------
    // Configs

    /// Checks one resource and one config name/value; returns the resource key.
    fn check_config_resource(
        &self,
        resource_type: i8,
        name: &str,
    ) -> Result<ConfigResource, ApiError> {
        match ConfigResourceType::from_id(resource_type) {
            ConfigResourceType::Topic => {
                if name.is_empty() {
                    return Err(ApiError::new(
                        INVALID_REQUEST,
                        "Default topic resources are not allowed.",
                    ));
                }
                if !self.image.topics.by_name.contains_key(name) {
                    return Err(ApiError::new(
                        UNKNOWN_TOPIC_OR_PARTITION,
                        format!("The topic '{name}' does not exist."),
                    ));
                }
                Ok(ConfigResource::topic(name))
            }
            ConfigResourceType::Broker => {
                if !name.is_empty() && name.parse::<i32>().is_err() {
                    return Err(ApiError::new(
                        INVALID_REQUEST,
                        format!("Illegal broker ID value: {name}"),
                    ));
                }
                Ok(ConfigResource::broker(name))
            }
            ConfigResourceType::Group => {
                if name.is_empty() {
                    return Err(ApiError::new(
                        INVALID_REQUEST,
                        "Default group resources are not allowed.",
                    ));
                }
                Ok(ConfigResource::group(name))
            }
            // The name is checked with the values (`finish_config_change`), as Kafka does.
            ConfigResourceType::ClientMetrics => Ok(ConfigResource::client_metrics(name)),
            other => Err(ApiError::new(
                INVALID_REQUEST,
                format!("Unknown resource type {}", other.id()),
            )),
        }
    }

    fn check_config_value(
        &self,
        resource: &ConfigResource,
        name: &str,
        value: Option<&str>,
    ) -> Result<(), ApiError> {
        match resource.resource_type {
            // A group's values are checked as one set, merged over the broker's, once all of a
            // request's operations are applied (`finish_config_change`); so are a client
            // metrics subscription's.
            ConfigResourceType::Group | ConfigResourceType::ClientMetrics => {}
            ConfigResourceType::Topic => {
                let Some(def) = topic_configs::topic_config(name) else {
                    return Err(ApiError::new(
                        INVALID_CONFIG,
                        format!("Unknown topic config name: {name}"),
                    ));
                };
                if let Some(v) = value {
                    topic_configs::validate_value(name, def.kind, v)
                        .map_err(|m| ApiError::new(INVALID_CONFIG, m))?;
                }
            }
            _ => {
                let table = &self.cfg.broker_config_table;
                let accepted = match table.get(name) {
                    Some(dynamic) => *dynamic,
                    None => !table.is_empty(), // a custom key
                };
                if !accepted && !topic_configs::is_dynamic_broker_config(name) {
                    return Err(ApiError::new(
                        INVALID_REQUEST,
                        format!("Cannot update these configs dynamically: [{name}]"),
                    ));
                }
                if topic_configs::is_listener_prefixed_only(name) {
                    return Err(ApiError::new(
                        INVALID_REQUEST,
                        format!(
                            "These security configs can be dynamically updated only per-listener using the listener prefix: [{name}]"
                        ),
                    ));
                }
                if resource.name.is_empty() && topic_configs::is_per_broker_config(name) {
                    return Err(ApiError::new(
                        INVALID_REQUEST,
                        format!(
                            "Cannot update these configs at default cluster level, broker id must be specified: [{name}]"
                        ),
                    ));
                }
                if let Some(v) = value {
                    self.check_broker_value(resource, name, v)?;
                }
            }
        }
        Ok(())
    }

    fn config_record(
        resource: &ConfigResource,
        name: &str,
        value: Option<String>,
    ) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type: resource.resource_type.id(),
            resource_name: resource.name.clone(),
            name: name.to_string(),
            value,
            ..Default::default()
        })
    }

    pub fn incremental_alter_configs(
        &mut self,
        resources: &[IncrementalAlterConfigsResource],
        validate_only: bool,
    ) -> ControllerResult<Vec<AlterConfigsResourceResult>> {
        let mut records = Vec::new();
        let mut results = Vec::new();
        for r in resources {
            let outcome = if !self.active {
                Err(ApiError::code(NOT_CONTROLLER))
            } else {
                self.incremental_alter_one(r)
            };
            let error = match outcome {
                Ok(recs) => {
                    if !validate_only {
                        records.extend(recs);
                    }
                    ApiError::NONE
                }
                Err(e) => e,
            };
            results.push(AlterConfigsResourceResult {
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                error,
            });
        }
        self.finish(records, results)
    }

    fn incremental_alter_one(
        &self,
        r: &IncrementalAlterConfigsResource,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let resource = self.check_config_resource(r.resource_type, &r.resource_name)?;
        let mut current = self.image.config_overrides(&resource);
        let mut touched = BTreeSet::new();
        for (name, op, value) in &r.ops {
            if !touched.insert(name.clone()) {
                return Err(ApiError::new(
                    INVALID_REQUEST,
                    "Error due to duplicate config keys",
                ));
            }
            let list_type = matches!(
                    topic_configs::topic_config(name)
                        .or_else(
                            || topic_configs::topic_config_for_broker_synonym(name).map(|(d, _)| d)
                        )
                        .map(|d| d.kind),
                    Some(topic_configs::ConfigType::List(_))
                        | Some(topic_configs::ConfigType::AnyList)
                );
            match op {
                AlterConfigOp::Set => {
                    let v = value.clone().ok_or_else(|| {
                        ApiError::new(
                            INVALID_REQUEST,
                            format!("Null value not supported for : {name}"),
                        )
                    })?;
                    self.check_config_value(&resource, name, Some(&v))?;
                    current.insert(name.clone(), v);
                }
                AlterConfigOp::Delete => {
                    self.check_config_value(&resource, name, None)?;
                    current.remove(name);
                }
                AlterConfigOp::Append | AlterConfigOp::Subtract
                    if matches!(
                        resource.resource_type,
                        ConfigResourceType::Group | ConfigResourceType::ClientMetrics
                    ) =>
                {
                    // Kafka's controller knows no group or client metrics config as a list
                    // (not even `metrics` and `match`, which are lists).
                    let op = if *op == AlterConfigOp::Append {
                        "APPEND"
                    } else {
                        "SUBTRACT"
                    };
                    return Err(ApiError::new(
                        INVALID_CONFIG,
                        format!("Can't {op} to key {name} because its type is not LIST."),
                    ));
                }
                AlterConfigOp::Append | AlterConfigOp::Subtract => {
                    if !list_type {
                        let append = *op == AlterConfigOp::Append;
                        // Broker configs are checked by Kafka's broker (ConfigAdminManager)
                        // before it forwards the request, the rest by its controller; the two
                        // word the refusal differently.
                        let message = if resource.resource_type == ConfigResourceType::Broker {
                            format!(
                                "Config value {} is not allowed for config key: {name}",
                                if append { "append" } else { "subtract" }
                            )
                        } else {
                            format!(
                                "Can't {} to key {name} because its type is not LIST.",
                                if append { "APPEND" } else { "SUBTRACT" }
                            )
                        };
                        return Err(ApiError::new(INVALID_CONFIG, message));
                    }
                    let base = current.get(name).cloned().unwrap_or_else(|| {
                        topic_configs::topic_config(name)
                            .map_or(String::new(), |d| d.default.to_string())
                    });
                    let mut items: Vec<String> = base
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect();
                    for v in value
                        .as_deref()
                        .unwrap_or("")
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                    {
                        if *op == AlterConfigOp::Append {
                            if !items.iter().any(|i| i == v) {
                                items.push(v.to_string());
                            }
                        } else {
                            items.retain(|i| i != v);
                        }
                    }
                    let joined = items.join(",");
                    self.check_config_value(&resource, name, Some(&joined))?;
                    current.insert(name.clone(), joined);
                }
            }
        }
        self.finish_config_change(&resource, current)
    }

    /// The records that give `resource` the overrides `wanted`; a group's set is validated as
    /// a whole first (Kafka checks it merged over the broker's values), as is a client metrics
    /// subscription's, and both are stored as Kafka renders them.
    fn finish_config_change(
        &self,
        resource: &ConfigResource,
        wanted: BTreeMap<String, String>,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let wanted = match resource.resource_type {
            ConfigResourceType::Group => group_configs::validate(&wanted, &self.cfg.broker_values)
                .map_err(|m| ApiError::new(INVALID_CONFIG, m))?,
            ConfigResourceType::ClientMetrics => {
                client_metrics_configs::validate(&resource.name, &wanted)?
            }
            _ => wanted,
        };
        Ok(self.diff_config_records(resource, &wanted))
    }

    /// ConfigRecords that turn the resource's current overrides into `wanted`.
    fn diff_config_records(
        &self,
        resource: &ConfigResource,
        wanted: &BTreeMap<String, String>,
    ) -> Vec<MetadataRecord> {
        let existing = self.image.config_overrides(resource);
        let mut recs = Vec::new();
        for (k, v) in wanted {
            if existing.get(k) != Some(v) {
                recs.push(Self::config_record(resource, k, Some(v.clone())));
            }
        }
        for k in existing.keys() {
            if !wanted.contains_key(k) {
                recs.push(Self::config_record(resource, k, None));
            }
        }
        recs
    }

    /// Legacy AlterConfigs: the given set replaces all of the resource's overrides.
    pub fn legacy_alter_configs(
        &mut self,
        resources: &[AlterConfigsResource],
        validate_only: bool,
    ) -> ControllerResult<Vec<AlterConfigsResourceResult>> {
        let mut records = Vec::new();
        let mut results = Vec::new();
        for r in resources {
            let outcome = if !self.active {
                Err(ApiError::code(NOT_CONTROLLER))
            } else {
                (|| {
                    let resource = self.check_config_resource(r.resource_type, &r.resource_name)?;
                    let mut wanted = BTreeMap::new();
                    for (name, value) in &r.configs {
                        let v = value.clone().ok_or_else(|| {
                            ApiError::new(
                                INVALID_REQUEST,
                                format!("Null value not supported for : {name}"),
                            )
                        })?;
                        self.check_config_value(&resource, name, Some(&v))?;
                        wanted.insert(name.clone(), v);
                    }
                    self.finish_config_change(&resource, wanted)
                })()
            };
            let error = match outcome {
                Ok(recs) => {
                    if !validate_only {
                        records.extend(recs);
                    }
                    ApiError::NONE
                }
                Err(e) => e,
            };
            results.push(AlterConfigsResourceResult {
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                error,
            });
        }
        self.finish(records, results)
    }

    // -----------------------------------------------------------------------------------------
    // Broker lifecycle

    pub fn register_broker(
        &mut self,
        req: &BrokerRegistration,
        now_ms: i64,
    ) -> ControllerResult<BrokerRegistrationReply> {
        let fail = |e: ApiError| BrokerRegistrationReply {
            error: e,
            broker_epoch: -1,
        };
        if let Some(r) = self.not_controller(fail(ApiError::code(NOT_CONTROLLER))) {
            return r;
        }
        if req.cluster_id != self.cfg.cluster_id {
            return ControllerResult::of(
                Vec::new(),
                fail(ApiError::new(
                    INCONSISTENT_CLUSTER_ID,
                    format!(
                        "Expected cluster ID {}, but got cluster ID {}",
                        self.cfg.cluster_id, req.cluster_id
                    ),
                )),
            );
        }
        if let Some(existing) = self.image.brokers.get(&req.broker_id) {
            // Kafka's `hasValidSession`: a fenced registration has none (a broker fenced at
            // the end of its controlled shutdown comes back at once, not after its session
            // would have timed out).
            let alive = !existing.fenced
                && self.heard_from.contains(&req.broker_id)
                && self
                    .session_deadlines
                    .get(&req.broker_id)
                    .is_some_and(|d| *d > now_ms);
            // A broker that shut down cleanly names its last epoch (KIP-966); it is the same
            // broker coming back, not a duplicate.
            let same_broker =
                req.previous_broker_epoch >= 0 && req.previous_broker_epoch == existing.epoch;
            if existing.incarnation_id != req.incarnation_id && alive && !same_broker {
                return ControllerResult::of(
                    Vec::new(),
                    fail(ApiError::new(
                        DUPLICATE_BROKER_REGISTRATION,
                        format!(
                            "Another broker is registered with that broker id {}.",
                            req.broker_id
                        ),
                    )),
                );
            }
        }
        // Every finalized feature must be within the broker's supported range.
        for (name, level) in &self.image.features {
            let supported = req.features.iter().find(|f| &f.name == name);
            let ok = match supported {
                Some(f) => f.min_supported_version <= *level && *level <= f.max_supported_version,
                // A broker that says nothing about a feature supports only level 0.
                None => *level == 0,
            };
            if !ok {
                return ControllerResult::of(
                    Vec::new(),
                    fail(ApiError::new(
                        UNSUPPORTED_VERSION,
                        format!(
                            "Unable to register because the broker does not support finalized version {level} of {name}."
                        ),
                    )),
                );
            }
        }
        let mut records = Vec::new();
        // A new incarnation of a broker loses leadership first, as if fenced (Kafka's
        // handleBrokerFenced), so its partitions' leader epochs move past the old incarnation's.
        if self
            .image
            .brokers
            .get(&req.broker_id)
            .is_some_and(|b| !b.fenced)
        {
            records.extend(self.leader_changes_for_fenced(req.broker_id));
        }
        // The broker epoch is the offset of the registration record.
        let broker_epoch = self.next_offset + records.len() as i64;
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: req.broker_id,
            is_migrating_zk_broker: false,
            incarnation_id: req.incarnation_id,
            broker_epoch,
            end_points: req.listeners.clone(),
            features: req.features.clone(),
            rack: req.rack.clone(),
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: req.log_dirs.clone(),
            ..Default::default()
        }));
        self.session_deadlines
            .insert(req.broker_id, now_ms + self.cfg.broker_session_timeout_ms);
        self.heard_from.insert(req.broker_id);
        self.finish(
            records,
            BrokerRegistrationReply {
                error: ApiError::NONE,
                broker_epoch,
            },
        )
    }

    /// ControllerRegistration (KIP-919): a controller in another process (kactor or Kafka)
    /// announces its listeners and features; the record lets every node find it. Kafka checks
    /// only that the metadata.version has the record (3.7-IV0, level 15, and later).
    pub fn register_controller(
        &mut self,
        record: RegisterControllerRecord,
    ) -> ControllerResult<ApiError> {
        if let Some(r) = self.not_controller(ApiError::code(NOT_CONTROLLER)) {
            return r;
        }
        let level = self
            .image
            .features
            .get("metadata.version")
            .copied()
            .unwrap_or(0);
        if level < CONTROLLER_REGISTRATION_METADATA_VERSION {
            return ControllerResult::of(
                Vec::new(),
                ApiError::new(
                    UNSUPPORTED_VERSION,
                    "The current MetadataVersion is too old to support controller registrations.",
                ),
            );
        }
        self.finish(
            vec![MetadataRecord::RegisterController(record)],
            ApiError::NONE,
        )
    }

    pub fn broker_heartbeat(
        &mut self,
        req: &BrokerHeartbeat,
        now_ms: i64,
    ) -> ControllerResult<BrokerHeartbeatReply> {
        let fail = |e: ApiError| BrokerHeartbeatReply {
            error: e,
            is_caught_up: false,
            is_fenced: true,
            should_shut_down: false,
        };
        if let Some(r) = self.not_controller(fail(ApiError::code(NOT_CONTROLLER))) {
            return r;
        }
        let Some(broker) = self.image.brokers.get(&req.broker_id).cloned() else {
            return ControllerResult::of(
                Vec::new(),
                fail(ApiError::new(
                    BROKER_ID_NOT_REGISTERED,
                    format!("No registration found for broker {}", req.broker_id),
                )),
            );
        };
        if broker.epoch != req.broker_epoch {
            return ControllerResult::of(
                Vec::new(),
                fail(ApiError::new(
                    STALE_BROKER_EPOCH,
                    format!(
                        "Expected broker epoch {}, but got broker epoch {}",
                        broker.epoch, req.broker_epoch
                    ),
                )),
            );
        }
        self.session_deadlines
            .insert(req.broker_id, now_ms + self.cfg.broker_session_timeout_ms);
        self.heard_from.insert(req.broker_id);
        let caught_up = req.current_metadata_offset
            >= self
                .registration_offsets
                .get(&req.broker_id)
                .copied()
                .unwrap_or(broker.epoch);
        self.metadata_offsets
            .insert(req.broker_id, req.current_metadata_offset);
        let mut records = Vec::new();
        let mut fenced = broker.fenced;
        let mut should_shut_down = false;
        let mut entered_controlled_shutdown = false;
        if req.want_shut_down {
            // Kafka's BrokerHeartbeatManager.calculateNextBrokerState: a fenced broker, one
            // that also wants fencing, or one that leads nothing goes at once; one that leads
            // partitions first enters controlled shutdown (its leaderships move to other ISR
            // members, it leaves the ISRs) and goes once it leads nothing and every active
            // broker has caught up with those changes, so the new leaders know they lead
            // before the old one stops.
            let leads = self.leads_any(req.broker_id);
            let go_now = if broker.fenced || req.want_fence {
                true
            } else if !broker.in_controlled_shutdown {
                if leads {
                    records.push(MetadataRecord::BrokerRegistrationChange(
                        BrokerRegistrationChangeRecord {
                            broker_id: req.broker_id,
                            broker_epoch: broker.epoch,
                            in_controlled_shutdown: 1,
                            ..Default::default()
                        },
                    ));
                    records.extend(self.leader_changes_for_fenced(req.broker_id));
                    entered_controlled_shutdown = true;
                }
                !leads
            } else {
                // A controller that took over meanwhile knows no offset: the changes are at
                // most as recent as its image.
                let offset = self
                    .controlled_shutdown_offsets
                    .get(&req.broker_id)
                    .copied()
                    .unwrap_or(self.applied_offset);
                !leads && offset <= self.lowest_active_offset()
            };
            if go_now {
                if !broker.fenced {
                    records.extend(self.fence_records(req.broker_id, broker.epoch));
                    fenced = true;
                }
                self.controlled_shutdown_offsets.remove(&req.broker_id);
                should_shut_down = true;
            }
        } else if broker.fenced && caught_up && !req.want_fence {
            records.push(MetadataRecord::BrokerRegistrationChange(
                BrokerRegistrationChangeRecord {
                    broker_id: req.broker_id,
                    broker_epoch: broker.epoch,
                    fenced: -1,
                    ..Default::default()
                },
            ));
            fenced = false;
            // Elect it where it is the only live in-sync replica left (Kafka's
            // handleBrokerUnfenced).
            records.extend(self.leader_changes_for_unfenced(req.broker_id));
        } else if !broker.fenced && req.want_fence {
            records.extend(self.fence_records(req.broker_id, broker.epoch));
            fenced = true;
        }
        let result = self.finish(
            records,
            BrokerHeartbeatReply {
                error: ApiError::NONE,
                is_caught_up: caught_up,
                is_fenced: fenced,
                should_shut_down,
            },
        );
        if entered_controlled_shutdown {
            self.controlled_shutdown_offsets
                .insert(req.broker_id, self.applied_offset);
        }
        result
    }

    /// Whether `broker` leads any partition.
    fn leads_any(&self, broker: i32) -> bool {
        self.image
            .topics
            .by_id
            .values()
            .any(|t| t.partitions.values().any(|p| p.leader == broker))
    }

    /// The lowest metadata offset an active (unfenced) broker has reported (Kafka's
    /// `BrokerHeartbeatManager.lowestActiveOffset`); `i64::MAX` with none.
    fn lowest_active_offset(&self) -> i64 {
        self.metadata_offsets
            .iter()
            .filter(|(b, _)| self.image.brokers.get(b).is_some_and(|r| !r.fenced))
            .map(|(_, o)| *o)
            .min()
            .unwrap_or(i64::MAX)
    }

    /// UnregisterBroker (`kafka-cluster unregister`, Kafka's `ReplicationControlManager.
    /// unregisterBroker`): the broker leaves every ISR it is not the last member of and loses
    /// its leaderships, then its registration goes. Kafka does this for a live broker too
    /// (nothing checks that it is fenced); only an unknown id is refused.
    pub fn unregister_broker(&mut self, broker_id: i32) -> ControllerResult<ApiError> {
        if let Some(r) = self.not_controller(ApiError::code(NOT_CONTROLLER)) {
            return r;
        }
        let Some(epoch) = self.image.brokers.get(&broker_id).map(|b| b.epoch) else {
            return ControllerResult::of(
                Vec::new(),
                ApiError::new(
                    BROKER_ID_NOT_REGISTERED,
                    format!("Broker ID {broker_id} is not currently registered"),
                ),
            );
        };
        let mut records = self.leader_changes_for_fenced(broker_id);
        records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id,
            broker_epoch: epoch,
            ..Default::default()
        }));
        self.session_deadlines.remove(&broker_id);
        self.heard_from.remove(&broker_id);
        self.registration_offsets.remove(&broker_id);
        self.metadata_offsets.remove(&broker_id);
        self.controlled_shutdown_offsets.remove(&broker_id);
        self.finish(records, ApiError::NONE)
    }

    fn fence_records(&self, broker_id: i32, epoch: i64) -> Vec<MetadataRecord> {
        let mut recs = vec![MetadataRecord::BrokerRegistrationChange(
            BrokerRegistrationChangeRecord {
                broker_id,
                broker_epoch: epoch,
                fenced: 1,
                ..Default::default()
            },
        )];
        recs.extend(self.leader_changes_for_fenced(broker_id));
        recs
    }

    /// Partition changes when `broker` stops being usable: it leaves every ISR it is not the
    /// last member of, and loses leadership to another usable ISR member, or (where the topic
    /// allows unclean election) to any usable replica, or to no one (-1). Kafka's
    /// `generateLeaderAndIsrUpdates` with its `PartitionChangeBuilder` election.
    fn leader_changes_for_fenced(&self, broker: i32) -> Vec<MetadataRecord> {
        let mut recs = Vec::new();
        for (name, topic) in self.topics_by_name() {
            for (index, p) in &topic.partitions {
                if !p.isr.contains(&broker) && p.leader != broker {
                    continue;
                }
                let mut new_isr: Vec<i32> = if p.isr.len() > 1 {
                    p.isr.iter().copied().filter(|b| *b != broker).collect()
                } else {
                    p.isr.clone()
                };
                let new_leader = if p.leader == broker {
                    let usable = |b: i32| b != broker && self.is_usable(b);
                    let unclean = || self.unclean_election_enabled(name);
                    match self.choose_leader(name, *index, p, &new_isr, usable, unclean) {
                        Some((leader, isr)) => {
                            if let Some(isr) = isr {
                                new_isr = isr;
                            }
                            leader
                        }
                        None => -1,
                    }
                } else {
                    NO_LEADER_CHANGE
                };
                if new_leader == NO_LEADER_CHANGE && new_isr == p.isr {
                    continue;
                }
                recs.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id: *index,
                    topic_id: topic.id,
                    isr: (new_isr != p.isr).then_some(new_isr),
                    leader: new_leader,
                    ..Default::default()
                }));
            }
        }
        recs
    }

    /// Partition changes when `broker` becomes usable: leaderless partitions get a leader, it
    /// or another usable ISR member, or (unclean election allowed) any usable replica.
    fn leader_changes_for_unfenced(&self, broker: i32) -> Vec<MetadataRecord> {
        let mut recs = Vec::new();
        for (name, topic) in self.topics_by_name() {
            for (index, p) in &topic.partitions {
                if p.leader != -1 || !p.replicas.contains(&broker) {
                    continue;
                }
                let usable = |b: i32| b == broker || self.is_usable(b);
                let unclean = || self.unclean_election_enabled(name);
                if let Some((leader, isr)) =
                    self.choose_leader(name, *index, p, &p.isr, usable, unclean)
                {
                    recs.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        partition_id: *index,
                        topic_id: topic.id,
                        isr,
                        leader,
                        ..Default::default()
                    }));
                }
            }
        }
        recs
    }

    /// Every topic with its name.
    pub(super) fn topics_by_name(
        &self,
    ) -> impl Iterator<Item = (&String, &crate::metadata::core::TopicImage)> {
        self.image
            .topics
            .by_name
            .iter()
            .filter_map(|(name, id)| self.image.topics.get(id).map(|t| (name, &**t)))
    }

    /// Kafka's `PartitionChangeBuilder` leader choice: the first replica, in replica order, in
    /// `isr` that `usable` accepts; failing that, when `unclean` allows it (the topic's
    /// `unclean.leader.election.enable`, or an UNCLEAN ElectLeaders), the first usable
    /// replica, which becomes the ISR alone (the others' logs may have diverged from it).
    /// `None`: no one can lead.
    pub(super) fn choose_leader(
        &self,
        topic: &str,
        index: i32,
        p: &PartitionRegistration,
        isr: &[i32],
        usable: impl Fn(i32) -> bool,
        unclean: impl FnOnce() -> bool,
    ) -> Option<(i32, Option<Vec<i32>>)> {
        if let Some(b) = p
            .replicas
            .iter()
            .copied()
            .find(|b| isr.contains(b) && usable(*b))
        {
            return Some((b, None));
        }
        if !unclean() {
            return None;
        }
        let b = p.replicas.iter().copied().find(|b| usable(*b))?;
        tracing::warn!(
            topic,
            partition = index,
            leader = b,
            "unclean leader election: no in-sync replica can lead, records may be lost"
        );
        Some((b, Some(vec![b])))
    }

    /// Kafka's periodic `writeNoOpRecord` task: every `metadata.max.idle.interval.ms` the
    /// active controller appends a NoOpRecord, whether or not other records were written.
    /// Nothing reads it; it only moves the high watermark.
    pub fn no_op(&mut self) -> Vec<MetadataRecord> {
        if !self.active {
            return Vec::new();
        }
        let records = vec![MetadataRecord::NoOp(NoOpRecord::default())];
        self.apply_own(&records);
        records
    }

    /// Periodic work: fence brokers whose session expired (Kafka's `maybeFenceStaleBroker`).
    ///
    /// A controller that was itself stalled could not read the heartbeats sent meanwhile (they
    /// wait in its mailbox and sockets; a co-located broker was stopped with it): every session
    /// is extended by the stall, so a broker is fenced only for a silence the controller was
    /// there to observe. Fencing on the first check after a SIGSTOP fenced this node's own broker
    /// each time; its Metadata answers then listed no broker at all, and librdkafka (2.16)
    /// drops every broker missing from a Metadata answer, bootstrap ones included, so its
    /// consumers never connected again (issue #30). Against Kafka 4.4 the same consumer never
    /// gets such an answer and comes back (tests/robustness/test_paused_broker.py).
    pub fn tick(&mut self, now_ms: i64) -> Vec<MetadataRecord> {
        let stall = self
            .last_tick_ms
            .map(|last| now_ms - last)
            .filter(|gap| *gap > STALL_MS);
        self.last_tick_ms = Some(now_ms);
        if !self.active {
            return Vec::new();
        }
        if let Some(stall) = stall {
            for deadline in self.session_deadlines.values_mut() {
                *deadline += stall;
            }
        }
        let expired: Vec<i32> = self
            .session_deadlines
            .iter()
            .filter(|(_, d)| **d <= now_ms)
            .map(|(id, _)| *id)
            .collect();
        let mut records = Vec::new();
        for id in expired {
            self.session_deadlines.remove(&id);
            if let Some(b) = self.image.brokers.get(&id).filter(|b| !b.fenced) {
                let recs = self.fence_records(id, b.epoch);
                self.apply_own(&recs);
                records.extend(recs);
            }
        }
        records
    }

    // -----------------------------------------------------------------------------------------
    // Features and producer ids

    /// UpdateFeatures (Kafka's `FeatureControlManager.updateFeatures`): every update is checked
    /// against the levels the request as a whole proposes; the first failure fails them all.
    /// An upgrade of kraft.version is Raft's to carry out: the shell hands it to Raft first
    /// (see [`QuorumControllerCore::kraft_version_upgrade`]) and calls this once Raft has
    /// appended its control batch; the NoOpRecord written here is what the request waits for,
    /// as in Kafka.
    pub fn update_features(
        &mut self,
        updates: &[FeatureUpdate],
        validate_only: bool,
    ) -> ControllerResult<UpdateFeaturesReply> {
        if let Some(r) = self.not_controller(UpdateFeaturesReply {
            error: ApiError::code(NOT_CONTROLLER),
        }) {
            return r;
        }
        // A feature named twice: the last update counts (Kafka reads them into a map).
        let mut wanted: Vec<&FeatureUpdate> = Vec::new();
        for u in updates {
            match wanted.iter_mut().find(|w| w.feature == u.feature) {
                Some(w) => *w = u,
                None => wanted.push(u),
            }
        }
        let mut proposed = self.image.features.clone();
        for u in &wanted {
            proposed.insert(u.feature.clone(), u.max_version_level);
        }
        let mut records = Vec::new();
        for u in wanted {
            match self.check_feature_update(u, &proposed) {
                Err(e) => return Self::features_failed(e),
                Ok(FeatureChange::Level(level)) => {
                    records.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
                        name: u.feature.clone(),
                        feature_level: level,
                        ..Default::default()
                    }))
                }
                Ok(FeatureChange::KRaftVersion) => {
                    records.push(MetadataRecord::NoOp(NoOpRecord::default()))
                }
                Ok(FeatureChange::None) => {}
            }
        }
        if validate_only {
            return ControllerResult::of(
                Vec::new(),
                UpdateFeaturesReply {
                    error: ApiError::NONE,
                },
            );
        }
        self.finish(
            records,
            UpdateFeaturesReply {
                error: ApiError::NONE,
            },
        )
    }

    /// The whole UpdateFeatures fails with the first feature's error, as Kafka words it.
    fn features_failed(e: ApiError) -> ControllerResult<UpdateFeaturesReply> {
        let message = format!(
            "The update failed for all features since the following feature had an error: {}",
            e.message.unwrap_or_default()
        );
        ControllerResult::of(
            Vec::new(),
            UpdateFeaturesReply {
                error: ApiError::new(e.code, message),
            },
        )
    }

    /// Raft refused the kraft.version upgrade (its InvalidUpdateVersionException message): the
    /// request fails as a whole, nothing written.
    pub fn kraft_upgrade_refused(&self, message: String) -> ControllerResult<UpdateFeaturesReply> {
        Self::features_failed(ApiError::new(INVALID_UPDATE_VERSION, message))
    }

    /// The kraft.version level an UpdateFeatures asks Raft for (Kafka's controller calls
    /// `upgradeKRaftVersion` for every kraft.version update of the UPGRADE type; Raft does
    /// nothing when the level is already finalized). The last one counts, as in
    /// `update_features`.
    pub fn kraft_version_upgrade(&self, updates: &[FeatureUpdate]) -> Option<i16> {
        updates
            .iter()
            .rev()
            .find(|u| u.feature == KRAFT_VERSION)
            .filter(|u| u.upgrade_type == UpgradeType::Upgrade)
            .map(|u| u.max_version_level)
    }

    /// Raft appended a kraft.version upgrade's control batch at `base_offset..=last_offset`
    /// for this active controller. False when it is not where the next record was expected
    /// (the shell then resigns, as for a data batch).
    pub fn kraft_version_appended(
        &mut self,
        base_offset: i64,
        last_offset: i64,
        level: i16,
    ) -> bool {
        if base_offset != self.next_offset {
            return false;
        }
        self.next_offset = last_offset + 1;
        self.applied_offset = last_offset;
        let mut changes = MetadataChanges::default();
        self.image.replay_kraft_version(level, &mut changes);
        true
    }

    /// Raft appended a control batch of its own (a voter change) at `base_offset..=last_offset`
    /// before this controller's next records: they go after it. False when it is not where
    /// the next record was expected (the shell then resigns). An inactive controller ignores
    /// it: activation places its records after everything in the log.
    pub fn raft_control_appended(&mut self, base_offset: i64, last_offset: i64) -> bool {
        if !self.active || last_offset < self.next_offset {
            return true;
        }
        if base_offset != self.next_offset {
            return false;
        }
        self.next_offset = last_offset + 1;
        self.applied_offset = last_offset;
        true
    }

    /// Replaces the state with a loaded metadata snapshot's image (Kafka's controller
    /// `handleLoadSnapshot`). Only an inactive controller loads one: its state is all
    /// committed, and the snapshot is committed state further on. Broker registration offsets
    /// fall back to the broker epochs, which are those offsets.
    pub fn load_snapshot(&mut self, image: MetadataImage) {
        debug_assert!(!self.active, "an active controller never loads a snapshot");
        self.applied_offset = image.provenance.last_offset;
        self.next_offset = self.applied_offset + 1;
        self.image = image;
        self.registration_offsets.clear();
    }

    /// Applies the kraft.version of a committed Raft control batch ending at `last_offset`.
    pub fn replay_kraft_version(&mut self, last_offset: i64, level: i16) {
        if last_offset > self.applied_offset {
            let mut changes = MetadataChanges::default();
            self.image.replay_kraft_version(level, &mut changes);
            self.applied_offset = last_offset;
        }
    }

    /// One update's check, in Kafka's order: the upgrade type, a negative level, the range this
    /// controller and every registered broker support, the direction, then the feature's own
    /// rules (metadata.version downgrades, kraft.version, dependencies).
    fn check_feature_update(
        &self,
        u: &FeatureUpdate,
        proposed: &BTreeMap<String, i16>,
    ) -> Result<FeatureChange, ApiError> {
        let level = u.max_version_level;
        let invalid = |m: &str| {
            Err(ApiError::new(
                INVALID_UPDATE_VERSION,
                format!(
                    "Invalid update version {level} for feature {}. {m}",
                    u.feature
                ),
            ))
        };
        if u.upgrade_type == UpgradeType::Unknown {
            return invalid("The controller does not support the given upgrade type.");
        }
        let current = self.image.features.get(&u.feature).copied().unwrap_or(0);
        if level < 0 {
            return invalid("A feature version cannot be less than 0.");
        }
        // A feature nobody supports is supported at level 0 only (Kafka's DISABLED range).
        let local = SUPPORTED_FEATURES
            .iter()
            .find(|(n, ..)| *n == u.feature)
            .map_or((0, 0), |(_, min, max, _)| (*min, *max));
        let unsupported = |who: String, (min, max): (i16, i16)| {
            if (min..=max).contains(&level) {
                None
            } else if max == 0 {
                Some(format!("{who} does not support this feature."))
            } else {
                Some(format!("{who} only supports versions {min}-{max}"))
            }
        };
        if let Some(why) = unsupported(format!("Local controller {}", self.cfg.node_id), local) {
            return invalid(&why);
        }
        for b in self.image.brokers.values() {
            let range = b
                .supported_features
                .iter()
                .find(|f: &&BrokerFeature| f.name == u.feature)
                .map_or((0, 0), |f| {
                    (f.min_supported_version, f.max_supported_version)
                });
            if let Some(why) = unsupported(format!("Broker {}", b.id), range) {
                return invalid(&why);
            }
        }
        if level < current && u.upgrade_type == UpgradeType::Upgrade {
            return invalid(
                "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.",
            );
        }
        if level > current && u.upgrade_type != UpgradeType::Upgrade {
            return invalid("Can't downgrade to a newer version.");
        }
        match u.feature.as_str() {
            METADATA_VERSION => {
                if level < current && metadata_changed_between(level, current) {
                    let why = if u.upgrade_type == UpgradeType::UnsafeDowngrade {
                        "Unsafe metadata downgrade is not supported in this version."
                    } else {
                        "Refusing to perform the requested downgrade because it might delete metadata information."
                    };
                    return Err(ApiError::new(
                        INVALID_UPDATE_VERSION,
                        format!("Unsupported metadata.version downgrade from {current} to {level}. {why}"),
                    ));
                }
            }
            KRAFT_VERSION => {
                if u.upgrade_type != UpgradeType::Upgrade {
                    return if level == current {
                        Ok(FeatureChange::None)
                    } else {
                        invalid("Can't downgrade the version of this feature.")
                    };
                }
                // Whether the quorum can take it is Raft's to say (its voters' support).
                return Ok(FeatureChange::KRaftVersion);
            }
            name if local == (0, 0) => return invalid(&format!("Feature {name} not found.")),
            _ => {
                for (feature, at, dep, dep_level) in FEATURE_DEPENDENCIES {
                    if *feature == u.feature
                        && level >= *at
                        && proposed.get(*dep).copied().unwrap_or(0) < *dep_level
                    {
                        return invalid(&format!(
                            "{feature} could not be set to {level} because it depends on {dep} level {dep_level}"
                        ));
                    }
                }
            }
        }
        // Written even at the current level, as Kafka does.
        Ok(FeatureChange::Level(level))
    }

    pub fn allocate_producer_ids(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> ControllerResult<AllocateProducerIdsReply> {
        let fail = |e: ApiError| AllocateProducerIdsReply {
            error: e,
            producer_id_start: -1,
            producer_id_len: -1,
        };
        if let Some(r) = self.not_controller(fail(ApiError::code(NOT_CONTROLLER))) {
            return r;
        }
        match self.image.brokers.get(&broker_id) {
            None => {
                return ControllerResult::of(
                    Vec::new(),
                    fail(ApiError::new(
                        BROKER_ID_NOT_REGISTERED,
                        format!("No registration found for broker {broker_id}"),
                    )),
                )
            }
            Some(b) if b.epoch != broker_epoch => {
                return ControllerResult::of(
                    Vec::new(),
                    fail(ApiError::new(
                        STALE_BROKER_EPOCH,
                        format!(
                            "Expected broker epoch {}, but got broker epoch {broker_epoch}",
                            b.epoch
                        ),
                    )),
                )
            }
            Some(_) => {}
        }
        let start = self.image.next_producer_id;
        if start > i64::MAX - PRODUCER_ID_BLOCK_SIZE as i64 {
            return ControllerResult::of(
                Vec::new(),
                fail(ApiError::new(
                    UNKNOWN_SERVER_ERROR,
                    "Exhausted all producerIds.",
                )),
            );
        }
        let rec = MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id,
            broker_epoch,
            next_producer_id: start + PRODUCER_ID_BLOCK_SIZE as i64,
            ..Default::default()
        });
        self.finish(
            vec![rec],
            AllocateProducerIdsReply {
                error: ApiError::NONE,
                producer_id_start: start,
                producer_id_len: PRODUCER_ID_BLOCK_SIZE,
            },
        )
    }
}

/// Kafka's `Topic.validate`: non-empty, not "." or "..", at most 249 chars of
/// `[a-zA-Z0-9._-]`. The messages are Kafka's, word for word (clients compare them).
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    match topic_name_problem(name) {
        None => Ok(()),
        Some(why) => Err(ApiError::new(
            INVALID_TOPIC_EXCEPTION,
            format!("Topic name is invalid: {why}"),
        )),
    }
}

/// Why `name` is not a legal topic name, in Kafka's words, or None when it is legal.
fn topic_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the empty string is not allowed".into());
    }
    if name == "." || name == ".." {
        return Some(format!("'{name}' is not allowed"));
    }
    // Java counts UTF-16 code units; for the legal (ASCII) alphabet that is the byte count.
    if name.encode_utf16().count() > MAX_TOPIC_NAME_LENGTH {
        return Some(format!(
            "the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
        ));
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
    {
        return Some(format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    None
}

fn unify(name: &str) -> String {
    name.replace('.', "_")
}
