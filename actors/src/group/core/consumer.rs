//! The KIP-848 consumer protocol (Kafka's `GroupMetadataManager.consumerGroupHeartbeat` and
//! `CurrentAssignmentBuilder`): ConsumerGroupHeartbeat (join, leave, static membership, epoch
//! fencing, server-side target assignment, reconciliation with revocation before assignment),
//! ConsumerGroupDescribe, and the session and rebalance timeouts. Every change is expressed as
//! records that are replayed onto the group, as Kafka does.

use std::collections::BTreeSet;

use super::api::{
    ConsumerGroupHeartbeatInput, ConsumerGroupHeartbeatOutput, DescribedConsumerGroup,
    DescribedConsumerMember, Output,
};
use super::assignor::{self, Assignment, GroupSpec, MemberSpec};
use super::consumer_group::{
    from_topic_partitions, to_topic_partitions, ConsumerGroup, ConsumerMember, MemberState,
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::errors::*;
use super::records::{CoordinatorRecord, RegularExpressionValue};
use super::regex::TopicRegex;
use super::shard::{Group, GroupCoordinatorShard};
use super::timers::{TimerAction, TimerKey};

/// ConsumerGroupHeartbeat v1+ (KIP-1082): the client generates its member id.
const CLIENT_MEMBER_ID_VERSION: i16 = 1;

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): they never match a regex subscription
/// (and a client's AddPartitionsToTxn may not name them).
pub(crate) const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

pub(super) type HbResult<T> = Result<T, ConsumerGroupHeartbeatOutput>;

pub(super) fn fail<T>(code: i16, message: impl Into<String>) -> HbResult<T> {
    Err(ConsumerGroupHeartbeatOutput::error(code, message))
}

pub(super) fn session_key(group_id: &str, member_id: &str) -> TimerKey {
    TimerKey::ConsumerSession {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    }
}

pub(super) fn rebalance_key(group_id: &str, member_id: &str) -> TimerKey {
    TimerKey::ConsumerRebalance {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    }
}

/// Whether every owned partition is currently assigned to the member (Kafka's `isSubset`).
fn is_subset(owned: Option<&Assignment>, assigned: &Assignment) -> bool {
    match owned {
        None => false,
        Some(owned) => owned
            .iter()
            .all(|(t, ps)| ps.is_empty() || assigned.get(t).is_some_and(|a| ps.is_subset(a))),
    }
}

/// FNV-1a over the subscribed topics' names, ids and partition counts: the group epoch bumps
/// when it changes (KIP-1101's metadata hash; the value is ours, only equality matters).
pub(super) fn metadata_hash(names: &BTreeSet<String>, topics: &super::api::TopicsView) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut any = false;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for name in names {
        if let (Some(id), Some(n)) = (topics.id_of(name), topics.num_partitions(name)) {
            any = true;
            feed(name.as_bytes());
            feed(&id.0);
            feed(&n.to_be_bytes());
        }
    }
    if any {
        h as i64
    } else {
        0
    }
}

/// Kafka's `CurrentAssignmentBuilder`: moves a member one step towards its target, revoking
/// before assigning and never assigning a partition another member still holds.
fn next_assignment(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
) -> Result<ConsumerMember, ConsumerGroupHeartbeatOutput> {
    let owns_any = |to_revoke: &Assignment| match owned {
        None => true,
        Some(owned) => owned
            .iter()
            .any(|(t, ps)| to_revoke.get(t).is_some_and(|r| !r.is_disjoint(ps))),
    };
    match member.state {
        MemberState::Stable => {
            if member.member_epoch != target_epoch {
                Ok(compute_next(
                    group,
                    member,
                    member.member_epoch,
                    target_epoch,
                    target,
                    owned,
                ))
            } else {
                Ok(member.clone())
            }
        }
        MemberState::UnrevokedPartitions => {
            if owned.is_none() || owns_any(&member.pending_revocation) {
                Ok(member.clone())
            } else {
                // Revocation acknowledged: the member may move on.
                Ok(compute_next(
                    group,
                    member,
                    (member.member_epoch + 1).min(target_epoch),
                    target_epoch,
                    target,
                    owned,
                ))
            }
        }
        MemberState::UnreleasedPartitions => Ok(compute_next(
            group,
            member,
            member.member_epoch,
            target_epoch,
            target,
            owned,
        )),
        MemberState::Unknown => {
            if !owned.is_some_and(|o| o.values().all(|ps| ps.is_empty())) {
                return fail(
                    FENCED_MEMBER_EPOCH,
                    "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
                );
            }
            Ok(compute_next(
                group,
                member,
                target_epoch,
                target_epoch,
                target,
                owned,
            ))
        }
    }
}

fn compute_next(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    revoking_epoch: i32,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
) -> ConsumerMember {
    let mut assigned = Assignment::new();
    let mut revoke = Assignment::new();
    let mut to_assign = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<_> = target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    for t in topics {
        let tgt = target.get(&t).cloned().unwrap_or_default();
        let cur = member.assigned.get(&t).cloned().unwrap_or_default();
        let keep: BTreeSet<i32> = cur.intersection(&tgt).copied().collect();
        let rev: BTreeSet<i32> = cur.difference(&keep).copied().collect();
        let mut add: BTreeSet<i32> = tgt.difference(&keep).copied().collect();
        let pending = member.pending_revocation.get(&t);
        let before = add.len();
        add.retain(|p| {
            group.current_partition_epoch(&t, *p) == -1 || pending.is_some_and(|s| s.contains(p))
        });
        unreleased |= add.len() != before;
        if !keep.is_empty() {
            assigned.insert(t, keep);
        }
        if !rev.is_empty() {
            revoke.insert(t, rev);
        }
        if !add.is_empty() {
            to_assign.insert(t, add);
        }
    }
    let owns_revoked = match owned {
        None => true,
        Some(owned) => owned
            .iter()
            .any(|(t, ps)| revoke.get(t).is_some_and(|r| !r.is_disjoint(ps))),
    };
    let mut next = member.clone();
    // Held partitions keep the epoch they were assigned at; new ones get the target epoch.
    let epochs_for = |assigned: &Assignment, revoking: &Assignment| {
        let mut epochs = std::collections::BTreeMap::new();
        for a in [assigned, revoking] {
            for (t, ps) in a {
                for p in ps {
                    let at = member
                        .assignment_epochs
                        .get(&(*t, *p))
                        .copied()
                        .unwrap_or(target_epoch);
                    epochs.insert((*t, *p), at);
                }
            }
        }
        epochs
    };
    let set_epoch = |m: &mut ConsumerMember, epoch: i32| {
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = epoch;
    };
    if !revoke.is_empty() && owns_revoked {
        // Revoke first; the member stays in its epoch until it confirms.
        next.state = MemberState::UnrevokedPartitions;
        set_epoch(&mut next, revoking_epoch);
        next.assignment_epochs = epochs_for(&assigned, &revoke);
        next.assigned = assigned;
        next.pending_revocation = revoke;
    } else {
        for (t, ps) in to_assign {
            assigned.entry(t).or_default().extend(ps);
        }
        next.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        set_epoch(&mut next, target_epoch);
        next.assignment_epochs = epochs_for(&assigned, &Assignment::new());
        next.assigned = assigned;
        next.pending_revocation = Assignment::new();
    }
    next
}

impl GroupCoordinatorShard {
    /// Appends a record and applies it, so state only ever changes the way a replay would.
    pub(super) fn emit(&mut self, out: &mut Output, record: CoordinatorRecord) {
        self.replay(&record);
        out.records.push(record);
    }

    pub(super) fn consumer_group(&self, group_id: &str) -> Option<&ConsumerGroup> {
        match self.groups.get(group_id) {
            Some(Group::Consumer(g)) => Some(g),
            _ => None,
        }
    }

    pub(super) fn replay_consumer_record(&mut self, record: &CoordinatorRecord) {
        let group_id = record.group_id().to_string();
        match record {
            CoordinatorRecord::ConsumerGroupMetadata { value: None, .. } => {
                if matches!(self.groups.get(&group_id), Some(Group::Consumer(_))) {
                    self.groups.remove(&group_id);
                }
                return;
            }
            CoordinatorRecord::ConsumerGroupPartitionMetadata { .. } => return,
            _ => {}
        }
        let tombstone = record.is_tombstone();
        match self.groups.get_mut(&group_id) {
            Some(Group::Consumer(g)) => g.replay(record),
            Some(Group::Classic(c)) if !tombstone && c.members.is_empty() => {
                // Kafka converts an empty classic group when a consumer group takes its id.
                let mut g = ConsumerGroup::new(&group_id);
                g.replay(record);
                self.groups.insert(group_id, Group::Consumer(g));
            }
            Some(Group::Classic(_)) => {}
            None if tombstone => {}
            None => {
                let mut g = ConsumerGroup::new(&group_id);
                g.replay(record);
                self.groups.insert(group_id, Group::Consumer(g));
            }
        }
    }

    pub(super) fn schedule_consumer_session(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
    ) {
        // A classic member (mixed group) keeps the session timeout it joined with.
        let timeout_ms = self
            .consumer_group(group_id)
            .and_then(|g| g.members.get(member_id))
            .and_then(|m| m.classic.as_ref())
            .map_or(self.consumer_session_timeout_ms(group_id), |c| {
                c.session_timeout_ms
            });
        self.timers.schedule(
            session_key(group_id, member_id),
            now_ms + timeout_ms as i64,
            TimerAction::ConsumerSessionExpired,
        );
    }

    pub(super) fn consumer_heartbeat(
        &mut self,
        req: ConsumerGroupHeartbeatInput,
        now_ms: i64,
        out: &mut Output,
    ) -> ConsumerGroupHeartbeatOutput {
        // Records of a failed request are dropped, as Kafka's timeline rollback does; the
        // group is rebuilt from what was kept.
        let mut scratch = Output::default();
        let snapshot = self.groups.get(&req.group_id).cloned();
        let result = self.validate_consumer_heartbeat(&req).and_then(|_| {
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
                || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            {
                self.consumer_leave(&req, now_ms, &mut scratch)
            } else {
                self.consumer_regular_heartbeat(&req, now_ms, &mut scratch)
            }
        });
        match result {
            Ok(resp) => {
                out.merge(scratch);
                resp
            }
            Err(resp) => {
                match snapshot {
                    Some(g) => {
                        self.groups.insert(req.group_id.clone(), g);
                    }
                    None => {
                        self.groups.remove(&req.group_id);
                    }
                }
                resp
            }
        }
    }

    fn validate_consumer_heartbeat(&self, req: &ConsumerGroupHeartbeatInput) -> HbResult<()> {
        if req.group_id.is_empty() {
            return fail(INVALID_REQUEST, "GroupId can't be empty.");
        }
        if req.instance_id.as_deref() == Some("") {
            return fail(INVALID_REQUEST, "InstanceId can't be empty.");
        }
        if req.rack_id.as_deref() == Some("") {
            return fail(INVALID_REQUEST, "RackId can't be empty.");
        }
        if req.api_version >= CLIENT_MEMBER_ID_VERSION && req.member_id.is_empty() {
            return fail(INVALID_REQUEST, "MemberId can't be empty.");
        }
        if req.member_epoch == 0 {
            if req.rebalance_timeout_ms == -1 {
                return fail(
                    INVALID_REQUEST,
                    "RebalanceTimeoutMs must be provided in first request.",
                );
            }
            if !req
                .topic_partitions
                .as_ref()
                .is_some_and(|tp| tp.is_empty())
            {
                return fail(
                    INVALID_REQUEST,
                    "TopicPartitions must be empty when (re-)joining.",
                );
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return fail(
                    INVALID_REQUEST,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        } else if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            if req.instance_id.is_none() {
                return fail(INVALID_REQUEST, "InstanceId can't be null.");
            }
        } else if req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            return fail(INVALID_REQUEST, "MemberEpoch is invalid.");
        }
        if let Some(regex) = req
            .subscribed_topic_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            if let Err(e) = TopicRegex::new(regex) {
                return fail(
                    INVALID_REGULAR_EXPRESSION,
                    format!(
                        "SubscribedTopicRegex `{regex}` is not a valid regular expression: {}.",
                        e.0
                    ),
                );
            }
        }
        if let Some(assignor) = &req.server_assignor {
            if !self.config.consumer_assignors.contains(assignor) {
                return fail(
                    UNSUPPORTED_ASSIGNOR,
                    format!(
                        "ServerAssignor {assignor} is not supported. Supported assignors: {}.",
                        self.config.consumer_assignors.join(", ")
                    ),
                );
            }
        }
        Ok(())
    }

    fn check_member_epoch(
        member: &ConsumerMember,
        received: i32,
        owned: Option<&Assignment>,
    ) -> HbResult<()> {
        if received > member.member_epoch {
            return fail(
                FENCED_MEMBER_EPOCH,
                format!(
                    "The consumer group member has a greater member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                    member.member_epoch
                ),
            );
        }
        if received < member.member_epoch
            && (received != member.previous_member_epoch || !is_subset(owned, &member.assigned))
        {
            // The previous epoch is accepted when the response that bumped it may have been
            // lost, as long as the member owns nothing it should not.
            return fail(
                FENCED_MEMBER_EPOCH,
                format!(
                    "The consumer group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                    member.member_epoch
                ),
            );
        }
        Ok(())
    }

    fn consumer_regular_heartbeat(
        &mut self,
        req: &ConsumerGroupHeartbeatInput,
        now_ms: i64,
        out: &mut Output,
    ) -> HbResult<ConsumerGroupHeartbeatOutput> {
        let group_id = req.group_id.clone();
        let create = req.member_epoch == 0;
        match self.groups.get(&group_id) {
            None if !create => {
                return fail(GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."))
            }
            None => {
                self.groups.insert(
                    group_id.clone(),
                    Group::Consumer(ConsumerGroup::new(&group_id)),
                );
            }
            Some(Group::Classic(c)) if create && c.members.is_empty() => {
                // An empty classic group (e.g. only committed offsets) becomes a consumer group.
                self.emit(
                    out,
                    CoordinatorRecord::GroupMetadata {
                        group_id: group_id.clone(),
                        value: None,
                    },
                );
                self.groups.insert(
                    group_id.clone(),
                    Group::Consumer(ConsumerGroup::new(&group_id)),
                );
            }
            Some(Group::Classic(_)) if create => {
                // A KIP-848 member joins a live classic group: online upgrade.
                self.upgrade_to_consumer_group(&group_id, now_ms, out)?;
            }
            Some(Group::Classic(_)) => {
                return fail(
                    GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a consumer group."),
                )
            }
            Some(Group::Consumer(_)) => {}
        }
        let member_id = if req.member_id.is_empty() {
            self.random_kafka_uuid()
        } else {
            req.member_id.clone()
        };
        let owned = req.topic_partitions.as_ref().map(from_topic_partitions);
        let group = self.consumer_group(&group_id).expect("consumer group");
        if !group.members.contains_key(&member_id)
            && group.members.len() >= self.config.consumer_max_size
        {
            return fail(
                GROUP_MAX_SIZE_REACHED,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    self.config.consumer_max_size
                ),
            );
        }

        // The member as it is before this heartbeat.
        let old_member: ConsumerMember = match &req.instance_id {
            None => match group.members.get(&member_id) {
                Some(m) if create => {
                    // Rejoining with epoch 0: the client has released everything.
                    let mut m = m.clone();
                    m.member_epoch = 0;
                    m.previous_member_epoch = 0;
                    m.state = MemberState::Stable;
                    m.assigned.clear();
                    m.pending_revocation.clear();
                    m.assignment_epochs.clear();
                    self.emit(
                        out,
                        CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                            group_id: group_id.clone(),
                            member_id: member_id.clone(),
                            value: Some(m.assignment_value()),
                        },
                    );
                    m
                }
                Some(m) => {
                    Self::check_member_epoch(m, req.member_epoch, owned.as_ref())?;
                    m.clone()
                }
                None if create => ConsumerMember::new(&member_id),
                None => {
                    return fail(
                        UNKNOWN_MEMBER_ID,
                        format!("Member {member_id} is not a member of group {group_id}."),
                    )
                }
            },
            Some(instance_id) => {
                let existing = group.static_member(instance_id).cloned();
                match existing {
                    None if create => ConsumerMember::new(&member_id),
                    None => {
                        return fail(
                            UNKNOWN_MEMBER_ID,
                            format!("Instance id {instance_id} is unknown."),
                        )
                    }
                    Some(e) if create => {
                        // A classic instance never sends a leave: a KIP-848 member with its
                        // instance id simply replaces it.
                        if e.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                            && !e.uses_classic_protocol()
                        {
                            return fail(
                                UNRELEASED_INSTANCE_ID,
                                format!(
                                    "Static member {member_id} with instance id {instance_id} cannot join the group because the instance id is owned by {} member.",
                                    e.member_id
                                ),
                            );
                        }
                        // The instance comes back under a new member id: it takes over the
                        // old member's assignment without a rebalance.
                        self.replace_static_member(&group_id, &e, &member_id, out)
                    }
                    Some(e) => {
                        if e.member_id != member_id {
                            return fail(
                                FENCED_INSTANCE_ID,
                                format!("Static member {member_id} with instance id {instance_id} is not the current owner of the instance id; {} is.", e.member_id),
                            );
                        }
                        Self::check_member_epoch(&e, req.member_epoch, owned.as_ref())?;
                        e
                    }
                }
            }
        };
        let is_new = !self
            .consumer_group(&group_id)
            .expect("consumer group")
            .members
            .contains_key(&member_id);

        // 1. The member's subscription.
        let mut updated = old_member.clone();
        if let Some(i) = &req.instance_id {
            updated.instance_id = Some(i.clone());
        }
        if let Some(r) = &req.rack_id {
            updated.rack_id = Some(r.clone());
        }
        if req.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(a) = &req.server_assignor {
            updated.server_assignor = Some(a.clone());
        }
        if let Some(names) = &req.subscribed_topic_names {
            updated.subscribed_topic_names = names.clone();
        }
        if let Some(regex) = &req.subscribed_topic_regex {
            updated.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
        }
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        // A member heartbeating with KIP-848 no longer uses the classic protocol.
        updated.classic = None;

        let reconciled = self.apply_member_update(
            &group_id,
            &old_member,
            updated,
            is_new,
            owned.as_ref(),
            now_ms,
            out,
        )?;
        self.schedule_consumer_session(&group_id, &member_id, now_ms);

        let full_request = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
                && req.topic_partitions.is_some());
        let assignment = (full_request || reconciled.assigned != old_member.assigned)
            .then(|| to_topic_partitions(&reconciled.assigned));
        Ok(ConsumerGroupHeartbeatOutput {
            error_code: NONE,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: reconciled.member_epoch,
            heartbeat_interval_ms: self.consumer_heartbeat_interval_ms(&group_id),
            assignment,
        })
    }

    /// Kafka's `replaceMember`: a static instance rejoins under a new member id and takes
    /// over the old member's subscription, target and assignment, at epoch 0.
    pub(super) fn replace_static_member(
        &mut self,
        group_id: &str,
        existing: &ConsumerMember,
        member_id: &str,
        out: &mut Output,
    ) -> ConsumerMember {
        let group_id = group_id.to_string();
        let member_id = member_id.to_string();
        let group = self.consumer_group(&group_id).expect("consumer group");
        let e = existing;
        let mut replacement = e.clone();
        replacement.member_id = member_id.clone();
        replacement.member_epoch = 0;
        replacement.previous_member_epoch = 0;
        let old_target = group.target.get(&e.member_id).cloned().unwrap_or_default();
        self.remove_member_records(&group_id, &e.member_id, out);
        self.cancel_consumer_member_timers(&group_id, &e.member_id);
        self.emit(
            out,
            CoordinatorRecord::ConsumerGroupMemberMetadata {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
                value: Some(replacement.metadata_value()),
            },
        );
        self.emit(
            out,
            CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
                value: Some(to_topic_partitions(&old_target)),
            },
        );
        self.emit(
            out,
            CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
                value: Some(replacement.assignment_value()),
            },
        );
        replacement
    }

    /// Steps 1–5 of a member's heartbeat or (mixed group) JoinGroup, shared by both protocols
    /// (Kafka's `consumerGroupHeartbeat` / `classicGroupJoinToConsumerGroup`): persist the
    /// member if it changed, bump the group epoch on a subscription or metadata change,
    /// recompute the target assignment for a new epoch, and move the member one step towards
    /// its target given the partitions it says it owns. Returns the member as it now is.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_member_update(
        &mut self,
        group_id: &str,
        old_member: &ConsumerMember,
        updated: ConsumerMember,
        is_new: bool,
        owned: Option<&Assignment>,
        now_ms: i64,
        out: &mut Output,
    ) -> HbResult<ConsumerMember> {
        let group_id = group_id.to_string();
        let member_id = updated.member_id.clone();
        let owned = owned.cloned();
        let mut bump = self.consumer_group(&group_id).expect("group").group_epoch == 0;
        if is_new || updated.metadata_value() != old_member.metadata_value() {
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupMemberMetadata {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    value: Some(updated.metadata_value()),
                },
            );
            let old_names: BTreeSet<&String> = old_member.subscribed_topic_names.iter().collect();
            let new_names: BTreeSet<&String> = updated.subscribed_topic_names.iter().collect();
            if is_new
                || old_names != new_names
                || old_member.subscribed_topic_regex != updated.subscribed_topic_regex
            {
                bump = true;
            }
        }

        // 2. Regular expressions: resolve new ones, refresh the others, drop unused ones.
        bump |= self.refresh_regexes(&group_id, now_ms, out);

        // 3. Group epoch: bumps on subscription or topic metadata changes.
        let group = self.consumer_group(&group_id).expect("group");
        let hash = metadata_hash(&group.subscribed_topic_names(), &self.topics);
        if bump || hash != group.metadata_hash {
            let epoch = group.group_epoch + 1;
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupMetadata {
                    group_id: group_id.clone(),
                    value: Some((epoch, hash)),
                },
            );
        }

        // 4. Target assignment for the new group epoch.
        let group = self.consumer_group(&group_id).expect("group");
        if group.group_epoch > group.assignment_epoch {
            self.update_target_assignment(&group_id, now_ms, out);
        }

        // 5. Reconcile this member towards its target.
        let group = self.consumer_group(&group_id).expect("group");
        let member = group.members.get(&member_id).expect("member").clone();
        let target_epoch = group.assignment_epoch;
        let target = group.target.get(&member_id).cloned().unwrap_or_default();
        let reconciled = if member.is_reconciled_to(target_epoch) {
            member.clone()
        } else {
            next_assignment(group, &member, target_epoch, &target, owned.as_ref())?
        };
        if reconciled != member {
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    value: Some(reconciled.assignment_value()),
                },
            );
            // Classic members revoke by rejoining; their join timeout bounds that instead.
            if reconciled.state == MemberState::UnrevokedPartitions
                && !reconciled.uses_classic_protocol()
            {
                self.timers.schedule(
                    rebalance_key(&group_id, &member_id),
                    now_ms + reconciled.rebalance_timeout_ms.max(0) as i64,
                    TimerAction::ConsumerRebalanceExpired {
                        member_epoch: reconciled.member_epoch,
                    },
                );
            } else {
                self.timers.cancel(&rebalance_key(&group_id, &member_id));
            }
        }
        Ok(reconciled)
    }

    /// Resolves every regex members use against the current topics; writes the ones that
    /// changed and deletes the ones nobody uses. True when a resolution changed.
    fn refresh_regexes(&mut self, group_id: &str, now_ms: i64, out: &mut Output) -> bool {
        let group = self.consumer_group(group_id).expect("group");
        let used: BTreeSet<String> = group
            .members
            .values()
            .filter_map(|m| m.subscribed_topic_regex.clone())
            .collect();
        let mut changed = false;
        let mut records = Vec::new();
        for regex in group.regexes.keys() {
            if !used.contains(regex) {
                records.push(CoordinatorRecord::ConsumerGroupRegularExpression {
                    group_id: group_id.to_string(),
                    regex: regex.clone(),
                    value: None,
                });
                changed = true;
            }
        }
        for regex in &used {
            let Ok(compiled) = TopicRegex::new(regex) else {
                continue;
            };
            let topics: Vec<String> = self
                .topics
                .names()
                .filter(|t| !INTERNAL_TOPICS.contains(t) && compiled.full_match(t))
                .map(str::to_string)
                .collect();
            if group.regexes.get(regex).map(|v| &v.topics) != Some(&topics) {
                let version = group.regexes.get(regex).map_or(0, |v| v.version + 1);
                records.push(CoordinatorRecord::ConsumerGroupRegularExpression {
                    group_id: group_id.to_string(),
                    regex: regex.clone(),
                    value: Some(RegularExpressionValue {
                        topics,
                        version,
                        timestamp_ms: now_ms,
                    }),
                });
                changed = true;
            }
        }
        for r in records {
            self.emit(out, r);
        }
        changed
    }

    /// Runs the group's assignor and writes the members whose target changed, then the new
    /// assignment epoch.
    fn update_target_assignment(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let group = self.consumer_group(group_id).expect("group");
        let default = self
            .config
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| assignor::UNIFORM.to_string());
        let assignor_name = group.preferred_assignor(&default);
        let mut spec = GroupSpec::default();
        for m in group.members.values() {
            let ids: BTreeSet<_> = group
                .member_topic_names(m)
                .iter()
                .filter_map(|name| {
                    let id = self.topics.id_of(name)?;
                    spec.topic_partitions
                        .insert(id, self.topics.num_partitions(name).unwrap_or(0));
                    Some(id)
                })
                .collect();
            spec.members.insert(
                m.member_id.clone(),
                MemberSpec {
                    subscribed_topic_ids: ids,
                    current: group.target.get(&m.member_id).cloned().unwrap_or_default(),
                },
            );
        }
        let new_target =
            assignor::assign(&assignor_name, &spec).unwrap_or_else(|| assignor::uniform(&spec));
        let epoch = group.group_epoch;
        let mut records = Vec::new();
        for (member_id, assignment) in &new_target {
            if group.target.get(member_id) != Some(assignment) {
                records.push(CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                    group_id: group_id.to_string(),
                    member_id: member_id.clone(),
                    value: Some(to_topic_partitions(assignment)),
                });
            }
        }
        records.push(CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
            group_id: group_id.to_string(),
            value: Some((epoch, now_ms)),
        });
        for r in records {
            self.emit(out, r);
        }
    }

    /// Kafka's `removeMember`: current assignment, target and subscription tombstones.
    pub(super) fn remove_member_records(
        &mut self,
        group_id: &str,
        member_id: &str,
        out: &mut Output,
    ) {
        for record in [
            CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                group_id: group_id.to_string(),
                member_id: member_id.to_string(),
                value: None,
            },
            CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                group_id: group_id.to_string(),
                member_id: member_id.to_string(),
                value: None,
            },
            CoordinatorRecord::ConsumerGroupMemberMetadata {
                group_id: group_id.to_string(),
                member_id: member_id.to_string(),
                value: None,
            },
        ] {
            self.emit(out, record);
        }
    }

    /// Removes a member and bumps the group epoch so the others get its partitions.
    pub(super) fn fence_consumer_member(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        self.cancel_consumer_member_timers(group_id, member_id);
        if self.maybe_downgrade_to_classic(group_id, member_id, now_ms, out) {
            // The group went back to classic without the member (Kafka's online downgrade).
            return;
        }
        self.remove_member_records(group_id, member_id, out);
        self.refresh_regexes(group_id, now_ms, out);
        let group = self.consumer_group(group_id).expect("group");
        let hash = metadata_hash(&group.subscribed_topic_names(), &self.topics);
        let epoch = group.group_epoch + 1;
        let now_empty = group.members.is_empty();
        self.emit(
            out,
            CoordinatorRecord::ConsumerGroupMetadata {
                group_id: group_id.to_string(),
                value: Some((epoch, hash)),
            },
        );
        if now_empty {
            // The empty target assignment is already known, so it is settled at the new epoch
            // at once, as Kafka 4.4 does (ConsumerGroupDescribe of an emptied group shows
            // AssignmentEpoch == GroupEpoch there).
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
                    group_id: group_id.to_string(),
                    value: Some((epoch, now_ms)),
                },
            );
        }
        self.timers.cancel(&session_key(group_id, member_id));
        self.timers.cancel(&rebalance_key(group_id, member_id));
    }

    fn consumer_leave(
        &mut self,
        req: &ConsumerGroupHeartbeatInput,
        now_ms: i64,
        out: &mut Output,
    ) -> HbResult<ConsumerGroupHeartbeatOutput> {
        let group_id = &req.group_id;
        let Some(group) = self.consumer_group(group_id) else {
            return fail(GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."));
        };
        let response = ConsumerGroupHeartbeatOutput {
            error_code: NONE,
            error_message: None,
            member_id: Some(req.member_id.clone()),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        match &req.instance_id {
            None => {
                if !group.members.contains_key(&req.member_id) {
                    return fail(
                        UNKNOWN_MEMBER_ID,
                        format!(
                            "Member {} is not a member of group {group_id}.",
                            req.member_id
                        ),
                    );
                }
                self.fence_consumer_member(group_id, &req.member_id, now_ms, out);
            }
            Some(instance_id) => {
                let Some(member) = group.static_member(instance_id).cloned() else {
                    return fail(
                        UNKNOWN_MEMBER_ID,
                        format!("Instance id {instance_id} is unknown."),
                    );
                };
                if member.member_id != req.member_id {
                    return fail(
                        FENCED_INSTANCE_ID,
                        format!("Static member {} with instance id {instance_id} is not the current owner of the instance id; {} is.", req.member_id, member.member_id),
                    );
                }
                if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    // Temporary leave: the partitions stay reserved for the instance until its
                    // session expires.
                    let mut left = member.clone();
                    left.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                    for (t, ps) in std::mem::take(&mut left.pending_revocation) {
                        for p in ps {
                            left.assignment_epochs.remove(&(t, p));
                        }
                    }
                    self.emit(
                        out,
                        CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                            group_id: group_id.clone(),
                            member_id: member.member_id.clone(),
                            value: Some(left.assignment_value()),
                        },
                    );
                    self.timers
                        .cancel(&rebalance_key(group_id, &member.member_id));
                } else {
                    self.fence_consumer_member(group_id, &member.member_id, now_ms, out);
                }
            }
        }
        Ok(response)
    }

    pub(super) fn on_consumer_session_expired(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        if self
            .consumer_group(group_id)
            .is_some_and(|g| g.members.contains_key(member_id))
        {
            self.fence_consumer_member(group_id, member_id, now_ms, out);
        }
    }

    pub(super) fn on_consumer_rebalance_expired(
        &mut self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        now_ms: i64,
        out: &mut Output,
    ) {
        // Still holding partitions it was asked to revoke in the same epoch: fence it.
        if self.consumer_group(group_id).is_some_and(|g| {
            g.members.get(member_id).is_some_and(|m| {
                m.member_epoch == member_epoch && m.state == MemberState::UnrevokedPartitions
            })
        }) {
            self.fence_consumer_member(group_id, member_id, now_ms, out);
        }
    }

    pub(super) fn consumer_describe(&self, group_id: &str) -> DescribedConsumerGroup {
        // Kafka fills in only the id and the error; the rest keeps the schema's defaults.
        let not_found = |message: String| DescribedConsumerGroup {
            error_message: Some(message),
            ..DescribedConsumerGroup::error(GROUP_ID_NOT_FOUND, group_id)
        };
        let g = match self.groups.get(group_id) {
            None => return not_found(format!("Group {group_id} not found.")),
            Some(Group::Classic(_)) => {
                return not_found(format!("Group {group_id} is not a consumer group."))
            }
            Some(Group::Consumer(g)) => g,
        };
        let named = |a: &Assignment| -> Vec<(kactor_protocol::Uuid, String, Vec<i32>)> {
            a.iter()
                .filter_map(|(id, ps)| {
                    let name = self.topics.name_of(id)?;
                    Some((*id, name.to_string(), ps.iter().copied().collect()))
                })
                .collect()
        };
        let default = self
            .config
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_default();
        DescribedConsumerGroup {
            error_code: NONE,
            error_message: None,
            group_id: group_id.to_string(),
            group_state: g.state().name().to_string(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor_name: g.preferred_assignor(&default),
            members: g
                .members
                .values()
                .map(|m| DescribedConsumerMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.clone(),
                    // "" for a member without one, as Kafka describes it.
                    subscribed_topic_regex: Some(
                        m.subscribed_topic_regex.clone().unwrap_or_default(),
                    ),
                    // Kafka reports the partitions being revoked as still assigned.
                    assignment: named(&{
                        let mut held = m.assigned.clone();
                        for (t, ps) in &m.pending_revocation {
                            held.entry(*t).or_default().extend(ps.iter().copied());
                        }
                        held
                    }),
                    target_assignment: named(
                        &g.target.get(&m.member_id).cloned().unwrap_or_default(),
                    ),
                    uses_classic_protocol: m.uses_classic_protocol(),
                })
                .collect(),
        }
    }
}
