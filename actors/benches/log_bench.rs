//! Storage engine benchmark (a bench binary, not a timed test): append throughput with 16 KiB
//! batches into the page cache, sequential read throughput, offset lookup latency at 1 M and
//! 100 M offsets, and recovery time of a 1 GiB log after an unclean stop.
//!
//! Each run also prints the machine's ceiling for the append, a plain `write(2)` loop of the same
//! batches, before and after the appends (the shared VM's page-cache speed drifts within a run).
//!
//! `cargo bench -p kactor-actors --bench log_bench` (set `LOG_BENCH_DIR` to choose the disk;
//! `LOG_BENCH_APPEND_GIB` for the append volume, default 2; `LOG_BENCH_APPEND_ONLY=1` stops
//! after the append and read figures).

use std::path::Path;
use std::time::Instant;

use kactor_actors::log::testing::simple_batch;
use kactor_actors::log::LookupStats;
use kactor_actors::log::{read_slice, Log, LogConfig};
use kactor_protocol::records::{set_base_offset, BATCH_HEADER_LEN, CRC_OFFSET};
use rand::{Rng, SeedableRng};

const GIB: f64 = (1u64 << 30) as f64;

/// A 16 KiB batch of 16 records of ~1 KiB (a typical producer batch).
fn batch_16k() -> Vec<u8> {
    let b = simple_batch(0, 0, 16, 1000, 1_700_000_000_000);
    assert!(b.len() > 16_000 && b.len() <= 16_384, "{}", b.len());
    b
}

/// A batch of one small record claiming `offsets` offsets (lastOffsetDelta = offsets-1, as a
/// compacted batch can), padded to about `size` bytes: lets a log span 100 M offsets cheaply.
fn wide_batch(offsets: i32, size: usize) -> Vec<u8> {
    let mut b = simple_batch(0, 0, 1, size.saturating_sub(80), 0);
    b[23..27].copy_from_slice(&(offsets - 1).to_be_bytes());
    let crc = crc32c::crc32c(&b[CRC_OFFSET + 4..]);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

fn fill(log: &mut Log, template: &[u8], total_bytes: u64, offsets_per_batch: i64) -> f64 {
    let mut buf = template.to_vec();
    let n = total_bytes / buf.len() as u64;
    let start = Instant::now();
    for _ in 0..n {
        let o = log.log_end_offset();
        set_base_offset(&mut buf, o);
        log.append(&buf, 0).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(log.log_end_offset(), n as i64 * offsets_per_batch);
    secs
}

/// The machine's ceiling for the append: a plain `write(2)` loop of the same 16 KiB batch into
/// one file in the same directory, same volume, no log code at all. Printed next to the log's
/// figures from the same run, since page-cache write speed on a shared VM moves by 2x.
fn bench_write_ceiling(root: &Path) -> f64 {
    use std::io::Write;
    let path = root.join("ceiling.bin");
    let mut file = std::fs::File::create(&path).unwrap();
    let buf = batch_16k();
    let n = (append_gib() * GIB) as u64 / buf.len() as u64;
    let start = Instant::now();
    for _ in 0..n {
        file.write_all(&buf).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = (n * buf.len() as u64) as f64;
    let rate = bytes / secs / 1e9;
    println!(
        "ceiling (plain write(2) loop, same batches, same dir): {:.2} GiB, {:.3} s -> {:.2} GB/s",
        bytes / GIB,
        secs,
        rate
    );
    drop(file);
    std::fs::remove_file(&path).unwrap();
    rate
}

fn append_gib() -> f64 {
    std::env::var("LOG_BENCH_APPEND_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0)
}

/// The append as the produce path can do it without copying the batch: the rewritten header
/// (base offset) in a 61-byte array of its own, the body borrowed, one `pwritev` per append.
fn bench_append_vectored(root: &Path) {
    let dir = root.join("append-vectored-0");
    let mut log = Log::open(&dir, LogConfig::default(), 0, 0, true, 0).unwrap();
    let template = batch_16k();
    let (head, body) = template.split_at(BATCH_HEADER_LEN);
    let n = (append_gib() * GIB) as u64 / template.len() as u64;
    let start = Instant::now();
    for _ in 0..n {
        let mut header: [u8; BATCH_HEADER_LEN] = head.try_into().unwrap();
        set_base_offset(&mut header, log.log_end_offset());
        log.append_vectored(&header, body, 0).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = log.size() as f64;
    println!(
        "append_vectored (header + body, pwritev): {:.2} GiB, {:.3} s -> {:.2} GB/s",
        bytes / GIB,
        secs,
        bytes / secs / 1e9,
    );
    log.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same append with `preallocate=true` (segment files sized up front, as Kafka's option).
fn bench_append_preallocated(root: &Path) {
    let dir = root.join("append-prealloc-0");
    let config = LogConfig {
        preallocate: true,
        ..LogConfig::default()
    };
    let mut log = Log::open(&dir, config, 0, 0, true, 0).unwrap();
    let template = batch_16k();
    let secs = fill(&mut log, &template, (append_gib() * GIB) as u64, 16);
    let bytes = log.size() as f64;
    println!(
        "append (preallocate=true): {:.2} GiB in 16 KiB batches, {:.3} s -> {:.2} GB/s",
        bytes / GIB,
        secs,
        bytes / secs / 1e9,
    );
    log.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn bench_append_and_read(root: &Path) {
    let dir = root.join("append-0");
    let mut log = Log::open(&dir, LogConfig::default(), 0, 0, true, 0).unwrap();
    let template = batch_16k();
    let total = (append_gib() * GIB) as u64;
    let secs = fill(&mut log, &template, total, 16);
    let bytes = log.size() as f64;
    println!(
        "append: {:.2} GiB in 16 KiB batches ({} B), {:.3} s -> {:.2} GB/s ({:.0} batches/s), {} segments",
        bytes / GIB,
        template.len(),
        secs,
        bytes / secs / 1e9,
        bytes / template.len() as f64 / secs,
        log.number_of_segments()
    );

    // Sequential read: 1 MiB fetches, slices resolved and then copied out (as TLS would).
    let mut next = 0;
    let mut fetches = 0u64;
    let mut copied = 0u64;
    let mut buf_total = 0u64;
    let start = Instant::now();
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, None, false).unwrap();
        let slice = info.records.unwrap();
        let data = read_slice(&slice).unwrap();
        copied += data.len() as u64;
        buf_total += data[data.len() - 1] as u64;
        // The slice ends on a batch boundary: continue after its last batch.
        let mut pos = 0;
        let mut last_next = next;
        while pos < data.len() {
            let h = kactor_protocol::records::BatchHeader::parse(&data[pos..]).unwrap();
            last_next = h.next_offset();
            pos += h.total_size();
        }
        next = last_next;
        fetches += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "read (1 MiB fetches, slice + copy): {:.2} GiB in {:.3} s -> {:.2} GB/s, {:.1} us/fetch ({})",
        copied as f64 / GIB,
        secs,
        copied as f64 / secs / 1e9,
        secs * 1e6 / fetches as f64,
        buf_total % 2
    );
    // Slice resolution alone (what the zero-copy path costs before sendfile).
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let leo = log.log_end_offset();
    let n = 200_000;
    let start = Instant::now();
    let mut sink = 0u64;
    for _ in 0..n {
        let o = rng.gen_range(0..leo);
        sink += log.read(o, 1 << 20, None, false).unwrap().size() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "read (random 1 MiB fetch, slice only): {:.2} us/fetch ({})",
        secs * 1e6 / n as f64,
        sink % 2
    );
    log.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn bench_lookup(root: &Path, offsets: i64) {
    let dir = root.join(format!("lookup{offsets}-0"));
    let mut log = Log::open(&dir, LogConfig::default(), 0, 0, true, 0).unwrap();
    // 1 KiB batches of 1000 offsets: 100 M offsets = 100 K batches; the index has one entry per
    // ~4 KiB, so a lookup is a binary search plus a scan of a few batch headers.
    let per_batch = 1000i32;
    let template = wide_batch(per_batch, 1024);
    let total = (offsets / per_batch as i64) as u64 * template.len() as u64;
    fill(&mut log, &template, total, per_batch as i64);
    let leo = log.log_end_offset();
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let n = 200_000;
    let start = Instant::now();
    let before = LookupStats::current();
    let mut sink = 0u64;
    for _ in 0..n {
        let o = rng.gen_range(0..leo);
        let info = log.read(o, 1, None, true).unwrap();
        sink += info.fetch_offset_metadata.relative_position;
    }
    let secs = start.elapsed().as_secs_f64();
    let work = LookupStats::since(before);
    let idx_entries: usize = log
        .segments()
        .map(|s| s.offset_index().unwrap().entries())
        .sum();
    println!(
        "offset lookup at {} M offsets ({} batches, {} index entries, {:.0} MiB): {:.2} us/lookup, {:.1} index probes and {:.0} B of .log read per lookup ({})",
        leo / 1_000_000,
        leo / per_batch as i64,
        idx_entries,
        log.size() as f64 / (1 << 20) as f64,
        secs * 1e6 / n as f64,
        work.index_probes as f64 / n as f64,
        work.log_bytes_read as f64 / n as f64,
        sink % 2
    );
    log.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn bench_recovery(root: &Path) {
    let dir = root.join("recovery-0");
    let mut log = Log::open(&dir, LogConfig::default(), 0, 0, true, 0).unwrap();
    fill(&mut log, &batch_16k(), 1 << 30, 16);
    let leo = log.log_end_offset();
    drop(log); // unclean: no close, no checkpoint: recovery point 0
    let start = Instant::now();
    let log = Log::open(&dir, LogConfig::default(), 0, 0, false, 0).unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(log.log_end_offset(), leo);
    println!(
        "recovery of 1 GiB after an unclean stop (page cache warm, CRC of every batch): {:.3} s -> {:.2} GB/s ({:?})",
        secs,
        (1u64 << 30) as f64 / secs / 1e9,
        log.recovery_report()
    );
    drop(log);
    let start = Instant::now();
    let log = Log::open(&dir, LogConfig::default(), 0, leo, true, 0).unwrap();
    println!(
        "reopen of the same log after a clean shutdown: {:.3} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    drop(log);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn main() {
    // `cargo bench` passes --bench; nothing to parse.
    let base = std::env::var("LOG_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let root = tempfile::tempdir_in(base).unwrap();
    bench_write_ceiling(root.path());
    bench_append_and_read(root.path());
    bench_append_vectored(root.path());
    bench_append_preallocated(root.path());
    bench_write_ceiling(root.path());
    if std::env::var_os("LOG_BENCH_APPEND_ONLY").is_some() {
        return;
    }
    bench_lookup(root.path(), 1_000_000);
    bench_lookup(root.path(), 100_000_000);
    bench_recovery(root.path());
}
