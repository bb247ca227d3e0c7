//! End-to-end latency at a fixed rate, the counterpart of Kafka's `EndToEndLatency` tool but
//! open-loop: records are sent on a fixed schedule and each one's latency is measured from
//! its scheduled send time to its arrival at the consumer, so a broker stall shows up in full
//! in the tail instead of slowing the sender down (no coordinated omission).
//! With `--max-unconsumed` it measures the rate to choose instead: the sender keeps at most
//! that many records ahead of the consumer, and `received_rate` is the end-to-end maximum.

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
    #[arg(
        long,
        required_unless_present = "max_unconsumed",
        conflicts_with = "max_unconsumed"
    )]
    pub rate: Option<f64>,
    /// Instead of a fixed rate, send as fast as the consumer keeps up: at most this many
    /// records sent but not yet consumed. `received_rate` is then the end-to-end maximum of
    /// the pipeline (producer, broker and consumer sharing the machine); flat out without
    /// this bound, the producer starves the consumer and the figure measures only that.
    #[arg(long)]
    pub max_unconsumed: Option<u64>,
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
    let pace = match (a.rate, a.max_unconsumed) {
        (Some(r), _) if r > 0.0 => Pace::Rate(r),
        (_, Some(n)) if n > 0 => Pace::Unconsumed(n),
        _ => bail!("--rate or --max-unconsumed must be positive"),
    };
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

    let max_records = match pace {
        Pace::Rate(r) => (r * a.duration_s).ceil() as u64,
        Pace::Unconsumed(_) => u64::MAX,
    };
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
    let received = Arc::new(AtomicU64::new(0));
    // Records that reached the consumer while the sender ran: over `duration_s`, the rate the
    // whole pipeline (producer, broker, consumer) kept up with. Paced by `--max-unconsumed`,
    // it is the end-to-end maximum that run.py takes half of.
    let mut received_in_window = 0u64;
    let window_us = secs(a.duration_s).as_micros() as u64;
    let mut late_errors = 0u64;
    std::thread::scope(|s| -> Result<()> {
        let (sent2, done2, received2) = (sent.clone(), done.clone(), received.clone());
        let producer = &producer;
        let sender = s.spawn(move || {
            let counts = Counts {
                sent: &sent2,
                received: &received2,
            };
            send_paced(producer, a, pace, partitions, start, max_records, counts);
            let _ = producer.flush(Duration::from_secs(30));
            done2.store(true, Ordering::Release);
        });
        // Bounded: the schedule's length plus a drain period.
        let deadline = start + secs(a.duration_s) + Duration::from_secs(15);
        while Instant::now() < deadline {
            let finished = done.load(Ordering::Acquire);
            if finished && received.load(Ordering::Acquire) >= sent.load(Ordering::Acquire) {
                break;
            }
            match consumer.poll(Duration::from_millis(20)) {
                Some(Ok(m)) => {
                    let now = start.elapsed().as_micros() as u64;
                    received.fetch_add(1, Ordering::Release);
                    if now <= window_us {
                        received_in_window += 1;
                    }
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
    let received = received.load(Ordering::Acquire);
    let elapsed = start.elapsed().as_secs_f64();
    Ok(json!({
        "kind": "e2e",
        "topic": a.topic, "partitions": partitions, "record_size": a.record_size,
        "acks": a.acks, "rate": a.rate, "max_unconsumed": a.max_unconsumed,
        "linger_ms": a.linger_ms,
        "sent": sent, "acknowledged": counters.delivered(), "received": received,
        "received_in_window": received_in_window,
        "received_rate": (received_in_window as f64 / a.duration_s.max(1e-9)).round(),
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

/// How the sender paces itself.
#[derive(Clone, Copy)]
enum Pace {
    /// Records per second, each stamped with its scheduled send time.
    Rate(f64),
    /// As fast as the consumer keeps up, each stamped with its actual send time.
    Unconsumed(u64),
}

struct Counts<'a> {
    sent: &'a AtomicU64,
    received: &'a AtomicU64,
}

fn send_paced(
    producer: &BaseProducer<Ctx>,
    a: &Args,
    pace: Pace,
    partitions: i32,
    start: Instant,
    max_records: u64,
    counts: Counts,
) {
    let mut buf = payload(a.record_size);
    let end = start + secs(a.duration_s);
    let mut i = 0u64;
    while i < max_records && Instant::now() < end {
        let now_us = start.elapsed().as_micros() as u64;
        // Send everything that is due: at high rates several records share one wake-up.
        loop {
            let due = match pace {
                Pace::Rate(r) => scheduled_us(i, r),
                Pace::Unconsumed(n) if i < counts.received.load(Ordering::Acquire) + n => now_us,
                Pace::Unconsumed(_) => break,
            };
            if i >= max_records || due > now_us {
                break;
            }
            buf[..8].copy_from_slice(&due.to_le_bytes());
            let rec = BaseRecord::<(), [u8], usize>::with_opaque_to(&a.topic, due as usize)
                .payload(&buf[..])
                .partition((i % partitions as u64) as i32);
            match producer.send(rec) {
                Ok(()) => {
                    i += 1;
                    counts.sent.store(i, Ordering::Release);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(1));
                }
                Err(_) => {
                    // Counted as sent-but-lost: the consumer's count will show it.
                    i += 1;
                    counts.sent.store(i, Ordering::Release);
                }
            }
        }
        producer.poll(Duration::ZERO);
        let now_us = start.elapsed().as_micros() as u64;
        let wait_us = match pace {
            Pace::Rate(r) => scheduled_us(i, r).saturating_sub(now_us).min(1000),
            // Waiting for the consumer: check again soon.
            Pace::Unconsumed(_) => 100,
        };
        if wait_us > 0 {
            std::thread::sleep(Duration::from_micros(wait_us));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mock_args(rate: Option<f64>, max_unconsumed: Option<u64>) -> Args {
        Args {
            conn: Conn {
                bootstrap: "127.0.0.1:9092".into(),
                mock: true,
                extra: vec![],
            },
            topic: "e2e".into(),
            partitions: 1,
            record_size: 1024,
            acks: "1".into(),
            rate,
            max_unconsumed,
            duration_s: 1.5,
            warmup_s: 0.5,
            linger_ms: 1,
        }
    }

    /// Paced by the consumer (the end-to-end maximum), against librdkafka's in-process mock
    /// cluster: every record sent is received, and the rate is what arrived while sending.
    #[test]
    fn unconsumed_pacing_delivers_everything_and_reports_the_rate_received() {
        let r = run(&mock_args(None, Some(2000))).unwrap();
        let sent = r["sent"].as_u64().unwrap();
        assert!(sent > 2000, "{r}");
        assert_eq!(r["received"], sent, "{r}");
        let in_window = r["received_in_window"].as_u64().unwrap();
        assert!(in_window > 0 && in_window <= sent, "{r}");
        assert_eq!(r["received_rate"], (in_window as f64 / 1.5).round(), "{r}");
        assert_eq!(r["rate"], Value::Null);
        assert_eq!(r["max_unconsumed"], 2000);
    }

    /// At a fixed rate the schedule sets how many records go out, whatever the consumer does.
    #[test]
    fn a_fixed_rate_sends_the_schedule() {
        let r = run(&mock_args(Some(2000.0), None)).unwrap();
        assert_eq!(r["sent"], 3000, "{r}");
        assert_eq!(r["received"], 3000, "{r}");
        assert!(run(&mock_args(None, None)).is_err());
    }

    #[test]
    fn schedule_is_evenly_spaced_at_the_rate() {
        assert_eq!(scheduled_us(0, 1000.0), 0);
        assert_eq!(scheduled_us(1, 1000.0), 1000);
        assert_eq!(scheduled_us(50_000, 50_000.0), 1_000_000);
    }
}
