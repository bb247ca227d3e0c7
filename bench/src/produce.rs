//! Producer throughput, the counterpart of Kafka's `ProducerPerformance`
//! (`kafka-producer-perf-test`): N producer threads send fixed-size records as fast as
//! librdkafka accepts them; the result counts only acknowledged records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use hdrhistogram::Histogram;
use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use serde_json::{json, Value};

use crate::admin::Target;
use crate::stats;
use crate::{secs, Conn};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub conn: Conn,
    #[arg(long)]
    pub topic: String,
    /// Partitions of the topic (created if missing).
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Value size in bytes (records have no key).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// `acks`: 0, 1 or all.
    #[arg(long, default_value = "1")]
    pub acks: String,
    /// Concurrent producers, each its own librdkafka instance and thread.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Stop sending after this long...
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// ...or after this many records in total, whichever comes first.
    #[arg(long, default_value_t = 20_000_000)]
    pub max_records: u64,
}

/// Delivery counters shared by the producer threads of one run.
#[derive(Default)]
pub struct Counters {
    delivered: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Counters {
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
    pub fn first_error(&self) -> Option<String> {
        self.first_error.lock().ok().and_then(|e| e.clone())
    }
    pub fn note_error(&self, e: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut fe) = self.first_error.lock() {
            fe.get_or_insert_with(|| e.to_string());
        }
    }
    /// Sets the totals of a single-threaded reader.
    pub fn set(&self, records: u64, bytes: u64) {
        self.delivered.store(records, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }
}

/// The producer context: librdkafka calls `delivery` on the thread that polls, so the
/// histogram lock is never contended; the opaque is the send time in µs since `start`
/// (an integer, so no allocation per record).
pub struct Ctx {
    counters: Arc<Counters>,
    start: Instant,
    hist: Mutex<Histogram<u64>>,
    // Only records sent at or after this offset from `start` count in the latency histogram.
    record_after_us: u64,
}

impl Ctx {
    pub fn new(counters: Arc<Counters>, _producers: usize) -> Self {
        Self::at(counters, Instant::now(), 0)
    }

    pub fn at(counters: Arc<Counters>, start: Instant, record_after_us: u64) -> Self {
        Ctx {
            counters,
            start,
            hist: Mutex::new(stats::new_histogram()),
            record_after_us,
        }
    }

    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    pub fn take_histogram(&self) -> Histogram<u64> {
        self.hist
            .lock()
            .map(|h| h.clone())
            .unwrap_or_else(|_| stats::new_histogram())
    }
}

impl ClientContext for Ctx {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        stats::stderr_log(level, fac, log_message);
    }
}

impl ProducerContext for Ctx {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_us: usize) {
        match result {
            Ok(m) => {
                self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .bytes
                    .fetch_add(m.payload_len() as u64, Ordering::Relaxed);
                if sent_us == NOT_TIMED {
                    return;
                }
                let sent_us = sent_us as u64;
                if sent_us >= self.record_after_us {
                    if let Ok(mut h) = self.hist.lock() {
                        stats::record(&mut h, self.now_us().saturating_sub(sent_us));
                    }
                }
            }
            Err((e, _)) => self.counters.note_error(&e.to_string()),
        }
    }
}

/// The delivery opaque of a record whose latency is not measured.
pub const NOT_TIMED: usize = usize::MAX;

/// The throughput run times one record in this many (and checks its deadline as often). On
/// this VM a clock read costs as much as a third of what librdkafka spends per 100 B record
/// (perf: `__vdso_clock_gettime` was 23% of the tool's CPU with three reads per record), so
/// reading it per record made the client, the thing both brokers wait on, slower than it
/// needs to be. One in 16 still gives hundreds of thousands of samples per scenario.
const TIME_EVERY: u64 = 16;

/// A payload that doesn't compress to nothing should compression ever be switched on.
pub fn payload(size: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b'a' + (x % 26) as u8
        })
        .collect()
}

/// Producer settings common to throughput runs; `-X` may override any of them.
pub fn producer_config(target: &Target, acks: &str) -> rdkafka::config::ClientConfig {
    let mut c = target.config();
    c.set("acks", acks)
        .set("linger.ms", "5")
        .set("compression.type", "none")
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "30000");
    c
}

pub fn run(a: &Args) -> Result<Value> {
    let target = Target::new(&a.conn)?;
    target.create_topic(&a.topic, a.partitions, Duration::from_secs(60))?;
    let partitions = target.partitions(&a.topic)?.max(1);
    let counters = Arc::new(Counters::default());
    let cpu0 = stats::process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + secs(a.duration_s);
    let producers = a.producers.max(1);
    let payload = payload(a.record_size);
    let cfg = stats::debug_logging(target.finish(producer_config(&target, &a.acks)));

    let hists: Vec<Histogram<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..producers)
            .map(|k| {
                let share = a.max_records / producers as u64
                    + u64::from((k as u64) < a.max_records % producers as u64);
                let (cfg, counters, payload) = (&cfg, counters.clone(), &payload);
                s.spawn(move || -> Result<Histogram<u64>> {
                    let producer: BaseProducer<Ctx> =
                        cfg.create_with_context(Ctx::at(counters, start, 0))?;
                    send_loop(&producer, &a.topic, partitions, k, payload, share, deadline);
                    // Bounded: anything not delivered by now counts as not delivered.
                    let _ = producer.flush(Duration::from_secs(60));
                    Ok(producer.context().take_histogram())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("producer thread panicked"))?)
            .collect::<Result<Vec<_>>>()
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    let mut hist = stats::new_histogram();
    for h in &hists {
        hist.add(h).ok();
    }
    Ok(throughput_json(
        "produce",
        &counters,
        elapsed,
        json!({
            "topic": a.topic, "partitions": partitions, "record_size": a.record_size,
            "acks": a.acks, "producers": producers, "mock": target.is_mock(),
            "latency": stats::summary(&hist),
            // With --mock this includes the mock broker, which runs in this process.
            "client_cores": stats::cores_busy(cpu0, elapsed),
        }),
    ))
}

fn send_loop(
    producer: &BaseProducer<Ctx>,
    topic: &str,
    partitions: i32,
    k: usize,
    payload: &[u8],
    max: u64,
    deadline: Instant,
) {
    let mut i: u64 = 0;
    while i < max {
        let t = if i.is_multiple_of(TIME_EVERY) {
            if Instant::now() >= deadline {
                break;
            }
            producer.context().now_us() as usize
        } else {
            NOT_TIMED
        };
        let p = ((i + k as u64) % partitions as u64) as i32;
        let rec = BaseRecord::<(), [u8], usize>::with_opaque_to(topic, t)
            .payload(payload)
            .partition(p);
        match producer.send(rec) {
            Ok(()) => {
                i += 1;
                if i & 511 == 0 {
                    producer.poll(Duration::ZERO);
                }
            }
            // The client's queue is full: serve delivery reports until there is room.
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => {
                producer.context().counters.note_error(&e.to_string());
                producer.poll(Duration::from_millis(10));
            }
        }
    }
}

pub fn throughput_json(kind: &str, c: &Counters, elapsed_s: f64, extra: Value) -> Value {
    let records = c.delivered();
    let bytes = c.bytes();
    let el = elapsed_s.max(1e-9);
    let mut v = json!({
        "kind": kind,
        "records": records,
        "bytes": bytes,
        "elapsed_s": (elapsed_s * 1000.0).round() / 1000.0,
        "records_per_s": (records as f64 / el).round(),
        "mib_per_s": ((bytes as f64 / el / 1048576.0) * 100.0).round() / 100.0,
        "errors": c.errors(),
        "first_error": c.first_error(),
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_the_requested_size_and_varies() {
        let p = payload(1024);
        assert_eq!(p.len(), 1024);
        assert!(p.iter().any(|&b| b != p[0]));
    }

    #[test]
    fn throughput_counts_only_delivered_records() {
        let c = Counters::default();
        c.delivered.store(1000, Ordering::Relaxed);
        c.bytes.store(1_048_576, Ordering::Relaxed);
        c.errors.store(3, Ordering::Relaxed);
        let v = throughput_json("produce", &c, 2.0, json!({"acks": "1"}));
        assert_eq!(v["records_per_s"], 500.0);
        assert_eq!(v["mib_per_s"], 0.5);
        assert_eq!(v["errors"], 3);
        assert_eq!(v["acks"], "1");
    }
}
