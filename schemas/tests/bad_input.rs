//! Hostile input: decoding arbitrary or mutated bytes for every request / response type and
//! version never panics, finishes quickly, and never allocates more than a small constant times
//! the input size, whatever a length prefix claims. (The fuzz target in `fuzz/` does the same
//! with coverage guidance.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kactor_protocol::codec::Writer;
use kactor_protocol::messages::{RequestHeader, ResponseHeader};
use kactor_protocol::{ApiKey, Decode, RequestBody, ResponseBody};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Counts live heap bytes and the peak since the last reset. The test binary runs one test at
/// a time through a mutex so the numbers belong to the decode being measured.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    // SAFETY: forwards to the system allocator unchanged; only counts sizes.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Allowed heap growth while decoding `len` input bytes: decoded structs are bigger than their
/// encoding (a 4-byte int32 array element can become a 100-byte struct), so a constant factor,
/// plus a fixed allowance for small inputs.
fn budget(len: usize) -> usize {
    64 * len + 16 * 1024
}

struct Stats {
    decodes: usize,
    ok: usize,
    worst_ratio: f64,
    slowest: Duration,
}

/// Decodes `input` with `f`, checking allocation and time.
fn measure<T>(
    ctx: &str,
    input: &Bytes,
    stats: &mut Stats,
    f: impl FnOnce(&mut Bytes) -> Result<T, kactor_protocol::DecodeError>,
) {
    let mut buf = input.clone();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let start = Instant::now();
    let r = f(&mut buf);
    let took = start.elapsed();
    let grown = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    stats.decodes += 1;
    if r.is_ok() {
        stats.ok += 1;
    }
    drop(r);
    assert!(
        grown <= budget(input.len()),
        "{ctx}: decoding {} bytes allocated {grown} bytes: {:02x?}",
        input.len(),
        &input[..input.len().min(64)]
    );
    if input.len() >= 64 {
        stats.worst_ratio = stats.worst_ratio.max(grown as f64 / input.len() as f64);
    }
    stats.slowest = stats.slowest.max(took);
    assert!(
        took < Duration::from_millis(200),
        "{ctx}: decode took {took:?}"
    );
}

/// Random mutations of a valid frame: flipped bytes, truncation, and lengths set to extremes.
fn mutate(rng: &mut StdRng, valid: &Bytes) -> Bytes {
    let mut v = valid.to_vec();
    match rng.gen_range(0..4) {
        0 if !v.is_empty() => {
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..v.len());
                v[i] = rng.gen();
            }
        }
        1 if !v.is_empty() => v.truncate(rng.gen_range(0..v.len())),
        2 if v.len() >= 4 => {
            // Plant a huge (or -2) length at a random position.
            let i = rng.gen_range(0..v.len() - 3);
            let planted: [u8; 4] = match rng.gen_range(0..3) {
                0 => [0x7f, 0xff, 0xff, 0xff],
                1 => [0xff, 0xff, 0xff, 0xfe],
                _ => [0xff, 0xff, 0xff, 0x0f],
            };
            v[i..i + 4].copy_from_slice(&planted);
        }
        _ => {
            let i = rng.gen_range(0..=v.len());
            let extra: Vec<u8> = (0..rng.gen_range(1..8)).map(|_| rng.gen()).collect();
            v.splice(i..i, extra);
        }
    }
    Bytes::from(v)
}

fn random_bytes(rng: &mut StdRng) -> Bytes {
    let n = rng.gen_range(0..200);
    // Mostly 0xff / 0x7f / small bytes: the values that make lengths and varints extreme.
    Bytes::from(
        (0..n)
            .map(|_| match rng.gen_range(0..4) {
                0 => 0xff,
                1 => 0x7f,
                2 => rng.gen_range(0..4),
                _ => rng.gen(),
            })
            .collect::<Vec<u8>>(),
    )
}

#[test]
fn random_and_mutated_bodies_never_panic_or_overallocate() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = StdRng::seed_from_u64(7);
    let mut stats = Stats {
        decodes: 0,
        ok: 0,
        worst_ratio: 0.0,
        slowest: Duration::ZERO,
    };
    for &key in ApiKey::ALL {
        let (lo, hi) = key.valid_versions();
        for version in lo..=hi {
            for i in 0..24 {
                let ctx = format!("{} v{version} #{i}", key.name());
                let input = random_bytes(&mut rng);
                measure(&ctx, &input, &mut stats, |b| {
                    RequestBody::decode(key, version, b)
                });
                measure(&ctx, &input, &mut stats, |b| {
                    ResponseBody::decode(key, version, b)
                });

                let mut w = Writer::new();
                RequestBody::random(key, &mut rng, version)
                    .encode(&mut w, version)
                    .unwrap();
                let m = mutate(&mut rng, &w.into_bytes());
                measure(&ctx, &m, &mut stats, |b| {
                    RequestBody::decode(key, version, b)
                });
                let mut w = Writer::new();
                ResponseBody::random(key, &mut rng, version)
                    .encode(&mut w, version)
                    .unwrap();
                let m = mutate(&mut rng, &w.into_bytes());
                measure(&ctx, &m, &mut stats, |b| {
                    ResponseBody::decode(key, version, b)
                });
            }
        }
        // A version nobody has must be refused, not guessed at.
        let mut b = Bytes::from_static(&[0; 8]);
        assert!(RequestBody::decode(key, hi + 1, &mut b).is_err());
    }
    for i in 0..500 {
        let input = random_bytes(&mut rng);
        for v in 1..=2 {
            measure(
                &format!("RequestHeader v{v} #{i}"),
                &input,
                &mut stats,
                |b| RequestHeader::decode(b, v),
            );
        }
        for v in 0..=1 {
            measure(
                &format!("ResponseHeader v{v} #{i}"),
                &input,
                &mut stats,
                |b| ResponseHeader::decode(b, v),
            );
        }
    }
    eprintln!(
        "{} decodes ({} succeeded), worst heap/input ratio (inputs >= 64 bytes) {:.1}, slowest {:?}",
        stats.decodes, stats.ok, stats.worst_ratio, stats.slowest
    );
}

#[test]
fn huge_length_prefixes_are_rejected_without_allocating() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut stats = Stats {
        decodes: 0,
        ok: 0,
        worst_ratio: 0.0,
        slowest: Duration::ZERO,
    };
    // Metadata v0: topics array claiming 2^31-1 entries, in 4 bytes of input.
    let input = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
    measure("Metadata v0", &input, &mut stats, |b| {
        RequestBody::decode(ApiKey::Metadata, 0, b)
    });
    let mut b = input.clone();
    assert!(RequestBody::decode(ApiKey::Metadata, 0, &mut b).is_err());
    // Compact (flexible) form: unsigned varint 0xffffffff.
    let input = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
    measure("Metadata v12", &input, &mut stats, |b| {
        RequestBody::decode(ApiKey::Metadata, 12, b)
    });
}
