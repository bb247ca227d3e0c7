//! Topic config definitions (Kafka's `LogConfig` / `TopicConfig` and the broker synonyms in
//! `ServerTopicConfigSynonyms`), value validation, and how an effective value and its source
//! are resolved (Kafka's `ConfigSource` order: topic override, dynamic broker, dynamic default
//! broker, static broker, default). Facts from Apache Kafka 4.4.0 `kafka-configs --describe --all`.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigType {
    Boolean,
    Int {
        min: i64,
        max: i64,
    },
    Long {
        min: i64,
    },
    Double {
        min: f64,
        max: f64,
    },
    List(&'static [&'static str]),
    /// A free-form list (throttled replica lists: `partition:broker,...` or `*`).
    AnyList,
    Enum(&'static [&'static str]),
}

/// One topic config: name, default, type, and the broker configs that supply its default, with
/// the multiplier from the broker unit to the topic unit (hours → ms).
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: ConfigType,
    pub synonyms: &'static [(&'static str, i64)],
}

const LMAX: &str = "9223372036854775807";
const I32: i64 = i32::MAX as i64;

const fn def(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    synonyms: &'static [(&'static str, i64)],
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        default,
        kind,
        synonyms,
    }
}

use ConfigType::*;

/// Every topic-level config Kafka 4.4 accepts, sorted by name.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        "delete",
        List(&["delete", "compact"]),
        &[("log.cleanup.policy", 1)],
    ),
    def(
        "compression.gzip.level",
        "-1",
        Int { min: -1, max: 9 },
        &[("compression.gzip.level", 1)],
    ),
    def(
        "compression.lz4.level",
        "9",
        Int { min: 1, max: 17 },
        &[("compression.lz4.level", 1)],
    ),
    def(
        "compression.type",
        "producer",
        Enum(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        &[("compression.type", 1)],
    ),
    def(
        "compression.zstd.level",
        "3",
        Int {
            min: -131072,
            max: 22,
        },
        &[("compression.zstd.level", 1)],
    ),
    def(
        "delete.retention.ms",
        "86400000",
        Long { min: 0 },
        &[("log.cleaner.delete.retention.ms", 1)],
    ),
    def("errors.deadletterqueue.group.enable", "false", Boolean, &[]),
    def(
        "file.delete.delay.ms",
        "60000",
        Long { min: 0 },
        &[("log.segment.delete.delay.ms", 1)],
    ),
    def(
        "flush.messages",
        LMAX,
        Long { min: 1 },
        &[("log.flush.interval.messages", 1)],
    ),
    def(
        "flush.ms",
        LMAX,
        Long { min: 0 },
        // Kafka's broker falls back to the scheduler interval when the flush interval is unset.
        &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
    ),
    def("follower.replication.throttled.replicas", "", AnyList, &[]),
    def(
        "index.interval.bytes",
        "4096",
        Int { min: 0, max: I32 },
        &[("log.index.interval.bytes", 1)],
    ),
    def("leader.replication.throttled.replicas", "", AnyList, &[]),
    def(
        "local.retention.bytes",
        "-2",
        Long { min: -2 },
        &[("log.local.retention.bytes", 1)],
    ),
    def(
        "local.retention.ms",
        "-2",
        Long { min: -2 },
        &[("log.local.retention.ms", 1)],
    ),
    def(
        "max.compaction.lag.ms",
        LMAX,
        Long { min: 1 },
        &[("log.cleaner.max.compaction.lag.ms", 1)],
    ),
    def(
        "max.decompressed.message.bytes",
        "2147483639",
        Int { min: 0, max: I32 },
        &[("max.decompressed.message.bytes", 1)],
    ),
    def(
        "max.message.bytes",
        "1048588",
        Int { min: 0, max: I32 },
        &[("message.max.bytes", 1)],
    ),
    def(
        "message.timestamp.after.max.ms",
        "3600000",
        Long { min: 0 },
        &[("log.message.timestamp.after.max.ms", 1)],
    ),
    def(
        "message.timestamp.before.max.ms",
        LMAX,
        Long { min: 0 },
        &[("log.message.timestamp.before.max.ms", 1)],
    ),
    def(
        "message.timestamp.type",
        "CreateTime",
        Enum(&["CreateTime", "LogAppendTime"]),
        &[("log.message.timestamp.type", 1)],
    ),
    def(
        "min.cleanable.dirty.ratio",
        "0.5",
        Double { min: 0.0, max: 1.0 },
        &[("log.cleaner.min.cleanable.ratio", 1)],
    ),
    def(
        "min.compaction.lag.ms",
        "0",
        Long { min: 0 },
        &[("log.cleaner.min.compaction.lag.ms", 1)],
    ),
    def(
        "min.insync.replicas",
        "1",
        Int { min: 1, max: I32 },
        &[("min.insync.replicas", 1)],
    ),
    def("preallocate", "false", Boolean, &[("log.preallocate", 1)]),
    def(
        "remote.copy.lag.bytes",
        "-1",
        Long { min: -1 },
        &[("log.remote.copy.lag.bytes", 1)],
    ),
    def(
        "remote.copy.lag.ms",
        "0",
        Long { min: 0 },
        &[("log.remote.copy.lag.ms", 1)],
    ),
    def("remote.log.copy.disable", "false", Boolean, &[]),
    def("remote.log.delete.on.disable", "false", Boolean, &[]),
    def("remote.storage.enable", "false", Boolean, &[]),
    def(
        "retention.bytes",
        "-1",
        Long { min: i64::MIN },
        &[("log.retention.bytes", 1)],
    ),
    def(
        "retention.ms",
        "604800000",
        Long { min: -1 },
        &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ],
    ),
    def(
        "segment.bytes",
        "1073741824",
        Int {
            min: 1_048_576,
            max: I32,
        },
        &[("log.segment.bytes", 1)],
    ),
    def(
        "segment.index.bytes",
        "10485760",
        Int { min: 4, max: I32 },
        &[("log.index.size.max.bytes", 1)],
    ),
    def(
        "segment.jitter.ms",
        "0",
        Long { min: 0 },
        &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", 3_600_000),
        ],
    ),
    def(
        "segment.ms",
        "604800000",
        Long { min: 1 },
        &[("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
    ),
    def(
        "unclean.leader.election.enable",
        "false",
        Boolean,
        &[("unclean.leader.election.enable", 1)],
    ),
];

/// Broker configs that can be changed at run time besides the topic-default synonyms above:
/// Kafka's `DynamicBrokerConfig.AllDynamicConfigs` for the keys kactor defines, minus the
/// per-broker-only listener and SSL/SASL keys. The controller stores them; DescribeConfigs
/// reports them as not read-only, as Kafka does (src/config/defs.rs says which kactor applies).
pub static EXTRA_DYNAMIC_BROKER_CONFIGS: &[&str] = &[
    "background.threads",
    "compression.lz4.level",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
];

/// Kafka's broker quota configs (`QuotaConfig.brokerQuotaConfigs`): dynamic only (no static
/// key, so DescribeConfigs lists them only once set), LONG, at least 0, unlimited by default.
/// `kafka-reassign-partitions --throttle` sets the two replication rates on the brokers a
/// reassignment involves and `--verify` removes them. Brokers enforce the two replication
/// rates (`partition/replication_quota.rs`); the log-dir one is unused (no
/// AlterReplicaLogDirs).
pub static BROKER_QUOTA_CONFIGS: &[&str] = &[
    "follower.replication.throttled.rate",
    "leader.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// The type of the [`BROKER_QUOTA_CONFIGS`].
pub const BROKER_QUOTA_CONFIG_TYPE: ConfigType = ConfigType::Long { min: 0 };

/// Dynamic broker configs Kafka accepts only for one broker, never as the cluster default
/// (`DynamicBrokerConfig.PerBrokerConfigs`: the listener set and the security settings).
pub fn is_per_broker_config(name: &str) -> bool {
    matches!(
        name,
        "listeners"
            | "listener.security.protocol.map"
            | "cordoned.log.dirs"
            | "principal.builder.class"
    ) || name.starts_with("ssl.")
        || name.starts_with("sasl.")
}

/// The keystore and truststore settings (`SslConfigs.RECONFIGURABLE_CONFIGS`), which Kafka
/// changes at run time only under a listener prefix (`listener.name.<l>.ssl...`), never bare.
pub fn is_listener_prefixed_only(name: &str) -> bool {
    matches!(
        name,
        "ssl.keystore.type"
            | "ssl.keystore.location"
            | "ssl.keystore.password"
            | "ssl.key.password"
            | "ssl.truststore.type"
            | "ssl.truststore.location"
            | "ssl.truststore.password"
            | "ssl.keystore.certificate.chain"
            | "ssl.keystore.key"
            | "ssl.truststore.certificates"
    )
}

pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The topic config a broker config supplies the default for, with its unit multiplier.
pub fn topic_config_for_broker_synonym(name: &str) -> Option<(&'static TopicConfigDef, i64)> {
    TOPIC_CONFIGS.iter().find_map(|d| {
        d.synonyms
            .iter()
            .find(|(s, _)| *s == name)
            .map(|(_, mult)| (d, *mult))
    })
}

/// Whether a broker config can be changed at run time (Kafka's `DynamicBrokerConfig`): the
/// primary broker synonym of each topic config (`ServerTopicConfigSynonyms`: `log.retention.ms`,
/// `log.roll.ms`, ... — not the `.hours` / `.minutes` / scheduler fallbacks, which Kafka 4.4
/// reports read-only and refuses to alter) and the extra keys above.
pub fn is_dynamic_broker_config(name: &str) -> bool {
    TOPIC_CONFIGS
        .iter()
        .any(|d| d.synonyms.first().is_some_and(|(s, _)| *s == name))
        || EXTRA_DYNAMIC_BROKER_CONFIGS.contains(&name)
        || BROKER_QUOTA_CONFIGS.contains(&name)
}

/// Checks a value against a type; the message follows Kafka's `ConfigException` wording.
pub fn validate_value(name: &str, kind: ConfigType, value: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {name}: {why}"
        ))
    };
    let v = value.trim();
    match kind {
        Boolean => {
            if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
                Ok(())
            } else {
                bad("Expected value to be either true or false")
            }
        }
        Int { min, max } => match v.parse::<i32>() {
            Ok(n) if (n as i64) < min => bad(&format!("Value must be at least {min}")),
            Ok(n) if (n as i64) > max => bad(&format!("Value must be no more than {max}")),
            Ok(_) => Ok(()),
            Err(_) => bad("Not a number of type INT"),
        },
        Long { min } => match v.parse::<i64>() {
            Ok(n) if n < min => bad(&format!("Value must be at least {min}")),
            Ok(_) => Ok(()),
            Err(_) => bad("Not a number of type LONG"),
        },
        Double { min, max } => match v.parse::<f64>() {
            Ok(n) if n < min => bad(&format!("Value must be at least {min}")),
            Ok(n) if n > max => bad(&format!("Value must be no more than {max}")),
            Ok(_) => Ok(()),
            Err(_) => bad("Not a number of type DOUBLE"),
        },
        List(allowed) => {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !allowed.contains(&item) {
                    return bad(&format!("String must be one of: {}", allowed.join(", ")));
                }
            }
            Ok(())
        }
        AnyList => Ok(()),
        Enum(allowed) => {
            if allowed.contains(&v) {
                Ok(())
            } else {
                bad(&format!("String must be one of: {}", allowed.join(", ")))
            }
        }
    }
}

/// Kafka's `DescribeConfigsResponse.ConfigSource` ids.
pub mod source {
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    pub const DEFAULT_CONFIG: i8 = 5;
    pub const DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;
    pub const DYNAMIC_CLIENT_METRICS_CONFIG: i8 = 7;
    pub const DYNAMIC_GROUP_CONFIG: i8 = 8;
}

/// An effective value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedConfig {
    pub name: &'static str,
    pub value: String,
    pub source: i8,
}

/// The layers a topic config is resolved through.
#[derive(Debug, Clone, Copy)]
pub struct ConfigLayers<'a> {
    pub topic: &'a BTreeMap<String, String>,
    pub dynamic_broker: &'a BTreeMap<String, String>,
    pub dynamic_default_broker: &'a BTreeMap<String, String>,
    pub static_broker: &'a BTreeMap<String, String>,
}

/// Resolves one topic config through the layers (first hit wins).
pub fn resolve(def: &'static TopicConfigDef, layers: ConfigLayers<'_>) -> ResolvedConfig {
    if let Some(v) = layers.topic.get(def.name) {
        return ResolvedConfig {
            name: def.name,
            value: v.clone(),
            source: source::DYNAMIC_TOPIC_CONFIG,
        };
    }
    for (map, src) in [
        (layers.dynamic_broker, source::DYNAMIC_BROKER_CONFIG),
        (
            layers.dynamic_default_broker,
            source::DYNAMIC_DEFAULT_BROKER_CONFIG,
        ),
        (layers.static_broker, source::STATIC_BROKER_CONFIG),
    ] {
        for (syn, mult) in def.synonyms {
            if let Some(v) = map.get(*syn) {
                let value = match (mult, v.trim().parse::<i64>()) {
                    (1, _) | (_, Err(_)) => v.clone(),
                    (m, Ok(n)) => n.saturating_mul(*m).to_string(),
                };
                return ResolvedConfig {
                    name: def.name,
                    value,
                    source: src,
                };
            }
        }
    }
    ResolvedConfig {
        name: def.name,
        value: def.default.to_string(),
        source: source::DEFAULT_CONFIG,
    }
}

/// All topic configs of a topic, resolved, in name order.
pub fn resolve_all(layers: ConfigLayers<'_>) -> Vec<ResolvedConfig> {
    TOPIC_CONFIGS.iter().map(|d| resolve(d, layers)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_defaults_are_valid() {
        for w in TOPIC_CONFIGS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for d in TOPIC_CONFIGS {
            validate_value(d.name, d.kind, d.default).unwrap();
        }
    }

    #[test]
    fn values_are_checked_by_type() {
        assert!(validate_value("x", Boolean, "yes").is_err());
        assert!(validate_value("x", Int { min: 1, max: 5 }, "0").is_err());
        assert!(validate_value("x", Long { min: -1 }, "abc").is_err());
        assert!(validate_value(
            "cleanup.policy",
            List(&["delete", "compact"]),
            "compact,delete"
        )
        .is_ok());
        assert!(validate_value("cleanup.policy", List(&["delete", "compact"]), "bogus").is_err());
    }

    #[test]
    fn resolution_follows_kafka_source_order() {
        let empty = BTreeMap::new();
        let mut stat = BTreeMap::new();
        stat.insert("log.retention.hours".to_string(), "1".to_string());
        let dyn_default = BTreeMap::new();
        let def = topic_config("retention.ms").unwrap();
        let layers = ConfigLayers {
            topic: &empty,
            dynamic_broker: &empty,
            dynamic_default_broker: &dyn_default,
            static_broker: &stat,
        };
        let r = resolve(def, layers);
        assert_eq!(
            (r.value.as_str(), r.source),
            ("3600000", source::STATIC_BROKER_CONFIG)
        );
        let mut dyn_default2 = dyn_default.clone();
        dyn_default2.insert("log.retention.ms".into(), "5".into());
        let r = resolve(
            def,
            ConfigLayers {
                dynamic_default_broker: &dyn_default2,
                ..layers
            },
        );
        assert_eq!(
            (r.value.as_str(), r.source),
            ("5", source::DYNAMIC_DEFAULT_BROKER_CONFIG)
        );
    }
}
