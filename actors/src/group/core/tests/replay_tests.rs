//! Replay: a shard rebuilt from the records another shard wrote holds the same persisted
//! state (groups and offsets), and serves the same members afterwards.

use super::*;
use crate_records::GroupMetadataValue;

use super::super::records as crate_records;

#[derive(Debug, PartialEq)]
enum Persisted {
    /// The classic group's record value (state timestamp aside: Kafka writes the record
    /// before the group turns Stable) and its state.
    Classic(GroupMetadataValue, &'static str),
    Consumer(super::super::consumer_group::ConsumerGroup),
}

fn persisted(shard: &GroupCoordinatorShard) -> Vec<(String, Persisted)> {
    shard
        .groups()
        .filter_map(|(id, g)| {
            let p = match g {
                Group::Classic(c) => {
                    let mut v = c.to_record_value();
                    v.current_state_timestamp_ms = 0;
                    Persisted::Classic(v, c.state.name())
                }
                Group::Consumer(c) => Persisted::Consumer(c.clone()),
                // Share groups are kept in memory only.
                Group::Share(_) => return None,
            };
            Some((id.clone(), p))
        })
        .collect()
}

fn assert_replay_matches(h: &Harness) -> GroupCoordinatorShard {
    let replayed = h.replayed();
    assert_eq!(persisted(&replayed), persisted(&h.shard));
    assert_eq!(replayed.offsets(), h.shard.offsets());
    replayed
}

#[test]
fn classic_groups_and_offsets_replay() {
    let mut h = Harness::new();
    let m = h.stable_single("a");
    h.commit(commit_req("a", &m, 1, "t1", 0, 10));
    h.commit(commit_req("a", &m, 1, "t1", 1, 11));
    h.commit(commit_req("simple", "", -1, "t2", 2, 3));
    // Static member replaced without a rebalance (persisted by its own record).
    let j = h.join("s", "", Some("inst"), &[("range", b"m")]);
    h.advance(3_000);
    let first = h.join_resp(j).member_id;
    let s = h.sync("s", &first, 1, &[(&first, b"x")]);
    h.sync_resp(s);
    let j = h.join("s", "", Some("inst"), &[("range", b"m")]);
    h.join_resp(j);
    assert_replay_matches(&h);

    // A group that emptied, offsets deleted, a group deleted.
    let id = h.send(GroupRequest::LeaveGroup(LeaveGroupInput {
        group_id: "a".into(),
        members: vec![LeaveGroupMemberInput {
            member_id: m.clone(),
            ..Default::default()
        }],
    }));
    h.take(id);
    assert_eq!(h.classic("a").state, ClassicGroupState::Empty);
    let id = h.send(GroupRequest::OffsetDelete {
        group_id: "a".into(),
        topics: vec![("t1".into(), vec![1])],
    });
    h.take(id);
    let id = h.send(GroupRequest::DeleteGroups {
        group_ids: vec!["simple".into()],
    });
    h.take(id);
    let replayed = assert_replay_matches(&h);
    assert!(replayed.group("simple").is_none());
    assert_eq!(
        replayed.offsets().get("a", "t1", 0).map(|v| v.offset),
        Some(10)
    );
    assert!(replayed.offsets().get("a", "t1", 1).is_none());
}

#[test]
fn consumer_groups_replay_at_every_step() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1", "t2"]);
    assert_replay_matches(&h);
    // Past the assignment interval: m2's join gets a new target at once.
    h.advance(1_000);
    h.cg_join("g", "m2", &["t1"]);
    assert_replay_matches(&h);
    let r = h.cg_beat(
        "g",
        "m1",
        2,
        &[(tid(1), (0..6).collect()), (tid(2), vec![0, 1, 2])],
    );
    assert_replay_matches(&h);
    let owned = r.assignment.clone().unwrap();
    h.cg_beat("g", "m1", 2, &owned);
    h.cg_beat("g", "m2", 3, &[]);
    h.cg(ConsumerGroupHeartbeatInput {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("t.*".into()),
        instance_id: Some("i3".into()),
        server_assignor: Some("range".into()),
        ..cg_join_req("g", "m3", &[])
    });
    assert_replay_matches(&h);
    h.commit(commit_req(
        "g",
        "m2",
        h.consumer("g").members["m2"].member_epoch,
        "t1",
        0,
        99,
    ));
    h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m3".into(),
        member_epoch: -2,
        instance_id: Some("i3".into()),
        ..Default::default()
    });
    assert_replay_matches(&h);
    h.cg(ConsumerGroupHeartbeatInput {
        instance_id: Some("i3".into()),
        ..cg_join_req("g", "m3b", &[])
    });
    h.cg(ConsumerGroupHeartbeatInput {
        api_version: 1,
        group_id: "g".into(),
        member_id: "m1".into(),
        member_epoch: -1,
        ..Default::default()
    });
    h.advance(45_000); // everyone else's session expires
    assert!(h.consumer("g").members.is_empty());
    assert_replay_matches(&h);
    let id = h.send(GroupRequest::DeleteGroups {
        group_ids: vec!["g".into()],
    });
    h.take(id);
    let replayed = assert_replay_matches(&h);
    assert!(replayed.group("g").is_none());
}

#[test]
fn members_continue_after_reload() {
    let mut h = Harness::new();
    h.cg_join("g", "m1", &["t1"]);
    let m = h.stable_single("c");
    let mut replayed = h.replayed();
    replayed.on_loaded(h.now);
    let mut h2 = Harness::new();
    h2.shard = replayed;
    h2.now = h.now;
    let r = h2.cg_beat("g", "m1", 2, &[(tid(1), (0..6).collect())]);
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    assert_eq!(h2.heartbeat("c", &m, 1, None), NONE);
    // Members whose clients are gone expire after their session timeouts.
    h2.advance(46_000);
    assert!(h2.consumer("g").members.is_empty());
    assert!(h2.classic("c").members.is_empty());
}

#[test]
fn pending_transactional_offsets_replay() {
    let mut h = Harness::new();
    let mut shard = GroupCoordinatorShard::new(GroupCoordinatorConfig::default(), 1);
    h.send(GroupRequest::TxnOffsetCommit(TxnOffsetCommitInput {
        group_id: "g".into(),
        producer_id: 5,
        producer_epoch: 0,
        generation_id: -1,
        member_id: "".into(),
        group_instance_id: None,
        topics: commit_req("g", "", -1, "t1", 0, 9).topics,
    }));
    for r in &h.log {
        shard.replay_transactional(5, r);
    }
    assert!(shard.offsets().has_pending("g", "t1", 0));
    shard.replay_end_transaction(5, true);
    assert_eq!(shard.offsets().get("g", "t1", 0).map(|v| v.offset), Some(9));
}
