//! KIP-890's verification guard on the partition leader (Kafka's `VerificationGuard` /
//! `VerificationStateEntry` in `ProducerStateManager`, checked by
//! `UnifiedLog.analyzeAndValidateProducerState`), through the `PartitionActor`'s messages in
//! the order `txn::leader_verify` sends them: start the verification, (the coordinator
//! answers), confirm the guard, append. A transaction that ends in between (its marker is
//! written) clears the guard, so the append fails with INVALID_TXN_STATE and nothing is
//! appended: no hanging transaction.

mod common;

use std::collections::BTreeMap;

use actix::prelude::*;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::registry::ReplicaManagerActor;
use kactor_actors::partition::testing::{leader_change, memory_registry, now_ms};
use kactor_actors::partition::{MemoryLogFactory, PartitionActor};
use kactor_actors::producer::partition::TxnMarker;
use kactor_actors::producer::VerificationGuard;
use kactor_actors::runtime::MeteredAddr;
use kactor_protocol::errors::{INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE};
use kactor_protocol::records::BatchBuilder;
use kactor_protocol::Uuid;

use common::txn::verify_txn;

fn batch(pid: i64, epoch: i16, seq: i32, transactional: bool) -> bytes::Bytes {
    let mut b = BatchBuilder::new(0)
        .producer(pid, epoch, seq)
        .transactional(transactional);
    b.append(now_ms(), None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

async fn leader_of_t0(registry: Addr<ReplicaManagerActor>) -> MeteredAddr<PartitionActor> {
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader_change("t", Uuid([9; 16]), 0, 0)],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let addr = table.borrow().get("t", 0).unwrap().addr.clone();
    addr
}

/// Produce's append of one batch: Ok(base offset) or the partition's error code.
async fn append(addr: &MeteredAddr<PartitionActor>, records: bytes::Bytes) -> Result<i64, i16> {
    addr.send(AppendRecords {
        records,
        required_acks: -1,
    })
    .await
    .unwrap()
    .map(|o| o.base_offset)
    .map_err(|e| e.error.code())
}

async fn abort(addr: &MeteredAddr<PartitionActor>, pid: i64, epoch: i16) {
    addr.send(AppendTxnMarker {
        marker: TxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            commit: false,
            coordinator_epoch: 0,
        },
    })
    .await
    .unwrap()
    .unwrap();
}

async fn log_end(addr: &MeteredAddr<PartitionActor>) -> i64 {
    addr.send(DescribeReplica).await.unwrap().log_end_offset
}

#[actix_rt::test]
async fn an_abort_between_the_coordinators_ok_and_the_append_fails_the_append() {
    let addr = leader_of_t0(memory_registry(None)).await;
    // The leader verified the partition (start, coordinator OK, confirm) ...
    verify_txn(&addr, 7, 0, 0).await;
    // ... then the transaction was aborted before the produce's append arrived: the
    // coordinator wrote the abort marker (offset 0).
    abort(&addr, 7, 0).await;
    assert_eq!(log_end(&addr).await, 1);

    assert_eq!(
        append(&addr, batch(7, 0, 0, true)).await,
        Err(INVALID_TXN_STATE),
        "the marker cleared the guard: the append must not start a transaction nobody ends"
    );
    assert_eq!(log_end(&addr).await, 1, "nothing appended");
    assert!(addr
        .send(DescribeProducer { producer_id: 7 })
        .await
        .unwrap()
        .unwrap()
        .is_none_or(|e| e.current_txn_first_offset.is_none()));
}

#[actix_rt::test]
async fn an_abort_before_the_confirmation_voids_the_guard() {
    let addr = leader_of_t0(memory_registry(None)).await;
    let guard = addr
        .send(StartTxnVerification {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
            supports_epoch_bump: false,
        })
        .await
        .unwrap()
        .unwrap();
    assert_ne!(guard, VerificationGuard::SENTINEL);
    // The abort lands while the coordinator is being asked.
    abort(&addr, 7, 0).await;
    let confirmed = addr
        .send(ConfirmTxnVerification {
            producer_id: 7,
            guard,
        })
        .await
        .unwrap();
    assert_eq!(confirmed.map_err(|e| e.code()), Err(INVALID_TXN_STATE));
    assert_eq!(
        append(&addr, batch(7, 0, 0, true)).await,
        Err(INVALID_TXN_STATE)
    );
    assert_eq!(log_end(&addr).await, 1, "only the marker");
}

#[actix_rt::test]
async fn a_verified_append_opens_the_transaction_and_the_next_one_needs_verifying_again() {
    let addr = leader_of_t0(memory_registry(None)).await;
    // Unverified: refused; idempotent-only batches need no verification.
    assert_eq!(
        append(&addr, batch(7, 0, 0, true)).await,
        Err(INVALID_TXN_STATE)
    );
    assert_eq!(append(&addr, batch(8, 0, 0, false)).await, Ok(0));

    verify_txn(&addr, 7, 0, 0).await;
    assert_eq!(append(&addr, batch(7, 0, 0, true)).await, Ok(1));
    // The transaction is open here now: later batches need no guard.
    assert_eq!(append(&addr, batch(7, 0, 1, true)).await, Ok(2));
    let again = addr
        .send(StartTxnVerification {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 2,
            supports_epoch_bump: false,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again,
        VerificationGuard::SENTINEL,
        "an open transaction of the same epoch needs no coordinator round trip"
    );
    // An older epoch is fenced before the coordinator is asked.
    let fenced = addr
        .send(StartTxnVerification {
            producer_id: 8,
            producer_epoch: -1,
            base_sequence: 0,
            supports_epoch_bump: false,
        })
        .await
        .unwrap();
    assert_eq!(fenced.map_err(|e| e.code()), Err(INVALID_PRODUCER_EPOCH));

    abort(&addr, 7, 0).await;
    // The next transaction (same epoch, transaction version 1) must be verified again.
    assert_eq!(
        append(&addr, batch(7, 0, 2, true)).await,
        Err(INVALID_TXN_STATE)
    );
    verify_txn(&addr, 7, 0, 2).await;
    assert_eq!(append(&addr, batch(7, 0, 2, true)).await, Ok(4));
}

#[actix_rt::test]
async fn without_verification_transactional_appends_need_no_guard() {
    let broker = BTreeMap::from([(
        "transaction.partition.verification.enable".to_string(),
        "false".to_string(),
    )]);
    let registry =
        ReplicaManagerActor::new(1, broker, Box::new(MemoryLogFactory::default()), None, None)
            .start();
    let addr = leader_of_t0(registry).await;
    assert_eq!(append(&addr, batch(7, 0, 0, true)).await, Ok(0));
}
