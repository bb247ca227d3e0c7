//! `kactor-bench`: the load tool of the side-by-side benchmark (the counterpart of Kafka's
//! `kafka-producer-perf-test`, `kafka-consumer-perf-test` and `EndToEndLatency` tools), built
//! on librdkafka through the `rdkafka` crate so that kactor and Apache Kafka are driven by the
//! very same client.
//!
//! Each subcommand runs one bounded measurement (every loop stops on a time limit and on a
//! count limit) and prints exactly one JSON object on stdout; `bench/run.py` strings them
//! together into the report. Human-readable progress and librdkafka's logs go to stderr.

mod admin;
mod batch;
mod consume;
mod e2e;
mod produce;
mod stats;
mod tcp;

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kactor-bench",
    about = "Bounded Kafka load generator (one JSON result line)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Connection and client settings shared by every subcommand that talks to a broker.
#[derive(clap::Args, Clone)]
pub struct Conn {
    /// Bootstrap servers; only loopback addresses are accepted (benchmark traffic never
    /// leaves the machine). Ignored with --mock.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Use librdkafka's in-process mock cluster (`test.mock.num.brokers`) instead of a
    /// broker: the "broker that does nothing" ceiling.
    #[arg(long)]
    pub mock: bool,
    /// Extra librdkafka properties, `key=value`, applied last (repeatable).
    #[arg(short = 'X', value_parser = parse_kv)]
    pub extra: Vec<(String, String)>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a topic (idempotent: an existing topic is fine).
    CreateTopic {
        #[command(flatten)]
        conn: Conn,
        #[arg(long)]
        topic: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long, default_value_t = 60.0)]
        timeout_s: f64,
    },
    /// Retry create-topic + produce-one-record until it succeeds; report the time since
    /// `--since-unix-us` (the broker process's launch), i.e. start to first produce.
    FirstProduce {
        #[command(flatten)]
        conn: Conn,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        since_unix_us: u64,
        #[arg(long, default_value_t = 120.0)]
        timeout_s: f64,
    },
    /// Producer throughput: `producers` threads, each with its own producer, send as fast as
    /// the client allows for `duration_s` or `max_records` in total, whichever comes first.
    Produce(produce::Args),
    /// Consumer throughput: read `expect` records from the beginning of every partition.
    Consume(consume::Args),
    /// End-to-end latency at a fixed rate: producer and consumer in this process, latency =
    /// consume time - intended send time (so a stalled broker cannot hide its backlog);
    /// with `--max-unconsumed`, the end-to-end maximum rate instead.
    E2e(e2e::Args),
    /// Loopback TCP throughput with writes of a given size: the machine's ceiling.
    Tcp(tcp::Args),
    /// The loopback floor of a fetch round trip: small request, response by sendfile.
    FetchFloor(tcp::FetchArgs),
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got {s:?}"))
}

/// Refuses any bootstrap address that is not on the loopback interface.
pub fn check_loopback(bootstrap: &str) -> Result<()> {
    for hp in bootstrap.split(',') {
        let host = hp.rsplit_once(':').map(|(h, _)| h).unwrap_or(hp);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ok = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .map(|ip| ip.is_loopback())
                .unwrap_or(false);
        if !ok {
            bail!("refusing non-loopback bootstrap address {hp:?}");
        }
    }
    Ok(())
}

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let out = match cli.cmd {
        Cmd::CreateTopic {
            conn,
            topic,
            partitions,
            timeout_s,
        } => admin::create_topic_cmd(&conn, &topic, partitions, secs(timeout_s))?,
        Cmd::FirstProduce {
            conn,
            topic,
            since_unix_us,
            timeout_s,
        } => admin::first_produce(&conn, &topic, since_unix_us, secs(timeout_s))?,
        Cmd::Produce(a) => produce::run(&a)?,
        Cmd::Consume(a) => consume::run(&a)?,
        Cmd::E2e(a) => e2e::run(&a)?,
        Cmd::Tcp(a) => tcp::run(&a)?,
        Cmd::FetchFloor(a) => tcp::fetch_floor(&a)?,
    };
    println!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_bootstraps_are_accepted() {
        assert!(check_loopback("127.0.0.1:9092").is_ok());
        assert!(check_loopback("localhost:9092,127.0.0.2:9093").is_ok());
        assert!(check_loopback("[::1]:9092").is_ok());
        assert!(check_loopback("10.0.0.1:9092").is_err());
        assert!(check_loopback("127.0.0.1:9092,example.com:9092").is_err());
    }

    #[test]
    fn extra_properties_parse_as_key_value() {
        assert_eq!(
            parse_kv("linger.ms=5").unwrap(),
            ("linger.ms".into(), "5".into())
        );
        assert!(parse_kv("linger.ms").is_err());
    }
}
