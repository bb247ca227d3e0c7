//! KIP-848 consumer protocol: ConsumerGroupHeartbeat transitions, reconciliation, fencing,
//! static membership, assignors, regex subscriptions and ConsumerGroupDescribe.

use super::*;

fn parts(tp: &Option<Vec<(Uuid, Vec<i32>)>>, topic: Uuid) -> Vec<i32> {
    tp.as_ref()
        .and_then(|v| v.iter().find(|(t, _)| *t == topic))
        .map(|(_, p)| p.clone())
        .unwrap_or_default()
}

#[test]
fn first_member_gets_everything() {
    let mut h = Harness::new();
    let r = h.cg_join("g", "m1", &["t1", "t2"]);
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.member_id.as_deref(), Some("m1"));
    // A new group is at epoch 1; the member's subscription bumps it to 2 (Kafka 4.4).
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    assert_eq!(parts(&r.assignment, tid(1)), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(parts(&r.assignment, tid(2)), vec![0, 1, 2]);
    let g = h.consumer("g");
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    // A steady heartbeat changes nothing and carries no assignment.
    let before = h.log.len();
    let r = h.cg_beat(
        "g",
        "m1",
        2,
        &[(tid(1), vec![0, 1, 2, 3, 4, 5]), (tid(2), vec![0, 1, 2])],
    );
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    assert!(r.assignment.is_none());
    assert_eq!(h.log.len(), before, "no records for a no-op heartbeat");
}

#[test]
fn second_member_reconciles_with_revocation_first() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    let all: Vec<i32> = (0..6).collect();
    // Past the assignment interval: the second join gets a new target at once.
    h.advance(1_000);

    let r2 = h.cg_join("g", "m2", &["t1"]);
    assert_eq!(r2.member_epoch, 3);
    assert_eq!(
        count(&r2.assignment),
        0,
        "m2's partitions are still owned by m1"
    );
    assert_eq!(
        h.consumer("g").members["m2"].state,
        MemberState::UnreleasedPartitions
    );
    assert_eq!(h.consumer("g").state(), ConsumerGroupState::Reconciling);

    // m1 is asked to revoke, staying at epoch 2.
    let r1 = h.cg_beat("g", "m1", 2, &[(tid(1), all.clone())]);
    assert_eq!(r1.member_epoch, 2);
    let kept = parts(&r1.assignment, tid(1));
    assert_eq!(kept.len(), 3);
    assert_eq!(
        h.consumer("g").members["m1"].state,
        MemberState::UnrevokedPartitions
    );
    // Still owning them: no progress.
    let r1b = h.cg_beat("g", "m1", 2, &[(tid(1), all.clone())]);
    assert_eq!(r1b.member_epoch, 2);
    // Revoked: m1 moves to epoch 3.
    let r1c = h.cg_beat("g", "m1", 2, &[(tid(1), kept.clone())]);
    assert_eq!(r1c.member_epoch, 3);
    assert_eq!(h.consumer("g").members["m1"].state, MemberState::Stable);
    // Now m2 gets the released partitions.
    let r2b = h.cg_beat("g", "m2", 3, &[]);
    let got = parts(&r2b.assignment, tid(1));
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|p| !kept.contains(p)));
    assert_eq!(h.consumer("g").state(), ConsumerGroupState::Stable);
}

#[test]
fn epoch_fencing() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    let r = h.cg_beat("g", "m1", 5, &[]);
    assert_eq!(r.error_code, FENCED_MEMBER_EPOCH);
    assert!(r.member_id.is_none());
    h.advance(1_000);
    h.cg_join("g", "m2", &["t1"]);
    h.cg_beat("g", "m1", 2, &[(tid(1), (0..6).collect())]);
    let r = h.cg_beat("g", "m1", 2, &[(tid(1), vec![0, 1, 2])]);
    assert_eq!(r.member_epoch, 3);
    // The previous epoch is accepted if the member owns a subset of its assignment (lost
    // response), not otherwise.
    assert_eq!(
        h.cg_beat("g", "m1", 2, &[(tid(1), vec![0])]).error_code,
        NONE
    );
    assert_eq!(
        h.cg_beat("g", "m1", 2, &[(tid(1), vec![5])]).error_code,
        FENCED_MEMBER_EPOCH
    );
    assert_eq!(
        h.cg_beat("g", "m1", -1, &[]).error_code,
        NONE,
        "-1 is a leave"
    );
}

#[test]
fn unknown_member_and_group() {
    let mut h = Harness::new();
    assert_eq!(
        h.cg_beat("missing", "m1", 3, &[]).error_code,
        GROUP_ID_NOT_FOUND
    );
    h.cg_join("g", "m1", &["t1"]);
    assert_eq!(
        h.cg_beat("g", "ghost", 1, &[]).error_code,
        UNKNOWN_MEMBER_ID
    );
    let leave = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "ghost".into(),
        member_epoch: -1,
        ..Default::default()
    });
    assert_eq!(leave.error_code, UNKNOWN_MEMBER_ID);
    assert!(
        h.shard.group("missing").is_none(),
        "failed requests leave no group behind"
    );
}

#[test]
fn request_validation() {
    let mut h = Harness::new();
    let cases: Vec<(ConsumerGroupHeartbeatInput, i16)> = vec![
        (
            ConsumerGroupHeartbeatInput {
                group_id: "".into(),
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                member_id: "".into(),
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                instance_id: Some("".into()),
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                rack_id: Some("".into()),
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                rebalance_timeout_ms: -1,
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                topic_partitions: None,
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                topic_partitions: Some(vec![(tid(1), vec![0])]),
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                subscribed_topic_names: None,
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                member_epoch: -2,
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                member_epoch: -3,
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REQUEST,
        ),
        (
            ConsumerGroupHeartbeatInput {
                server_assignor: Some("sticky".into()),
                ..cg_join_req("g", "m", &["t1"])
            },
            UNSUPPORTED_ASSIGNOR,
        ),
        (
            ConsumerGroupHeartbeatInput {
                subscribed_topic_regex: Some("(".into()),
                ..cg_join_req("g", "m", &["t1"])
            },
            INVALID_REGULAR_EXPRESSION,
        ),
    ];
    for (i, (req, code)) in cases.into_iter().enumerate() {
        let r = h.cg(req);
        assert_eq!(r.error_code, code, "case {i}: {:?}", r.error_message);
        assert!(r.error_message.is_some());
    }
    // v0 lets the coordinator pick the member id.
    let r = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 0,
        member_id: "".into(),
        ..cg_join_req("g", "", &["t1"])
    });
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.member_id.unwrap().len(), 22, "a base64 Kafka Uuid");
}

#[test]
fn leave_gives_partitions_to_the_others() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    h.advance(1_000);
    h.cg_join("g", "m2", &["t1"]);
    let r = h.cg_beat("g", "m1", 2, &[(tid(1), (0..6).collect())]);
    let kept = parts(&r.assignment, tid(1));
    h.cg_beat("g", "m1", 2, &[(tid(1), kept)]);
    h.cg_beat("g", "m2", 3, &[]);
    let epoch = h.consumer("g").group_epoch;
    let leave = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: -1,
        ..Default::default()
    });
    assert_eq!((leave.error_code, leave.member_epoch), (NONE, -1));
    assert_eq!(h.consumer("g").group_epoch, epoch + 1);
    assert!(!h.consumer("g").members.contains_key("m1"));
    // The emptied target assignment is recomputed once the interval allows.
    h.advance(1_000);
    let r = h.cg_beat("g", "m2", 3, &[(tid(1), vec![3, 4, 5])]);
    assert_eq!(r.member_epoch, epoch + 1);
    assert_eq!(count(&r.assignment), 6);
}

#[test]
fn session_timeout_fences_member() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    h.cg_join("g", "m2", &["t1"]);
    for _ in 0..12 {
        h.advance(4_000);
        let owned: Vec<(Uuid, Vec<i32>)> = h.consumer("g").members["m2"]
            .assigned
            .iter()
            .map(|(t, p)| (*t, p.iter().copied().collect()))
            .collect();
        let epoch = h.consumer("g").members["m2"].member_epoch;
        h.cg_beat("g", "m2", epoch, &owned);
    }
    assert!(
        !h.consumer("g").members.contains_key("m1"),
        "m1 silent for 48s > 45s"
    );
    let m2 = &h.consumer("g").members["m2"];
    assert_eq!(m2.assigned.values().map(|p| p.len()).sum::<usize>(), 6);
}

#[test]
fn member_that_does_not_revoke_is_fenced_after_rebalance_timeout() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    h.advance(1_000);
    h.cg_join("g", "m2", &["t1"]);
    let all: Vec<i32> = (0..6).collect();
    h.cg_beat("g", "m1", 2, &[(tid(1), all.clone())]);
    assert_eq!(
        h.consumer("g").members["m1"].state,
        MemberState::UnrevokedPartitions
    );
    // m1 keeps heartbeating but never gives the partitions up.
    for _ in 0..16 {
        h.advance(4_000);
        if h.consumer("g").members.contains_key("m1") {
            h.cg_beat("g", "m1", 2, &[(tid(1), all.clone())]);
        }
        h.cg_beat("g", "m2", h.consumer("g").members["m2"].member_epoch, &[]);
    }
    assert!(
        !h.consumer("g").members.contains_key("m1"),
        "fenced after 60s rebalance timeout"
    );
    assert_eq!(h.cg_beat("g", "m1", 2, &[]).error_code, UNKNOWN_MEMBER_ID);
}

#[test]
fn static_member_leave_and_rejoin_keeps_assignment() {
    let mut h = Harness::new();
    let join = |member: &str| ConsumerGroupHeartbeatInput {
        instance_id: Some("i1".into()),
        ..cg_join_req("g", member, &["t1"])
    };
    let r = h.cg(join("a"));
    assert_eq!(r.member_epoch, 2);
    // Another incarnation while the first is active.
    assert_eq!(h.cg(join("b")).error_code, UNRELEASED_INSTANCE_ID);
    // Wrong member id for the instance.
    let r = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "b".into(),
        member_epoch: 2,
        instance_id: Some("i1".into()),
        ..Default::default()
    });
    assert_eq!(r.error_code, FENCED_INSTANCE_ID);
    // Temporary leave.
    let r = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "a".into(),
        member_epoch: -2,
        instance_id: Some("i1".into()),
        ..Default::default()
    });
    assert_eq!((r.error_code, r.member_epoch), (NONE, -2));
    let epoch = h.consumer("g").group_epoch;
    // Restart with a new member id: same partitions, no new group epoch.
    let r = h.cg(join("b"));
    assert_eq!(r.error_code, NONE);
    assert_eq!(count(&r.assignment), 6);
    assert_eq!(h.consumer("g").group_epoch, epoch);
    assert!(!h.consumer("g").members.contains_key("a"));
    assert_eq!(h.consumer("g").static_members["i1"], "b");
    // A leave with -1 removes it for good.
    let r = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "b".into(),
        member_epoch: -1,
        instance_id: Some("i1".into()),
        ..Default::default()
    });
    assert_eq!(r.error_code, NONE);
    assert!(h.consumer("g").members.is_empty());
    assert_eq!(h.consumer("g").state(), ConsumerGroupState::Empty);
}

#[test]
fn static_member_that_left_expires_after_session_timeout() {
    let mut h = Harness::new();
    h.cg(ConsumerGroupHeartbeatInput {
        instance_id: Some("i1".into()),
        ..cg_join_req("g", "a", &["t1"])
    });
    h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "a".into(),
        member_epoch: -2,
        instance_id: Some("i1".into()),
        ..Default::default()
    });
    h.advance(45_000);
    assert!(h.consumer("g").members.is_empty());
}

#[test]
fn range_assignor_selected_by_members() {
    let mut h = Harness::new();
    let join = |m: &str| ConsumerGroupHeartbeatInput {
        server_assignor: Some("range".into()),
        ..cg_join_req("g", m, &["t1", "t2"])
    };
    h.cg(join("a"));
    h.advance(1_000);
    h.cg(join("b"));
    let g = h.consumer("g");
    assert_eq!(
        g.target["a"][&tid(1)].iter().copied().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(
        g.target["b"][&tid(1)].iter().copied().collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert_eq!(
        g.target["a"][&tid(2)].iter().copied().collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(
        g.target["b"][&tid(2)].iter().copied().collect::<Vec<_>>(),
        vec![2]
    );
    let id = h.send(GroupRequest::ConsumerGroupDescribe {
        group_ids: vec!["g".into()],
    });
    let Some(GroupResponse::ConsumerGroupDescribe { groups }) = h.take(id) else {
        panic!()
    };
    assert_eq!(groups[0].assignor_name, "range");
}

#[test]
fn regex_subscription_is_resolved_after_the_join_and_follows_topic_creation() {
    let mut h = Harness::new();
    let r = h.cg(ConsumerGroupHeartbeatInput {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("t.*".into()),
        ..cg_join_req("g", "m1", &[])
    });
    // Kafka resolves regexes off the request: the join is answered at once, at the new
    // group's epoch 1, with nothing (no epoch bump: no topic is known to be subscribed).
    assert_eq!(
        (r.error_code, r.member_epoch, count(&r.assignment)),
        (NONE, 1, 0)
    );
    assert!(h.consumer("g").regexes.is_empty());
    assert!(!h
        .log
        .iter()
        .any(|r| matches!(r, CoordinatorRecord::ConsumerGroupMetadata { .. })));
    h.advance(0);
    assert_eq!(
        h.consumer("g").regexes["t.*"].topics,
        vec!["t1".to_string(), "t2".to_string()],
        "t1 and t2, not `other`"
    );
    assert_eq!(h.consumer("g").group_epoch, 2, "the resolution bumps it");
    let r = h.cg_beat("g", "m1", 1, &[]);
    assert_eq!((r.member_epoch, count(&r.assignment)), (2, 9));
    let owned = [(tid(1), (0..6).collect()), (tid(2), vec![0, 1, 2])];

    // A topic is created: the regexes are resolved again on a heartbeat, but at most once
    // per 10 s.
    let mut topics = h.shard.topics().clone();
    topics.upsert("t3", tid(3), 1);
    topics.version = 1;
    h.shard.set_topics(topics);
    h.cg_beat("g", "m1", 2, &owned);
    h.advance(0);
    assert_eq!(
        h.consumer("g").group_epoch,
        2,
        "resolved less than 10 s ago"
    );
    h.advance(10_001);
    h.cg_beat("g", "m1", 2, &owned);
    h.advance(0);
    assert_eq!(h.consumer("g").group_epoch, 3);
    let r = h.cg_beat("g", "m1", 2, &owned);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&r.assignment), 10, "t3 added");
}

#[test]
fn regex_resolution_includes_internal_topics() {
    let mut h = Harness::new();
    let mut topics = h.shard.topics().clone();
    topics.upsert("__consumer_offsets", tid(50), 50);
    h.shard.set_topics(topics);
    h.cg(ConsumerGroupHeartbeatInput {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("__consumer_offsets|t2".into()),
        ..cg_join_req("g", "m1", &[])
    });
    h.advance(0);
    // Kafka 4.4 resolves regexes against every topic name, internal ones included.
    assert_eq!(
        h.consumer("g").regexes["__consumer_offsets|t2"].topics,
        vec!["__consumer_offsets".to_string(), "t2".to_string()]
    );
    let r = h.cg_beat("g", "m1", 1, &[]);
    assert_eq!((r.member_epoch, count(&r.assignment)), (2, 53));
}

#[test]
fn assignment_interval_delays_the_next_target() {
    let mut h = Harness::new();
    assert_eq!(h.cg_join("g", "m1", &["t1"]).member_epoch, 2);
    // Within the interval (1 s) of the last target assignment: the group epoch moves on,
    // the target does not; the new member is at the old target's epoch with nothing.
    let r = h.cg_join("g", "m2", &["t1"]);
    assert_eq!((r.member_epoch, count(&r.assignment)), (2, 0));
    let g = h.consumer("g");
    assert_eq!((g.group_epoch, g.assignment_epoch), (3, 2));
    assert_eq!(g.state(), ConsumerGroupState::Assigning);
    h.advance(999);
    assert_eq!(h.cg_beat("g", "m2", 2, &[]).member_epoch, 2);
    h.advance(1);
    // Past it, the next heartbeat computes it.
    let r = h.cg_beat("g", "m2", 2, &[]);
    assert_eq!((r.member_epoch, count(&r.assignment)), (3, 0));
    assert_eq!(h.consumer("g").assignment_epoch, 3);
    assert_eq!(
        h.consumer("g").members["m2"].state,
        MemberState::UnreleasedPartitions
    );
    // A group config of 0 assigns at every epoch bump.
    h.shard.set_group_configs(GroupConfigsView::from([(
        "g".to_string(),
        GroupConfigOverrides {
            consumer_assignment_interval_ms: Some(0),
            ..Default::default()
        },
    )]));
    let r = h.cg_join("g", "m3", &["t1"]);
    assert_eq!(r.member_epoch, 4);
    assert_eq!(h.consumer("g").assignment_epoch, 4);
}

#[test]
fn rejoining_with_epoch_zero_keeps_the_member_as_it_is() {
    let mut h = Harness::new();
    let r = h.cg_join("g", "m1", &["t1"]);
    assert_eq!(r.member_epoch, 2);
    let before = h.log.len();
    // Kafka does not reset a known member that sends epoch 0: same epoch, its assignment
    // repeated in full, nothing written.
    let r = h.cg_join("g", "m1", &["t1"]);
    assert_eq!(
        (r.error_code, r.member_epoch, count(&r.assignment)),
        (NONE, 2, 6)
    );
    assert_eq!(h.log.len(), before);
}

#[test]
fn partition_count_change_bumps_the_epoch() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t2"]);
    let mut topics = h.shard.topics().clone();
    topics.upsert("t2", tid(2), 5);
    h.shard.set_topics(topics);
    h.advance(1_000);
    let r = h.cg_beat("g", "m1", 2, &[(tid(2), vec![0, 1, 2])]);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(parts(&r.assignment, tid(2)), vec![0, 1, 2, 3, 4]);
}

#[test]
fn subscription_change_moves_partitions() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    let r = h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: 2,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: Some(vec!["t2".into()]),
        topic_partitions: Some(vec![(tid(1), (0..6).collect())]),
        ..Default::default()
    });
    // t1 is revoked at once (the subscription no longer has it), before t2 is assigned;
    // the new target waits for the assignment interval.
    assert_eq!(count(&r.assignment), 0);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(
        h.consumer("g").members["m1"].state,
        MemberState::UnrevokedPartitions
    );
    let r = h.cg_beat("g", "m1", 2, &[]);
    assert_eq!(
        (r.member_epoch, count(&r.assignment)),
        (2, 0),
        "revoked; t2 not assigned yet"
    );
    h.advance(1_000);
    let r = h.cg_beat("g", "m1", 2, &[]);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(parts(&r.assignment, tid(2)), vec![0, 1, 2]);
}

#[test]
fn consumer_group_max_size() {
    let config = GroupCoordinatorConfig {
        consumer_max_size: 1,
        ..Default::default()
    };
    let mut h = Harness::with_config(config);
    h.cg_join("g", "m1", &["t1"]);
    assert_eq!(
        h.cg_join("g", "m2", &["t1"]).error_code,
        GROUP_MAX_SIZE_REACHED
    );
}

#[test]
fn consumer_group_describe() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t2"]);
    h.stable_single("classic");
    let id = h.send(GroupRequest::ConsumerGroupDescribe {
        group_ids: vec!["g".into(), "classic".into(), "none".into()],
    });
    let Some(GroupResponse::ConsumerGroupDescribe { groups }) = h.take(id) else {
        panic!()
    };
    assert_eq!(groups[0].error_code, NONE);
    assert_eq!(groups[0].group_state, "Stable");
    assert_eq!((groups[0].group_epoch, groups[0].assignment_epoch), (2, 2));
    assert_eq!(groups[0].assignor_name, "uniform");
    let m = &groups[0].members[0];
    assert_eq!(
        m.assignment,
        vec![(tid(2), "t2".to_string(), vec![0, 1, 2])]
    );
    assert_eq!(m.target_assignment, m.assignment);
    assert_eq!(m.subscribed_topic_names, vec!["t2".to_string()]);
    // No regex: "" as Kafka describes it and writes it in the member's record.
    assert_eq!(m.subscribed_topic_regex.as_deref(), Some(""));
    assert!(h.log.iter().any(|r| matches!(r,
        CoordinatorRecord::ConsumerGroupMemberMetadata { value: Some(v), .. }
            if v.subscribed_topic_regex.as_deref() == Some(""))));
    assert_eq!(groups[1].error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(groups[2].error_code, GROUP_ID_NOT_FOUND);
}

#[test]
fn consumer_heartbeat_on_classic_group() {
    let mut h = Harness::new();
    h.stable_single("g");
    assert_eq!(h.cg_join("g", "m1", &["t1"]).error_code, GROUP_ID_NOT_FOUND);
    // An empty classic group (offsets only) is taken over.
    h.commit(commit_req("simple", "", -1, "t1", 0, 5));
    assert_eq!(h.cg_join("simple", "m1", &["t1"]).error_code, NONE);
    assert_eq!(h.shard.group("simple").unwrap().type_name(), "consumer");
    let f = h.fetch(
        vec![fetch_group("simple", Some(vec![("t1", vec![0])]))],
        false,
    );
    assert_eq!(
        f[0].topics[0].1[0].committed_offset, 5,
        "offsets survive the conversion"
    );
}

#[test]
fn delete_consumer_group() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    let id = h.send(GroupRequest::DeleteGroups {
        group_ids: vec!["g".into()],
    });
    let Some(GroupResponse::DeleteGroups { results }) = h.take(id) else {
        panic!()
    };
    assert_eq!(results[0].1, NON_EMPTY_GROUP);
    h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: -1,
        ..Default::default()
    });
    let id = h.send(GroupRequest::DeleteGroups {
        group_ids: vec!["g".into()],
    });
    let Some(GroupResponse::DeleteGroups { results }) = h.take(id) else {
        panic!()
    };
    assert_eq!(results[0].1, NONE);
    assert!(h.shard.group("g").is_none());
    assert!(matches!(
        h.log.last(),
        Some(CoordinatorRecord::ConsumerGroupMetadata { value: None, .. })
    ));
}

#[test]
fn group_configs_set_the_session_timeout_and_heartbeat_interval() {
    let mut h = Harness::new();
    let own = |session, heartbeat| GroupConfigOverrides {
        consumer_session_timeout_ms: session,
        consumer_heartbeat_interval_ms: heartbeat,
        ..Default::default()
    };
    h.shard.set_group_configs(GroupConfigsView::from([
        ("g".to_string(), own(Some(50_000), Some(7_000))),
        // Set when the broker allowed more: held to today's range (45 s..60 s, 5 s..15 s).
        ("low".to_string(), own(Some(1_000), Some(60_000))),
    ]));
    assert_eq!(h.cg_join("g", "m1", &["t1"]).heartbeat_interval_ms, 7_000);
    assert_eq!(
        h.cg_join("low", "m1", &["t1"]).heartbeat_interval_ms,
        15_000
    );
    assert_eq!(
        h.cg_join("other", "m1", &["t1"]).heartbeat_interval_ms,
        5_000
    );
    // 48 s of silence: past the broker's 45 s (other) and the clamped 45 s (low), within g's 50 s.
    h.advance(48_000);
    assert!(h.consumer("g").members.contains_key("m1"));
    assert!(!h.consumer("low").members.contains_key("m1"));
    assert!(!h.consumer("other").members.contains_key("m1"));
    h.advance(3_000);
    assert!(!h.consumer("g").members.contains_key("m1"), "51 s > 50 s");
}

#[test]
fn the_last_member_leaving_settles_the_empty_assignment_at_the_new_epoch() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    h.advance(1_000);
    h.cg_join("g", "m2", &["t1"]);
    let leave = |member: &str| ConsumerGroupHeartbeatInput {
        member_epoch: -1,
        member_id: member.into(),
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        topic_partitions: None,
        ..cg_join_req("g", member, &[])
    };
    assert_eq!(h.cg(leave("m2")).member_epoch, -1);
    // A member is left: its next heartbeat computes the new target, not the leave.
    let g = h.consumer("g");
    assert_eq!((g.group_epoch, g.assignment_epoch), (4, 3));
    h.cg(leave("m1"));
    let g = h.consumer("g");
    assert_eq!(g.state(), ConsumerGroupState::Empty);
    assert_eq!((g.group_epoch, g.assignment_epoch), (5, 5));
    // Settled with no time: a member joining now is assigned at once.
    assert_eq!(g.assignment_timestamp_ms, 0);
    let r = h.cg_join("g", "m3", &["t1"]);
    assert_eq!((r.member_epoch, count(&r.assignment)), (6, 6));
    // Replaying the log rebuilds the same epochs.
    let replayed = h.replayed();
    let g = replayed.group("g").unwrap();
    let Group::Consumer(g) = g else {
        panic!("not a consumer group")
    };
    assert_eq!((g.group_epoch, g.assignment_epoch), (6, 6));
}
