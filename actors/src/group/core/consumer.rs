//! The KIP-848 consumer protocol (Kafka's `GroupMetadataManager.consumerGroupHeartbeat` and
//! `CurrentAssignmentBuilder`): ConsumerGroupHeartbeat (join, leave, static membership, epoch
//! fencing, server-side target assignment, reconciliation with revocation before assignment),
//! ConsumerGroupDescribe, and the session and rebalance timeouts. Every change is expressed as
//! records that are replayed onto the group, as Kafka does.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

use super::api::{
    ConsumerGroupHeartbeatInput, ConsumerGroupHeartbeatOutput, DescribedConsumerGroup,
    DescribedConsumerMember, Output,
};
use super::assignor::{self, Assignment, GroupSpec, MemberSpec};
use super::consumer_group::{
    from_topic_partitions, to_topic_partitions, ConsumerGroup, ConsumerMember, MemberState,
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::records::{CoordinatorRecord, RegularExpressionValue};
use super::regex::TopicRegex;
use super::shard::{Group, GroupCoordinatorShard};
use super::timers::{TimerAction, TimerKey};

/// ConsumerGroupHeartbeat v1+ (KIP-1082): the client generates its member id.
const CLIENT_MEMBER_ID_VERSION: i16 = 1;

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): a client's AddPartitionsToTxn may not
/// name them. (A regex subscription may match them: Kafka 4.4 resolves regexes against every
/// topic name.)
pub(crate) const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// Least time between two resolutions of a group's regexes (Kafka's fixed 10 s).
const REGEX_MIN_REFRESH_MS: i64 = 10_000;

/// What a member's heartbeat did to its regex subscription (Kafka's
/// `UpdateRegularExpressionStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegexUpdate {
    None,
    /// Changed, to a regex not resolved yet (its resolution bumps the epoch later).
    Updated,
    /// Changed, to one already resolved, or dropped: the subscription is known now.
    UpdatedAndResolved,
}

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

fn regex_key(group_id: &str) -> TimerKey {
    TimerKey::ConsumerRegexResolution {
        group_id: group_id.to_string(),
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

/// What moving a member towards its target needs to know besides the member (Kafka's
/// `CurrentAssignmentBuilder` inputs).
pub(super) struct Reconcile<'a> {
    pub group: &'a ConsumerGroup,
    pub target_epoch: i32,
    pub target: &'a Assignment,
    /// Ids of the topics the member subscribes to (names and resolved regex), as the
    /// metadata knows them: target partitions of other topics are not given.
    pub subscribed: &'a BTreeSet<Uuid>,
    pub subscription_changed: bool,
    /// What the member says it owns (None: not told in this request).
    pub owned: Option<&'a Assignment>,
}

impl Reconcile<'_> {
    /// Whether the member still owns any of `revoking` (not told: assume it does).
    fn owns_any(&self, revoking: &Assignment) -> bool {
        match self.owned {
            None => true,
            Some(owned) => owned
                .iter()
                .any(|(t, ps)| revoking.get(t).is_some_and(|r| !r.is_disjoint(ps))),
        }
    }

    /// Kafka's `CurrentAssignmentBuilder.build`: one step of the member towards its target,
    /// revoking before assigning and never assigning a partition another member still holds.
    pub fn next(&self, member: &ConsumerMember) -> HbResult<ConsumerMember> {
        match member.state {
            MemberState::Stable if member.member_epoch != self.target_epoch => {
                Ok(self.compute_next(member, member.member_epoch))
            }
            MemberState::Stable if self.subscription_changed => {
                Ok(self.drop_unsubscribed(member, member.member_epoch))
            }
            MemberState::Stable => Ok(member.clone()),
            MemberState::UnrevokedPartitions if self.owns_any(&member.pending_revocation) => {
                if self.subscription_changed {
                    Ok(self.drop_unsubscribed(member, member.member_epoch))
                } else {
                    Ok(member.clone())
                }
            }
            // Revocation acknowledged: the member may move on.
            MemberState::UnrevokedPartitions | MemberState::UnreleasedPartitions => {
                Ok(self.compute_next(member, member.member_epoch))
            }
            MemberState::Unknown => {
                if self
                    .owned
                    .is_some_and(|o| o.values().all(|ps| ps.is_empty()))
                {
                    Ok(self.compute_next(member, self.target_epoch))
                } else {
                    fail(
                        FENCED_MEMBER_EPOCH,
                        "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
                    )
                }
            }
        }
    }

    /// Kafka's `updateCurrentAssignment`: the subscription changed while the member is at
    /// its target; partitions of topics it no longer subscribes to are revoked at once.
    fn drop_unsubscribed(&self, member: &ConsumerMember, member_epoch: i32) -> ConsumerMember {
        let (assigned, pending) =
            if self.subscribed.is_empty() && member.pending_revocation.is_empty() {
                (Assignment::new(), member.assigned.clone())
            } else {
                let mut assigned = member.assigned.clone();
                let mut pending = member.pending_revocation.clone();
                for (t, ps) in &member.assigned {
                    if !self.subscribed.contains(t) {
                        assigned.remove(t);
                        pending.entry(*t).or_default().extend(ps.iter().copied());
                    }
                }
                (assigned, pending)
            };
        if assigned == member.assigned {
            return member.clone();
        }
        let mut next = member.clone();
        next.previous_member_epoch = member.member_epoch;
        next.member_epoch = member_epoch;
        next.assigned = assigned;
        if !pending.is_empty() && self.owns_any(&pending) {
            next.state = MemberState::UnrevokedPartitions;
            next.pending_revocation = pending;
        }
        // Partitions moved to the revoking set keep the epoch they were assigned at; dropped
        // ones lose theirs.
        let held = |t: &Uuid, p: &i32| {
            [&next.assigned, &next.pending_revocation]
                .iter()
                .any(|a| a.get(t).is_some_and(|ps| ps.contains(p)))
        };
        let epochs = std::mem::take(&mut next.assignment_epochs);
        next.assignment_epochs = epochs
            .into_iter()
            .filter(|((t, p), _)| held(t, p))
            .collect();
        next
    }

    /// Kafka's `computeNextAssignment`.
    fn compute_next(&self, member: &ConsumerMember, member_epoch: i32) -> ConsumerMember {
        let mut assigned = Assignment::new();
        let mut revoke = Assignment::new();
        let mut to_assign = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<Uuid> = self
            .target
            .keys()
            .chain(member.assigned.keys())
            .copied()
            .collect();
        for t in topics {
            let target = if self.subscribed.contains(&t) {
                self.target.get(&t).cloned().unwrap_or_default()
            } else {
                BTreeSet::new()
            };
            let current = member.assigned.get(&t).cloned().unwrap_or_default();
            let keep: BTreeSet<i32> = current.intersection(&target).copied().collect();
            let rev: BTreeSet<i32> = current.difference(&keep).copied().collect();
            let mut add: BTreeSet<i32> = target.difference(&keep).copied().collect();
            let revoking = member.pending_revocation.get(&t);
            let before = add.len();
            add.retain(|p| {
                self.group.current_partition_epoch(&t, *p) == -1
                    || revoking.is_some_and(|s| s.contains(p))
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
        let mut next = member.clone();
        next.previous_member_epoch = member.member_epoch;
        // Held partitions keep the epoch they were assigned at; new ones get the target's.
        let epochs_of = |held: &[&Assignment]| {
            let mut epochs = BTreeMap::new();
            for a in held {
                for (t, ps) in *a {
                    for p in ps {
                        let at = member
                            .assignment_epochs
                            .get(&(*t, *p))
                            .copied()
                            .unwrap_or(self.target_epoch);
                        epochs.insert((*t, *p), at);
                    }
                }
            }
            epochs
        };
        if !revoke.is_empty() && self.owns_any(&revoke) {
            // Revoke first; the member stays in its epoch until it confirms.
            next.state = MemberState::UnrevokedPartitions;
            next.member_epoch = member_epoch;
            next.assignment_epochs = epochs_of(&[&assigned, &revoke]);
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
            next.member_epoch = self.target_epoch;
            next.assignment_epochs = epochs_of(&[&assigned]);
            next.assigned = assigned;
            next.pending_revocation = Assignment::new();
        }
        next
    }
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
            Some(Group::Classic(_)) | Some(Group::Share(_)) => {}
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
            Some(Group::Classic(_)) | Some(Group::Share(_)) => {
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
                // Joining again with epoch 0 under a known member id: no epoch check, and the
                // member is taken as it is (Kafka answers its current epoch and assignment).
                Some(m) if create => m.clone(),
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
            true,
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

    fn default_consumer_assignor(&self) -> String {
        self.config
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| assignor::UNIFORM.to_string())
    }

    /// Steps 1–4 of a member's heartbeat or (mixed group) JoinGroup, shared by both protocols
    /// (Kafka's `consumerGroupHeartbeat` / `classicGroupJoinToConsumerGroup`): persist the
    /// member if it changed and track its regex, bump the group epoch when its subscription,
    /// the preferred assignor (heartbeat only) or the subscribed topics' metadata changed,
    /// compute the target assignment for a new epoch unless one was computed less than the
    /// assignment interval ago, and move the member one step towards its target given the
    /// partitions it says it owns. Returns the member as it now is.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_member_update(
        &mut self,
        group_id: &str,
        old_member: &ConsumerMember,
        updated: ConsumerMember,
        is_new: bool,
        owned: Option<&Assignment>,
        heartbeat: bool,
        now_ms: i64,
        out: &mut Output,
    ) -> HbResult<ConsumerMember> {
        let group_id = group_id.to_string();
        let member_id = updated.member_id.clone();
        let owned = owned.cloned();
        let default_assignor = self.default_consumer_assignor();
        // Judged on the group as it was before this request, as Kafka does.
        let assignor_before = self
            .consumer_group(&group_id)
            .expect("group")
            .preferred_assignor(&default_assignor);
        let mut regex_records = Vec::new();
        let regex = self.update_member_regex(
            &group_id,
            old_member.subscribed_topic_regex.as_deref(),
            updated.subscribed_topic_regex.as_deref(),
            now_ms,
            &mut regex_records,
        );

        // 1. The member's subscription.
        let mut names_changed = false;
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
            names_changed = old_names != new_names;
        }
        for r in regex_records {
            self.emit(out, r);
        }
        let subscription_changed = names_changed || regex != RegexUpdate::None;
        let group = self.consumer_group(&group_id).expect("group");
        let bump = if heartbeat {
            names_changed
                || regex == RegexUpdate::UpdatedAndResolved
                || group.preferred_assignor(&default_assignor) != assignor_before
        } else {
            subscription_changed
        };

        // 2. Group epoch: bumps on subscription or subscribed topics' metadata changes.
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

        // 3. Target assignment for a new group epoch, at most once per assignment interval
        // (a later heartbeat computes it otherwise).
        let group = self.consumer_group(&group_id).expect("group");
        let interval = self.consumer_assignment_interval_ms(&group_id) as i64;
        let may_assign = group.assignment_timestamp_ms == 0
            || interval == 0
            || now_ms >= group.assignment_timestamp_ms + interval;
        if group.assignment_epoch < group.group_epoch && may_assign {
            self.update_target_assignment(&group_id, now_ms, out);
        }

        // 4. Reconcile this member towards its target.
        let group = self.consumer_group(&group_id).expect("group");
        let member = group.members.get(&member_id).expect("member").clone();
        let target_epoch = group.assignment_epoch;
        if !subscription_changed && member.is_reconciled_to(target_epoch) {
            return Ok(member);
        }
        let target = group.target.get(&member_id).cloned().unwrap_or_default();
        let subscribed: BTreeSet<Uuid> = group
            .member_topic_names(&member)
            .iter()
            .filter_map(|name| self.topics.id_of(name))
            .collect();
        let reconciled = Reconcile {
            group,
            target_epoch,
            target: &target,
            subscribed: &subscribed,
            subscription_changed,
            owned: owned.as_ref(),
        }
        .next(&member)?;
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

    /// Kafka's `maybeUpdateRegularExpressions`, on the group as it is before the member's
    /// update: a regex no member uses any more is deleted (its tombstone goes to `records`,
    /// written after the member's), and the group's regexes are resolved again, off this
    /// request, when one is new or the set changed, when topics were created since the last
    /// resolution or when it is older than `group.consumer.regex.refresh.interval.ms`, at
    /// most once per `REGEX_MIN_REFRESH_MS`.
    fn update_member_regex(
        &mut self,
        group_id: &str,
        old: Option<&str>,
        new: Option<&str>,
        now_ms: i64,
        records: &mut Vec<CoordinatorRecord>,
    ) -> RegexUpdate {
        let group = self.consumer_group(group_id).expect("group");
        let mut subscribed: BTreeMap<String, usize> = BTreeMap::new();
        for m in group.members.values() {
            if let Some(r) = &m.subscribed_topic_regex {
                *subscribed.entry(r.clone()).or_default() += 1;
            }
        }
        let users = |r: &str| subscribed.get(r).copied().unwrap_or(0);
        let mut status = RegexUpdate::None;
        let mut require_refresh = false;
        if old != new {
            status = RegexUpdate::Updated;
            if let Some(old) = old.filter(|o| users(o) == 1) {
                records.push(CoordinatorRecord::ConsumerGroupRegularExpression {
                    group_id: group_id.to_string(),
                    regex: old.to_string(),
                    value: None,
                });
            }
            match new {
                Some(new) if users(new) == 0 => require_refresh = true,
                Some(new) if group.regexes.contains_key(new) => {
                    status = RegexUpdate::UpdatedAndResolved
                }
                Some(_) => {}
                None => status = RegexUpdate::UpdatedAndResolved,
            }
        }
        let key = regex_key(group_id);
        if (!require_refresh && subscribed.is_empty()) || self.timers.is_scheduled(&key) {
            return status;
        }
        // Regexes are resolved all together, so any one's time and image version will do.
        let last_refresh = group.regexes.values().map(|v| v.timestamp_ms).max();
        if last_refresh.is_some_and(|t| now_ms <= t + REGEX_MIN_REFRESH_MS) {
            return status;
        }
        let last_version = group.regexes.values().map(|v| v.version).max().unwrap_or(0);
        let resolved = group.regexes.len();
        if let Some(old) = old {
            if let Some(n) = subscribed.get_mut(old) {
                *n -= 1;
                if *n == 0 {
                    subscribed.remove(old);
                }
            }
        }
        if let Some(new) = new {
            *subscribed.entry(new.to_string()).or_default() += 1;
        }
        require_refresh |= subscribed.len() != resolved;
        require_refresh |= last_version < self.new_topics_version;
        require_refresh |= last_refresh
            .is_none_or(|t| now_ms > t + self.config.consumer_regex_refresh_interval_ms);
        if require_refresh && !subscribed.is_empty() {
            self.timers.schedule(
                key,
                now_ms,
                TimerAction::ConsumerResolveRegexes {
                    regexes: subscribed.into_keys().collect(),
                },
            );
        }
        status
    }

    /// The group's regexes resolved against the topics (Kafka's
    /// `handleRegularExpressionsResult`): each regex still in use is written with its topics,
    /// and the group epoch bumps when a resolution or the subscribed topics' metadata changed.
    pub(super) fn on_consumer_regexes_resolved(
        &mut self,
        group_id: &str,
        regexes: &[String],
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.consumer_group(group_id) else {
            return;
        };
        let mut bump = false;
        let mut records = Vec::new();
        for regex in regexes {
            if !group
                .members
                .values()
                .any(|m| m.subscribed_topic_regex.as_deref() == Some(regex.as_str()))
            {
                continue;
            }
            // Validated when the member subscribed; one that no longer compiles matches
            // nothing, as Kafka ignores it.
            let topics: Vec<String> = match TopicRegex::new(regex) {
                Ok(compiled) => self
                    .topics
                    .names()
                    .filter(|t| compiled.full_match(t))
                    .map(str::to_string)
                    .collect(),
                Err(_) => Vec::new(),
            };
            if group.regexes.get(regex).map(|v| &v.topics) != Some(&topics) {
                bump = true;
            }
            records.push(CoordinatorRecord::ConsumerGroupRegularExpression {
                group_id: group_id.to_string(),
                regex: regex.clone(),
                value: Some(RegularExpressionValue {
                    topics,
                    version: self.topics.version,
                    timestamp_ms: now_ms,
                }),
            });
        }
        for r in records {
            self.emit(out, r);
        }
        let group = self.consumer_group(group_id).expect("group");
        let hash = metadata_hash(&group.subscribed_topic_names(), &self.topics);
        if bump || hash != group.metadata_hash {
            let epoch = group.group_epoch + 1;
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupMetadata {
                    group_id: group_id.to_string(),
                    value: Some((epoch, hash)),
                },
            );
        }
    }

    /// Runs the group's assignor and writes the members whose target changed, then the new
    /// assignment epoch.
    fn update_target_assignment(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let default = self.default_consumer_assignor();
        let group = self.consumer_group(group_id).expect("group");
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
        let regex = self
            .consumer_group(group_id)
            .and_then(|g| g.members.get(member_id))
            .and_then(|m| m.subscribed_topic_regex.clone());
        self.remove_member_records(group_id, member_id, out);
        // Its regex goes with it when nobody else uses it (resolved or not).
        if let Some(regex) = regex {
            let group = self.consumer_group(group_id).expect("group");
            if !group
                .members
                .values()
                .any(|m| m.subscribed_topic_regex.as_ref() == Some(&regex))
            {
                self.emit(
                    out,
                    CoordinatorRecord::ConsumerGroupRegularExpression {
                        group_id: group_id.to_string(),
                        regex,
                        value: None,
                    },
                );
            }
        }
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
            // AssignmentEpoch == GroupEpoch there), with no time: the next member to join is
            // assigned without waiting for the assignment interval.
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
                    group_id: group_id.to_string(),
                    value: Some((epoch, 0)),
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
                    // Its partitions count as assigned at epoch 0 from now on, so that the
                    // instance coming back (at epoch 0) may commit for them.
                    let mut left = member.clone();
                    left.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                    left.pending_revocation.clear();
                    left.assignment_epochs = left
                        .assigned
                        .iter()
                        .flat_map(|(t, ps)| ps.iter().map(move |p| ((*t, *p), 0)))
                        .collect();
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
            Some(Group::Classic(_)) | Some(Group::Share(_)) => {
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
