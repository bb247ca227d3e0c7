//! Latency summaries from HDR histograms (the same structure Kafka's perf tools report
//! percentiles from), recorded in microseconds.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// A histogram of microseconds from 1 µs to 10 minutes at 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("static histogram bounds are valid")
}

/// Records `us`, clamped into the histogram's range (a sample beyond 10 min is still a sample).
pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.max(1));
}

/// p50/p99/p99.9/max and mean in microseconds, as JSON.
pub fn summary(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({"count": 0});
    }
    json!({
        "count": h.len(),
        "mean_us": (h.mean() * 10.0).round() / 10.0,
        "p50_us": h.value_at_quantile(0.50),
        "p99_us": h.value_at_quantile(0.99),
        "p999_us": h.value_at_quantile(0.999),
        "max_us": h.max(),
    })
}

/// CPU seconds (user + system, all threads) this process has used so far, from
/// /proc/self/stat. The report divides the window's share by its length to show how many of
/// the machine's cores the client itself kept busy: at 2 cores, a client near 1.5 leaves the
/// broker little, whichever broker it is.
/// Writes a librdkafka log line to stderr with the Unix time (see [`debug_logging`]).
pub fn stderr_log(level: rdkafka::config::RDKafkaLogLevel, fac: &str, msg: &str) {
    eprintln!("{:.6} {level:?} {fac} {msg}", unix_s());
}

/// The crate caps librdkafka's log level at the `log` crate's (off here), so `-X debug=...`
/// needs debug-level lines to show anything: with it, each fetch and produce request's
/// timing reaches stderr through the client contexts' `log`.
pub fn debug_logging(mut c: rdkafka::config::ClientConfig) -> rdkafka::config::ClientConfig {
    if c.get("debug").is_some() {
        c.set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
    }
    c
}

/// Seconds since the Unix epoch, for lining up the tool's output with other logs.
pub fn unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15, in USER_HZ ticks,
    // which Linux fixes at 100 for everything it reports through /proc.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// `(cpu seconds since cpu0) / elapsed`, rounded to hundredths: cores kept busy.
pub fn cores_busy(cpu0: Option<f64>, elapsed_s: f64) -> Option<f64> {
    let used = process_cpu_seconds()? - cpu0?;
    (elapsed_s > 0.0).then(|| (used / elapsed_s * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reports_percentiles_in_microseconds() {
        let mut h = new_histogram();
        for us in 1..=1000 {
            record(&mut h, us);
        }
        let s = summary(&h);
        assert_eq!(s["count"], 1000);
        assert_eq!(s["p50_us"], 500);
        assert_eq!(s["p99_us"], 990);
        assert_eq!(s["max_us"], 1000);
    }

    #[test]
    fn out_of_range_samples_are_clamped_not_lost() {
        let mut h = new_histogram();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn empty_histogram_has_only_a_count() {
        assert_eq!(summary(&new_histogram()), json!({"count": 0}));
    }

    #[test]
    fn a_busy_loop_shows_as_about_one_core() {
        let cpu0 = process_cpu_seconds();
        assert!(cpu0.is_some());
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 300 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let cores = cores_busy(cpu0, start.elapsed().as_secs_f64()).unwrap();
        // One spinning thread: at most a core (ticks round), at least some of one even on a
        // loaded machine.
        assert!((0.2..=1.2).contains(&cores), "{cores}");
    }
}
