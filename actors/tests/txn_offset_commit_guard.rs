//! KIP-890's verification guard on the group coordinator's TxnOffsetCommit append: the records
//! the `GroupCoordinatorActor` writes to `__consumer_offsets` for a transactional producer
//! (Kafka's `AppendOrigin.COORDINATOR`) are held to the guard `txn::leader_verify` confirmed on
//! that partition, as Kafka's `UnifiedLog.analyzeAndValidateProducerState` holds them. An abort
//! whose marker lands between the transaction coordinator's OK and the offsets' append voids
//! the guard: the commit answers INVALID_TXN_STATE and nothing is appended, so no transaction
//! is left open on `__consumer_offsets` that no marker will ever end.

use std::time::Duration;

use actix::Addr;
use kactor_actors::group::core::{
    CommitPartitionInput, CommitTopicInput, GroupCoordinatorConfig, GroupRequest, GroupResponse,
    OffsetFetchGroupInput, TxnOffsetCommitInput,
};
use kactor_actors::group::messages::*;
use kactor_actors::group::GroupCoordinatorActor;
use kactor_actors::partition::messages::{
    AppendTxnMarker, ConfirmTxnVerification, DescribeProducer, DescribeReplica,
    StartTxnVerification,
};
use kactor_actors::partition::PartitionActor;
use kactor_actors::producer::partition::TxnMarker;
use kactor_actors::producer::VerificationGuard;
use kactor_protocol::errors::{INVALID_TXN_STATE, NONE};
use kactor_protocol::Uuid;

mod common;
use common::group::{coordinator, offsets_partition};

const PID: i64 = 7;

/// What `txn::leader_verify` does for a TxnOffsetCommit (v4 and older: verify only) before the
/// group coordinator sees it: start the verification on the `__consumer_offsets` partition,
/// (the transaction coordinator answers OK), confirm the guard.
async fn verify(partition: &Addr<PartitionActor>) {
    let guard = partition
        .send(StartTxnVerification {
            producer_id: PID,
            producer_epoch: 0,
            // Offset commits carry no sequence.
            base_sequence: -1,
            supports_epoch_bump: false,
        })
        .await
        .unwrap()
        .unwrap();
    assert_ne!(guard, VerificationGuard::SENTINEL);
    partition
        .send(ConfirmTxnVerification {
            producer_id: PID,
            guard,
        })
        .await
        .unwrap()
        .unwrap();
}

/// The transaction coordinator's abort marker on `__consumer_offsets`.
async fn abort(partition: &Addr<PartitionActor>) {
    partition
        .send(AppendTxnMarker {
            marker: TxnMarker {
                producer_id: PID,
                producer_epoch: 0,
                commit: false,
                coordinator_epoch: 0,
            },
        })
        .await
        .unwrap()
        .unwrap();
}

/// The group coordinator's answer per partition of a TxnOffsetCommit of `orders-0`.
async fn txn_offset_commit(group: &Addr<GroupCoordinatorActor>, offset: i64) -> Vec<(i32, i16)> {
    let request = GroupRequest::TxnOffsetCommit(TxnOffsetCommitInput {
        group_id: "g".into(),
        producer_id: PID,
        producer_epoch: 0,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![CommitTopicInput {
            name: "orders".into(),
            topic_id: Uuid::ZERO,
            partitions: vec![CommitPartitionInput {
                partition_index: 0,
                committed_offset: offset,
                committed_leader_epoch: 0,
                committed_metadata: None,
            }],
        }],
    });
    match group.send(HandleGroupRequest { request }).await.unwrap() {
        GroupResponse::TxnOffsetCommit { topics } => topics[0].partitions.clone(),
        other => panic!("{other:?}"),
    }
}

/// OffsetFetch of `orders-0` with require_stable: (error, committed offset).
async fn fetch_stable(group: &Addr<GroupCoordinatorActor>) -> (i16, i64) {
    let request = GroupRequest::OffsetFetch {
        groups: vec![OffsetFetchGroupInput {
            group_id: "g".into(),
            member_id: None,
            member_epoch: -1,
            topics: Some(vec![("orders".into(), vec![0])]),
        }],
        require_stable: true,
    };
    let GroupResponse::OffsetFetch { groups } =
        group.send(HandleGroupRequest { request }).await.unwrap()
    else {
        panic!()
    };
    groups[0]
        .topics
        .iter()
        .flat_map(|(_, ps)| ps.iter().map(|p| (p.error_code, p.committed_offset)))
        .next()
        .expect("the asked partition is answered")
}

async fn log_end(partition: &Addr<PartitionActor>) -> i64 {
    partition
        .send(DescribeReplica)
        .await
        .unwrap()
        .log_end_offset
}

async fn open_txn_first_offset(partition: &Addr<PartitionActor>) -> Option<i64> {
    partition
        .send(DescribeProducer { producer_id: PID })
        .await
        .unwrap()
        .unwrap()
        .and_then(|e| e.current_txn_first_offset)
}

#[actix_rt::test]
async fn an_abort_between_the_coordinators_ok_and_the_offsets_append_refuses_the_commit() {
    let partition = offsets_partition().await;
    let group = coordinator(&partition, GroupCoordinatorConfig::default()).await;
    // The leader check verified __consumer_offsets-0 for the producer ...
    verify(&partition).await;
    // ... then the transaction was aborted before the group coordinator's append: the
    // transaction coordinator wrote its marker there.
    abort(&partition).await;
    let end = log_end(&partition).await;

    assert_eq!(
        txn_offset_commit(&group, 42).await,
        vec![(0, INVALID_TXN_STATE)],
        "the marker cleared the guard: the offsets must not open a transaction nobody ends"
    );
    assert_eq!(log_end(&partition).await, end, "nothing appended");
    assert_eq!(open_txn_first_offset(&partition).await, None);
    // The refused write's pending offset is gone with the shard's reload: nothing unstable.
    let mut fetched = None;
    for _ in 0..200 {
        if group.send(DescribeGroupCoordinator).await.unwrap().loaded {
            fetched = Some(fetch_stable(&group).await);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(fetched, Some((NONE, -1)));
}

#[actix_rt::test]
async fn a_verified_commit_opens_the_transaction_and_the_next_one_continues_it() {
    let partition = offsets_partition().await;
    let group = coordinator(&partition, GroupCoordinatorConfig::default()).await;
    let start = log_end(&partition).await;

    verify(&partition).await;
    assert_eq!(txn_offset_commit(&group, 42).await, vec![(0, NONE)]);
    assert_eq!(open_txn_first_offset(&partition).await, Some(start));
    // The guard was used up by the first append; the open transaction carries the next one.
    assert_eq!(txn_offset_commit(&group, 43).await, vec![(0, NONE)]);
    assert_eq!(log_end(&partition).await, start + 2);

    // After the abort, the next transaction's commit needs verifying again.
    abort(&partition).await;
    let end = log_end(&partition).await;
    assert_eq!(
        txn_offset_commit(&group, 44).await,
        vec![(0, INVALID_TXN_STATE)]
    );
    assert_eq!(log_end(&partition).await, end);
}
