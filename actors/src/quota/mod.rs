//! Client quotas on the broker (Kafka's `QuotaFactory` managers for Produce and Fetch with
//! KIP-219 throttling): the pure managers in [`core`], shared by the request handlers behind
//! one mutex each, kept up to date from the served metadata image, and wrapped around the
//! Produce and Fetch routes.
//!
//! A client over its quota gets its response at once with `throttle_time_ms` set, and its
//! connection then reads nothing for that long (`HandlerOutcome::Throttled`, applied by the
//! `ConnectionActor` once the response is written), so even a client that ignores the field
//! is held to the quota by TCP. Clients too old for KIP-219 (Produce below v6, Fetch below v8)
//! get the response delayed instead, as Kafka does. A throttled fetch is answered empty and
//! its bytes are taken back from the rate. Replica fetches are never throttled here.

pub mod core;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kactor_protocol::messages::FetchResponse;
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};
use prometheus::{IntCounterVec, IntGauge, Opts};

use self::core::{ClientQuotaManager, SensorKey, WindowConfig};
use crate::metadata::actor::MetadataImageWatch;
use crate::metadata::core::QuotaEntity;
use crate::network::router::{HandlerOutcome, RequestContext, RequestRouter};

/// The quota types enforced, as Kafka names them in its metrics (`type=Produce`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaType {
    Produce,
    Fetch,
}

impl QuotaType {
    pub fn name(self) -> &'static str {
        match self {
            QuotaType::Produce => "Produce",
            QuotaType::Fetch => "Fetch",
        }
    }
    /// The quota key that sets it.
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => "producer_byte_rate",
            QuotaType::Fetch => "consumer_byte_rate",
        }
    }
    /// The first version whose clients throttle themselves (KIP-219).
    fn client_throttles_from(self) -> i16 {
        match self {
            QuotaType::Produce => 6,
            QuotaType::Fetch => 8,
        }
    }
}

/// Prometheus families (Kafka's per-client `byte-rate` and `throttle-time` sensors, as
/// counters a dashboard turns into rates and averages).
struct QuotaMetrics {
    bytes_total: IntCounterVec,
    throttle_seconds_total: prometheus::CounterVec,
    throttled_total: IntCounterVec,
    throttled_channels: IntGauge,
}

fn metrics() -> &'static QuotaMetrics {
    static M: std::sync::OnceLock<QuotaMetrics> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        let labels = &["quota_type", "user", "client_id"];
        QuotaMetrics {
            bytes_total: crate::metrics::register(
                IntCounterVec::new(
                    Opts::new(
                        "kactor_quota_bytes_total",
                        "Bytes counted against client quotas (Kafka's byte-rate), by quota type and the user / client id the quota applies to.",
                    ),
                    labels,
                )
                .expect("valid family"),
            ),
            throttle_seconds_total: crate::metrics::register(
                prometheus::CounterVec::new(
                    Opts::new(
                        "kactor_quota_throttle_time_seconds_total",
                        "Throttle time given to clients over their quota (Kafka's throttle-time), by quota type, user and client id.",
                    ),
                    labels,
                )
                .expect("valid family"),
            ),
            throttled_total: crate::metrics::register(
                IntCounterVec::new(
                    Opts::new(
                        "kactor_quota_throttled_responses_total",
                        "Responses carrying a quota throttle time, by quota type, user and client id.",
                    ),
                    labels,
                )
                .expect("valid family"),
            ),
            throttled_channels: crate::metrics::int_gauge(
                "kactor_quota_throttled_channels",
                "Connections muted for a quota throttle right now (Kafka's delay queue size).",
            ),
        }
    })
}

/// Counts a connection muted for a quota throttle (+1) or unmuted (-1), for the
/// `kactor_quota_throttled_channels` gauge.
pub fn channel_throttled(delta: i64) {
    metrics().throttled_channels.add(delta);
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One manager per quota type, shared by every connection's handlers.
pub struct QuotaManagers {
    produce: Mutex<ClientQuotaManager>,
    fetch: Mutex<ClientQuotaManager>,
    last_expiry_ms: Mutex<i64>,
    /// Whether any produce / fetch quota is set: read before each request without a lock, so
    /// that a cluster without quotas pays nothing for them on its hot path.
    produce_on: std::sync::atomic::AtomicBool,
    fetch_on: std::sync::atomic::AtomicBool,
}

impl QuotaManagers {
    pub fn new(cfg: WindowConfig) -> Arc<Self> {
        Arc::new(QuotaManagers {
            produce: Mutex::new(ClientQuotaManager::new(cfg)),
            fetch: Mutex::new(ClientQuotaManager::new(cfg)),
            last_expiry_ms: Mutex::new(now_ms()),
            produce_on: Default::default(),
            fetch_on: Default::default(),
        })
    }

    fn flag(&self, t: QuotaType) -> &std::sync::atomic::AtomicBool {
        match t {
            QuotaType::Produce => &self.produce_on,
            QuotaType::Fetch => &self.fetch_on,
        }
    }

    /// Whether any quota of this type is set (a relaxed read: a quota set a moment ago is
    /// enforced from the next request on).
    fn is_on(&self, t: QuotaType) -> bool {
        self.flag(t).load(std::sync::atomic::Ordering::Relaxed)
    }

    fn manager(&self, t: QuotaType) -> &Mutex<ClientQuotaManager> {
        match t {
            QuotaType::Produce => &self.produce,
            QuotaType::Fetch => &self.fetch,
        }
    }

    /// Takes the image's quotas (called on every change of them).
    pub fn set_quotas(&self, quotas: &BTreeMap<QuotaEntity, BTreeMap<String, f64>>) {
        for t in [QuotaType::Produce, QuotaType::Fetch] {
            let mut m = lock(self.manager(t));
            m.set_quotas(quotas, t.key());
            self.flag(t)
                .store(m.enabled(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Records `bytes` for the request's client and returns its throttle time.
    fn record(&self, t: QuotaType, ctx: &RequestContext, bytes: usize) -> i64 {
        let (user, client) = (&*ctx.connection.principal.name, ctx.client_id());
        let now = now_ms();
        let (throttle, key) = {
            let mut m = lock(self.manager(t));
            if !m.enabled() {
                return 0;
            }
            let r = m.record(user, client, bytes as f64, now);
            (r.throttle_ms, m.sensor_key(user, client))
        };
        let labels = [t.name(), key.0.as_str(), key.1.as_str()];
        let m = metrics();
        // A throttled fetch is answered empty and its bytes taken back: they never count.
        if throttle <= 0 || t == QuotaType::Produce {
            m.bytes_total
                .with_label_values(&labels)
                .inc_by(bytes as u64);
        }
        if throttle > 0 {
            m.throttled_total.with_label_values(&labels).inc();
            m.throttle_seconds_total
                .with_label_values(&labels)
                .inc_by(throttle as f64 / 1000.0);
        }
        self.maybe_expire(now);
        throttle
    }

    fn unrecord(&self, t: QuotaType, ctx: &RequestContext, bytes: usize) {
        let (user, client) = (&*ctx.connection.principal.name, ctx.client_id());
        lock(self.manager(t)).unrecord(user, client, bytes as f64, now_ms());
    }

    fn max_bytes_in_window(&self, t: QuotaType, ctx: &RequestContext) -> Option<f64> {
        let (user, client) = (&*ctx.connection.principal.name, ctx.client_id());
        lock(self.manager(t)).max_value_in_window(user, client)
    }

    /// Drops idle sensors (and their metric series) once a minute.
    fn maybe_expire(&self, now: i64) {
        {
            let mut last = lock(&self.last_expiry_ms);
            if now - *last < 60_000 {
                return;
            }
            *last = now;
        }
        for t in [QuotaType::Produce, QuotaType::Fetch] {
            let gone: Vec<SensorKey> = lock(self.manager(t)).expire_sensors(now);
            let m = metrics();
            for (u, c) in gone {
                let labels = [t.name(), u.as_str(), c.as_str()];
                let _ = m.bytes_total.remove_label_values(&labels);
                let _ = m.throttled_total.remove_label_values(&labels);
                let _ = m.throttle_seconds_total.remove_label_values(&labels);
            }
        }
    }
}

/// A poisoned lock only means another handler panicked mid-record: the rates are still
/// usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps `managers` in step with the client quotas of the served image, from now on.
pub fn follow_image(managers: Arc<QuotaManagers>, mut image: MetadataImageWatch) {
    let mut applied = {
        let current = image.borrow_and_update().client_quotas.clone();
        managers.set_quotas(&current);
        current
    };
    actix_rt::spawn(async move {
        while image.changed().await.is_ok() {
            let next = image.borrow_and_update().client_quotas.clone();
            if next != applied {
                managers.set_quotas(&next);
                applied = next;
            }
        }
    });
}

/// What a handler returns for a client throttled `throttle_ms`: the response now and a
/// muted channel (KIP-219 clients), or the response after the throttle (older ones).
async fn throttled(
    t: QuotaType,
    ctx: &RequestContext,
    response: Option<ResponseBody>,
    throttle_ms: i64,
) -> HandlerOutcome {
    let mute = Duration::from_millis(throttle_ms.max(0) as u64);
    if ctx.api_version >= t.client_throttles_from() {
        HandlerOutcome::Throttled { response, mute }
    } else {
        tokio::time::sleep(mute).await;
        match response {
            Some(r) => HandlerOutcome::Respond(r),
            None => HandlerOutcome::NoResponse,
        }
    }
}

/// Puts the produce byte-rate quota around the registered Produce handler: the request's
/// bytes are recorded once it is handled (Kafka records the request size in the response
/// callback), and an answer over quota carries the throttle time.
pub fn wrap_produce(router: &mut RequestRouter, managers: Arc<QuotaManagers>) {
    let Some(inner) = router.route(ApiKey::Produce).cloned() else {
        return;
    };
    let responder = inner.on_unsupported_version;
    let inner = inner.handler;
    router.register(ApiKey::Produce, move |ctx, body| {
        if !managers.is_on(QuotaType::Produce) {
            return inner(ctx, body);
        }
        let inner = inner.clone();
        let managers = managers.clone();
        Box::pin(async move {
            let outcome = inner(ctx.clone(), body).await;
            let throttle = managers.record(QuotaType::Produce, &ctx, ctx.request_bytes);
            if throttle <= 0 {
                return outcome;
            }
            match outcome {
                HandlerOutcome::Respond(ResponseBody::Produce(mut resp)) => {
                    resp.throttle_time_ms = clamp_ms(throttle);
                    throttled(
                        QuotaType::Produce,
                        &ctx,
                        Some(ResponseBody::Produce(resp)),
                        throttle,
                    )
                    .await
                }
                // acks=0: nothing to tell, but the channel is muted all the same.
                HandlerOutcome::NoResponse => {
                    throttled(QuotaType::Produce, &ctx, None, throttle).await
                }
                other => other,
            }
        })
    });
    if let Some(r) = responder {
        router.on_unsupported_version(ApiKey::Produce, r);
    }
}

fn clamp_ms(ms: i64) -> i32 {
    ms.clamp(0, i32::MAX as i64) as i32
}

/// Bytes a Fetch response costs against the quota: its record bytes plus a small
/// per-partition allowance for the fields around them.
fn fetch_response_bytes(resp: &FetchResponse) -> usize {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()) + 40)
        .sum::<usize>()
        + 16
}

/// Puts the fetch byte-rate quota around the registered Fetch handler (consumers only): a
/// fetch asks for at most what the quota allows in one window, and a response over quota is
/// replaced by an empty one carrying the throttle time, its bytes taken back.
pub fn wrap_fetch(router: &mut RequestRouter, managers: Arc<QuotaManagers>) {
    let Some(inner) = router.route(ApiKey::Fetch).cloned() else {
        return;
    };
    let responder = inner.on_unsupported_version;
    let inner = inner.handler;
    router.register(ApiKey::Fetch, move |ctx, body| {
        if !managers.is_on(QuotaType::Fetch) {
            return inner(ctx, body);
        }
        let inner = inner.clone();
        let managers = managers.clone();
        Box::pin(async move {
            let RequestBody::Fetch(mut req) = body else {
                return inner(ctx, body).await;
            };
            let replica_id = if ctx.api_version >= 15 {
                req.replica_state.replica_id
            } else {
                req.replica_id
            };
            if replica_id >= 0 {
                return inner(ctx, RequestBody::Fetch(req)).await;
            }
            if let Some(max) = managers.max_bytes_in_window(QuotaType::Fetch, &ctx) {
                req.max_bytes = req.max_bytes.min(max.min(i32::MAX as f64) as i32);
            }
            let incremental = req.session_epoch > 0;
            let outcome = inner(ctx.clone(), RequestBody::Fetch(req)).await;
            let HandlerOutcome::Respond(ResponseBody::Fetch(resp)) = outcome else {
                return outcome;
            };
            let bytes = fetch_response_bytes(&resp);
            let throttle = managers.record(QuotaType::Fetch, &ctx, bytes);
            if throttle <= 0 {
                return HandlerOutcome::Respond(ResponseBody::Fetch(resp));
            }
            managers.unrecord(QuotaType::Fetch, &ctx, bytes);
            // Kafka's throttled answer: no partitions; an incremental session keeps its id.
            let empty = FetchResponse {
                throttle_time_ms: clamp_ms(throttle),
                error_code: resp.error_code,
                session_id: if incremental { resp.session_id } else { 0 },
                ..Default::default()
            };
            throttled(
                QuotaType::Fetch,
                &ctx,
                Some(ResponseBody::Fetch(empty)),
                throttle,
            )
            .await
        })
    });
    if let Some(r) = responder {
        router.on_unsupported_version(ApiKey::Fetch, r);
    }
}
