//! The partition layer's own log-dir loading: the KRaft metadata log in the same dir is left
//! alone, logs come back after a clean restart (marker consumed) and after a crash (recovered),
//! and checkpoints are written.

use std::collections::BTreeMap;

use kactor_actors::partition::core::{IsolationLevel, ReadParams, TopicPartition};
use kactor_actors::partition::log_dirs::LogDirsFactory;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::registry::{
    CheckpointHighWatermarks, CheckpointLogDirs, HostedReplica,
};
use kactor_actors::partition::startup::{start_partitions, PartitionLayer, PartitionLayerConfig};
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
        scope: Default::default(),
        params: ReadParams {
            fetch_offset: 0,
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

/// `replication-offset-checkpoint`: the high watermark is written every interval and at a
/// clean shutdown, and a restarted replica starts from it, not from its log end. Records past
/// the high watermark (not on the other ISR member) stay invisible after the restart, as they
/// were before it.
#[actix_rt::test]
async fn the_high_watermark_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || PartitionLayerConfig::new(1, vec![dir.path().to_path_buf()], BTreeMap::new());
    let checkpoint = dir.path().join("replication-offset-checkpoint");
    let hw_file = || std::fs::read_to_string(&checkpoint).unwrap();
    let append = |records| AppendRecords {
        records,
        required_acks: 1,
    };
    let layer = start_partitions(cfg(), None).unwrap();
    // Leader alone in the ISR: two records commit at once.
    let mut change = leader("h");
    change.replicas = vec![1, 2];
    let p = apply(&layer, &change).await;
    p.addr
        .send(append(batch(&[b"1", b"2"], 1)))
        .await
        .unwrap()
        .unwrap();
    // Broker 2 joins the ISR and never fetches: the third record stays above the HW.
    change.isr = vec![1, 2];
    next_epoch(&mut change);
    apply(&layer, &change).await;
    p.addr
        .send(append(batch(&[b"3"], 1)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hw_and_end(&p).await, (2, 3));
    layer.registry.send(CheckpointHighWatermarks).await.unwrap();
    assert_eq!(hw_file(), "0\n1\nh 0 2\n");
    layer.shutdown().await.unwrap();
    assert_eq!(hw_file(), "0\n1\nh 0 2\n");

    // Restarted, leading again with the same ISR: the HW is the checkpointed 2, not the end 3.
    let layer = start_partitions(cfg(), None).unwrap();
    next_epoch(&mut change);
    assert_eq!(hw_and_end(&apply(&layer, &change).await).await, (2, 3));
    layer.shutdown().await.unwrap();

    // A log on disk that no replica has opened yet keeps its entry through a checkpoint.
    let layer = start_partitions(cfg(), None).unwrap();
    layer.registry.send(CheckpointHighWatermarks).await.unwrap();
    assert_eq!(hw_file(), "0\n1\nh 0 2\n");
    layer.shutdown().await.unwrap();
    assert_eq!(hw_file(), "0\n1\nh 0 2\n");

    // A dir without the file (written by a kactor that did not keep one): the replica starts
    // from its recovery point, as it used to, not from 0.
    std::fs::remove_file(&checkpoint).unwrap();
    let layer = start_partitions(cfg(), None).unwrap();
    next_epoch(&mut change);
    assert_eq!(hw_and_end(&apply(&layer, &change).await).await, (3, 3));
    layer.shutdown().await.unwrap();
    assert_eq!(hw_file(), "0\n1\nh 0 3\n");
}

/// Applies `change` and returns the replica it hosts.
async fn apply(layer: &PartitionLayer, change: &PartitionChange) -> HostedReplica {
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![change.clone()],
        })
        .await
        .unwrap();
    let hosted = layer.apis.partitions.borrow();
    hosted.get(&change.topic, change.partition).unwrap().clone()
}

fn next_epoch(change: &mut PartitionChange) {
    change.leader_epoch += 1;
    change.partition_epoch += 1;
}

/// (high watermark, log end offset) as a consumer read sees them.
async fn hw_and_end(p: &HostedReplica) -> (i64, i64) {
    let r = p.addr.send(read()).await.unwrap().unwrap();
    (r.high_watermark, r.log_end_offset)
}

/// Dirs in the log dir named `-stray`, renamed by this module, as Kafka names them.
fn stray_dirs(dir: &std::path::Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with("-stray"))
        .collect();
    out.sort();
    out
}

/// Writes two records to `topic`-0 under `topic_id` and shuts down cleanly.
async fn write_and_stop(dir: &std::path::Path, topic: &str, topic_id: Uuid) {
    let cfg = PartitionLayerConfig::new(1, vec![dir.to_path_buf()], BTreeMap::new());
    let layer = start_partitions(cfg, None).unwrap();
    let mut change = leader(topic);
    change.topic_id = topic_id;
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![change],
        })
        .await
        .unwrap();
    let p = layer
        .apis
        .partitions
        .borrow()
        .get(topic, 0)
        .unwrap()
        .clone();
    p.addr
        .send(AppendRecords {
            records: batch(&[b"old-1", b"old-2"], 1),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    layer.shutdown().await.unwrap();
}

/// KAFKA-14616: a topic deleted and re-created (new topic id) while the node was down. The
/// log on disk belongs to the old topic: it is renamed `<topic>-0.<uuid>-stray` and kept, and
/// the new topic starts from an empty log instead of serving the old records.
#[actix_rt::test]
async fn a_log_under_another_topic_id_is_renamed_stray_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    write_and_stop(dir.path(), "s", Uuid([4; 16])).await;

    let cfg = PartitionLayerConfig::new(1, vec![dir.path().to_path_buf()], BTreeMap::new());
    let layer = start_partitions(cfg, None).unwrap();
    let mut recreated = leader("s");
    recreated.topic_id = Uuid([7; 16]);
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![recreated],
        })
        .await
        .unwrap();
    let p = layer.apis.partitions.borrow().get("s", 0).unwrap().clone();
    let r = p.addr.send(read()).await.unwrap().unwrap();
    assert_eq!((r.log_start_offset, r.log_end_offset), (0, 0));
    let strays = stray_dirs(dir.path());
    assert_eq!(strays.len(), 1, "{strays:?}");
    let name = &strays[0];
    // `<topic>-<partition>.<32 hex digits>-stray`, the old segment kept inside.
    let uuid = name
        .strip_prefix("s-0.")
        .and_then(|n| n.strip_suffix("-stray"))
        .unwrap();
    assert!(uuid.len() == 32 && uuid.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(dir
        .path()
        .join(name)
        .join("00000000000000000000.log")
        .exists());
    layer.shutdown().await.unwrap();

    // The next start leaves the stray alone (kept, not loaded as a partition).
    let factory = LogDirsFactory::load(&[dir.path().to_path_buf()], &BTreeMap::new()).unwrap();
    assert_eq!(factory.unclaimed(), vec![TopicPartition::new("s", 0)]);
    assert_eq!(stray_dirs(dir.path()), strays);
}

/// A log for a partition the metadata no longer assigns here (topic deleted while down):
/// `mark_strays` over the first caught-up image renames it and stops tracking it.
#[actix_rt::test]
async fn mark_strays_renames_logs_the_image_does_not_assign() {
    let dir = tempfile::tempdir().unwrap();
    write_and_stop(dir.path(), "gone", Uuid([5; 16])).await;
    write_and_stop(dir.path(), "kept", Uuid([6; 16])).await;

    let mut factory = LogDirsFactory::load(&[dir.path().to_path_buf()], &BTreeMap::new()).unwrap();
    let mut before = factory.unclaimed();
    before.sort();
    assert_eq!(
        before,
        vec![
            TopicPartition::new("gone", 0),
            TopicPartition::new("kept", 0)
        ]
    );
    let renamed = factory
        .mark_strays(|tp, id| !(tp.topic == "kept" && id == Some(Uuid([6; 16]))))
        .unwrap();
    assert_eq!(renamed.len(), 1);
    assert_eq!(factory.unclaimed(), vec![TopicPartition::new("kept", 0)]);
    let strays = stray_dirs(dir.path());
    assert_eq!(strays.len(), 1);
    assert!(strays[0].starts_with("gone-0."));
    assert!(!dir.path().join("gone-0").exists());
    assert!(dir.path().join("kept-0").exists());
}

/// DescribeLogDirs' `total_bytes` / `usable_bytes` come from the dir's file system, as `df`
/// reports it (size and available, in bytes).
#[test]
fn volume_bytes_match_df() {
    let dir = tempfile::tempdir().unwrap();
    let (total, usable) =
        kactor_actors::partition::log_dirs::volume_bytes(dir.path()).expect("statvfs");
    let df = std::process::Command::new("df")
        .args(["-B1", "--output=size,avail"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(df.stdout).unwrap();
    let nums: Vec<i64> = text
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(total, nums[0]);
    // Other processes write to the same disk meanwhile: close, not equal.
    assert!(
        (usable - nums[1]).abs() < 256 << 20,
        "{usable} vs df {}",
        nums[1]
    );
    assert!(
        kactor_actors::partition::log_dirs::volume_bytes(&dir.path().join("missing")).is_none()
    );
}
