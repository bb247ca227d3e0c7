//! The pure side of client quotas (Kafka's `ClientQuotaManager` with its default quota
//! callback, and the `Rate` / `SampledStat` it measures with): which quota applies to a
//! (user, client-id), the windowed rate of what each client did, and how long a client over
//! its quota is throttled. No clocks of its own (every call takes `now_ms`), no I/O.

use std::collections::{BTreeMap, HashMap};

use crate::metadata::core::QuotaEntity;

/// `quota.window.num` samples of `quota.window.size.seconds` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowConfig {
    pub samples: usize,
    pub window_ms: i64,
}

impl Default for WindowConfig {
    /// Kafka's defaults: 11 samples of 1 s (10 whole windows and the current one).
    fn default() -> Self {
        WindowConfig {
            samples: 11,
            window_ms: 1000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    value: f64,
    events: u64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now: i64) -> Self {
        Sample {
            value: 0.0,
            events: 0,
            start_ms: now,
            last_event_ms: now,
        }
    }
}

/// A rate per second over the last samples (Kafka's `Rate` over a `WindowedSum`): values go
/// into the current sample, a sample older than one window starts a new one, and at most
/// `samples + 1` are kept (the extra one overlapping the window's start).
#[derive(Debug, Clone, Default)]
pub struct RateSampler {
    samples: Vec<Sample>,
    current: usize,
}

impl RateSampler {
    pub fn record(&mut self, cfg: &WindowConfig, value: f64, now: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        if now - self.samples[self.current].start_ms >= cfg.window_ms {
            self.current = (self.current + 1) % (cfg.samples + 1);
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now));
            } else {
                self.samples[self.current] = Sample::new(now);
            }
        }
        let s = &mut self.samples[self.current];
        s.value += value;
        s.events += 1;
        s.last_event_ms = now;
    }

    /// Samples with no event for a whole monitored span are reset (they no longer count).
    fn purge(&mut self, cfg: &WindowConfig, now: i64) {
        let expire = cfg.samples as i64 * cfg.window_ms;
        for s in &mut self.samples {
            if now - s.last_event_ms >= expire {
                *s = Sample::new(now);
            }
        }
    }

    /// The span the rate divides by, in ms: from the oldest sample's start, but never less
    /// than `samples - 1` whole windows, so that a new client is not judged on its first
    /// milliseconds alone.
    pub fn window_size_ms(&mut self, cfg: &WindowConfig, now: i64) -> i64 {
        self.purge(cfg, now);
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        let mut elapsed = now - self.oldest_start(now);
        let full = elapsed / cfg.window_ms;
        let min_full = cfg.samples as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * cfg.window_ms;
        }
        elapsed.max(1)
    }

    /// Units per second since the oldest sample began, over at least one window (Kafka's
    /// `SimpleRate`, which replication quotas use): unlike [`RateSampler::measure`], a burst
    /// right after a quiet spell counts in full at once.
    pub fn measure_simple(&mut self, cfg: &WindowConfig, now: i64) -> f64 {
        self.purge(cfg, now);
        let elapsed = (now - self.oldest_start(now)).max(cfg.window_ms);
        self.total() / (elapsed as f64 / 1000.0)
    }

    /// Units per second over the window.
    pub fn measure(&mut self, cfg: &WindowConfig, now: i64) -> f64 {
        self.purge(cfg, now);
        self.total() / (self.window_size_ms(cfg, now) as f64 / 1000.0)
    }

    fn total(&self) -> f64 {
        self.samples.iter().map(|s| s.value).sum()
    }

    fn oldest_start(&self, now: i64) -> i64 {
        self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now)
    }
}

/// One level of a quota entity (Kafka's `UserEntity` / `DefaultUserEntity`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    Named(String),
    Default,
}

/// A user / client-id quota entity: (user level, client-id level), at least one present.
pub type EntityKey = (Option<Level>, Option<Level>);

/// Which kinds of entity have ever had a quota (Kafka's `QuotaTypes`, kept until restart):
/// decides how clients are grouped into sensors.
const USER_CLIENT_ENABLED: u8 = 1;
const USER_ENABLED: u8 = 2;
const CLIENT_ENABLED: u8 = 4;

/// The (user, client-id) a sensor is shared by, empty strings where a level does not apply
/// (Kafka's quota metric tags).
pub type SensorKey = (String, String);

#[derive(Debug, Clone)]
struct Sensor {
    rate: RateSampler,
    last_record_ms: i64,
}

/// What recording a value decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    /// How long the client must wait, 0 if within its quota.
    pub throttle_ms: i64,
}

/// A sensor idle this long is dropped, as Kafka expires inactive quota sensors.
pub const INACTIVE_SENSOR_MS: i64 = 3_600_000;

/// One quota type's manager (produce bytes, fetch bytes, or request time).
#[derive(Debug, Clone, Default)]
pub struct ClientQuotaManager {
    cfg: WindowConfig,
    quotas: HashMap<EntityKey, f64>,
    enabled: u8,
    sensors: HashMap<SensorKey, Sensor>,
}

impl ClientQuotaManager {
    pub fn new(cfg: WindowConfig) -> Self {
        ClientQuotaManager {
            cfg,
            ..Default::default()
        }
    }

    pub fn config(&self) -> WindowConfig {
        self.cfg
    }

    /// Replaces the quotas with `key`'s values from the image's client quotas (entities of
    /// users and client ids; ip entities have no byte or request quotas).
    pub fn set_quotas(&mut self, image: &BTreeMap<QuotaEntity, BTreeMap<String, f64>>, key: &str) {
        self.quotas.clear();
        for (entity, values) in image {
            let Some(value) = values.get(key) else {
                continue;
            };
            if entity.keys().any(|t| t != "user" && t != "client-id") {
                continue;
            }
            let level = |t: &str| {
                entity.get(t).map(|n| match n {
                    Some(n) => Level::Named(n.clone()),
                    None => Level::Default,
                })
            };
            let (user, client) = (level("user"), level("client-id"));
            self.enabled |= match (&user, &client) {
                (Some(_), Some(_)) => USER_CLIENT_ENABLED,
                (Some(_), None) => USER_ENABLED,
                (None, Some(_)) => CLIENT_ENABLED,
                (None, None) => continue,
            };
            self.quotas.insert((user, client), *value);
        }
    }

    /// Whether any quota of this type was ever set (until then nothing is recorded).
    pub fn enabled(&self) -> bool {
        self.enabled != 0
    }

    fn has(&self, user: Option<Level>, client: Option<Level>) -> bool {
        self.quotas.contains_key(&(user, client))
    }

    /// The sensor a (user, client-id) records into (Kafka's `quotaMetricTags`): per pair
    /// when only pair quotas exist, per user or per client id when only those do, and with a
    /// mix, grouped at the level of the most specific quota that matches.
    pub fn sensor_key(&self, user: &str, client: &str) -> SensorKey {
        let both = (user.to_string(), client.to_string());
        let user_only = (user.to_string(), String::new());
        let client_only = (String::new(), client.to_string());
        match self.enabled {
            0 | CLIENT_ENABLED => return client_only,
            USER_ENABLED => return user_only,
            USER_CLIENT_ENABLED => return both,
            _ => {}
        }
        let (u, c) = (Level::Named(user.into()), Level::Named(client.into()));
        let d = Level::Default;
        if self.has(Some(u.clone()), Some(c.clone())) || self.has(Some(u.clone()), Some(d.clone()))
        {
            both
        } else if self.has(Some(u), None) {
            user_only
        } else if self.has(Some(d.clone()), Some(c)) || self.has(Some(d.clone()), Some(d.clone())) {
            both
        } else if self.has(Some(d), None) {
            user_only
        } else {
            client_only
        }
    }

    /// The quota of a sensor (Kafka's `quotaLimit`), in the order of precedence of the
    /// levels that sensor key can match; `None`: unlimited.
    pub fn quota_limit(&self, key: &SensorKey) -> Option<f64> {
        let (user, client) = key;
        let named = |s: &str| Some(Level::Named(s.to_string()));
        let get = |u: Option<Level>, c: Option<Level>| self.quotas.get(&(u, c)).copied();
        let d = || Some(Level::Default);
        if !user.is_empty() && !client.is_empty() {
            get(named(user), named(client))
                .or_else(|| get(named(user), d()))
                .or_else(|| get(d(), named(client)))
                .or_else(|| get(d(), d()))
        } else if !user.is_empty() {
            get(named(user), None).or_else(|| get(d(), None))
        } else if !client.is_empty() {
            get(None, named(client)).or_else(|| get(None, d()))
        } else {
            None
        }
    }

    /// Records `value` for the client at `now` and says how long it must be throttled:
    /// (rate - quota) / quota × the window the rate was measured over (Kafka's
    /// `QuotaUtils.throttleTime`), 0 while within the quota.
    pub fn record(&mut self, user: &str, client: &str, value: f64, now: i64) -> Recorded {
        if !self.enabled() {
            return Recorded { throttle_ms: 0 };
        }
        let key = self.sensor_key(user, client);
        let limit = self.quota_limit(&key);
        let cfg = self.cfg;
        let sensor = self.sensors.entry(key).or_insert_with(|| Sensor {
            rate: RateSampler::default(),
            last_record_ms: now,
        });
        sensor.last_record_ms = now;
        sensor.rate.record(&cfg, value, now);
        let throttle_ms = match limit {
            Some(bound) => {
                let rate = sensor.rate.measure(&cfg, now);
                if rate > bound {
                    let window = sensor.rate.window_size_ms(&cfg, now) as f64;
                    ((rate - bound) / bound * window).round() as i64
                } else {
                    0
                }
            }
            None => 0,
        };
        Recorded { throttle_ms }
    }

    /// Takes back a value recorded for a response that was not sent (a throttled fetch
    /// answers empty), as Kafka records its negative.
    pub fn unrecord(&mut self, user: &str, client: &str, value: f64, now: i64) {
        if !self.enabled() {
            return;
        }
        let key = self.sensor_key(user, client);
        if let Some(sensor) = self.sensors.get_mut(&key) {
            let cfg = self.cfg;
            sensor.rate.record(&cfg, -value, now);
        }
    }

    /// The most a client may take in one response without being throttled for it alone:
    /// quota × (samples - 1) × window (Kafka's `getMaxValueInQuotaWindow`).
    pub fn max_value_in_window(&self, user: &str, client: &str) -> Option<f64> {
        if !self.enabled() {
            return None;
        }
        let limit = self.quota_limit(&self.sensor_key(user, client))?;
        Some(limit * (self.cfg.samples as f64 - 1.0) * (self.cfg.window_ms as f64 / 1000.0))
    }

    /// Drops the sensors idle for [`INACTIVE_SENSOR_MS`] and returns their keys.
    pub fn expire_sensors(&mut self, now: i64) -> Vec<SensorKey> {
        let gone: Vec<SensorKey> = self
            .sensors
            .iter()
            .filter(|(_, s)| now - s.last_record_ms >= INACTIVE_SENSOR_MS)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            self.sensors.remove(k);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        pairs
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(String::from)))
            .collect()
    }

    /// (entity as (type, name) pairs, producer_byte_rate).
    type Quotas<'a> = &'a [(&'a [(&'a str, Option<&'a str>)], f64)];

    fn manager(quotas: Quotas<'_>) -> ClientQuotaManager {
        let image: BTreeMap<QuotaEntity, BTreeMap<String, f64>> = quotas
            .iter()
            .map(|(e, v)| (entity(e), [("producer_byte_rate".to_string(), *v)].into()))
            .collect();
        let mut m = ClientQuotaManager::new(WindowConfig::default());
        m.set_quotas(&image, "producer_byte_rate");
        m
    }

    #[test]
    fn a_new_rate_divides_by_at_least_samples_minus_one_windows() {
        let cfg = WindowConfig::default();
        let mut r = RateSampler::default();
        r.record(&cfg, 1000.0, 0);
        // 1000 units over the 10 s minimum window.
        assert_eq!(r.measure(&cfg, 0), 100.0);
        assert_eq!(r.window_size_ms(&cfg, 500), 10_500);
    }

    #[test]
    fn old_samples_leave_the_window() {
        let cfg = WindowConfig {
            samples: 2,
            window_ms: 1000,
        };
        let mut r = RateSampler::default();
        r.record(&cfg, 100.0, 0);
        r.record(&cfg, 100.0, 1000);
        r.record(&cfg, 100.0, 2000);
        // The first sample's last event is samples × window old: it no longer counts. 200 over
        // the 1 s since the oldest kept sample started.
        assert_eq!(r.measure(&cfg, 2000), 200.0);
        // The fourth sample reuses the first slot; the second is purged in turn.
        r.record(&cfg, 100.0, 3000);
        assert_eq!(r.measure(&cfg, 3000), 200.0);
        assert_eq!(r.window_size_ms(&cfg, 3500), 1500);
        // Idle for samples × window: everything expires.
        assert_eq!(r.measure(&cfg, 6000), 0.0);
    }

    #[test]
    fn precedence_follows_kafka() {
        let m = manager(&[
            (&[("user", Some("alice")), ("client-id", Some("c1"))], 1.0),
            (&[("user", Some("alice")), ("client-id", None)], 2.0),
            (&[("user", Some("alice"))], 3.0),
            (&[("user", None), ("client-id", Some("c1"))], 4.0),
            (&[("user", None), ("client-id", None)], 5.0),
            (&[("user", None)], 6.0),
            (&[("client-id", Some("c1"))], 7.0),
            (&[("client-id", None)], 8.0),
        ]);
        let limit = |u: &str, c: &str| m.quota_limit(&m.sensor_key(u, c));
        assert_eq!(limit("alice", "c1"), Some(1.0));
        assert_eq!(limit("alice", "c2"), Some(2.0));
        assert_eq!(limit("bob", "c1"), Some(4.0));
        assert_eq!(limit("bob", "c2"), Some(5.0));

        let m = manager(&[
            (&[("user", Some("alice"))], 3.0),
            (&[("user", None)], 6.0),
            (&[("client-id", Some("c1"))], 7.0),
            (&[("client-id", None)], 8.0),
        ]);
        let limit = |u: &str, c: &str| m.quota_limit(&m.sensor_key(u, c));
        assert_eq!(limit("alice", "c1"), Some(3.0));
        assert_eq!(limit("bob", "c1"), Some(6.0));
        // Every client of a user shares the user's sensor.
        assert_eq!(m.sensor_key("alice", "x"), m.sensor_key("alice", "y"));

        let m = manager(&[
            (&[("client-id", Some("c1"))], 7.0),
            (&[("client-id", None)], 8.0),
        ]);
        let limit = |u: &str, c: &str| m.quota_limit(&m.sensor_key(u, c));
        assert_eq!(limit("alice", "c1"), Some(7.0));
        assert_eq!(limit("alice", "c2"), Some(8.0));

        let m = manager(&[(&[("client-id", Some("c1"))], 7.0)]);
        assert_eq!(m.quota_limit(&m.sensor_key("alice", "c2")), None);
    }

    #[test]
    fn throttle_time_brings_the_rate_back_to_the_quota() {
        let mut m = manager(&[(&[("client-id", Some("c"))], 1000.0)]);
        // 10 s minimum window: up to 10 000 units pass unthrottled.
        assert_eq!(m.record("", "c", 10_000.0, 0).throttle_ms, 0);
        // 15 000 over 10 s = 1500/s: 50% over, so half the 10 s window.
        assert_eq!(m.record("", "c", 5_000.0, 0).throttle_ms, 5_000);
        // The window stays at its 10 s minimum until 10 s have passed: still 50% over.
        assert_eq!(m.record("", "c", 0.0, 5_000).throttle_ms, 5_000);
        // Once the first sample has left the window, the client is within its quota.
        assert_eq!(m.record("", "c", 0.0, 11_000).throttle_ms, 0);
        // Another client id has no quota.
        assert_eq!(m.record("", "other", 1e9, 0).throttle_ms, 0);
    }

    #[test]
    fn a_throttled_fetch_is_taken_back() {
        let mut m = manager(&[(&[("client-id", Some("c"))], 1000.0)]);
        assert!(m.record("", "c", 20_000.0, 0).throttle_ms > 0);
        m.unrecord("", "c", 20_000.0, 0);
        assert_eq!(m.record("", "c", 1_000.0, 0).throttle_ms, 0);
        assert_eq!(m.max_value_in_window("", "c"), Some(10_000.0));
    }

    #[test]
    fn quotas_stay_enabled_and_idle_sensors_expire() {
        let mut m = manager(&[(&[("user", Some("u"))], 1.0)]);
        m.record("u", "c", 1.0, 0);
        m.set_quotas(&BTreeMap::new(), "producer_byte_rate");
        assert!(m.enabled());
        // Grouped per user still (Kafka keeps the quota types enabled until restart).
        assert_eq!(m.sensor_key("u", "c"), ("u".to_string(), String::new()));
        assert_eq!(m.record("u", "c", 1e9, 1).throttle_ms, 0);
        assert!(m.expire_sensors(INACTIVE_SENSOR_MS).is_empty());
        assert_eq!(m.expire_sensors(INACTIVE_SENSOR_MS + 1).len(), 1);
    }
}
