//! `__transaction_state` record framing (Kafka's `TransactionLog`): key = int16 version (0) +
//! TransactionLogKey; value = int16 version + TransactionLogValue at that version (Kafka 4.4
//! picks it from the finalized `transaction.version`: v0 at level 0, v1 with the tagged KIP-890
//! fields from level 1; kactor always finalizes level 1 or more, so it writes v1); a null
//! value is a tombstone (the transactional id expired). Both versions are read.

use std::collections::BTreeSet;

use bytes::{Buf, Bytes};
use kactor_protocol::coordinator::transaction_log_key::TransactionLogKey;
use kactor_protocol::coordinator::transaction_log_value::{PartitionsSchema, TransactionLogValue};
use kactor_protocol::{Decode, DecodeError, Encode, EncodeError, Writer};
use thiserror::Error;

use super::core::{TxnMetadata, TxnState};

#[derive(Debug, Error, PartialEq)]
pub enum TxnLogError {
    #[error("truncated transaction log record")]
    Truncated,
    #[error("unsupported transaction log key version {0}")]
    KeyVersion(i16),
    #[error("unsupported transaction log value version {0}")]
    ValueVersion(i16),
    #[error("unknown transaction state {0}")]
    State(i8),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

fn framed<M: Encode>(version: i16, m: &M) -> Result<Bytes, EncodeError> {
    let mut w = Writer::new();
    w.put_i16(version);
    m.encode(&mut w, version)?;
    Ok(w.into_bytes())
}

pub fn encode_key(transactional_id: &str) -> Result<Bytes, TxnLogError> {
    Ok(framed(
        0,
        &TransactionLogKey {
            transactional_id: transactional_id.to_string(),
        },
    )?)
}

pub fn encode_value(m: &TxnMetadata) -> Result<Bytes, TxnLogError> {
    // The finalized transaction.version is never 0 on kactor (see the module doc).
    let version = 1;
    // Kafka writes no partitions for Empty and Complete states.
    let partitions = super::core::by_topic(&m.partitions)
        .into_iter()
        .map(|(t, ps)| PartitionsSchema {
            topic: t.to_string(),
            partition_ids: ps,
            ..Default::default()
        })
        .collect();
    let v = TransactionLogValue {
        producer_id: m.producer_id,
        previous_producer_id: m.previous_producer_id,
        next_producer_id: m.next_producer_id,
        producer_epoch: m.producer_epoch,
        next_producer_epoch: -1,
        transaction_timeout_ms: m.txn_timeout_ms,
        transaction_status: m.state.id(),
        transaction_partitions: Some(partitions),
        transaction_last_update_timestamp_ms: m.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms: m.txn_start_timestamp_ms,
        client_transaction_version: m.client_transaction_version,
        ..Default::default()
    };
    Ok(framed(version, &v)?)
}

/// Decodes one record: the transactional id and its state (`None`: tombstone).
pub fn decode(
    key: &Bytes,
    value: Option<&Bytes>,
) -> Result<(String, Option<TxnMetadata>), TxnLogError> {
    let mut k = key.clone();
    if k.remaining() < 2 {
        return Err(TxnLogError::Truncated);
    }
    let kv = k.get_i16();
    if kv != 0 {
        return Err(TxnLogError::KeyVersion(kv));
    }
    let key = TransactionLogKey::decode(&mut k, 0)?;
    let Some(value) = value else {
        return Ok((key.transactional_id, None));
    };
    let mut v = value.clone();
    if v.remaining() < 2 {
        return Err(TxnLogError::Truncated);
    }
    let version = v.get_i16();
    if !(0..=1).contains(&version) {
        return Err(TxnLogError::ValueVersion(version));
    }
    let d = TransactionLogValue::decode(&mut v, version)?;
    let state =
        TxnState::from_id(d.transaction_status).ok_or(TxnLogError::State(d.transaction_status))?;
    let partitions: BTreeSet<(String, i32)> = d
        .transaction_partitions
        .unwrap_or_default()
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic;
            t.partition_ids.into_iter().map(move |p| (topic.clone(), p))
        })
        .collect();
    let m = TxnMetadata {
        transactional_id: key.transactional_id.clone(),
        producer_id: d.producer_id,
        previous_producer_id: d.previous_producer_id,
        next_producer_id: d.next_producer_id,
        producer_epoch: d.producer_epoch,
        last_producer_epoch: -1,
        txn_timeout_ms: d.transaction_timeout_ms,
        state,
        partitions,
        txn_start_timestamp_ms: d.transaction_start_timestamp_ms,
        txn_last_update_timestamp_ms: d.transaction_last_update_timestamp_ms,
        client_transaction_version: d.client_transaction_version,
    };
    Ok((key.transactional_id, Some(m)))
}
