//! `__share_group_state` record framing (Kafka's `ShareCoordinatorRecordSerde`): the key is an
//! int16 record type (0 ShareSnapshot, 1 ShareUpdate) followed by the key struct at version 0;
//! the value is an int16 version (0) followed by the value struct; a null value on a snapshot
//! key is a tombstone (the share-partition's state was deleted).

use bytes::{Buf, Bytes};
use kactor_protocol::coordinator::{
    share_snapshot_key::ShareSnapshotKey, share_snapshot_value as snapshot,
    share_update_key::ShareUpdateKey, share_update_value as update,
};
use kactor_protocol::{Decode, DecodeError, Encode, EncodeError, Writer};
use thiserror::Error;

use super::core::{ShareState, StateBatch, StateKey, StateRecord, StateUpdate};

const SNAPSHOT_TYPE: i16 = 0;
const UPDATE_TYPE: i16 = 1;

#[derive(Debug, Error, PartialEq)]
pub enum StateLogError {
    #[error("share state record shorter than its type or version")]
    Truncated,
    #[error("unknown share state record type {0}")]
    RecordType(i16),
    #[error("share state record type {record_type}: value version {version} is not supported")]
    Version { record_type: i16, version: i16 },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

fn framed<M: Encode>(prefix: i16, m: &M) -> Result<Bytes, EncodeError> {
    let mut w = Writer::new();
    w.put_i16(prefix);
    m.encode(&mut w, 0)?;
    Ok(w.into_bytes())
}

/// The (key, value) bytes of a record; a tombstone has no value.
pub fn encode(record: &StateRecord) -> Result<(Bytes, Option<Bytes>), StateLogError> {
    Ok(match record {
        StateRecord::Snapshot(k, s) => (
            framed(SNAPSHOT_TYPE, &snapshot_key(k))?,
            Some(framed(
                0,
                &snapshot::ShareSnapshotValue {
                    snapshot_epoch: s.snapshot_epoch,
                    state_epoch: s.state_epoch,
                    leader_epoch: s.leader_epoch,
                    start_offset: s.start_offset,
                    delivery_complete_count: s.delivery_complete_count,
                    create_timestamp: s.create_timestamp,
                    write_timestamp: s.write_timestamp,
                    state_batches: s.batches.iter().map(Into::into).collect(),
                    ..Default::default()
                },
            )?),
        ),
        StateRecord::Update(k, u) => (
            framed(
                UPDATE_TYPE,
                &ShareUpdateKey {
                    group_id: k.group.clone(),
                    topic_id: k.topic_id,
                    partition: k.partition,
                },
            )?,
            Some(framed(
                0,
                &update::ShareUpdateValue {
                    snapshot_epoch: u.snapshot_epoch,
                    leader_epoch: u.leader_epoch,
                    start_offset: u.start_offset,
                    delivery_complete_count: u.delivery_complete_count,
                    state_batches: u.batches.iter().map(Into::into).collect(),
                    ..Default::default()
                },
            )?),
        ),
        StateRecord::Tombstone(k) => (framed(SNAPSHOT_TYPE, &snapshot_key(k))?, None),
    })
}

fn snapshot_key(k: &StateKey) -> ShareSnapshotKey {
    ShareSnapshotKey {
        group_id: k.group.clone(),
        topic_id: k.topic_id,
        partition: k.partition,
    }
}

fn split(mut b: Bytes) -> Result<(i16, Bytes), StateLogError> {
    if b.len() < 2 {
        return Err(StateLogError::Truncated);
    }
    let prefix = b.get_i16();
    Ok((prefix, b))
}

/// Decodes one record of the partition.
pub fn decode(key: &Bytes, value: Option<&Bytes>) -> Result<StateRecord, StateLogError> {
    let (record_type, mut kb) = split(key.clone())?;
    let (k, is_snapshot) = match record_type {
        SNAPSHOT_TYPE => {
            let k = ShareSnapshotKey::decode(&mut kb, 0)?;
            (StateKey::new(&k.group_id, k.topic_id, k.partition), true)
        }
        UPDATE_TYPE => {
            let k = ShareUpdateKey::decode(&mut kb, 0)?;
            (StateKey::new(&k.group_id, k.topic_id, k.partition), false)
        }
        other => return Err(StateLogError::RecordType(other)),
    };
    let Some(value) = value else {
        return Ok(StateRecord::Tombstone(k));
    };
    let (version, mut vb) = split(value.clone())?;
    if version != 0 {
        return Err(StateLogError::Version {
            record_type,
            version,
        });
    }
    Ok(if is_snapshot {
        let v = snapshot::ShareSnapshotValue::decode(&mut vb, 0)?;
        StateRecord::Snapshot(
            k,
            ShareState {
                snapshot_epoch: v.snapshot_epoch,
                state_epoch: v.state_epoch,
                leader_epoch: v.leader_epoch,
                start_offset: v.start_offset,
                delivery_complete_count: v.delivery_complete_count,
                create_timestamp: v.create_timestamp,
                write_timestamp: v.write_timestamp,
                batches: v.state_batches.iter().map(StateBatch::from).collect(),
            },
        )
    } else {
        let v = update::ShareUpdateValue::decode(&mut vb, 0)?;
        StateRecord::Update(
            k,
            StateUpdate {
                snapshot_epoch: v.snapshot_epoch,
                leader_epoch: v.leader_epoch,
                start_offset: v.start_offset,
                delivery_complete_count: v.delivery_complete_count,
                batches: v.state_batches.iter().map(StateBatch::from).collect(),
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kactor_protocol::Uuid;

    #[test]
    fn records_round_trip_with_kafkas_framing() {
        let k = StateKey::new("g", Uuid([7; 16]), 2);
        let batches = vec![StateBatch {
            first_offset: 5,
            last_offset: 9,
            delivery_state: 2,
            delivery_count: 1,
        }];
        let records = [
            StateRecord::Snapshot(
                k.clone(),
                ShareState {
                    snapshot_epoch: 1,
                    state_epoch: 0,
                    leader_epoch: 3,
                    start_offset: 5,
                    delivery_complete_count: 5,
                    create_timestamp: 10,
                    write_timestamp: 11,
                    batches: batches.clone(),
                },
            ),
            StateRecord::Update(
                k.clone(),
                StateUpdate {
                    snapshot_epoch: 1,
                    leader_epoch: 3,
                    start_offset: -1,
                    delivery_complete_count: -1,
                    batches,
                },
            ),
            StateRecord::Tombstone(k.clone()),
        ];
        for r in records {
            let (key, value) = encode(&r).unwrap();
            // Type prefix, then the key: group (int16 length + bytes), uuid, partition.
            assert_eq!(key.len(), 2 + 2 + 1 + 16 + 4);
            assert_eq!(decode(&key, value.as_ref()).unwrap(), r);
        }
    }
}
