//! `GroupCoordinatorActor` over a real `PartitionActor` (in-memory log): write-then-respond,
//! load by replay after a restart of the shard, parked classic joins released by the shard's
//! timers, and failed writes answered NOT_COORDINATOR.

use std::time::Duration;

use actix::Addr;
use bytes::Bytes;
use kactor_actors::group::core::{
    CommitPartitionInput, CommitTopicInput, ConsumerGroupHeartbeatInput, GroupCoordinatorConfig,
    GroupRequest, GroupResponse, JoinGroupInput, OffsetCommitInput, OffsetFetchGroupInput,
    SyncGroupInput,
};
use kactor_actors::group::messages::*;
use kactor_actors::group::GroupCoordinatorActor;
use kactor_actors::partition::core::PartitionConfig;
use kactor_actors::partition::messages::{BecomeFollower, DescribeReplica};
use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

mod common;
use common::group::{assignment, coordinator, offsets_partition};

async fn call(addr: &Addr<GroupCoordinatorActor>, request: GroupRequest) -> GroupResponse {
    addr.send(HandleGroupRequest { request }).await.unwrap()
}

fn commit(group: &str, partition: i32, offset: i64) -> GroupRequest {
    GroupRequest::OffsetCommit(OffsetCommitInput {
        group_id: group.into(),
        topics: vec![CommitTopicInput {
            name: "orders".into(),
            topic_id: Uuid::ZERO,
            partitions: vec![CommitPartitionInput {
                partition_index: partition,
                committed_offset: offset,
                committed_leader_epoch: 0,
                committed_metadata: None,
            }],
        }],
        ..Default::default()
    })
}

fn fetch(group: &str) -> GroupRequest {
    GroupRequest::OffsetFetch {
        groups: vec![OffsetFetchGroupInput {
            group_id: group.into(),
            member_id: None,
            member_epoch: -1,
            topics: None,
        }],
        require_stable: true,
    }
}

fn fetched(r: GroupResponse) -> Vec<(i32, i64)> {
    let GroupResponse::OffsetFetch { groups } = r else {
        panic!("{r:?}")
    };
    groups[0]
        .topics
        .iter()
        .flat_map(|(_, ps)| ps.iter().map(|p| (p.partition_index, p.committed_offset)))
        .collect()
}

#[actix_rt::test]
async fn committed_offsets_survive_a_reload() {
    let partition = offsets_partition().await;
    let c = coordinator(&partition, GroupCoordinatorConfig::default()).await;
    for p in 0..3 {
        let r = call(&c, commit("g", p, 10 + p as i64)).await;
        assert_eq!(
            r,
            GroupResponse::OffsetCommit {
                topics: vec![kactor_actors::group::core::CommitTopicOutput {
                    name: "orders".into(),
                    topic_id: Uuid::ZERO,
                    partitions: vec![(p, NONE)],
                }]
            }
        );
    }
    // Each commit was appended (and committed) before its response.
    let info = partition.send(DescribeReplica).await.unwrap();
    assert_eq!((info.log_end_offset, info.high_watermark), (3, 3));
    assert_eq!(
        fetched(call(&c, fetch("g")).await),
        vec![(0, 10), (1, 11), (2, 12)]
    );

    // The broker resigns and leads again: a new shard loads the partition.
    c.send(ResignGroupCoordinator).await.unwrap();
    let c2 = coordinator(&partition, GroupCoordinatorConfig::default()).await;
    let status = c2.send(DescribeGroupCoordinator).await.unwrap();
    assert_eq!((status.groups, status.next_offset), (1, 3));
    assert_eq!(
        fetched(call(&c2, fetch("g")).await),
        vec![(0, 10), (1, 11), (2, 12)]
    );
}

#[actix_rt::test]
async fn classic_rebalance_is_driven_by_the_shard_timers() {
    let partition = offsets_partition().await;
    let config = GroupCoordinatorConfig {
        group_initial_rebalance_delay_ms: 30,
        ..Default::default()
    };
    let c = coordinator(&partition, config.clone()).await;
    let join = |member: &str| {
        GroupRequest::JoinGroup(JoinGroupInput {
            api_version: 3,
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            member_id: member.into(),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..Default::default()
        })
    };
    // Two JoinGroups parked together, answered when the initial delay ends.
    let (a, b) = tokio::join!(call(&c, join("")), call(&c, join("")));
    let (GroupResponse::JoinGroup(a), GroupResponse::JoinGroup(b)) = (a, b) else {
        panic!()
    };
    assert_eq!((a.error_code, b.error_code), (NONE, NONE));
    assert_eq!((a.generation_id, b.generation_id), (1, 1));
    let (leader, follower) = if a.member_id == a.leader {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(leader.members.len(), 2);
    let sync = |member: &str, assignments: Vec<(String, Bytes)>| {
        GroupRequest::SyncGroup(SyncGroupInput {
            api_version: 3,
            group_id: "g".into(),
            generation_id: 1,
            member_id: member.into(),
            assignments,
            ..Default::default()
        })
    };
    let (fs, ls) = tokio::join!(call(&c, sync(&follower.member_id, vec![])), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        call(
            &c,
            sync(
                &leader.member_id,
                vec![
                    (leader.member_id.clone(), Bytes::from_static(b"L")),
                    (follower.member_id.clone(), Bytes::from_static(b"F")),
                ],
            ),
        )
        .await
    });
    let (GroupResponse::SyncGroup(fs), GroupResponse::SyncGroup(ls)) = (fs, ls) else {
        panic!()
    };
    assert_eq!(
        (&fs.assignment[..], &ls.assignment[..]),
        (&b"F"[..], &b"L"[..])
    );

    // The assignment was persisted: a reloaded shard knows the stable group.
    c.send(ResignGroupCoordinator).await.unwrap();
    let c2 = coordinator(&partition, config).await;
    let r = call(
        &c2,
        GroupRequest::DescribeGroups {
            api_version: 5,
            group_ids: vec!["g".into()],
        },
    )
    .await;
    let GroupResponse::DescribeGroups { groups } = r else {
        panic!()
    };
    assert_eq!(groups[0].group_state, "Stable");
    assert_eq!(groups[0].members.len(), 2);
}

#[actix_rt::test]
async fn consumer_group_heartbeat_through_the_actor() {
    let partition = offsets_partition().await;
    let c = coordinator(&partition, GroupCoordinatorConfig::default()).await;
    let r = call(
        &c,
        GroupRequest::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatInput {
            api_version: 1,
            group_id: "cg".into(),
            member_id: "m1".into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["orders".into()]),
            topic_partitions: Some(vec![]),
            ..Default::default()
        }),
    )
    .await;
    let GroupResponse::ConsumerGroupHeartbeat(r) = r else {
        panic!()
    };
    // A new group starts at epoch 1; the first member's subscription bumps it (Kafka 4.4).
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    assert_eq!(r.assignment, Some(vec![(Uuid([1; 16]), vec![0, 1, 2, 3])]));
    let info = partition.send(DescribeReplica).await.unwrap();
    assert!(
        info.high_watermark >= 5,
        "member, epoch, target and assignment records"
    );
}

#[actix_rt::test]
async fn writes_to_a_lost_partition_answer_not_coordinator() {
    let partition = offsets_partition().await;
    let c = coordinator(&partition, GroupCoordinatorConfig::default()).await;
    partition
        .send(BecomeFollower {
            assignment: assignment(2),
            config: PartitionConfig::default(),
        })
        .await
        .unwrap();
    let GroupResponse::OffsetCommit { topics } = call(&c, commit("g", 0, 1)).await else {
        panic!()
    };
    assert_eq!(topics[0].partitions, vec![(0, NOT_COORDINATOR)]);
}
