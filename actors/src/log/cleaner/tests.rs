//! The cleaner core against real logs in temporary directories: what survives a cleaning, the
//! batch rules, the swap and its crash states, the choice of log and range.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use bytes::Bytes;
use kactor_protocol::records::{
    batches, end_transaction_marker_batch, verify_crc, BatchBuilder, BatchHeader, Compression,
    EndTransactionMarker, NO_SEQUENCE,
};

use super::select::{cleanable_offsets, is_cleanable};
use super::*;
use crate::log::segment::{segment_file, CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX};
use crate::log::{read_slice, Log, LogConfig};

const HOUR: i64 = 3_600_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        delete_retention_ms: HOUR,
        min_cleanable_dirty_ratio: 0.01,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(&dir.join("t-0"), config, 0, 0, false, 0).unwrap()
}

/// One stored record as read back: offset, key, value (None = tombstone), and its batch.
#[derive(Debug, Clone)]
struct Stored {
    offset: i64,
    key: Option<String>,
    value: Option<String>,
    batch: BatchHeader,
}

/// Every batch and record of the log, front to back, with CRCs checked.
fn read_log(log: &Log) -> (Vec<BatchHeader>, Vec<Stored>) {
    let mut headers = Vec::new();
    let mut records = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, None, true).unwrap();
        let Some(slice) = info.records.filter(|s| s.len > 0) else {
            break;
        };
        let bytes = Bytes::from(read_slice(&slice).unwrap());
        for b in batches(bytes) {
            let b = b.unwrap();
            verify_crc(&b.data).unwrap();
            if b.header.last_offset() < next {
                continue;
            }
            for r in b.records().unwrap() {
                let r = r.unwrap();
                let s =
                    |v: &Option<Bytes>| v.as_ref().map(|v| String::from_utf8_lossy(v).into_owned());
                records.push(Stored {
                    offset: r.offset(b.header.base_offset),
                    key: s(&r.key),
                    value: s(&r.value),
                    batch: b.header,
                });
            }
            headers.push(b.header);
            next = b.header.next_offset();
        }
    }
    (headers, records)
}

/// Appends one batch of `(key, value)` records (value None = tombstone) at the log end.
fn append(log: &mut Log, kvs: &[(&str, Option<&str>)], ts: i64) -> (i64, i64) {
    append_with(log, BatchBuilder::new(log.log_end_offset()), kvs, ts)
}

fn append_with(
    log: &mut Log,
    mut b: BatchBuilder,
    kvs: &[(&str, Option<&str>)],
    ts: i64,
) -> (i64, i64) {
    for (k, v) in kvs {
        b.append(ts, Some(k.as_bytes()), v.map(str::as_bytes), &[])
            .unwrap();
    }
    let info = log.append(&b.build().unwrap(), ts).unwrap();
    (info.first_offset, info.last_offset)
}

fn marker(log: &mut Log, pid: i64, commit: bool, ts: i64) -> i64 {
    let m = if commit {
        EndTransactionMarker::commit(0)
    } else {
        EndTransactionMarker::abort(0)
    };
    let o = log.log_end_offset();
    log.append(
        &end_transaction_marker_batch(o, ts, 0, pid, 0, m).unwrap(),
        ts,
    )
    .unwrap();
    o
}

/// One cleaning round as the actor runs it; returns the new checkpoint (None: not cleanable).
fn clean_round(
    log: &mut Log,
    checkpoint: Option<i64>,
    now_ms: i64,
    producers: HashMap<i64, LastRecord>,
    map_memory: usize,
) -> Option<CleanOutcome> {
    let lso = log.log_end_offset();
    let view = log.cleaner_view(lso, producers).unwrap();
    let candidate = log_to_clean(&view, checkpoint, now_ms);
    if !is_cleanable(&candidate, view.config.min_cleanable_dirty_ratio) {
        return None;
    }
    let mut map = OffsetMap::new(map_memory);
    let max = CleanerConfig::default().max_desired_entries(map.slots());
    let outcome = clean_log(&view, &candidate, &mut map, max, now_ms, &mut |_| {}).unwrap();
    let swapped = log
        .replace_with_cleaned(&outcome.cleaned, outcome.generation, now_ms)
        .unwrap();
    assert_eq!(swapped, outcome.cleaned.len());
    Some(outcome)
}

fn latest_values(records: &[Stored]) -> BTreeMap<String, Option<String>> {
    records
        .iter()
        .filter(|r| !r.batch.is_control())
        .map(|r| (r.key.clone().unwrap(), r.value.clone()))
        .collect()
}

/// Ten keys updated round after round over many small segments, then a roll.
fn updates(log: &mut Log, rounds: usize) {
    for round in 0..rounds {
        for k in 0..10 {
            let v = format!("v{round}-{k}");
            append(log, &[(&format!("k{k}"), Some(&v))], 1_000 + round as i64);
        }
    }
    log.roll(0).unwrap();
}

#[test]
fn keeps_the_latest_value_per_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    updates(&mut log, 20);
    let (_, before) = read_log(&log);
    let expected = latest_values(&before);
    let leo = log.log_end_offset();
    let last_offset_before = before.last().unwrap().offset;
    let segments_before = log.number_of_segments();
    let size_before = log.size();

    let outcome = clean_round(&mut log, None, 10_000, HashMap::new(), 1 << 20).unwrap();
    assert_eq!(
        outcome.end_offset, leo,
        "everything before the active segment is cleaned"
    );

    let (headers, after) = read_log(&log);
    assert_eq!(latest_values(&after), expected);
    assert_eq!(after.len(), 10, "one record per key: {after:?}");
    // Each survivor keeps the offset it had.
    for r in &after {
        let orig = before.iter().rfind(|b| b.key == r.key).unwrap();
        assert_eq!((r.offset, &r.value), (orig.offset, &orig.value));
    }
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(headers.last().unwrap().last_offset(), last_offset_before);
    assert!(headers
        .windows(2)
        .all(|w| w[0].last_offset() < w[1].base_offset));
    assert!(
        log.size() < size_before / 10,
        "{} of {size_before}",
        log.size()
    );
    assert_eq!(log.log_start_offset(), 0);
    // The next round groups the segments the first one shrank (by their sizes now).
    assert_eq!(log.number_of_segments(), segments_before);
    append(&mut log, &[("k0", Some("last"))], 5_000);
    log.roll(0).unwrap();
    clean_round(
        &mut log,
        Some(outcome.end_offset),
        10_000,
        HashMap::new(),
        1 << 20,
    )
    .unwrap();
    assert!(
        log.number_of_segments() <= 3,
        "{} segments",
        log.number_of_segments()
    );
    let mut expected = expected;
    expected.insert("k0".into(), Some("last".into()));

    // Reopened after a crash, the cleaned log reads the same (indexes rebuilt or trusted).
    drop(log);
    let log = Log::open(&dir.path().join("t-0"), config(), 0, 0, false, 20_000).unwrap();
    assert_eq!(latest_values(&read_log(&log).1), expected);
}

#[test]
fn a_second_round_only_cleans_new_dirt_and_a_clean_log_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    updates(&mut log, 5);
    let first = clean_round(&mut log, None, 10_000, HashMap::new(), 1 << 20).unwrap();
    // Nothing new: the dirty ratio is 0, below any threshold.
    assert!(clean_round(
        &mut log,
        Some(first.end_offset),
        10_000,
        HashMap::new(),
        1 << 20
    )
    .is_none());
    updates(&mut log, 5);
    let second = clean_round(
        &mut log,
        Some(first.end_offset),
        10_000,
        HashMap::new(),
        1 << 20,
    )
    .unwrap();
    assert_eq!(second.end_offset, log.log_end_offset());
    let (_, after) = read_log(&log);
    assert_eq!(after.len(), 10);
    assert!(after
        .iter()
        .all(|r| r.value.as_deref().unwrap().starts_with("v4-")));
}

#[test]
fn tombstones_stay_until_their_delete_horizon_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append(&mut log, &[("a", Some("1")), ("b", Some("1"))], 1_000);
    append(&mut log, &[("a", None)], 1_001);
    append(&mut log, &[("c", Some("1"))], 1_002);
    log.roll(0).unwrap();
    let now = 50_000;

    let first = clean_round(&mut log, None, now, HashMap::new(), 1 << 20).unwrap();
    let (_, after) = read_log(&log);
    let tomb = after
        .iter()
        .find(|r| r.key.as_deref() == Some("a"))
        .unwrap();
    assert_eq!(
        tomb.value, None,
        "the tombstone is kept, the value it deletes is not"
    );
    assert!(tomb.batch.has_delete_horizon());
    assert_eq!(
        tomb.batch.base_timestamp,
        now + HOUR,
        "horizon = cleaning time + delete.retention.ms"
    );
    assert_eq!(after.len(), 3);

    // More dirt so the log is cleaned again; before the horizon the tombstone stays.
    append(&mut log, &[("c", Some("2"))], 2_000);
    log.roll(0).unwrap();
    let second = clean_round(
        &mut log,
        Some(first.end_offset),
        now + HOUR - 1,
        HashMap::new(),
        1 << 20,
    )
    .unwrap();
    assert!(read_log(&log)
        .1
        .iter()
        .any(|r| r.key.as_deref() == Some("a")));

    append(&mut log, &[("c", Some("3"))], 3_000);
    log.roll(0).unwrap();
    clean_round(
        &mut log,
        Some(second.end_offset),
        now + HOUR,
        HashMap::new(),
        1 << 20,
    )
    .unwrap();
    let (_, after) = read_log(&log);
    assert!(
        after.iter().all(|r| r.key.as_deref() != Some("a")),
        "{after:?}"
    );
    let values = latest_values(&after);
    assert_eq!(values.get("b"), Some(&Some("1".to_string())));
    assert_eq!(values.get("c"), Some(&Some("3".to_string())));
}

#[test]
fn aborted_transactions_go_committed_stay_and_markers_follow_kafkas_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    // pid 1 commits k1, pid 2 aborts k2.
    let o = log.log_end_offset();
    append_with(
        &mut log,
        BatchBuilder::new(o).producer(1, 0, 0).transactional(true),
        &[("k1", Some("committed"))],
        1_000,
    );
    let o = log.log_end_offset();
    let (aborted_first, _) = append_with(
        &mut log,
        BatchBuilder::new(o).producer(2, 0, 0).transactional(true),
        &[("k2", Some("aborted"))],
        1_000,
    );
    append(&mut log, &[("k3", Some("plain"))], 1_000);
    marker(&mut log, 1, true, 1_001);
    let abort_at = marker(&mut log, 2, false, 1_001);
    log.append_aborted_txn(crate::log::AbortedTxn {
        producer_id: 2,
        first_offset: aborted_first,
        last_offset: abort_at,
        last_stable_offset: abort_at,
    })
    .unwrap();
    log.roll(0).unwrap();
    let leo = log.log_end_offset();
    let now = 10_000;

    let first = clean_round(&mut log, None, now, HashMap::new(), 1 << 20).unwrap();
    let (headers, after) = read_log(&log);
    let values = latest_values(&after);
    assert_eq!(values.get("k1"), Some(&Some("committed".to_string())));
    assert_eq!(values.get("k2"), None, "aborted data is removed");
    assert_eq!(values.get("k3"), Some(&Some("plain".to_string())));
    // The commit marker stays (its transaction's batch is still there); so does the abort
    // marker, as the transaction's batch was seen in this round, and with it its index entry.
    let controls: Vec<_> = headers
        .iter()
        .filter(|h| h.is_control())
        .map(|h| h.base_offset)
        .collect();
    assert_eq!(controls, vec![abort_at - 1, abort_at]);
    assert_eq!(log.collect_aborted_transactions(0, leo).len(), 1);
    assert_eq!(log.log_end_offset(), leo);

    // Next round: the abort marker's transaction is empty now: it gets a delete horizon, and
    // after it, it goes. The last batch of a round is always kept, so add some dirt after it.
    append(&mut log, &[("k3", Some("plain2"))], 2_000);
    log.roll(0).unwrap();
    let second = clean_round(
        &mut log,
        Some(first.end_offset),
        now,
        HashMap::new(),
        1 << 20,
    )
    .unwrap();
    let (headers, _) = read_log(&log);
    let abort = headers.iter().find(|h| h.base_offset == abort_at).unwrap();
    assert!(abort.has_delete_horizon() && abort.base_timestamp == now + HOUR);
    append(&mut log, &[("k3", Some("plain3"))], 3_000);
    log.roll(0).unwrap();
    clean_round(
        &mut log,
        Some(second.end_offset),
        now + HOUR,
        HashMap::new(),
        1 << 20,
    )
    .unwrap();
    let (headers, after) = read_log(&log);
    assert!(
        headers.iter().all(|h| h.base_offset != abort_at),
        "{headers:?}"
    );
    assert_eq!(
        latest_values(&after).get("k1"),
        Some(&Some("committed".to_string()))
    );
}

#[test]
fn a_live_producers_last_batch_survives_emptied_and_so_does_the_rounds_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    let o = log.log_end_offset();
    let (_, last) = append_with(
        &mut log,
        BatchBuilder::new(o).producer(7, 3, 0),
        &[("k", Some("old")), ("j", Some("old"))],
        1_000,
    );
    append(&mut log, &[("k", Some("new")), ("j", Some("new"))], 1_001);
    log.roll(0).unwrap();
    let producers = HashMap::from([(
        7,
        LastRecord {
            last_data_offset: Some(last),
            producer_epoch: 3,
        },
    )]);
    clean_round(&mut log, None, 10_000, producers, 1 << 20).unwrap();
    let (headers, after) = read_log(&log);
    let kept = headers
        .iter()
        .find(|h| h.producer_id == 7)
        .expect("the producer's batch stays");
    assert_eq!(
        (kept.records_count, kept.base_offset, kept.last_offset()),
        (0, 0, last)
    );
    assert_eq!((kept.producer_epoch, kept.base_sequence), (3, 0));
    assert_eq!(after.len(), 2);

    // Without the producer, the emptied batch goes.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append_with(
        &mut log,
        BatchBuilder::new(0).producer(7, 3, NO_SEQUENCE.max(0)),
        &[("k", Some("old"))],
        1_000,
    );
    append(&mut log, &[("k", Some("new"))], 1_001);
    log.roll(0).unwrap();
    clean_round(&mut log, None, 10_000, HashMap::new(), 1 << 20).unwrap();
    let (headers, _) = read_log(&log);
    assert_eq!(headers.len(), 1);
}

#[test]
fn compressed_batches_are_rewritten_with_their_codec_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    let kvs: Vec<(String, String)> = (0..6)
        .map(|i| (format!("k{}", i % 3), format!("v{i}")))
        .collect();
    let refs: Vec<(&str, Option<&str>)> = kvs
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    append_with(
        &mut log,
        BatchBuilder::new(0).compression(Compression::Gzip),
        &refs,
        5_000,
    );
    append(&mut log, &[("other", Some("x"))], 5_001);
    log.roll(0).unwrap();
    clean_round(&mut log, None, 10_000, HashMap::new(), 1 << 20).unwrap();
    let (headers, after) = read_log(&log);
    assert_eq!(headers[0].compression().unwrap(), Compression::Gzip);
    assert_eq!(
        (headers[0].base_offset, headers[0].last_offset()),
        (0, 5),
        "last offset kept"
    );
    let offsets: Vec<i64> = after.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![3, 4, 5, 6]);
    assert_eq!(after[0].value.as_deref(), Some("v3"));
    assert_eq!(headers[0].max_timestamp, 5_000);
}

#[test]
fn a_full_offset_map_stops_the_dirty_range_and_the_next_round_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    for i in 0..40 {
        append(&mut log, &[(&format!("key{i}"), Some("v"))], 1_000);
    }
    log.roll(0).unwrap();
    // 20 slots at load factor 0.9: 18 keys per round.
    let first = clean_round(&mut log, None, 10_000, HashMap::new(), 24 * 20).unwrap();
    assert_eq!(first.end_offset, 18);
    let second = clean_round(
        &mut log,
        Some(first.end_offset),
        10_000,
        HashMap::new(),
        24 * 20,
    )
    .unwrap();
    assert_eq!(second.end_offset, 36);
    // Every key is distinct: nothing was lost on the way.
    assert_eq!(read_log(&log).1.len(), 40);
}

#[test]
fn an_abort_past_a_full_maps_end_keeps_its_index_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 1 << 20,
            ..config()
        },
    );
    for i in 0..20 {
        append(&mut log, &[(&format!("key{i}"), Some("v"))], 1_000);
    }
    let o = log.log_end_offset();
    let (aborted_first, _) = append_with(
        &mut log,
        BatchBuilder::new(o).producer(2, 0, 0).transactional(true),
        &[("kx", Some("aborted"))],
        1_000,
    );
    let abort_at = marker(&mut log, 2, false, 1_001);
    let txn = crate::log::AbortedTxn {
        producer_id: 2,
        first_offset: aborted_first,
        last_offset: abort_at,
        last_stable_offset: abort_at,
    };
    log.append_aborted_txn(txn).unwrap();
    log.roll(0).unwrap();
    // The map holds 9 keys: it ends inside the one segment, which is rewritten whole.
    let round = clean_round(&mut log, None, 10_000, HashMap::new(), 24 * 10).unwrap();
    assert!(round.end_offset < aborted_first, "{round:?}");
    // The segment's aborted records go even past the map's end (Kafka collects the aborted
    // transactions of every rewritten segment's full range), and the marker, kept until its
    // delete horizon, keeps its index entry for read_committed readers.
    let (headers, records) = read_log(&log);
    assert!(!records.iter().any(|r| r.key.as_deref() == Some("kx")));
    assert!(headers
        .iter()
        .any(|h| h.is_control() && h.base_offset == abort_at));
    let aborted = log.collect_aborted_transactions(0, log.log_end_offset());
    assert!(
        aborted
            .iter()
            .any(|t| t.producer_id == 2 && t.first_offset == aborted_first),
        "{aborted:?}"
    );
}

#[test]
fn the_range_respects_the_lso_active_segment_and_compaction_lags() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    updates(&mut log, 10);
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    let active = *bases.last().unwrap();
    let view = log.cleaner_view(bases[3] + 1, HashMap::new()).unwrap();
    let offsets = cleanable_offsets(&view, None, 10_000);
    assert_eq!(offsets.first_uncleanable_dirty_offset, bases[3] + 1);
    let c = log_to_clean(&view, None, 10_000);
    assert_eq!(
        c.first_uncleanable_offset, bases[3],
        "the segment holding the LSO is not cleaned"
    );
    assert_eq!(c.clean_bytes, 0);
    // A checkpoint beyond the log end resets to the log start (and asks for a rewrite).
    let view = log
        .cleaner_view(log.log_end_offset(), HashMap::new())
        .unwrap();
    let c = log_to_clean(&view, Some(log.log_end_offset() + 5), 10_000);
    assert!(c.force_update_checkpoint && c.first_dirty_offset == 0);
    assert_eq!(c.first_uncleanable_offset, active);
    assert!((c.cleanable_ratio - 1.0).abs() < 1e-9);

    // min.compaction.lag.ms: segments with records newer than now - lag are not cleaned.
    let mut cfg = config();
    cfg.min_compaction_lag_ms = 500;
    log.update_config(cfg);
    let view = log
        .cleaner_view(log.log_end_offset(), HashMap::new())
        .unwrap();
    // Round r wrote timestamps 1_000 + r; at now = 1_505 rounds >= 6 are too young.
    let c = log_to_clean(&view, None, 1_505);
    let young = log
        .segments()
        .find(|s| s.largest_timestamp().unwrap() > 1_005)
        .unwrap()
        .base_offset();
    assert_eq!(c.first_uncleanable_offset, young);

    // max.compaction.lag.ms: an overdue log is cleaned even below the ratio.
    let mut cfg = config();
    cfg.min_cleanable_dirty_ratio = 0.99;
    cfg.max_compaction_lag_ms = 100;
    log.update_config(cfg);
    let view = log
        .cleaner_view(log.log_end_offset(), HashMap::new())
        .unwrap();
    let c = log_to_clean(&view, Some(active - 1), 1_200);
    assert!(c.need_compaction_now);
    assert!(is_cleanable(&c, 0.99));
    let c = log_to_clean(&view, Some(active - 1), 1_100);
    assert!(
        !c.need_compaction_now,
        "the dirty segment's first batch is at 1_009: not overdue"
    );
    assert!(!is_cleanable(&c, 0.99));

    // The filthiest of several due logs is chosen.
    let mk = |ratio: f64| super::LogToClean {
        cleanable_ratio: ratio,
        total_bytes: 10,
        cleanable_bytes: 5,
        ..c
    };
    assert_eq!(
        filthiest(&[(mk(0.2), 0.5), (mk(0.7), 0.5), (mk(0.6), 0.5)]),
        Some(1)
    );
    assert_eq!(filthiest(&[(mk(0.2), 0.5)]), None);
}

#[test]
fn a_changed_log_refuses_the_swap_and_the_cleaned_files_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    updates(&mut log, 5);
    let view = log
        .cleaner_view(log.log_end_offset(), HashMap::new())
        .unwrap();
    let c = log_to_clean(&view, None, 10_000);
    let mut map = OffsetMap::new(1 << 20);
    let outcome = clean_log(&view, &c, &mut map, 1000, 10_000, &mut |_| {}).unwrap();
    assert!(outcome.cleaned[0].log_path.exists());
    // A follower truncation meanwhile.
    log.truncate_to(3, 0).unwrap();
    let swapped = log
        .replace_with_cleaned(&outcome.cleaned, outcome.generation, 10_000)
        .unwrap();
    assert_eq!(swapped, 0);
    assert!(!outcome.cleaned[0].log_path.exists());
    assert_eq!(read_log(&log).1.len(), 3);
}

/// Each crash point of the swap leaves a state that recovery turns into a whole log.
#[test]
fn recovery_finishes_or_discards_each_state_of_the_swap() {
    for crash_after in ["cleaned", "swap", "old-deleted"] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), config());
        updates(&mut log, 8);
        let (_, before) = read_log(&log);
        let expected = latest_values(&before);
        let leo = log.log_end_offset();
        let view = log.cleaner_view(leo, HashMap::new()).unwrap();
        let c = log_to_clean(&view, None, 10_000);
        let mut map = OffsetMap::new(1 << 20);
        let outcome = clean_log(&view, &c, &mut map, 1000, 10_000, &mut |_| {}).unwrap();
        drop(view);
        let log_dir = dir.path().join("t-0");
        let first = &outcome.cleaned[0];
        if crash_after != "cleaned" {
            for cs in &outcome.cleaned {
                let swap = format!(
                    "{}{SWAP_SUFFIX}",
                    segment_file(&log_dir, cs.base_offset, LOG_SUFFIX).display()
                );
                fs::rename(&cs.log_path, &swap).unwrap();
            }
        }
        if crash_after == "old-deleted" {
            for (base, _) in &first.replaces {
                let p = segment_file(&log_dir, *base, LOG_SUFFIX);
                fs::rename(&p, format!("{}.deleted", p.display())).unwrap();
            }
        }
        drop(log);
        let log = Log::open(&log_dir, config(), 0, 0, false, 20_000).unwrap();
        let (headers, after) = read_log(&log);
        assert_eq!(
            latest_values(&after),
            expected,
            "after a crash past {crash_after}"
        );
        assert_eq!(log.log_end_offset(), leo);
        assert!(headers
            .windows(2)
            .all(|w| w[0].last_offset() < w[1].base_offset));
        let leftovers: Vec<_> = fs::read_dir(&log_dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(CLEANED_SUFFIX) || n.ends_with(SWAP_SUFFIX))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        if crash_after == "cleaned" {
            assert_eq!(after.len(), before.len(), "a .cleaned file is discarded");
        } else {
            assert!(log.recovery_report().swaps_completed > 0);
            assert!(after.len() < before.len());
        }
    }
}

#[test]
fn checkpoint_file_is_kafkas_format() {
    let dir = tempfile::tempdir().unwrap();
    let mut offsets = BTreeMap::new();
    offsets.insert(
        crate::log::TopicPartition::new("__consumer_offsets", 7),
        1234,
    );
    offsets.insert(crate::log::TopicPartition::new("t", 0), 5);
    write_cleaner_checkpoint(dir.path(), &offsets).unwrap();
    let text = fs::read_to_string(dir.path().join(CLEANER_OFFSET_CHECKPOINT)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..2], &["0", "2"]);
    lines.sort();
    assert!(
        lines.contains(&"__consumer_offsets 7 1234") && lines.contains(&"t 0 5"),
        "{text}"
    );
    assert_eq!(read_cleaner_checkpoint(dir.path()).unwrap(), offsets);
}

#[test]
fn the_throttler_sleeps_a_fast_period_down_to_the_rate() {
    let mut t = Throttler::new(1000.0, 0);
    // Within the check interval: no decision yet.
    assert_eq!(t.observe(5_000, 100), 0);
    // 5 000 + 1 000 bytes in 400 ms against 1 000 B/s: sleep until 6 s have passed.
    assert_eq!(t.observe(1_000, 400), 5_600);
    // A new period starts after the sleep; a slow one is left alone.
    assert_eq!(t.observe(100, 6_000 + 500), 0);
    let mut unlimited = Throttler::new(f64::MAX, 0);
    assert_eq!(unlimited.observe(u32::MAX as u64, 301), 0);
}

#[test]
fn the_throttle_sees_every_byte_read_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    updates(&mut log, 5);
    let view = log
        .cleaner_view(log.log_end_offset(), HashMap::new())
        .unwrap();
    let c = log_to_clean(&view, None, 10_000);
    let mut map = OffsetMap::new(1 << 20);
    let mut seen = 0u64;
    let outcome = clean_log(&view, &c, &mut map, 1000, 10_000, &mut |b| seen += b).unwrap();
    let s = &outcome.stats;
    assert_eq!(seen, s.map_bytes_read + s.bytes_read + s.bytes_written);
}

#[test]
fn a_truncation_pulls_the_checkpoint_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    updates(&mut log, 3);
    let leo = log.log_end_offset();
    let view = log.cleaner_view(leo, HashMap::new()).unwrap();
    assert_eq!(view.truncated_to, None);
    log.truncate_to(12, 0).unwrap();
    log.truncate_to(20, 0).unwrap(); // no-op: past the end now
    log.truncate_to(7, 0).unwrap();
    let view = log.cleaner_view(7, HashMap::new()).unwrap();
    assert_eq!(view.truncated_to, Some(7));
    assert_eq!(
        checkpoint_after_truncation(Some(leo), view.truncated_to),
        Some(7)
    );
    assert_eq!(
        checkpoint_after_truncation(Some(5), view.truncated_to),
        Some(5)
    );
    assert_eq!(checkpoint_after_truncation(None, view.truncated_to), None);
    assert_eq!(log.take_truncation(), Some(7));
    assert_eq!(log.take_truncation(), None);
}
