//! Consumer throughput, the counterpart of Kafka's `ConsumerPerformance`
//! (`kafka-consumer-perf-test`): one consumer reads a topic from the beginning of every
//! partition. It assigns partitions itself (no consumer group), so the figure is the fetch
//! path alone, independent of group coordination.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};

use crate::admin::Target;
use crate::batch::BatchReader;
use crate::produce::{throughput_json, Counters};
use crate::stats;
use crate::{secs, Conn};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub conn: Conn,
    #[arg(long)]
    pub topic: String,
    /// Stop after this many records...
    #[arg(long)]
    pub expect: u64,
    /// ...or this long, or after `idle_s` without a record, whichever comes first.
    #[arg(long, default_value_t = 60.0)]
    pub duration_s: f64,
    #[arg(long, default_value_t = 5.0)]
    pub idle_s: f64,
}

/// Assigns every partition of `topic` from the beginning.
pub fn assign_all<C: ConsumerContext>(
    c: &BaseConsumer<C>,
    target: &Target,
    topic: &str,
    from: Offset,
) -> Result<i32> {
    let n = target.partitions(topic)?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..n {
        tpl.add_partition_offset(topic, p, from)?;
    }
    c.assign(&tpl)?;
    Ok(n)
}

pub fn consumer_config(target: &Target) -> rdkafka::config::ClientConfig {
    let mut c = target.config();
    // librdkafka wants a group id even for manual assignment; nothing is ever committed.
    c.set("group.id", "kactor-bench")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        // librdkafka stops fetching a partition whose local queue holds queued.min.messages
        // (100,000) and then waits fetch.queue.backoff.ms (1 s by default) before it looks
        // again, however fast the application drains the queue. At 100 B records the
        // application drains 100,000 in ~50 ms, so a broker that answers fetches quickly
        // enough to fill the queue was measured as mostly idle 1 s pauses (`-X debug=fetch`:
        // "Fetch backoff for 1000ms: Local: Queue full", 10-90 of them per 1 GiB read, on
        // kactor and on Kafka alike, depending on timing). 10 ms keeps the queue bound and
        // takes the pause out of the figure for both brokers; Kafka's Java consumer has no such
        // pause.
        .set("fetch.queue.backoff.ms", "10");
    c
}

/// The consumer's client context: writes librdkafka's log lines to stderr with the Unix time,
/// so that `-X debug=fetch,protocol` shows each fetch's timing (the tool has no `log` backend)
/// and the lines can be lined up with the broker's log and the e2e timeline (`start_unix_s`);
/// and keeps librdkafka's statistics samples when `statistics.interval.ms` is set.
#[derive(Default)]
pub struct ConsumerCtx {
    samples: Mutex<Vec<StatsSample>>,
}

/// What one librdkafka statistics emission says about the round trips to the brokers.
#[derive(Debug)]
struct StatsSample {
    at: Instant,
    /// Sum and count of the round trips (request written to response read, µs) in the window
    /// since the previous emission, over every broker connection.
    rtt_sum_us: i64,
    rtt_cnt: i64,
    /// Fetch requests sent since the client started.
    fetches: i64,
}

impl StatsSample {
    fn parse(at: Instant, raw: &[u8]) -> Option<Self> {
        let v: Value = serde_json::from_slice(raw).ok()?;
        let mut s = StatsSample {
            at,
            rtt_sum_us: 0,
            rtt_cnt: 0,
            fetches: 0,
        };
        for b in v.get("brokers")?.as_object()?.values() {
            s.rtt_sum_us += b.pointer("/rtt/sum").and_then(Value::as_i64).unwrap_or(0);
            s.rtt_cnt += b.pointer("/rtt/cnt").and_then(Value::as_i64).unwrap_or(0);
            s.fetches += b.pointer("/req/Fetch").and_then(Value::as_i64).unwrap_or(0);
        }
        Some(s)
    }
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        stats::stderr_log(level, fac, log_message);
    }

    fn stats_raw(&self, raw: &[u8]) {
        if let Some(s) = StatsSample::parse(Instant::now(), raw) {
            self.samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(s);
        }
    }
}

impl ConsumerContext for ConsumerCtx {}

/// A consumer with [`consumer_config`] whose librdkafka log lines reach stderr.
pub fn create_consumer(target: &Target) -> Result<BaseConsumer<ConsumerCtx>> {
    create_consumer_with(target, consumer_config(target))
}

fn create_consumer_with(
    target: &Target,
    config: rdkafka::config::ClientConfig,
) -> Result<BaseConsumer<ConsumerCtx>> {
    let config = stats::debug_logging(target.finish(config));
    Ok(config.create_with_context(ConsumerCtx::default())?)
}

/// How often librdkafka reports its statistics during a consume run: a 4 GiB read at 1.5 GB/s
/// takes under 3 s, and the fetch cycle is taken from the windows that lie inside it.
const STATS_INTERVAL_MS: u64 = 200;

/// The fetch cycle as the client saw it while records were flowing. librdkafka keeps one
/// fetch in flight per broker: it sends the next one only after the last response has been
/// read and parsed. A cycle is therefore the round trip (request written, broker at work,
/// response sent over loopback and read) plus the client's own time between a response and
/// the next request. A broker can shorten only its part of the round trip: `bench/run.py`
/// sets the round trip against the loopback floor (`fetch-floor`) to bound what any broker
/// could show with this client.
fn fetch_cycle(samples: &[StatsSample], from: Instant, to: Instant) -> Option<Value> {
    let inside: Vec<&StatsSample> = samples
        .iter()
        .filter(|s| s.at > from && s.at <= to)
        .collect();
    // The first window inside began before `from` (the watermark queries); the ones after it
    // lie wholly in the read.
    let (first, last) = (inside.first()?, inside.last()?);
    let fetches = last.fetches - first.fetches;
    let (sum, cnt) = inside[1..]
        .iter()
        .fold((0i64, 0i64), |(s, c), w| (s + w.rtt_sum_us, c + w.rtt_cnt));
    if fetches < 2 || cnt == 0 {
        return None;
    }
    let cycle_us = last.at.duration_since(first.at).as_secs_f64() * 1e6 / fetches as f64;
    let rtt_us = sum as f64 / cnt as f64;
    let round = |x: f64| (x * 10.0).round() / 10.0;
    Some(json!({
        "fetches": fetches,
        "cycle_us": round(cycle_us),
        "rtt_us": round(rtt_us),
        "rtt_share": (rtt_us / cycle_us * 1000.0).round() / 1000.0,
    }))
}

pub fn run(a: &Args) -> Result<Value> {
    run_on(&Target::new(&a.conn)?, a)
}

fn run_on(target: &Target, a: &Args) -> Result<Value> {
    let mut config = consumer_config(target);
    config.set("statistics.interval.ms", STATS_INTERVAL_MS.to_string());
    let consumer = create_consumer_with(target, config)?;
    // librdkafka opens the partition leader's connection lazily, 0.5-1 s after its bootstrap
    // metadata (`-X debug=protocol`, against either broker): a client-side pause of varying
    // length inside a few-second measurement. Asking each leader for its watermarks first
    // brings the connection up before the clock starts.
    let n_partitions = target.partitions(&a.topic)?;
    for p in 0..n_partitions {
        consumer.fetch_watermarks(&a.topic, p, Duration::from_secs(10))?;
    }
    let mut reader = BatchReader::new(&consumer, &a.topic, n_partitions, 4096)?;
    let partitions = assign_all(&consumer, target, &a.topic, Offset::Beginning)?;
    let counters = Counters::default();
    let cpu0 = stats::process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + secs(a.duration_s);
    let idle = secs(a.idle_s);
    let mut last = start;
    let mut first: Option<Instant> = None;
    let (mut n, mut bytes) = (0u64, 0u64);
    // Records are taken in batches ([`BatchReader`]) and the clock is read once per batch, not
    // per record: with a one-record poll and a clock read per record (three, before), the
    // consumer loop was the slowest part of the measurement (perf: `__vdso_clock_gettime`
    // alone was 21% of the tool's CPU at 100 B), whichever broker it read from.
    let mut now = start;
    while n < a.expect && now < deadline && now.duration_since(last) < idle {
        let remaining = usize::try_from(a.expect - n).unwrap_or(usize::MAX);
        let got = reader.read(Duration::from_millis(100), remaining, |r| match r {
            Ok(len) => {
                n += 1;
                bytes += len as u64;
            }
            Err(e) => counters.note_error(&e),
        });
        // Serves the statistics events waiting in the consumer queue (records do not go there).
        if let Some(Err(e)) = consumer.poll(Duration::ZERO) {
            counters.note_error(&e.to_string());
        }
        now = Instant::now();
        if got > 0 {
            last = now;
            first.get_or_insert(now);
        }
    }
    counters.set(n, bytes);
    // Timed from assignment to the last record, as a client sees it: timing from the first
    // record instead would credit a broker whose first response is slow but huge (everything
    // before the first record is buffered by then). The wait for the first record is
    // reported on its own.
    let elapsed = last.duration_since(start).as_secs_f64();
    let to_first_ms = first.map(|f| f.duration_since(start).as_secs_f64() * 1000.0);
    let samples = consumer
        .context()
        .samples
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let cycle = fetch_cycle(&samples, first.unwrap_or(start), last);
    Ok(throughput_json(
        "consume",
        &counters,
        elapsed,
        json!({"topic": a.topic, "partitions": partitions, "expected": a.expect,
               "complete": n >= a.expect, "ms_to_first_record": to_first_ms,
               "client_cores": stats::cores_busy(cpu0, elapsed), "fetch_cycle": cycle}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(extra: &[(&str, &str)]) -> Conn {
        Conn {
            bootstrap: "127.0.0.1:9092".into(),
            mock: false,
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Every record written is read, counted once with its value bytes, in batches, from
    /// librdkafka's in-process mock cluster.
    #[test]
    fn the_batch_reader_reads_every_record_once() {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let target = Target::new(&Conn {
            mock: true,
            ..conn(&[])
        })
        .unwrap();
        target
            .create_topic("t", 3, Duration::from_secs(10))
            .unwrap();
        let producer: BaseProducer = target.config().create().unwrap();
        let value = [7u8; 100];
        for i in 0..30_000 {
            let rec = BaseRecord::<(), [u8]>::to("t")
                .payload(&value)
                .partition(i % 3);
            producer.send(rec).map_err(|(e, _)| e).unwrap();
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(10)).unwrap();
        let args = Args {
            conn: conn(&[]),
            topic: "t".into(),
            expect: 30_000,
            duration_s: 30.0,
            idle_s: 5.0,
        };
        let r = run_on(&target, &args).unwrap();
        assert_eq!(r["records"], 30_000);
        assert_eq!(r["bytes"], 3_000_000);
        assert_eq!(r["complete"], true);
        assert_eq!(r["errors"], 0);
    }

    /// The cycle comes from the windows wholly inside the read: the first one inside (which
    /// began before it) gives only the starting fetch count, samples outside are ignored.
    #[test]
    fn the_fetch_cycle_is_taken_from_the_windows_inside_the_read() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let raw = |sum: i64, cnt: i64, fetches: i64| {
            format!(
                r#"{{"brokers": {{"127.0.0.1:9092/1": {{"rtt": {{"sum": {sum}, "cnt": {cnt}}},
                    "req": {{"Fetch": {fetches}, "ListOffsets": 1}}}},
                   "GroupCoordinator": {{"rtt": {{"sum": 0, "cnt": 0}}, "req": {{}}}}}}}}"#
            )
        };
        let sample = |ms, sum, cnt, f| StatsSample::parse(at(ms), raw(sum, cnt, f).as_bytes());
        let samples: Vec<StatsSample> = [
            sample(100, 90_000, 3, 2),        // before the first record
            sample(300, 50_000_000, 1, 3),    // straddles it: a long poll, not counted
            sample(500, 40_000, 200, 203),    // 200 fetches of 200 µs in 200 ms
            sample(700, 40_000, 200, 403),    // the same again
            sample(900, 500_000_000, 1, 404), // after the last record: the idle long poll
        ]
        .into_iter()
        .map(Option::unwrap)
        .collect();
        assert_eq!(samples[2].fetches, 203);
        let c = fetch_cycle(&samples, at(200), at(800)).unwrap();
        assert_eq!(c["fetches"], 400);
        assert_eq!(c["cycle_us"], 1000.0);
        assert_eq!(c["rtt_us"], 200.0);
        assert_eq!(c["rtt_share"], 0.2);
        // Too short a read for two samples: no figure rather than a wrong one.
        assert!(fetch_cycle(&samples, at(400), at(600)).is_none());
        assert!(StatsSample::parse(t0, b"not json").is_none());
    }

    #[test]
    fn consumers_do_not_pause_a_second_on_a_full_local_queue() {
        let target = Target::new(&conn(&[])).unwrap();
        let c = target.finish(consumer_config(&target));
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some("10"));
        // ...unless the user asks for it with -X.
        let target = Target::new(&conn(&[("fetch.queue.backoff.ms", "1000")])).unwrap();
        let c = target.finish(consumer_config(&target));
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some("1000"));
    }
}
