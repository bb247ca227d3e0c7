//! Classic protocol: JoinGroup / SyncGroup / Heartbeat / LeaveGroup / DescribeGroups /
//! ListGroups / DeleteGroups transitions and error codes.

use super::*;

#[test]
fn member_id_required_then_initial_delay_then_sync() {
    let mut h = Harness::new();
    let first = h.join("g", "", None, &[("range", b"m1")]);
    let r = h.join_resp(first);
    assert_eq!(r.error_code, MEMBER_ID_REQUIRED);
    assert!(r.member_id.starts_with("client-"), "{}", r.member_id);
    assert!(h.classic("g").pending_members.contains(&r.member_id));

    let second = h.join("g", &r.member_id, None, &[("range", b"m1")]);
    assert!(
        h.take(second).is_none(),
        "parked during group.initial.rebalance.delay.ms"
    );
    assert_eq!(h.classic("g").state, ClassicGroupState::PreparingRebalance);
    h.advance(2_999);
    assert!(h.take(second).is_none());
    h.advance(1);
    let j = h.join_resp(second);
    assert_eq!(j.error_code, NONE);
    assert_eq!(j.generation_id, 1);
    assert_eq!(j.leader, r.member_id);
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    assert_eq!(j.members.len(), 1);
    assert_eq!(&j.members[0].metadata[..], b"m1");
    assert_eq!(h.classic("g").state, ClassicGroupState::CompletingRebalance);

    let before = h.log.len();
    let s = h.sync("g", &r.member_id, 1, &[(&r.member_id, b"a1")]);
    let s = h.sync_resp(s);
    assert_eq!(s.error_code, NONE);
    assert_eq!(&s.assignment[..], b"a1");
    assert_eq!(h.classic("g").state, ClassicGroupState::Stable);
    assert!(
        matches!(&h.log[before..], [CoordinatorRecord::GroupMetadata { value: Some(v), .. }] if v.generation == 1 && &v.members[0].assignment[..] == b"a1")
    );
}

#[test]
fn old_versions_join_without_member_id_round_trip() {
    let mut h = Harness::new();
    let id = h.join_v("g", "", None, &[("range", b"m")], 3);
    assert!(h.take(id).is_none(), "v3 joins directly");
    h.advance(3_000);
    let j = h.join_resp(id);
    assert_eq!(j.error_code, NONE);
    assert_eq!(j.generation_id, 1);
}

#[test]
fn initial_delay_extends_for_new_members_and_only_leader_gets_members() {
    let mut h = Harness::new();
    let (a, ma) = h.join_dynamic("g");
    h.advance(2_000);
    let (b, mb) = h.join_dynamic("g");
    h.advance(1_000); // first delay ends, but a member was added: extended
    assert!(h.take(a).is_none());
    h.advance(3_000);
    let ja = h.join_resp(a);
    let jb = h.join_resp(b);
    assert_eq!(ja.generation_id, 1);
    assert_eq!(jb.generation_id, 1);
    let (leader, follower) = if ja.leader == ma { (ja, jb) } else { (jb, ja) };
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
    assert!(leader.leader == ma || leader.leader == mb);

    // Follower syncs first: parked until the leader's SyncGroup.
    let fs = h.sync("g", &follower.member_id, 1, &[]);
    assert!(h.take(fs).is_none());
    let ls = h.sync(
        "g",
        &leader.member_id,
        1,
        &[(&leader.member_id, b"L"), (&follower.member_id, b"F")],
    );
    assert_eq!(&h.sync_resp(fs).assignment[..], b"F");
    assert_eq!(&h.sync_resp(ls).assignment[..], b"L");
}

#[test]
fn join_validation_errors() {
    let mut h = Harness::new();
    let id = h.join("", "", None, &[("range", b"")]);
    assert_eq!(h.join_resp(id).error_code, INVALID_GROUP_ID);
    let id = h.send(GroupRequest::JoinGroup(JoinGroupInput {
        api_version: 7,
        group_id: "g".into(),
        session_timeout_ms: 1_000,
        rebalance_timeout_ms: 1_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::new())],
        ..Default::default()
    }));
    assert_eq!(h.join_resp(id).error_code, INVALID_SESSION_TIMEOUT);
    let id = h.join("nope", "some-member", None, &[("range", b"")]);
    assert_eq!(h.join_resp(id).error_code, UNKNOWN_MEMBER_ID);
    let id = h.join("g", "", None, &[]);
    assert_eq!(
        h.join_resp(id).error_code,
        INCONSISTENT_GROUP_PROTOCOL,
        "no protocols"
    );
}

#[test]
fn inconsistent_protocols_are_refused() {
    let mut h = Harness::new();
    h.stable_single("g");
    let id = h.join("g", "", None, &[("roundrobin", b"")]);
    assert_eq!(h.join_resp(id).error_code, INCONSISTENT_GROUP_PROTOCOL);
    let id = h.send(GroupRequest::JoinGroup(JoinGroupInput {
        api_version: 7,
        group_id: "g".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "connect".into(),
        protocols: vec![("range".into(), Bytes::new())],
        ..Default::default()
    }));
    assert_eq!(h.join_resp(id).error_code, INCONSISTENT_GROUP_PROTOCOL);
}

#[test]
fn protocol_selection_by_votes_among_common_protocols() {
    let mut h = Harness::new();
    let a = h.join_v(
        "g",
        "",
        None,
        &[("range", b"a"), ("roundrobin", b"a"), ("sticky", b"a")],
        3,
    );
    let b = h.join_v("g", "", None, &[("roundrobin", b"b"), ("range", b"b")], 3);
    let c = h.join_v("g", "", None, &[("roundrobin", b"c"), ("range", b"c")], 3);
    h.advance(9_000); // each newcomer extended the initial delay
    for id in [a, b, c] {
        assert_eq!(h.join_resp(id).protocol_name.as_deref(), Some("roundrobin"));
    }
}

#[test]
fn heartbeat_error_codes() {
    let mut h = Harness::new();
    let m = h.stable_single("g");
    assert_eq!(h.heartbeat("g", &m, 1, None), NONE);
    assert_eq!(h.heartbeat("g", &m, 2, None), ILLEGAL_GENERATION);
    assert_eq!(h.heartbeat("g", "who", 1, None), UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat("missing", &m, 1, None), UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat("", &m, 1, None), INVALID_GROUP_ID);
    // A new member triggers a rebalance: the old one learns it from its heartbeat.
    let (_, _) = h.join_dynamic("g");
    assert_eq!(h.classic("g").state, ClassicGroupState::PreparingRebalance);
    assert_eq!(h.heartbeat("g", &m, 1, None), REBALANCE_IN_PROGRESS);
}

#[test]
fn rebalance_completes_when_everyone_rejoined() {
    let mut h = Harness::new();
    let m1 = h.stable_single("g");
    let (new_join, m2) = h.join_dynamic("g");
    assert!(h.take(new_join).is_none());
    let rejoin = h.join("g", &m1, None, &[("range", b"m")]);
    // Not an initial rebalance: no delay once all members are in.
    let j1 = h.join_resp(rejoin);
    let j2 = h.join_resp(new_join);
    assert_eq!((j1.generation_id, j2.generation_id), (2, 2));
    assert_eq!(j1.leader, m1, "the leader keeps leadership when it rejoins");
    assert_eq!(j1.members.len(), 2);
    assert!(j2.members.is_empty());
    assert_eq!(j2.member_id, m2);
    let s = h.sync("g", &m1, 1, &[]);
    assert_eq!(h.sync_resp(s).error_code, ILLEGAL_GENERATION);
}

#[test]
fn stable_follower_join_with_same_metadata_gets_current_generation() {
    let mut h = Harness::new();
    let m1 = h.stable_single("g");
    let (j, m2) = h.join_dynamic("g");
    let r = h.join("g", &m1, None, &[("range", b"m")]);
    h.join_resp(r);
    h.join_resp(j);
    let s1 = h.sync("g", &m1, 2, &[(&m1, b"1"), (&m2, b"2")]);
    h.sync_resp(s1);
    let again = h.join("g", &m2, None, &[("range", b"m")]);
    let r = h.join_resp(again);
    assert_eq!((r.error_code, r.generation_id), (NONE, 2));
    assert!(r.members.is_empty());
    assert_eq!(
        h.classic("g").state,
        ClassicGroupState::Stable,
        "no rebalance"
    );
    // The leader's JoinGroup forces one.
    h.join("g", &m1, None, &[("range", b"m")]);
    assert_eq!(h.classic("g").state, ClassicGroupState::PreparingRebalance);
}

#[test]
fn session_timeout_removes_member_and_rebalances() {
    let mut h = Harness::new();
    let m1 = h.stable_single("g");
    let (j, m2) = h.join_dynamic("g");
    let r = h.join("g", &m1, None, &[("range", b"m")]);
    h.join_resp(r);
    h.join_resp(j);
    let s = h.sync("g", &m1, 2, &[]);
    h.sync_resp(s);
    let s = h.sync("g", &m2, 2, &[]);
    h.sync_resp(s);
    // m1 keeps heartbeating, m2 goes silent.
    for _ in 0..2 {
        h.advance(4_000);
        assert_eq!(h.heartbeat("g", &m1, 2, None), NONE);
    }
    h.advance(4_000);
    assert_eq!(h.heartbeat("g", &m1, 2, None), REBALANCE_IN_PROGRESS);
    assert!(
        !h.classic("g").members.contains_key(&m2),
        "m2 expired after 10s"
    );
    assert_eq!(h.classic("g").state, ClassicGroupState::PreparingRebalance);
    let r = h.join("g", &m1, None, &[("range", b"m")]);
    let r = h.join_resp(r);
    assert_eq!((r.generation_id, r.members.len()), (3, 1));
}

#[test]
fn members_that_do_not_rejoin_are_dropped_after_rebalance_timeout() {
    let mut h = Harness::new();
    let m1 = h.stable_single("g");
    let (j, _m2) = h.join_dynamic("g");
    // m1 heartbeats (REBALANCE_IN_PROGRESS) but never rejoins.
    for _ in 0..7 {
        h.advance(4_000);
        h.heartbeat("g", &m1, 1, None);
    }
    h.advance(4_000);
    let r = h.join_resp(j);
    assert_eq!(r.generation_id, 2);
    assert_eq!(r.members.len(), 1, "the new member leads alone");
    assert!(!h.classic("g").members.contains_key(&m1));
}

#[test]
fn pending_sync_expiry_removes_silent_members() {
    let mut h = Harness::new();
    let (a, ma) = h.join_dynamic("g");
    let (b, _mb) = h.join_dynamic("g");
    h.advance(6_000);
    let ja = h.join_resp(a);
    h.join_resp(b);
    let leader = ja.leader.clone();
    let s = h.sync("g", &leader, 1, &[]);
    h.sync_resp(s);
    // The follower never syncs; after the rebalance timeout it is removed.
    for _ in 0..8 {
        h.advance(4_000);
        h.heartbeat("g", &leader, 1, None);
    }
    assert_eq!(h.classic("g").members.len(), 1);
    assert!(h.classic("g").members.contains_key(&leader));
    let _ = ma;
}

#[test]
fn sync_error_codes() {
    let mut h = Harness::new();
    let s = h.sync("missing", "m", 1, &[]);
    assert_eq!(h.sync_resp(s).error_code, UNKNOWN_MEMBER_ID);
    let m = h.stable_single("g");
    let s = h.sync("g", "who", 1, &[]);
    assert_eq!(h.sync_resp(s).error_code, UNKNOWN_MEMBER_ID);
    let s = h.send(GroupRequest::SyncGroup(SyncGroupInput {
        api_version: 5,
        group_id: "g".into(),
        generation_id: 1,
        member_id: m.clone(),
        protocol_name: Some("roundrobin".into()),
        ..Default::default()
    }));
    assert_eq!(h.sync_resp(s).error_code, INCONSISTENT_GROUP_PROTOCOL);
    // Stable: a repeated SyncGroup returns the stored assignment.
    let s = h.sync("g", &m, 1, &[]);
    assert_eq!(&h.sync_resp(s).assignment[..], b"assign");
    h.join_dynamic("g");
    let s = h.sync("g", &m, 1, &[]);
    assert_eq!(h.sync_resp(s).error_code, REBALANCE_IN_PROGRESS);
}

#[test]
fn rebalance_interrupts_parked_syncs() {
    let mut h = Harness::new();
    let (a, _) = h.join_dynamic("g");
    let (b, _) = h.join_dynamic("g");
    h.advance(6_000);
    let ja = h.join_resp(a);
    let jb = h.join_resp(b);
    let follower = if ja.member_id == ja.leader {
        jb.member_id
    } else {
        ja.member_id
    };
    let fs = h.sync("g", &follower, 1, &[]);
    assert!(h.take(fs).is_none());
    h.join_dynamic("g"); // new member while CompletingRebalance
    assert_eq!(h.sync_resp(fs).error_code, REBALANCE_IN_PROGRESS);
}

#[test]
fn batched_leave_by_member_and_instance_id() {
    let mut h = Harness::new();
    let (a, ma) = h.join_dynamic("g");
    let b = h.join("g", "", Some("inst-b"), &[("range", b"m")]);
    h.advance(6_000);
    let ja = h.join_resp(a);
    let jb = h.join_resp(b);
    let s = h.sync("g", &ja.leader, 1, &[]);
    h.sync_resp(s);
    let id = h.send(GroupRequest::LeaveGroup(LeaveGroupInput {
        group_id: "g".into(),
        members: vec![
            LeaveGroupMemberInput {
                member_id: ma.clone(),
                ..Default::default()
            },
            LeaveGroupMemberInput {
                member_id: "wrong".into(),
                group_instance_id: Some("inst-b".into()),
                reason: None,
            },
            LeaveGroupMemberInput {
                member_id: "ghost".into(),
                ..Default::default()
            },
            LeaveGroupMemberInput {
                member_id: "".into(),
                group_instance_id: Some("inst-x".into()),
                reason: None,
            },
        ],
    }));
    let Some(GroupResponse::LeaveGroup(r)) = h.take(id) else {
        panic!()
    };
    let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
    assert_eq!(
        codes,
        vec![
            NONE,
            FENCED_INSTANCE_ID,
            UNKNOWN_MEMBER_ID,
            UNKNOWN_MEMBER_ID
        ]
    );
    assert!(!h.classic("g").members.contains_key(&ma));
    assert_eq!(h.classic("g").state, ClassicGroupState::PreparingRebalance);

    // The static member leaves by instance id alone; the group becomes Empty and is persisted.
    let id = h.send(GroupRequest::LeaveGroup(LeaveGroupInput {
        group_id: "g".into(),
        members: vec![LeaveGroupMemberInput {
            member_id: "".into(),
            group_instance_id: Some("inst-b".into()),
            reason: Some("bye".into()),
        }],
    }));
    let Some(GroupResponse::LeaveGroup(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.members[0].error_code, NONE);
    assert_eq!(h.classic("g").state, ClassicGroupState::Empty);
    assert!(
        matches!(h.log.last(), Some(CoordinatorRecord::GroupMetadata { value: Some(v), .. }) if v.members.is_empty() && v.generation == 2)
    );
    let _ = jb;

    let id = h.send(GroupRequest::LeaveGroup(LeaveGroupInput {
        group_id: "missing".into(),
        members: vec![LeaveGroupMemberInput {
            member_id: "m".into(),
            ..Default::default()
        }],
    }));
    let Some(GroupResponse::LeaveGroup(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(
        (r.error_code, r.members[0].error_code),
        (NONE, UNKNOWN_MEMBER_ID)
    );
}

#[test]
fn pending_member_can_leave() {
    let mut h = Harness::new();
    let first = h.join("g", "", None, &[("range", b"")]);
    let pending = h.join_resp(first).member_id;
    let id = h.send(GroupRequest::LeaveGroup(LeaveGroupInput {
        group_id: "g".into(),
        members: vec![LeaveGroupMemberInput {
            member_id: pending.clone(),
            ..Default::default()
        }],
    }));
    let Some(GroupResponse::LeaveGroup(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.members[0].error_code, NONE);
    assert!(h.classic("g").pending_members.is_empty());
}

#[test]
fn pending_member_expires_after_session_timeout() {
    let mut h = Harness::new();
    let first = h.join("g", "", None, &[("range", b"")]);
    let pending = h.join_resp(first).member_id;
    h.advance(10_000);
    assert!(!h.classic("g").pending_members.contains(&pending));
    let id = h.join("g", &pending, None, &[("range", b"")]);
    assert_eq!(h.join_resp(id).error_code, UNKNOWN_MEMBER_ID);
}

#[test]
fn static_member_rejoins_without_rebalance() {
    let mut h = Harness::new();
    let j = h.join("g", "", Some("inst-1"), &[("range", b"m")]);
    assert!(
        h.take(j).is_none(),
        "static members skip MEMBER_ID_REQUIRED"
    );
    h.advance(3_000);
    let r = h.join_resp(j);
    let old = r.member_id.clone();
    assert!(old.starts_with("inst-1-"));
    let s = h.sync("g", &old, 1, &[(&old, b"A")]);
    h.sync_resp(s);

    // Restart: same instance id, no member id, same metadata.
    let before = h.log.len();
    let j = h.join_v("g", "", Some("inst-1"), &[("range", b"m")], 9);
    let r = h.join_resp(j);
    assert_eq!(r.error_code, NONE);
    assert_ne!(r.member_id, old);
    assert_eq!(r.generation_id, 1, "same generation");
    assert!(r.skip_assignment, "v9 leader skips the assignment");
    assert_eq!(r.leader, r.member_id);
    assert_eq!(h.classic("g").state, ClassicGroupState::Stable);
    assert!(
        matches!(&h.log[before..], [CoordinatorRecord::GroupMetadata { value: Some(v), .. }] if v.members[0].member_id == r.member_id)
    );
    // The old incarnation is fenced.
    assert_eq!(
        h.heartbeat("g", &old, 1, Some("inst-1")),
        FENCED_INSTANCE_ID
    );
    assert_eq!(h.heartbeat("g", &r.member_id, 1, Some("inst-1")), NONE);
    let s = h.sync("g", &r.member_id, 1, &[]);
    assert_eq!(&h.sync_resp(s).assignment[..], b"A", "assignment kept");
    assert_eq!(
        h.heartbeat("g", "x", 1, Some("unknown-inst")),
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn static_leader_rejoin_before_v9_is_told_the_old_leader() {
    let mut h = Harness::new();
    let j = h.join("g", "", Some("inst-1"), &[("range", b"m")]);
    h.advance(3_000);
    let old = h.join_resp(j).member_id;
    let s = h.sync("g", &old, 1, &[]);
    h.sync_resp(s);
    let j = h.join_v("g", "", Some("inst-1"), &[("range", b"m")], 7);
    let r = h.join_resp(j);
    assert_eq!(r.leader, old);
    assert!(r.members.is_empty() && !r.skip_assignment);
}

#[test]
fn static_member_rejoin_with_new_protocol_rebalances() {
    let mut h = Harness::new();
    let j = h.join("g", "", Some("inst-1"), &[("range", b"m")]);
    h.advance(3_000);
    let old = h.join_resp(j).member_id;
    let s = h.sync("g", &old, 1, &[]);
    h.sync_resp(s);
    let j = h.join(
        "g",
        "",
        Some("inst-1"),
        &[("roundrobin", b"m"), ("range", b"m")],
    );
    // The only member rejoined, so the new generation starts at once.
    let r = h.join_resp(j);
    assert_eq!(h.classic("g").state, ClassicGroupState::CompletingRebalance);
    assert_eq!(
        (r.generation_id, r.protocol_name.as_deref()),
        (2, Some("roundrobin"))
    );
}

#[test]
fn static_member_is_kept_through_a_rebalance_it_misses() {
    let mut h = Harness::new();
    let j = h.join("g", "", Some("inst-1"), &[("range", b"m")]);
    let (d, _) = h.join_dynamic("g");
    h.advance(6_000);
    let js = h.join_resp(j);
    let jd = h.join_resp(d);
    let leader = js.leader.clone();
    let s = h.sync("g", &leader, 1, &[]);
    h.sync_resp(s);
    let other = if leader == js.member_id {
        jd.member_id
    } else {
        js.member_id.clone()
    };
    let s = h.sync("g", &other, 1, &[]);
    h.sync_resp(s);
    // Trigger a rebalance; only the dynamic member rejoins. The static member is not dropped
    // at the rebalance timeout (only its session timeout removes it).
    let dyn_id = if leader == js.member_id {
        other.clone()
    } else {
        leader.clone()
    };
    h.join("g", &dyn_id, None, &[("range", b"m")]);
    assert!(h.classic("g").static_members.contains_key("inst-1"));
}

#[test]
fn group_max_size() {
    let config = GroupCoordinatorConfig {
        group_max_size: 2,
        ..Default::default()
    };
    let mut h = Harness::with_config(config);
    let a = h.join_v("g", "", None, &[("range", b"")], 3);
    let b = h.join_v("g", "", None, &[("range", b"")], 3);
    let c = h.join_v("g", "", None, &[("range", b"")], 3);
    assert_eq!(h.join_resp(c).error_code, GROUP_MAX_SIZE_REACHED);
    h.advance(6_000);
    assert_eq!(h.join_resp(a).error_code, NONE);
    assert_eq!(h.join_resp(b).error_code, NONE);
    let d = h.join_v("g", "", None, &[("range", b"")], 3);
    assert_eq!(h.join_resp(d).error_code, GROUP_MAX_SIZE_REACHED);
}

#[test]
fn describe_groups() {
    let mut h = Harness::new();
    let m = h.stable_single("g");
    let id = h.send(GroupRequest::DescribeGroups {
        api_version: 5,
        group_ids: vec!["g".into(), "missing".into()],
    });
    let Some(GroupResponse::DescribeGroups { groups }) = h.take(id) else {
        panic!()
    };
    assert_eq!(groups[0].group_state, "Stable");
    assert_eq!(groups[0].protocol_type, "consumer");
    assert_eq!(groups[0].protocol_data, "range");
    assert_eq!(groups[0].members[0].member_id, m);
    assert_eq!(&groups[0].members[0].member_assignment[..], b"assign");
    assert_eq!(&groups[0].members[0].member_metadata[..], b"m");
    assert_eq!(
        (groups[1].error_code, groups[1].group_state.as_str()),
        (NONE, "Dead")
    );
    let id = h.send(GroupRequest::DescribeGroups {
        api_version: 6,
        group_ids: vec!["missing".into()],
    });
    let Some(GroupResponse::DescribeGroups { groups }) = h.take(id) else {
        panic!()
    };
    assert_eq!(groups[0].error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(
        groups[0].error_message.as_deref(),
        Some("Group missing not found.")
    );
    h.cg_join("modern", "m1", &["t1"]);
    let id = h.send(GroupRequest::DescribeGroups {
        api_version: 6,
        group_ids: vec!["modern".into()],
    });
    let Some(GroupResponse::DescribeGroups { groups }) = h.take(id) else {
        panic!()
    };
    assert_eq!(
        (groups[0].error_code, groups[0].error_message.as_deref()),
        (
            GROUP_ID_NOT_FOUND,
            Some("Group modern is not a classic group.")
        )
    );
    // Mid-rebalance: no metadata or assignment.
    h.join_dynamic("g");
    let id = h.send(GroupRequest::DescribeGroups {
        api_version: 5,
        group_ids: vec!["g".into()],
    });
    let Some(GroupResponse::DescribeGroups { groups }) = h.take(id) else {
        panic!()
    };
    assert_eq!(groups[0].group_state, "PreparingRebalance");
    assert!(groups[0].protocol_data.is_empty());
    assert!(groups[0]
        .members
        .iter()
        .all(|m| m.member_assignment.is_empty()));
}

#[test]
fn list_groups_with_state_and_type_filters() {
    let mut h = Harness::new();
    h.stable_single("classic-stable");
    h.commit(commit_req("simple", "", -1, "t1", 0, 5));
    h.cg_join("modern", "m1", &["t1"]);
    let list =
        |h: &mut Harness, states: &[&str], types: &[&str]| -> Vec<(String, String, String)> {
            let id = h.send(GroupRequest::ListGroups {
                states_filter: states.iter().map(|s| s.to_string()).collect(),
                types_filter: types.iter().map(|s| s.to_string()).collect(),
            });
            let Some(GroupResponse::ListGroups { groups, .. }) = h.take(id) else {
                panic!()
            };
            groups
                .into_iter()
                .map(|g| (g.group_id, g.group_state, g.group_type))
                .collect()
        };
    assert_eq!(list(&mut h, &[], &[]).len(), 3);
    assert_eq!(
        list(&mut h, &["STABLE"], &[]),
        vec![
            ("classic-stable".into(), "Stable".into(), "classic".into()),
            ("modern".into(), "Stable".into(), "consumer".into())
        ]
    );
    assert_eq!(
        list(&mut h, &[], &["Consumer"]),
        vec![("modern".into(), "Stable".into(), "consumer".into())]
    );
    assert_eq!(
        list(&mut h, &["empty"], &["classic"]),
        vec![("simple".into(), "Empty".into(), "classic".into())]
    );
}

#[test]
fn delete_groups() {
    let mut h = Harness::new();
    h.stable_single("busy");
    h.commit(commit_req("idle", "", -1, "t1", 0, 5));
    h.commit(commit_req("idle", "", -1, "t1", 1, 6));
    let id = h.send(GroupRequest::DeleteGroups {
        group_ids: vec!["busy".into(), "idle".into(), "missing".into(), "".into()],
    });
    let Some(GroupResponse::DeleteGroups { results }) = h.take(id) else {
        panic!()
    };
    let codes: Vec<i16> = results.iter().map(|(_, c)| *c).collect();
    assert_eq!(
        codes,
        vec![
            NON_EMPTY_GROUP,
            NONE,
            GROUP_ID_NOT_FOUND,
            GROUP_ID_NOT_FOUND
        ],
        "the empty id names a group like any other (Kafka only refuses null)"
    );
    assert!(h.shard.group("idle").is_none());
    let tombstones: Vec<_> = h.log.iter().rev().take(3).collect();
    assert!(tombstones.iter().all(|r| r.is_tombstone()));
    let f = h.fetch(
        vec![fetch_group("idle", Some(vec![("t1", vec![0])]))],
        false,
    );
    assert_eq!(f[0].topics[0].1[0].committed_offset, -1);
}

#[test]
fn classic_join_on_active_consumer_group_needs_the_consumer_protocol_type() {
    // Classic members may join a consumer group (see mixed_tests), but only with the
    // embedded consumer protocol.
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    let id = h.send(GroupRequest::JoinGroup(JoinGroupInput {
        api_version: 7,
        group_id: "g".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "connect".into(),
        protocols: vec![("default".into(), Bytes::new())],
        ..Default::default()
    }));
    assert_eq!(h.join_resp(id).error_code, INCONSISTENT_GROUP_PROTOCOL);
}
