//! WriteTxnMarkers as the router calls it, over a real ReplicaManagerActor and PartitionActor:
//! a marker completes the producer's transaction (the LSO moves past it), a marker from a
//! fenced epoch is refused, and partitions this broker does not host answer
//! UNKNOWN_TOPIC_OR_PARTITION.

mod common;

use common::txn::verify_txn;
use std::collections::BTreeMap;

use kactor_actors::partition::core::{IsolationLevel, ReadParams};
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::memory_registry;
use kactor_actors::txn::apis::handle_write_txn_markers;
use kactor_actors::txn::markers::MarkerSender;
use kactor_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kactor_protocol::messages::WriteTxnMarkersRequest;
use kactor_protocol::records::BatchBuilder;
use kactor_protocol::Uuid;

fn txn_batch(pid: i64, epoch: i16) -> bytes::Bytes {
    let mut b = BatchBuilder::new(0)
        .producer(pid, epoch, 0)
        .transactional(true);
    b.append(1_700_000_000_000, None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

fn request(pid: i64, epoch: i16, commit: bool, partitions: Vec<i32>) -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            transaction_result: commit,
            topics: vec![WritableTxnMarkerTopic {
                name: "t".into(),
                partition_indexes: partitions,
                ..Default::default()
            }],
            coordinator_epoch: 0,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[actix_rt::test]
async fn markers_complete_transactions_on_the_partition_leader() {
    let registry = memory_registry(None);
    registry
        .send(ApplyPartitionChanges {
            changes: vec![PartitionChange {
                kind: PartitionChangeKind::BecomeLeader,
                topic: "t".into(),
                topic_id: Uuid([3; 16]),
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
                config_overrides: BTreeMap::new(),
            }],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let addr = table.borrow().get("t", 0).unwrap().addr.clone();
    verify_txn(&addr, 5, 2, 0).await;
    addr.send(AppendRecords {
        records: txn_batch(5, 2),
        required_acks: -1,
    })
    .await
    .unwrap()
    .unwrap();
    let lso = |addr: kactor_actors::runtime::MeteredAddr<_>| async move {
        addr.send(ReadRecords {
            scope: Default::default(),
            params: ReadParams {
                fetch_offset: 0,
                max_bytes: 1 << 20,
                min_one_batch: true,
                isolation: IsolationLevel::ReadCommitted,
                current_leader_epoch: -1,
                last_fetched_epoch: -1,
                replica_id: -1,
            },
            isr_eligible: false,
            replica_epoch: -1,
        })
        .await
        .unwrap()
        .unwrap()
        .last_stable_offset
    };
    assert_eq!(
        lso(addr.clone()).await,
        0,
        "the open transaction holds the LSO"
    );

    // A fenced epoch is refused (INVALID_PRODUCER_EPOCH), an unknown partition is reported.
    let r = handle_write_txn_markers(
        &MarkerSender::here(1, table.clone()).local,
        request(5, 1, true, vec![0, 7]),
    )
    .await;
    let codes: Vec<i16> = r.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![47, 3]);

    let r = handle_write_txn_markers(
        &MarkerSender::here(1, table.clone()).local,
        request(5, 2, false, vec![0]),
    )
    .await;
    assert_eq!(r.markers[0].producer_id, 5);
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 0);
    assert_eq!(lso(addr).await, 2, "data at 0, abort marker at 1");

    // DescribeProducers shows the producer, its epoch and no open transaction any more.
    let d = kactor_actors::txn::apis::handle_describe_producers(
        &table,
        kactor_protocol::messages::DescribeProducersRequest {
            topics: vec![
                kactor_protocol::messages::describe_producers_request::TopicRequest {
                    name: "t".into(),
                    partition_indexes: vec![0, 9],
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
    )
    .await;
    let p0 = &d.topics[0].partitions[0];
    assert_eq!(p0.error_code, 0);
    assert_eq!(p0.active_producers.len(), 1);
    let ps = &p0.active_producers[0];
    assert_eq!(
        (ps.producer_id, ps.producer_epoch, ps.last_sequence),
        (5, 2, 0)
    );
    assert_eq!(ps.current_txn_start_offset, -1);
    assert_eq!(d.topics[0].partitions[1].error_code, 3);
}
