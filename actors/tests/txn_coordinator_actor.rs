//! The TransactionCoordinatorActor over real PartitionActors (in-memory logs): a transaction
//! committed end to end (InitProducerId with a transactional id, AddPartitions, EndTxn, markers
//! on every partition, CompleteCommit persisted), an abort, and a new shard loading
//! `__transaction_state` by replay to the same state.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kactor_actors::partition::core::{IsolationLevel, ReadParams};
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::memory_registry;
use kactor_actors::runtime::MeteredAddr;
use kactor_actors::txn::actor::start_producer_id_manager;
use kactor_actors::txn::coordinator::*;
use kactor_actors::txn::core::{TxnCoordinatorConfig, TxnState};
use kactor_actors::txn::markers::MarkerSender;
use kactor_protocol::records::BatchBuilder;
use kactor_protocol::Uuid;

use common::txn::{image_with_broker, verify_txn, FakeController};

fn leader(topic: &str, partition: i32) -> PartitionChange {
    PartitionChange {
        kind: PartitionChangeKind::BecomeLeader,
        topic: topic.into(),
        topic_id: Uuid([topic.len() as u8; 16]),
        partition,
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        config_overrides: BTreeMap::new(),
    }
}

fn read_committed() -> ReadRecords {
    ReadRecords {
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
    }
}

async fn until<F: Fn(&[kactor_actors::txn::core::TxnMetadata]) -> bool>(
    c: &Addr<TransactionCoordinatorActor>,
    f: F,
) {
    for _ in 0..100 {
        if let Ok(Ok(txns)) = c.send(GetTransactions).await {
            if f(&txns) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not reached");
}

#[actix_rt::test]
async fn commit_and_abort_end_to_end_then_reload() {
    let registry = memory_registry(None);
    registry
        .send(ApplyPartitionChanges {
            changes: vec![
                leader("__transaction_state", 0),
                leader("t", 0),
                leader("t", 1),
            ],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let state_log = table
        .borrow()
        .get("__transaction_state", 0)
        .unwrap()
        .addr
        .clone();
    let t0 = table.borrow().get("t", 0).unwrap().addr.clone();

    let (_image_tx, image_rx) = tokio::sync::watch::channel(image_with_broker(7));
    let controller = kactor_actors::runtime::start_here(FakeController(5000));
    let ids = start_producer_id_manager(&Arbiter::current(), 1, controller.recipient(), image_rx);
    let start = |ids: MeteredAddr<_>| {
        TransactionCoordinatorActor::new(
            TxnCoordinatorConfig::default(),
            state_log.clone(),
            ids,
            MarkerSender::here(1, table.clone()),
        )
        .start()
    };
    let c = start(ids.clone());

    let init = c
        .send(InitTxnProducer {
            transactional_id: "tx".into(),
            txn_timeout_ms: 60_000,
            expected: None,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (init.producer_id, init.producer_epoch, init.error),
        (5000, 0, 0)
    );
    let (pid, epoch) = (init.producer_id, init.producer_epoch);

    c.send(AddTxnPartitions {
        transactional_id: "tx".into(),
        producer_id: pid,
        producer_epoch: epoch,
        partitions: vec![("t".into(), 0), ("t".into(), 1)],
    })
    .await
    .unwrap()
    .unwrap();
    let mut b = BatchBuilder::new(0)
        .producer(pid, epoch, 0)
        .transactional(true);
    b.append(1_700_000_000_000, None, Some(b"in-txn"), &[])
        .unwrap();
    // The partition leader verifies the partition is in the transaction (KIP-890).
    verify_txn(&t0, pid, epoch, 0).await;
    t0.send(AppendRecords {
        records: b.build().unwrap(),
        required_acks: -1,
    })
    .await
    .unwrap()
    .unwrap();
    let lso = t0
        .send(read_committed())
        .await
        .unwrap()
        .unwrap()
        .last_stable_offset;
    assert_eq!(lso, 0);

    // A stale epoch is fenced.
    let fenced = c
        .send(EndTransaction {
            transactional_id: "tx".into(),
            producer_id: pid,
            producer_epoch: epoch + 1,
            commit: true,
            client_transaction_version: 0,
        })
        .await
        .unwrap();
    assert_eq!(fenced, Err(90));
    c.send(EndTransaction {
        transactional_id: "tx".into(),
        producer_id: pid,
        producer_epoch: epoch,
        commit: true,
        client_transaction_version: 0,
    })
    .await
    .unwrap()
    .unwrap();
    until(&c, |t| {
        t.iter().any(|m| m.state == TxnState::CompleteCommit)
    })
    .await;
    // Markers landed: data at 0, commit marker at 1.
    let lso = t0
        .send(read_committed())
        .await
        .unwrap()
        .unwrap()
        .last_stable_offset;
    assert_eq!(lso, 2);

    // A second transaction is aborted.
    c.send(AddTxnPartitions {
        transactional_id: "tx".into(),
        producer_id: pid,
        producer_epoch: epoch,
        partitions: vec![("t".into(), 1)],
    })
    .await
    .unwrap()
    .unwrap();
    c.send(EndTransaction {
        transactional_id: "tx".into(),
        producer_id: pid,
        producer_epoch: epoch,
        commit: false,
        client_transaction_version: 0,
    })
    .await
    .unwrap()
    .unwrap();
    until(&c, |t| t.iter().any(|m| m.state == TxnState::CompleteAbort)).await;
    let before = c.send(GetTransactions).await.unwrap().unwrap();

    // A new shard over the same partition loads the same state by replay.
    let reloaded = start(ids);
    until(&reloaded, |t| !t.is_empty()).await;
    let after = reloaded.send(GetTransactions).await.unwrap().unwrap();
    let norm = |v: Vec<kactor_actors::txn::core::TxnMetadata>| {
        v.into_iter()
            .map(|m| kactor_actors::txn::core::TxnMetadata {
                last_producer_epoch: -1,
                ..m
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(norm(before), norm(after));
}

#[actix_rt::test]
async fn add_partitions_handler_serves_clients_and_verification() {
    use kactor_actors::txn::apis::{handle_add_partitions, partition_for, TxnCoordinatorApis};
    use kactor_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    use kactor_protocol::messages::AddPartitionsToTxnRequest;

    let registry = memory_registry(None);
    let shard_partition = partition_for("tx", 50);
    registry
        .send(ApplyPartitionChanges {
            changes: vec![
                leader("__transaction_state", shard_partition),
                leader("t", 0),
                leader("t", 1),
            ],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let state_log = table
        .borrow()
        .get("__transaction_state", shard_partition)
        .unwrap()
        .addr
        .clone();
    let (_image_tx, image_rx) = tokio::sync::watch::channel(image_with_broker(7));
    let ids = start_producer_id_manager(
        &Arbiter::current(),
        1,
        kactor_actors::runtime::start_here(FakeController(9000)).recipient(),
        image_rx,
    );
    let shard = kactor_actors::runtime::start_here(TransactionCoordinatorActor::new(
        TxnCoordinatorConfig::default(),
        state_log,
        ids.clone(),
        MarkerSender::here(1, table.clone()),
    ));
    let (_shards_tx, shards) =
        tokio::sync::watch::channel(Arc::new(BTreeMap::from([(shard_partition, shard.clone())])));
    let apis = TxnCoordinatorApis {
        producer_ids: ids,
        shards,
        num_partitions: 50,
        offsets_partitions: 50,
        partitions: table.clone(),
    };
    let init = shard
        .send(InitTxnProducer {
            transactional_id: "tx".into(),
            txn_timeout_ms: 60_000,
            expected: None,
        })
        .await
        .unwrap()
        .unwrap();
    let topics = vec![AddPartitionsToTxnTopic {
        name: "t".into(),
        partitions: vec![0],
        ..Default::default()
    }];
    // v3: the client form.
    let r = handle_add_partitions(
        &apis,
        3,
        AddPartitionsToTxnRequest {
            v3_and_below_transactional_id: "tx".into(),
            v3_and_below_producer_id: init.producer_id,
            v3_and_below_producer_epoch: init.producer_epoch,
            v3_and_below_topics: topics.clone(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    // v4 verify-only: t-0 is in the transaction, t-1 is not; an unknown id has no coordinator.
    let verify = |id: &str, partitions: Vec<i32>| AddPartitionsToTxnTransaction {
        transactional_id: id.into(),
        producer_id: init.producer_id,
        producer_epoch: init.producer_epoch,
        verify_only: true,
        topics: vec![AddPartitionsToTxnTopic {
            name: "t".into(),
            partitions,
            ..Default::default()
        }],
        ..Default::default()
    };
    let verified = |partitions: Vec<i32>| {
        let request = AddPartitionsToTxnRequest {
            transactions: vec![verify("tx", partitions)],
            ..Default::default()
        };
        let apis = &apis;
        async move {
            let r = handle_add_partitions(apis, 5, request).await;
            r.results_by_transaction[0].topic_results[0]
                .results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
                .collect::<Vec<i16>>()
        }
    };
    // TRANSACTION_ABORTABLE: Kafka's answer for a partition not in the transaction.
    assert_eq!(verified(vec![0, 1]).await, vec![0, 120]);
    // A partition that does not exist fails the whole transaction before the coordinator:
    // OPERATION_NOT_ATTEMPTED for the others.
    assert_eq!(verified(vec![0, 9]).await, vec![55, 3]);

    // DescribeTransactions / ListTransactions see the open transaction.
    use kactor_actors::txn::apis::{handle_describe_transactions, handle_list_transactions};
    use kactor_protocol::messages::{DescribeTransactionsRequest, ListTransactionsRequest};
    let d = handle_describe_transactions(
        &apis,
        DescribeTransactionsRequest {
            transactional_ids: vec!["tx".into(), "nope".into()],
            ..Default::default()
        },
    )
    .await;
    let tx = &d.transaction_states[0];
    assert_eq!(tx.error_code, 0);
    assert_eq!(tx.transaction_state, "Ongoing");
    assert_eq!(tx.producer_id, init.producer_id);
    assert_eq!(tx.topics[0].topic, "t");
    assert_eq!(tx.topics[0].partitions, vec![0]);
    // "nope" hashes to a partition this broker may not lead: NOT_COORDINATOR or not found.
    assert!(matches!(d.transaction_states[1].error_code, 16 | 105));
    let l = handle_list_transactions(
        &apis,
        ListTransactionsRequest {
            state_filters: vec!["Ongoing".into(), "Bogus".into()],
            duration_filter: -1,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(l.unknown_state_filters, vec!["Bogus".to_string()]);
    assert_eq!(l.transaction_states.len(), 1);
    assert_eq!(l.transaction_states[0].transactional_id, "tx");
}

/// KIP-890 leader adds (`LeaderAddTxnPartitions`) sent at once for one transactional id, as a
/// producer's pipelined Produce requests do: each waits for the write before it instead of
/// failing with CONCURRENT_TRANSACTIONS, and the transaction ends up with every partition.
/// A client's AddPartitionsToTxn colliding with a write still gets CONCURRENT_TRANSACTIONS.
#[actix_rt::test]
async fn leader_adds_wait_for_the_write_in_flight() {
    let registry = memory_registry(None);
    let mut changes = vec![leader("__transaction_state", 0)];
    changes.extend((0..4).map(|p| leader("t", p)));
    registry
        .send(ApplyPartitionChanges { changes })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let state_log = table
        .borrow()
        .get("__transaction_state", 0)
        .unwrap()
        .addr
        .clone();
    let (_image_tx, image_rx) = tokio::sync::watch::channel(image_with_broker(7));
    let controller = kactor_actors::runtime::start_here(FakeController(9000));
    let ids = start_producer_id_manager(&Arbiter::current(), 1, controller.recipient(), image_rx);
    let c = TransactionCoordinatorActor::new(
        TxnCoordinatorConfig::default(),
        state_log,
        ids,
        MarkerSender::here(1, table.clone()),
    )
    .start();
    let init = c
        .send(InitTxnProducer {
            transactional_id: "lx".into(),
            txn_timeout_ms: 60_000,
            expected: None,
        })
        .await
        .unwrap()
        .unwrap();
    let add = |p: i32| AddTxnPartitions {
        transactional_id: "lx".into(),
        producer_id: init.producer_id,
        producer_epoch: init.producer_epoch,
        partitions: vec![("t".into(), p)],
    };
    // Queued in this order in the shard's mailbox: the first starts a write, the client add
    // collides with it, the other leader adds wait.
    let first = c.send(LeaderAddTxnPartitions(add(0)));
    let client = c.send(add(1));
    let second = c.send(LeaderAddTxnPartitions(add(2)));
    let third = c.send(LeaderAddTxnPartitions(add(3)));
    let (first, client, second, third) = (first.await, client.await, second.await, third.await);
    assert_eq!(first.unwrap(), Ok(()));
    assert_eq!(
        client.unwrap(),
        Err(51),
        "CONCURRENT_TRANSACTIONS for a client add"
    );
    assert_eq!(second.unwrap(), Ok(()));
    assert_eq!(third.unwrap(), Ok(()));
    let txns = c.send(GetTransactions).await.unwrap().unwrap();
    let m = txns.iter().find(|m| m.transactional_id == "lx").unwrap();
    assert_eq!(m.state, TxnState::Ongoing);
    assert_eq!(
        m.partitions.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        vec![0, 2, 3]
    );
}
