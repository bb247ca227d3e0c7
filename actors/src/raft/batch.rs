//! How KRaft lays records out in `__cluster_metadata` batches (Kafka's `BatchBuilder` /
//! `RecordsIterator` in the raft module): data batches hold framed metadata records as values
//! with null keys; control batches hold one control record whose key is
//! `version int16 (0) + type int16` and whose value is the control message, which starts with
//! its own int16 `Version` field (LeaderChangeMessage, SnapshotHeader/Footer, KRaftVersion,
//! Voters). Verified byte for byte against a log written by Apache Kafka 4.4.0.

use bytes::Bytes;
use kactor_protocol::metadata::leader_change_message::Voter;
use kactor_protocol::metadata::voters_record;
use kactor_protocol::metadata::{KRaftVersionRecord, LeaderChangeMessage, VotersRecord};
use kactor_protocol::records::{batches, BatchBuilder, ControlRecordType, RecordError};
use kactor_protocol::{Decode, Encode, Writer};

use super::core::types::{Endpoint, KRaftVersionRange, ReplicaKey, VoterNode, VoterSet};

use super::core::rpc::ControlRecord;

/// The LeaderChangeMessage version Kafka 4.4 writes.
const LEADER_CHANGE_VERSION: i16 = 0;
/// The VotersRecord and KRaftVersionRecord versions Kafka 4.4 writes.
const VOTERS_RECORD_VERSION: i16 = 0;
const KRAFT_VERSION_RECORD_VERSION: i16 = 0;

fn encode<M: Encode>(msg: &M, version: i16) -> Result<Bytes, RecordError> {
    let mut w = Writer::new();
    msg.encode(&mut w, version)
        .map_err(|e| RecordError::InvalidRecord(e.to_string()))?;
    Ok(w.into_bytes())
}

/// A data batch of record values.
pub fn encode_data_batch(
    base_offset: i64,
    epoch: i32,
    timestamp_ms: i64,
    values: &[Bytes],
) -> Result<Bytes, RecordError> {
    let mut b = BatchBuilder::new(base_offset).partition_leader_epoch(epoch);
    for v in values {
        b.append(timestamp_ms, None, Some(v), &[])?;
    }
    b.build()
}

/// A control batch holding `records`, in order.
pub fn encode_control_batch(
    base_offset: i64,
    epoch: i32,
    timestamp_ms: i64,
    records: &[ControlRecord],
) -> Result<Bytes, RecordError> {
    let mut b = BatchBuilder::new(base_offset)
        .partition_leader_epoch(epoch)
        .control(true);
    for record in records {
        let (kind, value) = encode_control_record(record)?;
        b.append(timestamp_ms, Some(&kind.encode_key()), Some(&value), &[])?;
    }
    b.build()
}

/// A control record's type and value.
pub(super) fn encode_control_record(
    record: &ControlRecord,
) -> Result<(ControlRecordType, Bytes), RecordError> {
    let (kind, value) = match record {
        ControlRecord::LeaderChange {
            leader_id,
            voters,
            granting_voters,
        } => {
            let voter = |id: &i32| Voter {
                voter_id: *id,
                ..Default::default()
            };
            let msg = LeaderChangeMessage {
                version: LEADER_CHANGE_VERSION,
                leader_id: *leader_id,
                voters: voters.iter().map(voter).collect(),
                granting_voters: granting_voters.iter().map(voter).collect(),
                ..Default::default()
            };
            (
                ControlRecordType::LeaderChange,
                encode(&msg, LEADER_CHANGE_VERSION)?,
            )
        }
        ControlRecord::Voters(set) => {
            let msg = VotersRecord {
                version: VOTERS_RECORD_VERSION,
                voters: set
                    .nodes()
                    .map(|n| voters_record::Voter {
                        voter_id: n.key.id,
                        voter_directory_id: n.key.wire_directory_id(),
                        endpoints: n
                            .listeners
                            .iter()
                            .map(|e| voters_record::Endpoint {
                                name: e.listener.clone(),
                                host: e.host.clone(),
                                port: e.port,
                                ..Default::default()
                            })
                            .collect(),
                        k_raft_version_feature: voters_record::KRaftVersionFeature {
                            min_supported_version: n.supported_kraft_version.min,
                            max_supported_version: n.supported_kraft_version.max,
                            ..Default::default()
                        },
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            (
                ControlRecordType::KRaftVoters,
                encode(&msg, VOTERS_RECORD_VERSION)?,
            )
        }
        ControlRecord::KRaftVersion(v) => {
            let msg = KRaftVersionRecord {
                version: KRAFT_VERSION_RECORD_VERSION,
                k_raft_version: *v,
                ..Default::default()
            };
            (
                ControlRecordType::KRaftVersion,
                encode(&msg, KRAFT_VERSION_RECORD_VERSION)?,
            )
        }
    };
    Ok((kind, value))
}

/// One batch read back from the metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub epoch: i32,
    pub append_timestamp_ms: i64,
    /// The whole batch on disk, header included.
    pub size_in_bytes: usize,
    /// Control batches carry Raft's own records; listeners skip them.
    pub is_control: bool,
    /// Record values (for control batches: the control messages).
    pub records: Vec<Bytes>,
    /// Control record types, parallel to `records` (empty for data batches).
    pub control_types: Vec<ControlRecordType>,
}

impl MetadataBatch {
    /// The kraft.version a control batch finalizes (its KRaftVersionRecord), if it holds one.
    pub fn kraft_version(&self) -> Result<Option<i16>, RecordError> {
        if !self.is_control
            || !self
                .control_types
                .contains(&ControlRecordType::KRaftVersion)
        {
            return Ok(None);
        }
        Ok(control_records(self)?.into_iter().find_map(|r| match r {
            ControlRecord::KRaftVersion(v) => Some(v),
            _ => None,
        }))
    }
}

/// Parses the whole batches in `buf`, checking CRCs (the metadata log must not be served
/// corrupt). A trailing partial batch is ignored.
pub fn decode_batches(buf: Bytes) -> Result<Vec<MetadataBatch>, RecordError> {
    let mut out = Vec::new();
    for batch in batches(buf) {
        let batch = batch?;
        batch.verify_crc()?;
        let h = &batch.header;
        let mut records = Vec::new();
        let mut control_types = Vec::new();
        for r in batch.records()? {
            let r = r?;
            if h.is_control() {
                let key = r.key.as_ref().ok_or_else(|| {
                    RecordError::InvalidRecord("control record without key".into())
                })?;
                control_types.push(ControlRecordType::parse_key(key)?);
            }
            records.push(r.value.unwrap_or_default());
        }
        out.push(MetadataBatch {
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            epoch: h.partition_leader_epoch,
            append_timestamp_ms: h.max_timestamp,
            size_in_bytes: h.total_size(),
            is_control: h.is_control(),
            records,
            control_types,
        });
    }
    Ok(out)
}

/// The control records of a control batch that Raft tracks (LeaderChange, Voters,
/// KRaftVersion); snapshot header and footer records are skipped.
pub fn control_records(batch: &MetadataBatch) -> Result<Vec<ControlRecord>, RecordError> {
    fn msg<M: Decode>(value: &Bytes) -> Result<M, RecordError> {
        // Every control message starts with its own int16 Version field.
        let version = match value.get(..2) {
            Some(v) => i16::from_be_bytes([v[0], v[1]]),
            None => return Err(RecordError::InvalidRecord("empty control record".into())),
        };
        M::decode(&mut value.clone(), version)
            .map_err(|e| RecordError::InvalidRecord(e.to_string()))
    }
    let mut out = Vec::new();
    for (kind, value) in batch.control_types.iter().zip(&batch.records) {
        match kind {
            ControlRecordType::LeaderChange => {
                let m: LeaderChangeMessage = msg(value)?;
                out.push(ControlRecord::LeaderChange {
                    leader_id: m.leader_id,
                    voters: m.voters.iter().map(|v| v.voter_id).collect(),
                    granting_voters: m.granting_voters.iter().map(|v| v.voter_id).collect(),
                });
            }
            ControlRecordType::KRaftVoters => {
                let m: VotersRecord = msg(value)?;
                out.push(ControlRecord::Voters(VoterSet::new(m.voters.iter().map(
                    |v| {
                        VoterNode {
                            key: ReplicaKey::of(v.voter_id, Some(v.voter_directory_id)),
                            listeners: v
                                .endpoints
                                .iter()
                                .map(|e| Endpoint {
                                    listener: e.name.clone(),
                                    host: e.host.clone(),
                                    port: e.port,
                                })
                                .collect(),
                            supported_kraft_version: KRaftVersionRange {
                                min: v.k_raft_version_feature.min_supported_version,
                                max: v.k_raft_version_feature.max_supported_version,
                            },
                        }
                    },
                ))));
            }
            ControlRecordType::KRaftVersion => {
                let m: KRaftVersionRecord = msg(value)?;
                out.push(ControlRecord::KRaftVersion(m.k_raft_version));
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_change_batch_matches_kafka_bytes() {
        // Kafka 4.4.0's first batch of a fresh single-node log, after the 61-byte header:
        // one record, key 00 00 00 02, value 19 bytes.
        let b = encode_control_batch(
            0,
            1,
            1000,
            &[ControlRecord::LeaderChange {
                leader_id: 1,
                voters: vec![1],
                granting_voters: vec![1],
            }],
        )
        .unwrap();
        assert_eq!(b.len(), 91, "Kafka's batch is 91 bytes");
        let record = &b[61..];
        assert_eq!(
            record,
            &[
                0x3a, 0, 0, 0, 0x08, 0, 0, 0, 2, 0x26, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, 0, 2, 0, 0,
                0, 1, 0, 0, 0
            ][..]
        );
        let decoded = decode_batches(b).unwrap();
        assert_eq!(decoded.len(), 1);
        assert!(decoded[0].is_control);
        assert_eq!(decoded[0].epoch, 1);
        assert_eq!(
            decoded[0].control_types,
            vec![ControlRecordType::LeaderChange]
        );
        assert_eq!(
            control_records(&decoded[0]).unwrap(),
            vec![ControlRecord::LeaderChange {
                leader_id: 1,
                voters: vec![1],
                granting_voters: vec![1]
            }]
        );
    }

    #[test]
    fn voters_and_kraft_version_records_round_trip() {
        let dir: kactor_protocol::Uuid = "nhSm0cU3RgubQ5xy6jjn7g".parse().unwrap();
        let set = VoterSet::new([VoterNode {
            key: ReplicaKey::of(3, Some(dir)),
            listeners: vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: "localhost".into(),
                port: 9093,
            }],
            supported_kraft_version: KRaftVersionRange::UP_TO_1,
        }]);
        for rec in [ControlRecord::Voters(set), ControlRecord::KRaftVersion(1)] {
            let b = encode_control_batch(7, 2, 1000, std::slice::from_ref(&rec)).unwrap();
            let d = decode_batches(b).unwrap();
            assert_eq!(control_records(&d[0]).unwrap(), vec![rec]);
        }
    }

    #[test]
    fn kraft_upgrade_batch_matches_kafka_bytes() {
        // The batch Kafka 4.4.0 appended for `kafka-features upgrade --release-version 4.4` on
        // a single node formatted with static voters (kraft.version 0 -> 1), read from its
        // __cluster_metadata-0 segment: a KRaftVersionRecord and a VotersRecord in one batch.
        let kafka = "000000000000004f00000084000000010277c6179b002000000001000001a24302b8c2000001a24302b8c2ffffffffffffffffffffffffffff000000021e00000008000000050a000000010000820100000208000000066e000002000000018cd47d679358fefad2f5a828d466e23a020b434f4e54524f4c4c45520a3132372e302e302e31e78f000000000100000000";
        let kafka: Vec<u8> = (0..kafka.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&kafka[i..i + 2], 16).unwrap())
            .collect();
        let mut dir = [0u8; 16];
        dir.copy_from_slice(&kafka[95..111]);
        let voters = VoterSet::new([VoterNode {
            key: ReplicaKey::of(1, Some(kactor_protocol::Uuid(dir))),
            listeners: vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: "127.0.0.1".into(),
                port: 59279,
            }],
            supported_kraft_version: KRaftVersionRange::UP_TO_1,
        }]);
        let records = [
            ControlRecord::KRaftVersion(1),
            ControlRecord::Voters(voters),
        ];
        let ours = encode_control_batch(79, 1, 0x1a24302b8c2, &records).unwrap();
        assert_eq!(&ours[..], &kafka[..]);
        let decoded = decode_batches(ours).unwrap();
        assert_eq!((decoded[0].base_offset, decoded[0].last_offset), (79, 80));
        assert_eq!(control_records(&decoded[0]).unwrap(), records.to_vec());
    }

    #[test]
    fn data_batches_round_trip() {
        let vals = vec![
            Bytes::from_static(b"\x01\x14\x00\x00"),
            Bytes::from_static(b"x"),
        ];
        let mut buf = encode_data_batch(5, 2, 7, &vals).unwrap().to_vec();
        buf.extend_from_slice(&encode_data_batch(7, 2, 8, &vals[..1]).unwrap());
        let d = decode_batches(Bytes::from(buf)).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].base_offset, d[0].last_offset, d[0].epoch), (5, 6, 2));
        assert_eq!(d[0].records, vals);
        assert!(!d[1].is_control);
        assert_eq!(d[1].base_offset, 7);
    }
}
