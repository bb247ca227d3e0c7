//! Client metrics subscriptions (ConfigResource type CLIENT_METRICS = 16, KIP-714:
//! `kafka-configs --entity-type client-metrics`): their three keys, the check Kafka's controller
//! runs on a subscription's complete set of values, and the form the values are stored in.
//! Facts (names, defaults, types, order of checks, error codes and messages) read off Apache
//! Kafka 4.4.0 with `kafka-configs` and raw IncrementalAlterConfigs / AlterConfigs requests.
//!
//! kactor stores, lists, describes and deletes subscriptions as Kafka does; it does not serve
//! GetTelemetrySubscriptions / PushTelemetry, so no client is ever sent one.

use std::collections::BTreeMap;

use super::errors::ApiError;
use super::topic_configs::{self, ConfigType};
use kactor_protocol::errors::{INVALID_CONFIG, INVALID_REQUEST};

/// What kind of value a key holds (Kafka's `ConfigDef.Type`: INT 3, LIST 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsValue {
    Int,
    List,
}

impl MetricsValue {
    pub fn type_id(self) -> i8 {
        match self {
            MetricsValue::Int => 3,
            MetricsValue::List => 7,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ClientMetricsConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: MetricsValue,
    pub doc: &'static str,
}

pub const METRICS: &str = "metrics";
pub const INTERVAL_MS: &str = "interval.ms";
pub const MATCH: &str = "match";

/// The keys in Kafka's definition order, which is the order their values are parsed (and so
/// which bad value is reported first).
pub static CLIENT_METRICS_CONFIGS: &[ClientMetricsConfigDef] = &[
    ClientMetricsConfigDef {
        name: METRICS,
        default: "",
        kind: MetricsValue::List,
        doc: "Telemetry metric name prefix list",
    },
    ClientMetricsConfigDef {
        name: INTERVAL_MS,
        default: "300000",
        kind: MetricsValue::Int,
        doc: "Metrics push interval in milliseconds",
    },
    ClientMetricsConfigDef {
        name: MATCH,
        default: "",
        kind: MetricsValue::List,
        doc: "Client match criteria",
    },
];

const MIN_INTERVAL_MS: i32 = 100;
const MAX_INTERVAL_MS: i32 = 3_600_000;

/// The client properties a `match` entry may test.
const MATCH_PARAMS: [&str; 6] = [
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];

pub fn client_metrics_config(name: &str) -> Option<&'static ClientMetricsConfigDef> {
    CLIENT_METRICS_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks a subscription's complete set of values (after the request's operations) in Kafka's
/// order: the name, unknown keys, each value's type (in definition order), the push
/// interval's bounds, then the match patterns. Returns the values as Kafka stores them: lists
/// trimmed, without repeats, joined by commas; the interval as the parsed number.
pub fn validate(
    subscription: &str,
    values: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ApiError> {
    if subscription.is_empty() {
        return Err(ApiError::new(
            INVALID_REQUEST,
            "Subscription name can't be empty",
        ));
    }
    if let Some(name) = values.keys().find(|k| client_metrics_config(k).is_none()) {
        return Err(ApiError::new(
            INVALID_REQUEST,
            format!("Unknown client metrics configuration: {name}"),
        ));
    }
    let mut stored = BTreeMap::new();
    let mut interval = None;
    let mut patterns = Vec::new();
    for def in CLIENT_METRICS_CONFIGS {
        let Some(value) = values.get(def.name) else {
            continue;
        };
        let rendered = match def.kind {
            MetricsValue::Int => {
                topic_configs::validate_value(
                    def.name,
                    ConfigType::Int {
                        min: i32::MIN as i64,
                        max: i32::MAX as i64,
                    },
                    value,
                )
                .map_err(|m| ApiError::new(INVALID_CONFIG, m))?;
                let n: i32 = value.trim().parse().expect("checked above");
                interval = Some(n);
                n.to_string()
            }
            MetricsValue::List => {
                let items = list_items(value);
                if items.iter().any(|i| i.is_empty()) {
                    return Err(ApiError::new(
                        INVALID_CONFIG,
                        format!("Configuration '{}' values must not be empty.", def.name),
                    ));
                }
                if def.name == MATCH {
                    patterns.clone_from(&items);
                }
                items.join(",")
            }
        };
        stored.insert(def.name.to_string(), rendered);
    }
    if let Some(n) = interval.filter(|n| !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(n)) {
        return Err(ApiError::new(
            INVALID_REQUEST,
            format!(
                "Invalid value {n} for {INTERVAL_MS}, interval must be between \
                 {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)"
            ),
        ));
    }
    if let Some(bad) = patterns.iter().find(|p| !valid_match_pattern(p)) {
        return Err(ApiError::new(
            INVALID_CONFIG,
            format!("Illegal client matching pattern: {bad}"),
        ));
    }
    Ok(stored)
}

/// A LIST value's items as Kafka's `ConfigDef` parses them: the whole value trimmed (empty
/// means no items), split at commas with the blanks around them, repeats dropped.
fn list_items(value: &str) -> Vec<String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    let mut items: Vec<String> = Vec::new();
    for item in trimmed.split(',').map(str::trim) {
        if !items.iter().any(|i| i == item) {
            items.push(item.to_string());
        }
    }
    items
}

/// `param=regex`: split at every '=' as Java's `String.split` does (trailing empty parts
/// dropped), exactly two parts, a known parameter, and a pattern Java's regex compiles.
fn valid_match_pattern(entry: &str) -> bool {
    let mut parts: Vec<&str> = entry.split('=').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    let [param, pattern] = parts[..] else {
        return false;
    };
    MATCH_PARAMS.contains(&param.trim()) && java_regex_compiles(pattern.trim())
}

/// Whether Java's `Pattern.compile` accepts `pattern`, checked with regex-syntax's parser
/// after rewriting the Java constructs it lacks into equivalents it knows (quoting with
/// `\Q..\E`, possessive quantifiers, atomic groups, look-around, back-references and Java-only
/// escapes); the Python-style `(?P<name>` Java refuses.
fn java_regex_compiles(pattern: &str) -> bool {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    let mut class_depth = 0usize;
    // Whether the last thing written can take a possessive `+` (a quantifier just ended).
    let mut after_quantifier = false;
    while let Some(c) = chars.next() {
        let quantifier_before = std::mem::take(&mut after_quantifier);
        match c {
            '\\' => match chars.next() {
                None => return false,
                Some('Q') => {
                    let mut quoted = String::new();
                    while let Some(q) = chars.next() {
                        if q == '\\' && chars.peek() == Some(&'E') {
                            chars.next();
                            break;
                        }
                        quoted.push(q);
                    }
                    out.push_str(&regex_syntax::escape(&quoted));
                }
                Some('k') => {
                    // A named back-reference, \k<name>.
                    if chars.next() != Some('<') || !chars.by_ref().any(|c| c == '>') {
                        return false;
                    }
                    out.push('x');
                }
                Some('Z') => out.push_str("\\z"),
                Some('G') => out.push_str("\\A"),
                Some('0') => {
                    while chars.peek().is_some_and(|d| ('0'..='7').contains(d)) {
                        chars.next();
                    }
                    out.push('x');
                }
                Some('c') => {
                    if chars.next().is_none() {
                        return false;
                    }
                    out.push('x');
                }
                Some('1'..='9') if class_depth == 0 => {
                    while chars.peek().is_some_and(char::is_ascii_digit) {
                        chars.next();
                    }
                    out.push('x');
                }
                Some('h' | 'H' | 'v' | 'V' | 'R' | 'X' | 'e') => out.push('x'),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
            },
            '[' => {
                class_depth += 1;
                out.push(c);
                // A leading ']' or '^]' is a literal in both dialects; copy it past the check.
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().expect("peeked"));
                }
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(c);
            }
            '(' if class_depth == 0 && chars.peek() == Some(&'?') => {
                let rest: String = chars.clone().take(4).collect();
                if rest.starts_with("?P<") {
                    return false;
                }
                let skip = ["?<=", "?<!", "?=", "?!", "?>"]
                    .iter()
                    .find(|p| rest.starts_with(**p))
                    .map(|p| p.len());
                match skip {
                    Some(n) => {
                        for _ in 0..n {
                            chars.next();
                        }
                        out.push_str("(?:");
                    }
                    None => out.push(c),
                }
            }
            '+' if class_depth == 0 && quantifier_before => {}
            '*' | '+' | '?' | '}' if class_depth == 0 => {
                out.push(c);
                after_quantifier = true;
            }
            _ => out.push(c),
        }
    }
    regex_syntax::ast::parse::Parser::new().parse(&out).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(name: &str, pairs: &[(&str, &str)]) -> (i16, String) {
        let e = validate(name, &set(pairs)).unwrap_err();
        (e.code, e.message.unwrap())
    }

    #[test]
    fn values_are_stored_as_kafka_renders_them() {
        let got = validate(
            "s",
            &set(&[
                (METRICS, " b. , a., b. "),
                (INTERVAL_MS, " +0500 "),
                (MATCH, "client_id=a, client_software_name = b "),
            ]),
        )
        .unwrap();
        assert_eq!(
            got,
            set(&[
                (METRICS, "b.,a."),
                (INTERVAL_MS, "500"),
                (MATCH, "client_id=a,client_software_name = b"),
            ])
        );
        assert_eq!(
            validate("s", &set(&[(METRICS, " ")])).unwrap(),
            set(&[(METRICS, "")])
        );
    }

    #[test]
    fn checks_come_in_kafkas_order_with_its_codes_and_messages() {
        assert_eq!(
            err("", &[(METRICS, "x")]),
            (INVALID_REQUEST, "Subscription name can't be empty".into())
        );
        assert_eq!(
            err("s", &[(INTERVAL_MS, "x"), ("nope", "1")]),
            (
                INVALID_REQUEST,
                "Unknown client metrics configuration: nope".into()
            )
        );
        // metrics is parsed before interval.ms, interval.ms before match.
        assert_eq!(
            err("s", &[(INTERVAL_MS, "x"), (METRICS, "a,,b")]),
            (
                INVALID_CONFIG,
                "Configuration 'metrics' values must not be empty.".into()
            )
        );
        assert_eq!(
            err("s", &[(INTERVAL_MS, "x"), (MATCH, "a,,b")]),
            (
                INVALID_CONFIG,
                "Invalid value x for configuration interval.ms: Not a number of type INT".into()
            )
        );
        assert_eq!(
            err("s", &[(INTERVAL_MS, "5"), (MATCH, "foo")]),
            (
                INVALID_REQUEST,
                "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"
                    .into()
            )
        );
        assert_eq!(
            err("s", &[(INTERVAL_MS, "2147483648")]).1,
            "Invalid value 2147483648 for configuration interval.ms: Not a number of type INT"
        );
        assert_eq!(
            err("s", &[(MATCH, "client_id")]),
            (
                INVALID_CONFIG,
                "Illegal client matching pattern: client_id".into()
            )
        );
    }

    #[test]
    fn match_patterns_follow_javas_split_and_regex() {
        let ok = |p: &str| validate("s", &set(&[(MATCH, p)])).is_ok();
        // Accepted by Kafka 4.4.0.
        for p in [
            "client_id=abc.*",
            "client_id =x",
            "client_id=x=",
            "client_source_port=1",
            "client_id=a*+",
            "client_id=\\Qx\\E",
            "client_id=(a)\\1",
            "client_id=\\p{L}",
            "client_id=(?<n>a)",
            "client_id=(?>a)",
            "client_id=(?!a)b",
        ] {
            assert!(ok(p), "{p}");
        }
        // Refused by Kafka 4.4.0.
        for p in [
            "client_id",
            "client_id=",
            "=x",
            "foo=bar",
            "CLIENT_ID=x",
            "client_id=a=b",
            "client_id=(?=a)",
            "client_id=(?P<n>a)",
            "client_id={",
            "client_id=a{2",
            "client_id=(a",
            "client_id=a)",
            "client_id=*",
            "client_id=[a-",
            "client_id=\\y",
        ] {
            assert!(!ok(p), "{p}");
        }
    }
}
