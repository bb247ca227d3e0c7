//! Broker loggers (ConfigResource type BROKER_LOGGER = 8, Kafka's `RuntimeLoggerManager` and
//! `LoggingController`): `kafka-configs --entity-type broker-loggers` lists this node's loggers
//! with their levels and changes them at run time. Not metadata: each node answers for itself
//! and nothing is persisted, as in Kafka.
//!
//! A logger is a tracing target: a module path of kactor's crates (`kactor_actors::partition`
//! covers every module below it), a target named at start-up (`RUST_LOG` /
//! `kactor.log.level` directives), or one seen at run time; `root` is the default level. A
//! level applies to every target that starts with the logger's name, the longest name
//! winning (tracing-subscriber's `EnvFilter` rule), so a logger without a level of its own
//! shows the one it inherits. Loggers are named with dots, like Kafka's Java class names
//! (`kactor_actors.partition`): `kafka-configs` refuses any other character than
//! `[$a-zA-Z0-9._-]` in a key, so `::` could not be set from it. Requests may use either
//! form; kactor's targets hold no dots of their own, so the two map one to one. Levels are Kafka's names; tracing has nothing above ERROR, so
//! FATAL lets ERROR events through. Facts (validation order, codes, messages, what Describe
//! reports) read off Apache Kafka 4.4.0.
//!
//! [`LoggerLevels`] is the pure state; [`BrokerLoggers`] is the shared handle the request
//! handlers use, which hands the resulting filter directives to the process's logging (a
//! tracing-subscriber reload handle in the binary).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tracing::warn;

use crate::controller::core::errors::ApiError;
use crate::controller::core::requests::AlterConfigOp;
use kactor_protocol::errors::{INVALID_CONFIG, INVALID_REQUEST};

/// The name of the default level.
pub const ROOT_LOGGER: &str = "root";

/// A tracing target (or a logger named either way) as a logger name.
pub fn logger_name(target: &str) -> String {
    target.trim().replace("::", ".")
}

/// The tracing target a logger stands for.
fn target_of(logger: &str) -> String {
    logger.replace('.', "::")
}

/// The levels a logger may be set to (Kafka's `LogLevelConfig.VALID_LOG_LEVELS`), sorted as
/// Kafka lists them in its error message.
pub const VALID_LEVELS: [&str; 6] = ["DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"];

/// The level names a start-up directive can carry, with the name Describe reports.
fn kafka_level(directive_level: &str) -> Option<&'static str> {
    let l = directive_level.trim();
    Some(match () {
        _ if l.eq_ignore_ascii_case("trace") || l == "5" => "TRACE",
        _ if l.eq_ignore_ascii_case("debug") || l == "4" => "DEBUG",
        _ if l.eq_ignore_ascii_case("info") || l == "3" => "INFO",
        _ if l.eq_ignore_ascii_case("warn") || l == "2" => "WARN",
        _ if l.eq_ignore_ascii_case("error") || l == "1" || l.is_empty() => "ERROR",
        _ if l.eq_ignore_ascii_case("off") || l == "0" => "OFF",
        _ => return None,
    })
}

/// A Kafka level as a tracing filter directive level.
fn directive_level(level: &str) -> &'static str {
    match level {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        _ => "off",
    }
}

/// The loggers' levels (pure: no I/O, no logging backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggerLevels {
    root: &'static str,
    /// Loggers with a level of their own.
    levels: BTreeMap<String, &'static str>,
    /// Loggers that exist besides `root` and those with a level.
    known: BTreeSet<String>,
    /// Start-up directives with span or field filters: kept in the filter as given, not
    /// loggers.
    other_directives: Vec<String>,
}

impl LoggerLevels {
    /// From the start-up filter directives (`RUST_LOG` syntax) and the loggers that exist.
    pub fn from_directives<'a>(spec: &str, known: impl IntoIterator<Item = &'a str>) -> Self {
        // No bare level: tracing enables nothing that no directive matches.
        let mut root = "OFF";
        let mut levels = BTreeMap::new();
        let mut other_directives = Vec::new();
        for d in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            if d.contains(['[', '{']) {
                other_directives.push(d.to_string());
                continue;
            }
            match d.split_once('=') {
                Some((target, level)) => match kafka_level(level) {
                    Some(l) => {
                        levels.insert(logger_name(target), l);
                    }
                    None => other_directives.push(d.to_string()),
                },
                // A bare level, or a bare target (which enables everything under it).
                None => match kafka_level(d) {
                    Some(l) => root = l,
                    None => {
                        levels.insert(logger_name(d), "TRACE");
                    }
                },
            }
        }
        LoggerLevels {
            root,
            levels,
            known: known.into_iter().map(logger_name).collect(),
            other_directives,
        }
    }

    pub fn exists(&self, name: &str) -> bool {
        let name = logger_name(name);
        name == ROOT_LOGGER || self.levels.contains_key(&name) || self.known.contains(&name)
    }

    /// Adds the tracing targets seen at run time.
    pub fn add_known<'a>(&mut self, targets: impl IntoIterator<Item = &'a String>) {
        for t in targets {
            let name = logger_name(t);
            if !self.known.contains(&name) {
                self.known.insert(name);
            }
        }
    }

    /// The level that applies to `name`: its own, else that of the longest logger name it
    /// starts with, else the root's.
    pub fn effective(&self, name: &str) -> &'static str {
        let name = logger_name(name);
        if name == ROOT_LOGGER {
            return self.root;
        }
        self.levels
            .iter()
            .filter(|(n, _)| name.starts_with(n.as_str()))
            .max_by_key(|(n, _)| n.len())
            .map_or(self.root, |(_, l)| l)
    }

    /// Every logger (or those named in `keys`, when it is not empty) with its level, by name.
    pub fn describe(&self, keys: Option<&[String]>) -> Vec<(String, &'static str)> {
        let all: BTreeSet<&str> = std::iter::once(ROOT_LOGGER)
            .chain(self.levels.keys().map(String::as_str))
            .chain(self.known.iter().map(String::as_str))
            .collect();
        all.into_iter()
            .filter(|n| keys.is_none_or(|k| k.is_empty() || k.iter().any(|k| logger_name(k) == *n)))
            .map(|n| (n.to_string(), self.effective(n)))
            .collect()
    }

    /// Checks a request's operations in order (Kafka's `validateLogLevelConfigs`): the first
    /// bad one fails them all.
    pub fn check(
        &self,
        ops: &[(String, Result<AlterConfigOp, i8>, Option<String>)],
    ) -> Result<(), ApiError> {
        for (name, op, value) in ops {
            let exists = || {
                if self.exists(name) {
                    Ok(())
                } else {
                    Err(ApiError::new(
                        INVALID_CONFIG,
                        format!("Logger {name} does not exist!"),
                    ))
                }
            };
            let not_allowed = |what: String| {
                Err(ApiError::new(
                    INVALID_REQUEST,
                    format!("{what} is not allowed for the BROKER_LOGGER resource"),
                ))
            };
            match op {
                Ok(AlterConfigOp::Set) => {
                    exists()?;
                    let level = value.as_deref().unwrap_or_default();
                    if !VALID_LEVELS.contains(&level) {
                        return Err(ApiError::new(
                            INVALID_CONFIG,
                            format!(
                                "Cannot set the log level of {name} to {level} as it is not a \
                                 supported log level. Valid log levels are {}",
                                VALID_LEVELS.join(", ")
                            ),
                        ));
                    }
                }
                Ok(AlterConfigOp::Delete) => {
                    exists()?;
                    if logger_name(name) == ROOT_LOGGER {
                        return Err(ApiError::new(
                            INVALID_REQUEST,
                            format!(
                                "Removing the log level of the {ROOT_LOGGER} logger is not allowed"
                            ),
                        ));
                    }
                }
                Ok(AlterConfigOp::Append) => return not_allowed("APPEND operation".into()),
                Ok(AlterConfigOp::Subtract) => return not_allowed("SUBTRACT operation".into()),
                Err(id) => return not_allowed(format!("Unknown operation type {id}")),
            }
        }
        Ok(())
    }

    /// Applies checked operations: SET gives a logger its level, DELETE takes it away (the
    /// logger inherits again).
    pub fn apply(&mut self, ops: &[(String, Result<AlterConfigOp, i8>, Option<String>)]) {
        for (name, op, value) in ops {
            let level = VALID_LEVELS
                .iter()
                .find(|l| Some(**l) == value.as_deref())
                .copied();
            let name = logger_name(name);
            match (op, level) {
                (Ok(AlterConfigOp::Set), Some(l)) if name == ROOT_LOGGER => self.root = l,
                (Ok(AlterConfigOp::Set), Some(l)) => {
                    self.levels.insert(name, l);
                }
                (Ok(AlterConfigOp::Delete), _) => {
                    self.levels.remove(&name);
                }
                _ => {}
            }
        }
    }

    /// The filter directives (tracing-subscriber `EnvFilter` syntax) that give every logger
    /// its level.
    pub fn directives(&self) -> String {
        std::iter::once(directive_level(self.root).to_string())
            .chain(self.other_directives.iter().cloned())
            .chain(
                self.levels
                    .iter()
                    .map(|(n, l)| format!("{}={}", target_of(n), directive_level(l))),
            )
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Installs new filter directives in the process's logging.
pub type ReloadFilter = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The node's loggers as the request handlers share them.
pub struct BrokerLoggers {
    levels: Mutex<LoggerLevels>,
    /// Targets seen at run time (filled by the logging backend as callsites register; kept
    /// apart from `levels` because a reload re-registers callsites while `levels` is held).
    seen: Arc<Mutex<BTreeSet<String>>>,
    reload: ReloadFilter,
}

impl BrokerLoggers {
    pub fn new(levels: LoggerLevels, reload: ReloadFilter) -> Self {
        BrokerLoggers {
            levels: Mutex::new(levels),
            seen: Arc::default(),
            reload,
        }
    }

    /// Where the logging backend records the targets it sees.
    pub fn seen_targets(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.seen.clone()
    }

    fn levels(&self) -> std::sync::MutexGuard<'_, LoggerLevels> {
        let mut levels = self.levels.lock().unwrap_or_else(|e| e.into_inner());
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        levels.add_known(seen.iter());
        levels
    }

    pub fn describe(&self, keys: Option<&[String]>) -> Vec<(String, &'static str)> {
        self.levels().describe(keys)
    }

    /// Checks the operations and, unless `validate_only`, applies them to the running
    /// process.
    pub fn alter(
        &self,
        ops: &[(String, Result<AlterConfigOp, i8>, Option<String>)],
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let mut levels = self.levels();
        levels.check(ops)?;
        if validate_only {
            return Ok(());
        }
        let mut next = levels.clone();
        next.apply(ops);
        (self.reload)(&next.directives()).map_err(|e| {
            ApiError::new(
                kactor_protocol::errors::UNKNOWN_SERVER_ERROR,
                format!("Failed to update the log levels: {e}"),
            )
        })?;
        *levels = next;
        for (name, op, value) in ops {
            match op {
                Ok(AlterConfigOp::Set) => warn!(
                    logger = %name,
                    level = value.as_deref().unwrap_or_default(),
                    "updated the log level"
                ),
                _ => warn!(logger = %name, "unset the log level"),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [&str; 4] = [
        "kactor_actors",
        "kactor_actors::network",
        "kactor_actors::network::socket_server",
        "kactor_actors::partition",
    ];

    fn op(
        name: &str,
        op: AlterConfigOp,
        value: Option<&str>,
    ) -> (String, Result<AlterConfigOp, i8>, Option<String>) {
        (name.to_string(), Ok(op), value.map(str::to_string))
    }

    #[test]
    fn start_up_directives_give_root_and_explicit_levels() {
        let l = LoggerLevels::from_directives(
            "info,kactor_actors::network=warn,foo,bar[span]=debug",
            KNOWN,
        );
        assert_eq!(l.effective(ROOT_LOGGER), "INFO");
        assert_eq!(l.effective("kactor_actors.partition"), "INFO");
        assert_eq!(l.effective("kactor_actors.network.socket_server"), "WARN");
        // Either spelling names the same logger.
        assert_eq!(l.effective("kactor_actors::network::socket_server"), "WARN");
        assert_eq!(l.effective("foo"), "TRACE");
        assert!(l.exists("foo") && !l.exists("bar"));
        assert!(l.exists("kactor_actors.network") && l.exists("kactor_actors::network"));
        assert_eq!(
            l.directives(),
            "info,bar[span]=debug,foo=trace,kactor_actors::network=warn"
        );
        assert_eq!(
            LoggerLevels::from_directives("x=debug", KNOWN).effective("y"),
            "OFF"
        );
    }

    #[test]
    fn set_and_delete_change_what_is_inherited() {
        let mut l = LoggerLevels::from_directives("info", KNOWN);
        let set = [op(
            "kactor_actors.network",
            AlterConfigOp::Set,
            Some("DEBUG"),
        )];
        l.check(&set).unwrap();
        l.apply(&set);
        assert_eq!(l.effective("kactor_actors.network.socket_server"), "DEBUG");
        assert_eq!(l.effective("kactor_actors.partition"), "INFO");
        assert_eq!(l.directives(), "info,kactor_actors::network=debug");
        l.apply(&[op("root", AlterConfigOp::Set, Some("FATAL"))]);
        assert_eq!(l.effective("kactor_actors.partition"), "FATAL");
        assert!(l.directives().starts_with("error,"));
        l.apply(&[op("kactor_actors::network", AlterConfigOp::Delete, None)]);
        assert_eq!(l.effective("kactor_actors.network.socket_server"), "FATAL");
        assert_eq!(
            l.describe(Some(&[
                "root".into(),
                "kactor_actors::network".into(),
                "nope".into()
            ])),
            vec![
                ("kactor_actors.network".to_string(), "FATAL"),
                ("root".to_string(), "FATAL")
            ]
        );
        assert_eq!(l.describe(Some(&[])).len(), KNOWN.len() + 1);
    }

    #[test]
    fn bad_operations_are_refused_as_kafka_refuses_them() {
        let l = LoggerLevels::from_directives("info", KNOWN);
        let e = |ops: &[(String, Result<AlterConfigOp, i8>, Option<String>)]| {
            let e = l.check(ops).unwrap_err();
            (e.code, e.message.unwrap())
        };
        assert_eq!(
            e(&[op(
                "kactor_actors.network",
                AlterConfigOp::Set,
                Some("debug")
            )]),
            (
                INVALID_CONFIG,
                "Cannot set the log level of kactor_actors.network to debug as it is not a \
                 supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"
                    .into()
            )
        );
        assert_eq!(
            e(&[
                op("kactor_actors", AlterConfigOp::Set, Some("WARN")),
                op("kactor", AlterConfigOp::Delete, None)
            ]),
            (INVALID_CONFIG, "Logger kactor does not exist!".into())
        );
        assert_eq!(
            e(&[op("root", AlterConfigOp::Delete, None)]),
            (
                INVALID_REQUEST,
                "Removing the log level of the root logger is not allowed".into()
            )
        );
        assert_eq!(
            e(&[op("root", AlterConfigOp::Append, Some("INFO"))]).1,
            "APPEND operation is not allowed for the BROKER_LOGGER resource"
        );
        assert_eq!(
            e(&[("root".into(), Err(7), Some("INFO".into()))]).1,
            "Unknown operation type 7 is not allowed for the BROKER_LOGGER resource"
        );
    }

    #[test]
    fn alter_reloads_the_filter_unless_validating() {
        let installed = Arc::new(Mutex::new(Vec::new()));
        let sink = installed.clone();
        let loggers = BrokerLoggers::new(
            LoggerLevels::from_directives("info", KNOWN),
            Box::new(move |d| {
                sink.lock().unwrap().push(d.to_string());
                Ok(())
            }),
        );
        loggers
            .seen_targets()
            .lock()
            .unwrap()
            .insert("h2::codec".into());
        let set = [op("h2.codec", AlterConfigOp::Set, Some("TRACE"))];
        loggers.alter(&set, true).unwrap();
        assert!(installed.lock().unwrap().is_empty());
        loggers.alter(&set, false).unwrap();
        assert_eq!(*installed.lock().unwrap(), vec!["info,h2::codec=trace"]);
        assert_eq!(
            loggers.describe(Some(&["h2.codec".into()])),
            vec![("h2.codec".to_string(), "TRACE")]
        );
    }
}
