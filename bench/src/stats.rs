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
}
