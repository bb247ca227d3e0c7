//! Topic-level log configuration (Kafka's `LogConfig` / `TopicConfig`): Kafka's names and defaults.
//! The broker-level `log.*` defaults and DescribeConfigs live elsewhere; this is what one log uses.

use super::error::{LogError, Result};
use kactor_protocol::records::TimestampType;

/// `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageTimestampType {
    CreateTime,
    LogAppendTime,
}

impl From<MessageTimestampType> for TimestampType {
    fn from(t: MessageTimestampType) -> Self {
        match t {
            MessageTimestampType::CreateTime => TimestampType::CreateTime,
            MessageTimestampType::LogAppendTime => TimestampType::LogAppendTime,
        }
    }
}

/// `cleanup.policy`: a list of `delete` and/or `compact`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
        }
    }
}

/// One log's configuration. Field = Kafka topic config with dots replaced by underscores.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: i32,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: i32,
    pub index_interval_bytes: i32,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub file_delete_delay_ms: i64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub max_message_bytes: i32,
    pub message_timestamp_type: MessageTimestampType,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub cleanup_policy: CleanupPolicy,
    pub min_insync_replicas: i32,
    pub compression_type: String,
    pub unclean_leader_election_enable: bool,
    pub preallocate: bool,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            file_delete_delay_ms: 60_000,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            // 1 MiB + 12 bytes of log overhead, Kafka's default.
            max_message_bytes: 1_048_588,
            message_timestamp_type: MessageTimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            cleanup_policy: CleanupPolicy::default(),
            min_insync_replicas: 1,
            compression_type: "producer".to_string(),
            unclean_leader_election_enable: false,
            preallocate: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}

/// Every topic-level name [`LogConfig::set`] understands.
pub const LOG_CONFIG_NAMES: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "retention.ms",
    "retention.bytes",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "cleanup.policy",
    "min.insync.replicas",
    "compression.type",
    "unclean.leader.election.enable",
    "preallocate",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
];

fn invalid(name: &str, value: &str, reason: &str) -> LogError {
    LogError::InvalidConfig {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn parse_num<T: std::str::FromStr + PartialOrd + Copy>(
    name: &str,
    value: &str,
    min: T,
) -> Result<T> {
    let v: T = value
        .trim()
        .parse()
        .map_err(|_| invalid(name, value, "not a number"))?;
    if v < min {
        return Err(invalid(name, value, "below the minimum"));
    }
    Ok(v)
}

fn parse_bool(name: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(name, value, "expected true or false")),
    }
}

impl LogConfig {
    /// Sets one topic config from its string form, with Kafka's validation minimums.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        match name {
            // Kafka 4.x: segment.bytes at least 1 MiB for users; tests set the field directly.
            "segment.bytes" => self.segment_bytes = parse_num(name, value, 1024 * 1024)?,
            "segment.ms" => self.segment_ms = parse_num(name, value, 1)?,
            "segment.jitter.ms" => self.segment_jitter_ms = parse_num(name, value, 0)?,
            "segment.index.bytes" => self.segment_index_bytes = parse_num(name, value, 4)?,
            "index.interval.bytes" => self.index_interval_bytes = parse_num(name, value, 0)?,
            "retention.ms" => self.retention_ms = parse_num(name, value, -1)?,
            "retention.bytes" => self.retention_bytes = parse_num(name, value, i64::MIN)?,
            "file.delete.delay.ms" => self.file_delete_delay_ms = parse_num(name, value, 0)?,
            "flush.messages" => self.flush_messages = parse_num(name, value, 1)?,
            "flush.ms" => self.flush_ms = parse_num(name, value, 0)?,
            "max.message.bytes" => self.max_message_bytes = parse_num(name, value, 0)?,
            "message.timestamp.type" => {
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => MessageTimestampType::CreateTime,
                    "LogAppendTime" => MessageTimestampType::LogAppendTime,
                    _ => return Err(invalid(name, value, "expected CreateTime or LogAppendTime")),
                }
            }
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = parse_num(name, value, 0)?
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = parse_num(name, value, 0)?
            }
            "cleanup.policy" => {
                let mut policy = CleanupPolicy {
                    delete: false,
                    compact: false,
                };
                for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    match part {
                        "delete" => policy.delete = true,
                        "compact" => policy.compact = true,
                        _ => return Err(invalid(name, value, "expected delete and/or compact")),
                    }
                }
                self.cleanup_policy = policy;
            }
            "min.insync.replicas" => self.min_insync_replicas = parse_num(name, value, 1)?,
            "compression.type" => {
                let v = value.trim();
                if !["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"].contains(&v) {
                    return Err(invalid(name, value, "unknown compression type"));
                }
                self.compression_type = v.to_string();
            }
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = parse_bool(name, value)?
            }
            "preallocate" => self.preallocate = parse_bool(name, value)?,
            "delete.retention.ms" => self.delete_retention_ms = parse_num(name, value, 0)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = parse_num(name, value, 0)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = parse_num(name, value, 1)?,
            "min.cleanable.dirty.ratio" => {
                let v: f64 = parse_num(name, value, 0.0)?;
                if v > 1.0 {
                    return Err(invalid(name, value, "must be within [0, 1]"));
                }
                self.min_cleanable_dirty_ratio = v;
            }
            _ => return Err(invalid(name, value, "unknown topic configuration")),
        }
        Ok(())
    }

    /// Defaults overridden by `(name, value)` pairs (e.g. a topic's config records).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut config = LogConfig::default();
        for (name, value) in pairs {
            config.set(name, value)?;
        }
        Ok(config)
    }

    /// A random per-segment roll jitter in `[0, min(segment.jitter.ms, segment.ms))`, as Kafka
    /// draws it once when a segment is created.
    pub fn random_segment_jitter(&self) -> i64 {
        let bound = self.segment_jitter_ms.min(self.segment_ms);
        if bound <= 0 {
            0
        } else {
            rand::random::<u64>() as i64 % bound
        }
        .abs()
    }

    /// Whether appends should be fsynced by count (`flush.messages`) or time (`flush.ms`) at all.
    pub fn flush_policy_is_os(&self) -> bool {
        self.flush_messages == i64::MAX && self.flush_ms == i64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1 << 30);
        assert_eq!(c.segment_ms, 604_800_000);
        assert_eq!(c.segment_index_bytes, 10 << 20);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.retention_ms, 604_800_000);
        assert_eq!(c.retention_bytes, -1);
        assert_eq!(c.file_delete_delay_ms, 60_000);
        assert_eq!(c.flush_messages, i64::MAX);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert!(c.cleanup_policy.delete && !c.cleanup_policy.compact);
        assert_eq!(c.random_segment_jitter(), 0);
    }

    #[test]
    fn set_parses_and_validates() {
        let c = LogConfig::from_pairs([
            ("segment.bytes", "2097152"),
            ("cleanup.policy", "compact,delete"),
            ("message.timestamp.type", "LogAppendTime"),
            ("retention.ms", "-1"),
        ])
        .unwrap();
        assert_eq!(c.segment_bytes, 2 << 20);
        assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
        assert_eq!(
            c.message_timestamp_type,
            MessageTimestampType::LogAppendTime
        );
        assert_eq!(c.retention_ms, -1);
        let mut c = LogConfig::default();
        assert!(c.set("segment.bytes", "100").is_err());
        assert!(c.set("cleanup.policy", "nope").is_err());
        assert!(c.set("no.such.config", "1").is_err());
        c.segment_jitter_ms = 1000;
        assert!((0..1000).contains(&c.random_segment_jitter()));
    }
}
