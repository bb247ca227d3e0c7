//! Consumer groups with classic members (Kafka's KIP-848 online migration in
//! `GroupMetadataManager`: `classicGroupJoinToConsumerGroup`, `classicGroupSyncToConsumerGroup`,
//! `classicGroupHeartbeatToConsumerGroup`, `classicGroupLeaveToConsumerGroup`,
//! `convertToConsumerGroup`, `convertToClassicGroup`). Under
//! `group.consumer.migration.policy` a classic group becomes a consumer group when a KIP-848
//! member joins it (upgrade), its classic members keep using JoinGroup/SyncGroup/Heartbeat with
//! the broker computing their assignment, and the group becomes classic again when its last
//! KIP-848 member leaves (downgrade).

use std::collections::BTreeSet;

use bytes::Bytes;

use super::api::{
    GroupResponse, HeartbeatInput, JoinGroupInput, JoinGroupOutput, LeaveGroupInput,
    LeaveGroupMemberOutput, LeaveGroupOutput, Output, RequestId, SyncGroupInput, SyncGroupOutput,
};
use super::assignor::Assignment;
use super::classic_group::{ClassicGroup, ClassicGroupState, ClassicMember};
use super::consumer::{fail, metadata_hash, rebalance_key, session_key, HbResult};
use super::consumer_group::{ConsumerGroup, ConsumerMember, MemberState};
use super::consumer_protocol::{decode_assignment, decode_subscription, encode_assignment};
use super::records::{ClassicMemberMetadata, CoordinatorRecord};
use super::shard::{Group, GroupCoordinatorShard};
use super::timers::{TimerAction, TimerKey};
use kactor_protocol::errors::*;

/// The protocol type every member of a consumer group uses in JoinGroup.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";
/// JoinGroup v4+ requires the two-step join (KIP-394).
const REQUIRE_KNOWN_MEMBER_ID_VERSION: i16 = 4;

fn join_key(group_id: &str, member_id: &str) -> TimerKey {
    TimerKey::ConsumerClassicJoin {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    }
}

fn sync_key(group_id: &str, member_id: &str) -> TimerKey {
    TimerKey::ConsumerClassicSync {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    }
}

fn join_error(id: RequestId, code: i16, member_id: &str, out: &mut Output) {
    out.respond(
        id,
        GroupResponse::JoinGroup(JoinGroupOutput::error(code, member_id)),
    );
}

/// Kafka's `ConsumerGroup.supportsClassicProtocols`: a classic member may join if it speaks
/// the consumer protocol type and shares a protocol with every classic member already there.
fn supports_classic_protocols(
    group: &ConsumerGroup,
    protocol_type: &str,
    protocols: &[(String, Bytes)],
) -> bool {
    if protocol_type != CONSUMER_PROTOCOL_TYPE {
        return false;
    }
    if group.members.is_empty() {
        return !protocols.is_empty();
    }
    protocols.iter().any(|(name, _)| {
        group
            .members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .all(|c| c.supported_protocols.iter().any(|(n, _)| n == name))
    })
}

/// Kafka's `validateConsumerGroupMember`: by instance id when given, else by member id.
fn find_member<'a>(
    group: &'a ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a ConsumerMember, i16> {
    match instance_id {
        None => group.members.get(member_id).ok_or(UNKNOWN_MEMBER_ID),
        Some(instance) => {
            let member = group.static_member(instance).ok_or(UNKNOWN_MEMBER_ID)?;
            if member.member_id != member_id {
                return Err(FENCED_INSTANCE_ID);
            }
            Ok(member)
        }
    }
}

/// The member's (topic name, partitions) list, sorted, for ConsumerProtocolAssignment.
fn named_partitions(
    topics: &super::api::TopicsView,
    assignment: &Assignment,
) -> Vec<(String, Vec<i32>)> {
    let mut named: Vec<(String, Vec<i32>)> = assignment
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .filter_map(|(id, ps)| {
            Some((
                topics.name_of(id)?.to_string(),
                ps.iter().copied().collect(),
            ))
        })
        .collect();
    named.sort();
    named
}

/// The consumer protocol version a classic member speaks (its first protocol's metadata).
fn subscription_version(classic: &ClassicMemberMetadata) -> i16 {
    classic
        .supported_protocols
        .first()
        .and_then(|(_, m)| m.get(..2))
        .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]))
}

impl GroupCoordinatorShard {
    fn classic_member_assignment(&self, member: &ConsumerMember) -> Bytes {
        let version = member.classic.as_ref().map_or(0, subscription_version);
        encode_assignment(version, &named_partitions(&self.topics, &member.assigned))
    }

    /// Removes every per-member timer of a consumer group member.
    pub(super) fn cancel_consumer_member_timers(&mut self, group_id: &str, member_id: &str) {
        self.timers.cancel(&session_key(group_id, member_id));
        self.timers.cancel(&rebalance_key(group_id, member_id));
        self.timers.cancel(&join_key(group_id, member_id));
        self.timers.cancel(&sync_key(group_id, member_id));
    }

    fn schedule_classic_join_timeout_if_absent(
        &mut self,
        group_id: &str,
        member: &ConsumerMember,
        now_ms: i64,
    ) {
        let key = join_key(group_id, &member.member_id);
        if !self.timers.is_scheduled(&key) {
            self.timers.schedule(
                key,
                now_ms + member.rebalance_timeout_ms.max(0) as i64,
                TimerAction::ConsumerClassicMemberExpired,
            );
        }
    }

    /// A classic member of a consumer group missed its rejoin or sync deadline: fence it.
    pub(super) fn on_consumer_classic_member_expired(
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

    // -----------------------------------------------------------------------------------------
    // JoinGroup

    /// JoinGroup to a non-empty consumer group: the member becomes (or stays) a consumer group
    /// member whose assignment the broker computes; the response carries its member epoch as
    /// the generation, no leader and no member list, so every classic member is a follower.
    pub(super) fn classic_join_to_consumer_group(
        &mut self,
        id: RequestId,
        req: JoinGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        let group_id = req.group_id.clone();
        let unknown = req.member_id.is_empty();
        let member_id = if unknown {
            self.random_kafka_uuid()
        } else {
            req.member_id.clone()
        };
        let group = self.consumer_group(&group_id).expect("consumer group");
        if group.members.len() >= self.config.consumer_max_size
            && !group.members.contains_key(&member_id)
        {
            return join_error(id, GROUP_MAX_SIZE_REACHED, &req.member_id, out);
        }
        if !supports_classic_protocols(group, &req.protocol_type, &req.protocols) {
            return join_error(id, INCONSISTENT_GROUP_PROTOCOL, &req.member_id, out);
        }
        if unknown
            && req.group_instance_id.is_none()
            && req.api_version >= REQUIRE_KNOWN_MEMBER_ID_VERSION
        {
            // KIP-394: hand out the id; the member is created when it comes back with it.
            return join_error(id, MEMBER_ID_REQUIRED, &member_id, out);
        }
        let Some(subscription) = req
            .protocols
            .first()
            .and_then(|(_, metadata)| decode_subscription(metadata))
        else {
            // Kafka fails the same way on a malformed embedded subscription.
            return join_error(id, UNKNOWN_SERVER_ERROR, &req.member_id, out);
        };

        // Records of a failed join are dropped, as in `consumer_heartbeat`.
        let snapshot = self.groups.get(&group_id).cloned();
        let mut scratch = Output::default();
        match self.classic_join_member(
            &req,
            &member_id,
            unknown,
            &subscription,
            now_ms,
            &mut scratch,
        ) {
            Ok((member, replaced)) => {
                out.merge(scratch);
                // Kafka's step 4: a classic instance replacing the last KIP-848 (static)
                // member turns the group back into a classic group, rebalancing only if the
                // subscription changed.
                let downgraded = replaced.is_some_and(|old| {
                    let mut old_topics = old.subscribed_topic_names.clone();
                    old_topics.sort();
                    let changed = old_topics != member.subscribed_topic_names;
                    self.downgrade_to_classic(&group_id, None, changed, now_ms, out)
                });
                let response = JoinGroupOutput {
                    error_code: NONE,
                    generation_id: member.member_epoch,
                    protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
                    protocol_name: member.classic_protocol_name().map(str::to_string),
                    leader: String::new(),
                    skip_assignment: false,
                    member_id: member.member_id.clone(),
                    members: Vec::new(),
                };
                if downgraded {
                    out.respond(id, GroupResponse::JoinGroup(response));
                    return;
                }
                self.timers.cancel(&join_key(&group_id, &member.member_id));
                self.schedule_consumer_session(&group_id, &member.member_id, now_ms);
                // The member must now collect its assignment with SyncGroup.
                self.timers.schedule(
                    sync_key(&group_id, &member.member_id),
                    now_ms + req.rebalance_timeout_ms.max(0) as i64,
                    TimerAction::ConsumerClassicMemberExpired,
                );
                out.respond(id, GroupResponse::JoinGroup(response));
            }
            Err(code) => {
                if let Some(g) = snapshot {
                    self.groups.insert(group_id, g);
                }
                join_error(id, code, &req.member_id, out);
            }
        }
    }

    fn classic_join_member(
        &mut self,
        req: &JoinGroupInput,
        member_id: &str,
        unknown: bool,
        subscription: &super::consumer_protocol::ConsumerSubscription,
        now_ms: i64,
        out: &mut Output,
    ) -> Result<(ConsumerMember, Option<ConsumerMember>), i16> {
        let group_id = req.group_id.clone();
        let group = self.consumer_group(&group_id).expect("consumer group");
        // A KIP-848 static member this classic instance replaces.
        let mut replaced = None;
        let old_member = match &req.group_instance_id {
            None => group
                .members
                .get(member_id)
                .cloned()
                .unwrap_or_else(|| ConsumerMember::new(member_id)),
            Some(instance_id) => match group.static_member(instance_id).cloned() {
                None if unknown => ConsumerMember::new(member_id),
                None => return Err(UNKNOWN_MEMBER_ID),
                // A classic static member never leaves explicitly: a new instance with the
                // same id takes the old one's place (and assignment) at once.
                Some(existing) if unknown => {
                    if !existing.uses_classic_protocol() {
                        replaced = Some(existing.clone());
                    }
                    self.replace_static_member(&group_id, &existing, member_id, out)
                }
                Some(existing) if existing.member_id != member_id => {
                    return Err(FENCED_INSTANCE_ID)
                }
                Some(existing) => existing,
            },
        };
        let is_new = !self
            .consumer_group(&group_id)
            .expect("consumer group")
            .members
            .contains_key(member_id);

        let mut updated = old_member.clone();
        if let Some(i) = &req.group_instance_id {
            updated.instance_id = Some(i.clone());
        }
        if let Some(r) = &subscription.rack_id {
            updated.rack_id = Some(r.clone());
        }
        if req.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        let mut topics = subscription.topics.clone();
        topics.sort();
        topics.dedup();
        updated.subscribed_topic_names = topics;
        updated.subscribed_topic_regex = None;
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        updated.classic = Some(ClassicMemberMetadata {
            session_timeout_ms: req.session_timeout_ms,
            supported_protocols: req.protocols.clone(),
        });

        // What the member says it still owns (cooperative members list them; eager members
        // revoked everything before rejoining).
        let mut owned = Assignment::new();
        for (topic, partitions) in &subscription.owned_partitions {
            if let Some(id) = self.topics.id_of(topic) {
                owned
                    .entry(id)
                    .or_default()
                    .extend(partitions.iter().copied());
            }
        }
        self.apply_member_update(
            &group_id,
            &old_member,
            updated,
            is_new,
            Some(&owned),
            false,
            now_ms,
            out,
        )
        .map(|member| (member, replaced))
        .map_err(|e| e.error_code)
    }

    // -----------------------------------------------------------------------------------------
    // SyncGroup

    /// SyncGroup to a consumer group: answers with the member's current assignment in the
    /// consumer protocol's format, unless a newer epoch means it must rejoin first.
    pub(super) fn classic_sync_to_consumer_group(
        &mut self,
        id: RequestId,
        req: &SyncGroupInput,
        now_ms: i64,
        out: &mut Output,
    ) {
        let respond = |out: &mut Output, code| {
            out.respond(id, GroupResponse::SyncGroup(SyncGroupOutput::error(code)))
        };
        let group = self.consumer_group(&req.group_id).expect("consumer group");
        if group.members.is_empty() {
            return respond(out, UNKNOWN_MEMBER_ID);
        }
        let member = match find_member(group, &req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m.clone(),
            Err(code) => return respond(out, code),
        };
        let Some(protocol_name) = member.classic_protocol_name().map(str::to_string) else {
            return respond(out, UNKNOWN_MEMBER_ID);
        };
        if req.generation_id != member.member_epoch {
            return respond(out, ILLEGAL_GENERATION);
        }
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
            || req
                .protocol_name
                .as_deref()
                .is_some_and(|n| n != protocol_name)
        {
            return respond(out, INCONSISTENT_GROUP_PROTOCOL);
        }
        // Behind the target assignment (not merely the group epoch, which may run ahead of it
        // for an assignment interval): the member must rejoin to catch up.
        if group.assignment_epoch > member.member_epoch
            && member.state != MemberState::UnrevokedPartitions
        {
            let group_id = req.group_id.clone();
            self.schedule_classic_join_timeout_if_absent(&group_id, &member, now_ms);
            return respond(out, REBALANCE_IN_PROGRESS);
        }
        self.timers
            .cancel(&sync_key(&req.group_id, &member.member_id));
        self.schedule_consumer_session(&req.group_id, &member.member_id, now_ms);
        out.respond(
            id,
            GroupResponse::SyncGroup(SyncGroupOutput {
                error_code: NONE,
                protocol_type: req.protocol_type.clone(),
                protocol_name: req.protocol_name.clone(),
                assignment: self.classic_member_assignment(&member),
            }),
        );
    }

    // -----------------------------------------------------------------------------------------
    // Heartbeat

    /// Heartbeat to a consumer group: keeps the session and tells the member to rejoin when
    /// the group epoch moved past it, it has partitions to revoke, or partitions it waits for
    /// became free.
    pub(super) fn classic_heartbeat_to_consumer_group(
        &mut self,
        req: &HeartbeatInput,
        now_ms: i64,
    ) -> i16 {
        let group = self.consumer_group(&req.group_id).expect("consumer group");
        let member = match find_member(group, &req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m.clone(),
            Err(code) => return code,
        };
        if !member.uses_classic_protocol() {
            return UNKNOWN_MEMBER_ID;
        }
        if req.generation_id != member.member_epoch {
            return ILLEGAL_GENERATION;
        }
        let rejoin = member.member_epoch < group.assignment_epoch
            || member.state == MemberState::UnrevokedPartitions
            || (member.state == MemberState::UnreleasedPartitions
                && !group.waiting_on_unreleased_partition(&member));
        self.schedule_consumer_session(&req.group_id, &member.member_id, now_ms);
        if rejoin {
            let group_id = req.group_id.clone();
            self.schedule_classic_join_timeout_if_absent(&group_id, &member, now_ms);
            REBALANCE_IN_PROGRESS
        } else {
            NONE
        }
    }

    // -----------------------------------------------------------------------------------------
    // LeaveGroup

    /// LeaveGroup to a consumer group: removes the named classic members and bumps the group
    /// epoch so the others get their partitions.
    pub(super) fn classic_leave_to_consumer_group(
        &mut self,
        req: LeaveGroupInput,
        out: &mut Output,
    ) -> LeaveGroupOutput {
        let group_id = req.group_id.clone();
        let mut members = Vec::new();
        let mut removed = false;
        for m in &req.members {
            let group = self.consumer_group(&group_id).expect("consumer group");
            let result = match &m.group_instance_id {
                None => group.members.get(&m.member_id).ok_or(UNKNOWN_MEMBER_ID),
                Some(instance) => group
                    .static_member(instance)
                    .ok_or(UNKNOWN_MEMBER_ID)
                    .and_then(|member| {
                        // Admin clients remove static members by instance id alone.
                        if !m.member_id.is_empty() && member.member_id != m.member_id {
                            Err(FENCED_INSTANCE_ID)
                        } else {
                            Ok(member)
                        }
                    }),
            }
            .and_then(|member| {
                if member.uses_classic_protocol() {
                    Ok(member.member_id.clone())
                } else {
                    Err(UNKNOWN_MEMBER_ID)
                }
            });
            match result {
                Ok(member_id) => {
                    self.remove_member_records(&group_id, &member_id, out);
                    self.cancel_consumer_member_timers(&group_id, &member_id);
                    removed = true;
                    members.push(LeaveGroupMemberOutput {
                        member_id,
                        group_instance_id: m.group_instance_id.clone(),
                        error_code: NONE,
                    });
                }
                Err(code) => members.push(LeaveGroupMemberOutput {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    error_code: code,
                }),
            }
        }
        if removed {
            let group = self.consumer_group(&group_id).expect("consumer group");
            let hash = metadata_hash(&group.subscribed_topic_names(), &self.topics);
            let epoch = group.group_epoch + 1;
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupMetadata {
                    group_id: group_id.clone(),
                    value: Some((epoch, hash)),
                },
            );
        }
        LeaveGroupOutput {
            error_code: NONE,
            members,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Upgrade: classic group -> consumer group

    /// Kafka's `validateOnlineUpgrade` + `convertToConsumerGroup`: a KIP-848 member joins a
    /// non-empty classic group. Every classic member keeps its last assignment as its current
    /// and target assignment at the classic generation; parked JoinGroup/SyncGroup requests
    /// are told REBALANCE_IN_PROGRESS so those members rejoin the consumer group.
    pub(super) fn upgrade_to_consumer_group(
        &mut self,
        group_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) -> HbResult<()> {
        let Some(Group::Classic(classic)) = self.groups.get(group_id) else {
            return fail(GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."));
        };
        let cannot = |why: &str| {
            fail(
                GROUP_ID_NOT_FOUND,
                format!("Cannot upgrade classic group {group_id} to consumer group because {why}."),
            )
        };
        if !self.config.consumer_migration_policy.is_upgrade_enabled() {
            return cannot("online upgrade is disabled");
        }
        if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return cannot("the group does not use the consumer embedded protocol");
        }
        if classic.members.len() > self.config.consumer_max_size {
            return cannot("the group size exceeds the consumer group maximum size");
        }
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        let generation = classic.generation_id;
        let mut members = Vec::new();
        for m in classic.members.values() {
            let Some(assignment) = decode_assignment(&m.assignment) else {
                return cannot("the embedded consumer protocol is malformed");
            };
            if assignment.user_data.as_ref().is_some_and(|u| !u.is_empty()) {
                return cannot("an unsupported custom assignor is in use");
            }
            let metadata = if m.protocols.len() == 1 {
                m.protocols[0].1.clone()
            } else {
                m.metadata(&protocol)
            };
            let Some(subscription) = decode_subscription(&metadata) else {
                return cannot("the embedded consumer protocol is malformed");
            };
            let mut assigned = Assignment::new();
            for (topic, partitions) in &assignment.partitions {
                if let Some(id) = self.topics.id_of(topic) {
                    assigned
                        .entry(id)
                        .or_default()
                        .extend(partitions.iter().copied());
                }
            }
            let mut topics = subscription.topics.clone();
            topics.sort();
            topics.dedup();
            let mut member = ConsumerMember::new(&m.member_id);
            member.instance_id = m.group_instance_id.clone();
            member.rack_id = subscription.rack_id.clone();
            member.client_id = m.client_id.clone();
            member.client_host = m.client_host.clone();
            member.subscribed_topic_names = topics;
            member.rebalance_timeout_ms = m.rebalance_timeout_ms;
            member.member_epoch = generation;
            member.previous_member_epoch = generation;
            member.state = MemberState::Stable;
            member.assignment_epochs = assigned
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| ((*t, *p), generation)))
                .collect();
            member.assigned = assigned;
            member.classic = Some(ClassicMemberMetadata {
                session_timeout_ms: m.session_timeout_ms,
                supported_protocols: m.protocols.clone(),
            });
            members.push(member);
        }

        // Validated: the conversion cannot fail from here on.
        let Some(Group::Classic(classic)) = self.groups.get_mut(group_id) else {
            unreachable!("checked above");
        };
        let mut parked = Vec::new();
        for m in classic.members.values_mut() {
            if let Some(join) = m.awaiting_join.take() {
                parked.push((join.request_id, true, m.member_id.clone()));
            }
            if let Some(sync) = m.awaiting_sync.take() {
                parked.push((sync, false, m.member_id.clone()));
            }
        }
        let classic_ids: Vec<String> = classic
            .members
            .keys()
            .chain(classic.pending_members.iter())
            .cloned()
            .collect();
        for (request_id, is_join, member_id) in parked {
            if is_join {
                join_error(request_id, REBALANCE_IN_PROGRESS, &member_id, out);
            } else {
                out.respond(
                    request_id,
                    GroupResponse::SyncGroup(SyncGroupOutput::error(REBALANCE_IN_PROGRESS)),
                );
            }
        }
        for member_id in &classic_ids {
            self.timers.cancel(&TimerKey::ClassicHeartbeat {
                group_id: group_id.to_string(),
                member_id: member_id.clone(),
            });
        }
        self.timers.cancel(&TimerKey::ClassicJoin {
            group_id: group_id.to_string(),
        });
        self.timers.cancel(&TimerKey::ClassicSync {
            group_id: group_id.to_string(),
        });

        let g = || group_id.to_string();
        self.emit(
            out,
            CoordinatorRecord::GroupMetadata {
                group_id: g(),
                value: None,
            },
        );
        for m in &members {
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupMemberMetadata {
                    group_id: g(),
                    member_id: m.member_id.clone(),
                    value: Some(m.metadata_value()),
                },
            );
        }
        let names: BTreeSet<String> = members
            .iter()
            .flat_map(|m| m.subscribed_topic_names.iter().cloned())
            .collect();
        let hash = metadata_hash(&names, &self.topics);
        self.emit(
            out,
            CoordinatorRecord::ConsumerGroupMetadata {
                group_id: g(),
                value: Some((generation, hash)),
            },
        );
        for m in &members {
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                    group_id: g(),
                    member_id: m.member_id.clone(),
                    value: Some(super::consumer_group::to_topic_partitions(&m.assigned)),
                },
            );
        }
        self.emit(
            out,
            // No assignment time (Kafka's conversion): the member that triggered the upgrade
            // gets a new target at once, whatever the assignment interval.
            CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
                group_id: g(),
                value: Some((generation, 0)),
            },
        );
        for m in &members {
            self.emit(
                out,
                CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                    group_id: g(),
                    member_id: m.member_id.clone(),
                    value: Some(m.assignment_value()),
                },
            );
        }
        for m in &members {
            self.schedule_consumer_session(group_id, &m.member_id, now_ms);
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Downgrade: consumer group -> classic group

    /// Kafka's `validateOnlineDowngradeWithFencedMembers` + `convertToClassicGroup`: when the
    /// member leaving is the last one using the KIP-848 protocol, the group (without it)
    /// becomes a classic group at the group epoch as generation, each member keeping its
    /// current assignment, and a rebalance starts. True when the group was converted.
    pub(super) fn maybe_downgrade_to_classic(
        &mut self,
        group_id: &str,
        leaving_member_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) -> bool {
        self.downgrade_to_classic(group_id, Some(leaving_member_id), true, now_ms, out)
    }

    /// The conversion itself: the group without `leaving` becomes classic if every member
    /// left uses the classic protocol and the policy allows it; `rebalance` starts a new
    /// generation (a member left, or a replacing member changed the subscription).
    fn downgrade_to_classic(
        &mut self,
        group_id: &str,
        leaving: Option<&str>,
        rebalance: bool,
        now_ms: i64,
        out: &mut Output,
    ) -> bool {
        let Some(group) = self.consumer_group(group_id) else {
            return false;
        };
        let remaining: Vec<&ConsumerMember> = group
            .members
            .values()
            .filter(|m| Some(m.member_id.as_str()) != leaving)
            .collect();
        if remaining.is_empty()
            || !remaining.iter().all(|m| m.uses_classic_protocol())
            || !self.config.consumer_migration_policy.is_downgrade_enabled()
            || remaining.len() > self.config.group_max_size
        {
            return false;
        }
        let mut classic = ClassicGroup::new(group_id, now_ms);
        classic.generation_id = group.group_epoch;
        classic.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        for m in &remaining {
            let c = m.classic.as_ref().expect("classic member");
            classic.add_member(ClassicMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: c.session_timeout_ms,
                protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
                protocols: c.supported_protocols.clone(),
                assignment: self.classic_member_assignment(m),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
            });
        }
        classic.protocol_name = classic.select_protocol();
        classic.state = ClassicGroupState::Stable;
        classic.previous_state = ClassicGroupState::Stable;
        let member_ids: Vec<String> = group.members.keys().cloned().collect();
        let sessions: Vec<(String, i32)> = classic
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.session_timeout_ms))
            .collect();

        let tombstones = group.tombstones();
        for r in tombstones {
            self.emit(out, r);
        }
        for member_id in &member_ids {
            self.cancel_consumer_member_timers(group_id, member_id);
        }
        // The classic state is set directly (as Kafka does); the record persists it.
        out.records.push(CoordinatorRecord::GroupMetadata {
            group_id: group_id.to_string(),
            value: Some(classic.to_record_value()),
        });
        self.groups
            .insert(group_id.to_string(), Group::Classic(classic));
        for (member_id, timeout_ms) in sessions {
            self.timers.schedule(
                TimerKey::ClassicHeartbeat {
                    group_id: group_id.to_string(),
                    member_id,
                },
                now_ms + timeout_ms as i64,
                TimerAction::ClassicHeartbeatExpired,
            );
        }
        if rebalance {
            self.prepare_rebalance(group_id, now_ms, out);
        }
        true
    }
}
