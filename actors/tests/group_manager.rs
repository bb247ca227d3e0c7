//! `GroupCoordinatorManagerActor`: shards follow leadership of `__consumer_offsets`
//! partitions as the replica manager publishes it, and groups route to them by hash.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::Actor;
use kactor_actors::group::apis::GroupShardTableReader;
use kactor_actors::group::core::hashing::group_partition;
use kactor_actors::group::core::{
    CommitPartitionInput, CommitTopicInput, GroupCoordinatorConfig, GroupRequest, GroupResponse,
    OffsetCommitInput,
};
use kactor_actors::group::messages::HandleGroupRequest;
use kactor_actors::group::GroupCoordinatorManagerActor;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::memory_registry;
use kactor_protocol::Uuid;

fn change(kind: PartitionChangeKind, partition: i32, leader: i32, epoch: i32) -> PartitionChange {
    PartitionChange {
        kind,
        topic: "__consumer_offsets".into(),
        topic_id: Uuid([9; 16]),
        partition,
        leader,
        leader_epoch: epoch,
        partition_epoch: 0,
        // A single in-sync replica: writes commit as soon as the leader appends them.
        replicas: if leader == 1 { vec![1] } else { vec![1, 2] },
        isr: if leader == 1 { vec![1] } else { vec![2] },
        config_overrides: BTreeMap::new(),
    }
}

async fn wait_for(table: &GroupShardTableReader, shards: usize) {
    for _ in 0..100 {
        if table.borrow().shards.len() == shards {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "expected {shards} shards, have {}",
        table.borrow().shards.len()
    );
}

#[actix_rt::test]
async fn shards_follow_offsets_topic_leadership() {
    let registry = memory_registry(None);
    let partitions = registry.send(SubscribePartitionTable).await.unwrap();
    let config = GroupCoordinatorConfig {
        offsets_topic_num_partitions: 3,
        ..Default::default()
    };
    let manager = GroupCoordinatorManagerActor::new(1, config, partitions);
    let table = manager.shard_table();
    let _manager = manager.start();

    registry
        .send(ApplyPartitionChanges {
            changes: (0..3)
                .map(|p| change(PartitionChangeKind::BecomeLeader, p, 1, 0))
                .collect(),
        })
        .await
        .unwrap();
    wait_for(&table, 3).await;

    let p = group_partition("g", 3);
    let shard = table.borrow().shards[&p].clone();
    // The shard may still be loading: retry until it answers.
    let commit = GroupRequest::OffsetCommit(OffsetCommitInput {
        group_id: "g".into(),
        topics: vec![CommitTopicInput {
            name: "orders".into(),
            topic_id: Uuid::ZERO,
            partitions: vec![CommitPartitionInput {
                partition_index: 0,
                committed_offset: 42,
                committed_leader_epoch: -1,
                committed_metadata: None,
            }],
        }],
        ..Default::default()
    });
    let mut code = -1;
    for _ in 0..50 {
        let r = shard
            .send(HandleGroupRequest {
                request: commit.clone(),
            })
            .await
            .unwrap();
        let GroupResponse::OffsetCommit { topics } = r else {
            panic!()
        };
        code = topics[0].partitions[0].1;
        if code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(code, 0);

    // Another broker takes over the group's partition: its shard goes away.
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(PartitionChangeKind::BecomeFollower, p, 2, 1)],
        })
        .await
        .unwrap();
    wait_for(&table, 2).await;
    assert!(!table.borrow().shards.contains_key(&p));
}
