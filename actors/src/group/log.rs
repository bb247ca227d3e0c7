//! Between the shard's records and its `__consumer_offsets` partition (Kafka's
//! `CoordinatorRuntime` append path and `CoordinatorLoaderImpl`): one v2 batch per write, and
//! replay of the partition's batches — transactional offset commits stay pending until their
//! commit/abort marker — when the shard loads. Pure: the actor does the I/O.

use bytes::Bytes;
use kactor_protocol::records::{
    batches, BatchBuilder, ControlRecordType, EndTransactionMarker, RecordError,
};
use thiserror::Error;

use super::codec::{decode_record, encode_record, RecordCodecError};
use super::core::{CoordinatorRecord, GroupCoordinatorShard};

#[derive(Debug, Error)]
pub enum CoordinatorLogError {
    #[error("record batch: {0}")]
    Batch(#[from] RecordError),
    #[error("coordinator record at offset {offset}: {source}")]
    Record {
        offset: i64,
        source: RecordCodecError,
    },
    #[error(transparent)]
    Encode(#[from] kactor_protocol::EncodeError),
}

/// The transaction a write belongs to (TxnOffsetCommit), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// One uncompressed batch holding `records` in order, stamped `now_ms`.
pub fn records_batch(
    records: &[CoordinatorRecord],
    now_ms: i64,
    producer: Option<TxnProducer>,
) -> Result<Bytes, CoordinatorLogError> {
    let mut builder = BatchBuilder::new(0);
    if let Some(p) = producer {
        builder = builder
            .producer(p.producer_id, p.producer_epoch, -1)
            .transactional(true);
    }
    for record in records {
        let (key, value) = encode_record(record)?;
        builder.append(now_ms, Some(&key), value.as_deref(), &[])?;
    }
    Ok(builder.build()?)
}

/// Replays the batches in `buf` whose records are at or after `from_offset`; returns the
/// offset after the last complete batch (where the next read starts).
pub fn replay_batches(
    shard: &mut GroupCoordinatorShard,
    buf: Bytes,
    from_offset: i64,
) -> Result<i64, CoordinatorLogError> {
    let mut next = from_offset;
    for batch in batches(buf) {
        let batch = batch?;
        let h = batch.header;
        if h.base_offset + h.last_offset_delta as i64 >= next {
            for record in batch.records()? {
                let record = record?;
                let offset = record.offset(h.base_offset);
                if offset < next {
                    continue;
                }
                let Some(key) = record.key.as_ref() else {
                    continue;
                };
                if h.is_control() {
                    if let Ok(ControlRecordType::Commit | ControlRecordType::Abort) =
                        ControlRecordType::parse_key(key)
                    {
                        let marker = EndTransactionMarker::parse(key, record.value.as_deref())?;
                        shard.replay_end_transaction(
                            h.producer_id,
                            marker.control_type == ControlRecordType::Commit,
                        );
                    }
                    continue;
                }
                let decoded = decode_record(key, record.value.as_ref())
                    .map_err(|source| CoordinatorLogError::Record { offset, source })?;
                if let Some(r) = decoded {
                    if h.is_transactional() {
                        shard.replay_transactional(h.producer_id, &r);
                    } else {
                        shard.replay(&r);
                    }
                }
            }
        }
        next = next.max(h.base_offset + h.last_offset_delta as i64 + 1);
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::core::tests_support::record_log_of_a_busy_shard;
    use crate::group::core::GroupCoordinatorConfig;
    use kactor_protocol::records::end_transaction_marker_batch;

    #[test]
    fn a_log_of_batches_reloads_the_same_offsets_and_groups() {
        let log = record_log_of_a_busy_shard();
        let mut direct = GroupCoordinatorShard::new(GroupCoordinatorConfig::default(), 1);
        for r in &log {
            direct.replay(r);
        }
        // Three batches, offsets assigned back to back as the partition would.
        let mut buf = Vec::new();
        let mut base = 0i64;
        for chunk in log.chunks(7) {
            let mut b = records_batch(chunk, 1_000, None).unwrap().to_vec();
            kactor_protocol::records::set_base_offset(&mut b, base);
            kactor_protocol::records::write_crc(&mut b).unwrap();
            base += chunk.len() as i64;
            buf.extend_from_slice(&b);
        }
        let mut loaded = GroupCoordinatorShard::new(GroupCoordinatorConfig::default(), 2);
        let next = replay_batches(&mut loaded, Bytes::from(buf.clone()), 0).unwrap();
        assert_eq!(next, log.len() as i64);
        assert_eq!(loaded.offsets(), direct.offsets());
        assert_eq!(
            loaded
                .groups()
                .map(|(id, _)| id.clone())
                .collect::<Vec<_>>(),
            direct
                .groups()
                .map(|(id, _)| id.clone())
                .collect::<Vec<_>>()
        );
        // Reading from the middle skips what was already replayed.
        let mut partial = GroupCoordinatorShard::new(GroupCoordinatorConfig::default(), 3);
        assert_eq!(
            replay_batches(&mut partial, Bytes::from(buf), next).unwrap(),
            next
        );
        assert_eq!(partial.groups().count(), 0);
    }

    #[test]
    fn transactional_commits_wait_for_their_marker() {
        let record = CoordinatorRecord::OffsetCommit {
            group_id: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: Some(crate::group::core::records::OffsetCommitValue {
                offset: 5,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 1,
                expire_timestamp_ms: None,
                topic_id: Default::default(),
            }),
        };
        let producer = TxnProducer {
            producer_id: 9,
            producer_epoch: 1,
        };
        let txn = records_batch(&[record], 1, Some(producer)).unwrap();
        let mut shard = GroupCoordinatorShard::new(GroupCoordinatorConfig::default(), 1);
        let next = replay_batches(&mut shard, txn, 0).unwrap();
        assert!(shard.offsets().has_pending("g", "t", 0));
        assert!(shard.offsets().get("g", "t", 0).is_none());
        let marker =
            end_transaction_marker_batch(next, 2, 0, 9, 1, EndTransactionMarker::commit(0))
                .unwrap();
        replay_batches(&mut shard, marker, next).unwrap();
        assert_eq!(shard.offsets().get("g", "t", 0).map(|v| v.offset), Some(5));
    }
}
