//! KIP-932 share groups in the group coordinator (Kafka's `ShareGroup` with the share half of
//! `GroupMetadataManager`): ShareGroupHeartbeat (join, heartbeat, leave, session expiry) and
//! ShareGroupDescribe. A share group's members read the same partitions cooperatively, so there
//! is no revocation step: a member takes its new assignment at the next heartbeat.
//!
//! Written to `__consumer_offsets`: the group epoch (ShareGroupMetadata) and which
//! share-partitions have state at the share coordinator (ShareGroupStatePartitionMetadata), so
//! an empty group, its offsets and its epoch outlive a restart. Membership and assignments are
//! kept in memory only: a coordinator that restarts or moves loses them and the members join
//! again (their next heartbeat gets UNKNOWN_MEMBER_ID). What was delivered and acknowledged is
//! the share coordinator's (`share/coordinator`).
//!
//! As in Kafka, a subscribed partition is assigned only once its state exists: the heartbeat
//! that first sees it marks it initializing and hands the API layer a [`ShareStateInit`] to send
//! to the share coordinator; [`GroupRequest::ShareStateInitialized`] then makes it assignable.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

use super::api::{
    AlterShareOffsetsOutput, DeleteShareOffsetsOutput, Output, ShareGroupHeartbeatInput,
    ShareGroupHeartbeatOutput, ShareStateInit, TopicsView,
};
use super::assignor::Assignment;
use super::consumer::{fail, metadata_hash, HbResult};
use super::consumer_group::to_topic_partitions;
use super::records::{CoordinatorRecord, ShareStatePartitions};
use super::shard::{Group, GroupCoordinatorShard};
use super::timers::{TimerAction, TimerKey};

/// The only share assignor Kafka 4.4 has (`group.share.assignors`).
pub const SIMPLE_ASSIGNOR: &str = "simple";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub member_epoch: i32,
    /// The epoch before the last change: a heartbeat that crossed the change may carry it.
    pub previous_member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    pub assignment: Assignment,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// The subscribed topics' shape the last assignment was computed for.
    pub metadata_hash: i64,
    pub members: BTreeMap<String, ShareMember>,
    /// member id -> target assignment
    pub target: BTreeMap<String, Assignment>,
    /// The share-partitions with state (None: no record yet).
    pub state: Option<ShareStatePartitions>,
    /// When each initializing topic was last asked for (not written: after a load every
    /// initializing topic is asked for again at the next heartbeat).
    pub initializing_since_ms: BTreeMap<Uuid, i64>,
}

impl ShareGroup {
    pub fn new(group_id: &str) -> Self {
        ShareGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            metadata_hash: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            state: None,
            initializing_since_ms: BTreeMap::new(),
        }
    }

    fn metadata_record(&self) -> CoordinatorRecord {
        CoordinatorRecord::ShareGroupMetadata {
            group_id: self.group_id.clone(),
            value: Some((self.group_epoch, self.metadata_hash)),
        }
    }

    /// Sets the state record's value and returns the record.
    fn set_state(&mut self, state: ShareStatePartitions) -> CoordinatorRecord {
        self.state = Some(state.clone());
        CoordinatorRecord::ShareGroupStatePartitionMetadata {
            group_id: self.group_id.clone(),
            value: Some(state),
        }
    }

    /// topic id -> partitions that may be assigned (their state exists).
    fn assignable(&self, topics: &TopicsView) -> BTreeMap<Uuid, BTreeSet<i32>> {
        let Some(state) = &self.state else {
            return BTreeMap::new();
        };
        state
            .initialized
            .iter()
            .filter_map(|(id, (_, ps))| {
                let n = topics.num_partitions(topics.name_of(id)?)?;
                Some((*id, ps.iter().copied().filter(|p| *p < n).collect()))
            })
            .collect()
    }

    /// Kafka's `initializedAssignmentPending`: a subscribed topic has assignable partitions the
    /// target assignment does not place (they were initialized after it was computed).
    fn initialized_assignment_pending(&self, topics: &TopicsView) -> bool {
        let subscribed: BTreeSet<Uuid> = self
            .subscribed_topics()
            .iter()
            .filter_map(|n| topics.id_of(n))
            .collect();
        self.assignable(topics)
            .into_iter()
            .filter(|(id, _)| subscribed.contains(id))
            .any(|(id, ps)| {
                let placed: BTreeSet<i32> = self
                    .target
                    .values()
                    .filter_map(|a| a.get(&id))
                    .flatten()
                    .copied()
                    .collect();
                placed != ps
            })
    }

    /// `ShareGroupState`: Empty without members, else Stable (nothing to reconcile).
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topic_names.iter().cloned())
            .collect()
    }

    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        self.members
            .values()
            .any(|m| m.subscribed_topic_names.contains(topic))
    }
}

/// The simple assignor (Kafka's `SimpleAssignor`), per topic over the members subscribed to it:
/// with M members and P partitions each partition goes to S = ceil(M / P) members, and member i
/// takes ceil(p(i+1)) - ceil(p i) of the S * P places, p = S * P / M. So with M <= P members split
/// the partitions within one of each other, and with M > P every partition is shared by S
/// members. Kafka orders members and partitions by Java hash iteration and keeps previous
/// placements where quotas allow; kactor orders them by id and recomputes, which gives the same
/// shape of assignment but not always the same placement.
pub fn simple_assign(
    members: &BTreeMap<String, ShareMember>,
    topics: &TopicsView,
    assignable: &BTreeMap<Uuid, BTreeSet<i32>>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let all: BTreeSet<&String> = members
        .values()
        .flat_map(|m| m.subscribed_topic_names.iter())
        .collect();
    for name in all {
        let Some(parts) = topics.id_of(name).and_then(|id| assignable.get(&id)) else {
            continue;
        };
        let id = topics.id_of(name).expect("id");
        let subscribers: Vec<&String> = members
            .values()
            .filter(|m| m.subscribed_topic_names.contains(name))
            .map(|m| &m.member_id)
            .collect();
        let m = subscribers.len() as i64;
        let p = parts.len() as i64;
        if m == 0 || p <= 0 {
            continue;
        }
        let sharing = (m + p - 1) / p;
        let places = sharing * p;
        // ceil(places * i / m), exactly, in integers.
        let bound = |i: i64| (places * i + m - 1) / m;
        let mut quota: Vec<i64> = (0..m).map(|i| bound(i + 1) - bound(i)).collect();
        let mut next = 0usize;
        for &partition in parts {
            let mut owners = 0;
            let mut tried = 0;
            while owners < sharing && tried < subscribers.len() {
                let i = next % subscribers.len();
                next += 1;
                tried += 1;
                let held = out[subscribers[i]]
                    .get(&id)
                    .is_some_and(|ps| ps.contains(&partition));
                if quota[i] == 0 || held {
                    continue;
                }
                quota[i] -= 1;
                owners += 1;
                tried = 0;
                out.get_mut(subscribers[i])
                    .expect("member")
                    .entry(id)
                    .or_default()
                    .insert(partition);
            }
        }
    }
    out
}

pub(super) fn share_session_key(group_id: &str, member_id: &str) -> TimerKey {
    TimerKey::ShareSession {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    }
}

impl GroupCoordinatorShard {
    pub(super) fn share_group(&self, group_id: &str) -> Option<&ShareGroup> {
        match self.groups.get(group_id) {
            Some(Group::Share(g)) => Some(g),
            _ => None,
        }
    }

    fn share_group_mut(&mut self, group_id: &str) -> &mut ShareGroup {
        match self.groups.get_mut(group_id) {
            Some(Group::Share(g)) => g,
            _ => unreachable!("share group {group_id} checked before"),
        }
    }

    /// ShareGroupHeartbeat: the answer, and the share-partitions whose state to initialize.
    pub(super) fn share_heartbeat(
        &mut self,
        req: &ShareGroupHeartbeatInput,
        now_ms: i64,
        out: &mut Output,
    ) -> HbResult<(ShareGroupHeartbeatOutput, Option<ShareStateInit>)> {
        let group_id = req.group_id.as_str();
        if group_id.is_empty() {
            return fail(INVALID_REQUEST, "GroupId can't be empty.");
        }
        if req.member_id.trim().is_empty() {
            return fail(INVALID_REQUEST, "MemberId can't be empty.");
        }
        if req.rack_id.as_ref().is_some_and(|r| r.trim().is_empty()) {
            return fail(INVALID_REQUEST, "RackId can't be empty.");
        }
        if req.member_epoch < -1 {
            return fail(INVALID_REQUEST, "MemberEpoch is invalid.");
        }
        if req.member_epoch == 0
            && req
                .subscribed_topic_names
                .as_ref()
                .is_none_or(|t| t.is_empty())
        {
            return fail(
                INVALID_REQUEST,
                "SubscribedTopicNames must be set in first request.",
            );
        }
        let interval = self.config.share_heartbeat_interval_ms;
        match self.groups.get(group_id) {
            Some(Group::Share(_)) => {}
            None if req.member_epoch == 0 => {
                self.groups.insert(
                    group_id.to_string(),
                    Group::Share(ShareGroup::new(group_id)),
                );
            }
            None if req.member_epoch == -1 => {
                return fail(GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."))
            }
            None => {
                return fail(
                    GROUP_ID_NOT_FOUND,
                    format!("Share group {group_id} not found."),
                )
            }
            Some(_) => {
                return fail(
                    GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a share group."),
                )
            }
        }
        let member_id = req.member_id.clone();
        if req.member_epoch == -1 {
            let known = self
                .share_group(group_id)
                .is_some_and(|g| g.members.contains_key(&member_id));
            if !known {
                return fail(
                    UNKNOWN_MEMBER_ID,
                    format!("Member {member_id} is not a member of group {group_id}."),
                );
            }
            self.remove_share_member(group_id, &member_id, out);
            let left = ShareGroupHeartbeatOutput {
                member_id: Some(member_id),
                member_epoch: -1,
                heartbeat_interval_ms: 0,
                ..Default::default()
            };
            return Ok((left, None));
        }
        let max_size = self.config.share_max_size;
        let group = self.share_group(group_id).expect("share group");
        match group.members.get(&member_id) {
            None if req.member_epoch != 0 => {
                return fail(
                    UNKNOWN_MEMBER_ID,
                    format!("Member {member_id} is not a member of group {group_id}."),
                )
            }
            None if group.members.len() >= max_size => {
                return fail(
                    GROUP_MAX_SIZE_REACHED,
                    format!("The share group has reached its maximum capacity of {max_size} members."),
                )
            }
            Some(m) if req.member_epoch != 0 && req.member_epoch > m.member_epoch => {
                return fail(
                    FENCED_MEMBER_EPOCH,
                    format!(
                        "The share group member has a greater member epoch ({}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                        req.member_epoch, m.member_epoch
                    ),
                )
            }
            Some(m)
                if req.member_epoch != 0
                    && req.member_epoch < m.member_epoch
                    && req.member_epoch != m.previous_member_epoch =>
            {
                return fail(
                    FENCED_MEMBER_EPOCH,
                    format!(
                        "The share group member has a smaller member epoch ({}) than the one known by the group coordinator ({}), and it does not match the previous member epoch ({}). The member must abandon all its partitions and rejoin.",
                        req.member_epoch, m.member_epoch, m.previous_member_epoch
                    ),
                )
            }
            _ => {}
        }

        let topics = self.topics.clone();
        let retry_ms = self.config.share_initialize_retry_interval_ms;
        let group = self.share_group_mut(group_id);
        let mut bump = false;
        let member = group.members.entry(member_id.clone()).or_insert_with(|| {
            bump = true;
            ShareMember {
                member_id: member_id.clone(),
                member_epoch: 0,
                previous_member_epoch: -1,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed_topic_names: BTreeSet::new(),
                assignment: Assignment::new(),
            }
        });
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        if req.rack_id.is_some() {
            member.rack_id = req.rack_id.clone();
        }
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                bump = true;
            }
        }
        let hash = metadata_hash(&group.subscribed_topics(), &topics);
        if hash != group.metadata_hash {
            group.metadata_hash = hash;
            bump = true;
        }
        if bump {
            group.group_epoch += 1;
        }
        let initialize = share_state_to_initialize(group, &topics, now_ms, retry_ms, out);
        if !bump
            && group.assignment_epoch >= group.group_epoch
            && group.initialized_assignment_pending(&topics)
        {
            group.group_epoch += 1;
            bump = true;
        }
        if bump {
            out.records.push(group.metadata_record());
        }
        if group.assignment_epoch < group.group_epoch {
            group.target = simple_assign(&group.members, &topics, &group.assignable(&topics));
            group.assignment_epoch = group.group_epoch;
        }
        let assignment_epoch = group.assignment_epoch;
        let target = group.target.get(&member_id).cloned().unwrap_or_default();
        let member = group.members.get_mut(&member_id).expect("member");
        let changed = member.assignment != target;
        let joining = req.member_epoch == 0;
        if member.member_epoch != assignment_epoch {
            member.previous_member_epoch = member.member_epoch;
        }
        member.member_epoch = assignment_epoch;
        member.assignment = target;
        let resubscribed = req.subscribed_topic_names.is_some();
        let assignment =
            (changed || joining || resubscribed).then(|| to_topic_partitions(&member.assignment));
        let timeout = self.config.share_session_timeout_ms as i64;
        self.timers.schedule(
            share_session_key(group_id, &member_id),
            now_ms + timeout,
            TimerAction::ShareSessionExpired,
        );
        let answer = ShareGroupHeartbeatOutput {
            error_code: 0,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: assignment_epoch,
            heartbeat_interval_ms: interval,
            assignment,
        };
        Ok((answer, initialize))
    }

    fn remove_share_member(&mut self, group_id: &str, member_id: &str, out: &mut Output) {
        self.timers.cancel(&share_session_key(group_id, member_id));
        let group = self.share_group_mut(group_id);
        if group.members.remove(member_id).is_some() {
            group.target.remove(member_id);
            group.group_epoch += 1;
            out.records.push(group.metadata_record());
        }
    }

    /// A member's session timed out: it leaves, and the others share its partitions.
    pub(super) fn on_share_session_expired(
        &mut self,
        group_id: &str,
        member_id: &str,
        out: &mut Output,
    ) {
        if self.share_group(group_id).is_some() {
            self.remove_share_member(group_id, member_id, out);
        }
    }

    /// The share coordinator answered an initialization. Succeeded: the partitions have state
    /// and become assignable (the next heartbeat assigns them), whether or not they were still
    /// initializing, as Kafka's `initializeShareGroupState`. Failed: they leave initializing,
    /// to be asked for again, unless a newer request for them (an alter) is under way.
    pub(super) fn on_share_state_initialized(
        &mut self,
        group_id: &str,
        partitions: &[(Uuid, i32)],
        succeeded: bool,
        asked_at_ms: i64,
        out: &mut Output,
    ) {
        let view = self.topics.clone();
        let Some(Group::Share(g)) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(mut next) = g.state.clone() else {
            return;
        };
        for (id, p) in partitions {
            let newer = g
                .initializing_since_ms
                .get(id)
                .is_some_and(|at| *at > asked_at_ms);
            if !succeeded && newer {
                continue;
            }
            let mut name = view.name_of(id).map(str::to_string);
            if let Some((n, ps)) = next.initializing.get_mut(id) {
                name.get_or_insert_with(|| n.clone());
                ps.remove(p);
                if ps.is_empty() {
                    next.initializing.remove(id);
                    g.initializing_since_ms.remove(id);
                }
            }
            if succeeded {
                let Some(name) = name else { continue };
                next.initialized
                    .entry(*id)
                    .or_insert_with(|| (name, BTreeSet::new()))
                    .1
                    .insert(*p);
            }
        }
        if g.state.as_ref() != Some(&next) {
            out.records.push(g.set_state(next));
        }
    }

    /// AlterShareGroupOffsets (Kafka's `GroupMetadataManager.alterShareGroupOffsets`): an
    /// unknown group is created; the group must be empty; each partition's state is made again
    /// at the given start offset, by the API layer, through `initialize`.
    pub(super) fn alter_share_offsets(
        &mut self,
        group_id: &str,
        topics: &[(String, Vec<(i32, i64)>)],
        now_ms: i64,
        out: &mut Output,
    ) -> AlterShareOffsetsOutput {
        let refuse = |e: CodedError| AlterShareOffsetsOutput {
            error: Some(e),
            ..Default::default()
        };
        if group_id.is_empty() {
            return refuse(with_default_message(INVALID_GROUP_ID));
        }
        match self.groups.get(group_id) {
            None => {
                self.groups.insert(
                    group_id.to_string(),
                    Group::Share(ShareGroup::new(group_id)),
                );
            }
            Some(Group::Share(g)) if !g.members.is_empty() => {
                return refuse(with_default_message(NON_EMPTY_GROUP))
            }
            Some(Group::Share(_)) => {}
            Some(_) => {
                return refuse((
                    GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a share group."),
                ))
            }
        }
        let view = self.topics.clone();
        let g = self.share_group_mut(group_id);
        let mut next = g.state.clone().unwrap_or_default();
        let mut output = AlterShareOffsetsOutput::default();
        let mut partitions = Vec::new();
        let unknown = || Some(with_default_message(UNKNOWN_TOPIC_OR_PARTITION).1);
        for (name, ps) in topics {
            let found = view.id_of(name).zip(view.num_partitions(name));
            let mut results = Vec::with_capacity(ps.len());
            for &(p, offset) in ps {
                match found {
                    Some((id, n)) if (0..n).contains(&p) => {
                        results.push((p, NONE, None));
                        partitions.push((id, p, offset));
                        // Asked for now: a heartbeat does not ask again within the retry
                        // interval (its -1 would undo this offset).
                        g.initializing_since_ms.insert(id, now_ms);
                        next.deleting.remove(&id);
                        next.initializing
                            .entry(id)
                            .or_insert_with(|| (name.clone(), BTreeSet::new()))
                            .1
                            .insert(p);
                    }
                    _ => results.push((p, UNKNOWN_TOPIC_OR_PARTITION, unknown())),
                }
            }
            let id = found.map(|(id, _)| id).unwrap_or_default();
            output.topics.push((name.clone(), id, results));
        }
        if !partitions.is_empty() {
            out.records.push(g.set_state(next));
            output.initialize = Some(ShareStateInit {
                group_id: group_id.to_string(),
                asked_at_ms: now_ms,
                state_epoch: g.group_epoch,
                partitions,
            });
        }
        output
    }

    /// DeleteShareGroupOffsets, first step (Kafka's `initiateDeleteShareGroupOffsets`): the
    /// topics with state move to deleting and are returned for the API layer to delete.
    pub(super) fn delete_share_offsets(
        &mut self,
        group_id: &str,
        topics: &[String],
        out: &mut Output,
    ) -> DeleteShareOffsetsOutput {
        let refuse = |e: CodedError| DeleteShareOffsetsOutput {
            error: Some(e),
            ..Default::default()
        };
        if group_id.is_empty() {
            return refuse(with_default_message(INVALID_GROUP_ID));
        }
        let view = self.topics.clone();
        let g = match self.groups.get_mut(group_id) {
            Some(Group::Share(g)) if !g.members.is_empty() => {
                return refuse(with_default_message(NON_EMPTY_GROUP))
            }
            Some(Group::Share(g)) => g,
            Some(_) => {
                return refuse((
                    GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a share group."),
                ))
            }
            None => return refuse((GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."))),
        };
        let Some(mut next) = g.state.clone() else {
            // No state at all: nothing to say about any topic (as Kafka).
            return DeleteShareOffsetsOutput::default();
        };
        let mut output = DeleteShareOffsetsOutput::default();
        for name in topics {
            let Some((id, n)) = view.id_of(name).zip(view.num_partitions(name)) else {
                let (code, message) = with_default_message(UNKNOWN_TOPIC_OR_PARTITION);
                output
                    .refused
                    .push((name.clone(), Uuid::default(), code, message));
                continue;
            };
            if let Some((_, ps)) = next.initialized.remove(&id) {
                output
                    .delete
                    .push((name.clone(), id, ps.into_iter().collect()));
                next.deleting.insert(id, name.clone());
            } else if next.deleting.contains_key(&id) {
                // A deletion that did not finish: all of the topic, again.
                output.delete.push((name.clone(), id, (0..n).collect()));
            } else {
                // Without a topic id, as Kafka answers it.
                output.refused.push((
                    name.clone(),
                    Uuid::default(),
                    UNKNOWN_TOPIC_OR_PARTITION,
                    "There is no offset information to delete.".to_string(),
                ));
            }
        }
        if g.state.as_ref() != Some(&next) {
            out.records.push(g.set_state(next));
        }
        output
    }

    /// The share coordinator deleted these topics' state: they leave deleting.
    pub(super) fn on_share_state_deleted(
        &mut self,
        group_id: &str,
        topics: &[Uuid],
        out: &mut Output,
    ) {
        let Some(Group::Share(g)) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(mut next) = g.state.clone() else {
            return;
        };
        for id in topics {
            next.deleting.remove(id);
        }
        if g.state.as_ref() != Some(&next) {
            out.records.push(g.set_state(next));
        }
    }

    /// The share-partitions with initialized state, by topic (Kafka's
    /// `initializedShareGroupPartitions`): empty for unknown and other groups.
    pub(super) fn share_state_partitions(&self, group_id: &str) -> Vec<(Uuid, String, Vec<i32>)> {
        let Some(state) = self.share_group(group_id).and_then(|g| g.state.as_ref()) else {
            return Vec::new();
        };
        state
            .initialized
            .iter()
            .map(|(id, (name, ps))| (*id, name.clone(), ps.iter().copied().collect()))
            .collect()
    }

    /// DeleteGroups of a share group, first step (Kafka's `shareGroupBuildPartitionDeleteRequest`):
    /// every share-partition with state, to delete before the group's records are.
    pub(super) fn delete_share_group_state(
        &mut self,
        group_id: &str,
        out: &mut Output,
    ) -> Result<Vec<(Uuid, Vec<i32>)>, i16> {
        let view = self.topics.clone();
        let Some(Group::Share(g)) = self.groups.get_mut(group_id) else {
            return Ok(Vec::new());
        };
        if !g.members.is_empty() {
            return Err(NON_EMPTY_GROUP);
        }
        let Some(state) = g.state.clone() else {
            return Ok(Vec::new());
        };
        let mut all: BTreeMap<Uuid, (String, BTreeSet<i32>)> = BTreeMap::new();
        for (id, (name, ps)) in state.initialized.iter().chain(state.initializing.iter()) {
            let e = all
                .entry(*id)
                .or_insert_with(|| (name.clone(), BTreeSet::new()));
            e.1.extend(ps.iter().copied());
        }
        for (id, name) in &state.deleting {
            if let Some(n) = view.name_of(id).and_then(|n| view.num_partitions(n)) {
                let e = all
                    .entry(*id)
                    .or_insert_with(|| (name.clone(), BTreeSet::new()));
                e.1.extend(0..n);
            }
        }
        if all.is_empty() {
            return Ok(Vec::new());
        }
        let next = ShareStatePartitions {
            deleting: all
                .iter()
                .map(|(id, (name, _))| (*id, name.clone()))
                .collect(),
            ..Default::default()
        };
        if g.state.as_ref() != Some(&next) {
            out.records.push(g.set_state(next));
        }
        Ok(all
            .into_iter()
            .map(|(id, (_, ps))| (id, ps.into_iter().collect()))
            .collect())
    }

    /// Replays a share group record (creating the group, Empty, as Kafka's replay does).
    pub(super) fn replay_share_record(&mut self, record: &CoordinatorRecord) {
        let group_id = record.group_id();
        let tombstone = record.is_tombstone();
        let group = match self.groups.get_mut(group_id) {
            Some(Group::Share(g)) => g,
            Some(_) => return,
            None if tombstone => return,
            None => {
                self.groups.insert(
                    group_id.to_string(),
                    Group::Share(ShareGroup::new(group_id)),
                );
                self.share_group_mut(group_id)
            }
        };
        match record {
            CoordinatorRecord::ShareGroupMetadata {
                value: Some((epoch, hash)),
                ..
            } => {
                group.group_epoch = *epoch;
                group.metadata_hash = *hash;
            }
            CoordinatorRecord::ShareGroupMetadata { value: None, .. } => {
                self.groups.remove(group_id);
            }
            CoordinatorRecord::ShareGroupStatePartitionMetadata { value, .. } => {
                group.state = value.clone();
            }
            _ => {}
        }
    }

    /// ShareGroupDescribe of one group.
    pub(super) fn share_describe(&self, group_id: &str) -> super::api::DescribedShareGroup {
        use super::api::{DescribedShareGroup, DescribedShareMember};
        let g = match self.groups.get(group_id) {
            Some(Group::Share(g)) => g,
            Some(_) => {
                return DescribedShareGroup::error(
                    GROUP_ID_NOT_FOUND,
                    Some(format!("Group {group_id} is not a share group.")),
                    group_id,
                )
            }
            None => {
                return DescribedShareGroup::error(
                    GROUP_ID_NOT_FOUND,
                    Some(format!("Group {group_id} not found.")),
                    group_id,
                )
            }
        };
        let named = |a: &Assignment| -> Vec<(Uuid, String, Vec<i32>)> {
            a.iter()
                .filter(|(_, ps)| !ps.is_empty())
                .map(|(id, ps)| {
                    let name = self.topics.name_of(id).unwrap_or_default().to_string();
                    (*id, name, ps.iter().copied().collect())
                })
                .collect()
        };
        DescribedShareGroup {
            error_code: 0,
            error_message: None,
            group_id: group_id.to_string(),
            group_state: g.state_name().to_string(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor_name: SIMPLE_ASSIGNOR.to_string(),
            members: g
                .members
                .values()
                .map(|m| DescribedShareMember {
                    member_id: m.member_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                    assignment: named(&m.assignment),
                })
                .collect(),
        }
    }
}

/// The subscribed partitions with no state yet (none initialized, none asked for within
/// `retry_ms`): marked initializing, with the request to make their state. A topic new to the
/// group starts at -1 (the share-partition leader applies `share.auto.offset.reset`); new
/// partitions of a topic it already has state for start at 0, so nothing written to them is
/// skipped. (Kafka also gives 0 to a topic whose first initialization is asked for again;
/// kactor keeps -1 until the topic has state.)
fn share_state_to_initialize(
    group: &mut ShareGroup,
    topics: &TopicsView,
    now_ms: i64,
    retry_ms: i64,
    out: &mut Output,
) -> Option<ShareStateInit> {
    let state = group.state.clone().unwrap_or_default();
    let mut next = state.clone();
    let mut partitions = Vec::new();
    for name in group.subscribed_topics() {
        let Some((id, n)) = topics.id_of(&name).zip(topics.num_partitions(&name)) else {
            continue;
        };
        let mut have: BTreeSet<i32> = state
            .initialized
            .get(&id)
            .map(|(_, ps)| ps.clone())
            .unwrap_or_default();
        let asked_at = group
            .initializing_since_ms
            .get(&id)
            .copied()
            .unwrap_or(i64::MIN);
        if let Some((_, ps)) = state.initializing.get(&id) {
            if now_ms.saturating_sub(asked_at) < retry_ms {
                have.extend(ps.iter().copied());
            }
        }
        let missing: Vec<i32> = (0..n).filter(|p| !have.contains(p)).collect();
        if missing.is_empty() {
            continue;
        }
        let start = if state.initialized.contains_key(&id) {
            0
        } else {
            -1
        };
        next.deleting.remove(&id);
        next.initializing
            .entry(id)
            .or_insert_with(|| (name.clone(), BTreeSet::new()))
            .1
            .extend(missing.iter().copied());
        group.initializing_since_ms.insert(id, now_ms);
        partitions.extend(missing.into_iter().map(|p| (id, p, start)));
    }
    if partitions.is_empty() {
        return None;
    }
    out.records.push(group.set_state(next));
    Some(ShareStateInit {
        group_id: group.group_id.clone(),
        asked_at_ms: now_ms,
        state_epoch: group.group_epoch,
        partitions,
    })
}
