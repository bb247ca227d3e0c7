//! Topic creation and start-to-first-produce, through librdkafka's admin client (the
//! counterpart of `kafka-topics --create`), or through the mock cluster's own topic table.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::types::RDKafkaErrorCode;
use serde_json::{json, Value};

use crate::produce::{Counters, Ctx};
use crate::{check_loopback, Conn};

/// Where the load goes: a real broker on loopback, or an in-process mock cluster that lives
/// as long as this value.
pub struct Target {
    pub bootstrap: String,
    extra: Vec<(String, String)>,
    mock: Option<MockCluster<'static, DefaultProducerContext>>,
}

impl Target {
    pub fn new(conn: &Conn) -> Result<Self> {
        if conn.mock {
            let mock = MockCluster::new(1).context("starting librdkafka's mock cluster")?;
            return Ok(Target {
                bootstrap: mock.bootstrap_servers(),
                extra: conn.extra.clone(),
                mock: Some(mock),
            });
        }
        check_loopback(&conn.bootstrap)?;
        Ok(Target {
            bootstrap: conn.bootstrap.clone(),
            extra: conn.extra.clone(),
            mock: None,
        })
    }

    /// A client config with the bootstrap servers and quiet logging; `finish` applies the
    /// user's `-X` overrides on top of the subcommand's own settings.
    pub fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap)
            .set("client.id", "kactor-bench")
            .set("log_level", "3");
        c
    }

    pub fn finish(&self, mut c: ClientConfig) -> ClientConfig {
        for (k, v) in &self.extra {
            c.set(k, v);
        }
        c
    }

    pub fn is_mock(&self) -> bool {
        self.mock.is_some()
    }

    /// Creates `topic` (an existing one is accepted) and waits until every partition has a
    /// leader in the metadata, so that a measurement never includes topic creation.
    pub fn create_topic(&self, topic: &str, partitions: i32, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        if let Some(mock) = &self.mock {
            mock.create_topic(topic, partitions, 1)
                .map_err(|e| anyhow!("mock create_topic: {e}"))?;
        } else {
            let admin: AdminClient<DefaultClientContext> = self
                .finish(self.config())
                .create()
                .context("admin client")?;
            let opts = AdminOptions::new()
                .operation_timeout(Some(timeout))
                .request_timeout(Some(timeout));
            let nt = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
            let res = futures_executor::block_on(admin.create_topics([&nt], &opts))
                .context("CreateTopics")?;
            for r in res {
                match r {
                    Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((t, code)) => bail!("CreateTopics {t}: {code}"),
                }
            }
        }
        self.wait_for_leaders(topic, partitions, deadline)
    }

    fn wait_for_leaders(&self, topic: &str, partitions: i32, deadline: Instant) -> Result<()> {
        let consumer: BaseConsumer = self.finish(self.config()).create()?;
        loop {
            let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(5));
            if let Ok(md) = &md {
                if let Some(t) = md.topics().iter().find(|t| t.name() == topic) {
                    let ps = t.partitions();
                    if t.error().is_none()
                        && ps.len() as i32 >= partitions
                        && ps.iter().all(|p| p.leader() >= 0 && p.error().is_none())
                    {
                        return Ok(());
                    }
                }
            }
            if Instant::now() >= deadline {
                bail!("topic {topic}: partitions without a leader at the deadline ({md:?})");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The partition count of `topic` from the metadata.
    pub fn partitions(&self, topic: &str) -> Result<i32> {
        let consumer: BaseConsumer = self.finish(self.config()).create()?;
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| anyhow!("topic {topic} not in metadata"))?;
        Ok(t.partitions().len() as i32)
    }
}

pub fn create_topic_cmd(
    conn: &Conn,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<Value> {
    let t0 = Instant::now();
    Target::new(conn)?.create_topic(topic, partitions, timeout)?;
    Ok(json!({"topic": topic, "partitions": partitions, "elapsed_s": t0.elapsed().as_secs_f64()}))
}

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Start to first produce: waits for the listener, then produces one acks=all record to a
/// new topic (retrying if it fails) and reports the wall-clock time since the broker was
/// launched to its acknowledgement.
pub fn first_produce(
    conn: &Conn,
    topic: &str,
    since_unix_us: u64,
    timeout: Duration,
) -> Result<Value> {
    let target = Target::new(conn)?;
    let deadline = Instant::now() + timeout;
    let mut attempts = 0u32;
    let mut last_err = String::new();
    let mut failures: Vec<String> = Vec::new();
    let t0 = Instant::now();
    // Until the listener accepts, librdkafka's reconnect backoff (100 ms and growing) would
    // blur the figure: probe the port with plain connects first, every millisecond.
    if let Some(addr) = (!target.is_mock())
        .then(|| target.bootstrap.split(',').next())
        .flatten()
        .and_then(|a| a.to_socket_addrs().ok()?.next())
    {
        while Instant::now() < deadline
            && TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let listening_ms = unix_us().saturating_sub(since_unix_us) as f64 / 1000.0;
    while Instant::now() < deadline {
        attempts += 1;
        match try_produce_one(
            &target,
            topic,
            deadline.saturating_duration_since(Instant::now()),
        ) {
            Ok(acked_at) => {
                let ms = acked_at.saturating_sub(since_unix_us) as f64 / 1000.0;
                return Ok(
                    json!({"start_to_first_produce_ms": ms, "attempts": attempts,
                           "start_to_listening_ms": listening_ms, "failed_attempts": failures}),
                );
            }
            Err(e) => {
                last_err = format!("{e:#}");
                if failures.len() < 3 {
                    failures.push(format!(
                        "{:.0} ms: {last_err}",
                        t0.elapsed().as_secs_f64() * 1e3
                    ));
                }
            }
        }
        // Short enough not to dominate a ~100 ms start, long enough not to spin.
        std::thread::sleep(Duration::from_millis(5));
    }
    bail!("no successful produce within {timeout:?} ({attempts} attempts; last: {last_err})")
}

/// One acks=all record to `topic`, created by the broker on first use
/// (`auto.create.topics.enable`, as a fresh client would find it); librdkafka re-asks for the
/// topic's metadata every 10 ms until it has a leader.
/// Returns the wall-clock time (µs since the epoch) at which the delivery report arrived, taken
/// before the producer is shut down.
fn try_produce_one(target: &Target, topic: &str, timeout: Duration) -> Result<u64> {
    let counters = std::sync::Arc::new(Counters::default());
    let mut cfg = target.config();
    cfg.set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", timeout.as_millis().max(1).to_string())
        .set("topic.metadata.refresh.fast.interval.ms", "10")
        .set("reconnect.backoff.ms", "5")
        .set("retry.backoff.ms", "5");
    let producer: rdkafka::producer::BaseProducer<Ctx> = target
        .finish(cfg)
        .create_with_context(Ctx::new(counters.clone(), 1))?;
    let rec = rdkafka::producer::BaseRecord::<(), [u8], usize>::with_opaque_to(topic, 0)
        .payload(&b"first"[..]);
    producer.send(rec).map_err(|(e, _)| anyhow!("send: {e}"))?;
    // Poll in 1 ms steps and stop at the delivery report. `Producer::flush` (rdkafka 0.38)
    // polls in 100 ms slices that run to their end even after the report arrived, which
    // rounded every start-to-first-produce figure up by up to 100 ms, on either broker.
    let deadline = Instant::now() + timeout + Duration::from_secs(1);
    while counters.delivered() + counters.errors() == 0 && Instant::now() < deadline {
        producer.poll(Duration::from_millis(1));
    }
    let acked_at = unix_us();
    if counters.delivered() == 1 {
        Ok(acked_at)
    } else {
        bail!(
            "not acknowledged: {}",
            counters
                .first_error()
                .unwrap_or_else(|| "no delivery report".into())
        )
    }
}
