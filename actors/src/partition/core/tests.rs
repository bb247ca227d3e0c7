use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kactor_protocol::errors;
use kactor_protocol::records::{verify_crc, BatchHeader, TimestampType};

use super::*;
use crate::partition::testing::{batch, batch_with};

const NOW: i64 = 1_700_000_000_000;

fn leader(config: PartitionConfig) -> Partition<MemoryLog> {
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        1,
        MemoryLog::new(),
        config,
        NOW,
    );
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 5,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        },
        NOW,
    )
    .unwrap();
    p
}

fn consumer_read(offset: i64, max_bytes: usize) -> ReadParams {
    ReadParams {
        fetch_offset: offset,
        max_bytes,
        min_one_batch: true,
        isolation: IsolationLevel::ReadUncommitted,
        current_leader_epoch: -1,
        last_fetched_epoch: -1,
        replica_id: -1,
    }
}

fn headers(records: &LogSlice) -> Vec<BatchHeader> {
    let bytes = records.to_bytes().unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        verify_crc(&bytes[pos..pos + h.total_size()]).unwrap();
        pos += h.total_size();
        out.push(h);
    }
    out
}

#[test]
fn append_assigns_offsets_and_epoch_and_advances_hw() {
    let mut p = leader(PartitionConfig::default());
    let a = p
        .append_as_leader(&batch(&[b"a", b"b", b"c"], NOW), 1, NOW)
        .unwrap();
    assert_eq!((a.base_offset, a.last_offset, a.high_watermark), (0, 2, 3));
    assert!(a.high_watermark_advanced);
    assert_eq!(a.log_append_time_ms, -1);
    let b = p.append_as_leader(&batch(&[b"d"], NOW), -1, NOW).unwrap();
    assert_eq!((b.base_offset, b.last_offset, b.high_watermark), (3, 3, 4));

    let r = p.read(&consumer_read(0, 1 << 20)).unwrap();
    let hs = headers(&r.records);
    assert_eq!(hs.len(), 2);
    assert_eq!((hs[0].base_offset, hs[1].base_offset), (0, 3));
    assert!(hs.iter().all(|h| h.partition_leader_epoch == 5));
    assert_eq!(
        (
            r.high_watermark,
            r.log_start_offset,
            r.preferred_read_replica
        ),
        (4, 0, -1)
    );
}

#[test]
fn invalid_acks_and_not_leader() {
    let mut p = leader(PartitionConfig::default());
    let e = p
        .append_as_leader(&batch(&[b"a"], NOW), 2, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::INVALID_REQUIRED_ACKS);
    p.stop();
    let e = p
        .append_as_leader(&batch(&[b"a"], NOW), 1, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::NOT_LEADER_OR_FOLLOWER);
    assert_eq!(
        p.read(&consumer_read(0, 100)).unwrap_err().code(),
        errors::NOT_LEADER_OR_FOLLOWER
    );
}

#[test]
fn oversize_batch_is_message_too_large() {
    let mut p = leader(PartitionConfig {
        max_message_bytes: 80,
        ..Default::default()
    });
    let e = p
        .append_as_leader(&batch(&[&[0u8; 100]], NOW), 1, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::MESSAGE_TOO_LARGE);
    assert_eq!(p.log_end_offset(), 0);
}

#[test]
fn bad_crc_is_corrupt_message() {
    let mut p = leader(PartitionConfig::default());
    let mut b = BytesMut::from(&batch(&[b"hello"], NOW)[..]);
    let last = b.len() - 2;
    b[last] ^= 0xff;
    let e = p.append_as_leader(&b.freeze(), 1, NOW).unwrap_err();
    assert_eq!(e.code(), errors::CORRUPT_MESSAGE);
}

#[test]
fn shape_errors_are_invalid_record() {
    let mut p = leader(PartitionConfig::default());
    // Empty payload, two batches, a control batch, and an inconsistent count.
    assert_eq!(
        p.append_as_leader(&Bytes::new(), 1, NOW)
            .unwrap_err()
            .code(),
        errors::INVALID_RECORD
    );
    let one = batch(&[b"a"], NOW);
    let two: Bytes = [one.clone(), one.clone()].concat().into();
    assert_eq!(
        p.append_as_leader(&two, 1, NOW).unwrap_err().code(),
        errors::INVALID_RECORD
    );
    let control = batch_with(&[b"a"], NOW, 0x20);
    assert_eq!(
        p.append_as_leader(&control, 1, NOW).unwrap_err().code(),
        errors::INVALID_RECORD
    );
    let mut bad = BytesMut::from(&one[..]);
    bad[57..61].copy_from_slice(&7i32.to_be_bytes()); // records count (inside the CRC range)
    let crc = crc32c::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        p.append_as_leader(&bad.freeze(), 1, NOW)
            .unwrap_err()
            .code(),
        errors::INVALID_RECORD
    );
    let mut v1 = BytesMut::from(&one[..]);
    v1[16] = 1;
    assert_eq!(
        p.append_as_leader(&v1.freeze(), 1, NOW).unwrap_err().code(),
        errors::INVALID_RECORD
    );
}

#[test]
fn create_time_out_of_range_is_invalid_timestamp() {
    let mut p = leader(PartitionConfig::default());
    let future = NOW + 2 * 3_600_000;
    let e = p
        .append_as_leader(&batch(&[b"a"], future), 1, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::INVALID_TIMESTAMP);
}

#[test]
fn log_append_time_stamps_header_and_keeps_crc_valid() {
    let mut p = leader(PartitionConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..Default::default()
    });
    let a = p
        .append_as_leader(&batch(&[b"a", b"b"], 5), 1, NOW)
        .unwrap();
    assert_eq!(a.log_append_time_ms, NOW);
    let hs = headers(&p.read(&consumer_read(0, 1 << 20)).unwrap().records);
    assert_eq!(hs[0].timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(hs[0].max_timestamp, NOW);
}

#[test]
fn read_bounds_first_batch_rule_and_out_of_range() {
    let mut p = leader(PartitionConfig::default());
    for _ in 0..3 {
        p.append_as_leader(&batch(&[&[7u8; 50]], NOW), 1, NOW)
            .unwrap();
    }
    let one = headers(&p.read(&consumer_read(0, 1 << 20)).unwrap().records)[0].total_size();
    // Smaller than a batch: the first batch still comes back when it's the response's first.
    let r = p.read(&consumer_read(0, 10)).unwrap();
    assert_eq!(headers(&r.records).len(), 1);
    let r = p
        .read(&ReadParams {
            min_one_batch: false,
            ..consumer_read(0, 10)
        })
        .unwrap();
    assert!(r.records.is_empty());
    let r = p.read(&consumer_read(1, 2 * one)).unwrap();
    assert_eq!(
        headers(&r.records)
            .iter()
            .map(|h| h.base_offset)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    // At the log end: empty, not an error; past it or below the start: OFFSET_OUT_OF_RANGE.
    assert!(p.read(&consumer_read(3, 100)).unwrap().records.is_empty());
    assert_eq!(
        p.read(&consumer_read(4, 100)).unwrap_err().code(),
        errors::OFFSET_OUT_OF_RANGE
    );
    p.delete_records(2).unwrap();
    assert_eq!(
        p.read(&consumer_read(1, 100)).unwrap_err().code(),
        errors::OFFSET_OUT_OF_RANGE
    );
}

#[test]
fn consumer_reads_stop_at_the_high_watermark() {
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        1,
        MemoryLog::new(),
        PartitionConfig::default(),
        NOW,
    );
    // ISR {1, 2}: follower 2 has not fetched, so the high watermark stays at 0.
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 1,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
        },
        NOW,
    )
    .unwrap();
    let a = p.append_as_leader(&batch(&[b"x"], NOW), -1, NOW).unwrap();
    assert_eq!(a.high_watermark, 0);
    assert!(!a.high_watermark_advanced);
    assert!(p.read(&consumer_read(0, 1000)).unwrap().records.is_empty());
    // The follower fetching from offset 1 proves it has offset 0.
    let follower = ReadParams {
        replica_id: 2,
        ..consumer_read(1, 1000)
    };
    let r = p.read(&follower).unwrap();
    assert_eq!(p.high_watermark(), 0, "a read alone does not move it");
    p.record_follower_fetch(2, 1, r.log_end_offset, NOW, true, -1, 0);
    assert_eq!(p.high_watermark(), 1);
    assert!(p.take_hw_moved_by_fetch());
    assert_eq!(
        headers(&p.read(&consumer_read(0, 1000)).unwrap().records).len(),
        1
    );
}

#[test]
fn leader_epoch_checks() {
    let mut p = leader(PartitionConfig::default());
    let r = ReadParams {
        current_leader_epoch: 4,
        ..consumer_read(0, 100)
    };
    assert_eq!(p.read(&r).unwrap_err().code(), errors::FENCED_LEADER_EPOCH);
    let r = ReadParams {
        current_leader_epoch: 6,
        ..consumer_read(0, 100)
    };
    assert_eq!(p.read(&r).unwrap_err().code(), errors::UNKNOWN_LEADER_EPOCH);
    let r = ReadParams {
        current_leader_epoch: 5,
        ..consumer_read(0, 100)
    };
    p.read(&r).unwrap();
    assert_eq!(
        p.offset_for_timestamp(-1, None, 4).unwrap_err().code(),
        errors::FENCED_LEADER_EPOCH
    );
}

#[test]
fn list_offsets_special_timestamps_and_by_time() {
    let mut p = leader(PartitionConfig::default());
    p.append_as_leader(&batch(&[b"a", b"b"], NOW - 100), 1, NOW)
        .unwrap(); // offsets 0-1, ts -100,-99
    p.append_as_leader(&batch(&[b"c"], NOW - 500), 1, NOW)
        .unwrap(); // offset 2, ts -500
    p.append_as_leader(&batch(&[b"d"], NOW - 10), 1, NOW)
        .unwrap(); // offset 3
    let iso = Some(IsolationLevel::ReadUncommitted);
    let get = |ts| p.offset_for_timestamp(ts, iso, -1).unwrap();
    assert_eq!(
        get(LATEST_TIMESTAMP).unwrap(),
        TimestampOffset {
            timestamp: -1,
            offset: 4,
            leader_epoch: Some(5)
        }
    );
    assert_eq!(get(EARLIEST_TIMESTAMP).unwrap().offset, 0);
    assert_eq!(get(EARLIEST_LOCAL_TIMESTAMP).unwrap().offset, 0);
    assert_eq!(get(LATEST_TIERED_TIMESTAMP).unwrap().offset, -1);
    let max = get(MAX_TIMESTAMP).unwrap();
    assert_eq!((max.timestamp, max.offset), (NOW - 10, 3));
    assert_eq!(get(NOW - 50).unwrap().offset, 3);
    assert_eq!(get(NOW - 100).unwrap().offset, 0);
    assert!(get(NOW).is_none());
    p.delete_records(2).unwrap();
    assert_eq!(
        p.offset_for_timestamp(EARLIEST_TIMESTAMP, iso, -1)
            .unwrap()
            .unwrap()
            .offset,
        2
    );
}

#[test]
fn delete_records_rules() {
    let mut p = leader(PartitionConfig::default());
    p.append_as_leader(&batch(&[b"a", b"b", b"c"], NOW), 1, NOW)
        .unwrap();
    assert_eq!(
        p.delete_records(4).unwrap_err().code(),
        errors::OFFSET_OUT_OF_RANGE
    );
    assert_eq!(
        p.delete_records(-7).unwrap_err().code(),
        errors::OFFSET_OUT_OF_RANGE
    );
    assert_eq!(p.delete_records(1).unwrap(), 1);
    assert_eq!(p.delete_records(-1).unwrap(), 3);
    let mut compacted = leader(PartitionConfig {
        cleanup_delete: false,
        cleanup_compact: true,
        ..Default::default()
    });
    assert_eq!(
        compacted.delete_records(0).unwrap_err().code(),
        errors::POLICY_VIOLATION
    );
}

#[test]
fn offset_for_leader_epoch_follows_the_epoch_cache() {
    let mut p = leader(PartitionConfig::default()); // epoch 5 from 0
    p.append_as_leader(&batch(&[b"a", b"b"], NOW), 1, NOW)
        .unwrap();
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 7,
            partition_epoch: 1,
            replicas: vec![1],
            isr: vec![1],
        },
        NOW,
    )
    .unwrap(); // epoch 7 from 2
    p.append_as_leader(&batch(&[b"c"], NOW), 1, NOW).unwrap();
    let q = |e| p.last_offset_for_leader_epoch(-1, e, true).unwrap();
    assert_eq!(
        q(7),
        EpochEndOffset {
            epoch: 7,
            end_offset: 3
        }
    );
    assert_eq!(
        q(5),
        EpochEndOffset {
            epoch: 5,
            end_offset: 2
        }
    );
    assert_eq!(
        q(6),
        EpochEndOffset {
            epoch: 5,
            end_offset: 2
        }
    );
    assert_eq!(
        q(3),
        EpochEndOffset {
            epoch: 3,
            end_offset: 0
        }
    );
    assert_eq!(
        q(8),
        EpochEndOffset {
            epoch: -1,
            end_offset: -1
        }
    );
    assert_eq!(
        q(-1),
        EpochEndOffset {
            epoch: -1,
            end_offset: -1
        }
    );
    assert_eq!(
        p.last_offset_for_leader_epoch(6, 5, true)
            .unwrap_err()
            .code(),
        errors::FENCED_LEADER_EPOCH
    );
    // A fetcher whose last fetched epoch 5 ended at 2 but asks from 3 has diverged.
    let r = p
        .read(&ReadParams {
            last_fetched_epoch: 5,
            ..consumer_read(3, 100)
        })
        .unwrap();
    assert_eq!(
        r.diverging_epoch,
        Some(EpochEndOffset {
            epoch: 5,
            end_offset: 2
        })
    );
}

#[test]
fn flush_by_message_count() {
    let mut p = leader(PartitionConfig {
        flush_messages: 2,
        ..Default::default()
    });
    p.append_as_leader(&batch(&[b"a"], NOW), 1, NOW).unwrap();
    assert!(!p.maybe_flush(NOW).unwrap());
    p.append_as_leader(&batch(&[b"b"], NOW), 1, NOW).unwrap();
    assert!(p.maybe_flush(NOW).unwrap());
    assert_eq!(p.log().recovery_point(), 2);
}

#[test]
fn config_resolution_is_used_by_the_partition() {
    let topic: BTreeMap<String, String> =
        [("max.message.bytes".to_string(), "70".to_string())].into();
    let mut p = leader(PartitionConfig::resolve(&BTreeMap::new(), &topic));
    let e = p
        .append_as_leader(&batch(&[&[1u8; 20]], NOW), 1, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::MESSAGE_TOO_LARGE);
}

#[test]
fn topic_codec_different_from_batch_recompresses() {
    use kactor_protocol::records::{BatchHeader, Compression};
    let mut p = leader(PartitionConfig {
        compression: TopicCompression::Codec(Compression::Gzip),
        ..Default::default()
    });
    p.append_as_leader(&batch(&[b"aaaaaaaa", b"bbbbbbbb"], NOW), 1, NOW)
        .unwrap();
    let hs = headers(&p.read(&consumer_read(0, 1 << 20)).unwrap().records);
    assert_eq!(hs[0].compression().unwrap(), Compression::Gzip);
    assert_eq!(hs[0].records_count, 2);
    // `producer` keeps the batch exactly as sent (apart from offsets and epoch).
    let mut p = leader(PartitionConfig::default());
    let sent = batch(&[b"x"], NOW);
    p.append_as_leader(&sent, 1, NOW).unwrap();
    let got = p
        .read(&consumer_read(0, 1 << 20))
        .unwrap()
        .records
        .to_bytes()
        .unwrap();
    assert_eq!(&got[16..], &sent[16..]);
    assert_eq!(BatchHeader::parse(&got).unwrap().partition_leader_epoch, 5);
}

#[test]
fn compacted_topic_requires_keys() {
    let mut p = leader(PartitionConfig {
        cleanup_compact: true,
        ..Default::default()
    });
    let e = p
        .append_as_leader(&batch(&[b"x"], NOW), 1, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::INVALID_RECORD);
}

/// A [`MemoryLog`] that rolls a "segment" at the next append when told to, and keeps producer
/// snapshots in a directory, like the disk log does.
struct RollingLog {
    inner: MemoryLog,
    dir: std::path::PathBuf,
    roll_next: bool,
    rolled: Option<i64>,
}

impl PartitionLog for RollingLog {
    fn log_start_offset(&self) -> i64 {
        self.inner.log_start_offset()
    }
    fn log_end_offset(&self) -> i64 {
        self.inner.log_end_offset()
    }
    fn append(&mut self, batches: Bytes, info: &AppendedBatches) -> log::LogResult<()> {
        if std::mem::take(&mut self.roll_next) {
            self.rolled = Some(info.first_offset);
        }
        self.inner.append(batches, info)
    }
    fn read(
        &self,
        start: i64,
        max: usize,
        max_offset: i64,
        min_one: bool,
    ) -> log::LogResult<LogRead> {
        self.inner.read(start, max, max_offset, min_one)
    }
    fn offset_for_timestamp(&self, ts: i64) -> log::LogResult<Option<TimestampOffset>> {
        self.inner.offset_for_timestamp(ts)
    }
    fn max_timestamp_offset(&self) -> log::LogResult<Option<TimestampOffset>> {
        self.inner.max_timestamp_offset()
    }
    fn advance_log_start_offset(&mut self, offset: i64) -> log::LogResult<()> {
        self.inner.advance_log_start_offset(offset)
    }
    fn truncate_to(&mut self, offset: i64) -> log::LogResult<()> {
        self.inner.truncate_to(offset)
    }
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> log::LogResult<()> {
        self.inner.truncate_fully_and_start_at(offset)
    }
    fn assign_epoch_start_offset(&mut self, epoch: i32, start: i64) -> log::LogResult<()> {
        self.inner.assign_epoch_start_offset(epoch, start)
    }
    fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.inner.epoch_entries()
    }
    fn flush(&mut self) -> log::LogResult<()> {
        self.inner.flush()
    }
    fn recovery_point(&self) -> i64 {
        self.inner.recovery_point()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn delete(&mut self) -> log::LogResult<()> {
        self.inner.delete()
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
    fn take_roll_flush(&mut self) -> Option<i64> {
        self.rolled.take()
    }
    fn producer_snapshot_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.dir.clone())
    }
}

/// An idempotent producer's batch: producer id / epoch / base sequence set, CRC redone.
fn idempotent_batch(values: &[&[u8]], producer_id: i64, base_sequence: i32) -> Bytes {
    let mut b = BytesMut::from(&batch(values, NOW)[..]);
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

fn rolling_leader(log: RollingLog) -> Partition<RollingLog> {
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        1,
        log,
        PartitionConfig::default(),
        NOW,
    );
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 5,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        },
        NOW,
    )
    .unwrap();
    p
}

#[test]
fn a_segment_roll_writes_a_producer_snapshot_named_by_the_roll_offset_and_recovery_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = rolling_leader(RollingLog {
        inner: MemoryLog::new(),
        dir: dir.path().to_path_buf(),
        roll_next: false,
        rolled: None,
    });
    p.append_as_leader(&idempotent_batch(&[b"a", b"b", b"c"], 7, 0), 1, NOW)
        .unwrap();
    let snapshot = dir.path().join("00000000000000000003.snapshot");
    assert!(!snapshot.exists());
    p.log_mut().roll_next = true;
    let out = p
        .append_as_leader(&idempotent_batch(&[b"d"], 8, 0), 1, NOW)
        .unwrap();
    assert_eq!(out.base_offset, 3);
    assert!(snapshot.exists(), "snapshot at the roll offset");
    // The roll's flush is handed to the actor once.
    assert_eq!(p.take_roll_flush(), Some(3));
    assert_eq!(p.take_roll_flush(), None);

    // Recovery: the log lost everything below the roll (as if that segment were deleted), so
    // only the snapshot still knows producer 7; producer 8 is replayed from the log after it.
    let mut log = p.into_log();
    log.advance_log_start_offset(3).unwrap();
    let reopened = Partition::new(
        TopicPartition::new("t", 0),
        1,
        log,
        PartitionConfig::default(),
        NOW,
    );
    let mut known: Vec<i64> = reopened
        .producer_state()
        .entries()
        .iter()
        .map(|e| e.producer_id)
        .collect();
    known.sort();
    assert_eq!(known, vec![7, 8]);

    // Without the snapshot nothing would know it.
    let log = reopened.into_log();
    std::fs::remove_file(&snapshot).unwrap();
    let without = Partition::new(
        TopicPartition::new("t", 0),
        1,
        log,
        PartitionConfig::default(),
        NOW,
    );
    let known: Vec<i64> = without
        .producer_state()
        .entries()
        .iter()
        .map(|e| e.producer_id)
        .collect();
    assert_eq!(known, vec![8]);
}

// ---------------------------------------------------------------------------------------------
// Replication: the leader's follower states and ISR, the follower's appends and truncation.

fn replicated_leader(isr: &[i32]) -> Partition<MemoryLog> {
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        1,
        MemoryLog::new(),
        PartitionConfig::default(),
        NOW,
    );
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 3,
            partition_epoch: 7,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
        },
        NOW,
    )
    .unwrap();
    p
}

fn follower_of(leader: i32, epoch: i32) -> Partition<MemoryLog> {
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        2,
        MemoryLog::new(),
        PartitionConfig::default(),
        NOW,
    );
    p.become_follower(&PartitionAssignment {
        leader,
        leader_epoch: epoch,
        partition_epoch: 0,
        replicas: vec![1, 2],
        isr: vec![1, 2],
    });
    p
}

/// Leader 1 alone in the ISR of replicas [1, 2, 3], with min.insync.replicas=2.
fn leader_alone_under_min_isr_2() -> Partition<MemoryLog> {
    let mut p = replicated_leader(&[1]);
    p.set_config(PartitionConfig {
        min_insync_replicas: 2,
        ..PartitionConfig::default()
    });
    p
}

/// Appends `records` as the answer to a fetch sent from the follower's current position.
fn follow(
    f: &mut Partition<MemoryLog>,
    records: Bytes,
    leader_high_watermark: i64,
    leader_log_start_offset: i64,
) -> Result<FollowerPosition, PartitionError> {
    let at = f.follower_position().unwrap_or(FollowerPosition {
        log_end_offset: 0,
        log_start_offset: 0,
        last_fetched_epoch: -1,
        high_watermark: 0,
        leader_epoch: -1,
    });
    f.append_as_follower(
        records,
        leader_high_watermark,
        leader_log_start_offset,
        &at,
        NOW,
    )
}

/// The leader's bytes from `offset` on, as a Fetch would carry them.
fn leader_bytes(p: &mut Partition<MemoryLog>, offset: i64) -> Bytes {
    p.read(&ReadParams {
        replica_id: 2,
        ..consumer_read(offset, 1 << 20)
    })
    .unwrap()
    .records
    .to_bytes()
    .unwrap()
}

#[test]
fn high_watermark_is_the_minimum_of_the_isr_and_acks_all_waits_for_it() {
    let mut p = replicated_leader(&[1, 2, 3]);
    let a = p
        .append_as_leader(&batch(&[b"a", b"b"], NOW), -1, NOW)
        .unwrap();
    assert_eq!((a.last_offset, a.high_watermark), (1, 0));
    p.record_follower_fetch(2, 2, 2, NOW, true, -1, 0);
    assert_eq!(p.high_watermark(), 0, "follower 3 has not fetched");
    p.record_follower_fetch(3, 1, 2, NOW, true, -1, 0);
    assert_eq!(p.high_watermark(), 1);
    p.record_follower_fetch(3, 2, 2, NOW, true, -1, 0);
    assert_eq!(p.high_watermark(), 2);
    assert!(p.take_hw_moved_by_fetch());
}

#[test]
fn a_caught_up_follower_joins_the_isr_one_change_at_a_time() {
    let mut p = replicated_leader(&[1]);
    p.append_as_leader(&batch(&[b"a"], NOW), 1, NOW).unwrap();
    assert_eq!(p.high_watermark(), 1, "ISR {{1}} commits alone");
    // Behind the high watermark: not yet.
    assert_eq!(p.record_follower_fetch(2, 0, 1, NOW, true, 41, 0), None);
    let change = p
        .record_follower_fetch(2, 1, 1, NOW, true, 42, 0)
        .expect("expansion");
    // Each member with the broker epoch it last fetched with (KIP-903); the leader's own is
    // filled in from the metadata when the request is built.
    assert_eq!(
        change,
        IsrChange {
            leader_epoch: 3,
            partition_epoch: 7,
            new_isr: vec![1, 2],
            broker_epochs: vec![-1, 42],
        }
    );
    // While it is pending nothing else is proposed.
    assert_eq!(p.record_follower_fetch(3, 1, 1, NOW, true, -1, 0), None);
    assert_eq!(p.pending_isr(), Some(&change));
    // Committed: adopted with the controller's partition epoch.
    p.complete_isr_change(
        &change,
        IsrChangeOutcome::Committed {
            leader_epoch: 3,
            partition_epoch: 8,
            isr: vec![1, 2],
        },
    );
    assert_eq!(p.isr(), &[1, 2]);
    assert_eq!(p.pending_isr(), None);
    // A failed proposal clears too, so the next fetch proposes again.
    let next = p
        .record_follower_fetch(3, 1, 1, NOW, true, -1, 0)
        .expect("expansion of 3");
    assert_eq!(next.new_isr, vec![1, 2, 3]);
    assert_eq!(next.partition_epoch, 8);
    p.complete_isr_change(
        &next,
        IsrChangeOutcome::Failed(errors::NOT_LEADER_OR_FOLLOWER),
    );
    assert_eq!(p.isr(), &[1, 2]);
    assert!(p.record_follower_fetch(3, 1, 1, NOW, true, -1, 0).is_some());
}

#[test]
fn an_ineligible_follower_is_not_proposed_but_still_moves_the_high_watermark() {
    let mut p = replicated_leader(&[1, 2]);
    p.append_as_leader(&batch(&[b"a"], NOW), 1, NOW).unwrap();
    // 3 is caught up but fenced or shutting down: no AlterPartition for it...
    assert_eq!(p.record_follower_fetch(3, 1, 1, NOW, false, -1, 0), None);
    assert_eq!(p.pending_isr(), None);
    // ...while an ISR member's fetch still commits.
    assert_eq!(p.record_follower_fetch(2, 1, 1, NOW, false, -1, 0), None);
    assert_eq!(p.high_watermark(), 1);
    // Once eligible again, the next fetch proposes it.
    let change = p
        .record_follower_fetch(3, 1, 1, NOW, true, -1, 0)
        .expect("expansion");
    assert_eq!(change.new_isr, vec![1, 2, 3]);
}

#[test]
fn a_lagging_follower_leaves_the_isr_after_the_max_lag() {
    let mut p = replicated_leader(&[1, 2, 3]);
    p.append_as_leader(&batch(&[b"a"], NOW), 1, NOW).unwrap();
    // 2 keeps up; 3 never fetches after the leadership began.
    p.record_follower_fetch(2, 1, 1, NOW + 5_000, true, -1, 0);
    assert_eq!(p.maybe_shrink_isr(NOW + 10_000, 30_000), None);
    let change = p.maybe_shrink_isr(NOW + 30_001, 30_000).expect("shrink");
    assert_eq!(change.new_isr, vec![1, 2]);
    // While the shrink is pending the high watermark still waits for 3 (maximal ISR).
    p.record_follower_fetch(2, 1, 1, NOW + 30_002, true, -1, 0);
    assert_eq!(p.high_watermark(), 0);
    let moved = p.complete_isr_change(
        &change,
        IsrChangeOutcome::Committed {
            leader_epoch: 3,
            partition_epoch: 8,
            isr: vec![1, 2],
        },
    );
    assert!(moved);
    assert_eq!(p.high_watermark(), 1);
}

#[test]
fn acks_all_needs_min_insync_replicas_in_the_isr() {
    let mut p = leader_alone_under_min_isr_2();
    let e = p
        .append_as_leader(&batch(&[b"a"], NOW), -1, NOW)
        .unwrap_err();
    assert_eq!(e.code(), errors::NOT_ENOUGH_REPLICAS);
    p.append_as_leader(&batch(&[b"a"], NOW), 1, NOW).unwrap();
}

#[test]
fn min_insync_replicas_is_capped_by_the_replication_factor() {
    // min.insync.replicas=2 on a topic with one replica: acks=all is taken, as in Kafka
    // (effectiveMinIsr).
    let mut p = Partition::new(
        TopicPartition::new("t", 0),
        1,
        MemoryLog::new(),
        PartitionConfig {
            min_insync_replicas: 2,
            ..Default::default()
        },
        NOW,
    );
    p.become_leader(
        &PartitionAssignment {
            leader: 1,
            leader_epoch: 3,
            partition_epoch: 7,
            replicas: vec![1],
            isr: vec![1],
        },
        NOW,
    )
    .unwrap();
    assert_eq!(p.effective_min_isr(), 1);
    p.append_as_leader(&batch(&[b"a"], NOW), -1, NOW).unwrap();
}

#[test]
fn a_follower_appends_the_leaders_batches_as_they_are() {
    let mut l = replicated_leader(&[1, 2]);
    l.append_as_leader(&batch(&[b"a", b"b"], NOW), 1, NOW)
        .unwrap();
    l.append_as_leader(&batch(&[b"c"], NOW), 1, NOW).unwrap();
    let bytes = leader_bytes(&mut l, 0);
    let mut f = follower_of(1, 3);
    let pos = follow(&mut f, bytes.clone(), 2, 0).unwrap();
    assert_eq!(pos.log_end_offset, 3);
    assert_eq!(pos.last_fetched_epoch, 3);
    assert_eq!(
        pos.high_watermark, 2,
        "the leader's high watermark, capped by the log end"
    );
    // Byte for byte what the leader has.
    let copied = f
        .log()
        .read(0, 1 << 20, 3, true)
        .unwrap()
        .records
        .to_bytes()
        .unwrap();
    assert_eq!(copied, bytes);
    // The same bytes again (a retried fetch) append nothing.
    assert_eq!(follow(&mut f, bytes, 3, 0).unwrap().log_end_offset, 3);
    // A corrupted batch is refused whole.
    let mut bad = BytesMut::from(&leader_bytes(&mut l, 0)[..]);
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    let mut g = follower_of(1, 3);
    let e = follow(&mut g, bad.freeze(), 0, 0).unwrap_err();
    assert_eq!(e.code(), errors::CORRUPT_MESSAGE);
    assert_eq!(g.log_end_offset(), 0);
    // Leaders do not take follower appends.
    assert_eq!(
        follow(&mut l, Bytes::new(), 0, 0).unwrap_err().code(),
        errors::NOT_LEADER_OR_FOLLOWER
    );
}

#[test]
fn an_answer_to_a_fetch_from_an_older_position_is_dropped() {
    let mut l = replicated_leader(&[1, 2]);
    l.append_as_leader(&batch(&[b"a", b"b"], NOW), 1, NOW)
        .unwrap();
    let mut f = follower_of(1, 3);
    let sent_from = f.follower_position().unwrap();
    // Meanwhile the replica moved on: another answer was applied...
    follow(&mut f, leader_bytes(&mut l, 0), 2, 0).unwrap();
    l.append_as_leader(&batch(&[b"c"], NOW), 1, NOW).unwrap();
    let late = leader_bytes(&mut l, 0);
    let pos = f
        .append_as_follower(late.clone(), 3, 0, &sent_from, NOW)
        .unwrap();
    assert_eq!(pos.log_end_offset, 2, "the stale answer is not applied");
    // ...or the leader epoch changed (a new leader: its log may differ).
    let mut g = follower_of(1, 3);
    let mut old_epoch = g.follower_position().unwrap();
    old_epoch.leader_epoch = 2;
    let pos = g.append_as_follower(late, 3, 0, &old_epoch, NOW).unwrap();
    assert_eq!(pos.log_end_offset, 0);
}

#[test]
fn an_empty_follower_log_starting_inside_the_first_batch_starts_at_the_batch() {
    // DeleteRecords moved the leader's log start to 1, inside its batch [0, 2]; a follower
    // reset to the leader's range starts at 1 and is then sent the whole batch.
    let mut l = replicated_leader(&[1, 2]);
    l.append_as_leader(&batch(&[b"a", b"b", b"c"], NOW), 1, NOW)
        .unwrap();
    let mut f = follower_of(1, 3);
    f.reset_to_leader_range(1, 3, NOW).unwrap();
    assert_eq!(f.log_end_offset(), 1);
    let pos = follow(&mut f, leader_bytes(&mut l, 0), 3, 1).unwrap();
    assert_eq!(pos.log_end_offset, 3);
    assert_eq!(
        pos.log_start_offset, 1,
        "the leader's log start offset, not the batch's"
    );
    // A log that is not empty refuses a batch reaching below its end, without a storage
    // failure (which would take the log dir offline).
    let mut g = follower_of(1, 3);
    follow(&mut g, leader_bytes(&mut l, 0), 3, 0).unwrap();
    let mut overlap = BytesMut::from(&batch(&[b"d", b"e"], NOW)[..]);
    overlap[0..8].copy_from_slice(&2i64.to_be_bytes());
    overlap[12..16].copy_from_slice(&3i32.to_be_bytes());
    let e = follow(&mut g, overlap.freeze(), 3, 0).unwrap_err();
    assert!(!matches!(e, PartitionError::Storage(_)), "{e:?}");
    assert_eq!(g.log_end_offset(), 3);
}

#[test]
fn a_diverged_follower_truncates_to_the_leaders_epoch_end() {
    // The follower has offsets 0..3 of epoch 3 (replicated) and 3..5 of epoch 4, written while
    // it led in epoch 4 and never replicated; the new leader (epoch 5) never had epoch 4, its
    // epoch 3 ended at 3.
    let mut f = follower_of(1, 5);
    let mut l = replicated_leader(&[1, 2]);
    l.append_as_leader(&batch(&[b"a", b"b", b"c"], NOW), 1, NOW)
        .unwrap();
    follow(&mut f, leader_bytes(&mut l, 0), 3, 0).unwrap();
    // The follower's own tail: offsets 3..5 written as leader of epoch 4.
    f.log_mut().assign_epoch_start_offset(4, 3).unwrap();
    let mut extra = BytesMut::from(&batch(&[b"d", b"e"], NOW)[..]);
    // base offset 3, partition leader epoch 4 (header fields before the CRC'd range)
    extra[0..8].copy_from_slice(&3i64.to_be_bytes());
    extra[12..16].copy_from_slice(&4i32.to_be_bytes());
    follow(&mut f, extra.freeze(), 3, 0).unwrap();
    assert_eq!(f.log_end_offset(), 5);
    assert_eq!(f.follower_position().unwrap().last_fetched_epoch, 4);
    // The new leader says: your epoch 4 ends, for me, at 3 (my epoch 3 ended there).
    let pos = f.truncate_to_diverging_epoch(3, 3, NOW).unwrap();
    assert_eq!(pos.log_end_offset, 3);
    assert_eq!(pos.last_fetched_epoch, 3);
    // Out of range: a leader whose log starts past ours restarts us there.
    let pos = f.reset_to_leader_range(10, 12, NOW).unwrap();
    assert_eq!((pos.log_start_offset, pos.log_end_offset), (10, 10));
}

#[test]
fn the_high_watermark_stays_while_the_isr_is_under_the_minimum() {
    let mut p = leader_alone_under_min_isr_2();
    // acks=1 still appends, but nothing commits on the leader alone.
    p.append_as_leader(&batch(&[b"a"], NOW), 1, NOW).unwrap();
    assert!(p.is_under_min_isr());
    assert_eq!(p.high_watermark(), 0);
    // 2 catches up and joins: the ISR is back at the minimum and the high watermark moves.
    let change = p
        .record_follower_fetch(2, 1, 1, NOW, true, -1, 0)
        .expect("expansion");
    assert_eq!(
        p.high_watermark(),
        0,
        "still under min ISR while the expansion is pending"
    );
    let moved = p.complete_isr_change(
        &change,
        IsrChangeOutcome::Committed {
            leader_epoch: 3,
            partition_epoch: 8,
            isr: vec![1, 2],
        },
    );
    assert!(moved);
    assert_eq!(p.high_watermark(), 1);
}

#[test]
fn a_transaction_marker_under_min_isr_is_refused_before_it_is_written() {
    let mut p = leader_alone_under_min_isr_2();
    let marker = crate::producer::partition::TxnMarker {
        producer_id: 7,
        producer_epoch: 0,
        commit: true,
        coordinator_epoch: 0,
    };
    let e = p.append_txn_marker(&marker, NOW).unwrap_err();
    assert_eq!(e.code(), errors::NOT_ENOUGH_REPLICAS);
    assert_eq!(p.log_end_offset(), 0);
}

fn scope(followers_may_serve: bool, client_rack: Option<(&str, &[(i32, &str)])>) -> ReadScope {
    ReadScope {
        followers_may_serve,
        client_rack: client_rack.map(|(rack, racks)| {
            std::sync::Arc::new(ClientRack {
                rack: rack.into(),
                broker_racks: racks
                    .iter()
                    .map(|(id, r)| (*id, Some(r.to_string())))
                    .collect(),
            })
        }),
        follower_log_start_offset: -1,
        leader_throttled: false,
    }
}

#[test]
fn a_follower_serves_consumers_with_client_metadata_up_to_its_high_watermark() {
    let mut leader = replicated_leader(&[1, 2, 3]);
    for v in [b"a", b"b", b"c"] {
        leader.append_as_leader(&batch(&[v], NOW), -1, NOW).unwrap();
    }
    let mut f = follower_of(1, 3);
    // The follower has all three records but has heard of a high watermark of 2 only.
    follow(&mut f, leader_bytes(&mut leader, 0), 2, 0).unwrap();
    assert_eq!((f.log_end_offset(), f.high_watermark()), (3, 2));

    // Without client metadata (Fetch < v11) only the leader serves.
    assert!(matches!(
        f.read(&consumer_read(0, 1 << 20)),
        Err(PartitionError::NotLeaderOrFollower)
    ));
    let r = f
        .read_scoped(&consumer_read(0, 1 << 20), &scope(true, None))
        .unwrap();
    let offsets: Vec<i64> = headers(&r.records).iter().map(|h| h.base_offset).collect();
    assert_eq!(
        (offsets, r.high_watermark, r.log_end_offset),
        (vec![0, 1], 2, 3)
    );
    // Past its high watermark but within its log: nothing yet, no error (Kafka's
    // `LocalLog.read` above the max offset); past its log end: out of range.
    let r = f
        .read_scoped(&consumer_read(2, 1 << 20), &scope(true, None))
        .unwrap();
    assert!(r.records.is_empty());
    assert!(matches!(
        f.read_scoped(&consumer_read(4, 1 << 20), &scope(true, None)),
        Err(PartitionError::OffsetOutOfRange { .. })
    ));
    // Epoch checks still apply: a consumer on an older epoch is fenced.
    let stale = ReadParams {
        current_leader_epoch: 2,
        ..consumer_read(0, 1 << 20)
    };
    assert!(matches!(
        f.read_scoped(&stale, &scope(true, None)),
        Err(PartitionError::FencedLeaderEpoch { .. })
    ));
    // A follower never points consumers elsewhere.
    let racks: &[(i32, &str)] = &[(1, "a"), (2, "b"), (3, "b")];
    let r = f
        .read_scoped(&consumer_read(0, 1 << 20), &scope(true, Some(("a", racks))))
        .unwrap();
    assert_eq!(r.preferred_read_replica, -1);
}

#[test]
fn the_leader_points_a_consumer_at_an_in_sync_follower_of_its_rack() {
    let mut p = replicated_leader(&[1, 2, 3]);
    p.append_as_leader(&batch(&[b"a", b"b"], NOW), -1, NOW)
        .unwrap();
    let racks: &[(i32, &str)] = &[(1, "a"), (2, "b"), (3, "c")];
    let in_rack = |rack| scope(true, Some((rack, racks)));
    // Neither follower has fetched: no candidate holds offset 1, the leader serves.
    let r = p
        .read_scoped(&consumer_read(1, 1 << 20), &in_rack("b"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, -1);
    assert_eq!(r.high_watermark, 0);

    p.record_follower_fetch(2, 2, 2, NOW, true, -1, 0);
    p.record_follower_fetch(3, 1, 2, NOW, true, -1, 0);
    // Rack b: follower 2 holds offset 1; the read is skipped, the leader's offsets given.
    let r = p
        .read_scoped(&consumer_read(1, 1 << 20), &in_rack("b"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, 2);
    assert!(r.records.is_empty());
    assert_eq!((r.high_watermark, r.last_stable_offset), (1, 1));
    // Rack c: follower 3 fetched from 1, so its log ends at 1: it is offered for offsets up
    // to 1 (there the consumer waits on it as it would on the leader), not for 2.
    let r = p
        .read_scoped(&consumer_read(1, 1 << 20), &in_rack("c"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, 3);
    let r = p
        .read_scoped(&consumer_read(2, 1 << 20), &in_rack("c"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, -1);
    // The leader's own rack, an unknown rack, or a follower fetch: the leader serves.
    for rack in ["a", "z"] {
        let r = p
            .read_scoped(&consumer_read(0, 1 << 20), &in_rack(rack))
            .unwrap();
        assert_eq!(r.preferred_read_replica, -1, "{rack}");
    }
    let follower_fetch = ReadParams {
        replica_id: 3,
        ..consumer_read(1, 1 << 20)
    };
    let r = p.read_scoped(&follower_fetch, &in_rack("c")).unwrap();
    assert_eq!(r.preferred_read_replica, -1);

    // A follower out of the ISR is not offered, however far it got.
    let mut p = replicated_leader(&[1, 3]);
    p.append_as_leader(&batch(&[b"a"], NOW), -1, NOW).unwrap();
    p.record_follower_fetch(2, 1, 1, NOW, false, -1, 0);
    let r = p
        .read_scoped(&consumer_read(0, 1 << 20), &in_rack("b"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, -1);
    // Nor one whose log starts after the fetch offset.
    let mut p = replicated_leader(&[1, 2, 3]);
    p.append_as_leader(&batch(&[b"a", b"b"], NOW), -1, NOW)
        .unwrap();
    p.record_follower_fetch(2, 2, 2, NOW, true, -1, 1);
    let r = p
        .read_scoped(&consumer_read(0, 1 << 20), &in_rack("b"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, -1);
    let r = p
        .read_scoped(&consumer_read(1, 1 << 20), &in_rack("b"))
        .unwrap();
    assert_eq!(r.preferred_read_replica, 2);
}

#[test]
fn a_leader_throttle_holds_back_only_followers_outside_the_isr() {
    // Replicas [1, 2, 3], ISR [1, 2]: 3 is catching up (a reassignment's new replica).
    let mut p = replicated_leader(&[1, 2]);
    p.append_as_leader(&batch(&[b"a", b"b"], NOW), -1, NOW)
        .unwrap();
    let throttled = ReadScope {
        leader_throttled: true,
        ..ReadScope::default()
    };
    let fetch = |replica_id| ReadParams {
        replica_id,
        ..consumer_read(0, 1 << 20)
    };
    let r = p.read_scoped(&fetch(3), &throttled).unwrap();
    assert!(
        r.records.is_empty(),
        "held back while the quota is exceeded"
    );
    assert_eq!(
        r.log_end_offset, 2,
        "the answer still tells it where the leader is"
    );
    assert!(r.held_back, "its long poll must not wait on this partition");
    let free = p.read_scoped(&fetch(3), &ReadScope::default()).unwrap();
    assert!(!free.records.is_empty() && !free.held_back);
    // An ISR member is never held back: a throttle must not shrink the ISR.
    let in_sync = p.read_scoped(&fetch(2), &throttled).unwrap();
    assert!(!in_sync.records.is_empty() && !in_sync.held_back);
}
