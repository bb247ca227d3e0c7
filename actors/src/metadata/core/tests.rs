use std::sync::Arc;

use kactor_protocol::metadata::*;
use kactor_protocol::Uuid;

use super::*;

fn topic(name: &str, id: Uuid) -> MetadataRecord {
    MetadataRecord::Topic(TopicRecord {
        name: name.into(),
        topic_id: id,
        ..Default::default()
    })
}

fn partition(id: Uuid, index: i32, replicas: Vec<i32>, leader: i32) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id: index,
        topic_id: id,
        isr: replicas.clone(),
        replicas,
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        ..Default::default()
    })
}

fn config(kind: i8, name: &str, key: &str, value: Option<&str>) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord {
        resource_type: kind,
        resource_name: name.into(),
        name: key.into(),
        value: value.map(str::to_string),
        ..Default::default()
    })
}

#[test]
fn replay_builds_topics_partitions_and_configs() {
    let id = Uuid([1; 16]);
    let recs = vec![
        topic("t", id),
        config(2, "t", "cleanup.policy", Some("compact")),
        partition(id, 0, vec![1], 1),
        partition(id, 1, vec![1], 1),
    ];
    let (img, changes) = MetadataImage::default().apply_batch(&recs, 3, 1).unwrap();
    let t = img.topics.get_by_name("t").unwrap();
    assert_eq!(t.id, id);
    assert_eq!(t.partitions.len(), 2);
    assert_eq!(img.provenance.last_offset, 3);
    assert_eq!(
        img.config_overrides(&ConfigResource::topic("t"))["cleanup.policy"],
        "compact"
    );
    assert_eq!(changes.changed_partitions.len(), 2);

    let local = local_changes(&MetadataImage::default(), &img, &changes, 1);
    assert_eq!(local.partitions.len(), 2);
    assert!(local
        .partitions
        .iter()
        .all(|p| p.kind == LocalPartitionChangeKind::BecomeLeader
            && p.config_overrides["cleanup.policy"] == "compact"));
    // Another node hosts nothing here.
    assert!(local_changes(&MetadataImage::default(), &img, &changes, 2)
        .partitions
        .is_empty());
}

#[test]
fn partition_change_merges_and_bumps_epochs() {
    let id = Uuid([2; 16]);
    let (img, _) = MetadataImage::default()
        .apply_batch(&[topic("t", id), partition(id, 0, vec![1, 2], 1)], 1, 1)
        .unwrap();
    let change = MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: 0,
        topic_id: id,
        leader: 2,
        isr: Some(vec![2]),
        ..Default::default()
    });
    let (img2, changes) = img.apply_batch([&change], 2, 1).unwrap();
    let p = &img2.topics.get(&id).unwrap().partitions[&0];
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 1));
    assert_eq!(p.isr, vec![2]);
    let local = local_changes(&img, &img2, &changes, 1);
    assert_eq!(
        local.partitions[0].kind,
        LocalPartitionChangeKind::BecomeFollower
    );
    // An ISR-only change keeps the leader epoch.
    let isr_only = MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: 0,
        topic_id: id,
        isr: Some(vec![1, 2]),
        ..Default::default()
    });
    let (img3, _) = img2.apply_batch([&isr_only], 3, 1).unwrap();
    let p = &img3.topics.get(&id).unwrap().partitions[&0];
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 2));
}

#[test]
fn remove_topic_drops_configs_and_reports_deletes() {
    let id = Uuid([3; 16]);
    let (img, _) = MetadataImage::default()
        .apply_batch(
            &[
                topic("t", id),
                config(2, "t", "retention.ms", Some("1")),
                partition(id, 0, vec![1], 1),
            ],
            2,
            1,
        )
        .unwrap();
    let rm = MetadataRecord::RemoveTopic(RemoveTopicRecord {
        topic_id: id,
        ..Default::default()
    });
    let (img2, changes) = img.apply_batch([&rm], 3, 1).unwrap();
    assert!(img2.topics.get_by_name("t").is_none());
    assert!(img2.configs.is_empty());
    let local = local_changes(&img, &img2, &changes, 1);
    assert_eq!(local.partitions.len(), 1);
    assert_eq!(local.partitions[0].kind, LocalPartitionChangeKind::Delete);
    // A topic can be recreated under the same name with a new id.
    let (img3, _) = img2
        .apply_batch(&[topic("t", Uuid([4; 16]))], 4, 1)
        .unwrap();
    assert_eq!(img3.topics.by_name["t"], Uuid([4; 16]));
}

#[test]
fn config_record_with_null_value_deletes_and_broker_configs_are_published() {
    let (img, changes) = MetadataImage::default()
        .apply_batch(&[config(4, "", "log.retention.ms", Some("1000"))], 0, 1)
        .unwrap();
    let local = local_changes(&MetadataImage::default(), &img, &changes, 1);
    assert_eq!(
        local.broker_configs.unwrap().cluster_default["log.retention.ms"],
        "1000"
    );
    let (img2, _) = img
        .apply_batch(&[config(4, "", "log.retention.ms", None)], 1, 1)
        .unwrap();
    assert!(img2.configs.is_empty());
}

#[test]
fn replay_errors_on_inconsistent_records() {
    let id = Uuid([5; 16]);
    assert_eq!(
        MetadataImage::default()
            .apply_batch(&[partition(id, 0, vec![1], 1)], 0, 1)
            .unwrap_err(),
        ReplayError::UnknownTopic(id)
    );
    let fence = MetadataRecord::FenceBroker(FenceBrokerRecord {
        id: 9,
        epoch: 1,
        ..Default::default()
    });
    assert_eq!(
        MetadataImage::default()
            .apply_batch([&fence], 0, 1)
            .unwrap_err(),
        ReplayError::UnknownBroker(9)
    );
}

#[test]
fn images_share_unchanged_topics() {
    let a = Uuid([6; 16]);
    let b = Uuid([7; 16]);
    let (img, _) = MetadataImage::default()
        .apply_batch(&[topic("a", a), topic("b", b)], 1, 1)
        .unwrap();
    let (img2, _) = img
        .apply_batch(&[partition(b, 0, vec![1], 1)], 2, 1)
        .unwrap();
    // Copy-on-write: the untouched topic is the same allocation in both snapshots.
    assert!(Arc::ptr_eq(
        img.topics.get(&a).unwrap(),
        img2.topics.get(&a).unwrap()
    ));
}
