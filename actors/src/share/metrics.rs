//! Share group delivery metrics (Kafka's `SharePartitionManager` and `SharePartition` sensors,
//! in kactor's names): share sessions, share-partitions kept, records in flight, records
//! acquired and redelivered, and records released by expired locks or dropped sessions.

use std::sync::OnceLock;

use prometheus::{IntCounter, IntGauge};

use crate::metrics::register;

pub struct ShareMetrics {
    /// `kactor_share_sessions`: open share sessions on this broker.
    pub sessions: IntGauge,
    /// `kactor_share_partitions`: share-partitions (group, topic partition) kept here.
    pub partitions: IntGauge,
    /// `kactor_share_records_in_flight`: records acquired and not yet acknowledged.
    pub in_flight: IntGauge,
    /// `kactor_share_records_acquired_total`: deliveries of records to share consumers.
    pub acquired: IntCounter,
    /// `kactor_share_records_redelivered_total`: deliveries after the first of a record.
    pub redelivered: IntCounter,
    /// `kactor_share_lock_releases_total`: records released because their acquisition lock
    /// expired or their session was dropped.
    pub lock_releases: IntCounter,
}

pub fn share_metrics() -> &'static ShareMetrics {
    static M: OnceLock<ShareMetrics> = OnceLock::new();
    M.get_or_init(|| {
        let gauge = |name: &str, help: &str| {
            register(IntGauge::new(name, help).expect("valid gauge"))
        };
        let counter = |name: &str, help: &str| {
            register(IntCounter::new(name, help).expect("valid counter"))
        };
        ShareMetrics {
            sessions: gauge("kactor_share_sessions", "Open share sessions on this broker."),
            partitions: gauge(
                "kactor_share_partitions",
                "Share-partitions (share group, topic partition) kept on this broker.",
            ),
            in_flight: gauge(
                "kactor_share_records_in_flight",
                "Records acquired by share consumers and not yet acknowledged.",
            ),
            acquired: counter(
                "kactor_share_records_acquired_total",
                "Deliveries of records to share consumers.",
            ),
            redelivered: counter(
                "kactor_share_records_redelivered_total",
                "Deliveries of records to share consumers after their first.",
            ),
            lock_releases: counter(
                "kactor_share_lock_releases_total",
                "Records released because their acquisition lock expired or their share session was dropped.",
            ),
        }
    })
}
