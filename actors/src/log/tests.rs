//! Unit tests of the log as a whole (segments, roll, read, lookups, truncation, retention,
//! flush, recovery). Index, checkpoint and epoch tests sit next to their modules.

use std::fs;
use std::path::Path;

use super::segment::{
    segment_file, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
};
use super::testing::{build_batch, simple_batch, TestRecord};
use super::*;

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 1024,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(&dir.join("t-0"), config, 0, 0, false, 0).unwrap()
}

/// Appends `n` batches of `per` records with 100-byte values; timestamps = offset * 10.
fn fill(log: &mut Log, n: usize, per: usize, epoch: i32) {
    for _ in 0..n {
        let o = log.log_end_offset();
        log.append(&simple_batch(o, epoch, per, 100, o * 10), 0)
            .unwrap();
    }
}

/// Every batch of `[from, ..)` via read(), as (base offset, last offset).
fn read_all(log: &Log, from: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, None, true).unwrap();
        let Some(slice) = info.records.filter(|s| s.len > 0) else {
            break;
        };
        let bytes = read_slice(&slice).unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = kactor_protocol::records::BatchHeader::parse(&bytes[pos..]).unwrap();
            kactor_protocol::records::verify_crc(&bytes[pos..pos + h.total_size()]).unwrap();
            out.push((h.base_offset, h.last_offset()));
            pos += h.total_size();
            next = h.next_offset();
        }
        assert_eq!(pos, bytes.len(), "slices hold whole batches only");
    }
    out
}

#[test]
fn append_read_and_sparse_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    fill(&mut log, 50, 3, 0);
    assert_eq!(log.log_end_offset(), 150);
    let batches = read_all(&log, 0);
    assert_eq!(batches.len(), 50);
    assert_eq!(batches[10], (30, 32));
    // Reading from inside a batch starts at that batch.
    let info = log.read(31, 1, None, true).unwrap();
    assert_eq!(info.first_batch_base_offset, Some(30));
    assert!(
        info.size() > 0,
        "min_one_message returns the first batch whole"
    );
    let info = log.read(31, 1, None, false).unwrap();
    assert_eq!(
        info.size(),
        0,
        "without min_one_message a too-small budget returns nothing"
    );
    // Upper bound: nothing at or past max_offset.
    assert_eq!(read_all_bounded(&log, 0, 30).last().unwrap().1, 29);
    // Index: one entry per ~1 KiB of batches, offsets = batch last offsets.
    let seg = log.active_segment();
    let idx = seg.offset_index().unwrap();
    assert!(idx.entries() > 5);
    for i in 0..idx.entries() {
        let e = idx.entry(i);
        let b = seg.translate_offset(e.offset, 0).unwrap().unwrap();
        assert_eq!(
            (b.header.last_offset(), b.position),
            (e.offset, e.position as u64)
        );
    }
    // Errors.
    assert!(matches!(
        log.read(151, 100, None, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(log.read(150, 100, None, true).unwrap().records.is_none());
    assert!(matches!(
        log.append(&simple_batch(10, 0, 1, 10, 0), 0),
        Err(LogError::InvalidOffset(_))
    ));
}

fn read_all_bounded(log: &Log, from: i64, bound: i64) -> Vec<(i64, i64)> {
    let info = log.read(from, 1 << 20, Some(bound), false).unwrap();
    let bytes = read_slice(info.records.as_ref().unwrap()).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = kactor_protocol::records::BatchHeader::parse(&bytes[pos..]).unwrap();
        out.push((h.base_offset, h.last_offset()));
        pos += h.total_size();
    }
    out
}

#[test]
fn size_limits_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            max_message_bytes: 500,
            ..small_config()
        },
    );
    assert!(matches!(
        log.append(&simple_batch(0, 0, 10, 100, 0), 0),
        Err(LogError::RecordTooLarge { .. })
    ));
    // A follower takes what its leader accepted (Kafka's `ignoreRecordSize`).
    let appended = log
        .append_as_follower(&simple_batch(0, 0, 10, 100, 0), 0)
        .unwrap();
    assert_eq!(log.log_end_offset(), 10, "{appended:?}");
    let mut log2 = open(
        &dir.path().join("x"),
        LogConfig {
            segment_bytes: 300,
            ..small_config()
        },
    );
    assert!(matches!(
        log2.append(&simple_batch(0, 0, 10, 100, 0), 0),
        Err(LogError::RecordBatchTooLarge { .. })
    ));
}

#[test]
fn rolls_on_segment_bytes_and_reads_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 4000,
            ..small_config()
        },
    );
    fill(&mut log, 40, 3, 0);
    assert!(log.number_of_segments() > 3);
    for seg in log.segments() {
        assert!(seg.size() <= 4000);
    }
    // Rolled segments have trimmed indexes; the active one is preallocated.
    let segs: Vec<_> = log.segments().collect();
    for s in &segs[..segs.len() - 1] {
        assert_eq!(
            fs::metadata(s.offset_index().unwrap().path())
                .unwrap()
                .len() as usize,
            s.offset_index().unwrap().entries() * 8
        );
    }
    assert_eq!(
        fs::metadata(segs.last().unwrap().offset_index().unwrap().path())
            .unwrap()
            .len(),
        4096
    );
    let all = read_all(&log, 0);
    assert_eq!(all.len(), 40);
    assert_eq!(all.last().unwrap().1, 119);
    assert!(segment_file(log.dir(), segs[1].base_offset(), LOG_SUFFIX).exists());
}

#[test]
fn rolls_on_segment_ms_with_jitter_and_on_index_full_and_offset_overflow() {
    let dir = tempfile::tempdir().unwrap();
    // segment.ms: measured from the first batch's timestamp to the new batch's max timestamp.
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_ms: 1000,
            ..small_config()
        },
    );
    log.append(&simple_batch(0, 0, 1, 10, 5_000), 0).unwrap();
    log.append(&simple_batch(1, 0, 1, 10, 5_900), 0).unwrap();
    assert_eq!(log.number_of_segments(), 1);
    let info = log.append(&simple_batch(2, 0, 1, 10, 6_001), 0).unwrap();
    assert_eq!(info.rolled_at, Some(2));
    assert_eq!(log.number_of_segments(), 2);
    // Jitter can only make a roll earlier: with jitter < segment.ms it never delays.
    let mut log = open(
        &dir.path().join("j"),
        LogConfig {
            segment_ms: 1000,
            segment_jitter_ms: 500,
            ..small_config()
        },
    );
    log.append(&simple_batch(0, 0, 1, 10, 0), 0).unwrap();
    log.append(&simple_batch(1, 0, 1, 10, 1001), 0).unwrap();
    assert_eq!(log.number_of_segments(), 2);

    // Offset index full: 2 entries of room.
    let mut log = open(
        &dir.path().join("i"),
        LogConfig {
            segment_index_bytes: 24,
            index_interval_bytes: 0,
            ..small_config()
        },
    );
    fill(&mut log, 10, 1, 0);
    assert!(log.number_of_segments() >= 3);
    assert_eq!(read_all(&log, 0).len(), 10);

    // Relative offset overflow: an offset more than 2^31 above the base starts a new segment.
    let mut log = open(&dir.path().join("o"), small_config());
    log.append(&simple_batch(0, 0, 1, 10, 0), 0).unwrap();
    let far = i32::MAX as i64 + 10;
    let info = log.append(&simple_batch(far, 0, 1, 10, 0), 0).unwrap();
    assert_eq!(info.rolled_at, Some(far));
    assert_eq!(log.active_segment().base_offset(), far);
    assert_eq!(read_all(&log, 0), vec![(0, 0), (far, far)]);
}

#[test]
fn time_index_full_rolls() {
    let dir = tempfile::tempdir().unwrap();
    // 36 bytes: 3 time entries, one reserved for the roll, so 2 usable; offset index has 4.
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_index_bytes: 36,
            index_interval_bytes: 0,
            ..small_config()
        },
    );
    fill(&mut log, 4, 1, 0);
    let first = log.segments().next().unwrap();
    assert!(first.time_index().unwrap().entries() <= 3);
    assert!(log.number_of_segments() >= 2);
}

#[test]
fn timestamp_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 3000,
            ..small_config()
        },
    );
    fill(&mut log, 30, 4, 0); // record at offset o has timestamp o*10 (batch base*10 + i)
    let at = |ts| {
        log.fetch_offset_by_timestamp(ts)
            .unwrap()
            .map(|t| (t.timestamp, t.offset))
    };
    // Record timestamps inside a batch: base_ts + i where base_ts = base*10.
    assert_eq!(at(0), Some((0, 0)));
    assert_eq!(at(401), Some((401, 41)));
    assert_eq!(at(402), Some((402, 42)));
    assert_eq!(at(403), Some((403, 43)));
    assert_eq!(
        at(404),
        Some((440, 44)),
        "no record at 404..439: the next one"
    );
    assert_eq!(at(100_000), None);
    assert_eq!(at(EARLIEST_TIMESTAMP), Some((-1, 0)));
    assert_eq!(at(LATEST_TIMESTAMP), Some((-1, 120)));
    assert_eq!(at(MAX_TIMESTAMP), Some((1163, 119)));
    // Compressed batches are decompressed to find the exact record.
    let o = log.log_end_offset();
    let recs: Vec<TestRecord> = (0..5)
        .map(|i| TestRecord {
            timestamp: 50_000 + i * 7,
            key: None,
            value: vec![1; 50],
        })
        .collect();
    log.append(&build_batch(o, 0, &recs, true), 0).unwrap();
    assert_eq!(
        log.fetch_offset_by_timestamp(50_010)
            .unwrap()
            .map(|t| t.offset),
        Some(o + 2)
    );
    assert_eq!(
        log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
            .unwrap()
            .map(|t| t.offset),
        Some(o + 4)
    );
}

#[test]
fn epoch_cache_follows_appends_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 3, 2, 0);
    fill(&mut log, 3, 2, 2);
    fill(&mut log, 3, 2, 5);
    assert_eq!(log.end_offset_for_epoch(2), (2, 12));
    assert_eq!(log.end_offset_for_epoch(5), (5, 18));
    assert_eq!(log.end_offset_for_epoch(3), (2, 12));
    assert!(
        fs::read_to_string(log.dir().join("leader-epoch-checkpoint"))
            .unwrap()
            .starts_with("0\n3\n0 0\n2 6\n5 12\n")
    );
    log.truncate_to(12, 0).unwrap();
    assert_eq!(log.latest_epoch(), Some(2));
    log.maybe_increment_log_start_offset(7).unwrap();
    assert_eq!(
        log.leader_epoch_cache().entries()[0],
        EpochEntry {
            epoch: 2,
            start_offset: 7
        }
    );
}

#[test]
fn truncate_to_and_fully() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 3000,
            ..small_config()
        },
    );
    fill(&mut log, 30, 2, 0);
    let segs_before = log.number_of_segments();
    assert!(!log.truncate_to(60, 0).unwrap());
    assert!(log.truncate_to(21, 0).unwrap());
    assert_eq!(log.log_end_offset(), 21);
    assert_eq!(
        read_all(&log, 0).last().unwrap(),
        &(18, 19),
        "straddling batch [20,21] removed"
    );
    assert!(log.number_of_segments() < segs_before);
    assert!(log.active_segment().base_offset() <= 20);
    // Appending continues from the new end.
    log.append(&simple_batch(21, 0, 2, 10, 0), 0).unwrap();
    assert_eq!(read_all(&log, 0).last().unwrap(), &(21, 22));
    log.truncate_fully_and_start_at(1000, 0).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.number_of_segments()
        ),
        (1000, 1000, 1)
    );
    assert!(matches!(
        log.read(5, 100, None, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    log.append(&simple_batch(1000, 0, 1, 10, 0), 0).unwrap();
    assert_eq!(read_all(&log, 1000), vec![(1000, 1000)]);
}

#[test]
fn retention_by_start_offset_size_and_time_with_delayed_removal() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 3000,
        file_delete_delay_ms: 1000,
        ..small_config()
    };
    let mut log = open(dir.path(), config.clone());
    fill(&mut log, 40, 2, 0);
    let n = log.number_of_segments();
    fs::write(segment_file(log.dir(), 0, ".snapshot"), b"producer state").unwrap();
    let second_base = log.segments().nth(1).unwrap().base_offset();
    // DeleteRecords: start offset moves, the first segment is deleted once below it and the HW.
    log.maybe_increment_log_start_offset(second_base + 1)
        .unwrap();
    assert!(matches!(
        log.read(0, 100, None, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        log.delete_old_segments(0, 0).unwrap(),
        0,
        "nothing below a zero high watermark"
    );
    assert_eq!(log.delete_old_segments(0, 80).unwrap(), 1);
    assert_eq!(log.number_of_segments(), n - 1);
    assert_eq!(log.log_start_offset(), second_base + 1);
    let deleted = segment_file(log.dir(), 0, &format!("{LOG_SUFFIX}{DELETED_SUFFIX}"));
    assert!(segment_file(log.dir(), 0, ".snapshot.deleted").exists());
    assert!(deleted.exists());
    assert_eq!(log.purge_deleted_segments(500).unwrap(), 0);
    assert!(log.purge_deleted_segments(1000).unwrap() >= 3);
    assert!(!deleted.exists());

    // Size: keep at most ~2 segments' worth.
    let mut log = open(
        &dir.path().join("s"),
        LogConfig {
            retention_bytes: 6000,
            ..config.clone()
        },
    );
    fill(&mut log, 40, 2, 0);
    log.delete_old_segments(0, log.log_end_offset()).unwrap();
    assert!(log.size() <= 6000 + 3000);
    assert!(log.size() >= 6000 - 3000);
    assert_eq!(
        log.log_start_offset(),
        log.segments().next().unwrap().base_offset()
    );

    // Time: all batches have old timestamps; all segments go, a new empty one is rolled at LEO.
    let mut log = open(
        &dir.path().join("r"),
        LogConfig {
            retention_ms: 1000,
            ..config.clone()
        },
    );
    fill(&mut log, 40, 2, 0);
    let leo = log.log_end_offset();
    log.delete_old_segments(1_000_000, leo - 1).unwrap();
    assert_eq!(
        log.number_of_segments(),
        1,
        "the segment holding the high watermark stays"
    );
    assert!(log.active_segment().size() > 0);
    log.delete_old_segments(1_000_000, leo).unwrap();
    assert_eq!(log.number_of_segments(), 1);
    assert_eq!(log.active_segment().size(), 0);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (leo, leo));
    // Recent data is not deleted by time.
    log.append(&simple_batch(leo, 0, 1, 10, 999_999), 0)
        .unwrap();
    assert_eq!(log.delete_old_segments(1_000_000, leo + 1).unwrap(), 0);
}

#[test]
fn flush_advances_the_recovery_point_only_past_flushed_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            flush_messages: 10,
            flush_ms: 5000,
            ..small_config()
        },
    );
    assert_eq!(log.recovery_point(), 0);
    let info = log.append(&simple_batch(0, 0, 4, 10, 0), 0).unwrap();
    assert!(!info.flush_needed);
    assert!(!log.flush_due(10));
    assert!(log.flush_due(5000), "flush.ms");
    let info = log.append(&simple_batch(4, 0, 6, 10, 0), 0).unwrap();
    assert!(info.flush_needed, "flush.messages");
    let task = log.prepare_flush(7).unwrap();
    // The log stays usable while the task runs elsewhere.
    log.append(&simple_batch(10, 0, 1, 10, 0), 0).unwrap();
    std::thread::spawn(move || {
        task.run().unwrap();
        task
    })
    .join()
    .map(|task| log.complete_flush(&task, 100))
    .unwrap();
    assert_eq!(log.recovery_point(), 7);
    log.flush(i64::MAX, 200).unwrap();
    assert_eq!(log.recovery_point(), 11);
    assert!(log.prepare_flush(11).is_none());
}

#[test]
fn flush_syncs_the_directory_only_when_a_new_segment_is_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config());
    log.append(&simple_batch(0, 0, 4, 10, 0), 0).unwrap();
    // The first segment's files are new since the recovery point (0).
    let task = log.prepare_flush(i64::MAX).unwrap();
    assert!(task.syncs_dir());
    task.run().unwrap();
    log.complete_flush(&task, 0);
    // More data in the same segment: only its files, not the directory (Kafka's LocalLog.flush).
    log.append(&simple_batch(4, 0, 4, 10, 0), 0).unwrap();
    let task = log.prepare_flush(i64::MAX).unwrap();
    assert!(!task.syncs_dir());
    task.run().unwrap();
    log.complete_flush(&task, 0);
    // A rolled segment is a new directory entry: the directory is synced again.
    log.roll(0).unwrap();
    log.append(&simple_batch(8, 0, 2, 10, 0), 0).unwrap();
    let task = log.prepare_flush(i64::MAX).unwrap();
    assert!(task.syncs_dir());
}

#[test]
fn unclean_reopen_recovers_from_the_recovery_point_and_cuts_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 3000,
            ..small_config()
        },
    );
    fill(&mut log, 30, 2, 0);
    log.flush(20, 0).unwrap();
    let path = log.dir().to_path_buf();
    let active = log.active_segment().log_path().to_path_buf();
    let size = log.active_segment().size();
    drop(log); // no close: indexes stay preallocated, like a crash
               // Tear the last batch.
    fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(size - 7)
        .unwrap();
    let log = Log::open(&path, small_config(), 0, 20, false, 0).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.segments_recovered >= 1);
    assert!(report.bytes_truncated > 0);
    assert_eq!(log.log_end_offset(), 58);
    assert_eq!(read_all(&log, 0).len(), 29);
}

#[test]
fn clean_shutdown_skips_recovery_and_log_dir_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (ld, logs, _) = LogDir::load(dir.path(), |_| small_config(), 0).unwrap();
    assert!(logs.is_empty() && !ld.had_clean_shutdown());
    let mut log = ld
        .create_log(&TopicPartition::new("my-topic", 2), small_config(), 0)
        .unwrap();
    fill(&mut log, 10, 2, 1);
    log.maybe_increment_log_start_offset(3).unwrap();
    log.assign_topic_id(Uuid([7; 16])).unwrap();
    ld.shutdown(vec![log], 5, 0).unwrap();
    assert!(dir.path().join(".kafka_cleanshutdown").exists());
    assert_eq!(
        fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint")).unwrap(),
        "0\n1\nmy-topic 2 20\n"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("log-start-offset-checkpoint")).unwrap(),
        "0\n1\nmy-topic 2 3\n"
    );
    let idx = dir
        .path()
        .join("my-topic-2")
        .join(format!("{:020}{INDEX_SUFFIX}", 0));
    let entries = fs::metadata(&idx).unwrap().len();
    assert_eq!(entries % 8, 0, "trimmed on close");
    assert!(entries < 4096);

    let (ld, logs, _) = LogDir::load(dir.path(), |_| small_config(), 0).unwrap();
    assert!(ld.had_clean_shutdown());
    assert!(
        !dir.path().join(".kafka_cleanshutdown").exists(),
        "marker consumed"
    );
    let log = &logs[0];
    assert_eq!(log.recovery_report().segments_recovered, 0);
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.recovery_point()
        ),
        (3, 20, 20)
    );
    assert_eq!(log.topic_id(), Some(Uuid([7; 16])));
    assert_eq!(read_all(log, 3).len(), 9);
    // Unclean this time: recovery runs from the checkpointed recovery point.
    drop(logs);
    let (_, logs, _) = LogDir::load(dir.path(), |_| small_config(), 0).unwrap();
    assert_eq!(logs[0].log_end_offset(), 20);
}

#[test]
fn stray_files_and_interrupted_swap_are_finished_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 3000,
            ..small_config()
        },
    );
    fill(&mut log, 30, 2, 0);
    let path = log.dir().to_path_buf();
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    log.close().unwrap();
    fs::write(path.join("00000000000000000005.log.deleted"), b"junk").unwrap();
    fs::write(path.join("00000000000000000005.index.cleaned"), b"junk").unwrap();
    fs::write(path.join("00000000000000099999.index"), b"orphan").unwrap();
    // A "cleaned" replacement of the first two segments, as a swap file: same data re-written.
    let mut swap = Vec::new();
    let mut o = 0;
    while o < bases[2] {
        swap.extend(simple_batch(o, 0, 2, 100, o * 10));
        o += 2;
    }
    fs::write(
        segment_file(&path, 0, &format!("{LOG_SUFFIX}{SWAP_SUFFIX}")),
        &swap,
    )
    .unwrap();
    fs::write(
        segment_file(&path, 0, &format!("{INDEX_SUFFIX}{SWAP_SUFFIX}")),
        b"x",
    )
    .unwrap();
    let log = Log::open(&path, small_config(), 0, 0, true, 0).unwrap();
    let r = log.recovery_report();
    assert_eq!(r.swaps_completed, 1);
    assert!(r.stray_files_removed >= 4);
    assert!(
        !segment_file(&path, bases[1], LOG_SUFFIX).exists(),
        "replaced by the swap"
    );
    assert_eq!(log.segments().next().unwrap().base_offset(), 0);
    assert_eq!(read_all(&log, 0).len(), 30);
    assert!(!path.join("00000000000000099999.index").exists());
    assert!(
        segment_file(&path, 0, TIME_INDEX_SUFFIX).exists(),
        "rebuilt indexes"
    );
}

#[test]
fn topic_deletion_renames_the_dir_the_kafka_way() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 2, 1, 0);
    let to = log.rename_for_deletion().unwrap();
    let name = to.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with("t-0.") && name.ends_with("-delete"),
        "{name}"
    );
    assert_eq!(name.len(), "t-0.".len() + 32 + "-delete".len());
    let (_, logs, doomed) = LogDir::load(dir.path(), |_| small_config(), 0).unwrap();
    assert!(logs.is_empty());
    assert_eq!(doomed, vec![to.clone()]);
    remove_log_dir(&to).unwrap();
    assert!(!to.exists());
    let long = TopicPartition::new("x".repeat(249), 7);
    assert!(delete_dir_name(&long).len() <= 255);
}

#[test]
fn corrupt_index_below_recovery_point_is_rebuilt_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 3000,
            ..small_config()
        },
    );
    fill(&mut log, 20, 2, 0);
    let path = log.dir().to_path_buf();
    let idx_path = log
        .segments()
        .next()
        .unwrap()
        .offset_index_path()
        .to_path_buf();
    let good = fs::read(&idx_path).unwrap();
    log.flush(i64::MAX, 0).unwrap();
    log.close().unwrap();
    // Point the last entry at a wrong position.
    let mut bad = fs::read(&idx_path).unwrap();
    let n = bad.len();
    bad[n - 1] ^= 0x10;
    fs::write(&idx_path, &bad).unwrap();
    let log = Log::open(&path, small_config(), 0, 40, false, 0).unwrap();
    assert!(log.recovery_report().indexes_rebuilt >= 1);
    assert_eq!(fs::read(&idx_path).unwrap(), good[..n].to_vec());
    assert_eq!(read_all(&log, 0).len(), 20);
}

#[test]
fn preallocate_sizes_new_segments_up_front_and_trims_them_on_roll_close_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4000,
        preallocate: true,
        ..small_config()
    };
    let mut log = open(dir.path(), config.clone());
    let len = |p: &Path| fs::metadata(p).unwrap().len();
    let first = log.active_segment().log_path().to_path_buf();
    assert_eq!(len(&first), 4000, "a new segment file has segment.bytes");
    assert_eq!(log.size(), 0);
    fill(&mut log, 40, 3, 0);
    let segs: Vec<_> = log.segments().collect();
    assert!(segs.len() > 3);
    // Rolled segments were cut back to their data; the active one is still preallocated.
    for s in &segs[..segs.len() - 1] {
        assert_eq!(len(s.log_path()), s.size());
    }
    let active = segs.last().unwrap();
    assert_eq!(len(active.log_path()), 4000);
    assert!(active.size() < 4000);
    assert_eq!(read_all(&log, 0).len(), 40);
    let leo = log.log_end_offset();
    let active_path = active.log_path().to_path_buf();

    // A crash leaves the active file preallocated: recovery cuts the zeros after the data.
    drop(log);
    let mut log = open(dir.path(), config.clone());
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(len(&active_path), log.active_segment().size());
    assert_eq!(read_all(&log, 0).len(), 40);
    fill(&mut log, 2, 3, 0);
    log.close().unwrap();

    // A clean close trims the active segment too, and the log reopens as written.
    let log = Log::open(&dir.path().join("t-0"), config, 0, leo + 6, true, 0).unwrap();
    for s in log.segments() {
        assert_eq!(len(s.log_path()), s.size());
    }
    assert_eq!(log.log_end_offset(), leo + 6);
    assert_eq!(read_all(&log, 0).len(), 42);
}

#[test]
fn assign_epoch_start_offset_records_the_epoch_before_any_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 2, 3, 0);
    log.assign_epoch_start_offset(3, log.log_end_offset())
        .unwrap();
    assert_eq!(log.latest_epoch(), Some(3));
    let entries: Vec<_> = log
        .leader_epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(entries, vec![(0, 0), (3, 6)]);
    // It is checkpointed at once (a reopen then drops it while no batch of the epoch exists,
    // as Kafka's loader truncates the cache to the log end, until the leader assigns it again).
    let checkpoint = fs::read_to_string(log.dir().join("leader-epoch-checkpoint")).unwrap();
    assert!(checkpoint.lines().any(|l| l == "3 6"), "{checkpoint}");
}

#[test]
fn appends_allocate_no_blocks_past_the_data() {
    use std::os::unix::fs::MetadataExt;
    // Blocks reserved ahead of the appends (fallocate) stalled appends for 50-370 ms while a
    // rolled segment's flush ran (see `LogSegment::append_parts`), so the log file only ever
    // holds blocks for what was written: its data rounded up to a few file-system blocks.
    const SLACK: u64 = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let allocated = |p: &Path| fs::metadata(p).unwrap().blocks() * 512;
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 3, 3, 0);
    let active = log.active_segment();
    assert!(active.size() > 0);
    assert!(
        allocated(active.log_path()) <= active.size() + SLACK,
        "{} bytes allocated for {} of data",
        allocated(active.log_path()),
        active.size()
    );
    fill(&mut log, 600, 3, 0);
    let segs: Vec<_> = log.segments().collect();
    assert!(segs.len() > 3);
    for s in &segs {
        assert!(
            allocated(s.log_path()) <= s.size() + SLACK,
            "segment {} holds {} bytes for {} of data",
            s.base_offset(),
            allocated(s.log_path()),
            s.size()
        );
    }
}

#[test]
fn trimming_a_preallocated_segment_keeps_its_time_of_last_write() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        preallocate: true,
        ..small_config()
    };
    let mut log = open(dir.path(), config);
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let set_past = |p: &Path| {
        fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(past)
            .unwrap()
    };
    let modified = |p: &Path| fs::metadata(p).unwrap().modified().unwrap();

    fill(&mut log, 3, 3, 0);
    let first = log.active_segment().log_path().to_path_buf();
    set_past(&first);
    log.roll(0).unwrap();
    assert_eq!(
        modified(&first),
        past,
        "a roll keeps the rolled segment's time"
    );

    fill(&mut log, 3, 3, 0);
    let second = log.active_segment().log_path().to_path_buf();
    assert_ne!(first, second);
    set_past(&second);
    log.close().unwrap();
    assert_eq!(
        modified(&second),
        past,
        "a close keeps the active segment's time"
    );
}
