//! A classic group's in-memory state (Kafka's `ClassicGroup` and `ClassicGroupMember`): members,
//! generation, protocol, the parked JoinGroup/SyncGroup requests. The transitions are driven by
//! `classic.rs`.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::api::{JoinGroupResponseMember, RequestId};
use super::records::{GroupMetadataMember, GroupMetadataValue};

/// Kafka's `ClassicGroupState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicGroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl ClassicGroupState {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            ClassicGroupState::Empty => "Empty",
            ClassicGroupState::PreparingRebalance => "PreparingRebalance",
            ClassicGroupState::CompletingRebalance => "CompletingRebalance",
            ClassicGroupState::Stable => "Stable",
            ClassicGroupState::Dead => "Dead",
        }
    }
}

/// A parked JoinGroup: answered when the join phase completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingJoin {
    pub request_id: RequestId,
    pub api_version: i16,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClassicMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub awaiting_join: Option<PendingJoin>,
    pub awaiting_sync: Option<RequestId>,
    /// Joined but has not yet been part of a completed join phase.
    pub is_new: bool,
}

impl ClassicMember {
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Same protocols, same metadata, same order (Kafka's `ClassicGroupMember.matches`).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Kafka's `hasSatisfiedHeartbeat`: a member parked in a rebalance needs no heartbeat.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        if self.is_new {
            false
        } else {
            self.awaiting_join.is_some() || self.awaiting_sync.is_some()
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: ClassicGroupState,
    pub previous_state: ClassicGroupState,
    pub state_timestamp_ms: i64,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation_id: i32,
    pub leader_id: Option<String>,
    pub members: BTreeMap<String, ClassicMember>,
    /// group.instance.id -> member id
    pub static_members: BTreeMap<String, String>,
    /// Dynamic members that got MEMBER_ID_REQUIRED and have not rejoined yet.
    pub pending_members: BTreeSet<String>,
    /// Members that got their JoinGroup response but have not sent SyncGroup.
    pub pending_sync_members: BTreeSet<String>,
    /// A new member joined during the initial rebalance delay: extend it.
    pub new_member_added: bool,
}

impl ClassicGroup {
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: ClassicGroupState::Empty,
            previous_state: ClassicGroupState::Empty,
            state_timestamp_ms: now_ms,
            protocol_type: None,
            protocol_name: None,
            generation_id: 0,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeSet::new(),
            pending_sync_members: BTreeSet::new(),
            new_member_added: false,
        }
    }

    pub fn is(&self, state: ClassicGroupState) -> bool {
        self.state == state
    }

    pub fn transition_to(&mut self, state: ClassicGroupState, now_ms: i64) {
        self.previous_state = self.state;
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    pub fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            ClassicGroupState::Stable
                | ClassicGroupState::CompletingRebalance
                | ClassicGroupState::Empty
        )
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.static_members.get(instance_id).map(String::as_str)
    }

    pub fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join() && self.pending_members.is_empty()
    }

    /// Largest rebalance timeout among members (the join phase waits that long).
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    pub fn add_member(&mut self, member: ClassicMember) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        if let Some(instance_id) = &member.group_instance_id {
            self.static_members
                .insert(instance_id.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member; a new leader is picked among the rest (Kafka picks any member).
    pub fn remove_member(&mut self, member_id: &str) -> Option<ClassicMember> {
        let member = self.members.remove(member_id)?;
        if let Some(instance_id) = &member.group_instance_id {
            if self.static_members.get(instance_id).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance_id);
            }
        }
        self.pending_sync_members.remove(member_id);
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        Some(member)
    }

    /// If the leader has not rejoined, hands leadership to a member that has. False when no
    /// member rejoined.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        if let Some(leader) = self.leader_id.as_ref().and_then(|l| self.members.get(l)) {
            if leader.awaiting_join.is_some() {
                return true;
            }
            match self
                .members
                .values()
                .find(|m| m.awaiting_join.is_some())
                .map(|m| m.member_id.clone())
            {
                Some(new_leader) => {
                    self.leader_id = Some(new_leader);
                    true
                }
                None => false,
            }
        } else {
            !self.members.is_empty() && self.members.values().any(|m| m.awaiting_join.is_some())
        }
    }

    /// Protocols every member supports.
    pub fn candidate_protocols(&self) -> Vec<String> {
        let mut iter = self.members.values();
        let Some(first) = iter.next() else {
            return Vec::new();
        };
        let mut candidates: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in iter {
            candidates.retain(|c| m.protocols.iter().any(|(n, _)| n == c));
        }
        candidates
    }

    /// Kafka's `supportsProtocols`: a joining member must share the protocol type and at least
    /// one protocol with every current member.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.is(ClassicGroupState::Empty) || self.members.is_empty() {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols.iter().any(|(name, _)| {
                    self.members
                        .values()
                        .all(|m| m.protocols.iter().any(|(n, _)| n == name))
                })
        }
    }

    /// Each member votes for its most preferred candidate; most votes wins (ties by name).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (name, count) in votes {
            if best.is_none() || best.is_some_and(|(_, c)| count > c) {
                best = Some((name, count));
            }
        }
        best.map(|(n, _)| n.to_string())
    }

    /// The member list the leader receives: metadata for the chosen protocol.
    pub fn join_response_members(&self) -> Vec<JoinGroupResponseMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinGroupResponseMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    /// Topics the members subscribe to, when the group uses the consumer protocol and every
    /// member's subscription parses (Kafka's `ClassicGroup.subscribedTopics`).
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(parse_consumer_subscription_topics(&m.metadata(protocol))?);
        }
        Some(topics)
    }

    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        self.subscribed_topics()
            .is_some_and(|topics| topics.contains(topic))
    }

    /// The `GroupMetadataValue` this group persists.
    pub fn to_record_value(&self) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| GroupMetadataMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Rebuilds a group from its record (Kafka's `ClassicGroup.fromRecord`): Empty without
    /// members, Stable with them.
    pub fn from_record(group_id: &str, value: &GroupMetadataValue) -> Self {
        let mut group = ClassicGroup::new(group_id, value.current_state_timestamp_ms);
        group.protocol_type = if value.protocol_type.is_empty() && value.members.is_empty() {
            None
        } else {
            Some(value.protocol_type.clone())
        };
        group.protocol_name = value.protocol.clone();
        group.generation_id = value.generation;
        group.leader_id = value.leader.clone();
        for m in &value.members {
            let member = ClassicMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocol_type: value.protocol_type.clone(),
                protocols: vec![(
                    value.protocol.clone().unwrap_or_default(),
                    m.subscription.clone(),
                )],
                assignment: m.assignment.clone(),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
            };
            if let Some(instance_id) = &m.group_instance_id {
                group
                    .static_members
                    .insert(instance_id.clone(), m.member_id.clone());
            }
            group.members.insert(m.member_id.clone(), member);
        }
        group.state = if group.members.is_empty() {
            ClassicGroupState::Empty
        } else {
            ClassicGroupState::Stable
        };
        group.previous_state = group.state;
        group
    }
}

/// The topic names of a `ConsumerProtocolSubscription` (any version: v0 starts with the
/// topics, later versions only append fields). None if it does not parse.
pub fn parse_consumer_subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut buf = metadata;
    let take = |buf: &mut &[u8], n: usize| -> Option<Vec<u8>> {
        if buf.len() < n {
            return None;
        }
        let (head, tail) = buf.split_at(n);
        *buf = tail;
        Some(head.to_vec())
    };
    let version = i16::from_be_bytes(take(&mut buf, 2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let count = i32::from_be_bytes(take(&mut buf, 4)?.try_into().ok()?);
    if count < 0 || count as usize > buf.len() / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = i16::from_be_bytes(take(&mut buf, 2)?.try_into().ok()?);
        if len < 0 {
            return None;
        }
        topics.push(String::from_utf8(take(&mut buf, len as usize)?).ok()?);
    }
    Some(topics)
}

/// Encodes a v0 `ConsumerProtocolSubscription` (tests and tools).
pub fn encode_consumer_subscription_v0(topics: &[&str]) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes()); // null user data
    Bytes::from(out)
}
