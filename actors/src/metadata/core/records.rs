//! The records of `__cluster_metadata` and their value framing (Kafka's
//! `MetadataRecordSerde` / `AbstractApiMessageSerde`): a record value is
//! `uvarint frame version (1) + uvarint record api key + uvarint record version + body`,
//! written in normal (non-control) batches with a null key.

use bytes::{Buf, Bytes};
use kactor_protocol::codec::{get_uvarint, put_uvarint, Decode, DecodeError, Encode, EncodeError};
use kactor_protocol::metadata::{
    AccessControlEntryRecord, BeginTransactionRecord, BrokerRegistrationChangeRecord,
    ClientQuotaRecord, ConfigRecord, EndTransactionRecord, FeatureLevelRecord, FenceBrokerRecord,
    NoOpRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord,
    RegisterControllerRecord, RemoveAccessControlEntryRecord, RemoveTopicRecord,
    RemoveUserScramCredentialRecord, TopicRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
    UserScramCredentialRecord,
};
use kactor_protocol::Writer;
use thiserror::Error;

/// The only frame version Kafka defines for metadata record values.
pub const FRAME_VERSION: u32 = 1;

/// One metadata record. Types the image does not model (ACLs, delegation tokens, ...) are kept as `Other` so a log written by a newer or fuller controller
/// still replays.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataRecord {
    RegisterBroker(RegisterBrokerRecord),
    UnregisterBroker(UnregisterBrokerRecord),
    Topic(TopicRecord),
    Partition(PartitionRecord),
    Config(ConfigRecord),
    PartitionChange(PartitionChangeRecord),
    FenceBroker(FenceBrokerRecord),
    UnfenceBroker(UnfenceBrokerRecord),
    RemoveTopic(RemoveTopicRecord),
    FeatureLevel(FeatureLevelRecord),
    ProducerIds(ProducerIdsRecord),
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    NoOp(NoOpRecord),
    BeginTransaction(BeginTransactionRecord),
    EndTransaction(EndTransactionRecord),
    UserScramCredential(UserScramCredentialRecord),
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    RegisterController(RegisterControllerRecord),
    ClientQuota(ClientQuotaRecord),
    AccessControlEntry(AccessControlEntryRecord),
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    Other {
        api_key: u32,
        version: u32,
        body: Bytes,
    },
}

#[derive(Debug, Error)]
pub enum RecordCodecError {
    #[error("metadata record frame version {0} is not 1")]
    FrameVersion(u32),
    #[error("metadata record decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("metadata record encode: {0}")]
    Encode(#[from] EncodeError),
    #[error("{0} trailing bytes after a metadata record of type {1}")]
    Trailing(usize, u32),
    #[error("a metadata record value is null")]
    NullValue,
}

/// Record api keys (Kafka's `MetadataRecordType`).
pub mod api_key {
    pub const REGISTER_BROKER: u32 = 0;
    pub const UNREGISTER_BROKER: u32 = 1;
    pub const TOPIC: u32 = 2;
    pub const PARTITION: u32 = 3;
    pub const CONFIG: u32 = 4;
    pub const PARTITION_CHANGE: u32 = 5;
    pub const FENCE_BROKER: u32 = 7;
    pub const UNFENCE_BROKER: u32 = 8;
    pub const REMOVE_TOPIC: u32 = 9;
    pub const USER_SCRAM_CREDENTIAL: u32 = 11;
    pub const FEATURE_LEVEL: u32 = 12;
    pub const CLIENT_QUOTA: u32 = 14;
    pub const ACCESS_CONTROL_ENTRY: u32 = 18;
    pub const REMOVE_ACCESS_CONTROL_ENTRY: u32 = 19;
    pub const PRODUCER_IDS: u32 = 15;
    pub const BROKER_REGISTRATION_CHANGE: u32 = 17;
    pub const NO_OP: u32 = 20;
    pub const REMOVE_USER_SCRAM_CREDENTIAL: u32 = 22;
    pub const BEGIN_TRANSACTION: u32 = 23;
    pub const END_TRANSACTION: u32 = 24;
    /// Not modelled (kactor's controller never aborts a metadata transaction); named so
    /// the image can tell it apart from records it keeps.
    pub const ABORT_TRANSACTION: u32 = 25;
    pub const REGISTER_CONTROLLER: u32 = 27;
}

impl MetadataRecord {
    /// (api key, version written). Versions are the ones Kafka 4.4 writes at its latest
    /// metadata.version, so Kafka's tools and a Kafka controller read them as their own.
    pub fn key_and_version(&self) -> (u32, u32) {
        use api_key::*;
        match self {
            MetadataRecord::RegisterBroker(_) => (REGISTER_BROKER, 4),
            MetadataRecord::UnregisterBroker(_) => (UNREGISTER_BROKER, 0),
            MetadataRecord::Topic(_) => (TOPIC, 0),
            MetadataRecord::Partition(_) => (PARTITION, 2),
            MetadataRecord::Config(_) => (CONFIG, 0),
            MetadataRecord::PartitionChange(_) => (PARTITION_CHANGE, 2),
            MetadataRecord::FenceBroker(_) => (FENCE_BROKER, 0),
            MetadataRecord::UnfenceBroker(_) => (UNFENCE_BROKER, 0),
            MetadataRecord::RemoveTopic(_) => (REMOVE_TOPIC, 0),
            MetadataRecord::FeatureLevel(_) => (FEATURE_LEVEL, 0),
            MetadataRecord::ProducerIds(_) => (PRODUCER_IDS, 0),
            MetadataRecord::BrokerRegistrationChange(_) => (BROKER_REGISTRATION_CHANGE, 3),
            MetadataRecord::NoOp(_) => (NO_OP, 0),
            MetadataRecord::BeginTransaction(_) => (BEGIN_TRANSACTION, 0),
            MetadataRecord::EndTransaction(_) => (END_TRANSACTION, 0),
            MetadataRecord::UserScramCredential(_) => (USER_SCRAM_CREDENTIAL, 0),
            MetadataRecord::RemoveUserScramCredential(_) => (REMOVE_USER_SCRAM_CREDENTIAL, 0),
            MetadataRecord::RegisterController(_) => (REGISTER_CONTROLLER, 0),
            MetadataRecord::ClientQuota(_) => (CLIENT_QUOTA, 0),
            MetadataRecord::AccessControlEntry(_) => (ACCESS_CONTROL_ENTRY, 0),
            MetadataRecord::RemoveAccessControlEntry(_) => (REMOVE_ACCESS_CONTROL_ENTRY, 0),
            MetadataRecord::Other {
                api_key, version, ..
            } => (*api_key, *version),
        }
    }

    /// The record value as Kafka frames it.
    pub fn encode(&self) -> Result<Bytes, RecordCodecError> {
        let (key, version) = self.key_and_version();
        let mut w = Writer::new();
        put_uvarint(w.buf_mut(), FRAME_VERSION);
        put_uvarint(w.buf_mut(), key);
        put_uvarint(w.buf_mut(), version);
        let v = version as i16;
        match self {
            MetadataRecord::RegisterBroker(r) => r.encode(&mut w, v)?,
            MetadataRecord::UnregisterBroker(r) => r.encode(&mut w, v)?,
            MetadataRecord::Topic(r) => r.encode(&mut w, v)?,
            MetadataRecord::Partition(r) => r.encode(&mut w, v)?,
            MetadataRecord::Config(r) => r.encode(&mut w, v)?,
            MetadataRecord::PartitionChange(r) => r.encode(&mut w, v)?,
            MetadataRecord::FenceBroker(r) => r.encode(&mut w, v)?,
            MetadataRecord::UnfenceBroker(r) => r.encode(&mut w, v)?,
            MetadataRecord::RemoveTopic(r) => r.encode(&mut w, v)?,
            MetadataRecord::FeatureLevel(r) => r.encode(&mut w, v)?,
            MetadataRecord::ProducerIds(r) => r.encode(&mut w, v)?,
            MetadataRecord::BrokerRegistrationChange(r) => r.encode(&mut w, v)?,
            MetadataRecord::NoOp(r) => r.encode(&mut w, v)?,
            MetadataRecord::BeginTransaction(r) => r.encode(&mut w, v)?,
            MetadataRecord::EndTransaction(r) => r.encode(&mut w, v)?,
            MetadataRecord::UserScramCredential(r) => r.encode(&mut w, v)?,
            MetadataRecord::RemoveUserScramCredential(r) => r.encode(&mut w, v)?,
            MetadataRecord::RegisterController(r) => r.encode(&mut w, v)?,
            MetadataRecord::ClientQuota(r) => r.encode(&mut w, v)?,
            MetadataRecord::AccessControlEntry(r) => r.encode(&mut w, v)?,
            MetadataRecord::RemoveAccessControlEntry(r) => r.encode(&mut w, v)?,
            MetadataRecord::Other { body, .. } => w.put_raw(body),
        }
        Ok(w.into_bytes())
    }

    /// Parses a framed record value.
    pub fn decode(mut value: Bytes) -> Result<Self, RecordCodecError> {
        let frame = get_uvarint(&mut value)?;
        if frame != FRAME_VERSION {
            return Err(RecordCodecError::FrameVersion(frame));
        }
        let key = get_uvarint(&mut value)?;
        let version = get_uvarint(&mut value)?;
        let v = i16::try_from(version).map_err(|_| DecodeError::UnsupportedVersion {
            message: "metadata record",
            version: i16::MAX,
        });
        fn body<T: Decode>(buf: &mut Bytes, v: i16) -> Result<T, RecordCodecError> {
            Ok(T::decode(buf, v)?)
        }
        use api_key::*;
        let rec = match key {
            REGISTER_BROKER => MetadataRecord::RegisterBroker(body(&mut value, v?)?),
            UNREGISTER_BROKER => MetadataRecord::UnregisterBroker(body(&mut value, v?)?),
            TOPIC => MetadataRecord::Topic(body(&mut value, v?)?),
            PARTITION => MetadataRecord::Partition(body(&mut value, v?)?),
            CONFIG => MetadataRecord::Config(body(&mut value, v?)?),
            PARTITION_CHANGE => MetadataRecord::PartitionChange(body(&mut value, v?)?),
            FENCE_BROKER => MetadataRecord::FenceBroker(body(&mut value, v?)?),
            UNFENCE_BROKER => MetadataRecord::UnfenceBroker(body(&mut value, v?)?),
            REMOVE_TOPIC => MetadataRecord::RemoveTopic(body(&mut value, v?)?),
            FEATURE_LEVEL => MetadataRecord::FeatureLevel(body(&mut value, v?)?),
            PRODUCER_IDS => MetadataRecord::ProducerIds(body(&mut value, v?)?),
            BROKER_REGISTRATION_CHANGE => {
                MetadataRecord::BrokerRegistrationChange(body(&mut value, v?)?)
            }
            NO_OP => MetadataRecord::NoOp(body(&mut value, v?)?),
            BEGIN_TRANSACTION => MetadataRecord::BeginTransaction(body(&mut value, v?)?),
            END_TRANSACTION => MetadataRecord::EndTransaction(body(&mut value, v?)?),
            USER_SCRAM_CREDENTIAL => MetadataRecord::UserScramCredential(body(&mut value, v?)?),
            REMOVE_USER_SCRAM_CREDENTIAL => {
                MetadataRecord::RemoveUserScramCredential(body(&mut value, v?)?)
            }
            REGISTER_CONTROLLER => MetadataRecord::RegisterController(body(&mut value, v?)?),
            CLIENT_QUOTA => MetadataRecord::ClientQuota(body(&mut value, v?)?),
            ACCESS_CONTROL_ENTRY => MetadataRecord::AccessControlEntry(body(&mut value, v?)?),
            REMOVE_ACCESS_CONTROL_ENTRY => {
                MetadataRecord::RemoveAccessControlEntry(body(&mut value, v?)?)
            }
            _ => {
                let body = value.split_to(value.len());
                return Ok(MetadataRecord::Other {
                    api_key: key,
                    version,
                    body,
                });
            }
        };
        if value.has_remaining() {
            return Err(RecordCodecError::Trailing(value.remaining(), key));
        }
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kactor_protocol::Uuid;

    #[test]
    fn topic_record_frame_matches_kafka_layout() {
        let id = Uuid([7; 16]);
        let rec = MetadataRecord::Topic(TopicRecord {
            name: "t1".into(),
            topic_id: id,
            ..Default::default()
        });
        let bytes = rec.encode().unwrap();
        // frame 1, api key 2, version 0, compact string "t1" (len+1), uuid, no tagged fields
        let mut expected = vec![1u8, 2, 0, 3, b't', b'1'];
        expected.extend_from_slice(&[7; 16]);
        expected.push(0);
        assert_eq!(&bytes[..], &expected[..]);
        // Kafka's dump of the same record shows valueSize 23 for a two-letter name.
        assert_eq!(bytes.len(), 23);
        assert_eq!(MetadataRecord::decode(bytes).unwrap(), rec);
    }

    #[test]
    fn feature_level_record_size_matches_kafka() {
        let rec = MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: "metadata.version".into(),
            feature_level: 33,
            ..Default::default()
        });
        // kafka-dump-log reports valueSize 23 for this record written by Kafka 4.4.0.
        assert_eq!(rec.encode().unwrap().len(), 23);
    }

    #[test]
    fn unknown_types_round_trip_as_other() {
        // 25 = AccessControlEntryRecord, which the image does not model.
        let raw = Bytes::from_static(&[1, 25, 0, 9, 9]);
        let rec = MetadataRecord::decode(raw.clone()).unwrap();
        assert!(matches!(rec, MetadataRecord::Other { api_key: 25, .. }));
        assert_eq!(rec.encode().unwrap(), raw);
    }

    #[test]
    fn bad_frame_version_is_an_error() {
        assert!(matches!(
            MetadataRecord::decode(Bytes::from_static(&[2, 2, 0])),
            Err(RecordCodecError::FrameVersion(2))
        ));
    }
}
