//! One group coordinator shard (Kafka's `GroupCoordinatorShard` with its
//! `GroupMetadataManager` and `OffsetMetadataManager`): every group and committed offset whose
//! group id hashes to one `__consumer_offsets` partition. Pure: the actor feeds it requests,
//! timer wake-ups and replayed records, and appends the records it returns before sending the
//! responses returned with them.

use std::collections::BTreeMap;

use super::api::{
    GroupConfigOverrides, GroupConfigsView, GroupRequest, GroupResponse, Output, RequestId,
    TopicsView,
};
use super::classic_group::ClassicGroup;
use super::config::GroupCoordinatorConfig;
use super::consumer_group::ConsumerGroup;
use super::offsets::OffsetStore;
use super::records::CoordinatorRecord;
use super::share::ShareGroup;
use super::timers::{TimerAction, TimerKey, Timers};

/// A group of either protocol (Kafka's `Group` with its `GroupType`).
#[derive(Debug, Clone, PartialEq)]
pub enum Group {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
    Share(ShareGroup),
}

impl Group {
    /// ListGroups' `GroupType`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Group::Classic(_) => "classic",
            Group::Consumer(_) => "consumer",
            Group::Share(_) => "share",
        }
    }

    pub fn state_name(&self) -> &'static str {
        match self {
            Group::Classic(g) => g.state.name(),
            Group::Consumer(g) => g.state().name(),
            Group::Share(g) => g.state_name(),
        }
    }

    pub fn protocol_type(&self) -> String {
        match self {
            Group::Classic(g) => g.protocol_type.clone().unwrap_or_default(),
            Group::Consumer(_) => "consumer".to_string(),
            Group::Share(_) => "share".to_string(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Group::Classic(g) => g.members.is_empty(),
            Group::Consumer(g) => g.members.is_empty(),
            Group::Share(g) => g.members.is_empty(),
        }
    }

    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match self {
            Group::Classic(g) => g.is_subscribed_to_topic(topic),
            Group::Consumer(g) => g.is_subscribed_to_topic(topic),
            Group::Share(g) => g.is_subscribed_to_topic(topic),
        }
    }
}

pub struct GroupCoordinatorShard {
    pub(super) config: GroupCoordinatorConfig,
    pub(super) groups: BTreeMap<String, Group>,
    pub(super) offsets: OffsetStore,
    pub(super) timers: Timers,
    pub(super) topics: TopicsView,
    /// Version of the first topics view, then of the last one with a topic the previous one
    /// lacked (Kafka's `lastMetadataImageWithNewTopics`): regexes resolved before it are
    /// resolved again.
    pub(super) new_topics_version: i64,
    group_configs: GroupConfigsView,
    rng_state: u64,
}

impl GroupCoordinatorShard {
    /// An empty shard; `seed` makes generated member ids reproducible in tests.
    pub fn new(config: GroupCoordinatorConfig, seed: u64) -> Self {
        GroupCoordinatorShard {
            config,
            groups: BTreeMap::new(),
            offsets: OffsetStore::default(),
            timers: Timers::default(),
            topics: TopicsView::default(),
            new_topics_version: -1,
            group_configs: GroupConfigsView::default(),
            rng_state: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    pub fn config(&self) -> &GroupCoordinatorConfig {
        &self.config
    }

    /// Replaces the view of the cluster's topics (KIP-848 assignments, topic ids).
    pub fn set_topics(&mut self, topics: TopicsView) {
        if self.new_topics_version == -1 || self.topics.lacks_a_topic_of(&topics) {
            self.new_topics_version = topics.version;
        }
        self.topics = topics;
    }

    pub fn topics(&self) -> &TopicsView {
        &self.topics
    }

    /// Replaces the groups' own settings (group configs from the metadata image).
    pub fn set_group_configs(&mut self, configs: GroupConfigsView) {
        self.group_configs = configs;
    }

    /// Takes over `other`'s views of the cluster (topics, group configs): a shard rebuilt by a
    /// load gets the updates that reached the one it replaces meanwhile.
    pub fn adopt_views(&mut self, other: &GroupCoordinatorShard) {
        self.topics = other.topics.clone();
        self.new_topics_version = other.new_topics_version;
        self.group_configs = other.group_configs.clone();
    }

    /// A KIP-848 setting of `group_id`: its own group config held to the broker's range (a
    /// bound lowered after the group's value was set wins, as in Kafka), else the broker's.
    fn consumer_group_setting(
        &self,
        group_id: &str,
        own: impl Fn(&GroupConfigOverrides) -> Option<i32>,
        broker: i32,
        (min, max): (i32, i32),
    ) -> i32 {
        self.group_configs
            .get(group_id)
            .and_then(own)
            .map_or(broker, |v| v.clamp(min, max.max(min)))
    }

    /// The session timeout of `group_id`'s KIP-848 members (`consumer.session.timeout.ms`).
    pub(super) fn consumer_session_timeout_ms(&self, group_id: &str) -> i32 {
        let c = &self.config;
        self.consumer_group_setting(
            group_id,
            |o| o.consumer_session_timeout_ms,
            c.consumer_session_timeout_ms,
            (
                c.consumer_min_session_timeout_ms,
                c.consumer_max_session_timeout_ms,
            ),
        )
    }

    /// The least time between two target assignments of `group_id`
    /// (`consumer.assignment.interval.ms`).
    pub(super) fn consumer_assignment_interval_ms(&self, group_id: &str) -> i32 {
        let c = &self.config;
        self.consumer_group_setting(
            group_id,
            |o| o.consumer_assignment_interval_ms,
            c.consumer_assignment_interval_ms,
            (
                c.consumer_min_assignment_interval_ms,
                c.consumer_max_assignment_interval_ms,
            ),
        )
    }

    /// The heartbeat interval given to `group_id`'s KIP-848 members
    /// (`consumer.heartbeat.interval.ms`).
    pub(super) fn consumer_heartbeat_interval_ms(&self, group_id: &str) -> i32 {
        let c = &self.config;
        self.consumer_group_setting(
            group_id,
            |o| o.consumer_heartbeat_interval_ms,
            c.consumer_heartbeat_interval_ms,
            (
                c.consumer_min_heartbeat_interval_ms,
                c.consumer_max_heartbeat_interval_ms,
            ),
        )
    }

    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    pub fn groups(&self) -> impl Iterator<Item = (&String, &Group)> {
        self.groups.iter()
    }

    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    /// Earliest pending timer; the actor wakes the shard then with `fire_timers`.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.next_deadline()
    }

    pub fn timer_deadline(&self, key: &TimerKey) -> Option<i64> {
        self.timers.deadline(key)
    }

    /// A random UUID string (java.util.UUID format), as Kafka uses in classic member ids.
    pub(super) fn random_uuid(&mut self) -> String {
        let (hi, lo) = self.random_u128_halves();
        let hi = (hi & !0xf000) | 0x4000; // version 4
        let lo = (lo & !(0xc000 << 48)) | (0x8000 << 48); // IETF variant
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        )
    }

    /// A random Kafka `Uuid` in its base64 form (KIP-848 member ids chosen by the broker).
    pub(super) fn random_kafka_uuid(&mut self) -> String {
        let (hi, lo) = self.random_u128_halves();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&hi.to_be_bytes());
        bytes[8..].copy_from_slice(&lo.to_be_bytes());
        kactor_protocol::Uuid(bytes).to_string()
    }

    fn random_u128_halves(&mut self) -> (u64, u64) {
        let mut next = || {
            // splitmix64: deterministic per seed, well spread.
            self.rng_state = self.rng_state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng_state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let hi = next();
        let lo = next();
        (hi, lo)
    }

    /// Handles one request at `now_ms`.
    pub fn handle(&mut self, id: RequestId, request: GroupRequest, now_ms: i64) -> Output {
        let mut out = Output::default();
        match request {
            GroupRequest::JoinGroup(req) => self.classic_join(id, req, now_ms, &mut out),
            GroupRequest::SyncGroup(req) => self.classic_sync(id, req, now_ms, &mut out),
            GroupRequest::Heartbeat(req) => {
                let error_code = self.classic_heartbeat(&req, now_ms);
                out.respond(id, GroupResponse::Heartbeat { error_code });
            }
            GroupRequest::LeaveGroup(req) => {
                let resp = self.classic_leave(req, now_ms, &mut out);
                out.respond(id, GroupResponse::LeaveGroup(resp));
            }
            GroupRequest::OffsetCommit(req) => {
                let topics = self.commit_offsets(req, now_ms, &mut out);
                out.respond(id, GroupResponse::OffsetCommit { topics });
            }
            GroupRequest::TxnOffsetCommit(req) => {
                let topics = self.commit_txn_offsets(req, now_ms, &mut out);
                out.respond(id, GroupResponse::TxnOffsetCommit { topics });
            }
            GroupRequest::OffsetFetch {
                groups,
                require_stable,
            } => {
                let groups = groups
                    .iter()
                    .map(|g| self.fetch_offsets(g, require_stable))
                    .collect();
                out.respond(id, GroupResponse::OffsetFetch { groups });
            }
            GroupRequest::OffsetDelete { group_id, topics } => {
                let resp = self.delete_offsets(&group_id, &topics, &mut out);
                out.respond(id, GroupResponse::OffsetDelete(resp));
            }
            GroupRequest::DescribeGroups {
                api_version,
                group_ids,
            } => {
                let groups = group_ids
                    .iter()
                    .map(|g| self.classic_describe(g, api_version))
                    .collect();
                out.respond(id, GroupResponse::DescribeGroups { groups });
            }
            GroupRequest::ListGroups {
                states_filter,
                types_filter,
            } => {
                let groups = self.list_groups(&states_filter, &types_filter);
                out.respond(
                    id,
                    GroupResponse::ListGroups {
                        error_code: 0,
                        groups,
                    },
                );
            }
            GroupRequest::DeleteGroups { group_ids } => {
                let results = group_ids
                    .iter()
                    .map(|g| (g.clone(), self.delete_group(g, &mut out)))
                    .collect();
                out.respond(id, GroupResponse::DeleteGroups { results });
            }
            GroupRequest::ConsumerGroupHeartbeat(req) => {
                let resp = self.consumer_heartbeat(req, now_ms, &mut out);
                out.respond(id, GroupResponse::ConsumerGroupHeartbeat(resp));
            }
            GroupRequest::ConsumerGroupDescribe { group_ids } => {
                let groups = group_ids
                    .iter()
                    .map(|g| self.consumer_describe(g))
                    .collect();
                out.respond(id, GroupResponse::ConsumerGroupDescribe { groups });
            }
            GroupRequest::ShareGroupHeartbeat(req) => {
                let (resp, init) = match self.share_heartbeat(&req, now_ms, &mut out) {
                    Ok(done) => done,
                    Err(failed) => (failed, None),
                };
                out.respond(id, GroupResponse::ShareGroupHeartbeat(resp, init));
            }
            GroupRequest::ShareStateInitialized {
                group_id,
                partitions,
                succeeded,
                asked_at_ms,
            } => {
                self.on_share_state_initialized(
                    &group_id,
                    &partitions,
                    succeeded,
                    asked_at_ms,
                    &mut out,
                );
                out.respond(id, GroupResponse::Done);
            }
            GroupRequest::AlterShareGroupOffsets { group_id, topics } => {
                let resp = self.alter_share_offsets(&group_id, &topics, now_ms, &mut out);
                out.respond(id, GroupResponse::AlterShareGroupOffsets(resp));
            }
            GroupRequest::DeleteShareGroupOffsets { group_id, topics } => {
                let resp = self.delete_share_offsets(&group_id, &topics, &mut out);
                out.respond(id, GroupResponse::DeleteShareGroupOffsets(resp));
            }
            GroupRequest::ShareStateDeleted { group_id, topics } => {
                self.on_share_state_deleted(&group_id, &topics, &mut out);
                out.respond(id, GroupResponse::Done);
            }
            GroupRequest::ShareStatePartitions { group_id } => {
                let found = self.share_state_partitions(&group_id);
                out.respond(id, GroupResponse::ShareStatePartitions(Ok(found)));
            }
            GroupRequest::DeleteShareGroupState { group_id } => {
                let found = self.delete_share_group_state(&group_id, &mut out);
                out.respond(id, GroupResponse::DeleteShareGroupState(found));
            }
            GroupRequest::ShareGroupDescribe { group_ids } => {
                let groups = group_ids.iter().map(|g| self.share_describe(g)).collect();
                out.respond(id, GroupResponse::ShareGroupDescribe { groups });
            }
        }
        out
    }

    /// Runs every timer due at `now_ms`.
    pub fn fire_timers(&mut self, now_ms: i64) -> Output {
        let mut out = Output::default();
        while let Some((key, action)) = self.timers.pop_due(now_ms) {
            match (key, action) {
                (
                    TimerKey::ClassicHeartbeat {
                        group_id,
                        member_id,
                    },
                    TimerAction::ClassicHeartbeatExpired,
                ) => self.on_classic_heartbeat_expired(&group_id, &member_id, now_ms, &mut out),
                (
                    TimerKey::ClassicJoin { group_id },
                    TimerAction::ClassicInitialJoin {
                        delay_ms,
                        remaining_ms,
                    },
                ) => self.try_complete_initial_rebalance(
                    &group_id,
                    delay_ms,
                    remaining_ms,
                    now_ms,
                    &mut out,
                ),
                (TimerKey::ClassicJoin { group_id }, TimerAction::ClassicCompleteJoin) => {
                    self.complete_classic_join(&group_id, now_ms, &mut out)
                }
                (
                    TimerKey::ClassicSync { group_id },
                    TimerAction::ClassicPendingSyncExpired { generation_id },
                ) => self.on_pending_sync_expired(&group_id, generation_id, now_ms, &mut out),
                (
                    TimerKey::ConsumerSession {
                        group_id,
                        member_id,
                    },
                    TimerAction::ConsumerSessionExpired,
                ) => self.on_consumer_session_expired(&group_id, &member_id, now_ms, &mut out),
                (
                    TimerKey::ConsumerRebalance {
                        group_id,
                        member_id,
                    },
                    TimerAction::ConsumerRebalanceExpired { member_epoch },
                ) => self.on_consumer_rebalance_expired(
                    &group_id,
                    &member_id,
                    member_epoch,
                    now_ms,
                    &mut out,
                ),
                (
                    TimerKey::ConsumerClassicJoin {
                        group_id,
                        member_id,
                    }
                    | TimerKey::ConsumerClassicSync {
                        group_id,
                        member_id,
                    },
                    TimerAction::ConsumerClassicMemberExpired,
                ) => {
                    self.on_consumer_classic_member_expired(&group_id, &member_id, now_ms, &mut out)
                }
                (
                    TimerKey::ConsumerRegexResolution { group_id },
                    TimerAction::ConsumerResolveRegexes { regexes },
                ) => self.on_consumer_regexes_resolved(&group_id, &regexes, now_ms, &mut out),
                (
                    TimerKey::ShareSession {
                        group_id,
                        member_id,
                    },
                    TimerAction::ShareSessionExpired,
                ) => self.on_share_session_expired(&group_id, &member_id, &mut out),
                (TimerKey::OffsetExpiration, TimerAction::OffsetExpiration) => {
                    self.cleanup_expired(now_ms, &mut out);
                    self.timers.schedule(
                        TimerKey::OffsetExpiration,
                        now_ms + self.config.offsets_retention_check_interval_ms,
                        TimerAction::OffsetExpiration,
                    );
                }
                (key, action) => {
                    debug_assert!(false, "timer {key:?} with unexpected action {action:?}");
                }
            }
        }
        out
    }

    /// ListGroups: filters are case-insensitive, empty means all.
    fn list_groups(
        &self,
        states_filter: &[String],
        types_filter: &[String],
    ) -> Vec<super::api::ListedGroup> {
        self.groups
            .iter()
            .filter(|(_, g)| {
                states_filter.is_empty()
                    || states_filter
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state_name()))
            })
            .filter(|(_, g)| {
                types_filter.is_empty()
                    || types_filter
                        .iter()
                        .any(|t| t.eq_ignore_ascii_case(g.type_name()))
            })
            .map(|(id, g)| super::api::ListedGroup {
                group_id: id.clone(),
                protocol_type: g.protocol_type(),
                group_state: g.state_name().to_string(),
                group_type: g.type_name().to_string(),
            })
            .collect()
    }

    /// DeleteGroups for one group: tombstones for its offsets and its state.
    fn delete_group(&mut self, group_id: &str, out: &mut Output) -> i16 {
        use kactor_protocol::errors::*;
        // The empty group id is a group id like any other here (Kafka only refuses null).
        let Some(group) = self.groups.get(group_id) else {
            return GROUP_ID_NOT_FOUND;
        };
        let deletable = match group {
            Group::Classic(g) => matches!(
                g.state,
                super::classic_group::ClassicGroupState::Empty
                    | super::classic_group::ClassicGroupState::Dead
            ),
            Group::Consumer(g) => g.members.is_empty(),
            Group::Share(g) => g.members.is_empty(),
        };
        if !deletable {
            return NON_EMPTY_GROUP;
        }
        let mut records = self.offsets.tombstones_for_group(group_id);
        records.extend(self.group_tombstones(group_id));
        for r in &records {
            self.replay(r);
        }
        out.records.extend(records);
        NONE
    }

    /// Topics deleted from the cluster: every group's offsets for them are tombstoned, so a
    /// topic created again under the same name starts with no committed position (Kafka's
    /// `GroupCoordinatorShard.onPartitionsDeleted`).
    pub fn on_topics_deleted(&mut self, topics: &[String]) -> Output {
        let records = self.offsets.tombstones_for_topics(topics);
        for r in &records {
            self.replay(r);
        }
        Output {
            records,
            ..Default::default()
        }
    }

    /// Records that delete a group's state (not its offsets).
    pub(super) fn group_tombstones(&self, group_id: &str) -> Vec<CoordinatorRecord> {
        match self.groups.get(group_id) {
            Some(Group::Classic(_)) => vec![CoordinatorRecord::GroupMetadata {
                group_id: group_id.to_string(),
                value: None,
            }],
            Some(Group::Consumer(g)) => g.tombstones(),
            Some(Group::Share(_)) => vec![
                CoordinatorRecord::ShareGroupStatePartitionMetadata {
                    group_id: group_id.to_string(),
                    value: None,
                },
                CoordinatorRecord::ShareGroupMetadata {
                    group_id: group_id.to_string(),
                    value: None,
                },
            ],
            None => Vec::new(),
        }
    }

    /// Called once replay is done and the shard starts serving: members get fresh session
    /// timers (their clients may be gone), and the retention check starts.
    pub fn on_loaded(&mut self, now_ms: i64) {
        let mut classic = Vec::new();
        let mut consumer = Vec::new();
        for (group_id, group) in &self.groups {
            match group {
                Group::Classic(g) => {
                    for m in g.members.values() {
                        classic.push((group_id.clone(), m.member_id.clone(), m.session_timeout_ms));
                    }
                }
                Group::Consumer(g) => {
                    for m in g.members.keys() {
                        consumer.push((group_id.clone(), m.clone()));
                    }
                }
                Group::Share(_) => {}
            }
        }
        for (group_id, member_id, timeout) in classic {
            self.timers.schedule(
                TimerKey::ClassicHeartbeat {
                    group_id,
                    member_id,
                },
                now_ms + timeout as i64,
                TimerAction::ClassicHeartbeatExpired,
            );
        }
        for (group_id, member_id) in consumer {
            self.schedule_consumer_session(&group_id, &member_id, now_ms);
        }
        self.timers.schedule(
            TimerKey::OffsetExpiration,
            now_ms + self.config.offsets_retention_check_interval_ms,
            TimerAction::OffsetExpiration,
        );
    }

    /// Unloads the shard (the broker resigned leadership of the partition): parked requests
    /// are answered NOT_COORDINATOR so clients look the coordinator up again.
    pub fn unload(&mut self) -> Output {
        let mut out = Output::default();
        for group in self.groups.values_mut() {
            if let Group::Classic(g) = group {
                for m in g.members.values_mut() {
                    if let Some(join) = m.awaiting_join.take() {
                        out.respond(
                            join.request_id,
                            GroupResponse::JoinGroup(super::api::JoinGroupOutput::error(
                                kactor_protocol::errors::NOT_COORDINATOR,
                                &m.member_id,
                            )),
                        );
                    }
                    if let Some(sync) = m.awaiting_sync.take() {
                        out.respond(
                            sync,
                            GroupResponse::SyncGroup(super::api::SyncGroupOutput::error(
                                kactor_protocol::errors::NOT_COORDINATOR,
                            )),
                        );
                    }
                }
            }
        }
        self.groups.clear();
        self.offsets = OffsetStore::default();
        self.timers.clear();
        out
    }

    /// Applies one record read back from `__consumer_offsets` (loading) or just written.
    pub fn replay(&mut self, record: &CoordinatorRecord) {
        match record {
            CoordinatorRecord::OffsetCommit {
                group_id,
                topic,
                partition,
                value,
            } => {
                match value {
                    Some(v) => {
                        // A commit for an unknown group creates a simple (Empty) classic group,
                        // as Kafka's replay does.
                        self.groups.entry(group_id.clone()).or_insert_with(|| {
                            Group::Classic(ClassicGroup::new(group_id, v.commit_timestamp_ms))
                        });
                        self.offsets.put(group_id, topic, *partition, v.clone());
                    }
                    None => {
                        self.offsets.remove(group_id, topic, *partition);
                        self.offsets.remove_pending(group_id, topic, *partition);
                    }
                }
            }
            CoordinatorRecord::GroupMetadata { group_id, value } => match value {
                Some(v) => {
                    self.groups.insert(
                        group_id.clone(),
                        Group::Classic(ClassicGroup::from_record(group_id, v)),
                    );
                }
                None => {
                    if matches!(self.groups.get(group_id), Some(Group::Classic(_))) {
                        self.groups.remove(group_id);
                    }
                }
            },
            CoordinatorRecord::ShareGroupMetadata { .. }
            | CoordinatorRecord::ShareGroupStatePartitionMetadata { .. } => {
                self.replay_share_record(record)
            }
            _ => self.replay_consumer_record(record),
        }
    }

    /// Replays a transactional offset commit written by `producer_id` (pending until its
    /// marker is replayed with `replay_end_transaction`).
    pub fn replay_transactional(&mut self, producer_id: i64, record: &CoordinatorRecord) {
        if let CoordinatorRecord::OffsetCommit {
            group_id,
            topic,
            partition,
            value: Some(v),
        } = record
        {
            self.groups.entry(group_id.clone()).or_insert_with(|| {
                Group::Classic(ClassicGroup::new(group_id, v.commit_timestamp_ms))
            });
            self.offsets
                .put_pending(producer_id, group_id, topic, *partition, v.clone());
        } else {
            self.replay(record);
        }
    }

    /// A transaction marker for `producer_id` was written (WriteTxnMarkers) or replayed:
    /// its pending offsets become committed or are dropped.
    pub fn replay_end_transaction(&mut self, producer_id: i64, committed: bool) {
        self.offsets.end_transaction(producer_id, committed);
    }
}
