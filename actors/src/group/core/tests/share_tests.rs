//! KIP-932 share groups: ShareGroupHeartbeat join / heartbeat / leave / expiry, fencing, the
//! simple assignor's shapes, ShareGroupDescribe and the type checks against other groups.

use super::*;
use std::collections::BTreeSet;

use crate::group::core::records::{CoordinatorRecord, ShareStatePartitions};
use crate::group::core::share::{simple_assign, ShareMember};

/// One heartbeat, and the initialization it asked for (not yet answered).
fn share_raw(
    h: &mut Harness,
    group: &str,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> (ShareGroupHeartbeatOutput, Option<ShareStateInit>) {
    let id = h.send(GroupRequest::ShareGroupHeartbeat(
        ShareGroupHeartbeatInput {
            group_id: group.into(),
            member_id: member.into(),
            member_epoch: epoch,
            rack_id: None,
            subscribed_topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        },
    ));
    match h.take(id) {
        Some(GroupResponse::ShareGroupHeartbeat(r, init)) => (r, init),
        other => panic!("{other:?}"),
    }
}

/// The share coordinator's answer to an initialization, as the API layer reports it.
fn initialized(h: &mut Harness, init: &ShareStateInit, succeeded: bool) {
    let id = h.send(GroupRequest::ShareStateInitialized {
        group_id: init.group_id.clone(),
        partitions: init.partitions.iter().map(|(t, p, _)| (*t, *p)).collect(),
        succeeded,
        asked_at_ms: init.asked_at_ms,
    });
    assert_eq!(h.take(id), Some(GroupResponse::Done));
}

/// One heartbeat whose initialization, if any, the share coordinator does at once.
fn share(
    h: &mut Harness,
    group: &str,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatOutput {
    let (r, init) = share_raw(h, group, member, epoch, topics);
    if let Some(init) = init {
        initialized(h, &init, true);
    }
    r
}

fn count(a: &Option<Vec<(Uuid, Vec<i32>)>>) -> usize {
    a.as_ref()
        .map_or(0, |v| v.iter().map(|(_, p)| p.len()).sum())
}

#[test]
fn members_join_share_and_leave() {
    let mut h = Harness::new();
    let r = share(&mut h, "g", "m1", 0, Some(&["t1"]));
    assert_eq!(
        (r.error_code, r.member_epoch, r.heartbeat_interval_ms),
        (NONE, 1, 5_000)
    );
    // Nothing is assigned before its state exists.
    assert_eq!(r.assignment, Some(vec![]));
    // Initialized since: the next heartbeat bumps the epoch and assigns all six.
    let r = share(&mut h, "g", "m1", 1, None);
    assert_eq!((r.member_epoch, count(&r.assignment)), (2, 6));
    // A steady heartbeat carries no assignment.
    let r = share(&mut h, "g", "m1", 2, None);
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    assert!(r.assignment.is_none());
    // A second member: no revocation step, it gets half at once; m1 learns at its next beat.
    let r2 = share(&mut h, "g", "m2", 0, Some(&["t1"]));
    assert_eq!((r2.member_epoch, count(&r2.assignment)), (3, 3));
    let r1 = share(&mut h, "g", "m1", 2, None);
    assert_eq!((r1.member_epoch, count(&r1.assignment)), (3, 3));
    // m1's old epoch is still accepted once (a heartbeat that crossed the change), older not.
    assert_eq!(share(&mut h, "g", "m1", 2, None).error_code, NONE);
    let r = share(&mut h, "g", "m1", 7, None);
    assert_eq!(r.error_code, FENCED_MEMBER_EPOCH);
    // Leaving gives the partitions back to the other member.
    let r = share(&mut h, "g", "m2", -1, None);
    assert_eq!(
        (r.error_code, r.member_epoch, r.heartbeat_interval_ms),
        (NONE, -1, 0)
    );
    let r1 = share(&mut h, "g", "m1", 3, None);
    assert_eq!((r1.member_epoch, count(&r1.assignment)), (4, 6));
    let d = h.shard.share_describe("g");
    assert_eq!(
        (
            d.group_state.as_str(),
            d.assignor_name.as_str(),
            d.members.len()
        ),
        ("Stable", "simple", 1)
    );
}

/// The share-partitions' state record of `group` last written.
fn state_record(h: &Harness, group: &str) -> Option<ShareStatePartitions> {
    h.log.iter().rev().find_map(|r| match r {
        CoordinatorRecord::ShareGroupStatePartitionMetadata { group_id, value }
            if group_id == group =>
        {
            Some(value.clone().unwrap_or_default())
        }
        _ => None,
    })
}

#[test]
fn partitions_are_assigned_once_their_state_exists() {
    let mut h = Harness::new();
    let (r, init) = share_raw(&mut h, "g", "m1", 0, Some(&["t2"]));
    let init = init.expect("asks for t2's state");
    // A topic new to the group: no start offset (share.auto.offset.reset decides), at the
    // group epoch.
    assert_eq!(
        (init.state_epoch, init.partitions.clone()),
        (1, (0..3).map(|p| (tid(2), p, -1)).collect::<Vec<_>>())
    );
    assert_eq!((r.member_epoch, count(&r.assignment)), (1, 0));
    let s = state_record(&h, "g").expect("written");
    assert_eq!(s.initializing[&tid(2)].1.len(), 3);
    assert!(s.initialized.is_empty());
    // Not answered yet: not asked again within the retry interval, nothing assigned.
    let (r, again) = share_raw(&mut h, "g", "m1", 1, None);
    assert!(again.is_none());
    assert_eq!((r.member_epoch, count(&r.assignment)), (1, 0));
    // It failed: asked again at the next heartbeat.
    initialized(&mut h, &init, false);
    assert!(state_record(&h, "g").unwrap().initializing.is_empty());
    let (_, again) = share_raw(&mut h, "g", "m1", 1, None);
    let again = again.expect("asked again");
    assert_eq!(again.partitions, init.partitions);
    // A lost answer is asked for again after group.share.initialize.retry.interval.ms.
    h.advance(10_000);
    assert!(share_raw(&mut h, "g", "m1", 1, None).1.is_none());
    h.advance(25_000);
    let (_, third) = share_raw(&mut h, "g", "m1", 1, None);
    let third = third.expect("asked again after 30 s");
    initialized(&mut h, &third, true);
    let s = state_record(&h, "g").unwrap();
    assert_eq!(s.initialized[&tid(2)].1.len(), 3);
    assert!(s.initializing.is_empty());
    let r = share(&mut h, "g", "m1", 1, None);
    assert_eq!((r.member_epoch, count(&r.assignment)), (2, 3));
}

#[test]
fn alter_and_delete_offsets_need_an_empty_share_group() {
    let mut h = Harness::new();
    // An unknown group is created by an alter; unknown topics and partitions are refused.
    let id = h.send(GroupRequest::AlterShareGroupOffsets {
        group_id: "g".into(),
        topics: vec![
            ("t2".into(), vec![(0, 5), (7, 1)]),
            ("nope".into(), vec![(0, 1)]),
        ],
    });
    let Some(GroupResponse::AlterShareGroupOffsets(o)) = h.take(id) else {
        panic!()
    };
    assert_eq!(o.error, None);
    assert_eq!(o.topics[0].2[0], (0, NONE, None));
    assert_eq!(o.topics[0].2[1].1, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(o.topics[1].1, Uuid::default());
    let init = o.initialize.expect("initialize t2-0");
    assert_eq!(
        (init.state_epoch, init.partitions.clone()),
        (0, vec![(tid(2), 0, 5)])
    );
    assert_eq!(h.shard.group("g").unwrap().state_name(), "Empty");
    initialized(&mut h, &init, true);

    // A member: alter and delete are refused.
    share(&mut h, "g", "m1", 0, Some(&["t2"]));
    let id = h.send(GroupRequest::AlterShareGroupOffsets {
        group_id: "g".into(),
        topics: vec![("t2".into(), vec![(0, 0)])],
    });
    assert!(
        matches!(h.take(id), Some(GroupResponse::AlterShareGroupOffsets(o))
        if o.error == Some((NON_EMPTY_GROUP, "The group is not empty.".into())))
    );
    let delete = |h: &mut Harness, group: &str, topics: &[&str]| {
        let id = h.send(GroupRequest::DeleteShareGroupOffsets {
            group_id: group.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
        });
        match h.take(id) {
            Some(GroupResponse::DeleteShareGroupOffsets(o)) => o,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        delete(&mut h, "g", &["t2"]).error.unwrap().0,
        NON_EMPTY_GROUP
    );
    assert_eq!(
        delete(&mut h, "zz", &["t2"]).error,
        Some((GROUP_ID_NOT_FOUND, "Group zz not found.".into()))
    );

    // Empty again: t2 has state (all three partitions), t1 never had any.
    share(&mut h, "g", "m1", -1, None);
    let o = delete(&mut h, "g", &["t2", "t1"]);
    assert_eq!(o.error, None);
    assert_eq!(o.delete, vec![("t2".to_string(), tid(2), vec![0, 1, 2])]);
    assert_eq!(
        o.refused,
        vec![(
            "t1".to_string(),
            Uuid::default(),
            UNKNOWN_TOPIC_OR_PARTITION,
            "There is no offset information to delete.".to_string()
        )]
    );
    let s = state_record(&h, "g").unwrap();
    assert!(s.initialized.is_empty());
    assert_eq!(s.deleting[&tid(2)], "t2");
    let id = h.send(GroupRequest::ShareStateDeleted {
        group_id: "g".into(),
        topics: vec![tid(2)],
    });
    assert_eq!(h.take(id), Some(GroupResponse::Done));
    assert!(state_record(&h, "g").unwrap().deleting.is_empty());
}

#[test]
fn an_alter_is_not_undone_by_a_heartbeat_or_a_stale_failure() {
    let mut h = Harness::new();
    // A heartbeat asks for t2's state; it is still under way when the member leaves.
    let (_, first) = share_raw(&mut h, "g", "m1", 0, Some(&["t2"]));
    let first = first.expect("asks");
    share(&mut h, "g", "m1", -1, None);
    h.advance(1_000);
    let id = h.send(GroupRequest::AlterShareGroupOffsets {
        group_id: "g".into(),
        topics: vec![("t2".into(), vec![(0, 2), (1, 2), (2, 2)])],
    });
    let Some(GroupResponse::AlterShareGroupOffsets(o)) = h.take(id) else {
        panic!()
    };
    let alter = o.initialize.expect("alter initializes");
    // A member joining while the alter's requests are under way does not ask for the same
    // partitions again (its start offset -1 would replace the altered one).
    let (_, again) = share_raw(&mut h, "g", "m2", 0, Some(&["t2"]));
    assert!(again.is_none(), "{again:?}");
    // The heartbeat's old request fails late: the alter's stays pending.
    initialized(&mut h, &first, false);
    assert_eq!(
        state_record(&h, "g").unwrap().initializing[&tid(2)].1.len(),
        3
    );
    // The alter's succeeds: assignable.
    initialized(&mut h, &alter, true);
    let s = state_record(&h, "g").unwrap();
    assert!(s.initializing.is_empty());
    assert_eq!(s.initialized[&tid(2)].1.len(), 3);
    let r = share(&mut h, "g", "m2", 3, None);
    assert_eq!(count(&r.assignment), 3);
}

#[test]
fn an_empty_share_group_and_its_state_survive_a_reload() {
    let mut h = Harness::new();
    share(&mut h, "g", "m1", 0, Some(&["t2"]));
    share(&mut h, "g", "m1", 1, None);
    share(&mut h, "g", "m1", -1, None);
    let epoch = h.shard.share_describe("g").group_epoch;
    let mut reloaded = Harness::new();
    for r in &h.log {
        reloaded.shard.replay(r);
    }
    let d = reloaded.shard.share_describe("g");
    assert_eq!((d.group_state.as_str(), d.group_epoch), ("Empty", epoch));
    let id = reloaded.send(GroupRequest::ShareStatePartitions {
        group_id: "g".into(),
    });
    assert_eq!(
        reloaded.take(id),
        Some(GroupResponse::ShareStatePartitions(Ok(vec![(
            tid(2),
            "t2".to_string(),
            vec![0, 1, 2]
        )])))
    );
    // DeleteGroups: the state goes first (marked deleting), then the group's records.
    let id = reloaded.send(GroupRequest::DeleteShareGroupState {
        group_id: "g".into(),
    });
    assert_eq!(
        reloaded.take(id),
        Some(GroupResponse::DeleteShareGroupState(Ok(vec![(
            tid(2),
            vec![0, 1, 2]
        )])))
    );
    let id = reloaded.send(GroupRequest::DeleteGroups {
        group_ids: vec!["g".into()],
    });
    assert!(
        matches!(reloaded.take(id), Some(GroupResponse::DeleteGroups { results }) if results[0].1 == NONE)
    );
    assert!(reloaded.shard.group("g").is_none());
    // And read back from the whole log, it stays deleted.
    let mut again = Harness::new();
    for r in h.log.iter().chain(reloaded.log.iter()) {
        again.shard.replay(r);
    }
    assert!(again.shard.group("g").is_none());
}

#[test]
fn a_silent_member_is_removed_after_its_session() {
    let mut h = Harness::new();
    share(&mut h, "g", "m1", 0, Some(&["t2"]));
    share(&mut h, "g", "m2", 0, Some(&["t2"]));
    h.advance(30_000);
    assert_eq!(share(&mut h, "g", "m1", 1, None).member_epoch, 2);
    h.advance(30_000);
    // m2 has been silent for 60 s > 45 s.
    let r = share(&mut h, "g", "m2", 2, None);
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID);
    let r = share(&mut h, "g", "m1", 2, None);
    assert_eq!((r.member_epoch, count(&r.assignment)), (3, 3));
}

#[test]
fn requests_are_checked_as_kafka_does() {
    let mut h = Harness::new();
    let r = share(&mut h, "g", "m1", 0, None);
    assert_eq!(
        (r.error_code, r.error_message.as_deref()),
        (
            INVALID_REQUEST,
            Some("SubscribedTopicNames must be set in first request.")
        )
    );
    assert_eq!(
        share(&mut h, "", "m1", 0, Some(&["t1"])).error_code,
        INVALID_REQUEST
    );
    let r = share(&mut h, "nope", "m1", 3, None);
    assert_eq!(
        (r.error_code, r.error_message.as_deref()),
        (GROUP_ID_NOT_FOUND, Some("Share group nope not found."))
    );
    share(&mut h, "g", "m1", 0, Some(&["t1"]));
    let r = share(&mut h, "g", "m9", 4, None);
    assert_eq!(
        (r.error_code, r.error_message.as_deref()),
        (
            UNKNOWN_MEMBER_ID,
            Some("Member m9 is not a member of group g.")
        )
    );
    // A consumer group's id is not a share group's, and the other way round.
    h.cg_join("cg", "c1", &["t1"]);
    let r = share(&mut h, "cg", "m1", 0, Some(&["t1"]));
    assert_eq!(
        (r.error_code, r.error_message.as_deref()),
        (GROUP_ID_NOT_FOUND, Some("Group cg is not a share group."))
    );
    assert_eq!(h.cg_join("g", "c1", &["t1"]).error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(h.shard.share_describe("cg").error_code, GROUP_ID_NOT_FOUND);
    assert_eq!(h.shard.group("g").unwrap().type_name(), "share");
}

fn members(n: usize, topics: &[&str]) -> BTreeMap<String, ShareMember> {
    (0..n)
        .map(|i| {
            let id = format!("m{i}");
            let m = ShareMember {
                member_id: id.clone(),
                member_epoch: 0,
                previous_member_epoch: -1,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed_topic_names: topics.iter().map(|t| t.to_string()).collect(),
                assignment: Default::default(),
            };
            (id, m)
        })
        .collect()
}

/// Every partition of every topic assignable.
fn all_partitions(topics: &TopicsView) -> BTreeMap<Uuid, BTreeSet<i32>> {
    ["t1", "t2", "other"]
        .iter()
        .filter_map(|n| Some((topics.id_of(n)?, (0..topics.num_partitions(n)?).collect())))
        .collect()
}

#[test]
fn the_simple_assignor_spreads_then_shares() {
    let h = Harness::new();
    let topics = h.shard.topics().clone();
    let all = all_partitions(&topics);
    // 2 members, 3 partitions (t2): 2 + 1.
    let a = simple_assign(&members(2, &["t2"]), &topics, &all);
    let sizes: Vec<usize> = a.values().map(|x| x[&tid(2)].len()).collect();
    assert_eq!(sizes, vec![2, 1]);
    // 4 members, 3 partitions: each partition shared by 2, 6 places over 4 members.
    let a = simple_assign(&members(4, &["t2"]), &topics, &all);
    let mut owners = [0; 3];
    for x in a.values() {
        assert!(!x[&tid(2)].is_empty(), "every member reads something");
        for p in &x[&tid(2)] {
            owners[*p as usize] += 1;
        }
    }
    assert_eq!(owners, [2, 2, 2]);
    // 2 partitions, 5 members: each partition shared by 3, one member reads both.
    let a = simple_assign(&members(5, &["other"]), &topics, &all);
    let sizes: Vec<usize> = a.values().map(|x| x[&tid(9)].len()).collect();
    assert_eq!(sizes, vec![2, 1, 1, 1, 1]);
}
