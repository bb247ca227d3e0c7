//! Kafka's `LazyIndex`: a log opened after a clean shutdown maps only its active segment's
//! indexes; an inactive segment's are mapped (and sanity-checked) by the first lookup that needs
//! them, and truncation, retention, recovery and damaged files work on segments never mapped.
//! Also the bound on an offset lookup: a binary search of the index plus at most one index
//! interval of `.log` read, at 100 M offsets as at 1 M.

use std::fs;
use std::path::Path;

use kactor_actors::log::testing::{simple_batch, wide_batch};
use kactor_actors::log::{read_slice, Log, LogConfig, LookupStats, SCAN_CHUNK};
use kactor_protocol::records::BatchHeader;
use rand::{Rng, SeedableRng};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        segment_index_bytes: 4096,
        file_delete_delay_ms: 10,
        ..LogConfig::default()
    }
}

/// The index files under `dir` this process has mapped right now.
fn mapped_indexes(dir: &Path) -> Vec<String> {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let dir = dir.to_str().unwrap();
    let mut v: Vec<String> = maps
        .lines()
        .filter_map(|l| {
            let path = &l[l.find(dir)?..];
            (path.contains(".index") || path.contains(".timeindex")).then(|| path.to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// `n` batches of 3 records, timestamps = offset * 10; returns (base, last) of each.
fn fill(log: &mut Log, n: usize) -> Vec<(i64, i64)> {
    (0..n)
        .map(|_| {
            let o = log.log_end_offset();
            log.append(&simple_batch(o, 0, 3, 100, o * 10), 0).unwrap();
            (o, o + 2)
        })
        .collect()
}

/// Every batch from `from` on, through `read`.
fn read_all(log: &Log, from: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, None, true).unwrap();
        let bytes = read_slice(info.records.as_ref().unwrap()).unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).unwrap();
            out.push((h.base_offset, h.last_offset()));
            pos += h.total_size();
            next = h.next_offset();
        }
    }
    out
}

/// Every index entry of every segment points at the batch ending at its offset.
fn check_indexes(log: &Log) {
    for seg in log.segments() {
        let idx = seg.offset_index().unwrap();
        for i in 0..idx.entries() {
            let e = idx.entry(i);
            let b = seg.translate_offset(e.offset, 0).unwrap().unwrap();
            assert_eq!(
                (b.header.last_offset(), b.position),
                (e.offset, e.position as u64)
            );
        }
    }
}

/// A closed log of about 200 segments; returns its dir and batches.
fn closed_log(root: &Path) -> (std::path::PathBuf, Vec<(i64, i64)>) {
    let dir = root.join("lazy-0");
    let mut log = Log::open(&dir, config(), 0, 0, false, 0).unwrap();
    let batches = fill(&mut log, 2000);
    assert!(
        log.number_of_segments() > 150,
        "{}",
        log.number_of_segments()
    );
    log.flush(i64::MAX, 0).unwrap();
    log.close().unwrap();
    (dir, batches)
}

fn leo(batches: &[(i64, i64)]) -> i64 {
    batches.last().unwrap().1 + 1
}

#[test]
fn inactive_indexes_are_mapped_on_first_lookup_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, batches) = closed_log(tmp.path());
    let log = Log::open(&dir, config(), 0, leo(&batches), true, 0).unwrap();
    let segs: Vec<_> = log.segments().collect();
    let active = segs.last().unwrap();
    assert!(segs[..segs.len() - 1].iter().all(|s| !s.indexes_loaded()));
    assert!(active.indexes_loaded());
    let active_files = vec![
        active.offset_index_path().display().to_string(),
        active.time_index_path().display().to_string(),
    ];
    assert_eq!(
        mapped_indexes(&dir),
        active_files,
        "only the active segment's"
    );

    // One lookup in the middle maps that segment's indexes and no other's.
    let (base, last) = batches[1000];
    let info = log.read(base + 1, 1, None, true).unwrap();
    let h = BatchHeader::parse(&read_slice(info.records.as_ref().unwrap()).unwrap()).unwrap();
    assert_eq!((h.base_offset, h.last_offset()), (base, last));
    let seg_base = info.fetch_offset_metadata.segment_base_offset;
    let seg = log
        .segments()
        .find(|s| s.base_offset() == seg_base)
        .unwrap();
    assert!(seg.indexes_loaded());
    assert_eq!(log.segments().filter(|s| s.indexes_loaded()).count(), 2);
    let mut expected = active_files.clone();
    expected.push(seg.offset_index_path().display().to_string());
    expected.push(seg.time_index_path().display().to_string());
    expected.sort();
    assert_eq!(mapped_indexes(&dir), expected);

    // Every lookup is right, and a timestamp lookup too.
    assert_eq!(read_all(&log, 0), batches);
    check_indexes(&log);
    let found = log
        .fetch_offset_by_timestamp(base * 10 + 1)
        .unwrap()
        .unwrap();
    assert_eq!(found.offset, base + 1);
    drop(log);
    assert!(
        mapped_indexes(&dir).is_empty(),
        "dropping the log unmaps all"
    );
}

#[test]
fn never_mapped_segments_truncate_delete_and_recover_correctly() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, batches) = closed_log(tmp.path());
    let end = leo(&batches);

    // Truncation into a never-mapped segment makes it the active one.
    let mut log = Log::open(&dir, config(), 0, end, true, 0).unwrap();
    let (cut, _) = batches[1200];
    assert!(log.truncate_to(cut, 0).unwrap());
    assert_eq!(log.log_end_offset(), cut);
    assert_eq!(read_all(&log, 0), batches[..1200].to_vec());
    check_indexes(&log);
    let more = fill(&mut log, 10);
    let mut now = batches[..1200].to_vec();
    now.extend(more);
    assert_eq!(read_all(&log, 0), now);
    log.close().unwrap();

    // Retention of segments never mapped: renamed `.deleted` (indexes too), then removed.
    let end = leo(&now);
    let mut log = Log::open(&dir, config(), 0, end, true, 0).unwrap();
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    let new_start = bases[30];
    log.maybe_increment_log_start_offset(new_start).unwrap();
    assert_eq!(log.delete_old_segments(0, end).unwrap(), 30);
    assert!(
        mapped_indexes(&dir).len() <= 2,
        "{:?}",
        mapped_indexes(&dir)
    );
    let deleted = |suffix: &str| {
        fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                let n = e.as_ref().unwrap().file_name().into_string().unwrap();
                n.ends_with(&format!("{suffix}.deleted"))
            })
            .count()
    };
    assert_eq!(
        (deleted(".log"), deleted(".index"), deleted(".timeindex")),
        (30, 30, 30)
    );
    assert!(log.purge_deleted_segments(100).unwrap() >= 90);
    assert_eq!(deleted(""), 0);
    let kept: Vec<(i64, i64)> = now.iter().copied().filter(|b| b.0 >= new_start).collect();
    assert_eq!(read_all(&log, new_start), kept);
    log.flush(i64::MAX, 0).unwrap();
    log.close().unwrap();

    // Unclean reopen with the recovery point in the middle: the segments below it are checked
    // and unmapped again, those from it on recovered; all data is there.
    let bases: Vec<i64> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".log").map(|s| s.parse().unwrap())
        })
        .collect::<std::collections::BTreeSet<i64>>()
        .into_iter()
        .collect();
    let recovery_point = bases[bases.len() / 2];
    let log = Log::open(&dir, config(), new_start, recovery_point, false, 0).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.bytes_truncated, 0);
    assert!(
        report.segments_recovered >= bases.len() / 2 - 1,
        "{report:?}"
    );
    assert!(log
        .segments()
        .filter(|s| s.base_offset() < recovery_point)
        .all(|s| !s.indexes_loaded()));
    assert_eq!(read_all(&log, new_start), kept);
    check_indexes(&log);
}

#[test]
fn damaged_index_of_a_never_mapped_segment_is_rebuilt_on_first_use() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, batches) = closed_log(tmp.path());
    // The segment holding batch 500.
    let log = Log::open(&dir, config(), 0, leo(&batches), true, 0).unwrap();
    let seg_base = log
        .read(batches[500].0, 1, None, true)
        .unwrap()
        .fetch_offset_metadata
        .segment_base_offset;
    drop(log);
    let idx = dir.join(format!("{seg_base:020}.index"));
    let good = fs::read(&idx).unwrap();
    assert!(good.len() >= 16, "the segment has index entries");
    // A torn last entry, and garbage in the entries before it.
    let mut bad = good.clone();
    bad.truncate(good.len() - 3);
    bad[0] ^= 0x40;
    fs::write(&idx, &bad).unwrap();
    let log = Log::open(&dir, config(), 0, leo(&batches), true, 0).unwrap();
    assert_eq!(read_all(&log, 0), batches);
    check_indexes(&log);
    drop(log);
    assert_eq!(fs::read(&idx).unwrap(), good, "rebuilt as it was written");
}

/// Offset lookups through `read`: the index binary search probes and `.log` bytes read.
fn lookups(log: &Log, n: usize, seed: u64) -> (u64, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let leo = log.log_end_offset();
    let (mut max_bytes, mut max_probes) = (0, 0);
    for _ in 0..n {
        let o = rng.gen_range(0..leo);
        let before = LookupStats::current();
        let info = log.read(o, 1, None, true).unwrap();
        let work = LookupStats::since(before);
        max_bytes = max_bytes.max(work.log_bytes_read);
        max_probes = max_probes.max(work.index_probes);
        let slice = info.records.unwrap();
        let h = BatchHeader::parse(&read_slice(&slice).unwrap()).unwrap();
        assert!(h.base_offset <= o && o <= h.last_offset(), "{o}: {h:?}");
    }
    (max_bytes, max_probes)
}

#[test]
fn offset_lookup_is_a_binary_search_plus_one_index_interval_at_100m_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let interval = config.index_interval_bytes as u64;
    let batch_size = 1024usize;
    let mut probes = Vec::new();
    for (name, offsets) in [("m1-0", 1_000_000i64), ("m100-0", 100_000_000)] {
        let dir = tmp.path().join(name);
        let mut log = Log::open(&dir, config.clone(), 0, 0, false, 0).unwrap();
        let per_batch = 1000;
        let mut batch = wide_batch(0, per_batch, batch_size);
        for _ in 0..offsets / per_batch as i64 {
            let o = log.log_end_offset();
            batch[..8].copy_from_slice(&o.to_be_bytes());
            log.append(&batch, 0).unwrap();
        }
        assert_eq!(log.log_end_offset(), offsets);
        let entries: usize = log
            .segments()
            .map(|s| s.offset_index().unwrap().entries())
            .sum();
        let (max_bytes, max_probes) = lookups(&log, 3000, 9);
        // The scan starts at the index entry at or below the offset: the batch holding it starts
        // at most one interval (plus the indexed batch) further, and headers are read a page
        // at a time.
        let bound = interval + batch_size as u64 + SCAN_CHUNK as u64;
        assert!(
            max_bytes <= bound,
            "{name}: {max_bytes} bytes of .log read for one lookup (bound {bound})"
        );
        // Two binary searches (the offset, then the end position of the read).
        let log2 = (usize::BITS - entries.leading_zeros()) as u64;
        assert!(
            max_probes <= 2 * (log2 + 1),
            "{name}: {max_probes} index probes for {entries} entries"
        );
        probes.push((entries, max_probes));
        log.close().unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
    // 100x the entries costs a handful more probes, not 100x.
    assert!(probes[1].0 >= 50 * probes[0].0, "{probes:?}");
    assert!(probes[1].1 <= probes[0].1 + 2 * 8, "{probes:?}");
}
