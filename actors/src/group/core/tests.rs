//! State-machine tests of the shard: every classic and KIP-848 transition and error code the
//! coordinator returns, offsets, and replay (state rebuilt from the records equals the state
//! that wrote them).

use std::collections::BTreeMap;

use bytes::Bytes;
use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

use super::api::*;
use super::classic_group::{encode_consumer_subscription_v0, ClassicGroupState};
use super::consumer_group::{ConsumerGroupState, MemberState};
use super::records::CoordinatorRecord;
use super::shard::{Group, GroupCoordinatorShard};
use super::GroupCoordinatorConfig;

pub(super) struct Harness {
    pub shard: GroupCoordinatorShard,
    pub now: i64,
    next_id: RequestId,
    pub responses: BTreeMap<RequestId, GroupResponse>,
    pub log: Vec<CoordinatorRecord>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_config(GroupCoordinatorConfig::default())
    }

    pub fn with_config(config: GroupCoordinatorConfig) -> Self {
        let mut shard = GroupCoordinatorShard::new(config, 7);
        let mut topics = TopicsView::new();
        topics.upsert("t1", tid(1), 6);
        topics.upsert("t2", tid(2), 3);
        topics.upsert("other", tid(9), 2);
        shard.set_topics(topics);
        Harness {
            shard,
            now: 1_000_000,
            next_id: 0,
            responses: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    fn absorb(&mut self, out: Output) {
        self.log.extend(out.records);
        for (id, r) in out.responses {
            assert!(
                self.responses.insert(id, r).is_none(),
                "request {id} answered twice"
            );
        }
    }

    pub fn send(&mut self, req: GroupRequest) -> RequestId {
        self.next_id += 1;
        let out = self.shard.handle(self.next_id, req, self.now);
        self.absorb(out);
        self.next_id
    }

    pub fn take(&mut self, id: RequestId) -> Option<GroupResponse> {
        self.responses.remove(&id)
    }

    /// Moves the clock forward, firing each timer at its own deadline.
    pub fn advance(&mut self, ms: i64) {
        let target = self.now + ms;
        while let Some(deadline) = self.shard.next_deadline().filter(|d| *d <= target) {
            self.now = self.now.max(deadline);
            let out = self.shard.fire_timers(self.now);
            self.absorb(out);
        }
        self.now = target;
    }

    // ---- classic helpers

    pub fn join(
        &mut self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        protocols: &[(&str, &[u8])],
    ) -> RequestId {
        self.join_v(group, member_id, instance, protocols, 7)
    }

    pub fn join_v(
        &mut self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        protocols: &[(&str, &[u8])],
        version: i16,
    ) -> RequestId {
        self.send(GroupRequest::JoinGroup(JoinGroupInput {
            api_version: version,
            group_id: group.into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            member_id: member_id.into(),
            group_instance_id: instance.map(Into::into),
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|(n, m)| (n.to_string(), Bytes::copy_from_slice(m)))
                .collect(),
            reason: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
        }))
    }

    pub fn join_resp(&mut self, id: RequestId) -> JoinGroupOutput {
        match self.take(id) {
            Some(GroupResponse::JoinGroup(r)) => r,
            other => panic!("expected a JoinGroup response for {id}, got {other:?}"),
        }
    }

    /// Two-step dynamic join (KIP-394); returns the parked request and the member id.
    pub fn join_dynamic(&mut self, group: &str) -> (RequestId, String) {
        let first = self.join(group, "", None, &[("range", b"m")]);
        let r = self.join_resp(first);
        assert_eq!(r.error_code, MEMBER_ID_REQUIRED);
        let id = self.join(group, &r.member_id, None, &[("range", b"m")]);
        (id, r.member_id)
    }

    pub fn sync(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        assignments: &[(&str, &[u8])],
    ) -> RequestId {
        self.send(GroupRequest::SyncGroup(SyncGroupInput {
            api_version: 5,
            group_id: group.into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::copy_from_slice(a)))
                .collect(),
        }))
    }

    pub fn sync_resp(&mut self, id: RequestId) -> SyncGroupOutput {
        match self.take(id) {
            Some(GroupResponse::SyncGroup(r)) => r,
            other => panic!("expected a SyncGroup response, got {other:?}"),
        }
    }

    pub fn heartbeat(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        instance: Option<&str>,
    ) -> i16 {
        let id = self.send(GroupRequest::Heartbeat(HeartbeatInput {
            group_id: group.into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: instance.map(Into::into),
        }));
        match self.take(id) {
            Some(GroupResponse::Heartbeat { error_code }) => error_code,
            other => panic!("{other:?}"),
        }
    }

    pub fn classic(&self, group: &str) -> &super::classic_group::ClassicGroup {
        match self.shard.group(group) {
            Some(Group::Classic(g)) => g,
            other => panic!("no classic group {group}: {other:?}"),
        }
    }

    pub fn consumer(&self, group: &str) -> &super::consumer_group::ConsumerGroup {
        match self.shard.group(group) {
            Some(Group::Consumer(g)) => g,
            other => panic!("no consumer group {group}: {other:?}"),
        }
    }

    /// A stable one-member classic group; returns the member id.
    pub fn stable_single(&mut self, group: &str) -> String {
        let (id, member) = self.join_dynamic(group);
        self.advance(3_000);
        let r = self.join_resp(id);
        assert_eq!(r.error_code, NONE);
        let s = self.sync(group, &member, r.generation_id, &[(&member, b"assign")]);
        assert_eq!(self.sync_resp(s).error_code, NONE);
        member
    }

    // ---- consumer helpers

    pub fn cg(&mut self, req: ConsumerGroupHeartbeatInput) -> ConsumerGroupHeartbeatOutput {
        let id = self.send(GroupRequest::ConsumerGroupHeartbeat(req));
        match self.take(id) {
            Some(GroupResponse::ConsumerGroupHeartbeat(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    pub fn cg_join(
        &mut self,
        group: &str,
        member: &str,
        topics: &[&str],
    ) -> ConsumerGroupHeartbeatOutput {
        self.cg(cg_join_req(group, member, topics))
    }

    /// A steady-state heartbeat reporting the partitions the member owns.
    pub fn cg_beat(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
        owned: &[(Uuid, Vec<i32>)],
    ) -> ConsumerGroupHeartbeatOutput {
        self.cg(ConsumerGroupHeartbeatInput {
            api_version: 1,
            group_id: group.into(),
            member_id: member.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            topic_partitions: Some(owned.to_vec()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..Default::default()
        })
    }

    pub fn commit(&mut self, req: OffsetCommitInput) -> Vec<(i32, i16)> {
        let id = self.send(GroupRequest::OffsetCommit(req));
        match self.take(id) {
            Some(GroupResponse::OffsetCommit { topics }) => {
                topics.into_iter().flat_map(|t| t.partitions).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    pub fn fetch(
        &mut self,
        groups: Vec<OffsetFetchGroupInput>,
        require_stable: bool,
    ) -> Vec<FetchedGroup> {
        let id = self.send(GroupRequest::OffsetFetch {
            groups,
            require_stable,
        });
        match self.take(id) {
            Some(GroupResponse::OffsetFetch { groups }) => groups,
            other => panic!("{other:?}"),
        }
    }

    /// A fresh shard loaded from this one's log.
    pub fn replayed(&self) -> GroupCoordinatorShard {
        let mut shard = GroupCoordinatorShard::new(self.shard.config().clone(), 1);
        shard.set_topics(self.shard.topics().clone());
        for r in &self.log {
            shard.replay(r);
        }
        shard
    }
}

pub(super) fn tid(n: u8) -> Uuid {
    Uuid([n; 16])
}

pub(super) fn cg_join_req(
    group: &str,
    member: &str,
    topics: &[&str],
) -> ConsumerGroupHeartbeatInput {
    ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn commit_req(
    group: &str,
    member: &str,
    generation: i32,
    topic: &str,
    partition: i32,
    offset: i64,
) -> OffsetCommitInput {
    OffsetCommitInput {
        api_version: 9,
        group_id: group.into(),
        generation_id_or_member_epoch: generation,
        member_id: member.into(),
        topics: vec![CommitTopicInput {
            name: topic.into(),
            topic_id: Uuid::ZERO,
            partitions: vec![CommitPartitionInput {
                partition_index: partition,
                committed_offset: offset,
                committed_leader_epoch: 3,
                committed_metadata: Some("meta".into()),
            }],
        }],
        ..Default::default()
    }
}

fn fetch_group(group: &str, topics: Option<Vec<(&str, Vec<i32>)>>) -> OffsetFetchGroupInput {
    OffsetFetchGroupInput {
        group_id: group.into(),
        member_id: None,
        member_epoch: -1,
        topics: topics.map(|t| t.into_iter().map(|(n, p)| (n.to_string(), p)).collect()),
    }
}

fn count(tp: &Option<Vec<(Uuid, Vec<i32>)>>) -> usize {
    tp.as_ref()
        .map_or(0, |v| v.iter().map(|(_, p)| p.len()).sum())
}

mod classic_tests;
mod consumer_tests;
mod mixed_tests;
mod offset_tests;
mod replay_tests;
mod share_tests;

/// A log with every record type a shard writes (for the byte codec tests).
pub(crate) fn busy_log() -> Vec<CoordinatorRecord> {
    let mut h = Harness::new();
    let m = h.stable_single("classic");
    h.commit(commit_req("classic", &m, 1, "t1", 0, 10));
    let mut expiring = commit_req("simple", "", -1, "t2", 1, 3);
    expiring.api_version = 2;
    expiring.retention_time_ms = 5_000;
    h.commit(expiring);
    h.cg(ConsumerGroupHeartbeatInput {
        subscribed_topic_regex: Some("t.*".into()),
        instance_id: Some("i".into()),
        rack_id: Some("r".into()),
        server_assignor: Some("range".into()),
        ..cg_join_req("cg", "m1", &["other"])
    });
    h.cg_join("cg", "m2", &["t1"]);
    let r = h.cg_beat("cg", "m1", 1, &[(tid(1), (0..6).collect())]);
    let _ = r;
    for member in ["m1", "m2"] {
        h.cg(ConsumerGroupHeartbeatInput {
            api_version: 1,
            group_id: "cg".into(),
            member_id: member.into(),
            member_epoch: -1,
            instance_id: (member == "m1").then(|| "i".to_string()),
            ..Default::default()
        });
    }
    let _ = h.send(GroupRequest::DeleteGroups {
        group_ids: vec!["cg".into()],
    });
    h.log
}
