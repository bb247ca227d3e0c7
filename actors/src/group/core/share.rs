//! KIP-932 share groups in the group coordinator (Kafka's `ShareGroup` with the share half of
//! `GroupMetadataManager`): ShareGroupHeartbeat (join, heartbeat, leave, session expiry) and
//! ShareGroupDescribe. A share group's members read the same partitions cooperatively, so there
//! is no revocation step: a member takes its new assignment at the next heartbeat.
//!
//! Kept in memory: a coordinator that restarts or moves loses its share groups' membership and
//! the members join again (their next heartbeat gets UNKNOWN_MEMBER_ID). What was delivered and
//! acknowledged is the partition leaders' (`share/`), not the coordinator's.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

use super::api::{ShareGroupHeartbeatInput, ShareGroupHeartbeatOutput, TopicsView};
use super::assignor::Assignment;
use super::consumer::{fail, metadata_hash, HbResult};
use super::consumer_group::to_topic_partitions;
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
        }
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
        let (Some(id), Some(n)) = (topics.id_of(name), topics.num_partitions(name)) else {
            continue;
        };
        let subscribers: Vec<&String> = members
            .values()
            .filter(|m| m.subscribed_topic_names.contains(name))
            .map(|m| &m.member_id)
            .collect();
        let m = subscribers.len() as i64;
        let p = n as i64;
        if m == 0 || p <= 0 {
            continue;
        }
        let sharing = (m + p - 1) / p;
        let places = sharing * p;
        // ceil(places * i / m), exactly, in integers.
        let bound = |i: i64| (places * i + m - 1) / m;
        let mut quota: Vec<i64> = (0..m).map(|i| bound(i + 1) - bound(i)).collect();
        let mut next = 0usize;
        for partition in 0..n {
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

    /// ShareGroupHeartbeat. Share groups write no records, so it returns the answer alone.
    pub(super) fn share_heartbeat(
        &mut self,
        req: &ShareGroupHeartbeatInput,
        now_ms: i64,
    ) -> HbResult<ShareGroupHeartbeatOutput> {
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
            self.remove_share_member(group_id, &member_id);
            return Ok(ShareGroupHeartbeatOutput {
                member_id: Some(member_id),
                member_epoch: -1,
                heartbeat_interval_ms: 0,
                ..Default::default()
            });
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
        if group.assignment_epoch < group.group_epoch {
            group.target = simple_assign(&group.members, &topics);
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
        Ok(ShareGroupHeartbeatOutput {
            error_code: 0,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: assignment_epoch,
            heartbeat_interval_ms: interval,
            assignment,
        })
    }

    fn remove_share_member(&mut self, group_id: &str, member_id: &str) {
        self.timers.cancel(&share_session_key(group_id, member_id));
        let group = self.share_group_mut(group_id);
        if group.members.remove(member_id).is_some() {
            group.target.remove(member_id);
            group.group_epoch += 1;
        }
    }

    /// A member's session timed out: it leaves, and the others share its partitions.
    pub(super) fn on_share_session_expired(&mut self, group_id: &str, member_id: &str) {
        if self.share_group(group_id).is_some() {
            self.remove_share_member(group_id, member_id);
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
