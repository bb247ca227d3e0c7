//! Checks of dynamic broker config values (`kafka-configs --entity-type brokers`), as Kafka's
//! `DynamicBrokerConfig` makes them before it stores anything: each value against its key's
//! type and bounds, the thread pools' "at most double, at least half" rule, and the format of
//! `max.connections.per.ip.overrides`. Kafka answers all of these INVALID_REQUEST with the
//! `ConfigException` text; facts read off Apache Kafka 4.4.0.

use super::errors::*;
use super::topic_configs;
use super::QuorumControllerCore;
use crate::metadata::core::ConfigResource;
use kactor_protocol::errors::*;

/// Thread pools Kafka resizes at run time (`DynamicThreadPool` and the network processors),
/// which it refuses to shrink below half or grow past double the current size in one step.
const THREAD_POOLS: [&str; 5] = [
    "num.io.threads",
    "num.network.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "background.threads",
];

/// The log cleaner's pool: the same rule, in the cleaner's own words.
const CLEANER_THREADS: &str = "log.cleaner.threads";

/// How Kafka wraps a reconfiguration's `ConfigException` in the response.
fn invalid_dynamic(message: String) -> ApiError {
    ApiError::new(
        INVALID_REQUEST,
        format!(
            "Invalid value org.apache.kafka.common.config.ConfigException: {message} for configuration Invalid dynamic configuration"
        ),
    )
}

impl QuorumControllerCore {
    /// Checks `value` for broker config `name` set on `resource` (a broker id or the cluster
    /// default).
    pub(super) fn check_broker_value(
        &self,
        resource: &ConfigResource,
        name: &str,
        value: &str,
    ) -> Result<(), ApiError> {
        let invalid = |m: String| ApiError::new(INVALID_REQUEST, m);
        if let Some((def, _)) = topic_configs::topic_config_for_broker_synonym(name) {
            topic_configs::validate_value(name, def.kind, value).map_err(invalid)?;
        }
        if let Some(kind) = self.cfg.broker_value_kinds.get(name) {
            topic_configs::validate_value(name, *kind, value).map_err(invalid)?;
        }
        if topic_configs::BROKER_QUOTA_CONFIGS.contains(&name) {
            topic_configs::validate_value(name, topic_configs::BROKER_QUOTA_CONFIG_TYPE, value)
                .map_err(invalid)?;
        }
        if name == "max.connections.per.ip.overrides" {
            check_connection_overrides(value).map_err(invalid)?;
        }
        let is_pool = THREAD_POOLS.contains(&name);
        if is_pool || name == CLEANER_THREADS {
            let (Ok(new), Some(old)) = (
                value.trim().parse::<i64>(),
                self.current_broker_int(resource, name),
            ) else {
                return Ok(());
            };
            // Java's integer halving: 3 may go down to 1.
            let message = if new < old / 2 {
                Some(if is_pool {
                    format!("Dynamic thread count update validation failed for {name}={new}, value should be at least half the current value {old}")
                } else {
                    format!("Log cleaner threads cannot be reduced to less than half the current value {old}")
                })
            } else if new > old * 2 {
                Some(if is_pool {
                    format!("Dynamic thread count update validation failed for {name}={new}, value should not be greater than double the current value {old}")
                } else {
                    format!("Log cleaner threads cannot be increased to more than double the current value {old}")
                })
            } else {
                None
            };
            if let Some(m) = message {
                return Err(invalid_dynamic(m));
            }
        }
        Ok(())
    }

    /// A broker config's current value on the broker `resource` names (this node for the
    /// cluster default): its own dynamic value, else the cluster default's, else the value it
    /// started with.
    fn current_broker_int(&self, resource: &ConfigResource, name: &str) -> Option<i64> {
        let own = if resource.name.is_empty() {
            self.cfg.node_id.to_string()
        } else {
            resource.name.clone()
        };
        // Looked up in place: `config_overrides` would copy each resource's whole map.
        let dynamic = |broker: &str| {
            self.image
                .configs
                .get(&ConfigResource::broker(broker))
                .and_then(|values| values.get(name))
        };
        dynamic(&own)
            .or_else(|| dynamic(""))
            .or_else(|| self.cfg.broker_values.get(name))?
            .trim()
            .parse()
            .ok()
    }
}

/// `host:count,host:count`, as Kafka parses it (its messages are those of the Java parse
/// failures).
fn check_connection_overrides(value: &str) -> Result<(), String> {
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((_, count)) = entry.rsplit_once(':') else {
            return Err(format!(
                "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length {}",
                entry.len()
            ));
        };
        if count.trim().parse::<i32>().is_err() {
            return Err(format!("For input string: \"{count}\""));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_overrides_parse_as_in_kafka() {
        assert!(check_connection_overrides("h:5, 10.0.0.1:7").is_ok());
        assert_eq!(
            check_connection_overrides("bad"),
            Err("Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 3".into())
        );
        assert_eq!(
            check_connection_overrides("a:1,b:x"),
            Err("For input string: \"x\"".into())
        );
    }
}
