//! Mixed groups (KIP-848 online migration): classic members (JoinGroup / SyncGroup /
//! Heartbeat / LeaveGroup) inside a consumer group, the upgrade of a classic group when a
//! KIP-848 member joins, and the downgrade when the last KIP-848 member leaves.

use super::super::config::ConsumerGroupMigrationPolicy;
use super::super::consumer_protocol::{
    decode_assignment, encode_assignment, encode_subscription, ConsumerSubscription,
};
use super::*;

fn subscription(topics: &[&str], owned: &[(&str, Vec<i32>)]) -> Vec<u8> {
    encode_subscription(
        1,
        &ConsumerSubscription {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned_partitions: owned
                .iter()
                .map(|(t, ps)| (t.to_string(), ps.clone()))
                .collect(),
            ..Default::default()
        },
    )
    .to_vec()
}

/// A classic JoinGroup with a real consumer-protocol subscription.
fn classic_join(
    h: &mut Harness,
    group: &str,
    member: &str,
    owned: &[(&str, Vec<i32>)],
) -> RequestId {
    let sub = subscription(&["t1"], owned);
    h.join(
        group,
        member,
        None,
        &[("range", &sub), ("roundrobin", &sub)],
    )
}

/// Two-step classic join into a consumer group; returns the response.
fn classic_join_new(h: &mut Harness, group: &str) -> JoinGroupOutput {
    let id = classic_join(h, group, "", &[]);
    let r = h.join_resp(id);
    assert_eq!(r.error_code, MEMBER_ID_REQUIRED);
    let id = classic_join(h, group, &r.member_id, &[]);
    h.join_resp(id)
}

fn sync_to(h: &mut Harness, group: &str, member: &str, generation: i32) -> SyncGroupOutput {
    let id = h.send(GroupRequest::SyncGroup(SyncGroupInput {
        api_version: 5,
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: Vec::new(),
    }));
    h.sync_resp(id)
}

fn assigned_t1(bytes: &Bytes) -> Vec<i32> {
    let a = decode_assignment(bytes).expect("a consumer protocol assignment");
    a.partitions
        .into_iter()
        .filter(|(t, _)| t == "t1")
        .flat_map(|(_, ps)| ps)
        .collect()
}

fn all_t1() -> Vec<(Uuid, Vec<i32>)> {
    vec![(tid(1), (0..6).collect())]
}

#[test]
fn classic_member_joins_a_consumer_group_and_gets_its_share() {
    let mut h = Harness::new();
    let r = h.cg_join("cg", "m1", &["t1"]);
    assert_eq!(r.member_epoch, 2);
    // Past the assignment interval: the classic join gets a new target at once.
    h.advance(1_000);

    let j = classic_join_new(&mut h, "cg");
    assert_eq!(j.error_code, NONE);
    // The member epoch is the generation; no leader, no member list: the broker assigns.
    assert_eq!(j.generation_id, 3);
    assert_eq!(j.leader, "");
    assert!(j.members.is_empty());
    assert_eq!(j.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    let classic_id = j.member_id.clone();
    let g = h.consumer("cg");
    assert_eq!(g.group_epoch, 3);
    let m = &g.members[&classic_id];
    let c = m.classic.as_ref().expect("a classic member");
    assert_eq!(c.session_timeout_ms, 10_000);
    assert_eq!(c.supported_protocols.len(), 2);
    assert_eq!(m.subscribed_topic_names, vec!["t1".to_string()]);
    // Its partitions are still held by m1: nothing yet.
    assert_eq!(m.state, MemberState::UnreleasedPartitions);
    let s = sync_to(&mut h, "cg", &classic_id, 3);
    assert_eq!(s.error_code, NONE);
    assert_eq!(assigned_t1(&s.assignment), Vec::<i32>::new());
    // Waiting on partitions m1 holds: no need to rejoin yet.
    assert_eq!(h.heartbeat("cg", &classic_id, 3, None), NONE);

    // m1 is asked to revoke half and confirms.
    let r = h.cg_beat("cg", "m1", 2, &all_t1());
    assert_eq!(r.member_epoch, 2);
    let kept = r.assignment.clone().expect("revocation");
    let r = h.cg_beat("cg", "m1", 2, &kept);
    assert_eq!(r.member_epoch, 3);

    // The freed partitions make the classic member rejoin, then sync its share.
    assert_eq!(
        h.heartbeat("cg", &classic_id, 3, None),
        REBALANCE_IN_PROGRESS
    );
    let id = classic_join(&mut h, "cg", &classic_id, &[]);
    let j = h.join_resp(id);
    assert_eq!((j.error_code, j.generation_id), (NONE, 3));
    let s = sync_to(&mut h, "cg", &classic_id, 3);
    let mine = assigned_t1(&s.assignment);
    assert_eq!(mine.len(), 3);
    assert_eq!(h.heartbeat("cg", &classic_id, 3, None), NONE);
    assert_eq!(h.consumer("cg").state(), ConsumerGroupState::Stable);
    // The state rebuilt from the records keeps the member classic.
    let replayed = h.replayed();
    match replayed.group("cg") {
        Some(Group::Consumer(g)) => {
            assert_eq!(
                g.members[&classic_id],
                h.consumer("cg").members[&classic_id]
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn classic_requests_to_a_consumer_group_are_validated() {
    let mut h = Harness::new();
    h.cg_join("cg", "m1", &["t1"]);
    let j = classic_join_new(&mut h, "cg");
    let me = j.member_id.clone();

    assert_eq!(h.heartbeat("cg", &me, 1, None), ILLEGAL_GENERATION);
    assert_eq!(h.heartbeat("cg", "nobody", 2, None), UNKNOWN_MEMBER_ID);
    // A KIP-848 member cannot use the classic heartbeat.
    assert_eq!(h.heartbeat("cg", "m1", 1, None), UNKNOWN_MEMBER_ID);
    assert_eq!(sync_to(&mut h, "cg", &me, 7).error_code, ILLEGAL_GENERATION);
    let id = h.send(GroupRequest::SyncGroup(SyncGroupInput {
        api_version: 5,
        group_id: "cg".into(),
        generation_id: 2,
        member_id: me.clone(),
        protocol_name: Some("roundrobin".into()),
        ..Default::default()
    }));
    assert_eq!(h.sync_resp(id).error_code, INCONSISTENT_GROUP_PROTOCOL);

    // Another protocol type, or no protocol in common with the classic members.
    let id = h.send(GroupRequest::JoinGroup(JoinGroupInput {
        api_version: 7,
        group_id: "cg".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        member_id: "x".into(),
        protocol_type: "connect".into(),
        protocols: vec![("range".into(), Bytes::from(subscription(&["t1"], &[])))],
        ..Default::default()
    }));
    assert_eq!(h.join_resp(id).error_code, INCONSISTENT_GROUP_PROTOCOL);
    let sub = subscription(&["t1"], &[]);
    let id = h.join("cg", "x", None, &[("sticky", &sub)]);
    assert_eq!(h.join_resp(id).error_code, INCONSISTENT_GROUP_PROTOCOL);

    // Offsets: a classic member commits with its generation at any version.
    let mut c = commit_req("cg", &me, 2, "t1", 0, 5);
    c.api_version = 7;
    assert_eq!(h.commit(c.clone()), vec![(0, NONE)]);
    c.generation_id_or_member_epoch = 1;
    assert_eq!(h.commit(c), vec![(0, ILLEGAL_GENERATION)]);
}

#[test]
fn classic_members_leave_and_time_out_of_a_consumer_group() {
    let mut h = Harness::new();
    h.cg_join("cg", "m1", &["t1"]);
    let a = classic_join_new(&mut h, "cg").member_id;
    let b = classic_join_new(&mut h, "cg").member_id;
    let epoch = h.consumer("cg").group_epoch;

    let id = h.send(GroupRequest::LeaveGroup(LeaveGroupInput {
        group_id: "cg".into(),
        members: vec![
            LeaveGroupMemberInput {
                member_id: a.clone(),
                ..Default::default()
            },
            LeaveGroupMemberInput {
                member_id: "m1".into(), // not a classic member
                ..Default::default()
            },
        ],
    }));
    match h.take(id) {
        Some(GroupResponse::LeaveGroup(r)) => {
            let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
            assert_eq!(codes, vec![NONE, UNKNOWN_MEMBER_ID]);
        }
        other => panic!("{other:?}"),
    }
    let g = h.consumer("cg");
    assert!(!g.members.contains_key(&a));
    assert_eq!(g.group_epoch, epoch + 1);

    // b syncs but then stops heartbeating: fenced after its own (classic) session timeout,
    // while the KIP-848 member keeps heartbeating.
    for _ in 0..4 {
        h.advance(3_000);
        let e = h.consumer("cg").members["m1"].member_epoch;
        h.cg_beat("cg", "m1", e, &[]);
    }
    assert!(!h.consumer("cg").members.contains_key(&b));
    assert_eq!(h.consumer("cg").group_epoch, epoch + 2);
}

#[test]
fn classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() {
    let mut h = Harness::new();
    h.cg_join("cg", "m1", &["t1"]);
    h.advance(1_000);
    let me = classic_join_new(&mut h, "cg").member_id;
    // Another member joins (past the assignment interval): the classic member is told to
    // rejoin ...
    h.advance(1_000);
    h.cg_join("cg", "m2", &["t1"]);
    assert_eq!(h.heartbeat("cg", &me, 3, None), REBALANCE_IN_PROGRESS);
    // ... and keeps heartbeating without rejoining: its 30 s rebalance timeout fences it.
    for _ in 0..12 {
        h.advance(3_000);
        let _ = h.heartbeat("cg", &me, 3, None);
        for m in ["m1", "m2"] {
            let e = h.consumer("cg").members[m].member_epoch;
            h.cg_beat("cg", m, e, &[]);
        }
    }
    assert!(!h.consumer("cg").members.contains_key(&me));
    assert_eq!(h.heartbeat("cg", &me, 3, None), UNKNOWN_MEMBER_ID);
}

/// A stable classic group "g" whose one member owns all of t1; returns its member id.
fn stable_classic_group(h: &mut Harness) -> String {
    let sub = subscription(&["t1"], &[]);
    let first = h.join("g", "", None, &[("range", &sub)]);
    let member = h.join_resp(first).member_id;
    let id = h.join("g", &member, None, &[("range", &sub)]);
    h.advance(3_000);
    let r = h.join_resp(id);
    assert_eq!((r.error_code, r.generation_id), (NONE, 1));
    let assignment = encode_assignment(1, &[("t1".into(), (0..6).collect())]);
    let s = h.sync("g", &member, 1, &[(&member, &assignment)]);
    assert_eq!(h.sync_resp(s).error_code, NONE);
    member
}

#[test]
fn kip848_member_upgrades_a_classic_group_and_its_leave_downgrades_it() {
    let mut h = Harness::new();
    let classic_id = stable_classic_group(&mut h);

    let before = h.log.len();
    let r = h.cg_join("g", "m1", &["t1"]);
    assert_eq!(r.error_code, NONE);
    // The classic group's record is deleted and the consumer group written in its place.
    assert_eq!(
        h.log[before],
        CoordinatorRecord::GroupMetadata {
            group_id: "g".into(),
            value: None
        }
    );
    let g = h.consumer("g");
    assert_eq!(g.group_epoch, 2);
    let m = &g.members[&classic_id];
    assert!(m.uses_classic_protocol());
    assert_eq!(m.member_epoch, 1);
    assert_eq!(m.assigned[&tid(1)].len(), 6);
    // The newcomer waits for the classic member to release its half.
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&r.assignment), 0);
    // The converted group is exactly what its records rebuild.
    match h.replayed().group("g") {
        Some(Group::Consumer(g)) => assert_eq!(g, h.consumer("g")),
        other => panic!("{other:?}"),
    }

    // The classic member is told to rejoin; as an eager member it owns nothing when it does.
    assert_eq!(
        h.heartbeat("g", &classic_id, 1, None),
        REBALANCE_IN_PROGRESS
    );
    let id = classic_join(&mut h, "g", &classic_id, &[]);
    let j = h.join_resp(id);
    assert_eq!((j.error_code, j.generation_id), (NONE, 2));
    let s = sync_to(&mut h, "g", &classic_id, 2);
    assert_eq!(assigned_t1(&s.assignment).len(), 3);
    let r = h.cg_beat("g", "m1", 2, &[]);
    assert_eq!(count(&r.assignment), 3);
    assert_eq!(h.consumer("g").state(), ConsumerGroupState::Stable);

    // The KIP-848 member leaves: the group is classic again, rebalancing at the group
    // epoch as its generation, and the classic member keeps its partitions until then.
    let before = h.log.len();
    let r = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: -1,
        ..Default::default()
    });
    assert_eq!(r.error_code, NONE);
    let c = h.classic("g");
    assert_eq!(c.state, ClassicGroupState::PreparingRebalance);
    assert_eq!(c.generation_id, 2);
    assert_eq!(c.protocol_name.as_deref(), Some("range"));
    assert_eq!(c.members.len(), 1);
    assert_eq!(assigned_t1(&c.members[&classic_id].assignment).len(), 3);
    assert!(matches!(
        h.log.last(),
        Some(CoordinatorRecord::GroupMetadata { value: Some(_), .. })
    ));
    assert!(h.log[before..].iter().any(|r| matches!(
        r,
        CoordinatorRecord::ConsumerGroupMetadata { value: None, .. }
    )));

    // It rejoins and, alone, becomes the leader of the next generation.
    assert_eq!(
        h.heartbeat("g", &classic_id, 2, None),
        REBALANCE_IN_PROGRESS
    );
    let sub = subscription(&["t1"], &[]);
    let id = h.join("g", &classic_id, None, &[("range", &sub)]);
    let j = h.join_resp(id);
    assert_eq!((j.error_code, j.generation_id), (NONE, 3));
    assert_eq!(j.leader, classic_id);
}

#[test]
fn upgrade_follows_the_migration_policy() {
    let mut h = Harness::with_config(GroupCoordinatorConfig {
        consumer_migration_policy: ConsumerGroupMigrationPolicy::Downgrade,
        ..Default::default()
    });
    stable_classic_group(&mut h);
    let r = h.cg_join("g", "m1", &["t1"]);
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);
    assert!(r
        .error_message
        .unwrap()
        .contains("online upgrade is disabled"));
    assert_eq!(h.classic("g").state, ClassicGroupState::Stable);

    // A classic group of another protocol type is never upgraded.
    let mut h = Harness::new();
    h.send(GroupRequest::JoinGroup(JoinGroupInput {
        api_version: 3,
        group_id: "c".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "connect".into(),
        protocols: vec![("default".into(), Bytes::from_static(b"x"))],
        ..Default::default()
    }));
    let r = h.cg_join("c", "m1", &["t1"]);
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);
}

#[test]
fn downgrade_follows_the_migration_policy() {
    let mut h = Harness::with_config(GroupCoordinatorConfig {
        consumer_migration_policy: ConsumerGroupMigrationPolicy::Upgrade,
        ..Default::default()
    });
    let classic_id = stable_classic_group(&mut h);
    h.cg_join("g", "m1", &["t1"]);
    h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: -1,
        ..Default::default()
    });
    // Still a consumer group, now with only its classic member.
    let g = h.consumer("g");
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec![&classic_id]);
}

#[test]
fn a_reloaded_mixed_group_keeps_its_classic_members_and_their_session_timeout() {
    let mut h = Harness::new();
    h.cg_join("cg", "m1", &["t1"]);
    let me = classic_join_new(&mut h, "cg").member_id;
    let mut replayed = h.replayed();
    replayed.on_loaded(h.now);
    let mut h2 = Harness::new();
    h2.shard = replayed;
    h2.now = h.now;
    assert!(h2.consumer("cg").members[&me].uses_classic_protocol());
    assert_eq!(h2.heartbeat("cg", &me, 2, None), NONE);
    // The classic member's own 10 s session, not group.consumer.session.timeout.ms (45 s).
    h2.advance(5_000);
    h2.cg_beat("cg", "m1", 1, &[]);
    h2.advance(6_000);
    assert!(!h2.consumer("cg").members.contains_key(&me));
    assert!(h2.consumer("cg").members.contains_key("m1"));
}

#[test]
fn a_restarted_static_classic_member_takes_over_its_old_assignment() {
    let mut h = Harness::new();
    h.cg_join("cg", "m1", &["t1"]);
    let sub = subscription(&["t1"], &[]);
    // A static member needs no second join (KIP-394 does not apply).
    let id = h.join("cg", "", Some("inst"), &[("range", &sub)]);
    let first = h.join_resp(id);
    assert_eq!(first.error_code, NONE);
    let old = h.consumer("cg").members[&first.member_id].clone();

    // The instance restarts under a new member id: it replaces the old member, keeping its
    // subscription and assignment, with no new group epoch.
    let epoch = h.consumer("cg").group_epoch;
    let id = h.join("cg", "", Some("inst"), &[("range", &sub)]);
    let second = h.join_resp(id);
    assert_eq!(second.error_code, NONE);
    assert_ne!(second.member_id, first.member_id);
    let g = h.consumer("cg");
    assert!(!g.members.contains_key(&first.member_id));
    assert_eq!(g.members[&second.member_id].assigned, old.assigned);
    assert_eq!(g.static_members["inst"], second.member_id);
    assert_eq!(g.group_epoch, epoch);
    // The old incarnation is fenced.
    assert_eq!(
        h.heartbeat("cg", &first.member_id, first.generation_id, Some("inst")),
        FENCED_INSTANCE_ID
    );
}

#[test]
fn a_classic_instance_replacing_the_last_kip848_static_member_downgrades_the_group() {
    let mut h = Harness::new();
    h.cg(ConsumerGroupHeartbeatInput {
        instance_id: Some("inst".into()),
        ..cg_join_req("cg", "m1", &["t1"])
    });
    let other = classic_join_new(&mut h, "cg").member_id;
    let epoch = h.consumer("cg").group_epoch;

    // The static KIP-848 instance restarts as a classic consumer (same subscription).
    let sub = subscription(&["t1"], &[]);
    let id = h.join("cg", "", Some("inst"), &[("range", &sub)]);
    let j = h.join_resp(id);
    assert_eq!(j.error_code, NONE);
    let c = h.classic("cg");
    assert_eq!(c.generation_id, epoch);
    // No rebalance: the subscription did not change.
    assert_eq!(c.state, ClassicGroupState::Stable);
    assert_eq!(c.static_members["inst"], j.member_id);
    let ids: Vec<&String> = c.members.keys().collect();
    assert_eq!(ids.len(), 2);
    assert!(c.members.contains_key(&other) && c.members.contains_key(&j.member_id));
}
