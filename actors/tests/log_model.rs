//! Property test: random sequences of append / read / roll / truncate / delete-records /
//! retention / reopen (clean and unclean) against a simple in-memory model of the log.
//! Seeded and deterministic; a failure prints the seed (`LOG_MODEL_SEED=<n>` replays one).

use std::path::Path;

use kactor_actors::log::testing::simple_batch;
use kactor_actors::log::{read_slice, Log, LogConfig, LogError};
use kactor_protocol::records::BatchHeader;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Debug)]
struct Batch {
    base: i64,
    last: i64,
    bytes: Vec<u8>,
}

#[derive(Default, Debug)]
struct Model {
    batches: Vec<Batch>,
    log_start_offset: i64,
    log_end_offset: i64,
}

fn config(rng: &mut StdRng) -> LogConfig {
    LogConfig {
        segment_bytes: rng.gen_range(2_000..20_000),
        index_interval_bytes: rng.gen_range(0..2_000),
        segment_index_bytes: rng.gen_range(3..40) * 24,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig, lso: i64, rp: i64, clean: bool) -> Log {
    Log::open(dir, config, lso, rp, clean, 0).unwrap()
}

/// What a read must return, computed from the model and the segment layout: the batches it
/// returns whole and the bytes of the partial batch after them. A read is a raw range of at
/// most `max_bytes` (at least the first batch with `min_one`), within the first batch's
/// segment and below `bound`; empty when the first batch does not fit whole.
fn expected_read(
    model: &Model,
    bases: &[i64],
    start: i64,
    max_bytes: u32,
    bound: i64,
    min_one: bool,
) -> (Vec<i64>, usize) {
    let Some(first) = model.batches.iter().position(|b| b.last >= start) else {
        return (vec![], 0);
    };
    let seg_of = |o: i64| bases.iter().rev().find(|b| **b <= o).copied();
    let seg = seg_of(model.batches[first].base);
    let mut budget = max_bytes as usize;
    if min_one {
        budget = budget.max(model.batches[first].bytes.len());
    }
    let mut out = Vec::new();
    let mut total = 0usize;
    for b in &model.batches[first..] {
        if seg_of(b.base) != seg || b.last >= bound {
            break;
        }
        if total + b.bytes.len() > budget {
            if out.is_empty() {
                return (vec![], 0);
            }
            return (out, budget - total);
        }
        total += b.bytes.len();
        out.push(b.base);
    }
    (out, 0)
}

fn check_all(log: &Log, model: &Model, ctx: &str) {
    assert_eq!(log.log_end_offset(), model.log_end_offset, "{ctx}: LEO");
    assert_eq!(
        log.log_start_offset(),
        model.log_start_offset,
        "{ctx}: log start offset"
    );
    // Reading everything from the log start yields exactly the model's batches.
    let want: Vec<&Batch> = model
        .batches
        .iter()
        .filter(|b| b.last >= model.log_start_offset)
        .collect();
    let mut got = Vec::new();
    let mut next = model.log_start_offset;
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 16, None, true).unwrap();
        let Some(slice) = info.records.filter(|s| s.len > 0) else {
            break;
        };
        let bytes = read_slice(&slice).unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).ok();
            // A read may end inside a batch: the next read starts at it.
            let Some(h) = h.filter(|h| pos + h.total_size() <= bytes.len()) else {
                break;
            };
            got.push(bytes[pos..pos + h.total_size()].to_vec());
            pos += h.total_size();
            next = h.next_offset();
        }
    }
    assert_eq!(got.len(), want.len(), "{ctx}: batch count");
    for (g, w) in got.iter().zip(&want) {
        assert!(g == &w.bytes, "{ctx}: batch {} differs", w.base);
    }
    // Indexes agree with the data.
    for seg in log.segments() {
        let idx = seg.offset_index().unwrap();
        for i in 0..idx.entries() {
            let e = idx.entry(i);
            let b = seg
                .translate_offset(e.offset, 0)
                .unwrap()
                .expect("indexed batch exists");
            assert_eq!(
                (b.header.last_offset(), b.position),
                (e.offset, e.position as u64),
                "{ctx}: index entry"
            );
        }
    }
}

fn run(seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model-0");
    let cfg = config(&mut rng);
    let mut log = open(&dir, cfg.clone(), 0, 0, true);
    let mut model = Model::default();
    let mut now = 0i64;
    for step in 0..steps {
        now += rng.gen_range(0..1000);
        let ctx = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=44 => {
                let o = model.log_end_offset;
                let count = rng.gen_range(1..6);
                let bytes = simple_batch(o, rng.gen_range(0..3), count, rng.gen_range(0..400), now);
                log.append(&bytes, now).unwrap();
                model.batches.push(Batch {
                    base: o,
                    last: o + count as i64 - 1,
                    bytes,
                });
                model.log_end_offset = o + count as i64;
            }
            45..=64 => {
                let lso = model.log_start_offset;
                let leo = model.log_end_offset;
                let start = rng.gen_range(lso..=leo + 1);
                let max_bytes = rng.gen_range(0..5000);
                let bound = rng.gen_range(start..=leo + 1);
                let min_one = rng.gen_bool(0.5);
                let res = log.read(start, max_bytes, Some(bound), min_one);
                if start > leo {
                    assert!(
                        matches!(res, Err(LogError::OffsetOutOfRange { .. })),
                        "{ctx}"
                    );
                    continue;
                }
                let info = res.unwrap();
                let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
                let want = expected_read(&model, &bases, start, max_bytes, bound.min(leo), min_one);
                let got: (Vec<i64>, usize) = match info.records.filter(|s| s.len > 0) {
                    None => (vec![], 0),
                    Some(slice) => {
                        let bytes = read_slice(&slice).unwrap();
                        let mut v = Vec::new();
                        let mut pos = 0;
                        while pos < bytes.len() {
                            match BatchHeader::parse(&bytes[pos..]) {
                                Ok(h) if pos + h.total_size() <= bytes.len() => {
                                    v.push(h.base_offset);
                                    pos += h.total_size();
                                }
                                _ => break, // the partial trailing batch
                            }
                        }
                        (v, bytes.len() - pos)
                    }
                };
                assert_eq!(
                    got, want,
                    "{ctx}: read({start}, {max_bytes}, {bound}, {min_one})"
                );
            }
            65..=69 => {
                log.roll(now).unwrap();
            }
            70..=76 => {
                // Followers truncate at batch boundaries.
                let candidates: Vec<i64> = model
                    .batches
                    .iter()
                    .map(|b| b.base)
                    .filter(|b| *b >= model.log_start_offset)
                    .collect();
                if candidates.is_empty() {
                    continue;
                }
                let target = candidates[rng.gen_range(0..candidates.len())];
                let first_base = log.segments().next().unwrap().base_offset();
                log.truncate_to(target, now).unwrap();
                model.batches.retain(|b| b.last < target);
                model.log_end_offset = target;
                if target < first_base {
                    model.batches.clear();
                    model.log_start_offset = target;
                }
                model.log_start_offset = model.log_start_offset.min(target);
            }
            77..=81 => {
                let lso = model.log_start_offset;
                let new_lso = rng.gen_range(lso..=model.log_end_offset);
                log.maybe_increment_log_start_offset(new_lso).unwrap();
                model.log_start_offset = new_lso;
            }
            82..=86 => {
                let hw = rng.gen_range(model.log_start_offset..=model.log_end_offset);
                log.delete_old_segments(now, hw).unwrap();
                log.purge_deleted_segments(now + 60_000).unwrap();
                model.log_start_offset = log.log_start_offset().max(model.log_start_offset);
            }
            87..=88 => {
                let o = rng.gen_range(model.log_end_offset..model.log_end_offset + 100);
                log.truncate_fully_and_start_at(o, now).unwrap();
                model.batches.clear();
                model.log_start_offset = o;
                model.log_end_offset = o;
            }
            89..=93 => {
                log.flush(rng.gen_range(0..=model.log_end_offset + 1), now)
                    .unwrap();
            }
            _ => {
                // Reopen, cleanly or after an "unclean" stop (data still in the page cache).
                let lso = log.log_start_offset();
                let rp = log.recovery_point();
                let clean = rng.gen_bool(0.5);
                if clean {
                    log.close().unwrap();
                } else {
                    drop(log);
                }
                log = open(&dir, cfg.clone(), lso, rp, clean);
            }
        }
        check_all(&log, &model, &ctx);
    }
}

#[test]
fn log_matches_model_under_random_operations() {
    if let Ok(seed) = std::env::var("LOG_MODEL_SEED") {
        run(seed.parse().unwrap(), 400);
        return;
    }
    for seed in 0..40 {
        run(seed, 150);
    }
}
