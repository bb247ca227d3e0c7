//! The image as the records that rebuild it (Kafka's `MetadataImage.write` through an
//! `ImageWriter`): what a metadata snapshot holds, and what loading one does. Pure: the Raft
//! shell frames these records into a `.checkpoint` file and reads them back.
//!
//! Order follows Kafka's image writer: features (metadata.version first, since every record
//! after it is read at that version), cluster (brokers, then controllers), topics with their
//! partitions, configs, client quotas, producer ids, SCRAM credentials, then the records kactor
//! keeps without modelling them (ACLs, delegation tokens, ... written by a Kafka controller in a mixed cluster), in the
//! order they were committed so their own add/remove pairs still mean the same.

use std::collections::BTreeSet;

use kactor_protocol::metadata::{
    ClientQuotaRecord, ConfigRecord, FeatureLevelRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, TopicRecord, UserScramCredentialRecord,
};

use super::image::{
    MetadataChanges, MetadataImage, Provenance, ReplayError, KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
};
use super::records::MetadataRecord;

/// The records that rebuild `image` from an empty one. `kraft.version` is left out: it is a
/// Raft control record, which the snapshot's header batch carries.
pub fn image_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    let feature = |name: &str, level: i16| {
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: name.to_string(),
            feature_level: level,
            ..Default::default()
        })
    };
    if let Some(mv) = image.metadata_version() {
        out.push(feature(METADATA_VERSION_FEATURE, mv));
    }
    for (name, level) in &image.features {
        if name != METADATA_VERSION_FEATURE && name != KRAFT_VERSION_FEATURE {
            out.push(feature(name, *level));
        }
    }
    for b in image.brokers.values() {
        out.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: b.id,
            incarnation_id: b.incarnation_id,
            broker_epoch: b.epoch,
            end_points: b.listeners.clone(),
            features: b.supported_features.clone(),
            rack: b.rack.clone(),
            fenced: b.fenced,
            in_controlled_shutdown: b.in_controlled_shutdown,
            log_dirs: b.log_dirs.clone(),
            ..Default::default()
        }));
    }
    for c in image.controllers.values() {
        out.push(MetadataRecord::RegisterController(c.clone()));
    }
    for t in image.topics.by_id.values() {
        out.push(MetadataRecord::Topic(TopicRecord {
            name: t.name.clone(),
            topic_id: t.id,
            ..Default::default()
        }));
        for (index, p) in &t.partitions {
            let listed = |v: &Vec<i32>| (!v.is_empty()).then(|| v.clone());
            out.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: *index,
                topic_id: t.id,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                removing_replicas: p.removing_replicas.clone(),
                adding_replicas: p.adding_replicas.clone(),
                leader: p.leader,
                leader_recovery_state: p.leader_recovery_state,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                directories: p.directories.clone(),
                eligible_leader_replicas: listed(&p.elr),
                last_known_elr: listed(&p.last_known_elr),
                ..Default::default()
            }));
        }
    }
    for (resource, entries) in &image.configs {
        for (name, value) in entries {
            out.push(MetadataRecord::Config(ConfigRecord {
                resource_type: resource.resource_type.id(),
                resource_name: resource.name.clone(),
                name: name.clone(),
                value: Some(value.clone()),
                ..Default::default()
            }));
        }
    }
    for (entity, values) in &image.client_quotas {
        for (key, value) in values {
            out.push(MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: entity
                    .iter()
                    .map(
                        |(t, n)| kactor_protocol::metadata::client_quota_record::EntityData {
                            entity_type: t.clone(),
                            entity_name: n.clone(),
                            ..Default::default()
                        },
                    )
                    .collect(),
                key: key.clone(),
                value: *value,
                remove: false,
                ..Default::default()
            }));
        }
    }
    // An image that never handed out a producer id has nothing to say (Kafka's
    // ProducerIdsImage writes nothing when empty).
    if image.next_producer_id > 0 {
        out.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: -1,
            broker_epoch: -1,
            next_producer_id: image.next_producer_id,
            ..Default::default()
        }));
    }
    for (user, by_mechanism) in &image.scram_credentials {
        for (mechanism, c) in by_mechanism {
            out.push(MetadataRecord::UserScramCredential(
                UserScramCredentialRecord {
                    name: user.clone(),
                    mechanism: *mechanism,
                    salt: c.salt.clone(),
                    stored_key: c.stored_key.clone(),
                    server_key: c.server_key.clone(),
                    iterations: c.iterations,
                    ..Default::default()
                },
            ));
        }
    }
    for (id, acl) in image.acls.iter() {
        out.push(MetadataRecord::AccessControlEntry(acl.to_record(*id)));
    }
    out.extend(image.unmodeled.iter().cloned());
    out
}

/// The image a snapshot's records rebuild, read up to `provenance` (the snapshot's end offset
/// minus one and its epoch). `kraft_version` comes from the snapshot's control records.
pub fn image_from_records<'a>(
    records: impl IntoIterator<Item = &'a MetadataRecord>,
    kraft_version: Option<i16>,
    provenance: Provenance,
) -> Result<MetadataImage, ReplayError> {
    let mut image = MetadataImage::default();
    let mut changes = MetadataChanges::default();
    for r in records {
        image.replay(r, &mut changes)?;
    }
    if let Some(level) = kraft_version {
        image.replay_kraft_version(level, &mut changes);
    }
    image.provenance = provenance;
    Ok(image)
}

/// [`image_from_records`] over record values as a snapshot file holds them.
pub fn image_from_values(
    values: &[bytes::Bytes],
    kraft_version: Option<i16>,
    provenance: Provenance,
) -> Result<MetadataImage, String> {
    let records = values
        .iter()
        .cloned()
        .map(MetadataRecord::decode)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    image_from_records(&records, kraft_version, provenance).map_err(|e| e.to_string())
}

/// What replacing `old` by `new` (a loaded snapshot) changed, in the terms publishers read:
/// every partition that differs or is new, every topic gone, every config resource and broker
/// that differs. Kafka's loader publishes a snapshot as a delta from the empty image; diffing
/// against the image in hand says the same to subscribers without restarting every replica.
pub fn changes_between(old: &MetadataImage, new: &MetadataImage) -> MetadataChanges {
    let mut changes = MetadataChanges::default();
    for (id, topic) in &new.topics.by_id {
        let before = old.topics.get(id);
        for (index, p) in &topic.partitions {
            if before.and_then(|t| t.partitions.get(index)) != Some(p) {
                changes.changed_partitions.insert((*id, *index));
            }
        }
    }
    for (id, topic) in &old.topics.by_id {
        if !new.topics.by_id.contains_key(id) {
            changes.deleted_topics.insert(*id, topic.clone());
        }
    }
    let resources: BTreeSet<_> = old.configs.keys().chain(new.configs.keys()).collect();
    for r in resources {
        if old.configs.get(r) != new.configs.get(r) {
            changes.changed_configs.insert(r.clone());
        }
    }
    let brokers: BTreeSet<_> = old.brokers.keys().chain(new.brokers.keys()).collect();
    for b in brokers {
        if old.brokers.get(b) != new.brokers.get(b) {
            changes.changed_brokers.insert(*b);
        }
    }
    changes.features_changed = old.features != new.features;
    changes.client_quotas_changed = old.client_quotas != new.client_quotas;
    changes
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use kactor_protocol::metadata::*;
    use kactor_protocol::Uuid;

    use super::super::image::ConfigResource;
    use super::*;

    fn sample_records() -> Vec<MetadataRecord> {
        let t1 = Uuid((11u128).to_be_bytes());
        let t2 = Uuid((22u128).to_be_bytes());
        vec![
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: "group.version".into(),
                feature_level: 1,
                ..Default::default()
            }),
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: METADATA_VERSION_FEATURE.into(),
                feature_level: 27,
                ..Default::default()
            }),
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: 1,
                broker_epoch: 5,
                incarnation_id: Uuid((9u128).to_be_bytes()),
                rack: Some("r1".into()),
                fenced: true,
                log_dirs: vec![Uuid((3u128).to_be_bytes())],
                ..Default::default()
            }),
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                id: 1,
                epoch: 5,
                ..Default::default()
            }),
            MetadataRecord::Topic(TopicRecord {
                name: "a".into(),
                topic_id: t1,
                ..Default::default()
            }),
            MetadataRecord::Partition(PartitionRecord {
                partition_id: 0,
                topic_id: t1,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                leader: 1,
                directories: vec![Uuid((3u128).to_be_bytes()); 3],
                ..Default::default()
            }),
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: t1,
                isr: Some(vec![1, 2]),
                leader: 2,
                ..Default::default()
            }),
            MetadataRecord::Topic(TopicRecord {
                name: "gone".into(),
                topic_id: t2,
                ..Default::default()
            }),
            MetadataRecord::Config(ConfigRecord {
                resource_type: 2,
                resource_name: "a".into(),
                name: "cleanup.policy".into(),
                value: Some("compact".into()),
                ..Default::default()
            }),
            MetadataRecord::Config(ConfigRecord {
                resource_type: 4,
                resource_name: String::new(),
                name: "log.retention.ms".into(),
                value: Some("1000".into()),
                ..Default::default()
            }),
            MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: t2,
                ..Default::default()
            }),
            MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: 1,
                broker_epoch: 5,
                next_producer_id: 2000,
                ..Default::default()
            }),
            MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                name: "alice".into(),
                mechanism: 1,
                salt: Bytes::from_static(b"salt"),
                stored_key: Bytes::from_static(b"sk"),
                server_key: Bytes::from_static(b"srv"),
                iterations: 4096,
                ..Default::default()
            }),
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![
                    client_quota_record::EntityData {
                        entity_type: "user".into(),
                        entity_name: Some("alice".into()),
                        ..Default::default()
                    },
                    client_quota_record::EntityData {
                        entity_type: "client-id".into(),
                        entity_name: None,
                        ..Default::default()
                    },
                ],
                key: "producer_byte_rate".into(),
                value: 1024.0,
                ..Default::default()
            }),
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![client_quota_record::EntityData {
                    entity_type: "ip".into(),
                    entity_name: Some("127.0.0.1".into()),
                    ..Default::default()
                }],
                key: "connection_creation_rate".into(),
                value: 5.0,
                ..Default::default()
            }),
            // Removing the only key of an entity removes the entity.
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![client_quota_record::EntityData {
                    entity_type: "ip".into(),
                    entity_name: Some("127.0.0.1".into()),
                    ..Default::default()
                }],
                key: "connection_creation_rate".into(),
                remove: true,
                ..Default::default()
            }),
            // A record type kactor does not model (kept as it is).
            MetadataRecord::Other {
                api_key: 6,
                version: 0,
                body: Bytes::from_static(b"\x01\x02"),
            },
            // Two ACLs, one removed again.
            MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                id: Uuid((31u128).to_be_bytes()),
                resource_type: 2,
                resource_name: "t1".into(),
                pattern_type: 3,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
                ..Default::default()
            }),
            MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                id: Uuid((32u128).to_be_bytes()),
                resource_type: 2,
                resource_name: "t".into(),
                pattern_type: 4,
                principal: "User:bob".into(),
                host: "*".into(),
                operation: 4,
                permission_type: 2,
                ..Default::default()
            }),
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
                id: Uuid((32u128).to_be_bytes()),
                ..Default::default()
            }),
            MetadataRecord::NoOp(NoOpRecord::default()),
        ]
    }

    fn replayed(records: &[MetadataRecord]) -> MetadataImage {
        let (mut image, _) = MetadataImage::default()
            .apply_batch(records, records.len() as i64 - 1, 3)
            .unwrap();
        image.replay_kraft_version(1, &mut MetadataChanges::default());
        image
    }

    #[test]
    fn image_records_rebuild_the_same_image() {
        let image = replayed(&sample_records());
        let records = image_records(&image);
        // metadata.version first, kraft.version never as a feature record.
        assert!(
            matches!(&records[0], MetadataRecord::FeatureLevel(f) if f.name == METADATA_VERSION_FEATURE)
        );
        assert!(!records.iter().any(
            |r| matches!(r, MetadataRecord::FeatureLevel(f) if f.name == KRAFT_VERSION_FEATURE)
        ));
        let rebuilt = image_from_records(&records, Some(1), image.provenance).unwrap();
        assert_eq!(rebuilt, image);
        // The quota set survives; the removed one is gone with its entity.
        assert_eq!(image.client_quotas.len(), 1);
        let alice: super::super::image::QuotaEntity = [
            ("user".to_string(), Some("alice".to_string())),
            ("client-id".to_string(), None),
        ]
        .into();
        assert_eq!(image.client_quotas[&alice]["producer_byte_rate"], 1024.0);
        // The ACL left survives the snapshot under its id; the removed one is gone.
        assert_eq!(image.acls.len(), 1);
        assert_eq!(
            rebuilt
                .acls
                .get(&Uuid((31u128).to_be_bytes()))
                .map(|a| a.resource_name.as_str()),
            Some("t1")
        );
        // Every record survives its own wire encoding.
        for r in &records {
            assert_eq!(&MetadataRecord::decode(r.encode().unwrap()).unwrap(), r);
        }
    }

    #[test]
    fn changes_between_names_what_differs() {
        let old = replayed(&sample_records());
        let mut new = old.clone();
        let t1 = Uuid((11u128).to_be_bytes());
        let topic = Arc::make_mut(new.topics.by_id.get_mut(&t1).unwrap());
        topic.partitions.get_mut(&0).unwrap().leader_epoch += 1;
        new.configs.remove(&ConfigResource::broker(""));
        let changes = changes_between(&old, &new);
        assert_eq!(changes.changed_partitions, [(t1, 0)].into());
        assert_eq!(changes.changed_configs, [ConfigResource::broker("")].into());
        assert!(changes.deleted_topics.is_empty());
        assert!(!changes.features_changed);

        let empty = MetadataImage::default();
        let gone = changes_between(&old, &empty);
        assert_eq!(
            gone.deleted_topics.keys().copied().collect::<Vec<_>>(),
            vec![t1]
        );
        assert!(gone.features_changed);
        assert_eq!(gone.changed_brokers, [1].into());
    }
}
