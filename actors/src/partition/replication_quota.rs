//! Replication throttles (Kafka's `ReplicationQuotaManager`, KIP-73): a broker-wide byte rate
//! for what a leader sends to throttled followers (`leader.replication.throttled.rate`) and for
//! what a follower fetches for throttled partitions (`follower.replication.throttled.rate`).
//! Which partitions are throttled is a topic config naming replicas as `partition:broker`
//! pairs or `*` (`leader.replication.throttled.replicas`, `follower...`); a broker throttles
//! the partitions whose pair names itself. `kafka-reassign-partitions --throttle` sets both.
//!
//! Only replicas outside the ISR are held back (so a throttle can never shrink an ISR), and
//! only while the measured rate is over the bound: the leader answers such a follower's
//! partition with no records, the follower leaves the partition out of its fetch.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use crate::quota::core::{RateSampler, WindowConfig};

/// The partitions of one topic a broker throttles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Throttled {
    All,
    Partitions(BTreeSet<i32>),
}

/// Parses a `*.replication.throttled.replicas` value for `broker_id`: `*` throttles every
/// partition, `0:1,1:2` the partitions paired with this broker. `None`: nothing throttled
/// (empty, or no pair names this broker). Malformed pairs are skipped; the controller
/// validates the value when it is set.
pub fn throttled_partitions(value: &str, broker_id: i32) -> Option<Throttled> {
    let value = value.trim();
    if value == "*" {
        return Some(Throttled::All);
    }
    let partitions: BTreeSet<i32> = value
        .split(',')
        .filter_map(|pair| {
            let (p, b) = pair.trim().split_once(':')?;
            let (p, b) = (p.trim().parse::<i32>().ok()?, b.trim().parse::<i32>().ok()?);
            (b == broker_id).then_some(p)
        })
        .collect();
    (!partitions.is_empty()).then_some(Throttled::Partitions(partitions))
}

/// A `*.replication.throttled.rate` value as a bound in bytes per second; Kafka's default,
/// Long.MAX_VALUE, and anything unparsable or not positive mean no bound.
pub fn rate_bound(value: Option<&str>) -> Option<f64> {
    let v = value?.trim().parse::<i64>().ok()?;
    (v > 0 && v < i64::MAX).then_some(v as f64)
}

#[derive(Debug, Default)]
struct State {
    bound: Option<f64>,
    rate: RateSampler,
    throttled: HashMap<String, Throttled>,
}

impl State {
    fn is_throttled(&self, topic: &str, partition: i32) -> bool {
        match self.throttled.get(topic) {
            Some(Throttled::All) => true,
            Some(Throttled::Partitions(set)) => set.contains(&partition),
            None => false,
        }
    }
}

/// One direction's quota (the leader's or the follower's), shared by the request handlers and
/// the fetchers of this broker. Every call takes the clock from the caller.
#[derive(Debug)]
pub struct ReplicationQuota {
    broker_id: i32,
    /// `*.replication.throttled.replicas`: which topic config this direction reads.
    replicas_config: &'static str,
    window: WindowConfig,
    state: Mutex<State>,
}

impl ReplicationQuota {
    fn new(broker_id: i32, replicas_config: &'static str, window: WindowConfig) -> Self {
        ReplicationQuota {
            broker_id,
            replicas_config,
            window,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves only counters behind: keep using them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_throttled(&self, topic: &str, partition: i32) -> bool {
        self.state().is_throttled(topic, partition)
    }

    /// Whether the rate recorded is above the bound (Kafka's `isQuotaExceeded`, measured as
    /// its `SimpleRate`: over the time since the oldest sample, at least one window); never
    /// without a bound.
    pub fn is_quota_exceeded(&self, now_ms: i64) -> bool {
        let mut s = self.state();
        let Some(bound) = s.bound else {
            return false;
        };
        s.rate.measure_simple(&self.window, now_ms) > bound
    }

    pub fn record(&self, bytes: u64, now_ms: i64) {
        if bytes > 0 {
            self.state().rate.record(&self.window, bytes as f64, now_ms);
        }
    }

    /// Records the bytes of the throttled ones among `parts` (topic, partition, bytes) under
    /// one lock; with no throttled topic, as on most fetches, that is all it does.
    pub fn record_throttled<'a>(
        &self,
        parts: impl IntoIterator<Item = (&'a str, i32, usize)>,
        now_ms: i64,
    ) {
        let mut s = self.state();
        if s.throttled.is_empty() {
            return;
        }
        let bytes: usize = parts
            .into_iter()
            .filter(|(topic, partition, _)| s.is_throttled(topic, *partition))
            .map(|(_, _, bytes)| bytes)
            .sum();
        if bytes > 0 {
            s.rate.record(&self.window, bytes as f64, now_ms);
        }
    }

    pub fn set_bound(&self, bound: Option<f64>) {
        let mut s = self.state();
        if s.bound != bound {
            tracing::info!(
                quota = self.replicas_config,
                ?bound,
                "replication throttle rate (bytes/s)"
            );
            s.bound = bound;
        }
    }

    /// A topic's config overrides changed (or the topic is gone: empty overrides).
    pub fn set_topic_config(
        &self,
        topic: &str,
        overrides: &std::collections::BTreeMap<String, String>,
    ) {
        let throttled = overrides
            .get(self.replicas_config)
            .and_then(|v| throttled_partitions(v, self.broker_id));
        let mut s = self.state();
        match throttled {
            Some(t) => s.throttled.insert(topic.to_string(), t),
            None => s.throttled.remove(topic),
        };
    }
}

/// The two quotas of a broker.
#[derive(Debug)]
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
}

impl ReplicationQuotas {
    pub fn from_broker_config(
        broker_id: i32,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        let num = |key: &str, default: i64| match super::broker_num(config, key, default) {
            n if n > 0 => n,
            _ => default,
        };
        let window = WindowConfig {
            samples: num("replication.quota.window.num", 11) as usize,
            window_ms: num("replication.quota.window.size.seconds", 1) * 1000,
        };
        let quotas = ReplicationQuotas {
            leader: ReplicationQuota::new(
                broker_id,
                "leader.replication.throttled.replicas",
                window,
            ),
            follower: ReplicationQuota::new(
                broker_id,
                "follower.replication.throttled.replicas",
                window,
            ),
        };
        quotas.set_rates(config);
        quotas
    }

    /// The broker's effective config changed (a dynamic per-broker or cluster-wide value).
    pub fn set_rates(&self, config: &std::collections::BTreeMap<String, String>) {
        let rate = |key: &str| rate_bound(config.get(key).map(String::as_str));
        self.leader
            .set_bound(rate("leader.replication.throttled.rate"));
        self.follower
            .set_bound(rate("follower.replication.throttled.rate"));
    }

    pub fn set_topic_config(
        &self,
        topic: &str,
        overrides: &std::collections::BTreeMap<String, String>,
    ) {
        self.leader.set_topic_config(topic, overrides);
        self.follower.set_topic_config(topic, overrides);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn throttled_replica_lists_name_partitions_of_this_broker() {
        assert_eq!(throttled_partitions("*", 1), Some(Throttled::All));
        assert_eq!(
            throttled_partitions("0:1, 1:2,2:1,x:1,3", 1),
            Some(Throttled::Partitions(BTreeSet::from([0, 2])))
        );
        assert_eq!(throttled_partitions("0:2", 1), None);
        assert_eq!(throttled_partitions("", 1), None);
    }

    #[test]
    fn rates_without_a_bound() {
        assert_eq!(rate_bound(Some("1000")), Some(1000.0));
        assert_eq!(rate_bound(Some("9223372036854775807")), None);
        assert_eq!(rate_bound(Some("-1")), None);
        assert_eq!(rate_bound(None), None);
    }

    #[test]
    fn the_quota_is_exceeded_only_over_its_bound_and_only_for_throttled_topics() {
        let config = BTreeMap::from([(
            "leader.replication.throttled.rate".to_string(),
            "1000".to_string(),
        )]);
        let q = ReplicationQuotas::from_broker_config(1, &config);
        let now = 1_700_000_000_000;
        assert!(!q.leader.is_quota_exceeded(now));
        // 20 kB in the first second is well over 1 kB/s.
        q.leader.record(20_000, now);
        assert!(q.leader.is_quota_exceeded(now + 500));
        // No bound on the follower side: never exceeded.
        q.follower.record(20_000, now);
        assert!(!q.follower.is_quota_exceeded(now + 500));
        // Long after, the window has moved past the burst.
        assert!(!q.leader.is_quota_exceeded(now + 60_000));

        let overrides = BTreeMap::from([
            (
                "leader.replication.throttled.replicas".to_string(),
                "0:1,1:2".to_string(),
            ),
            (
                "follower.replication.throttled.replicas".to_string(),
                "*".to_string(),
            ),
        ]);
        q.set_topic_config("t", &overrides);
        assert!(q.leader.is_throttled("t", 0));
        assert!(!q.leader.is_throttled("t", 1));
        assert!(q.follower.is_throttled("t", 7));
        assert!(!q.leader.is_throttled("other", 0));
        q.set_topic_config("t", &BTreeMap::new());
        assert!(!q.leader.is_throttled("t", 0) && !q.follower.is_throttled("t", 7));
    }

    #[test]
    fn only_throttled_partitions_count_against_the_quota() {
        let config = BTreeMap::from([(
            "leader.replication.throttled.rate".to_string(),
            "1000".to_string(),
        )]);
        let q = ReplicationQuotas::from_broker_config(1, &config);
        let now = 1_700_000_000_000;
        q.leader.record_throttled([("t", 0, 50_000)], now);
        assert!(
            !q.leader.is_quota_exceeded(now),
            "no throttled topic: nothing recorded"
        );
        let overrides = BTreeMap::from([(
            "leader.replication.throttled.replicas".to_string(),
            "0:1".to_string(),
        )]);
        q.set_topic_config("t", &overrides);
        q.leader
            .record_throttled([("t", 1, 50_000), ("u", 0, 50_000)], now);
        assert!(
            !q.leader.is_quota_exceeded(now),
            "other partitions do not count"
        );
        q.leader.record_throttled([("t", 0, 50_000)], now);
        assert!(q.leader.is_quota_exceeded(now));
    }
}
