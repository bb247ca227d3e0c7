//! Consumer throughput, the counterpart of Kafka's `ConsumerPerformance`
//! (`kafka-consumer-perf-test`): one consumer reads a topic from the beginning of every
//! partition. It assigns partitions itself (no consumer group), so the figure is the fetch
//! path alone, independent of group coordination.

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

/// Writes librdkafka's log lines to stderr with the Unix time, so that
/// `-X debug=fetch,protocol` shows each fetch's timing (the tool has no `log` backend) and the
/// lines can be lined up with the broker's log and the e2e timeline (`start_unix_s`).
pub struct StderrLog;

impl ClientContext for StderrLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        stats::stderr_log(level, fac, log_message);
    }
}

impl ConsumerContext for StderrLog {}

/// A consumer with [`consumer_config`] whose librdkafka log lines reach stderr.
pub fn create_consumer(target: &Target) -> Result<BaseConsumer<StderrLog>> {
    let config = stats::debug_logging(target.finish(consumer_config(target)));
    Ok(config.create_with_context(StderrLog)?)
}

pub fn run(a: &Args) -> Result<Value> {
    run_on(&Target::new(&a.conn)?, a)
}

fn run_on(target: &Target, a: &Args) -> Result<Value> {
    let consumer = create_consumer(target)?;
    // librdkafka opens the partition leader's connection lazily, 0.5-1 s after its bootstrap
    // metadata (`-X debug=protocol`, against either broker): a client-side pause of varying
    // length inside a few-second measurement. Asking each leader for its watermarks first
    // brings the connection up before the clock starts.
    for p in 0..target.partitions(&a.topic)? {
        consumer.fetch_watermarks(&a.topic, p, Duration::from_secs(10))?;
    }
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
    let mut reader = BatchReader::new(&consumer, 4096);
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
    Ok(throughput_json(
        "consume",
        &counters,
        elapsed,
        json!({"topic": a.topic, "partitions": partitions, "expected": a.expect,
               "complete": n >= a.expect, "ms_to_first_record": to_first_ms,
               "client_cores": stats::cores_busy(cpu0, elapsed)}),
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
