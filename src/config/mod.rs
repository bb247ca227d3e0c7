//! Broker configuration (Kafka's `KafkaConfig` + `AbstractConfig`): flat property keys with
//! Kafka's names, types and defaults, layered Kafka's defaults < kactor's single-node values
//! ([`defs::SINGLE_NODE_DEFAULTS`]) < properties file < environment (`KAFKA_LOG_RETENTION_MS` →
//! `log.retention.ms`) < `--override key=value`.
//!
//! The layering runs through the `config` crate, but keys cross it hex-encoded ([`FlatLayer`]):
//! the crate parses every key as a path (`log.dir` and `log.dir.failure.timeout.ms` would become
//! a table and a child of it) and lowercases it, while Kafka keys are flat, case-sensitive
//! strings. Hex digits are a single lowercase identifier to the crate, so each key lands in the
//! root table intact and decodes back exactly. Every value keeps the layer it came from (the
//! `config` crate's value origin), which DescribeConfigs reports as the config source.

pub mod defs;
pub mod properties;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use config::{Map, Source, Value, ValueKind};
use thiserror::Error;

pub use defs::{find_def, ConfigDef, ConfigType, Validator, BROKER_CONFIG_DEFS};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// Kafka's default for the key.
    Default,
    /// kactor's built-in single-node value for a key Kafka has no usable default for.
    SingleNode,
    File(PathBuf),
    /// The environment variable's name.
    Env(String),
    Override,
    /// Set with IncrementalAlterConfigs for this broker (a ConfigRecord in the metadata log).
    DynamicBroker,
    /// Set with IncrementalAlterConfigs as the cluster-wide default.
    DynamicDefaultBroker,
}

/// DescribeConfigs' `config_source` values (Kafka's `DescribeConfigsResponse.ConfigSource`).
// Kafka's own names, suffix included.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaConfigSource {
    DynamicBrokerConfig = 2,
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
}

impl ConfigOrigin {
    /// File, environment and `--override` are all read at start-up, which Kafka calls static.
    pub fn kafka_source(&self) -> KafkaConfigSource {
        match self {
            ConfigOrigin::Default => KafkaConfigSource::DefaultConfig,
            // The single-node values are part of the node's start-up configuration, like a
            // file it was started with, not Kafka's defaults.
            ConfigOrigin::SingleNode
            | ConfigOrigin::File(_)
            | ConfigOrigin::Env(_)
            | ConfigOrigin::Override => KafkaConfigSource::StaticBrokerConfig,
            ConfigOrigin::DynamicBroker => KafkaConfigSource::DynamicBrokerConfig,
            ConfigOrigin::DynamicDefaultBroker => KafkaConfigSource::DynamicDefaultBrokerConfig,
        }
    }

    fn encode(&self) -> String {
        match self {
            ConfigOrigin::Default => "default".into(),
            ConfigOrigin::SingleNode => "single-node".into(),
            ConfigOrigin::File(p) => format!("file:{}", p.display()),
            ConfigOrigin::Env(v) => format!("env:{v}"),
            ConfigOrigin::Override => "override".into(),
            ConfigOrigin::DynamicBroker => "dynamic-broker".into(),
            ConfigOrigin::DynamicDefaultBroker => "dynamic-default-broker".into(),
        }
    }

    fn decode(s: &str) -> Self {
        if let Some(p) = s.strip_prefix("file:") {
            ConfigOrigin::File(PathBuf::from(p))
        } else if let Some(v) = s.strip_prefix("env:") {
            ConfigOrigin::Env(v.to_string())
        } else {
            match s {
                "override" => ConfigOrigin::Override,
                "single-node" => ConfigOrigin::SingleNode,
                "dynamic-broker" => ConfigOrigin::DynamicBroker,
                "dynamic-default-broker" => ConfigOrigin::DynamicDefaultBroker,
                _ => ConfigOrigin::Default,
            }
        }
    }
}

impl std::fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigOrigin::Default => write!(f, "Kafka's default"),
            ConfigOrigin::SingleNode => write!(f, "kactor's single-node default"),
            ConfigOrigin::File(p) => write!(f, "file {}", p.display()),
            ConfigOrigin::Env(v) => write!(f, "environment variable {v}"),
            ConfigOrigin::Override => write!(f, "--override"),
            ConfigOrigin::DynamicBroker => write!(f, "dynamic broker config"),
            ConfigOrigin::DynamicDefaultBroker => write!(f, "dynamic cluster-default config"),
        }
    }
}

#[derive(Debug, Error)]
pub enum ConfigError {
    // `error`, not `source`: the message already carries the OS error, and as a source it was
    // printed a second time by the `{:#}` chain main prints.
    #[error("cannot read config file {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("invalid value {value:?} for configuration {key} (from {origin}): {reason}")]
    Invalid {
        key: String,
        value: String,
        origin: ConfigOrigin,
        reason: String,
    },
    #[error("--override {0:?} is not of the form key=value")]
    BadOverride(String),
    #[error("configuration layering failed: {0}")]
    Layering(#[from] config::ConfigError),
}

/// One layer of flat key/value strings, fed to the `config` crate.
#[derive(Debug, Clone)]
pub struct FlatLayer {
    origin: String,
    entries: BTreeMap<String, String>,
}

impl FlatLayer {
    pub fn new(origin: ConfigOrigin, entries: BTreeMap<String, String>) -> Self {
        FlatLayer {
            origin: origin.encode(),
            entries,
        }
    }
}

impl Source for FlatLayer {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<Map<String, Value>, config::ConfigError> {
        Ok(self
            .entries
            .iter()
            .map(|(k, v)| {
                (
                    encode_key(k),
                    Value::new(Some(&self.origin), ValueKind::String(v.clone())),
                )
            })
            .collect())
    }
}

fn encode_key(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_key(encoded: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> = (0..encoded.len())
        .step_by(2)
        .map(|i| {
            encoded
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Maps a `KAFKA_*` variable to a key the way Kafka's container image does (`_` → `.`,
/// `__` → `_`, `___` → `-`); `KACTOR_*` maps to `kactor.*` the same way.
pub fn env_var_to_key(var: &str) -> Option<String> {
    let (prefix, rest) = if let Some(rest) = var.strip_prefix("KAFKA_") {
        ("", rest)
    } else if let Some(rest) = var.strip_prefix("KACTOR_") {
        ("kactor.", rest)
    } else {
        return None;
    };
    if rest.is_empty() {
        return None;
    }
    let key = rest
        .to_ascii_lowercase()
        .replace("___", "-")
        .replace("__", "\u{0}")
        .replace('_', ".");
    Some(format!("{prefix}{}", key.replace('\u{0}', "_")))
}

/// Where the layers come from; [`BrokerConfig::load`] reads them.
#[derive(Debug, Default, Clone)]
pub struct ConfigSources {
    pub file: Option<PathBuf>,
    /// `(name, value)` pairs, normally `std::env::vars()`.
    pub env: Vec<(String, String)>,
    /// `key=value` strings from `--override`.
    pub overrides: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ConfigEntry {
    /// `None` for a key whose default is Kafka's `null` and that nobody set.
    pub value: Option<String>,
    pub origin: ConfigOrigin,
}

/// Keys read by the authorizer (StandardAuthorizer's `super.users` and
/// `allow.everyone.if.no.acl.found`), not defined by Kafka's broker config.
const AUTHORIZER_KEYS: &[&str] = &["super.users", "allow.everyone.if.no.acl.found"];

/// One row of a DescribeConfigs answer for the broker resource.
#[derive(Debug, Clone)]
pub struct DescribedConfig {
    pub name: &'static str,
    /// `None` for unset (Kafka's null) and for sensitive values.
    pub value: Option<String>,
    pub source: KafkaConfigSource,
    pub config_type: ConfigType,
    pub read_only: bool,
    pub sensitive: bool,
    /// (name, value, source), highest precedence first.
    pub synonyms: Vec<(String, String, KafkaConfigSource)>,
    pub documentation: &'static str,
}

/// A listener from `listeners` / `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A static voter from `controller.quorum.voters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

/// The validated, layered broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    entries: BTreeMap<String, ConfigEntry>,
    /// Keys that no definition knows; kept for DescribeConfigs, warned about at start-up.
    pub unknown_keys: Vec<String>,
}

impl BrokerConfig {
    /// Layers the sources, then validates each known key and the cross-key rules.
    pub fn load(sources: &ConfigSources) -> Result<Self, ConfigError> {
        let defaults: BTreeMap<String, String> = BROKER_CONFIG_DEFS
            .iter()
            .filter_map(|d| d.default.map(|v| (d.name.to_string(), v.to_string())))
            .collect();
        let mut builder =
            config::Config::builder().add_source(FlatLayer::new(ConfigOrigin::Default, defaults));
        builder = builder.add_source(FlatLayer::new(
            ConfigOrigin::SingleNode,
            defs::SINGLE_NODE_DEFAULTS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ));
        if let Some(path) = &sources.file {
            let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io {
                path: path.clone(),
                error,
            })?;
            builder = builder.add_source(FlatLayer::new(
                ConfigOrigin::File(path.clone()),
                properties::parse(&text),
            ));
        }
        // One layer per variable so each value remembers its variable's name.
        let mut env_vars: Vec<_> = sources.env.iter().collect();
        env_vars.sort();
        for (var, value) in env_vars {
            let Some(key) = env_var_to_key(var) else {
                continue;
            };
            // The launch scripts' own variables (KAFKA_HEAP_OPTS, KAFKA_OPTS, ...) are not
            // configs; only keys we define are taken from the environment.
            if find_def(&key).is_none() {
                continue;
            }
            builder = builder.add_source(FlatLayer::new(
                ConfigOrigin::Env(var.clone()),
                BTreeMap::from([(key, value.clone())]),
            ));
        }
        let mut overrides = BTreeMap::new();
        for o in &sources.overrides {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(o.clone()))?;
            if k.trim().is_empty() {
                return Err(ConfigError::BadOverride(o.clone()));
            }
            overrides.insert(k.trim().to_string(), v.to_string());
        }
        builder = builder.add_source(FlatLayer::new(ConfigOrigin::Override, overrides));
        let layered = builder.build()?.collect()?;

        let mut entries = BTreeMap::new();
        let mut unknown_keys = Vec::new();
        for (encoded, value) in layered {
            let key = decode_key(&encoded).unwrap_or(encoded);
            let origin = ConfigOrigin::decode(value.origin().unwrap_or("default"));
            let text = value.into_string()?;
            if find_def(&key).is_none() && !is_listener_setting(&key) {
                unknown_keys.push(key.clone());
            }
            entries.insert(
                key,
                ConfigEntry {
                    value: Some(text),
                    origin,
                },
            );
        }
        for d in BROKER_CONFIG_DEFS {
            entries.entry(d.name.to_string()).or_insert(ConfigEntry {
                value: None,
                origin: ConfigOrigin::Default,
            });
        }
        // A node given bootstrap servers joins a dynamic quorum (KIP-853): the single-node
        // voter it would otherwise get is not its configuration.
        let bootstrap_given = entries
            .get("controller.quorum.bootstrap.servers")
            .is_some_and(|e| e.value.as_deref().is_some_and(|v| !v.trim().is_empty()));
        if bootstrap_given {
            if let Some(e) = entries.get_mut("controller.quorum.voters") {
                if e.origin == ConfigOrigin::SingleNode {
                    *e = ConfigEntry {
                        value: Some(String::new()),
                        origin: ConfigOrigin::Default,
                    };
                }
            }
        }
        // broker.id is node.id's legacy name (Kafka's `KafkaConfig.populateSynonyms`): the one
        // that was given stands for both, so DescribeConfigs reports broker.id with node.id's
        // value and source. node.id's single-node value counts as not given; validate_cross
        // refuses two different ids.
        let given = |key: &str| {
            !matches!(
                entries[key].origin,
                ConfigOrigin::Default | ConfigOrigin::SingleNode
            )
        };
        if given("broker.id") && !given("node.id") {
            let broker = entries["broker.id"].clone();
            entries.insert("node.id".to_string(), broker);
        } else if !given("broker.id") {
            let node = entries["node.id"].clone();
            entries.insert("broker.id".to_string(), node);
        }
        let cfg = BrokerConfig {
            entries,
            unknown_keys,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// The built-in defaults only: the no-argument `kactor` run.
    pub fn defaults() -> Result<Self, ConfigError> {
        Self::load(&ConfigSources::default())
    }

    pub fn entry(&self, key: &str) -> Option<&ConfigEntry> {
        self.entries.get(key)
    }

    /// Every key with its value and origin, for DescribeConfigs.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &ConfigEntry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.entries.get(key).and_then(|e| e.value.as_deref())
    }

    /// A list value split on commas, trimmed, empties dropped (Kafka's `Type.LIST`).
    pub fn get_list(&self, key: &str) -> Vec<String> {
        self.get_str(key).map(split_list).unwrap_or_default()
    }

    fn typed<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.get_str(key).and_then(|v| v.trim().parse().ok())
    }

    /// Panics only for a key that has no default and no definition: a programming error,
    /// since validation already parsed every defined key.
    pub fn get_i32(&self, key: &str) -> i32 {
        self.typed(key)
            .unwrap_or_else(|| panic!("config {key} has no int value"))
    }
    pub fn get_i64(&self, key: &str) -> i64 {
        self.typed(key)
            .unwrap_or_else(|| panic!("config {key} has no long value"))
    }
    pub fn get_opt_i64(&self, key: &str) -> Option<i64> {
        self.typed(key)
    }
    pub fn get_bool(&self, key: &str) -> bool {
        self.get_str(key)
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(false)
    }

    pub fn node_id(&self) -> i32 {
        self.get_i32("node.id")
    }
    pub fn process_roles(&self) -> Vec<String> {
        self.get_list("process.roles")
    }
    pub fn is_broker(&self) -> bool {
        self.process_roles().iter().any(|r| r == "broker")
    }
    pub fn is_controller(&self) -> bool {
        self.process_roles().iter().any(|r| r == "controller")
    }

    /// The keys DescribeConfigs lists as synonyms of `key`, highest precedence first (Kafka's
    /// `DynamicBrokerConfig.brokerConfigSynonyms`): the ms / minutes / hours families.
    pub fn synonyms(key: &str) -> Vec<&'static str> {
        const FAMILIES: &[&[&str]] = &[
            &[
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
            ],
            &["log.roll.ms", "log.roll.hours"],
            &["log.roll.jitter.ms", "log.roll.jitter.hours"],
            &["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        ];
        FAMILIES
            .iter()
            .find(|f| f.contains(&key))
            .map(|f| f.to_vec())
            .or_else(|| find_def(key).map(|d| vec![d.name]))
            .unwrap_or_default()
    }

    /// Whether DescribeConfigs must hide the value (Kafka's `Type.PASSWORD`).
    pub fn is_sensitive(key: &str) -> bool {
        let unprefixed = key
            .strip_prefix("listener.name.")
            .and_then(|rest| rest.split_once('.'))
            .map_or(key, |(_, setting)| setting);
        find_def(unprefixed).is_some_and(|d| d.ty == ConfigType::Password)
            || key.ends_with(".password")
            || key.contains("sasl.jaas.config")
    }

    /// Every defined key as DescribeConfigs reports it for this broker (`include_synonyms`
    /// and `include_documentation` data included; the handler filters by request).
    pub fn describe(&self) -> Vec<DescribedConfig> {
        BROKER_CONFIG_DEFS
            .iter()
            // The authorizer's own keys are the plugin's, not the broker's: Kafka's broker
            // DescribeConfigs does not list them.
            .filter(|d| !AUTHORIZER_KEYS.contains(&d.name))
            .map(|d| {
                let entry = &self.entries[d.name];
                let family = Self::synonyms(d.name);
                // Kafka lists the family source by source, each synonym only where it has a
                // value: those set here (file, env, override), then the built-in defaults, so
                // a key set in the file is followed by its default.
                let sensitive = Self::is_sensitive(d.name);
                let mut synonyms: Vec<(String, String, KafkaConfigSource)> = family
                    .iter()
                    .filter_map(|k| {
                        let e = self.entries.get(*k)?;
                        if e.origin == ConfigOrigin::Default {
                            return None;
                        }
                        Some((k.to_string(), e.value.clone()?, e.origin.kafka_source()))
                    })
                    .collect();
                synonyms.extend(family.iter().filter_map(|k| {
                    let default = find_def(k)?.default?;
                    Some((
                        k.to_string(),
                        default.to_string(),
                        KafkaConfigSource::DefaultConfig,
                    ))
                }));
                // A synonym carries a value, so a sensitive key lists none (Kafka lists them
                // with a null value).
                if sensitive {
                    synonyms.clear();
                }
                DescribedConfig {
                    name: d.name,
                    value: if sensitive { None } else { entry.value.clone() },
                    source: entry.origin.kafka_source(),
                    config_type: d.ty,
                    // Kafka: read-only unless the key is one of its dynamic broker configs.
                    read_only: d.mutability == defs::Mutability::ReadOnly,
                    sensitive,
                    synonyms,
                    documentation: d.doc,
                }
            })
            .collect()
    }

    /// `log.dirs` if set, else `log.dir` (Kafka's rule).
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        let dirs = self.get_list("log.dirs");
        let dirs = if dirs.is_empty() {
            self.get_list("log.dir")
        } else {
            dirs
        };
        dirs.into_iter().map(PathBuf::from).collect()
    }

    /// `metadata.log.dir` if set, else the first log dir (Kafka's rule).
    pub fn metadata_log_dir(&self) -> PathBuf {
        self.get_str("metadata.log.dir")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| self.log_dirs().into_iter().next())
            .unwrap_or_default()
    }

    /// `log.retention.ms` > `log.retention.minutes` > `log.retention.hours`; -1 = forever.
    pub fn log_retention_ms(&self) -> i64 {
        if let Some(ms) = self.get_opt_i64("log.retention.ms") {
            return ms;
        }
        if let Some(min) = self.get_opt_i64("log.retention.minutes") {
            return min.saturating_mul(60_000);
        }
        self.get_i64("log.retention.hours")
            .saturating_mul(3_600_000)
    }

    /// `log.roll.ms` > `log.roll.hours`.
    pub fn log_roll_ms(&self) -> i64 {
        self.get_opt_i64("log.roll.ms")
            .unwrap_or_else(|| self.get_i64("log.roll.hours").saturating_mul(3_600_000))
    }

    pub fn listeners(&self) -> Vec<Endpoint> {
        self.get_list("listeners")
            .iter()
            .filter_map(|l| parse_endpoint(l).ok())
            .collect()
    }

    /// `advertised.listeners` if set, else `listeners` without the controller ones (Kafka's rule).
    pub fn advertised_listeners(&self) -> Vec<Endpoint> {
        let adv = self.get_list("advertised.listeners");
        if !adv.is_empty() {
            return adv.iter().filter_map(|l| parse_endpoint(l).ok()).collect();
        }
        let controller = self.get_list("controller.listener.names");
        self.listeners()
            .into_iter()
            .filter(|e| !controller.contains(&e.name))
            .collect()
    }

    /// Listeners clients use (everything but `controller.listener.names`).
    pub fn broker_listeners(&self) -> Vec<Endpoint> {
        let controller = self.get_list("controller.listener.names");
        self.listeners()
            .into_iter()
            .filter(|e| !controller.contains(&e.name))
            .collect()
    }

    /// This node's controller listeners as other nodes reach them, in
    /// `controller.listener.names` order: the `advertised.listeners` entry of that name if
    /// there is one, else the `listeners` entry (Kafka's rule for voter endpoints).
    /// As Raft endpoints: what a voter announces and a VotersRecord holds.
    pub fn controller_endpoints(&self) -> kactor_actors::raft::core::Endpoints {
        let advertised: Vec<Endpoint> = self
            .get_list("advertised.listeners")
            .iter()
            .filter_map(|l| parse_endpoint(l).ok())
            .collect();
        let listeners = self.listeners();
        self.get_list("controller.listener.names")
            .iter()
            .filter_map(|name| {
                let e = advertised
                    .iter()
                    .chain(listeners.iter())
                    .find(|e| e.name == *name)?;
                Some(kactor_actors::raft::core::Endpoint {
                    listener: e.name.clone(),
                    host: e.host.clone(),
                    port: e.port,
                })
            })
            .collect()
    }

    /// `controller.quorum.bootstrap.servers` as host:port strings (used when
    /// `controller.quorum.voters` is empty: a dynamic quorum, KIP-853).
    pub fn quorum_bootstrap_servers(&self) -> Vec<String> {
        self.get_list("controller.quorum.bootstrap.servers")
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    pub fn quorum_voters(&self) -> Vec<Voter> {
        self.get_list("controller.quorum.voters")
            .iter()
            .filter_map(|v| parse_voter(v).ok())
            .collect()
    }

    /// Listener name → security protocol. Like Kafka, controller listener names default to
    /// PLAINTEXT when the map was left at its default.
    pub fn security_protocol_map(&self) -> BTreeMap<String, String> {
        let mut map: BTreeMap<String, String> = self
            .get_list("listener.security.protocol.map")
            .iter()
            .filter_map(|p| {
                p.split_once(':')
                    .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
            })
            .collect();
        if self.entries["listener.security.protocol.map"].origin == ConfigOrigin::Default {
            for name in self.get_list("controller.listener.names") {
                map.entry(name).or_insert_with(|| "PLAINTEXT".into());
            }
        }
        map
    }

    /// The listener other brokers reach this one on, as the inter-broker client picks it:
    /// `inter.broker.listener.name`, else the one named PLAINTEXT, else the first broker one.
    fn inter_broker_listener(&self, names: &[String], controller: &[String]) -> Option<String> {
        if !self.is_broker() {
            return None;
        }
        if let Some(n) = self
            .get_str("inter.broker.listener.name")
            .filter(|n| !n.trim().is_empty())
        {
            return Some(n.trim().to_string());
        }
        let broker: Vec<&String> = names.iter().filter(|n| !controller.contains(n)).collect();
        broker
            .iter()
            .find(|n| n.as_str() == "PLAINTEXT")
            .or(broker.first())
            .map(|n| n.to_string())
    }

    fn invalid(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        let e = &self.entries[key];
        ConfigError::Invalid {
            key: key.to_string(),
            value: e.value.clone().unwrap_or_default(),
            origin: e.origin.clone(),
            reason: reason.into(),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        for d in BROKER_CONFIG_DEFS {
            let Some(raw) = self.get_str(d.name) else {
                continue;
            };
            self.validate_one(d, raw)?;
        }
        self.validate_cross()
    }

    fn validate_one(&self, d: &ConfigDef, raw: &str) -> Result<(), ConfigError> {
        let v = raw.trim();
        let number: Option<i64> = match d.ty {
            ConfigType::Int => Some(
                v.parse::<i32>()
                    .map_err(|_| self.invalid(d.name, "expected a 32-bit integer"))?
                    as i64,
            ),
            ConfigType::Short => Some(
                v.parse::<i16>()
                    .map_err(|_| self.invalid(d.name, "expected a 16-bit integer"))?
                    as i64,
            ),
            ConfigType::Long => Some(
                v.parse::<i64>()
                    .map_err(|_| self.invalid(d.name, "expected a 64-bit integer"))?,
            ),
            ConfigType::Double => {
                v.parse::<f64>()
                    .map_err(|_| self.invalid(d.name, "expected a number"))?;
                None
            }
            ConfigType::Boolean => {
                if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                    return Err(self.invalid(d.name, "expected true or false"));
                }
                None
            }
            _ => None,
        };
        match d.validator {
            Validator::Any => {}
            Validator::AtLeast(min) => {
                if let Some(n) = number {
                    if n < min {
                        return Err(self.invalid(d.name, format!("value must be at least {min}")));
                    }
                }
            }
            Validator::Between(lo, hi) => {
                if let Some(n) = number {
                    if n < lo || n > hi {
                        return Err(self.invalid(d.name, format!("value must be in [{lo}, {hi}]")));
                    }
                }
            }
            Validator::OneOf(allowed) => {
                if !allowed.contains(&v) {
                    return Err(
                        self.invalid(d.name, format!("must be one of {}", allowed.join(", ")))
                    );
                }
            }
            Validator::ListOf(allowed) => {
                for item in split_list(v) {
                    if !allowed.contains(&item.as_str()) {
                        return Err(self.invalid(
                            d.name,
                            format!("unknown element {item:?}; allowed: {}", allowed.join(", ")),
                        ));
                    }
                }
            }
            Validator::NonEmpty => {
                if v.is_empty() {
                    return Err(self.invalid(d.name, "must not be empty"));
                }
            }
        }
        Ok(())
    }

    fn validate_cross(&self) -> Result<(), ConfigError> {
        if self.get_i32("broker.id") != self.node_id() {
            return Err(self.invalid(
                "broker.id",
                format!(
                    "must equal node.id {} (broker.id is node.id's legacy name)",
                    self.node_id()
                ),
            ));
        }
        let roles = self.process_roles();
        if roles.is_empty() {
            return Err(self.invalid(
                "process.roles",
                "must contain broker, controller or both (ZooKeeper mode does not exist in Kafka 4)",
            ));
        }
        let mut names = Vec::new();
        for l in self.get_list("listeners") {
            let ep = parse_endpoint(&l).map_err(|r| self.invalid("listeners", r))?;
            if names.contains(&ep.name) {
                return Err(self.invalid(
                    "listeners",
                    format!("listener name {} appears twice", ep.name),
                ));
            }
            names.push(ep.name);
        }
        for l in self.get_list("advertised.listeners") {
            parse_endpoint(&l).map_err(|r| self.invalid("advertised.listeners", r))?;
        }
        let protocols = self.security_protocol_map();
        let controller_listener_names = self.get_list("controller.listener.names");
        let inter_broker = self.inter_broker_listener(&names, &controller_listener_names);
        for name in &names {
            match protocols.get(name).map(String::as_str) {
                Some("PLAINTEXT") => {}
                Some("SSL" | "SASL_PLAINTEXT" | "SASL_SSL") => {
                    // kactor's own clients (controller channel, replica fetchers, markers)
                    // speak plaintext only so far, so the listeners they use must too.
                    let role = if controller_listener_names.contains(name) {
                        Some("a controller listener")
                    } else if inter_broker.as_deref() == Some(name.as_str()) {
                        Some("the inter-broker listener")
                    } else {
                        None
                    };
                    if let Some(role) = role {
                        return Err(self.invalid(
                            "listener.security.protocol.map",
                            format!(
                                "listener {name} is {role} and uses {}; kactor's broker-to-broker \
                                 and broker-to-controller connections are PLAINTEXT only so far. \
                                 Secure client listeners only, and name a PLAINTEXT listener in \
                                 inter.broker.listener.name",
                                protocols[name]
                            ),
                        ));
                    }
                }
                Some(other) => {
                    return Err(self.invalid(
                        "listener.security.protocol.map",
                        format!("unknown security protocol {other} for listener {name}"),
                    ))
                }
                None => {
                    return Err(self.invalid(
                        "listener.security.protocol.map",
                        format!("no security protocol for listener {name}"),
                    ))
                }
            }
        }
        // Security fails closed: an authorizer kactor cannot run must not start as none.
        if let Some(class) = self
            .get_str("authorizer.class.name")
            .map(str::trim)
            .filter(|c| !c.is_empty() && *c != kactor_actors::authorization::STANDARD_AUTHORIZER)
        {
            return Err(self.invalid(
                "authorizer.class.name",
                format!(
                    "{class} is not supported: kactor runs {} (or no authorizer) and loads no \
                     Java classes; starting without it would let every client through",
                    kactor_actors::authorization::STANDARD_AUTHORIZER
                ),
            ));
        }
        if !self.is_controller() && self.get_bool("controller.quorum.auto.join.enable") {
            // Kafka's KafkaConfig.validateValues: only a controller can become a voter.
            return Err(self.invalid(
                "controller.quorum.auto.join.enable",
                "is only supported when process.roles contains the 'controller' role",
            ));
        }
        let controller_names = self.get_list("controller.listener.names");
        if self.is_controller() {
            if controller_names.is_empty() {
                return Err(self.invalid(
                    "controller.listener.names",
                    "required when process.roles has controller",
                ));
            }
            if !controller_names.iter().any(|n| names.contains(n)) {
                return Err(self.invalid(
                    "controller.listener.names",
                    "none of these names is in listeners; a controller must listen on one",
                ));
            }
        }
        if self.is_broker() && !names.iter().any(|n| !controller_names.contains(n)) {
            return Err(self.invalid(
                "listeners",
                "a broker needs a listener that is not a controller listener",
            ));
        }
        let voters = self.get_list("controller.quorum.voters");
        let bootstrap = self.get_list("controller.quorum.bootstrap.servers");
        if voters.is_empty() && bootstrap.is_empty() {
            return Err(self.invalid(
                "controller.quorum.voters",
                "set controller.quorum.voters or controller.quorum.bootstrap.servers",
            ));
        }
        for b in &bootstrap {
            if split_host_port(b.trim()).is_none() {
                return Err(self.invalid(
                    "controller.quorum.bootstrap.servers",
                    format!("{b:?} is not host:port"),
                ));
            }
        }
        let mut voter_ids = Vec::new();
        for v in &voters {
            let voter = parse_voter(v).map_err(|r| self.invalid("controller.quorum.voters", r))?;
            voter_ids.push(voter.node_id);
        }
        if self.is_controller() && !voters.is_empty() && !voter_ids.contains(&self.node_id()) {
            return Err(self.invalid(
                "controller.quorum.voters",
                format!(
                    "node.id {} has the controller role but is not a voter",
                    self.node_id()
                ),
            ));
        }
        if self.log_dirs().is_empty() {
            return Err(self.invalid("log.dirs", "at least one log directory is required"));
        }
        for o in self.get_list("max.connections.per.ip.overrides") {
            let ok = o.rsplit_once(':').is_some_and(|(host, limit)| {
                !host.is_empty() && limit.trim().parse::<u32>().is_ok()
            });
            if !ok {
                return Err(self.invalid(
                    "max.connections.per.ip.overrides",
                    format!("{o:?} is not host:limit"),
                ));
            }
        }
        // Kafka's KafkaConfig rule: a bounded pool must fit the largest request, so every
        // request can be read once the pool is free (its SimpleMemoryPool refuses a smaller
        // size), and no request ever waits for more bytes than the pool has.
        let pool_bytes = self.get_i64("queued.max.request.bytes");
        if pool_bytes > 0 && pool_bytes < self.get_i64("socket.request.max.bytes") {
            return Err(self.invalid(
                "queued.max.request.bytes",
                "must be larger or equal to socket.request.max.bytes",
            ));
        }
        let http = self.get_str("kactor.http.address").unwrap_or_default();
        if http.parse::<std::net::SocketAddr>().is_err() {
            return Err(self.invalid(
                "kactor.http.address",
                "expected host:port with an IP address",
            ));
        }
        Ok(())
    }
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parses `NAME://host:port` (host may be empty = all interfaces, or `[v6]`).
/// A per-listener setting kactor reads (`src/security.rs`): `listener.name.<l>.<key>` of a
/// defined key, or a SASL login setting `listener.name.<l>.<mechanism>.sasl.jaas.config` /
/// `.connections.max.reauth.ms`.
pub fn is_listener_setting(key: &str) -> bool {
    let Some(rest) = key.strip_prefix("listener.name.") else {
        return false;
    };
    let Some((_, setting)) = rest.split_once('.') else {
        return false;
    };
    if find_def(setting).is_some() {
        return true;
    }
    setting.split_once('.').is_some_and(|(_, s)| {
        matches!(
            s,
            "sasl.jaas.config" | "connections.max.reauth.ms" | "sasl.server.callback.handler.class"
        )
    })
}

pub fn parse_endpoint(s: &str) -> Result<Endpoint, String> {
    let (name, rest) = s
        .split_once("://")
        .ok_or_else(|| format!("{s:?} is not NAME://host:port"))?;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!("{s:?} has an invalid listener name"));
    }
    let (host, port) =
        split_host_port(rest).ok_or_else(|| format!("{s:?} is not NAME://host:port"))?;
    Ok(Endpoint {
        name: name.to_ascii_uppercase(),
        host,
        port,
    })
}

/// Parses `id@host:port`.
pub fn parse_voter(s: &str) -> Result<Voter, String> {
    let (id, rest) = s
        .split_once('@')
        .ok_or_else(|| format!("{s:?} is not id@host:port"))?;
    let node_id = id
        .trim()
        .parse::<i32>()
        .map_err(|_| format!("{s:?} has a non-numeric node id"))?;
    if node_id < 0 {
        return Err(format!("{s:?} has a negative node id"));
    }
    let (host, port) = split_host_port(rest).ok_or_else(|| format!("{s:?} is not id@host:port"))?;
    Ok(Voter {
        node_id,
        host,
        port,
    })
}

fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port))
}

/// Reads a properties file as plain pairs (used by `format` for meta.properties checks).
pub fn read_properties(path: &Path) -> std::io::Result<BTreeMap<String, String>> {
    Ok(properties::parse(&std::fs::read_to_string(path)?))
}

#[cfg(test)]
mod tests {
    use super::defs::Mutability;
    use super::*;
    use std::io::Write;

    fn load(
        file: Option<&str>,
        env: &[(&str, &str)],
        overrides: &[&str],
    ) -> Result<BrokerConfig, ConfigError> {
        let tmp = file.map(|text| {
            let mut f = tempfile::NamedTempFile::new().unwrap();
            f.write_all(text.as_bytes()).unwrap();
            f
        });
        BrokerConfig::load(&ConfigSources {
            file: tmp.as_ref().map(|f| f.path().to_path_buf()),
            env: env
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
        })
    }

    #[test]
    fn defaults_are_a_single_combined_node() {
        let c = BrokerConfig::defaults().unwrap();
        assert_eq!(c.node_id(), 1);
        assert!(c.is_broker() && c.is_controller());
        assert_eq!(
            c.broker_listeners(),
            vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092
            }]
        );
        assert_eq!(
            c.quorum_voters(),
            vec![Voter {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9093
            }]
        );
        assert_eq!(c.log_dirs(), vec![PathBuf::from("./data")]);
        assert_eq!(c.get_str("kactor.http.address"), Some("127.0.0.1:9464"));
        assert_eq!(c.get_i32("socket.request.max.bytes"), 104857600);
        assert_eq!(c.get_i32("queued.max.requests"), 500);
        assert_eq!(c.get_i64("queued.max.request.bytes"), -1);
        assert_eq!(c.log_retention_ms(), 168 * 3_600_000);
        assert_eq!(c.entry("log.retention.ms").unwrap().value, None);
        assert_eq!(
            c.entry("num.partitions").unwrap().origin.kafka_source(),
            KafkaConfigSource::DefaultConfig
        );
        assert_eq!(c.security_protocol_map()["CONTROLLER"], "PLAINTEXT");
    }

    #[test]
    fn layers_win_in_order_and_remember_their_source() {
        let c = load(
            Some("num.partitions=3\nlog.retention.ms=1000\nmessage.max.bytes=2000\n"),
            &[
                ("KAFKA_LOG_RETENTION_MS", "2000"),
                ("KAFKA_MESSAGE_MAX_BYTES", "3000"),
            ],
            &["message.max.bytes=4000"],
        )
        .unwrap();
        assert_eq!(c.get_i32("num.partitions"), 3);
        assert!(matches!(
            c.entry("num.partitions").unwrap().origin,
            ConfigOrigin::File(_)
        ));
        assert_eq!(c.log_retention_ms(), 2000);
        assert_eq!(
            c.entry("log.retention.ms").unwrap().origin,
            ConfigOrigin::Env("KAFKA_LOG_RETENTION_MS".into())
        );
        assert_eq!(c.get_i32("message.max.bytes"), 4000);
        assert_eq!(
            c.entry("message.max.bytes").unwrap().origin,
            ConfigOrigin::Override
        );
        assert_eq!(
            c.entry("message.max.bytes").unwrap().origin.kafka_source(),
            KafkaConfigSource::StaticBrokerConfig
        );
    }

    #[test]
    fn dotted_keys_are_never_split() {
        let c = load(
            Some("log.dir=/x\nlog.dir.failure.timeout.ms=30000\n"),
            &[],
            &["log.dirs="],
        )
        .unwrap();
        assert_eq!(c.get_str("log.dir"), Some("/x"));
        assert_eq!(c.get_str("log.dir.failure.timeout.ms"), Some("30000"));
        // log.dirs emptied by the override: log.dir takes over, as in Kafka.
        assert_eq!(c.log_dirs(), vec![PathBuf::from("/x")]);
    }

    #[test]
    fn env_names_follow_the_container_convention() {
        assert_eq!(
            env_var_to_key("KAFKA_LOG_RETENTION_MS").as_deref(),
            Some("log.retention.ms")
        );
        assert_eq!(env_var_to_key("KAFKA_A__B").as_deref(), Some("a_b"));
        assert_eq!(env_var_to_key("KAFKA_A___B").as_deref(), Some("a-b"));
        assert_eq!(
            env_var_to_key("KACTOR_HTTP_ADDRESS").as_deref(),
            Some("kactor.http.address")
        );
        assert_eq!(env_var_to_key("PATH"), None);
        // Launch-script variables are not configs and must not fail validation.
        load(
            None,
            &[("KAFKA_HEAP_OPTS", "-Xmx1G"), ("KAFKA_OPTS", "x")],
            &[],
        )
        .unwrap();
    }

    /// Security fails closed: an authorizer class kactor cannot run is refused at start
    /// rather than ignored; the KRaft StandardAuthorizer (or none) starts.
    #[test]
    fn only_the_standard_authorizer_is_accepted() {
        let err = load(
            None,
            &[],
            &["authorizer.class.name=com.example.CustomAuthorizer"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("authorizer.class.name") && err.contains("not supported"),
            "{err}"
        );
        assert!(load(None, &[], &["authorizer.class.name="]).is_ok());
        assert!(load(
            None,
            &[],
            &["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
        )
        .is_ok());
    }

    /// KIP-392: the rack-aware selector is the one plugin kactor has; another class name is
    /// refused at startup instead of leaving consumers on the leader silently.
    #[test]
    fn only_the_rack_aware_replica_selector_is_accepted() {
        let err = load(None, &[], &["replica.selector.class=com.example.Nearest"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("replica.selector.class") && err.contains("RackAwareReplicaSelector"),
            "{err}"
        );
        assert!(load(
            None,
            &[],
            &["replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"]
        )
        .is_ok());
    }

    /// Kafka refuses `controller.quorum.auto.join.enable` on a broker-only node.
    #[test]
    fn auto_join_needs_the_controller_role() {
        let broker = [
            "process.roles=broker",
            "controller.quorum.bootstrap.servers=127.0.0.1:9093",
            "controller.quorum.voters=",
            "listeners=PLAINTEXT://127.0.0.1:9092",
            "controller.quorum.auto.join.enable=true",
        ];
        let err = load(None, &[], &broker).unwrap_err().to_string();
        assert!(
            err.contains("controller.quorum.auto.join.enable")
                && err.contains("only supported when process.roles contains the 'controller' role"),
            "{err}"
        );
        assert!(load(None, &[], &broker[..4]).is_ok());
        assert!(load(None, &[], &["controller.quorum.auto.join.enable=true"]).is_ok());
    }

    #[test]
    fn validation_names_key_and_reason() {
        let err = load(None, &[], &["num.io.threads=zero"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("num.io.threads") && err.contains("32-bit integer"),
            "{err}"
        );
        let err = load(None, &[], &["num.io.threads=0"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("num.io.threads")
                && err.contains("at least 1")
                && err.contains("--override"),
            "{err}"
        );
        let err = load(None, &[], &["process.roles=broker,zookeeper"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("process.roles") && err.contains("zookeeper"),
            "{err}"
        );
        let err = load(None, &[], &["listeners=PLAINTEXT//x:1"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("listeners"), "{err}");
        let err = load(None, &[], &["node.id=7"]).unwrap_err().to_string();
        assert!(
            err.contains("controller.quorum.voters") && err.contains("not a voter"),
            "{err}"
        );
        let err = load(None, &[], &["kactor.log.format=xml"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kactor.log.format") && err.contains("json"),
            "{err}"
        );
        let err = load(None, &[], &["auto.create.topics.enable=yes"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("auto.create.topics.enable"), "{err}");
        let err = load(
            None,
            &[],
            &[
                "queued.max.request.bytes=1048576",
                "socket.request.max.bytes=1048577",
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("queued.max.request.bytes") && err.contains("socket.request.max.bytes"),
            "{err}"
        );
        // As in Kafka, any value ≤ 0 means no pool, and a pool may equal the largest request.
        load(None, &[], &["queued.max.request.bytes=0"]).unwrap();
        load(
            None,
            &[],
            &[
                "queued.max.request.bytes=1048576",
                "socket.request.max.bytes=1048576",
            ],
        )
        .unwrap();
        let err = load(None, &[], &["nokey"]).unwrap_err().to_string();
        assert!(err.contains("key=value"), "{err}");
        let err = load(
            Some("process.roles=broker\nlisteners=CONTROLLER://:9093\n"),
            &[],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("listeners") && err.contains("not a controller listener"),
            "{err}"
        );
    }

    #[test]
    fn shipped_config_files_are_valid_and_server_properties_matches_the_defaults() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let defaults = BrokerConfig::defaults().unwrap();
        for name in [
            "server.properties",
            "cluster-node-1.properties",
            "controller.properties",
            "broker.properties",
        ] {
            let path = dir.join(name);
            let c = BrokerConfig::load(&ConfigSources {
                file: Some(path.clone()),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                c.unknown_keys.is_empty(),
                "{name}: unknown keys {:?}",
                c.unknown_keys
            );
        }
        // The annotated default file documents the no-argument run: same values as built in.
        for (key, value) in read_properties(&dir.join("server.properties")).unwrap() {
            let builtin = defaults.get_str(&key).unwrap_or("");
            assert_eq!(
                builtin, value,
                "server.properties sets {key}={value}, built-in default is {builtin}"
            );
        }
    }

    #[test]
    fn describe_reports_sources_and_synonyms() {
        let c = load(
            Some("log.retention.hours=24\n"),
            &[],
            &["log.retention.minutes=30"],
        )
        .unwrap();
        let d = c.describe();
        let hours = d.iter().find(|e| e.name == "log.retention.hours").unwrap();
        assert_eq!(hours.value.as_deref(), Some("24"));
        assert_eq!(hours.source, KafkaConfigSource::StaticBrokerConfig);
        assert_eq!(hours.config_type, ConfigType::Int);
        // Only log.retention.ms is dynamic in Kafka; its hours/minutes fallbacks are read-only.
        assert!(hours.read_only);
        // Source by source (static, then default), each with a value; ms is unset and not
        // listed. (DescribeConfigs then drops what precedes the key's own name.)
        let syn: Vec<_> = hours
            .synonyms
            .iter()
            .map(|(n, v, s)| (n.as_str(), v.as_str(), *s))
            .collect();
        assert_eq!(
            syn,
            vec![
                (
                    "log.retention.minutes",
                    "30",
                    KafkaConfigSource::StaticBrokerConfig
                ),
                (
                    "log.retention.hours",
                    "24",
                    KafkaConfigSource::StaticBrokerConfig
                ),
                (
                    "log.retention.hours",
                    "168",
                    KafkaConfigSource::DefaultConfig
                ),
            ]
        );
        let parts = d.iter().find(|e| e.name == "num.partitions").unwrap();
        assert_eq!(parts.source, KafkaConfigSource::DefaultConfig);
        let ms = d.iter().find(|e| e.name == "log.retention.ms").unwrap();
        assert_eq!(ms.value, None);
        assert!(!ms.read_only);
    }

    /// `kafka-configs --describe --entity-type brokers --entity-name 1 --all` on a no-argument
    /// kactor: the single-node values are the node's static configuration, followed by Kafka's
    /// own default where Kafka has one (as Kafka lists a key set in server.properties).
    #[test]
    fn single_node_values_are_static_with_kafkas_default_as_synonym() {
        let c = BrokerConfig::defaults().unwrap();
        let d = c.describe();
        let row = |name: &str| d.iter().find(|e| e.name == name).unwrap().clone();
        let syn = |name: &str| -> Vec<(String, String, KafkaConfigSource)> { row(name).synonyms };
        let rf = row("offsets.topic.replication.factor");
        assert_eq!(rf.value.as_deref(), Some("1"));
        assert_eq!(rf.source, KafkaConfigSource::StaticBrokerConfig);
        assert_eq!(
            syn("offsets.topic.replication.factor"),
            vec![
                (
                    "offsets.topic.replication.factor".into(),
                    "1".into(),
                    KafkaConfigSource::StaticBrokerConfig
                ),
                (
                    "offsets.topic.replication.factor".into(),
                    "3".into(),
                    KafkaConfigSource::DefaultConfig
                ),
            ]
        );
        // Kafka has no default for node.id / process.roles / log.dirs: no DEFAULT_CONFIG entry.
        assert_eq!(
            syn("node.id"),
            vec![(
                "node.id".into(),
                "1".into(),
                KafkaConfigSource::StaticBrokerConfig
            )]
        );
        assert_eq!(
            row("log.dirs").source,
            KafkaConfigSource::StaticBrokerConfig
        );
        assert_eq!(
            syn("listeners").last().unwrap(),
            &(
                "listeners".into(),
                "PLAINTEXT://:9092".into(),
                KafkaConfigSource::DefaultConfig
            )
        );
        assert_eq!(
            syn("transaction.state.log.min.isr").last().unwrap().1,
            "2",
            "Kafka's default"
        );
        // A key kactor does not change keeps Kafka's default as its only source.
        assert_eq!(
            row("num.partitions").source,
            KafkaConfigSource::DefaultConfig
        );
        // A file value still wins over the single-node value.
        let c = load(Some("offsets.topic.replication.factor=2\n"), &[], &[]).unwrap();
        assert_eq!(c.get_i32("offsets.topic.replication.factor"), 2);
    }

    /// Kafka's dynamic broker configs are not read-only: DescribeConfigs follows `dynamic(...)`
    /// in defs.rs (the "Dynamic" column of docs/configuration.md), and every key the
    /// controller's own table stores as a dynamic broker config is one of them, so no stored key
    /// is described as read-only. The rest of the dynamic keys reach the controller from defs.rs
    /// through the topology (`extra_dynamic_broker_configs`), with Kafka's per-broker and
    /// listener-prefix rules on top.
    #[test]
    fn dynamic_keys_match_the_controller_and_kafka() {
        use kactor_actors::controller::core::topic_configs::is_dynamic_broker_config;
        let c = BrokerConfig::defaults().unwrap();
        let d = c.describe();
        for def in BROKER_CONFIG_DEFS {
            let Some(row) = d.iter().find(|e| e.name == def.name) else {
                // The authorizer's keys are not the broker's to describe.
                assert!(
                    AUTHORIZER_KEYS.contains(&def.name),
                    "{} not described",
                    def.name
                );
                continue;
            };
            assert_eq!(
                def.mutability == Mutability::ClusterWide,
                !row.read_only,
                "{}: defs.rs and DescribeConfigs disagree",
                def.name
            );
            if is_dynamic_broker_config(def.name) {
                assert_eq!(
                    def.mutability,
                    Mutability::ClusterWide,
                    "{}: the controller stores it as dynamic, defs.rs says read-only",
                    def.name
                );
            }
        }
        for name in [
            "log.retention.ms",
            "log.roll.ms",
            "log.cleaner.threads",
            "num.io.threads",
            "message.max.bytes",
            "compression.gzip.level",
            "log.cleaner.max.compaction.lag.ms",
            "listeners",
            "listener.security.protocol.map",
            "metric.reporters",
            "sasl.enabled.mechanisms",
            "sasl.jaas.config",
            "ssl.client.auth",
            "log.remote.copy.lag.ms",
        ] {
            let row = d.iter().find(|e| e.name == name).unwrap();
            assert!(!row.read_only, "{name} is dynamic in Kafka");
        }
        for name in [
            "node.id",
            "broker.id",
            "log.dirs",
            "process.roles",
            "num.partitions",
            "log.retention.hours",
            "log.retention.minutes",
            "log.roll.hours",
            "log.flush.scheduler.interval.ms",
            "advertised.listeners",
            "ssl.principal.mapping.rules",
            "delegation.token.secret.key",
        ] {
            let row = d.iter().find(|e| e.name == name).unwrap();
            assert!(row.read_only, "{name} is read-only in Kafka");
        }
    }

    /// Kafka 4.4 on a node started with node.id=1: broker.id=1 as STATIC_BROKER_CONFIG, then
    /// its own default -1.
    #[test]
    fn broker_id_is_node_id() {
        let c = BrokerConfig::defaults().unwrap();
        let d = c.describe();
        let row = d.iter().find(|e| e.name == "broker.id").unwrap();
        assert_eq!(row.value.as_deref(), Some("1"));
        assert_eq!(row.source, KafkaConfigSource::StaticBrokerConfig);
        let expected: Vec<(String, String, KafkaConfigSource)> = vec![
            (
                "broker.id".into(),
                "1".into(),
                KafkaConfigSource::StaticBrokerConfig,
            ),
            (
                "broker.id".into(),
                "-1".into(),
                KafkaConfigSource::DefaultConfig,
            ),
        ];
        assert_eq!(row.synonyms, expected);
        // Either name sets both.
        let c = load(
            Some("node.id=2\ncontroller.quorum.voters=2@127.0.0.1:9093\n"),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(c.get_str("broker.id"), Some("2"));
        let c = load(
            Some("broker.id=3\ncontroller.quorum.voters=3@127.0.0.1:9093\n"),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(c.node_id(), 3);
        assert!(matches!(
            c.entry("node.id").unwrap().origin,
            ConfigOrigin::File(_)
        ));
        load(None, &[], &["broker.id=1", "node.id=1"]).unwrap();
        let err = load(None, &[], &["broker.id=2", "node.id=1"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("broker.id") && err.contains("must equal node.id 1"),
            "{err}"
        );
    }

    /// Password keys (and sasl.jaas.config) never show their value, not even as a synonym.
    #[test]
    fn sensitive_values_are_never_described() {
        let c = load(
            Some("ssl.keystore.password=hunter2\nsasl.jaas.config=hunter2\n"),
            &[],
            &["delegation.token.secret.key=hunter2"],
        )
        .unwrap();
        let d = c.describe();
        for name in [
            "ssl.keystore.password",
            "sasl.jaas.config",
            "delegation.token.secret.key",
        ] {
            let row = d.iter().find(|e| e.name == name).unwrap();
            assert!(row.sensitive, "{name}");
            assert_eq!(row.value, None, "{name}");
            assert!(row.synonyms.is_empty(), "{name}");
            assert_eq!(row.source, KafkaConfigSource::StaticBrokerConfig, "{name}");
        }
        assert!(!format!("{d:?}").contains("hunter2"));
        let row = d.iter().find(|e| e.name == "ssl.client.auth").unwrap();
        assert!(!row.sensitive);
        assert_eq!(row.value.as_deref(), Some("none"));
    }

    #[test]
    fn synonyms_and_sensitivity() {
        assert_eq!(
            BrokerConfig::synonyms("log.retention.hours"),
            vec![
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours"
            ]
        );
        assert_eq!(
            BrokerConfig::synonyms("num.partitions"),
            vec!["num.partitions"]
        );
        assert!(BrokerConfig::synonyms("no.such.key").is_empty());
        assert!(BrokerConfig::is_sensitive(
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"
        ));
        assert!(!BrokerConfig::is_sensitive("log.dirs"));
        assert!(BrokerConfig::is_sensitive("ssl.truststore.certificates"));
        assert!(!BrokerConfig::is_sensitive("ssl.truststore.location"));
        assert!(BrokerConfig::is_sensitive(
            "listener.name.ssl.ssl.keystore.key"
        ));
        assert!(is_listener_setting("listener.name.ssl.ssl.client.auth"));
        assert!(is_listener_setting(
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"
        ));
        assert!(!is_listener_setting("listener.name.ssl.no.such.key"));
    }

    #[test]
    fn retention_precedence_and_unknown_keys() {
        let c = load(
            Some("log.retention.minutes=5\nsome.plugin.setting=1\n"),
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(c.log_retention_ms(), 300_000);
        assert_eq!(c.unknown_keys, vec!["some.plugin.setting".to_string()]);
        assert_eq!(c.get_str("some.plugin.setting"), Some("1"));
    }
}
