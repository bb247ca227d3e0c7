//! Broker metrics and the HTTP endpoint (Kafka's JMX metrics + a Prometheus exporter):
//! one process-wide Prometheus [`registry`], the broker-level families the network layer
//! records ([`broker`]), the readiness gate behind `/readyz` ([`readiness`]), and a small
//! HTTP/1.1 server ([`http`]) for `/metrics`, `/healthz`, `/readyz`.
//!
//! Metric families are lock-free atomics, so one registry for the process is the usual
//! Prometheus shape and does not violate "no shared mutable state between components": nobody
//! reads these values to make decisions.
//!
//! Other components register their own families in [`registry()`] with the naming rule of
//! DESIGN.md §7 (`kactor_<component>_<thing>_<unit>`, counters end in `_total`).

pub mod http;

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// The process-wide registry every kactor metric family lives in.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}

/// Registers a collector, tolerating a second registration of the same family (tests start
/// several brokers' worth of components in one process).
pub fn register<C: prometheus::core::Collector + Clone + 'static>(c: C) -> C {
    match registry().register(Box::new(c.clone())) {
        Ok(()) | Err(prometheus::Error::AlreadyReg) => c,
        Err(e) => panic!("invalid metric family definition: {e}"),
    }
}

/// Latency buckets in seconds, 100 µs .. 30 s: covers a cached ApiVersions and a long-poll fetch.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Families of the network layer (Kafka's `RequestMetrics` and `SocketServer` metrics).
pub struct BrokerMetrics {
    /// Requests completed, by API name (`Produce`, `Fetch`, ...).
    pub requests_total: IntCounterVec,
    /// Time from a frame being read to its response being queued for writing, by API.
    pub request_duration_seconds: HistogramVec,
    /// Responses whose top-level error code was not NONE, by API and Kafka error name/number.
    pub request_errors_total: IntCounterVec,
    /// Request bytes read, including the 4-byte size prefix.
    pub network_bytes_in_total: IntCounter,
    /// Response bytes written, including the 4-byte size prefix.
    pub network_bytes_out_total: IntCounter,
    /// Open client connections, by listener.
    pub connections: IntGaugeVec,
    /// Connections accepted, by listener.
    pub connections_accepted_total: IntCounterVec,
    /// Connections refused because `max.connections` was reached, by listener.
    pub connections_refused_total: IntCounterVec,
    /// Connections closed by the broker for a protocol violation, by reason.
    pub connections_closed_total: IntCounterVec,
    /// SASL authentications and re-authentications, by listener and result (Kafka's
    /// successful-/failed-authentication-total).
    pub authentications_total: IntCounterVec,
    pub authorization_denials_total: IntCounterVec,
    /// TLS handshakes, by listener and result.
    pub tls_handshakes_total: IntCounterVec,
}

/// The network layer's families, created and registered on first use.
pub fn broker() -> &'static BrokerMetrics {
    static BROKER: OnceLock<BrokerMetrics> = OnceLock::new();
    BROKER.get_or_init(|| BrokerMetrics {
        requests_total: register(
            IntCounterVec::new(
                Opts::new("kactor_network_requests_total", "Requests handled, by API."),
                &["api"],
            )
            .expect("valid family"),
        ),
        request_duration_seconds: register(
            HistogramVec::new(
                HistogramOpts::new(
                    "kactor_network_request_duration_seconds",
                    "Time from request read to response queued, by API.",
                )
                .buckets(LATENCY_BUCKETS.to_vec()),
                &["api"],
            )
            .expect("valid family"),
        ),
        request_errors_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_network_request_errors_total",
                    "Responses with a top-level error code, by API and error.",
                ),
                &["api", "error"],
            )
            .expect("valid family"),
        ),
        network_bytes_in_total: register(
            IntCounter::new("kactor_network_bytes_in_total", "Request bytes read.")
                .expect("valid family"),
        ),
        network_bytes_out_total: register(
            IntCounter::new("kactor_network_bytes_out_total", "Response bytes written.")
                .expect("valid family"),
        ),
        connections: register(
            IntGaugeVec::new(
                Opts::new(
                    "kactor_network_connections",
                    "Open connections, by listener.",
                ),
                &["listener"],
            )
            .expect("valid family"),
        ),
        connections_accepted_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_network_connections_accepted_total",
                    "Connections accepted, by listener.",
                ),
                &["listener"],
            )
            .expect("valid family"),
        ),
        connections_refused_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_network_connections_refused_total",
                    "Connections refused at max.connections, by listener.",
                ),
                &["listener"],
            )
            .expect("valid family"),
        ),
        connections_closed_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_network_connections_closed_total",
                    "Connections closed by the broker, by reason.",
                ),
                &["reason"],
            )
            .expect("valid family"),
        ),
        authorization_denials_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_authorization_denials_total",
                    "Authorization checks the ACLs denied (each one logged by kafka.authorizer.logger), by API.",
                ),
                &["api"],
            )
            .expect("valid family"),
        ),
        authentications_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_network_authentications_total",
                    "SASL authentications and re-authentications, by listener and result.",
                ),
                &["listener", "result"],
            )
            .expect("valid family"),
        ),
        tls_handshakes_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_network_tls_handshakes_total",
                    "TLS handshakes on SSL and SASL_SSL listeners, by listener and result.",
                ),
                &["listener", "result"],
            )
            .expect("valid family"),
        ),
    })
}

/// A gauge family for "is this up" style values other components may want (e.g. partitions).
pub fn int_gauge(name: &str, help: &str) -> IntGauge {
    register(IntGauge::new(name, help).expect("valid family"))
}

/// Renders every registered family in the Prometheus text format.
pub fn render() -> String {
    // Make sure the network families exist (with no samples yet) even before the first request,
    // so a scrape right after start-up already shows them.
    let _ = broker();
    let _ = crate::runtime::metrics::families();
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry().gather(), &mut out)
        .expect("text encoding into a Vec cannot fail");
    String::from_utf8(out).expect("Prometheus text format is UTF-8")
}

/// What `/readyz` reports: ready once every registered condition is satisfied (listeners bound,
/// later: metadata caught up). Components register a condition at start and flip it.
pub struct Readiness {
    conditions: Mutex<BTreeMap<String, bool>>,
}

impl Readiness {
    /// Adds a condition that starts unsatisfied.
    pub fn require(&self, name: &str) {
        self.lock().entry(name.to_string()).or_insert(false);
    }

    pub fn set(&self, name: &str, ready: bool) {
        self.lock().insert(name.to_string(), ready);
    }

    /// Ready when at least one condition exists and all hold; else the unmet names.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let c = self.lock();
        let unmet: Vec<String> = c
            .iter()
            .filter(|(_, ok)| !**ok)
            .map(|(n, _)| n.clone())
            .collect();
        if c.is_empty() {
            return Err(vec!["starting".to_string()]);
        }
        if unmet.is_empty() {
            Ok(())
        } else {
            Err(unmet)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        // A panic while holding this lock cannot leave the map inconsistent; keep serving.
        self.conditions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The process-wide readiness gate.
pub fn readiness() -> &'static Readiness {
    static READINESS: OnceLock<Readiness> = OnceLock::new();
    READINESS.get_or_init(|| Readiness {
        conditions: Mutex::new(BTreeMap::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_includes_network_families() {
        broker()
            .requests_total
            .with_label_values(&["ApiVersions"])
            .inc();
        broker()
            .request_duration_seconds
            .with_label_values(&["ApiVersions"])
            .observe(0.001);
        let text = render();
        assert!(
            text.contains("kactor_network_requests_total{api=\"ApiVersions\"}"),
            "{text}"
        );
        assert!(text.contains("# TYPE kactor_network_request_duration_seconds histogram"));
    }

    #[test]
    fn readiness_needs_every_condition() {
        let r = Readiness {
            conditions: Mutex::new(BTreeMap::new()),
        };
        assert!(r.check().is_err());
        r.require("listeners");
        r.require("metadata");
        r.set("listeners", true);
        assert_eq!(r.check(), Err(vec!["metadata".to_string()]));
        r.set("metadata", true);
        assert_eq!(r.check(), Ok(()));
    }
}
