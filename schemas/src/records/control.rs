//! Control records (Kafka's `ControlRecordType`, `EndTransactionMarker`): the key is
//! `version: int16 (0), type: int16`; a transaction marker's value is
//! `version: int16 (0), coordinator_epoch: int32`.

use super::RecordError;

/// Key version Kafka writes; newer versions are read as version 0, as Kafka does.
pub const CONTROL_RECORD_KEY_VERSION: i16 = 0;
pub const END_TXN_MARKER_VALUE_VERSION: i16 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRecordType {
    Abort,
    Commit,
    /// KRaft: written by a new leader at the start of its epoch.
    LeaderChange,
    SnapshotHeader,
    SnapshotFooter,
    KRaftVersion,
    KRaftVoters,
    /// A type this build does not know; consumers skip control records anyway.
    Unknown(i16),
}

impl ControlRecordType {
    pub fn type_id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KRaftVersion => 5,
            ControlRecordType::KRaftVoters => 6,
            ControlRecordType::Unknown(id) => id,
        }
    }

    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KRaftVersion,
            6 => ControlRecordType::KRaftVoters,
            other => ControlRecordType::Unknown(other),
        }
    }

    /// The 4-byte control record key.
    pub fn encode_key(self) -> [u8; 4] {
        let mut out = [0u8; 4];
        out[..2].copy_from_slice(&CONTROL_RECORD_KEY_VERSION.to_be_bytes());
        out[2..].copy_from_slice(&self.type_id().to_be_bytes());
        out
    }

    /// Parses a control record key. A negative version or a key shorter than 4 bytes is invalid.
    pub fn parse_key(key: &[u8]) -> Result<Self, RecordError> {
        if key.len() < 4 {
            return Err(RecordError::InvalidRecord(format!(
                "control record key must have at least 4 bytes, found {}",
                key.len()
            )));
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(RecordError::InvalidRecord(format!(
                "invalid control record key version {version}"
            )));
        }
        Ok(Self::from_id(i16::from_be_bytes([key[2], key[3]])))
    }
}

/// The commit or abort marker a transaction coordinator writes to each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTransactionMarker {
    /// `Commit` or `Abort`.
    pub control_type: ControlRecordType,
    pub coordinator_epoch: i32,
}

impl EndTransactionMarker {
    pub fn commit(coordinator_epoch: i32) -> Self {
        Self {
            control_type: ControlRecordType::Commit,
            coordinator_epoch,
        }
    }
    pub fn abort(coordinator_epoch: i32) -> Self {
        Self {
            control_type: ControlRecordType::Abort,
            coordinator_epoch,
        }
    }

    pub fn encode_key(&self) -> [u8; 4] {
        self.control_type.encode_key()
    }

    /// The 6-byte marker value.
    pub fn encode_value(&self) -> [u8; 6] {
        let mut out = [0u8; 6];
        out[..2].copy_from_slice(&END_TXN_MARKER_VALUE_VERSION.to_be_bytes());
        out[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        out
    }

    /// Parses a marker from a control record's key and value.
    pub fn parse(key: &[u8], value: Option<&[u8]>) -> Result<Self, RecordError> {
        let control_type = ControlRecordType::parse_key(key)?;
        if !matches!(
            control_type,
            ControlRecordType::Commit | ControlRecordType::Abort
        ) {
            return Err(RecordError::InvalidRecord(format!(
                "control record type {control_type:?} is not an end transaction marker"
            )));
        }
        let value = value.ok_or_else(|| {
            RecordError::InvalidRecord("end transaction marker has a null value".into())
        })?;
        if value.len() < 6 {
            return Err(RecordError::InvalidRecord(format!(
                "end transaction marker value must have at least 6 bytes, found {}",
                value.len()
            )));
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(RecordError::InvalidRecord(format!(
                "invalid end transaction marker version {version}"
            )));
        }
        let coordinator_epoch = i32::from_be_bytes(value[2..6].try_into().expect("4 bytes"));
        Ok(Self {
            control_type,
            coordinator_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_bytes_match_the_format() {
        let m = EndTransactionMarker::commit(7);
        assert_eq!(m.encode_key(), [0, 0, 0, 1]);
        assert_eq!(m.encode_value(), [0, 0, 0, 0, 0, 7]);
        assert_eq!(EndTransactionMarker::abort(3).encode_key(), [0, 0, 0, 0]);
        assert_eq!(
            EndTransactionMarker::parse(&m.encode_key(), Some(&m.encode_value())).unwrap(),
            m
        );
    }

    #[test]
    fn bad_keys_and_values_are_errors() {
        assert!(ControlRecordType::parse_key(&[0, 0, 1]).is_err());
        assert!(ControlRecordType::parse_key(&[0xff, 0xff, 0, 1]).is_err());
        assert_eq!(
            ControlRecordType::parse_key(&[0, 0, 0, 2]).unwrap(),
            ControlRecordType::LeaderChange
        );
        assert_eq!(
            ControlRecordType::parse_key(&[0, 0, 0, 99]).unwrap(),
            ControlRecordType::Unknown(99)
        );
        assert!(EndTransactionMarker::parse(&[0, 0, 0, 1], Some(&[0, 0, 0])).is_err());
        assert!(EndTransactionMarker::parse(&[0, 0, 0, 1], None).is_err());
        assert!(EndTransactionMarker::parse(&[0, 0, 0, 2], Some(&[0; 6])).is_err());
    }
}
