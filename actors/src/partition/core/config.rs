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
        }
    }
}

impl PartitionConfig {
    /// Resolves each setting from the topic's overrides, then the broker config, then Kafka's
    /// default. Unparseable values fall back too: the controller validated them on the way in.
    pub fn resolve(broker: &BTreeMap<String, String>, topic: &BTreeMap<String, String>) -> Self {
        let d = PartitionConfig::default();
        let get = |topic_key: &str, broker_keys: &[&str]| -> Option<String> {
            topic
                .get(topic_key)
                .or_else(|| broker_keys.iter().find_map(|k| broker.get(*k)))
                .cloned()
        };
        let int = |topic_key: &str, broker_keys: &[&str], default: i64| -> i64 {
            get(topic_key, broker_keys)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let retention_ms = if let Some(v) = topic.get("retention.ms") {
            v.trim().parse().unwrap_or(d.retention_ms)
        } else if let Some(v) = broker.get("log.retention.ms") {
            v.trim().parse().unwrap_or(d.retention_ms)
        } else if let Some(v) = broker.get("log.retention.minutes") {
            v.trim()
                .parse::<i64>()
                .map(|m| m * 60_000)
                .unwrap_or(d.retention_ms)
        } else if let Some(v) = broker.get("log.retention.hours") {
            v.trim()
                .parse::<i64>()
                .map(|h| h * 3_600_000)
                .unwrap_or(d.retention_ms)
        } else {
            d.retention_ms
        };
        let policy =
            get("cleanup.policy", &["log.cleanup.policy"]).unwrap_or_else(|| "delete".into());
        let policy: Vec<String> = policy
            .split(',')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect();
        PartitionConfig {
            max_message_bytes: int(
                "max.message.bytes",
                &["message.max.bytes"],
                d.max_message_bytes as i64,
            )
            .max(0) as usize,
            timestamp_type: match get("message.timestamp.type", &["log.message.timestamp.type"])
                .as_deref()
            {
                Some("LogAppendTime") => TimestampType::LogAppendTime,
                _ => TimestampType::CreateTime,
            },
            compression: get("compression.type", &["compression.type"])
                .and_then(|v| TopicCompression::parse(&v))
                .unwrap_or(d.compression),
            timestamp_before_max_ms: int(
                "message.timestamp.before.max.ms",
                &["log.message.timestamp.before.max.ms"],
                d.timestamp_before_max_ms,
            ),
            timestamp_after_max_ms: int(
                "message.timestamp.after.max.ms",
                &["log.message.timestamp.after.max.ms"],
                d.timestamp_after_max_ms,
            ),
            min_insync_replicas: int("min.insync.replicas", &["min.insync.replicas"], 1).max(1)
                as usize,
            cleanup_delete: policy.iter().any(|p| p == "delete"),
            cleanup_compact: policy.iter().any(|p| p == "compact"),
            retention_ms,
            retention_bytes: int(
                "retention.bytes",
                &["log.retention.bytes"],
                d.retention_bytes,
            ),
            flush_messages: int(
                "flush.messages",
                &["log.flush.interval.messages"],
                d.flush_messages,
            ),
            flush_ms: int(
                "flush.ms",
                &["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
                d.flush_ms,
            ),
            file_delete_delay_ms: int(
                "file.delete.delay.ms",
                &["log.segment.delete.delay.ms"],
                d.file_delete_delay_ms,
            ),
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
