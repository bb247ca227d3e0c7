//! `TransactionCoordinatorManagerActor`: coordinator shards follow `__transaction_state`
//! leadership as the replica manager publishes it (load by replay on election, a fresh load
//! at a new leader epoch, unload on resignation), transactional ids route to them by hash, and
//! a marker written to a `__consumer_offsets` partition completes the group's transaction.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::memory_registry;
use kactor_actors::runtime::MeteredAddr;
use kactor_actors::txn::actor::start_producer_id_manager;
use kactor_actors::txn::apis::{partition_for, TxnShards};
use kactor_actors::txn::coordinator::*;
use kactor_actors::txn::core::{TxnMetadata, TxnState};
use kactor_actors::txn::manager::{TransactionCoordinatorManagerActor, TxnManagerConfig};
use kactor_protocol::Uuid;

use common::txn::{image_with_broker, FakeController};
use kactor_actors::metadata::core::MetadataImage;

const PARTITIONS: i32 = 3;

fn change(
    kind: PartitionChangeKind,
    topic: &str,
    partition: i32,
    leader: i32,
    epoch: i32,
) -> PartitionChange {
    PartitionChange {
        kind,
        topic: topic.into(),
        topic_id: Uuid([topic.len() as u8; 16]),
        partition,
        leader,
        leader_epoch: epoch,
        partition_epoch: 0,
        // A single in-sync replica on the leader: writes commit as soon as they are appended.
        replicas: if leader == 1 { vec![1] } else { vec![1, 2] },
        isr: if leader == 1 { vec![1] } else { vec![2] },
        config_overrides: BTreeMap::new(),
    }
}

fn image() -> tokio::sync::watch::Receiver<Arc<MetadataImage>> {
    let (tx, rx) = tokio::sync::watch::channel(image_with_broker(3));
    // Keep the sender alive for the whole test process: the manager reads the image.
    std::mem::forget(tx);
    rx
}

async fn wait_shards(
    shards: &TxnShards,
    f: impl Fn(&BTreeMap<i32, MeteredAddr<TransactionCoordinatorActor>>) -> bool,
) {
    for _ in 0..200 {
        if f(&shards.borrow()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("shard table never matched: {:?}", shards.borrow().keys());
}

async fn wait_txn(
    shard: &MeteredAddr<TransactionCoordinatorActor>,
    id: &str,
    f: impl Fn(&TxnMetadata) -> bool,
) -> TxnMetadata {
    for _ in 0..200 {
        if let Ok(Ok(all)) = shard.send(GetTransactions).await {
            if let Some(m) = all.into_iter().find(|m| m.transactional_id == id) {
                if f(&m) {
                    return m;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("transaction {id} never reached the expected state");
}

#[actix_rt::test]
async fn shards_follow_transaction_state_leadership_and_reload_by_replay() {
    let registry = memory_registry(None);
    let partitions = registry.send(SubscribePartitionTable).await.unwrap();
    let ids = start_producer_id_manager(
        &Arbiter::current(),
        1,
        kactor_actors::runtime::start_here(FakeController(7000)).recipient(),
        image(),
    );
    let completed: Arc<Mutex<Vec<(i32, i64, bool)>>> = Arc::default();
    let seen = completed.clone();
    let manager = TransactionCoordinatorManagerActor::new(
        1,
        TxnManagerConfig {
            num_partitions: PARTITIONS,
            ..Default::default()
        },
        partitions.clone(),
        ids,
    )
    .with_group_completion(Arc::new(move |p, pid, commit| {
        seen.lock().unwrap().push((p, pid, commit))
    }));
    let shards = manager.shard_table();
    let _manager = manager.start();

    // Nothing led yet: no shards.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(shards.borrow().is_empty());

    let mut changes: Vec<_> = (0..PARTITIONS)
        .map(|p| {
            change(
                PartitionChangeKind::BecomeLeader,
                "__transaction_state",
                p,
                1,
                0,
            )
        })
        .collect();
    changes.push(change(PartitionChangeKind::BecomeLeader, "orders", 0, 1, 0));
    changes.push(change(
        PartitionChangeKind::BecomeLeader,
        "__consumer_offsets",
        4,
        1,
        0,
    ));
    registry
        .send(ApplyPartitionChanges { changes })
        .await
        .unwrap();
    wait_shards(&shards, |s| s.len() == PARTITIONS as usize).await;

    let p = partition_for("tx-1", PARTITIONS);
    let shard = shards.borrow()[&p].clone();
    let status = shard.send(DescribeTxnCoordinator).await.unwrap();
    assert_eq!((status.partition, status.coordinator_epoch), (p, 0));

    // A transaction with a data partition and a group's offsets partition, committed.
    let init = shard
        .send(InitTxnProducer {
            transactional_id: "tx-1".into(),
            txn_timeout_ms: 60_000,
            expected: None,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((init.producer_id, init.producer_epoch), (7000, 0));
    shard
        .send(AddTxnPartitions {
            transactional_id: "tx-1".into(),
            producer_id: 7000,
            producer_epoch: 0,
            partitions: vec![("orders".into(), 0), ("__consumer_offsets".into(), 4)],
        })
        .await
        .unwrap()
        .unwrap();
    let ended = shard
        .send(EndTransaction {
            transactional_id: "tx-1".into(),
            producer_id: 7000,
            producer_epoch: 0,
            commit: true,
            client_transaction_version: 0,
        })
        .await
        .unwrap();
    assert_eq!(ended, Ok((7000, 0)));
    wait_txn(&shard, "tx-1", |m| m.state == TxnState::CompleteCommit).await;
    // The group shard of __consumer_offsets-4 is told once the marker is in its log.
    assert_eq!(*completed.lock().unwrap(), vec![(4, 7000, true)]);
    // The data partition got its commit marker: the LSO moved past it.
    let orders = partitions.borrow().get("orders", 0).unwrap().addr.clone();
    assert_eq!(
        orders.send(DescribeReplica).await.unwrap().log_end_offset,
        1
    );

    // A second transaction is left open when the partition's leadership moves to a new
    // epoch on this broker: the new shard loads it by replay and carries the new epoch.
    shard
        .send(AddTxnPartitions {
            transactional_id: "tx-1".into(),
            producer_id: 7000,
            producer_epoch: 0,
            partitions: vec![("orders".into(), 0)],
        })
        .await
        .unwrap()
        .unwrap();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(
                PartitionChangeKind::BecomeLeader,
                "__transaction_state",
                p,
                1,
                1,
            )],
        })
        .await
        .unwrap();
    wait_shards(&shards, |s| s.get(&p).is_some_and(|a| *a != shard)).await;
    let reloaded = shards.borrow()[&p].clone();
    let m = wait_txn(&reloaded, "tx-1", |m| m.state == TxnState::Ongoing).await;
    assert_eq!(
        m.partitions.iter().cloned().collect::<Vec<_>>(),
        vec![("orders".to_string(), 0)]
    );
    let status = reloaded.send(DescribeTxnCoordinator).await.unwrap();
    assert!(status.loaded);
    assert_eq!((status.coordinator_epoch, status.transactional_ids), (1, 1));
    // The resigned shard serves nothing any more (supervised, it stays until its last address
    // is dropped, answering NOT_COORDINATOR).
    assert!(matches!(shard.send(GetTransactions).await, Ok(Err(16))));

    // The reloaded shard finishes the open transaction (abort) with markers.
    reloaded
        .send(EndTransaction {
            transactional_id: "tx-1".into(),
            producer_id: 7000,
            producer_epoch: 0,
            commit: false,
            client_transaction_version: 0,
        })
        .await
        .unwrap()
        .unwrap();
    wait_txn(&reloaded, "tx-1", |m| m.state == TxnState::CompleteAbort).await;

    // Another broker takes the partition over: this broker unloads its shard.
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(
                PartitionChangeKind::BecomeFollower,
                "__transaction_state",
                p,
                2,
                2,
            )],
        })
        .await
        .unwrap();
    wait_shards(&shards, |s| {
        !s.contains_key(&p) && s.len() == PARTITIONS as usize - 1
    })
    .await;
    assert!(matches!(reloaded.send(GetTransactions).await, Ok(Err(16))));
}

#[actix_rt::test]
async fn config_reads_kafka_property_names() {
    let props: BTreeMap<String, String> = [
        ("transaction.state.log.num.partitions", "7"),
        ("transaction.max.timeout.ms", "60000"),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "500",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let c = TxnManagerConfig::from_properties(&props);
    assert_eq!(c.num_partitions, 7);
    assert_eq!(c.transaction_max_timeout_ms, 60_000);
    assert_eq!(c.abort_timed_out_interval_ms, 500);
    assert_eq!(
        TxnManagerConfig::from_properties(&BTreeMap::new()),
        TxnManagerConfig::default()
    );
}
