//! Group-coordinator test helpers: the `__consumer_offsets` partition a coordinator shard writes
//! to, led by broker 1 on an in-memory log, and a loaded shard over it.
#![allow(dead_code)]

use std::time::Duration;

use actix::{Actor, Addr};
use kactor_actors::group::core::{GroupCoordinatorConfig, TopicsView};
use kactor_actors::group::messages::{CoordinatorPartition, DescribeGroupCoordinator};
use kactor_actors::group::GroupCoordinatorActor;
use kactor_actors::partition::core::{
    MemoryLog, Partition, PartitionAssignment, PartitionConfig, PartitionLog, TopicPartition,
};
use kactor_actors::partition::messages::BecomeLeader;
use kactor_actors::partition::PartitionActor;
use kactor_protocol::Uuid;

/// One replica on broker 1, led by `leader`, epoch 0.
pub fn assignment(leader: i32) -> PartitionAssignment {
    PartitionAssignment {
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
    }
}

/// `__consumer_offsets-0` on an in-memory log, made leader on broker 1.
pub async fn offsets_partition() -> Addr<PartitionActor> {
    let log: Box<dyn PartitionLog> = Box::new(MemoryLog::new());
    let core = Partition::new(
        TopicPartition::new("__consumer_offsets", 0),
        1,
        log,
        PartitionConfig::default(),
        0,
    );
    let addr = PartitionActor::new(core, None).start();
    addr.send(BecomeLeader {
        assignment: assignment(1),
        config: PartitionConfig::default(),
    })
    .await
    .unwrap()
    .unwrap();
    addr
}

/// The topics the shard knows: `orders`, 4 partitions.
pub fn topics() -> TopicsView {
    let mut t = TopicsView::new();
    t.upsert("orders", Uuid([1; 16]), 4);
    t
}

/// Shard 0 of the group coordinator over `partition`, once it has loaded (replayed) it.
pub async fn coordinator(
    partition: &Addr<PartitionActor>,
    config: GroupCoordinatorConfig,
) -> Addr<GroupCoordinatorActor> {
    let partition = kactor_actors::runtime::MeteredAddr::new(
        partition.clone(),
        kactor_actors::runtime::ActorMetrics::new("PartitionActor"),
    );
    let addr = GroupCoordinatorActor::new(
        0,
        config,
        CoordinatorPartition {
            append: partition.recipient(),
            read: partition.recipient(),
            describe: partition.recipient(),
            replication: None,
        },
        topics(),
        Default::default(),
    )
    .start();
    for _ in 0..200 {
        if addr.send(DescribeGroupCoordinator).await.unwrap().loaded {
            return addr;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("coordinator never loaded");
}
