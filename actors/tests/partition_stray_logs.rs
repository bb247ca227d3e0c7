//! Stray logs (KIP-858): once the broker is caught up, a log left on disk for a partition the
//! metadata image no longer places on this node (its topic was deleted while the node was
//! down) is renamed `<topic>-<p>.<uuid>-stray`; a log the image does place stays.

use std::collections::BTreeMap;
use std::sync::Arc;

use kactor_actors::metadata::core::image::{PartitionRegistration, TopicImage};
use kactor_actors::metadata::MetadataImage;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::{batch, disk_registry, leader_change};
use kactor_protocol::Uuid;

const KEPT: Uuid = Uuid([1; 16]);
const GONE: Uuid = Uuid([2; 16]);

fn image_with(topic: &str, id: Uuid) -> MetadataImage {
    let mut image = MetadataImage::default();
    let mut partitions = BTreeMap::new();
    partitions.insert(
        0,
        PartitionRegistration {
            replicas: vec![1],
            directories: vec![],
            isr: vec![1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            elr: vec![],
            last_known_elr: vec![],
            leader: 1,
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
        },
    );
    image.topics.by_id.insert(
        id,
        Arc::new(TopicImage {
            name: topic.into(),
            id,
            partitions,
        }),
    );
    image.topics.by_name.insert(topic.into(), id);
    image
}

fn dir_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("kept") || n.starts_with("gone"))
        .collect();
    names.sort();
    names
}

#[actix_rt::test]
async fn unassigned_logs_become_strays_once_caught_up() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().to_path_buf()];
    // First run: both topics hosted, one batch each, clean shutdown.
    {
        let registry = disk_registry(&dirs);
        registry
            .send(ApplyPartitionChanges {
                changes: vec![
                    leader_change("kept", KEPT, 0, 0),
                    leader_change("gone", GONE, 0, 0),
                ],
            })
            .await
            .unwrap();
        let table = registry.send(SubscribePartitionTable).await.unwrap();
        for t in ["kept", "gone"] {
            let addr = table.borrow().get(t, 0).unwrap().addr.clone();
            addr.send(AppendRecords {
                records: batch(&[b"v"], 1000),
                required_acks: 1,
            })
            .await
            .unwrap()
            .unwrap();
        }
        registry.send(ShutdownReplicas).await.unwrap().unwrap();
    }
    assert_eq!(dir_names(dir.path()), vec!["gone-0", "kept-0"]);

    // Second run: the caught-up image only knows "kept" ("gone" was deleted while down).
    let registry = disk_registry(&dirs);
    registry
        .send(MarkStrayLogs {
            image: Arc::new(image_with("kept", KEPT)),
        })
        .await
        .unwrap();
    let names = dir_names(dir.path());
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[1], "kept-0", "an assigned log stays: {names:?}");
    assert!(
        names[0].starts_with("gone-0.") && names[0].ends_with("-stray"),
        "the unassigned log is renamed <topic>-<p>.<uuid>-stray: {names:?}"
    );
    // The kept log still opens with its data.
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader_change("kept", KEPT, 0, 0)],
        })
        .await
        .unwrap();
    let table = registry.send(SubscribePartitionTable).await.unwrap();
    let info = table
        .borrow()
        .get("kept", 0)
        .unwrap()
        .addr
        .send(DescribeReplica)
        .await
        .unwrap();
    assert_eq!(info.log_end_offset, 1);
}
