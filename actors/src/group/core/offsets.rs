//! Committed offsets (Kafka's `OffsetMetadataManager`): OffsetCommit, TxnOffsetCommit,
//! OffsetFetch, OffsetDelete and the retention clean-up. Every change is an `OffsetCommit`
//! record, applied to the store by replaying it, so a reload rebuilds exactly this state.

use std::collections::BTreeMap;

use super::api::{
    CommitTopicInput, CommitTopicOutput, FetchedGroup, FetchedPartition, OffsetCommitInput,
    OffsetDeleteOutput, OffsetFetchGroupInput, Output, TxnOffsetCommitInput,
};
use super::classic_group::{ClassicGroup, ClassicGroupState};
use super::records::{CoordinatorRecord, OffsetCommitValue};
use super::shard::{Group, GroupCoordinatorShard};
use kactor_protocol::errors::*;

type TopicOffsets = BTreeMap<String, BTreeMap<i32, OffsetCommitValue>>;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetStore {
    committed: BTreeMap<String, TopicOffsets>,
    /// producer id -> group -> offsets not yet committed by a transaction marker.
    pending: BTreeMap<i64, BTreeMap<String, TopicOffsets>>,
}

impl OffsetStore {
    pub fn get(&self, group_id: &str, topic: &str, partition: i32) -> Option<&OffsetCommitValue> {
        self.committed.get(group_id)?.get(topic)?.get(&partition)
    }

    pub fn group(&self, group_id: &str) -> Option<&TopicOffsets> {
        self.committed.get(group_id)
    }

    /// Every group's committed offsets (metrics).
    pub fn all_groups(&self) -> impl Iterator<Item = (&String, &TopicOffsets)> {
        self.committed.iter()
    }

    pub fn has_offsets(&self, group_id: &str) -> bool {
        self.committed.get(group_id).is_some_and(|t| !t.is_empty())
    }

    pub fn put(&mut self, group_id: &str, topic: &str, partition: i32, value: OffsetCommitValue) {
        self.committed
            .entry(group_id.to_string())
            .or_default()
            .entry(topic.to_string())
            .or_default()
            .insert(partition, value);
    }

    pub fn remove(&mut self, group_id: &str, topic: &str, partition: i32) {
        remove_offset(&mut self.committed, group_id, topic, partition);
    }

    /// Drops the offsets open transactions hold for a partition (a tombstone's replay: Kafka
    /// removes them too, so a later commit marker cannot bring back what was deleted).
    pub fn remove_pending(&mut self, group_id: &str, topic: &str, partition: i32) {
        for groups in self.pending.values_mut() {
            remove_offset(groups, group_id, topic, partition);
        }
        self.pending.retain(|_, groups| !groups.is_empty());
    }

    /// Tombstones for every offset, committed or pending in a transaction, that any group
    /// holds for one of `topics` (Kafka's `OffsetMetadataManager.onPartitionsDeleted`).
    pub fn tombstones_for_topics(&self, topics: &[String]) -> Vec<CoordinatorRecord> {
        let mut keys = std::collections::BTreeSet::new();
        let pending = self.pending.values().flat_map(|groups| groups.iter());
        for (group_id, by_topic) in self.committed.iter().chain(pending) {
            for topic in topics {
                for partition in by_topic.get(topic).into_iter().flat_map(|p| p.keys()) {
                    keys.insert((group_id.clone(), topic.clone(), *partition));
                }
            }
        }
        keys.into_iter()
            .map(
                |(group_id, topic, partition)| CoordinatorRecord::OffsetCommit {
                    group_id,
                    topic,
                    partition,
                    value: None,
                },
            )
            .collect()
    }

    pub fn put_pending(
        &mut self,
        producer_id: i64,
        group_id: &str,
        topic: &str,
        partition: i32,
        value: OffsetCommitValue,
    ) {
        self.pending
            .entry(producer_id)
            .or_default()
            .entry(group_id.to_string())
            .or_default()
            .entry(topic.to_string())
            .or_default()
            .insert(partition, value);
    }

    pub fn has_pending(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        self.pending.values().any(|groups| {
            groups
                .get(group_id)
                .and_then(|t| t.get(topic))
                .is_some_and(|p| p.contains_key(&partition))
        })
    }

    pub fn end_transaction(&mut self, producer_id: i64, committed: bool) {
        let Some(groups) = self.pending.remove(&producer_id) else {
            return;
        };
        if committed {
            for (group_id, topics) in groups {
                for (topic, parts) in topics {
                    for (partition, value) in parts {
                        self.put(&group_id, &topic, partition, value);
                    }
                }
            }
        }
    }

    /// Tombstones for every committed offset of a group.
    pub fn tombstones_for_group(&self, group_id: &str) -> Vec<CoordinatorRecord> {
        let Some(topics) = self.committed.get(group_id) else {
            return Vec::new();
        };
        topics
            .iter()
            .flat_map(|(topic, parts)| {
                parts.keys().map(move |p| CoordinatorRecord::OffsetCommit {
                    group_id: group_id.to_string(),
                    topic: topic.clone(),
                    partition: *p,
                    value: None,
                })
            })
            .collect()
    }
}

/// Removes one partition's offset from a group → topic → partition map, dropping the topic
/// and the group when they empty.
fn remove_offset(
    groups: &mut BTreeMap<String, TopicOffsets>,
    group_id: &str,
    topic: &str,
    partition: i32,
) {
    let Some(topics) = groups.get_mut(group_id) else {
        return;
    };
    if let Some(parts) = topics.get_mut(topic) {
        parts.remove(&partition);
        if parts.is_empty() {
            topics.remove(topic);
        }
    }
    if topics.is_empty() {
        groups.remove(group_id);
    }
}

/// Why a commit is refused for the whole request.
type CommitCheck = Result<(), i16>;

/// What an offset's age is measured from (Kafka's `OffsetExpirationCondition`).
#[derive(Clone, Copy)]
enum ExpiryBase {
    CommitTime,
    Since(i64),
}

/// Who commits, as the OffsetCommit / TxnOffsetCommit request says.
struct Committer<'a> {
    api_version: i16,
    group_id: &'a str,
    member_id: &'a str,
    instance_id: Option<&'a str>,
    generation_or_epoch: i32,
    transactional: bool,
}

impl ClassicGroup {
    /// Kafka's `ClassicGroup.validateOffsetCommit`.
    fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        transactional: bool,
    ) -> CommitCheck {
        if self.is(ClassicGroupState::Dead) {
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        if generation_id < 0 && self.is(ClassicGroupState::Empty) {
            // Admin clients and consumers without group management commit with -1.
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation_id != self.generation_id {
                return Err(ILLEGAL_GENERATION);
            }
        } else if !transactional && !self.is(ClassicGroupState::Empty) {
            // No member id and no generation: only accepted while the group is empty.
            return Err(UNKNOWN_MEMBER_ID);
        }
        if !transactional && self.is(ClassicGroupState::CompletingRebalance) {
            // The member knows the new generation but has no assignment yet.
            return Err(REBALANCE_IN_PROGRESS);
        }
        Ok(())
    }

    /// Kafka's `ClassicGroup.validateMember`.
    pub fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> CommitCheck {
        match instance_id {
            Some(instance) => match self.static_member_id(instance) {
                None => Err(UNKNOWN_MEMBER_ID),
                Some(existing) if existing != member_id => Err(FENCED_INSTANCE_ID),
                Some(_) => Ok(()),
            },
            None if !self.members.contains_key(member_id) => Err(UNKNOWN_MEMBER_ID),
            None => Ok(()),
        }
    }
}

impl GroupCoordinatorShard {
    fn validate_commit(&mut self, who: &Committer<'_>, now_ms: i64) -> CommitCheck {
        let Committer {
            api_version,
            group_id,
            member_id,
            instance_id,
            generation_or_epoch,
            transactional,
        } = *who;
        if group_id.is_empty() && transactional {
            // Kafka's GroupCoordinatorService refuses an empty id for TxnOffsetCommit only; an
            // OffsetCommit for "" commits like any other group's.
            return Err(INVALID_GROUP_ID);
        }
        let Some(group) = self.groups.get(group_id) else {
            if generation_or_epoch < 0 || transactional {
                // A "simple" group: created by a manual commit.
                self.groups.insert(
                    group_id.to_string(),
                    Group::Classic(ClassicGroup::new(group_id, now_ms)),
                );
                return Ok(());
            }
            // v9+ says GROUP_ID_NOT_FOUND; older clients only understand ILLEGAL_GENERATION.
            return Err(if api_version >= 9 {
                GROUP_ID_NOT_FOUND
            } else {
                ILLEGAL_GENERATION
            });
        };
        match group {
            Group::Classic(g) => {
                g.validate_offset_commit(member_id, instance_id, generation_or_epoch, transactional)
            }
            Group::Consumer(g) => g.validate_offset_commit(
                member_id,
                instance_id,
                generation_or_epoch,
                transactional,
                api_version,
            ),
            // Share groups keep no committed offsets: their members acknowledge records.
            Group::Share(_) => Err(if api_version >= 9 {
                GROUP_ID_NOT_FOUND
            } else {
                ILLEGAL_GENERATION
            }),
        }
    }

    fn commit_value(
        &self,
        p: &super::api::CommitPartitionInput,
        topic: &CommitTopicInput,
        expire_timestamp_ms: Option<i64>,
        now_ms: i64,
    ) -> OffsetCommitValue {
        // An explicit expiry is stored as value v1, which has neither leader epoch nor topic
        // id: keep memory equal to what a reload will read.
        let v1 = expire_timestamp_ms.is_some();
        OffsetCommitValue {
            offset: p.committed_offset,
            leader_epoch: if v1 { -1 } else { p.committed_leader_epoch },
            metadata: p.committed_metadata.clone().unwrap_or_default(),
            commit_timestamp_ms: now_ms,
            expire_timestamp_ms,
            topic_id: if v1 {
                kactor_protocol::Uuid::ZERO
            } else if topic.topic_id == kactor_protocol::Uuid::ZERO {
                self.topics.id_of(&topic.name).unwrap_or_default()
            } else {
                topic.topic_id
            },
        }
    }

    fn metadata_too_large(&self, p: &super::api::CommitPartitionInput) -> bool {
        p.committed_metadata
            .as_ref()
            .is_some_and(|m| m.len() > self.config.offset_metadata_max_bytes)
    }

    /// OffsetCommit: one record per accepted partition.
    pub(super) fn commit_offsets(
        &mut self,
        req: OffsetCommitInput,
        now_ms: i64,
        out: &mut Output,
    ) -> Vec<CommitTopicOutput> {
        let check = self.validate_commit(
            &Committer {
                api_version: req.api_version,
                group_id: &req.group_id,
                member_id: &req.member_id,
                instance_id: req.group_instance_id.as_deref(),
                generation_or_epoch: req.generation_id_or_member_epoch,
                transactional: false,
            },
            now_ms,
        );
        let expire = (req.retention_time_ms != -1).then(|| now_ms + req.retention_time_ms);
        let consumer_group = match self.groups.get(&req.group_id) {
            Some(Group::Consumer(g)) => Some(g),
            _ => None,
        };
        let mut records = Vec::new();
        let topics = req
            .topics
            .iter()
            .map(|topic| CommitTopicOutput {
                name: topic.name.clone(),
                topic_id: topic.topic_id,
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| {
                        if let Err(code) = check {
                            return (p.partition_index, code);
                        }
                        if let Some(g) = consumer_group {
                            let topic_id = if topic.topic_id == kactor_protocol::Uuid::ZERO {
                                self.topics.id_of(&topic.name).unwrap_or_default()
                            } else {
                                topic.topic_id
                            };
                            if let Err(code) = g.validate_partition_commit(
                                &req.member_id,
                                req.generation_id_or_member_epoch,
                                &topic_id,
                                p.partition_index,
                            ) {
                                return (p.partition_index, code);
                            }
                        }
                        if self.metadata_too_large(p) {
                            return (p.partition_index, OFFSET_METADATA_TOO_LARGE);
                        }
                        records.push(CoordinatorRecord::OffsetCommit {
                            group_id: req.group_id.clone(),
                            topic: topic.name.clone(),
                            partition: p.partition_index,
                            value: Some(self.commit_value(p, topic, expire, now_ms)),
                        });
                        (p.partition_index, NONE)
                    })
                    .collect(),
            })
            .collect();
        for r in &records {
            self.replay(r);
        }
        out.records.extend(records);
        topics
    }

    /// TxnOffsetCommit: the records are written in the producer's transaction and stay
    /// pending until the marker (`replay_end_transaction`). The actor must append them as
    /// transactional records of `producer_id`.
    pub(super) fn commit_txn_offsets(
        &mut self,
        req: TxnOffsetCommitInput,
        now_ms: i64,
        out: &mut Output,
    ) -> Vec<CommitTopicOutput> {
        let check = self.validate_commit(
            &Committer {
                // TxnOffsetCommit has no version rule of its own here.
                api_version: i16::MAX,
                group_id: &req.group_id,
                member_id: &req.member_id,
                instance_id: req.group_instance_id.as_deref(),
                generation_or_epoch: req.generation_id,
                transactional: true,
            },
            now_ms,
        );
        let mut records = Vec::new();
        let topics = req
            .topics
            .iter()
            .map(|topic| CommitTopicOutput {
                name: topic.name.clone(),
                topic_id: topic.topic_id,
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| {
                        if let Err(code) = check {
                            return (p.partition_index, code);
                        }
                        if self.metadata_too_large(p) {
                            return (p.partition_index, OFFSET_METADATA_TOO_LARGE);
                        }
                        records.push(CoordinatorRecord::OffsetCommit {
                            group_id: req.group_id.clone(),
                            topic: topic.name.clone(),
                            partition: p.partition_index,
                            value: Some(self.commit_value(p, topic, None, now_ms)),
                        });
                        (p.partition_index, NONE)
                    })
                    .collect(),
            })
            .collect();
        for r in &records {
            self.replay_transactional(req.producer_id, r);
        }
        out.records.extend(records);
        topics
    }

    /// OffsetFetch for one group. Unknown groups answer -1 offsets without error, as Kafka.
    pub(super) fn fetch_offsets(
        &self,
        req: &OffsetFetchGroupInput,
        require_stable: bool,
    ) -> FetchedGroup {
        let mut fail_all = false;
        match self.groups.get(&req.group_id) {
            None => fail_all = true,
            Some(Group::Classic(g)) if g.is(ClassicGroupState::Dead) => fail_all = true,
            Some(Group::Classic(_)) | Some(Group::Share(_)) => {}
            Some(Group::Consumer(g)) => {
                if let Err(code) =
                    g.validate_offset_fetch(req.member_id.as_deref(), req.member_epoch)
                {
                    return FetchedGroup {
                        group_id: req.group_id.clone(),
                        error_code: code,
                        topics: Vec::new(),
                    };
                }
            }
        }
        let group_offsets = if fail_all {
            None
        } else {
            self.offsets.group(&req.group_id)
        };
        let fetched = |topic: &str, partition: i32| -> FetchedPartition {
            if require_stable && self.offsets.has_pending(&req.group_id, topic, partition) {
                return FetchedPartition {
                    partition_index: partition,
                    committed_offset: -1,
                    committed_leader_epoch: -1,
                    metadata: String::new(),
                    error_code: UNSTABLE_OFFSET_COMMIT,
                };
            }
            match group_offsets
                .and_then(|t| t.get(topic))
                .and_then(|p| p.get(&partition))
            {
                Some(v) => FetchedPartition {
                    partition_index: partition,
                    committed_offset: v.offset,
                    committed_leader_epoch: v.leader_epoch,
                    metadata: v.metadata.clone(),
                    error_code: NONE,
                },
                None => FetchedPartition {
                    partition_index: partition,
                    committed_offset: -1,
                    committed_leader_epoch: -1,
                    metadata: String::new(),
                    error_code: NONE,
                },
            }
        };
        let topics = match &req.topics {
            Some(topics) => topics
                .iter()
                .map(|(topic, parts)| {
                    (
                        topic.clone(),
                        parts.iter().map(|p| fetched(topic, *p)).collect(),
                    )
                })
                .collect(),
            None => group_offsets
                .map(|t| {
                    t.iter()
                        .map(|(topic, parts)| {
                            (
                                topic.clone(),
                                parts.keys().map(|p| fetched(topic, *p)).collect(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        FetchedGroup {
            group_id: req.group_id.clone(),
            error_code: NONE,
            topics,
        }
    }

    /// OffsetDelete: refused for topics the group still consumes.
    pub(super) fn delete_offsets(
        &mut self,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
        out: &mut Output,
    ) -> OffsetDeleteOutput {
        let error = |code| OffsetDeleteOutput {
            error_code: code,
            topics: Vec::new(),
        };
        let Some(group) = self.groups.get(group_id) else {
            return error(GROUP_ID_NOT_FOUND);
        };
        if let Group::Classic(g) = group {
            if g.is(ClassicGroupState::Dead) {
                return error(GROUP_ID_NOT_FOUND);
            }
            // A group not using the consumer protocol cannot tell which topics it reads.
            if g.protocol_type.as_deref() != Some("consumer") && !g.is(ClassicGroupState::Empty) {
                return error(NON_EMPTY_GROUP);
            }
        }
        let mut records = Vec::new();
        let results = topics
            .iter()
            .map(|(topic, parts)| {
                let subscribed = group.is_subscribed_to_topic(topic);
                let parts = parts
                    .iter()
                    .map(|p| {
                        if subscribed {
                            return (*p, GROUP_SUBSCRIBED_TO_TOPIC);
                        }
                        if self.offsets.get(group_id, topic, *p).is_some() {
                            records.push(CoordinatorRecord::OffsetCommit {
                                group_id: group_id.to_string(),
                                topic: topic.clone(),
                                partition: *p,
                                value: None,
                            });
                        }
                        (*p, NONE)
                    })
                    .collect();
                (topic.clone(), parts)
            })
            .collect();
        for r in &records {
            self.replay(r);
        }
        out.records.extend(records);
        OffsetDeleteOutput {
            error_code: NONE,
            topics: results,
        }
    }

    /// Offsets retention (`offsets.retention.minutes`) and removal of empty groups left
    /// without offsets (Kafka's `cleanupGroupMetadata`).
    pub(super) fn cleanup_expired(&mut self, now_ms: i64, out: &mut Output) {
        let retention = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let group_ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in group_ids {
            let group = &self.groups[&group_id];
            // Kafka's offsetExpirationCondition: the timestamp an offset ages from, or None
            // when the group's offsets must not expire now.
            let base = match group {
                Group::Classic(g) => match &g.protocol_type {
                    // A simple group: offsets age from their commit.
                    None => Some(ExpiryBase::CommitTime),
                    // Nobody consumes: everything ages from when the group became empty.
                    Some(_) if g.is(ClassicGroupState::Empty) => {
                        Some(ExpiryBase::Since(g.state_timestamp_ms))
                    }
                    // Stable consumers that told us their topics: other topics age out.
                    Some(t)
                        if t == "consumer"
                            && g.is(ClassicGroupState::Stable)
                            && g.subscribed_topics().is_some() =>
                    {
                        Some(ExpiryBase::CommitTime)
                    }
                    Some(_) => None,
                },
                Group::Consumer(_) => Some(ExpiryBase::CommitTime),
                Group::Share(_) => None,
            };
            let (Some(base), Some(topics)) = (base, self.offsets.group(&group_id)) else {
                continue;
            };
            for (topic, parts) in topics {
                if group.is_subscribed_to_topic(topic) {
                    continue;
                }
                for (partition, v) in parts {
                    let expired = match v.expire_timestamp_ms {
                        Some(expire) => now_ms >= expire,
                        None => {
                            let since = match base {
                                ExpiryBase::CommitTime => v.commit_timestamp_ms,
                                ExpiryBase::Since(ts) => ts,
                            };
                            now_ms - since >= retention
                        }
                    };
                    if expired && !self.offsets.has_pending(&group_id, topic, *partition) {
                        records.push(CoordinatorRecord::OffsetCommit {
                            group_id: group_id.clone(),
                            topic: topic.clone(),
                            partition: *partition,
                            value: None,
                        });
                    }
                }
            }
        }
        for r in &records {
            self.replay(r);
        }
        // Groups now empty with no offsets left are deleted.
        let empty_groups: Vec<String> = self
            .groups
            .iter()
            .filter(|(id, g)| {
                let deletable = match g {
                    Group::Classic(c) => c.is(ClassicGroupState::Empty),
                    Group::Consumer(c) => c.members.is_empty(),
                    Group::Share(c) => c.members.is_empty(),
                };
                deletable && !self.offsets.has_offsets(id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for group_id in empty_groups {
            let tombstones = self.group_tombstones(&group_id);
            for r in &tombstones {
                self.replay(r);
            }
            // Simple groups never wrote a GroupMetadata record but still go away.
            self.groups.remove(&group_id);
            records.extend(tombstones);
        }
        out.records.extend(records);
    }
}
