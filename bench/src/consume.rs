//! Consumer throughput, the counterpart of Kafka's `ConsumerPerformance`
//! (`kafka-consumer-perf-test`): one consumer reads a topic from the beginning of every
//! partition. It assigns partitions itself (no consumer group), so the figure is the fetch
//! path alone, independent of group coordination.

use std::time::{Duration, Instant};

use anyhow::Result;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};

use crate::admin::Target;
use crate::produce::{throughput_json, Counters};
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
pub fn assign_all(c: &BaseConsumer, target: &Target, topic: &str, from: Offset) -> Result<i32> {
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
        .set("enable.partition.eof", "false");
    c
}

pub fn run(a: &Args) -> Result<Value> {
    let target = Target::new(&a.conn)?;
    let consumer: BaseConsumer = target.finish(consumer_config(&target)).create()?;
    let partitions = assign_all(&consumer, &target, &a.topic, Offset::Beginning)?;
    let counters = Counters::default();
    let start = Instant::now();
    let deadline = start + secs(a.duration_s);
    let idle = secs(a.idle_s);
    let mut last = start;
    let mut first: Option<Instant> = None;
    let (mut n, mut bytes) = (0u64, 0u64);
    while n < a.expect && Instant::now() < deadline && last.elapsed() < idle {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                n += 1;
                bytes += m.payload_len() as u64;
                last = Instant::now();
                first.get_or_insert(last);
            }
            Some(Err(e)) => {
                counters.note_error(&e.to_string());
            }
            None => {}
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
               "complete": n >= a.expect, "ms_to_first_record": to_first_ms}),
    ))
}
