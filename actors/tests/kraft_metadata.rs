//! The KRaft path end to end on a real temp dir: a single-voter node elects itself, bootstraps
//! the metadata log, registers and unfences its broker, creates / alters / deletes topics
//! through the QuorumControllerActor, publishes partition changes, and after a restart rebuilds
//! the same image from `__cluster_metadata-0` alone. Kafka 4.4.0's `kafka-dump-log
//! --cluster-metadata-decoder` must read the log (skipped with a message without java + jars).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use kactor_actors::controller::core::requests::*;
use kactor_actors::controller::{
    start_kraft, CreateTopics, DeleteTopics, IncrementalAlterConfigs, KraftConfig,
};
use kactor_actors::metadata::core::{
    ConfigResource, LocalPartitionChangeKind, MetadataImage, MetadataRecord,
};
use kactor_actors::metadata::{wait_for_offset, PartitionsChanged, SubscribePartitionChanges};
use kactor_actors::raft::batch::decode_batches;
use kactor_actors::raft::METADATA_PARTITION_DIR;

mod common;
use common::kraft::{kraft_config, until_running};

/// The shared single-node config, with two partitions per new topic.
fn config(dir: &Path) -> KraftConfig {
    let mut c = kraft_config(dir);
    c.controller
        .as_mut()
        .expect("controller role")
        .num_partitions = 2;
    c
}

/// Collects PartitionsChanged notifications.
struct Collector(Arc<Mutex<Vec<PartitionsChanged>>>);
impl kactor_actors::runtime::SupervisedActor for Collector {
    const MAILBOX_CAPACITY: usize = 1024;
}
kactor_actors::supervised_mailbox!(Collector);
impl Actor for Collector {
    type Context = Context<Self>;
}
impl Handler<PartitionsChanged> for Collector {
    type Result = ();
    fn handle(&mut self, msg: PartitionsChanged, _: &mut Context<Self>) {
        self.0.lock().unwrap().push(msg);
    }
}

/// Replays the metadata log file into a fresh image.
fn image_from_log(dir: &Path) -> MetadataImage {
    let log = dir
        .join(METADATA_PARTITION_DIR)
        .join("00000000000000000000.log");
    let bytes = Bytes::from(std::fs::read(log).unwrap());
    let mut image = MetadataImage::default();
    for batch in decode_batches(bytes).unwrap() {
        let records: Vec<MetadataRecord> = if batch.is_control {
            Vec::new()
        } else {
            batch
                .records
                .iter()
                .map(|v| MetadataRecord::decode(v.clone()).unwrap())
                .collect()
        };
        image = image
            .apply_batch(&records, batch.last_offset, batch.epoch)
            .unwrap()
            .0;
    }
    image
}

fn topic(name: &str) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: -1,
        replication_factor: -1,
        ..Default::default()
    }
}

#[test]
fn single_node_metadata_lifecycle_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));

    // First life: create, configure, delete.
    let (orders_id, image_before) = System::new().block_on({
        let dir = dir.path().to_path_buf();
        let seen = seen.clone();
        async move {
            let h = start_kraft(&Arbiter::current(), config(&dir)).unwrap();
            until_running(&h).await;
            let collector = kactor_actors::runtime::start_here(Collector(seen.clone()));
            h.publisher.do_send(SubscribePartitionChanges {
                subscriber: collector.recipient(),
            });
            let ctl = h.controller.as_ref().unwrap();

            let mut orders = topic("orders");
            orders.configs = vec![("cleanup.policy".into(), Some("compact".into()))];
            let r = ctl
                .send(CreateTopics {
                    topics: vec![orders, topic("doomed"), topic("bad name")],
                    validate_only: false,
                })
                .await
                .unwrap()
                .unwrap();
            assert!(r.response[0].error.is_ok(), "{:?}", r.response[0]);
            assert_eq!(r.response[0].num_partitions, 2);
            assert_eq!(r.response[2].error.code, 17);
            let orders_id = r.response[0].topic_id;

            // Once the publisher reaches the write's offset, the image has the topic.
            let mut rx = h.image.clone();
            assert!(wait_for_offset(&mut rx, r.offset).await);
            let img = rx.borrow().clone();
            let t = img.topics.get_by_name("orders").unwrap();
            assert_eq!(t.id, orders_id);
            assert_eq!(t.partitions[&0].leader, 1);

            let r = ctl
                .send(IncrementalAlterConfigs {
                    resources: vec![
                        IncrementalAlterConfigsResource {
                            resource_type: 2,
                            resource_name: "orders".into(),
                            ops: vec![(
                                "retention.ms".into(),
                                AlterConfigOp::Set,
                                Some("1000".into()),
                            )],
                        },
                        IncrementalAlterConfigsResource {
                            resource_type: 4,
                            resource_name: "".into(),
                            ops: vec![(
                                "log.retention.ms".into(),
                                AlterConfigOp::Set,
                                Some("5000".into()),
                            )],
                        },
                    ],
                    validate_only: false,
                })
                .await
                .unwrap()
                .unwrap();
            assert!(r.response.iter().all(|x| x.error.is_ok()));
            let r = ctl
                .send(DeleteTopics {
                    topics: vec![TopicRef::Name("doomed".into())],
                })
                .await
                .unwrap()
                .unwrap();
            assert!(r.response[0].error.is_ok());
            assert!(wait_for_offset(&mut rx, r.offset).await);
            // Let the collector drain its mailbox.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let img = rx.borrow().clone();
            System::current().stop();
            (orders_id, img)
        }
    });

    // The subscriber saw leaderships, the config change and the deletion.
    let events = seen.lock().unwrap().clone();
    let all: Vec<_> = events.iter().flat_map(|e| e.partitions.clone()).collect();
    assert!(all.iter().any(|p| p.topic_name == "orders"
        && p.kind == LocalPartitionChangeKind::BecomeLeader
        && p.config_overrides.get("cleanup.policy").map(String::as_str) == Some("compact")));
    assert!(all
        .iter()
        .any(|p| p.topic_name == "doomed" && p.kind == LocalPartitionChangeKind::Delete));
    assert!(events
        .iter()
        .flat_map(|e| e.topic_configs.clone())
        .any(|c| c.topic_name == "orders"
            && c.config_overrides.get("retention.ms").map(String::as_str) == Some("1000")));

    // Replay: the log alone yields the image the publisher built.
    assert_eq!(image_from_log(dir.path()), *image_before);
    let qs = std::fs::read_to_string(dir.path().join(METADATA_PARTITION_DIR).join("quorum-state"))
        .unwrap();
    assert!(qs.contains("\"leaderId\":1,\"leaderEpoch\":1,"), "{qs}");

    // Second life: same dir, new process state.
    System::new().block_on({
        let dir = dir.path().to_path_buf();
        async move {
            let h = start_kraft(&Arbiter::current(), config(&dir)).unwrap();
            until_running(&h).await;
            let img = h.image.borrow().clone();
            let t = img.topics.get_by_name("orders").unwrap();
            assert_eq!(t.id, orders_id);
            assert_eq!(t.partitions.len(), 2);
            // The new incarnation lost and regained leadership: the epoch moved on.
            assert!(t.partitions[&0].leader_epoch >= 2);
            assert!(img.topics.get_by_name("doomed").is_none());
            assert_eq!(
                img.config_overrides(&ConfigResource::topic("orders"))["retention.ms"],
                "1000"
            );
            assert_eq!(
                img.config_overrides(&ConfigResource::broker(""))["log.retention.ms"],
                "5000"
            );
            assert_eq!(img.features["metadata.version"], 33);
            // Bootstrap happened once.
            let ctl = h.controller.as_ref().unwrap();
            let r = ctl
                .send(CreateTopics {
                    topics: vec![topic("orders")],
                    validate_only: false,
                })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.response[0].error.code, 36);
            System::current().stop();
        }
    });
    let qs = std::fs::read_to_string(dir.path().join(METADATA_PARTITION_DIR).join("quorum-state"))
        .unwrap();
    assert!(qs.contains("\"leaderEpoch\":2,"), "{qs}");

    kafka_dump_log_reads_it(dir.path());
}

fn classpath() -> Option<String> {
    if let Ok(cp) = std::env::var("KAFKA_CLASSPATH") {
        if !cp.is_empty() {
            return Some(cp);
        }
    }
    if Command::new("java").arg("-version").output().is_err() {
        return None;
    }
    let pom = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/log_kafka/pom.xml");
    if !pom.exists() {
        return None;
    }
    let out = std::env::temp_dir().join(format!("kactor-kraft-cp-{}.txt", std::process::id()));
    let run = |offline: bool| {
        let mut cmd = Command::new("mvn");
        cmd.arg("-q");
        if offline {
            cmd.arg("-o");
        }
        cmd.arg("-f")
            .arg(&pom)
            .arg("dependency:build-classpath")
            .arg(format!("-Dmdep.outputFile={}", out.display()));
        cmd.status().map(|s| s.success()).unwrap_or(false)
    };
    if !(run(true) || run(false)) {
        return None;
    }
    let cp = std::fs::read_to_string(&out).ok()?;
    let _ = std::fs::remove_file(&out);
    Some(cp.trim().to_string())
}

fn kafka_dump_log_reads_it(dir: &Path) {
    let Some(cp) = classpath() else {
        eprintln!("SKIPPED kafka-dump-log check: no java / Kafka 4.4.0 jars (set KAFKA_CLASSPATH)");
        return;
    };
    let log = dir
        .join(METADATA_PARTITION_DIR)
        .join("00000000000000000000.log");
    let out = Command::new("java")
        .arg("-cp")
        .arg(&cp)
        .arg("org.apache.kafka.tools.DumpLogSegments")
        .arg("--cluster-metadata-decoder")
        .arg("--files")
        .arg(&log)
        .output()
        .expect("java runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dump failed: {stdout}\n{stderr}");
    for needle in [
        "LeaderChange: {\"version\":0,\"leaderId\":1,\"voters\":[{\"voterId\":1}],\"grantingVoters\":[{\"voterId\":1}]}",
        "{\"type\":\"FEATURE_LEVEL_RECORD\",\"version\":0,\"data\":{\"name\":\"metadata.version\",\"featureLevel\":33}}",
        "\"type\":\"TOPIC_RECORD\",\"version\":0,\"data\":{\"name\":\"orders\"",
        "\"type\":\"PARTITION_RECORD\",\"version\":2",
        "\"type\":\"CONFIG_RECORD\",\"version\":0,\"data\":{\"resourceType\":2,\"resourceName\":\"orders\",\"name\":\"cleanup.policy\",\"value\":\"compact\"}",
        "\"type\":\"REGISTER_BROKER_RECORD\",\"version\":4",
        "\"type\":\"REMOVE_TOPIC_RECORD\"",
        "\"type\":\"BEGIN_TRANSACTION_RECORD\"",
    ] {
        assert!(stdout.contains(needle), "missing {needle} in:\n{stdout}");
    }
    assert!(!stdout.contains("isvalid: false"), "{stdout}");
    assert!(!stdout.contains("Error"), "{stdout}");
}
