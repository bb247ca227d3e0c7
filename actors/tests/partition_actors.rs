//! Actor-level tests: the registry applies metadata notifications, handlers find partitions in
//! the published table, appends and reads go through `PartitionActor`s, acks=all waits in the
//! `PurgatoryActor`.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::Actor;
use kactor_actors::partition::core::{IsolationLevel, ReadParams};
use kactor_actors::partition::messages::*;
use kactor_actors::partition::registry::GetLogDirs;
use kactor_actors::partition::testing::{batch, memory_registry};
use kactor_actors::partition::PurgatoryLink;
use kactor_actors::purgatory::core::{FetchWatch, ProduceWatch};
use kactor_actors::purgatory::{DescribePurgatory, PurgatoryActor, WatchFetch, WatchProduce};
use kactor_actors::runtime::{ActorMetrics, MeteredAddr};
use kactor_protocol::errors;
use kactor_protocol::Uuid;
use tokio::sync::oneshot;

fn change(kind: PartitionChangeKind, topic: &str, partition: i32, epoch: i32) -> PartitionChange {
    PartitionChange {
        kind,
        topic: topic.into(),
        topic_id: Uuid([7; 16]),
        partition,
        leader: 1,
        leader_epoch: epoch,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        config_overrides: BTreeMap::new(),
    }
}

fn read(offset: i64) -> ReadRecords {
    ReadRecords {
        scope: Default::default(),
        params: ReadParams {
            fetch_offset: offset,
            max_bytes: 1 << 20,
            min_one_batch: true,
            isolation: IsolationLevel::ReadUncommitted,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            replica_id: -1,
        },
        isr_eligible: false,
        replica_epoch: -1,
    }
}

#[actix_rt::test]
async fn registry_publishes_leaders_and_partitions_serve_appends_and_reads() {
    let purgatory = MeteredAddr::new(
        PurgatoryActor::new().start(),
        ActorMetrics::new("PurgatoryActor"),
    );
    let link = PurgatoryLink {
        high_watermark: purgatory.recipient(),
        log_end: purgatory.recipient(),
        leadership_lost: purgatory.recipient(),
    };
    let registry = memory_registry(Some(link));
    let mut reader = registry.send(SubscribePartitionTable).await.unwrap();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![
                change(PartitionChangeKind::BecomeLeader, "orders", 0, 3),
                change(PartitionChangeKind::BecomeLeader, "orders", 1, 3),
            ],
        })
        .await
        .unwrap();
    reader.changed().await.unwrap();
    let table = reader.borrow().clone();
    assert_eq!(table.partitions.len(), 2);
    assert_eq!(table.topic_id("orders"), Some(Uuid([7; 16])));
    assert_eq!(table.topic_name(&Uuid([7; 16])), Some("orders".to_string()));
    let p0 = table.get("orders", 0).unwrap().clone();
    assert_eq!(p0.leader_epoch, 3);
    assert!(table.get("orders", 2).is_none());
    assert_eq!(
        registry.send(GetLogDirs).await.unwrap(),
        vec!["memory".to_string()]
    );

    let out = p0
        .addr
        .send(AppendRecords {
            records: batch(&[b"a", b"b"], 0),
            required_acks: -1,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((out.base_offset, out.high_watermark), (0, 2));
    // acks=all with ISR = {leader}: already satisfied, routed through the purgatory anyway.
    let (tx, rx) = oneshot::channel();
    purgatory.do_send(WatchProduce {
        watches: vec![ProduceWatch {
            tp: kactor_actors::partition::core::TopicPartition::new("orders", 0),
            required_offset: out.last_offset + 1,
            observed_high_watermark: out.high_watermark,
            leader_epoch: out.leader_epoch,
        }],
        timeout_ms: 30_000,
        done: tx,
    });
    let results = rx.await.unwrap();
    assert_eq!(results[0].1, errors::NONE);

    let r = p0.addr.send(read(0)).await.unwrap().unwrap();
    assert!(r.records.len() > 61);
    assert_eq!(r.high_watermark, 2);
    let info = p0.addr.send(DescribeReplica).await.unwrap();
    assert!(info.is_leader);
    assert_eq!(info.log_end_offset, 2);

    // A long poll parked on partition 1 wakes when an append there moves the high watermark.
    let p1 = table.get("orders", 1).unwrap().clone();
    let (tx, rx) = oneshot::channel();
    purgatory.do_send(WatchFetch {
        watches: vec![FetchWatch {
            tp: kactor_actors::partition::core::TopicPartition::new("orders", 1),
            observed_high_watermark: 0,
        }],
        min_bytes: 1,
        accumulated_bytes: 0,
        max_wait_ms: 10_000,
        follower: false,
        done: tx,
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        purgatory
            .send(DescribePurgatory)
            .await
            .unwrap()
            .delayed_fetch,
        1
    );
    p1.addr
        .send(AppendRecords {
            records: batch(&[b"x"], 0),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    let expired = tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .unwrap()
        .unwrap();
    assert!(!expired);

    // Delete: the table drops the partition, the actor answers no more.
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(PartitionChangeKind::Delete, "orders", 1, 3)],
        })
        .await
        .unwrap();
    reader.changed().await.unwrap();
    let table = reader.borrow().clone();
    assert!(table.get("orders", 1).is_none());
    assert!(table.topic_id("orders").is_some());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let e = p1.addr.send(read(0)).await.unwrap().unwrap_err();
    assert_eq!(e.code(), errors::NOT_LEADER_OR_FOLLOWER);

    // Leadership moves away: NOT_LEADER_OR_FOLLOWER.
    let mut follower = change(PartitionChangeKind::BecomeFollower, "orders", 0, 4);
    follower.leader = 2;
    registry
        .send(ApplyPartitionChanges {
            changes: vec![follower],
        })
        .await
        .unwrap();
    let e = p0.addr.send(read(0)).await.unwrap().unwrap_err();
    assert_eq!(e.code(), errors::NOT_LEADER_OR_FOLLOWER);

    registry.send(ShutdownReplicas).await.unwrap().unwrap();
    assert!(reader.borrow().partitions.is_empty());
    // Every message the partitions sent the purgatory (high watermark moves, leadership lost)
    // was counted into its mailbox as its handlers counted it out: the depth never goes negative.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        ActorMetrics::new("PurgatoryActor").mailbox_depth() >= 0,
        "purgatory mailbox depth {}",
        ActorMetrics::new("PurgatoryActor").mailbox_depth()
    );
}

#[actix_rt::test]
async fn acks_all_times_out_when_the_high_watermark_does_not_move() {
    let purgatory = PurgatoryActor::new().start();
    let (tx, rx) = oneshot::channel();
    purgatory.do_send(WatchProduce {
        watches: vec![ProduceWatch {
            tp: kactor_actors::partition::core::TopicPartition::new("t", 0),
            required_offset: 10,
            observed_high_watermark: 5,
            leader_epoch: 0,
        }],
        timeout_ms: 50,
        done: tx,
    });
    let results = tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(results[0].1, errors::REQUEST_TIMED_OUT);
}

#[actix_rt::test]
async fn topic_config_changes_reach_the_partition() {
    let registry = memory_registry(None);
    let reader = registry.send(SubscribePartitionTable).await.unwrap();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(PartitionChangeKind::BecomeLeader, "t", 0, 0)],
        })
        .await
        .unwrap();
    let p = reader.borrow().get("t", 0).unwrap().clone();
    p.addr
        .send(AppendRecords {
            records: batch(&[&[0u8; 200]], 0),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    registry
        .send(UpdateTopicConfig {
            topic: "t".into(),
            config_overrides: [("max.message.bytes".to_string(), "100".to_string())].into(),
        })
        .await
        .unwrap();
    let e = p
        .addr
        .send(AppendRecords {
            records: batch(&[&[0u8; 200]], 0),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.error.code(), errors::MESSAGE_TOO_LARGE);
    // Kafka reports no log start offset with a size refusal.
    assert_eq!(e.log_start_offset, -1);
}

#[actix_rt::test]
async fn per_topic_counters_count_appends_and_consumer_reads_only() {
    // The actor caches its topic's counter series; they must still count every append and
    // every consumer read (never a follower's), and no other topic's.
    let registry = memory_registry(None);
    let mut reader = registry.send(SubscribePartitionTable).await.unwrap();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(
                PartitionChangeKind::BecomeLeader,
                "metered-topic",
                0,
                1,
            )],
        })
        .await
        .unwrap();
    reader.changed().await.unwrap();
    let p = reader.borrow().get("metered-topic", 0).unwrap().clone();
    let m = kactor_actors::partition::metrics::partition_metrics();
    let series = |f: &prometheus::IntCounterVec| f.with_label_values(&["metered-topic"]).get();

    let mut appended = 0;
    for values in [&[b"a" as &[u8], b"bb"][..], &[&[7u8; 300][..]][..]] {
        let records = batch(values, 0);
        appended += records.len() as u64;
        p.addr
            .send(AppendRecords {
                records,
                required_acks: 1,
            })
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(series(&m.bytes_in_total), appended);
    assert_eq!(series(&m.messages_in_total), 3);

    let consumer = p.addr.send(read(0)).await.unwrap().unwrap();
    assert_eq!(series(&m.bytes_out_total), consumer.records.len() as u64);
    let mut follower = read(0);
    follower.params.replica_id = 2;
    p.addr.send(follower).await.unwrap().unwrap();
    assert_eq!(series(&m.bytes_out_total), consumer.records.len() as u64);
    assert_eq!(
        m.bytes_in_total
            .with_label_values(&["some-other-topic"])
            .get(),
        0
    );
}

#[actix_rt::test]
async fn a_replica_taken_offline_answers_storage_errors_to_requests_already_sent() {
    // The registry drops an offline dir's replicas from the table; a produce that looked the
    // replica up just before still reaches it and must not read as NOT_LEADER_OR_FOLLOWER
    // (which a client retries) but as KAFKA_STORAGE_ERROR, as the requests after it do.
    let registry = memory_registry(None);
    let mut reader = registry.send(SubscribePartitionTable).await.unwrap();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change(PartitionChangeKind::BecomeLeader, "dead-dir", 0, 1)],
        })
        .await
        .unwrap();
    reader.changed().await.unwrap();
    let p = reader.borrow().get("dead-dir", 0).unwrap().clone();
    p.addr.send(TakeReplicaOffline).await.unwrap();
    for _ in 0..2 {
        let failure = p
            .addr
            .send(AppendRecords {
                records: batch(&[b"late"], 0),
                required_acks: -1,
            })
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(failure.error.code(), errors::KAFKA_STORAGE_ERROR);
    }
    let read = p.addr.send(read(0)).await.unwrap();
    assert_eq!(
        read.err().map(|e| e.code()),
        Some(errors::KAFKA_STORAGE_ERROR)
    );
}
