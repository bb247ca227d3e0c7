//! `__consumer_offsets` record framing (Kafka's `GroupCoordinatorRecordSerde`): the key is an
//! int16 record type followed by the key struct at version 0; the value is an int16 version
//! followed by the value struct at that version; a null value is a tombstone. Kafka 4.4 writes
//! OffsetCommitValue v4 (v1 when an explicit expiry is set), GroupMetadataValue v3 and every
//! KIP-848 value at v0; any valid version is read.

use bytes::{Buf, Bytes};
use kactor_protocol::coordinator::{
    consumer_group_current_member_assignment_key as cma_key,
    consumer_group_current_member_assignment_value as cma_value,
    consumer_group_member_metadata_key as mm_key, consumer_group_member_metadata_value as mm_value,
    consumer_group_metadata_key as gm_key, consumer_group_metadata_value as gm_value,
    consumer_group_partition_metadata_key as pm_key,
    consumer_group_regular_expression_key as re_key,
    consumer_group_regular_expression_value as re_value,
    consumer_group_target_assignment_member_key as tam_key,
    consumer_group_target_assignment_member_value as tam_value,
    consumer_group_target_assignment_metadata_key as tmd_key,
    consumer_group_target_assignment_metadata_value as tmd_value, group_metadata_key,
    group_metadata_value, legacy_offset_commit_key, offset_commit_key, offset_commit_value,
    share_group_metadata_key as sgm_key, share_group_metadata_value as sgm_value,
    share_group_state_partition_metadata_key as sps_key,
    share_group_state_partition_metadata_value as sps_value,
};
use kactor_protocol::{Decode, DecodeError, Encode, EncodeError, Message, Writer};
use thiserror::Error;

use super::core::records::{
    ClassicMemberMetadata, ConsumerCurrentAssignmentValue, ConsumerMemberMetadataValue,
    CoordinatorRecord, GroupMetadataMember, GroupMetadataValue, OffsetCommitValue,
    RegularExpressionValue, ShareStatePartitions, TopicPartitions,
};

/// Kafka 4.4's writing versions.
const OFFSET_COMMIT_VALUE_VERSION: i16 = 4;
const OFFSET_COMMIT_VALUE_EXPIRING_VERSION: i16 = 1;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;

#[derive(Debug, Error, PartialEq)]
pub enum RecordCodecError {
    #[error("record key shorter than its type")]
    MissingType,
    #[error("record type {record_type}: value version {version} is not supported")]
    UnknownVersion { record_type: i16, version: i16 },
    #[error("record type {record_type}: {source}")]
    Decode {
        record_type: i16,
        source: DecodeError,
    },
    #[error("record type {record_type}: a non-tombstone record has no value")]
    MissingValue { record_type: i16 },
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

fn framed<M: Encode>(prefix: i16, message: &M, version: i16) -> Result<Bytes, EncodeError> {
    let mut w = Writer::new();
    w.put_i16(prefix);
    message.encode(&mut w, version)?;
    Ok(w.into_bytes())
}

/// The tagged `ClassicMemberMetadata`: null (no tag written, as Kafka) for a member of the
/// consumer protocol.
fn classic_out(classic: Option<&ClassicMemberMetadata>) -> Option<mm_value::ClassicMemberMetadata> {
    classic.map(|c| mm_value::ClassicMemberMetadata {
        session_timeout_ms: c.session_timeout_ms,
        supported_protocols: c
            .supported_protocols
            .iter()
            .map(|(name, metadata)| mm_value::ClassicProtocol {
                name: name.clone(),
                metadata: metadata.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

fn classic_in(classic: Option<mm_value::ClassicMemberMetadata>) -> Option<ClassicMemberMetadata> {
    classic.map(|c| ClassicMemberMetadata {
        session_timeout_ms: c.session_timeout_ms,
        supported_protocols: c
            .supported_protocols
            .into_iter()
            .map(|p| (p.name, p.metadata))
            .collect(),
    })
}

fn tp_out(
    tp: &TopicPartitions,
    epochs: &std::collections::BTreeMap<(kactor_protocol::Uuid, i32), i32>,
    member_epoch: i32,
) -> Vec<cma_value::TopicPartitions> {
    tp.iter()
        .map(|(id, ps)| cma_value::TopicPartitions {
            topic_id: *id,
            partitions: ps.clone(),
            assignment_epochs: Some(
                ps.iter()
                    .map(|p| *epochs.get(&(*id, *p)).unwrap_or(&member_epoch))
                    .collect(),
            ),
            ..Default::default()
        })
        .collect()
}

fn share_state_out(v: &ShareStatePartitions) -> sps_value::ShareGroupStatePartitionMetadataValue {
    let topics = |m: &std::collections::BTreeMap<kactor_protocol::Uuid, (String, _)>| {
        m.iter()
            .map(
                |(id, (name, ps)): (_, &(String, std::collections::BTreeSet<i32>))| {
                    sps_value::TopicPartitionsInfo {
                        topic_id: *id,
                        topic_name: name.clone(),
                        partitions: ps.iter().copied().collect(),
                        ..Default::default()
                    }
                },
            )
            .collect()
    };
    sps_value::ShareGroupStatePartitionMetadataValue {
        initializing_topics: topics(&v.initializing),
        initialized_topics: topics(&v.initialized),
        deleting_topics: v
            .deleting
            .iter()
            .map(|(id, name)| sps_value::TopicInfo {
                topic_id: *id,
                topic_name: name.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn share_state_in(v: sps_value::ShareGroupStatePartitionMetadataValue) -> ShareStatePartitions {
    let topics = |ts: Vec<sps_value::TopicPartitionsInfo>| {
        ts.into_iter()
            .map(|t| {
                (
                    t.topic_id,
                    (t.topic_name, t.partitions.into_iter().collect()),
                )
            })
            .collect()
    };
    ShareStatePartitions {
        initializing: topics(v.initializing_topics),
        initialized: topics(v.initialized_topics),
        deleting: v
            .deleting_topics
            .into_iter()
            .map(|t| (t.topic_id, t.topic_name))
            .collect(),
    }
}

/// Encodes a record as Kafka's (key, value) bytes; `None` value for tombstones.
pub fn encode_record(record: &CoordinatorRecord) -> Result<(Bytes, Option<Bytes>), EncodeError> {
    let t = record.record_type();
    Ok(match record {
        CoordinatorRecord::OffsetCommit {
            group_id,
            topic,
            partition,
            value,
        } => {
            let key = offset_commit_key::OffsetCommitKey {
                group: group_id.clone(),
                topic: topic.clone(),
                partition: *partition,
            };
            let value = match value {
                None => None,
                Some(v) => {
                    let version = if v.expire_timestamp_ms.is_some() {
                        OFFSET_COMMIT_VALUE_EXPIRING_VERSION
                    } else {
                        OFFSET_COMMIT_VALUE_VERSION
                    };
                    let msg = offset_commit_value::OffsetCommitValue {
                        offset: v.offset,
                        leader_epoch: if version >= 3 { v.leader_epoch } else { -1 },
                        metadata: v.metadata.clone(),
                        commit_timestamp: v.commit_timestamp_ms,
                        expire_timestamp: v.expire_timestamp_ms.unwrap_or(-1),
                        topic_id: if version >= 4 {
                            v.topic_id
                        } else {
                            Default::default()
                        },
                        ..Default::default()
                    };
                    Some(framed(version, &msg, version)?)
                }
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::GroupMetadata { group_id, value } => {
            let key = group_metadata_key::GroupMetadataKey {
                group: group_id.clone(),
            };
            let value = match value {
                None => None,
                Some(v) => {
                    let msg = group_metadata_value::GroupMetadataValue {
                        protocol_type: v.protocol_type.clone(),
                        generation: v.generation,
                        protocol: v.protocol.clone(),
                        leader: v.leader.clone(),
                        current_state_timestamp: v.current_state_timestamp_ms,
                        members: v
                            .members
                            .iter()
                            .map(|m| group_metadata_value::MemberMetadata {
                                member_id: m.member_id.clone(),
                                group_instance_id: m.group_instance_id.clone(),
                                client_id: m.client_id.clone(),
                                client_host: m.client_host.clone(),
                                rebalance_timeout: m.rebalance_timeout_ms,
                                session_timeout: m.session_timeout_ms,
                                subscription: m.subscription.clone(),
                                assignment: m.assignment.clone(),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    };
                    let version = GROUP_METADATA_VALUE_VERSION;
                    Some(framed(version, &msg, version)?)
                }
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ConsumerGroupMetadata { group_id, value } => {
            let key = gm_key::ConsumerGroupMetadataKey {
                group_id: group_id.clone(),
            };
            let value = match value {
                None => None,
                Some((epoch, hash)) => Some(framed(
                    0,
                    &gm_value::ConsumerGroupMetadataValue {
                        epoch: *epoch,
                        metadata_hash: *hash,
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ConsumerGroupPartitionMetadata { group_id } => {
            let key = pm_key::ConsumerGroupPartitionMetadataKey {
                group_id: group_id.clone(),
            };
            (framed(t, &key, 0)?, None)
        }
        CoordinatorRecord::ConsumerGroupMemberMetadata {
            group_id,
            member_id,
            value,
        } => {
            let key = mm_key::ConsumerGroupMemberMetadataKey {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
            };
            let value = match value {
                None => None,
                Some(v) => Some(framed(
                    0,
                    &mm_value::ConsumerGroupMemberMetadataValue {
                        instance_id: v.instance_id.clone(),
                        rack_id: v.rack_id.clone(),
                        client_id: v.client_id.clone(),
                        client_host: v.client_host.clone(),
                        subscribed_topic_names: v.subscribed_topic_names.clone(),
                        subscribed_topic_regex: v.subscribed_topic_regex.clone(),
                        rebalance_timeout_ms: v.rebalance_timeout_ms,
                        server_assignor: v.server_assignor.clone(),
                        classic_member_metadata: classic_out(v.classic_member_metadata.as_ref()),
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata { group_id, value } => {
            let key = tmd_key::ConsumerGroupTargetAssignmentMetadataKey {
                group_id: group_id.clone(),
            };
            let value = match value {
                None => None,
                Some((epoch, ts)) => Some(framed(
                    0,
                    &tmd_value::ConsumerGroupTargetAssignmentMetadataValue {
                        assignment_epoch: *epoch,
                        assignment_timestamp: *ts,
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
            group_id,
            member_id,
            value,
        } => {
            let key = tam_key::ConsumerGroupTargetAssignmentMemberKey {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
            };
            let value = match value {
                None => None,
                Some(tp) => Some(framed(
                    0,
                    &tam_value::ConsumerGroupTargetAssignmentMemberValue {
                        topic_partitions: tp
                            .iter()
                            .map(|(id, ps)| tam_value::TopicPartition {
                                topic_id: *id,
                                partitions: ps.clone(),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
            group_id,
            member_id,
            value,
        } => {
            let key = cma_key::ConsumerGroupCurrentMemberAssignmentKey {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
            };
            let value = match value {
                None => None,
                Some(v) => Some(framed(
                    0,
                    &cma_value::ConsumerGroupCurrentMemberAssignmentValue {
                        member_epoch: v.member_epoch,
                        previous_member_epoch: v.previous_member_epoch,
                        state: v.state,
                        assigned_partitions: tp_out(
                            &v.assigned_partitions,
                            &v.assignment_epochs,
                            v.member_epoch,
                        ),
                        partitions_pending_revocation: tp_out(
                            &v.partitions_pending_revocation,
                            &v.assignment_epochs,
                            v.member_epoch,
                        ),
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ShareGroupMetadata { group_id, value } => {
            let key = sgm_key::ShareGroupMetadataKey {
                group_id: group_id.clone(),
            };
            let value = match value {
                None => None,
                Some((epoch, hash)) => Some(framed(
                    0,
                    &sgm_value::ShareGroupMetadataValue {
                        epoch: *epoch,
                        metadata_hash: *hash,
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ShareGroupStatePartitionMetadata { group_id, value } => {
            let key = sps_key::ShareGroupStatePartitionMetadataKey {
                group_id: group_id.clone(),
            };
            let value = match value {
                None => None,
                Some(v) => Some(framed(0, &share_state_out(v), 0)?),
            };
            (framed(t, &key, 0)?, value)
        }
        CoordinatorRecord::ConsumerGroupRegularExpression {
            group_id,
            regex,
            value,
        } => {
            let key = re_key::ConsumerGroupRegularExpressionKey {
                group_id: group_id.clone(),
                regular_expression: regex.clone(),
            };
            let value = match value {
                None => None,
                Some(v) => Some(framed(
                    0,
                    &re_value::ConsumerGroupRegularExpressionValue {
                        topics: v.topics.clone(),
                        version: v.version,
                        timestamp: v.timestamp_ms,
                        ..Default::default()
                    },
                    0,
                )?),
            };
            (framed(t, &key, 0)?, value)
        }
    })
}

fn decode_key<M: Decode>(record_type: i16, buf: &mut Bytes) -> Result<M, RecordCodecError> {
    M::decode(buf, 0).map_err(|source| RecordCodecError::Decode {
        record_type,
        source,
    })
}

/// Decodes a value: `None` for a tombstone.
fn decode_value<M: Message>(
    record_type: i16,
    value: Option<&Bytes>,
) -> Result<Option<M>, RecordCodecError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let mut buf = value.clone();
    if buf.remaining() < 2 {
        return Err(RecordCodecError::Decode {
            record_type,
            source: DecodeError::Truncated {
                needed: 2,
                remaining: buf.remaining(),
            },
        });
    }
    let version = buf.get_i16();
    let (lo, hi) = M::VALID_VERSIONS;
    if version < lo || version > hi {
        return Err(RecordCodecError::UnknownVersion {
            record_type,
            version,
        });
    }
    M::decode(&mut buf, version)
        .map(Some)
        .map_err(|source| RecordCodecError::Decode {
            record_type,
            source,
        })
}

/// Partitions and, per partition, the epoch it was assigned at (records written before Kafka
/// tracked it carry none: the member epoch stands in).
fn tp_in(
    tp: Vec<cma_value::TopicPartitions>,
    member_epoch: i32,
    epochs: &mut std::collections::BTreeMap<(kactor_protocol::Uuid, i32), i32>,
) -> TopicPartitions {
    tp.into_iter()
        .map(|t| {
            for (i, p) in t.partitions.iter().enumerate() {
                let at = t
                    .assignment_epochs
                    .as_ref()
                    .and_then(|e| e.get(i).copied())
                    .unwrap_or(member_epoch);
                epochs.insert((t.topic_id, *p), at);
            }
            (t.topic_id, t.partitions)
        })
        .collect()
}

/// Decodes Kafka's (key, value) bytes. `Ok(None)` for record types this broker does not use
/// (share group membership and assignments, streams groups), which loading skips as Kafka's
/// loader skips unknown types.
pub fn decode_record(
    key: &Bytes,
    value: Option<&Bytes>,
) -> Result<Option<CoordinatorRecord>, RecordCodecError> {
    let mut buf = key.clone();
    if buf.remaining() < 2 {
        return Err(RecordCodecError::MissingType);
    }
    let t = buf.get_i16();
    Ok(Some(match t {
        0 | 1 => {
            let (group, topic, partition) = if t == 0 {
                let k: legacy_offset_commit_key::LegacyOffsetCommitKey = decode_key(t, &mut buf)?;
                (k.group, k.topic, k.partition)
            } else {
                let k: offset_commit_key::OffsetCommitKey = decode_key(t, &mut buf)?;
                (k.group, k.topic, k.partition)
            };
            let v: Option<offset_commit_value::OffsetCommitValue> = decode_value(t, value)?;
            CoordinatorRecord::OffsetCommit {
                group_id: group,
                topic,
                partition,
                value: v.map(|v| OffsetCommitValue {
                    offset: v.offset,
                    leader_epoch: v.leader_epoch,
                    metadata: v.metadata,
                    commit_timestamp_ms: v.commit_timestamp,
                    expire_timestamp_ms: (v.expire_timestamp != -1).then_some(v.expire_timestamp),
                    topic_id: v.topic_id,
                }),
            }
        }
        2 => {
            let k: group_metadata_key::GroupMetadataKey = decode_key(t, &mut buf)?;
            let v: Option<group_metadata_value::GroupMetadataValue> = decode_value(t, value)?;
            CoordinatorRecord::GroupMetadata {
                group_id: k.group,
                value: v.map(|v| GroupMetadataValue {
                    protocol_type: v.protocol_type,
                    generation: v.generation,
                    protocol: v.protocol,
                    leader: v.leader,
                    current_state_timestamp_ms: v.current_state_timestamp,
                    members: v
                        .members
                        .into_iter()
                        .map(|m| GroupMetadataMember {
                            member_id: m.member_id,
                            group_instance_id: m.group_instance_id,
                            client_id: m.client_id,
                            client_host: m.client_host,
                            // v0 had only the session timeout, which Kafka then used for both.
                            rebalance_timeout_ms: if m.rebalance_timeout == -1 {
                                m.session_timeout
                            } else {
                                m.rebalance_timeout
                            },
                            session_timeout_ms: m.session_timeout,
                            subscription: m.subscription,
                            assignment: m.assignment,
                        })
                        .collect(),
                }),
            }
        }
        3 => {
            let k: gm_key::ConsumerGroupMetadataKey = decode_key(t, &mut buf)?;
            let v: Option<gm_value::ConsumerGroupMetadataValue> = decode_value(t, value)?;
            CoordinatorRecord::ConsumerGroupMetadata {
                group_id: k.group_id,
                value: v.map(|v| (v.epoch, v.metadata_hash)),
            }
        }
        4 => {
            let k: pm_key::ConsumerGroupPartitionMetadataKey = decode_key(t, &mut buf)?;
            // Pre-4.1 subscription metadata: superseded by the metadata hash, so only its
            // key matters.
            CoordinatorRecord::ConsumerGroupPartitionMetadata {
                group_id: k.group_id,
            }
        }
        5 => {
            let k: mm_key::ConsumerGroupMemberMetadataKey = decode_key(t, &mut buf)?;
            let v: Option<mm_value::ConsumerGroupMemberMetadataValue> = decode_value(t, value)?;
            CoordinatorRecord::ConsumerGroupMemberMetadata {
                group_id: k.group_id,
                member_id: k.member_id,
                value: v.map(|v| ConsumerMemberMetadataValue {
                    instance_id: v.instance_id,
                    rack_id: v.rack_id,
                    client_id: v.client_id,
                    client_host: v.client_host,
                    subscribed_topic_names: v.subscribed_topic_names,
                    subscribed_topic_regex: v.subscribed_topic_regex,
                    rebalance_timeout_ms: v.rebalance_timeout_ms,
                    server_assignor: v.server_assignor,
                    classic_member_metadata: classic_in(v.classic_member_metadata),
                }),
            }
        }
        6 => {
            let k: tmd_key::ConsumerGroupTargetAssignmentMetadataKey = decode_key(t, &mut buf)?;
            let v: Option<tmd_value::ConsumerGroupTargetAssignmentMetadataValue> =
                decode_value(t, value)?;
            CoordinatorRecord::ConsumerGroupTargetAssignmentMetadata {
                group_id: k.group_id,
                value: v.map(|v| (v.assignment_epoch, v.assignment_timestamp)),
            }
        }
        7 => {
            let k: tam_key::ConsumerGroupTargetAssignmentMemberKey = decode_key(t, &mut buf)?;
            let v: Option<tam_value::ConsumerGroupTargetAssignmentMemberValue> =
                decode_value(t, value)?;
            CoordinatorRecord::ConsumerGroupTargetAssignmentMember {
                group_id: k.group_id,
                member_id: k.member_id,
                value: v.map(|v| {
                    v.topic_partitions
                        .into_iter()
                        .map(|t| (t.topic_id, t.partitions))
                        .collect()
                }),
            }
        }
        8 => {
            let k: cma_key::ConsumerGroupCurrentMemberAssignmentKey = decode_key(t, &mut buf)?;
            let v: Option<cma_value::ConsumerGroupCurrentMemberAssignmentValue> =
                decode_value(t, value)?;
            CoordinatorRecord::ConsumerGroupCurrentMemberAssignment {
                group_id: k.group_id,
                member_id: k.member_id,
                value: v.map(|v| {
                    let mut assignment_epochs = std::collections::BTreeMap::new();
                    ConsumerCurrentAssignmentValue {
                        member_epoch: v.member_epoch,
                        previous_member_epoch: v.previous_member_epoch,
                        state: v.state,
                        assigned_partitions: tp_in(
                            v.assigned_partitions,
                            v.member_epoch,
                            &mut assignment_epochs,
                        ),
                        partitions_pending_revocation: tp_in(
                            v.partitions_pending_revocation,
                            v.member_epoch,
                            &mut assignment_epochs,
                        ),
                        assignment_epochs,
                    }
                }),
            }
        }
        11 => {
            let k: sgm_key::ShareGroupMetadataKey = decode_key(t, &mut buf)?;
            let v: Option<sgm_value::ShareGroupMetadataValue> = decode_value(t, value)?;
            CoordinatorRecord::ShareGroupMetadata {
                group_id: k.group_id,
                value: v.map(|v| (v.epoch, v.metadata_hash)),
            }
        }
        15 => {
            let k: sps_key::ShareGroupStatePartitionMetadataKey = decode_key(t, &mut buf)?;
            let v: Option<sps_value::ShareGroupStatePartitionMetadataValue> =
                decode_value(t, value)?;
            CoordinatorRecord::ShareGroupStatePartitionMetadata {
                group_id: k.group_id,
                value: v.map(share_state_in),
            }
        }
        16 => {
            let k: re_key::ConsumerGroupRegularExpressionKey = decode_key(t, &mut buf)?;
            let v: Option<re_value::ConsumerGroupRegularExpressionValue> = decode_value(t, value)?;
            CoordinatorRecord::ConsumerGroupRegularExpression {
                group_id: k.group_id,
                regex: k.regular_expression,
                value: v.map(|v| RegularExpressionValue {
                    topics: v.topics,
                    version: v.version,
                    timestamp_ms: v.timestamp,
                }),
            }
        }
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::core::tests_support::record_log_of_a_busy_shard;

    #[test]
    fn offset_commit_bytes_match_kafka_framing() {
        let record = CoordinatorRecord::OffsetCommit {
            group_id: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: Some(OffsetCommitValue {
                offset: 42,
                leader_epoch: 7,
                metadata: "m".into(),
                commit_timestamp_ms: 1000,
                expire_timestamp_ms: None,
                topic_id: Default::default(),
            }),
        };
        let (key, value) = encode_record(&record).unwrap();
        // type 1, "g", "t", partition 3
        assert_eq!(&key[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        let value = value.unwrap();
        // v4 (flexible): offset, leader epoch, compact "m", commit ts, no tagged fields
        let mut expected = vec![0, 4];
        expected.extend_from_slice(&42i64.to_be_bytes());
        expected.extend_from_slice(&7i32.to_be_bytes());
        expected.extend_from_slice(&[2, b'm']);
        expected.extend_from_slice(&1000i64.to_be_bytes());
        expected.push(0);
        assert_eq!(&value[..], &expected[..]);
        assert_eq!(decode_record(&key, Some(&value)).unwrap(), Some(record));
    }

    #[test]
    fn expiring_commit_uses_value_v1_and_tombstones_have_no_value() {
        let record = CoordinatorRecord::OffsetCommit {
            group_id: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: Some(OffsetCommitValue {
                offset: 1,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 5,
                expire_timestamp_ms: Some(10),
                topic_id: Default::default(),
            }),
        };
        let (key, value) = encode_record(&record).unwrap();
        assert_eq!(&value.as_ref().unwrap()[..2], &[0, 1]);
        assert_eq!(decode_record(&key, value.as_ref()).unwrap(), Some(record));
        let tombstone = CoordinatorRecord::GroupMetadata {
            group_id: "g".into(),
            value: None,
        };
        let (key, value) = encode_record(&tombstone).unwrap();
        assert_eq!(&key[..], &[0, 2, 0, 1, b'g']);
        assert!(value.is_none());
        assert_eq!(decode_record(&key, None).unwrap(), Some(tombstone));
    }

    #[test]
    fn unknown_types_are_skipped_and_bad_versions_refused() {
        let key = Bytes::from_static(&[0, 9, 0, 1, b'g']);
        assert_eq!(decode_record(&key, None).unwrap(), None);
        let key = Bytes::from_static(&[0, 3, 0, 1, b'g']);
        let value = Bytes::from_static(&[0, 9, 0, 0, 0, 1]);
        assert!(matches!(
            decode_record(&key, Some(&value)),
            Err(RecordCodecError::UnknownVersion {
                record_type: 3,
                version: 9
            })
        ));
        assert_eq!(
            decode_record(&Bytes::from_static(&[0]), None),
            Err(RecordCodecError::MissingType)
        );
    }

    #[test]
    fn every_record_a_shard_writes_round_trips_through_bytes() {
        let log = record_log_of_a_busy_shard();
        assert!(log.len() > 20);
        let mut types = std::collections::BTreeSet::new();
        for record in &log {
            types.insert(record.record_type());
            let (key, value) = encode_record(record).unwrap();
            assert_eq!(
                decode_record(&key, value.as_ref()).unwrap().as_ref(),
                Some(record)
            );
        }
        assert_eq!(
            types.into_iter().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5, 6, 7, 8, 16]
        );
    }

    #[test]
    fn classic_member_metadata_round_trips_and_is_absent_for_kip848_members() {
        let member = |classic| CoordinatorRecord::ConsumerGroupMemberMetadata {
            group_id: "g".into(),
            member_id: "m".into(),
            value: Some(ConsumerMemberMetadataValue {
                instance_id: None,
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["t".into()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 30_000,
                server_assignor: None,
                classic_member_metadata: classic,
            }),
        };
        let classic = member(Some(ClassicMemberMetadata {
            session_timeout_ms: 10_000,
            supported_protocols: vec![
                ("range".into(), Bytes::from_static(b"sub")),
                ("roundrobin".into(), Bytes::from_static(b"sub")),
            ],
        }));
        let plain = member(None);
        for record in [&classic, &plain] {
            let (key, value) = encode_record(record).unwrap();
            assert_eq!(
                decode_record(&key, value.as_ref()).unwrap().as_ref(),
                Some(record)
            );
        }
        // Kafka writes no tagged field for a KIP-848 member: the value ends with an empty
        // tag buffer (0), where the classic one carries tag 0.
        let (_, plain_value) = encode_record(&plain).unwrap();
        let (_, classic_value) = encode_record(&classic).unwrap();
        let plain_value = plain_value.unwrap();
        assert_eq!(plain_value.last(), Some(&0));
        assert_eq!(
            &classic_value.unwrap()[..plain_value.len() - 1],
            &plain_value[..plain_value.len() - 1]
        );
    }
}
