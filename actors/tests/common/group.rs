//! Group-coordinator test helpers: the `__consumer_offsets` partition a coordinator shard writes
//! to, led by broker 1 on an in-memory log.
#![allow(dead_code)]

use actix::{Actor, Addr};
use kactor_actors::partition::core::{
    MemoryLog, Partition, PartitionAssignment, PartitionConfig, PartitionLog, TopicPartition,
};
use kactor_actors::partition::messages::BecomeLeader;
use kactor_actors::partition::PartitionActor;

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
