//! End-to-end latency at a fixed rate, the counterpart of Kafka's `EndToEndLatency` tool but
//! open-loop: records are sent on a fixed schedule and each one's latency is measured from
//! its scheduled send time to its arrival at the consumer, so a broker stall shows up in full
//! in the tail instead of slowing the sender down (no coordinated omission).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::Offset;
use serde_json::{json, Value};

use crate::admin::Target;
use crate::consume::{assign_all, create_consumer};
use crate::produce::{payload, producer_config, Counters, Ctx};
use crate::{secs, stats, Conn};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub conn: Conn,
    #[arg(long)]
    pub topic: String,
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    #[arg(long, default_value = "1")]
    pub acks: String,
    /// Records per second (all partitions together).
    #[arg(long)]
    pub rate: f64,
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// Records scheduled in the first `warmup_s` are sent but not measured.
    #[arg(long, default_value_t = 1.0)]
    pub warmup_s: f64,
    /// The producer's linger: 0 measures the broker, not the client's batching delay.
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u32,
}

/// The timeline's window, by scheduled send time.
const WINDOW_US: u64 = 100_000;

/// The i-th record's scheduled send time, in µs from the start, at `rate` records/s.
pub fn scheduled_us(i: u64, rate: f64) -> u64 {
    (i as f64 * 1_000_000.0 / rate) as u64
}

pub fn run(a: &Args) -> Result<Value> {
    if a.rate <= 0.0 {
        bail!("--rate must be positive");
    }
    if a.record_size < 8 {
        bail!("--record-size must hold the 8-byte timestamp");
    }
    let target = Target::new(&a.conn)?;
    target.create_topic(&a.topic, a.partitions, Duration::from_secs(60))?;
    let consumer = create_consumer(&target)?;
    let partitions = assign_all(&consumer, &target, &a.topic, Offset::Beginning)?;
    // Let the consumer connect and start fetching before the clock starts.
    let warm_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < warm_until {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(50)) {
            bail!("topic {} is not empty: use a fresh topic", a.topic);
        }
    }

    let max_records = (a.rate * a.duration_s).ceil() as u64;
    let start = Instant::now();
    let start_unix_s = stats::unix_s();
    let warmup_us = secs(a.warmup_s).as_micros() as u64;
    let sent = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut cfg = producer_config(&target, &a.acks);
    cfg.set("linger.ms", a.linger_ms.to_string());
    let producer: BaseProducer<Ctx> = stats::debug_logging(target.finish(cfg))
        .create_with_context(Ctx::at(counters.clone(), start, warmup_us))?;

    let mut hist = stats::new_histogram();
    // The worst latency (ms) of the records scheduled in each window of WINDOW_US, so a tail
    // can be told apart from a stall and lined up with what the broker did at that moment
    // (with one partition, record i is offset i, scheduled at i / rate).
    let mut timeline = vec![0u32; (secs(a.duration_s).as_micros() as u64 / WINDOW_US + 1) as usize];
    let mut received = 0u64;
    let mut late_errors = 0u64;
    std::thread::scope(|s| -> Result<()> {
        let (sent2, done2) = (sent.clone(), done.clone());
        let producer = &producer;
        let sender = s.spawn(move || {
            send_scheduled(producer, a, partitions, start, max_records, &sent2);
            let _ = producer.flush(Duration::from_secs(30));
            done2.store(true, Ordering::Release);
        });
        // Bounded: the schedule's length plus a drain period.
        let deadline = start + secs(a.duration_s) + Duration::from_secs(15);
        while Instant::now() < deadline {
            let finished = done.load(Ordering::Acquire);
            if finished && received >= sent.load(Ordering::Acquire) {
                break;
            }
            match consumer.poll(Duration::from_millis(20)) {
                Some(Ok(m)) => {
                    let now = start.elapsed().as_micros() as u64;
                    received += 1;
                    let ts = m
                        .payload()
                        .and_then(|p| p.get(..8))
                        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                        .unwrap_or(0);
                    let latency = now.saturating_sub(ts);
                    if ts >= warmup_us {
                        stats::record(&mut hist, latency);
                    }
                    if let Some(w) = timeline.get_mut((ts / WINDOW_US) as usize) {
                        *w = (*w).max((latency / 1000) as u32);
                    }
                }
                Some(Err(_)) => late_errors += 1,
                None => {}
            }
        }
        sender
            .join()
            .map_err(|_| anyhow!("sender thread panicked"))?;
        Ok(())
    })?;
    let sent = sent.load(Ordering::Acquire);
    let elapsed = start.elapsed().as_secs_f64();
    Ok(json!({
        "kind": "e2e",
        "topic": a.topic, "partitions": partitions, "record_size": a.record_size,
        "acks": a.acks, "rate": a.rate, "linger_ms": a.linger_ms,
        "sent": sent, "acknowledged": counters.delivered(), "received": received,
        "produce_errors": counters.errors(), "first_error": counters.first_error(),
        "consume_errors": late_errors,
        "achieved_rate": (sent as f64 / a.duration_s.max(1e-9)).round(),
        "elapsed_s": (elapsed * 1000.0).round() / 1000.0,
        "latency": stats::summary(&hist),
        "produce_latency": stats::summary(&producer.context().take_histogram()),
        "start_unix_s": (start_unix_s * 1000.0).round() / 1000.0,
        "timeline_window_ms": WINDOW_US / 1000,
        "timeline_max_ms": timeline,
    }))
}

fn send_scheduled(
    producer: &BaseProducer<Ctx>,
    a: &Args,
    partitions: i32,
    start: Instant,
    max_records: u64,
    sent: &AtomicU64,
) {
    let mut buf = payload(a.record_size);
    let end = start + secs(a.duration_s);
    let mut i = 0u64;
    while i < max_records && Instant::now() < end {
        let now_us = start.elapsed().as_micros() as u64;
        // Send everything that is due: at high rates several records share one wake-up.
        while i < max_records && scheduled_us(i, a.rate) <= now_us {
            let due = scheduled_us(i, a.rate);
            buf[..8].copy_from_slice(&due.to_le_bytes());
            let rec = BaseRecord::<(), [u8], usize>::with_opaque_to(&a.topic, due as usize)
                .payload(&buf[..])
                .partition((i % partitions as u64) as i32);
            match producer.send(rec) {
                Ok(()) => {
                    i += 1;
                    sent.store(i, Ordering::Release);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(1));
                }
                Err(_) => {
                    // Counted as sent-but-lost: the consumer's count will show it.
                    i += 1;
                    sent.store(i, Ordering::Release);
                }
            }
        }
        producer.poll(Duration::ZERO);
        let next = scheduled_us(i, a.rate);
        let now_us = start.elapsed().as_micros() as u64;
        if next > now_us {
            std::thread::sleep(Duration::from_micros((next - now_us).min(1000)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_is_evenly_spaced_at_the_rate() {
        assert_eq!(scheduled_us(0, 1000.0), 0);
        assert_eq!(scheduled_us(1, 1000.0), 1000);
        assert_eq!(scheduled_us(50_000, 50_000.0), 1_000_000);
    }
}
