//! OffsetCommit / TxnOffsetCommit / OffsetFetch / OffsetDelete and offsets retention.

use super::*;

#[test]
fn simple_consumer_commits_create_an_empty_group() {
    let mut h = Harness::new();
    assert_eq!(
        h.commit(commit_req("simple", "", -1, "t1", 0, 42)),
        vec![(0, NONE)]
    );
    assert_eq!(h.classic("simple").state, ClassicGroupState::Empty);
    let rec = h.log.last().unwrap().clone();
    let CoordinatorRecord::OffsetCommit { value: Some(v), .. } = rec else {
        panic!()
    };
    assert_eq!(
        (
            v.offset,
            v.leader_epoch,
            v.metadata.as_str(),
            v.commit_timestamp_ms
        ),
        (42, 3, "meta", h.now)
    );
    assert_eq!(v.topic_id, tid(1), "topic id filled from metadata");
    assert_eq!(v.expire_timestamp_ms, None);
    let f = h.fetch(
        vec![fetch_group("simple", Some(vec![("t1", vec![0, 1])]))],
        false,
    );
    let p = &f[0].topics[0].1;
    assert_eq!(
        (
            p[0].committed_offset,
            p[0].committed_leader_epoch,
            p[0].metadata.as_str()
        ),
        (42, 3, "meta")
    );
    assert_eq!(p[1].committed_offset, -1);
}

#[test]
fn commit_generation_and_member_checks() {
    let mut h = Harness::new();
    let m = h.stable_single("g");
    assert_eq!(
        h.commit(commit_req("g", &m, 1, "t1", 0, 10)),
        vec![(0, NONE)]
    );
    assert_eq!(
        h.commit(commit_req("g", &m, 2, "t1", 0, 10)),
        vec![(0, ILLEGAL_GENERATION)]
    );
    assert_eq!(
        h.commit(commit_req("g", "who", 1, "t1", 0, 10)),
        vec![(0, UNKNOWN_MEMBER_ID)]
    );
    assert_eq!(
        h.commit(commit_req("g", "", -1, "t1", 0, 10)),
        vec![(0, UNKNOWN_MEMBER_ID)],
        "simple commits need an empty group"
    );
    let mut old = commit_req("missing", "m", 1, "t1", 0, 1);
    assert_eq!(h.commit(old.clone()), vec![(0, GROUP_ID_NOT_FOUND)]);
    old.api_version = 8;
    assert_eq!(h.commit(old), vec![(0, ILLEGAL_GENERATION)]);
    let mut big = commit_req("g", &m, 1, "t1", 1, 10);
    big.topics[0].partitions[0].committed_metadata = Some("x".repeat(5000));
    assert_eq!(h.commit(big), vec![(1, OFFSET_METADATA_TOO_LARGE)]);
    let mut empty_id = commit_req("", "", -1, "t1", 0, 1);
    empty_id.group_id.clear();
    assert_eq!(
        h.commit(empty_id),
        vec![(0, NONE)],
        "Kafka commits for the empty group id too"
    );
    let f = h.fetch(vec![fetch_group("", Some(vec![("t1", vec![0])]))], false);
    assert_eq!(f[0].topics[0].1[0].committed_offset, 1);
}

#[test]
fn commit_during_completing_rebalance() {
    let mut h = Harness::new();
    let (j, m) = h.join_dynamic("g");
    h.advance(3_000);
    h.join_resp(j);
    assert_eq!(
        h.commit(commit_req("g", &m, 1, "t1", 0, 10)),
        vec![(0, REBALANCE_IN_PROGRESS)]
    );
}

#[test]
fn retention_time_sets_explicit_expiry() {
    let mut h = Harness::new();
    let mut req = commit_req("g", "", -1, "t1", 0, 1);
    req.api_version = 2;
    req.retention_time_ms = 1_000;
    h.commit(req);
    let CoordinatorRecord::OffsetCommit { value: Some(v), .. } = h.log.last().unwrap().clone()
    else {
        panic!()
    };
    assert_eq!(v.expire_timestamp_ms, Some(h.now + 1_000));
}

#[test]
fn consumer_group_commits_use_member_epochs() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    assert_eq!(
        h.commit(commit_req("g", "m1", 2, "t1", 0, 7)),
        vec![(0, NONE)]
    );
    assert_eq!(
        h.commit(commit_req("g", "m1", 0, "t1", 0, 7)),
        vec![(0, STALE_MEMBER_EPOCH)]
    );
    assert_eq!(
        h.commit(commit_req("g", "ghost", 2, "t1", 0, 7)),
        vec![(0, UNKNOWN_MEMBER_ID)]
    );
    let mut old = commit_req("g", "m1", 2, "t1", 0, 7);
    old.api_version = 8;
    assert_eq!(h.commit(old), vec![(0, UNSUPPORTED_VERSION)]);
    assert_eq!(
        h.commit(commit_req("g", "", -1, "t1", 0, 7)),
        vec![(0, UNKNOWN_MEMBER_ID)],
        "admin commits need an empty group"
    );

    let fetch = |member: Option<&str>, epoch| OffsetFetchGroupInput {
        group_id: "g".into(),
        member_id: member.map(Into::into),
        member_epoch: epoch,
        topics: Some(vec![("t1".into(), vec![0])]),
    };
    let f = h.fetch(vec![fetch(Some("m1"), 2)], false);
    assert_eq!(
        (f[0].error_code, f[0].topics[0].1[0].committed_offset),
        (NONE, 7)
    );
    assert_eq!(
        h.fetch(vec![fetch(Some("m1"), 0)], false)[0].error_code,
        STALE_MEMBER_EPOCH
    );
    assert_eq!(
        h.fetch(vec![fetch(Some("ghost"), 2)], false)[0].error_code,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(h.fetch(vec![fetch(None, -1)], false)[0].error_code, NONE);

    h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: -1,
        ..Default::default()
    });
    assert_eq!(
        h.commit(commit_req("g", "", -1, "t1", 0, 8)),
        vec![(0, NONE)],
        "empty group: admin reset"
    );
}

#[test]
fn fetch_many_groups_and_all_topics() {
    let mut h = Harness::new();
    h.commit(commit_req("a", "", -1, "t2", 1, 11));
    h.commit(commit_req("a", "", -1, "t1", 0, 10));
    h.commit(commit_req("b", "", -1, "t1", 0, 20));
    let f = h.fetch(
        vec![
            fetch_group("a", None),
            fetch_group("b", Some(vec![("t1", vec![0])])),
            fetch_group("zzz", None),
        ],
        false,
    );
    assert_eq!(f.len(), 3);
    let a: Vec<(String, i32, i64)> = f[0]
        .topics
        .iter()
        .flat_map(|(t, ps)| {
            ps.iter()
                .map(move |p| (t.clone(), p.partition_index, p.committed_offset))
        })
        .collect();
    assert_eq!(a, vec![("t1".into(), 0, 10), ("t2".into(), 1, 11)]);
    assert_eq!(f[1].topics[0].1[0].committed_offset, 20);
    assert!(f[2].topics.is_empty());
    assert_eq!(f[2].error_code, NONE);
}

#[test]
fn require_stable_sees_pending_transactional_offsets() {
    let mut h = Harness::new();
    h.commit(commit_req("g", "", -1, "t1", 0, 5));
    let id = h.send(GroupRequest::TxnOffsetCommit(TxnOffsetCommitInput {
        group_id: "g".into(),
        producer_id: 77,
        producer_epoch: 0,
        generation_id: -1,
        member_id: "".into(),
        group_instance_id: None,
        topics: commit_req("g", "", -1, "t1", 0, 9).topics,
    }));
    let Some(GroupResponse::TxnOffsetCommit { topics }) = h.take(id) else {
        panic!()
    };
    assert_eq!(topics[0].partitions, vec![(0, NONE)]);
    let q = || vec![fetch_group("g", Some(vec![("t1", vec![0])]))];
    let f = h.fetch(q(), true);
    assert_eq!(f[0].topics[0].1[0].error_code, UNSTABLE_OFFSET_COMMIT);
    let f = h.fetch(q(), false);
    assert_eq!(
        f[0].topics[0].1[0].committed_offset, 5,
        "not visible before the commit marker"
    );
    h.shard.replay_end_transaction(77, true);
    let f = h.fetch(q(), true);
    assert_eq!(
        (
            f[0].topics[0].1[0].error_code,
            f[0].topics[0].1[0].committed_offset
        ),
        (NONE, 9)
    );
    // An aborted transaction leaves the committed offset alone.
    h.send(GroupRequest::TxnOffsetCommit(TxnOffsetCommitInput {
        group_id: "g".into(),
        producer_id: 78,
        producer_epoch: 0,
        generation_id: -1,
        member_id: "".into(),
        group_instance_id: None,
        topics: commit_req("g", "", -1, "t1", 0, 100).topics,
    }));
    h.shard.replay_end_transaction(78, false);
    assert_eq!(h.fetch(q(), true)[0].topics[0].1[0].committed_offset, 9);
}

#[test]
fn offset_delete() {
    let mut h = Harness::new();
    // A classic consumer-protocol group subscribed to t1 (v0 ConsumerProtocolSubscription).
    let sub = encode_consumer_subscription_v0(&["t1"]);
    let j = h.join_v("g", "", None, &[("range", &sub)], 3);
    h.advance(3_000);
    let m = h.join_resp(j).member_id;
    let s = h.sync("g", &m, 1, &[]);
    h.sync_resp(s);
    h.commit(commit_req("g", &m, 1, "t1", 0, 1));
    h.commit(commit_req("g", &m, 1, "t2", 0, 1));
    let id = h.send(GroupRequest::OffsetDelete {
        group_id: "g".into(),
        topics: vec![("t1".into(), vec![0]), ("t2".into(), vec![0, 1])],
    });
    let Some(GroupResponse::OffsetDelete(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.topics[0].1, vec![(0, GROUP_SUBSCRIBED_TO_TOPIC)]);
    assert_eq!(r.topics[1].1, vec![(0, NONE), (1, NONE)]);
    assert!(
        matches!(h.log.last(), Some(CoordinatorRecord::OffsetCommit { topic, partition: 0, value: None, .. }) if topic == "t2")
    );
    let id = h.send(GroupRequest::OffsetDelete {
        group_id: "missing".into(),
        topics: vec![],
    });
    let Some(GroupResponse::OffsetDelete(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);

    // A non-consumer protocol group cannot tell what it reads: refused while not empty.
    let id = h.send(GroupRequest::JoinGroup(JoinGroupInput {
        api_version: 3,
        group_id: "connect".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "connect".into(),
        protocols: vec![("default".into(), Bytes::new())],
        ..Default::default()
    }));
    h.advance(3_000);
    h.take(id);
    let id = h.send(GroupRequest::OffsetDelete {
        group_id: "connect".into(),
        topics: vec![("t1".into(), vec![0])],
    });
    let Some(GroupResponse::OffsetDelete(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.error_code, NON_EMPTY_GROUP);

    // KIP-848 groups: subscribed topics are known.
    h.cg_join("cg", "m1", &["t1"]);
    h.commit(commit_req("cg", "m1", 2, "t2", 0, 1));
    let id = h.send(GroupRequest::OffsetDelete {
        group_id: "cg".into(),
        topics: vec![("t1".into(), vec![0]), ("t2".into(), vec![0])],
    });
    let Some(GroupResponse::OffsetDelete(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.topics[0].1, vec![(0, GROUP_SUBSCRIBED_TO_TOPIC)]);
    assert_eq!(r.topics[1].1, vec![(0, NONE)]);
}

#[test]
fn offsets_expire_and_empty_groups_go_away() {
    let config = GroupCoordinatorConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 10_000,
        ..Default::default()
    };
    let mut h = Harness::with_config(config);
    h.shard.on_loaded(h.now);
    h.commit(commit_req("old", "", -1, "t1", 0, 1));
    let m = h.stable_single("active");
    h.commit(commit_req("active", &m, 1, "t1", 0, 1));
    for _ in 0..14 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("active", &m, 1, None), NONE);
    }
    assert!(
        h.shard.group("old").is_none(),
        "expired offsets, then the empty group"
    );
    assert!(
        h.shard.offsets().get("active", "t1", 0).is_some(),
        "a stable group keeps offsets of topics it may consume"
    );
}

#[test]
fn older_epoch_commits_accepted_for_partitions_held_since_then() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    // Past the assignment interval: m2's join gets a new target at once.
    h.advance(1_000);
    h.cg_join("g", "m2", &["t1"]);
    let r = h.cg_beat("g", "m1", 2, &[(tid(1), (0..6).collect())]);
    let kept = parts_of(&r.assignment, tid(1));
    h.cg_beat("g", "m1", 2, &[(tid(1), kept.clone())]);
    assert_eq!(h.consumer("g").members["m1"].member_epoch, 3);
    // m1 still commits with epoch 2 for a partition it has held since epoch 2: accepted.
    assert_eq!(
        h.commit(commit_req("g", "m1", 2, "t1", kept[0], 5)),
        vec![(kept[0], NONE)]
    );
    // A partition it no longer holds: stale.
    let gone = (0..6).find(|p| !kept.contains(p)).unwrap();
    assert_eq!(
        h.commit(commit_req("g", "m1", 2, "t1", gone, 5)),
        vec![(gone, STALE_MEMBER_EPOCH)]
    );
    // m2 got its partitions at epoch 3: an epoch-2 commit is stale, a newer epoch too.
    let r2 = h.cg_beat("g", "m2", 3, &[]);
    let p2 = parts_of(&r2.assignment, tid(1))[0];
    assert_eq!(
        h.commit(commit_req("g", "m2", 2, "t1", p2, 5)),
        vec![(p2, STALE_MEMBER_EPOCH)]
    );
    assert_eq!(
        h.commit(commit_req("g", "m2", 4, "t1", p2, 5)),
        vec![(p2, STALE_MEMBER_EPOCH)]
    );
    assert_eq!(
        h.commit(commit_req("g", "m2", 3, "t1", p2, 5)),
        vec![(p2, NONE)]
    );
}

fn parts_of(tp: &Option<Vec<(Uuid, Vec<i32>)>>, topic: Uuid) -> Vec<i32> {
    tp.as_ref()
        .and_then(|v| v.iter().find(|(t, _)| *t == topic))
        .map(|(_, p)| p.clone())
        .unwrap_or_default()
}

#[test]
fn deleting_a_topic_tombstones_every_groups_offsets_for_it() {
    let mut h = Harness::new();
    h.commit(commit_req("g1", "", -1, "t1", 0, 5));
    h.commit(commit_req("g1", "", -1, "t1", 1, 6));
    h.commit(commit_req("g1", "", -1, "t2", 0, 7));
    h.commit(commit_req("g2", "", -1, "t1", 0, 3));
    // An open transaction's offset for the topic must not come back with its commit marker.
    h.send(GroupRequest::TxnOffsetCommit(TxnOffsetCommitInput {
        group_id: "g2".into(),
        producer_id: 77,
        producer_epoch: 0,
        generation_id: -1,
        member_id: "".into(),
        group_instance_id: None,
        topics: commit_req("g2", "", -1, "t1", 2, 9).topics,
    }));

    let out = h.shard.on_topics_deleted(&["t1".to_string()]);
    assert!(out.responses.is_empty());
    let tombstones: Vec<(String, String, i32)> = out
        .records
        .iter()
        .map(|r| match r {
            CoordinatorRecord::OffsetCommit {
                group_id,
                topic,
                partition,
                value: None,
            } => (group_id.clone(), topic.clone(), *partition),
            other => panic!("not an offset tombstone: {other:?}"),
        })
        .collect();
    let expected: Vec<(String, String, i32)> = [("g1", 0), ("g1", 1), ("g2", 0), ("g2", 2)]
        .iter()
        .map(|(g, p)| (g.to_string(), "t1".to_string(), *p))
        .collect();
    assert_eq!(tombstones, expected);
    h.log.extend(out.records);

    h.shard.replay_end_transaction(77, true);
    let committed = |shard: &GroupCoordinatorShard, g: &str, t: &str, p: i32| {
        shard.offsets().get(g, t, p).map(|v| v.offset)
    };
    for (g, p) in [("g1", 0), ("g1", 1), ("g2", 0), ("g2", 2)] {
        assert_eq!(committed(&h.shard, g, "t1", p), None, "{g} t1-{p}");
    }
    assert_eq!(
        committed(&h.shard, "g1", "t2", 0),
        Some(7),
        "other topics stay"
    );
    // A reload from the log reaches the same state.
    let reloaded = h.replayed();
    assert_eq!(committed(&reloaded, "g1", "t1", 0), None);
    assert_eq!(committed(&reloaded, "g2", "t1", 0), None);
    assert_eq!(committed(&reloaded, "g1", "t2", 0), Some(7));
    // Nothing left to delete the second time.
    assert!(h
        .shard
        .on_topics_deleted(&["t1".to_string()])
        .records
        .is_empty());
}
