//! KIP-932 share groups: ShareGroupHeartbeat join / heartbeat / leave / expiry, fencing, the
//! simple assignor's shapes, ShareGroupDescribe and the type checks against other groups.

use super::*;
use crate::group::core::share::{simple_assign, ShareMember};

fn share(
    h: &mut Harness,
    group: &str,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatOutput {
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
        Some(GroupResponse::ShareGroupHeartbeat(r)) => r,
        other => panic!("{other:?}"),
    }
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
    assert_eq!(count(&r.assignment), 6);
    // A steady heartbeat carries no assignment.
    let r = share(&mut h, "g", "m1", 1, None);
    assert_eq!((r.error_code, r.member_epoch), (NONE, 1));
    assert!(r.assignment.is_none());
    // A second member: no revocation step, it gets half at once; m1 learns at its next beat.
    let r2 = share(&mut h, "g", "m2", 0, Some(&["t1"]));
    assert_eq!((r2.member_epoch, count(&r2.assignment)), (2, 3));
    let r1 = share(&mut h, "g", "m1", 1, None);
    assert_eq!((r1.member_epoch, count(&r1.assignment)), (2, 3));
    // m1's old epoch is still accepted once (a heartbeat that crossed the change), older not.
    assert_eq!(share(&mut h, "g", "m1", 1, None).error_code, NONE);
    let r = share(&mut h, "g", "m1", 7, None);
    assert_eq!(r.error_code, FENCED_MEMBER_EPOCH);
    // Leaving gives the partitions back to the other member.
    let r = share(&mut h, "g", "m2", -1, None);
    assert_eq!(
        (r.error_code, r.member_epoch, r.heartbeat_interval_ms),
        (NONE, -1, 0)
    );
    let r1 = share(&mut h, "g", "m1", 2, None);
    assert_eq!((r1.member_epoch, count(&r1.assignment)), (3, 6));
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

#[test]
fn the_simple_assignor_spreads_then_shares() {
    let h = Harness::new();
    let topics = h.shard.topics().clone();
    // 2 members, 3 partitions (t2): 2 + 1.
    let a = simple_assign(&members(2, &["t2"]), &topics);
    let sizes: Vec<usize> = a.values().map(|x| x[&tid(2)].len()).collect();
    assert_eq!(sizes, vec![2, 1]);
    // 4 members, 3 partitions: each partition shared by 2, 6 places over 4 members.
    let a = simple_assign(&members(4, &["t2"]), &topics);
    let mut owners = [0; 3];
    for x in a.values() {
        assert!(!x[&tid(2)].is_empty(), "every member reads something");
        for p in &x[&tid(2)] {
            owners[*p as usize] += 1;
        }
    }
    assert_eq!(owners, [2, 2, 2]);
    // 2 partitions, 5 members: each partition shared by 3, one member reads both.
    let a = simple_assign(&members(5, &["other"]), &topics);
    let sizes: Vec<usize> = a.values().map(|x| x[&tid(9)].len()).collect();
    assert_eq!(sizes, vec![2, 1, 1, 1, 1]);
}
