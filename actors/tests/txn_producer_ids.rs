//! InitProducerId's producer ids come from blocks the QuorumController allocates (a
//! ProducerIdsRecord in `__cluster_metadata`): sequential within a block, never repeated after a
//! restart of the whole node.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use actix::prelude::*;
use kactor_actors::controller::{start_kraft, ControllerConfig, KraftConfig, KraftHandles};
use kactor_actors::metadata::lifecycle::{BrokerLifecycleConfig, BrokerLifecycleState};
use kactor_actors::txn::actor::start_producer_id_manager;
use kactor_actors::txn::messages::GenerateProducerId;
use kactor_protocol::Uuid;

fn config(dir: &Path) -> KraftConfig {
    KraftConfig {
        node_id: 1,
        voters: BTreeSet::from([1]),
        metadata_log_dir: dir.to_path_buf(),
        election_timeout_ms: 1000,
        metadata_log_segment_bytes: 1024 * 1024 * 1024,
        metadata_log: Default::default(),
        controller: Some(ControllerConfig {
            node_id: 1,
            cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
            num_partitions: 1,
            ..Default::default()
        }),
        broker: Some(BrokerLifecycleConfig {
            node_id: 1,
            cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
            incarnation_id: Uuid::random(),
            listeners: Vec::new(),
            rack: None,
            log_dirs: vec![Uuid([9; 16])],
            heartbeat_interval_ms: 2000,
        }),
        finalized_features: None,
        quorum: Default::default(),
    }
}

async fn until_running(h: &KraftHandles) {
    let mut rx = h.broker_state.clone().expect("broker role");
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| *s == BrokerLifecycleState::Running),
    )
    .await
    .expect("broker unfenced in time")
    .expect("lifecycle alive");
}

/// Starts the node in `dir` and takes `n` producer ids.
fn ids_from_a_node_life(dir: &Path, n: usize) -> Vec<i64> {
    System::new().block_on({
        let dir = dir.to_path_buf();
        async move {
            let h = start_kraft(&Arbiter::current(), config(&dir)).unwrap();
            until_running(&h).await;
            let ctl = h.controller.as_ref().unwrap().recipient();
            let ids = start_producer_id_manager(&Arbiter::current(), 1, ctl, h.image.clone());
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(ids.send(GenerateProducerId).await.unwrap().unwrap());
            }
            out
        }
    })
}

#[test]
fn ids_are_sequential_and_never_repeat_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let first = ids_from_a_node_life(dir.path(), 1200);
    // Sequential, crossing into a second block of 1000 without a gap in the handed-out ids.
    for w in first.windows(2) {
        assert!(w[1] > w[0], "{} then {}", w[0], w[1]);
    }
    assert_eq!(first[1] - first[0], 1);
    let second = ids_from_a_node_life(dir.path(), 3);
    let max_first = *first.iter().max().unwrap();
    assert!(
        second.iter().all(|id| *id > max_first),
        "after restart {second:?} must be above {max_first}"
    );
}
