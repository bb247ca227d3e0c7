//! The partition layer's own log-dir loading: the KRaft metadata log in the same dir is left
//! alone, logs come back after a clean restart (marker consumed) and after a crash (recovered),
//! and checkpoints are written.

use std::collections::BTreeMap;

use kactor_actors::partition::core::{IsolationLevel, ReadParams};
use kactor_actors::partition::log_dirs::LogDirsFactory;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::registry::CheckpointLogDirs;
use kactor_actors::partition::startup::{start_partitions, PartitionLayerConfig};
use kactor_actors::partition::testing::batch;
use kactor_protocol::Uuid;

fn leader(topic: &str) -> PartitionChange {
    PartitionChange {
        kind: PartitionChangeKind::BecomeLeader,
        topic: topic.into(),
        topic_id: Uuid([4; 16]),
        partition: 0,
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        config_overrides: BTreeMap::new(),
    }
}

fn read() -> ReadRecords {
    ReadRecords {
        params: ReadParams {
            fetch_offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            isolation: IsolationLevel::ReadUncommitted,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            replica_id: -1,
        },
    }
}

#[actix_rt::test]
async fn metadata_log_is_skipped_and_logs_survive_clean_and_unclean_restarts() {
    let dir = tempfile::tempdir().unwrap();
    // A metadata log dir the RaftActor owns, with a file we can watch.
    let meta = dir.path().join("__cluster_metadata-0");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::write(meta.join("00000000000000000000.log"), b"not ours").unwrap();
    let cfg = || PartitionLayerConfig::new(1, vec![dir.path().to_path_buf()], BTreeMap::new());

    // Run 1: produce, checkpoint, clean shutdown.
    let layer = start_partitions(cfg(), None).unwrap();
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![leader("a")],
        })
        .await
        .unwrap();
    let p = layer.apis.partitions.borrow().get("a", 0).unwrap().clone();
    p.addr
        .send(AppendRecords {
            records: batch(&[b"1", b"2"], 1),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    layer.registry.send(CheckpointLogDirs).await.unwrap();
    assert!(dir.path().join("recovery-point-offset-checkpoint").exists());
    layer.shutdown().await.unwrap();
    assert!(dir.path().join(".kafka_cleanshutdown").exists());

    // Run 2: the marker is consumed; the metadata log is not loaded as a partition.
    let factory = LogDirsFactory::load(&[dir.path().to_path_buf()], &BTreeMap::new()).unwrap();
    assert_eq!(factory.unclaimed().len(), 1);
    assert!(!dir.path().join(".kafka_cleanshutdown").exists());
    drop(factory);
    assert_eq!(
        std::fs::read(meta.join("00000000000000000000.log")).unwrap(),
        b"not ours"
    );

    // Run 3 after an unclean stop (no marker): recovery keeps every complete batch.
    let layer = start_partitions(cfg(), None).unwrap();
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![leader("a")],
        })
        .await
        .unwrap();
    let p = layer.apis.partitions.borrow().get("a", 0).unwrap().clone();
    let r = p.addr.send(read()).await.unwrap().unwrap();
    assert_eq!((r.high_watermark, r.log_end_offset), (2, 2));
    let out = p
        .addr
        .send(AppendRecords {
            records: batch(&[b"3"], 1),
            required_acks: -1,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.base_offset, 2);
    layer.shutdown().await.unwrap();
    assert_eq!(
        std::fs::read(meta.join("00000000000000000000.log")).unwrap(),
        b"not ours"
    );
}

#[actix_rt::test]
async fn a_recreated_topic_starts_from_an_empty_log() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = PartitionLayerConfig::new(1, vec![dir.path().to_path_buf()], BTreeMap::new());
    let layer = start_partitions(cfg, None).unwrap();
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![leader("r")],
        })
        .await
        .unwrap();
    let old = layer.apis.partitions.borrow().get("r", 0).unwrap().clone();
    old.addr
        .send(AppendRecords {
            records: batch(&[b"old"], 1),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    // Deleted and re-created under the same name (a new topic id) in one metadata delta.
    let mut delete = leader("r");
    delete.kind = PartitionChangeKind::Delete;
    let mut recreate = leader("r");
    recreate.topic_id = Uuid([8; 16]);
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![delete, recreate],
        })
        .await
        .unwrap();
    // The registry finishes the delete before it opens the new log.
    let mut reader = layer.apis.partitions.clone();
    let table = reader
        .wait_for(|t| t.get("r", 0).is_some_and(|r| r.topic_id == Uuid([8; 16])))
        .await
        .unwrap()
        .clone();
    let new = table.get("r", 0).unwrap().clone();
    let r = new.addr.send(read()).await.unwrap().unwrap();
    assert_eq!((r.log_start_offset, r.log_end_offset), (0, 0));
    // And a re-created topic id alone (without a Delete) replaces the replica too.
    let mut again = leader("r");
    again.topic_id = Uuid([9; 16]);
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![again],
        })
        .await
        .unwrap();
    let table = reader
        .wait_for(|t| t.get("r", 0).is_some_and(|r| r.topic_id == Uuid([9; 16])))
        .await
        .unwrap()
        .clone();
    assert_eq!(table.topic_id("r"), Some(Uuid([9; 16])));
    layer.shutdown().await.unwrap();
}
