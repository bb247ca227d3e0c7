//! Group config definitions (ConfigResource type GROUP = 32, KIP-848 / KIP-932 / KIP-1071:
//! `kafka-configs --entity-type groups`), their validation against the broker's bounds, and how
//! an effective value and its source are resolved. Facts (names, types, bounds, messages,
//! sources) read off Apache Kafka 4.4.0 with `kafka-configs` and raw requests.
//!
//! Kafka 4.4 accepts and describes all 21 keys whatever group types the broker serves. kactor
//! does the same, so tools and scripts see Kafka's set; its group coordinator applies
//! `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms` and
//! `consumer.assignment.interval.ms`, and its share-partition manager the five share delivery
//! keys (the ones [`APPLIED`] lists). The other consumer, share and streams keys are stored for
//! what kactor does not do yet.

use std::collections::BTreeMap;

use super::topic_configs::{self, ConfigType};

/// Value kinds of group configs (Kafka's `ConfigDef.Type` ids: BOOLEAN 1, STRING 2, INT 3,
/// LIST 7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GroupValue {
    Int { min: i64 },
    Boolean,
    Str,
    Enum(&'static [&'static str]),
    List,
}

impl GroupValue {
    pub fn type_id(self) -> i8 {
        match self {
            GroupValue::Boolean => 1,
            GroupValue::Str | GroupValue::Enum(_) => 2,
            GroupValue::Int { .. } => 3,
            GroupValue::List => 7,
        }
    }
}

/// The check a value gets after its type, against the broker's own settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Unbounded,
    /// Within the broker's (min key, max key), inclusive.
    Range(&'static str, &'static str),
    /// At most the broker's key.
    Max(&'static str),
    /// One of the names in the broker's `group.streams.assignors`.
    StreamsAssignor,
    /// `earliest`, `latest` or `by_duration:<ISO-8601 duration>`.
    ShareOffsetReset,
}

#[derive(Debug, Clone, Copy)]
pub struct GroupConfigDef {
    pub name: &'static str,
    /// The broker config that supplies the default (Kafka lists it as the synonym); None: the
    /// default is fixed and the synonym carries the key's own name.
    pub broker_key: Option<&'static str>,
    /// Kafka 4.4's default (of the broker key, when there is one).
    pub default: &'static str,
    pub kind: GroupValue,
    pub bound: Bound,
    pub doc: &'static str,
}

const fn g(
    name: &'static str,
    broker_key: Option<&'static str>,
    default: &'static str,
    kind: GroupValue,
    bound: Bound,
    doc: &'static str,
) -> GroupConfigDef {
    GroupConfigDef {
        name,
        broker_key,
        default,
        kind,
        bound,
        doc,
    }
}

use Bound::{Max, Range, ShareOffsetReset, StreamsAssignor, Unbounded};
use GroupValue::*;

pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
pub const CONSUMER_ASSIGNMENT_INTERVAL_MS: &str = "consumer.assignment.interval.ms";

/// The group configs kactor's group coordinator acts on.
pub const APPLIED: &[&str] = &[
    CONSUMER_SESSION_TIMEOUT_MS,
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_ASSIGNMENT_INTERVAL_MS,
    // Applied by the share-partition manager (actors/src/share/apis.rs).
    "share.auto.offset.reset",
    "share.delivery.count.limit",
    "share.partition.max.record.locks",
    "share.record.lock.duration.ms",
    "share.isolation.level",
];

/// Every group config Kafka 4.4 accepts, sorted by name.
pub static GROUP_CONFIGS: &[GroupConfigDef] = &[
    g(
        CONSUMER_ASSIGNMENT_INTERVAL_MS,
        Some("group.consumer.assignment.interval.ms"),
        "1000",
        Int { min: 0 },
        Range(
            "group.consumer.min.assignment.interval.ms",
            "group.consumer.max.assignment.interval.ms",
        ),
        "Least time between two target assignments of this consumer group.",
    ),
    g(
        CONSUMER_HEARTBEAT_INTERVAL_MS,
        Some("group.consumer.heartbeat.interval.ms"),
        "5000",
        Int { min: 1 },
        Range(
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
        "Heartbeat interval the coordinator gives this consumer group's members.",
    ),
    g(
        CONSUMER_SESSION_TIMEOUT_MS,
        Some("group.consumer.session.timeout.ms"),
        "45000",
        Int { min: 1 },
        Range(
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        "How long a member of this consumer group may go without a heartbeat before it is removed.",
    ),
    g(
        "errors.deadletterqueue.copy.record.enable",
        None,
        "false",
        Boolean,
        Unbounded,
        "Whether this share group's dead-letter records carry the original record (stored; not applied by kactor yet).",
    ),
    g(
        "errors.deadletterqueue.topic.name",
        None,
        "",
        Str,
        Unbounded,
        "This share group's dead-letter topic; empty for none (stored; not applied by kactor yet).",
    ),
    g(
        "share.assignment.interval.ms",
        Some("group.share.assignment.interval.ms"),
        "1000",
        Int { min: 0 },
        Range(
            "group.share.min.assignment.interval.ms",
            "group.share.max.assignment.interval.ms",
        ),
        "Least time between two assignments of this share group (stored; not applied by kactor yet).",
    ),
    g(
        "share.auto.offset.reset",
        None,
        "latest",
        Str,
        ShareOffsetReset,
        "Where this share group starts on a partition: earliest, latest or by_duration:<ISO-8601>.",
    ),
    g(
        "share.delivery.count.limit",
        Some("group.share.delivery.count.limit"),
        "5",
        Int { min: 2 },
        Range(
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
        ),
        "Deliveries of a record to this share group before it is given up.",
    ),
    g(
        "share.heartbeat.interval.ms",
        Some("group.share.heartbeat.interval.ms"),
        "5000",
        Int { min: 1 },
        Range(
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
        "Heartbeat interval of this share group's members (stored; not applied by kactor yet).",
    ),
    g(
        "share.isolation.level",
        None,
        "read_uncommitted",
        Enum(&["read_committed", "read_uncommitted"]),
        Unbounded,
        "Whether this share group sees uncommitted transactional records.",
    ),
    g(
        "share.partition.max.record.locks",
        Some("group.share.partition.max.record.locks"),
        "2000",
        Int { min: 100 },
        Range(
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
        "In-flight records per partition for this share group.",
    ),
    g(
        "share.record.lock.duration.ms",
        Some("group.share.record.lock.duration.ms"),
        "30000",
        Int { min: 1000 },
        Range(
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
        "How long a record delivered to this share group stays locked.",
    ),
    g(
        "share.renew.acknowledge.enable",
        None,
        "true",
        Boolean,
        Unbounded,
        "Whether this share group's consumers may renew record locks (stored; not applied by kactor yet).",
    ),
    g(
        "share.session.timeout.ms",
        Some("group.share.session.timeout.ms"),
        "45000",
        Int { min: 1 },
        Range(
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
        "Session timeout of this share group's members (stored; not applied by kactor yet).",
    ),
    g(
        "streams.assignment.interval.ms",
        Some("group.streams.assignment.interval.ms"),
        "1000",
        Int { min: 0 },
        Range(
            "group.streams.min.assignment.interval.ms",
            "group.streams.max.assignment.interval.ms",
        ),
        "Least time between two assignments of this streams group (stored; no streams groups in kactor).",
    ),
    g(
        "streams.assignor.name",
        Some("group.streams.assignors"),
        "sticky",
        Str,
        StreamsAssignor,
        "Task assignor of this streams group, one of group.streams.assignors (stored; no streams groups in kactor).",
    ),
    g(
        "streams.heartbeat.interval.ms",
        Some("group.streams.heartbeat.interval.ms"),
        "5000",
        Int { min: 1 },
        Range(
            "group.streams.min.heartbeat.interval.ms",
            "group.streams.max.heartbeat.interval.ms",
        ),
        "Heartbeat interval of this streams group's members (stored; no streams groups in kactor).",
    ),
    g(
        "streams.initial.rebalance.delay.ms",
        Some("group.streams.initial.rebalance.delay.ms"),
        "3000",
        Int { min: 0 },
        Unbounded,
        "Delay of this streams group's first assignment (stored; no streams groups in kactor).",
    ),
    g(
        "streams.num.standby.replicas",
        Some("group.streams.num.standby.replicas"),
        "0",
        Int { min: 0 },
        Max("group.streams.max.standby.replicas"),
        "Standby replicas per task in this streams group (stored; no streams groups in kactor).",
    ),
    g(
        "streams.rack.aware.assignment.tags",
        Some("group.streams.rack.aware.assignment.tags"),
        "",
        List,
        Unbounded,
        "Client tags this streams group spreads standby tasks across (stored; no streams groups in kactor).",
    ),
    g(
        "streams.session.timeout.ms",
        Some("group.streams.session.timeout.ms"),
        "45000",
        Int { min: 1 },
        Range(
            "group.streams.min.session.timeout.ms",
            "group.streams.max.session.timeout.ms",
        ),
        "Session timeout of this streams group's members (stored; no streams groups in kactor).",
    ),
];

/// Pairs whose session timeout must exceed the heartbeat interval, checked last, on the
/// group's values merged over the broker's.
const SESSION_OVER_HEARTBEAT: [(&str, &str); 3] = [
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    (
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
    ),
];

pub fn group_config(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

/// The default a group config takes from the broker: its broker key's value (the first name
/// of `group.streams.assignors` for the assignor), else Kafka's fixed default.
pub fn broker_default(def: &GroupConfigDef, broker: &BTreeMap<String, String>) -> String {
    let Some(v) = def.broker_key.and_then(|k| broker.get(k)) else {
        return def.default.to_string();
    };
    if def.bound == StreamsAssignor {
        return v.split(',').map(str::trim).next().unwrap_or("").to_string();
    }
    v.to_string()
}

/// Checks a group's complete set of overrides (after the request's operations) in Kafka's
/// order: unknown names, then each value's type, then the broker's bounds, then that session
/// timeouts exceed heartbeat intervals. Returns the overrides in the form Kafka reports them
/// (integers and booleans as parsed), which is the form stored.
pub fn validate(
    overrides: &BTreeMap<String, String>,
    broker: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    if let Some(name) = overrides.keys().find(|k| group_config(k).is_none()) {
        return Err(format!("Unknown group config name: {name}"));
    }
    let mut normalized = BTreeMap::new();
    for (name, value) in overrides {
        let def = group_config(name).expect("checked above");
        normalized.insert(name.clone(), check_type(def, value)?);
    }
    let int_of = |name: &str| -> i64 {
        normalized
            .get(name)
            .cloned()
            .unwrap_or_else(|| broker_default(group_config(name).expect("known key"), broker))
            .parse()
            .unwrap_or(0)
    };
    let broker_int = |key: &str| -> Option<i64> { broker.get(key)?.trim().parse().ok() };
    for (name, value) in &normalized {
        let def = group_config(name).expect("checked above");
        match def.bound {
            Unbounded => {}
            Range(min_key, max_key) => {
                if let (Some(min), Some(max)) = (broker_int(min_key), broker_int(max_key)) {
                    let v = int_of(name);
                    if v < min || v > max {
                        return Err(format!(
                            "{name} must be in the range {min} to {max} inclusive."
                        ));
                    }
                }
            }
            Max(max_key) => {
                if let Some(max) = broker_int(max_key) {
                    if int_of(name) > max {
                        return Err(format!("{name} must be less than or equal to {max}"));
                    }
                }
            }
            StreamsAssignor => {
                let registered: Vec<&str> = broker
                    .get("group.streams.assignors")
                    .map_or("sticky", String::as_str)
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect();
                if !registered.contains(&value.as_str()) {
                    return Err(format!(
                        "{name} '{value}' is not a registered task assignor. Registered assignors are: [{}].",
                        registered.join(", ")
                    ));
                }
            }
            ShareOffsetReset => {}
        }
    }
    for (session, heartbeat) in SESSION_OVER_HEARTBEAT {
        let touched = normalized.contains_key(session) || normalized.contains_key(heartbeat);
        if touched && int_of(session) <= int_of(heartbeat) {
            return Err(format!("{session} must be greater than {heartbeat}"));
        }
    }
    Ok(normalized)
}

/// Type check of one value (Kafka's `ConfigDef.parse` messages); returns it as Kafka renders
/// the parsed value.
fn check_type(def: &GroupConfigDef, value: &str) -> Result<String, String> {
    let name = def.name;
    match def.kind {
        Int { min } => {
            topic_configs::validate_value(
                name,
                ConfigType::Int {
                    min,
                    max: i32::MAX as i64,
                },
                value,
            )?;
            Ok(value.trim().to_string())
        }
        Boolean => {
            topic_configs::validate_value(name, ConfigType::Boolean, value)?;
            Ok(value.trim().to_ascii_lowercase())
        }
        Enum(allowed) => {
            topic_configs::validate_value(name, ConfigType::Enum(allowed), value)?;
            Ok(value.trim().to_string())
        }
        Str if def.bound == ShareOffsetReset => {
            let v = value.trim();
            let ok = v == "earliest"
                || v == "latest"
                || v.strip_prefix("by_duration:").is_some_and(is_iso_duration);
            if ok {
                Ok(v.to_string())
            } else {
                Err(format!(
                    "Invalid value {value} for configuration {name}: Invalid value `{value}` for \
                     configuration {name}. The value must be either 'earliest', 'latest' or of \
                     the format 'by_duration:<PnDTnHnMn.nS>'."
                ))
            }
        }
        Str => Ok(value.trim().to_string()),
        List => Ok(value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(",")),
    }
}

/// A non-negative ISO-8601 duration as Java's `Duration.parse` reads it: `PnDTnHnMn.nS`, each
/// part optional but at least one present, the time parts after `T`.
fn is_iso_duration(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('P').or_else(|| s.strip_prefix('p')) else {
        return false;
    };
    let (days, time) = match rest.find(['T', 't']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let number = |n: &str, fraction: bool| {
        let (int, frac) = match n.split_once('.') {
            Some((i, f)) if fraction => (i, Some(f)),
            Some(_) => return false,
            None => (n, None),
        };
        !int.is_empty()
            && int.bytes().all(|b| b.is_ascii_digit())
            && frac.is_none_or(|f| {
                !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit())
            })
    };
    let mut parts = 0;
    if !days.is_empty() {
        let Some(n) = days.strip_suffix(['D', 'd']) else {
            return false;
        };
        if !number(n, false) {
            return false;
        }
        parts += 1;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return false;
        }
        for (unit, fraction) in [(['H', 'h'], false), (['M', 'm'], false), (['S', 's'], true)] {
            if let Some(i) = t.find(unit) {
                if !number(&t[..i], fraction) {
                    return false;
                }
                t = &t[i + 1..];
                parts += 1;
            }
        }
        if !t.is_empty() {
            return false;
        }
    }
    parts > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BTreeMap<String, String> {
        [
            ("group.consumer.min.session.timeout.ms", "45000"),
            ("group.consumer.max.session.timeout.ms", "60000"),
            ("group.consumer.session.timeout.ms", "45000"),
            ("group.consumer.min.heartbeat.interval.ms", "5000"),
            ("group.consumer.max.heartbeat.interval.ms", "60000"),
            ("group.consumer.heartbeat.interval.ms", "5000"),
            ("group.streams.max.standby.replicas", "2"),
            ("group.streams.assignors", "sticky"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn check(pairs: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
        let set = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        validate(&set, &broker())
    }

    #[test]
    fn table_is_sorted_and_defaults_are_valid() {
        assert_eq!(GROUP_CONFIGS.len(), 21);
        assert!(GROUP_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for d in GROUP_CONFIGS {
            assert!(check_type(d, d.default).is_ok(), "{}", d.name);
        }
    }

    #[test]
    fn values_are_checked_as_kafka_does() {
        assert_eq!(
            check(&[("consumer.session.timeout.ms", " 50000 ")]).unwrap()
                ["consumer.session.timeout.ms"],
            "50000"
        );
        assert_eq!(
            check(&[("consumer.heartbeat.interval.ms", "abc"), ("no.such", "1")]),
            Err("Unknown group config name: no.such".into())
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "5000")]),
            Err(
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.".into()
            )
        );
        assert_eq!(
            check(&[("consumer.heartbeat.interval.ms", "0")]),
            Err("Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1".into())
        );
        // The session timeout left at the broker's 45000 must still exceed the heartbeat.
        assert_eq!(
            check(&[("consumer.heartbeat.interval.ms", "45000")]),
            Err(
                "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                    .into()
            )
        );
        assert!(check(&[
            ("consumer.heartbeat.interval.ms", "40000"),
            ("consumer.session.timeout.ms", "45000")
        ])
        .is_ok());
        assert_eq!(
            check(&[("streams.num.standby.replicas", "3")]),
            Err("streams.num.standby.replicas must be less than or equal to 2".into())
        );
        assert_eq!(
            check(&[("streams.assignor.name", "bogus")]),
            Err("streams.assignor.name 'bogus' is not a registered task assignor. Registered assignors are: [sticky].".into())
        );
        assert_eq!(
            check(&[("share.renew.acknowledge.enable", "TRUE")]).unwrap()
                ["share.renew.acknowledge.enable"],
            "true"
        );
    }

    #[test]
    fn share_offset_reset_takes_iso_durations() {
        for ok in [
            "earliest",
            "latest",
            "by_duration:PT1H",
            "by_duration:P1DT2H3M4.5S",
            "by_duration:P2D",
        ] {
            assert!(check(&[("share.auto.offset.reset", ok)]).is_ok(), "{ok}");
        }
        for bad in [
            "EARLIEST",
            "by_duration:xx",
            "by_duration:-PT1H",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:P1H",
        ] {
            assert!(check(&[("share.auto.offset.reset", bad)]).is_err(), "{bad}");
        }
    }
}
