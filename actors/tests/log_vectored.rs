//! `Log::append_vectored` (header and body written with one `pwritev`, as the produce path can
//! use to avoid copying a batch whose header it rewrote): the files are byte for byte those
//! `Log::append` writes, indexes included, and crash recovery treats them the same.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use kactor_actors::log::testing::{build_batch, TestRecord};
use kactor_actors::log::{read_slice, Log, LogConfig, LogError};
use kactor_protocol::records::{
    set_base_offset, set_partition_leader_epoch, verify_crc, BatchHeader, BATCH_HEADER_LEN,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 700,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

/// Producer-style batches (base offset 0, no epoch) of random sizes, some gzip-compressed.
fn producer_batches(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let records: Vec<TestRecord> = (0..rng.gen_range(1..6))
                .map(|j| TestRecord {
                    timestamp: 1_000 + i as i64 * 7 + j,
                    key: (j % 2 == 0).then(|| vec![j as u8; 3]),
                    value: vec![i as u8; rng.gen_range(0..900)],
                })
                .collect();
            build_batch(0, -1, &records, i % 5 == 0)
        })
        .collect()
}

/// The leader's rewrite: base offset and epoch in a copy of the header only.
fn header_for(batch: &[u8], base_offset: i64, epoch: i32) -> [u8; BATCH_HEADER_LEN] {
    let mut header: [u8; BATCH_HEADER_LEN] = batch[..BATCH_HEADER_LEN].try_into().unwrap();
    set_base_offset(&mut header, base_offset);
    set_partition_leader_epoch(&mut header, epoch);
    header
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn read_all(log: &Log) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, None, true).unwrap();
        let bytes = read_slice(info.records.as_ref().unwrap()).unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).unwrap();
            verify_crc(&bytes[pos..pos + h.total_size()]).unwrap();
            out.push((h.base_offset, h.last_offset()));
            pos += h.total_size();
            next = h.next_offset();
        }
    }
    out
}

#[test]
fn vectored_appends_write_the_same_files_as_contiguous_appends() {
    let mut rng = StdRng::seed_from_u64(3);
    let tmp = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tmp.path().join("a-0"), tmp.path().join("b-0"));
    let mut a = Log::open(&a_dir, config(), 0, 0, false, 0).unwrap();
    let mut b = Log::open(&b_dir, config(), 0, 0, false, 0).unwrap();
    for (i, batch) in producer_batches(&mut rng, 300).iter().enumerate() {
        let epoch = (i / 100) as i32;
        let o = a.log_end_offset();
        let mut copy = batch.clone();
        set_base_offset(&mut copy, o);
        set_partition_leader_epoch(&mut copy, epoch);
        let ia = a.append(&copy, i as i64).unwrap();
        let header = header_for(batch, o, epoch);
        let ib = b
            .append_vectored(&header, &batch[BATCH_HEADER_LEN..], i as i64)
            .unwrap();
        assert_eq!(ia, ib);
    }
    assert!(b.number_of_segments() > 5, "rolls on the way");
    assert_eq!(read_all(&a), read_all(&b));
    a.close().unwrap();
    b.close().unwrap();
    let (fa, fb) = (files(&a_dir), files(&b_dir));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (name, bytes) in &fa {
        assert!(bytes == &fb[name], "{name} differs");
    }
    assert!(fa.keys().any(|n| n.ends_with(".index")));
}

#[test]
fn vectored_append_rejects_a_header_that_does_not_match_its_body() {
    let mut rng = StdRng::seed_from_u64(4);
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(&tmp.path().join("v-0"), config(), 0, 0, false, 0).unwrap();
    let batch = &producer_batches(&mut rng, 1)[0];
    let header = header_for(batch, 0, 0);
    let short = &batch[BATCH_HEADER_LEN..batch.len() - 1];
    assert!(matches!(
        log.append_vectored(&header, short, 0),
        Err(LogError::CorruptRecord(_))
    ));
    let mut long = batch[BATCH_HEADER_LEN..].to_vec();
    long.push(0);
    assert!(log.append_vectored(&header, &long, 0).is_err());
    assert_eq!(
        (log.log_end_offset(), log.size()),
        (0, 0),
        "nothing written"
    );
    // Offsets below the log end are refused as with append.
    log.append_vectored(&header, &batch[BATCH_HEADER_LEN..], 0)
        .unwrap();
    assert!(matches!(
        log.append_vectored(&header, &batch[BATCH_HEADER_LEN..], 0),
        Err(LogError::InvalidOffset(_))
    ));
}

#[test]
fn vectored_appends_recover_like_any_other_after_a_torn_tail() {
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(100 + seed);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("crash-0");
        let mut log = Log::open(&dir, config(), 0, 0, false, 0).unwrap();
        let mut written = Vec::new();
        for batch in producer_batches(&mut rng, 120) {
            let o = log.log_end_offset();
            let header = header_for(&batch, o, 1);
            let info = log
                .append_vectored(&header, &batch[BATCH_HEADER_LEN..], 0)
                .unwrap();
            let base = log.active_segment().base_offset();
            let end = log.active_segment().size();
            written.push((info.first_offset, info.last_offset, base, end));
        }
        drop(log); // unclean: no close, recovery point 0
                   // Cut the last segment's file at a random byte.
        let last_base = written.last().unwrap().2;
        let path = dir.join(format!("{last_base:020}.log"));
        let len = fs::metadata(&path).unwrap().len();
        let cut = rng.gen_range(0..len);
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let log = Log::open(&dir, config(), 0, 0, false, 0).unwrap();
        let expected: Vec<(i64, i64)> = written
            .iter()
            .filter(|w| w.2 < last_base || w.3 <= cut)
            .map(|w| (w.0, w.1))
            .collect();
        assert_eq!(
            read_all(&log),
            expected,
            "seed {seed}, cut at {cut} of {len}"
        );
        assert_eq!(log.log_end_offset(), expected.last().map_or(0, |e| e.1 + 1));
    }
}
