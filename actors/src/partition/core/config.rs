//! The topic-level settings a partition applies on its paths (Kafka's `LogConfig`): each a topic
//! override, else the broker's `log.*` / broker-level synonym, else Kafka's default.

use std::collections::BTreeMap;

use kactor_protocol::records::{Compression, TimestampType};

/// A topic's `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicCompression {
    /// Keep whatever codec the producer used.
    Producer,
    /// Store with this codec (`uncompressed` is `Codec(Compression::None)`).
    Codec(Compression),
}

impl TopicCompression {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "producer" => TopicCompression::Producer,
            "uncompressed" | "none" => TopicCompression::Codec(Compression::None),
            "gzip" => TopicCompression::Codec(Compression::Gzip),
            "snappy" => TopicCompression::Codec(Compression::Snappy),
            "lz4" => TopicCompression::Codec(Compression::Lz4),
            "zstd" => TopicCompression::Codec(Compression::Zstd),
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PartitionConfig {
    /// `max.message.bytes` (broker: `message.max.bytes`): the largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.type` (broker: `log.message.timestamp.type`).
    pub timestamp_type: TimestampType,
    /// `compression.type` (same name on the broker).
    pub compression: TopicCompression,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime may be.
    pub timestamp_after_max_ms: i64,
    /// `min.insync.replicas`: acks=all needs at least this many ISR members.
    pub min_insync_replicas: usize,
    /// `cleanup.policy` contains `delete` / `compact`.
    pub cleanup_delete: bool,
    pub cleanup_compact: bool,
    /// `retention.ms` (broker `log.retention.ms` / `.minutes` / `.hours`); -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes` (broker `log.retention.bytes`); -1 = unbounded.
    pub retention_bytes: i64,
    /// `flush.messages` (broker `log.flush.interval.messages`).
    pub flush_messages: i64,
    /// `flush.ms` (broker `log.flush.interval.ms`, else `log.flush.scheduler.interval.ms`).
    pub flush_ms: i64,
    /// `file.delete.delay.ms` (broker `log.segment.delete.delay.ms`).
    pub file_delete_delay_ms: i64,
    /// The broker's `transaction.partition.verification.enable` (not a topic config): a
    /// transactional batch starting a transaction needs the producer's verification guard.
    pub transaction_verification_enable: bool,
    /// The broker's `producer.id.expiration.ms` (not a topic config; dynamic cluster-wide):
    /// how long an idle producer's state, and a pending verification, stays in the partition.
    pub producer_id_expiration_ms: i64,
    /// Every topic-level setting in force, by Kafka's topic config name (the log's own
    /// configuration is built from these).
    pub effective: BTreeMap<String, String>,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            compression: TopicCompression::Producer,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            min_insync_replicas: 1,
            cleanup_delete: true,
            cleanup_compact: false,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            file_delete_delay_ms: 60_000,
            transaction_verification_enable: true,
            producer_id_expiration_ms: crate::producer::DEFAULT_PRODUCER_ID_EXPIRATION_MS,
            effective: BTreeMap::new(),
        }
    }
}

/// Topic config name → the broker configs that default it, in precedence order, with the factor
/// that turns the broker value into the topic's unit (Kafka's `LogConfig` synonyms).
const SYNONYMS: &[(&str, &[(&str, i64)])] = &[
    ("segment.bytes", &[("log.segment.bytes", 1)]),
    (
        "segment.ms",
        &[("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
    ),
    (
        "segment.jitter.ms",
        &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", 3_600_000),
        ],
    ),
    ("segment.index.bytes", &[("log.index.size.max.bytes", 1)]),
    ("index.interval.bytes", &[("log.index.interval.bytes", 1)]),
    (
        "retention.ms",
        &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ],
    ),
    ("retention.bytes", &[("log.retention.bytes", 1)]),
    (
        "file.delete.delay.ms",
        &[("log.segment.delete.delay.ms", 1)],
    ),
    ("flush.messages", &[("log.flush.interval.messages", 1)]),
    (
        "flush.ms",
        &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
    ),
    ("max.message.bytes", &[("message.max.bytes", 1)]),
    (
        "message.timestamp.type",
        &[("log.message.timestamp.type", 0)],
    ),
    (
        "message.timestamp.before.max.ms",
        &[("log.message.timestamp.before.max.ms", 1)],
    ),
    (
        "message.timestamp.after.max.ms",
        &[("log.message.timestamp.after.max.ms", 1)],
    ),
    ("cleanup.policy", &[("log.cleanup.policy", 0)]),
    ("min.insync.replicas", &[("min.insync.replicas", 0)]),
    ("compression.type", &[("compression.type", 0)]),
    (
        "unclean.leader.election.enable",
        &[("unclean.leader.election.enable", 0)],
    ),
    ("preallocate", &[("log.preallocate", 0)]),
    (
        "delete.retention.ms",
        &[("log.cleaner.delete.retention.ms", 1)],
    ),
    (
        "min.compaction.lag.ms",
        &[("log.cleaner.min.compaction.lag.ms", 1)],
    ),
    (
        "max.compaction.lag.ms",
        &[("log.cleaner.max.compaction.lag.ms", 1)],
    ),
    (
        "min.cleanable.dirty.ratio",
        &[("log.cleaner.min.cleanable.ratio", 0)],
    ),
];

/// The topic-level configs in force for a topic: each topic override, else the first broker
/// synonym set (converted to the topic's unit), else absent (the log's own default applies).
pub fn effective_topic_config(
    broker: &BTreeMap<String, String>,
    topic: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, synonyms) in SYNONYMS {
        if let Some(v) = topic.get(*name) {
            out.insert(name.to_string(), v.trim().to_string());
            continue;
        }
        for (key, factor) in *synonyms {
            let Some(v) = broker.get(*key) else { continue };
            let v = v.trim();
            let value = match (*factor, v.parse::<i64>()) {
                (0, _) | (1, _) => Some(v.to_string()),
                (f, Ok(n)) => Some(n.saturating_mul(f).to_string()),
                (_, Err(_)) => None,
            };
            if let Some(value) = value {
                out.insert(name.to_string(), value);
                break;
            }
        }
    }
    // Overrides we don't map (e.g. newer Kafka configs) still travel to the log.
    for (k, v) in topic {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    out
}

impl PartitionConfig {
    /// Resolves each setting from the topic's overrides, then the broker config, then Kafka's
    /// default. Unparseable values fall back too: the controller validated them on the way in.
    pub fn resolve(broker: &BTreeMap<String, String>, topic: &BTreeMap<String, String>) -> Self {
        let mut c = Self::from_effective(effective_topic_config(broker, topic));
        if let Some(v) = broker.get("transaction.partition.verification.enable") {
            c.transaction_verification_enable = !v.trim().eq_ignore_ascii_case("false");
        }
        // Kafka's `ProducerStateManagerConfig` keeps these two broker-wide switches, updated in
        // place on a dynamic change; here every config push carries them to the partitions.
        if let Some(ms) = broker
            .get("producer.id.expiration.ms")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|ms| *ms >= 1)
        {
            c.producer_id_expiration_ms = ms;
        }
        c
    }

    /// Builds the config from topic-level names (see [`effective_topic_config`]).
    pub fn from_effective(effective: BTreeMap<String, String>) -> Self {
        let d = PartitionConfig::default();
        let int = |k: &str, default: i64| -> i64 {
            effective
                .get(k)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let policy = effective
            .get("cleanup.policy")
            .cloned()
            .unwrap_or_else(|| "delete".into());
        let policy: Vec<String> = policy
            .split(',')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect();
        PartitionConfig {
            max_message_bytes: int("max.message.bytes", d.max_message_bytes as i64).max(0) as usize,
            timestamp_type: match effective.get("message.timestamp.type").map(|s| s.as_str()) {
                Some("LogAppendTime") => TimestampType::LogAppendTime,
                _ => TimestampType::CreateTime,
            },
            compression: effective
                .get("compression.type")
                .and_then(|v| TopicCompression::parse(v))
                .unwrap_or(d.compression),
            timestamp_before_max_ms: int(
                "message.timestamp.before.max.ms",
                d.timestamp_before_max_ms,
            ),
            timestamp_after_max_ms: int("message.timestamp.after.max.ms", d.timestamp_after_max_ms),
            min_insync_replicas: int("min.insync.replicas", 1).max(1) as usize,
            cleanup_delete: policy.iter().any(|p| p == "delete"),
            cleanup_compact: policy.iter().any(|p| p == "compact"),
            retention_ms: int("retention.ms", d.retention_ms),
            retention_bytes: int("retention.bytes", d.retention_bytes),
            flush_messages: int("flush.messages", d.flush_messages),
            flush_ms: int("flush.ms", d.flush_ms),
            file_delete_delay_ms: int("file.delete.delay.ms", d.file_delete_delay_ms),
            transaction_verification_enable: d.transaction_verification_enable,
            producer_id_expiration_ms: d.producer_id_expiration_ms,
            effective,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn topic_override_beats_broker_synonym_beats_default() {
        let broker = map(&[("message.max.bytes", "2000"), ("log.retention.hours", "1")]);
        let topic = map(&[("compression.type", "zstd")]);
        let c = PartitionConfig::resolve(&broker, &topic);
        assert_eq!(c.max_message_bytes, 2000);
        assert_eq!(c.retention_ms, 3_600_000);
        assert_eq!(c.compression, TopicCompression::Codec(Compression::Zstd));
        let c = PartitionConfig::resolve(&broker, &map(&[("max.message.bytes", "10")]));
        assert_eq!(c.max_message_bytes, 10);
        assert_eq!(c.compression, TopicCompression::Producer);
    }

    #[test]
    fn producer_id_expiration_comes_from_the_broker() {
        let c = PartitionConfig::resolve(&BTreeMap::new(), &BTreeMap::new());
        assert_eq!(c.producer_id_expiration_ms, 86_400_000);
        let broker = map(&[("producer.id.expiration.ms", "2000")]);
        let c = PartitionConfig::resolve(&broker, &BTreeMap::new());
        assert_eq!(c.producer_id_expiration_ms, 2000);
    }

    #[test]
    fn cleanup_policy_and_timestamp_type() {
        let c = PartitionConfig::resolve(
            &BTreeMap::new(),
            &map(&[
                ("cleanup.policy", "compact"),
                ("message.timestamp.type", "LogAppendTime"),
            ]),
        );
        assert!(c.cleanup_compact && !c.cleanup_delete);
        assert_eq!(c.timestamp_type, TimestampType::LogAppendTime);
    }
}
