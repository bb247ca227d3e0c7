//! A KIP-848 consumer group's state (Kafka's `ConsumerGroup` and `ConsumerGroupMember`):
//! group epoch, target assignment, members with their current assignment. It changes only by
//! replaying records, so a reload from `__consumer_offsets` rebuilds it exactly.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::Uuid;

use super::assignor::Assignment;
use super::records::{
    ClassicMemberMetadata, ConsumerCurrentAssignmentValue, ConsumerMemberMetadataValue,
    CoordinatorRecord, RegularExpressionValue, TopicPartitions,
};
use kactor_protocol::errors::*;

/// Kafka's `MemberState` (its byte codes are persisted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemberState {
    #[default]
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
    Unknown,
}

impl MemberState {
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }
    pub fn from_code(code: i8) -> Self {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// Kafka's `ConsumerGroupState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
    Dead,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
            ConsumerGroupState::Dead => "Dead",
        }
    }
}

/// Member epoch meaning "left" (and the epoch a fenced member is answered with).
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Member epoch of a static member that left temporarily and may come back.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    /// (topic, partition) -> member epoch at which it was assigned, for held partitions.
    pub assignment_epochs: BTreeMap<(Uuid, i32), i32>,
    /// Set when the member joined with JoinGroup (classic protocol) rather than
    /// ConsumerGroupHeartbeat: a mixed group (KIP-848 online migration).
    pub classic: Option<ClassicMemberMetadata>,
}

impl ConsumerMember {
    pub fn new(member_id: &str) -> Self {
        ConsumerMember {
            member_id: member_id.to_string(),
            rebalance_timeout_ms: -1,
            ..Default::default()
        }
    }

    pub fn metadata_value(&self) -> ConsumerMemberMetadataValue {
        ConsumerMemberMetadataValue {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            subscribed_topic_names: self.subscribed_topic_names.clone(),
            // Kafka writes "" for a member without a regex.
            subscribed_topic_regex: Some(self.subscribed_topic_regex.clone().unwrap_or_default()),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            server_assignor: self.server_assignor.clone(),
            classic_member_metadata: self.classic.clone(),
        }
    }

    /// Whether the member uses the classic protocol (Kafka's `useClassicProtocol`).
    pub fn uses_classic_protocol(&self) -> bool {
        self.classic.is_some()
    }

    /// The protocol a classic member was told to use in its JoinGroup response: its first.
    pub fn classic_protocol_name(&self) -> Option<&str> {
        self.classic
            .as_ref()
            .and_then(|c| c.supported_protocols.first())
            .map(|(name, _)| name.as_str())
    }

    pub fn assignment_value(&self) -> ConsumerCurrentAssignmentValue {
        ConsumerCurrentAssignmentValue {
            member_epoch: self.member_epoch,
            previous_member_epoch: self.previous_member_epoch,
            state: self.state.code(),
            assigned_partitions: to_topic_partitions(&self.assigned),
            partitions_pending_revocation: to_topic_partitions(&self.pending_revocation),
            assignment_epochs: self.assignment_epochs.clone(),
        }
    }

    pub fn is_reconciled_to(&self, target_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == target_epoch
    }
}

pub fn to_topic_partitions(a: &Assignment) -> TopicPartitions {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

pub fn from_topic_partitions(tp: &TopicPartitions) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in tp {
        if !ps.is_empty() {
            a.entry(*t).or_default().extend(ps.iter().copied());
        }
    }
    a
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub metadata_hash: i64,
    pub assignment_epoch: i32,
    pub assignment_timestamp_ms: i64,
    pub members: BTreeMap<String, ConsumerMember>,
    /// member id -> target assignment
    pub target: BTreeMap<String, Assignment>,
    /// instance id -> member id
    pub static_members: BTreeMap<String, String>,
    /// regex -> resolved topics
    pub regexes: BTreeMap<String, RegularExpressionValue>,
    /// (topic, partition) -> epoch of the member holding it (assigned or being revoked).
    pub partition_epochs: BTreeMap<(Uuid, i32), i32>,
}

impl ConsumerGroup {
    pub fn new(group_id: &str) -> Self {
        // Kafka 4.4 starts a group at epoch 1 with its (empty) target assignment at epoch 1:
        // the first member's subscription bumps it to 2, and a group that only ever had
        // regex members not resolved yet stays at 1 without a ConsumerGroupMetadata record.
        ConsumerGroup {
            group_id: group_id.to_string(),
            group_epoch: 1,
            metadata_hash: 0,
            assignment_epoch: 1,
            assignment_timestamp_ms: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: BTreeMap::new(),
            regexes: BTreeMap::new(),
            partition_epochs: BTreeMap::new(),
        }
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| !m.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// Epoch of the member holding a partition, or -1 when it is free.
    pub fn current_partition_epoch(&self, topic: &Uuid, partition: i32) -> i32 {
        *self
            .partition_epochs
            .get(&(*topic, partition))
            .unwrap_or(&-1)
    }

    pub fn static_member(&self, instance_id: &str) -> Option<&ConsumerMember> {
        self.static_members
            .get(instance_id)
            .and_then(|id| self.members.get(id))
    }

    /// Topic names the group consumes: explicit subscriptions plus resolved regexes.
    pub fn subscribed_topic_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for m in self.members.values() {
            names.extend(m.subscribed_topic_names.iter().cloned());
            if let Some(regex) = &m.subscribed_topic_regex {
                if let Some(resolved) = self.regexes.get(regex) {
                    names.extend(resolved.topics.iter().cloned());
                }
            }
        }
        names
    }

    /// Topic names one member consumes.
    pub fn member_topic_names(&self, member: &ConsumerMember) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = member.subscribed_topic_names.iter().cloned().collect();
        if let Some(regex) = &member.subscribed_topic_regex {
            if let Some(resolved) = self.regexes.get(regex) {
                names.extend(resolved.topics.iter().cloned());
            }
        }
        names
    }

    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        self.subscribed_topic_names().contains(topic)
    }

    /// The server assignor most members ask for, else the broker's default (Kafka's
    /// `preferredServerAssignor`).
    pub fn preferred_assignor(&self, default: &str) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *counts.entry(a.as_str()).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (name, n) in counts {
            if best.is_none() || best.is_some_and(|(_, c)| n > c) {
                best = Some((name, n));
            }
        }
        best.map_or_else(|| default.to_string(), |(n, _)| n.to_string())
    }

    /// Kafka's `ConsumerGroup.validateOffsetCommit`.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        member_epoch: i32,
        transactional: bool,
        api_version: i16,
    ) -> Result<(), i16> {
        if member_epoch < 0 && self.members.is_empty() {
            // Admin clients reset offsets of an empty group with epoch -1.
            return Ok(());
        }
        if transactional && member_epoch == -1 && member_id.is_empty() && instance_id.is_none() {
            return Ok(());
        }
        let Some(member) = self.members.get(member_id) else {
            return Err(UNKNOWN_MEMBER_ID);
        };
        if member.uses_classic_protocol() {
            // A classic member commits with its generation (= member epoch) at any version.
            if member_epoch != member.member_epoch {
                return Err(ILLEGAL_GENERATION);
            }
            return Ok(());
        }
        if !transactional && api_version < 9 {
            // Members of KIP-848 groups must use OffsetCommit v9+.
            return Err(UNSUPPORTED_VERSION);
        }
        if member_epoch > member.member_epoch {
            return Err(STALE_MEMBER_EPOCH);
        }
        Ok(())
    }

    /// Kafka 4.4's assignment-epoch validator: a commit carrying an epoch older than the
    /// member's is accepted per partition if the member held the partition since then.
    pub fn validate_partition_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        topic_id: &Uuid,
        partition: i32,
    ) -> Result<(), i16> {
        let Some(member) = self.members.get(member_id) else {
            return Ok(());
        };
        if member_epoch == member.member_epoch {
            return Ok(());
        }
        match member.assignment_epochs.get(&(*topic_id, partition)) {
            Some(assigned_at) if member_epoch >= *assigned_at => Ok(()),
            _ => Err(STALE_MEMBER_EPOCH),
        }
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), i16> {
        if member_id.is_none() && member_epoch < 0 {
            // Admin clients and classic consumers do not say who they are.
            return Ok(());
        }
        let Some(member) = member_id.and_then(|id| self.members.get(id)) else {
            return Err(UNKNOWN_MEMBER_ID);
        };
        if member_epoch != member.member_epoch {
            return Err(if member.uses_classic_protocol() {
                ILLEGAL_GENERATION
            } else {
                STALE_MEMBER_EPOCH
            });
        }
        Ok(())
    }

    /// Kafka's `waitingOnUnreleasedPartition`: whether a partition of the member's target is
    /// still held by another member.
    pub fn waiting_on_unreleased_partition(&self, member: &ConsumerMember) -> bool {
        if member.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let Some(target) = self.target.get(&member.member_id) else {
            return false;
        };
        target.iter().any(|(topic, partitions)| {
            let held = member.assigned.get(topic);
            partitions.iter().any(|p| {
                !held.is_some_and(|h| h.contains(p))
                    && self.current_partition_epoch(topic, *p) != -1
            })
        })
    }

    fn set_partition_epochs(&mut self, member: &ConsumerMember, add: bool) {
        for a in [&member.assigned, &member.pending_revocation] {
            for (t, ps) in a {
                for p in ps {
                    if add {
                        self.partition_epochs.insert((*t, *p), member.member_epoch);
                    } else if self.partition_epochs.get(&(*t, *p)) == Some(&member.member_epoch) {
                        self.partition_epochs.remove(&(*t, *p));
                    }
                }
            }
        }
    }

    /// Applies one of this group's KIP-848 records (Kafka's `GroupMetadataManager.replay`).
    pub fn replay(&mut self, record: &CoordinatorRecord) {
        match record {
            CoordinatorRecord::ConsumerGroupMetadata {
                value: Some((epoch, hash)),
                ..
            } => {
                self.group_epoch = *epoch;
                self.metadata_hash = *hash;
            }
            CoordinatorRecord::ConsumerGroupMemberMetadata {
                member_id, value, ..
            } => match value {
                Some(v) => {
                    let member = self
                        .members
                        .entry(member_id.clone())
                        .or_insert_with(|| ConsumerMember::new(member_id));
                    if let Some(old) = &member.instance_id {
                        if self.static_members.get(old) == Some(member_id) {
                            self.static_members.remove(old);
                        }
                    }
                    member.instance_id = v.instance_id.clone();
                    member.rack_id = v.rack_id.clone();
                    member.client_id = v.client_id.clone();
                    member.client_host = v.client_host.clone();
                    member.subscribed_topic_names = v.subscribed_topic_names.clone();
                    member.subscribed_topic_regex =
                        v.subscribed_topic_regex.clone().filter(|r| !r.is_empty());
                    member.rebalance_timeout_ms = v.rebalance_timeout_ms;
                    member.server_assignor = v.server_assignor.clone();
                    member.classic = v.classic_member_metadata.clone();
                    if let Some(instance) = &v.instance_id {
                        self.static_members
                            .insert(instance.clone(), member_id.clone());
                    }
                }
                None => {
                    if let Some(member) = self.members.remove(member_id) {
                        self.set_partition_epochs(&member, false);
                        if let Some(instance) = &member.instance_id {
                            if self.static_members.get(instance) == Some(member_id) {
                                self.static_members.remove(instance);
                            }
                        }
                    }
                }
            },
            CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
                value: Some((epoch, ts)),
                ..
            } => {
                self.assignment_epoch = *epoch;
                self.assignment_timestamp_ms = *ts;
            }
            CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                member_id, value, ..
            } => match value {
                Some(tp) => {
                    self.target
                        .insert(member_id.clone(), from_topic_partitions(tp));
                }
                None => {
                    self.target.remove(member_id);
                }
            },
            CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                member_id, value, ..
            } => {
                let old = self.members.get(member_id).cloned();
                if let Some(old) = &old {
                    self.set_partition_epochs(old, false);
                }
                let member = self
                    .members
                    .entry(member_id.clone())
                    .or_insert_with(|| ConsumerMember::new(member_id));
                match value {
                    Some(v) => {
                        member.member_epoch = v.member_epoch;
                        member.previous_member_epoch = v.previous_member_epoch;
                        member.state = MemberState::from_code(v.state);
                        member.assigned = from_topic_partitions(&v.assigned_partitions);
                        member.pending_revocation =
                            from_topic_partitions(&v.partitions_pending_revocation);
                        member.assignment_epochs = v.assignment_epochs.clone();
                    }
                    None => {
                        member.member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
                        member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
                        member.state = MemberState::Stable;
                        member.assigned.clear();
                        member.pending_revocation.clear();
                        member.assignment_epochs.clear();
                    }
                }
                let member = member.clone();
                self.set_partition_epochs(&member, true);
            }
            CoordinatorRecord::ConsumerGroupRegularExpression { regex, value, .. } => match value {
                Some(v) => {
                    self.regexes.insert(regex.clone(), v.clone());
                }
                None => {
                    self.regexes.remove(regex);
                }
            },
            _ => {}
        }
    }

    /// Records that delete this group entirely (Kafka's `createGroupTombstoneRecords`).
    pub fn tombstones(&self) -> Vec<CoordinatorRecord> {
        let g = || self.group_id.clone();
        let mut records = Vec::new();
        for m in self.members.keys() {
            records.push(CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                group_id: g(),
                member_id: m.clone(),
                value: None,
            });
        }
        for m in self.target.keys() {
            records.push(CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                group_id: g(),
                member_id: m.clone(),
                value: None,
            });
        }
        records.push(CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
            group_id: g(),
            value: None,
        });
        for m in self.members.keys() {
            records.push(CoordinatorRecord::ConsumerGroupMemberMetadata {
                group_id: g(),
                member_id: m.clone(),
                value: None,
            });
        }
        for regex in self.regexes.keys() {
            records.push(CoordinatorRecord::ConsumerGroupRegularExpression {
                group_id: g(),
                regex: regex.clone(),
                value: None,
            });
        }
        records.push(CoordinatorRecord::ConsumerGroupPartitionMetadata { group_id: g() });
        records.push(CoordinatorRecord::ConsumerGroupMetadata {
            group_id: g(),
            value: None,
        });
        records
    }
}
