//! The classic group protocol (Kafka's `GroupMetadataManager.classicGroup*`): JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, and the join/sync/session timers. Classic
//! state changes in memory directly; only the group's assignment (at SyncGroup), static member
//! replacement and the empty generation are persisted as `GroupMetadata` records, as in Kafka.

use bytes::Bytes;

use super::api::{
    DescribedGroup, DescribedMember, GroupResponse, HeartbeatInput, JoinGroupInput,
    JoinGroupOutput, LeaveGroupInput, LeaveGroupMemberOutput, LeaveGroupOutput, Output, RequestId,
    SyncGroupInput, SyncGroupOutput,
};
use super::classic_group::{ClassicGroup, ClassicGroupState as S, ClassicMember, PendingJoin};
use super::records::CoordinatorRecord;
use super::shard::{Group, GroupCoordinatorShard};
use super::timers::{TimerAction, TimerKey};
use kactor_protocol::errors::*;

/// JoinGroup v4+ requires the two-step join (KIP-394).
const REQUIRE_KNOWN_MEMBER_ID_VERSION: i16 = 4;
/// JoinGroup v9+ lets a rejoining static leader skip the assignment (KIP-814).
const SKIP_ASSIGNMENT_VERSION: i16 = 9;

fn join_error(id: RequestId, code: i16, member_id: &str, out: &mut Output) {
    out.respond(
        id,
        GroupResponse::JoinGroup(JoinGroupOutput::error(code, member_id)),
    );
}

fn heartbeat_key(group_id: &str, member_id: &str) -> TimerKey {
    TimerKey::ClassicHeartbeat {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    }
}

fn join_key(group_id: &str) -> TimerKey {
    TimerKey::ClassicJoin {
        group_id: group_id.to_string(),
    }
}

fn sync_key(group_id: &str) -> TimerKey {
    TimerKey::ClassicSync {
        group_id: group_id.to_string(),
    }
}

impl GroupCoordinatorShard {
    fn classic_group_mut(&mut self, group_id: &str) -> Option<&mut ClassicGroup> {
        match self.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    fn schedule_classic_heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        timeout_ms: i32,
        now_ms: i64,
    ) {
        self.timers.schedule(
            heartbeat_key(group_id, member_id),
            now_ms + timeout_ms as i64,
            TimerAction::ClassicHeartbeatExpired,
        );
    }

    // -----------------------------------------------------------------------------------------
    // JoinGroup

    pub(super) fn classic_join(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        if req.group_id.is_empty() {
            return join_error(id, INVALID_GROUP_ID, &req.member_id, out);
        }
        if matches!(self.groups.get(&req.group_id), Some(Group::Consumer(g)) if !g.members.is_empty())
        {
            // Classic members of a consumer group (KIP-848 online migration).
            return self.classic_join_to_consumer_group(id, req, now_ms, out);
        }
        if req.session_timeout_ms < self.config.group_min_session_timeout_ms
            || req.session_timeout_ms > self.config.group_max_session_timeout_ms
        {
            return join_error(id, INVALID_SESSION_TIMEOUT, &req.member_id, out);
        }
        let unknown_member = req.member_id.is_empty();
        match self.groups.get(&req.group_id) {
            None if !unknown_member => {
                // A known member id for a group we do not have: the group expired or moved.
                return join_error(id, UNKNOWN_MEMBER_ID, &req.member_id, out);
            }
            None => {
                self.groups.insert(
                    req.group_id.clone(),
                    Group::Classic(ClassicGroup::new(&req.group_id, now_ms)),
                );
            }
            Some(Group::Consumer(g)) => {
                if g.members.is_empty() {
                    // An empty consumer group gives way to a classic group (Kafka's
                    // downgrade of an empty group).
                    let tombstones = g.tombstones();
                    for r in &tombstones {
                        self.replay(r);
                    }
                    out.records.extend(tombstones);
                    self.groups.insert(
                        req.group_id.clone(),
                        Group::Classic(ClassicGroup::new(&req.group_id, now_ms)),
                    );
                } else {
                    return join_error(id, INCONSISTENT_GROUP_PROTOCOL, &req.member_id, out);
                }
            }
            Some(Group::Share(_)) => {
                return join_error(id, INCONSISTENT_GROUP_PROTOCOL, &req.member_id, out);
            }
            Some(Group::Classic(_)) => {}
        }
        let max_size = self.config.group_max_size;
        let group = self.classic_group_mut(&req.group_id).expect("group exists");
        if !accept_joining_member(group, &req.member_id, max_size) {
            return join_error(id, GROUP_MAX_SIZE_REACHED, &req.member_id, out);
        }
        if unknown_member {
            self.classic_join_new_member(id, req, now_ms, out);
        } else {
            self.classic_join_existing_member(id, req, now_ms, out);
        }
    }

    fn classic_join_new_member(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group = self.classic_group_mut(&req.group_id).expect("group exists");
        if group.is(S::Dead) {
            return join_error(id, COORDINATOR_NOT_AVAILABLE, &req.member_id, out);
        }
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            return join_error(id, INCONSISTENT_GROUP_PROTOCOL, &req.member_id, out);
        }
        let prefix = req
            .group_instance_id
            .clone()
            .unwrap_or_else(|| req.client_id.clone());
        let new_member_id = format!("{prefix}-{}", self.random_uuid());
        let group = self.classic_group_mut(&req.group_id).expect("group exists");
        if let Some(instance_id) = req.group_instance_id.clone() {
            if group.static_member_id(&instance_id).is_some() {
                self.update_static_member_and_rebalance(
                    id,
                    req,
                    &instance_id,
                    new_member_id,
                    now_ms,
                    out,
                );
            } else {
                self.add_member_and_rebalance(id, req, new_member_id, now_ms, out);
            }
        } else if req.api_version >= REQUIRE_KNOWN_MEMBER_ID_VERSION {
            // KIP-394: hand out the id and wait for the member to come back with it, so a
            // client that times out does not leave a defunct member in the rebalance.
            group.pending_members.insert(new_member_id.clone());
            self.schedule_classic_heartbeat(
                &req.group_id,
                &new_member_id,
                req.session_timeout_ms,
                now_ms,
            );
            join_error(id, MEMBER_ID_REQUIRED, &new_member_id, out);
        } else {
            self.add_member_and_rebalance(id, req, new_member_id, now_ms, out);
        }
    }

    fn classic_join_existing_member(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group = self.classic_group_mut(&req.group_id).expect("group exists");
        if group.is(S::Dead) {
            return join_error(id, COORDINATOR_NOT_AVAILABLE, &req.member_id, out);
        }
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            return join_error(id, INCONSISTENT_GROUP_PROTOCOL, &req.member_id, out);
        }
        if group.pending_members.contains(&req.member_id) {
            // The second step of KIP-394.
            let member_id = req.member_id.clone();
            return self.add_member_and_rebalance(id, req, member_id, now_ms, out);
        }
        if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return join_error(id, code, &req.member_id, out);
        }
        let member = &group.members[&req.member_id];
        let same_metadata = member.matches(&req.protocols);
        match group.state {
            S::PreparingRebalance => self.update_member_and_rebalance(id, req, now_ms, out),
            S::CompletingRebalance if same_metadata => {
                // The member probably lost its JoinGroup response: send it again.
                let response = current_join_response(group, &req.member_id, false);
                out.respond(id, GroupResponse::JoinGroup(response));
            }
            S::CompletingRebalance => self.update_member_and_rebalance(id, req, now_ms, out),
            S::Stable if group.is_leader(&req.member_id) || !same_metadata => {
                // A leader's JoinGroup forces a rebalance: that is how it reacts to metadata
                // changes that do not change its subscription.
                self.update_member_and_rebalance(id, req, now_ms, out)
            }
            S::Stable => {
                let mut response = current_join_response(group, &req.member_id, false);
                response.members.clear();
                out.respond(id, GroupResponse::JoinGroup(response));
            }
            S::Empty | S::Dead => join_error(id, UNKNOWN_MEMBER_ID, &req.member_id, out),
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        member_id: String,
        now_ms: i64,
        out: &mut Output,
    ) {
        let timeout = self.config.classic_new_member_join_timeout_ms;
        let group = self.classic_group_mut(&req.group_id).expect("group exists");
        if group.is(S::PreparingRebalance) && group.previous_state == S::Empty {
            group.new_member_added = true;
        }
        group.add_member(ClassicMember {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: Some(PendingJoin {
                request_id: id,
                api_version: req.api_version,
            }),
            awaiting_sync: None,
            is_new: true,
        });
        // A new member's parked JoinGroup cannot heartbeat; expire it if it never completes.
        self.schedule_classic_heartbeat(&req.group_id, &member_id, timeout, now_ms);
        self.maybe_prepare_rebalance_or_complete_join(&req.group_id, now_ms, out);
    }

    fn update_member_and_rebalance(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group = self.classic_group_mut(&req.group_id).expect("group exists");
        let member = group
            .members
            .get_mut(&req.member_id)
            .expect("member exists");
        if let Some(old) = member.awaiting_join.take() {
            // A client retried while its first JoinGroup was still parked: answer the old
            // one so no request is left without a response.
            join_error(old.request_id, REBALANCE_IN_PROGRESS, &req.member_id, out);
        }
        member.protocols = req.protocols;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.awaiting_join = Some(PendingJoin {
            request_id: id,
            api_version: req.api_version,
        });
        self.maybe_prepare_rebalance_or_complete_join(&req.group_id, now_ms, out);
    }

    fn update_static_member_and_rebalance(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        instance_id: &str,
        new_member_id: String,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group_id = req.group_id.clone();
        let group = self.classic_group_mut(&group_id).expect("group exists");
        let old_member_id = group
            .static_member_id(instance_id)
            .expect("static")
            .to_string();
        let old_leader = group.leader_id.clone();
        // Replace the old member id by the new one; the old instance is fenced.
        let mut member = group
            .members
            .remove(&old_member_id)
            .expect("static member exists");
        group.pending_sync_members.remove(&old_member_id);
        if let Some(join) = member.awaiting_join.take() {
            join_error(join.request_id, FENCED_INSTANCE_ID, &old_member_id, out);
        }
        if let Some(sync) = member.awaiting_sync.take() {
            out.respond(
                sync,
                GroupResponse::SyncGroup(SyncGroupOutput::error(FENCED_INSTANCE_ID)),
            );
        }
        member.member_id = new_member_id.clone();
        member.protocols = req.protocols.clone();
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.awaiting_join = Some(PendingJoin {
            request_id: id,
            api_version: req.api_version,
        });
        if group.is_leader(&old_member_id) {
            group.leader_id = Some(new_member_id.clone());
        }
        group
            .static_members
            .insert(instance_id.to_string(), new_member_id.clone());
        let session_timeout = member.session_timeout_ms;
        group.members.insert(new_member_id.clone(), member);
        self.timers
            .cancel(&heartbeat_key(&group_id, &old_member_id));
        self.schedule_classic_heartbeat(&group_id, &new_member_id, session_timeout, now_ms);

        let group = self.classic_group_mut(&group_id).expect("group exists");
        match group.state {
            S::Stable => {
                if group.select_protocol() == group.protocol_name {
                    // Same protocol: persist the new member id, no rebalance (KIP-345).
                    out.records.push(CoordinatorRecord::GroupMetadata {
                        group_id: group_id.clone(),
                        value: Some(group.to_record_value()),
                    });
                    let member = group.members.get_mut(&new_member_id).expect("member");
                    let join = member.awaiting_join.take().expect("parked join");
                    let is_leader = group.is_leader(&new_member_id);
                    let response = if join.api_version >= SKIP_ASSIGNMENT_VERSION {
                        let mut r = current_join_response(group, &new_member_id, is_leader);
                        if !is_leader {
                            r.members.clear();
                        }
                        // The leader already computed this generation's assignment.
                        r.skip_assignment = is_leader;
                        r
                    } else {
                        // Older leaders would recompute an assignment: tell the member the old
                        // leader id so it acts as a follower.
                        let mut r = current_join_response(group, &new_member_id, false);
                        r.members.clear();
                        r.leader = old_leader.unwrap_or_default();
                        r
                    };
                    out.respond(join.request_id, GroupResponse::JoinGroup(response));
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(&group_id, now_ms, out);
                }
            }
            S::CompletingRebalance => self.prepare_rebalance(&group_id, now_ms, out),
            S::PreparingRebalance => self.maybe_complete_join_phase(&group_id, now_ms, out),
            S::Empty | S::Dead => {
                debug_assert!(false, "static member in an empty group");
            }
        }
    }

    fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        group_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group = self.classic_group_mut(group_id).expect("group exists");
        if group.can_rebalance() {
            self.prepare_rebalance(group_id, now_ms, out);
        } else {
            self.maybe_complete_join_phase(group_id, now_ms, out);
        }
    }

    pub(super) fn prepare_rebalance(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let initial_delay = self.config.group_initial_rebalance_delay_ms;
        let group = self.classic_group_mut(group_id).expect("group exists");
        if group.is(S::CompletingRebalance) {
            // Members waiting in SyncGroup must rejoin.
            reset_and_propagate_assignment_with_error(group, REBALANCE_IN_PROGRESS, out);
        }
        self.timers.cancel(&sync_key(group_id));
        let group = self.classic_group_mut(group_id).expect("group exists");
        let initial = group.is(S::Empty);
        let rebalance_timeout = group.rebalance_timeout_ms();
        group.transition_to(S::PreparingRebalance, now_ms);
        if initial {
            // New group: give more members a chance to join before the first generation.
            let remaining = (rebalance_timeout - initial_delay).max(0);
            self.timers.schedule(
                join_key(group_id),
                now_ms + initial_delay as i64,
                TimerAction::ClassicInitialJoin {
                    delay_ms: initial_delay,
                    remaining_ms: remaining,
                },
            );
        } else if group.has_all_members_joined() {
            self.complete_classic_join(group_id, now_ms, out);
        } else {
            self.timers.schedule(
                join_key(group_id),
                now_ms + rebalance_timeout as i64,
                TimerAction::ClassicCompleteJoin,
            );
        }
    }

    fn maybe_complete_join_phase(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let Some(group) = self.classic_group_mut(group_id) else {
            return;
        };
        if group.is(S::PreparingRebalance)
            && group.has_all_members_joined()
            && group.previous_state != S::Empty
        {
            self.complete_classic_join(group_id, now_ms, out);
        }
    }

    pub(super) fn try_complete_initial_rebalance(
        &mut self,
        group_id: &str,
        delay_ms: i32,
        remaining_ms: i32,
        now_ms: i64,
        out: &mut Output,
    ) {
        let initial_delay = self.config.group_initial_rebalance_delay_ms;
        let Some(group) = self.classic_group_mut(group_id) else {
            return;
        };
        if group.new_member_added && remaining_ms != 0 {
            group.new_member_added = false;
            let new_delay = initial_delay.min(remaining_ms);
            let new_remaining = (remaining_ms - initial_delay).max(0);
            self.timers.schedule(
                join_key(group_id),
                now_ms + new_delay as i64,
                TimerAction::ClassicInitialJoin {
                    delay_ms: new_delay,
                    remaining_ms: new_remaining,
                },
            );
        } else {
            let _ = delay_ms;
            self.complete_classic_join(group_id, now_ms, out);
        }
    }

    /// Ends the join phase: members that did not rejoin are dropped, the next generation
    /// starts and every parked JoinGroup is answered (the leader gets the members).
    pub(super) fn complete_classic_join(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        self.timers.cancel(&join_key(group_id));
        let Some(group) = self.classic_group_mut(group_id) else {
            return;
        };
        if !group.is(S::PreparingRebalance) {
            return;
        }
        let not_rejoined: Vec<String> = group
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &not_rejoined {
            group.remove_member(member_id);
        }
        for member_id in &not_rejoined {
            self.timers.cancel(&heartbeat_key(group_id, member_id));
        }
        let group = self.classic_group_mut(group_id).expect("group exists");
        if !group.maybe_elect_new_joined_leader() && !group.members.is_empty() {
            // Only static members that have not rejoined are left: wait for them (or for their
            // sessions to expire).
            let timeout = group.rebalance_timeout_ms();
            self.timers.schedule(
                join_key(group_id),
                now_ms + timeout as i64,
                TimerAction::ClassicCompleteJoin,
            );
            return;
        }
        // initNextGeneration
        group.generation_id += 1;
        if group.members.is_empty() {
            group.protocol_name = None;
            group.leader_id = None;
            group.transition_to(S::Empty, now_ms);
            out.records.push(CoordinatorRecord::GroupMetadata {
                group_id: group_id.to_string(),
                value: Some(group.to_record_value()),
            });
            return;
        }
        group.protocol_name = group.select_protocol();
        group.transition_to(S::CompletingRebalance, now_ms);
        let member_ids: Vec<String> = group.members.keys().cloned().collect();
        let mut sessions = Vec::new();
        for member_id in &member_ids {
            let is_leader = group.is_leader(member_id);
            let response = current_join_response(group, member_id, is_leader);
            let member = group.members.get_mut(member_id).expect("member");
            if let Some(join) = member.awaiting_join.take() {
                out.respond(join.request_id, GroupResponse::JoinGroup(response));
            }
            member.is_new = false;
            sessions.push((member_id.clone(), member.session_timeout_ms));
            group.pending_sync_members.insert(member_id.clone());
        }
        let generation_id = group.generation_id;
        let rebalance_timeout = group.rebalance_timeout_ms();
        for (member_id, timeout) in sessions {
            self.schedule_classic_heartbeat(group_id, &member_id, timeout, now_ms);
        }
        // Members must SyncGroup within the rebalance timeout.
        self.timers.schedule(
            sync_key(group_id),
            now_ms + rebalance_timeout as i64,
            TimerAction::ClassicPendingSyncExpired { generation_id },
        );
    }

    pub(super) fn on_pending_sync_expired(
        &mut self,
        group_id: &str,
        generation_id: i32,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.classic_group_mut(group_id) else {
            return;
        };
        if generation_id != group.generation_id
            || !matches!(group.state, S::CompletingRebalance | S::Stable)
            || group.pending_sync_members.is_empty()
        {
            return;
        }
        let pending: Vec<String> = group.pending_sync_members.iter().cloned().collect();
        for member_id in &pending {
            if let Some(mut m) = group.remove_member(member_id) {
                if let Some(join) = m.awaiting_join.take() {
                    join_error(join.request_id, UNKNOWN_MEMBER_ID, member_id, out);
                }
            }
        }
        for member_id in &pending {
            self.timers.cancel(&heartbeat_key(group_id, member_id));
        }
        self.prepare_rebalance(group_id, now_ms, out);
    }

    // -----------------------------------------------------------------------------------------
    // SyncGroup

    pub(super) fn classic_sync(
        &mut self,
        id: RequestId,
        req: SyncGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        let respond = |out: &mut Output, code| {
            out.respond(id, GroupResponse::SyncGroup(SyncGroupOutput::error(code)))
        };
        if req.group_id.is_empty() {
            return respond(out, INVALID_GROUP_ID);
        }
        if matches!(self.groups.get(&req.group_id), Some(Group::Consumer(_))) {
            return self.classic_sync_to_consumer_group(id, &req, now_ms, out);
        }
        let Some(group) = self.classic_group_mut(&req.group_id) else {
            return respond(out, UNKNOWN_MEMBER_ID);
        };
        if group.is(S::Dead) {
            return respond(out, COORDINATOR_NOT_AVAILABLE);
        }
        if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return respond(out, code);
        }
        if req.generation_id != group.generation_id {
            return respond(out, ILLEGAL_GENERATION);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != group.protocol_type.as_ref())
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|n| Some(n) != group.protocol_name.as_ref())
        {
            return respond(out, INCONSISTENT_GROUP_PROTOCOL);
        }
        match group.state {
            S::Empty => respond(out, UNKNOWN_MEMBER_ID),
            S::PreparingRebalance => respond(out, REBALANCE_IN_PROGRESS),
            S::CompletingRebalance => {
                let member = group.members.get_mut(&req.member_id).expect("validated");
                if let Some(old) = member.awaiting_sync.replace(id) {
                    out.respond(
                        old,
                        GroupResponse::SyncGroup(SyncGroupOutput::error(REBALANCE_IN_PROGRESS)),
                    );
                }
                group.pending_sync_members.remove(&req.member_id);
                if group.is_leader(&req.member_id) {
                    // Members the leader left out get an empty assignment.
                    for member in group.members.values_mut() {
                        member.assignment = req
                            .assignments
                            .iter()
                            .find(|(m, _)| *m == member.member_id)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    out.records.push(CoordinatorRecord::GroupMetadata {
                        group_id: req.group_id.clone(),
                        value: Some(group.to_record_value()),
                    });
                    // Kafka moves to Stable once the record is written; responses here are
                    // only released after that, so the transition can be immediate.
                    let sessions = propagate_assignment(group, out);
                    group.transition_to(S::Stable, now_ms);
                    for (member_id, timeout) in sessions {
                        self.schedule_classic_heartbeat(&req.group_id, &member_id, timeout, now_ms);
                    }
                }
            }
            S::Stable => {
                group.pending_sync_members.remove(&req.member_id);
                let member = &group.members[&req.member_id];
                out.respond(
                    id,
                    GroupResponse::SyncGroup(SyncGroupOutput {
                        error_code: NONE,
                        protocol_type: group.protocol_type.clone(),
                        protocol_name: group.protocol_name.clone(),
                        assignment: member.assignment.clone(),
                    }),
                );
            }
            S::Dead => respond(out, COORDINATOR_NOT_AVAILABLE),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Heartbeat

    pub(super) fn classic_heartbeat(&mut self, req: &HeartbeatInput, now_ms: i64) -> i16 {
        if req.group_id.is_empty() {
            return INVALID_GROUP_ID;
        }
        if matches!(self.groups.get(&req.group_id), Some(Group::Consumer(_))) {
            return self.classic_heartbeat_to_consumer_group(req, now_ms);
        }
        let Some(group) = self.classic_group_mut(&req.group_id) else {
            return UNKNOWN_MEMBER_ID;
        };
        if group.is(S::Dead) {
            return COORDINATOR_NOT_AVAILABLE;
        }
        if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return code;
        }
        if req.generation_id != group.generation_id {
            return ILLEGAL_GENERATION;
        }
        let state = group.state;
        let timeout = group.members[&req.member_id].session_timeout_ms;
        match state {
            S::Empty => UNKNOWN_MEMBER_ID,
            S::PreparingRebalance => {
                self.schedule_classic_heartbeat(&req.group_id, &req.member_id, timeout, now_ms);
                REBALANCE_IN_PROGRESS
            }
            S::CompletingRebalance | S::Stable => {
                self.schedule_classic_heartbeat(&req.group_id, &req.member_id, timeout, now_ms);
                NONE
            }
            S::Dead => COORDINATOR_NOT_AVAILABLE,
        }
    }

    pub(super) fn on_classic_heartbeat_expired(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.classic_group_mut(group_id) else {
            return;
        };
        if group.is(S::Dead) {
            return;
        }
        if group.pending_members.remove(member_id) {
            // A KIP-394 member never came back with its id.
            if group.is(S::PreparingRebalance) {
                self.maybe_complete_join_phase(group_id, now_ms, out);
            }
            return;
        }
        let Some(member) = group.members.get(member_id) else {
            return;
        };
        if !member.has_satisfied_heartbeat() {
            self.remove_member_and_update_group(group_id, member_id, now_ms, out);
        }
    }

    fn remove_member_and_update_group(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group = self.classic_group_mut(group_id).expect("group exists");
        if let Some(mut member) = group.remove_member(member_id) {
            // A parked JoinGroup learns it must start over.
            if let Some(join) = member.awaiting_join.take() {
                join_error(join.request_id, UNKNOWN_MEMBER_ID, "", out);
            }
            if let Some(sync) = member.awaiting_sync.take() {
                out.respond(
                    sync,
                    GroupResponse::SyncGroup(SyncGroupOutput::error(REBALANCE_IN_PROGRESS)),
                );
            }
        }
        self.timers.cancel(&heartbeat_key(group_id, member_id));
        let group = self.classic_group_mut(group_id).expect("group exists");
        match group.state {
            S::Stable | S::CompletingRebalance => self.prepare_rebalance(group_id, now_ms, out),
            S::PreparingRebalance => self.maybe_complete_join_phase(group_id, now_ms, out),
            S::Empty | S::Dead => {}
        }
    }

    // -----------------------------------------------------------------------------------------
    // LeaveGroup

    pub(super) fn classic_leave(
        &mut self,
        req: LeaveGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) -> LeaveGroupOutput {
        let member_result = |m: &super::api::LeaveGroupMemberInput, code| LeaveGroupMemberOutput {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            error_code: code,
        };
        if req.group_id.is_empty() {
            return LeaveGroupOutput {
                error_code: INVALID_GROUP_ID,
                members: Vec::new(),
            };
        }
        if matches!(self.groups.get(&req.group_id), Some(Group::Consumer(_))) {
            return self.classic_leave_to_consumer_group(req, out);
        }
        let Some(group) = self.classic_group_mut(&req.group_id) else {
            return LeaveGroupOutput {
                error_code: NONE,
                members: req
                    .members
                    .iter()
                    .map(|m| member_result(m, UNKNOWN_MEMBER_ID))
                    .collect(),
            };
        };
        if group.is(S::Dead) {
            return LeaveGroupOutput {
                error_code: COORDINATOR_NOT_AVAILABLE,
                members: Vec::new(),
            };
        }
        let mut results = Vec::new();
        let mut to_remove = Vec::new();
        let mut pending_removed = Vec::new();
        for m in &req.members {
            let code = match &m.group_instance_id {
                None if group.pending_members.contains(&m.member_id) => {
                    group.pending_members.remove(&m.member_id);
                    pending_removed.push(m.member_id.clone());
                    NONE
                }
                None if group.members.contains_key(&m.member_id) => {
                    to_remove.push(m.member_id.clone());
                    NONE
                }
                None => UNKNOWN_MEMBER_ID,
                Some(instance) => match group.static_member_id(instance) {
                    None => UNKNOWN_MEMBER_ID,
                    Some(existing) if !m.member_id.is_empty() && existing != m.member_id => {
                        FENCED_INSTANCE_ID
                    }
                    Some(existing) => {
                        to_remove.push(existing.to_string());
                        NONE
                    }
                },
            };
            results.push(member_result(m, code));
        }
        for member_id in pending_removed {
            self.timers
                .cancel(&heartbeat_key(&req.group_id, &member_id));
        }
        let had_pending_only = to_remove.is_empty();
        for member_id in to_remove {
            if self
                .classic_group_mut(&req.group_id)
                .is_some_and(|g| g.members.contains_key(&member_id))
            {
                self.remove_member_and_update_group(&req.group_id, &member_id, now_ms, out);
            }
        }
        if had_pending_only {
            // A pending member leaving may be all the join phase was waiting for.
            self.maybe_complete_join_phase(&req.group_id, now_ms, out);
        }
        LeaveGroupOutput {
            error_code: NONE,
            members: results,
        }
    }

    // -----------------------------------------------------------------------------------------
    // DescribeGroups

    pub(super) fn classic_describe(&self, group_id: &str, api_version: i16) -> DescribedGroup {
        let dead = |code, message: Option<String>| DescribedGroup {
            error_code: code,
            error_message: message,
            group_id: group_id.to_string(),
            group_state: "Dead".to_string(),
            protocol_type: String::new(),
            protocol_data: String::new(),
            members: Vec::new(),
        };
        match self.groups.get(group_id) {
            Some(Group::Classic(g)) => {
                let stable = g.is(S::Stable);
                let protocol = g.protocol_name.clone().unwrap_or_default();
                DescribedGroup {
                    error_code: NONE,
                    error_message: None,
                    group_id: group_id.to_string(),
                    group_state: g.state.name().to_string(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    protocol_data: if stable {
                        protocol.clone()
                    } else {
                        String::new()
                    },
                    // Metadata and assignment are only meaningful once the group is stable.
                    members: g
                        .members
                        .values()
                        .map(|m| DescribedMember {
                            member_id: m.member_id.clone(),
                            group_instance_id: m.group_instance_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            member_metadata: if stable {
                                m.metadata(&protocol)
                            } else {
                                Bytes::new()
                            },
                            member_assignment: if stable {
                                m.assignment.clone()
                            } else {
                                Bytes::new()
                            },
                        })
                        .collect(),
                }
            }
            // v6+ (KIP-1043) says so; older versions describe a missing group as Dead.
            None if api_version >= 6 => dead(
                GROUP_ID_NOT_FOUND,
                Some(format!("Group {group_id} not found.")),
            ),
            Some(Group::Consumer(_) | Group::Share(_)) if api_version >= 6 => dead(
                GROUP_ID_NOT_FOUND,
                Some(format!("Group {group_id} is not a classic group.")),
            ),
            _ => dead(NONE, None),
        }
    }
}

/// Kafka's `acceptJoiningMember` (group.max.size).
fn accept_joining_member(group: &ClassicGroup, member_id: &str, max_size: usize) -> bool {
    match group.state {
        S::Empty | S::Dead => true,
        // Count members already parked, so the last rejoiners are the ones turned away.
        S::PreparingRebalance => {
            group
                .members
                .get(member_id)
                .is_some_and(|m| m.awaiting_join.is_some())
                || group.num_awaiting_join() < max_size
        }
        S::CompletingRebalance | S::Stable => {
            group.members.contains_key(member_id) || group.members.len() < max_size
        }
    }
}

/// The JoinGroup response for `member_id` in the current generation.
fn current_join_response(
    group: &ClassicGroup,
    member_id: &str,
    with_members: bool,
) -> JoinGroupOutput {
    JoinGroupOutput {
        error_code: NONE,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        skip_assignment: false,
        member_id: member_id.to_string(),
        members: if with_members || group.is_leader(member_id) {
            group.join_response_members()
        } else {
            Vec::new()
        },
    }
}

/// Answers every parked SyncGroup with `code` and clears assignments.
fn reset_and_propagate_assignment_with_error(
    group: &mut ClassicGroup,
    code: i16,
    out: &mut Output,
) {
    for member in group.members.values_mut() {
        member.assignment = Bytes::new();
        if let Some(sync) = member.awaiting_sync.take() {
            out.respond(sync, GroupResponse::SyncGroup(SyncGroupOutput::error(code)));
        }
    }
}

/// Answers every parked SyncGroup with its assignment; returns the members whose session
/// timer restarts (Kafka restarts it since expirations were ignored while parked).
fn propagate_assignment(group: &mut ClassicGroup, out: &mut Output) -> Vec<(String, i32)> {
    let protocol_type = group.protocol_type.clone();
    let protocol_name = group.protocol_name.clone();
    let mut sessions = Vec::new();
    for member in group.members.values_mut() {
        if let Some(sync) = member.awaiting_sync.take() {
            out.respond(
                sync,
                GroupResponse::SyncGroup(SyncGroupOutput {
                    error_code: NONE,
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: member.assignment.clone(),
                }),
            );
            sessions.push((member.member_id.clone(), member.session_timeout_ms));
        }
    }
    sessions
}
